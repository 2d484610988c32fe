//! The operator's tools: reading a lock on every node, and removing a stuck one.
//!
//! Beside the kinds, above the engine: both are ordinary commands fanned out to every node,
//! with replies passed through raw ([`Reply::Raw`]) and decoded here, so the node workers stay
//! ignorant of them. Unlike a lock operation they wait for every node (up to `node_timeout`),
//! since the point is to see each one, and a node that is down or refuses (a `NOPERM` of a tight
//! ACL) is reported in its row instead of failing the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::engine::{Engine, Outcome};
use crate::error::{Error, NodeProblem, Result};
use crate::kinds::fenced::fence_key;
use crate::kinds::{check_resource_name, release_nonce};
use crate::rules::quorum::{Vote, quorum};
use crate::wire::{Command, Keys, Reply, Script};

/// The operator's scripts, loaded on each connection beside the kinds'.
pub(crate) static SCRIPTS: [&Script; 2] = [&INSPECT, &FORCE_RELEASE];

/// Lua, read-only: `{type, pttl, value, fence}` of KEYS[1] (the lock) and KEYS[2] (its fence
/// counter). `value` is the string (plain and fenced locks, and each resource of a
/// multi-resource lock), the flat `HGETALL` list (a reentrant lock's `{owner: count}` and its
/// holds' own fields), for a read-write lock's readers (a sorted set scored by expiry in the
/// node's Unix ms) the flat list `{token, ms left}` of the entries still live by the node's
/// clock (nothing is pruned: the script writes nothing), or nil (absent, or a type no lock
/// uses). A fence counter of another type reads as nil; any other error (a `NOPERM`) fails the
/// script, and so that node's row.
pub(crate) static INSPECT: Script = Script::new(
    r#"local t = redis.call("type", KEYS[1]).ok
local ttl = redis.call("pttl", KEYS[1])
local value = false
if t == "string" then
    value = redis.call("get", KEYS[1])
elseif t == "hash" then
    value = redis.call("hgetall", KEYS[1])
elseif t == "zset" then
    local time = redis.call("time")
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local entries = redis.call("zrange", KEYS[1], 0, -1, "withscores")
    value = {}
    for i = 1, #entries, 2 do
        local left = tonumber(entries[i + 1]) - now
        if left > 0 then
            value[#value + 1] = entries[i]
            value[#value + 1] = string.format("%.0f", left)
        end
    end
end
local fence = redis.pcall("get", KEYS[2])
if type(fence) == "table" and fence.err then
    if not string.find(fence.err, "WRONGTYPE", 1, true) then
        error(fence)
    end
    fence = false
end
return {t, ttl, value, fence}"#,
);

/// Lua: deletes KEYS[1] when it holds the token ARGV[1] (a string equal to it, or a hash with
/// it as an owner), or whatever it holds when ARGV[1] is empty, and then announces the release
/// with the nonce ARGV[2] on the key's channel (KEYS[2]). Replies 1 deleted, 0 absent, 2 held by another token (kept). The
/// fence counter is never touched: tokens must stay monotonic.
pub(crate) static FORCE_RELEASE: Script = Script::new(
    r#"local t = redis.call("type", KEYS[1]).ok
if t == "none" then
    return 0
end
if ARGV[1] ~= "" then
    local ours = false
    if t == "string" then
        ours = redis.call("get", KEYS[1]) == ARGV[1]
    elseif t == "hash" then
        ours = redis.call("hexists", KEYS[1], ARGV[1]) == 1
    end
    if not ours then
        return 2
    end
end
redis.call("del", KEYS[1])
redis.call("publish", KEYS[2], ARGV[2])
return 1"#,
);

/// What [`Redlock::inspect`](crate::Redlock::inspect) found: every node's view of one resource, and what they add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The resource (the lock's key).
    pub resource: String,
    /// One entry per node, in the client's node order.
    pub nodes: Vec<NodeInspection>,
    /// Nodes needed for a quorum (N/2 + 1).
    pub quorum: usize,
    /// Whether a quorum of nodes hold a live key for the resource (whatever it holds): then
    /// no one can acquire it now.
    pub held: bool,
    /// The token (plain and fenced locks) or owner (reentrant locks) found on a quorum of
    /// nodes: the current holder, as far as the nodes tell. `None` when no single value is on a
    /// quorum.
    pub holder: Option<String>,
    /// The largest fence counter among the nodes that answered, if any has one: the last
    /// fencing token handed out, or a higher number (one an acquisition skipped, or the clock
    /// reading of a node whose acquire came after the decision).
    pub fence: Option<u64>,
}

/// One node's part of an [`Inspection`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeInspection {
    /// `host:port` of the node (never with credentials).
    pub node: String,
    /// What the node holds, or why it could not tell (down, timed out, an error reply such as
    /// `NOPERM`).
    pub state: std::result::Result<NodeState, NodeProblem>,
}

