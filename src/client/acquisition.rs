//! One acquisition, as named steps: [`plan`](Acquisition::plan) (TTL, patience, what a wait
//! listens to), [`attempt`](Acquisition::attempt) (one quorum attempt per candidate, undone on
//! every node when it fails), [`pause`](Acquisition::pause) (a release notification, the
//! holder's remaining TTL, or a jittered backoff) and [`give_up`](Acquisition::give_up) (the
//! error of the last attempt).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::client::lock::{Acquired, Lock};
use crate::client::request::{AutoExtend, LockRequest, Patience};
use crate::config::{Config, MAX_TTL};
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Operation, Result};
use crate::kinds::{Caller, Kind, free_in, held_on, split_vote};
use crate::notify::{Subscription, Turn, Wake};
use crate::rules::quorum::{Decision, backoff_delay, quorum, retry_delay, validity_deadline};

use super::Redlock;

mod fair_wait;

/// Longest fallback wait between two attempts of a waiter that gets no notification (or
/// `retry_delay`, if that is longer).
const WAIT_BACKOFF_CAP: Duration = Duration::from_secs(1);

/// How often a waiter that trusts the release notification to wake it looks whether it still
/// may (see [`Acquisition::wait_heard`]): about a node timeout, the time the workers take to
/// find a node hung.
const HEALTH_LOOK: Duration = Duration::from_millis(50);

/// What a waiter's trust in the release notification of the lock it waits for rests on: the
/// nodes that hold its keys (`None`: not known, any quorum of nodes may), and the nodes'
/// lapses when it looked (see [`Subscription::lapses`]).
struct Trust {
    holders: Option<Box<[bool]>>,
    lapses: Box<[u64]>,
}

impl Trust {
    /// Whether the release would still be heard: a quorum of the holder's nodes (every node,
    /// not knowing them) heard and not lapsed since (a node restarted between two looks lost
    /// the keys whose release it would announce; see [`Subscription::hears`]).
    fn holds(&self, sub: &Subscription) -> bool {
        sub.hears(self.holders.as_deref(), &self.lapses)
    }
}

/// An acquisition in progress.
pub(super) struct Acquisition<'a> {
    client: &'a Redlock,
    engine: &'a Arc<Engine>,
    config: Config,
    request: &'a LockRequest,
    kind: &'a Arc<dyn Kind>,
    cancel: Option<&'a Cancel>,
    caller: Caller,
    ttl: Duration,
    ttl_ms: u64,
    /// How often an auto-extended lock is extended.
    every: Option<Duration>,
    delay: Duration,
    jitter: Duration,
    /// Retries after the first attempt (patience by count).
    retries: u32,
    /// Until when a waiter keeps trying (patience by time).
    wait_until: Option<Instant>,
    /// A waiter woken by release notifications.
    notify: bool,
    /// A waiter that queues in arrival order behind this client's other waiters.
    queues: bool,
    attempts: u32,
    /// Fallback waits that passed without a notification.
    rounds: u32,
    /// A waiter's subscription to release notifications (and its place in the queue).
    subscription: Option<Subscription>,
}

/// The last failed try of an attempt: what [`give_up`](Acquisition::give_up) reports and
/// [`pause`](Acquisition::pause) goes by.
struct Failed {
    token: Arc<str>,
    outcome: Outcome,
    /// The kind's quorum call after the acquire (a fence write-back), if it made one (boxed:
    /// it is rare, and every try's result would carry its size).
    last: Option<Box<Outcome>>,
    /// Some node granted one of the refused tries (or stayed silent): the refusals may come
    /// from other waiters' attempts rather than from a holder.
    contested: bool,
}

impl Failed {
    fn refused(&self) -> bool {
        self.outcome.decision == Decision::Refused
    }
}

/// How one try of a candidate ended.
enum Tried {
    Granted(Lock),
    Failed(Failed),
}

