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
//! 1. **Acquire**: on every node, one script first compares the node's clock (`TIME`) with the
//!    client's wall clock `w` sent along: outside `[w − τ, w + τ + ν]` it refuses with a
//!    `CLOCKSKEW` error and touches nothing (τ is the client's `clock_jump_threshold`, 50 ms by
//!    default, ν its `node_timeout`, the longest the command may be on its way). Otherwise it
//!    does `SET resource t NX PX ttl` and, only if that succeeded, raises the counter to
//!    `max(counter + 1, node clock in µs since the epoch)` and replies with it. Once a quorum
//!    (`N/2 + 1`) has replied with a counter, the fence `f` is the largest of those counters.
//! 2. **Write back**: on every node, one script raises the counter to `f`, and answers yes,
//!    only if (a) the lock key still holds `t` there and (b) the counter is not already above
//!    `f`. A quorum must answer yes.
//! 3. Validity is counted from the start of step 1 to the end of step 2, as for a plain lock;
//!    if none is left, or either step misses its quorum, the attempt is undone on every node
//!    (the counters keep their increments: gaps between tokens are harmless).
//!
//! So a token is about the time of its acquisition in microseconds since the Unix epoch, or a
//! little more when acquisitions come faster than the clocks tick. It is a number to compare,
//! not a time to read. Tokens stay below 2^53 until about the year 2255, so JSON and JavaScript
//! readers keep them exact. Counters written by earlier versions of this library (small
//! integers) are below every clock: the first acquisition jumps past them.
//!
//! # Why tokens are strictly monotonic
//! Let A and B be successful fenced acquisitions of one resource, with fences `fA` and `fB`.
//!
//! **On a node that kept its data.** Their write-backs succeeded on majorities, so some node
//! `x` took both write-backs. Suppose `x` kept its data from the first write-back to the
//! second. On `x`, A's key and B's key were present at different times (`SET NX` never
//! overwrites, and the scripts only delete their own token), so one came first; say A's. Then:
//! - A's write-back on `x` ran while A's key was there (condition a) and left the counter at
//!   `fA` (condition b allows only raising it to `fA`).
//! - B's key was set on `x` after A's key was gone, so after A's write-back; the same script
//!   raised the counter to at least `fA + 1`.
//! - B's write-back on `x` succeeded, so the counter was not above `fB` (condition b): `fB > fA`.
//!
//! Both conditions matter. Without (a), a write-back could land on a node where the lock was
//! never ours, before a later holder's increment there; without (b), a node counted for B
//! after B's quorum was decided (a late reply) could hold a counter above `fB`. The model test
//! below finds the resulting violations when either condition is dropped.
//!
//! **When B began after A returned.** Take a node `x` that took A's write-back and whose
//! acquire reply B counted (a majority each, so one exists). B's acquire ran on `x` after A's
//! write-back there. If `x` kept its data in between, its counter was at least `fA`, so it
//! replied at least `fA + 1`, and `fB` is the largest reply counted: `fB > fA`. If `x` lost its
//! data in between (a restart without persistence), the counter is gone, and the clocks take
//! over:
//! - every counter value is at most the true time it was written plus `ε + τ + ν`, where ε
//!   bounds how far any client's wall clock is from the true time: the node's clock passed the
//!   check against the client's, and `counter + 1` only runs ahead of the clocks by the
//!   increments of one microsecond. `fA` was written before A's write-back on `x`, so before
//!   the data loss at `t`: `fA ≤ t + ε + τ + ν`;
//! - `x` does not count for anyone until `D` after the loss: a **delayed restart** (the node
//!   stays down for `D`), or [`restart_grace`](crate::Builder::restart_grace) `D` (its acquire
//!   votes count only from batches sent `D` after its process started; the start is taken
//!   from `uptime_in_seconds` at its earliest). B's command left the client at most ν after it
//!   was made, so B made it at `t + D − ν` or later, with its clock then at least
//!   `t + D − ν − ε`, and the node's clock passed the check: `fB ≥ t + D − ν − ε − τ`.
//!
//! So **`fB > fA` as long as `D > 2 (ε + τ + ν)`**: with the defaults and well-kept clocks,
//! a restart delay or grace of a few hundred milliseconds, far less than the TTL each of them
//! must exceed anyway to keep the lock itself safe. The node clocks need no assumption of their
//! own: a node whose clock is off by more than τ takes no part in fenced acquisitions. The model
//! test below checks this with any nodes losing their data at any time, and finds the violation
//! when the clocks are further apart than the restart delay, or the counter has no time floor
//! (the second case is the review's: 5 nodes, A's three tokens written back to n0..n2 only,
//! n0 restarted empty after a delay, B's quorum {n0, n3, n4} with no trace of the counter: a
//! bare counter gave B the token 1; `tests/fence.rs` replays it on real servers).
//!
//! # What it assumes
//! - A node that loses its data (a restart without persistence, a failover to a replica that
//!   had not got the counter) stays out of acquire quorums for `D > 2 (ε + τ + ν)` after it:
//!   the Redlock page's delayed restart, or `restart_grace` in every client. The lock needs
//!   `D` ≥ the largest TTL anyway; this asks for nothing more unless TTLs are tiny.
//! - Every client's wall clock is within ε of the true time (NTP-kept hosts: milliseconds).
//! - Nothing but redlock writes the counter keys, and nothing evicts them (no `allkeys-*`
//!   `maxmemory-policy`: the server probe warns about it).
//! - Counters grow by less than one per microsecond per node and resource.
//!
//! Concurrent acquisitions (neither returned before the other began) get distinct tokens,
//! ordered like their keys on every shared node that kept its data.
//!
//! # What it costs
//! Where the library cannot be sure, it refuses rather than issue a smaller token. A node whose
//! clock differs from a client's by more than τ (ahead: τ + ν) refuses that client's fenced
//! acquisitions with `CLOCKSKEW` and counts as a failed node for them, while plain locks still
//! use it. So with N = 3, one node with a skewed clock and another one down, fenced locks are
//! refused with [`NoQuorum`](crate::Error::NoQuorum) (its report names `CLOCKSKEW`) while plain
//! locks still work. Keep the clocks in step, or raise `clock_jump_threshold` (then `D` must
//! grow with it).
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
use std::time::SystemTime;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::kinds::{Caller, Grant, Held, Kind, plain};
use crate::rules::clock::DEFAULT_CLOCK_JUMP;
use crate::rules::quorum::Decision;
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

