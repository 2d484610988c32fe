//! The seam between a node's kind and the rest of the crate: a [`Target`] is one node as its URL
//! describes it (one Redis server, a Sentinel-managed master, or a whole Redis Cluster), and a
//! [`Link`] is a worker's connection to it. Outside `topology`, code asks the target what its URL
//! means, whether a command can run on it and how to reach it, and never names a kind's
//! internals.
//!
//! May use: the kinds (`sentinel`, `cluster`), `urls`, `probe`, `wire`.

use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, TlsCertificates};

use crate::topology::cluster::{self, Cluster, ClusterLink};
use crate::topology::probe::{self, Probe};
use crate::topology::sentinel::{self, Sentinel, Tenure};
use crate::topology::urls::{self, AddressMap};
use crate::wire::{self, Command, Script};

/// How a worker reaches its node. (Made once per node at build time: its size is no concern.)
#[derive(Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Target {
    Standalone(redis::Client),
    Sentinel(Arc<Sentinel>),
    Cluster(Arc<Cluster>),
}

/// A new connection, and for a Sentinel node, which master it reached.
pub(crate) struct Connected {
    pub conn: redis::Connection,
    pub master: Option<String>,
    /// A Sentinel node's: what bounds the master's time as the master.
    pub tenure: Option<Tenure>,
    pub epoch: Option<u64>,
}

/// A worker's new link to its node, and which master(s) it reached: a Sentinel node's master,
/// or a cluster's masters (`host:port,…`).
pub(crate) struct Linked {
    pub link: Link,
    pub master: Option<String>,
    /// A Sentinel node's: what bounds the master's time as the master.
    pub tenure: Option<Tenure>,
    pub epoch: Option<u64>,
}

/// The URL forms a node may take, for the error about one that is none of them.
const EXPECTED: &str = "expected redis[s]://[user:password@]host:port[/db], or \
     redis[s]+sentinel://[user:password@]host:port/MASTERNAME[?sentinel=host:port&…], \
     or redis[s]+cluster://[user:password@]host:port[?seed=host:port&…]";

impl Target {
    /// The node a URL describes, by its scheme: `redis[s]+sentinel://`, `redis[s]+cluster://`,
    /// or anything redis-rs opens. The error says what is wrong and what was expected, and
    /// quotes nothing of the URL (the caller names the node).
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        if sentinel::is_sentinel_url(url) {
            let s = Sentinel::parse(url).map_err(|why| {
                format!("not a usable Sentinel URL: {why}; {}", sentinel::EXPECTED)
            })?;
            Ok(Target::Sentinel(Arc::new(s)))
        } else if cluster::is_cluster_url(url) {
            let c = Cluster::parse(url)
                .map_err(|why| format!("not a usable Cluster URL: {why}; {}", cluster::EXPECTED))?;
            Ok(Target::Cluster(Arc::new(c)))
        } else {
            let client = open_standalone(url)
                .map_err(|why| format!("not a usable Redis URL: {why}; {EXPECTED}"))?;
            Ok(Target::Standalone(client))
        }
    }

    /// Uses `certificates` for TLS (a node whose URL asks for it; called before the node is
    /// shared).
    pub(crate) fn set_certificates(
        &mut self,
        certificates: &TlsCertificates,
    ) -> redis::RedisResult<()> {
        match self {
            Target::Standalone(client) => {
                *client = redis::Client::build_with_tls(
                    client.get_connection_info().clone(),
                    certificates.clone(),
                )?;
            }
            Target::Sentinel(s) => {
                if let Some(s) = Arc::get_mut(s) {
                    s.reach.certificates = Some(certificates.clone());
                }
            }
            Target::Cluster(c) => {
                if let Some(c) = Arc::get_mut(c) {
                    c.reach.certificates = Some(certificates.clone());
                }
            }
        }
        Ok(())
    }

    /// Test-only: connects elsewhere where the sentinels or the cluster name a mapped address
    /// (`Builder::address_map_for_tests`; called before the node is shared).
    pub(crate) fn set_address_map(&mut self, map: &AddressMap) {
        match self {
            Target::Standalone(_) => {}
            Target::Sentinel(s) => {
                if let Some(s) = Arc::get_mut(s) {
                    s.reach.address_map = map.clone();
                }
            }
            Target::Cluster(c) => {
                if let Some(c) = Arc::get_mut(c) {
                    c.reach.address_map = map.clone();
                }
            }
        }
    }

    /// Why `command`, for the request's `key`, cannot run on this node, in the user's words;
    /// `None` when it can. A cluster refuses a command whose keys are not all in one hash slot.
    pub(crate) fn refuses(&self, command: &Command, key: &str) -> Option<String> {
        match self {
            Target::Cluster(_) => cluster::cross_slot(command, key),
            Target::Standalone(_) | Target::Sentinel(_) => None,
        }
    }

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
            Target::Sentinel(s) => s.reach.is_tls(),
            Target::Cluster(c) => c.reach.is_tls(),
        }
    }

    /// Whether TLS certificates go unverified (`#insecure`).
    pub(crate) fn is_insecure(&self) -> bool {
        match self {
            Target::Standalone(client) => matches!(
                client.get_connection_info().addr(),
                ConnectionAddr::TcpTls { insecure: true, .. }
            ),
            Target::Sentinel(s) => s.reach.is_insecure(),
            Target::Cluster(c) => c.reach.is_insecure(),
        }
    }

    pub(crate) fn is_sentinel(&self) -> bool {
        matches!(self, Target::Sentinel(_))
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// The worker's link: [`connect`](Target::connect)'s connection, or for a cluster, one
    /// connection per master and the slot map (see `cluster`).
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
                tenure: None,
                epoch: None,
            });
        }
        let Connected {
            conn,
            master,
            tenure,
            epoch,
        } = self.connect(connect_timeout, io_timeout)?;
        Ok(Linked {
            link: Link::Plain(conn),
            master,
            tenure,
            epoch,
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
                    tenure: None,
                    epoch: None,
                })
            }
            Target::Sentinel(s) => {
                let r = s.connect(connect_timeout, io_timeout)?;
                Ok(Connected {
                    conn: r.conn,
                    master: Some(r.master),
                    tenure: Some(r.tenure),
                    epoch: r.epoch,
                })
            }
            Target::Cluster(c) => Ok(Connected {
                conn: c.connect_any(connect_timeout, io_timeout)?,
                master: None,
                tenure: None,
                epoch: None,
            }),
        }
    }
}

