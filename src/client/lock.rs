//! A held lock.
//!
//! The part of a lock that changes after it is acquired (its deadline, extension count, whether
//! it was released or lost) lives in [`Shared`], behind an `Arc`, because the client's extender
//! thread ([`crate::client::watchdog`]) updates it while the holder works. One mutex (`op`) serializes
//! every network operation on one lock — the holder's extend and release, Drop, and the
//! extender's extensions — so that once a release or drop has taken it and marked the lock
//! released, no extension can reach a node any more.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::engine::Engine;
use crate::error::{Error, Operation, QuorumReport, Result};
use crate::kinds::{Held, release_nonce};
use crate::rules::clock::ClockBoard;
use crate::rules::quorum::{Decision, earliest_expiry, validity_deadline};
use crate::sync::relock;
use crate::telemetry::{LOST_EXPIRED, LOST_REFUSED, LOST_SUSPENDED, Telemetry};

/// A lock acquired on a quorum of nodes. It stays valid for [`validity`](Lock::validity); after
/// that another owner may hold the resource.
///
/// [`release`](Lock::release) it when done. Dropping it unreleased releases it too, best effort
/// and without waiting for the nodes. A `Lock` keeps its client's workers alive.
///
/// A lock taken with [`LockRequest::auto_extend`](crate::LockRequest::auto_extend) is extended by
/// the client's extender thread while it is held; [`is_held`](Lock::is_held),
/// [`validity`](Lock::validity) and [`lost`](Lock::lost) tell the holder the truth.
pub struct Lock {
    engine: Arc<Engine>,
    /// The client this lock came from, kept alive (with its extender) while the lock is held.
    _client: Arc<dyn Any + Send + Sync>,
    resource: Arc<str>,
    token: Arc<str>,
    shared: Arc<Shared>,
}

/// The signal behind [`Lock::lost`], made when first asked for: most locks never are.
enum EndSignal {
    /// The lock lasts; the channel, once [`Lock::lost`] was called.
    Held(Option<(Sender<()>, Receiver<()>)>),
    /// The lock ended: its sender is dropped, which disconnected every receiver.
    Ended,
}

/// The mutable part of a lock, shared with the extender thread.
pub(crate) struct Shared {
    pub(crate) resource: Arc<str>,
    pub(crate) token: Arc<str>,
    /// Which commands extend and release the lock, and what the kind carries.
    kind: Box<dyn Held>,
    /// Cap on extensions, from the request or the client.
    max_extensions: Option<u32>,
    /// Held for the whole of each network operation on the lock.
    op: Mutex<()>,
    state: Mutex<State>,
    /// The signal behind [`Lock::lost`].
    ended: Mutex<EndSignal>,
    on_lost: Mutex<Vec<LostCallback>>,
    /// The client's clock board and its count of our host's suspensions before the
    /// acquisition began: once that count moves, the validity (kept on our monotonic clock,
    /// which stood still meanwhile) is wrong and the lock is reported lost.
    board: Arc<ClockBoard>,
    epoch: u64,
    /// Where the lock's end is counted, and its kind's name there.
    telemetry: Arc<Telemetry>,
    kind_name: &'static str,
    acquired_at: Instant,
    /// What the release announces itself with (see [`release_nonce`]), chosen at the
    /// acquisition so that the queue's turn message can name it.
    nonce: Arc<str>,
}

type LostCallback = Box<dyn FnOnce(&str) + Send>;

struct State {
    /// Until when the lock is safe to rely on.
    deadline: Instant,
    /// Until when its keys may live on some node: the latest `t0 + ttl + node_timeout` of the
    /// acquire and of every extension sent, successful or not (a node may have applied it). A
    /// release that finds a node down is kept for it until then.
    keys_until: Instant,
    extensions: u32,
    released: bool,
    lost: bool,
}

