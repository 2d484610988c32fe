//! A node that is a Sentinel-managed master: `redis+sentinel://` and `rediss+sentinel://` URLs,
//! and how a worker finds the current master.
//!
//! Such a node is still one logical node: one worker, one vote, the same per-node timeout. At each
//! connect the worker asks every sentinel at once `SENTINEL get-master-addr-by-name NAME` and
//! `SENTINEL MASTER NAME`, on plain connections bounded by the client's connect and I/O timeouts
//! (redis-rs's own Sentinel client sets none), takes the answers from the sentinel that answered
//! last time on, connects to the address it gets and checks with `ROLE` that the server says it is a master, as the Sentinel client
//! guidelines ask: a master that was just demoted may still be reachable. A sentinel whose master
//! cannot be reached or is not a master (one that has not switched yet) is passed over for the
//! next. A connection error, a `READONLY` reply or a `ROLE` other than master drops the
//! connection, and the next connect resolves the master again (the worker's usual reconnect with
//! backoff). While connected, the node's watch re-asks the sentinels every second (see
//! "Watching the sentinels" below). The release-notification subscriber of the node resolves the
//! master the same way and follows the same watch: while waiters listen, it drops a connection
//! to a master the sentinels no longer name within `READ_SLICE` (20 ms) of the watch hearing of
//! it (an idle subscriber, at its next subscription), so its waiters hear the releases
//! published on the new master (`tests/sentinel.rs`,
//! `a_waiters_release_subscription_follows_the_master_switch`).
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
//! # Watching the sentinels
//!
//! A connection to a master can outlive its being the master, as above. A worker that went on
//! voting from it would make the node answer twice: from the old master to this client, from the
//! new one to every client that resolved the master since. So each Sentinel node has a watch,
//! one thread beside its worker (and its `WAIT` lane): every [`WATCH_INTERVAL`] it asks every
//! sentinel of the URL `SENTINEL get-master-addr-by-name` and `SENTINEL MASTER` (for its
//! `config-epoch`), on one connection per sentinel kept from round to round, the questions
//! written to all of them before any reply is read, each bounded by the client's connect and I/O
//! timeouts. It publishes the answer of the newest configuration: the highest `config-epoch`,
//! the epoch of the failover that made that master (Sentinel's own rule: the higher epoch
//! wins), an answer without one counting as the oldest.
//!
//! **Any sentinel, not a majority.** A client that resolves the master takes the first sentinel
//! that answers with a master that says it is one (every Sentinel client does), so as soon as one
//! sentinel names the new master some client may vote from it: waiting for a majority would let
//! the old master's votes count meanwhile. The epoch keeps a sentinel that has not switched yet
//! from pulling the worker back to the old master. Without epochs (an ACL that denies `SENTINEL
//! MASTER`) a change that any sentinel reports is followed; sentinels that disagree for good then
//! make the worker reconnect at each round, each time a failover (with `restart_grace`, the node
//! stays out of acquire quorums: the safe side).
//!
//! **The worker** compares the watch's generation with the last one it looked at before each
//! batch (one atomic load while nothing changes; an idle worker looks once per interval). When
//! the watch names another master from a newer configuration (or one it cannot order), it drops
//! its connection before the batch goes out, asks the naming sentinel first and reconnects: a
//! change of master as above (`NodeStatus::failovers`, the restart grace from that moment, the
//! clock guard's sample reset). A resolution that reaches a master of an older configuration
//! than the watch's (a sentinel that has not switched, with the new master out of our reach) is
//! refused: the node is down rather than voting from the old master.
//!
//! **The bound.** A round takes one round trip when the sentinels answer; at most the I/O
//! timeout when one hangs, plus the connect timeout for each connection it must reopen. Let `D`
//! be [`WATCH_INTERVAL`] plus two rounds (a round under way when a sentinel switches may have
//! asked it already; the next starts within an interval after it and takes one more round). No
//! batch goes to the old master later than `D` after the first sentinel we can reach named the
//! new master: with answering sentinels a little over 1 s (`tests/sentinel.rs` measures it, with
//! the old master left writable: about 0.4 s, the interval's phase being random). A watch that
//! hears no sentinel keeps the connection as it is: a sentinel outage does not take the node
//! down, and a client cut off from every sentinel that has switched is the partition case above.
//! At rest the watch costs each sentinel two commands a second per client node, and the worker
//! nothing measurable.
//!
//! The clock guard's sample belongs to a server, not to a logical node: it is reset when the
//! master's address changes, so that the new master's different clock does not pass for a jump.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, TlsCertificates, Value};

