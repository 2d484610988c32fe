//! Release notifications: how waiters learn that a busy resource was freed without polling.
//!
//! Every kind's release script publishes on the resource's channel
//! (`redlock:released:{…}:<resource>`, in the resource's hash slot: see `wire::channel`) on each
//! node where it let the key go (one message per resource for a multi-resource lock; a
//! reentrant lock only when its last hold goes), with a nonce unique to that release. A client subscribes through one dedicated connection per node,
//! created on the first wait and shared by all of its waiters; each resource is subscribed once,
//! however many threads wait on it (a reference count), and unsubscribed a second
//! ([`LINGER`]) after its last waiter left, whether it got the lock or gave up, unless another
//! waits on it by then.
//!
//! Why a thread per node with a blocking connection: redis-rs's synchronous `PubSub` cannot be
//! woken while it reads, so each subscriber thread reads with a short timeout and, between
//! reads, applies the (un)subscriptions its waiters asked for. While nothing is subscribed it
//! parks on its request channel instead, so an idle client costs nothing.
//!
//! A notification only wakes waiters early: a message can be lost (a node down, a connection
//! rebuilt, a key that expired instead of being released), so every wait also has a timeout, the
//! jittered exponential backoff in `client.rs`.
//!
//! Waiters of an exclusive kind on one key queue across processes by default (`queue.rs`): this
//! module carries that queue's news (`turn:` and `watch:` messages on the same channel) to the
//! waiters it names ([`News`]). With `fair(false)` they queue here instead, in this client's
//! arrival order: only the one at the front listens for releases and tries; the others wait
//! for their turn and send nothing.
//! When the front leaves, the next becomes the front: told that the resource is held until a
//! known time if the one before got the lock, else to try at once (it gave up, and may have taken
//! a release notification with it). A release then costs the nodes one attempt per client, not one
//! per waiting thread.

pub(crate) mod queue;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select, Sender, TryRecvError};

use crate::cancel::Cancel;
use crate::notify::queue::{QueueNews, queue_news};
use crate::sync::relock;
use crate::topology::{Verdict, Watch};
use crate::wire::{channel, released_key};

/// How often a waiter for its subscriptions to become active looks at its cancel.
const CANCEL_SLICE: Duration = Duration::from_millis(1);

/// How long a client remembers that it found others queued on a resource, and on how many
/// resources at most.
const QUEUE_MEMORY: Duration = Duration::from_secs(10);
const QUEUES_REMEMBERED: usize = 1024;

/// How long waiters keep no queue on a node after a queue command to it failed.
const QUEUE_PAUSE: Duration = Duration::from_secs(5);

/// How long a subscriber reads before it looks at new (un)subscriptions.
const READ_SLICE: Duration = Duration::from_millis(20);
/// How long a subscription stays on a connection after the client's last waiter on its resource
/// left: a client whose waiters come back within it (a worker that locks the same resource in a
/// loop) sends no `UNSUBSCRIBE` and `SUBSCRIBE` to every node in between, and its next waiter
/// listens at once.
const LINGER: Duration = Duration::from_secs(1);
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const STACK: usize = 256 * 1024;

/// What waiters wait on for one resource.
struct Slot {
    state: Mutex<SlotState>,
    /// Holds one message per release that no waiter has acted on yet (at most one: a second
    /// release before any waiter woke adds nothing); one waiter takes it and goes. A channel
    /// rather than a condition variable, so that a waiter can select on it beside its cancel.
    released_tx: Sender<()>,
    released: Receiver<()>,
    /// Signalled when a node's subscription becomes active.
    ready: Condvar,
}

struct SlotState {
    /// Recent releases (nonce, how many nodes announced it so far, and which: bit `i` for node
    /// `i` < 64): each node announces the same release, which should wake one waiter once, not
    /// N times.
    recent: VecDeque<(String, usize, u64)>,
    /// The last release a quorum announced: the one a message in `released`, if there is one,
    /// stands for (a later release finds it full and adds nothing but this).
    pending: Option<String>,
    /// Nodes on which the subscription is active.
    subscribed: usize,
    /// Releases announced by a quorum so far: a shared waiter (a reader) wakes when it moved.
    epoch: u64,
    /// Replaced at each such release: dropping the sender wakes every shared waiter selecting
    /// on a clone of the receiver (a disconnect is seen by all, a message by one).
    all_tx: Sender<()>,
    all_rx: Receiver<()>,
    /// Queued exclusive waiters, in arrival order (see the module's doc): each one's place and
    /// where to tell it that it is at the front.
    queue: VecDeque<(u64, Sender<Turn>)>,
    /// The queue across processes (`queue.rs`): the head the last turn message named, and this
    /// client's waiters in it, by id, with where to tell each one the news about it and whether
    /// it joined.
    fair_head: Option<String>,
    fair: HashMap<Arc<str>, (Sender<News>, bool)>,
    /// Since when a release announced by a quorum has gone without a turn message of the queue
    /// (the head's `LEAVE` once it got the lock): a queue silent for [`Registry::silence`]
    /// (its node hung, say) is read again by this client's waiters behind the head (see
    /// [`Registry::check_silence`]).
    silent_since: Option<Instant>,
}

impl Default for SlotState {
    fn default() -> Self {
        let (all_tx, all_rx) = crossbeam_channel::bounded(0);
        SlotState {
            recent: VecDeque::new(),
            pending: None,
            subscribed: 0,
            epoch: 0,
            all_tx,
            all_rx,
            queue: VecDeque::new(),
            fair_head: None,
            fair: HashMap::new(),
            silent_since: None,
        }
    }
}

impl Slot {
    fn new() -> Slot {
        let (released_tx, released) = crossbeam_channel::bounded(1);
        Slot {
            state: Mutex::new(SlotState::default()),
            released_tx,
            released,
            ready: Condvar::new(),
        }
    }
}

