//! Fair hand-over across processes: waiters of one exclusive resource queue in arrival order on
//! one node, and a release wakes the waiter at the head of that queue, in whichever process it
//! is, instead of one waiter in every process.
//!
//! ## The queue
//! - **Where**: on one node per resource, the *queue node*, picked by rendezvous hashing of the
//!   resource and the node addresses as configured ([`queue_node`]). Clients that list the same
//!   nodes pick the same one. Clients that disagree (other addresses for the same servers) keep
//!   queues on different nodes; each is still a queue, and exclusion does not depend on it.
//! - **What**: a sorted set of waiter ids scored by arrival (the queue node's `TIME` in µs when
//!   the id first joined) and a sorted set of leases (their expiry in the node's ms). Both keys
//!   and the channel are in the resource's hash slot, named like its release channel.
//! - **Arrival order** is the order in which the waiters' `JOIN`s reached the queue node. A
//!   waiter first tries once as before, unless its client already knows of a queue on the
//!   resource; a refused waiter joins. So a newcomer whose client knows nothing of a queue can
//!   still take a lock that has just been released ahead of the head (an inversion, counted by
//!   `examples/waiters.rs`); one whose client knows joins behind the others.
//! - **Turns**: a waiter that got the lock, or gave up, leaves with `LEAVE`. When the head (or
//!   the one after it) leaves, the script publishes `turn:<head>:<next>:<held>` on the
//!   resource's release channel, which every waiting client already listens to. The client of
//!   `<head>` tells that waiter it is at the front: to try at the release of the lock just taken
//!   (`held`: its TTL in ms, the longest it can take), or at once (0: the one before gave up). The client of `<next>` tells it to watch
//!   the head.
//!
//! ## Why it cannot take exclusion away
//! The lock is still `SET NX` (or the kind's acquire script) on a quorum, exactly as without the
//! queue: the queue only decides which waiter *tries* when. A wrong, stale, lost or duplicated
//! queue makes a waiter try too early (it is refused, as today) or too late (it waits longer);
//! never does any queue state make a node grant a key it would not grant otherwise.
//!
//! ## Why it cannot hang (Redisson's fair lock did: redisson#1104, #2883, #3004, #3730, #7224)
//! - **A waiter that dies or stops** keeps its place until its lease ends: [`MEMBER_LEASE`] while
//!   behind others or alone, but only [`HEAD_LEASE`] at the front with a waiter behind it.
//!   Becoming such a head (or getting a waiter behind, who says so: `watch:<head>`) cuts the
//!   lease to that, and only the waiter's own waiting thread renews it ([`HEAD_RENEW`]), so a live
//!   process with a stuck waiting thread does not keep the queue either; a head alone renews
//!   every [`MEMBER_CHECK`]. The waiter behind the head, told so by the turn message or its
//!   `JOIN`, re-reads the queue every [`NEXT_CHECK`]; that `JOIN` evicts an expired head and
//!   announces the new head and next. A dead head costs about `HEAD_LEASE + NEXT_CHECK`.
//! - **Every wait still ends on its own clock**: a waiter behind others re-reads its place every
//!   [`MEMBER_CHECK`] and when its subscription to a node was rebuilt (a message may have been
//!   lost meanwhile), and the head tries when the holder's keys expire, as every waiter did.
//! - **The queue node restarts or loses the queue**: the next `JOIN`s rebuild it (in the order
//!   they come, so arrival order is lost once), and the rebuilt subscriptions make every waiter
//!   `JOIN` at once.
//! - **The queue node is down or answers an error**: the waiter goes on as without a queue
//!   (every client's front waiter tries on each release), which is slower, never stuck.
//! - **The queue node hangs** (its news stops, the other nodes still announce releases): a
//!   release that no turn message follows within two node timeouts makes each client tell its
//!   waiters behind the head to read their place (`notify::Registry::check_silence`); their
//!   `JOIN` finds the node hung and they go on without the queue. Once the client's workers
//!   skip the node (it has not answered within `node_timeout`), its new waiters go on without
//!   the queue at once, and queue there again as soon as it answers (a probe in time, or a
//!   message it publishes).
//! - **A cancel or a timeout at the head** leaves with `held` = 0: the next tries at once.
//! - **A split vote** (waiters trying at once, none on a quorum) leaves only the keys of failed
//!   attempts, whose undos announce nothing: a head refused by them sees no one token on a
//!   quorum when it reads their TTLs (`kinds::split_vote`) and retries on its backoff instead of
//!   waiting for a release that will not come.
//! - **A release that goes unheard** (a message lost with a connection, or announced by too few
//!   nodes: the lock was held on a node that hung or went down since) costs the head at most
//!   the `held` TTL of the lock before it, as it cost every waiter before the queue, and no
//!   more than its fallback once its client's workers skip a node or a node's subscription is
//!   down (the head looks every node timeout).
//!   A release a client kept while none of its waiters was at the head is dropped when the
//!   turn message makes one of them the head, unless it is the release of the lock just taken:
//!   the holder's `LEAVE` names the nonce its release will be announced with
//!   (`turn:<head>:<next>:<held>:<release>`), and the kept message stands for a release older
//!   than that lock until a quorum announced that one. (A turn message of an older client names
//!   none: then a kept release counts as older if the queue node announced it before that
//!   message, which may drop the right one; see `Registry::queue`.) A drop that is wrong all
//!   the same costs the head at most `AFTER_A_DROP`: the lock freed by another release than the
//!   holder's (`force_release`) before this client heard the turn message, or the holder's
//!   release no longer remembered (more than `ANNOUNCED` hand-overs came between it and the
//!   turn message).
//! - **Keys left behind** expire [`MEMBER_LEASE`] after the last `JOIN`.
//!
//! Not queued: multi-resource locks (they would stand in several queues), readers of a
//! read-write lock (they get in together), semaphores, reentrant locks (a holder taking its lock
//! again must not wait behind its own waiters), waits without notifications, and requests with
//! [`fair(false)`](crate::LockRequest::fair). Election campaigns queue like exclusive locks.

