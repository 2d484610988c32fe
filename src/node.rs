//! One long-lived worker thread per Redis node.
//!
//! The worker owns the node's blocking connection. Callers hand it [`Request`]s over a channel;
//! it takes everything queued and sends it as one pipeline, so many caller threads share one
//! connection and one round trip. A broken connection answers its requests with an error and is
//! rebuilt with capped backoff; while the node is known to be down, requests are answered at once
//! so callers never wait on it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use redis::Value;

use crate::error::NodeProblem;
use crate::quorum::Vote;
use crate::wire::{Command, Script};

/// Most requests sent in one pipeline.
const MAX_BATCH: usize = 256;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Idle this long, a connection may have been closed by the server (`timeout` counts whole
/// seconds) or a proxy: one that must carry a command not safe to resend is checked first.
const IDLE_PROBE: Duration = Duration::from_secs(1);
const WORKER_STACK: usize = 256 * 1024;

/// Where a node's answer goes: the caller's channel, tagged with the node's index.
pub(crate) struct ReplyTo {
    pub node: usize,
    pub tx: Sender<(usize, Vote)>,
}

pub(crate) struct Request {
    pub command: Command,
    pub key: Arc<str>,
    pub token: Arc<str>,
    /// When the caller stops waiting. An acquire or extend still queued then is dropped unsent,
    /// since nobody would count it. Releases carry none: they are always worth doing.
    pub deadline: Option<Instant>,
    pub reply: Option<ReplyTo>,
    /// For a cleanup (an undo or a release, sent without waiting for the answer): until when
    /// the key it removes may still be live on the node. A cleanup that finds the node down is
    /// kept and sent after the reconnect until then, rather than dropped while a key that a
    /// lost reply left behind could still block the resource.
    pub live_until: Option<Instant>,
}

impl Request {
    fn worth_keeping(&self, now: Instant) -> bool {
        // A reentrant release counts a hold: one that may have run already is not sent again.
        self.reply.is_none() && self.command.resendable && self.live_until.is_some_and(|t| t > now)
    }
}

/// A node's health as its worker last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStatus {
    /// `host:port` of the node (never with credentials).
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
    /// reported at the last connect (rounded down to whole seconds there).
    pub uptime: Option<Duration>,
    /// Restarts seen: reconnects that found a different `run_id` than the connection before.
    pub restarts: u64,
    /// With [`restart_grace`](crate::Builder::restart_grace) set: how much longer the node does
    /// not count toward an acquire quorum because its process started too recently.
    pub grace_remaining: Option<Duration>,
}

#[derive(Default)]
struct Health {
    connected: AtomicBool,
    connects: AtomicU64,
    last_error: Mutex<Option<String>>,
    identity: Mutex<Identity>,
}

/// Which server process the worker is talking to, as of the last connect.
#[derive(Default, Clone)]
struct Identity {
    run_id: Option<String>,
    /// Uptime reported at `seen`.
    uptime: Option<(Duration, Instant)>,
    restarts: u64,
    grace_until: Option<Instant>,
}

/// The caller's side of one node.
pub(crate) struct Node {
    pub address: String,
    tx: Sender<Request>,
    health: Arc<Health>,
}

impl Node {
    /// Queues a request; if the worker is gone (it never stops while this handle exists), the
    /// request's caller is answered at once.
    pub(crate) fn send(&self, request: Request) {
        if let Err(e) = self.tx.send(request) {
            answer(
                e.0,
                Vote::Failed(NodeProblem::Unavailable("worker stopped".into())),
            );
        }
    }

    pub(crate) fn status(&self) -> NodeStatus {
        let now = Instant::now();
        let identity = self
            .health
            .identity
            .lock()
            .map(|i| i.clone())
            .unwrap_or_default();
        NodeStatus {
            address: self.address.clone(),
            connected: self.health.connected.load(Ordering::Relaxed),
            connects: self.health.connects.load(Ordering::Relaxed),
            last_error: self.health.last_error.lock().map_or(None, |e| e.clone()),
            run_id: identity.run_id,
            uptime: identity
                .uptime
                .map(|(uptime, seen)| uptime + now.saturating_duration_since(seen)),
            restarts: identity.restarts,
            grace_remaining: identity
                .grace_until
                .map(|until| until.saturating_duration_since(now))
                .filter(|left| !left.is_zero()),
        }
    }
}