/// Places in the waiters' queues.
static PLACES: AtomicU64 = AtomicU64::new(0);

/// What a queued waiter learns when its turn comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Try now: it was already at the front, or the one before gave up.
    Now,
    /// The one before got the lock, whose keys live until then at most: wait for its release
    /// (or that time) before trying.
    HeldUntil(Instant),
    /// The wait's deadline passed first.
    TimedOut,
    Cancelled,
}

/// What a waiter in the queue across processes (`queue.rs`) learns from its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum News {
    /// It is at the head: the one before got the lock for at most `held` (wait for its release
    /// until then), or gave up (`None`: try now); `watched`: a waiter is behind it.
    Head {
        held: Option<Duration>,
        watched: bool,
    },
    /// It is at the head and a waiter came right behind it: renew its place from now on.
    Watched,
    /// It is right behind the head, which it should watch.
    Next,
    /// A subscription was rebuilt, or the queue went silent after a release, so news may have
    /// been lost: read the queue again.
    Recheck,
}

/// How many recent release tokens a slot remembers.
const RECENT: usize = 8;

/// Per resource: how many waiters, and what they wait on.
type Slots = HashMap<Arc<str>, (usize, Arc<Slot>)>;

/// Waiters per resource.
struct Registry {
    slots: Mutex<Slots>,
    /// Announcements of one release that wake a waiter: a quorum of the nodes, by when the
    /// resource is free on enough nodes for an attempt to succeed. Waking on the first node's
    /// message would send the attempt to nodes that have not applied the release yet.
    quorum: usize,
    /// Per node, whether its subscriber is failing (its connection broke or could not be made)
    /// and since when it has been waiting for the node (a connect or a subscription not yet
    /// confirmed; nanoseconds after `origin`, plus one; 0: not waiting). A new waiter does not
    /// wait for such a node to subscribe: with one node hung, each waiter would otherwise spend
    /// `node_timeout` before it listens (see [`Registry::live_nodes`]).
    failing: Vec<AtomicBool>,
    waiting_since: Vec<AtomicU64>,
    /// Per node, until when (nanoseconds after `origin`) waiters keep no queue there: a queue
    /// command to it failed (see `queue.rs`).
    no_queue_until: Vec<AtomicU64>,
    /// How long the queue may stay silent after a release (see [`SlotState::silent_since`]).
    silence: Duration,
    /// When the earliest silence may be due (nanoseconds after `origin`; `u64::MAX`: none), so
    /// that the subscribers' look at it costs one atomic load while the queues speak.
    silence_due: AtomicU64,
    origin: Instant,
}

impl Registry {
    fn new(nodes: usize, silence: Duration) -> Registry {
        Registry {
            slots: Mutex::new(Slots::new()),
            quorum: crate::rules::quorum::quorum(nodes),
            failing: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            waiting_since: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            no_queue_until: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            silence,
            silence_due: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
        }
    }

    /// The nodes a new waiter should expect to subscribe within `patience`: those whose
    /// subscriber is not failing and has not been waiting for its node for `patience` already.
    fn live_nodes(&self, patience: Duration) -> usize {
        (0..self.failing.len())
            .filter(|&i| self.live(i, patience))
            .count()
    }

    /// Whether node `i`'s subscriber is neither failing nor waiting for its node for
    /// `patience` already (see [`live_nodes`](Registry::live_nodes)).
    fn live(&self, i: usize, patience: Duration) -> bool {
        let now = self.origin.elapsed().as_nanos() as u64 + 1;
        let since = self.waiting_since[i].load(Ordering::Relaxed);
        !self.failing[i].load(Ordering::Relaxed)
            && (since == 0 || now.saturating_sub(since) < patience.as_nanos() as u64)
    }

    /// Node `i`'s subscriber starts (`true`) or stops waiting for its node.
    fn waiting_for(&self, i: usize, waiting: bool) {
        let since = if waiting {
            self.origin.elapsed().as_nanos() as u64 + 1
        } else {
            0
        };
        self.waiting_since[i].store(since, Ordering::Relaxed);
    }

