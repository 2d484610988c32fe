//! One long-lived worker thread per Redis node.
//!
//! The worker owns the node's blocking connection. Callers hand it [`Request`]s over a channel;
//! it takes everything queued and sends it as one pipeline, so many caller threads share one
//! connection and one round trip. A broken connection answers its requests with an error and is
//! rebuilt with capped backoff; while the node is known to be down, requests are answered at once
//! so callers never wait on it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use redis::Value;

use crate::error::NodeProblem;
use crate::quorum::Vote;

/// Compare-and-delete: removes the key only while it holds our token, and then publishes on
/// `redlock:released:<key>` with the token (see `notify.rs`: the token groups the N nodes'
/// announcements of one release), so that waiters wake at once instead of polling.
/// Subscribers receive it only after the script has ended, so they never see the key yet.
const RELEASE_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
    redis.call("publish", "redlock:released:" .. KEYS[1], ARGV[1])
    return redis.call("del", KEYS[1])
else
    return 0
end"#;

/// Compare-and-delete without an announcement: undoes a failed acquisition. Publishing there
/// would wake a waiter for a resource that is still held, whose own failed attempt would wake
/// the next one, and so on.
const UNDO_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end"#;

/// Compare-and-pexpire: sets a new TTL only while the key holds our token; never deletes.
const EXTEND_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
else
    return 0
end"#;

/// A Lua script and its SHA1, which `EVALSHA` names it by.
struct Script {
    source: &'static str,
    sha: String,
}

impl Script {
    fn new(source: &'static str) -> Self {
        let sha = redis::Script::new(source).get_hash().to_owned();
        Script { source, sha }
    }
}

static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SCRIPT));
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_SCRIPT));
static UNDO: LazyLock<Script> = LazyLock::new(|| Script::new(UNDO_SCRIPT));

/// Most requests sent in one pipeline.
const MAX_BATCH: usize = 256;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const WORKER_STACK: usize = 256 * 1024;

/// What to do on the node.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Command {
    /// `SET key token NX PX ttl`
    Acquire { ttl_ms: u64 },
    /// Compare-and-pexpire.
    Extend { ttl_ms: u64 },
    /// Compare-and-delete, announced to waiters.
    Release,
    /// Compare-and-delete of a failed acquisition, not announced.
    Undo,
}

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
}

#[derive(Default)]
struct Health {
    connected: AtomicBool,
    connects: AtomicU64,
    last_error: Mutex<Option<String>>,
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
        NodeStatus {
            address: self.address.clone(),
            connected: self.health.connected.load(Ordering::Relaxed),
            connects: self.health.connects.load(Ordering::Relaxed),
            last_error: self.health.last_error.lock().map_or(None, |e| e.clone()),
        }
    }
}