impl<'a> Acquisition<'a> {
    /// Checks the request against the client's settings and works out its patience; nothing
    /// is sent yet.
    pub(super) fn plan(
        client: &'a Redlock,
        request: &'a LockRequest,
        cancel: Option<&'a Cancel>,
    ) -> Result<Self> {
        let kind = request.checked_kind()?;
        let engine = &client.inner.engine;
        let config = engine.config;
        let ttl_ms = config.ttl_ms(request.ttl)?;
        let acquire = kind.acquire(ttl_ms, &config);
        if let Some((i, why)) = engine
            .clients
            .iter()
            .enumerate()
            .find_map(|(i, t)| Some((i, t.refuses(&acquire, kind.resource())?)))
        {
            return Err(Error::invalid(format!(
                "node {i} ({}): {why}",
                engine.clients[i].address()
            )));
        }
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
        let notify = wait_until.is_some() && request.notifications;
        Ok(Acquisition {
            client,
            engine,
            config,
            request,
            kind,
            cancel,
            caller: request.caller_id(),
            ttl,
            ttl_ms,
            every,
            delay,
            jitter,
            retries,
            wait_until,
            notify,
            queues: notify && kind.queues(),
            attempts: 0,
            rounds: 0,
            subscription: None,
        })
    }

    /// Attempts until the lock is granted or patience runs out, and counts how it ended.
    pub(super) fn run(self) -> Result<Lock> {
        let started = Instant::now();
        let telemetry = Arc::clone(&self.engine.telemetry);
        let (kind, resource) = (self.kind.name(), Arc::clone(self.kind.resource()));
        let waits = self.wait_until.is_some();
        if waits {
            telemetry.waiting(true, None);
        }
        let result = self.attempts();
        let took = started.elapsed();
        if waits {
            telemetry.waiting(false, Some(took));
        }
        let outcome = match &result {
            Ok(_) => 0,
            Err(Error::NotAcquired { .. }) => 1,
            Err(Error::NoQuorum { .. }) => 2,
            Err(Error::Cancelled { .. }) => 3,
            Err(_) => 4,
        };
        telemetry.acquisition(outcome, kind, &resource, took);
        result
    }

    fn attempts(self) -> Result<Lock> {
        if self.queues && self.request.fair {
            return self.fair_attempts();
        }
        self.unfair_attempts()
    }

    /// The loop of a waiter that is not in the queue across processes.
    fn unfair_attempts(mut self) -> Result<Lock> {
        self.join_queue()?;
        loop {
            self.check_cancel()?;
            self.wait_for_turn()?;
            self.attempts = self.attempts.saturating_add(1);
            let failed = match self.attempt()? {
                Tried::Granted(lock) => return Ok(lock),
                Tried::Failed(failed) => failed,
            };
            let Some(pause) = self.next_pause() else {
                return Err(self.give_up(failed));
            };
            self.pause(pause, &failed)?;
        }
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled {
            resource: self.kind.resource().to_string(),
        }
    }

    fn check_cancel(&self) -> Result<()> {
        match self.cancel {
            Some(c) if c.is_cancelled() => Err(self.cancelled()),
            _ => Ok(()),
        }
    }

    /// A waiter that finds another waiter of this client ahead of it on the resource queues
    /// behind it without trying, as the resource is held. The kind's own checks (a caller
    /// waiting for itself) come first.
    fn join_queue(&mut self) -> Result<()> {
        if !self.queues {
            return Ok(());
        }
        let Some(notifier) = self.client.started_notifier() else {
            return Ok(());
        };
        if notifier.queued(self.kind.resource()) == 0 {
            return Ok(());
        }
        self.kind.token(&self.caller)?;
        self.subscription = Some(notifier.subscribe(
            self.kind.keys(),
            self.config.node_timeout,
            false,
            true,
            self.cancel,
        ));
        Ok(())
    }

