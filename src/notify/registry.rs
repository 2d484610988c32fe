//! The registry: per resource, what this client's waiters wait on (a [`Slot`]: the releases a
//! quorum announced, this client's queue of waiters in arrival order, and the news of the queue
//! across processes for each of them), and per node, whether its subscriber is live.
//!
//! The subscriber threads ([`subscriber`](super::subscriber)) write here what the nodes
//! publish; the waiters ([`subscription`](super::subscription)) read it. It uses the fair
//! queue's messages ([`queue`](super::queue)) and nothing else of notify.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::notify::queue::QueueNews;
use crate::sync::relock;

/// What waiters wait on for one resource.
pub(super) struct Slot {
    pub(super) state: Mutex<SlotState>,
    /// Holds one message per release that no waiter has acted on yet (at most one: a second
    /// release before any waiter woke adds nothing); one waiter takes it and goes. A channel
    /// rather than a condition variable, so that a waiter can select on it beside its cancel.
    released_tx: Sender<()>,
    pub(super) released: Receiver<()>,
    /// Signalled when a node's subscription becomes active.
    pub(super) ready: Condvar,
}

pub(super) struct SlotState {
    /// Recent releases (nonce, how many nodes announced it so far, and which: bit `i` for node
    /// `i` < 64): each node announces the same release, which should wake one waiter once, not
    /// N times.
    recent: VecDeque<(String, usize, u64)>,
    /// The releases a quorum announced, newest last, at most [`ANNOUNCED`]: what a turn
    /// message's named release is looked up in (see [`Registry::queue`]). Apart from `recent`,
    /// whose entries a resumed node's burst of old releases pushes out.
    announced: VecDeque<String>,
    /// The releases a quorum announced since the message in `released`, if there is one, was
    /// sent: the ones it stands for (a later release finds the channel full and adds itself
    /// here; one that finds it empty starts the list anew). At most [`RECENT`]; past that, an
    /// empty nonce, which no node announced, stands for the rest.
    pending: Vec<String>,
    /// How many of `pending` came before the last turn message heard: none of those can be
    /// the release of a lock taken after it (see [`Registry::queue`]).
    before_turn: usize,
    /// Nodes on which the subscription is active: `on[i]` for node `i` (see
    /// [`Registry::confirmed`]). A node's confirmation counts once, and its end removes only
    /// its own: the end of an earlier subscription to the same resource, which a node reports
    /// after the new one's slot exists, cannot take away another node's confirmation of the
    /// new one.
    on: Vec<bool>,
    /// Releases announced by a quorum so far: a shared waiter (a reader) wakes when it moved.
    pub(super) epoch: u64,
    /// Replaced at each such release: dropping the sender wakes every shared waiter selecting
    /// on a clone of the receiver (a disconnect is seen by all, a message by one).
    all_tx: Sender<()>,
    pub(super) all_rx: Receiver<()>,
    /// Queued exclusive waiters, in arrival order (see the module's doc): each one's place and
    /// where to tell it that it is at the front.
    pub(super) queue: VecDeque<(u64, Sender<Turn>)>,
    /// The queue across processes (`queue.rs`): the head the last turn message named, and this
    /// client's waiters in it, by id, with where to tell each one the news about it and whether
    /// it joined.
    pub(super) fair_head: Option<String>,
    pub(super) fair: HashMap<Arc<str>, (Sender<News>, bool)>,
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
            announced: VecDeque::new(),
            pending: Vec::new(),
            before_turn: 0,
            on: Vec::new(),
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
    pub(super) fn new() -> Slot {
        let (released_tx, released) = crossbeam_channel::bounded(1);
        Slot {
            state: Mutex::new(SlotState::default()),
            released_tx,
            released,
            ready: Condvar::new(),
        }
    }
}

