//! The reentrant lock: the hash `{owner: count, NUL id: 1 ...}` at the resource's key.
//!
//! The owner's name is chosen by the caller, not a thread, so any thread or process passing the
//! same owner shares its holds. Why it is safe: the hash is created only where the key is
//! absent, exactly like `SET NX`, and grows only where it is the owner's own, so two owners (or
//! an owner and a plain holder, whose string key the scripts refuse) never hold the key of one
//! node at once; the quorum argument of the plain lock then applies as is.
//!
//! Each hold also has a field of its own, `NUL id` (no owner's name has a NUL): its token is the
//! owner, a NUL and a fresh random id. Its release, its extensions and a failed attempt's undo
//! act only where that field is: a release removes it and counts one hold less. So none of them
//! can act for another hold of the same owner, whenever it reaches a node: an expired hold's
//! late release (a paused process, a release queued behind a hung node) finds no field in a
//! hash another process of the owner created since, and changes nothing; a late extension
//! cannot renew it either.
//!
//! Since a release (or a failed attempt's undo) acts on its own hold's field alone, it is sent
//! to every node, like the plain lock's, and resent like it when a connection turns out gone: a
//! node that never counted the hold, or already released it, changes nothing. What matters is
//! that it runs after the acquire on each node that counts it, or the hold stays until its TTL.
//! Both go through the node's one worker in order, so a release runs after an acquire that
//! node's worker sent before it, or finds nothing where the acquire was dropped unsent. An
//! acquire whose answer never came (the node hung, and its read timed out) may still run when
//! the node resumes: the node's worker keeps the release until the node answers again (see
//! `Worker::unanswered`), so it goes out after. The acquire itself is never resent: a repeat
//! would count the hold twice.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Result};
use crate::kinds::{Caller, Grant, Held, Kind, remaining_ttl};

use crate::rules::token::new_token;
use crate::wire::{Command, Reply, Script};

/// Longest owner name, in bytes.
pub(crate) const MAX_OWNER_LEN: usize = 1024;

/// The Lua that splits a hold's token, ARGV[1] = `owner NUL id` (see [`Reentrant::token`]),
/// into the owner's name and the hold's own field (`NUL id`, a name no owner can take).
macro_rules! split_token {
    () => {
        r#"local sep = string.find(ARGV[1], "\0", 1, true)
local owner, hold = ARGV[1], "\0"
if sep then
    owner, hold = string.sub(ARGV[1], 1, sep - 1), string.sub(ARGV[1], sep)
end
"#
    };
}

/// Reentrant acquire. A new hash gets count 1, the hold's field and the TTL; our own hash counts
/// one more hold, gets its field, and keeps the longer of its TTL and ours (never shortening
/// what an outer hold relies on). Another owner's hash or a plain lock's string: nil.
pub(crate) static ACQUIRE: Script = Script::new(concat!(
    split_token!(),
    r#"local t = redis.call("type", KEYS[1]).ok
if t == "none" then
    redis.call("hset", KEYS[1], owner, 1, hold, 1)
    redis.call("pexpire", KEYS[1], ARGV[2])
    return 1
end
if t ~= "hash" or redis.call("hexists", KEYS[1], owner) == 0 then
    return false
end
local n = redis.call("hincrby", KEYS[1], owner, 1)
redis.call("hset", KEYS[1], hold, 1)
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then
    redis.call("pexpire", KEYS[1], ARGV[2])
end
return n"#
));

/// Reentrant extend: while the hash holds this very hold (its field), keeps it alive at least
/// ARGV[2] ms.
pub(crate) static EXTEND: Script = Script::new(concat!(
    split_token!(),
    r#"if redis.call("type", KEYS[1]).ok ~= "hash"
    or redis.call("hexists", KEYS[1], hold) == 0 then
    return 0
end
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then
    redis.call("pexpire", KEYS[1], ARGV[2])
end
return 1"#
));

/// Reentrant release: when the hash holds this very hold (its field), removes it and counts one
/// hold less; the key goes when the count reaches 0, and then (unless the nonce, ARGV[2], is
/// empty: an undo) the release is announced on the key's channel (KEYS[2]). Replies with the
/// holds left, or nil when this hold is not here (another hold's hash, of the same owner or
/// not, is left alone).
pub(crate) static RELEASE: Script = Script::new(concat!(
    split_token!(),
    r#"if redis.call("type", KEYS[1]).ok ~= "hash"
    or redis.call("hexists", KEYS[1], hold) == 0 then
    return false
end
redis.call("hdel", KEYS[1], hold)
local n = redis.call("hincrby", KEYS[1], owner, -1)
if n <= 0 then
    redis.call("del", KEYS[1])
    if ARGV[2] ~= "" then
        redis.call("publish", KEYS[2], ARGV[2])
    end
    return 0
end
return n"#
));

fn release(nonce: Arc<str>) -> Command {
    Command::script(&RELEASE, Reply::Count)
        .text(nonce)
        .announcing()
}

#[derive(Debug)]
pub(crate) struct Reentrant {
    resource: Arc<str>,
    keys: [Arc<str>; 1],
    owner: Arc<str>,
}

impl Reentrant {
    pub(crate) fn new(resource: Arc<str>, owner: &str) -> Result<Reentrant> {
        if owner.is_empty() {
            return Err(Error::invalid("owner is empty"));
        }
        if owner.contains('\0') {
            return Err(Error::invalid("owner contains a NUL byte"));
        }
        if owner.len() > MAX_OWNER_LEN {
            return Err(Error::invalid(format!(
                "owner is {} bytes long; at most {MAX_OWNER_LEN} are allowed",
                owner.len()
            )));
        }
        Ok(Reentrant {
            keys: [Arc::clone(&resource)],
            resource,
            owner: owner.into(),
        })
    }
}

impl Kind for Reentrant {
    fn name(&self) -> &'static str {
        "reentrant"
    }

    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    /// No token to read: its key is a hash of holds.
    fn remaining(&self, _: bool) -> Command {
        remaining_ttl(&self.keys)
    }

    /// The owner's name, a NUL and a fresh random id: each attempt's hold has a field of its
    /// own in the hash, so its release, extensions and undo act on that hold alone (see the
    /// module doc). [`Lock::token`](crate::Lock::token) shows the owner.
    fn token(&self, _: &Caller) -> Result<Arc<str>> {
        Ok(format!("{}\0{}", self.owner, new_token()?).into())
    }

    fn acquire(&self, ttl_ms: u64, _: &Config) -> Command {
        Command::script(&ACQUIRE, Reply::Count)
            .number(ttl_ms)
            .acquiring()
            .not_resendable()
    }

    fn grant(&self, _: &Engine, acquired: &Outcome, _: &Arc<str>, _: &Caller) -> Grant {
        Grant::done(HeldReentrant {
            holds: acquired.tally.max_value().unwrap_or(1),
        })
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        release(nonce)
    }
}

/// One hold: how many holds of its owner the node that counted the most had, this one included.
#[derive(Debug)]
struct HeldReentrant {
    holds: u64,
}

impl Held for HeldReentrant {
    fn extend(&self, ttl_ms: u64) -> Command {
        Command::script(&EXTEND, Reply::Flag).number(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        release(nonce)
    }

    fn hold_count(&self) -> Option<u64> {
        Some(self.holds)
    }
}
