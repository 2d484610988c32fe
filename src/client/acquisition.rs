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
use crate::error::{Error, NodeProblem, Operation, Result};
use crate::kinds::{Caller, Kind, free_in, split_vote};
use crate::notify::queue;
use crate::notify::{News, Subscription, Turn, Wake};
use crate::rules::quorum::Vote;
use crate::rules::quorum::{Decision, backoff_delay, quorum, retry_delay, validity_deadline};
use crate::rules::token::new_token;
use crate::wire::Keys;

use super::Redlock;

/// Longest fallback wait between two attempts of a waiter that gets no notification (or
/// `retry_delay`, if that is longer).
const WAIT_BACKOFF_CAP: Duration = Duration::from_secs(1);

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

    /// Attempts as a waiter in the queue across processes (see `queue.rs`): one try first,
    /// unless this client knows of a queue on the resource; refused, it joins the queue and
    /// tries only at the head, after the release of the lock the one before it took. Falls
    /// back to [`unfair_attempts`](Acquisition::unfair_attempts) while the queue node fails.
    fn fair_attempts(mut self) -> Result<Lock> {
        let notifier = self.client.notifier()?;
        let resource = Arc::clone(self.kind.resource());
        let mut failed = None;
        if !notifier.queue_known(&resource) {
            self.check_cancel()?;
            self.attempts = self.attempts.saturating_add(1);
            match self.attempt()? {
                Tried::Granted(lock) => return Ok(lock),
                Tried::Failed(f) if self.next_pause().is_none() => return Err(self.give_up(f)),
                Tried::Failed(f) => failed = Some(f),
            }
        }
        // The kind's own checks (a caller waiting for itself) before anything is queued.
        self.kind.token(&self.caller)?;
        let mut sub = notifier.subscribe(
            self.kind.keys(),
            self.config.node_timeout,
            false,
            false,
            self.cancel,
        );
        let id: Arc<str> = new_token()?.into();
        let news = sub.enlist(Arc::clone(&id));
        self.subscription = Some(sub);
        let mut member = Member {
            engine: self.engine,
            node: queue::queue_node(&resource, self.engine.addresses()),
            keys: queue::keys(&resource),
            resource,
            id,
            joined: false,
            heard: Instant::now(),
            tried: failed.is_some(),
            held_until: None,
            watched: false,
            node_failed: false,
        };
        // A queue node found down or hung by the subscriber (after the subscribe above, which
        // gave it `node_timeout`) would cost each waiter that long: go on without the queue.
        if !notifier.node_live(member.node, self.config.node_timeout) {
            return self.degrade(member, false);
        }
        let Some(mut rank) = member.join() else {
            let failed = member.node_failed;
            return self.degrade(member, failed);
        };
        if rank > 0 || member.watched {
            notifier.queue_seen(&member.resource);
        }
        if let Some(sub) = &self.subscription {
            sub.joined();
        }
        // At the head after a refused try: the lock is held, so wait for its release first.
        let mut step = if failed.is_some() {
            Step::Wait
        } else {
            Step::Try
        };
        let deadline = self.wait_until.expect("a queued waiter has a deadline");
        loop {
            self.check_cancel()?;
            if Instant::now() >= deadline {
                // A last try, as every waiter makes.
                self.attempts = self.attempts.saturating_add(1);
                return match self.attempt()? {
                    Tried::Granted(lock) => {
                        member.leave(self.ttl_ms);
                        Ok(lock)
                    }
                    Tried::Failed(f) => Err(self.give_up(f)),
                };
            }
            if rank != 0 {
                step = self.member_wait(&news, &mut member, &mut rank)?;
            } else {
                // Right after a refused try, the holder's keys' TTLs are worth reading; told
                // that the one before just took the lock, the release is what to wait for.
                let mut fresh = failed.is_some() && member.tried;
                member.tried = false;
                if step == Step::Try {
                    self.attempts = self.attempts.saturating_add(1);
                    match self.attempt()? {
                        Tried::Granted(lock) => {
                            member.leave(self.ttl_ms);
                            return Ok(lock);
                        }
                        Tried::Failed(f) if self.next_pause().is_none() => {
                            return Err(self.give_up(f));
                        }
                        Tried::Failed(f) => failed = Some(f),
                    }
                    fresh = true;
                }
                let read = failed.as_ref().filter(|_| fresh);
                step = self.head_wait(&news, &mut member, &mut rank, read)?;
            }
            if step == Step::Degrade {
                let failed = member.node_failed;
                return self.degrade(member, failed);
            }
        }
    }

    /// Goes on without the queue, whose node did not answer a queue command (`failed`: this
    /// client's next waiters skip it for a while), answered it with an error (a key of another
    /// type, an ACL that denies the queue's keys: this waiter only) or is not heard from: leaves it (best
    /// effort) and waits as a client's waiters did before it.
    fn degrade(mut self, member: Member<'_>, failed: bool) -> Result<Lock> {
        if failed && let Ok(notifier) = self.client.notifier() {
            notifier.queue_failed(member.node);
        }
        drop(member);
        // The subscription stays: made again, it would wait for the nodes to confirm it anew.
        if let Some(sub) = &mut self.subscription {
            sub.unenlist();
        }
        self.unfair_attempts()
    }

    /// At the head of the queue: waits for the release of the lock (or for its keys to expire
    /// on a quorum, read after a refused try), renewing the place every `HEAD_RENEW`.
    fn head_wait(
        &mut self,
        news: &crossbeam_channel::Receiver<News>,
        member: &mut Member<'_>,
        rank: &mut u64,
        failed: Option<&Failed>,
    ) -> Result<Step> {
        let now = Instant::now();
        let deadline = self.wait_until.unwrap_or(now);
        let healthy = self.subscription.as_ref().is_some_and(|s| s.healthy());
        let mut until = now + self.fallback();
        // Told that the one before took the lock for so long: its release comes by then.
        if let Some(held) = member.held_until.take() {
            until = if healthy { held } else { until.min(held) };
        }
        if let Some(failed) = failed.filter(|f| f.refused()) {
            // Whether it would sleep until the keys expire: then it reads whose keys they are.
            let tokens = healthy && !failed.contested;
            let remaining = self.kind.remaining(tokens);
            let mut read = self.engine.fan_out(
                &remaining,
                self.kind.resource(),
                &failed.token,
                None,
                self.cancel,
            );
            let quorum = quorum(self.engine.node_count());
            if tokens {
                // Every node's answer, not the first quorum's (see `split_vote`).
                read.settle();
            }
            if let Some(free) = free_in(&read, quorum) {
                let free = now + free + Duration::from_millis(1);
                let contested = failed.contested || tokens && split_vote(&read, quorum);
                until = if !contested && healthy {
                    free
                } else {
                    until.min(free)
                };
            }
        }
        let until = until.min(deadline);
        let Some(sub) = &self.subscription else {
            return Ok(Step::Try);
        };
        loop {
            let now = Instant::now();
            if now >= until {
                self.rounds = self.rounds.saturating_add(1);
                return Ok(Step::Try);
            }
            // Alone in the queue, nobody waits on its short lease: it renews the long one, which
            // its keys live for.
            let renew_at = member.heard
                + if member.watched {
                    queue::HEAD_RENEW
                } else {
                    queue::MEMBER_CHECK
                };
            // A release pending from before it was told it is at the head may be the release of
            // the lock the one before took (its release can be heard before the turn message,
            // which comes from one node only): it tries at once, and a refusal costs one try.
            let renew = match sub.wait_news(news, until.min(renew_at) - now, self.cancel) {
                Ok(Wake::Released) => return Ok(Step::Try),
                Ok(Wake::Cancelled) => return Err(self.cancelled()),
                Ok(Wake::TimedOut) => member.watched && Instant::now() >= renew_at,
                // Its lease was just cut to `HEAD_LEASE`: renew at once.
                Err(News::Watched | News::Recheck) => true,
                Err(News::Head { watched, .. }) => {
                    member.watched |= watched;
                    false
                }
                Err(News::Next) => false,
            };
            if renew {
                match member.join() {
                    None => return Ok(Step::Degrade),
                    Some(0) => {}
                    Some(r) => {
                        // Evicted (its lease ran out while it was stopped, say): back in line.
                        *rank = r;
                        return Ok(Step::Wait);
                    }
                }
            }
        }
    }

    /// Behind others in the queue: waits for news of its place, re-reading it every
    /// `NEXT_CHECK` right behind the head (evicting a head whose lease ended) or `MEMBER_CHECK`
    /// further back.
    fn member_wait(
        &self,
        news: &crossbeam_channel::Receiver<News>,
        member: &mut Member<'_>,
        rank: &mut u64,
    ) -> Result<Step> {
        // Its try before joining is long past by the time it is at the head.
        member.tried = false;
        let check = if *rank == 1 {
            queue::NEXT_CHECK
        } else {
            queue::MEMBER_CHECK
        };
        let now = Instant::now();
        let until = (member.heard + check).min(self.wait_until.unwrap_or(now));
        let timeout = until.saturating_duration_since(now);
        // A queue that stays silent after a release (its node hung, say) is not waited on for
        // `MEMBER_CHECK`: the client tells its waiters behind the head to read their place
        // again (`News::Recheck`, see `Registry::check_silence`).
        let never = crossbeam_channel::never();
        let fired = self.cancel.map_or(&never, |c| c.fired());
        let heard = crossbeam_channel::select! {
            recv(news) -> n => n.ok(),
            recv(fired) -> _ => return Err(self.cancelled()),
            default(timeout) => None,
        };
        match heard {
            Some(News::Head { held, watched, .. }) => {
                *rank = 0;
                member.heard = Instant::now();
                member.watched = watched;
                member.held_until = held.map(|d| member.heard + d + Duration::from_millis(1));
                Ok(if held.is_some() {
                    Step::Wait
                } else {
                    Step::Try
                })
            }
            Some(News::Next) => {
                *rank = 1;
                member.heard = Instant::now();
                Ok(Step::Wait)
            }
            // Told that a waiter is behind it, it is at the head, though it missed the news:
            // read its place, like a recheck.
            Some(News::Watched | News::Recheck) | None => {
                if self.wait_until.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Step::Wait);
                }
                match member.join() {
                    None => Ok(Step::Degrade),
                    Some(r) => {
                        *rank = r;
                        // At the head by a re-read: the one before left or was evicted.
                        Ok(if r == 0 { Step::Try } else { Step::Wait })
                    }
                }
            }
        }
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
            Turn::HeldUntil(until) => {
                let now = Instant::now();
                let held = until.saturating_duration_since(now) + Duration::from_millis(1);
                let mut pause = held.min(deadline.saturating_duration_since(now));
                if !sub.healthy() {
                    pause = pause.min(self.fallback());
                }
                match sub.wait(pause, self.cancel) {
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
                    sub.acquired(keys_until);
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
        if self.wait_until.is_some() && refused {
            // Never sleep past the moment the holder's keys expire on a quorum: a lost
            // notification then costs at most the holder's TTL.
            let resource = self.kind.resource();
            let healthy = self.subscription.as_ref().is_some_and(|s| s.healthy());
            // Whether it would sleep until the keys expire: then it reads whose keys they are.
            let tokens = healthy && !failed.contested;
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
                pause = if !contested && healthy {
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
        let wake = match (&self.subscription, self.cancel) {
            (Some(sub), _) if refused => sub.wait(pause, self.cancel),
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
                report,
            }
        } else {
            Error::NoQuorum {
                resource,
                operation: Operation::Acquire,
                attempts: self.attempts,
                report,
            }
        }
    }
}

/// What a waiter in the queue across processes does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Try (when at the head).
    Try,
    /// Wait: for the release of the lock at the head, for news of its place behind others.
    Wait,
    /// Go on without the queue: its node failed.
    Degrade,
}

