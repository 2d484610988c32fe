//! A node that is a Sentinel-managed master: `redis+sentinel://` and `rediss+sentinel://` URLs,
//! and how a worker finds the current master.
//!
//! Such a node is still one logical node: one worker, one vote, the same per-node timeout. At each
//! connect the worker asks the sentinels in turn `SENTINEL get-master-addr-by-name NAME` (the one
//! that answered last time first), each query on a plain connection bounded by the client's
//! connect and I/O timeouts (redis-rs's own Sentinel client sets none), connects to the address it
//! gets and checks with `ROLE` that the server says it is a master, as the Sentinel client
//! guidelines ask: a master that was just demoted may still be reachable. A sentinel whose master
//! cannot be reached or is not a master (one that has not switched yet) is passed over for the
//! next. A connection error, a `READONLY` reply or a `ROLE` other than master drops the
//! connection, and the next connect resolves the master again (the worker's usual reconnect with
//! backoff). The release-notification subscriber of the node resolves the master the same way.
//!
//! # A change of master is a restart
//!
//! Replication is asynchronous, so the replica Sentinel promotes may not have every lock key its
//! old master acknowledged: for Redlock, a failover that loses a key is a quick restart without
//! persistence. The standalone defence against that, [`restart_grace`](crate::Builder::restart_grace),
//! keeps a node whose process is younger than the grace out of acquire quorums; but a promoted
//! replica is old by `uptime_in_seconds`, so the grace would not cover it. Hence, with
//! `restart_grace` set:
//!
//! - when the worker reaches a master whose address, `run_id` or replication ID differs from the
//!   previous master of this logical node, the node is in its grace for `restart_grace` counted
//!   from that moment (a failover seen: `NodeStatus::failovers` counts the changes of address);
//! - at any connect, the master's age is taken as the smaller of its uptime and the time since
//!   the answering sentinel switched to it (`role-reported-time` of `SENTINEL MASTER`, reset
//!   when a sentinel switches masters or restarts), so that a client that starts, or reconnects,
//!   after a failover it did not witness still counts the grace from no later than the switch.
//!
//! The argument is the standalone one. Say a holder got a lock on a quorum that includes this
//! group, and the group fails over to a replica that never received the key. Until the holder's
//! TTL has run out, the group's "yes" to a second client must not count. Every client has this
//! group in its grace from no later than the sentinels' switch to the new master (the second
//! rule; the first alone for a client that saw the change, when the sentinels deny `SENTINEL
//! MASTER`). If the old master stopped accepting writes by then (it died), every key the
//! failover lost belongs to a lock acquired before the switch, and with a grace of at least the
//! largest TTL it has expired by the time the group's votes count again. **If the old master
//! still takes writes after the switch** (`SENTINEL FAILOVER` of a live master: Sentinel promotes
//! the replica first and demotes the old master at its next `INFO` refresh, seconds later; or a
//! partition), a client still connected to it can take a lock there after the switch, and the
//! grace must also cover that window: `min-replicas-to-write 1` on the masters bounds it by
//! `min-replicas-max-lag`, so the grace needs the largest TTL plus that lag. A worker does not
//! re-ask the sentinels while its connection works; doing so periodically would narrow the window
//! (not done yet). That holds for N = 1 on a group as well. What it does not do:
//! it cannot make a group safer than its own failover: Sentinel may promote a replica while the
//! old master still accepts writes from clients on its side of a partition (two masters; with
//! N = 1 two holders; with N ≥ 3 the group votes on both sides, once per master), and a key
//! lost without a change of master or of the master's identity (an eviction, a `FLUSHALL`) is
//! not seen. See docs/guarantees.md, "Sentinel-managed nodes".
//!
//! The clock guard's sample belongs to a server, not to a logical node: it is reset when the
//! master's address changes, so that the new master's different clock does not pass for a jump.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, TlsCertificates, Value};

use crate::cluster::{Cluster, Link};
use crate::node_url;