use crate::sync::relock;
use crate::topology::urls::{self, AddressMap};

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
    /// Test-only: where to connect instead of a master the sentinels name
    /// (`Builder::address_map_for_tests`). Every connection to a master goes through
    /// [`open_master`](Sentinel::open_master), the worker's, its `WAIT` lane's and the release
    /// subscriber's alike.
    address_map: AddressMap,
}

/// What one sentinel said: its answer (none when it knows no such master) and whether it
/// answered `SENTINEL MASTER`, or why it said nothing usable.
type Reply = redis::RedisResult<(Option<Answer>, bool)>;

/// A sentinel's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    /// The master's host and port (`get-master-addr-by-name`).
    at: (String, u16),
    /// The sentinel's `config-epoch` for the master: the epoch of the failover that made it the
    /// master (0 before any). A newer configuration has a higher epoch.
    epoch: Option<u64>,
    /// A lower bound on how long `at` has been the master, when the sentinel's `SENTINEL MASTER`
    /// record is evidence about that very server (see [`Bound`]).
    bound: Option<Bound>,
}

/// A sentinel's `role-reported-time` for the master, kept only when the `SENTINEL MASTER` record
/// it comes from describes the address `get-master-addr-by-name` gave in the same reply (its
/// `ip` and `port`), with no failover under way (`flags` without `failover_in_progress`, no
/// `failover-state` other than `none`). During a failover the leader sentinel names the promoted
/// replica while its record still describes the old master, whose age it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    /// Time since the sentinel saw the server report the master role.
    master_for: Duration,
    /// The record's `runid` of the master (empty for a while after a switch: then `None`).
    runid: Option<String>,
}

impl Answer {
    /// The answer in a reply to [`Sentinel::question`]: the address, and the `SENTINEL MASTER`
    /// record (an error reply there, from an ACL that denies it, gives no epoch and no bound).
    fn from_replies(addr: Value, master: &Value) -> Option<Answer> {
        let at: (String, u16) = redis::from_redis_value::<Option<(String, u16)>>(addr).ok()??;
        let field = |name: &str| master_text(master, name);
        let describes_at = field("ip").as_deref() == Some(at.0.as_str())
            && field("port").and_then(|p| p.parse::<u16>().ok()) == Some(at.1);
        let quiet = field("flags")
            .is_some_and(|f| !f.split(',').any(|f| f == "failover_in_progress"))
            && field("failover-state").is_none_or(|s| s == "none");
        let bound = match master_field(master, "role-reported-time") {
            Some(ms) if describes_at && quiet => Some(Bound {
                master_for: Duration::from_millis(ms),
                runid: field("runid").filter(|r| !r.is_empty()),
            }),
            _ => None,
        };
        Some(Answer {
            at,
            epoch: master_field(master, "config-epoch"),
            bound,
        })
    }
}

/// What the sentinels said, at a connect, of how long the master reached has been the master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tenure {
    /// The bounds of the sentinels that named that master from the newest configuration heard
    /// in the same round (the highest `config-epoch`), with the epoch.
    bounds: Vec<Bound>,
    /// That epoch.
    epoch: Option<u64>,
    /// Whether any sentinel answered `SENTINEL MASTER` at all (not so where an ACL denies it).
    pub records: bool,
}

impl Tenure {
    /// Of one round's answers, what bounds the tenure of the master at `at`: the bounds of the
    /// answers that name `at` from the highest epoch of the round. An answer of an older epoch
    /// (a sentinel that has not switched), or without one, bounds nothing.
    fn of(answers: &[Answer], at: &(String, u16), records: bool) -> Tenure {
        let top = answers.iter().map(|a| a.epoch).max().flatten();
        let bounds = answers
            .iter()
            .filter(|a| a.at == *at && top.is_some() && a.epoch == top)
            .filter_map(|a| a.bound.clone())
            .collect();
        Tenure {
            bounds,
            epoch: top,
            records,
        }
    }

