//! Kinds of lock: what each one does on the nodes.
//!
//! A kind is one file: its scripts, the commands that acquire, extend, release and undo it, its
//! validation and its safety argument. The acquisition loop (`client.rs`), the extender and the
//! notifier see a kind only through the two traits here: [`Kind`] for a lock being acquired and
//! [`Held`] for one that was granted. Adding a kind adds a file, a builder method on
//! [`LockRequest`](crate::LockRequest) and its scripts to [`SCRIPTS`]; nothing else changes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::Duration;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Result};
use crate::rules::quorum::Vote;
use crate::rules::token::new_token;
use crate::wire::{Command, Keys, Reply, Script};

pub(crate) mod fenced;
pub(crate) mod leader;
pub(crate) mod many;
pub(crate) mod plain;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

/// Longest resource name accepted, in bytes: each byte of a key costs every node time in each
/// script that touches it, during which the node serves no other client (the figures:
/// docs/api.md).
pub const MAX_RESOURCE_NAME: usize = 4096;

/// `resource` (`what`: how the error names it) when it is not empty and at most
/// [`MAX_RESOURCE_NAME`] bytes; the error never quotes it.
pub(crate) fn check_resource_name(resource: &str, what: &str) -> Result<()> {
    if resource.is_empty() {
        return Err(Error::invalid(format!("{what} is empty")));
    }
    if resource.len() > MAX_RESOURCE_NAME {
        return Err(Error::invalid(format!(
            "{what} is {} bytes long; at most {MAX_RESOURCE_NAME} are allowed",
            resource.len()
        )));
    }
    Ok(())
}

/// Every script of every kind, loaded on each connection.
pub(crate) static SCRIPTS: [&Script; 23] = [
    &plain::RELEASE,
    &plain::EXTEND,
    &fenced::ACQUIRE,
    &fenced::WRITE_FENCE,
    &leader::WRITE_LEADER,
    &leader::READ_LEADER,
    &leader::CONFIRM_LEADER,
    &leader::EXTEND_LEADER,
    &reentrant::ACQUIRE,
    &reentrant::EXTEND,
    &reentrant::RELEASE,
    &many::ACQUIRE,
    &many::EXTEND,
    &many::RELEASE,
    &rwlock::READ_ACQUIRE,
    &rwlock::READ_EXTEND,
    &rwlock::READ_RELEASE,
    &semaphore::ACQUIRE,
    &semaphore::EXTEND,
    &REMAINING,
    &REMAINING_ANY,
    &crate::notify::queue::JOIN,
    &crate::notify::queue::LEAVE,
];

/// Who an acquisition is for, as the read-write lock's self-wait check tells callers apart:
/// the calling OS thread, unless the caller names itself (a binding whose threads are not the
/// OS's: Python's, which hop between OS threads around blocking calls, or Go's goroutines).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Caller {
    Thread(ThreadId),
    Named(Arc<str>),
}

/// A lock being acquired.
pub(crate) trait Kind: Send + Sync + fmt::Debug {
    /// The name the lock is known by: its key, or the sorted names of several joined by `,`.
    fn resource(&self) -> &Arc<str>;

    /// The keys the lock takes; a waiter listens for their releases.
    fn keys(&self) -> &[Arc<str>];

