//! A node that is a Sentinel-managed master: `redis+sentinel://` and `rediss+sentinel://` URLs,
//! and how a worker finds the current master.
//!
//! Such a node is still one logical node: one worker, one vote, the same per-node timeout. At each
//! connect the worker asks every sentinel at once `SENTINEL get-master-addr-by-name NAME` and
//! `SENTINEL MASTER NAME`, on plain connections bounded by the client's connect and I/O timeouts
//! (redis-rs's own Sentinel client sets none), takes the answers from the sentinel that answered
//! last time on, connects to the address it gets and checks with `ROLE` that the server says it is
//! a master, as the Sentinel client guidelines ask: a master that was just demoted may still be
//! reachable. A sentinel whose master cannot be reached or is not a master (one that has not
//! switched yet) is passed over for the next. A connection error, a `READONLY` reply or a `ROLE`
//! other than master drops the connection, and the next connect resolves the master again (the
//! worker's usual reconnect with backoff). While connected, the node's watch re-asks the sentinels
//! every second (see [`watch`]). The release-notification subscriber of the node resolves the
//! master the same way and follows the same watch: while waiters listen, it drops a connection to a
//! master the sentinels no longer name within `READ_SLICE` (20 ms) of the watch hearing of it (an
//! idle subscriber, at its next subscription), so its waiters hear the releases published on the
//! new master (`tests/sentinel.rs`, `a_waiters_release_subscription_follows_the_master_switch`).
//!
//! # A change of master is a restart
//!
//! Replication is asynchronous, so the replica Sentinel promotes may not have every lock key its
//! old master acknowledged: for Redlock, a failover that loses a key is a quick restart without
//! persistence. The standalone defence against that,
//! [`restart_grace`](crate::Builder::restart_grace), keeps a node whose process is younger than the
//! grace out of acquire quorums; but a promoted replica is old by `uptime_in_seconds`, so the grace
//! would not cover it. Hence, with `restart_grace` set:
//!
//! - when the worker reaches a master whose address, `run_id` or replication ID differs from the
//!   previous master of this logical node, the node is in its grace for `restart_grace` counted
//!   from that moment (a failover seen: `NodeStatus::failovers` counts the changes of address);
//! - at any connect, the master's age is taken as the smaller of its uptime and what the
//!   sentinels' records bound it by ([`Tenure`]): the connect asks every sentinel at once, and a
//!   sentinel's `role-reported-time` (`SENTINEL MASTER`, reset when a sentinel switches masters
//!   or restarts) counts only when its record describes the very server reached (its `ip:port`,
//!   and its `runid` when not empty), with no failover under way, from the newest `config-epoch`
//!   heard. Anything else (the leader sentinel of a failover names the promoted replica before
//!   its record describes it; an ACL denies `SENTINEL MASTER`) counts as age zero. So a client
//!   that starts, or reconnects, during or after a failover it did not witness still counts the
//!   grace from no later than the switch (`tests/sentinel.rs`,
//!   `clients_started_during_a_failover_let_no_second_holder_in`).
//!
//! The argument is the standalone one. Say a holder got a lock on a quorum that includes this
//! group, and the group fails over to a replica that never received the key. Until the holder's
//! TTL has run out, the group's "yes" to a second client must not count. Every client has this
//! group in its grace from no later than the sentinels' switch to the new master (the second
//! rule). If the old master stopped accepting writes by then (it died), every key the
//! failover lost belongs to a lock acquired before the switch, and with a grace of at least the
//! largest TTL it has expired by the time the group's votes count again. **If the old master
//! still takes writes after the switch** (`SENTINEL FAILOVER` of a live master: Sentinel promotes
//! the replica first and demotes the old master some seconds later, when its `INFO` shows it
//! still a master; or a partition that keeps it from the sentinels), a client still connected
//! to it can take a lock there after the switch, and the grace must also cover that window. The
//! watch bounds it by `D` (below: 1 s plus two rounds of questions) for a
//! client that reaches a sentinel that has switched; `min-replicas-to-write 1` on the masters
//! bounds it by `min-replicas-max-lag` for every client (the old master refuses writes once its
//! replica, now the master, is gone). So the grace needs the largest TTL plus the bound that
//! applies. That holds for N = 1 on a group as well. What it does not do: it cannot make a
//! group safer than its own failover: Sentinel may promote a replica while the old master still
//! accepts writes from clients on its side of a partition that reach no sentinel that has
//! switched (two masters; with N = 1 two holders; with N ≥ 3 the group votes on both sides, once
//! per master; `min-replicas-to-write` is the defence there), and a key lost without a change of
//! master or of the master's identity (an eviction, a `FLUSHALL`) is not seen. See
//! docs/guarantees.md, "Sentinel-managed nodes".
//!
//! The clock guard's sample belongs to a server, not to a logical node: it is reset when the
//! master's address changes, so that the new master's different clock does not pass for a jump.
//!
//! This module owns the URL and the resolution of the master at a connect; [`answer`] reads
//! what a sentinel says, [`watch`] follows the sentinels while connected.
//!
//! May use: `urls`, `sync`.