use std::sync::Arc;
use std::time::Duration;

use crate::wire::{Command, Keys, Reply, Script, named};

/// How long a waiter at the head of the queue keeps its place without renewing it.
pub(crate) const HEAD_LEASE: Duration = Duration::from_secs(1);
/// How often the head renews its place (a third of its lease).
pub(crate) const HEAD_RENEW: Duration = Duration::from_millis(330);
/// How often the waiter behind the head re-reads the queue, evicting a head whose lease ended.
pub(crate) const NEXT_CHECK: Duration = Duration::from_millis(1100);
/// How long a waiter behind others keeps its place without renewing it, and how often it does.
pub(crate) const MEMBER_LEASE: Duration = Duration::from_secs(45);
pub(crate) const MEMBER_CHECK: Duration = Duration::from_secs(15);

/// What a turn message starts with, and a watch message (see [`JOIN`]).
const TURN: &str = "turn:";
const WATCH: &str = "watch:";

/// Lua: `now` (the node's time, ms) and `tick` (µs); `cut(id)`, which shortens the lease of a
/// head with a waiter behind it to `HEAD_LEASE` (ARGV[2]) unless it is shorter; and
/// `announce(held)`, the turn message.
macro_rules! queue_fns {
    () => {
        r#"if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tick = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function cut(id)
    local s = redis.call("zscore", KEYS[2], id)
    if s and tonumber(s) > now + tonumber(ARGV[2]) then
        redis.call("zadd", KEYS[2], now + tonumber(ARGV[2]), id)
    end
end
local function announce(held)
    local h = redis.call("zrange", KEYS[1], 0, 1)
    if h[2] then cut(h[1]) end
    redis.call("publish", KEYS[3], "turn:" .. (h[1] or "") .. ":" .. (h[2] or "") .. ":" .. held)
end
"#
    };
}

