//! A node's health as its worker last saw it, the record operators read through
//! `Redlock::node_status` and the metrics.

use std::time::Duration;

use crate::telemetry::histogram::Histogram;

/// A node's health as its worker last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStatus {
    /// `host:port` of the node (never with credentials), plus `/db` when a database is selected.
    /// For a Sentinel-managed node, `sentinel:MASTERNAME@host:port` with the first sentinel of
    /// its URL: it stays the same across failovers, since reports and logs name the node by it;
    /// the current master is in [`master`](NodeStatus::master). For a Redis Cluster,
    /// `cluster:host:port` with the first seed of its URL.
    pub address: String,
    /// Whether the worker holds a working connection.
    pub connected: bool,
    /// Connections established so far (the first one included).
    pub connects: u64,
    /// The last connection problem, if any.
    pub last_error: Option<String>,
    /// The server process's `run_id` (from `INFO server`) at the last connect; `None` before the
    /// first connect or when the server denies `INFO`.
    pub run_id: Option<String>,
    /// How long the server process has been up, estimated from the `uptime_in_seconds` it
    /// reported at the last connect. That counts whole seconds of the server's wall clock
    /// (`floor(now) − floor(start)`), so it can overstate the age by up to 1 s, more if the
    /// server's clock stepped forward since its start; the restart grace allows for the second.
    pub uptime: Option<Duration>,
    /// Restarts seen: reconnects that found a different `run_id` than the connection before.
    pub restarts: u64,
    /// With [`restart_grace`](crate::Builder::restart_grace) set: how much longer the node does
    /// not count toward an acquire quorum because its process started too recently.
    pub grace_remaining: Option<Duration>,
    /// The server's own version at the last connect: `redis_version`, or `valkey_version` on
    /// Valkey (whose `redis_version` is the Redis version it is compatible with).
    pub server_version: Option<String>,
    /// Which server it is, by what it says of itself: `"redis"`, `"valkey"`, or the
    /// `server_name` another one reports; `None` before the first connect or when `INFO` is
    /// denied.
    pub server_name: Option<String>,
    /// The node's persistence as it reported it at the last connect, e.g. `"AOF (appendfsync
    /// everysec), RDB (save 3600 1)"` or `"no AOF, no RDB snapshots"`; `None` when unknown.
    /// Without persistence a restart forgets locks: consider
    /// [`restart_grace`](crate::Builder::restart_grace).
    pub persistence: Option<String>,
    /// What the server probe and the clock guard found worth an operator's attention (replicas
    /// of a master, an evicting `maxmemory-policy`, a clock that stepped back, a command the
    /// ACL denies), and an `#insecure` URL; each also went to the `log` crate as a warning. See
    /// [`strict_servers`](crate::Builder::strict_servers).
    pub warnings: Vec<String>,
    /// The node's clock minus ours (`TIME` against our wall clock), in milliseconds, at the
    /// last sample; `None` when the clock guard is off or `TIME` is denied.
    pub clock_offset_ms: Option<i64>,
    /// How much longer the node is kept out of acquire quorums because its clock jumped
    /// forward ([`clock_quarantine`](crate::Builder::clock_quarantine)).
    pub quarantine_remaining: Option<Duration>,
    /// Why the node was last quarantined, while it is.
    pub quarantine_reason: Option<String>,
    /// For a Sentinel-managed node: the master (`host:port`) the sentinels named at the last
    /// connect; for a Redis Cluster, its masters (`host:port,host:port,…`, by address; the
    /// `run_id` is then theirs, joined the same way, and the uptime the youngest one's); `None`
    /// for a standalone node, or before the first connect.
    pub master: Option<String>,
    /// For a Sentinel-managed node or a Redis Cluster: changes of master seen (another master
    /// address, or list of masters, than the one before). With
    /// [`restart_grace`](crate::Builder::restart_grace) set, each starts a grace.
    pub failovers: u64,
    /// How long the node took to answer, from sending a pipeline to reading its last reply
    /// (each request in it counted with that round trip; a `NOSCRIPT` reload and resend
    /// included). Only requests the node answered, with a reply or an error reply.
    pub command_duration: Histogram,
    /// Requests that failed on this node: error replies, timeouts, dropped connections,
    /// requests not sent because the node was down, and requests dropped unsent because their
    /// caller stopped waiting before the worker got to them. (A vote held out by the restart grace or
    /// the clock quarantine is no error.)
    pub errors: u64,
    /// How the node voted in this client's acquire attempts, counted as each attempt decided.
    pub votes: Votes,
}

/// How a node voted in acquire attempts (lock, semaphore slot, queue-less `SET NX` and the
/// like), each attempt counted once, as it decided: what a hung, slow or down node costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Votes {
    /// Granted the key.
    pub yes: u64,
    /// Refused it: held by another owner.
    pub no: u64,
    /// Unreachable: down, its connection broke, or skipped while it does not answer within the
    /// node timeout (the attempt did not wait for it).
    pub unavailable: u64,
    /// The attempt waited the whole node timeout for its answer.
    pub timed_out: u64,
    /// Answered with an error, or held out of the quorum (restart grace, clock quarantine), or
    /// the attempt was cancelled before it answered.
    pub failed: u64,
    /// Had not answered when the other nodes' answers decided the attempt, which did not wait
    /// for it.
    pub unanswered: u64,
}
