//! The client facade: the acquisition loop every kind goes through, and the shorthands.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::config::{Builder, Config, MAX_TTL};
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Operation, Result};
use crate::inspect::{self, ForcedRelease, Inspection};
use crate::kinds::{SCRIPTS, free_in};
use crate::lock::{Acquired, Lock};
use crate::node::NodeStatus;
use crate::notify::{Notifier, Subscription, Turn, Wake};
use crate::options::LockOptions;
use crate::quorum::{Decision, backoff_delay, quorum, retry_delay, validity_deadline};
use crate::request::{AutoExtend, LockRequest, Patience};
use crate::sync::relock;
use crate::token::new_token;
use crate::watchdog::{Job, Watchdog};
use crate::wire::Script;

/// What every connection loads: the kinds' scripts and the operator's.
static SCRIPT_SETS: [&[&Script]; 2] = [&SCRIPTS, &crate::inspect::SCRIPTS];

/// Longest fallback wait between two attempts of a waiter that gets no notification (or
/// `retry_delay`, if that is longer).
const WAIT_BACKOFF_CAP: Duration = Duration::from_secs(1);

/// A Redlock client over N independent Redis nodes.
///
/// Cheap to clone (clones share the workers) and safe to use from many threads at once: their
/// requests to a node share one connection and are pipelined. The workers stop when the last
/// clone and the last [`Lock`] from it are dropped.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<Engine>,
    /// The extender thread, started with the first auto-extended lock.
    watchdog: Mutex<Option<Watchdog>>,
    /// The subscriber threads, started with the first waiter.
    notifier: Mutex<Option<Arc<Notifier>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Neither the extender nor the subscribers hold a strong reference between two
        // operations, so they are idle and stop at once; the workers stop with the engine.
        let limit = self.engine.config.io_timeout();
        if let Some(w) = relock(&self.watchdog).take() {
            w.stop(limit);
        }
        if let Some(n) = relock(&self.notifier).take()
            && let Some(mut n) = Arc::into_inner(n)
        {
            n.stop(limit);
        }
    }
}

impl Builder {
    /// Validates the configuration and starts the client: one worker per node, all connecting
    /// in parallel. Returns once each has connected or failed to (at most the connect timeout,
    /// 500 ms by default); unreachable nodes do not fail the build, their workers keep trying.
    pub fn build(self) -> Result<Redlock> {
        let (clients, config) = self.finish()?;
        Redlock::start(clients, config)
    }
}

impl Redlock {
    /// Starts configuring a client.
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn start(clients: Vec<redis::Client>, config: Config) -> Result<Redlock> {
        let engine = Engine::start(clients, config, &SCRIPT_SETS)?;
        Ok(Redlock {
            inner: Arc::new(Inner {
                engine: Arc::new(engine),
                watchdog: Mutex::new(None),
                notifier: Mutex::new(None),
            }),
        })
    }