/// What one node holds for a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeState {
    /// The lock key's content.
    pub key: KeyState,
    /// The key's remaining time to live; `None` when the key is absent or never expires (see
    /// [`persistent`](NodeState::persistent)).
    pub ttl: Option<Duration>,
    /// The key exists but has no TTL: nothing will free it but a deletion. Redlock never sets
    /// such a key; another program did.
    pub persistent: bool,
    /// The resource's fence counter (`redlock:fence:{resource}`) on this node, if it has one
    /// that reads as a number.
    pub fence: Option<u64>,
}

impl NodeState {
    /// Whether the node holds a key for the resource that has not expired (for readers: with
    /// at least one live entry).
    pub fn is_live(&self) -> bool {
        match &self.key {
            KeyState::Absent => false,
            KeyState::Readers(r) if r.is_empty() => false,
            _ => self.persistent || self.ttl.is_some(),
        }
    }

    /// The token or reentrant owner the key names, when it names exactly one.
    pub fn holder(&self) -> Option<&str> {
        match &self.key {
            KeyState::Token(t) => Some(t),
            KeyState::Owners(owners) if owners.len() == 1 => Some(&owners[0].0),
            _ => None,
        }
    }
}

/// The content of a lock key on one node. Values that are not UTF-8 (another client's) are
/// shown with replacement characters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyState {
    /// No key: the resource is free on this node.
    Absent,
    /// A string: the token of a plain or fenced lock (or of a multi-resource lock, which puts
    /// one token on each of its resources).
    Token(String),
    /// A hash: a reentrant lock's owners and their hold counts.
    Owners(Vec<(String, u64)>),
    /// A sorted set: the readers of a read-write lock
    /// ([`LockRequest::read`](crate::LockRequest::read)), each token with the time its entry
    /// has left by the node's clock, soonest to expire first. Entries whose time is up but
    /// that no script has pruned yet are left out; an empty list is a set whose entries all
    /// expired (it goes with them).
    Readers(Vec<(String, Duration)>),
    /// A key of a type no lock uses (`list`, `set`, …): it blocks the resource all the same.
    Other(String),
}

/// What [`Redlock::force_release`](crate::Redlock::force_release) did, node by node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForcedRelease {
    /// The resource.
    pub resource: String,
    /// The token the release was limited to, if one was given.
    pub token: Option<String>,
    /// One entry per node, in the client's node order.
    pub nodes: Vec<NodeRelease>,
    /// Nodes needed for a quorum (N/2 + 1).
    pub quorum: usize,
}

impl ForcedRelease {
    /// Nodes that confirmed the resource's key is gone: deleted, or absent already. A node
    /// where another token holds it (kept) does not count: the lock is still held there.
    pub fn confirmed(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.outcome, Ok(Released::Deleted | Released::Absent)))
            .count()
    }

    /// Whether a quorum of nodes confirmed the key is gone: nobody holds the lock until a new
    /// acquisition. False when the nodes could not tell, or when another token holds it (the
    /// holder changed since the token was read).
    pub fn on_quorum(&self) -> bool {
        self.confirmed() >= self.quorum
    }
}

/// One node's part of a [`ForcedRelease`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeRelease {
    /// `host:port` of the node (never with credentials).
    pub node: String,
    /// What the node did, or why it could not (down, timed out, an error reply).
    pub outcome: std::result::Result<Released, NodeProblem>,
}

/// What a forced release did on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Released {
    /// The key was deleted and its release announced.
    Deleted,
    /// There was no key.
    Absent,
    /// The key holds another token than the one given, so it was kept.
    HeldByOther,
}