    /// The kind's name in metrics and events (one of `telemetry::KINDS`).
    fn name(&self) -> &'static str {
        "plain"
    }

    /// The value that marks one acquisition for `caller` on every node; the kind's own checks
    /// (a caller about to wait for itself) refuse it here.
    fn token(&self, caller: &Caller) -> Result<Arc<str>> {
        let _ = caller;
        new_token()
    }

    /// Takes the lock on one node (the client's settings at hand: a fenced lock checks the
    /// node's clock against ours).
    fn acquire(&self, ttl_ms: u64, config: &Config) -> Command;

    /// Finishes an acquisition a quorum granted. Most kinds are done; a fenced lock writes its
    /// counter back, which is one more quorum call that can fail.
    fn grant(
        &self,
        engine: &Engine,
        acquired: &Outcome,
        token: &Arc<str>,
        caller: &Caller,
    ) -> Grant;

    /// Undoes a failed or cancelled attempt on every node that may have applied it, without
    /// waking waiters: the resource is still held by whoever refused us.
    /// A node that answered a definite no set nothing and needs no undo; every other one
    /// (a yes, an error, a timeout, no answer yet) gets it.
    fn undo(&self, engine: &Engine, attempt: &Outcome, token: &Arc<str>, ttl: Duration) {
        let undo = self.release_command(Arc::from(""));
        let mut targets = attempt.tally.maybe_applied();
        // Answers that came in since the decision, without waiting for more.
        while let Ok((i, vote)) = attempt.late.try_recv() {
            if let (Vote::No, Some(t)) = (vote, targets.get_mut(i)) {
                *t = false;
            }
        }
        if targets.iter().any(|&t| t) {
            engine.send_nowait(
                &undo,
                self.resource(),
                token,
                Some(&targets),
                engine.live_until(ttl),
            );
        }
    }

    /// The release command of this kind, announced with `nonce` (empty: not announced).
    fn release_command(&self, nonce: Arc<str>) -> Command;

    /// For a kind that picks what each attempt takes (a semaphore's slots): the kinds one
    /// attempt tries in turn, each a full quorum attempt, until one is granted; the attempt is
    /// refused only when all of them refused. `None` (most kinds): the kind itself.
    fn candidates(&self) -> Option<Vec<Box<dyn Kind>>> {
        None
    }

    /// An error that ends the acquisition at once, read from a failed attempt (a semaphore
    /// whose nodes store another number of permits); `None`: retry as patience allows.
    fn conflict(&self, attempt: &Outcome) -> Option<Error> {
        let _ = attempt;
        None
    }

    /// Whether all waiters of this kind can get in after one release (readers): they then wake
    /// on every announced release, instead of one waiter per release per client.
    fn shared(&self) -> bool {
        false
    }

    /// Whether this kind's waiters queue in arrival order in their client (one key, exclusive,
    /// not reentrant: a holder taking its lock again must not wait behind its own waiters).
    fn queues(&self) -> bool {
        false
    }

    /// Reads, on one node, how long until this kind could be acquired there by itself (its
    /// keys' remaining TTL, in ms), and with `tokens` the token its first key holds there; a
    /// waiter sleeps no longer than that on a quorum (see [`free_in`] and [`split_vote`]). A
    /// kind whose key is not a string while held (a hash, a sorted set) reads no token.
    fn remaining(&self, tokens: bool) -> Command {
        let read = remaining_ttl(self.keys());
        if tokens { read.number(1) } else { read }
    }
}

/// What [`Kind::grant`] came to.
pub(crate) struct Grant {
    /// The held lock, if every step succeeded.
    pub held: Option<Box<dyn Held>>,
    /// A later quorum call than the acquire (a fence write-back): it decides the validity and,
    /// on failure, the error.
    pub last: Option<Outcome>,
}

impl Grant {
    pub(crate) fn done(held: impl Held + 'static) -> Grant {
        Grant {
            held: Some(Box::new(held)),
            last: None,
        }
    }
}

/// A lock that was granted.
pub(crate) trait Held: Send + Sync + fmt::Debug {
    /// Sets the lock's TTL on one node while it is ours.
    fn extend(&self, ttl_ms: u64) -> Command;

    /// Releases the lock on one node, announcing it with `nonce` (see [`release_nonce`]).
    fn release(&self, nonce: Arc<str>) -> Command;

    fn fence(&self) -> Option<u64> {
        None
    }

    fn hold_count(&self) -> Option<u64> {
        None
    }

    /// The resources, when the lock holds several.
    fn resources(&self) -> Option<&[Arc<str>]> {
        None
    }

