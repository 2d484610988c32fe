//! A node that is a whole Redis Cluster: `redis+cluster://` and `rediss+cluster://` URLs, and
//! how a worker routes its batches over the cluster's masters.
//!
//! Such a node is still one logical node: one worker, one vote, the same per-node timeout.
//! redis-rs's synchronous `ClusterConnection` does not fit that worker (it routes a whole
//! pipeline by its first command and sleeps between retries), so the routing is ours, over one
//! plain connection per master:
//!
//! - at each connect the worker asks the seeds in turn for `CLUSTER SLOTS` (each query bounded by
//!   the connect and I/O timeouts), connects to every master, probes each one (`probe.rs`) and
//!   loads the scripts on each;
//! - each command of a batch goes to the master of its keys' slot (every script declares its
//!   keys, all in one slot: `wire::slot`); the batch is one pipeline per master, all of them
//!   written before any reply is read, so the masters work in parallel;
//! - a `MOVED` reply (a failover, a resharding) refreshes the slot map, connects and probes
//!   the new masters and resends what moved once, while its caller still waits; an `ASK` reply
//!   (a slot being migrated) resends the command to the node named, after `ASKING`, with the
//!   script's source (that node may not have our scripts); a `NOSCRIPT` reply loads the scripts
//!   on that master and resends once, with the source;
//! - a master that cannot be reached makes the whole node unavailable until the cluster has
//!   failed over (its slots' keys would be missing from the node's answers otherwise), and the
//!   worker reconnects as for any node.
//!
//! # A change of master is a restart
//!
//! As for a Sentinel group (`sentinel.rs`): replication is asynchronous, so a promoted replica
//! may lack lock keys its master acknowledged. The node's `master` in
//! [`NodeStatus`](crate::NodeStatus) is the list of the cluster's masters, its `run_id` their
//! `run_id`s and its uptime the youngest master's, so that the worker's rule for a Sentinel
//! node applies unchanged: a new master (a failover, seen at a reconnect or after a `MOVED`),
//! a master's new `run_id` or replication ID starts the node's `restart_grace`, counted from
//! when it is seen, and `failovers` counts the changes of the list. The grace holds out the
//! whole node's acquire votes, not only those in the failed-over slots (simpler, and never
//! less safe). What the cluster does not say is how long a master has been the master, so a
//! client that starts after a failover it did not witness counts the promoted replica's age
//! from its uptime (docs/guarantees.md).
//!
//! The clock guard's samples belong to servers: the probe at connect reads every master's
//! `TIME`, and a batch that takes or extends locks carries `TIME` to every master it writes to
//! (a re-run after a `MOVED` too), and to the first master of the list (by address), whose
//! clock is the node's for the guard's cross-checks. Each master's clock has its own detector
//! (its keys expire on that clock), and a forward jump of any of them quarantines the node
//! (`clock.rs`, `Guard::sample_master`). A change of the list keeps the samples of the masters
//! still in it and forgets the others' (a new master's clock does not pass for a jump), and the
//! node's own when the first master changed. Not sampled: a command an `ASK` sent to a node
//! outside the list (a slot being migrated), and a master whose ACL denies `TIME` (warned of
//! once).
//!
//! # A master idle past its failover
//!
//! A change of master is seen through a `MOVED` or at a reconnect. A client idle through a
//! master's whole stop (a SIGSTOP, a VM pause, a long GC-like stall of the process) sees
//! neither: its connection survives, and after the SIGCONT the old master still believes it is
//! the master until the cluster's gossip reaches it, so the client's first write gets `OK`
//! there and is lost at the demotion a moment later, while a client that saw the failover and
//! waited out its grace takes the same lock on the promoted replica: two holders. So, before a
//! batch goes to a master, the worker confirms that master with **another node** of the
//! cluster when its connection has not carried a batch's replies for `T` (`confirm_idle`).
//!
//! Why an idle connection is the sign. An automatic failover needs the master unreachable to
//! the cluster's masters for `cluster-node-timeout` (each flags it `PFAIL` after a ping is
//! unanswered that long), then a majority agreeing (`FAIL`), then the replica's election
//! delay (500 ms plus up to 500 ms, plus a second per rank): it completes at least
//! `cluster-node-timeout` + 500 ms after the master's last answer. A master stopped from `s` to
//! `e` answers nothing in between, so if it was failed over while stopped, our last reply from
//! it came before `s` and our next command goes after `e`: the connection sat idle at least
//! `e - s`, more than `cluster-node-timeout` + 500 ms. `T` is the smallest
//! `cluster-node-timeout` the masters tell (`CONFIG GET` at connect), a margin of 500 ms
//! below that bound for the clocks' rates and the scheduling; where `CONFIG GET` is refused
//! (managed services), `T` is 500 ms ([`IDLE_DEFAULT`]), below the election delay alone, so
//! below any automatic failover whatever the timeout. A reply confirms its master only if its
//! round took less than `T` (a command sent just before a stop and answered after it would
//! hide the stop otherwise), and a `PING` or a `TIME` alone confirms nothing.
//!
//! The other node: another master, on the link's connection to it (the most recently confirmed
//! first: one round trip, `CLUSTER SLOTS`), else a fresh connection to a seed or a node of the
//! last slot map (a replica: a one-master cluster's replicas follow its promotion), never the
//! idle masters themselves. A map that differs from the link's is taken as after a `MOVED`: new
//! masters are connected and probed, and the worker observes the change as a failover (its
//! grace, `failovers`) before this batch's votes count; the same map confirms the idle masters.
//! A map read at a (re)connect from a master names that master on its own word, so that
//! master too is confirmed by another node before its first batch. The check runs within the
//! batch, so it counts against the per-node timeout like any round trip: a busy client (each
//! master answered within `T`) sends nothing more; an idle client's first batch pays one
//! round trip (two, with a fresh connection, when no other master is there to ask).
//!
//! A one-master cluster never fails over by itself (its replica needs the votes of a majority
//! of masters, and the only one is the stopped one): only `CLUSTER FAILOVER TAKEOVER` promotes
//! there, which A9 leaves out. The check still asks a replica (a fresh connection), whose
//! `CLUSTER SLOTS` names a replica promoted by a takeover.
//!
//! When no other node answers (a one-master cluster whose replicas are down, or cut off from
//! this client), nothing tells, and the batch goes as it would without the check: refusing it
//! would take a one-master cluster down with its replica, and a client cut off from every other
//! node of the cluster but not from the old master is A9's partition, which this does not
//! cover either. The idle masters then count as confirmed for `T`, so that a dead replica
//! costs one connection attempt per `T`, not one per batch. What is left uncovered: a
//! promotion that completes between the check and the
//! write (the master resumed before its replica was promoted: A9's bound for any client
//! connected to an old master), an asked node that was itself cut off through the failover
//! and has not heard of it yet (with three masters, both others voted for it), a map read at a
//! reconnect from a seed named by another address than the map's own (a host name against the
//! cluster's IP), and a forced failover or takeover, which has no time bound at all.
//!
//! # `min_replicas` on a cluster
//!
//! `WAIT` counts the replicas that have the writes of *the connection it runs on*, so a
//! cluster node's `WAIT` lane (`node.rs`) is a link of its own, one connection per master:
//! after a batch's writes it sends `WAIT k` to each master that carried one of them, and a vote
//! counts only if its own master's `WAIT` reached `k` (`ClusterLink::execute`). An `ASK` to a
//! node the link has no connection to gets its `WAIT` on the connection opened for it. Every
//! master must have `k` connected replicas (each probe's `INFO replication`, re-read every
//! second while one is short): otherwise the lane refuses its batches unsent, naming the master.
//! The lane follows failovers as the first link does (`MOVED`, or a reconnect).
//!
//! Release notifications use classic pub/sub: a cluster carries a `PUBLISH` to every one of
//! its nodes, so the node's subscriber listens on any one node of the cluster.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, TlsCertificates, Value};