/// What a worker needs to know from the client's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// Connecting (TCP and handshake).
    pub connect_timeout: Duration,
    /// One read or write; past it the connection is considered broken.
    pub io_timeout: Duration,
    /// A node whose process is younger than this does not count toward acquire quorums.
    pub restart_grace: Option<Duration>,
    /// Loaded on every connection, so that `EVALSHA` finds them.
    pub scripts: &'static [&'static [&'static Script]],
}

/// The address a user sees for a node: `host:port`, plus `/db` when a database is selected.
pub(crate) fn address(info: &redis::ConnectionInfo) -> String {
    let db = info.redis_settings().db();
    if db == 0 {
        info.addr().to_string()
    } else {
        format!("{}/{db}", info.addr())
    }
}

/// Starts the worker for one node. It connects right away, says so on `ready` once that first
/// attempt is over (whatever its outcome), and stops when the returned [`Node`] (the only sender
/// of its channel) is dropped.
pub(crate) fn spawn(
    index: usize,
    client: redis::Client,
    settings: Settings,
    ready: Sender<()>,
    exited: Sender<()>,
) -> io::Result<(Node, JoinHandle<()>)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let health = Arc::new(Health::default());
    let address = address(client.get_connection_info());
    let worker = Worker {
        address: address.clone(),
        client,
        conn: None,
        rx,
        settings,
        grace_until: None,
        backoff: BACKOFF_MIN,
        retry_at: Instant::now(),
        down_reason: String::from("not connected yet"),
        closing: false,
        used_at: Instant::now(),
        health: Arc::clone(&health),
        buf: Vec::with_capacity(4096),
        deferred: Vec::new(),
        _exited: exited,
    };
    let handle = std::thread::Builder::new()
        .name(format!("redlock-node-{index}"))
        .stack_size(WORKER_STACK)
        .spawn(move || worker.run(ready))?;
    Ok((
        Node {
            address,
            tx,
            health,
        },
        handle,
    ))
}

impl Worker {
    /// Answers a request that could not be sent, or keeps it for after the reconnect.
    fn fail(&mut self, r: Request, problem: &NodeProblem, now: Instant) {
        if r.worth_keeping(now) && !self.closing {
            self.deferred.push(r);
        } else {
            answer(r, Vote::Failed(problem.clone()));
        }
    }
}

fn answer(request: Request, vote: Vote) {
    if let Some(reply) = request.reply {
        // The caller may have stopped waiting; then nobody needs this answer.
        let _ = reply.tx.try_send((reply.node, vote));
    }
}

/// The text of a connection error; a socket timeout reads "timed out", not as the OS's EAGAIN.
fn describe_connect_error(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        format!("timed out: {e}")
    } else {
        e.to_string()
    }
}

/// What to try when a connection fails in a way typical of a TLS mismatch.
fn tls_hint(e: &redis::RedisError, tls: bool) -> &'static str {
    let text = e.to_string();
    if tls && text.contains("CertificateRequired") {
        " (the node requires a client certificate: give one with tls_client_cert_file)"
    } else if tls && text.contains("certificate") {
        " (the node's TLS certificate was not accepted: give its CA with tls_ca_file, and \
         connect by a host name or IP address the certificate names)"
    } else if !tls && e.is_connection_dropped() && !e.is_connection_refusal() {
        " (if the node serves TLS on this port, use a rediss:// URL)"
    } else {
        ""
    }
}

fn describe(e: &redis::RedisError) -> NodeProblem {
    if e.is_timeout() {
        NodeProblem::TimedOut
    } else {
        NodeProblem::Unavailable(e.to_string())
    }
}

struct Worker {
    address: String,
    client: redis::Client,
    conn: Option<redis::Connection>,
    rx: Receiver<Request>,
    settings: Settings,
    /// Until then, with `restart_grace` set, this node's acquire successes do not count.
    grace_until: Option<Instant>,
    backoff: Duration,
    /// While down: no connection attempt before this.
    retry_at: Instant,
    down_reason: String,
    /// Every sender is gone: the client was dropped and only queued requests remain.
    closing: bool,
    /// When the connection last carried a command (or was opened).
    used_at: Instant,
    health: Arc<Health>,
    buf: Vec<u8>,
    /// Cleanups that found the node down, sent once it is back (see `Request::live_until`).
    deferred: Vec<Request>,
    /// Dropped when the thread ends, which the client's drop waits for.
    _exited: Sender<()>,
}