    fn since_origin(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// Tells the waiters behind the head of each queue that went silent for `silence` after a
    /// release to read their place again. One look per client, from its subscriber threads
    /// (every `READ_SLICE` at most), instead of every waiter behind the head waking at every
    /// release to watch for the turn message that should follow: that herd of wake-ups, 49
    /// threads per release with 50 waiters, cost the head about 0.4 ms of its wake-up on two
    /// cores.
    fn check_silence(&self) {
        let now = Instant::now();
        if self.since_origin(now) < self.silence_due.load(Ordering::Relaxed) {
            return;
        }
        self.silence_due.store(u64::MAX, Ordering::Relaxed);
        let slots: Vec<Arc<Slot>> = relock(&self.slots)
            .values()
            .map(|(_, s)| Arc::clone(s))
            .collect();
        for slot in slots {
            let mut state = relock(&slot.state);
            let Some(since) = state.silent_since else {
                continue;
            };
            let due = since + self.silence;
            if due > now {
                // Put back: a release between the store above and this look set it.
                self.silence_due
                    .fetch_min(self.since_origin(due), Ordering::Relaxed);
                continue;
            }
            state.silent_since = None;
            let head = state.fair_head.as_deref();
            for (id, (tx, joined)) in &state.fair {
                if *joined && Some(&**id) != head {
                    let _ = tx.try_send(News::Recheck);
                }
            }
        }
    }

    fn slot(&self, resource: &str) -> Option<Arc<Slot>> {
        relock(&self.slots)
            .get(resource)
            .map(|(_, s)| Arc::clone(s))
    }

    fn subscribed(&self, resource: &str) {
        if let Some(slot) = self.slot(resource) {
            let mut state = relock(&slot.state);
            state.subscribed += 1;
            for (tx, _) in state.fair.values() {
                let _ = tx.try_send(News::Recheck);
            }
            drop(state);
            slot.ready.notify_all();
        }
    }

    /// News of `resource`'s queue (see `queue.rs`).
    fn queue(&self, node: usize, resource: &str, news: QueueNews) {
        let Some(slot) = self.slot(resource) else {
            return;
        };
        let mut state = relock(&slot.state);
        let news = match news {
            QueueNews::Watch(head) => {
                if let Some((tx, _)) = state.fair.get(head.as_str()) {
                    let _ = tx.try_send(News::Watched);
                }
                return;
            }
            QueueNews::Turn(news) => news,
        };
        let held = (news.held_ms > 0).then(|| Duration::from_millis(news.held_ms));
        let ours = news
            .head
            .as_deref()
            .is_some_and(|h| state.fair.contains_key(h));
        if ours && held.is_some() {
            // A release kept for no waiter of this client (its waiters were all behind others
            // when it came) would wake the new head only to be refused by the lock the one
            // before just took. The kept message stands for the last release a quorum announced
            // (`pending`); it is stale if the queue node announced that one before this turn
            // message: that node runs the `LEAVE` before the lock's release (both come from the
            // new holder's one connection to it), and this subscriber hears its messages in
            // that order. The release of the lock just taken, heard from other nodes first,
            // stays; so does a release this client no longer remembers.
            let bit = 1u64.checked_shl(node as u32).unwrap_or(0);
            let stale = state.pending.as_ref().is_some_and(|p| {
                state
                    .recent
                    .iter()
                    .any(|(n, _, nodes)| n == p && nodes & bit != 0)
            });
            if stale {
                while slot.released.try_recv().is_ok() {}
                state.pending = None;
            }
        }
        if let Some((tx, _)) = news.head.as_deref().and_then(|h| state.fair.get(h)) {
            let watched = news.next.is_some();
            let _ = tx.try_send(News::Head { held, watched });
        }
        if let Some((tx, _)) = news.next.as_deref().and_then(|n| state.fair.get(n)) {
            let _ = tx.try_send(News::Next);
        }
        state.fair_head = news.head;
        state.silent_since = None;
    }

    /// A node's subscription to `resource` ended (unsubscribed, or its connection broke).
    fn unsubscribed(&self, resource: &str) {
        if let Some(slot) = self.slot(resource) {
            let mut state = relock(&slot.state);
            state.subscribed = state.subscribed.saturating_sub(1);
        }
    }

    /// A release of `resource` with `nonce` was announced by one node.
    fn released(&self, node: usize, resource: &str, nonce: String) {
        let Some(slot) = self.slot(resource) else {
            return;
        };
        {
            let mut state = relock(&slot.state);
            let bit = 1u64.checked_shl(node as u32).unwrap_or(0);
            let count = match state.recent.iter_mut().find(|(t, _, _)| *t == nonce) {
                Some((_, count, nodes)) => {
                    *count += 1;
                    *nodes |= bit;
                    *count
                }
                None => {
                    if state.recent.len() == RECENT {
                        state.recent.pop_front();
                    }
                    state.recent.push_back((nonce.clone(), 1, bit));
                    1
                }
            };
            if count != self.quorum {
                return;
            }
            // Every shared waiter retries: all of them can get in at once.
            state.epoch += 1;
            let (all_tx, all_rx) = crossbeam_channel::bounded(0);
            drop(std::mem::replace(&mut state.all_tx, all_tx));
            state.all_rx = all_rx;
            if state.silent_since.is_none() && state.fair.values().any(|(_, joined)| *joined) {
                let now = Instant::now();
                state.silent_since = Some(now);
                self.silence_due
                    .fetch_min(self.since_origin(now + self.silence), Ordering::Relaxed);
            }
            // One exclusive waiter of this client retries; should it lose to another client,
            // the resource is held again and its next release wakes the next waiter. Waking all
            // of them would make every release a burst of doomed attempts. (Full: a wake-up is
            // already pending, and from now on stands for this release, the last a quorum
            // announced.)
            let _ = slot.released_tx.try_send(());
            state.pending = Some(nonce);
        }
    }
}

enum Request {
    Subscribe(Arc<str>),
    Unsubscribe(Arc<str>),
}

/// The client's subscriber threads, one per node.
pub(crate) struct Notifier {
    registry: Arc<Registry>,
    nodes: Vec<Sender<Request>>,
    threads: Vec<JoinHandle<()>>,
    exited: Receiver<()>,
    /// Resources on which this client's waiters lately found others queued, and when: a
    /// newcomer there joins the queue before it tries, even while no waiter of this client is
    /// left to hear the queue's news (see [`queue_known`](Notifier::queue_known)).
    queues_seen: Mutex<HashMap<Arc<str>, Instant>>,
}

impl Notifier {
    pub(crate) fn start(
        clients: &[crate::topology::Target],
        watches: Vec<Option<Arc<Watch>>>,
        connect_timeout: Duration,
        io_timeout: Duration,
        silence: Duration,
    ) -> std::io::Result<Notifier> {
        let registry = Arc::new(Registry::new(clients.len(), silence));
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        let mut notifier = Notifier {
            registry,
            nodes: Vec::new(),
            threads: Vec::new(),
            exited,
            queues_seen: Mutex::new(HashMap::new()),
        };
        for (i, (client, watch)) in clients.iter().zip(watches).enumerate() {
            let (tx, rx) = crossbeam_channel::unbounded();
            let sub = Subscriber {
                index: i,
                client: client.clone(),
                watch,
                master: None,
                watch_seen: 0,
                requests: rx,
                registry: Arc::clone(&notifier.registry),
                wanted: HashSet::new(),
                active: HashSet::new(),
                lingering: HashMap::new(),
                connect_timeout,
                io_timeout,
                _exited: exited_tx.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("redlock-notify-{i}"))
                .stack_size(STACK)
                .spawn(move || sub.run());
            match thread {
                Ok(t) => {
                    notifier.nodes.push(tx);
                    notifier.threads.push(t);
                }
                Err(e) => {
                    notifier.stop(io_timeout);
                    return Err(e);
                }
            }
        }
        Ok(notifier)
    }

