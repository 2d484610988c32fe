//! The key probe of a client process: after each acquisition call that gave no lock (failed or
//! cancelled) and after each release, it looks behind the library's back, with connections of
//! its own, for a key of that acquisition on every lock node, `NODE_TIMEOUT` after the call
//! returned. A key it finds is watched until it goes: removed while it still had time to live (a
//! cleanup that came late, say on a starved machine), or left to expire (a leak: nothing removed
//! it). Each sighting is logged as a `K` line for the checker, which excuses nodes that were down,
//! hung or cut off from this client during the call. The probe connects to the nodes directly,
//! not through the client's relays: it observes the nodes, it is not a client under test.
//!
//! Tokens are known exactly: a released lock's from [`Lock::token`](redquorum::Lock::token), and a
//! cancellable wait's because it is a reentrant request whose owner (its token) the client
//! chooses, or a read-write or semaphore request given a token of its own, unique per call,
//! with the hidden `LockRequest::token_for_tests`. A plain attempt that gives no lock returns
//! no token, so its keys cannot be told from the next holder's; those waits stand in for it.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::{MS, NODE_TIMEOUT, TTL_MAX_MS, now_ns};

/// How a lock's key holds its token on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `GET resource == token`.
    Plain,
    /// `HEXISTS resource owner`.
    Reentrant,
    /// `ZSCORE resource token`: a reader of a read-write lock.
    Reader,
    /// `GET redlock:sem:{resource}:i == token` for some slot `i`: a semaphore wait that gave
    /// no permit (which slot it tried is unknown).
    Slots,
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Plain => "plain",
            KeyKind::Reentrant => "reentrant",
            KeyKind::Reader => "reader",
            KeyKind::Slots => "slots",
        }
    }
}

/// One finished call to look after.
pub struct Probe {
    pub kind: KeyKind,
    pub resource: String,
    pub token: String,
    /// When the acquisition began (keys can have been set from then on) and when the call that
    /// ended it (the failed acquire, or the release) returned.
    pub start: u64,
    pub end: u64,
    /// The call that finished it and how it ended, e.g. `release:no_quorum`, `wait:cancelled`.
    pub call: String,
}

/// A probe is answered within this long, or the node counts as unreachable for it.
const IO_TIMEOUT: Duration = Duration::from_millis(40);
/// How often a sighted key is looked at again.
const WATCH_EVERY: Duration = Duration::from_millis(5);
/// A key vanishing with at least this much of its PTTL left was removed, not expired.
const REMOVED_MARGIN_MS: i64 = 15;
/// A key still there this long after it was first seen never expires: a leak too.
const WATCH_LIMIT_NS: u64 = (TTL_MAX_MS + 500) * MS;

/// Connections of the probe's own to every lock node, rebuilt after an error.
struct Nodes {
    urls: Vec<String>,
    conns: Vec<Option<redis::Connection>>,
    /// Per node: for a cluster node (`redis+cluster://`), the `host:port` of each of its
    /// processes (the URL's host and seeds), to follow its failovers with.
    cluster: Vec<Option<Vec<String>>>,
    /// A cluster node's processes asked last for a resource (whose keys share one slot), and
    /// connections to them by `host:port`.
    routes: std::collections::HashMap<(usize, String), String>,
    by_addr: std::collections::HashMap<String, redis::Connection>,
}

/// The processes a `redis+cluster://host:port?seed=host:port&…` URL names, or `None` for
/// another URL.
fn cluster_addrs(url: &str) -> Option<Vec<String>> {
    let rest = url.strip_prefix("redis+cluster://")?;
    let (first, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut addrs = vec![first.trim_end_matches('/').to_owned()];
    addrs.extend(
        query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("seed="))
            .map(str::to_owned),
    );
    Some(addrs)
}