    /// A queued waiter tries once at the front of its queue (or at its deadline, a last time);
    /// until then it waits for the lock of the one before it to be released.
    fn wait_for_turn(&self) -> Result<()> {
        let (Some(sub), Some(deadline)) = (&self.subscription, self.wait_until) else {
            return Ok(());
        };
        match sub.turn(deadline, self.cancel) {
            Turn::Now | Turn::TimedOut => Ok(()),
            Turn::Cancelled => Err(self.cancelled()),
            Turn::HeldUntil(until, holders) => {
                let now = Instant::now();
                let held = until.saturating_duration_since(now) + Duration::from_millis(1);
                let pause = held.min(deadline.saturating_duration_since(now));
                let trust = Trust {
                    holders: Some(holders.as_ref().into()),
                    lapses: sub.lapses(),
                };
                match self.wait_heard(sub, pause, &trust) {
                    Wake::Cancelled => Err(self.cancelled()),
                    Wake::Released | Wake::TimedOut => Ok(()),
                }
            }
        }
    }

    /// One attempt: the kind itself, or its candidates in turn (a semaphore's slots) until
    /// one is granted or one fails other than by a plain refusal.
    fn attempt(&mut self) -> Result<Tried> {
        let candidates = self.kind.candidates();
        // Without an allocation for the common case of the kind trying itself.
        let itself = candidates
            .as_ref()
            .is_none_or(Vec::is_empty)
            .then_some(&**self.kind);
        let mut contested = false;
        let mut failed = None;
        for candidate in candidates.iter().flatten().map(|k| &**k).chain(itself) {
            self.check_cancel()?;
            match self.try_candidate(candidate)? {
                Tried::Granted(lock) => return Ok(Tried::Granted(lock)),
                Tried::Failed(f) => {
                    contested |= f.contested;
                    // Only a plain refusal moves on to the next candidate.
                    let next = f.refused() && f.last.is_none();
                    failed = Some(f);
                    if !next {
                        break;
                    }
                }
            }
        }
        let mut failed = failed.expect("an attempt tries at least one candidate");
        failed.contested = contested;
        Ok(Tried::Failed(failed))
    }

    /// One quorum attempt of `candidate`: granted, or failed and undone on every node that may
    /// hold its key.
    fn try_candidate(&self, candidate: &dyn Kind) -> Result<Tried> {
        let engine = self.engine;
        let resource = self.kind.resource();
        let mut token = candidate.token(&self.caller)?;
        if let Some(t) = &self.request.test_token {
            token = Arc::clone(t);
        }
        // Our host's suspensions before the batch: one during it makes the validity measured
        // on our monotonic clock wrong, so the attempt fails and is undone.
        let epoch = engine.board.epoch();
        let acquire = candidate.acquire(self.ttl_ms, &self.config);
        let mut outcome = engine.fan_out(&acquire, resource, &token, None, self.cancel);
        let mut last = None;
        if outcome.decision == Decision::Quorum && !outcome.cancelled {
            let grant = candidate.grant(engine, &outcome, &token, &self.caller);
            last = grant.last.map(Box::new);
            let decided = last.as_ref().map_or(outcome.decided, |l| l.decided);
            if let Some(held) = grant.held
                && let Some(deadline) =
                    validity_deadline(outcome.t0, decided, self.ttl, self.config.drift_factor)
                && engine.board.epoch() == epoch
            {
                let keys_until = outcome.t0 + self.ttl + self.config.node_timeout;
                // A cancel that comes now is too late: the caller owns the lock.
                if let Some(sub) = &self.subscription {
                    sub.acquired(keys_until, outcome.tally.applied_nodes().into());
                }
                let max_extensions = self
                    .request
                    .auto_extend
                    .and_then(|a| a.max_extensions)
                    .or(self.config.max_extensions);
                let lock = Lock::new(
                    Arc::clone(engine),
                    Arc::clone(&self.client.inner) as _,
                    Arc::clone(resource),
                    Acquired {
                        token,
                        deadline,
                        keys_until,
                        kind: held,
                        max_extensions,
                        epoch,
                        kind_name: self.kind.name(),
                    },
                );
                if let (Some(every), Some(auto)) = (self.every, self.request.auto_extend) {
                    // Should the extender fail to start, dropping the lock releases it.
                    self.client.watch(&lock, self.ttl, every, auto.max_hold)?;
                }
                return Ok(Tried::Granted(lock));
            }
        }
        let mut contested = false;
        if self.wait_until.is_some() && outcome.decision == Decision::Refused && !outcome.cancelled
        {
            // The answers that came just after the decision: whether any granted this attempt
            // decides how long a waiter may sleep, and the undo then goes only where needed.
            outcome.settle();
            // A node still silent (slow or hung) may have granted it too: better one needless
            // retry on the backoff than a waiter asleep until keys expire.
            contested =
                outcome.tally.yes() > 0 || outcome.tally.votes().count() < outcome.tally.nodes();
        }
        // A SET may have landed where the reply was lost, late or cut short by a cancel: undo
        // it everywhere before anything else.
        candidate.undo(engine, &outcome, &token, self.ttl);
        if outcome.cancelled {
            return Err(self.cancelled());
        }
        if let Some(e) = candidate.conflict(&outcome) {
            return Err(e);
        }
        Ok(Tried::Failed(Failed {
            token,
            outcome,
            last,
            contested,
        }))
    }