use crate::rules::clock::{Readings, TIME_COMMAND, TimeReading};
use crate::sync::relock;
use crate::topology::probe::{self, Probe};
use crate::topology::urls::{self, AddressMap, address};
use crate::wire::{self, Command, Script};

/// `T` when a master does not tell its `cluster-node-timeout` (`CONFIG GET` refused, as on
/// managed services): below the smallest time any automatic failover takes (see "A master
/// idle past its failover").
const IDLE_DEFAULT: Duration = Duration::from_millis(500);
/// Slots in a Redis Cluster.
const SLOTS: usize = 16384;
/// No master serves the slot.
const NO_MASTER: u16 = u16::MAX;
const DEFAULT_PORT: u16 = 6379;

/// What to expect, for error messages.
pub(crate) const EXPECTED: &str =
    "expected redis[s]+cluster://[user:password@]host:port[?seed=host:port&seed=host:port]";

/// Whether `url` is a Cluster URL (by its scheme).
pub(crate) fn is_cluster_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("redis+cluster://") || lower.starts_with("rediss+cluster://")
}

/// `host:port` (or `[v6]:port`) of an extra seed; quoted in the error if `quotable`.
fn parse_seed(seed: &str, quotable: bool) -> Result<(String, u16), String> {
    urls::host_port(
        seed,
        "seed",
        "they go before the first host, and are the same for every node of the cluster",
        quotable,
    )
}

/// One Redis Cluster, as its URL describes it.
pub(crate) struct Cluster {
    /// Nodes to discover the cluster from, the URL's host first.
    seeds: Vec<(String, u16)>,
    /// TLS: `Some(insecure)`.
    tls: Option<bool>,
    certificates: Option<TlsCertificates>,
    /// Credentials, the same on every node.
    redis: RedisConnectionInfo,
    /// Every node of the last slot map read, replicas included: tried after the seeds, so that
    /// a cluster whose seeds are gone (replaced, failed over) is still found.
    known: Mutex<Vec<(String, u16)>>,
    /// Test-only: where to connect instead of an address the cluster names
    /// (`Builder::address_map_for_tests`).
    address_map: AddressMap,
}

impl Cluster {
    /// Parses a `redis[s]+cluster://` URL; the error says what is wrong, never with the
    /// password.
    pub(crate) fn parse(url: &str) -> Result<Cluster, String> {
        let urls::Head {
            url: parsed,
            tls,
            host,
            port,
        } = urls::head(url, "cluster", DEFAULT_PORT, "no host")?;
        let path = parsed.path().trim_matches('/');
        if !path.is_empty() {
            return Err(format!(
                "a cluster has only database 0, so the URL takes no path (found /{path})"
            ));
        }
        let redis = urls::with_credentials(&parsed, RedisConnectionInfo::default())?;
        let mut seeds = vec![(host, port)];
        let query = urls::query(&parsed)?;
        for (name, value) in query.pairs {
            match name.as_str() {
                "seed" => {
                    let seed = parse_seed(&value, query.quotable)?;
                    if !seeds.contains(&seed) {
                        seeds.push(seed);
                    }
                }
                other => return Err(urls::unknown(other, query.quotable, "seed")),
            }
        }
        Ok(Cluster {
            seeds,
            tls,
            certificates: None,
            redis,
            known: Mutex::new(Vec::new()),
            address_map: AddressMap::default(),
        })
    }

