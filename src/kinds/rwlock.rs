//! The read-write lock: many readers or one writer, on the resource's own key.
//!
//! # The layout on a node
//! - A **writer** is the plain lock: the string `token` at the resource's key, set with
//!   `SET NX PX`. So plain and fenced locks of this library and of every other Redlock client
//!   (which `SET NX` the same key) are writers too: they exclude readers and are excluded by
//!   them with no change on their side.
//! - The **readers** are a sorted set at the same key: one member per reader, its token, scored
//!   by the absolute time (Unix ms, from `TIME` inside the script, so the node's own clock) at
//!   which that reader's entry expires. Every script that touches the set first removes the
//!   members whose score is not in the future (prunes), and after any change sets the key's
//!   expiry with `PEXPIREAT` to the largest score left. `SET NX` fails on the set, since the
//!   key exists; reentrant and multi-resource locks find it taken as well.
//!
//! Invariant, per node: **while the key is a set, it holds at least one live entry, and an entry
//! is live exactly until its score**, just as a plain key is live until its expiry. The key
//! expires at the largest score (so never before a live entry, and not long after the last
//! one), entries leave only by pruning (at their score), by their own reader's release, or
//! with the key; a release that leaves the set empty deletes it. Redis keeps key expiries as
//! absolute Unix ms of the same clock, so an entry scored `now + ttl` lives on its node exactly
//! as long as `SET key token PX ttl` would have at that moment.
//!
//! # Why it is safe
//! Readers and writers both acquire on a quorum (`N/2 + 1`) with the Redlock validity rule, and
//! a reader's validity is computed exactly as a plain lock's: during its validity window its
//! entry is live on every node of its quorum (the entry's score is at least the script's time
//! plus the TTL, later than the client's `t0 + ttl` minus the drift allowance — the assumption
//! that already makes plain keys safe).
//!
//! Take a writer W, valid on its quorum `Mw`, and a reader R, valid on its quorum `Mr`. Two
//! quorums of N share a node `x`. If their validity windows overlapped at an instant τ, at τ the
//! key on `x` would hold W's string and also be a set with R's live entry: impossible, a key has
//! one value. Two writers are two plain locks (Redlock's argument, docs/redlock.md). Readers do not exclude
//! readers, by design. So **no writer's validity window overlaps any other holder's**.
//!
//! Each step keeps the invariant above; the ways to break it are the ones to watch:
//! - A reader is added only where the key is absent or already a set (never over a string or a
//!   reentrant lock's hash). A writer's `SET NX` never lands on a set.
//! - **An extension never revives a reader.** It prunes first and refuses when the reader's
//!   entry is gone (expired or pruned), so a reader whose extension succeeds on a quorum had its
//!   entry *continuously* on those nodes since it acquired them. Reviving would be exclusion-safe
//!   at the moment of the extension (it is a fresh acquisition), but the holder would believe it
//!   held the lock across a gap in which a writer may have come and gone: any writer between the
//!   acquisition and the extension would have needed a node of the extension's quorum, where the
//!   entry never left.
//! - **A release touches only its own entry** (`ZREM` of its token), and an undo of a failed
//!   attempt is the same release without an announcement.
//! - A key expiry earlier than a live entry would free the key under a reader; `PEXPIREAT` at
//!   the largest score after every change rules it out.
//! - Node faults are those of the plain lock: a node that restarts empty loses readers as it
//!   loses plain keys (run with persistence or a delayed restart, `restart_grace`); a clock that
//!   jumps ahead expires entries early exactly as it expires plain keys early.
//!
//! Which schedule breaks it? Every one that breaks the plain lock (a majority losing its data,
//! clocks running faster than the drift allowance), and, if a node's sets could be written by
//! something other than these scripts, a key expiry set shorter than a member's score. None
//! specific to readers: a reader's quorum and a writer's quorum meet on a node, and that node
//! answers for both.
//!
//! # Waking waiters
//! The last reader's release publishes on the key's channel (a release that leaves other
//! readers changes nothing for a waiting writer). A writer's release is a plain release and
//! publishes. Waiting readers wake on **every** release announced for the key (see
//! [`Kind::shared`]), since all of them can get in at once; writers and other exclusive
//! waiters wake one per release per client, as for a plain lock.
//!
//! # Writers can starve
//! There is no writer preference: a writer gets in only when, on a quorum, no reader entry is
//! live. A steady stream of readers whose holds overlap keeps the set alive and the writer
//! out indefinitely. Use the read lock for short reads, or serialise the readers' arrival.
//!
//! # Upgrades and self-deadlock
//! A read lock is not upgraded to a write lock (two readers upgrading at once would wait for
//! each other forever). A caller that holds a read or write lock of this kind on a resource
//! and asks for the write lock on it, or holds the write lock and asks for a read lock, gets
//! [`Error::InvalidArgument`] at once instead of waiting for itself. The caller is the calling
//! OS thread (like `std::sync::RwLock`), or the name given with
//! [`LockRequest::caller`](crate::LockRequest::caller): the bindings pass their own notion of a
//! thread (Python's thread, whichever OS thread runs the call; a Go owner), so the check works
//! the same in every language. "Holds" counts locks taken with
//! [`read`](crate::LockRequest::read) or [`write`](crate::LockRequest::write) through any client
//! of this process, from acquisition until release or drop (a lost lock still counts until
//! then); locks moved to another thread count for the caller that acquired them. Other
//! processes cannot be told apart from a holder's own and simply wait.
//!
//! # Fencing
//! Readers take no fencing token. A writer may be a fenced lock
//! ([`LockRequest::fenced`](crate::LockRequest::fenced) is a writer for readers, since it is a
//! string at the key): its token orders it after every earlier writer, so the protected
//! resource can reject a paused writer's late write. It does not protect readers: a reader
//! carries no token, so a resource cannot reject a paused reader's stale read, nor tell a write
//! from a paused writer apart from readers that came after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Result};
use crate::kinds::{Caller, Grant, Held, Kind, plain};
use crate::rules::token::new_token;
use crate::sync::relock;
use crate::wire::{Command, Reply, Script};