impl Shared {
    fn new(
        resource: Arc<str>,
        acquired: Acquired,
        board: Arc<ClockBoard>,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        let Acquired {
            token,
            deadline,
            keys_until,
            kind,
            max_extensions,
            epoch,
            kind_name,
        } = acquired;
        telemetry.began();
        Shared {
            resource,
            token,
            kind,
            max_extensions,
            op: Mutex::new(()),
            state: Mutex::new(State {
                deadline,
                keys_until,
                extensions: 0,
                released: false,
                lost: false,
            }),
            ended: Mutex::new(EndSignal::Held(None)),
            on_lost: Mutex::new(Vec::new()),
            board,
            epoch,
            telemetry,
            kind_name,
            acquired_at: Instant::now(),
            nonce: release_nonce(),
        }
    }

    /// Whether our host was suspended since the acquisition began (see the clock guard).
    pub(crate) fn host_was_suspended(&self) -> bool {
        self.board.epoch() != self.epoch
    }

    /// Marks the lock lost if our host was suspended since it was acquired. Call without
    /// holding `op` or `on_lost`.
    pub(crate) fn check_suspension(&self) {
        if !self.is_over() && self.host_was_suspended() {
            self.mark_lost(LOST_SUSPENDED);
        }
    }

    pub(crate) fn op(&self) -> std::sync::MutexGuard<'_, ()> {
        relock(&self.op)
    }

    /// Time left; zero once released or lost. Marks the lock lost if our host was suspended
    /// since it was acquired, so call it without holding `op` (callbacks may run).
    pub(crate) fn validity(&self) -> Duration {
        {
            let s = relock(&self.state);
            if s.released || s.lost {
                return Duration::ZERO;
            }
        }
        if self.host_was_suspended() {
            self.mark_lost(LOST_SUSPENDED);
            return Duration::ZERO;
        }
        relock(&self.state)
            .deadline
            .saturating_duration_since(Instant::now())
    }

    pub(crate) fn is_held(&self) -> bool {
        !self.validity().is_zero()
    }

    pub(crate) fn is_lost(&self) -> bool {
        relock(&self.state).lost
    }

    /// Released or lost: nothing more to extend.
    pub(crate) fn is_over(&self) -> bool {
        let s = relock(&self.state);
        s.released || s.lost
    }

    pub(crate) fn deadline(&self) -> Instant {
        relock(&self.state).deadline
    }

    pub(crate) fn keys_until(&self) -> Instant {
        relock(&self.state).keys_until
    }

    pub(crate) fn max_extensions(&self) -> Option<u32> {
        self.max_extensions
    }

    pub(crate) fn extensions(&self) -> u32 {
        relock(&self.state).extensions
    }

    /// Ends the lock's signal, and counts its end once (`lost`: why, an index of
    /// `telemetry::LOST_REASONS`).
    fn end(&self, lost: Option<usize>) {
        let signal = std::mem::replace(&mut *relock(&self.ended), EndSignal::Ended);
        if let EndSignal::Held(channel) = signal {
            // Every receiver disconnects before the end is counted.
            drop(channel);
            self.telemetry.ended(
                &self.resource,
                self.kind_name,
                self.acquired_at.elapsed(),
                lost,
            );
        }
    }

    /// Marks the lock lost (unless it was released meanwhile) for `reason` (an index of
    /// `telemetry::LOST_REASONS`) and tells whoever listens. Call without holding `op`:
    /// callbacks may call back into the lock.
    pub(crate) fn mark_lost(&self, reason: usize) {
        {
            let mut s = relock(&self.state);
            if s.released || s.lost {
                return;
            }
            s.lost = true;
        }
        self.end(Some(reason));
        let callbacks = std::mem::take(&mut *relock(&self.on_lost));
        for cb in callbacks {
            // A panicking callback must neither skip the others nor end the extender thread.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&self.resource)));
        }
    }

    pub(crate) fn on_lost(&self, cb: LostCallback) {
        {
            let mut callbacks = relock(&self.on_lost);
            if !self.is_lost() {
                callbacks.push(cb);
                return;
            }
        }
        cb(&self.resource);
    }

    pub(crate) fn lost_error(&self, report: Option<QuorumReport>) -> Error {
        Error::Lost {
            resource: self.resource.to_string(),
            report: report.map(Box::new),
        }
    }

    /// Whether the lock may be extended now, and the TTL in milliseconds if so; otherwise the
    /// error, and why the lock was found lost if it was.
    fn may_extend(
        &self,
        engine: &Engine,
        ttl: Duration,
    ) -> std::result::Result<u64, (Error, Option<usize>)> {
        if relock(&self.state).released {
            return Err((self.lost_error(None), None));
        }
        // Past its validity another owner may have come and gone; a reentrant owner's name
        // (reused by its other holds) could even make the extension succeed. Lost, not revived.
        // After a suspension of our host the keys may have expired on the nodes while we slept,
        // and another owner taken them: extending could stretch a lock no longer ours alone.
        if self.host_was_suspended() {
            return Err((self.lost_error(None), Some(LOST_SUSPENDED)));
        }
        if Instant::now() >= self.deadline() {
            return Err((self.lost_error(None), Some(LOST_EXPIRED)));
        }
        let ttl_ms = engine.config.ttl_ms(ttl).map_err(|e| (e, None))?;
        if let Some(max) = self.max_extensions
            && relock(&self.state).extensions >= max
        {
            let limit = Error::ExtensionLimit {
                resource: self.resource.to_string(),
                max_extensions: max,
            };
            return Err((limit, None));
        }
        Ok(ttl_ms)
    }

    /// One quorum extension; the caller holds `op`. Returns why the lock was found lost, if it
    /// was (the caller then calls [`mark_lost`](Shared::mark_lost) once it has let go of `op`).
    pub(crate) fn extend_locked(
        &self,
        engine: &Engine,
        ttl: Duration,
    ) -> (Result<()>, Option<usize>) {
        let ttl_ms = match self.may_extend(engine, ttl) {
            Ok(ms) => ms,
            Err((e, lost)) => return (Err(e), lost),
        };
        let config = &engine.config;
        let ttl = Duration::from_millis(ttl_ms);
        let extend = self.kind.extend(ttl_ms).extending();
        let outcome = engine.quorum_call(&extend, &self.resource, &self.token);
        {
            let sent_until = outcome.t0 + ttl + config.node_timeout;
            let mut s = relock(&self.state);
            s.keys_until = s.keys_until.max(sent_until);
        }
        if outcome.decision == Decision::Quorum
            && let Some(deadline) =
                validity_deadline(outcome.t0, outcome.decided, ttl, config.drift_factor)
        {
            {
                let mut s = relock(&self.state);
                s.deadline = deadline;
                s.extensions += 1;
            }
            engine
                .telemetry
                .extension(&self.resource, self.kind_name, true);
            return (Ok(()), None);
        }
        let report = outcome.report(engine);
        if outcome.decision == Decision::Refused {
            relock(&self.state).deadline = outcome.decided;
            return (Err(self.lost_error(Some(report))), Some(LOST_REFUSED));
        }
        engine
            .telemetry
            .extension(&self.resource, self.kind_name, false);
        // Nodes that applied the new TTL keep the key until t0 + ttl, the others until the old
        // deadline: the earlier of the two still holds on a quorum.
        {
            let mut s = relock(&self.state);
            s.deadline = s
                .deadline
                .min(earliest_expiry(outcome.t0, ttl, config.drift_factor));
        }
        (
            Err(Error::NoQuorum {
                resource: self.resource.to_string(),
                operation: Operation::Extend,
                attempts: 1,
                report: Box::new(report),
            }),
            None,
        )
    }
}