impl Worker {
    fn run(mut self, ready: Sender<()>) {
        self.connect();
        let _ = ready.send(());
        drop(ready);
        let mut batch = Vec::new();
        loop {
            // Receiving fails only once every sender is gone: the client was dropped, and its
            // deferred cleanups go with it (their keys expire with the TTL).
            let first = if self.deferred.is_empty() {
                self.rx.recv().map_err(|_| ())
            } else {
                match self.rx.recv_deadline(self.retry_at) {
                    Ok(r) => Ok(r),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        self.serve(&mut batch);
                        continue;
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(()),
                }
            };
            let Ok(first) = first else { break };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match self.rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.closing = true;
                        break;
                    }
                }
            }
            self.serve(&mut batch);
            batch.clear();
        }
    }

    fn serve(&mut self, batch: &mut Vec<Request>) {
        let now = Instant::now();
        batch.retain(|r| r.deadline.is_none_or(|d| d > now));
        self.deferred.retain(|r| r.worth_keeping(now));
        if batch.is_empty() && (self.deferred.is_empty() || now < self.retry_at) {
            return;
        }
        // A closing client's last releases go out on a live connection, but are not worth
        // reconnecting for: their keys expire with the TTL.
        if self.conn.is_none() && now >= self.retry_at && !self.closing {
            self.connect();
        }
        if self.conn.is_none() {
            let problem = NodeProblem::Unavailable(self.down_reason.clone());
            for r in batch.drain(..) {
                self.fail(r, &problem, now);
            }
            return;
        }
        batch.append(&mut self.deferred);
        // Reentrant acquires and releases count holds, so unlike the rest they cannot be resent
        // when their connection turns out closed. A connection idle long enough to have been
        // closed is checked with a PING before it carries one; only a close in between remains.
        if self.used_at.elapsed() >= IDLE_PROBE
            && batch.iter().any(|r| !r.command.resendable)
            && let Err(e) = self.probe()
        {
            let mut problem = describe(&e);
            self.disconnect(&e);
            if e.is_connection_dropped() && !e.is_timeout() {
                self.connect();
                problem = NodeProblem::Unavailable(self.down_reason.clone());
            }
            if self.conn.is_none() {
                let now = Instant::now();
                for r in batch.drain(..) {
                    self.fail(r, &problem, now);
                }
                return;
            }
        }
        self.execute_and_answer(batch, true);
    }

    fn probe(&mut self) -> redis::RedisResult<()> {
        let conn = self
            .conn
            .as_mut()
            .expect("probe is called with a connection");
        redis::cmd("PING").query::<()>(conn)?;
        self.used_at = Instant::now();
        Ok(())
    }

    /// Runs the batch on the connection and answers every request. With `resend`, a connection
    /// found closed (the server's idle `timeout`, a proxy, `CLIENT KILL`, a restart) is replaced
    /// at once and what is safe to send twice goes out again, so that a lock held across an
    /// idle spell still releases (or extends) instead of failing on every node at once.
    fn execute_and_answer(&mut self, batch: &mut Vec<Request>, resend: bool) {
        match self.execute(batch) {
            Ok(votes) => {
                let now = Instant::now();
                self.used_at = now;
                let grace_left = self
                    .grace_until
                    .map(|until| until.saturating_duration_since(now))
                    .filter(|left| !left.is_zero());
                for (r, vote) in batch.drain(..).zip(votes) {
                    // The key stays on the node (and is released with the lock): it is only not
                    // counted, since a young process may have lost another owner's key. (An
                    // uncounted reentrant hold there is not released but expires with its TTL.)
                    let vote = match (grace_left, vote) {
                        (Some(remaining), Vote::Yes | Vote::Value(_)) if r.command.acquire => {
                            Vote::Failed(NodeProblem::InGrace { remaining })
                        }
                        // Resent after the connection dropped: a refusal may be our own first
                        // copy's key, so it is no definite "no" (which would skip the undo).
                        (_, Vote::No) if r.command.acquire && !resend => {
                            Vote::Failed(NodeProblem::Unavailable(
                                "connection dropped; the resent acquire was refused, perhaps by \
                                 its own first copy"
                                    .into(),
                            ))
                        }
                        (_, vote) => vote,
                    };
                    answer(r, vote);
                }
            }
            Err(e) => {
                let problem = describe(&e);
                self.disconnect(&e);
                if resend && e.is_connection_dropped() && !e.is_timeout() {
                    let now = Instant::now();
                    let (mut again, lost): (Vec<_>, Vec<_>) = batch
                        .drain(..)
                        .partition(|r| r.command.resendable && r.deadline.is_none_or(|d| d > now));
                    for r in lost {
                        answer(r, Vote::Failed(problem.clone()));
                    }
                    if again.is_empty() {
                        return;
                    }
                    self.connect();
                    if self.conn.is_some() {
                        self.execute_and_answer(&mut again, false);
                    } else {
                        let problem = NodeProblem::Unavailable(self.down_reason.clone());
                        for r in again {
                            self.fail(r, &problem, now);
                        }
                    }
                    return;
                }
                // A hung node may still run what it had read once it resumes.
                let now = Instant::now();
                for r in batch.drain(..) {
                    self.fail(r, &problem, now);
                }
            }
        }
    }

    /// Sends the batch as one pipeline; a `NOSCRIPT` reply (restart, `SCRIPT FLUSH`, failover)
    /// reloads the scripts and resends those commands once.
    fn execute(&mut self, batch: &[Request]) -> redis::RedisResult<Vec<Vote>> {
        let conn = self
            .conn
            .as_mut()
            .expect("execute is called with a connection");
        let mut values = pipeline(conn, &mut self.buf, batch.iter())?;
        let noscript: Vec<usize> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT"))
            .map(|(i, _)| i)
            .collect();
        if !noscript.is_empty() {
            load_scripts(conn, self.settings.scripts)?;
            let again = pipeline(conn, &mut self.buf, noscript.iter().map(|&i| &batch[i]))?;
            for (i, v) in noscript.into_iter().zip(again) {
                values[i] = v;
            }
        }
        Ok(values
            .into_iter()
            .zip(batch)
            .map(|(v, r)| r.command.interpret(v))
            .collect())
    }

    fn connect(&mut self) {
        match self.open() {
            Ok((conn, info)) => {
                self.observe(info);
                self.conn = Some(conn);
                self.used_at = Instant::now();
                self.backoff = BACKOFF_MIN;
                self.health.connected.store(true, Ordering::Relaxed);
                self.health.connects.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let tls = matches!(
                    self.client.get_connection_info().addr(),
                    redis::ConnectionAddr::TcpTls { .. }
                );
                self.down_reason = describe_connect_error(&e) + tls_hint(&e, tls);
                // Counted from the end of the attempt, which can itself take a timeout.
                self.retry_at = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                if let Ok(mut last) = self.health.last_error.lock() {
                    *last = Some(self.down_reason.clone());
                }
            }
        }
    }

    fn open(&self) -> redis::RedisResult<(redis::Connection, Option<ServerInfo>)> {
        let mut conn = self
            .client
            .get_connection_with_timeout(self.settings.connect_timeout)?;
        conn.set_read_timeout(Some(self.settings.io_timeout))?;
        conn.set_write_timeout(Some(self.settings.io_timeout))?;
        load_scripts(&mut conn, self.settings.scripts)?;
        let info = match server_info(&mut conn) {
            Ok(info) => Some(info),
            Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
                return Err(e);
            }
            // Without a grace period the identity is only informative: a server that denies or
            // renames INFO (a tight ACL, a managed service) is still usable.
            Err(e) if self.settings.restart_grace.is_none() => {
                self.note_error(&e);
                None
            }
            Err(e) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "restart_grace needs the node's uptime, but INFO server failed",
                    format!("{e}; allow INFO for this user (+info), or unset restart_grace"),
                )));
            }
        };
        Ok((conn, info))
    }

    /// Records which server process this connection reached, and notices restarts.
    fn observe(&mut self, info: Option<ServerInfo>) {
        let now = Instant::now();
        let Ok(mut identity) = self.health.identity.lock() else {
            return;
        };
        let Some(info) = info else {
            identity.run_id = None;
            identity.uptime = None;
            return;
        };
        let previous = identity.run_id.take();
        if let Some(old) = previous.filter(|old| *old != info.run_id) {
            identity.restarts += 1;
            log::warn!(
                "redlock: node {} restarted (run_id {old} -> {}, up {} s){}",
                self.address,
                info.run_id,
                info.uptime.as_secs(),
                if self.settings.restart_grace.is_some() {
                    ""
                } else {
                    "; if it runs without persistence it may have lost lock keys: \
                     consider restart_grace"
                }
            );
        }
        // The reported uptime is rounded down and a little old by now, so the process started
        // no later than `now - uptime`: the grace ends no earlier than it should.
        self.grace_until = self
            .settings
            .restart_grace
            .and_then(|grace| grace.checked_sub(info.uptime))
            .filter(|left| !left.is_zero())
            .map(|left| now + left);
        identity.grace_until = self.grace_until;
        identity.uptime = Some((info.uptime, now));
        identity.run_id = Some(info.run_id);
    }

    /// Drops a broken connection; the next request tries to reconnect at once.
    fn disconnect(&mut self, e: &redis::RedisError) {
        self.conn = None;
        self.down_reason = describe_connect_error(e);
        self.retry_at = Instant::now();
        self.health.connected.store(false, Ordering::Relaxed);
        self.note_error(e);
    }

    fn note_error(&self, e: &redis::RedisError) {
        if let Ok(mut last) = self.health.last_error.lock() {
            *last = Some(e.to_string());
        }
    }
}

