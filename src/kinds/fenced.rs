//! Fencing tokens kept as a quorum register next to the lock.
//!
//! A lock with a TTL cannot protect a resource from a holder that pauses (GC, swap, a stopped
//! VM) past its validity: the holder wakes up and writes, unaware that another owner has the
//! lock by now. Fencing (Martin Kleppmann, "How to do distributed locking") fixes this at the
//! resource: each acquisition comes with a number that grows from holder to holder, and the
//! resource rejects a write whose token is lower than the highest it has seen. One counter on
//! each of N independent nodes would "go out of sync"; here the counters form a quorum register.
//!
//! # The protocol
//! Per resource, each node keeps a counter under the key `redlock:fence:{<resource>}` (the
//! resource name between braces; no TTL, never deleted by redlock). Keys with that prefix
//! belong to redlock: do not use them as resource names or for anything else. A fenced
//! acquisition of `resource` with a fresh random token `t`:
//!
//! 1. **Acquire**: on every node, one script does `SET resource t NX PX ttl` and, only if that
//!    succeeded, `INCR` of the counter, and replies with the counter. Once a quorum (`N/2 + 1`)
//!    has replied with a counter, the fence `f` is the largest of those counters.
//! 2. **Write back**: on every node, one script raises the counter to `f`, and answers yes,
//!    only if (a) the lock key still holds `t` there and (b) the counter is not already above
//!    `f`. A quorum must answer yes.
//! 3. Validity is counted from the start of step 1 to the end of step 2, as for a plain lock;
//!    if none is left, or either step misses its quorum, the attempt is undone on every node
//!    (the counters keep their increments: gaps between tokens are harmless).
//!
//! # Why tokens are strictly monotonic
//! Let A and B be successful fenced acquisitions of one resource, with fences `fA` and `fB`.
//! Their write-backs succeeded on majorities, so some node `x` took both write-backs. On `x`,
//! A's key and B's key were present at different times (`SET NX` never overwrites, and the
//! scripts only delete their own token), so one came first; say A's. Then:
//! - A's write-back on `x` ran while A's key was there (condition a) and left the counter at
//!   `fA` (condition b allows only raising it to `fA`).
//! - B's key was set on `x` after A's key was gone, so after A's write-back; the same script
//!   incremented the counter, to at least `fA + 1`.
//! - B's write-back on `x` succeeded, so the counter was not above `fB` (condition b): `fB > fA`.
//!
//! So any two successful fenced acquisitions get different tokens, ordered like their locks on
//! the nodes they share: **the later holder has the greater token**. This needs no assumption on
//! clocks or pauses, only that `x` kept its data. In particular, when B begins after A returned,
//! A's key on `x` came first (it was there during A's write-back), so `fB > fA`.
//!
//! Both conditions matter. Without (a), a write-back could land on a node where the lock was
//! never ours, before a later holder's increment there; without (b), a node counted for B
//! after B's quorum was decided (a late reply) could hold a counter above `fB`. The model test
//! below finds the resulting violations when either condition is dropped.
//!
//! # What it assumes
//! Nodes that lose their data (a restart without persistence) break the argument exactly as
//! they break the lock: if the node `x` above restarts empty in between, nothing links `fA`
//! and `fB`. The guarantee holds as long as, for every token handed out, a majority of nodes
//! has it (or a higher one) and keeps it while the next acquisition runs. Write-backs go to
//! every node, and every successful fenced acquisition re-replicates the current value, so a
//! node that came back empty catches up on the next acquisition of each resource that reaches
//! it; what must not happen is that a majority loses the counter before it caught up. Run the
//! nodes with persistence (`appendfsync always` keeps the counter across crashes), or keep a
//! restarted node out until it has caught up, the delayed restart of the Redlock page.
//!
//! # Using the token
//! Pass it with every write to the protected resource; the resource keeps the highest token it
//! has accepted and rejects lower ones:
//!
//! ```
//! struct Storage { highest: u64, value: String }
//!
//! impl Storage {
//!     fn write(&mut self, fence: u64, value: &str) -> Result<(), String> {
//!         if fence < self.highest {
//!             return Err(format!("stale token {fence}: {} was seen", self.highest));
//!         }
//!         self.highest = fence;
//!         self.value = value.to_owned();
//!         Ok(())
//!     }
//! }
//!
//! let mut s = Storage { highest: 0, value: String::new() };
//! s.write(33, "from the first holder").unwrap();
//! s.write(34, "from the next holder").unwrap();
//! // The first holder wakes up from a pause and writes with its old token: rejected.
//! assert!(s.write(33, "stale").is_err());
//! assert_eq!(s.value, "from the next holder");
//! ```
//! In a database this is one conditional update, e.g.
//! `UPDATE t SET value = ?, fence = ? WHERE id = ? AND fence <= ?`.