/// Fenced acquire, in one atomic step: checks the node's clock against the client's, then
/// `SET NX PX` and, only if that succeeded, raises the resource's fence counter (KEYS[2], no
/// TTL) to the larger of its value + 1 and the node's clock in microseconds since the epoch,
/// and replies with it. Replies nil when the key is held.
///
/// ARGV[3] is `"<client wall clock, µs> <tolerance, µs> <in flight, µs>"`: a node whose
/// `TIME` reads more than the tolerance behind the client's clock, or more than the tolerance
/// plus the time in flight ahead of it, refuses with a `CLOCKSKEW` error before touching
/// anything, so that a node with an absurd clock can neither push tokens towards the far
/// future nor hand out a floor from the past. A counter key that is not a decimal integer
/// undoes the SET and replies with `INCR`'s error.
pub(crate) static ACQUIRE: Script = Script::new(
    r#"local t = redis.call("time")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wall, tolerance, flight = string.match(ARGV[3], "^(%d+) (%d+) (%d+)$")
wall, tolerance, flight = tonumber(wall), tonumber(tolerance), tonumber(flight)
if now < wall - tolerance or now > wall + tolerance + flight then
    local off = now - wall
    return redis.error_reply(string.format(
        "CLOCKSKEW the node's clock reads %d ms %s the client's, more than the %d ms fencing "
        .. "tokens allow (clock_jump_threshold): synchronise the clocks (NTP)",
        math.abs(off) / 1000, off < 0 and "behind" or "ahead of", tolerance / 1000))
end
if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return false
end
local c = redis.pcall("get", KEYS[2])
if type(c) == "table" and c.err then
    redis.call("del", KEYS[1])
    return redis.error_reply(c.err)
end
if c and (not string.find(c, "^%d+$") or tonumber(c) >= now) then
    local n = redis.pcall("incr", KEYS[2])
    if type(n) == "table" and n.err then
        redis.call("del", KEYS[1])
        return redis.error_reply(n.err)
    end
    return n
end
redis.call("set", KEYS[2], string.format("%d", now))
return now"#,
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

/// ACQUIRE's ARGV[3]: our wall clock now, how far the node's may differ from it (the clock
/// guard's threshold, which is on by default; its default when the guard is off) and how long
/// the command may be on its way (queued, then in flight: `node_timeout`), all in µs.
fn clock_window(config: &Config) -> String {
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let tolerance = config.clock_jump.unwrap_or(DEFAULT_CLOCK_JUMP);
    format!(
        "{} {} {}",
        wall.as_micros(),
        tolerance.as_micros(),
        config.node_timeout.as_micros()
    )
}

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
    fn name(&self) -> &'static str {
        "fenced"
    }

    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn queues(&self) -> bool {
        true
    }

    fn acquire(&self, ttl_ms: u64, config: &Config) -> Command {
        // A repeat after a first run answers "held", never a false yes; an extra INCR only
        // skips a number.
        Command::script(&ACQUIRE, Reply::Count)
            .keys(Keys::KeyAnd(Arc::clone(&self.counter)))
            .number(ttl_ms)
            .text(clock_window(config).into())
            .acquiring()
    }

    fn grant(&self, engine: &Engine, acquired: &Outcome, token: &Arc<str>, _: &Caller) -> Grant {
        write_back(
            engine,
            acquired,
            token,
            &self.resource,
            |fence| {
                Command::script(&WRITE_FENCE, Reply::Flag)
                    .keys(Keys::KeyAnd(Arc::clone(&self.counter)))
                    .number(fence)
            },
            |fence| Box::new(HeldFenced { fence }),
        )
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce)
    }
}

