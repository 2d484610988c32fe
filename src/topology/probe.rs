//! The server probe: what a node says about itself at each connect, and what the client makes
//! of it, before any script runs.
//!
//! Redlock assumes each node is an independent, standalone master that keeps the keys it
//! accepted for their TTL. The probe reads `INFO` (server, replication, persistence, memory,
//! cluster) and `CONFIG GET` of the settings that decide whether keys can vanish, and:
//!
//! - refuses a replica (`role:slave`), a node in Redis Cluster mode (`cluster_enabled:1`: most
//!   keys would answer `MOVED`) unless it was reached through a `redis+cluster://` URL (which
//!   routes by slot: `topology::cluster`), and a server older than [`MIN_VERSION`], with an error that
//!   says why (the node then counts as unavailable, and is probed again on each reconnect);
//! - warns about a master with connected replicas (a failover can promote a replica that never
//!   got a lock, handing it to a second owner) and about a `maxmemory-policy` that can evict
//!   lock keys (`volatile-*`, `allkeys-*`) with `maxmemory` set; with `allkeys-*`, fence
//!   counters (no TTL) can be evicted too, so fencing tokens can go backwards;
//! - describes persistence (AOF and its fsync policy, RDB `save` points) for `node_status()`,
//!   so that an operator can decide on `restart_grace`.
//!
//! Warnings go to the `log` crate and to `NodeStatus::warnings`; with `strict_servers` they
//! refuse the node like the errors above. A user whose ACL denies `INFO` or `CONFIG` is not
//! refused: what could not be read is reported as unknown (and, for `INFO`, as a warning, since
//! the role could not be checked).

use std::time::{Duration, Instant};

use redis::Value;

use crate::rules::clock::{TIME_COMMAND, TimeReading};
use crate::wire::{self, Script};

/// The oldest server accepted: ACL users (the documented least-privilege setup) and the
/// scripts' error handling (`redis.pcall` error tables re-raised with `error()`) are what the
/// library is written and tested against; older servers are refused rather than trusted.
pub(crate) const MIN_VERSION: (u32, u32, u32) = (6, 0, 0);

/// The `INFO` sections read. The probe asks for them one per command only when a plain `INFO`
/// was refused: an ACL may allow `INFO` for some sections alone (`+info|server`), and several
/// sections in one command need Redis 7.
const INFO_SECTIONS: [&str; 5] = ["server", "replication", "persistence", "memory", "cluster"];
/// The settings read with `CONFIG GET`: `maxmemory`, `maxmemory-policy`, `appendonly`,
/// `appendfsync` and `save`, as patterns that every server version takes (several names in one
/// `CONFIG GET` need Redis 7). The other settings the patterns match are ignored.
const CONFIG_PATTERNS: [&str; 3] = ["maxmemory*", "append*", "save"];

/// What a node told about itself; `None` where it did not say (or denied the command).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerReport {
    /// `redis_version`: on Valkey, the Redis version it is compatible with.
    pub version: Option<String>,
    /// `server_name` (`valkey`, …); Redis itself reports none.
    pub server_name: Option<String>,
    /// `valkey_version`, on Valkey.
    pub valkey_version: Option<String>,
    pub run_id: Option<String>,
    /// `master_replid`: a master gets a new one when it is promoted or restarted empty.
    pub replid: Option<String>,
    /// Whether `master_replid2` is set: the server was promoted from a replica since it
    /// started (it says not when, and some paths clear it again).
    pub promoted: bool,
    pub uptime: Option<Duration>,
    pub role: Option<String>,
    pub master: Option<String>,
    pub connected_replicas: Option<u64>,
    pub cluster_enabled: Option<bool>,
    pub aof_enabled: Option<bool>,
    pub appendfsync: Option<String>,
    pub save: Option<String>,
    pub maxmemory: Option<u64>,
    pub maxmemory_policy: Option<String>,
    /// Why `INFO` failed, if it did.
    pub info_error: Option<String>,
    /// Why `CONFIG GET` failed, if it did.
    pub config_error: Option<String>,
}