/// Timeouts for the worker's socket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Connecting (TCP and handshake).
    pub connect: Duration,
    /// One read or write; past it the connection is considered broken.
    pub io: Duration,
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
    timeouts: Timeouts,
    ready: Sender<()>,
    exited: Sender<()>,
) -> io::Result<(Node, JoinHandle<()>)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let health = Arc::new(Health::default());
    let address = address(client.get_connection_info());
    let worker = Worker {
        client,
        conn: None,
        rx,
        timeouts,
        backoff: BACKOFF_MIN,
        retry_at: Instant::now(),
        down_reason: String::from("not connected yet"),
        closing: false,
        health: Arc::clone(&health),
        buf: Vec::with_capacity(4096),
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

fn describe(e: &redis::RedisError) -> NodeProblem {
    if e.is_timeout() {
        NodeProblem::TimedOut
    } else {
        NodeProblem::Unavailable(e.to_string())
    }
}

struct Worker {
    client: redis::Client,
    conn: Option<redis::Connection>,
    rx: Receiver<Request>,
    timeouts: Timeouts,
    backoff: Duration,
    /// While down: no connection attempt before this.
    retry_at: Instant,
    down_reason: String,
    /// Every sender is gone: the client was dropped and only queued requests remain.
    closing: bool,
    health: Arc<Health>,
    buf: Vec<u8>,
    /// Dropped when the thread ends, which the client's drop waits for.
    _exited: Sender<()>,
}

impl Worker {
    fn run(mut self, ready: Sender<()>) {
        self.connect();
        let _ = ready.send(());
        drop(ready);
        let mut batch = Vec::new();
        // `recv` fails only once every sender is gone: the client was dropped.
        while let Ok(first) = self.rx.recv() {
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
        if batch.is_empty() {
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
                answer(r, Vote::Failed(problem.clone()));
            }
            return;
        }
        match self.execute(batch) {
            Ok(votes) => {
                for (r, vote) in batch.drain(..).zip(votes) {
                    answer(r, vote);
                }
            }
            Err(e) => {
                let problem = describe(&e);
                self.disconnect(&e);
                for r in batch.drain(..) {
                    answer(r, Vote::Failed(problem.clone()));
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
            load_scripts(conn)?;
            let again = pipeline(conn, &mut self.buf, noscript.iter().map(|&i| &batch[i]))?;
            for (i, v) in noscript.into_iter().zip(again) {
                values[i] = v;
            }
        }
        Ok(values
            .into_iter()
            .zip(batch)
            .map(|(v, r)| interpret(r.command, v))
            .collect())
    }

    fn connect(&mut self) {
        match self.open() {
            Ok(conn) => {
                self.conn = Some(conn);
                self.backoff = BACKOFF_MIN;
                self.health.connected.store(true, Ordering::Relaxed);
                self.health.connects.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.down_reason = describe_connect_error(&e);
                // Counted from the end of the attempt, which can itself take a timeout.
                self.retry_at = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                self.note_error(&e);
            }
        }
    }

    fn open(&self) -> redis::RedisResult<redis::Connection> {
        let mut conn = self
            .client
            .get_connection_with_timeout(self.timeouts.connect)?;
        conn.set_read_timeout(Some(self.timeouts.io))?;
        conn.set_write_timeout(Some(self.timeouts.io))?;
        load_scripts(&mut conn)?;
        Ok(conn)
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

fn command(r: &Request) -> redis::Cmd {
    match r.command {
        Command::Acquire { ttl_ms } => {
            let mut c = redis::cmd("SET");
            c.arg(&*r.key)
                .arg(&*r.token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms);
            c
        }
        Command::Extend { ttl_ms } => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&EXTEND.sha)
                .arg(1)
                .arg(&*r.key)
                .arg(&*r.token)
                .arg(ttl_ms);
            c
        }
        Command::Release => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&RELEASE.sha).arg(1).arg(&*r.key).arg(&*r.token);
            c
        }
        Command::Undo => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&UNDO.sha).arg(1).arg(&*r.key).arg(&*r.token);
            c
        }
    }
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
        command(r).write_packed_command(buf);
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

fn load_scripts(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    for script in [&*RELEASE, &*EXTEND, &*UNDO] {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source)
            .query(conn)?;
        if sha != script.sha {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "SCRIPT LOAD returned an unexpected hash",
                sha,
            )));
        }
    }
    Ok(())
}

fn interpret(command: Command, value: Value) -> Vote {
    match (command, value) {
        (Command::Acquire { .. }, Value::Okay) => Vote::Yes,
        (Command::Acquire { .. }, Value::Nil) => Vote::No,
        (Command::Extend { .. } | Command::Release | Command::Undo, Value::Int(1)) => Vote::Yes,
        (Command::Extend { .. } | Command::Release | Command::Undo, Value::Int(0)) => Vote::No,
        (_, Value::ServerError(e)) => Vote::Failed(NodeProblem::Server(match e.details() {
            Some(details) => format!("{} {details}", e.code()),
            None => e.code().to_owned(),
        })),
        (_, other) => Vote::Failed(NodeProblem::Server(format!("unexpected reply {other:?}"))),
    }
}
