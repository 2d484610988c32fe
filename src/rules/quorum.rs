//! The decision rules of Redlock, free of I/O so they can be tested with injected times.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::error::{NodeProblem, NodeReport, QuorumReport};

/// Fixed part of the clock-drift allowance (Redlock's "few milliseconds", docs/redlock.md).
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Successes needed among `n` nodes.
pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The clock-drift allowance for a TTL: `ttl * drift_factor + 2 ms`, rounded up to a microsecond.
pub(crate) fn drift_allowance(ttl: Duration, drift_factor: f64) -> Duration {
    let micros = (ttl.as_micros() as f64 * drift_factor).ceil();
    Duration::from_micros(micros as u64) + DRIFT_FLOOR
}

/// When a lock set on a quorum stops being safe to rely on, if it still is at `now`.
///
/// Every key of the quorum was set after `t0`, so each lives at least until `t0 + ttl` in node
/// time; the allowance covers the clock drift between us and the nodes. This equals Redlock's
/// `validity = ttl - elapsed - drift` counted from the decision.
pub(crate) fn validity_deadline(
    t0: Instant,
    now: Instant,
    ttl: Duration,
    drift_factor: f64,
) -> Option<Instant> {
    let deadline = earliest_expiry(t0, ttl, drift_factor);
    (deadline > now).then_some(deadline)
}

/// The earliest moment a key set with `ttl` after `t0` may expire, less the drift allowance.
pub(crate) fn earliest_expiry(t0: Instant, ttl: Duration, drift_factor: f64) -> Instant {
    // TTLs are capped at 10 years, far inside what `Instant` can hold.
    t0 + ttl.saturating_sub(drift_allowance(ttl, drift_factor))
}

/// A random delay in `delay ± jitter`; `unit` is uniform in `[0, 1)`.
pub(crate) fn retry_delay(delay: Duration, jitter: Duration, unit: f64) -> Duration {
    let low = delay.saturating_sub(jitter);
    let high = delay + jitter;
    low + (high - low).mul_f64(unit.clamp(0.0, 1.0))
}

/// The fallback wait of a waiter that got no release notification: `base × 2^round`, capped,
/// with "equal jitter" (a uniform draw from the upper half, `unit` in `[0, 1)`), so that waiters
/// that started together drift apart and a lost notification costs at most `cap`.
pub(crate) fn backoff_delay(base: Duration, round: u32, cap: Duration, unit: f64) -> Duration {
    let full = base
        .checked_mul(1u32.checked_shl(round.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap);
    full / 2 + (full / 2).mul_f64(unit.clamp(0.0, 1.0))
}

/// One node's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Vote {
    Yes,
    /// A yes that carries a number: a fence counter after `INCR`, a reentrant hold count.
    Value(u64),
    /// A yes that carries the node's reply as it came (a read of the inspection), for the
    /// caller to decode.
    Raw(redis::Value),
    No,
    Failed(NodeProblem),
}

/// Which of the tally's three counts a vote goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VoteKind {
    Yes,
    No,
    Failed,
}

impl Vote {
    pub(crate) fn kind(&self) -> VoteKind {
        match self {
            Vote::Yes | Vote::Value(_) | Vote::Raw(_) => VoteKind::Yes,
            Vote::No => VoteKind::No,
            Vote::Failed(_) => VoteKind::Failed,
        }
    }

    pub(crate) fn is_yes(&self) -> bool {
        matches!(self, Vote::Yes | Vote::Value(_) | Vote::Raw(_))
    }

    /// Whether the command took effect on the node: a yes, or a yes not counted because the
    /// node is in its restart grace or clock quarantine, or its replicas did not acknowledge it.
    pub(crate) fn applied(&self) -> bool {
        self.is_yes()
            || matches!(
                self,
                Vote::Failed(
                    NodeProblem::InGrace { .. }
                        | NodeProblem::ClockJump { .. }
                        | NodeProblem::NotReplicated { .. }
                )
            )
    }
}