    /// Whether this client knows of waiters queued across processes on `resource`: some of its
    /// own, or a head named by the last turn message.
    pub(crate) fn queue_known(&self, resource: &str) -> bool {
        let now = Instant::now();
        let seen = relock(&self.queues_seen)
            .get(resource)
            .is_some_and(|&at| now.saturating_duration_since(at) < QUEUE_MEMORY);
        seen || self.registry.slot(resource).is_some_and(|slot| {
            let state = relock(&slot.state);
            state.fair_head.is_some() || !state.fair.is_empty()
        })
    }

    /// A waiter of this client found others in `resource`'s queue (see
    /// [`queue_known`](Notifier::queue_known)).
    pub(crate) fn queue_seen(&self, resource: &Arc<str>) {
        let now = Instant::now();
        let mut seen = relock(&self.queues_seen);
        if seen.len() >= QUEUES_REMEMBERED && !seen.contains_key(resource) {
            seen.retain(|_, at| now.saturating_duration_since(*at) < QUEUE_MEMORY);
            if seen.len() >= QUEUES_REMEMBERED {
                return;
            }
        }
        seen.insert(Arc::clone(resource), now);
    }

    /// Whether node `i`'s subscriber is neither failing nor has waited for its node for
    /// `patience` already: a queue on a node that is not would cost each waiter `patience`.
    pub(crate) fn node_live(&self, i: usize, patience: Duration) -> bool {
        let now = self.registry.origin.elapsed().as_nanos() as u64;
        self.registry.live(i, patience)
            && self.registry.no_queue_until[i].load(Ordering::Relaxed) <= now
    }

    /// A queue command to node `i` failed: keep no queue there for `QUEUE_PAUSE`, so that
    /// the waiters of that time do not each wait for it.
    pub(crate) fn queue_failed(&self, i: usize) {
        let until = self.registry.origin.elapsed() + QUEUE_PAUSE;
        self.registry.no_queue_until[i].store(until.as_nanos() as u64, Ordering::Relaxed);
    }

    /// How many waiters are queued on `resource` (see the module's doc), in this client's
    /// queue or in the one across processes.
    pub(crate) fn queued(&self, resource: &str) -> usize {
        self.registry.slot(resource).map_or(0, |slot| {
            let state = relock(&slot.state);
            state.queue.len() + state.fair.values().filter(|(_, joined)| *joined).count()
        })
    }

    /// Registers a waiter on `resources`, subscribing each on every node if it is the first
    /// waiter there, and waits up to `ready_within` for the subscriptions to be active, so that
    /// a release right after this returns is not missed: on every node but those whose
    /// subscriber is failing or has waited for its node that long already (down or hung: they
    /// would only make each waiter wait `ready_within`). A `shared` waiter wakes on every
    /// release (see [`Subscription::wait`]). A waiter that `queue`s on its one resource takes
    /// the last place in its queue (see [`Subscription::turn`]).
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        resources: &[Arc<str>],
        ready_within: Duration,
        shared: bool,
        queue: bool,
        cancel: Option<&Cancel>,
    ) -> Subscription {
        let mut slots = Vec::with_capacity(resources.len());
        for resource in resources {
            let (slot, first) = {
                let mut registry = relock(&self.registry.slots);
                let entry = registry
                    .entry(Arc::clone(resource))
                    .or_insert_with(|| (0, Arc::new(Slot::new())));
                entry.0 += 1;
                (Arc::clone(&entry.1), entry.0 == 1)
            };
            if first {
                for node in &self.nodes {
                    let _ = node.send(Request::Subscribe(Arc::clone(resource)));
                }
            }
            slots.push((Arc::clone(resource), slot));
        }
        let place = match &slots[..] {
            [(_, slot)] if queue && !shared => {
                let (tx, turn) = crossbeam_channel::bounded(1);
                let id = PLACES.fetch_add(1, Ordering::Relaxed);
                let mut state = relock(&slot.state);
                let front = state.queue.is_empty();
                state.queue.push_back((id, tx));
                Some(Place {
                    id,
                    turn,
                    front: AtomicBool::new(front),
                    held_until: Mutex::new(None),
                })
            }
            _ => None,
        };
        let deadline = Instant::now() + ready_within;
        for (_, slot) in &slots {
            let mut state = relock(&slot.state);
            while state.subscribed < self.registry.live_nodes(ready_within)
                && !cancel.is_some_and(Cancel::is_cancelled)
            {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                // In short slices, so that a cancel is seen within one.
                state = slot
                    .ready
                    .wait_timeout(state, left.min(CANCEL_SLICE))
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        }
        let seen = slots.iter().map(|(_, s)| relock(&s.state).epoch).collect();
        Subscription {
            notifier: Arc::clone(self),
            slots,
            shared: shared.then(|| Mutex::new(seen)),
            place,
            fair: None,
        }
    }

    /// Ends the subscriber threads, waiting for them up to `limit`.
    pub(crate) fn stop(&mut self, limit: Duration) {
        self.nodes.clear();
        let (_, never) = crossbeam_channel::bounded(0);
        let exited = std::mem::replace(&mut self.exited, never);
        if let Err(RecvTimeoutError::Disconnected) = exited.recv_timeout(limit) {
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
        self.threads.clear();
    }
}

/// One waiter's registration; unregisters (and unsubscribes, if it was the last) on drop.
pub(crate) struct Subscription {
    notifier: Arc<Notifier>,
    slots: Vec<(Arc<str>, Arc<Slot>)>,
    /// A shared waiter's: per slot, the releases it has seen (the epoch when it subscribed or
    /// last woke). Any release after that wakes it, even one announced while it was trying.
    shared: Option<Mutex<Vec<u64>>>,
    /// A queued waiter's place in its resource's queue.
    place: Option<Place>,
    /// Its id in the queue across processes, once [`enlist`](Subscription::enlist)ed.
    fair: Option<Arc<str>>,
}

struct Place {
    id: u64,
    /// Where the one before says that this waiter is at the front.
    turn: Receiver<Turn>,
    front: AtomicBool,
    /// Set once this waiter got the lock: until when its keys live, for the next one.
    held_until: Mutex<Option<Instant>>,
}

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A release of one of the resources was announced by a quorum.
    Released,
    TimedOut,
    Cancelled,
}

impl Subscription {
    /// Whether a release of every resource would be heard: each one's subscription is active on
    /// at least a quorum of nodes (a release wakes waiters once a quorum announced it).
    pub(crate) fn healthy(&self) -> bool {
        let quorum = self.notifier.registry.quorum;
        self.slots
            .iter()
            .all(|(_, slot)| relock(&slot.state).subscribed >= quorum)
    }