/// A redis-rs client for a `redis[s]://` (or Unix socket) URL; the error quotes nothing of it.
fn open_standalone(url: &str) -> Result<redis::Client, String> {
    // A TCP URL's path, query and fragment (the database, `protocol=`, `#insecure`) never hold
    // an `@`; a Unix socket's path and `pass=` may.
    let scheme = url.trim_start().split("://").next().unwrap_or("");
    let tcp = ["redis", "rediss", "valkey", "valkeys"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s));
    if tcp && urls::at_after_host(url) {
        return Err(format!("an @ after the host: {}", urls::ENCODE));
    }
    redis::Client::open(url).map_err(|e| url_problem(url, &e))
}

/// What is wrong with a URL redis-rs refused, in plain words that quote nothing of it (a part
/// may hold a password).
fn url_problem(url: &str, e: &redis::RedisError) -> String {
    let plain = match url::Url::parse(url.trim()) {
        // The url crate's texts name the problem, never the input: "invalid port number".
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            "it does not start with redis:// or rediss://".to_owned()
        }
        Err(url::ParseError::EmptyHost) => "no host".to_owned(),
        Err(why) => why.to_string(),
        Ok(parsed) if !is_redis_scheme(parsed.scheme()) => {
            "it does not start with redis:// or rediss://".to_owned()
        }
        Ok(parsed)
            if !parsed.scheme().contains("unix") && parsed.host_str().is_none_or(str::is_empty) =>
        {
            "no host".to_owned()
        }
        Ok(_) => String::new(),
    };
    if !plain.is_empty() {
        return plain;
    }
    // redis-rs's own reason ("Invalid database number"), without its error kind or its detail,
    // which may quote part of the URL (`protocol=` …).
    let text = e.to_string();
    let text = e
        .detail()
        .and_then(|d| text.strip_suffix(d))
        .and_then(|t| t.strip_suffix(": "))
        .unwrap_or(&text);
    let reason = text.split(" - ").next().unwrap_or(text).trim();
    match reason {
        "" => "the URL is not valid".to_owned(),
        r => r.to_lowercase(),
    }
}

fn is_redis_scheme(scheme: &str) -> bool {
    ["redis", "rediss", "valkey", "valkeys", "redis+unix", "unix"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
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

/// A worker's connection to its node: one server (standalone, or a Sentinel group's master),
/// or a cluster's masters.
pub(crate) enum Link {
    Plain(redis::Connection),
    Cluster(Box<ClusterLink>),
}

impl Link {
    /// The server probe (`probe`), asking which of `scripts` the server has; for a cluster,
    /// every master's, merged (each master keeps its own answer about the scripts).
    pub(crate) fn probe(&mut self, scripts: &[&Script]) -> redis::RedisResult<Probe> {
        match self {
            Link::Plain(conn) => probe::run(conn, scripts),
            Link::Cluster(link) => link.probe(scripts),
        }
    }

    /// Loads the scripts the server lacks (`present`: which it has, from the probe), on every
    /// master.
    pub(crate) fn load_scripts(
        &mut self,
        sets: &[&[&Script]],
        present: Option<&[bool]>,
    ) -> redis::RedisResult<()> {
        match self {
            Link::Plain(conn) => wire::load_scripts(conn, sets, present),
            Link::Cluster(link) => link.load_scripts(sets),
        }
    }

    /// `PING`, on every master.
    pub(crate) fn ping(&mut self) -> redis::RedisResult<()> {
        match self {
            Link::Plain(conn) => redis::cmd("PING").query::<()>(conn),
            Link::Cluster(link) => link.ping(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_described_in_plain_words() {
        for (url, why) in [
            ("redis://", "no host"),
            ("redis://:6379", "no host"),
            ("redis://host:notaport", "invalid port number"),
            ("redis://h:99999", "invalid port number"),
            (
                "http://localhost:6379",
                "it does not start with redis:// or rediss://",
            ),
            (
                "localhost:6379",
                "it does not start with redis:// or rediss://",
            ),
            ("", "it does not start with redis:// or rediss://"),
            ("redis://h/abc", "invalid database number"),
            ("redis://h:6379/?protocol=x", "invalid protocol version"),
            ("redis://[::1", "invalid IPv6 address"),
            ("unix:///tmp/x.sock?db=x", "invalid database number"),
        ] {
            assert_eq!(open_standalone(url).err().as_deref(), Some(why), "{url:?}");
        }
    }
}