    /// Acquires a lock as `request` describes it: its kind, its patience, auto-extension and
    /// cancellation (see [`LockRequest`]).
    ///
    /// Errors: [`Error::NotAcquired`] (held by another owner through the last attempt),
    /// [`Error::NoQuorum`] (too few nodes answered), [`Error::Cancelled`] (the request's cancel
    /// fired first), [`Error::InvalidArgument`] (a bad part of the request: empty resource or
    /// owner, TTL zero, too small to leave any validity, or over 10 years, an `extend fraction`
    /// outside (0, 1) or a TTL too short to be extended in time). Every failed or cancelled
    /// attempt's undo is sent to every node that may hold its key before this returns. One
    /// exception: a reentrant hold is undone only where it was counted (elsewhere the undo would
    /// take away one of the owner's other holds), so a hold whose answer was lost (a dropped
    /// connection after the node ran it) or came after `node_timeout` stays until its TTL.
    pub fn acquire(&self, request: &LockRequest) -> Result<Lock> {
        let kind = request.checked_kind()?;
        let engine = &self.inner.engine;
        let config = engine.config;
        let ttl_ms = config.ttl_ms(request.ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        let every = match &request.auto_extend {
            Some(auto) => Some(extension_interval(auto, ttl, &config)?),
            None => None,
        };
        let delay = request.retry_delay.unwrap_or(config.retry_delay);
        let jitter = request.retry_jitter.unwrap_or(config.retry_jitter);
        if delay > MAX_TTL || jitter > MAX_TTL {
            return Err(Error::invalid(
                "retry_delay and retry_jitter must each be at most 10 years",
            ));
        }
        let (retries, wait_until) = match request.patience {
            Patience::Default => (config.retry_count, None),
            Patience::Retries(n) => (n, None),
            Patience::Wait(limit) => (
                u32::MAX,
                Some(
                    Instant::now()
                        .checked_add(limit.min(MAX_TTL))
                        .ok_or_else(|| Error::invalid("wait timeout is too large"))?,
                ),
            ),
        };
        let cancel = request.cancel.as_ref();
        let resource = kind.resource();
        let cancelled = || Error::Cancelled {
            resource: resource.to_string(),
        };
        let notify = wait_until.is_some() && request.notifications;
        // A notified waiter's fallback wait after `round` of them, in case a release goes unheard.
        let fallback = |round: u32| {
            backoff_delay(
                delay.max(Duration::from_millis(1)),
                round,
                WAIT_BACKOFF_CAP.max(delay),
                rand::random(),
            )
        };
        let queues = notify && kind.queues();
        let mut attempt: u32 = 0;
        // Waiters only: our subscription to release notifications, and how many fallback waits
        // have passed.
        let mut subscription: Option<Subscription> = None;
        let mut round: u32 = 0;
        if queues
            && let Some(notifier) = self.started_notifier()
            && notifier.queued(resource) > 0
        {
            // Another waiter of this client is ahead: queue behind it without trying, as the
            // resource is held. The kind's own checks (a thread waiting for itself) come first.
            kind.token()?;
            subscription =
                Some(notifier.subscribe(kind.keys(), config.node_timeout, false, true, cancel));
        }
        loop {
            if cancel.is_some_and(Cancel::is_cancelled) {
                return Err(cancelled());
            }
            if let (Some(sub), Some(deadline)) = (&subscription, wait_until) {
                // A queued waiter tries once at the front of its queue (or at its deadline, a
                // last time); it waits there for the lock of the one before to be released.
                match sub.turn(deadline, cancel) {
                    Turn::Now | Turn::TimedOut => {}
                    Turn::Cancelled => return Err(cancelled()),
                    Turn::HeldUntil(until) => {
                        let now = Instant::now();
                        let held = until.saturating_duration_since(now) + Duration::from_millis(1);
                        let mut pause = held.min(deadline.saturating_duration_since(now));
                        if !sub.healthy() {
                            pause = pause.min(fallback(round));
                        }
                        if sub.wait(pause, cancel) == Wake::Cancelled {
                            return Err(cancelled());
                        }
                    }
                }
            }
            attempt = attempt.saturating_add(1);
            // Most kinds try themselves; a semaphore tries its slots in turn.
            let candidates = kind.candidates();
            // Without an allocation for the common case of the kind trying itself.
            let itself = candidates
                .as_ref()
                .is_none_or(Vec::is_empty)
                .then_some(&**kind);
            let tries = candidates.iter().flatten().map(|k| &**k).chain(itself);
            let mut failed = None;
            // Whether a refused attempt of this round was granted by some node: the refusals
            // may then come from other waiters' attempts rather than from a holder.
            let mut contested = false;
            for this in tries {
                if cancel.is_some_and(Cancel::is_cancelled) {
                    return Err(cancelled());
                }
                let mut token = this.token()?;
                if let Some(t) = &request.test_token {
                    token = Arc::clone(t);
                }
                // Our host's suspensions before the batch: one during it makes the validity
                // measured on our monotonic clock wrong, so the attempt fails and is undone.
                let epoch = engine.board.epoch();
                let mut outcome = engine.fan_out(
                    &this.acquire(ttl_ms, &config),
                    resource,
                    &token,
                    None,
                    cancel,
                );
                // The last quorum call of the attempt, if the kind made one after the acquire.
                let mut last: Option<Outcome> = None;
                if outcome.decision == Decision::Quorum && !outcome.cancelled {
                    let grant = this.grant(engine, &outcome, &token);
                    last = grant.last;
                    let decided = last.as_ref().map_or(outcome.decided, |l| l.decided);
                    if let Some(held) = grant.held
                        && let Some(deadline) =
                            validity_deadline(outcome.t0, decided, ttl, config.drift_factor)
                        && engine.board.epoch() == epoch
                    {
                        // A cancel that comes now is too late: the caller owns the lock.
                        if let Some(sub) = &subscription {
                            sub.acquired(outcome.t0 + ttl + config.node_timeout);
                        }
                        let max_extensions = request
                            .auto_extend
                            .and_then(|a| a.max_extensions)
                            .or(config.max_extensions);
                        let lock = Lock::new(
                            Arc::clone(engine),
                            Arc::clone(&self.inner) as _,
                            Arc::clone(resource),
                            Acquired {
                                token,
                                deadline,
                                keys_until: outcome.t0 + ttl + config.node_timeout,
                                kind: held,
                                max_extensions,
                                epoch,
                            },
                        );
                        if let (Some(every), Some(auto)) = (every, request.auto_extend) {
                            // Should the extender fail to start, dropping the lock releases it.
                            self.watch(&lock, ttl, every, auto.max_hold)?;
                        }
                        return Ok(lock);
                    }
                }
                if wait_until.is_some()
                    && outcome.decision == Decision::Refused
                    && !outcome.cancelled
                {
                    // The answers that came just after the decision: whether any granted this
                    // attempt decides how long a waiter may sleep (below), and the undo then
                    // goes only where it is needed.
                    outcome.settle();
                    // A node still silent (slow or hung) may have granted it too: better one
                    // needless retry on the backoff than a waiter asleep until keys expire.
                    contested |= outcome.tally.yes() > 0
                        || outcome.tally.votes().count() < outcome.tally.nodes();
                }
                // A SET may have landed where the reply was lost, late or cut short by a
                // cancel: undo it everywhere before anything else.
                this.undo(engine, &outcome, &token, ttl);
                if outcome.cancelled {
                    return Err(cancelled());
                }
                if let Some(e) = this.conflict(&outcome) {
                    return Err(e);
                }
                // Only a plain refusal moves on to the next candidate.
                let next = outcome.decision == Decision::Refused && last.is_none();
                failed = Some((token, outcome, last));
                if !next {
                    break;
                }
            }
            let Some((token, outcome, last)) = failed else {
                unreachable!("an attempt tries at least one candidate")
            };
            let refused = outcome.decision == Decision::Refused;
            let pause = match wait_until {
                None => (attempt <= retries).then(|| retry_delay(delay, jitter, rand::random())),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        None
                    } else if !notify {
                        Some(retry_delay(delay, jitter, rand::random()).min(left))
                    } else {
                        Some(fallback(round).min(left))
                    }
                }
            };
            let Some(mut pause) = pause else {
                // A failed fence write-back is reported as such: too few nodes took it.
                let report = last.as_ref().unwrap_or(&outcome).report(engine);
                return Err(if last.is_none() && refused {
                    Error::NotAcquired {
                        resource: resource.to_string(),
                        attempts: attempt,
                        report,
                    }
                } else {
                    Error::NoQuorum {
                        resource: resource.to_string(),
                        operation: Operation::Acquire,
                        attempts: attempt,
                        report,
                    }
                });
            };
            let mut just_subscribed = false;
            if notify && refused && subscription.is_none() {
                // Subscribed from now on: a release from here is heard. One that came before
                // the subscription was active shows in the remaining TTLs read next.
                subscription = Some(self.notifier()?.subscribe(
                    kind.keys(),
                    config.node_timeout,
                    kind.shared(),
                    queues,
                    cancel,
                ));
                just_subscribed = true;
            }
            if let Some(sub) = &subscription
                && !sub.at_front()
            {
                // Queued behind another waiter: its turn comes first (at the loop's top).
                continue;
            }
            if wait_until.is_some() && refused {
                // Never sleep past the moment the holder's keys expire on a quorum: a lost
                // notification then costs at most the holder's TTL.
                let read = engine.fan_out(&kind.remaining(), resource, &token, None, cancel);
                let free = free_in(&read, quorum(engine.node_count()));
                if just_subscribed && free.is_none() {
                    // No TTLs to go by (a key without one, or PTTL not allowed): try again at
                    // once, for a release that came before the subscription was active.
                    continue;
                }
                if let Some(free) = free {
                    let free = free + Duration::from_millis(1);
                    let left =
                        wait_until.map_or(free, |d| d.saturating_duration_since(Instant::now()));
                    pause = if !contested && subscription.as_ref().is_some_and(|s| s.healthy()) {
                        // A release would be heard: no polling, only a look once the holder's
                        // keys should be gone (it expired, or its release went unheard). Not
                        // after a split vote: the keys of attempts that are being undone
                        // (whose undo announces nothing) may be all there is.
                        free.min(left)
                    } else {
                        pause.min(free)
                    };
                }
            }
            let wake = match (&subscription, cancel) {
                (Some(sub), _) if refused => sub.wait(pause, cancel),
                (_, Some(c)) => match c.fired().recv_timeout(pause) {
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => Wake::TimedOut,
                    _ => Wake::Cancelled,
                },
                (_, None) => {
                    std::thread::sleep(pause);
                    Wake::TimedOut
                }
            };
            match wake {
                Wake::Released => {}
                Wake::TimedOut => round = round.saturating_add(1),
                Wake::Cancelled => return Err(cancelled()),
            }
        }
    }

    /// Counts a suspension of this host, as the clock guard does when it sees one: every lock
    /// this client holds is then reported lost. Only for tests, which cannot suspend the host
    /// they run on; not part of the API.
    #[doc(hidden)]
    pub fn simulate_host_suspension(&self) {
        self.inner.engine.board.simulate_suspension();
    }

    /// How many of this client's waiters are queued on `resource`, waiting for their turn or at
    /// the front. Only for tests, which wait for a waiter to be queued; not part of the API.
    #[doc(hidden)]
    pub fn queued_waiters(&self, resource: &str) -> usize {
        self.started_notifier().map_or(0, |n| n.queued(resource))
    }

    /// Acquires `resource` for `ttl`, retrying up to `retry_count` times after a random delay:
    /// `acquire(&LockRequest::new(resource, ttl))`.
    pub fn lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl))
    }

    /// Like [`lock`](Redlock::lock), with a single attempt.
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).once())
    }

    /// Acquires `resource` for `ttl` as [`options`](LockOptions) say; the request form of
    /// the same is [`LockOptions::request`].
    pub fn lock_with(&self, resource: &str, ttl: Duration, options: LockOptions) -> Result<Lock> {
        self.acquire(&options.request(resource, ttl)?)
    }

    /// Runs `f` under an auto-extended lock on `resource` and releases it afterwards (also when
    /// `f` panics: the lock is dropped while unwinding, which releases it and stops extension).
    /// See [`with_request`](Redlock::with_request).
    pub fn with_lock<T>(
        &self,
        resource: &str,
        ttl: Duration,
        f: impl FnOnce(&Lock) -> T,
    ) -> Result<T> {
        self.with_request(&LockRequest::new(resource, ttl), f)
    }

    /// Runs `f` under the lock `request` describes, auto-extended (with the request's settings,
    /// or the defaults if it has none), and releases it afterwards, also when `f` panics.
    ///
    /// `f` gets the lock, to check [`Lock::is_held`] or select on [`Lock::lost`] during long
    /// work. Returns `f`'s value, or [`Error::Lost`] if the lock was lost while `f` ran (the
    /// work may have overlapped another holder's); acquisition errors as for
    /// [`acquire`](Redlock::acquire).
    pub fn with_request<T>(&self, request: &LockRequest, f: impl FnOnce(&Lock) -> T) -> Result<T> {
        let lock = if request.auto_extend.is_some() {
            self.acquire(request)?
        } else {
            self.acquire(&request.clone().auto_extend(AutoExtend::new()))?
        };
        let value = f(&lock);
        if lock.is_lost() {
            return Err(lock.shared().lost_error(None));
        }
        match lock.release() {
            Ok(()) => Ok(value),
            Err(e @ Error::Lost { .. }) => Err(e),
            // Too few nodes answered the release: the keys expire with their TTL, the work
            // itself was done under the lock.
            Err(_) => Ok(value),
        }
    }

    /// Hands `lock` to the extender thread, starting it if this is the first.
    fn watch(
        &self,
        lock: &Lock,
        ttl: Duration,
        every: Duration,
        max_hold: Option<Duration>,
    ) -> Result<()> {
        let mut watchdog = relock(&self.inner.watchdog);
        if watchdog.is_none() {
            *watchdog = Some(Watchdog::spawn(Arc::downgrade(&self.inner.engine)).map_err(
                |source| Error::Io {
                    context: "starting the lock extender thread".into(),
                    source,
                },
            )?);
        }
        if let Some(w) = watchdog.as_ref() {
            w.add(Job {
                lock: Arc::clone(lock.shared()),
                ttl,
                every,
                hold_until: max_hold.and_then(|d| Instant::now().checked_add(d)),
                capped: false,
            });
        }
        Ok(())
    }

    /// The subscriber threads, if started.
    fn started_notifier(&self) -> Option<Arc<Notifier>> {
        relock(&self.inner.notifier).as_ref().map(Arc::clone)
    }

    /// The subscriber threads, started on first use.
    fn notifier(&self) -> Result<Arc<Notifier>> {
        let mut notifier = relock(&self.inner.notifier);
        if let Some(n) = notifier.as_ref() {
            return Ok(Arc::clone(n));
        }
        let engine = &self.inner.engine;
        let n = Arc::new(
            Notifier::start(
                &engine.clients,
                engine.config.connect_timeout(),
                engine.config.io_timeout(),
            )
            .map_err(|source| Error::Io {
                context: "starting the release-notification threads".into(),
                source,
            })?,
        );
        *notifier = Some(Arc::clone(&n));
        Ok(n)
    }

    /// A fenced lock, retrying like [`lock`](Redlock::lock):
    /// `acquire(&LockRequest::new(resource, ttl).fenced())`. See [`LockRequest::fenced`] and
    /// [`Lock::fence`].
    pub fn lock_fenced(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).fenced())
    }

    /// Like [`lock_fenced`](Redlock::lock_fenced), with a single attempt.
    pub fn try_lock_fenced(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).fenced().once())
    }

    /// One hold of a reentrant lock on `resource` for `owner`, retrying like
    /// [`lock`](Redlock::lock): `acquire(&LockRequest::new(resource, ttl).reentrant(owner))`.
    /// See [`LockRequest::reentrant`] and [`Lock::hold_count`]. Extending any hold keeps the
    /// resource at least `ttl` from now; no hold ever shortens it.
    pub fn reentrant_lock(&self, resource: &str, owner: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).reentrant(owner))
    }

    /// Like [`reentrant_lock`](Redlock::reentrant_lock), with a single attempt.
    pub fn try_reentrant_lock(&self, resource: &str, owner: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).reentrant(owner).once())
    }

    /// A fresh random owner name for [`reentrant_lock`](Redlock::reentrant_lock).
    pub fn new_owner() -> Result<String> {
        new_token()
    }

    /// All `resources` at once or none of them, retrying like [`lock`](Redlock::lock):
    /// `acquire(&LockRequest::many(resources, ttl))`. See [`LockRequest::many`].
    pub fn lock_many<I, S>(&self, resources: I, ttl: Duration) -> Result<Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.acquire(&LockRequest::many(resources, ttl))
    }

    /// Like [`lock_many`](Redlock::lock_many), with a single attempt.
    pub fn try_lock_many<I, S>(&self, resources: I, ttl: Duration) -> Result<Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.acquire(&LockRequest::many(resources, ttl).once())
    }

    /// What each node's worker last saw of its node.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        self.inner.engine.node_status()
    }

    /// Reads `resource` on every node: what its key holds (a token, reentrant owners, another
    /// type or nothing), its remaining TTL and the fence counter, plus whether a quorum holds it
    /// and by which token.
    ///
    /// Read-only, and it never fails because of the nodes: a node that is down, times out or
    /// answers with an error (a `NOPERM` for a user without read access to the keys) is
    /// reported in its own entry. Waits for every node up to `node_timeout`. Errors only for an
    /// empty resource name ([`Error::InvalidArgument`]).
    ///
    /// Each node is read at a slightly different moment: a lock being acquired or released
    /// meanwhile may show on some nodes only.
    pub fn inspect(&self, resource: &str) -> Result<Inspection> {
        inspect::inspect(&self.inner.engine, resource)
    }

    /// **An operator's tool**: deletes the lock on `resource` on every node, while the key
    /// still holds `token` (a plain or fenced lock's token, or a reentrant lock's owner) when one
    /// is given, or whatever it holds when `token` is `None`. Each deletion is announced on the
    /// resource's release channel, so waiters try at once.
    ///
    /// The danger: the holder is not told. Its lock is gone while it may still be working, and
    /// the next acquirer overlaps it; its auto-extension finds the lock lost (and reports it
    /// through [`Lock::lost`](crate::Lock::lost) and `on_lost`) at its next extension, not
    /// before. Use it for a lock whose holder is known dead, and pass the token read with
    /// [`inspect`](Redlock::inspect): a holder that took the lock after you looked is then left
    /// alone. The fence counter is never touched, so fencing tokens stay monotonic.
    ///
    /// Reports every node (waiting for each up to `node_timeout`);
    /// [`ForcedRelease::on_quorum`] says whether enough of them confirmed. Errors only for an
    /// empty resource or token ([`Error::InvalidArgument`]).
    pub fn force_release(&self, resource: &str, token: Option<&str>) -> Result<ForcedRelease> {
        inspect::force_release(&self.inner.engine, resource, token)
    }

    /// The client's settings, for the C ABI.
    #[allow(dead_code)]
    pub(crate) fn config(&self) -> &Config {
        &self.inner.engine.config
    }
}