/// When a caller waiting on a fan-out should look at the answers: the workers count their votes
/// here and wake the caller (`Thread::unpark`) only once the answers so far can decide it (a
/// quorum of yeses, more noes or more failures than a quorum leaves room for, or every node
/// answered), and once more when the last worker lets go of the request, answered or dropped
/// unsent (`Drop`). A fan-out then costs the caller one wake-up rather than one per answer.
///
/// It only times the caller's looks: the votes themselves travel on the caller's channel and
/// the decision is [`Tally`]'s, so a gate that woke too early or too often would cost a look,
/// never a wrong decision. Every condition under which [`Tally::decision`] decides is one
/// where a count here crosses its threshold, so it never wakes too late.
pub(crate) struct Gate {
    caller: Thread,
    nodes: usize,
    quorum: usize,
    yes: AtomicUsize,
    no: AtomicUsize,
    failed: AtomicUsize,
    answered: AtomicUsize,
    /// Some vote already decided the call.
    woken: AtomicBool,
}

impl Gate {
    /// For a fan-out to `nodes` nodes, `skipped` of which get no request (they count as noes).
    pub(crate) fn new(caller: Thread, nodes: usize, skipped: usize) -> Gate {
        Gate {
            caller,
            nodes,
            quorum: quorum(nodes),
            yes: AtomicUsize::new(0),
            no: AtomicUsize::new(skipped),
            failed: AtomicUsize::new(0),
            answered: AtomicUsize::new(skipped),
            woken: AtomicBool::new(false),
        }
    }

    /// Counts one vote, already sent to the caller's channel; wakes the caller if it decides.
    /// Says whether the caller was still waiting for votes: not once an earlier vote decided
    /// (a worker uses it only to guess how many callers will come back soon, so a race here
    /// costs a few microseconds of that guess, never a decision).
    pub(crate) fn count(&self, kind: VoteKind) -> bool {
        let waiting = !self.woken.load(Ordering::Relaxed);
        if self.decides(kind) {
            self.woken.store(true, Ordering::Relaxed);
            self.caller.unpark();
        }
        waiting
    }

    /// Counts one vote; true if the votes counted so far may now decide the call.
    fn decides(&self, kind: VoteKind) -> bool {
        let (counter, threshold) = match kind {
            VoteKind::Yes => (&self.yes, self.quorum),
            VoteKind::No => (&self.no, self.nodes - self.quorum + 1),
            VoteKind::Failed => (&self.failed, self.nodes - self.quorum + 1),
        };
        // SeqCst: the vote was sent before, and the caller reads it after its wake-up.
        let crossed = counter.fetch_add(1, Ordering::SeqCst) + 1 == threshold;
        let all = self.answered.fetch_add(1, Ordering::SeqCst) + 1 == self.nodes;
        crossed || all
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // The last request is gone: answered, or dropped unsent past its deadline.
        self.caller.unpark();
    }
}

/// What a tally came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A quorum said yes.
    Quorum,
    /// So many refused that a quorum is impossible: the key belongs to someone else.
    Refused,
    /// Errors and timeouts (with or without refusals) made a quorum impossible.
    Unreachable,
}

/// Counts the votes of one fan-out and says as soon as the outcome is certain.
pub(crate) struct Tally {
    votes: Vec<Option<Vote>>,
    yes: usize,
    no: usize,
    failed: usize,
    /// The largest number carried by a [`Vote::Value`] so far.
    max_value: Option<u64>,
}

impl Tally {
    pub(crate) fn new(n: usize) -> Self {
        Tally {
            votes: vec![None; n],
            yes: 0,
            no: 0,
            failed: 0,
            max_value: None,
        }
    }

    /// Whether the refusals alone leave no room for a quorum (not the failures with them).
    pub(crate) fn refused_by_a_majority(&self) -> bool {
        self.no > self.nodes() - self.quorum()
    }

    pub(crate) fn nodes(&self) -> usize {
        self.votes.len()
    }

    pub(crate) fn quorum(&self) -> usize {
        quorum(self.nodes())
    }

    /// Records node `i`'s vote; a second vote from the same node is ignored.
    pub(crate) fn record(&mut self, i: usize, vote: Vote) {
        let Some(slot) = self.votes.get_mut(i) else {
            return;
        };
        if slot.is_some() {
            return;
        }
        match vote {
            Vote::Yes | Vote::Raw(_) => self.yes += 1,
            Vote::Value(v) => {
                self.yes += 1;
                self.max_value = Some(self.max_value.map_or(v, |m| m.max(v)));
            }
            Vote::No => self.no += 1,
            Vote::Failed(_) => self.failed += 1,
        }
        *slot = Some(vote);
    }