/// The master's name and the sentinels a `redis+sentinel://host:port/NAME?sentinel=…` URL
/// names, or `None` for another URL.
fn sentinel_addrs(url: &str) -> Option<(String, Vec<String>)> {
    let rest = url.strip_prefix("redis+sentinel://")?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (first, name) = path.split_once('/')?;
    let mut addrs = vec![first.to_owned()];
    addrs.extend(
        query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("sentinel="))
            .map(str::to_owned),
    );
    Some((name.to_owned(), addrs))
}

fn open(addr: &str) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://{addr}")).ok()?;
    let conn = client.get_connection_with_timeout(IO_TIMEOUT).ok()?;
    conn.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
    conn.set_write_timeout(Some(IO_TIMEOUT)).ok()?;
    Some(conn)
}

/// What a node said about one token.
enum Seen {
    Absent,
    /// Present, with this PTTL (ms).
    Present(i64),
    Unreachable,
}

impl Nodes {
    fn conn(&mut self, n: usize) -> Option<&mut redis::Connection> {
        if self.conns[n].is_none() {
            let client = redis::Client::open(self.urls[n].as_str()).ok()?;
            let conn = client.get_connection_with_timeout(IO_TIMEOUT).ok()?;
            conn.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
            conn.set_write_timeout(Some(IO_TIMEOUT)).ok()?;
            self.conns[n] = Some(conn);
        }
        self.conns[n].as_mut()
    }

    fn look(&mut self, n: usize, kind: KeyKind, resource: &str, token: &str) -> Seen {
        if let Some(addrs) = self.cluster[n].clone() {
            return self.look_in_cluster(n, &addrs, kind, resource, token);
        }
        if let Some((name, sentinels)) = sentinel_addrs(&self.urls[n]) {
            return self.look_in_group(&name, &sentinels, kind, resource, token);
        }
        let Some(conn) = self.conn(n) else {
            return Seen::Unreachable;
        };
        let answer = pipeline(kind, resource, token).query::<Vec<redis::Value>>(conn);
        match answer {
            Ok(replies) => seen(kind, token, &replies),
            // The other kind's key (WRONGTYPE) is not ours.
            Err(e) if e.code() == Some("WRONGTYPE") => Seen::Absent,
            Err(_) => {
                // A reply may still come on this connection: never reuse it.
                self.conns[n] = None;
                Seen::Unreachable
            }
        }
    }

    /// `look` on a Sentinel node: on the master the first sentinel that answers names (after a
    /// switch, the new one: the old master may keep keys it alone had until its demotion, which
    /// no client reads).
    fn look_in_group(
        &mut self,
        name: &str,
        sentinels: &[String],
        kind: KeyKind,
        resource: &str,
        token: &str,
    ) -> Seen {
        let conn = |addr: &str, by_addr: &mut std::collections::HashMap<_, _>| {
            if !by_addr.contains_key(addr)
                && let Some(c) = open(addr)
            {
                by_addr.insert(addr.to_owned(), c);
            }
            by_addr.get_mut(addr).is_some()
        };
        let mut master = None;
        for s in sentinels {
            if !conn(s, &mut self.by_addr) {
                continue;
            }
            let asked = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(name)
                .query::<Option<(String, u16)>>(self.by_addr.get_mut(s).expect("connected"));
            match asked {
                Ok(Some((host, port))) => {
                    master = Some(format!("{host}:{port}"));
                    break;
                }
                Ok(None) => {}
                Err(_) => {
                    self.by_addr.remove(s);
                }
            }
        }
        let Some(at) = master else {
            return Seen::Unreachable;
        };
        if !conn(&at, &mut self.by_addr) {
            return Seen::Unreachable;
        }
        let answer = pipeline(kind, resource, token)
            .query::<Vec<redis::Value>>(self.by_addr.get_mut(&at).expect("connected"));
        match answer {
            Ok(replies) => seen(kind, token, &replies),
            Err(e) if e.code() == Some("WRONGTYPE") => Seen::Absent,
            Err(_) => {
                self.by_addr.remove(&at);
                Seen::Unreachable
            }
        }
    }