/// Step 2 of the protocol: the fence is the largest counter among the acquire's replies, and
/// `write(fence)` writes it back to a quorum; the lock is granted, as `held(fence)`, only if
/// that succeeded.
pub(crate) fn write_back(
    engine: &Engine,
    acquired: &Outcome,
    token: &Arc<str>,
    resource: &Arc<str>,
    write: impl FnOnce(u64) -> Command,
    held: impl FnOnce(u64) -> Box<dyn Held>,
) -> Grant {
    let fence = acquired.tally.max_value().unwrap_or(0);
    let mut written = engine.quorum_call(&write(fence), resource, token);
    // Validity and the report count from the acquire's start.
    written.t0 = acquired.t0;
    let held = (written.decision == Decision::Quorum).then(|| held(fence));
    Grant {
        held,
        last: Some(written),
    }
}

/// A granted fenced lock (also a leadership: the term is its fence).
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
    use crate::rules::quorum::{Tally, Vote, quorum};

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
        /// Wipe nodes; `respect_assumption` limits wipes to a minority that never holds the
        /// only copies of the latest token (the old assumption), unless `delayed` stands in.
        wipes: bool,
        respect_assumption: bool,
        /// The acquire raises the counter to at least the node's clock (the time floor).
        time_floor: bool,
        /// A wiped node stays down (drops what reaches it) for this many steps: a delayed
        /// restart. With it, any node may be wiped at any time, as many as the dice say.
        delayed: Option<u64>,
        /// How far each node's clock may be off (either way), in clock units; the clocks run
        /// at `CLOCK_RATE` units a step.
        skew: u64,
    }

    /// Clock units per step: several, so that a counter outrunning its clock by one step's
    /// worth of increments is not the only thing a clock can tell.
    const CLOCK_RATE: u64 = 10;

    const SOUND: Variant = Variant {
        needs_key: true,
        needs_not_above: true,
        sequential: false,
        wipes: false,
        respect_assumption: true,
        time_floor: true,
        delayed: None,
        skew: 0,
    };

    /// Any node wiped at any time, each down for 5 steps after (50 clock units), with clocks
    /// up to 20 units off either way: 2 × 20 < 50, within the assumption.
    const DELAYED_RESTARTS: Variant = Variant {
        wipes: true,
        respect_assumption: false,
        delayed: Some(5),
        skew: 20,
        ..SOUND
    };

    #[derive(Default)]
    struct Node {
        key: Option<usize>,
        counter: u64,
        /// Attempts whose key was set here, in order (cleared by a wipe).
        keys_seen: Vec<usize>,
        /// Its clock's offset from `step × CLOCK_RATE`, in `-skew..=skew`.
        offset: i64,
        /// Down (and empty) until this step, after a wipe with a delayed restart.
        down_until: u64,
    }

    impl Node {
        fn apply(&mut self, attempt: usize, op: Op, v: Variant, step: u64) -> Vote {
            match op {
                Op::Acquire => {
                    if self.key.is_some() {
                        return Vote::No;
                    }
                    self.key = Some(attempt);
                    self.keys_seen.push(attempt);
                    self.counter += 1;
                    if v.time_floor {
                        let clock = (step * CLOCK_RATE) as i64 + self.offset;
                        self.counter = self.counter.max(clock.max(0) as u64);
                    }
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
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let nodes = (0..n)
                .map(|_| Node {
                    offset: rng.below(2 * v.skew as usize + 1) as i64 - v.skew as i64,
                    ..Node::default()
                })
                .collect();
            History {
                v,
                rng,
                nodes,
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
            if self.step < self.nodes[m.node].down_until {
                return; // the node is down: lost
            }
            let vote = self.nodes[m.node].apply(m.attempt, m.op, self.v, self.step);
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
                            self.nodes[x] = Node {
                                offset: self.nodes[x].offset,
                                down_until: self.step + self.v.delayed.unwrap_or(0) + 1,
                                ..Node::default()
                            };
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

    /// Explores a sound variant: no violation, and the histories exercise the claim (many
    /// successes, not a sea of failures).
    fn assert_sound(variant: Variant) {
        let e = explore(variant, MODEL_HISTORIES);
        assert_eq!(e.violation, None);
        assert_eq!(e.histories, MODEL_HISTORIES);
        assert!(
            e.successes > MODEL_HISTORIES,
            "only {} successes",
            e.successes
        );
    }

    #[test]
    fn model_concurrent_histories_keep_tokens_ordered() {
        assert_sound(SOUND);
    }

    #[test]
    fn model_sequential_histories_with_allowed_data_loss() {
        assert_sound(Variant {
            sequential: true,
            wipes: true,
            ..SOUND
        });
    }

    #[test]
    fn model_delayed_restarts_of_any_nodes_keep_tokens_ordered() {
        assert_sound(DELAYED_RESTARTS);
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
                "a bare counter (no time floor) when a majority loses its data",
                Variant {
                    sequential: true,
                    wipes: true,
                    respect_assumption: false,
                    time_floor: false,
                    ..SOUND
                },
            ),
            (
                "a bare counter (no time floor) under delayed restarts",
                Variant {
                    time_floor: false,
                    ..DELAYED_RESTARTS
                },
            ),
            (
                "clocks further apart than the restart delay",
                Variant {
                    skew: 100,
                    ..DELAYED_RESTARTS
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
        // The counter alone (with the time floor, B's later clock would also save the order
        // here, but not when the clocks disagree).
        let counter_only = Variant {
            time_floor: false,
            ..SOUND
        };
        let h = late_reply_history(counter_only);
        assert_eq!(h.violation(), None);
        assert_eq!(
            h.successes.len(),
            1,
            "B must fail: its fence is stale on node 0"
        );

        let weak = late_reply_history(Variant {
            needs_not_above: false,
            ..counter_only
        });
        assert_eq!(weak.successes.len(), 2);
        let why = weak.violation().expect("a violation");
        assert!(why.contains("node 0 saw attempt 1 before 0"), "{why}");
    }
}