/// Default Sentinel port when a URL gives none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// What to expect, for error messages.
pub(crate) const EXPECTED: &str = "expected redis[s]+sentinel://[user:password@]host:port/MASTERNAME\
     [?sentinel=host:port&sentinel=host:port&sentinel_user=…&sentinel_password=…]";

/// Whether `url` is a Sentinel URL (by its scheme).
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("redis+sentinel://") || lower.starts_with("rediss+sentinel://")
}

/// One Sentinel-managed master, as its URL describes it.
pub(crate) struct Sentinel {
    /// The master's name, as the sentinels know it.
    pub name: String,
    /// The sentinels, seed first.
    sentinels: Vec<(String, u16)>,
    /// TLS to the master and the sentinels: `Some(insecure)`.
    tls: Option<bool>,
    certificates: Option<TlsCertificates>,
    /// Credentials (and database) for the master.
    master_redis: RedisConnectionInfo,
    /// Credentials for the sentinels.
    sentinel_redis: RedisConnectionInfo,
    /// The sentinel to ask first: the one that answered last.
    preferred: AtomicUsize,
}

/// A sentinel's answer: the master's host and port, and how long it has known it as the master.
type Answer = ((String, u16), Option<Duration>);

/// The master a sentinel named, and how long the sentinel has known it as the master.
pub(crate) struct Resolved {
    pub conn: redis::Connection,
    /// `host:port`.
    pub master: String,
    /// Time since the answering sentinel switched to this master (or started monitoring it), if
    /// it said.
    pub master_for: Option<Duration>,
}

/// `host:port` (or `[v6]:port`) of an extra sentinel.
fn parse_seed(seed: &str) -> Result<(String, u16), String> {
    node_url::host_port(
        seed,
        "sentinel",
        "use sentinel_user= and sentinel_password=",
    )
}