/// Joins the queue (KEYS[1], leases KEYS[2], channel KEYS[3]) as ARGV[1], or renews the place
/// it has, first evicting every waiter whose lease ended (announcing the new head and next if
/// that changed them). The lease is ARGV[2] (`HEAD_LEASE`) at the head with a waiter behind it, else
/// ARGV[3] (`MEMBER_LEASE`), which the keys also live for. A newcomer right behind the head
/// cuts the head's lease and publishes `watch:<head>`: the head renews from then on. Returns
/// the waiter's rank (0: the head) and how many wait behind it.
pub(crate) static JOIN: Script = Script::new(concat!(
    queue_fns!(),
    r#"local dead = redis.call("zrangebyscore", KEYS[2], "-inf", now)
local before
if #dead > 0 then
    before = redis.call("zrange", KEYS[1], 0, 1)
    redis.call("zremrangebyscore", KEYS[2], "-inf", now)
    for i = 1, #dead, 1000 do
        redis.call("zrem", KEYS[1], unpack(dead, i, math.min(i + 999, #dead)))
    end
end
local added = redis.call("zadd", KEYS[1], "NX", tick, ARGV[1])
local rank = redis.call("zrank", KEYS[1], ARGV[1])
local behind = redis.call("zcard", KEYS[1]) - rank - 1
local lease = tonumber(ARGV[3])
if rank == 0 and behind > 0 then lease = tonumber(ARGV[2]) end
redis.call("zadd", KEYS[2], now + lease, ARGV[1])
redis.call("pexpire", KEYS[1], ARGV[3])
redis.call("pexpire", KEYS[2], ARGV[3])
local after = before and redis.call("zrange", KEYS[1], 0, 1)
if after and (after[1] ~= before[1] or after[2] ~= before[2]) then
    announce("0")
elseif added == 1 and rank == 1 then
    local h = redis.call("zrange", KEYS[1], 0, 0)[1]
    cut(h)
    redis.call("publish", KEYS[3], "watch:" .. h)
end
return {rank, behind}"#
));

/// Leaves the queue as ARGV[1], having got the lock for ARGV[3] ms (its TTL) or given up ("0");
/// when it was the head or the one after it, announces the new head and next.
pub(crate) static LEAVE: Script = Script::new(concat!(
    queue_fns!(),
    r#"local rank = redis.call("zrank", KEYS[1], ARGV[1])
if not rank then return 0 end
redis.call("zrem", KEYS[1], ARGV[1])
redis.call("zrem", KEYS[2], ARGV[1])
if rank <= 1 then
    local held = "0"
    if rank == 0 then held = ARGV[3] end
    announce(held)
end
return 1"#
));

/// The node that keeps `resource`'s queue: the highest rendezvous hash of the resource with
/// each node's address (FNV-1a, the same in every process).
pub(crate) fn queue_node<'a>(resource: &str, addresses: impl Iterator<Item = &'a str>) -> usize {
    addresses
        .enumerate()
        .max_by_key(|(_, address)| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in resource
                .bytes()
                .chain(std::iter::once(0))
                .chain(address.bytes())
            {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h
        })
        .map_or(0, |(i, _)| i)
}

/// The keys of `resource`'s queue, then its release channel.
pub(crate) fn keys(resource: &str) -> Keys {
    Keys::List(Arc::from(vec![
        Arc::from(named("redlock:queue:", resource)),
        Arc::from(named("redlock:queue-lease:", resource)),
        Arc::from(crate::wire::channel(resource)),
    ]))
}

/// `JOIN` (see [`JOIN`]): its reply is the rank and how many wait behind (see [`place`]).
pub(crate) fn join(keys: &Keys) -> Command {
    Command::script(&JOIN, Reply::Raw)
        .keys(keys.clone())
        .number(HEAD_LEASE.as_millis() as u64)
        .text(Arc::from(MEMBER_LEASE.as_millis().to_string()))
}

/// `LEAVE` (see [`LEAVE`]) after getting the lock for `held_ms` (its TTL), whose release will
/// be announced with `release`, or giving up (`None`). The turn message then reads
/// `turn:<head>:<next>:<held_ms>:<release>`: a reader of three fields takes `held_ms` as before.
pub(crate) fn leave(keys: &Keys, held: Option<(u64, &str)>) -> Command {
    let held = match held {
        Some((ms, release)) => format!("{ms}:{release}"),
        None => "0".to_owned(),
    };
    Command::script(&LEAVE, Reply::Flag)
        .keys(keys.clone())
        .number(HEAD_LEASE.as_millis() as u64)
        .text(Arc::from(held))
}

/// Reads `JOIN`'s reply: the rank (0: the head) and how many wait behind.
pub(crate) fn place(reply: &redis::Value) -> Option<(u64, u64)> {
    let redis::Value::Array(items) = reply else {
        return None;
    };
    match items[..] {
        [redis::Value::Int(rank), redis::Value::Int(behind)] if rank >= 0 && behind >= 0 => {
            Some((rank as u64, behind as u64))
        }
        _ => None,
    }
}

/// News from a queue node about its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueueNews {
    Turn(TurnNews),
    /// A waiter came right behind this head, which must renew its place from now on.
    Watch(String),
}

/// A turn message: the new head and the one after it, and for how long at most the one before
/// holds the lock it just got (its TTL, ms; 0: it gave up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnNews {
    pub head: Option<String>,
    pub next: Option<String>,
    pub held_ms: u64,
    /// The nonce the lock just taken will be released with, when its holder named it.
    pub release: Option<String>,
}