    /// Which of a semaphore's permits (its slot) the lock holds.
    fn permit(&self) -> Option<u32> {
        None
    }
}

/// Lua: the longest remaining TTL of KEYS in ms (0 when none exists; nil when one has no TTL:
/// nothing will free it by itself), and with ARGV[2] = 1 the value of KEYS[1] when it is a
/// string (the token of whoever holds it), else nil: a key of another type (a reentrant lock's
/// hash, a read-write lock's readers) has no owner to read. A waiter sleeps no longer than the
/// TTL, and the tokens tell a lock held on a quorum from the keys of a split vote (see
/// [`split_vote`]). (`pcall`: the `GET` of a key of another type fails, and counts in the node's
/// `errorstat_WRONGTYPE`, hence ARGV[2]; a `TYPE` first would need a permission that the
/// documented ACL of plain locks and semaphores does not give.)
static REMAINING: Script = Script::new(
    r#"local m = 0
for _, k in ipairs(KEYS) do
    local t = redis.call("pttl", k)
    if t == -1 then
        m = false
        break
    end
    if t > m then
        m = t
    end
end
local owner = false
if ARGV[2] == "1" then
    owner = redis.pcall("get", KEYS[1])
    if type(owner) ~= "string" then
        owner = false
    end
end
return {m, owner}"#,
);

/// Lua: the shortest remaining TTL of KEYS in ms (0 when one is absent): when the first of
/// several alternatives (a semaphore's slots) frees; nil when none ever expires. With
/// ARGV[2] = 1, `{that, the value of each key when it is a string, else nil}`: the tokens of
/// each slot's holders, which tell slots held on a quorum from the keys of split votes.
static REMAINING_ANY: Script = Script::new(
    r#"local m = false
local reply = {false}
for i, k in ipairs(KEYS) do
    local t = redis.call("pttl", k)
    if t == -2 then
        t = 0
    end
    if t >= 0 and (not m or t < m) then
        m = t
    end
    if ARGV[2] == "1" then
        local owner = redis.pcall("get", k)
        if type(owner) ~= "string" then
            owner = false
        end
        reply[i + 1] = owner
    end
end
if ARGV[2] == "1" then
    reply[1] = m
    return reply
end
return m"#,
);

/// [`Kind::remaining`] without the token: for a kind whose key is a hash while held (a reentrant
/// lock), whose holds have no one owner to tell a split vote by.
pub(crate) fn remaining_ttl(keys: &[Arc<str>]) -> Command {
    Command::script(&REMAINING, Reply::Raw).keys(Keys::List(keys.into()))
}

/// [`Kind::remaining`] for a kind that any one of its keys freeing lets in; with `tokens`, the
/// token each key holds there too.
pub(crate) fn remaining_any(keys: &[Arc<str>], tokens: bool) -> Command {
    let keys = Keys::List(keys.into());
    if tokens {
        Command::script(&REMAINING_ANY, Reply::Raw)
            .keys(keys)
            .number(1)
    } else {
        Command::script(&REMAINING_ANY, Reply::Count).keys(keys)
    }
}

/// When a quorum of nodes will have let the keys go, from the answers of
/// [`Kind::remaining`] or [`remaining_any`]: the quorum-th shortest remaining TTL. `None` when
/// too few nodes answered or a key never expires.
pub(crate) fn free_in(outcome: &Outcome, quorum: usize) -> Option<Duration> {
    let mut ttls: Vec<u64> = outcome.tally.votes().filter_map(remaining_ms).collect();
    ttls.sort_unstable();
    ttls.get(quorum.checked_sub(1)?)
        .map(|&ms| Duration::from_millis(ms))
}