    /// `look` on a cluster node: on the master of the resource's slot, found by following
    /// `MOVED` from the process asked last (the URL's host at first), or the next process when
    /// one does not answer (stopped, killed): a few tries, each within `IO_TIMEOUT`.
    fn look_in_cluster(
        &mut self,
        n: usize,
        addrs: &[String],
        kind: KeyKind,
        resource: &str,
        token: &str,
    ) -> Seen {
        let route = (n, resource.to_owned());
        let mut at = self
            .routes
            .get(&route)
            .cloned()
            .unwrap_or_else(|| addrs[0].clone());
        let mut pipe = pipeline(kind, resource, token);
        pipe.ignore_errors();
        for _ in 0..4 {
            if !self.by_addr.contains_key(&at)
                && let Some(conn) = open(&at)
            {
                self.by_addr.insert(at.clone(), conn);
            }
            let answer = match self.by_addr.get_mut(&at) {
                Some(conn) => pipe.query::<Vec<redis::Value>>(conn),
                None => Err(redis::RedisError::from(std::io::Error::other(
                    "no connection",
                ))),
            };
            let moved = answer.as_ref().ok().and_then(|replies| {
                replies.iter().find_map(|r| match r {
                    redis::Value::ServerError(e) if e.code() == "MOVED" => {
                        Some(e.details()?.split_whitespace().nth(1)?.to_owned())
                    }
                    _ => None,
                })
            });
            match (answer, moved) {
                (Ok(_), Some(to)) => at = to,
                (Ok(replies), None) => {
                    if replies
                        .iter()
                        .any(|r| matches!(r, redis::Value::ServerError(_)))
                    {
                        // WRONGTYPE: the other kind's key, not ours; anything else (a
                        // failover under way: CLUSTERDOWN, TRYAGAIN): unknown.
                        return if replies.iter().any(|r| {
                            matches!(r, redis::Value::ServerError(e) if e.code() == "WRONGTYPE")
                        }) {
                            Seen::Absent
                        } else {
                            Seen::Unreachable
                        };
                    }
                    self.routes.insert(route, at);
                    return seen(kind, token, &replies);
                }
                (Err(_), _) => {
                    // A reply may still come on this connection: never reuse it.
                    self.by_addr.remove(&at);
                    let next = addrs.iter().position(|a| *a == at).map_or(0, |i| i + 1);
                    at = addrs[next % addrs.len()].clone();
                }
            }
        }
        Seen::Unreachable
    }
}

/// One round trip: for each of the resource's keys, whether it holds the token, and its PTTL.
fn pipeline(kind: KeyKind, resource: &str, token: &str) -> redis::Pipeline {
    let keys: Vec<String> = match kind {
        KeyKind::Slots => (0..crate::kinds::PERMITS)
            .map(|i| format!("redlock:sem:{{{resource}}}:{i}"))
            .collect(),
        _ => vec![resource.to_owned()],
    };
    let mut pipe = redis::pipe();
    for key in &keys {
        match kind {
            KeyKind::Plain | KeyKind::Slots => pipe.cmd("GET").arg(key),
            KeyKind::Reentrant => pipe.cmd("HEXISTS").arg(key).arg(token),
            KeyKind::Reader => pipe.cmd("ZSCORE").arg(key).arg(token),
        };
        pipe.cmd("PTTL").arg(key);
    }
    pipe
}

/// What the replies of `pipeline` say about the token.
fn seen(kind: KeyKind, token: &str, replies: &[redis::Value]) -> Seen {
    let pairs = replies.chunks(2).map(|r| {
        let pttl = match r.get(1) {
            Some(redis::Value::Int(ms)) => *ms,
            _ => -3,
        };
        (r[0].clone(), pttl)
    });
    let holding = pairs.into_iter().find(|(value, _)| match (kind, value) {
        (KeyKind::Plain | KeyKind::Slots, redis::Value::BulkString(v)) => v == token.as_bytes(),
        (KeyKind::Reentrant, redis::Value::Int(1)) => true,
        (KeyKind::Reader, v) => *v != redis::Value::Nil,
        _ => false,
    });
    match holding {
        Some((_, pttl)) => Seen::Present(pttl),
        None => Seen::Absent,
    }
}