/// The commands of the probe, to send in one pipeline before `TIME`: `INFO` (its default
/// sections, which hold the server, replication, persistence, memory and cluster ones read
/// here), then `CONFIG GET` per pattern.
pub(crate) fn commands() -> Vec<redis::Cmd> {
    let mut cmds = Vec::with_capacity(1 + CONFIG_PATTERNS.len());
    cmds.push(redis::cmd("INFO"));
    for pattern in CONFIG_PATTERNS {
        cmds.push(redis::cmd("CONFIG").arg("GET").arg(pattern).to_owned());
    }
    cmds
}

fn error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(details) => format!("{} {details}", e.code()),
        None => e.code().to_owned(),
    }
}

/// Reads the replies to [`commands`], in order; the first may be several: one per section (see
/// [`INFO_SECTIONS`]).
pub(crate) fn report(replies: &[Value]) -> ServerReport {
    let mut r = ServerReport::default();
    let (info, config) = replies.split_at(replies.len().saturating_sub(CONFIG_PATTERNS.len()));
    for value in info {
        match value {
            Value::BulkString(bytes) => parse_info(&mut r, &String::from_utf8_lossy(bytes)),
            Value::VerbatimString { text, .. } => parse_info(&mut r, text),
            Value::SimpleString(text) => parse_info(&mut r, text),
            Value::ServerError(e) => {
                r.info_error.get_or_insert_with(|| error_text(e));
            }
            other => {
                r.info_error
                    .get_or_insert_with(|| format!("unexpected reply {other:?}"));
            }
        }
    }
    for value in config {
        match value {
            Value::ServerError(e) => {
                r.config_error.get_or_insert_with(|| error_text(e));
            }
            Value::Array(items) => {
                for pair in items.chunks(2) {
                    if let [k, v] = pair {
                        apply_config(&mut r, &text(k), text(v));
                    }
                }
            }
            Value::Map(pairs) => {
                for (k, v) in pairs {
                    apply_config(&mut r, &text(k), text(v));
                }
            }
            _ => {}
        }
    }
    r
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Int(n) => n.to_string(),
        _ => String::new(),
    }
}

fn apply_config(r: &mut ServerReport, key: &str, value: String) {
    match key {
        "maxmemory" => r.maxmemory = value.parse().ok().or(r.maxmemory),
        "maxmemory-policy" => r.maxmemory_policy = Some(value),
        "appendonly" => r.aof_enabled = Some(value == "yes"),
        "appendfsync" => r.appendfsync = Some(value),
        "save" => r.save = Some(value),
        _ => {}
    }
}

