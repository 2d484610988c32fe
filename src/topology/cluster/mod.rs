//! A node that is a whole Redis Cluster (`redis[s]+cluster://` URLs): still one logical node,
//! with one worker, one vote and the same per-node timeout. redis-rs's synchronous
//! `ClusterConnection` does not fit that worker (it routes a whole pipeline by its first command
//! and sleeps between retries), so the routing is ours, over one plain connection per master:
//! the slot map is [`map`], the worker's link to the masters is [`link`]. This module owns the
//! URL, the discovery of the cluster (`CLUSTER SLOTS` from the seeds, then from the nodes of the
//! last map read) and the rule that a command's keys be in one hash slot ([`cross_slot`]).
//!
//! # A change of master is a restart
//!
//! As for a Sentinel group: replication is asynchronous, so a promoted replica may lack lock
//! keys its master acknowledged. The link reports the cluster's masters as the node's `master`
//! ([`NodeStatus`](crate::NodeStatus)), their `run_id`s as its `run_id` and the youngest
//! master's uptime as its uptime, so that the worker's rule for a Sentinel node applies
//! unchanged: a new master (a failover, seen at a reconnect, after a `MOVED` or by the idle
//! check of [`link`]), or a master's new `run_id` or replication ID, starts the node's
//! `restart_grace`, counted from when it is seen, and `failovers` counts the changes of the
//! list. The grace holds out the whole node's acquire votes, not only those in the failed-over
//! slots (simpler, and never less safe). The cluster does not say how long a master has been
//! the master, so a client that starts after a failover it did not witness counts the promoted
//! replica's age from its uptime (docs/guarantees.md, A9).
//!
//! Release notifications use classic pub/sub: a cluster carries a `PUBLISH` to every one of its
//! nodes, so the node's subscriber listens on any one node ([`Cluster::connect_any`]).
//!
//! May use: `urls`, `probe`, `wire`, `rules::clock`, `sync`.

mod link;
mod map;

use std::sync::Mutex;
use std::time::Duration;

use redis::{RedisConnectionInfo, Value};

use crate::sync::relock;
use crate::topology::urls::{self, Reach, address};
use crate::wire::{self, Command};

pub(crate) use link::{ClusterLink, Routed, WaitFor, Waited};
use map::Map;

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
    /// How the cluster's nodes are reached (TLS, certificates, a test's address map).
    pub(crate) reach: Reach,
    /// Credentials, the same on every node.
    redis: RedisConnectionInfo,
    /// Every node of the last slot map read, replicas included: tried after the seeds, so that
    /// a cluster whose seeds are gone (replaced, failed over) is still found.
    known: Mutex<Vec<(String, u16)>>,
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
            reach: Reach::new(tls),
            redis,
            known: Mutex::new(Vec::new()),
        })
    }

    /// The node's name in reports, logs and `NodeStatus::address`: `cluster:host:port`, its
    /// first seed.
    pub(crate) fn id(&self) -> String {
        let (host, port) = &self.seeds[0];
        format!("cluster:{}", address(host, *port))
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
        let (host, port) = self.reach.address_map.route(host, port);
        (self.reach).open(host, port, &self.redis, timeouts.connect, timeouts.io)
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
}

fn unreachable(what: &'static str, problems: Vec<String>) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, what, problems.join("; ")))
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect: Duration,
    io: Duration,
}

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
        assert!(!c.reach.is_tls());
        let c = Cluster::parse("rediss+cluster://h/#insecure").unwrap();
        assert_eq!(c.reach.tls, Some(true));
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
}