/// Whether the answers of [`Kind::remaining`] show the keys of a split vote rather than a
/// lock: for one of its keys (a semaphore's slot; a lock has one), tokens on a quorum of nodes,
/// but no one token on a quorum. Nobody holds that key then: those keys belong to attempts that
/// failed, whose undos announce nothing (`plain.rs`), so a waiter that slept until their TTL
/// ran out, trusting a release to wake it, would sleep the whole TTL through for a lock nobody
/// holds (the fair queue's head did, 8 s, in 4 of 25 runs of `examples/waiters.rs` with 5
/// processes under load). Not for kinds whose keys hold no token (hashes, sorted sets): no
/// owners to go by. `outcome` must be settled (every node's answer that came in time), not cut
/// at the quorum: a quorum of answers that happened to leave out an empty node or a second
/// token would tell the wrong story.
pub(crate) fn split_vote(outcome: &Outcome, quorum: usize) -> bool {
    let answers: Vec<&[redis::Value]> = outcome
        .tally
        .votes()
        .filter_map(|v| match v {
            Vote::Raw(redis::Value::Array(a)) => Some(&a[..]),
            _ => None,
        })
        .collect();
    let keys = answers.iter().map(|a| a.len()).max().unwrap_or(0);
    (1..keys).any(|k| {
        let mut owners: Vec<&[u8]> = answers
            .iter()
            .filter_map(|a| match a.get(k) {
                Some(redis::Value::BulkString(owner)) => Some(&owner[..]),
                _ => None,
            })
            .collect();
        if owners.len() < quorum {
            return false;
        }
        owners.sort_unstable();
        let most = owners
            .chunk_by(|a, b| a == b)
            .map(<[_]>::len)
            .max()
            .unwrap_or(0);
        most < quorum
    })
}

/// The nodes that would announce the release of the lock the answers of [`Kind::remaining`]
/// show: those whose key holds its token, the most common one. `None` when the answers tell no
/// one holder: keys without a token (a reentrant lock's hash, readers' sorted set, whose
/// several holders each announce only the release that empties the key) or several keys (a
/// semaphore's slots); and a key of another token (a minority left by a failed attempt)
/// announces nothing of the holder's release.
pub(crate) fn held_on(outcome: &Outcome) -> Option<Box<[bool]>> {
    let nodes = outcome.tally.nodes();
    let mut owners: Vec<Option<&[u8]>> = vec![None; nodes];
    for (i, owner) in owners.iter_mut().enumerate() {
        let Some(vote) = outcome.tally.vote(i) else {
            continue;
        };
        if remaining_ms(vote).is_none_or(|ms| ms == 0) {
            continue;
        }
        match vote {
            Vote::Raw(redis::Value::Array(a)) if a.len() == 2 => match &a[1] {
                redis::Value::BulkString(token) => *owner = Some(&token[..]),
                _ => return None,
            },
            _ => return None,
        }
    }
    let mut tokens: Vec<&[u8]> = owners.iter().flatten().copied().collect();
    tokens.sort_unstable();
    let most = tokens
        .chunk_by(|a, b| a == b)
        .max_by_key(|c| c.len())
        .map(|c| c[0]);
    Some(owners.iter().map(|o| o.is_some() && *o == most).collect())
}

/// The remaining TTL one node answered, in ms.
fn remaining_ms(vote: &Vote) -> Option<u64> {
    match vote {
        Vote::Value(ms) => Some(*ms),
        Vote::Raw(redis::Value::Array(a)) => match a.first() {
            Some(redis::Value::Int(ms)) => u64::try_from(*ms).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// A value that tells one release apart from every other, which the notifier counts
/// announcements by. A token would not do: a reentrant owner releases many times with one.
pub(crate) fn release_nonce() -> Arc<str> {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        new_token()
            .map(|t| t[..12].to_owned())
            .unwrap_or_else(|_| format!("{:x}", std::process::id()))
    });
    use std::io::Write as _;
    // Written on the stack (at most 12 + 1 + 20 bytes), so that the nonce costs one allocation.
    let mut text = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut text[..]);
    let _ = write!(cursor, "{prefix}.{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let len = cursor.position() as usize;
    Arc::from(&*String::from_utf8_lossy(&text[..len]))
}