/// Fills `r` from the `key:value` lines of an `INFO` reply.
pub(crate) fn parse_info(r: &mut ServerReport, text: &str) {
    for line in text.lines() {
        let Some((key, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        let value = value.to_owned();
        match key {
            "redis_version" if !value.is_empty() => r.version = Some(value),
            "server_name" if !value.is_empty() => r.server_name = Some(value),
            "valkey_version" if !value.is_empty() => r.valkey_version = Some(value),
            "run_id" if !value.is_empty() => r.run_id = Some(value),
            "master_replid" if !value.is_empty() => r.replid = Some(value),
            "master_replid2" => r.promoted = value.bytes().any(|b| b != b'0'),
            "uptime_in_seconds" => r.uptime = value.parse().ok().map(Duration::from_secs),
            "role" => r.role = Some(value),
            "master_host" => {
                r.master = Some(match r.master.take() {
                    Some(port) => format!("{value}:{port}"),
                    None => value,
                })
            }
            "master_port" => {
                r.master = Some(match r.master.take() {
                    Some(host) => format!("{host}:{value}"),
                    None => value,
                })
            }
            "connected_slaves" => r.connected_replicas = value.parse().ok(),
            "cluster_enabled" => r.cluster_enabled = Some(value == "1"),
            "aof_enabled" => r.aof_enabled = Some(value == "1"),
            "maxmemory" => r.maxmemory = value.parse().ok(),
            "maxmemory_policy" => r.maxmemory_policy = Some(value),
            _ => {}
        }
    }
}

/// `"7.0.15"` as numbers; missing parts are 0.
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.split('.').map(|p| p.parse::<u32>());
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

/// What the client makes of a report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Assessment {
    /// Reasons to refuse the node.
    pub errors: Vec<String>,
    /// Things an operator should know; errors too with `strict_servers`.
    pub warnings: Vec<String>,
}

impl Assessment {
    /// The refusal to report, if the node is refused (with `strict`, warnings refuse too).
    pub(crate) fn refusal(&self, strict: bool) -> Option<String> {
        let mut reasons: Vec<&str> = self.errors.iter().map(String::as_str).collect();
        if strict {
            reasons.extend(self.warnings.iter().map(|w| w.as_str()));
        }
        if reasons.is_empty() {
            return None;
        }
        let mut text = reasons.join("; ");
        if strict && !self.warnings.is_empty() {
            text.push_str(" (strict_servers turns warnings into errors)");
        }
        Some(text)
    }
}

/// How the warning about a master with replicas starts.
const REPLICAS_WARNING: &str = "it is a master with ";

/// How the refusal of a Cluster node starts.
const CLUSTER_ERROR: &str = "it runs in Redis Cluster mode";

/// A node reached through a `redis+cluster://` URL is a cluster's master, routed by slot (see
/// `topology::cluster`): its cluster mode is expected.
pub(crate) fn expect_cluster(a: &mut Assessment) {
    a.errors.retain(|e| !e.starts_with(CLUSTER_ERROR));
}

/// A Sentinel-managed master has replicas by design, and a change of master counts as a restart
/// (see `topology::sentinel`): the warning about its replicas does not apply.
pub(crate) fn expect_replicas(a: &mut Assessment) {
    a.warnings.retain(|w| !w.starts_with(REPLICAS_WARNING));
}

/// Applies the policy to a report.
pub(crate) fn assess(r: &ServerReport) -> Assessment {
    let mut a = Assessment::default();
    if let Some(why) = &r.info_error {
        a.warnings.push(format!(
            "INFO failed ({why}): the node's role, mode and version cannot be checked; allow \
             INFO for this user (+info)"
        ));
    }
    if r.role.as_deref() == Some("active-replica") {
        a.errors.push(
            "it is an active replica (role:active-replica, KeyDB's multi-master replication): \
             each of its masters accepts writes, so two clients' SET NX can both succeed and \
             both get the lock; point the client at a standalone master"
                .to_owned(),
        );
    }
    if r.role.as_deref() == Some("slave") {
        a.errors.push(format!(
            "it is a replica (role:slave{}): Redlock needs independent masters; point the client \
             at a master",
            r.master
                .as_deref()
                .map(|m| format!(" of {m}"))
                .unwrap_or_default()
        ));
    }
    if r.cluster_enabled == Some(true) {
        a.errors.push(format!(
            "{CLUSTER_ERROR} (cluster_enabled:1), where most keys answer MOVED: name the \
                 whole cluster as one node with a redis+cluster://host:port URL"
        ));
    }
    if let Some(v) = &r.version {
        match parse_version(v) {
            Some(version) if version < MIN_VERSION => a.errors.push(format!(
                "it is Redis {v} (or compatible with it), older than {}.{}.{} which the library \
                 needs",
                MIN_VERSION.0, MIN_VERSION.1, MIN_VERSION.2
            )),
            Some(_) => {}
            None => a.warnings.push(format!(
                "its version {v:?} cannot be read; it may be too old"
            )),
        }
    }
    if r.role.as_deref() == Some("master")
        && let Some(n) = r.connected_replicas.filter(|n| *n > 0)
    {
        a.warnings.push(format!(
            "{REPLICAS_WARNING}{n} connected replica(s): a failover can promote a replica \
             that never received a lock and hand it to a second owner; Redlock wants independent \
             masters without failover"
        ));
    }
    if let Some(policy) = r.maxmemory_policy.as_deref()
        && r.maxmemory.is_some_and(|m| m > 0)
    {
        let limit = r.maxmemory.unwrap_or(0);
        if policy.starts_with("volatile-") {
            a.warnings.push(format!(
                "maxmemory-policy {policy} with maxmemory {limit}: lock keys (they have a TTL) can \
                 be evicted under memory pressure, freeing a held lock; use noeviction"
            ));
        } else if policy.starts_with("allkeys-") {
            a.warnings.push(format!(
                "maxmemory-policy {policy} with maxmemory {limit}: lock keys can be evicted under \
                 memory pressure, freeing a held lock, and so can fence counters, so fencing \
                 tokens can go backwards; use noeviction"
            ));
        }
    }
    a
}

/// The server's name and its own version, for `node_status()`: `("valkey", "8.1.8")`, or
/// `("redis", "7.0.15")` for a server that names no other (Redis reports no `server_name`).
pub(crate) fn server(r: &ServerReport) -> (Option<String>, Option<String>) {
    match (&r.server_name, &r.valkey_version) {
        (Some(name), _) if name != "valkey" => (Some(name.clone()), r.version.clone()),
        (Some(_), version) | (None, version @ Some(_)) => {
            (Some("valkey".into()), version.clone().or(r.version.clone()))
        }
        (None, None) => (
            r.version.as_ref().map(|_| "redis".into()),
            r.version.clone(),
        ),
    }
}

/// Persistence in a few words, for `node_status()`; `None` when nothing is known.
pub(crate) fn persistence(r: &ServerReport) -> Option<String> {
    let aof = match (r.aof_enabled, r.appendfsync.as_deref()) {
        (Some(true), Some(fsync)) => Some(format!("AOF (appendfsync {fsync})")),
        (Some(true), None) => Some("AOF (appendfsync unknown)".to_owned()),
        (Some(false), _) => Some("no AOF".to_owned()),
        (None, _) => None,
    };
    let rdb = match r.save.as_deref() {
        Some("") => Some("no RDB snapshots".to_owned()),
        Some(points) => Some(format!("RDB (save {points})")),
        None if r.config_error.is_some() => Some("RDB unknown (CONFIG GET denied)".to_owned()),
        None => None,
    };
    match (aof, rdb) {
        (None, None) => None,
        (Some(a), None) => Some(a),
        (None, Some(b)) => Some(b),
        (Some(a), Some(b)) => Some(format!("{a}, {b}")),
    }
}

/// What a connect learned: the server's report, the policy's verdict, and `TIME`.
pub(crate) struct Probe {
    pub report: ServerReport,
    pub assessment: Assessment,
    pub time: Option<TimeReading>,
    /// Why `TIME` failed, if it did.
    pub time_error: Option<String>,
    /// A Redis Cluster node's other masters' `TIME` (by address), each its master's first sample
    /// for the clock guard (`time` is the first master's, the node's clock). Empty otherwise.
    pub masters_time: Vec<(String, TimeReading)>,
    /// Which of the scripts asked about (see [`run`]) the server has, in their order; `None`
    /// when none were asked about, none when `SCRIPT EXISTS` was refused (every script is then
    /// loaded, without asking again).
    pub scripts_present: Option<Vec<bool>>,
}

/// Sends the probe's `INFO`s and `CONFIG GET`s, `SCRIPT EXISTS` for `scripts` (see
/// [`wire::script_exists`]; at connect, so that the scripts the server has cost no round trip
/// of their own) and `TIME` as one pipeline. Replies that are errors (a `NOPERM`, a renamed
/// command) are part of the report, not a failure.
pub(crate) fn run(conn: &mut redis::Connection, scripts: &[&Script]) -> redis::RedisResult<Probe> {
    let commands = commands();
    let exists = wire::script_exists(scripts);
    let mut buf = Vec::with_capacity(256);
    for c in commands.iter().chain(&exists) {
        c.write_packed_command(&mut buf);
    }
    buf.extend_from_slice(TIME_COMMAND);
    let sent = Instant::now();
    conn.send_packed_command(&buf)?;
    let expected = commands.len() + exists.len() + 1;
    let mut values = Vec::with_capacity(expected);
    while values.len() < expected {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value => values.push(value),
        }
    }
    let time_value = values.pop().unwrap_or(Value::Nil);
    let scripts_present =
        (!exists.is_empty()).then(|| wire::scripts_present(values.split_off(commands.len())));
    if let Some(Value::ServerError(_)) = values.first() {
        // An ACL may allow some sections alone (`+info|server`): asked per section, such a
        // user still has the node checked. (A renamed or forbidden `INFO` is refused again.)
        let sections = ask_info_per_section(conn)?;
        values.splice(..1, sections);
    }
    let (time, time_error) = match time_value {
        Value::ServerError(e) => (None, Some(error_text(&e))),
        value if crate::rules::clock::parse_time(&value).is_some() => {
            (Some(TimeReading::new(value, sent)), None)
        }
        other => (None, Some(format!("unexpected reply {other:?}"))),
    };
    let report = report(&values);
    Ok(Probe {
        assessment: assess(&report),
        report,
        time,
        time_error,
        masters_time: Vec::new(),
        scripts_present,
    })
}