use std::sync::Arc;

use crate::engine::{Engine, Outcome};
use crate::kinds::{Grant, Held, Kind, plain};
use crate::quorum::Decision;
use crate::wire::{Command, Keys, Reply, Script, owned_fn};

/// Where redlock keeps the fence counter of `resource` on each node.
///
/// The braces make it share a Redis Cluster hash slot with the lock key when the resource has
/// no braces of its own; the mapping is injective, so two resources never share a counter.
pub(crate) fn fence_key(resource: &str) -> String {
    format!("{FENCE_KEY_PREFIX}{{{resource}}}")
}

/// The prefix of every fence counter key.
pub(crate) const FENCE_KEY_PREFIX: &str = "redlock:fence:";

/// Fenced acquire: `SET NX PX` and, only if it succeeded, `INCR` of the resource's fence counter
/// (KEYS[2], no TTL), in one atomic step. Replies with the counter, or nil when the key is held.
/// A counter key that is not an integer undoes the SET and replies with the error.
pub(crate) static ACQUIRE: Script = Script::new(
    r#"if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return false
end
local n = redis.pcall("incr", KEYS[2])
if type(n) == "table" and n.err then
    redis.call("del", KEYS[1])
    return redis.error_reply(n.err)
end
return n"#,
);

/// Fence write-back: while the lock key still holds our token, raises the counter to ARGV[2]
/// unless it is already above it (then 0: a later acquisition counted past us on this node).
/// Counters are compared as decimal strings (length first), exact beyond Lua's 2^53.
pub(crate) static WRITE_FENCE: Script = Script::new(concat!(
    owned_fn!(),
    r#"if not owned(KEYS[1]) then
    return 0
end
local n = redis.call("get", KEYS[2])
if n and (#n > #ARGV[2] or (#n == #ARGV[2] and n > ARGV[2])) then
    return 0
end
redis.call("set", KEYS[2], ARGV[2])
return 1"#
));

/// A plain lock with a fencing token; the protocol above.
#[derive(Debug)]
pub(crate) struct Fenced {
    resource: Arc<str>,
    keys: [Arc<str>; 1],
    counter: Arc<str>,
}

impl Fenced {
    pub(crate) fn new(resource: Arc<str>) -> Fenced {
        Fenced {
            counter: fence_key(&resource).into(),
            keys: [Arc::clone(&resource)],
            resource,
        }
    }
}

impl Kind for Fenced {
    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn queues(&self) -> bool {
        true
    }

    fn acquire(&self, ttl_ms: u64) -> Command {
        // A repeat after a first run answers "held", never a false yes; an extra INCR only
        // skips a number.
        Command::script(&ACQUIRE, Reply::Count)
            .keys(Keys::KeyAnd(Arc::clone(&self.counter)))
            .number(ttl_ms)
            .acquiring()
    }

    fn grant(&self, engine: &Engine, acquired: &Outcome, token: &Arc<str>) -> Grant {
        let fence = acquired.tally.max_value().unwrap_or(0);
        let write = Command::script(&WRITE_FENCE, Reply::Flag)
            .keys(Keys::KeyAnd(Arc::clone(&self.counter)))
            .number(fence);
        let mut written = engine.quorum_call(&write, &self.resource, token);
        // Validity and the report count from the acquire's start.
        written.t0 = acquired.t0;
        let held = (written.decision == Decision::Quorum)
            .then(|| Box::new(HeldFenced { fence }) as Box<dyn Held>);
        Grant {
            held,
            last: Some(written),
        }
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce)
    }
}