    /// The node's name in reports, logs and `NodeStatus::address`: `cluster:host:port`, its
    /// first seed.
    pub(crate) fn id(&self) -> String {
        let (host, port) = &self.seeds[0];
        format!("cluster:{}", address(host, *port))
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub(crate) fn is_insecure(&self) -> bool {
        self.tls == Some(true)
    }

    pub(crate) fn set_certificates(&mut self, certificates: TlsCertificates) {
        self.certificates = Some(certificates);
    }

    pub(crate) fn set_address_map(&mut self, map: AddressMap) {
        self.address_map = map;
    }

    /// A connection to one node, with the client's timeouts on connect, reads and writes.
    fn open(
        &self,
        host: &str,
        port: u16,
        timeouts: Timeouts,
    ) -> redis::RedisResult<redis::Connection> {
        // Every connection to a node of the cluster is made here, so a test's map covers the
        // seeds, `CLUSTER SLOTS`, `MOVED` and `ASK` alike.
        let (host, port) = self.address_map.route(host, port);
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
            .set_redis_settings(self.redis.clone());
        let client = match &self.certificates {
            Some(certificates) if self.tls.is_some() => {
                redis::Client::build_with_tls(info, certificates.clone())?
            }
            _ => redis::Client::open(info)?,
        };
        let conn = client.get_connection_with_timeout(timeouts.connect)?;
        conn.set_read_timeout(Some(timeouts.io))?;
        conn.set_write_timeout(Some(timeouts.io))?;
        Ok(conn)
    }

    /// The seeds, then the nodes of the last slot map read.
    fn candidates(&self) -> Vec<(String, u16)> {
        let mut all = self.seeds.clone();
        for node in relock(&self.known).iter() {
            if !all.contains(node) {
                all.push(node.clone());
            }
        }
        all
    }

    /// A connection to the first node that answers, among the seeds and then the nodes of the
    /// last slot map: for the release subscriber, since a cluster carries every `PUBLISH` to
    /// all of its nodes.
    pub(crate) fn connect_any(
        &self,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let timeouts = Timeouts {
            connect: connect_timeout,
            io: io_timeout,
        };
        let mut problems = Vec::new();
        for (host, port) in &self.candidates() {
            match self.open(host, *port, timeouts) {
                Ok(conn) => return Ok(conn),
                Err(e) => problems.push(format!("{}: {e}", address(host, *port))),
            }
        }
        Err(unreachable("no seed of the cluster answered", problems))
    }

    /// The slot map, from the first node that answers `CLUSTER SLOTS` among `first`, the seeds
    /// and the nodes of the last map.
    fn discover(&self, first: &[(String, u16)], timeouts: Timeouts) -> redis::RedisResult<Map> {
        self.discover_except(first, &[], timeouts)
    }

    /// [`discover`](Self::discover), never asking the nodes in `except`.
    fn discover_except(
        &self,
        first: &[(String, u16)],
        except: &[(String, u16)],
        timeouts: Timeouts,
    ) -> redis::RedisResult<Map> {
        let mut problems = Vec::new();
        let mut tried = Vec::new();
        for (host, port) in first.iter().chain(&self.candidates()) {
            if tried.contains(&(host, port)) || except.iter().any(|(h, p)| h == host && p == port) {
                continue;
            }
            tried.push((host, port));
            let at = address(host, *port);
            let reply = self
                .open(host, *port, timeouts)
                .and_then(|mut conn| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut conn));
            match reply {
                Ok(reply) => match Map::read(&reply, host) {
                    Some(mut map) if !map.masters.is_empty() => {
                        *relock(&self.known) = map.nodes.clone();
                        map.source = Some((host.clone(), *port));
                        return Ok(map);
                    }
                    _ => problems.push(format!("{at}: CLUSTER SLOTS named no master")),
                },
                Err(e) => problems.push(format!("{at}: {e}")),
            }
        }
        Err(unreachable(
            "no seed of the cluster told its slots (CLUSTER SLOTS)",
            problems,
        ))
    }

    /// Discovers the cluster and connects to every master.
    pub(crate) fn link(
        self: &Arc<Self>,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<ClusterLink> {
        let timeouts = Timeouts {
            connect: connect_timeout,
            io: io_timeout,
        };
        let map = self.discover(&[], timeouts)?;
        let source = map.source.clone();
        let mut link = ClusterLink {
            cluster: Arc::clone(self),
            timeouts,
            owner: Vec::new(),
            masters: Vec::new(),
            refreshed: None,
            replicas: Vec::new(),
            idle_after: None,
        };
        link.adopt(map, None)?;
        // A master back from a stop still names itself before it learns of its demotion: its
        // own word is confirmed by another node before a batch goes to it.
        if let Some((host, port)) = source
            && let Some(m) = link.position(&host, port)
        {
            link.masters[m].confirmed = None;
        }
        Ok(link)
    }
}

fn unreachable(what: &'static str, problems: Vec<String>) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, what, problems.join("; ")))
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect: Duration,
    io: Duration,
}

/// Which master serves each slot.
struct Map {
    /// Per slot, an index into `masters`, or [`NO_MASTER`].
    owner: Vec<u16>,
    /// Sorted by address.
    masters: Vec<(String, u16)>,
    /// Every node the map names, replicas included: where to discover the cluster from next
    /// time, should the URL's seeds be gone.
    nodes: Vec<(String, u16)>,
    /// The node that told it, once [`Cluster::discover`] has read it.
    source: Option<(String, u16)>,
}

impl Map {
    /// Reads a `CLUSTER SLOTS` reply: `[start, end, [host, port, id, …], replicas…]` per
    /// range. An empty host (a node that does not know its own address) is the one asked.
    fn read(reply: &Value, asked: &str) -> Option<Map> {
        let Value::Array(ranges) = reply else {
            return None;
        };
        let mut spans = Vec::new();
        let mut nodes = Vec::new();
        for range in ranges {
            let Value::Array(parts) = range else {
                return None;
            };
            let (Some(Value::Int(start)), Some(Value::Int(end))) = (parts.first(), parts.get(1))
            else {
                return None;
            };
            let mut members = parts[2..].iter().map(|n| member(n, asked));
            let (host, port) = members.next()??;
            nodes.extend(members.flatten());
            let (start, end) = (usize::try_from(*start).ok()?, usize::try_from(*end).ok()?);
            if start > end || end >= SLOTS {
                return None;
            }
            nodes.push((host.clone(), port));
            spans.push((start, end, (host, port)));
        }
        let mut masters: Vec<(String, u16)> = spans.iter().map(|(_, _, m)| m.clone()).collect();
        masters.sort();
        masters.dedup();
        let mut owner = vec![NO_MASTER; SLOTS];
        for (start, end, master) in &spans {
            let i = masters.binary_search(master).ok()? as u16;
            owner[*start..=*end].fill(i);
        }
        nodes.sort();
        nodes.dedup();
        Some(Map {
            owner,
            masters,
            nodes,
            source: None,
        })
    }
}

/// A node of a `CLUSTER SLOTS` range, `[host, port, id, …]`: its host (the one asked when it
/// reports none) and port.
fn member(node: &Value, asked: &str) -> Option<(String, u16)> {
    let Value::Array(fields) = node else {
        return None;
    };
    let host = match fields.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Nil => String::new(),
        _ => return None,
    };
    let host = if host.is_empty() || host == "?" {
        asked.to_owned()
    } else {
        host
    };
    let Some(Value::Int(port)) = fields.get(1) else {
        return None;
    };
    Some((host, u16::try_from(*port).ok()?))
}

impl Map {}

/// Why `command` for the request's `key` cannot run on a cluster: its keys are not all in one
/// hash slot (a script must name keys of one slot only).
pub(crate) fn cross_slot(command: &Command, key: &str) -> Option<String> {
    let keys = command.keys_of(key);
    let first = wire::slot(keys.first()?);
    let other = keys.iter().find(|k| wire::slot(k) != first)?;
    let lock_keys: Vec<&String> = keys.iter().filter(|k| !k.starts_with("redlock:")).collect();
    Some(
        if lock_keys
            .iter()
            .any(|k| wire::slot(k) != wire::slot(lock_keys[0]))
        {
            let slots: Vec<String> = lock_keys
                .iter()
                .map(|k| format!("{k:?} in slot {}", wire::slot(k)))
                .collect();
            format!(
                "on a Redis Cluster node, one lock's resources must be in one hash slot, but {}: \
                 give them a common hash tag (e.g. {{orders}}:1 and {{orders}}:2)",
                slots.join(", ")
            )
        } else {
            format!(
                "on a Redis Cluster node, the braces in the resource name put its key {:?} \
                 (slot {first}) in another hash slot than {other:?} (slot {}), a key the lock \
                 needs beside it: use a name without {{ and }} for this kind of lock",
                keys[0],
                wire::slot(other)
            )
        },
    )
}

