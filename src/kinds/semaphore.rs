//! The counting semaphore: at most L holders at once, each permit expiring like a lock.
//!
//! # Why not a counter
//! The obvious design, a counter per node that an acquisition increments where it is below L
//! and that needs a quorum, is **not safe for L ≥ 2**. With N = 5 and L = 2, three clients can
//! each be granted on a different majority: {1,2,3}, {3,4,5} and {1,2,4}. Node by node that is
//! 2, 2, 2, 2 and 1 holders, never above L, yet three hold a permit. (For L = 1 it is the mutex
//! and is safe: any two majorities share a node, and that node counts both.) Quorum
//! intersection says that two holders meet on *some* node; it does not make any one node see
//! all of them, which a count of L + 1 would need.
//!
//! # The design: L mutexes
//! A semaphore `R` with L permits is L **slots**, slot `i` an ordinary Redlock mutex on the key
//! `redlock:sem:{R}:i` (the braces are a Redis Cluster hash tag, so a slot and the stored L
//! always share a hash slot). A holder owns exactly one slot. An acquisition tries the slots in
//! a fresh random order, each with a full quorum attempt (`SET NX PX`, the validity rule, an
//! undo on failure), and stops at the first it is granted; only when every slot refused does
//! the attempt count as refused (and the request's patience decides what comes next). Extension
//! and release are those of a plain lock, on the one slot.
//!
//! **Why at most L holders**: each slot is a Redlock mutex, so by Redlock's argument (docs/redlock.md) at most
//! one valid holder per slot at any instant, and a holder holds one slot; there are L slots.
//! Nothing here needs more than Redlock's own assumptions, and the fault tolerance is the
//! same: any majority of nodes serves every slot.
//!
//! # L is stored and checked
//! Callers must agree on L: with L = 2 and L = 3 on one semaphore, two holders of slots 0 and 1
//! and a third of slot 2 would be three. So next to the slots each node keeps L at
//! `redlock:sem:{R}`, and every slot acquisition runs one script that (1) compares the request's
//! L with the stored one and fails with an error when they differ, (2) `SET NX PX` the slot, and
//! (3) only if that succeeded, stores L where none was and keeps the stored L's TTL at least the
//! slot's. Extension raises it the same way; nothing else writes or deletes it.
//!
//! Invariant, per node: **while any slot key of R lives, the stored L lives, unchanged, and
//! every live slot key was set by a caller with that L** (L is set only where absent, by the
//! same script that sets a slot; it outlives every slot it was set or checked with; a slot is
//! set only after the check). Now take two holders valid at one instant with different L: their
//! quorums share a node x, where both slot keys are live at that instant; both scripts checked
//! L on x, and L stayed on x from the earlier set to that instant, so the two L were equal — a
//! contradiction. Holders valid at one instant therefore all use one L, and the count above
//! applies. The second kind of caller gets [`Error::InvalidArgument`](crate::Error) naming both
//! numbers, once a node reports the mismatch and its attempt failed. The stored L expires with
//! the last slot's TTL, so L can be changed once every holder is gone and its TTL has run out.
//!
//! Which schedule breaks it? The plain lock's: a majority losing its data (a node restarted
//! empty loses its slots and the stored L alike; run with persistence or a delayed restart), or
//! clocks running faster than the drift allowance. Mixed L on a node that lost L is covered by
//! the same restart rules, since the slots went with it.
//!
//! # No fencing tokens
//! Semaphore holders take none. A token per slot would order only the holders of that slot;
//! between slots, counters interleave (the holder of slot 1 may have a smaller number than an
//! earlier holder of slot 0), so a resource could reject nothing meaningful with them. Up to L
//! holders act at once by design: a protected resource that must refuse a paused holder's late
//! work needs its own scheme.
//!
//! # Waiting
//! A waiter subscribes to the release announcements of all L slots; the release of any slot
//! wakes one waiter per client (one slot freed lets one holder in), as for a plain lock.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::error::{Error, NodeProblem, Result};
use crate::kinds::{Caller, Grant, Held, Kind, plain};
use crate::rules::quorum::Vote;
use crate::wire::{Command, Keys, Reply, Script, owned_fn};

/// Most permits a semaphore can have.
pub const MAX_PERMITS: u32 = 1024;