    /// How long to wait before the next attempt, or `None` when patience has run out.
    fn next_pause(&self) -> Option<Duration> {
        let random = || retry_delay(self.delay, self.jitter, rand::random());
        match self.wait_until {
            None => (self.attempts <= self.retries).then(random),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    None
                } else if self.notify {
                    Some(self.fallback().min(left))
                } else {
                    Some(random().min(left))
                }
            }
        }
    }

    /// A notified waiter's fallback wait after so many rounds, in case a release goes unheard.
    fn fallback(&self) -> Duration {
        backoff_delay(
            self.delay.max(Duration::from_millis(1)),
            self.rounds,
            WAIT_BACKOFF_CAP.max(self.delay),
            rand::random(),
        )
    }

    /// Waits up to `pause` for a release of the lock `trust` describes, trusting its
    /// notification while [`Trust::holds`]: a node that stops answering meanwhile may hold the
    /// lock, whose release it then announces to no one. Every `HEALTH_LOOK` it looks again;
    /// once the trust is gone, it waits at most its fallback.
    fn wait_heard(&self, sub: &Subscription, pause: Duration, trust: &Trust) -> Wake {
        let fallback = self.fallback();
        let end = Instant::now() + pause;
        let mut heard = trust.holds(sub);
        loop {
            let now = Instant::now();
            let left = end.saturating_duration_since(now);
            if !heard || left <= fallback {
                return sub.wait(left.min(fallback), self.cancel);
            }
            match sub.wait(HEALTH_LOOK, self.cancel) {
                Wake::TimedOut => heard = trust.holds(sub),
                wake => return wake,
            }
        }
    }

    /// Waits before the next attempt: up to `pause`, woken by a release notification, and
    /// never past the moment the holder's keys expire on a quorum. Returns at once when the
    /// next attempt should come sooner (queued behind another waiter, or just subscribed with
    /// no TTL to go by).
    fn pause(&mut self, mut pause: Duration, failed: &Failed) -> Result<()> {
        let refused = failed.refused();
        let mut just_subscribed = false;
        if self.notify && refused && self.subscription.is_none() {
            // Subscribed from now on: a release from here is heard. One that came before the
            // subscription was active shows in the remaining TTLs read next.
            self.subscription = Some(self.client.notifier()?.subscribe(
                self.kind.keys(),
                self.config.node_timeout,
                self.kind.shared(),
                self.queues,
                self.cancel,
            ));
            just_subscribed = true;
        }
        if let Some(sub) = &self.subscription
            && !sub.at_front()
        {
            // Queued behind another waiter: its turn comes first (see `wait_for_turn`).
            return Ok(());
        }
        // What a notification of the holder's release is trusted on, when it is.
        let mut trusted = None;
        if self.wait_until.is_some() && refused {
            // Never sleep past the moment the holder's keys expire on a quorum: a lost
            // notification then costs at most the holder's TTL.
            let resource = self.kind.resource();
            // Whether it may sleep until the keys expire: then it reads whose keys they are.
            let tokens = self.subscription.is_some() && !failed.contested;
            let lapses = self
                .subscription
                .as_ref()
                .map_or_else(Box::default, |s| s.lapses());
            let remaining = self.kind.remaining(tokens);
            let mut read =
                self.engine
                    .fan_out(&remaining, resource, &failed.token, None, self.cancel);
            if tokens {
                // Every node's answer, not the first quorum's (see `split_vote`).
                read.settle();
            }
            let quorum = quorum(self.engine.node_count());
            let free = free_in(&read, quorum);
            let contested = failed.contested || tokens && split_vote(&read, quorum);
            let trust = Trust {
                holders: held_on(&read),
                lapses,
            };
            let heard = self.subscription.as_ref().is_some_and(|s| trust.holds(s));
            if just_subscribed && free.is_none() {
                // No TTLs to go by (a key without one, or PTTL not allowed): try again at once,
                // for a release that came before the subscription was active.
                return Ok(());
            }
            if let Some(free) = free {
                let free = free + Duration::from_millis(1);
                let left = self
                    .wait_until
                    .map_or(free, |d| d.saturating_duration_since(Instant::now()));
                pause = if !contested && heard {
                    trusted = Some(trust);
                    // A release would be heard: no polling, only a look once the holder's keys
                    // should be gone (it expired, or its release went unheard). Not after a
                    // split vote: the keys of attempts being undone (whose undo announces
                    // nothing) may be all there is.
                    free.min(left)
                } else {
                    pause.min(free)
                };
            }
        }
        let wake = match (&self.subscription, &trusted, self.cancel) {
            (Some(sub), Some(trust), _) if refused => self.wait_heard(sub, pause, trust),
            (Some(sub), None, _) if refused => sub.wait(pause, self.cancel),
            (_, _, Some(c)) => match c.fired().recv_timeout(pause) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => Wake::TimedOut,
                _ => Wake::Cancelled,
            },
            (_, _, None) => {
                std::thread::sleep(pause);
                Wake::TimedOut
            }
        };
        match wake {
            Wake::Released => Ok(()),
            Wake::TimedOut => {
                self.rounds = self.rounds.saturating_add(1);
                Ok(())
            }
            Wake::Cancelled => Err(self.cancelled()),
        }
    }

    /// The error of an acquisition whose patience ran out: held by another owner when the last
    /// attempt was refused, too few nodes otherwise (a failed fence write-back included).
    fn give_up(&self, failed: Failed) -> Error {
        let resource = self.kind.resource().to_string();
        let report = failed
            .last
            .as_deref()
            .unwrap_or(&failed.outcome)
            .report(self.engine);
        if failed.last.is_none() && failed.refused() {
            Error::NotAcquired {
                resource,
                attempts: self.attempts,
                report: Box::new(report),
            }
        } else {
            Error::NoQuorum {
                resource,
                operation: Operation::Acquire,
                attempts: self.attempts,
                report: Box::new(report),
            }
        }
    }
}

/// Checks an auto-extension against the TTL and returns how often to extend.
fn extension_interval(auto: &AutoExtend, ttl: Duration, config: &Config) -> Result<Duration> {
    let f = auto.fraction;
    if !(f.is_finite() && f > 0.0 && f < 1.0) {
        return Err(Error::invalid(format!(
            "extend fraction must be above 0 and below 1, got {f}"
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