    /// How long the master has been the master, bounded from below by evidence about that very
    /// server: the smallest bound whose `runid`, when the sentinel gives one, is the server's
    /// (`run_id`), when the round's epoch is no older than `newest` (the watch's, when it has
    /// heard a newer one); zero when there is no such bound, so that `restart_grace` applies.
    pub(crate) fn lower_bound(&self, run_id: Option<&str>, newest: Option<u64>) -> Duration {
        if newest.is_some() && self.epoch < newest {
            return Duration::ZERO;
        }
        self.bounds
            .iter()
            .filter(|b| match (&b.runid, run_id) {
                (Some(theirs), Some(ours)) => theirs == ours,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .map(|b| b.master_for)
            .min()
            .unwrap_or(Duration::ZERO)
    }
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
            tls,
            certificates: None,
            master_redis,
            sentinel_redis,
            preferred: AtomicUsize::new(0),
            address_map: AddressMap::default(),
        })
    }

    /// The node's name in reports, logs and `NodeStatus::address`: `sentinel:NAME@seed:port`
    /// (the seed tells apart groups that use the same master name).
    pub(crate) fn id(&self) -> String {
        let (host, port) = &self.sentinels[0];
        format!("sentinel:{}@{}", self.name, urls::address(host, *port))
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether TLS certificates go unverified (`#insecure`).
    pub(crate) fn is_insecure(&self) -> bool {
        self.tls == Some(true)
    }

    pub(crate) fn set_certificates(&mut self, certificates: TlsCertificates) {
        self.certificates = Some(certificates);
    }

    pub(crate) fn set_address_map(&mut self, map: AddressMap) {
        self.address_map = map;
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
                    let reply = sentinel
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
        let (host, port) = self.address_map.route(host, port);
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

/// How long a connect waits at least, once one sentinel named a master, for the others' answers
/// (see [`Sentinel::survey`]).
const STRAGGLERS: Duration = Duration::from_millis(5);

/// How long the watch of a Sentinel node waits between two rounds of questions to the sentinels
/// (see the module's "Watching the sentinels").
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The master the sentinels name, as the watch last heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// `host:port`.
    pub master: String,
    /// The naming sentinel's `config-epoch` for it.
    pub epoch: Option<u64>,
    /// Which sentinel (its index in the URL) named it: asked first at the next connect.
    pub sentinel: usize,
}

/// How the master the watch heard named compares with the one a connection reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The same address.
    Same,
    /// Another address, from a newer configuration (a higher `config-epoch`): a failover.
    Newer,
    /// Another address, from an older configuration: a sentinel that has not switched yet.
    Older,
    /// Another address, and no epochs to tell which configuration is newer (a sentinel whose
    /// ACL denies `SENTINEL MASTER`, or two answers of one epoch).
    Unordered,
}

impl Named {
    /// How this compares with a connection's master (`host:port`) and the epoch it was named
    /// with.
    pub(crate) fn verdict(&self, master: &str, epoch: Option<u64>) -> Verdict {
        match (self.epoch, epoch) {
            _ if self.master == master => Verdict::Same,
            (Some(named), Some(ours)) if named > ours => Verdict::Newer,
            (Some(named), Some(ours)) if named < ours => Verdict::Older,
            _ => Verdict::Unordered,
        }
    }
}

/// What a node's watch thread tells its workers (see `node.rs`, `follow_the_sentinels`).
#[derive(Default)]
pub(crate) struct Watch {
    /// Bumped each time `named` changes: a worker compares it with the last one it looked at,
    /// so that a batch costs one atomic load while nothing changes.
    generation: AtomicU64,
    named: Mutex<Option<Named>>,
}

impl Watch {
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn named(&self) -> Option<Named> {
        relock(&self.named).clone()
    }

