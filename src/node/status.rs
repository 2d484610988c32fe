//! What a node's workers publish about their connection and server, and how
//! `node_status()` reads it.
//!
//! Owns [`Health`], the record a worker writes as it goes (connected or not, the last error,
//! which server process it reached, the clock guard's offset and warnings, the command
//! durations and errors) and the node's handle reads; and the assembly of a [`NodeStatus`]
//! from it, with a `WAIT` lane's own record merged in. Uses only the telemetry types: it
//! decides nothing, the worker's parts (`connection.rs`, `server.rs`, `worker.rs`) fill it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::telemetry::histogram::AtomicHistogram;
use crate::telemetry::{NodeStatus, Votes};

/// `Health::clock_offset_ms` before the first sample.
const NO_OFFSET: i64 = i64::MIN;

/// How a connect ended, as the stall check sees it (see [`Health::end_connect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnectEnd {
    /// Connected, or failed on an answer or a refusal.
    Answered,
    /// Failed on a timeout: the node may accept connections but not answer.
    TimedOut,
    /// Cut short by a signal (see [`crate::wire::interrupted`]): says nothing of the node.
    Interrupted,
}

/// What one worker publishes; shared by the worker (writing) and the node's handle (reading).
pub(super) struct Health {
    pub connected: AtomicBool,
    pub connects: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    pub identity: Mutex<Identity>,
    /// The clock guard's latest offset of the node, ms (an atomic: it changes on every acquire).
    pub clock_offset_ms: AtomicI64,
    /// See `NodeStatus::command_duration` and `errors`.
    pub command_duration: AtomicHistogram,
    pub errors: AtomicU64,
    /// See `NodeStatus::votes`, in the order of [`VoteCount`].
    votes: [AtomicU64; 6],
    /// Since when the worker has waited on the node (a batch, a connect, a `PING`), in
    /// nanoseconds of [`clock_ns`] plus one; 0 while it waits for nothing.
    waiting_since: AtomicU64,
    /// The node let a wait run past the node timeout and has not answered within it since:
    /// callers skip it (see [`Health::stalled`]). Written by the worker alone.
    stalled: AtomicBool,
}

/// Nanoseconds since the first call in this process: an `Instant` that fits an atomic.
fn clock_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    u64::try_from(BASE.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Which server process the worker is talking to, as of the last connect.
#[derive(Default, Clone)]
pub(super) struct Identity {
    pub run_id: Option<String>,
    /// Uptime reported at `seen`.
    pub uptime: Option<(Duration, Instant)>,
    pub restarts: u64,
    pub grace_until: Option<Instant>,
    pub server_version: Option<String>,
    pub server_name: Option<String>,
    pub persistence: Option<String>,
    /// The server probe's warnings at the last connect.
    pub server_warnings: Vec<String>,
    /// The clock guard's latest warnings (a few).
    pub clock_warnings: Vec<String>,
    pub quarantine: Option<(Instant, String)>,
    /// A Sentinel node's master at the last connect, `host:port`.
    pub master: Option<String>,
    /// Its `master_replid` then.
    pub replid: Option<String>,
    pub failovers: u64,
}

/// A kind of vote in an acquire attempt (see [`Votes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VoteCount {
    Yes,
    No,
    Unavailable,
    TimedOut,
    Failed,
    Unanswered,
}