/// The prefix of the error a slot script replies with when the stored L differs.
const MISMATCH: &str = "REDLOCK_PERMITS";

/// Slot acquire (KEYS: the slot, the stored L; `ARGV[3]`: the request's L): fails with an error
/// naming the stored L when it differs, else `SET NX PX` of the slot and, if that succeeded,
/// the stored L set or kept alive at least as long as the slot.
pub(crate) static ACQUIRE: Script = Script::new(
    r#"local l = redis.call("get", KEYS[2])
if l and l ~= ARGV[3] then
    return redis.error_reply("REDLOCK_PERMITS " .. l)
end
if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return 0
end
if not l then
    redis.call("set", KEYS[2], ARGV[3], "PX", ARGV[2])
elseif redis.call("pttl", KEYS[2]) < tonumber(ARGV[2]) then
    redis.call("pexpire", KEYS[2], ARGV[2])
end
return 1"#,
);

/// Slot extend: while the slot holds our token, sets its TTL and keeps the stored L (`ARGV[3]`)
/// alive at least as long.
pub(crate) static EXTEND: Script = Script::new(concat!(
    owned_fn!(),
    r#"if not owned(KEYS[1]) then
    return 0
end
redis.call("pexpire", KEYS[1], ARGV[2])
if redis.call("exists", KEYS[2]) == 0 then
    redis.call("set", KEYS[2], ARGV[3], "PX", ARGV[2])
elseif redis.call("pttl", KEYS[2]) < tonumber(ARGV[2]) then
    redis.call("pexpire", KEYS[2], ARGV[2])
end
return 1"#
));

/// Where each node keeps L for the semaphore `resource`.
pub(crate) fn limit_key(resource: &str) -> String {
    format!("redlock:sem:{{{resource}}}")
}

/// The key of slot `i` of the semaphore `resource`.
pub(crate) fn slot_key(resource: &str, i: u32) -> String {
    format!("redlock:sem:{{{resource}}}:{i}")
}

/// A semaphore permit being acquired: one of the slots, tried in a random order.
#[derive(Debug)]
pub(crate) struct Semaphore {
    resource: Arc<str>,
    /// Every slot's key: a waiter listens for all of them.
    keys: Arc<[Arc<str>]>,
    limit: Arc<str>,
    permits: u32,
}

impl Semaphore {
    pub(crate) fn new(resource: Arc<str>, permits: u32) -> Result<Semaphore> {
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::invalid(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"
            )));
        }
        Ok(Semaphore {
            keys: (0..permits)
                .map(|i| Arc::from(slot_key(&resource, i)))
                .collect(),
            limit: limit_key(&resource).into(),
            resource,
            permits,
        })
    }

    fn slot(&self, i: u32) -> Slot {
        Slot {
            resource: Arc::clone(&self.resource),
            keys: [Arc::clone(&self.keys[i as usize])],
            limit: Arc::clone(&self.limit),
            permits: self.permits.to_string().into(),
            index: i,
        }
    }
}

impl Kind for Semaphore {
    fn name(&self) -> &'static str {
        "semaphore"
    }

    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    /// Any slot freeing lets a waiter in: the soonest one counts, and a slot that only the
    /// keys of a split vote fill (see [`split_vote`](crate::kinds::split_vote)).
    fn remaining(&self, tokens: bool) -> Command {
        crate::kinds::remaining_any(self.keys(), tokens)
    }

    /// The slots in a fresh random order (Fisher-Yates).
    fn candidates(&self) -> Option<Vec<Box<dyn Kind>>> {
        let mut order: Vec<u32> = (0..self.permits).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rand::random_range(0..=i));
        }
        Some(
            order
                .into_iter()
                .map(|i| Box::new(self.slot(i)) as Box<dyn Kind>)
                .collect(),
        )
    }

    // Never called while `candidates` answers; slot 0 stands for the semaphore.
    fn acquire(&self, ttl_ms: u64, config: &Config) -> Command {
        self.slot(0).acquire(ttl_ms, config)
    }

    fn grant(
        &self,
        engine: &Engine,
        acquired: &Outcome,
        token: &Arc<str>,
        caller: &Caller,
    ) -> Grant {
        self.slot(0).grant(engine, acquired, token, caller)
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        self.slot(0).release_command(nonce)
    }
}