impl Map {
    /// Gives `slot` to the master at `at` (a `MOVED` said so), and drops masters left without
    /// a slot; the masters stay sorted.
    fn assign(&mut self, slot: usize, at: &(String, u16)) {
        let index = match self.masters.iter().position(|m| m == at) {
            Some(i) => i,
            None => {
                self.masters.push(at.clone());
                self.masters.len() - 1
            }
        };
        self.owner[slot] = index as u16;
        let mut used: Vec<(String, u16, usize)> = self
            .masters
            .iter()
            .enumerate()
            .filter(|(i, _)| self.owner.contains(&(*i as u16)))
            .map(|(i, (host, port))| (host.clone(), *port, i))
            .collect();
        used.sort();
        let mut renumber = vec![NO_MASTER; self.masters.len()];
        for (new, (_, _, old)) in used.iter().enumerate() {
            renumber[*old] = new as u16;
        }
        for m in &mut self.owner {
            if *m != NO_MASTER {
                *m = renumber[usize::from(*m)];
            }
        }
        self.masters = used.into_iter().map(|(h, p, _)| (h, p)).collect();
    }
}

/// One master and the worker's connection to it.
struct Master {
    host: String,
    port: u16,
    conn: redis::Connection,
    /// When a batch's replies last came from it, or another node last confirmed it as the
    /// master of its slots (see "A master idle past its failover"); a `PING` does not count.
    /// `None`: only its own word names it the master (it gave the slot map the link was made
    /// from), which the first batch to it confirms with another node.
    confirmed: Option<Instant>,
}

impl Master {
    fn address(&self) -> String {
        address(&self.host, self.port)
    }
}

/// One command of a batch: what to send, for which key and token, and until when its caller
/// waits for it (none: always worth sending).
pub(crate) struct Routed<'a> {
    pub command: &'a Command,
    pub key: &'a str,
    pub token: &'a str,
    pub deadline: Option<Instant>,
}

impl Routed<'_> {
    fn slot(&self) -> usize {
        usize::from(wire::slot(self.command.first_key(self.key)))
    }
}

/// A worker's connections to a cluster's masters, and the slot map that routes its commands.
pub(crate) struct ClusterLink {
    cluster: Arc<Cluster>,
    timeouts: Timeouts,
    owner: Vec<u16>,
    /// Sorted by address; the first one's clock is the node's clock.
    masters: Vec<Master>,
    /// A `MOVED` changed the masters: the new ones' merged probe, for the worker to observe.
    refreshed: Option<Probe>,
    /// Each master's connected replicas (`INFO replication`), as its last probe read them.
    replicas: Vec<(String, Option<u64>)>,
    /// `T`: a master not confirmed for this long is confirmed by another node before a batch
    /// goes to it (the smallest `cluster-node-timeout` the masters told, or
    /// [`IDLE_DEFAULT`]); `None` until the first master is connected.
    idle_after: Option<Duration>,
}