impl Health {
    /// Counts one of the node's votes in an acquire attempt.
    pub(super) fn count_vote(&self, vote: VoteCount) {
        self.votes[vote as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn votes(&self) -> Votes {
        let n = |v: VoteCount| self.votes[v as usize].load(Ordering::Relaxed);
        Votes {
            yes: n(VoteCount::Yes),
            no: n(VoteCount::No),
            unavailable: n(VoteCount::Unavailable),
            timed_out: n(VoteCount::TimedOut),
            failed: n(VoteCount::Failed),
            unanswered: n(VoteCount::Unanswered),
        }
    }

    /// A worker's record before its first connect.
    pub(super) fn new() -> Health {
        Health {
            connected: AtomicBool::default(),
            connects: AtomicU64::default(),
            last_error: Mutex::default(),
            identity: Mutex::default(),
            clock_offset_ms: AtomicI64::new(NO_OFFSET),
            command_duration: AtomicHistogram::default(),
            errors: AtomicU64::default(),
            votes: Default::default(),
            waiting_since: AtomicU64::default(),
            stalled: AtomicBool::default(),
        }
    }

    /// The worker begins to wait on the node.
    pub(super) fn begin_wait(&self) {
        self.waiting_since.store(clock_ns() + 1, Ordering::Relaxed);
    }

    /// The worker's wait for a round trip (a batch, a `PING`) ended after `took`: one longer
    /// than the node timeout starts a stall (or keeps it), one within it ends it, whatever the
    /// outcome. Only the worker marks or ends a stall, so that it knows, before it waits for its
    /// next job, whether to probe (see `Worker::next_job`).
    pub(super) fn end_wait(&self, took: Duration, node_timeout: Duration) {
        self.stalled.store(took > node_timeout, Ordering::Relaxed);
        // After the mark: a caller that sees the wait over sees the mark.
        self.waiting_since.store(0, Ordering::Release);
    }

    /// The worker's wait ended in a way that says nothing of the node's pace (a read cut short
    /// by a signal, see [`crate::wire::interrupted`]): a stall mark stays as it was.
    pub(super) fn end_wait_unjudged(&self) {
        self.waiting_since.store(0, Ordering::Release);
    }

    /// A connect ended after `took`, as `end` says. A connect takes several round trips, so only
    /// one that failed on a timeout after the node timeout (a node that accepts connections but
    /// does not answer) starts a stall; one cut short by a signal leaves the mark as it was;
    /// any other end, a refusal included (which the reconnect backoff paces), ends it.
    pub(super) fn end_connect(&self, took: Duration, end: ConnectEnd, node_timeout: Duration) {
        match end {
            ConnectEnd::Interrupted => {}
            ConnectEnd::TimedOut => self.stalled.store(took > node_timeout, Ordering::Relaxed),
            ConnectEnd::Answered => self.stalled.store(false, Ordering::Relaxed),
        }
        self.waiting_since.store(0, Ordering::Release);
    }

    /// Whether callers skip the node: its worker has been waiting on it for longer than the
    /// node timeout (and will mark it when that wait ends), or marked it stalled.
    pub(super) fn stalled(&self, node_timeout: Duration) -> bool {
        let since = self.waiting_since.load(Ordering::Acquire);
        if self.stalled.load(Ordering::Relaxed) {
            return true;
        }
        since != 0
            && clock_ns().saturating_sub(since - 1)
                > u64::try_from(node_timeout.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether the worker marked the node stalled (it then probes it while idle).
    pub(super) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// Publishes the clock guard's latest offset of the node.
    pub(super) fn set_clock_offset(&self, ms: i64) {
        self.clock_offset_ms.store(ms, Ordering::Relaxed);
    }

    /// Records the text of the latest error.
    pub(super) fn set_last_error(&self, why: String) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(why);
        }
    }

    /// The node's status as its first worker (this record) saw it, with what its `WAIT` lane
    /// saw (`lane`) merged in.
    pub(super) fn status(&self, address: &str, lane: Option<&Health>) -> NodeStatus {
        let now = Instant::now();
        let identity = self.identity.lock().map(|i| i.clone()).unwrap_or_default();
        let status = NodeStatus {
            address: address.to_owned(),
            connected: self.connected.load(Ordering::Relaxed),
            connects: self.connects.load(Ordering::Relaxed),
            last_error: self.last_error.lock().map_or(None, |e| e.clone()),
            run_id: identity.run_id,
            uptime: identity
                .uptime
                .map(|(uptime, seen)| uptime + now.saturating_duration_since(seen)),
            restarts: identity.restarts,
            grace_remaining: identity
                .grace_until
                .map(|until| until.saturating_duration_since(now))
                .filter(|left| !left.is_zero()),
            server_version: identity.server_version,
            server_name: identity.server_name,
            persistence: identity.persistence,
            warnings: identity
                .server_warnings
                .into_iter()
                .chain(identity.clock_warnings)
                .collect(),
            clock_offset_ms: Some(self.clock_offset_ms.load(Ordering::Relaxed))
                .filter(|ms| *ms != NO_OFFSET),
            quarantine_remaining: identity
                .quarantine
                .as_ref()
                .map(|(until, _)| until.saturating_duration_since(now))
                .filter(|left| !left.is_zero()),
            quarantine_reason: identity
                .quarantine
                .filter(|(until, _)| *until > now)
                .map(|(_, why)| why),
            master: identity.master,
            failovers: identity.failovers,
            command_duration: self.command_duration.snapshot(),
            errors: self.errors.load(Ordering::Relaxed),
            votes: self.votes(),
        };
        match lane {
            Some(lane) => with_lane(status, lane, now),
            None => status,
        }
    }
}
/// A node's status with what its `WAIT` lane saw: it carries the acquisitions and extensions,
/// so its clock samples, quarantine and restart grace are the ones that hold votes out.
fn with_lane(mut status: NodeStatus, lane: &Health, now: Instant) -> NodeStatus {
    let identity = lane.identity.lock().map(|i| i.clone()).unwrap_or_default();
    status.errors += lane.errors.load(Ordering::Relaxed);
    let offset = lane.clock_offset_ms.load(Ordering::Relaxed);
    if offset != NO_OFFSET {
        status.clock_offset_ms = Some(offset);
    }
    let left = |until: Instant| Some(until.saturating_duration_since(now)).filter(|d| !d.is_zero());
    if let Some(grace) = identity.grace_until.and_then(left)
        && status.grace_remaining.is_none_or(|g| g < grace)
    {
        status.grace_remaining = Some(grace);
    }
    if let Some((until, why)) = identity.quarantine
        && let Some(remaining) = left(until)
        && status.quarantine_remaining.is_none_or(|q| q < remaining)
    {
        status.quarantine_remaining = Some(remaining);
        status.quarantine_reason = Some(why);
    }
    status.warnings.extend(identity.clock_warnings);
    // The lane may see a failover first: after one, a holder's extensions go there while
    // nothing else talks to the node.
    if identity.failovers > status.failovers {
        status.failovers = identity.failovers;
        status.master = identity.master;
    }
    if !lane.connected.load(Ordering::Relaxed) {
        let why = lane.last_error.lock().map_or(None, |e| e.clone());
        status.warnings.push(format!(
            "the connection for min_replicas (acquisitions and extensions, with WAIT) is down: {}",
            why.as_deref().unwrap_or("not connected yet")
        ));
    }
    status
}
