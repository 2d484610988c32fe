//! The lock under a leader election (`election.rs`): a fenced lock whose write-back also
//! records who leads, and whose record a reader believes only once the campaign has confirmed
//! it.
//!
//! Keys, for the election `name` (all in one hash slot when the name has no braces):
//! - the lock, `redlock:election:<name>`, holding the leadership's random token with a TTL;
//! - its fence counter, `redlock:fence:{redlock:election:<name>}` (see `fenced.rs`);
//! - the record, `redlock:leader:{redlock:election:<name>}`, a hash with no TTL:
//!   `token`, `identity`, `term`, `since` (the node's clock in Unix ms when the term was
//!   written on it), `confirmed` (`1` once the campaign confirmed it, else `0`) and
//!   `transitions` (terms confirmed on this node). The record outlives its term so that
//!   `transitions` counts on.
//!
//! On the nodes, an election is a fenced lock: the acquire is `fenced::ACQUIRE` unchanged, and
//! the write-back is `fenced::WRITE_FENCE` with one more step after its checks pass, writing the
//! record for the new term, unconfirmed. So the term inherits the fencing token's argument as it
//! stands. Once the campaign has decided that it leads (the write-back's quorum and the validity
//! check passed: from then on it returns its leadership whatever happens), it sends
//! [`CONFIRM_LEADER`] to every node; each extension of the leadership does the same
//! ([`EXTEND_LEADER`]), so a confirmation lost on some nodes is made good within a third of the
//! TTL. The first confirmation of a term on a node counts `transitions` up and publishes
//! `elected.<token>` on the lock's release channel, so observers (and waiting candidates) are
//! woken by a takeover as they are by a release.
//!
//! A campaign that fails never confirms: the record it left on nodes its undo could not reach
//! stays unconfirmed until a later term's write-back replaces it, and readers never name it
//! (`election.rs`, "What readers are told").

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::kinds::fenced::{self, fence_key};
use crate::kinds::{Caller, Grant, Held, Kind, plain};
use crate::wire::{Command, Keys, Reply, Script, owned_fn};

/// The prefix of an election's lock key.
pub(crate) const ELECTION_PREFIX: &str = "redlock:election:";

/// The prefix of an election's record key.
const RECORD_PREFIX: &str = "redlock:leader:";

/// The lock key of the election `name`.
pub(crate) fn election_key(name: &str) -> String {
    format!("{ELECTION_PREFIX}{name}")
}

/// The record key of the election whose lock key is `key`.
pub(crate) fn record_key(key: &str) -> String {
    format!("{RECORD_PREFIX}{{{key}}}")
}