impl ClusterLink {
    /// The masters, `host:port,host:port,…` in address order (`NodeStatus::master`).
    pub(crate) fn masters(&self) -> String {
        self.masters
            .iter()
            .map(Master::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What the worker should observe after a batch that followed a `MOVED` to new masters.
    pub(crate) fn take_refreshed(&mut self) -> Option<Probe> {
        self.refreshed.take()
    }

    /// Takes `map` as the slot map: keeps the connections to masters it still names, opens
    /// the others (and loads `scripts` on them, unless they go whole), and drops the rest.
    /// On an error the link serves no slot (the worker drops it anyway).
    fn adopt(&mut self, map: Map, scripts: Option<&[&[&Script]]>) -> redis::RedisResult<()> {
        let mut old: Vec<Master> = std::mem::take(&mut self.masters);
        self.owner = vec![NO_MASTER; SLOTS];
        let mut masters = Vec::with_capacity(map.masters.len());
        for (host, port) in map.masters {
            let kept = old
                .iter()
                .position(|m| m.host == host && m.port == port)
                .map(|i| old.swap_remove(i));
            let master = match kept {
                Some(m) => m,
                None => {
                    let mut conn = self
                        .cluster
                        .open(&host, port, self.timeouts)
                        .map_err(|e| name_master(e, &address(&host, port)))?;
                    if let Some(scripts) = scripts {
                        wire::load_scripts(&mut conn, scripts)?;
                    }
                    let t = node_timeout(&mut conn).unwrap_or(IDLE_DEFAULT);
                    self.idle_after = Some(self.idle_after.map_or(t, |old| old.min(t)));
                    Master {
                        host,
                        port,
                        conn,
                        confirmed: Some(Instant::now()),
                    }
                }
            };
            masters.push(master);
        }
        self.masters = masters;
        self.owner = map.owner;
        Ok(())
    }

    /// Probes every master, as one report: see [`merge`].
    pub(crate) fn probe(&mut self) -> redis::RedisResult<Probe> {
        let mut probes = Vec::with_capacity(self.masters.len());
        for m in &mut self.masters {
            let address = m.address();
            let probe = probe::run(&mut m.conn).map_err(|e| name_master(e, &address))?;
            probes.push((address, probe));
        }
        self.replicas = probes
            .iter()
            .map(|(address, p)| (address.clone(), p.report.connected_replicas))
            .collect();
        merge(probes).ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Client, "the cluster has no master"))
        })
    }

    pub(crate) fn load_scripts(&mut self, sets: &[&[&Script]]) -> redis::RedisResult<()> {
        for m in &mut self.masters {
            wire::load_scripts(&mut m.conn, sets)?;
        }
        Ok(())
    }

    pub(crate) fn ping(&mut self) -> redis::RedisResult<()> {
        for m in &mut self.masters {
            redis::cmd("PING").query::<()>(&mut m.conn)?;
        }
        Ok(())
    }

    /// Each master's connected replicas, as its last probe read them (`INFO replication`).
    pub(crate) fn probed_replicas(&self) -> Vec<(String, Option<u64>)> {
        self.replicas.clone()
    }

    /// Runs `f` on every master's connection, in address order; an error names its master.
    pub(crate) fn on_each<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<Vec<(String, T)>> {
        let mut all = Vec::with_capacity(self.masters.len());
        for m in &mut self.masters {
            let address = m.address();
            let value = f(&mut m.conn).map_err(|e| name_master(e, &address))?;
            all.push((address, value));
        }
        Ok(all)
    }

    /// Runs the batch, one pipeline per master, and returns the replies in the batch's order;
    /// with `time`, the `TIME` readings too (see `round`). Handles `NOSCRIPT`, `MOVED` and `ASK` (see
    /// the module's doc). `scripts` are loaded on masters met on the way, unless `inline`.
    ///
    /// With `wait` (`min_replicas`), once every command has its reply, `WAIT` goes to each
    /// connection that carried one of them (it counts the replicas that have the writes of the
    /// connection it runs on): what it answered comes back per command, for the worker to
    /// count each vote only if its own master's replicas have the write.
    pub(crate) fn execute(
        &mut self,
        batch: &[Routed<'_>],
        inline: bool,
        time: bool,
        scripts: &[&[&Script]],
        wait: Option<WaitFor>,
    ) -> redis::RedisResult<Executed> {
        let all: Vec<usize> = (0..batch.len()).collect();
        let mut values = vec![Value::Nil; batch.len()];
        // Where each command ran last: a master of the link, or (after an `ASK` to a node the
        // link has no connection to) a connection of its own, whose `WAIT` was read there.
        let mut ran_on: Vec<RanOn> = vec![RanOn::Nowhere; batch.len()];
        self.confirm_idle(batch, (!inline).then_some(scripts))?;
        let clocks = if time {
            Clocks::WrittenAndFirst
        } else {
            Clocks::None
        };
        let mut reading = self.round(batch, &all, inline, clocks, &mut values, &mut ran_on)?;
        // NOSCRIPT: a master that restarted or flushed its scripts.
        let noscript = matching(&values, "NOSCRIPT");
        if !noscript.is_empty() {
            let mut masters: Vec<u16> = noscript
                .iter()
                .map(|&i| self.owner[batch[i].slot()])
                .collect();
            masters.sort_unstable();
            masters.dedup();
            for m in masters {
                if let Some(master) = self.masters.get_mut(usize::from(m)) {
                    wire::load_scripts(&mut master.conn, scripts)?;
                }
            }
            // The same masters as the first round, which read their clocks then; with the
            // scripts' source (`EVAL`), which another flush since the load cannot fail.
            self.round(
                batch,
                &noscript,
                true,
                Clocks::None,
                &mut values,
                &mut ran_on,
            )?;
        }
        // MOVED: the slot has another master now (a failover, a resharding).
        let now = Instant::now();
        let moved: Vec<usize> = matching(&values, "MOVED")
            .into_iter()
            .filter(|&i| batch[i].deadline.is_none_or(|d| d > now))
            .collect();
        if !moved.is_empty() {
            let redirects: Vec<(usize, (String, u16))> = moved
                .iter()
                .filter_map(|&i| Some((batch[i].slot(), redirect(&values[i])?)))
                .collect();
            self.refresh(&redirects, (!inline).then_some(scripts))?;
            if self.refreshed.is_some() {
                // Read from the old masters, whose clocks the guard no longer follows.
                reading = Readings::default();
            }
            // Each master the re-run reaches reads its clock too (the first master only if it
            // carries a command): a master that took nothing in the first round has no reading
            // of this batch yet, and its vote counts only with one.
            let clocks = if time { Clocks::Written } else { Clocks::None };
            let again = self.round(batch, &moved, inline, clocks, &mut values, &mut ran_on)?;
            reading.node = again.node.or(reading.node);
            reading.masters.extend(again.masters);
        }
        // ASK: the key's slot is being migrated, and the key is on the node named.
        for i in matching(&values, "ASK") {
            let (value, on) = self.ask(&batch[i], &values[i], wait)?;
            values[i] = value;
            ran_on[i] = on;
        }
        let acks = match wait {
            Some(wait) => Some(self.wait(wait, ran_on)?),
            None => None,
        };
        Ok((values, reading, acks))
    }

    /// Sends `WAIT` to every master that carried a command of the batch (all written before
    /// any reply is read), reads each reply until `wait.answer_by`, and gives each command the
    /// answer of the connection it ran on.
    fn wait(&mut self, wait: WaitFor, ran_on: Vec<RanOn>) -> redis::RedisResult<Vec<Waited>> {
        let mut on: Vec<usize> = Vec::new();
        let mut buf = Vec::new();
        wire::write_wait(wait.k, wait.ms, &mut buf);
        for r in &ran_on {
            if let RanOn::Master(host, port) = r
                && let Some(m) = self.position(host, *port)
                && !on.contains(&m)
            {
                self.masters[m].conn.send_packed_command(&buf)?;
                on.push(m);
            }
        }
        let mut answers: Vec<(usize, Waited)> = Vec::with_capacity(on.len());
        for m in on {
            let answer = wait.read(&mut self.masters[m].conn, self.timeouts.io)?;
            answers.push((m, answer));
        }
        Ok(ran_on
            .into_iter()
            .map(|r| match r {
                RanOn::Master(host, port) => {
                    let answer = self
                        .position(&host, port)
                        .and_then(|m| answers.iter().find(|(a, _)| *a == m));
                    match answer {
                        Some((_, answer)) => answer.clone(),
                        // Dropped from the slot map after it took the write: nothing tells
                        // whether its replicas have it.
                        None => Waited::Gone(address(&host, port)),
                    }
                }
                RanOn::Alone(answer) => answer,
                // Not sent (no master serves its slot): its reply is the error, no vote.
                RanOn::Nowhere => Waited::Reply(Value::Int(0)),
            })
            .collect())
    }

    /// The index of the master at `host:port`, if the link has one.
    fn position(&self, host: &str, port: u16) -> Option<usize> {
        self.masters
            .iter()
            .position(|m| m.host == host && m.port == port)
    }

    /// Sends the batch's commands `which` to their masters (all pipelines written before any
    /// reply is read) and puts the replies in `values`. With `clocks`, the pipeline of every
    /// master that carries one of the commands ends with `TIME` (its keys expire on its own
    /// clock), and with `WrittenAndFirst` the first master's too, whose clock is the node's:
    /// their readings come back.
    fn round(
        &mut self,
        batch: &[Routed<'_>],
        which: &[usize],
        inline: bool,
        clocks: Clocks,
        values: &mut [Value],
        ran_on: &mut [RanOn],
    ) -> redis::RedisResult<Readings> {
        let mut per_master: Vec<Vec<usize>> = vec![Vec::new(); self.masters.len()];
        for &i in which {
            match self.owner[batch[i].slot()] {
                NO_MASTER => {
                    values[i] = error_reply(&format!(
                        "CLUSTERDOWN no master serves slot {} (of key {:?}) in the cluster's slot \
                         map",
                        batch[i].slot(),
                        batch[i].key
                    ))
                }
                m => {
                    let master = &self.masters[usize::from(m)];
                    ran_on[i] = RanOn::Master(master.host.clone(), master.port);
                    per_master[usize::from(m)].push(i)
                }
            }
        }
        let with_time = |m: usize, indices: &[usize]| match clocks {
            Clocks::None => false,
            Clocks::Written => !indices.is_empty(),
            Clocks::WrittenAndFirst => m == 0 || !indices.is_empty(),
        };
        let mut buf = Vec::new();
        let mut sent_at = vec![None; per_master.len()];
        let round_sent = Instant::now();
        for (m, indices) in per_master.iter().enumerate() {
            let with_time = with_time(m, indices);
            if indices.is_empty() && !with_time {
                continue;
            }
            buf.clear();
            for &i in indices {
                let r = &batch[i];
                r.command.write_resp(r.key, r.token, inline, &mut buf);
            }
            if with_time {
                buf.extend_from_slice(TIME_COMMAND);
                sent_at[m] = Some(Instant::now());
            }
            let master = &mut self.masters[m];
            master.conn.send_packed_command(&buf)?;
        }
        let mut readings = Readings::default();
        for (m, indices) in per_master.iter().enumerate() {
            let with_time = with_time(m, indices);
            if indices.is_empty() && !with_time {
                continue;
            }
            let master = &mut self.masters[m];
            for &i in indices {
                values[i] = next_reply(&mut master.conn)?;
            }
            if let (true, Some(sent)) = (with_time, sent_at[m]) {
                let reading = TimeReading::new(next_reply(&mut master.conn)?, sent);
                if m == 0 {
                    readings.node = Some(reading);
                } else {
                    readings.masters.push((master.address(), reading));
                }
            }
            // Its replies confirm it, unless it carried only `TIME` (not checked before) or
            // took long enough to have been stopped meanwhile.
            let now = Instant::now();
            if !indices.is_empty()
                && self
                    .idle_after
                    .is_some_and(|t| now.saturating_duration_since(round_sent) < t)
            {
                master.confirmed = Some(now);
            }
        }
        Ok(readings)
    }

    /// Reads the slot map again after `MOVED`s (`redirects`: slot and where to), asking the
    /// nodes they name first (a new master knows it is one before the others hear of it), and
    /// takes each redirect over the map where they disagree; connects to new masters and, when
    /// the masters changed, probes them all for the worker to observe.
    fn refresh(
        &mut self,
        redirects: &[(usize, (String, u16))],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        let known = self.addresses();
        let first: Vec<(String, u16)> = redirects
            .iter()
            .map(|(_, at)| at.clone())
            .chain(known.iter().cloned())
            .collect();
        let mut map = self.cluster.discover(&first, self.timeouts)?;
        for (slot, at) in redirects {
            map.assign(*slot, at);
        }
        self.take(map, scripts)
    }

    /// Takes a slot map read again: when its masters differ from the link's, connects to the
    /// new ones and probes them all, for the worker to observe (a change of master: a restart).
    fn take(&mut self, map: Map, scripts: Option<&[&[&Script]]>) -> redis::RedisResult<()> {
        let changed = map.masters != self.addresses();
        self.adopt(map, scripts)?;
        if changed {
            self.refreshed = Some(self.probe()?);
        }
        Ok(())
    }

    /// The masters' addresses, in the link's order.
    fn addresses(&self) -> Vec<(String, u16)> {
        self.masters
            .iter()
            .map(|m| (m.host.clone(), m.port))
            .collect()
    }

    /// Before a batch goes to a master that has not been confirmed for `T` (`idle_after`),
    /// reads the slot map from another node (see "A master idle past its failover"): another
    /// master on the link's connection to it, else a fresh connection to a seed or a node of
    /// the last map, never the idle masters themselves. A map that differs from the link's is
    /// taken as after a `MOVED` (new masters: a failover, observed by the worker before this
    /// batch's votes count); the same map confirms the idle masters. When no other node
    /// answers (or there is none), the batch goes as it would without the check.
    fn confirm_idle(
        &mut self,
        batch: &[Routed<'_>],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        let Some(idle_after) = self.idle_after else {
            return Ok(());
        };
        let now = Instant::now();
        let mut idle: Vec<usize> = batch
            .iter()
            .map(|r| self.owner[r.slot()])
            .filter(|&m| m != NO_MASTER)
            .map(usize::from)
            .filter(|&m| {
                self.masters[m]
                    .confirmed
                    .is_none_or(|at| now.saturating_duration_since(at) >= idle_after)
            })
            .collect();
        if idle.is_empty() {
            return Ok(());
        }
        idle.sort_unstable();
        idle.dedup();
        let except: Vec<(String, u16)> = idle
            .iter()
            .map(|&m| (self.masters[m].host.clone(), self.masters[m].port))
            .collect();
        // The other masters, the most recently confirmed first.
        let mut others: Vec<usize> = (0..self.masters.len())
            .filter(|m| !idle.contains(m))
            .collect();
        others.sort_by_key(|&m| std::cmp::Reverse(self.masters[m].confirmed));
        let mut map = None;
        let mut problems = Vec::new();
        for m in others {
            let master = &mut self.masters[m];
            let reply = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Value>(&mut master.conn);
            match reply.map(|reply| Map::read(&reply, &master.host)) {
                Ok(Some(read)) if !read.masters.is_empty() => {
                    master.confirmed = Some(Instant::now());
                    map = Some(read);
                    break;
                }
                Ok(_) => problems.push(format!(
                    "{}: CLUSTER SLOTS named no master",
                    master.address()
                )),
                Err(e) => problems.push(format!("{}: {e}", master.address())),
            }
        }
        let map = match map {
            Some(map) => map,
            None => match self.cluster.discover_except(&[], &except, self.timeouts) {
                Ok(map) => map,
                Err(e) => {
                    // Nobody else answers (a one-master cluster whose replicas are down or cut
                    // off from us): nothing tells, and the batch goes, as without the check.
                    // The idle masters count as confirmed for `T`, so that an unreachable
                    // replica costs one attempt per `T`, not one per batch.
                    problems.push(e.to_string());
                    log::debug!(
                        "redlock: node {}: no other node of the cluster confirmed the idle \
                         masters {}: {}",
                        self.cluster.id(),
                        except
                            .iter()
                            .map(|(h, p)| address(h, *p))
                            .collect::<Vec<_>>()
                            .join(","),
                        problems.join("; ")
                    );
                    let now = Instant::now();
                    for m in idle {
                        self.masters[m].confirmed = Some(now);
                    }
                    return Ok(());
                }
            },
        };
        if map.masters == self.addresses() && map.owner == self.owner {
            let now = Instant::now();
            for m in idle {
                self.masters[m].confirmed = Some(now);
            }
            return Ok(());
        }
        self.take(map, scripts)
    }

    /// Sends a command that answered `ASK slot host:port` to that node, after `ASKING`, with
    /// its script's source (the node may not have our scripts). The node's reply, or the `ASK`
    /// itself when it cannot be read; and where it ran. With `wait`, a node the link has no
    /// connection to gets its `WAIT` on the connection opened for it, read here.
    fn ask(
        &mut self,
        r: &Routed<'_>,
        ask: &Value,
        wait: Option<WaitFor>,
    ) -> redis::RedisResult<(Value, RanOn)> {
        let Some((host, port)) = redirect(ask) else {
            return Ok((ask.clone(), RanOn::Nowhere));
        };
        if let Some(i) = self.position(&host, port) {
            let value = send_asking(&mut self.masters[i].conn, r)?;
            return Ok((value, RanOn::Master(host, port)));
        }
        let mut conn = self
            .cluster
            .open(&host, port, self.timeouts)
            .map_err(|e| name_master(e, &address(&host, port)))?;
        let value = send_asking(&mut conn, r)?;
        let on = match wait {
            Some(wait) => {
                let mut buf = Vec::new();
                wire::write_wait(wait.k, wait.ms, &mut buf);
                conn.send_packed_command(&buf)?;
                RanOn::Alone(wait.read(&mut conn, self.timeouts.io)?)
            }
            None => RanOn::Nowhere,
        };
        Ok((value, on))
    }
}

/// What [`ClusterLink::execute`] returns: the replies in the batch's order, the `TIME`
/// reading, and with a `WAIT`, what it answered for each command.
pub(crate) type Executed = (Vec<Value>, Readings, Option<Vec<Waited>>);

/// The `WAIT k ms` a batch of a `WAIT` lane ends with (`min_replicas`) on each master it wrote
/// to, and until when its replies are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitFor {
    pub k: u32,
    pub ms: u64,
    /// Past this, a master whose `WAIT` has not answered counts as not acknowledged, and
    /// redis-rs skips the late reply when that connection reads its next one.
    pub answer_by: Instant,
    /// When the batch was sent, for how long a late `WAIT` was waited for.
    pub sent: Instant,
}