/// What `INFO server` tells about the server process.
#[derive(Debug, PartialEq, Eq)]
struct ServerInfo {
    run_id: String,
    uptime: Duration,
}

fn server_info(conn: &mut redis::Connection) -> redis::RedisResult<ServerInfo> {
    let text: String = redis::cmd("INFO").arg("server").query(conn)?;
    parse_server_info(&text).ok_or_else(|| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "INFO server lacks run_id or uptime_in_seconds",
        ))
    })
}

fn parse_server_info(text: &str) -> Option<ServerInfo> {
    let mut run_id = None;
    let mut uptime = None;
    for line in text.lines() {
        match line.trim_end().split_once(':') {
            Some(("run_id", v)) if !v.is_empty() => run_id = Some(v.to_owned()),
            Some(("uptime_in_seconds", v)) => uptime = v.parse().ok().map(Duration::from_secs),
            _ => {}
        }
    }
    Some(ServerInfo {
        run_id: run_id?,
        uptime: uptime?,
    })
}

/// Sends the requests as one pipeline and reads their replies. The first failed read ends it:
/// after a timeout the connection is out of step and gets dropped, and reading on (as
/// redis-rs's `req_packed_commands` does) would cost one more timeout per queued request.
fn pipeline<'a>(
    conn: &mut redis::Connection,
    buf: &mut Vec<u8>,
    requests: impl Iterator<Item = &'a Request>,
) -> redis::RedisResult<Vec<Value>> {
    buf.clear();
    let mut count = 0;
    for r in requests {
        r.command.write_resp(&r.key, &r.token, buf);
        count += 1;
    }
    conn.send_packed_command(buf)?;
    let mut values = Vec::with_capacity(count);
    while values.len() < count {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value => values.push(value),
        }
    }
    Ok(values)
}

/// Loads every script in one round trip.
fn load_scripts(conn: &mut redis::Connection, sets: &[&[&Script]]) -> redis::RedisResult<()> {
    let scripts = || sets.iter().flat_map(|set| set.iter());
    let mut pipe = redis::pipe();
    for script in scripts() {
        pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
    }
    let shas: Vec<String> = pipe.query(conn)?;
    for (script, sha) in scripts().zip(shas) {
        if sha != script.sha() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "SCRIPT LOAD returned an unexpected hash",
                sha,
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_info_server() {
        let text = "# Server\r\nredis_version:7.0.15\r\nrun_id:4f1c0e\r\ntcp_port:7000\r\n\
                    uptime_in_seconds:42\r\nuptime_in_days:0\r\n";
        assert_eq!(
            parse_server_info(text),
            Some(ServerInfo {
                run_id: "4f1c0e".into(),
                uptime: Duration::from_secs(42)
            })
        );
        assert_eq!(parse_server_info("# Server\r\nrun_id:x\r\n"), None);
        assert_eq!(
            parse_server_info("uptime_in_seconds:1\r\nrun_id:\r\n"),
            None
        );
        assert_eq!(parse_server_info(""), None);
    }
}
