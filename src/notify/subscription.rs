//! The waiter's side: a [`Subscription`] waits for a release of its resources, for its turn in
//! this client's queue (its [`Place`]), or for news of its place in the queue across processes;
//! dropped, it leaves the queue, passes the turn on and unsubscribes what no other waiter wants.
//! It uses the registry's slots ([`registry`](super::registry)), and through the
//! [`Notifier`] that made it, sends its unsubscriptions to the subscriber threads
//! ([`subscriber`](super::subscriber)).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};

use crate::cancel::Cancel;
use crate::notify::Notifier;
use crate::notify::registry::{News, Slot, Turn};
use crate::notify::subscriber::SubscriptionChange;
use crate::rules::quorum::quorum;
use crate::sync::relock;

/// Places in the waiters' queues.
static PLACES: AtomicU64 = AtomicU64::new(0);

/// One waiter's registration; unregisters (and unsubscribes, if it was the last) on drop.
pub(crate) struct Subscription {
    pub(super) notifier: Arc<Notifier>,
    pub(super) slots: Vec<(Arc<str>, Arc<Slot>)>,
    /// A shared waiter's: per slot, the releases it has seen (the epoch when it subscribed or
    /// last woke). Any release after that wakes it, even one announced while it was trying.
    pub(super) shared: Option<Mutex<Vec<u64>>>,
    /// A queued waiter's place in its resource's queue.
    pub(super) place: Option<Place>,
    /// Its id in the queue across processes, once [`enlist`](Subscription::enlist)ed.
    pub(super) fair: Option<Arc<str>>,
}

pub(super) struct Place {
    id: u64,
    /// Where the one before says that this waiter is at the front.
    turn: Receiver<Turn>,
    front: AtomicBool,
    /// Set once this waiter got the lock: until when its keys live and the nodes that hold
    /// them, for the next one.
    held_until: Mutex<Option<(Instant, Arc<[bool]>)>>,
}

impl Place {
    /// Takes the last place in `slot`'s queue: at the front if the queue is empty.
    pub(super) fn take_last(slot: &Slot) -> Place {
        let (tx, turn) = crossbeam_channel::bounded(1);
        let id = PLACES.fetch_add(1, Ordering::Relaxed);
        let mut state = relock(&slot.state);
        let front = state.queue.is_empty();
        state.queue.push_back((id, tx));
        Place {
            id,
            turn,
            front: AtomicBool::new(front),
            held_until: Mutex::new(None),
        }
    }
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
    /// Whether the release of a lock held on `holders` (the nodes that hold its keys; `None`
    /// when not known: on any quorum) would be heard. A release wakes waiters once a quorum of
    /// nodes announced it, and only the nodes that hold the keys announce it: a quorum of them
    /// must have each resource's subscription active and be live, neither failing nor skipped
    /// by the workers (see [`Registry::heard`](super::registry::Registry::heard)), and not
    /// have lapsed since `since` (from [`lapses`](Subscription::lapses)). Not knowing the
    /// holders, every node must be. A node down, hung or restarted announces nothing, so while
    /// too few are heard, waiters do not sleep on a notification longer than their fallback.
    pub(crate) fn hears(&self, holders: Option<&[bool]>, since: &[u64]) -> bool {
        let registry = &self.notifier.registry;
        let nodes = registry.failing.len();
        let need = holders.map_or(nodes, |_| quorum(nodes));
        let holds = |i: usize| holders.is_none_or(|h| h.get(i).copied().unwrap_or(false));
        let kept = |i: usize| !registry.lapsed(i, since);
        self.slots.iter().all(|(_, slot)| {
            let state = relock(&slot.state);
            (0..nodes)
                .filter(|&i| holds(i) && kept(i) && registry.heard(&state, i))
                .count()
                >= need
        })
    }

    /// Each node's lapses so far (see
    /// [`Registry::set_failing`](super::registry::Registry::set_failing)), for [`hears`].
    ///
    /// [`hears`]: Subscription::hears
    pub(crate) fn lapses(&self) -> Box<[u64]> {
        self.notifier.registry.lapses()
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

    /// Records that this waiter got the lock, whose keys live until `keys_until` at most on
    /// `holders` (the nodes that said yes): the next in its queue waits for that lock's
    /// release instead of trying at once.
    pub(crate) fn acquired(&self, keys_until: Instant, holders: Arc<[bool]>) {
        if let Some(place) = &self.place {
            *relock(&place.held_until) = Some((keys_until, holders));
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
            let held_until = relock(&place.held_until).take();
            let held = held_until.is_some();
            let mut state = relock(&slot.state);
            let at = state.queue.iter().position(|(id, _)| *id == place.id);
            if let Some(at) = at {
                state.queue.remove(at);
                if at == 0
                    && let Some((_, next)) = state.queue.front()
                {
                    let turn =
                        held_until.map_or(Turn::Now, |(until, on)| Turn::HeldUntil(until, on));
                    let _ = next.try_send(turn);
                }
            }
            if held {
                // A release announced before this waiter got the lock would wake the next one
                // only to be refused: while the lock is held, no one else can release it.
                while slot.released.try_recv().is_ok() {}
            }
        }
        for (resource, _) in &self.slots {
            let mut slots = relock(&self.notifier.registry.slots);
            let Some(entry) = slots.get_mut(resource) else {
                continue;
            };
            entry.0 -= 1;
            if entry.0 == 0 {
                slots.remove(resource);
                // Under the registry's lock, so that a new first waiter's `Subscribe` follows
                // it on every subscriber (see `Notifier::subscribe`).
                for node in &self.notifier.nodes {
                    let _ = node.send(SubscriptionChange::Unsubscribe(Arc::clone(resource)));
                }
                self.notifier.wake();
            }
        }
    }
}