/// Lua: `now` (Unix ms from the node's clock), the pruning of entries whose score is not in the
/// future, and `expire_at_last()`, which sets the key's expiry to the largest score left.
macro_rules! readers_fns {
    () => {
        r#"local time = redis.call("time")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function ms(x)
    return string.format("%.0f", x)
end
local function prune(k)
    redis.call("zremrangebyscore", k, "-inf", ms(now))
end
local function expire_at_last(k)
    local last = redis.call("zrange", k, -1, -1, "withscores")
    if last[2] then
        redis.call("pexpireat", k, last[2])
    end
end
"#
    };
}

/// Read acquire: where the key is absent or a set of readers, prunes it and adds our entry
/// scored now + `ARGV[2]` ms; any other value (a writer's string, a reentrant hash): 0.
pub(crate) static READ_ACQUIRE: Script = Script::new(concat!(
    readers_fns!(),
    r#"local t = redis.call("type", KEYS[1]).ok
if t ~= "none" and t ~= "zset" then
    return 0
end
prune(KEYS[1])
redis.call("zadd", KEYS[1], ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1"#
));

/// Read extend: prunes, and only if our entry is still live sets it to now + `ARGV[2]` ms. An
/// entry that expired is never revived.
pub(crate) static READ_EXTEND: Script = Script::new(concat!(
    readers_fns!(),
    r#"if redis.call("type", KEYS[1]).ok ~= "zset" then
    return 0
end
prune(KEYS[1])
if not redis.call("zscore", KEYS[1], ARGV[1]) then
    return 0
end
redis.call("zadd", KEYS[1], "XX", ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1"#
));

/// Read release: prunes and removes our entry (1 if it was live, else 0). When no reader is
/// left the key goes and, unless the nonce (`ARGV[2]`) is empty (an undo), that is announced on
/// the key's channel (KEYS[2]).
pub(crate) static READ_RELEASE: Script = Script::new(concat!(
    readers_fns!(),
    r#"if redis.call("type", KEYS[1]).ok ~= "zset" then
    return 0
end
prune(KEYS[1])
local removed = redis.call("zrem", KEYS[1], ARGV[1])
if redis.call("zcard", KEYS[1]) == 0 then
    redis.call("del", KEYS[1])
    if ARGV[2] ~= "" then
        redis.call("publish", KEYS[2], ARGV[2])
    end
else
    expire_at_last(KEYS[1])
end
return removed"#
));

fn read_release(nonce: Arc<str>) -> Command {
    Command::script(&READ_RELEASE, Reply::Flag)
        .text(nonce)
        .announcing()
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Read,
    Write,
}

/// A resource as held by one caller.
type Holder = (Arc<str>, Caller);

/// Locks of this kind held by each caller, by resource: what the self-deadlock check reads.
type Holdings = HashMap<Holder, Vec<(u64, Mode)>>;

fn holdings() -> &'static Mutex<Holdings> {
    static HOLDINGS: OnceLock<Mutex<Holdings>> = OnceLock::new();
    HOLDINGS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A read or write lock being acquired.
#[derive(Debug)]
pub(crate) struct ReadWrite {
    resource: Arc<str>,
    keys: [Arc<str>; 1],
    mode: Mode,
}

impl ReadWrite {
    pub(crate) fn new(resource: Arc<str>, mode: Mode) -> ReadWrite {
        ReadWrite {
            keys: [Arc::clone(&resource)],
            resource,
            mode,
        }
    }

    /// Refuses an acquisition that would wait for a lock its caller holds itself.
    fn check_caller(&self, caller: &Caller) -> Result<()> {
        let key = (Arc::clone(&self.resource), caller.clone());
        let holdings = relock(holdings());
        let Some(held) = holdings.get(&key) else {
            return Ok(());
        };
        let blocking = held.iter().map(|(_, m)| *m).find(|&m| match self.mode {
            Mode::Write => true,
            Mode::Read => m == Mode::Write,
        });
        match blocking {
            None => Ok(()),
            Some(held) => Err(Error::invalid(format!(
                "{} holds a {} lock on {:?}: a {} lock would wait for it forever \
                 (no upgrade or downgrade); release it first",
                match caller {
                    Caller::Thread(_) => "this thread".to_owned(),
                    Caller::Named(name) => format!("caller {name:?}"),
                },
                name(held),
                &*self.resource,
                name(self.mode),
            ))),
        }
    }
}

fn name(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
}

impl Kind for ReadWrite {
    fn name(&self) -> &'static str {
        name(self.mode)
    }

    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn token(&self, caller: &Caller) -> Result<Arc<str>> {
        self.check_caller(caller)?;
        new_token()
    }

    fn acquire(&self, ttl_ms: u64, _: &Config) -> Command {
        match self.mode {
            Mode::Write => Command::set_nx(ttl_ms),
            // A repeat of the script only sets our own entry again.
            Mode::Read => Command::script(&READ_ACQUIRE, Reply::Flag)
                .number(ttl_ms)
                .acquiring(),
        }
    }

    fn grant(&self, _: &Engine, _: &Outcome, _: &Arc<str>, caller: &Caller) -> Grant {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let key = (Arc::clone(&self.resource), caller.clone());
        relock(holdings())
            .entry(key.clone())
            .or_default()
            .push((id, self.mode));
        Grant::done(HeldReadWrite {
            mode: self.mode,
            holding: Mutex::new(Some((key, id))),
        })
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        match self.mode {
            Mode::Write => plain::release(nonce),
            Mode::Read => read_release(nonce),
        }
    }

    fn shared(&self) -> bool {
        self.mode == Mode::Read
    }

    fn queues(&self) -> bool {
        self.mode == Mode::Write
    }
}

/// A granted read or write lock, registered as its caller's until released.
#[derive(Debug)]
struct HeldReadWrite {
    mode: Mode,
    holding: Mutex<Option<(Holder, u64)>>,
}

impl HeldReadWrite {
    fn forget(&self) {
        let Some((key, id)) = relock(&self.holding).take() else {
            return;
        };
        let mut holdings = relock(holdings());
        if let Some(held) = holdings.get_mut(&key) {
            held.retain(|(i, _)| *i != id);
            if held.is_empty() {
                holdings.remove(&key);
            }
        }
    }
}

impl Drop for HeldReadWrite {
    fn drop(&mut self) {
        self.forget();
    }
}

impl Held for HeldReadWrite {
    fn extend(&self, ttl_ms: u64) -> Command {
        match self.mode {
            Mode::Write => plain::extend(ttl_ms),
            Mode::Read => Command::script(&READ_EXTEND, Reply::Flag).number(ttl_ms),
        }
    }

    /// Also ends the caller's claim on the resource: a lock is released once (explicitly or
    /// on drop), and this is where both go.
    fn release(&self, nonce: Arc<str>) -> Command {
        self.forget();
        match self.mode {
            Mode::Write => plain::release(nonce),
            Mode::Read => read_release(nonce),
        }
    }
}