    /// Waits until this waiter is at the front of its queue (at once if it is, or did not
    /// queue), `deadline` passes or `cancel` fires.
    pub(crate) fn turn(&self, deadline: Instant, cancel: Option<&Cancel>) -> Turn {
        let Some(place) = &self.place else {
            return Turn::Now;
        };
        if place.front.load(Ordering::Relaxed) {
            return Turn::Now;
        }
        let mut select = Select::new();
        select.recv(&place.turn);
        let fired = cancel.map(Cancel::fired);
        if let Some(rx) = fired {
            select.recv(rx);
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        let Ok(op) = select.select_timeout(timeout) else {
            return Turn::TimedOut;
        };
        if op.index() == 0 {
            // Sent once, by whoever made this waiter the front; it cannot be disconnected
            // while this waiter is queued.
            let turn = op.recv(&place.turn).unwrap_or(Turn::Now);
            place.front.store(true, Ordering::Relaxed);
            return turn;
        }
        if let Some(rx) = fired {
            let _ = op.recv(rx);
        }
        Turn::Cancelled
    }

    /// Registers this waiter (of one resource) as `id` in the queue across processes; the news
    /// about it arrives on the receiver.
    pub(crate) fn enlist(&mut self, id: Arc<str>) -> Receiver<News> {
        // Room for a `Recheck` from every node's rebuilt subscription besides the news that
        // matters (a full channel drops news; the waiter's own looks make up for it).
        let (tx, rx) = crossbeam_channel::bounded(16);
        if let [(_, slot)] = &self.slots[..] {
            relock(&slot.state)
                .fair
                .insert(Arc::clone(&id), (tx, false));
            self.fair = Some(id);
        }
        rx
    }

    /// Takes this waiter out of the queue across processes' news (it goes on without it).
    pub(crate) fn unenlist(&mut self) {
        if let (Some(id), [(_, slot)]) = (self.fair.take(), &self.slots[..]) {
            relock(&slot.state).fair.remove(&id);
        }
    }

    /// Records that this enlisted waiter's `JOIN` was answered (for [`Notifier::queued`]).
    pub(crate) fn joined(&self) {
        if let (Some(id), [(_, slot)]) = (&self.fair, &self.slots[..])
            && let Some((_, joined)) = relock(&slot.state).fair.get_mut(id)
        {
            *joined = true;
        }
    }

    /// Whether this waiter is at the front of its queue, or did not queue.
    pub(crate) fn at_front(&self) -> bool {
        self.place
            .as_ref()
            .is_none_or(|p| p.front.load(Ordering::Relaxed))
    }

    /// Records that this waiter got the lock, whose keys live until `keys_until` at most: the
    /// next in its queue waits for that lock's release instead of trying at once.
    pub(crate) fn acquired(&self, keys_until: Instant) {
        if let Some(place) = &self.place {
            *relock(&place.held_until) = Some(keys_until);
        }
    }

    /// Waits until a release is announced, `timeout` passes or `cancel` fires. A release
    /// announced while no waiter was waiting is kept for the next one, so a waiter that
    /// subscribed, tried and was refused does not miss a release that came meanwhile.
    ///
    /// A shared waiter (a reader) does not take that one message: it wakes on every release
    /// announced since it subscribed or last woke, along with every other shared waiter.
    pub(crate) fn wait(&self, timeout: Duration, cancel: Option<&Cancel>) -> Wake {
        if let Some(seen) = &self.shared {
            return self.wait_shared(seen, timeout, cancel);
        }
        // The slots' senders live as long as the slots, so a message is a release.
        let receivers: Vec<&Receiver<()>> = self.slots.iter().map(|(_, s)| &s.released).collect();
        select(&receivers, timeout, cancel)
    }

    /// [`wait`](Subscription::wait) that also ends when `news` has something: `Err` with it.
    pub(crate) fn wait_news(
        &self,
        news: &Receiver<News>,
        timeout: Duration,
        cancel: Option<&Cancel>,
    ) -> std::result::Result<Wake, News> {
        let mut select = Select::new();
        for (_, slot) in &self.slots {
            select.recv(&slot.released);
        }
        let n = self.slots.len();
        select.recv(news);
        let fired = cancel.map(Cancel::fired);
        if let Some(rx) = fired {
            select.recv(rx);
        }
        let Ok(op) = select.select_timeout(timeout) else {
            return Ok(Wake::TimedOut);
        };
        let i = op.index();
        if i < n {
            let _ = op.recv(&self.slots[i].1.released);
            return Ok(Wake::Released);
        }
        if i == n {
            return match op.recv(news) {
                Ok(heard) => Err(heard),
                // The sender lives as long as this subscription is enlisted.
                Err(_) => Ok(Wake::TimedOut),
            };
        }
        if let Some(rx) = fired {
            let _ = op.recv(rx);
        }
        Ok(Wake::Cancelled)
    }

    fn wait_shared(
        &self,
        seen: &Mutex<Vec<u64>>,
        timeout: Duration,
        cancel: Option<&Cancel>,
    ) -> Wake {
        let mut seen = relock(seen);
        let mut receivers = Vec::with_capacity(self.slots.len());
        let mut moved = false;
        for ((_, slot), seen) in self.slots.iter().zip(seen.iter_mut()) {
            // Under the slot's lock: a release after this drops the sender of this receiver.
            let state = relock(&slot.state);
            if state.epoch != *seen {
                *seen = state.epoch;
                moved = true;
            }
            receivers.push(state.all_rx.clone());
        }
        if moved {
            return Wake::Released;
        }
        // A release drops the sender: the receiver disconnects.
        let receivers: Vec<&Receiver<()>> = receivers.iter().collect();
        let wake = select(&receivers, timeout, cancel);
        if wake != Wake::Released {
            return wake;
        }
        for ((_, slot), seen) in self.slots.iter().zip(seen.iter_mut()) {
            *seen = relock(&slot.state).epoch;
        }
        Wake::Released
    }
}

/// Waits until one of `receivers` is ready (a message or a disconnection: a release), `timeout`
/// passes or `cancel` fires, and takes what woke it.
fn select(receivers: &[&Receiver<()>], timeout: Duration, cancel: Option<&Cancel>) -> Wake {
    let mut select = Select::new();
    for rx in receivers {
        select.recv(rx);
    }
    let fired = cancel.map(Cancel::fired);
    if let Some(rx) = fired {
        select.recv(rx);
    }
    let Ok(op) = select.select_timeout(timeout) else {
        return Wake::TimedOut;
    };
    // The operation must be completed on the receiver it was selected for.
    match (receivers.get(op.index()), fired) {
        (Some(rx), _) => {
            let _ = op.recv(rx);
            Wake::Released
        }
        (None, Some(rx)) => {
            let _ = op.recv(rx);
            Wake::Cancelled
        }
        (None, None) => Wake::TimedOut,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let (Some(id), [(_, slot)]) = (&self.fair, &self.slots[..]) {
            relock(&slot.state).fair.remove(id);
        }
        if let (Some(place), [(_, slot)]) = (&self.place, &self.slots[..]) {
            let held_until = *relock(&place.held_until);
            let mut state = relock(&slot.state);
            let at = state.queue.iter().position(|(id, _)| *id == place.id);
            if let Some(at) = at {
                state.queue.remove(at);
                if at == 0
                    && let Some((_, next)) = state.queue.front()
                {
                    let _ = next.try_send(held_until.map_or(Turn::Now, Turn::HeldUntil));
                }
            }
            if held_until.is_some() {
                // A release announced before this waiter got the lock would wake the next one
                // only to be refused: while the lock is held, no one else can release it.
                while slot.released.try_recv().is_ok() {}
            }
        }
        for (resource, _) in &self.slots {
            let last = {
                let mut slots = relock(&self.notifier.registry.slots);
                let Some(entry) = slots.get_mut(resource) else {
                    continue;
                };
                entry.0 -= 1;
                let last = entry.0 == 0;
                if last {
                    slots.remove(resource);
                }
                last
            };
            if last {
                for node in &self.notifier.nodes {
                    let _ = node.send(Request::Unsubscribe(Arc::clone(resource)));
                }
            }
        }
    }
}

/// Whether `e` is a read cut short by a signal (`EINTR`). redis-rs 1.8 keeps its I/O error to
/// itself (`as_io_error` is private), so its text is read: the OS error number, 4 wherever
/// this builds.
fn interrupted(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.to_string().contains("(os error 4)")
}

/// One node's subscriber thread.
struct Subscriber {
    /// The node's index, in the registry's per-node state.
    index: usize,
    client: crate::topology::Target,
    /// A Sentinel node's watch (the node's, see `node.rs`): a connection to a master the
    /// sentinels no longer name is dropped, as the node's workers drop theirs, or the
    /// releases published on the new master would go unheard. The master of the current
    /// connection (`host:port`, config epoch), and the watch's generation compared with it.
    watch: Option<Arc<Watch>>,
    master: Option<(String, Option<u64>)>,
    watch_seen: u64,
    requests: Receiver<Request>,
    registry: Arc<Registry>,
    /// Resources subscribed (or to subscribe once connected).
    wanted: HashSet<Arc<str>>,
    /// Resources whose subscription is active on the current connection.
    active: HashSet<Arc<str>>,
    /// Resources no waiter wants any more, still subscribed on the current connection until
    /// then (see [`LINGER`]).
    lingering: HashMap<Arc<str>, Instant>,
    connect_timeout: Duration,
    io_timeout: Duration,
    _exited: Sender<()>,
}

/// Why a subscriber session ended.
enum End {
    /// Every requester is gone: the client was dropped.
    Closed,
    /// The connection failed; reconnect.
    Broken,
}

impl Subscriber {
    fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        loop {
            // Nothing to listen for: park until a waiter comes (or the client goes).
            while self.wanted.is_empty() {
                match self.requests.recv() {
                    Ok(r) => self.apply_offline(r),
                    Err(_) => return,
                }
            }
            self.registry.waiting_for(self.index, true);
            let connected = self.connect();
            self.registry.waiting_for(self.index, false);
            match connected {
                Ok(mut conn) => {
                    backoff = BACKOFF_MIN;
                    let end = self.session(&mut conn);
                    self.registry.waiting_for(self.index, false);
                    if let End::Closed = end {
                        return;
                    }
                    self.set_failing(true);
                    // Until resubscribed, releases on this node go unheard.
                    for res in std::mem::take(&mut self.active) {
                        self.registry.unsubscribed(&res);
                    }
                }
                Err(_) => {
                    self.set_failing(true);
                    // Keep up with (un)subscriptions while the node is down.
                    let until = Instant::now() + backoff;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    loop {
                        match self.requests.recv_deadline(until) {
                            Ok(r) => self.apply_offline(r),
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                }
            }
        }
    }

    fn set_failing(&self, failing: bool) {
        self.registry.failing[self.index].store(failing, Ordering::Relaxed);
    }

    /// (Un)subscribes on the connection, telling the registry it waits for the node meanwhile.
    fn subscribe(&self, pubsub: &mut redis::PubSub<'_>, res: &str, on: bool) -> bool {
        self.registry.waiting_for(self.index, true);
        let ok = if on {
            pubsub.subscribe(channel(res)).is_ok()
        } else {
            pubsub.unsubscribe(channel(res)).is_ok()
        };
        self.registry.waiting_for(self.index, false);
        ok
    }

    fn apply_offline(&mut self, r: Request) {
        match r {
            Request::Subscribe(res) => {
                self.wanted.insert(res);
            }
            Request::Unsubscribe(res) => {
                self.wanted.remove(&res);
            }
        }
    }

    /// Applies one request on a live connection; false if the connection failed.
    fn apply(&mut self, pubsub: &mut redis::PubSub<'_>, r: Request) -> bool {
        match r {
            Request::Subscribe(res) => {
                let ok =
                    self.lingering.remove(&res).is_some() || self.subscribe(pubsub, &res, true);
                if ok && self.active.insert(Arc::clone(&res)) {
                    self.registry.subscribed(&res);
                }
                self.wanted.insert(res);
                ok
            }
            Request::Unsubscribe(res) => {
                self.wanted.remove(&res);
                if self.active.remove(&res) {
                    self.registry.unsubscribed(&res);
                }
                self.lingering.insert(res, Instant::now() + LINGER);
                true
            }
        }
    }

    /// Unsubscribes the lingering resources whose time is up; false if the connection failed.
    fn end_lingering(&mut self, pubsub: &mut redis::PubSub<'_>) -> bool {
        if self.lingering.is_empty() {
            return true;
        }
        let now = Instant::now();
        let due: Vec<Arc<str>> = self
            .lingering
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(res, _)| Arc::clone(res))
            .collect();
        for res in due {
            self.lingering.remove(&res);
            if !self.subscribe(pubsub, &res, false) {
                return false;
            }
        }
        true
    }