    /// Whether the watch has heard the sentinels name another master than `reached` (a
    /// connection's master, `host:port`, and the `config-epoch` it was named with) from a newer
    /// configuration, or from one it cannot order: then that connection must not vote any
    /// more, and this returns what the watch names, with `reached`. `seen` is the generation
    /// the caller last looked at: while it is current this costs one atomic load, and news that
    /// switches nothing (or finds no connection's master to compare) brings it up to date; a
    /// switch leaves it for the reconnect to bring up to date.
    pub(crate) fn switched<'a>(
        &self,
        seen: &mut u64,
        reached: Option<&'a (String, Option<u64>)>,
    ) -> Option<(Named, &'a (String, Option<u64>))> {
        let generation = self.generation();
        if generation == *seen {
            return None;
        }
        let (Some(named), Some(reached)) = (self.named(), reached) else {
            *seen = generation;
            return None;
        };
        let (master, epoch) = reached;
        if matches!(
            named.verdict(master, *epoch),
            Verdict::Same | Verdict::Older
        ) {
            *seen = generation;
            return None;
        }
        Some((named, reached))
    }

    fn publish(&self, named: Named) {
        let mut current = relock(&self.named);
        let changed = current
            .as_ref()
            .is_none_or(|c| c.master != named.master || c.epoch != named.epoch);
        *current = Some(named);
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// Which of one round's answers (sentinel index, answer) the watch publishes: one from the
/// newest configuration (the highest `config-epoch`; an answer without one counts as oldest),
/// and among those, one that differs from what was published before, so that with no epochs
/// to go by, a change any sentinel reports is followed.
fn newest(answers: &[(usize, Answer)], previous: Option<&Named>) -> Option<Named> {
    let top = answers.iter().map(|(_, a)| a.epoch).max()?;
    let mut candidates = answers.iter().filter(|(_, a)| a.epoch == top);
    let differs = |(_, a): &&(usize, Answer)| {
        previous.is_none_or(|p| p.master != urls::address(&a.at.0, a.at.1))
    };
    let (index, answer) = candidates
        .clone()
        .find(differs)
        .or_else(|| candidates.next())?;
    Some(Named {
        master: urls::address(&answer.at.0, answer.at.1),
        epoch: answer.epoch,
        sentinel: *index,
    })
}

impl Sentinel {
    /// Asks `index` first at the next resolution: it named a newer master.
    pub(crate) fn prefer(&self, index: usize) {
        self.preferred.store(index, Ordering::Relaxed);
    }

    /// Starts the node's watch thread: every [`WATCH_INTERVAL`] it asks every sentinel which
    /// master it names and publishes the newest answer on the returned [`Watch`]. It stops when
    /// `stop`'s sender is dropped, and drops `exited` then.
    pub(crate) fn watch(
        self: &Arc<Self>,
        node: usize,
        connect_timeout: Duration,
        io_timeout: Duration,
        stop: Receiver<()>,
        exited: Sender<()>,
    ) -> std::io::Result<(Arc<Watch>, JoinHandle<()>)> {
        let watch = Arc::new(Watch::default());
        let sentinel = Arc::clone(self);
        let published = Arc::clone(&watch);
        let handle = std::thread::Builder::new()
            .name(format!("redlock-node-{node}-sentinels"))
            .stack_size(256 * 1024)
            .spawn(move || {
                let _exited = exited;
                let mut conns: Vec<Option<redis::Connection>> =
                    sentinel.sentinels.iter().map(|_| None).collect();
                while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(WATCH_INTERVAL) {
                    let answers: Vec<(usize, Answer)> = sentinel
                        .round(&mut conns, connect_timeout, io_timeout)
                        .into_iter()
                        .enumerate()
                        .filter_map(|(index, reply)| Some((index, reply.ok()?.0?)))
                        .collect();
                    if let Some(named) = newest(&answers, published.named().as_ref()) {
                        published.publish(named);
                    }
                }
            })?;
        Ok((watch, handle))
    }

    /// One round of questions: `SENTINEL get-master-addr-by-name` and `SENTINEL MASTER` to every
    /// sentinel on a connection kept from round to round (reopened when it failed), written to
    /// all of them before any reply is read, so that a round takes one round trip when they
    /// answer, and at most the I/O timeout (plus the connect timeout per connection reopened)
    /// when one hangs. Per sentinel, in the URL's order: its answer (none when it knows no such
    /// master) and whether it answered `SENTINEL MASTER`, or why it gave nothing.
    fn round(
        &self,
        conns: &mut [Option<redis::Connection>],
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> Vec<Reply> {
        let query = self.question().get_packed_pipeline();
        let mut opened: Vec<redis::RedisResult<()>> = Vec::with_capacity(conns.len());
        for (index, slot) in conns.iter_mut().enumerate() {
            if slot.is_none() {
                let (host, port) = &self.sentinels[index];
                match self.open(
                    host,
                    *port,
                    &self.sentinel_redis,
                    connect_timeout,
                    io_timeout,
                ) {
                    Ok(conn) => *slot = Some(conn),
                    Err(e) => {
                        opened.push(Err(e));
                        continue;
                    }
                }
            }
            let sent = match slot {
                Some(conn) => conn.send_packed_command(&query),
                None => Ok(()),
            };
            if sent.is_err() {
                *slot = None;
            }
            opened.push(sent);
        }
        conns
            .iter_mut()
            .zip(opened)
            .map(|(slot, opened)| {
                opened?;
                let Some(conn) = slot else {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "no connection",
                    )));
                };
                self.read_answer(conn).inspect_err(|_| {
                    // Out of step or gone: reopened at the next round.
                    *slot = None;
                })
            })
            .collect()
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

/// A field of a `SENTINEL MASTER` reply (a flat array of field, value, or a map under RESP3).
fn master_text(reply: &Value, field: &str) -> Option<String> {
    let find = |k: &Value, v: &Value| {
        (text(k).as_deref() == Some(field))
            .then(|| text(v))
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
}

/// A numeric field (`role-reported-time`, ms; `config-epoch`) of a `SENTINEL MASTER` reply.
fn master_field(reply: &Value, field: &str) -> Option<u64> {
    master_text(reply, field)?.parse().ok()
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

    fn answer(port: u16, epoch: Option<u64>) -> Answer {
        Answer {
            at: ("10.0.0.1".to_owned(), port),
            epoch,
            bound: None,
        }
    }

    /// A `SENTINEL MASTER` record: `ip`, `port`, `flags`, `role-reported-time`, `config-epoch`,
    /// `runid`, and `failover-state` when given.
    fn record(
        port: u16,
        flags: &str,
        ms: u64,
        epoch: u64,
        runid: &str,
        state: Option<&str>,
    ) -> Value {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let mut fields = vec![
            b("name"),
            b("m"),
            b("ip"),
            b("10.0.0.1"),
            b("port"),
            b(&port.to_string()),
            b("runid"),
            b(runid),
            b("flags"),
            b(flags),
            b("role-reported-time"),
            b(&ms.to_string()),
            b("config-epoch"),
            b(&epoch.to_string()),
        ];
        if let Some(state) = state {
            fields.extend([b("failover-state"), b(state)]);
        }
        Value::Array(fields)
    }

    fn addr(port: u16) -> Value {
        Value::Array(vec![
            Value::BulkString(b"10.0.0.1".to_vec()),
            Value::BulkString(port.to_string().into_bytes()),
        ])
    }

    #[test]
    fn a_record_bounds_the_age_only_of_the_server_it_describes_with_no_failover_under_way() {
        let bound = |a: Option<Answer>| a.and_then(|a| a.bound).map(|b| b.master_for);
        // The leader sentinel in a failover's last steps: it names the promoted replica (port 2)
        // while its record still describes the old master, whose age it shows.
        let reply = record(
            1,
            "master,failover_in_progress",
            14_000,
            3,
            "old",
            Some("reconf_slaves"),
        );
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        // Its own address, but a failover under way (either sign alone).
        let reply = record(2, "master,failover_in_progress", 14_000, 4, "", None);
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        let reply = record(2, "master", 14_000, 4, "", Some("wait_promotion"));
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        // A settled record of the named server.
        let reply = record(2, "master", 1_500, 4, "", Some("none"));
        assert_eq!(
            bound(Answer::from_replies(addr(2), &reply)),
            Some(Duration::from_millis(1_500))
        );
        // An ACL that denies SENTINEL MASTER: the address, no epoch, no bound.
        let denied = redis::parse_redis_value(b"-NOPERM this user has no permissions\r\n")
            .expect("an error reply");
        assert!(matches!(denied, Value::ServerError(_)), "{denied:?}");
        let answer = Answer::from_replies(addr(2), &denied).expect("the address");
        assert_eq!((answer.epoch, answer.bound), (None, None));
        assert_eq!(Answer::from_replies(Value::Nil, &reply), None);
    }

    #[test]
    fn the_tenure_is_the_smallest_bound_from_the_newest_configuration_or_zero() {
        let at = ("10.0.0.1".to_owned(), 2);
        let with = |port: u16, epoch: u64, ms: u64, runid: &str| {
            Answer::from_replies(addr(port), &record(port, "master", ms, epoch, runid, None))
                .expect("answer")
        };
        let ms = Duration::from_millis;
        // The smallest of the bounds that name the reached master from the newest epoch.
        let round = [
            with(2, 4, 9_000, ""),
            with(2, 4, 3_000, ""),
            with(1, 3, 1_000, ""),
        ];
        let tenure = Tenure::of(&round, &at, true);
        assert_eq!(tenure.lower_bound(None, None), ms(3_000));
        // A newer configuration heard elsewhere (the watch): no bound.
        assert_eq!(tenure.lower_bound(None, Some(5)), Duration::ZERO);
        assert_eq!(tenure.lower_bound(None, Some(4)), ms(3_000));
        // The reached master named only from an older configuration: no bound.
        let round = [with(2, 3, 9_000, ""), with(1, 4, 1_000, "")];
        assert_eq!(
            Tenure::of(&round, &at, true).lower_bound(None, None),
            Duration::ZERO
        );
        // A runid that is not the server's bounds nothing; an empty one does not count against.
        let round = [with(2, 4, 9_000, "abc"), with(2, 4, 7_000, "xyz")];
        let tenure = Tenure::of(&round, &at, true);
        assert_eq!(tenure.lower_bound(Some("abc"), None), ms(9_000));
        assert_eq!(tenure.lower_bound(None, None), Duration::ZERO);
        // No answers, or no epochs at all (SENTINEL MASTER denied): zero.
        assert_eq!(
            Tenure::of(&[], &at, false).lower_bound(None, None),
            Duration::ZERO
        );
        let round = [answer(2, None)];
        assert_eq!(
            Tenure::of(&round, &at, false).lower_bound(None, None),
            Duration::ZERO
        );
    }

    #[test]
    fn the_watch_follows_the_newest_configuration() {
        let named = |port: u16, epoch: Option<u64>, sentinel: usize| Named {
            master: format!("10.0.0.1:{port}"),
            epoch,
            sentinel,
        };
        // A sentinel that has switched wins over one that has not, whatever the order.
        let round = [
            (0, answer(1, Some(3))),
            (1, answer(2, Some(4))),
            (2, answer(1, Some(3))),
        ];
        assert_eq!(newest(&round, None), Some(named(2, Some(4), 1)));
        // An answer without an epoch counts as oldest.
        let round = [(0, answer(2, None)), (1, answer(1, Some(0)))];
        assert_eq!(newest(&round, None), Some(named(1, Some(0), 1)));
        // No epochs to go by: a change any sentinel reports is followed.
        let round = [(0, answer(1, None)), (1, answer(2, None))];
        let previous = named(1, None, 0);
        assert_eq!(newest(&round, Some(&previous)), Some(named(2, None, 1)));
        assert_eq!(newest(&[], Some(&previous)), None);

        let n = named(2, Some(4), 1);
        assert_eq!(n.verdict("10.0.0.1:2", Some(3)), Verdict::Same);
        assert_eq!(n.verdict("10.0.0.1:1", Some(3)), Verdict::Newer);
        assert_eq!(n.verdict("10.0.0.1:1", Some(5)), Verdict::Older);
        assert_eq!(n.verdict("10.0.0.1:1", Some(4)), Verdict::Unordered);
        assert_eq!(n.verdict("10.0.0.1:1", None), Verdict::Unordered);
    }

    #[test]
    fn the_watch_bumps_its_generation_only_on_a_change() {
        let watch = Watch::default();
        let named = |port: u16, sentinel: usize| Named {
            master: format!("h:{port}"),
            epoch: Some(1),
            sentinel,
        };
        watch.publish(named(1, 0));
        assert_eq!(watch.generation(), 1);
        watch.publish(named(1, 2));
        assert_eq!(watch.generation(), 1, "another sentinel saying the same");
        watch.publish(named(2, 2));
        assert_eq!(watch.generation(), 2);
        assert_eq!(watch.named(), Some(named(2, 2)));
    }

    #[test]
    fn a_switch_is_another_master_named_from_a_configuration_not_older_than_the_connections() {
        let watch = Watch::default();
        let named = |port: u16, epoch: Option<u64>| Named {
            master: format!("h:{port}"),
            epoch,
            sentinel: 1,
        };
        let reached = ("h:1".to_owned(), Some(3));
        let mut seen = watch.generation();
        assert!(watch.switched(&mut seen, Some(&reached)).is_none());
        // The connection's master, then one of an older configuration: news taken in.
        for news in [named(1, Some(3)), named(2, Some(2))] {
            watch.publish(news);
            assert!(watch.switched(&mut seen, Some(&reached)).is_none());
            assert_eq!(seen, watch.generation());
        }
        // A newer configuration, or one that cannot be ordered: a switch, left unseen.
        for news in [named(2, Some(4)), named(3, None)] {
            watch.publish(news.clone());
            let switch = watch.switched(&mut seen, Some(&reached));
            assert_eq!(switch, Some((news, &reached)));
            assert_ne!(seen, watch.generation());
        }
        // No connection's master to compare with: taken in.
        assert!(watch.switched(&mut seen, None).is_none());
        assert_eq!(seen, watch.generation());
    }

    #[test]
    fn reads_role_reported_time() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![b("name"), b("m"), b("role-reported-time"), b("1234")]);
        assert_eq!(master_field(&reply, "role-reported-time"), Some(1234));
        assert_eq!(master_field(&reply, "config-epoch"), None);
        assert_eq!(master_field(&Value::Nil, "role-reported-time"), None);
    }
}