/// What a queued waiter learns when its turn comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Try now: it was already at the front, or the one before gave up.
    Now,
    /// The one before got the lock, whose keys live until then at most on those nodes (the
    /// ones that said yes): wait for its release (or that time) before trying.
    HeldUntil(Instant, Arc<[bool]>),
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

/// How many recent release tokens a slot remembers. A node that resumes after a hang announces
/// the releases it was sent meanwhile, old ones a quorum announced long before: those are
/// forgotten first (see [`Registry::released`]), and enough are kept that such a burst does not
/// push out the release still being announced.
const RECENT: usize = 32;

/// How many releases a quorum announced a slot remembers for the turn messages (see
/// [`SlotState::announced`]): the release a turn message names may come from the other nodes
/// before this client hears the queue node's message, and the hand-overs after it with it. At a
/// thousand hand-overs a second, 128 cover a lag of 128 ms of the queue node's subscriber.
const ANNOUNCED: usize = 128;

/// How long a new head waits at most for the release of the lock the one before took, once a
/// release kept for it was found stale at its turn and dropped (see [`Registry::queue`]): then
/// it tries, and if refused, reads the keys and waits as any head does.
const AFTER_A_DROP: Duration = Duration::from_secs(1);

/// Per resource: how many waiters, and what they wait on.
pub(super) type Slots = HashMap<Arc<str>, (usize, Arc<Slot>)>;

/// Waiters per resource.
/// Whether the node's workers skip node `i` (see [`Registry`]'s `stalled`).
pub(super) type Stalled = Box<dyn Fn(usize) -> bool + Send + Sync>;

pub(super) struct Registry {
    pub(super) slots: Mutex<Slots>,
    /// Announcements of one release that wake a waiter: a quorum of the nodes, by when the
    /// resource is free on enough nodes for an attempt to succeed. Waking on the first node's
    /// message would send the attempt to nodes that have not applied the release yet.
    pub(super) quorum: usize,
    /// Per node, whether its subscriber is failing (its connection broke or could not be made)
    /// and since when it has been waiting for the node (a connect or a subscription not yet
    /// confirmed; nanoseconds after `origin`, plus one; 0: not waiting). A new waiter does not
    /// wait for such a node to subscribe: with one node hung, each waiter would otherwise spend
    /// `node_timeout` before it listens (see [`Registry::live_nodes`]).
    pub(super) failing: Vec<AtomicBool>,
    /// Per node, how many times its subscriber's connection broke or could not be made: a
    /// waiter that trusts a notification no longer counts a node that lapsed since, even if it
    /// is back by the time the waiter looks (a node restarted in milliseconds lost the keys
    /// whose release it would have announced). A probe answered late is no lapse: a node that
    /// is slow keeps its keys.
    lapses: Vec<AtomicU64>,
    waiting_since: Vec<AtomicU64>,
    /// Per node, until when (nanoseconds after `origin`) waiters keep no queue there: a queue
    /// command to it failed (see `queue.rs`). A message from the node ends it sooner: it
    /// answers again (see [`Registry::heard_from`]).
    pub(super) no_queue_until: Vec<AtomicU64>,
    /// Whether the node's workers skip node `i`: it has not answered them within the node
    /// timeout (hung, or slow) and has not answered a probe in time since. Its subscriber may
    /// not have noticed: a subscription that has nothing to send reads silence from a hung
    /// node as from an idle one, and applies changes only between its reads.
    stalled: Stalled,
    /// How long the queue may stay silent after a release (see [`SlotState::silent_since`]).
    silence: Duration,
    /// When the earliest silence may be due (nanoseconds after `origin`; `u64::MAX`: none), so
    /// that the subscribers' look at it costs one atomic load while the queues speak.
    silence_due: AtomicU64,
    pub(super) origin: Instant,
}

impl Registry {
    pub(super) fn new(nodes: usize, silence: Duration, stalled: Stalled) -> Registry {
        Registry {
            stalled,
            slots: Mutex::new(Slots::new()),
            quorum: crate::rules::quorum::quorum(nodes),
            failing: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            lapses: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            waiting_since: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            no_queue_until: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            silence,
            silence_due: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
        }
    }