    /// Marks every node that has not answered with `problem` (a deadline passed).
    pub(crate) fn fail_unanswered(&mut self, problem: NodeProblem) {
        for i in 0..self.votes.len() {
            if self.votes[i].is_none() {
                self.record(i, Vote::Failed(problem.clone()));
            }
        }
    }

    /// The outcome, once no further vote can change it.
    ///
    /// A failure is certain as soon as refusals and errors together rule a quorum out; when
    /// neither alone does, the remaining votes are awaited (until the caller's deadline turns
    /// them into timeouts), so that "held by another owner" and "nodes unreachable" do not
    /// depend on which answers happened to arrive first.
    pub(crate) fn decision(&self) -> Option<Decision> {
        let n = self.nodes();
        let q = self.quorum();
        if self.yes >= q {
            return Some(Decision::Quorum);
        }
        if self.no > n - q {
            return Some(Decision::Refused);
        }
        if self.failed > n - q {
            return Some(Decision::Unreachable);
        }
        let answered = self.yes + self.no + self.failed;
        if self.no + self.failed > n - q && answered == n {
            // Some nodes refused, others failed: the resource is held, and retrying later can
            // succeed once its owner lets go.
            return Some(Decision::Refused);
        }
        None
    }

    /// The largest number a yes vote carried: over a quorum of fenced acquires, the fence.
    pub(crate) fn max_value(&self) -> Option<u64> {
        self.max_value
    }

    /// The answers received so far.
    pub(crate) fn votes(&self) -> impl Iterator<Item = &Vote> {
        self.votes.iter().flatten()
    }

    /// The nodes where the command may have taken effect: all but those that answered a
    /// definite no (a refused `SET NX` set nothing).
    pub(crate) fn maybe_applied(&self) -> Box<[bool]> {
        self.votes
            .iter()
            .map(|v| !matches!(v, Some(Vote::No)))
            .collect()
    }

    /// Node `i`'s answer, if it has come.
    pub(crate) fn vote(&self, i: usize) -> Option<&Vote> {
        self.votes.get(i).and_then(Option::as_ref)
    }

    /// Which nodes applied the command (so far, counted toward the quorum or not).
    pub(crate) fn applied_nodes(&self) -> Box<[bool]> {
        self.votes
            .iter()
            .map(|v| v.as_ref().is_some_and(Vote::applied))
            .collect()
    }

    pub(crate) fn yes(&self) -> usize {
        self.yes
    }

