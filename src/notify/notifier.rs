//! The [`Notifier`]: a client's entry to release notifications. It starts the subscriber
//! threads (the [`poller`](super::poller) for the nodes it reaches, a
//! [`subscriber`](super::subscriber) for each other node), registers waiters in the registry
//! ([`registry`](super::registry)) and hands each one its [`Subscription`], and remembers which
//! resources have a queue across processes and which nodes may keep one. It may use every
//! other part of notify.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::cancel::Cancel;
use crate::notify::poller::{Poller, Reach, Waker};
use crate::notify::registry::{Registry, Slot, Stalled};
use crate::notify::subscriber::{Subscriber, SubscriptionChange, Subscriptions};
use crate::notify::subscription::{Place, Subscription};
use crate::sync::relock;
use crate::topology::Watch;

/// How often a waiter for its subscriptions to become active looks at its cancel.
const CANCEL_SLICE: Duration = Duration::from_millis(1);

/// How long a client remembers that it found others queued on a resource, and on how many
/// resources at most.
const QUEUE_MEMORY: Duration = Duration::from_secs(10);
const QUEUES_REMEMBERED: usize = 1024;

/// How long waiters keep no queue on a node after a queue command to it failed.
const QUEUE_PAUSE: Duration = Duration::from_secs(5);
const STACK: usize = 256 * 1024;

/// The client's subscriber threads: the poller for the nodes it reaches, and one per other
/// node.
pub(crate) struct Notifier {
    pub(super) registry: Arc<Registry>,
    pub(super) nodes: Vec<Sender<SubscriptionChange>>,
    /// The poller's, if it has nodes: a change sent to one of them wakes it.
    waker: Option<Waker>,
    threads: Vec<JoinHandle<()>>,
    exited: Receiver<()>,
    /// Resources on which this client's waiters lately found others queued, and when: a
    /// newcomer there joins the queue before it tries, even while no waiter of this client is
    /// left to hear the queue's news (see [`queue_known`](Notifier::queue_known)).
    queues_seen: Mutex<HashMap<Arc<str>, Instant>>,
}

/// A notifier dropped without [`stop`](Notifier::stop) (its last holder was a subscription that
/// outlived the client) still ends the poller, which would otherwise sleep on for a waiter.
impl Drop for Notifier {
    fn drop(&mut self) {
        self.nodes.clear();
        self.wake();
    }
}

impl Notifier {
    pub(crate) fn start(
        clients: &[crate::topology::Target],
        watches: Vec<Option<Arc<Watch>>>,
        connect_timeout: Duration,
        io_timeout: Duration,
        silence: Duration,
        stalled: Stalled,
    ) -> std::io::Result<Notifier> {
        let registry = Arc::new(Registry::new(clients.len(), silence, stalled));
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        let mut notifier = Notifier {
            registry,
            nodes: Vec::new(),
            waker: None,
            threads: Vec::new(),
            exited,
            queues_seen: Mutex::new(HashMap::new()),
        };
        let mut polled = Vec::new();
        for (i, (client, watch)) in clients.iter().zip(watches).enumerate() {
            let (tx, rx) = crossbeam_channel::unbounded();
            notifier.nodes.push(tx);
            if let Some(reach) = Reach::of(client) {
                polled.push((i, reach, rx));
                continue;
            }
            let sub = Subscriber {
                index: i,
                client: client.clone(),
                watch,
                master: None,
                watch_seen: 0,
                changes: rx,
                registry: Arc::clone(&notifier.registry),
                subs: Subscriptions::default(),
                connect_timeout,
                io_timeout,
                _exited: exited_tx.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("redlock-notify-{i}"))
                .stack_size(STACK)
                .spawn(move || sub.run());
            match thread {
                Ok(t) => notifier.threads.push(t),
                Err(e) => {
                    notifier.stop(io_timeout);
                    return Err(e);
                }
            }
        }
        if !polled.is_empty() {
            let registry = Arc::clone(&notifier.registry);
            match Poller::start(
                polled,
                registry,
                connect_timeout,
                io_timeout,
                exited_tx,
                STACK,
            ) {
                Ok((waker, t)) => {
                    notifier.waker = Some(waker);
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
            let mut registry = relock(&self.registry.slots);
            let entry = registry
                .entry(Arc::clone(resource))
                .or_insert_with(|| (0, Arc::new(Slot::new())));
            entry.0 += 1;
            // Sent under the registry's lock, as the last waiter's `Unsubscribe` is: each
            // subscriber gets a resource's changes in the order its slots came and went.
            if entry.0 == 1 {
                for node in &self.nodes {
                    let _ = node.send(SubscriptionChange::Subscribe(Arc::clone(resource)));
                }
                self.wake();
            }
            slots.push((Arc::clone(resource), Arc::clone(&entry.1)));
        }
        let place = match &slots[..] {
            [(_, slot)] if queue && !shared => Some(Place::take_last(slot)),
            _ => None,
        };
        let deadline = Instant::now() + ready_within;
        for (_, slot) in &slots {
            let mut state = relock(&slot.state);
            while self.registry.confirmed(&state, ready_within)
                < self.registry.live_nodes(ready_within)
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

    /// Wakes the poller to take the changes just sent.
    pub(super) fn wake(&self) {
        if let Some(waker) = &self.waker {
            waker.wake();
        }
    }

    /// Ends the subscriber threads, waiting for them up to `limit`.
    pub(crate) fn stop(&mut self, limit: Duration) {
        self.nodes.clear();
        self.wake();
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