/// See [`Redlock::inspect`](crate::Redlock::inspect)(crate::Redlock::inspect).
pub(crate) fn inspect(engine: &Engine, resource: &str) -> Result<Inspection> {
    check_resource(resource)?;
    let key: Arc<str> = resource.into();
    let command =
        Command::script(&INSPECT, Reply::Raw).keys(Keys::KeyAnd(fence_key(resource).into()));
    let answers = every_answer(engine, &command, &key, &Arc::from(""));
    let nodes: Vec<NodeInspection> = engine
        .addresses()
        .zip(answers)
        .map(|(node, answer)| NodeInspection {
            node: node.to_owned(),
            state: answer.and_then(|v| decode_state(&v)),
        })
        .collect();
    let q = quorum(nodes.len());
    let states = || nodes.iter().filter_map(|n| n.state.as_ref().ok());
    let held = states().filter(|s| s.is_live()).count() >= q;
    let mut holders: Vec<&str> = states()
        .filter(|s| s.is_live())
        .filter_map(NodeState::holder)
        .collect();
    holders.sort_unstable();
    let holder = holders
        .chunk_by(|a, b| a == b)
        .find(|run| run.len() >= q)
        .map(|run| run[0].to_owned());
    let fence = states().filter_map(|s| s.fence).max();
    Ok(Inspection {
        resource: resource.to_owned(),
        held,
        holder,
        fence,
        quorum: q,
        nodes,
    })
}

/// See [`Redlock::force_release`](crate::Redlock::force_release)(crate::Redlock::force_release).
pub(crate) fn force_release(
    engine: &Engine,
    resource: &str,
    token: Option<&str>,
) -> Result<ForcedRelease> {
    check_resource(resource)?;
    if token.is_some_and(str::is_empty) {
        return Err(Error::invalid(
            "token is empty: give the token to release, or none to release any holder",
        ));
    }
    let key: Arc<str> = resource.into();
    let mut command = Command::script(&FORCE_RELEASE, Reply::Raw)
        .text(release_nonce())
        .announcing();
    if token.is_none() {
        // Sent twice (after a dropped connection), "whatever is there" could be a new
        // holder's key.
        command = command.not_resendable();
    }
    let answers = every_answer(engine, &command, &key, &Arc::from(token.unwrap_or("")));
    let nodes = engine
        .addresses()
        .zip(answers)
        .map(|(node, answer)| NodeRelease {
            node: node.to_owned(),
            outcome: answer.and_then(|v| match v {
                Value::Int(1) => Ok(Released::Deleted),
                Value::Int(0) => Ok(Released::Absent),
                Value::Int(2) => Ok(Released::HeldByOther),
                other => Err(unexpected(&other)),
            }),
        })
        .collect::<Vec<_>>();
    Ok(ForcedRelease {
        resource: resource.to_owned(),
        token: token.map(str::to_owned),
        quorum: quorum(nodes.len()),
        nodes,
    })
}

fn check_resource(resource: &str) -> Result<()> {
    check_resource_name(resource, "resource name")
}

/// Sends `command` to every node and waits for every answer until `node_timeout` from the
/// send; the silent ones time out.
pub(crate) fn every_answer(
    engine: &Engine,
    command: &Command,
    key: &Arc<str>,
    token: &Arc<str>,
) -> Vec<std::result::Result<Value, NodeProblem>> {
    let outcome: Outcome = engine.quorum_call(command, key, token);
    let deadline: Instant = outcome.t0 + engine.config.node_timeout;
    let mut answers: Vec<Option<Vote>> = (0..engine.node_count())
        .map(|i| outcome.tally.vote(i).cloned())
        .collect();
    while answers.iter().any(Option::is_none) {
        let Ok((i, vote)) = outcome.late.recv_deadline(deadline) else {
            break;
        };
        if let Some(slot) = answers.get_mut(i) {
            slot.get_or_insert(vote);
        }
    }
    answers
        .into_iter()
        .map(|vote| match vote {
            Some(Vote::Raw(value)) => Ok(value),
            Some(Vote::Failed(problem)) => Err(problem),
            Some(other) => Err(NodeProblem::Server(format!("unexpected answer {other:?}"))),
            None => Err(NodeProblem::TimedOut),
        })
        .collect()
}