    fn connect(&mut self) -> redis::RedisResult<redis::Connection> {
        // A Sentinel node's subscriber resolves the master as its worker does, and like it
        // refuses one older than the master its watch heard of since (a sentinel that has not
        // switched yet was asked first).
        let generation = self.watch.as_ref().map_or(0, |w| w.generation());
        let connected = self.client.connect(self.connect_timeout, self.io_timeout)?;
        if let (Some(watch), Some(reached)) = (&self.watch, &connected.master)
            && let Some(named) = watch.named()
            && named.verdict(reached, connected.epoch) == Verdict::Newer
        {
            self.prefer(named.sentinel);
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the sentinels name a newer master",
            )));
        }
        self.master = connected.master.map(|m| (m, connected.epoch));
        self.watch_seen = generation;
        Ok(connected.conn)
    }

    /// Whether the watch has heard the sentinels name another master than the one this
    /// connection reached (see `node.rs`, `follow_the_sentinels`): then it is dropped, and the
    /// next connect resolves the master again.
    fn master_switched(&mut self) -> bool {
        let Some(watch) = &self.watch else {
            return false;
        };
        let Some((named, _)) = watch.switched(&mut self.watch_seen, self.master.as_ref()) else {
            return false;
        };
        self.prefer(named.sentinel);
        true
    }

    fn prefer(&self, sentinel: usize) {
        if let crate::topology::Target::Sentinel(s) = &self.client {
            s.prefer(sentinel);
        }
    }

    fn session(&mut self, conn: &mut redis::Connection) -> End {
        let mut pubsub = conn.as_pubsub();
        // A new connection has only what it subscribes now.
        self.lingering.clear();
        // Subscription replies must come within the I/O timeout; messages are read in slices.
        if pubsub.set_read_timeout(Some(self.io_timeout)).is_err() {
            return End::Broken;
        }
        for res in self.wanted.clone() {
            if !self.subscribe(&mut pubsub, &res, true) {
                return End::Broken;
            }
            if self.active.insert(Arc::clone(&res)) {
                self.registry.subscribed(&res);
            }
        }
        self.set_failing(false);
        loop {
            if self.master_switched() {
                return End::Broken;
            }
            loop {
                let request = match self.requests.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return End::Closed,
                };
                if !self.apply(&mut pubsub, request) {
                    return End::Broken;
                }
            }
            if !self.end_lingering(&mut pubsub) {
                return End::Broken;
            }
            // Lingering subscriptions are read on, so that their messages do not wait in the
            // socket for the next waiter.
            if self.wanted.is_empty() && self.lingering.is_empty() {
                // Park on the request channel; the idle connection stays for the next waiter.
                match self.requests.recv() {
                    Ok(r) => {
                        if self.master_switched() {
                            self.apply_offline(r);
                            return End::Broken;
                        }
                        if !self.apply(&mut pubsub, r) {
                            return End::Broken;
                        }
                        continue;
                    }
                    Err(_) => return End::Closed,
                }
            }
            if pubsub.set_read_timeout(Some(READ_SLICE)).is_err() {
                return End::Broken;
            }
            let message = pubsub.get_message();
            if pubsub.set_read_timeout(Some(self.io_timeout)).is_err() {
                return End::Broken;
            }
            match message {
                Ok(msg) => {
                    if let Some(res) = released_key(msg.get_channel_name()) {
                        let nonce: String = msg.get_payload().unwrap_or_default();
                        match queue_news(&nonce) {
                            Some(news) => self.registry.queue(self.index, res, news),
                            None => self.registry.released(self.index, res, nonce),
                        }
                    }
                }
                // A read cut short by a signal (`EINTR`: the process was stopped and continued,
                // say) left the connection as it was, as a timeout does: dropping it would lose
                // the releases already on their way (tests/fair.rs, the stopped waiter).
                Err(e) if e.is_timeout() || interrupted(&e) => {}
                Err(_) => return End::Broken,
            }
            self.registry.check_silence();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::queue::queue_news;

    /// The queue node of the resource "r" in these tests, of five nodes.
    const QUEUE_NODE: usize = 2;

    /// A client's registry of five nodes with a slot for "r", in whose queue across processes
    /// this client has the waiter "w" (joined); the news for "w" comes on the receiver.
    fn registry(silence: Duration) -> (Registry, Arc<Slot>, Receiver<News>) {
        let registry = Registry::new(5, silence);
        let slot = Arc::new(Slot::new());
        let (tx, news) = crossbeam_channel::bounded(16);
        relock(&slot.state).fair.insert(Arc::from("w"), (tx, true));
        relock(&registry.slots).insert(Arc::from("r"), (1, Arc::clone(&slot)));
        (registry, slot, news)
    }

    /// The release `nonce` of "r" announced by `nodes`, in that order.
    fn announce(registry: &Registry, nodes: &[usize], nonce: &str) {
        for &i in nodes {
            registry.released(i, "r", nonce.to_owned());
        }
    }

    /// The queue node's turn message naming `head`, after the one before got the lock for
    /// `held_ms` (0: it gave up).
    fn turn(registry: &Registry, head: &str, held_ms: u64) {
        let news = queue_news(&format!("turn:{head}::{held_ms}")).unwrap();
        registry.queue(QUEUE_NODE, "r", news);
    }

    #[test]
    fn a_release_heard_before_the_lock_was_taken_does_not_wake_the_new_head() {
        // Heard from a quorum while no waiter of this client was at the head, so kept; the
        // queue node announced it, so it came before the `LEAVE` of the one who took the lock.
        let (registry, slot, news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, QUEUE_NODE, 3, 4], "a");
        assert_eq!(slot.released.len(), 1);
        turn(&registry, "w", 10_000);
        assert_eq!(
            news.try_recv(),
            Ok(News::Head {
                held: Some(Duration::from_secs(10)),
                watched: false
            })
        );
        assert!(
            slot.released.is_empty(),
            "a stale release would wake the head"
        );
    }

    #[test]
    fn the_release_of_the_lock_just_taken_heard_before_the_turn_still_wakes_the_new_head() {
        // The lock was released at once: three other nodes announced that before the queue
        // node ran the `LEAVE`. Dropping it would leave the head waiting for the TTL.
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, 3], "b");
        turn(&registry, "w", 10_000);
        assert_eq!(slot.released.len(), 1);
        // The queue node's own announcement of it comes after the turn message.
        announce(&registry, &[QUEUE_NODE], "b");
        assert_eq!(slot.released.len(), 1);
    }

    #[test]
    fn a_kept_message_stands_for_every_release_after_it() {
        // An old release kept (the queue node announced it), then the release of the lock just
        // taken, from other nodes: the message, already there, stands for it now (dropping it
        // left a leader election's next candidate asleep for the TTL).
        let (client, slot, _news) = registry(Duration::from_secs(60));
        announce(&client, &[0, 1, QUEUE_NODE, 3, 4], "a");
        announce(&client, &[0, 1, 3], "b");
        turn(&client, "w", 10_000);
        assert_eq!(slot.released.len(), 1);
        // Two releases the queue node announced, kept: stale.
        let (client, slot, _news) = registry(Duration::from_secs(60));
        announce(&client, &[0, 1, QUEUE_NODE], "a");
        announce(&client, &[0, QUEUE_NODE, 1], "b");
        turn(&client, "w", 10_000);
        assert!(slot.released.is_empty());
    }

    #[test]
    fn a_kept_release_stays_for_a_head_told_to_try_at_once_or_of_another_client() {
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, QUEUE_NODE], "a");
        // The one before gave up: the head tries at once anyway.
        turn(&registry, "w", 0);
        assert_eq!(slot.released.len(), 1);
        // Another client's head: this client's waiters outside the queue (`fair(false)`, or
        // gone on without it) may be waiting for it.
        turn(&registry, "x", 10_000);
        assert_eq!(slot.released.len(), 1);
    }

    #[test]
    fn a_queue_silent_after_a_release_tells_the_waiters_behind_the_head_to_read_their_place() {
        let (registry, slot, news) = registry(Duration::ZERO);
        let (head_tx, head) = crossbeam_channel::bounded(16);
        relock(&slot.state)
            .fair
            .insert(Arc::from("h"), (head_tx, true));
        turn(&registry, "h", 0);
        assert!(matches!(head.try_recv(), Ok(News::Head { .. })));
        // A release, then the turn message that should follow it: not silent.
        announce(&registry, &[0, 1, 3], "a");
        turn(&registry, "h", 0);
        let _ = head.try_recv();
        registry.check_silence();
        assert_eq!(news.try_recv(), Err(TryRecvError::Empty));
        // A release with no turn message after it: "w" reads its place again, the head (which
        // has the release to act on) is not told.
        announce(&registry, &[0, 1, 3], "b");
        registry.check_silence();
        assert_eq!(news.try_recv(), Ok(News::Recheck));
        assert_eq!(head.try_recv(), Err(TryRecvError::Empty));
        // Told once per silence.
        registry.check_silence();
        assert_eq!(news.try_recv(), Err(TryRecvError::Empty));
    }
}