mod answer;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::{RedisConnectionInfo, Value};

use crate::topology::urls::{self, Reach};

pub(crate) use answer::Tenure;
use answer::{Answer, Reply, text};
pub(crate) use watch::{Verdict, WATCH_INTERVAL, Watch};

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
    /// How the master and the sentinels are reached (TLS, certificates, a test's address map:
    /// every connection to a master goes through [`open_master`](Sentinel::open_master), the
    /// worker's, its `WAIT` lane's and the release subscriber's alike).
    pub(crate) reach: Reach,
    /// Credentials (and database) for the master.
    master_redis: RedisConnectionInfo,
    /// Credentials for the sentinels.
    sentinel_redis: RedisConnectionInfo,
    /// The sentinel to ask first: the one that answered last.
    preferred: AtomicUsize,
}

/// The master a sentinel named, and what the sentinels said of how long it has been the master.
pub(crate) struct Resolved {
    pub conn: redis::Connection,
    /// `host:port`.
    pub master: String,
    /// What bounds its time as the master.
    pub tenure: Tenure,
    /// The answering sentinel's `config-epoch`, if it said.
    pub epoch: Option<u64>,
}

/// `host:port` (or `[v6]:port`) of an extra sentinel; quoted in the error if `quotable`.
fn parse_seed(seed: &str, quotable: bool) -> Result<(String, u16), String> {
    urls::host_port(
        seed,
        "sentinel",
        "use sentinel_user= and sentinel_password=",
        quotable,
    )
}

impl Sentinel {
    /// Parses a `redis[s]+sentinel://` URL; the error says what is wrong, never with the
    /// password.
    pub(crate) fn parse(url: &str) -> Result<Sentinel, String> {
        let urls::Head {
            url: parsed,
            tls,
            host,
            port,
        } = urls::head(url, "sentinel", DEFAULT_SENTINEL_PORT, "no sentinel host")?;
        let mut segments = parsed
            .path()
            .trim_start_matches('/')
            .split('/')
            .filter(|s| !s.is_empty());
        let name = segments
            .next()
            .map(|name| urls::decode(name, "the master name"))
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
            urls::with_credentials(&parsed, RedisConnectionInfo::default().set_db(db))?;
        let mut sentinels = vec![(host, port)];
        let mut sentinel_redis = RedisConnectionInfo::default();
        let query = urls::query(&parsed)?;
        for (name, value) in query.pairs {
            match name.as_str() {
                "sentinel" => {
                    let seed = parse_seed(&value, query.quotable)?;
                    if !sentinels.contains(&seed) {
                        sentinels.push(seed);
                    }
                }
                "sentinel_user" => sentinel_redis = sentinel_redis.set_username(value),
                "sentinel_password" => sentinel_redis = sentinel_redis.set_password(value),
                other => {
                    return Err(urls::unknown(
                        other,
                        query.quotable,
                        "sentinel, sentinel_user, sentinel_password",
                    ));
                }
            }
        }
        Ok(Sentinel {
            name,
            sentinels,
            reach: Reach::new(tls),
            master_redis,
            sentinel_redis,
            preferred: AtomicUsize::new(0),
        })
    }