impl Sentinel {
    /// Parses a `redis[s]+sentinel://` URL; the error says what is wrong, never with the
    /// password.
    pub(crate) fn parse(url: &str) -> Result<Sentinel, String> {
        let node_url::Head {
            url: parsed,
            tls,
            host,
            port,
        } = node_url::head(url, "sentinel", DEFAULT_SENTINEL_PORT, "no sentinel host")?;
        let mut segments = parsed
            .path()
            .trim_start_matches('/')
            .split('/')
            .filter(|s| !s.is_empty());
        let name = segments
            .next()
            .map(node_url::decode)
            .transpose()?
            .filter(|n| !n.is_empty())
            .ok_or("no master name: put it in the path, /MASTERNAME")?;
        let db: i64 =
            match segments.next() {
                None => 0,
                Some(db) => db.parse().ok().filter(|db| *db >= 0).ok_or_else(|| {
                    format!("{db:?} after the master name is not a database number")
                })?,
            };
        if segments.next().is_some() {
            return Err("the path has more than /MASTERNAME[/db]".into());
        }
        let master_redis =
            node_url::with_credentials(&parsed, RedisConnectionInfo::default().set_db(db))?;
        let mut sentinels = vec![(host, port)];
        let mut sentinel_redis = RedisConnectionInfo::default();
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "sentinel" => {
                    let seed = parse_seed(&value)?;
                    if !sentinels.contains(&seed) {
                        sentinels.push(seed);
                    }
                }
                "sentinel_user" => sentinel_redis = sentinel_redis.set_username(value.as_ref()),
                "sentinel_password" => sentinel_redis = sentinel_redis.set_password(value.as_ref()),
                other => {
                    return Err(format!(
                        "unknown query parameter {other:?} (known: sentinel, sentinel_user, \
                         sentinel_password)"
                    ));
                }
            }
        }
        Ok(Sentinel {
            name,
            sentinels,
            tls,
            certificates: None,
            master_redis,
            sentinel_redis,
            preferred: AtomicUsize::new(0),
        })
    }

    /// The node's name in reports, logs and `NodeStatus::address`: `sentinel:NAME@seed:port`
    /// (the seed tells apart groups that use the same master name).
    pub(crate) fn id(&self) -> String {
        let (host, port) = &self.sentinels[0];
        format!("sentinel:{}@{}", self.name, node_url::address(host, *port))
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub(crate) fn set_certificates(&mut self, certificates: TlsCertificates) {
        self.certificates = Some(certificates);
    }

    fn client(
        &self,
        host: &str,
        port: u16,
        redis: &RedisConnectionInfo,
    ) -> redis::RedisResult<redis::Client> {
        let addr = match self.tls {
            None => ConnectionAddr::Tcp(host.to_owned(), port),
            Some(insecure) => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure,
                tls_params: None,
            },
        };
        let info = addr
            .into_connection_info()?
            .set_redis_settings(redis.clone());
        match &self.certificates {
            Some(certificates) if self.tls.is_some() => {
                redis::Client::build_with_tls(info, certificates.clone())
            }
            _ => redis::Client::open(info),
        }
    }

    /// A connection with the client's timeouts on connect, reads and writes.
    fn open(
        &self,
        host: &str,
        port: u16,
        redis: &RedisConnectionInfo,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let conn = self
            .client(host, port, redis)?
            .get_connection_with_timeout(connect_timeout)?;
        conn.set_read_timeout(Some(io_timeout))?;
        conn.set_write_timeout(Some(io_timeout))?;
        Ok(conn)
    }

    /// Asks one sentinel for the master's address and how long it has known it as the master.
    fn ask(
        &self,
        index: usize,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<Option<Answer>> {
        let (host, port) = &self.sentinels[index];
        let mut conn = self.open(
            host,
            *port,
            &self.sentinel_redis,
            connect_timeout,
            io_timeout,
        )?;
        let (addr, master): (Option<(String, u16)>, Value) = redis::pipe()
            .cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.name)
            .cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.name)
            .ignore_errors()
            .query(&mut conn)
            .or_else(|e| {
                if e.is_io_error() || e.is_timeout() {
                    return Err(e);
                }
                // A sentinel (or ACL) that refuses SENTINEL MASTER: the address alone.
                let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.name)
                    .query(&mut conn)?;
                Ok::<_, redis::RedisError>((addr, Value::Nil))
            })?;
        Ok(addr.map(|addr| (addr, role_reported_time(&master))))
    }

    /// Resolves the master through the sentinels (the one that answered last first), connects
    /// to it and checks that it says it is a master. A sentinel whose master cannot be reached,
    /// or is not a master (a sentinel that has not switched yet), is passed over for the next.
    pub(crate) fn connect(
        &self,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<Resolved> {
        let n = self.sentinels.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut problems = Vec::new();
        let mut master_error = None;
        let mut tried: Vec<(String, u16)> = Vec::new();
        for index in (0..n).map(|k| (first + k) % n) {
            let (host, port) = &self.sentinels[index];
            match self.ask(index, connect_timeout, io_timeout) {
                Ok(Some(((master_host, master_port), master_for))) => {
                    let at = (master_host, master_port);
                    if tried.contains(&at) {
                        continue;
                    }
                    let master = node_url::address(&at.0, at.1);
                    match self.open_master(&at.0, at.1, &master, connect_timeout, io_timeout) {
                        Ok(conn) => {
                            self.preferred.store(index, Ordering::Relaxed);
                            return Ok(Resolved {
                                conn,
                                master,
                                master_for,
                            });
                        }
                        Err(e) => {
                            problems.push(format!("sentinel {host}:{port} named {master}: {e}"));
                            master_error.get_or_insert(e);
                        }
                    }
                    tried.push(at);
                }
                Ok(None) => problems.push(format!(
                    "sentinel {host}:{port} knows no master named {:?}",
                    self.name
                )),
                Err(e) => problems.push(format!("sentinel {host}:{port}: {e}")),
            }
        }
        match master_error {
            // One master, one problem: its own error, which says the most (TLS, auth).
            Some(e) if problems.len() == 1 => Err(e),
            _ => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no sentinel gave a reachable master",
                problems.join("; "),
            ))),
        }
    }

    /// Connects to the master a sentinel named and checks with `ROLE` that it says it is one.
    fn open_master(
        &self,
        host: &str,
        port: u16,
        master: &str,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let mut conn = self.open(host, port, &self.master_redis, connect_timeout, io_timeout)?;
        let role: Value = match redis::cmd("ROLE").query(&mut conn) {
            Ok(role) => role,
            // An ACL that denies ROLE: the server probe's INFO replication still refuses a
            // replica (role:slave).
            Err(e)
                if e.code().is_some_and(|c| c == "NOPERM")
                    || e.to_string().contains("unknown command") =>
            {
                return Ok(conn);
            }
            Err(e) => return Err(e),
        };
        let role = match &role {
            Value::Array(parts) => parts.first().and_then(text),
            _ => None,
        };
        if role.as_deref() != Some("master") {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the sentinels' master does not say it is one",
                format!(
                    "{master} answers ROLE {} (a failover in progress?); resolving again",
                    role.as_deref().unwrap_or("?")
                ),
            )));
        }
        Ok(conn)
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `role-reported-time` (ms) from a `SENTINEL MASTER` reply (a flat array of field, value, or
/// a map under RESP3).
fn role_reported_time(reply: &Value) -> Option<Duration> {
    let find = |k: &Value, v: &Value| {
        (text(k).as_deref() == Some("role-reported-time"))
            .then(|| text(v)?.parse::<u64>().ok())
            .flatten()
    };
    match reply {
        Value::Array(items) => items.chunks(2).find_map(|pair| match pair {
            [k, v] => find(k, v),
            _ => None,
        }),
        Value::Map(pairs) => pairs.iter().find_map(|(k, v)| find(k, v)),
        _ => None,
    }
    .map(Duration::from_millis)
}

/// How a worker reaches its node. (Made once per node at build time: its size is no concern.)
#[derive(Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Target {
    Standalone(redis::Client),
    Sentinel(std::sync::Arc<Sentinel>),
    Cluster(std::sync::Arc<Cluster>),
}

