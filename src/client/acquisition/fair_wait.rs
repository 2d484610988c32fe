//! A waiter in the queue across processes (`notify/queue.rs`): its [`Member`]ship (join,
//! renew, leave) and the steps of [`fair_attempts`](Acquisition::fair_attempts): a first try,
//! joining, waiting behind others ([`member_wait`](Acquisition::member_wait)) and at the head
//! ([`head_wait`](Acquisition::head_wait)), and going on without the queue when its node fails
//! ([`degrade`](Acquisition::degrade)). It uses the acquisition's own steps (an attempt, the
//! fallback wait, giving up) and the notifier's subscription; the unfair loop it falls back to
//! lives in the acquisition.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::client::lock::Lock;
use crate::engine::Engine;
use crate::error::{NodeProblem, Result};
use crate::kinds::{free_in, held_on, split_vote};
use crate::notify::queue;
use crate::notify::{News, Notifier, Wake};
use crate::rules::quorum::{Vote, quorum};
use crate::rules::token::new_token;
use crate::wire::Keys;

use super::{Acquisition, Failed, HEALTH_LOOK, Tried, Trust};

/// What a head read of the keys that refused it.
struct HeldKeys {
    /// When they expire on a quorum.
    free: Instant,
    /// Whether they may be a split vote's, whose undos announce nothing.
    contested: bool,
    /// The nodes that would announce their holder's release (see `kinds::held_on`).
    holders: Option<Box<[bool]>>,
}

impl<'a> Acquisition<'a> {
    /// Attempts as a waiter in the queue across processes (see `queue.rs`): one try first,
    /// unless this client knows of a queue on the resource; refused, it joins the queue and
    /// tries only at the head, after the release of the lock the one before it took. Falls
    /// back to [`unfair_attempts`](Acquisition::unfair_attempts) while the queue node fails.
    pub(super) fn fair_attempts(mut self) -> Result<Lock> {
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
        let (news, mut member) = self.enlist(&notifier, resource, failed.is_some())?;
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
                return self.last_try(&mut member);
            }
            if rank != 0 {
                step = self.member_wait(&news, &mut member, &mut rank)?;
            } else {
                // Right after a refused try, the holder's keys' TTLs are worth reading; told
                // that the one before just took the lock, the release is what to wait for.
                let mut fresh = failed.is_some() && member.tried;
                member.tried = false;
                if step == Step::Try {
                    match self.try_at_head(&mut member)? {
                        Tried::Granted(lock) => return Ok(lock),
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

    /// Subscribes to the resource's releases and enlists for its queue's news under a new id:
    /// a member not yet joined, which `tried` just before.
    fn enlist(
        &mut self,
        notifier: &Arc<Notifier>,
        resource: Arc<str>,
        tried: bool,
    ) -> Result<(Receiver<News>, Member<'a>)> {
        // The kind's own checks (a caller waiting for itself) before anything is queued.
        self.kind.token(&self.caller)?;
        let mut sub = notifier.subscribe(
            self.kind.keys(),
            self.config.node_timeout,
            false,
            false,
            self.cancel,
        );
        let id = new_token()?;
        let news = sub.enlist(Arc::clone(&id));
        self.subscription = Some(sub);
        let member = Member {
            engine: self.engine,
            node: queue::queue_node(&resource, self.engine.addresses()),
            keys: queue::keys(&resource),
            resource,
            id,
            joined: false,
            heard: Instant::now(),
            tried,
            held_until: None,
            watched: false,
            node_failed: false,
        };
        Ok((news, member))
    }

    /// A try at the head: granted, it leaves the queue with the lock's TTL; refused with
    /// patience left, the failure to wait on; else the error of giving up.
    fn try_at_head(&mut self, member: &mut Member<'_>) -> Result<Tried> {
        self.attempts = self.attempts.saturating_add(1);
        match self.attempt()? {
            Tried::Granted(lock) => {
                member.leave(Some((self.ttl_ms, lock.release_nonce())));
                Ok(Tried::Granted(lock))
            }
            Tried::Failed(f) if self.next_pause().is_none() => Err(self.give_up(f)),
            Tried::Failed(f) => Ok(Tried::Failed(f)),
        }
    }

    /// A last try at the deadline, as every waiter makes, wherever it is in the queue.
    fn last_try(&mut self, member: &mut Member<'_>) -> Result<Lock> {
        self.attempts = self.attempts.saturating_add(1);
        match self.attempt()? {
            Tried::Granted(lock) => {
                member.leave(Some((self.ttl_ms, lock.release_nonce())));
                Ok(lock)
            }
            Tried::Failed(f) => Err(self.give_up(f)),
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
        let Some(sub) = &self.subscription else {
            return Ok(Step::Try);
        };
        // The nodes the lock it waits for is held on, once read (not known before: any quorum).
        let mut trust = Trust {
            holders: None,
            lapses: sub.lapses(),
        };
        let mut heard = trust.holds(sub);
        let fallback = now + self.fallback();
        let mut until = fallback;
        // Told that the one before took the lock for so long: its release comes by then.
        if let Some(held) = member.held_until.take() {
            until = if heard { held } else { until.min(held) };
        }
        if let Some(failed) = failed.filter(|f| f.refused())
            && let Some(keys) = self.until_keys_expire(failed, now)
        {
            trust.holders = keys.holders;
            // Not after a split vote: the keys of attempts being undone (whose undo announces
            // nothing) may be all there is.
            heard = !keys.contested && trust.holds(sub);
            until = if heard {
                keys.free
            } else {
                until.min(keys.free)
            };
        }
        let mut until = until.min(deadline);
        loop {
            let now = Instant::now();
            // A node that stops answering while the head waits may hold the lock it waits for,
            // whose release it then announces to no one: the wait trusted to the notification
            // shrinks to the fallback as soon as too few of the holder's nodes are heard.
            if heard && until > fallback && !trust.holds(sub) {
                heard = false;
                until = fallback;
            }
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
            let mut wake_at = until.min(renew_at);
            if heard {
                wake_at = wake_at.min(now + HEALTH_LOOK);
            }
            let renew = match sub.wait_news(news, wake_at - now, self.cancel) {
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

    /// At the head after a refused try (`failed`), read `now`: the holder's keys (see
    /// [`HeldKeys`]). `None` when no TTLs tell.
    fn until_keys_expire(&self, failed: &Failed, now: Instant) -> Option<HeldKeys> {
        // Unless a split vote is known, it reads whose keys they are.
        let tokens = !failed.contested;
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
        Some(HeldKeys {
            free: now + free_in(&read, quorum)? + Duration::from_millis(1),
            contested: failed.contested || tokens && split_vote(&read, quorum),
            holders: held_on(&read),
        })
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

    /// Leaves the queue, having got the lock for `held` ms (its TTL), whose release will be
    /// announced with the nonce given, or not (`None`); without waiting.
    fn leave(&mut self, held: Option<(u64, &str)>) {
        if !std::mem::take(&mut self.joined) {
            return;
        }
        let mut targets = vec![false; self.engine.node_count()];
        targets[self.node] = true;
        self.engine.send_nowait(
            &queue::leave(&self.keys, held),
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
        self.leave(None);
    }
}