/// The leader's write-back: `fenced::WRITE_FENCE`'s checks and write (KEYS[1] the lock,
/// KEYS[2] the counter, ARGV[1] our token, ARGV[2] the term), then, the first time this token
/// passes them on this node, the record (KEYS[3]) is rewritten for the new term, unconfirmed
/// (identity ARGV[3], since = the node's clock in ms). A record key of another type is
/// replaced. Replies 1 when the term stands here, 0 when the lock is not ours or a later
/// acquisition counted past us.
pub(crate) static WRITE_LEADER: Script = Script::new(concat!(
    owned_fn!(),
    r#"if not owned(KEYS[1]) then
    return 0
end
local n = redis.call("get", KEYS[2])
if n and (#n > #ARGV[2] or (#n == #ARGV[2] and n > ARGV[2])) then
    return 0
end
redis.call("set", KEYS[2], ARGV[2])
local prev = redis.pcall("hget", KEYS[3], "token")
if type(prev) == "table" and prev.err then
    redis.call("del", KEYS[3])
    prev = false
end
if prev ~= ARGV[1] then
    local t = redis.call("time")
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call("hset", KEYS[3], "token", ARGV[1], "identity", ARGV[3], "term", ARGV[2],
        "since", string.format("%d", ms), "confirmed", "0")
end
return 1"#
));

/// Lua: `confirm()` marks the record (KEYS[2]) confirmed when it is our token's (ARGV[1]); the
/// first time, it counts `transitions` up and publishes `elected.<token>` on the lock's channel
/// (KEYS[3]). Returns whether the record is ours. The caller has checked that the lock
/// (KEYS[1]) holds our token.
macro_rules! confirm_fn {
    () => {
        r#"local function confirm()
    local r = redis.pcall("hmget", KEYS[2], "token", "confirmed")
    if type(r) == "table" and r.err then
        if string.find(r.err, "WRONGTYPE", 1, true) then
            return false
        end
        error(r)
    end
    if r[1] ~= ARGV[1] then
        return false
    end
    if r[2] ~= "1" then
        redis.call("hset", KEYS[2], "confirmed", "1")
        redis.call("hincrby", KEYS[2], "transitions", 1)
        redis.call("publish", KEYS[3], "elected." .. ARGV[1])
    end
    return true
end
"#
    };
}

/// The confirmation of a campaign that decided it leads: while the lock (KEYS[1]) holds our
/// token, `confirm()`. Replies 1 when the record here is ours and confirmed, else 0.
pub(crate) static CONFIRM_LEADER: Script = Script::new(concat!(
    owned_fn!(),
    confirm_fn!(),
    r#"if owned(KEYS[1]) and confirm() then
    return 1
end
return 0"#
));

/// A leadership's extension: `plain::EXTEND` (a TTL of ARGV[2] ms while the lock holds our
/// token) and `confirm()`, which makes good a confirmation that did not reach this node.
pub(crate) static EXTEND_LEADER: Script = Script::new(concat!(
    owned_fn!(),
    confirm_fn!(),
    r#"if not owned(KEYS[1]) then
    return 0
end
confirm()
return redis.call("pexpire", KEYS[1], ARGV[2])"#
));

/// Lua, read-only: `{lock value, lock pttl, token, identity, term, since, transitions,
/// confirmed}` of the election whose lock is KEYS[1] and record KEYS[2]. A lock key that is not
/// a string reads as nil (no leader); a record of another type as empty.
pub(crate) static READ_LEADER: Script = Script::new(
    r#"local v = redis.pcall("get", KEYS[1])
if type(v) == "table" and v.err then
    if not string.find(v.err, "WRONGTYPE", 1, true) then
        error(v)
    end
    v = false
end
local ttl = redis.call("pttl", KEYS[1])
local r = redis.pcall("hmget", KEYS[2], "token", "identity", "term", "since", "transitions",
    "confirmed")
if type(r) == "table" and r.err then
    if not string.find(r.err, "WRONGTYPE", 1, true) then
        error(r)
    end
    r = {false, false, false, false, false, false}
end
return {v, ttl, r[1], r[2], r[3], r[4], r[5], r[6]}"#,
);

/// The read of [`READ_LEADER`] for the election whose lock key is `key`.
pub(crate) fn read(key: &str) -> Command {
    Command::script(&READ_LEADER, Reply::Raw).keys(Keys::List(
        vec![Arc::from(key), Arc::from(record_key(key))].into(),
    ))
}

/// The lock and the record of the election whose lock key is `key`: the keys of
/// [`CONFIRM_LEADER`] and [`EXTEND_LEADER`] (their channels follow).
fn confirm_keys(key: &str) -> Arc<[Arc<str>]> {
    vec![Arc::from(key), Arc::from(record_key(key))].into()
}

/// The confirmation, sent once the campaign for the election whose lock key is `key` has
/// decided that it leads.
pub(crate) fn confirm(key: &str) -> Command {
    Command::script(&CONFIRM_LEADER, Reply::Flag)
        .keys(Keys::List(confirm_keys(key)))
        .announcing()
}

/// A candidate's acquisition.
#[derive(Debug)]
pub(crate) struct Leader {
    fenced: fenced::Fenced,
    resource: Arc<str>,
    /// The lock, the counter and the record: the write-back's keys.
    write_keys: Arc<[Arc<str>]>,
    identity: Arc<str>,
}

impl Leader {
    /// `resource` is the election's lock key ([`election_key`]).
    pub(crate) fn new(resource: Arc<str>, identity: Arc<str>) -> Leader {
        let write_keys: Arc<[Arc<str>]> = vec![
            Arc::clone(&resource),
            fence_key(&resource).into(),
            record_key(&resource).into(),
        ]
        .into();
        Leader {
            fenced: fenced::Fenced::new(Arc::clone(&resource)),
            resource,
            write_keys,
            identity,
        }
    }
}

impl Kind for Leader {
    fn name(&self) -> &'static str {
        "leader"
    }

    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        self.fenced.keys()
    }

    fn queues(&self) -> bool {
        true
    }

    fn acquire(&self, ttl_ms: u64, config: &Config) -> Command {
        self.fenced.acquire(ttl_ms, config)
    }

    fn grant(&self, engine: &Engine, acquired: &Outcome, token: &Arc<str>, _: &Caller) -> Grant {
        fenced::write_back(
            engine,
            acquired,
            token,
            &self.resource,
            |term| {
                Command::script(&WRITE_LEADER, Reply::Flag)
                    .keys(Keys::List(Arc::clone(&self.write_keys)))
                    .number(term)
                    .text(Arc::clone(&self.identity))
            },
            |term| {
                Box::new(HeldLeader {
                    term,
                    keys: confirm_keys(&self.resource),
                })
            },
        )
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce)
    }
}

/// A granted leadership: a held fenced lock whose extensions also confirm its record.
#[derive(Debug)]
struct HeldLeader {
    term: u64,
    /// The lock and the record.
    keys: Arc<[Arc<str>]>,
}

impl Held for HeldLeader {
    fn extend(&self, ttl_ms: u64) -> Command {
        Command::script(&EXTEND_LEADER, Reply::Flag)
            .keys(Keys::List(Arc::clone(&self.keys)))
            .announcing()
            .number(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        plain::release(nonce)
    }

    fn fence(&self) -> Option<u64> {
        Some(self.term)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_lock_key_as_their_tag() {
        let key = election_key("jobs");
        assert_eq!(key, "redlock:election:jobs");
        assert_eq!(record_key(&key), "redlock:leader:{redlock:election:jobs}");
        assert_eq!(
            crate::wire::hash_tag(&record_key(&key)),
            crate::wire::hash_tag(&fence_key(&key))
        );
    }
}