/// A new connection, and for a Sentinel node, which master it reached.
pub(crate) struct Connected {
    pub conn: redis::Connection,
    pub master: Option<String>,
    pub master_for: Option<Duration>,
}

/// A worker's new link to its node, and which master(s) it reached: a Sentinel node's master,
/// or a cluster's masters (`host:port,…`).
pub(crate) struct Linked {
    pub link: Link,
    pub master: Option<String>,
    pub master_for: Option<Duration>,
}

impl Target {
    /// The node's name in reports, logs and `NodeStatus::address`.
    pub(crate) fn address(&self) -> String {
        match self {
            Target::Standalone(client) => standalone_address(client.get_connection_info()),
            Target::Sentinel(s) => s.id(),
            Target::Cluster(c) => c.id(),
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        match self {
            Target::Standalone(client) => matches!(
                client.get_connection_info().addr(),
                ConnectionAddr::TcpTls { .. }
            ),
            Target::Sentinel(s) => s.is_tls(),
            Target::Cluster(c) => c.is_tls(),
        }
    }

    pub(crate) fn is_sentinel(&self) -> bool {
        matches!(self, Target::Sentinel(_))
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// The worker's link: [`connect`](Target::connect)'s connection, or for a cluster, one
    /// connection per master and the slot map (see `cluster.rs`).
    pub(crate) fn link(
        &self,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<Linked> {
        if let Target::Cluster(c) = self {
            let link = c.link(connect_timeout, io_timeout)?;
            return Ok(Linked {
                master: Some(link.masters()),
                link: Link::Cluster(Box::new(link)),
                master_for: None,
            });
        }
        let Connected {
            conn,
            master,
            master_for,
        } = self.connect(connect_timeout, io_timeout)?;
        Ok(Linked {
            link: Link::Plain(conn),
            master,
            master_for,
        })
    }

    /// Connects (for a Sentinel node: to the current master; for a cluster: to any of its
    /// nodes, which is what the release subscriber needs), with the read and write timeouts
    /// set to `io_timeout`.
    pub(crate) fn connect(
        &self,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<Connected> {
        match self {
            Target::Standalone(client) => {
                let conn = client.get_connection_with_timeout(connect_timeout)?;
                conn.set_read_timeout(Some(io_timeout))?;
                conn.set_write_timeout(Some(io_timeout))?;
                Ok(Connected {
                    conn,
                    master: None,
                    master_for: None,
                })
            }
            Target::Sentinel(s) => {
                let r = s.connect(connect_timeout, io_timeout)?;
                Ok(Connected {
                    conn: r.conn,
                    master: Some(r.master),
                    master_for: r.master_for,
                })
            }
            Target::Cluster(c) => Ok(Connected {
                conn: c.connect_any(connect_timeout, io_timeout)?,
                master: None,
                master_for: None,
            }),
        }
    }
}

/// The address a user sees for a standalone node: `host:port`, plus `/db` when a database is
/// selected.
fn standalone_address(info: &redis::ConnectionInfo) -> String {
    let db = info.redis_settings().db();
    if db == 0 {
        info.addr().to_string()
    } else {
        format!("{}/{db}", info.addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms() {
        let s = Sentinel::parse(
            "redis+sentinel://u:p%40ss@10.0.0.1:26380/mymaster?sentinel=10.0.0.2:26379&sentinel=[::1]:5",
        )
        .unwrap();
        assert_eq!(s.name, "mymaster");
        assert_eq!(
            s.sentinels,
            vec![
                ("10.0.0.1".to_owned(), 26380),
                ("10.0.0.2".to_owned(), 26379),
                ("::1".to_owned(), 5)
            ]
        );
        assert_eq!(s.master_redis.username(), Some("u"));
        assert_eq!(s.master_redis.password(), Some("p@ss"));
        assert_eq!(s.sentinel_redis.password(), None);
        assert_eq!(s.id(), "sentinel:mymaster@10.0.0.1:26380");
        assert!(!s.is_tls());
        let s = Sentinel::parse(
            "rediss+sentinel://h/m/2?sentinel_user=su&sentinel_password=sp#insecure",
        )
        .unwrap();
        assert_eq!(s.tls, Some(true));
        assert_eq!(s.sentinels, vec![("h".to_owned(), DEFAULT_SENTINEL_PORT)]);
        assert_eq!(s.master_redis.db(), 2);
        assert_eq!(s.sentinel_redis.username(), Some("su"));
        assert_eq!(s.sentinel_redis.password(), Some("sp"));
    }

    #[test]
    fn refuses_bad_forms() {
        for (url, why) in [
            ("redis+sentinel://h:1", "no master name"),
            ("redis+sentinel://h:1/", "no master name"),
            ("redis+sentinel://h:1/m?sentinel=nope", "not host:port"),
            ("redis+sentinel://h:1/m?sentinel=h:0", "not host:port"),
            ("redis+sentinel://h:1/m?seed=h:2", "unknown query parameter"),
            ("redis+sentinel://h:1/m/x", "not a database number"),
            ("redis+sentinel://h:1/m/0/1", "more than"),
            ("redis+sentinel:///m", "no sentinel host"),
            ("redis+sentinel://h:99999/m", "invalid port"),
            ("redis+sentinel://h:1/m#insecure", "fragment"),
        ] {
            let err = Sentinel::parse(url)
                .err()
                .unwrap_or_else(|| panic!("{url} parsed"));
            assert!(err.contains(why), "{url}: {err}");
        }
        // A sentinel= value with credentials is refused without echoing them.
        let err = Sentinel::parse("redis+sentinel://h:1/m?sentinel=u:s3cret@h:2")
            .err()
            .expect("refused");
        assert!(
            err.contains("not host:port") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn reads_role_reported_time() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![b("name"), b("m"), b("role-reported-time"), b("1234")]);
        assert_eq!(
            role_reported_time(&reply),
            Some(Duration::from_millis(1234))
        );
        assert_eq!(role_reported_time(&Value::Nil), None);
    }
}