    /// The nodes a new waiter should expect to subscribe within `patience`: those whose
    /// subscriber is not failing and has not been waiting for its node for `patience` already.
    pub(super) fn live_nodes(&self, patience: Duration) -> usize {
        (0..self.failing.len())
            .filter(|&i| self.live(i, patience))
            .count()
    }

    /// Whether node `i`'s subscriber is neither failing nor waiting for its node for
    /// `patience` already, and the node's workers do not skip it (see
    /// [`live_nodes`](Registry::live_nodes)).
    pub(super) fn live(&self, i: usize, patience: Duration) -> bool {
        let now = self.origin.elapsed().as_nanos() as u64 + 1;
        let since = self.waiting_since[i].load(Ordering::Relaxed);
        !self.failing[i].load(Ordering::Relaxed)
            && (since == 0 || now.saturating_sub(since) < patience.as_nanos() as u64)
            && !(self.stalled)(i)
    }

    /// How many nodes have `state`'s subscription active and are live within `patience`, as
    /// [`live`](Registry::live) says: a node the workers skip (hung, slow) announces nothing in
    /// time, so its confirmation does not count.
    pub(super) fn confirmed(&self, state: &SlotState, patience: Duration) -> usize {
        let on = |i: usize| state.on.get(i).copied().unwrap_or(false);
        (0..self.failing.len())
            .filter(|&i| on(i) && self.live(i, patience))
            .count()
    }

    /// Whether node `i` would announce a release of `state`'s resource in time: its
    /// subscription is active, its subscriber is not failing and the workers do not skip it.
    pub(super) fn heard(&self, state: &SlotState, i: usize) -> bool {
        state.on.get(i).copied().unwrap_or(false)
            && !self.failing[i].load(Ordering::Relaxed)
            && !(self.stalled)(i)
    }