/// What an acquisition got: the parts a [`Lock`] is made of.
pub(crate) struct Acquired {
    pub token: Arc<str>,
    /// Until when the lock is safe to rely on.
    pub deadline: Instant,
    /// Until when its keys may live on some node.
    pub keys_until: Instant,
    pub kind: Box<dyn Held>,
    /// Cap on extensions, from the request or the client.
    pub max_extensions: Option<u32>,
    /// Our host's suspensions counted before the acquisition began ([`ClockBoard::epoch`]).
    pub epoch: u64,
    /// The kind's name in metrics and events.
    pub kind_name: &'static str,
}

impl Lock {
    pub(crate) fn new(
        engine: Arc<Engine>,
        client: Arc<dyn Any + Send + Sync>,
        resource: Arc<str>,
        acquired: Acquired,
    ) -> Self {
        let token = Arc::clone(&acquired.token);
        let shared = Arc::new(Shared::new(
            Arc::clone(&resource),
            acquired,
            Arc::clone(&engine.board),
            Arc::clone(&engine.telemetry),
        ));
        Lock {
            engine,
            _client: client,
            resource,
            token,
            shared,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The fencing token of a lock from [`LockRequest::fenced`](crate::LockRequest::fenced): greater than the token of
    /// every fenced lock on the same resource whose holder came before this one (see the crate
    /// docs on fencing). `None` for other kinds of lock.
    pub fn fence(&self) -> Option<u64> {
        self.shared.kind.fence()
    }

    /// For a lock from [`LockRequest::reentrant`](crate::LockRequest::reentrant): how many holds its owner had on the
    /// resource once this one was counted (1 for the outermost), as the quorum's nodes reported
    /// it (the largest count among them). `None` for other kinds of lock.
    pub fn hold_count(&self) -> Option<u64> {
        self.shared.kind.hold_count()
    }

    /// For a permit of a [`LockRequest::semaphore`](crate::LockRequest::semaphore): which slot
    /// it holds, from 0 to the number of permits minus 1 (no two valid holders share one).
    /// `None` for other kinds of lock.
    pub fn permit(&self) -> Option<u32> {
        self.shared.kind.permit()
    }

    /// The resources this lock holds: one, or for [`LockRequest::many`](crate::LockRequest::many) all of them, sorted.
    pub fn resources(&self) -> Vec<&str> {
        match self.shared.kind.resources() {
            Some(keys) => keys.iter().map(|k| &**k).collect(),
            None => vec![&*self.resource],
        }
    }

    /// The locked resource (the Redis key); for [`LockRequest::many`](crate::LockRequest::many), the sorted names joined
    /// with `,` (see [`resources`](Lock::resources) for the list).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The random value that marks this acquisition on every node; for a reentrant lock, the
    /// owner (its hold's own id, which the nodes see after a NUL, is not shown).
    pub fn token(&self) -> &str {
        self.token.split('\0').next().unwrap_or_default()
    }

    /// Time left before the lock may expire on the nodes; zero once released, lost or expired.
    /// Finish the protected work (or [`extend`](Lock::extend)) within it. For an auto-extended
    /// lock the extender moves it forward after each extension.
    pub fn validity(&self) -> Duration {
        self.shared.validity()
    }

    /// Whether the lock is still ours: not released, not found lost, validity left.
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// Whether the lock was found lost: an extension (by the extender or by
    /// [`extend`](Lock::extend)) found it no longer ours on a quorum, an auto-extended lock's
    /// validity ran out before it could be extended, or (with the clock guard on) this host
    /// was suspended while the lock was held, so its validity, measured on our monotonic clock
    /// that stood still, is wrong. A released lock is not lost.
    ///
    /// A suspension is noticed by the extender's next tick (auto-extended locks), by this
    /// call, [`is_held`](Lock::is_held), [`validity`](Lock::validity), [`lost`](Lock::lost)
    /// and [`extend`](Lock::extend).
    pub fn is_lost(&self) -> bool {
        self.shared.check_suspension();
        self.shared.is_lost()
    }

    /// A channel that disconnects when the lock ends: when it is found lost, and also when it is
    /// released or dropped. Like Go's `ctx.Done()`: `recv()` blocks while the lock is held and
    /// returns `Err` once it is not; [`is_lost`](Lock::is_lost) tells why. Cheap to poll
    /// (`try_recv`) and usable in `crossbeam_channel::select!`. Nothing is ever sent on it.
    pub fn lost(&self) -> Receiver<()> {
        self.shared.check_suspension();
        match &mut *relock(&self.shared.ended) {
            EndSignal::Held(channel) => channel
                .get_or_insert_with(|| crossbeam_channel::bounded(0))
                .1
                .clone(),
            // Its sender dropped at once: disconnected, as the lock is over.
            EndSignal::Ended => crossbeam_channel::bounded(0).1,
        }
    }

    /// Runs `callback` (with the resource name) once if the lock is found lost; at once, on this
    /// thread, if it already was. For an auto-extended lock it runs on the client's extender
    /// thread: keep it short, it delays the other locks' extensions. A release or drop does not
    /// run it.
    pub fn on_lost(&self, callback: impl FnOnce(&str) + Send + 'static) {
        self.shared.on_lost(Box::new(callback));
    }

    /// Whether [`release`](Lock::release) was called (through the C ABI, say).
    pub fn is_released(&self) -> bool {
        relock(&self.shared.state).released
    }

    /// Sets the lock's TTL on every node to `ttl` from now, if it is still ours.
    ///
    /// Succeeds when a quorum extended it with validity left; then [`validity`](Lock::validity)
    /// is `ttl` minus the time taken and the drift allowance. [`Error::Lost`] when the lock is
    /// no longer ours on enough nodes; [`Error::NoQuorum`] when too few nodes answered, in which
    /// case the old validity (or the new one, if shorter) still stands. A failed extend never
    /// deletes keys.
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        let (result, lost) = {
            let _op = self.shared.op();
            self.shared.extend_locked(&self.engine, ttl)
        };
        if let Some(reason) = lost {
            self.shared.mark_lost(reason);
        }
        result
    }

    /// The nonce its release will be announced with.
    pub(crate) fn release_nonce(&self) -> &str {
        &self.shared.nonce
    }

    /// Releases the lock on every node, deleting only keys that still hold this lock's token.
    ///
    /// Ok when a quorum deleted it (its keys lived there from the acquisition on, so no one
    /// else held it meanwhile, even past its validity); [`Error::Lost`] when it was no longer
    /// ours on enough nodes, or its validity had run out before a release that a quorum did not
    /// confirm (either way the protected work may have overlapped another owner's);
    /// [`Error::NoQuorum`] when too few nodes answered (their keys expire with the TTL).
    /// Afterwards [`validity`](Lock::validity) is zero, [`extend`](Lock::extend) reports
    /// [`Error::Lost`], and releasing again does nothing. Calls on one lock from several threads
    /// are serialized: a release waits for an extension in flight, which then cannot reach a
    /// node after it.
    pub fn release(&self) -> Result<()> {
        let _op = self.shared.op();
        // Its validity ran out before the release: unless a quorum deletes its keys (which lived
        // there all along), the work it protected may have overlapped another owner's, whatever
        // else the nodes answer (a refusal resent after a dropped connection counts as no
        // answer, and may be all they give).
        let expired = self.shared.validity().is_zero();
        if !self.mark_released() {
            return Ok(());
        }
        let kind = &self.shared.kind;
        let release = kind.release(Arc::clone(&self.shared.nonce));
        let live_until = Some(self.shared.keys_until());
        let outcome = self
            .engine
            .release_call(&release, &self.resource, &self.token, live_until);
        match outcome.decision {
            Decision::Quorum => Ok(()),
            // Lost when its validity had run out, or when enough nodes said it is not ours:
            // refusals with failures (a node that timed out may still hold the key) are too few
            // answers, as for unreachable.
            _ if expired || outcome.tally.refused_by_a_majority() => {
                Err(self.shared.lost_error(Some(outcome.report(&self.engine))))
            }
            Decision::Refused | Decision::Unreachable => Err(Error::NoQuorum {
                resource: self.resource.to_string(),
                operation: Operation::Release,
                attempts: 1,
                report: Box::new(outcome.report(&self.engine)),
            }),
        }
    }

    /// Marks the lock released and ends its signal; false if it already was released.
    fn mark_released(&self) -> bool {
        {
            let mut s = relock(&self.shared.state);
            if s.released {
                return false;
            }
            s.released = true;
        }
        self.shared.end(None);
        true
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Taking `op` waits for an extension in flight (at most node_timeout), so none reaches
        // a node after the release below.
        let _op = self.shared.op();
        if self.mark_released() {
            let kind = &self.shared.kind;
            let release = kind.release(Arc::clone(&self.shared.nonce));
            // A node that is down meanwhile gets the release once it is back, while the keys
            // may still live there.
            let live_until = Some(self.shared.keys_until());
            self.engine
                .send_nowait(&release, &self.resource, &self.token, None, live_until);
        }
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.resource)
            .field("validity", &self.validity())
            .field("released", &self.is_released())
            .field("lost", &self.is_lost())
            .field("kind", &self.shared.kind)
            .finish_non_exhaustive()
    }
}