fn unexpected(value: &Value) -> NodeProblem {
    NodeProblem::Server(format!("unexpected reply {value:?}"))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

/// Reads the reply of [`INSPECT`].
fn decode_state(value: &Value) -> std::result::Result<NodeState, NodeProblem> {
    let bad = || unexpected(value);
    let Value::Array(parts) = value else {
        return Err(bad());
    };
    let [kind, ttl, content, fence] = parts.as_slice() else {
        return Err(bad());
    };
    let kind = text(kind).ok_or_else(bad)?;
    let Value::Int(ttl) = *ttl else {
        return Err(bad());
    };
    let key = match (kind.as_str(), content) {
        ("none", _) => KeyState::Absent,
        ("string", content) => KeyState::Token(text(content).ok_or_else(bad)?),
        ("hash", Value::Array(pairs)) => KeyState::Owners(
            pairs
                .chunks(2)
                .map(|pair| match pair {
                    [owner, count] => Some((
                        text(owner)?,
                        text(count)?.parse::<i64>().ok()?.max(0) as u64,
                    )),
                    _ => None,
                })
                .collect::<Option<Vec<(String, u64)>>>()
                .ok_or_else(bad)?
                .into_iter()
                // A hold's own field (`NUL id`, see `kinds/reentrant.rs`) is no owner.
                .filter(|(owner, _)| !owner.starts_with('\0'))
                .collect(),
        ),
        // A map reply (RESP3) for HGETALL would land here; the scripts run under RESP2 rules.
        ("hash", _) => return Err(bad()),
        ("zset", Value::Array(pairs)) => KeyState::Readers(
            pairs
                .chunks(2)
                .map(|pair| match pair {
                    [token, left] => Some((
                        text(token)?,
                        Duration::from_millis(text(left)?.parse::<u64>().ok()?),
                    )),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(bad)?,
        ),
        ("zset", _) => return Err(bad()),
        (other, _) => KeyState::Other(other.to_owned()),
    };
    let absent = matches!(key, KeyState::Absent);
    Ok(NodeState {
        ttl: (!absent && ttl >= 0).then(|| Duration::from_millis(ttl as u64)),
        persistent: !absent && ttl == -1,
        key,
        fence: match fence {
            Value::Nil => None,
            fence => text(fence).and_then(|f| f.parse().ok()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn decodes_each_kind_of_key() {
        let plain = Value::Array(vec![
            bulk("string"),
            Value::Int(1500),
            bulk("tok"),
            bulk("7"),
        ]);
        let s = decode_state(&plain).unwrap();
        assert_eq!(s.key, KeyState::Token("tok".into()));
        assert_eq!(s.ttl, Some(Duration::from_millis(1500)));
        assert_eq!(s.fence, Some(7));
        assert!(s.is_live() && !s.persistent);
        assert_eq!(s.holder(), Some("tok"));

        let hash = Value::Array(vec![
            bulk("hash"),
            Value::Int(-1),
            Value::Array(vec![bulk("owner"), bulk("3"), bulk("\0f00d"), bulk("1")]),
            Value::Nil,
        ]);
        let s = decode_state(&hash).unwrap();
        assert_eq!(s.key, KeyState::Owners(vec![("owner".into(), 3)]));
        assert_eq!((s.ttl, s.persistent, s.fence), (None, true, None));
        assert!(s.is_live());

        let none = Value::Array(vec![bulk("none"), Value::Int(-2), Value::Nil, Value::Nil]);
        let s = decode_state(&none).unwrap();
        assert_eq!(
            (s.key.clone(), s.ttl, s.persistent),
            (KeyState::Absent, None, false)
        );
        assert!(!s.is_live());

        let readers = Value::Array(vec![
            bulk("zset"),
            Value::Int(900),
            Value::Array(vec![bulk("r1"), bulk("400"), bulk("r2"), bulk("900")]),
            Value::Nil,
        ]);
        let s = decode_state(&readers).unwrap();
        assert_eq!(
            s.key,
            KeyState::Readers(vec![
                ("r1".into(), Duration::from_millis(400)),
                ("r2".into(), Duration::from_millis(900))
            ])
        );
        assert!(s.is_live());
        assert_eq!(s.holder(), None);
        let expired = Value::Array(vec![
            bulk("zset"),
            Value::Int(5),
            Value::Array(vec![]),
            Value::Nil,
        ]);
        assert!(!decode_state(&expired).unwrap().is_live());

        let list = Value::Array(vec![bulk("list"), Value::Int(10), Value::Nil, Value::Nil]);
        assert_eq!(
            decode_state(&list).unwrap().key,
            KeyState::Other("list".into())
        );

        assert!(decode_state(&Value::Int(1)).is_err());
        assert!(decode_state(&Value::Array(vec![bulk("string")])).is_err());
    }
}