    /// Node `i`'s subscriber is failing or not; with `lapse`, because its connection broke or
    /// could not be made: counted each time, even while the node is failing already (a probe
    /// answered late makes it failing with no lapse; the node may then restart empty).
    pub(super) fn set_failing(&self, i: usize, failing: bool, lapse: bool) {
        self.failing[i].store(failing, Ordering::Relaxed);
        if failing && lapse {
            self.lapses[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each node's lapses so far: a waiter compares them with a later look.
    pub(super) fn lapses(&self) -> Box<[u64]> {
        self.lapses
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }

    /// Whether node `i` lapsed since `seen` (from [`lapses`](Registry::lapses)).
    pub(super) fn lapsed(&self, i: usize, seen: &[u64]) -> bool {
        seen.get(i)
            .is_none_or(|&n| self.lapses[i].load(Ordering::Relaxed) != n)
    }

    /// Node `i`'s subscriber starts (`true`) or stops waiting for its node.
    pub(super) fn waiting_for(&self, i: usize, waiting: bool) {
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
    pub(super) fn check_silence(&self) {
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

    pub(super) fn slot(&self, resource: &str) -> Option<Arc<Slot>> {
        relock(&self.slots)
            .get(resource)
            .map(|(_, s)| Arc::clone(s))
    }

    /// Node `node`'s subscription to `resource` is active.
    pub(super) fn subscribed(&self, node: usize, resource: &str) {
        if let Some(slot) = self.slot(resource) {
            let mut state = relock(&slot.state);
            if state.on.len() <= node {
                state.on.resize(node + 1, false);
            }
            if std::mem::replace(&mut state.on[node], true) {
                return;
            }
            for (tx, _) in state.fair.values() {
                let _ = tx.try_send(News::Recheck);
            }
            drop(state);
            slot.ready.notify_all();
        }
    }

    /// News of `resource`'s queue (see `queue.rs`).
    pub(super) fn queue(&self, node: usize, resource: &str, news: QueueNews) {
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
        let mut held = (news.held_ms > 0).then(|| Duration::from_millis(news.held_ms));
        let ours = news
            .head
            .as_deref()
            .is_some_and(|h| state.fair.contains_key(h));
        if ours && held.is_some() {
            // A release kept for no waiter of this client (its waiters were all behind others
            // when it came) would wake the new head only to be refused by the lock the one
            // before just took, and is dropped; a wrong drop costs the head at most
            // `AFTER_A_DROP`: it tries then, rather than at the end of the lock's TTL. The
            // holder keeps everyone else out until the release the turn message names, so the
            // kept message stands for an older one unless a quorum announced that release
            // (heard from the other nodes before the queue node's turn message, whose
            // subscriber can lag behind theirs).
            let stale = match &news.release {
                Some(release) => !state.announced.iter().any(|n| n == release),
                None => older_than_the_turn(&state, node),
            };
            if stale {
                let mut dropped = false;
                while slot.released.try_recv().is_ok() {
                    dropped = true;
                }
                state.pending.clear();
                if dropped {
                    held = held.map(|h| h.min(AFTER_A_DROP));
                }
            }
        }
        state.before_turn = state.pending.len();
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

    /// Node `node`'s subscription to `resource` ended (unsubscribed, or its connection broke).
    pub(super) fn unsubscribed(&self, node: usize, resource: &str) {
        if let Some(slot) = self.slot(resource) {
            let mut state = relock(&slot.state);
            if let Some(on) = state.on.get_mut(node) {
                *on = false;
            }
        }
    }

    /// A release of `resource` with `nonce` was announced by one node.
    /// Node `node` published a message: it runs commands again, so waiters may queue there
    /// again at once instead of at the end of the pause a failed queue command started.
    pub(super) fn heard_from(&self, node: usize) {
        if self.no_queue_until[node].load(Ordering::Relaxed) != 0 {
            self.no_queue_until[node].store(0, Ordering::Relaxed);
        }
    }

    pub(super) fn released(&self, node: usize, resource: &str, nonce: String) {
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
                        // The oldest release a quorum has announced goes first, then the oldest
                        // only this node has announced (a resumed node's burst replaces its
                        // own): one that other nodes are announcing may be the release a
                        // waiter is waiting for.
                        let quorum = self.quorum;
                        let evict = state
                            .recent
                            .iter()
                            .position(|(_, c, _)| *c >= quorum)
                            .or_else(|| state.recent.iter().position(|(_, _, n)| *n == bit));
                        state.recent.remove(evict.unwrap_or(0));
                    }
                    state.recent.push_back((nonce.clone(), 1, bit));
                    1
                }
            };
            if count != self.quorum {
                return;
            }
            if state.announced.len() == ANNOUNCED {
                state.announced.pop_front();
            }
            state.announced.push_back(nonce.clone());
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
            // already pending, and from now on stands for this release too.)
            if slot.released_tx.try_send(()).is_ok() {
                state.pending.clear();
                state.before_turn = 0;
            }
            if state.pending.len() < RECENT {
                state.pending.push(nonce);
            } else if let Some(last) = state.pending.last_mut() {
                last.clear();
            }
        }
    }
}

/// For a turn message that does not name the holder's release (a holder with an older version
/// of this library): whether the kept wake-up is older than the lock the one before the head
/// just took. The kept message stands for the releases a quorum announced since it was sent
/// (`pending`). Those that came before the turn message before this one are taken to be older
/// than that lock, which its holder took once that message made it the head (not always so:
/// the holder's release can come from the other nodes before this subscriber hears the queue
/// node's turn message, and such a drop is wrong). Each later one is older too if the queue
/// node announced it before this turn message: that node runs the `LEAVE` before the lock's
/// release (both come from the new holder's one connection to it), and this subscriber hears
/// its messages in that order. The message is stale if there are later ones and they all are.
/// With no later one, it stays.
fn older_than_the_turn(state: &SlotState, node: usize) -> bool {
    let bit = 1u64.checked_shl(node as u32).unwrap_or(0);
    let heard_here = |p: &String| {
        state
            .recent
            .iter()
            .any(|(n, _, nodes)| n == p && nodes & bit != 0)
    };
    let later = &state.pending[state.before_turn.min(state.pending.len())..];
    !later.is_empty() && later.iter().all(heard_here)
}

#[cfg(test)]
mod tests {
    use crossbeam_channel::TryRecvError;

    use super::*;
    use crate::notify::queue::queue_news;

    /// The queue node of the resource "r" in these tests, of five nodes.
    const QUEUE_NODE: usize = 2;

    /// A client's registry of five nodes with a slot for "r", in whose queue across processes
    /// this client has the waiter "w" (joined); the news for "w" comes on the receiver.
    fn registry(silence: Duration) -> (Registry, Arc<Slot>, Receiver<News>) {
        let registry = Registry::new(5, silence, Box::new(|_| false));
        let slot = Arc::new(Slot::new());
        let (tx, news) = crossbeam_channel::bounded(16);
        relock(&slot.state).fair.insert(Arc::from("w"), (tx, true));
        relock(&registry.slots).insert(Arc::from("r"), (1, Arc::clone(&slot)));
        (registry, slot, news)
    }

    #[test]
    fn a_connection_lost_after_a_late_probe_is_a_lapse() {
        let registry = Registry::new(3, Duration::from_secs(1), Box::new(|_| false));
        let seen = registry.lapses();
        // A probe answered late: failing, and no lapse (a slow node keeps its keys).
        registry.set_failing(1, true, false);
        assert!(!registry.lapsed(1, &seen));
        // Then its connection breaks (it may come back empty): a lapse, though it was failing.
        registry.set_failing(1, true, true);
        assert!(registry.lapsed(1, &seen));
        let seen = registry.lapses();
        registry.set_failing(1, false, true);
        assert!(!registry.lapsed(1, &seen), "working again is no lapse");
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

    /// The new head was told the lock just taken is held for 10 s (no drop), and the kept
    /// release, that lock's, is there to wake it.
    fn assert_woken_by_the_release_kept(news: &Receiver<News>, slot: &Slot) {
        assert_eq!(
            news.try_recv(),
            Ok(News::Head {
                held: Some(Duration::from_secs(10)),
                watched: false
            })
        );
        assert_eq!(
            slot.released.len(),
            1,
            "the release of the lock just taken was dropped: the head sleeps"
        );
    }

    /// The queue node's turn message naming `head` (and `next`), after the one before got the
    /// lock for `held_ms`, to be released with `release`.
    fn turn_naming(registry: &Registry, head: &str, next: &str, held_ms: u64, release: &str) {
        let news = queue_news(&format!("turn:{head}:{next}:{held_ms}:{release}")).unwrap();
        registry.queue(QUEUE_NODE, "r", news);
    }

    #[test]
    fn the_release_of_the_lock_just_taken_heard_before_the_turn_messages_wakes_the_new_head() {
        // A release is kept (no waiter of this client is the head). Then, as the queue node
        // ran them: the turn message making "x" the head, "a" (the release of the lock before),
        // the turn message making "w" (this client's) the head after "x" took the lock, and
        // "b", the release of that lock. This client's subscriber to the queue node lags: "b"
        // comes from the other nodes before it hears the first turn message.
        let (registry, slot, news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, QUEUE_NODE, 3, 4], "kept");
        announce(&registry, &[0, 1, 3], "b");
        turn_naming(&registry, "x", "w", 10_000, "a-lock");
        assert_eq!(news.try_recv(), Ok(News::Next));
        announce(&registry, &[3, 4, QUEUE_NODE], "a");
        turn_naming(&registry, "w", "", 10_000, "b");
        assert_woken_by_the_release_kept(&news, &slot);
    }

    #[test]
    fn a_resumed_nodes_burst_does_not_make_the_release_of_the_lock_just_taken_forgotten() {
        // The lock "x" took is released with "b", which a quorum announced before the queue
        // node's turn message; then a node that resumes after a hang announces the releases it
        // was sent meanwhile, more than a slot's recent releases hold. "b" is still the release
        // of the lock just taken: the kept wake-up stays.
        let (registry, slot, news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, 3], "a");
        announce(&registry, &[0, 1, 3], "b");
        for i in 0..2 * RECENT {
            announce(&registry, &[4], &format!("old{i}"));
        }
        turn_naming(&registry, "w", "", 10_000, "b");
        assert_woken_by_the_release_kept(&news, &slot);
    }

    #[test]
    fn a_release_older_than_the_one_the_turn_names_does_not_wake_the_new_head() {
        // Kept while no waiter of this client was the head; the lock taken since will be
        // released with "b", which has not come: the kept release is older.
        let (registry, slot, news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, 3], "a");
        assert_eq!(slot.released.len(), 1);
        turn_naming(&registry, "w", "", 10_000, "b");
        assert_eq!(
            news.try_recv(),
            Ok(News::Head {
                held: Some(AFTER_A_DROP),
                watched: false
            })
        );
        assert!(
            slot.released.is_empty(),
            "a stale release would wake the head"
        );
        // "b" then wakes it.
        announce(&registry, &[0, 1, QUEUE_NODE], "b");
        assert_eq!(slot.released.len(), 1);
    }