    /// A report for an error message; `names[i]` is node i's address.
    pub(crate) fn report(&self, names: &[String], elapsed: Duration) -> QuorumReport {
        let mut report = QuorumReport::new(self.nodes(), self.quorum(), elapsed);
        for (vote, name) in self.votes.iter().zip(names) {
            let name = name.clone();
            match vote {
                None => report.pending.push(name),
                Some(v) if v.is_yes() => report.granted.push(name),
                Some(Vote::No) => report.failures.push(NodeReport {
                    node: name,
                    problem: NodeProblem::Refused,
                }),
                Some(Vote::Failed(p)) => report.failures.push(NodeReport {
                    node: name,
                    problem: p.clone(),
                }),
                Some(_) => {}
            }
        }
        report.succeeded = report.granted.len();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let ms = Duration::from_millis;
        assert_eq!(backoff_delay(ms(100), 0, ms(1000), 0.0), ms(50));
        assert_eq!(backoff_delay(ms(100), 0, ms(1000), 1.0), ms(100));
        assert_eq!(backoff_delay(ms(100), 2, ms(1000), 1.0), ms(400));
        assert_eq!(backoff_delay(ms(100), 4, ms(1000), 1.0), ms(1000));
        assert_eq!(backoff_delay(ms(100), 40, ms(1000), 0.0), ms(500));
        assert_eq!(backoff_delay(Duration::MAX, 3, ms(1000), 1.0), ms(1000));
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn quorum_is_a_strict_majority() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(2), 2);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
        assert_eq!(quorum(7), 4);
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let t0 = Instant::now();
        // ttl 10 s, drift 1 %: allowance 100 ms + 2 ms.
        let deadline = validity_deadline(t0, t0 + ms(30), ms(10_000), 0.01).unwrap();
        assert_eq!(deadline - t0, ms(10_000 - 102));
        // Seen from the decision 30 ms later, 10 000 - 30 - 102 ms remain.
        assert_eq!(deadline - (t0 + ms(30)), ms(9_868));
    }

    #[test]
    fn no_validity_when_elapsed_eats_the_ttl() {
        let t0 = Instant::now();
        assert!(validity_deadline(t0, t0 + ms(96), ms(100), 0.01).is_some());
        assert!(validity_deadline(t0, t0 + ms(97), ms(100), 0.01).is_none());
        assert!(validity_deadline(t0, t0, ms(2), 0.0).is_none());
        assert!(validity_deadline(t0, t0, ms(3), 0.0).is_some());
    }

    #[test]
    fn retry_delay_stays_within_jitter() {
        assert_eq!(retry_delay(ms(200), ms(100), 0.0), ms(100));
        assert_eq!(retry_delay(ms(200), ms(100), 0.5), ms(200));
        assert!(retry_delay(ms(200), ms(100), 0.999_999) <= ms(300));
        // Jitter larger than the delay never goes negative.
        assert_eq!(retry_delay(ms(10), ms(50), 0.0), ms(0));
        assert_eq!(retry_delay(ms(10), ms(0), 0.7), ms(10));
    }

    #[test]
    fn decides_as_soon_as_a_quorum_says_yes() {
        let mut t = Tally::new(5);
        t.record(0, Vote::Yes);
        t.record(1, Vote::Yes);
        assert_eq!(t.decision(), None);
        t.record(3, Vote::Failed(NodeProblem::TimedOut));
        assert_eq!(t.decision(), None);
        t.record(4, Vote::Yes);
        assert_eq!(t.decision(), Some(Decision::Quorum));
    }

    #[test]
    fn duplicate_votes_do_not_count_twice() {
        let mut t = Tally::new(3);
        t.record(0, Vote::Yes);
        t.record(0, Vote::Yes);
        assert_eq!(t.decision(), None);
        assert_eq!(t.yes(), 1);
        t.record(9, Vote::Yes); // out of range: ignored
        assert_eq!(t.yes(), 1);
    }

    #[test]
    fn refusals_mean_held_by_another_owner() {
        let mut t = Tally::new(5);
        for i in 0..2 {
            t.record(i, Vote::No);
        }
        assert_eq!(t.decision(), None);
        t.record(2, Vote::No);
        assert_eq!(t.decision(), Some(Decision::Refused));
    }

    #[test]
    fn errors_mean_no_quorum() {
        let mut t = Tally::new(5);
        t.record(0, Vote::Failed(NodeProblem::Unavailable("refused".into())));
        t.record(1, Vote::Failed(NodeProblem::Unavailable("refused".into())));
        assert_eq!(t.decision(), None);
        t.record(2, Vote::Failed(NodeProblem::TimedOut));
        assert_eq!(t.decision(), Some(Decision::Unreachable));
    }

    #[test]
    fn mixed_refusals_and_errors_wait_for_every_answer() {
        let mut t = Tally::new(5);
        t.record(0, Vote::No);
        t.record(1, Vote::Failed(NodeProblem::TimedOut));
        t.record(2, Vote::Failed(NodeProblem::TimedOut));
        // No quorum is possible any more, but the last two answers decide the kind.
        assert_eq!(t.decision(), None);
        t.record(3, Vote::No);
        assert_eq!(t.decision(), None);
        t.record(4, Vote::Failed(NodeProblem::TimedOut));
        assert_eq!(t.decision(), Some(Decision::Unreachable));

        let mut t = Tally::new(3);
        t.record(0, Vote::Failed(NodeProblem::TimedOut));
        t.record(1, Vote::No);
        assert_eq!(t.decision(), None);
        t.record(2, Vote::Yes);
        assert_eq!(t.decision(), Some(Decision::Refused));
    }

    #[test]
    fn deadline_turns_silence_into_timeouts() {
        let mut t = Tally::new(5);
        t.record(0, Vote::Yes);
        t.record(1, Vote::Yes);
        t.fail_unanswered(NodeProblem::TimedOut);
        assert_eq!(t.decision(), Some(Decision::Unreachable));
        let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        let report = t.report(&names, ms(50));
        assert_eq!(report.succeeded, 2);
        assert_eq!(report.failures.len(), 3);
        assert_eq!(report.failures[0].node, "n2");
        assert_eq!(report.errors(), 3);
    }

    #[test]
    fn single_node_is_the_single_instance_lock() {
        let mut t = Tally::new(1);
        t.record(0, Vote::No);
        assert_eq!(t.decision(), Some(Decision::Refused));
        let mut t = Tally::new(1);
        t.record(0, Vote::Yes);
        assert_eq!(t.decision(), Some(Decision::Quorum));
    }

    #[test]
    fn even_n_needs_more_than_half() {
        let mut t = Tally::new(4);
        t.record(0, Vote::Yes);
        t.record(1, Vote::Yes);
        t.record(2, Vote::No);
        assert_eq!(t.decision(), None);
        t.record(3, Vote::No);
        assert_eq!(t.decision(), Some(Decision::Refused));
    }

    /// Exhaustive check over small clusters: whenever the tally decides, no later votes could
    /// have changed the outcome between "quorum" and "no quorum".
    #[test]
    fn the_gate_wakes_the_caller_no_later_than_the_tally_decides() {
        // Every assignment of Yes/No/Failed to n nodes, some skipped (no request: a no), in
        // node order: the gate must have woken the caller by the vote after which the tally
        // first decides, and it wakes at most three times (one per count, and all answered).
        for n in 1..=5usize {
            for skipped in 0..n {
                let sent = n - skipped;
                for code in 0..3usize.pow(sent as u32) {
                    let gate = Gate::new(std::thread::current(), n, skipped);
                    let mut tally = Tally::new(n);
                    for i in 0..skipped {
                        tally.record(i, Vote::No);
                    }
                    let mut woken = tally.decision().is_some();
                    let mut wakes = 0;
                    for k in 0..sent {
                        let vote = match (code / 3usize.pow(k as u32)) % 3 {
                            0 => Vote::Yes,
                            1 => Vote::No,
                            _ => Vote::Failed(NodeProblem::TimedOut),
                        };
                        if gate.decides(vote.kind()) {
                            woken = true;
                            wakes += 1;
                        }
                        tally.record(skipped + k, vote);
                        if tally.decision().is_some() {
                            assert!(woken, "n={n} skipped={skipped} code={code} k={k}");
                        }
                    }
                    assert!(tally.decision().is_some());
                    assert!(wakes <= 3, "n={n} skipped={skipped} code={code}: {wakes}");
                }
            }
        }
    }

    #[test]
    fn the_gate_says_whether_the_caller_still_waited() {
        // 5 nodes: the third yes decides; the vote after it finds the caller gone.
        let gate = Gate::new(std::thread::current(), 5, 0);
        let (yes, no) = (VoteKind::Yes, VoteKind::No);
        let waited: Vec<bool> = [yes, no, yes, yes, yes]
            .into_iter()
            .map(|kind| gate.count(kind))
            .collect();
        assert_eq!(waited, [true, true, true, true, false]);
    }

    #[test]
    fn decisions_are_final() {
        for n in 1..=5usize {
            // Every assignment of Yes/No/Failed to n nodes, in every arrival order prefix.
            let total = 3usize.pow(n as u32);
            for code in 0..total {
                let votes: Vec<Vote> = (0..n)
                    .map(|i| match (code / 3usize.pow(i as u32)) % 3 {
                        0 => Vote::Yes,
                        1 => Vote::No,
                        _ => Vote::Failed(NodeProblem::TimedOut),
                    })
                    .collect();
                let yes = votes.iter().filter(|v| **v == Vote::Yes).count();
                let final_quorum = yes >= quorum(n);
                let mut t = Tally::new(n);
                for (i, v) in votes.iter().enumerate() {
                    t.record(i, v.clone());
                    if let Some(d) = t.decision() {
                        assert_eq!(d == Decision::Quorum, final_quorum, "n={n} votes={votes:?}");
                    }
                }
                assert!(t.decision().is_some());
            }
        }
    }

    #[test]
    fn value_votes_count_as_yes_and_keep_the_maximum() {
        let mut t = Tally::new(5);
        t.record(0, Vote::Value(7));
        t.record(1, Vote::No);
        t.record(2, Vote::Value(9));
        assert_eq!(t.decision(), None);
        t.record(3, Vote::Value(8));
        assert_eq!(t.decision(), Some(Decision::Quorum));
        assert_eq!(t.max_value(), Some(9));
        assert_eq!(&*t.applied_nodes(), &[true, false, true, true, false]);
        let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        let report = t.report(&names, ms(1));
        assert_eq!(report.succeeded, 3);
        assert_eq!(report.refused(), 1);
        assert_eq!(Tally::new(3).max_value(), None);
    }
}