/// One slot of a semaphore: a plain mutex on its own key, with the stored-L check.
#[derive(Debug)]
struct Slot {
    resource: Arc<str>,
    keys: [Arc<str>; 1],
    limit: Arc<str>,
    permits: Arc<str>,
    index: u32,
}

impl Slot {
    fn both(&self) -> Keys {
        Keys::List(Arc::from([
            Arc::clone(&self.keys[0]),
            Arc::clone(&self.limit),
        ]))
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce).keys(Keys::List(Arc::from(self.keys.clone())))
    }
}

impl Kind for Slot {
    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn acquire(&self, ttl_ms: u64, _: &Config) -> Command {
        // A repeat after a first run answers "held", never a false yes.
        Command::script(&ACQUIRE, Reply::Flag)
            .keys(self.both())
            .number(ttl_ms)
            .text(Arc::clone(&self.permits))
            .acquiring()
    }

    fn grant(&self, _: &Engine, _: &Outcome, _: &Arc<str>, _: &Caller) -> Grant {
        Grant::done(HeldSlot {
            extend: Command::script(&EXTEND, Reply::Flag)
                .keys(self.both())
                .text(Arc::clone(&self.permits)),
            release: self.release(Arc::from("")),
            index: self.index,
        })
    }

    fn conflict(&self, attempt: &Outcome) -> Option<Error> {
        let mismatches: Vec<String> = attempt
            .tally
            .votes()
            .filter_map(|v| match v {
                Vote::Failed(NodeProblem::Server(reply)) => reply
                    .strip_prefix(MISMATCH)
                    .map(|rest| rest.trim().to_owned()),
                _ => None,
            })
            .collect();
        // Final only when the mismatches alone rule out a quorum: a few nodes may keep another
        // number left by a misconfigured caller's failed attempt (until its TTL), and the other
        // slots, or a later attempt, can still get in on the rest.
        let nodes = attempt.tally.nodes();
        if mismatches.len() <= nodes - crate::rules::quorum::quorum(nodes) {
            return None;
        }
        let stored = mismatches.into_iter().next()?;
        Some(Error::invalid(format!(
            "semaphore {:?} has {stored} permits on the nodes (set by its holders), not {}: \
             every caller of one semaphore must ask for the same number",
            &*self.resource, self.permits
        )))
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        self.release(nonce)
    }
}

#[derive(Debug)]
struct HeldSlot {
    /// The extend, without its TTL.
    extend: Command,
    /// The release, without its nonce.
    release: Command,
    index: u32,
}

impl Held for HeldSlot {
    fn extend(&self, ttl_ms: u64) -> Command {
        // The TTL is ARGV[2] and L is ARGV[3]: `number` comes before `text` on the wire.
        self.extend.clone().number(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        self.release.clone().text(nonce)
    }

    fn permit(&self) -> Option<u32> {
        Some(self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_a_hash_tag_and_are_distinct() {
        assert_eq!(limit_key("a"), "redlock:sem:{a}");
        assert_eq!(slot_key("a", 3), "redlock:sem:{a}:3");
        // A name with "}:" in it cannot make one semaphore's key another's.
        assert_ne!(limit_key("a}:1"), slot_key("a", 1));
        assert_ne!(slot_key("a}:1", 0), slot_key("a", 1));
    }

    #[test]
    fn permits_are_bounded() {
        assert!(Semaphore::new("s".into(), 0).is_err());
        assert!(Semaphore::new("s".into(), MAX_PERMITS + 1).is_err());
        let s = Semaphore::new("s".into(), 5).unwrap();
        let mut seen: Vec<u32> = s
            .candidates()
            .unwrap()
            .iter()
            .map(|k| k.keys()[0].rsplit(':').next().unwrap().parse().unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4], "each slot once");
    }

    /// The counter design the module docs reject: three holders, no node above L = 2.
    #[test]
    fn a_per_node_counter_admits_l_plus_one_holders() {
        let (n, l) = (5, 2);
        let quorums = [[0, 1, 2], [2, 3, 4], [0, 1, 3]];
        let mut count = vec![0; n];
        for q in quorums {
            for node in q {
                assert!(count[node] < l, "node {node} would refuse");
                count[node] += 1;
            }
        }
        assert!(quorums.len() > l, "{} holders with L = {l}", quorums.len());
    }
}