/// `INFO` of each of [`INFO_SECTIONS`], in one pipeline.
fn ask_info_per_section(conn: &mut redis::Connection) -> redis::RedisResult<Vec<Value>> {
    let mut buf = Vec::with_capacity(128);
    for section in INFO_SECTIONS {
        redis::cmd("INFO")
            .arg(section)
            .write_packed_command(&mut buf);
    }
    conn.send_packed_command(&buf)?;
    let mut values = Vec::with_capacity(INFO_SECTIONS.len());
    while values.len() < INFO_SECTIONS.len() {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value => values.push(value),
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// What a plain master answers the probe's commands, section by section and setting by
    /// setting, for the tests to change.
    struct Replies {
        /// `INFO`'s server, replication, persistence, memory and cluster sections.
        info: [String; 5],
        /// `CONFIG GET`'s answers per pattern; `None`: as `config`.
        denied: Option<Value>,
        config: [(&'static str, String); 5],
    }

    impl Replies {
        fn set(&mut self, name: &str, value: &str) {
            let entry = self.config.iter_mut().find(|(n, _)| *n == name).unwrap();
            entry.1 = value.to_owned();
        }

        fn values(&self) -> Vec<Value> {
            let mut values = vec![bulk(&self.info.concat())];
            for pattern in CONFIG_PATTERNS {
                values.push(match &self.denied {
                    Some(error) => error.clone(),
                    None => {
                        let prefix = pattern.trim_end_matches('*');
                        let mut items = Vec::new();
                        for (name, value) in &self.config {
                            if *name == pattern
                                || (pattern.ends_with('*') && name.starts_with(prefix))
                            {
                                items.extend([bulk(name), bulk(value)]);
                            }
                        }
                        // A setting the pattern matches and the probe ignores.
                        if pattern == "maxmemory*" {
                            items.extend([bulk("maxmemory-samples"), bulk("5")]);
                        }
                        Value::Array(items)
                    }
                });
            }
            values
        }
    }

    fn master_replies() -> Replies {
        Replies {
            info: [
                "# Server\r\nredis_version:7.0.15\r\nrun_id:4f1c0e\r\nuptime_in_seconds:42\r\n\
                 uptime_in_days:0\r\n"
                    .into(),
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n".into(),
                "# Persistence\r\nloading:0\r\naof_enabled:0\r\n".into(),
                "# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n".into(),
                "# Cluster\r\ncluster_enabled:0\r\n".into(),
            ],
            denied: None,
            config: [
                ("maxmemory", "0".into()),
                ("maxmemory-policy", "noeviction".into()),
                ("appendonly", "no".into()),
                ("appendfsync", "everysec".into()),
                ("save", String::new()),
            ],
        }
    }

    #[test]
    fn plain_master_is_fine_and_described() {
        let r = report(&master_replies().values());
        assert_eq!(r.version.as_deref(), Some("7.0.15"));
        assert_eq!(r.run_id.as_deref(), Some("4f1c0e"));
        assert_eq!(r.uptime, Some(Duration::from_secs(42)));
        assert_eq!(assess(&r), Assessment::default());
        assert_eq!(persistence(&r).as_deref(), Some("no AOF, no RDB snapshots"));
        assert_eq!(commands().len(), master_replies().values().len());
        // The same answered per section (a plain `INFO` refused, see `run`).
        let replies = master_replies();
        let mut per_section: Vec<Value> = replies.info.iter().map(|text| bulk(text)).collect();
        per_section.extend(replies.values().split_off(1));
        assert_eq!(report(&per_section), r);
    }

    #[test]
    fn replica_cluster_and_old_servers_are_refused() {
        let mut replies = master_replies();
        replies.info[1] =
            "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6380\r\n".into();
        let a = assess(&report(&replies.values()));
        let refusal = a.refusal(false).expect("refused");
        assert!(
            refusal.contains("replica") && refusal.contains("10.0.0.1:6380"),
            "{refusal}"
        );

        let mut replies = master_replies();
        replies.info[4] = "# Cluster\r\ncluster_enabled:1\r\n".into();
        let refusal = assess(&report(&replies.values()))
            .refusal(false)
            .expect("refused");
        assert!(refusal.contains("Cluster mode"), "{refusal}");

        let mut replies = master_replies();
        replies.info[0] = "# Server\r\nredis_version:5.0.7\r\nrun_id:x\r\n".into();
        let refusal = assess(&report(&replies.values()))
            .refusal(false)
            .expect("refused");
        assert!(refusal.contains("5.0.7"), "{refusal}");
        assert_eq!(parse_version("6.0"), Some((6, 0, 0)));
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn valkey_is_named_with_its_own_version_and_redis_by_default() {
        let r = report(&master_replies().values());
        assert_eq!(server(&r), (Some("redis".into()), Some("7.0.15".into())));
        let mut replies = master_replies();
        replies.info[0] =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n\
             run_id:abc\r\nuptime_in_seconds:3\r\n"
                .into();
        let r = report(&replies.values());
        assert_eq!(server(&r), (Some("valkey".into()), Some("8.1.8".into())));
        assert_eq!(
            assess(&r),
            Assessment::default(),
            "7.2.4-compatible is new enough"
        );
        let mut replies = master_replies();
        replies.info[0] = "# Server\r\nredis_version:6.2.0\r\nserver_name:keydb\r\n".into();
        assert_eq!(
            server(&report(&replies.values())),
            (Some("keydb".into()), Some("6.2.0".into()))
        );
    }

    #[test]
    fn an_active_replica_is_refused_saying_why() {
        let mut replies = master_replies();
        replies.info[1] = "# Replication\r\nrole:active-replica\r\nconnected_slaves:1\r\n".into();
        let refusal = assess(&report(&replies.values()))
            .refusal(false)
            .expect("refused");
        assert!(
            refusal.contains("active-replica") && refusal.contains("SET NX"),
            "{refusal}"
        );
    }

    #[test]
    fn replicas_and_evicting_policies_warn_and_strict_refuses() {
        let mut replies = master_replies();
        replies.info[1] = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n".into();
        replies.set("maxmemory", "1000000");
        replies.set("maxmemory-policy", "allkeys-lru");
        let a = assess(&report(&replies.values()));
        assert!(a.errors.is_empty());
        assert_eq!(a.warnings.len(), 2, "{a:?}");
        assert!(a.warnings[0].contains("2 connected replica"));
        assert!(a.warnings[1].contains("fence counters"));
        assert_eq!(a.refusal(false), None);
        let strict = a.refusal(true).expect("strict refuses");
        assert!(strict.contains("strict_servers"), "{strict}");

        replies.set("maxmemory-policy", "volatile-ttl");
        let w = assess(&report(&replies.values())).warnings;
        assert!(
            w[1].contains("volatile-ttl") && !w[1].contains("fence"),
            "{w:?}"
        );
        // A policy without a limit never evicts.
        replies.set("maxmemory", "0");
        assert_eq!(assess(&report(&replies.values())).warnings.len(), 1);
    }

    #[test]
    fn denied_commands_degrade() {
        let noperm = || {
            let value = redis::parse_redis_value(
                b"-NOPERM this user has no permissions to run the 'config|get' command\r\n",
            )
            .expect("an error reply parses");
            assert!(matches!(value, Value::ServerError(_)), "{value:?}");
            value
        };
        let mut replies = master_replies();
        replies.denied = Some(noperm());
        let r = report(&replies.values());
        assert!(r.config_error.is_some());
        // INFO persistence and memory still tell AOF and the eviction policy.
        assert_eq!(r.aof_enabled, Some(false));
        assert_eq!(
            persistence(&r).as_deref(),
            Some("no AOF, RDB unknown (CONFIG GET denied)")
        );
        assert_eq!(assess(&r), Assessment::default());

        let all: Vec<Value> = (0..commands().len()).map(|_| noperm()).collect();
        let r = report(&all);
        let a = assess(&r);
        assert!(a.errors.is_empty());
        assert!(a.warnings[0].contains("INFO failed"), "{a:?}");
        assert!(a.refusal(true).is_some());
        assert_eq!(
            persistence(&r).as_deref(),
            Some("RDB unknown (CONFIG GET denied)")
        );
    }

    #[test]
    fn aof_with_fsync_and_save_points() {
        let mut replies = master_replies();
        replies.set("appendonly", "yes");
        replies.set("appendfsync", "always");
        replies.set("save", "3600 1 300 100");
        assert_eq!(
            persistence(&report(&replies.values())).as_deref(),
            Some("AOF (appendfsync always), RDB (save 3600 1 300 100)")
        );
    }
}