    #[test]
    fn a_release_heard_before_the_lock_was_taken_does_not_wake_the_new_head() {
        // Heard from a quorum while no waiter of this client was at the head, so kept; the
        // queue node announced it, so it came before the `LEAVE` of the one who took the lock.
        let (registry, slot, news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1, QUEUE_NODE, 3, 4], "a");
        assert_eq!(slot.released.len(), 1);
        turn(&registry, "w", 10_000);
        // Having dropped a wake-up, the head looks after `AFTER_A_DROP` at the latest.
        assert_eq!(
            news.try_recv(),
            Ok(News::Head {
                held: Some(AFTER_A_DROP),
                watched: false
            })
        );
        assert!(
            slot.released.is_empty(),
            "a stale release would wake the head"
        );
    }

    #[test]
    fn releases_before_the_last_turn_message_do_not_keep_a_wake_up_at_the_next() {
        // "a" never reached the queue node (its holder did not hold a key there), and came
        // before the turn message that made "x" the head: older than the lock "x" took. "b",
        // after it, the queue node announced before this turn: older too.
        let (client, slot, news) = registry(Duration::from_secs(60));
        announce(&client, &[0, 1, 3], "a");
        turn(&client, "x", 10_000);
        announce(&client, &[0, 1, QUEUE_NODE], "b");
        turn(&client, "w", 10_000);
        assert!(
            slot.released.is_empty(),
            "a stale release would wake the head"
        );
        assert!(matches!(news.try_recv(), Ok(News::Head { .. })));
        // One after it that the queue node did not announce may be that lock's: kept.
        let (client, slot, _news) = registry(Duration::from_secs(60));
        announce(&client, &[0, 1, 3], "a");
        turn(&client, "x", 10_000);
        announce(&client, &[0, 1, 3], "b");
        turn(&client, "w", 10_000);
        assert_eq!(slot.released.len(), 1);
        // None after it: the release of the lock "x" took may be the one heard before "x"'s
        // turn message (this client's thread for the queue node behind the others): kept.
        let (client, slot, _news) = registry(Duration::from_secs(60));
        announce(&client, &[0, 1, 3], "a");
        turn(&client, "x", 10_000);
        turn(&client, "w", 10_000);
        assert_eq!(slot.released.len(), 1);
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

    #[test]
    fn the_end_of_an_earlier_subscription_takes_away_no_other_nodes_confirmation() {
        // A lone waiter left (its slot went, each subscriber got `Unsubscribe`) and came back
        // at once (a new slot, `Subscribe` after it on each). Node 1 has confirmed the new
        // subscription when node 0 reports the end of the old one, then confirms the new one.
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        let confirmed = || registry.confirmed(&relock(&slot.state), Duration::from_secs(60));
        registry.subscribed(1, "r");
        registry.unsubscribed(0, "r");
        registry.subscribed(0, "r");
        assert_eq!(confirmed(), 2);
        // A node's confirmation counts once, and only its own end takes it away.
        registry.subscribed(0, "r");
        registry.unsubscribed(3, "r");
        assert_eq!(confirmed(), 2);
        registry.unsubscribed(1, "r");
        assert_eq!(confirmed(), 1);
    }

    #[test]
    fn an_older_release_completing_after_a_newer_one_leaves_the_newer_ones_wake_up() {
        // "old" was announced by two nodes, then the release of the lock just taken ("new") by
        // three; the queue node, behind, announces "old" last, after its turn message.
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 1], "old");
        announce(&registry, &[0, 1, 3], "new");
        assert_eq!(slot.released.len(), 1);
        announce(&registry, &[QUEUE_NODE], "old");
        turn(&registry, "w", 10_000);
        assert_eq!(
            slot.released.len(),
            1,
            "the wake-up for \"new\" was dropped"
        );
    }

    #[test]
    fn an_older_release_first_heard_after_the_newer_one_leaves_the_newer_ones_wake_up() {
        // The release of the lock just taken ("new") is first heard from node 4, which never
        // held the older lock, before any node announced "old"; "old" then completes on the
        // queue node after "new" did, and before its turn message.
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        announce(&registry, &[4], "new");
        announce(&registry, &[0, 1], "old");
        announce(&registry, &[0, 1], "new");
        assert_eq!(slot.released.len(), 1);
        announce(&registry, &[QUEUE_NODE], "old");
        turn(&registry, "w", 10_000);
        assert_eq!(
            slot.released.len(),
            1,
            "the wake-up for \"new\" was dropped"
        );
    }

    #[test]
    fn a_resumed_nodes_burst_of_old_releases_does_not_push_out_the_one_being_announced() {
        let (registry, slot, _news) = registry(Duration::from_secs(60));
        announce(&registry, &[0, 3], "current");
        // Node 1 resumes and announces the releases it was sent while hung.
        for i in 0..3 * RECENT {
            announce(&registry, &[1], &format!("old.{i}"));
        }
        announce(&registry, &[4], "current");
        assert_eq!(slot.released.len(), 1, "\"current\" never reached a quorum");
    }

    #[test]
    fn a_node_the_workers_skip_is_not_waited_for_and_a_message_ends_its_queue_pause() {
        let stalled = Arc::new(AtomicBool::new(false));
        let skip = Arc::clone(&stalled);
        let registry = Registry::new(
            5,
            Duration::from_secs(60),
            Box::new(move |i| i == 1 && skip.load(Ordering::Relaxed)),
        );
        let patience = Duration::from_secs(1);
        assert_eq!(registry.live_nodes(patience), 5);
        // Hung: its subscriber reads silence as from an idle node, but the workers skip it.
        stalled.store(true, Ordering::Relaxed);
        assert!(!registry.live(1, patience));
        assert_eq!(registry.live_nodes(patience), 4);
        stalled.store(false, Ordering::Relaxed);
        assert!(registry.live(1, patience));
        // A queue command to node 1 failed: no queue there until it is heard from again.
        registry.no_queue_until[1].store(u64::MAX, Ordering::Relaxed);
        registry.heard_from(2);
        assert_eq!(registry.no_queue_until[1].load(Ordering::Relaxed), u64::MAX);
        registry.heard_from(1);
        assert_eq!(registry.no_queue_until[1].load(Ordering::Relaxed), 0);
    }
}
