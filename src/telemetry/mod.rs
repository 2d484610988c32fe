//! What the library tells operators: events, counters and latency histograms, per client.
//!
//! **Counters and histograms** are relaxed atomics bumped on the paths they count, always: a
//! few increments per acquisition, which costs nothing measurable next to a round trip, and
//! [`Redlock::stats`](crate::Redlock::stats) reads them into a [`Stats`] snapshot without
//! stopping anyone. Resource names never become labels (unbounded cardinality): counters are by
//! outcome and kind only.
//!
//! **Events** are built only while someone listens ([`Redlock::on_event`](crate::Redlock::on_event)):
//! with no listener an event costs one atomic load. They are never delivered on the thread that
//! made them (a caller's, the extender's): a slow handler (a Python or Go one) must not stall
//! extensions or I/O. They go through a bounded queue ([`EVENT_QUEUE`]) to a dispatcher thread
//! of the client's own, which calls the listeners in order; when the queue is full the event is
//! dropped and counted ([`Stats::events_dropped`]). The dispatcher gathers what comes within
//! 2 ms of an event and delivers it together, so a busy client wakes it once per batch rather
//! than once per event: events arrive up to that late. The node events (connected, disconnected,
//! restart seen, quarantined, server warning) are read by the dispatcher from the workers' node
//! status every [`NODE_POLL`] while someone listens, so they come up to that late; the warnings
//! standing when the first listener is added come at its first poll.
//!
//! A listener may call back into the library (take a lock, read the stats): it runs on the
//! dispatcher thread, which holds nothing of the library meanwhile; only events queued behind it
//! wait. It must not wait for an event of its own client (the dispatcher is busy running it).
//!
//! Names follow OpenTelemetry's conventions, and [`Stats::prometheus`] writes the Prometheus
//! text form: `redlock_acquire_duration_seconds` (histogram, by `outcome` and `kind`),
//! `redlock_hold_duration_seconds`, `redlock_wait_duration_seconds`,
//! `redlock_acquisitions_total`, `redlock_extensions_total`, `redlock_lost_total` (by
//! `reason`), `redlock_locks_held`, `redlock_waiters`, `redlock_events_dropped_total`, and per
//! node (`node` = `host:port`) `db_client_operation_duration_seconds` (OpenTelemetry's
//! `db.client.operation.duration`), `redlock_node_errors_total`, `redlock_node_up`,
//! `redlock_node_connects_total`, `redlock_node_restarts_total`, `redlock_node_quarantined`.

pub(crate) mod histogram;
mod prometheus;
mod status;

pub use status::{NodeStatus, Votes};

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::sync::relock;
use crate::telemetry::histogram::{AtomicHistogram, Histogram};

/// Events queued for the dispatcher at most; more are dropped and counted.
pub const EVENT_QUEUE: usize = 1024;

/// How often the dispatcher reads the node status for node events while someone listens.
pub const NODE_POLL: Duration = Duration::from_millis(250);

/// How long the dispatcher, woken by an event, waits for more before it delivers them: events
/// reach the listeners up to this late.
const GATHER: Duration = Duration::from_millis(2);

/// How long removing a listener waits for the events queued before it to be delivered.
const FLUSH: Duration = Duration::from_secs(1);

/// What the dispatcher's queue carries: events, and a listener's removal waiting for the events
/// queued before it.
enum Queued {
    Event(Event),
    Flush(Sender<()>),
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A lock was acquired (`duration`: the acquisition, retries and waits included).
    Acquired,
    /// An acquisition gave up: the resource was held by another owner.
    Refused,
    /// An acquisition gave up: too few nodes answered.
    NoQuorum,
    /// An acquisition was cancelled.
    Cancelled,
    /// A lock was released (`duration`: how long it was held).
    Released,
    /// A lock was extended.
    Extended,
    /// An extension failed without losing the lock (too few nodes answered; retried).
    ExtensionFailed,
    /// A held lock was found lost (`reason` says why, `duration`: how long it was held).
    Lost,
    /// A node's worker connected (`node`).
    NodeConnected,
    /// A node's worker lost its connection (`reason`: the error).
    NodeDisconnected,
    /// A node was seen restarted (a new `run_id` at a reconnect; `reason`: it), or a Sentinel
    /// node failed over to another master (`reason`: "failover to host:port").
    NodeRestarted,
    /// A node was quarantined by the clock guard (`reason`).
    NodeQuarantined,
    /// A server warning of the probe or the clock guard, or a URL's `#insecure` (`reason`: the
    /// text).
    ServerWarning,
}