/// A waiter's place in the queue across processes (`queue.rs`): left when dropped.
struct Member<'a> {
    engine: &'a Arc<Engine>,
    /// The queue node.
    node: usize,
    keys: Keys,
    resource: Arc<str>,
    id: Arc<str>,
    /// A `JOIN` was sent: the node may have the waiter in its queue.
    joined: bool,
    /// When the waiter last renewed or heard of its place.
    heard: Instant,
    /// It tried just before joining.
    tried: bool,
    /// Told that it is at the head: until when the lock the one before took may be held.
    held_until: Option<Instant>,
    /// At the head with a waiter behind it, which watches its lease: it renews its place.
    watched: bool,
    /// A queue command found the node down, hung or unreachable (not an error reply).
    node_failed: bool,
}

impl Member<'_> {
    /// Joins or renews the place: its rank, or `None` when the queue node did not answer with
    /// one (`node_failed`: it did not answer at all, rather than with an error of its own).
    fn join(&mut self) -> Option<u64> {
        self.joined = true;
        let vote = self.engine.call_one(
            self.node,
            &queue::join(&self.keys),
            &self.resource,
            &self.id,
        );
        self.heard = Instant::now();
        let (rank, behind) = match vote {
            Vote::Raw(reply) => queue::place(&reply)?,
            Vote::Failed(NodeProblem::Server(_) | NodeProblem::Denied(_)) => return None,
            _ => {
                self.node_failed = true;
                return None;
            }
        };
        self.watched = behind > 0;
        Some(rank)
    }

    /// Leaves the queue, having got the lock for `held_ms` (its TTL) or not (0); without
    /// waiting.
    fn leave(&mut self, held_ms: u64) {
        if !std::mem::take(&mut self.joined) {
            return;
        }
        let mut targets = vec![false; self.engine.node_count()];
        targets[self.node] = true;
        self.engine.send_nowait(
            &queue::leave(&self.keys, held_ms),
            &self.resource,
            &self.id,
            Some(&targets),
            // Sent after a reconnect too, while the place may still be there.
            Instant::now().checked_add(queue::MEMBER_LEASE),
        );
    }
}

impl Drop for Member<'_> {
    fn drop(&mut self) {
        self.leave(0);
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