#[derive(Debug)]
struct HeldFenced {
    fence: u64,
}

impl Held for HeldFenced {
    fn extend(&self, ttl_ms: u64) -> Command {
        plain::extend(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce)
    }

    fn fence(&self) -> Option<u64> {
        Some(self.fence)
    }
}

#[cfg(test)]
mod tests {
    //! A model of the protocol: nodes apply the two scripts, the client decides with the real
    //! [`Tally`], and a random scheduler delivers, delays, loses and reorders messages, expires
    //! keys at arbitrary times (a paused holder, bad clocks) and, where the assumption allows,
    //! wipes nodes. Every history is checked against the guarantees in the module docs.
    use super::*;
    use crate::error::NodeProblem;
    use crate::quorum::{Tally, Vote, quorum};

    #[test]
    fn fence_keys_are_prefixed_and_distinct() {
        assert_eq!(fence_key("orders:42"), "redlock:fence:{orders:42}");
        assert_ne!(fence_key("a}"), fence_key("a"));
        assert!(fence_key("").starts_with(FENCE_KEY_PREFIX));
    }

    /// xorshift64*: deterministic, so a failing seed can be replayed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Acquire,
        WriteBack(u64),
        Release,
    }

    #[derive(Clone, Copy)]
    struct Variant {
        /// Write-back requires our key on the node (condition a).
        needs_key: bool,
        /// Write-back fails when the counter is above the fence (condition b).
        needs_not_above: bool,
        /// Attempts run one after another (each begins after the previous one decided).
        sequential: bool,
        /// Wipe nodes; `respect_assumption` limits wipes to what the module docs allow.
        wipes: bool,
        respect_assumption: bool,
    }

    const SOUND: Variant = Variant {
        needs_key: true,
        needs_not_above: true,
        sequential: false,
        wipes: false,
        respect_assumption: true,
    };

    #[derive(Default)]
    struct Node {
        key: Option<usize>,
        counter: u64,
        /// Attempts whose key was set here, in order (cleared by a wipe).
        keys_seen: Vec<usize>,
    }

    impl Node {
        fn apply(&mut self, attempt: usize, op: Op, v: Variant) -> Vote {
            match op {
                Op::Acquire => {
                    if self.key.is_some() {
                        return Vote::No;
                    }
                    self.key = Some(attempt);
                    self.keys_seen.push(attempt);
                    self.counter += 1;
                    Vote::Value(self.counter)
                }
                Op::WriteBack(f) => {
                    if v.needs_key && self.key != Some(attempt) {
                        return Vote::No;
                    }
                    if v.needs_not_above && self.counter > f {
                        return Vote::No;
                    }
                    self.counter = self.counter.max(f);
                    Vote::Yes
                }
                Op::Release => {
                    if self.key == Some(attempt) {
                        self.key = None;
                        Vote::Yes
                    } else {
                        Vote::No
                    }
                }
            }
        }
    }

    enum Phase {
        Acquiring(Tally),
        WritingBack(u64, Tally),
        Holding,
        Done,
    }

    struct Attempt {
        started: u64,
        phase: Phase,
        /// Which phase replies still count for: bumped on each decision.
        round: u32,
        /// Nodes that had the latest committed fence when this attempt began and were not
        /// wiped since (the assumption, for sequential histories).
        kept: Vec<bool>,
    }

    struct Success {
        attempt: usize,
        started: u64,
        at: u64,
        fence: u64,
        wrote_back: Box<[bool]>,
    }

    struct Msg {
        attempt: usize,
        round: u32,
        node: usize,
        op: Op,
    }

    struct History {
        v: Variant,
        rng: Rng,
        nodes: Vec<Node>,
        /// Per node: the step of its last wipe.
        wiped_at: Vec<Option<u64>>,
        attempts: Vec<Attempt>,
        msgs: Vec<Msg>,
        successes: Vec<Success>,
        step: u64,
    }

    impl History {
        fn new(v: Variant, seed: u64, n: usize) -> Self {
            History {
                v,
                rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
                nodes: (0..n).map(|_| Node::default()).collect(),
                wiped_at: vec![None; n],
                attempts: Vec::new(),
                msgs: Vec::new(),
                successes: Vec::new(),
                step: 0,
            }
        }

        fn n(&self) -> usize {
            self.nodes.len()
        }

        fn latest_fence(&self) -> u64 {
            self.successes.iter().map(|s| s.fence).max().unwrap_or(0)
        }

        fn send_all(&mut self, attempt: usize, op: Op) {
            let round = self.attempts[attempt].round;
            for node in 0..self.n() {
                self.msgs.push(Msg {
                    attempt,
                    round,
                    node,
                    op,
                });
            }
        }

        fn start(&mut self) {
            let id = self.attempts.len();
            let latest = self.latest_fence();
            let kept = self.nodes.iter().map(|n| n.counter >= latest).collect();
            self.attempts.push(Attempt {
                started: self.step,
                phase: Phase::Acquiring(Tally::new(self.n())),
                round: 0,
                kept,
            });
            self.send_all(id, Op::Acquire);
        }

        fn in_flight(&self) -> bool {
            self.attempts
                .iter()
                .any(|a| matches!(a.phase, Phase::Acquiring(_) | Phase::WritingBack(..)))
        }

        /// Moves an attempt on once its tally has decided.
        fn advance(&mut self, id: usize) {
            let a = &mut self.attempts[id];
            let decided = match &a.phase {
                Phase::Acquiring(t) | Phase::WritingBack(_, t) => t.decision(),
                Phase::Holding | Phase::Done => None,
            };
            let Some(decision) = decided else { return };
            a.round += 1;
            let next = match (&a.phase, decision) {
                (Phase::Acquiring(t), Decision::Quorum) => {
                    let fence = t.max_value().expect("a quorum of counters");
                    Some(Op::WriteBack(fence))
                }
                (Phase::WritingBack(fence, t), Decision::Quorum) => {
                    self.successes.push(Success {
                        attempt: id,
                        started: a.started,
                        at: self.step,
                        fence: *fence,
                        wrote_back: t.applied_nodes(),
                    });
                    a.phase = Phase::Holding;
                    None
                }
                _ => {
                    a.phase = Phase::Done;
                    Some(Op::Release)
                }
            };
            match next {
                Some(Op::WriteBack(f)) => {
                    a.phase = Phase::WritingBack(f, Tally::new(self.nodes.len()));
                    self.send_all(id, Op::WriteBack(f));
                }
                Some(op) => self.send_all(id, op),
                None => {}
            }
        }

        /// Delivers message `i`; its reply reaches the client if `reply`.
        fn deliver(&mut self, i: usize, reply: bool) {
            let m = self.msgs.swap_remove(i);
            let vote = self.nodes[m.node].apply(m.attempt, m.op, self.v);
            if !reply {
                return;
            }
            let a = &mut self.attempts[m.attempt];
            if a.round != m.round {
                return; // late: the attempt has moved on
            }
            match &mut a.phase {
                Phase::Acquiring(t) | Phase::WritingBack(_, t) => t.record(m.node, vote),
                Phase::Holding | Phase::Done => return,
            }
            self.advance(m.attempt);
        }

        fn wipe_allowed(&self, x: usize) -> bool {
            if !self.v.respect_assumption {
                return true;
            }
            let q = quorum(self.n());
            let latest = self.latest_fence();
            let having = (0..self.n())
                .filter(|&i| i != x && self.nodes[i].counter >= latest)
                .count();
            let kept_ok = self.attempts.iter().all(|a| {
                !matches!(a.phase, Phase::Acquiring(_) | Phase::WritingBack(..))
                    || (0..self.n()).filter(|&i| i != x && a.kept[i]).count() >= q
            });
            // A node that acknowledged a write-back in progress keeps it: losing it would make
            // that acknowledgement a lie the client cannot see.
            let acked = self.attempts.iter().any(|a| match &a.phase {
                Phase::WritingBack(_, t) => t.applied_nodes()[x],
                _ => false,
            });
            having >= q && kept_ok && !acked
        }

        fn run(&mut self, steps: u64, concurrency: usize) {
            while self.step < steps {
                self.step += 1;
                match self.rng.below(16) {
                    0 | 1 => {
                        let active = self
                            .attempts
                            .iter()
                            .filter(|a| !matches!(a.phase, Phase::Done))
                            .count();
                        let free = if self.v.sequential {
                            !self.in_flight()
                        } else {
                            active < concurrency
                        };
                        if free {
                            self.start();
                        }
                    }
                    2..=9 if !self.msgs.is_empty() => {
                        let i = self.rng.below(self.msgs.len());
                        let reply = !self.rng.chance(20);
                        self.deliver(i, reply);
                    }
                    10 if !self.msgs.is_empty() => {
                        let i = self.rng.below(self.msgs.len());
                        self.msgs.swap_remove(i); // lost before it reached the node
                    }
                    11 if !self.attempts.is_empty() => {
                        // A deadline passes: silent nodes count as timed out.
                        let id = self.rng.below(self.attempts.len());
                        if let Phase::Acquiring(t) | Phase::WritingBack(_, t) =
                            &mut self.attempts[id].phase
                        {
                            t.fail_unanswered(NodeProblem::TimedOut);
                            self.advance(id);
                        }
                    }
                    12 => {
                        // A key expires at any moment: the model trusts no clock.
                        let x = self.rng.below(self.n());
                        self.nodes[x].key = None;
                    }
                    13 | 14 => {
                        let holding: Vec<usize> = (0..self.attempts.len())
                            .filter(|&i| matches!(self.attempts[i].phase, Phase::Holding))
                            .collect();
                        if !holding.is_empty() {
                            let id = holding[self.rng.below(holding.len())];
                            self.attempts[id].phase = Phase::Done;
                            self.attempts[id].round += 1;
                            self.send_all(id, Op::Release);
                        }
                    }
                    15 if self.v.wipes => {
                        let x = self.rng.below(self.n());
                        if self.wipe_allowed(x) {
                            self.nodes[x] = Node::default();
                            self.wiped_at[x] = Some(self.step);
                            for a in &mut self.attempts {
                                a.kept[x] = false;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }

        /// The guarantees of the module docs; the first violation, if any.
        fn violation(&self) -> Option<String> {
            for (i, a) in self.successes.iter().enumerate() {
                for b in &self.successes[i + 1..] {
                    if a.fence == b.fence {
                        return Some(format!(
                            "attempts {} and {} both got fence {}",
                            a.attempt, b.attempt, a.fence
                        ));
                    }
                    for (first, second) in [(a, b), (b, a)] {
                        if second.started > first.at && second.fence <= first.fence {
                            return Some(format!(
                                "attempt {} began after {} succeeded with {}, got {}",
                                second.attempt, first.attempt, first.fence, second.fence
                            ));
                        }
                    }
                    // On a node that took both write-backs and kept its data, the lock that
                    // came first there has the smaller token.
                    for x in 0..self.n() {
                        if !(a.wrote_back[x] && b.wrote_back[x]) || self.wiped_at[x].is_some() {
                            continue;
                        }
                        let seen = &self.nodes[x].keys_seen;
                        let pos = |id| seen.iter().position(|&s| s == id);
                        if let (Some(pa), Some(pb)) = (pos(a.attempt), pos(b.attempt))
                            && (pa < pb) != (a.fence < b.fence)
                        {
                            return Some(format!(
                                "node {x} saw attempt {} before {} but fences are {} and {}",
                                if pa < pb { a.attempt } else { b.attempt },
                                if pa < pb { b.attempt } else { a.attempt },
                                if pa < pb { a.fence } else { b.fence },
                                if pa < pb { b.fence } else { a.fence },
                            ));
                        }
                    }
                }
            }
            None
        }
    }

    struct Exploration {
        histories: u64,
        successes: u64,
        /// The first violation: seed, node count and what went wrong.
        violation: Option<String>,
    }

    /// Runs up to `histories` random histories, stopping at the first violation.
    fn explore(v: Variant, histories: u64) -> Exploration {
        let mut e = Exploration {
            histories: 0,
            successes: 0,
            violation: None,
        };
        for seed in 0..histories {
            let n = [1, 2, 3, 3, 4, 5, 5, 5][seed as usize % 8];
            let mut h = History::new(v, seed, n);
            h.run(400, 1 + seed as usize % 3);
            e.histories += 1;
            e.successes += h.successes.len() as u64;
            if let Some(why) = h.violation() {
                e.violation = Some(format!("seed {seed}, {n} nodes: {why}"));
                break;
            }
        }
        e
    }

    /// Histories per sound variant (each up to 3 concurrent clients, 1 to 5 nodes, 400 steps).
    const MODEL_HISTORIES: u64 = 50_000;

    #[test]
    fn model_concurrent_histories_keep_tokens_ordered() {
        let e = explore(SOUND, MODEL_HISTORIES);
        assert_eq!(e.violation, None);
        assert_eq!(e.histories, MODEL_HISTORIES);
        // The histories must exercise the claim: many successes, not a sea of failures.
        assert!(
            e.successes > MODEL_HISTORIES,
            "only {} successes",
            e.successes
        );
    }

    #[test]
    fn model_sequential_histories_with_allowed_data_loss() {
        let v = Variant {
            sequential: true,
            wipes: true,
            ..SOUND
        };
        let e = explore(v, MODEL_HISTORIES);
        assert_eq!(e.violation, None);
        assert_eq!(e.histories, MODEL_HISTORIES);
        assert!(
            e.successes > MODEL_HISTORIES,
            "only {} successes",
            e.successes
        );
    }

    /// The model can fail: each weakening the docs warn about produces violations.
    #[test]
    fn model_finds_the_violations_the_docs_warn_about() {
        let weakened = [
            (
                "write-back without the key check",
                Variant {
                    needs_key: false,
                    ..SOUND
                },
            ),
            (
                "a majority loses its data",
                Variant {
                    sequential: true,
                    wipes: true,
                    respect_assumption: false,
                    ..SOUND
                },
            ),
        ];
        for (what, v) in weakened {
            let e = explore(v, 10 * MODEL_HISTORIES);
            eprintln!("{what}: {:?} after {} histories", e.violation, e.histories);
            assert!(e.violation.is_some(), "{what}: no violation found");
        }
    }

    /// Condition (b) guards against a rarer interleaving than random search reaches, so it gets
    /// a scripted history: B's acquire reaches node 0 only after A has held and written back
    /// there, and its reply from node 0 is lost, so B's fence comes from nodes 1 and 2.
    fn late_reply_history(v: Variant) -> History {
        let mut h = History::new(v, 1, 3);
        let send = |h: &mut History, attempt: usize, node: usize, reply: bool| {
            h.step += 1;
            let i = h
                .msgs
                .iter()
                .position(|m| m.attempt == attempt && m.node == node)
                .expect("message in flight");
            h.deliver(i, reply);
        };
        let (b, a) = (0, 1);
        h.start(); // B
        send(&mut h, b, 1, true); // B's key on node 1, counter 1
        h.nodes[1].key = None; // ... expires there (B is paused)
        h.step += 1;
        h.start(); // A
        send(&mut h, a, 1, true); // counter 2 on node 1
        send(&mut h, a, 0, true); // counter 1 on node 0: A decides, fence 2
        send(&mut h, a, 0, true); // write-backs on 0 and 1: A succeeds with 2
        send(&mut h, a, 1, true);
        assert_eq!(h.successes.len(), 1);
        h.nodes[0].key = None; // A's key expires on node 0
        send(&mut h, b, 0, false); // B's key on node 0, counter 3: the reply is lost
        send(&mut h, b, 2, true); // counter 1 on node 2: B decides on nodes 1 and 2, fence 1
        send(&mut h, b, 0, true); // write-back where node 0's counter is 3
        send(&mut h, b, 2, true);
        h
    }

    #[test]
    fn write_back_over_a_higher_counter_would_break_the_order() {
        let h = late_reply_history(SOUND);
        assert_eq!(h.violation(), None);
        assert_eq!(
            h.successes.len(),
            1,
            "B must fail: its fence is stale on node 0"
        );

        let weak = late_reply_history(Variant {
            needs_not_above: false,
            ..SOUND
        });
        assert_eq!(weak.successes.len(), 2);
        let why = weak.violation().expect("a violation");
        assert!(why.contains("node 0 saw attempt 1 before 0"), "{why}");
    }
}