impl EventKind {
    /// The event's name, as in logs: `acquired`, `node_quarantined`, ...
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Refused => "refused",
            EventKind::NoQuorum => "no_quorum",
            EventKind::Cancelled => "cancelled",
            EventKind::Released => "released",
            EventKind::Extended => "extended",
            EventKind::ExtensionFailed => "extension_failed",
            EventKind::Lost => "lost",
            EventKind::NodeConnected => "node_connected",
            EventKind::NodeDisconnected => "node_disconnected",
            EventKind::NodeRestarted => "node_restarted",
            EventKind::NodeQuarantined => "node_quarantined",
            EventKind::ServerWarning => "server_warning",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One event; the fields that do not apply are `None`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// When, by our wall clock.
    pub at: SystemTime,
    /// The resource (lock events).
    pub resource: Option<String>,
    /// The kind of lock: `plain`, `fenced`, `reentrant`, `many`, `read`, `write`, `semaphore`,
    /// `leader` (lock events).
    pub lock_kind: Option<&'static str>,
    /// The node, `host:port` (node events).
    pub node: Option<String>,
    /// How long it took, or how long the lock was held (see [`EventKind`]).
    pub duration: Option<Duration>,
    /// Why (lost locks, node events).
    pub reason: Option<String>,
}

impl Event {
    fn new(kind: EventKind) -> Event {
        Event {
            kind,
            at: SystemTime::now(),
            resource: None,
            lock_kind: None,
            node: None,
            duration: None,
            reason: None,
        }
    }
}

/// How acquisitions end, as counted.
pub const OUTCOMES: [&str; 5] = ["acquired", "refused", "no_quorum", "cancelled", "error"];

/// The kinds of lock, as counted.
pub const KINDS: [&str; 8] = [
    "plain",
    "fenced",
    "reentrant",
    "many",
    "read",
    "write",
    "semaphore",
    "leader",
];

/// Why held locks were lost, as counted.
pub const LOST_REASONS: [&str; 3] = ["refused", "expired", "suspended"];

/// A quorum refused an extension: the keys are gone or another owner's.
pub(crate) const LOST_REFUSED: usize = 0;
/// The validity ran out before an extension succeeded.
pub(crate) const LOST_EXPIRED: usize = 1;
/// Our host was suspended while the lock was held.
pub(crate) const LOST_SUSPENDED: usize = 2;

fn kind_index(kind: &str) -> usize {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0)
}

/// A client's counters, and its listeners.
pub(crate) struct Telemetry {
    acquire: Vec<AtomicHistogram>,
    hold: AtomicHistogram,
    wait: AtomicHistogram,
    extensions_ok: AtomicU64,
    extensions_failed: AtomicU64,
    lost: [AtomicU64; LOST_REASONS.len()],
    held: AtomicU64,
    waiters: AtomicU64,
    dropped: AtomicU64,
    /// Someone listens: events are built and queued.
    listening: AtomicBool,
    /// Held (shared) by the dispatcher while it calls listeners, so that a removal can wait
    /// for a call in flight.
    calling: RwLock<()>,
    listeners: Mutex<Listeners>,
}

type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Reads the node status for the dispatcher; `None` once the client is gone.
pub(crate) type NodeReader = Box<dyn Fn() -> Option<Vec<NodeStatus>> + Send>;

#[derive(Default)]
struct Listeners {
    next: u64,
    list: Vec<(u64, Listener)>,
    queue: Option<Sender<Queued>>,
    dispatcher: Option<JoinHandle<()>>,
}

impl Telemetry {
    pub(crate) fn new() -> Telemetry {
        Telemetry {
            acquire: (0..OUTCOMES.len() * KINDS.len())
                .map(|_| AtomicHistogram::new())
                .collect(),
            hold: AtomicHistogram::new(),
            wait: AtomicHistogram::new(),
            extensions_ok: AtomicU64::new(0),
            extensions_failed: AtomicU64::new(0),
            lost: std::array::from_fn(|_| AtomicU64::new(0)),
            held: AtomicU64::new(0),
            waiters: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            listening: AtomicBool::new(false),
            calling: RwLock::new(()),
            listeners: Mutex::new(Listeners::default()),
        }
    }

    fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    fn emit(&self, event: Event) {
        let queue = relock(&self.listeners).queue.clone();
        if let Some(q) = queue
            && q.try_send(Queued::Event(event)).is_err()
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An acquisition ended with `outcome` (one of [`OUTCOMES`]) after `took`.
    pub(crate) fn acquisition(
        &self,
        outcome: usize,
        kind: &'static str,
        resource: &str,
        took: Duration,
    ) {
        self.acquire[outcome * KINDS.len() + kind_index(kind)].observe(took);
        if self.listening() {
            let kind_of_event = match outcome {
                0 => EventKind::Acquired,
                1 => EventKind::Refused,
                2 => EventKind::NoQuorum,
                3 => EventKind::Cancelled,
                _ => return,
            };
            let mut e = Event::new(kind_of_event);
            e.resource = Some(resource.to_owned());
            e.lock_kind = Some(kind);
            e.duration = Some(took);
            self.emit(e);
        }
    }

    /// A lock was granted: held until [`ended`](Telemetry::ended).
    pub(crate) fn began(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// A waiter began (`true`) or stopped waiting.
    pub(crate) fn waiting(&self, began: bool, waited: Option<Duration>) {
        if began {
            self.waiters.fetch_add(1, Ordering::Relaxed);
        } else {
            self.waiters.fetch_sub(1, Ordering::Relaxed);
            if let Some(w) = waited {
                self.wait.observe(w);
            }
        }
    }

    /// A held lock ended: released, or lost for `lost_reason` (an index of [`LOST_REASONS`]).
    pub(crate) fn ended(
        &self,
        resource: &str,
        kind: &'static str,
        held: Duration,
        lost_reason: Option<usize>,
    ) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.hold.observe(held);
        if let Some(r) = lost_reason {
            self.lost[r].fetch_add(1, Ordering::Relaxed);
        }
        if self.listening() {
            let mut e = Event::new(if lost_reason.is_some() {
                EventKind::Lost
            } else {
                EventKind::Released
            });
            e.resource = Some(resource.to_owned());
            e.lock_kind = Some(kind);
            e.duration = Some(held);
            e.reason = lost_reason.map(|r| LOST_REASONS[r].to_owned());
            self.emit(e);
        }
    }

    /// An extension succeeded, or failed without losing the lock.
    pub(crate) fn extension(&self, resource: &str, kind: &'static str, ok: bool) {
        if ok {
            self.extensions_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.extensions_failed.fetch_add(1, Ordering::Relaxed);
        }
        if self.listening() {
            let mut e = Event::new(if ok {
                EventKind::Extended
            } else {
                EventKind::ExtensionFailed
            });
            e.resource = Some(resource.to_owned());
            e.lock_kind = Some(kind);
            self.emit(e);
        }
    }

    /// Adds a listener, starting the dispatcher with the first one. `nodes` reads the node
    /// status for node events (`None` once the client is gone: it must hold the client weakly).
    pub(crate) fn add(
        self: &Arc<Self>,
        listener: Listener,
        nodes: NodeReader,
    ) -> std::io::Result<u64> {
        let mut l = relock(&self.listeners);
        if l.queue.is_none() {
            let (tx, rx) = crossbeam_channel::bounded(EVENT_QUEUE);
            let me = Arc::downgrade(self);
            let thread = std::thread::Builder::new()
                .name("redlock-events".into())
                .stack_size(256 * 1024)
                .spawn(move || dispatch(me, rx, nodes))?;
            l.queue = Some(tx);
            l.dispatcher = Some(thread);
        }
        l.next += 1;
        let id = l.next;
        l.list.push((id, listener));
        self.listening.store(true, Ordering::Relaxed);
        Ok(id)
    }

    /// Removes a listener; with the last one the dispatcher stops (joined unless called on it).
    /// The events queued before are delivered first (to it too), waiting up to [`FLUSH`] for
    /// that, so that a client closed right after its last release still tells of it. Once it
    /// returns, the listener is not running and will not be called again, unless it is called on
    /// the dispatcher thread (by a listener), which cannot wait for itself.
    pub(crate) fn remove(&self, id: u64) {
        let (queue, on_dispatcher) = {
            let l = relock(&self.listeners);
            let on_dispatcher = l
                .dispatcher
                .as_ref()
                .is_some_and(|t| t.thread().id() == std::thread::current().id());
            (l.queue.clone(), on_dispatcher)
        };
        if let Some(q) = queue
            && !on_dispatcher
        {
            let (done, flushed) = crossbeam_channel::bounded(1);
            if q.send_timeout(Queued::Flush(done), FLUSH).is_ok() {
                let _ = flushed.recv_timeout(FLUSH);
            }
        }
        let thread = {
            let mut l = relock(&self.listeners);
            l.list.retain(|(i, _)| *i != id);
            let on_dispatcher = l
                .dispatcher
                .as_ref()
                .is_some_and(|t| t.thread().id() == std::thread::current().id());
            if !l.list.is_empty() {
                drop(l);
                if !on_dispatcher {
                    // Waits for a call in flight, which may have taken the old list.
                    drop(self.calling.write().unwrap_or_else(|e| e.into_inner()));
                }
                return;
            }
            self.listening.store(false, Ordering::Relaxed);
            l.queue = None;
            l.dispatcher.take()
        };
        if let Some(t) = thread
            && t.thread().id() != std::thread::current().id()
        {
            let _ = t.join();
        }
    }

    fn listeners(&self) -> Vec<Listener> {
        relock(&self.listeners)
            .list
            .iter()
            .map(|(_, l)| Arc::clone(l))
            .collect()
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self, nodes: Vec<NodeStatus>) -> Stats {
        let mut acquisitions = Vec::new();
        for (o, outcome) in OUTCOMES.iter().enumerate() {
            for (k, kind) in KINDS.iter().enumerate() {
                let h = self.acquire[o * KINDS.len() + k].snapshot();
                if h.count > 0 {
                    acquisitions.push(AcquireStats {
                        outcome,
                        kind,
                        duration: h,
                    });
                }
            }
        }
        Stats {
            acquisitions,
            hold: self.hold.snapshot(),
            wait: self.wait.snapshot(),
            extensions: self.extensions_ok.load(Ordering::Relaxed),
            extensions_failed: self.extensions_failed.load(Ordering::Relaxed),
            lost: LOST_REASONS
                .iter()
                .zip(&self.lost)
                .map(|(r, n)| (*r, n.load(Ordering::Relaxed)))
                .collect(),
            locks_held: self.held.load(Ordering::Relaxed),
            waiters: self.waiters.load(Ordering::Relaxed),
            events_dropped: self.dropped.load(Ordering::Relaxed),
            nodes,
        }
    }
}

/// The dispatcher: runs the listeners on the events, and reads the node status for node events
/// every [`NODE_POLL`].
///
/// Woken by an event, it waits [`GATHER`] for more before it runs the listeners on all of them:
/// a sender wakes the dispatcher only when it sleeps on the queue, so while events keep coming
/// (two per lock cycle) they cost a queue push each instead of a thread wake-up each.
fn dispatch(telemetry: Weak<Telemetry>, events: Receiver<Queued>, nodes: NodeReader) {
    // The baseline: what changes from here on is an event; but the warnings standing now
    // (those of the first connect: an `#insecure` URL, a replica) are events at the first poll.
    let Some(mut last) = nodes() else { return };
    for node in &mut last {
        node.warnings.clear();
    }
    let mut polled = Instant::now();
    let mut batch = Vec::new();
    let mut flushed = Vec::new();
    loop {
        let wait = (polled + NODE_POLL).saturating_duration_since(Instant::now());
        match events.recv_timeout(wait) {
            Ok(first) => {
                // A removal waiting for what was queued before it is served at once.
                if !matches!(first, Queued::Flush(_)) {
                    std::thread::sleep(GATHER);
                }
                for q in std::iter::once(first).chain(events.try_iter().take(EVENT_QUEUE)) {
                    match q {
                        Queued::Event(e) => batch.push(e),
                        Queued::Flush(done) => flushed.push(done),
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // The client is gone once its node status cannot be read: what was gathered is still
        // delivered, then the dispatcher ends.
        let mut gone = false;
        if polled.elapsed() >= NODE_POLL {
            polled = Instant::now();
            match nodes() {
                Some(now) => {
                    batch.extend(node_events(&last, &now));
                    last = now;
                }
                None => gone = true,
            }
        }
        if !batch.is_empty() {
            let Some(t) = telemetry.upgrade() else { return };
            let _calling = t.calling.read().unwrap_or_else(|e| e.into_inner());
            let listeners = t.listeners();
            for event in batch.drain(..) {
                for l in &listeners {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(&event)));
                }
            }
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
        if gone {
            return;
        }
    }
}

/// What changed between two readings of the node status.
fn node_events(before: &[NodeStatus], now: &[NodeStatus]) -> Vec<Event> {
    let mut out = Vec::new();
    for (b, n) in before.iter().zip(now) {
        let node = |kind: EventKind, reason: Option<String>| {
            let mut e = Event::new(kind);
            e.node = Some(n.address.clone());
            e.reason = reason;
            e
        };
        if n.connects > b.connects || (n.connected && !b.connected) {
            out.push(node(EventKind::NodeConnected, None));
        }
        if b.connected && !n.connected {
            out.push(node(EventKind::NodeDisconnected, n.last_error.clone()));
        }
        if n.restarts > b.restarts {
            out.push(node(EventKind::NodeRestarted, n.run_id.clone()));
        }
        // A Sentinel node's change of master is a restart for Redlock (see `topology::sentinel`).
        if n.failovers > b.failovers {
            out.push(node(
                EventKind::NodeRestarted,
                Some(format!(
                    "failover to {}",
                    n.master.as_deref().unwrap_or("an unknown master")
                )),
            ));
        }
        if n.quarantine_remaining.is_some()
            && (b.quarantine_remaining.is_none() || n.quarantine_reason != b.quarantine_reason)
        {
            out.push(node(
                EventKind::NodeQuarantined,
                n.quarantine_reason.clone(),
            ));
        }
        for w in n.warnings.iter().filter(|w| !b.warnings.contains(w)) {
            out.push(node(EventKind::ServerWarning, Some(w.clone())));
        }
    }
    out
}

/// Acquisitions of one outcome and kind.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AcquireStats {
    /// One of [`OUTCOMES`].
    pub outcome: &'static str,
    /// One of [`KINDS`].
    pub kind: &'static str,
    /// How long they took.
    pub duration: Histogram,
}

/// A snapshot of a client's counters ([`Redlock::stats`](crate::Redlock::stats)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Acquisitions by outcome and kind (the pairs seen so far), with their latency.
    pub acquisitions: Vec<AcquireStats>,
    /// How long locks were held, from the acquisition to the release or loss.
    pub hold: Histogram,
    /// How long waiters waited (acquisitions with a `wait`), whatever the outcome.
    pub wait: Histogram,
    /// Extensions that succeeded.
    pub extensions: u64,
    /// Extensions that failed without losing the lock (retried while validity remained).
    pub extensions_failed: u64,
    /// Held locks found lost, by reason (`refused`, `expired`, `suspended`).
    pub lost: Vec<(&'static str, u64)>,
    /// Locks held now.
    pub locks_held: u64,
    /// Acquisitions waiting now.
    pub waiters: u64,
    /// Events dropped because the listeners' queue was full.
    pub events_dropped: u64,
    /// Each node's status.
    pub nodes: Vec<NodeStatus>,
}

impl Stats {
    /// Acquisitions with this outcome (all kinds).
    pub fn acquisitions(&self, outcome: &str) -> u64 {
        self.acquisitions
            .iter()
            .filter(|a| a.outcome == outcome)
            .map(|a| a.duration.count)
            .sum()
    }

    /// The Prometheus text exposition format (version 0.0.4) of the snapshot.
    pub fn prometheus(&self) -> String {
        prometheus::render(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_changes_become_events() {
        let base = NodeStatus {
            address: "127.0.0.1:7000".into(),
            connected: true,
            connects: 1,
            last_error: None,
            run_id: Some("a".into()),
            uptime: None,
            restarts: 0,
            grace_remaining: None,
            server_version: None,
            server_name: None,
            persistence: None,
            warnings: Vec::new(),
            clock_offset_ms: None,
            quarantine_remaining: None,
            quarantine_reason: None,
            master: None,
            failovers: 0,
            command_duration: Histogram::default(),
            errors: 0,
            votes: Votes::default(),
        };
        let mut after = base.clone();
        after.connected = false;
        after.last_error = Some("connection refused".into());
        after.restarts = 1;
        after.warnings = vec!["evicting".into()];
        let kinds: Vec<EventKind> = node_events(&[base], &[after])
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                EventKind::NodeDisconnected,
                EventKind::NodeRestarted,
                EventKind::ServerWarning
            ]
        );
    }
}