/// Checks an auto-extension against the TTL and returns how often to extend.
fn extension_interval(auto: &AutoExtend, ttl: Duration, config: &Config) -> Result<Duration> {
    let f = auto.fraction;
    if !(f.is_finite() && f > 0.0 && f < 1.0) {
        return Err(Error::invalid(format!(
            "extend fraction must be in (0, 1), got {f}"
        )));
    }
    if auto.max_hold.is_some_and(|d| d > MAX_TTL) {
        return Err(Error::invalid("max_hold must be at most 10 years"));
    }
    let every = ttl.mul_f64(f);
    // An extension has to fit in what is left after `every`.
    if every.is_zero() || every + config.node_timeout >= ttl {
        return Err(Error::invalid(format!(
            "ttl of {ttl:?} is too short to auto-extend: extensions every {every:?} plus \
             node_timeout must fit within it"
        )));
    }
    Ok(every)
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let engine = &self.inner.engine;
        let nodes: Vec<&str> = engine.addresses().collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("config", &engine.config)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redlock_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Redlock>();
        fn send<T: Send>() {}
        send::<Lock>();
    }

    #[test]
    fn builder_rejects_bad_configuration() {
        let bad = [
            Redlock::builder().build(),
            Redlock::builder().node("").build(),
            Redlock::builder().node("not a url").build(),
            Redlock::builder().node("http://127.0.0.1:1").build(),
            Redlock::builder()
                .nodes(["redis://127.0.0.1:1", "redis://127.0.0.1:1/"])
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(1.0)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(-0.1)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(f64::NAN)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .node_timeout(Duration::ZERO)
                .build(),
        ];
        for (i, result) in bad.into_iter().enumerate() {
            match result {
                Err(Error::InvalidArgument { message }) => assert!(!message.is_empty(), "case {i}"),
                other => panic!("case {i}: expected InvalidArgument, got {other:?}"),
            }
        }
    }

    #[test]
    fn bad_url_errors_hide_the_password() {
        let err = Redlock::builder()
            .node("redis://u:hunter2@host:notaport")
            .build()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("node 0"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