impl WaitFor {
    /// Reads one `WAIT` reply on `conn` until `answer_by`, then puts the read timeout back.
    fn read(&self, conn: &mut redis::Connection, io: Duration) -> redis::RedisResult<Waited> {
        let left = self
            .answer_by
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        conn.set_read_timeout(Some(left))?;
        let reply = next_reply(conn);
        conn.set_read_timeout(Some(io))?;
        match reply {
            Ok(value) => Ok(Waited::Reply(value)),
            Err(e) if e.is_timeout() => Ok(Waited::Late(self.sent.elapsed())),
            Err(e) => Err(e),
        }
    }
}

/// What the `WAIT` on the connection that carried a command answered.
#[derive(Debug, Clone)]
pub(crate) enum Waited {
    Reply(Value),
    /// No reply by `answer_by`, this long after the batch was sent.
    Late(Duration),
    /// The master (`host:port`) that took the command left the slot map before its `WAIT`.
    Gone(String),
}

/// Where a command of a batch ran last.
#[derive(Debug, Clone)]
enum RanOn {
    /// Not sent: no master serves its slot.
    Nowhere,
    /// On the link's connection to this master.
    Master(String, u16),
    /// On a connection of its own (an `ASK` to a node the link has none to), whose `WAIT`
    /// answered this.
    Alone(Waited),
}