/// A key found after its call, being watched until it goes.
struct Watch {
    probe_at: usize,
    node: usize,
    first_seen: u64,
    first_pttl: i64,
    last_seen: u64,
    last_pttl: i64,
}

/// Runs until `probes` closes and every probe is done; gives its log lines.
pub fn run(client: usize, urls: Vec<String>, probes: Receiver<Probe>) -> Vec<String> {
    let mut nodes = Nodes {
        conns: urls.iter().map(|_| None).collect(),
        cluster: urls.iter().map(|u| cluster_addrs(u)).collect(),
        routes: std::collections::HashMap::new(),
        by_addr: std::collections::HashMap::new(),
        urls,
    };
    let mut log = Vec::new();
    let mut queue: std::collections::VecDeque<Probe> = std::collections::VecDeque::new();
    let mut kept: Vec<Probe> = Vec::new();
    let mut watches: Vec<Watch> = Vec::new();
    let mut closed = false;
    let (mut probed, mut unreachable) = (0u64, 0u64);
    while !(closed && queue.is_empty() && watches.is_empty()) {
        // Take new probes, waiting no longer than the next thing to do.
        let next_due = queue
            .front()
            .map(|p| p.end + NODE_TIMEOUT.as_nanos() as u64);
        let wait = if !watches.is_empty() {
            WATCH_EVERY
        } else if let Some(due) = next_due {
            Duration::from_nanos(due.saturating_sub(now_ns()))
        } else {
            Duration::from_millis(50)
        };
        if !closed {
            match probes.recv_timeout(wait) {
                Ok(p) => queue.push_back(p),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => closed = true,
            }
            while let Ok(p) = probes.try_recv() {
                queue.push_back(p);
            }
        } else {
            std::thread::sleep(wait.min(WATCH_EVERY));
        }
        // Due probes: every node, once.
        while let Some(p) = queue.front() {
            if now_ns() < p.end + NODE_TIMEOUT.as_nanos() as u64 {
                break;
            }
            let p = queue.pop_front().expect("front");
            probed += 1;
            for n in 0..nodes.urls.len() {
                let at = now_ns();
                match nodes.look(n, p.kind, &p.resource, &p.token) {
                    Seen::Absent => {}
                    Seen::Unreachable => unreachable += 1,
                    Seen::Present(pttl) => watches.push(Watch {
                        probe_at: kept.len(),
                        node: n,
                        first_seen: at,
                        first_pttl: pttl,
                        last_seen: at,
                        last_pttl: pttl,
                    }),
                }
            }
            if watches.iter().any(|w| w.probe_at == kept.len()) {
                kept.push(p);
            }
        }
        // Watched keys: gone yet, and how?
        watches.retain_mut(|w| {
            let p = &kept[w.probe_at];
            let at = now_ns();
            let seen = nodes.look(w.node, p.kind, &p.resource, &p.token);
            let (gone, how) = match seen {
                Seen::Present(pttl) => {
                    w.last_seen = at;
                    w.last_pttl = pttl;
                    if at - w.first_seen > WATCH_LIMIT_NS {
                        (at, "stayed")
                    } else {
                        return true;
                    }
                }
                Seen::Absent => {
                    let left = w.last_pttl - ((at - w.last_seen) / MS) as i64;
                    (
                        at,
                        if left >= REMOVED_MARGIN_MS {
                            "removed"
                        } else {
                            "expired"
                        },
                    )
                }
                // Hung or down now: it may have been removed or not; the checker decides by the
                // outages.
                Seen::Unreachable => (at, "unreachable"),
            };
            log.push(format!(
                "K {client} {} {} {} {} {} {} {} {} {} {gone} {how} {}",
                p.kind.name(),
                p.resource,
                p.token,
                w.node,
                p.start,
                p.end,
                w.first_seen,
                w.first_pttl,
                w.last_pttl,
                p.call,
            ));
            false
        });
    }
    log.push(format!("P {client} {probed} {unreachable}"));
    log
}