    /// The node's name in reports, logs and `NodeStatus::address`: `sentinel:NAME@seed:port`
    /// (the seed tells apart groups that use the same master name).
    pub(crate) fn id(&self) -> String {
        let (host, port) = &self.sentinels[0];
        format!("sentinel:{}@{}", self.name, urls::address(host, *port))
    }

    /// What a sentinel is asked about the master: its address (`get-master-addr-by-name`) and its
    /// state (`SENTINEL MASTER`: how long it has been the master, the config epoch).
    fn question(&self) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.name)
            .cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.name);
        pipe
    }

    /// Resolves the master through the sentinels, connects to it and checks that it says it is
    /// a master. Every sentinel is asked at once ([`survey`](Sentinel::survey)); the answers in
    /// are tried from the one that answered last time on. A sentinel whose master cannot be
    /// reached, or is not a master (a sentinel that has not switched yet), is passed over for
    /// the next. What the answers say of the reached master's time as the master comes back as
    /// its [`Tenure`].
    pub(crate) fn connect(
        self: &Arc<Self>,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<Resolved> {
        let n = self.sentinels.len();
        let replies = self.survey(connect_timeout, io_timeout);
        let answers: Vec<Answer> = replies
            .iter()
            .filter_map(|r| r.as_ref()?.as_ref().ok()?.0.clone())
            .collect();
        let records = replies.iter().any(|r| matches!(r, Some(Ok((_, true)))));
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut problems = Vec::new();
        let mut master_error = None;
        let mut tried: Vec<(String, u16)> = Vec::new();
        for index in (0..n).map(|k| (first + k) % n) {
            let (host, port) = &self.sentinels[index];
            let Some(reply) = &replies[index] else {
                problems.push(format!("sentinel {host}:{port}: no answer in time"));
                continue;
            };
            match reply {
                Ok((Some(answer), _)) => {
                    if tried.contains(&answer.at) {
                        continue;
                    }
                    let (at_host, at_port) = &answer.at;
                    let master = urls::address(at_host, *at_port);
                    match self.open_master(at_host, *at_port, &master, connect_timeout, io_timeout)
                    {
                        Ok(conn) => {
                            self.preferred.store(index, Ordering::Relaxed);
                            return Ok(Resolved {
                                conn,
                                master,
                                tenure: Tenure::of(&answers, &answer.at, records),
                                epoch: answer.epoch,
                            });
                        }
                        Err(e) => {
                            problems.push(format!("sentinel {host}:{port} named {master}: {e}"));
                            master_error.get_or_insert(e);
                        }
                    }
                    tried.push(answer.at.clone());
                }
                Ok((None, _)) => problems.push(format!(
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

    /// Asks every sentinel at once, each on a thread of its own with a connection of its own
    /// (bounded by the connect and I/O timeouts), and collects what comes back: per sentinel, in
    /// the URL's order, its reply, or `None` for one that had not answered in time. Once a
    /// sentinel names a master, the others get as long again (at least [`STRAGGLERS`]) before
    /// they count as not answering, so that a hung or unreachable sentinel does not hold up
    /// every connect; what it would have said, the node's watch hears.
    fn survey(
        self: &Arc<Self>,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> Vec<Option<Reply>> {
        let n = self.sentinels.len();
        let (tx, rx) = crossbeam_channel::bounded(n);
        let started = Instant::now();
        let mut replies: Vec<Option<Reply>> = (0..n).map(|_| None).collect();
        let mut waiting = 0;
        for (index, reply) in replies.iter_mut().enumerate() {
            let sentinel = Arc::clone(self);
            let tx = tx.clone();
            let asked = std::thread::Builder::new()
                .name("redlock-sentinel-ask".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let reply = (sentinel.reach)
                        .open(
                            &sentinel.sentinels[index].0,
                            sentinel.sentinels[index].1,
                            &sentinel.sentinel_redis,
                            connect_timeout,
                            io_timeout,
                        )
                        .and_then(|mut conn| sentinel.ask(&mut conn));
                    let _ = tx.send((index, reply));
                });
            match asked {
                Ok(_) => waiting += 1,
                Err(e) => *reply = Some(Err(e.into())),
            }
        }
        drop(tx);
        let mut deadline = started + connect_timeout + io_timeout * 2;
        while waiting > 0 {
            let Ok((index, reply)) = rx.recv_deadline(deadline) else {
                break;
            };
            waiting -= 1;
            if matches!(reply, Ok((Some(_), _))) {
                let took = started.elapsed();
                deadline = deadline.min(started + took * 2 + STRAGGLERS);
            }
            replies[index] = Some(reply);
        }
        replies
    }

    /// Asks one sentinel, on `conn`: its answer (none when it knows no such master) and whether
    /// it answered `SENTINEL MASTER`.
    fn ask(&self, conn: &mut redis::Connection) -> Reply {
        conn.send_packed_command(&self.question().get_packed_pipeline())?;
        self.read_answer(conn)
    }

    /// Reads the replies to [`question`](Sentinel::question) sent on `conn`.
    fn read_answer(&self, conn: &mut redis::Connection) -> Reply {
        let addr = conn.recv_response()?;
        let master = conn.recv_response()?;
        if let Value::ServerError(e) = &addr {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "SENTINEL get-master-addr-by-name refused",
                e.to_string(),
            )));
        }
        let records = !matches!(master, Value::ServerError(_) | Value::Nil);
        Ok((Answer::from_replies(addr, &master), records))
    }

    /// Connects to the master a sentinel named (`host:port`, through a test's address map) and
    /// checks with `ROLE` that it says it is one.
    fn open_master(
        &self,
        host: &str,
        port: u16,
        master: &str,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let (host, port) = self.reach.address_map.route(host, port);
        let mut conn =
            (self.reach).open(host, port, &self.master_redis, connect_timeout, io_timeout)?;
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

/// How long a connect waits at least, once one sentinel named a master, for the others' answers
/// (see [`Sentinel::survey`]).
const STRAGGLERS: Duration = Duration::from_millis(5);

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
        assert!(!s.reach.is_tls());
        let s = Sentinel::parse(
            "rediss+sentinel://h/m/2?sentinel_user=su&sentinel_password=sp#insecure",
        )
        .unwrap();
        assert_eq!(s.reach.tls, Some(true));
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
    fn decodes_the_sentinel_credentials_as_the_masters() {
        let s = Sentinel::parse(
            "redis+sentinel://u+1:p+1%20@h/m?sentinel_user=u+2&sentinel_password=p+2%20%2B",
        )
        .unwrap();
        assert_eq!(s.master_redis.username(), Some("u+1"));
        assert_eq!(s.master_redis.password(), Some("p+1 "));
        assert_eq!(s.sentinel_redis.username(), Some("u+2"));
        assert_eq!(s.sentinel_redis.password(), Some("p+2 +"));
        for url in [
            "redis+sentinel://:%ff@h/m",
            "redis+sentinel://h/m?sentinel_password=S3CR%ff",
            "redis+sentinel://h/m?sentinel_user=S3CR%ff",
        ] {
            let err = Sentinel::parse(url).err().expect(url);
            assert!(
                err.contains("not valid UTF-8") && !err.contains("S3CR"),
                "{url}: {err}"
            );
        }
    }
}