fn send_asking(conn: &mut redis::Connection, r: &Routed<'_>) -> redis::RedisResult<Value> {
    let mut buf = Vec::new();
    redis::cmd("ASKING").write_packed_command(&mut buf);
    r.command.write_resp(r.key, r.token, true, &mut buf);
    conn.send_packed_command(&buf)?;
    let _asking = next_reply(conn)?;
    next_reply(conn)
}

/// The master's `cluster-node-timeout`, if `CONFIG GET` may read it.
fn node_timeout(conn: &mut redis::Connection) -> Option<Duration> {
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("cluster-node-timeout")
        .query(conn)
        .ok()?;
    let ms: u64 = reply.get(1)?.parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// An error reply, as a server would send it.
fn error_reply(text: &str) -> Value {
    let line = format!("-{}\r\n", text.replace(['\r', '\n'], " "));
    redis::parse_redis_value(line.as_bytes()).unwrap_or(Value::Nil)
}

/// The next reply on `conn`, skipping RESP3 pushes.
fn next_reply(conn: &mut redis::Connection) -> redis::RedisResult<Value> {
    loop {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value => return Ok(value),
        }
    }
}

/// The indices of the replies that are server errors with `code`.
fn matching(values: &[Value], code: &str) -> Vec<usize> {
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Value::ServerError(e) if e.code() == code))
        .map(|(i, _)| i)
        .collect()
}

/// The `host:port` of a `MOVED` or `ASK` reply (`slot host:port`).
fn redirect(value: &Value) -> Option<(String, u16)> {
    let Value::ServerError(e) = value else {
        return None;
    };
    let (_, at) = e.details()?.trim().split_once(' ')?;
    let (host, port) = at.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host.to_owned(), port.parse().ok()?))
}

/// Which masters of a round read their clocks for the guard (`TIME` ending their pipeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clocks {
    None,
    /// Each master that carries a command of the round.
    Written,
    /// Those, and the first master, whose clock is the node's.
    WrittenAndFirst,
}

/// An error of one master, naming it.
fn name_master(e: redis::RedisError, master: &str) -> redis::RedisError {
    if e.is_io_error() || e.is_timeout() {
        // Kept as it is: the worker tells a dropped connection or a timeout by its kind.
        return e;
    }
    redis::RedisError::from((
        e.kind(),
        "a master of the cluster failed",
        format!("{master}: {e}"),
    ))
}