/// Reads a message on a release channel as news of a queue, if it is that.
pub(crate) fn queue_news(message: &str) -> Option<QueueNews> {
    if let Some(head) = message.strip_prefix(WATCH) {
        return Some(QueueNews::Watch(head.to_owned()));
    }
    turn_news(message).map(QueueNews::Turn)
}

fn turn_news(message: &str) -> Option<TurnNews> {
    let mut parts = message.strip_prefix(TURN)?.split(':');
    let id = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
    let head = id(parts.next());
    let next = id(parts.next());
    let held_ms = parts.next().and_then(|h| h.parse().ok()).unwrap_or(0);
    let release = id(parts.next());
    Some(TurnNews {
        head,
        next,
        held_ms,
        release,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_picks_the_same_queue_node_and_resources_spread() {
        let nodes = ["a:1", "b:2", "c:3", "d:4", "e:5"];
        let mut counts = [0usize; 5];
        for r in 0..1000 {
            let resource = format!("job-{r}");
            let i = queue_node(&resource, nodes.iter().copied());
            assert_eq!(i, queue_node(&resource, nodes.iter().copied()));
            counts[i] += 1;
        }
        assert!(counts.iter().all(|&c| c > 100), "{counts:?}");
        // Another order of the same nodes picks the same address.
        let reversed: Vec<&str> = nodes.iter().rev().copied().collect();
        for r in 0..100 {
            let resource = format!("job-{r}");
            let i = queue_node(&resource, nodes.iter().copied());
            let j = queue_node(&resource, reversed.iter().copied());
            assert_eq!(nodes[i], reversed[j]);
        }
    }

    #[test]
    fn turn_messages_read_back() {
        assert_eq!(
            turn_news("turn:ab:cd:10000"),
            Some(TurnNews {
                head: Some("ab".into()),
                next: Some("cd".into()),
                held_ms: 10_000,
                release: None,
            })
        );
        assert_eq!(
            turn_news("turn:ab::10000:5e1f.7"),
            Some(TurnNews {
                head: Some("ab".into()),
                next: None,
                held_ms: 10_000,
                release: Some("5e1f.7".into()),
            })
        );
        assert_eq!(
            turn_news("turn:::0"),
            Some(TurnNews {
                head: None,
                next: None,
                held_ms: 0,
                release: None,
            })
        );
        assert_eq!(queue_news("3f2a9c"), None);
        assert_eq!(queue_news("watch:ab"), Some(QueueNews::Watch("ab".into())));
    }
}