/// Every master's probe as one: the first master's report (its clock, version and
/// persistence), the other masters' clocks (`masters_time`), with the `run_id`s and replication IDs of all masters joined by `,` (any
/// change of one is a change of the node's), the youngest master's uptime, whether any master
/// was promoted since it started, and every master's errors and warnings, each naming its master. Cluster mode and replicas are expected here.
fn merge(probes: Vec<(String, Probe)>) -> Option<Probe> {
    let join = |f: &dyn Fn(&Probe) -> Option<String>| -> Option<String> {
        probes
            .iter()
            .map(|(_, p)| f(p))
            .collect::<Option<Vec<_>>>()
            .map(|all| all.join(","))
    };
    let run_id = join(&|p| p.report.run_id.clone());
    let replid = join(&|p| p.report.replid.clone());
    let uptime = probes
        .iter()
        .map(|(_, p)| p.report.uptime)
        .collect::<Option<Vec<_>>>()
        .and_then(|all| all.into_iter().min());
    let promoted = probes.iter().any(|(_, p)| p.report.promoted);
    let several = probes.len() > 1;
    let mut merged: Option<Probe> = None;
    let mut masters_time = Vec::new();
    for (address, mut p) in probes {
        probe::expect_cluster(&mut p.assessment);
        probe::expect_replicas(&mut p.assessment);
        let name = |w: String| {
            if several {
                format!("master {address}: {w}")
            } else {
                w
            }
        };
        match &mut merged {
            None => {
                p.assessment.errors = p.assessment.errors.into_iter().map(name).collect();
                p.assessment.warnings = p.assessment.warnings.into_iter().map(name).collect();
                merged = Some(p);
            }
            Some(m) => {
                if let Some(time) = p.time.take() {
                    masters_time.push((address.clone(), time));
                }
                m.assessment
                    .errors
                    .extend(p.assessment.errors.into_iter().map(name));
                m.assessment
                    .warnings
                    .extend(p.assessment.warnings.into_iter().map(name));
            }
        }
    }
    let mut merged = merged?;
    merged.report.run_id = run_id;
    merged.report.replid = replid;
    merged.report.uptime = uptime;
    merged.report.promoted = promoted;
    merged.masters_time = masters_time;
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms() {
        let c = Cluster::parse(
            "redis+cluster://u:p%40ss@10.0.0.1:7000?seed=10.0.0.2:7001&seed=[::1]:5",
        )
        .unwrap();
        assert_eq!(
            c.seeds,
            vec![
                ("10.0.0.1".to_owned(), 7000),
                ("10.0.0.2".to_owned(), 7001),
                ("::1".to_owned(), 5)
            ]
        );
        assert_eq!(c.redis.username(), Some("u"));
        assert_eq!(c.redis.password(), Some("p@ss"));
        assert_eq!(c.id(), "cluster:10.0.0.1:7000");
        assert!(!c.is_tls());
        let c = Cluster::parse("rediss+cluster://h/#insecure").unwrap();
        assert_eq!(c.tls, Some(true));
        assert_eq!(c.seeds, vec![("h".to_owned(), DEFAULT_PORT)]);
        assert!(is_cluster_url(" REDIS+CLUSTER://h:1"));
        assert!(!is_cluster_url("redis://h:1"));
    }

    #[test]
    fn refuses_bad_forms() {
        for (url, why) in [
            ("redis+cluster://h:1/2", "only database 0"),
            ("redis+cluster://h:1?seed=nope", "not host:port"),
            ("redis+cluster://h:1?seed=h:0", "not host:port"),
            (
                "redis+cluster://h:1?sentinel=h:2",
                "unknown query parameter",
            ),
            ("redis+cluster:///", "no host"),
            ("redis+cluster://h:99999", "invalid port"),
            ("redis+cluster://h:1#insecure", "fragment"),
            ("rediss+cluster://h:1#other", "fragment"),
        ] {
            let err = Cluster::parse(url)
                .err()
                .unwrap_or_else(|| panic!("{url} parsed"));
            assert!(err.contains(why), "{url}: {err}");
        }
        let err = Cluster::parse("redis+cluster://h:1?seed=u:s3cret@h:2")
            .err()
            .expect("refused");
        assert!(
            err.contains("not host:port") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn reads_cluster_slots() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let node = |host: &str, port: i64| Value::Array(vec![b(host), Value::Int(port), b("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.2", 7001),
                node("10.0.0.9", 7009),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node("", 7000)]),
        ]);
        let map = Map::read(&reply, "seed").unwrap();
        assert_eq!(
            map.masters,
            vec![("10.0.0.2".to_owned(), 7001), ("seed".to_owned(), 7000)]
        );
        assert_eq!(map.owner[0], 0);
        assert_eq!(map.owner[8191], 0);
        assert_eq!(map.owner[8192], 1);
        assert_eq!(map.owner[16383], 1);
        assert_eq!(
            map.nodes,
            vec![
                ("10.0.0.2".to_owned(), 7001),
                ("10.0.0.9".to_owned(), 7009),
                ("seed".to_owned(), 7000)
            ]
        );
        assert!(Map::read(&Value::Nil, "seed").is_none());

        // A MOVED of slot 0 to a new master; the old one keeps the rest of its range.
        let mut map = map;
        map.assign(0, &("10.0.0.1".to_owned(), 7005));
        assert_eq!(map.masters[0], ("10.0.0.1".to_owned(), 7005));
        assert_eq!(map.owner[0], 0);
        assert_eq!(map.masters[usize::from(map.owner[1])].1, 7001);
        assert_eq!(map.masters[usize::from(map.owner[16383])].1, 7000);
        // A master left without a slot is dropped.
        let mut one = Map::read(
            &Value::Array(vec![Value::Array(vec![
                Value::Int(0),
                Value::Int(0),
                node("a", 1),
            ])]),
            "seed",
        )
        .unwrap();
        one.assign(0, &("b".to_owned(), 2));
        assert_eq!(one.masters, vec![("b".to_owned(), 2)]);
        assert_eq!(one.owner[0], 0);
        assert_eq!(one.owner[1], NO_MASTER);
    }

    #[test]
    fn reads_redirections() {
        assert_eq!(
            redirect(&error_reply("MOVED 3999 127.0.0.1:6381")),
            Some(("127.0.0.1".to_owned(), 6381))
        );
        assert_eq!(
            redirect(&error_reply("ASK 1 [::1]:7000")),
            Some(("::1".to_owned(), 7000))
        );
        assert_eq!(redirect(&Value::Nil), None);
        let values = [
            error_reply("MOVED 1 h:1"),
            Value::Okay,
            error_reply("ASK 1 h:1"),
        ];
        assert_eq!(matching(&values, "MOVED"), vec![0]);
        assert_eq!(matching(&values, "ASK"), vec![2]);
    }
}
