//! One long-lived worker thread per Redis node.
//!
//! The worker owns the node's blocking connection. Callers hand it [`Request`]s over a channel;
//! it takes everything queued (waiting a few microseconds for the callers it just answered, see
//! `Worker::gather`) and sends it as one pipeline, so many caller threads share one connection
//! and one round trip. A broken connection answers its requests with an error and is
//! rebuilt with capped backoff; while the node is known to be down, requests are answered at once
//! so callers never wait on it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use redis::Value;

use crate::error::NodeProblem;
use crate::rules::clock::{self, ClockBoard, Event, Guard, Readings, TIME_COMMAND, TimeReading};
use crate::rules::quorum::{Gate, Vote};
use crate::sync::relock;
use crate::telemetry::NodeStatus;
use crate::telemetry::histogram::AtomicHistogram;
use crate::topology::probe::{self, Probe};
use crate::topology::{
    ClusterLink, Link, Linked, Routed, Target, Tenure, Verdict, WATCH_INTERVAL, WaitFor, Waited,
    Watch,
};
use crate::wire::{Command, Script, load_scripts};

/// Most requests sent in one pipeline.
const MAX_BATCH: usize = 256;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Idle this long, a connection may have been closed by the server (`timeout` counts whole
/// seconds) or a proxy: one that must carry a command not safe to resend is checked first.
const IDLE_PROBE: Duration = Duration::from_secs(1);
const WORKER_STACK: usize = 256 * 1024;
/// How often a `WAIT` lane re-reads the replicas of a node that had too few.
const REPLICAS_RECHECK: Duration = Duration::from_secs(1);
/// The share of the time left to a batch's earliest deadline that its `WAIT` may take.
/// Redis ends a timed-out `WAIT` at its event loop's next wake-up, up to `1000 / hz` ms (100 ms
/// by default) late on an idle server, so the lane also stops reading for it at `READ_SHARE`
/// (see [`Wait`]).
const WAIT_SHARE: (u32, u32) = (1, 2);
const READ_SHARE: (u32, u32) = (3, 4);

/// Where a node's answer goes: the caller's channel, tagged with the node's index, and the
/// gate that wakes the caller once the answers can decide (none: the caller waits on the
/// channel itself).
pub(crate) struct ReplyTo {
    pub node: usize,
    pub tx: Sender<(usize, Vote)>,
    pub gate: Option<Arc<Gate>>,
    /// For a command that counts a hold (see [`Handover`]).
    pub handover: Option<Arc<Handover>>,
}

impl ReplyTo {
    /// Sends the vote, then counts it at the gate. A caller that stopped waiting needs no
    /// answer, so a full or closed channel is fine. Says whether the caller was still waiting
    /// for votes, as far as the gate knows (a caller without one is taken to be). Once the
    /// caller handed its late answers over, sends nothing and gives instead the cleanup to run
    /// on the node if the vote says the command was applied there.
    fn send(self, vote: Vote) -> (bool, Option<Command>) {
        let kind = vote.kind();
        if let Some(handover) = &self.handover {
            // Under the lock: the caller reads the channel once after its hand-over, so every
            // vote is either read by it or followed by the cleanup here.
            let cleanup = relock(&handover.cleanup);
            if let Some(cleanup) = &*cleanup {
                return (false, vote.applied().then(|| cleanup.clone()));
            }
            let _ = self.tx.try_send((self.node, vote));
        } else {
            let _ = self.tx.try_send((self.node, vote));
        }
        let waiting = self.gate.as_ref().is_none_or(|gate| gate.count(kind));
        (waiting, None)
    }
}

/// The answers of a fan-out of a command that counts a hold on each node that applies it (a
/// reentrant acquire), which must be undone, or released, on each of those nodes, after the
/// command ran there: sent before it, the cleanup would find nothing, and the hold would stay
/// until its TTL. An answer can come long after the call decided (the node was slow, the
/// request went out just before its deadline after a reconnect, the caller was cancelled), so
/// the caller does not wait for all of them: it [hands them over](Handover::hand_over) with its
/// cleanup, and from then on the worker that reads an answer saying the node applied the
/// command sends the cleanup there itself, next on the same connection (so after the command). Each node that counted the hold gets one
/// cleanup, from the caller (which read its answer) or from its worker, and no other node does.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    cleanup: Mutex<Option<Command>>,
}

impl Handover {
    /// Hands the answers not yet read over to the workers, with `cleanup` to send where they say
    /// the command was applied; marks in `applied` the nodes whose answers arrived on `late`
    /// before, which the caller cleans up. Once is enough: a later call changes nothing.
    pub(crate) fn hand_over(
        &self,
        cleanup: &Command,
        applied: &mut [bool],
        late: &Receiver<(usize, Vote)>,
    ) {
        relock(&self.cleanup).get_or_insert_with(|| cleanup.clone());
        while let Ok((i, vote)) = late.try_recv() {
            if let (true, Some(a)) = (vote.applied(), applied.get_mut(i)) {
                *a = true;
            }
        }
    }
}

pub(crate) struct Request {
    pub command: Command,
    pub key: Arc<str>,
    pub token: Arc<str>,
    /// When the caller queued it (see `Worker::gather`).
    pub queued_at: Instant,
    /// When the caller stops waiting. An acquire or extend still queued then is dropped unsent,
    /// since nobody would count it. Releases carry none: they are always worth doing (see
    /// `Engine::release_call`).
    pub deadline: Option<Instant>,
    pub reply: Option<ReplyTo>,
    /// For a cleanup (an undo or a release, sent without waiting for the answer): until when
    /// the key it removes may still be live on the node. A cleanup that finds the node down is
    /// kept and sent after the reconnect until then, rather than dropped while a key that a
    /// lost reply left behind could still block the resource.
    pub live_until: Option<Instant>,
    /// On a `WAIT` lane: marks the request's key and token as on their way over the lane until
    /// the lane has done with it (see [`Node::send`]). Set by `send`.
    pub on_lane: Option<OnLane>,
}

/// The key and token of each acquisition or extension a `WAIT` lane has not answered yet.
type Pending = Arc<Mutex<Vec<(Arc<str>, Arc<str>)>>>;

/// An acquisition or extension on its way over a node's `WAIT` lane: while it lives, a cleanup
/// of the same key and token follows it over the lane, so that it cannot overtake it. Dropped
/// with its request, once the lane answered it (its reply read) or dropped it unsent.
pub(crate) struct OnLane {
    pending: Pending,
    key: Arc<str>,
    token: Arc<str>,
}

impl Drop for OnLane {
    fn drop(&mut self) {
        let mut pending = relock(&self.pending);
        if let Some(i) = pending
            .iter()
            .position(|(k, t)| *k == self.key && *t == self.token)
        {
            pending.swap_remove(i);
        }
    }
}

impl Request {
    fn worth_keeping(&self, now: Instant) -> bool {
        // A reentrant release counts a hold: one that may have run already is not sent again.
        self.command.resendable && self.live_until.is_some_and(|t| t > now)
    }
}

#[derive(Default)]
struct Health {
    connected: AtomicBool,
    connects: AtomicU64,
    last_error: Mutex<Option<String>>,
    identity: Mutex<Identity>,
    /// The clock guard's latest offset of the node, ms (an atomic: it changes on every acquire).
    clock_offset_ms: AtomicI64,
    /// See `NodeStatus::command_duration` and `errors`.
    command_duration: AtomicHistogram,
    errors: AtomicU64,
}

/// Which server process the worker is talking to, as of the last connect.
#[derive(Default, Clone)]
struct Identity {
    run_id: Option<String>,
    /// Uptime reported at `seen`.
    uptime: Option<(Duration, Instant)>,
    restarts: u64,
    grace_until: Option<Instant>,
    server_version: Option<String>,
    server_name: Option<String>,
    persistence: Option<String>,
    /// The server probe's warnings at the last connect.
    server_warnings: Vec<String>,
    /// The clock guard's latest warnings (a few).
    clock_warnings: Vec<String>,
    quarantine: Option<(Instant, String)>,
    /// A Sentinel node's master at the last connect, `host:port`.
    master: Option<String>,
    /// Its `master_replid` then.
    replid: Option<String>,
    failovers: u64,
}

/// What resolving a Sentinel node's master told (nothing for a standalone node).
struct Master {
    /// `host:port`.
    address: Option<String>,
    /// What the sentinels said of its time as the master (a Sentinel node's only).
    tenure: Option<Tenure>,
    /// The answering sentinel's `config-epoch`.
    epoch: Option<u64>,
}

/// `Health::clock_offset_ms` before the first sample.
const NO_OFFSET: i64 = i64::MIN;

/// Which server process (`run_id`) each node of one client reached at its last connect, so that
/// one server reached through two URLs (an alias, `localhost` and `127.0.0.1`, a proxy, a
/// Sentinel group's master named again as a standalone node) cannot vote twice: the build-time
/// check compares only the URLs. The node that connects second is refused.
pub(crate) struct Servers {
    run_ids: Mutex<Vec<Option<(String, String)>>>,
}

impl Servers {
    pub(crate) fn new(nodes: usize) -> Servers {
        Servers {
            run_ids: Mutex::new(vec![None; nodes]),
        }
    }

    /// Records that node `index` (at `address`) reached the server `run_id`, unless another
    /// node already did: then that node's index and address.
    fn claim(&self, index: usize, run_id: &str, address: &str) -> Option<(usize, String)> {
        let mut run_ids = relock(&self.run_ids);
        if let Some((j, (_, other))) = run_ids.iter().enumerate().find_map(|(j, r)| {
            r.as_ref()
                .filter(|(id, _)| j != index && id == run_id)
                .map(|r| (j, r))
        }) {
            return Some((j, other.clone()));
        }
        run_ids[index] = Some((run_id.to_owned(), address.to_owned()));
        None
    }
}

/// Clock warnings kept for `node_status()`.
const CLOCK_WARNINGS_KEPT: usize = 4;

/// The caller's side of one node.
pub(crate) struct Node {
    pub address: String,
    tx: Sender<Request>,
    health: Arc<Health>,
    /// With `min_replicas`: the second worker, which carries what needs `WAIT`.
    lane: Option<Lane>,
    /// For a Sentinel node: what its watch thread heard, which the node's release subscriber
    /// follows too (`notify.rs`), and the thread's stop, dropped with the node.
    watch: Option<Arc<Watch>>,
    _watch_thread: Option<(Sender<()>, JoinHandle<()>)>,
}

/// A node's second worker and connection, for the commands whose vote waits for replicas
/// (`min_replicas`): acquisitions and extensions, each batch followed by `WAIT k timeout`.
/// `WAIT` blocks the connection it runs on, and must run on the one that made the write, so it
/// gets a connection of its own: a lagging replica delays only the callers that need its
/// acknowledgement, never a release, an inspection or a queue command on the first one.
struct Lane {
    tx: Sender<Request>,
    health: Arc<Health>,
    /// The key and token of each acquisition or extension the lane has not answered yet.
    pending: Pending,
}

impl Node {
    /// A Sentinel node's watch: which master the sentinels name now.
    pub(crate) fn watch(&self) -> Option<Arc<Watch>> {
        self.watch.clone()
    }

    /// Queues a request; if the worker is gone (it never stops while this handle exists), the
    /// request's caller is answered at once.
    ///
    /// With a `WAIT` lane, acquisitions and extensions go over it and everything else over the
    /// first connection, except a cleanup (an undo, a release) of a key and token whose
    /// acquisition or extension the lane has not answered yet: it follows that over the lane,
    /// which sends in order. Over the first connection it could reach the server first (the
    /// lane may be waiting for a `WAIT`, or hold the write queued behind one), find nothing,
    /// and leave the key the lane writes next until its TTL: after a caller whose quorum came
    /// from other nodes released at once, say.
    pub(crate) fn send(&self, mut request: Request) {
        let tx = match &self.lane {
            Some(lane) if needs_ack(&request.command) => {
                relock(&lane.pending).push((Arc::clone(&request.key), Arc::clone(&request.token)));
                request.on_lane = Some(OnLane {
                    pending: Arc::clone(&lane.pending),
                    key: Arc::clone(&request.key),
                    token: Arc::clone(&request.token),
                });
                &lane.tx
            }
            Some(lane)
                if relock(&lane.pending)
                    .iter()
                    .any(|(k, t)| *k == request.key && *t == request.token) =>
            {
                &lane.tx
            }
            _ => &self.tx,
        };
        if let Err(e) = tx.send(request) {
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
        let status = NodeStatus {
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
            server_version: identity.server_version,
            server_name: identity.server_name,
            persistence: identity.persistence,
            warnings: identity
                .server_warnings
                .into_iter()
                .chain(identity.clock_warnings)
                .collect(),
            clock_offset_ms: Some(self.health.clock_offset_ms.load(Ordering::Relaxed))
                .filter(|ms| *ms != NO_OFFSET),
            quarantine_remaining: identity
                .quarantine
                .as_ref()
                .map(|(until, _)| until.saturating_duration_since(now))
                .filter(|left| !left.is_zero()),
            quarantine_reason: identity
                .quarantine
                .filter(|(until, _)| *until > now)
                .map(|(_, why)| why),
            master: identity.master,
            failovers: identity.failovers,
            command_duration: self.health.command_duration.snapshot(),
            errors: self.health.errors.load(Ordering::Relaxed),
        };
        match &self.lane {
            Some(lane) => with_lane(status, &lane.health, now),
            None => status,
        }
    }
}

/// Whether a command's vote waits for replicas, with `min_replicas`: what takes or prolongs a
/// lock (a release needs no acknowledgement: a lost release only lets the key expire).
fn needs_ack(command: &Command) -> bool {
    command.acquire || command.samples_clock
}

/// A node's status with what its `WAIT` lane saw: it carries the acquisitions and extensions,
/// so its clock samples, quarantine and restart grace are the ones that hold votes out.
fn with_lane(mut status: NodeStatus, lane: &Health, now: Instant) -> NodeStatus {
    let identity = lane.identity.lock().map(|i| i.clone()).unwrap_or_default();
    status.errors += lane.errors.load(Ordering::Relaxed);
    let offset = lane.clock_offset_ms.load(Ordering::Relaxed);
    if offset != NO_OFFSET {
        status.clock_offset_ms = Some(offset);
    }
    let left = |until: Instant| Some(until.saturating_duration_since(now)).filter(|d| !d.is_zero());
    if let Some(grace) = identity.grace_until.and_then(left)
        && status.grace_remaining.is_none_or(|g| g < grace)
    {
        status.grace_remaining = Some(grace);
    }
    if let Some((until, why)) = identity.quarantine
        && let Some(remaining) = left(until)
        && status.quarantine_remaining.is_none_or(|q| q < remaining)
    {
        status.quarantine_remaining = Some(remaining);
        status.quarantine_reason = Some(why);
    }
    status.warnings.extend(identity.clock_warnings);
    // The lane may see a failover first: after one, a holder's extensions go there while
    // nothing else talks to the node.
    if identity.failovers > status.failovers {
        status.failovers = identity.failovers;
        status.master = identity.master;
    }
    if !lane.connected.load(Ordering::Relaxed) {
        let why = lane.last_error.lock().map_or(None, |e| e.clone());
        status.warnings.push(format!(
            "the connection for min_replicas (acquisitions and extensions, with WAIT) is down: {}",
            why.as_deref().unwrap_or("not connected yet")
        ));
    }
    status
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
    /// The clock guard's limits, when it is on.
    pub clock_guard: Option<clock::Limits>,
    /// Server-probe warnings refuse the node.
    pub strict_servers: bool,
    /// Replicas that must acknowledge an acquisition or an extension (`WAIT`); with it, the
    /// node has a second worker for them (see [`Lane`]).
    pub min_replicas: Option<u32>,
}

/// Starts the worker for one node, and with `min_replicas` its `WAIT` lane (for a cluster, a
/// link of its own to every master). Each connects right away, says so on `ready` once that
/// first attempt is over (whatever its outcome), and stops when the returned [`Node`] (the only
/// sender of its channels) is dropped.
pub(crate) fn spawn(
    index: usize,
    client: Target,
    settings: Settings,
    ready: Sender<()>,
    exited: Sender<()>,
    board: Arc<ClockBoard>,
    servers: Arc<Servers>,
) -> io::Result<(Node, Vec<JoinHandle<()>>)> {
    let address = client.address();
    // A Sentinel node's watch: one thread that asks the sentinels which master they name,
    // for both of the node's workers (see sentinel.rs, "Watching the sentinels"). Its handle
    // stays with the node, not among the workers', whose count the engine takes for how many
    // first connects to wait for; the client's drop still waits for it through `exited`.
    let (watch, watch_stop) = match &client {
        Target::Sentinel(s) => {
            let (stop_tx, stop) = crossbeam_channel::bounded(0);
            let (watch, handle) = s.watch(
                index,
                settings.connect_timeout,
                settings.io_timeout,
                stop,
                exited.clone(),
            )?;
            (Some(watch), Some((stop_tx, handle)))
        }
        _ => (None, None),
    };
    let start =
        |wait_for: Option<u32>| -> io::Result<(Sender<Request>, Arc<Health>, JoinHandle<()>)> {
            let (tx, rx) = crossbeam_channel::unbounded();
            let health = Arc::new(Health {
                clock_offset_ms: AtomicI64::new(NO_OFFSET),
                ..Health::default()
            });
            let worker = Worker {
                index,
                servers: Arc::clone(&servers),
                address: address.clone(),
                client: client.clone(),
                conn: None,
                rx,
                settings,
                grace_until: None,
                guard: Guard::new(
                    settings.clock_guard,
                    address.clone(),
                    index,
                    Arc::clone(&board),
                ),
                logged: Vec::new(),
                backoff: BACKOFF_MIN,
                retry_at: Instant::now(),
                down_reason: String::from("not connected yet"),
                closing: false,
                used_at: Instant::now(),
                answered_at: Instant::now(),
                quick: 0,
                answering_at: Instant::now(),
                awaited: 0,
                health: Arc::clone(&health),
                buf: Vec::with_capacity(4096),
                deferred: Vec::new(),
                inline_scripts: false,
                demoted: false,
                watch: watch.clone(),
                watch_seen: 0,
                master: None,
                wait_for,
                replicas: None,
                _exited: exited.clone(),
            };
            let ready = ready.clone();
            let name = match wait_for {
                Some(_) => format!("redlock-node-{index}-wait"),
                None => format!("redlock-node-{index}"),
            };
            let handle = std::thread::Builder::new()
                .name(name)
                .stack_size(WORKER_STACK)
                .spawn(move || worker.run(ready))?;
            Ok((tx, health, handle))
        };
    let (tx, health, handle) = start(None)?;
    let mut handles = vec![handle];
    let lane = match settings.min_replicas {
        Some(k) => {
            let (tx, health, handle) = start(Some(k))?;
            handles.push(handle);
            Some(Lane {
                tx,
                health,
                pending: Arc::default(),
            })
        }
        None => None,
    };
    Ok((
        Node {
            address,
            tx,
            health,
            lane,
            watch,
            _watch_thread: watch_stop,
        },
        handles,
    ))
}

/// How long a worker looks for a next request before it sleeps, once `QUICK_TO_SPIN` requests
/// in a row came that soon after the answer before them. Not after one: in a lock, release,
/// pause loop the quick and the slow gaps alternate, and the look would come after each
/// release's answer, always in vain.
const WORKER_SPIN: Duration = Duration::from_micros(50);
const QUICK_TO_SPIN: u8 = 2;
/// How long after a batch's answers went out the worker waits for its callers' next requests
/// (see `gather`).
const GATHER: Duration = Duration::from_micros(30);
/// A batch this large is not held back for more: the round trip's fixed cost is shared well
/// enough, and with many callers waiting for a few more costs more (the worker sleeps, and each
/// caller's send then wakes it) than it saves (the hot-node bench at 16 threads, in CPU per
/// cycle; gathering up to 8 was no better there than not gathering).
const GATHER_UP_TO: usize = 4;

impl Worker {
    /// Answers a request that could not be sent, or keeps it for after the reconnect.
    /// A caller waiting for the answer hears of the failure now either way.
    fn fail(&mut self, mut r: Request, problem: &NodeProblem, now: Instant) {
        self.health.errors.fetch_add(1, Ordering::Relaxed);
        if r.worth_keeping(now) && !self.closing {
            if let Some(reply) = r.reply.take() {
                let _ = reply.send(Vote::Failed(problem.clone()));
            }
            self.deferred.push(r);
        } else {
            answer(r, Vote::Failed(problem.clone()));
        }
    }
}

/// Answers the request's caller, if one waits for it; says whether it was still waiting.
fn answer(request: Request, vote: Vote) -> bool {
    answer_or_clean_up(request, vote).0
}

/// [`answer`], which also gives the cleanup to send in the caller's place when the caller
/// handed its late answers over and the vote says the command was applied (see [`Handover`]).
fn answer_or_clean_up(request: Request, vote: Vote) -> (bool, Option<Request>) {
    let Some(reply) = request.reply else {
        return (false, None);
    };
    let (waiting, cleanup) = reply.send(vote);
    let cleanup = cleanup.map(|command| Request {
        command,
        key: request.key,
        token: request.token,
        queued_at: Instant::now(),
        deadline: None,
        reply: None,
        live_until: None,
        on_lane: None,
    });
    (waiting, cleanup)
}

/// Until when a node whose `INFO` reported `uptime` (read before `now`) is in its restart
/// grace, if it still is.
///
/// `uptime_in_seconds` is `floor(now) − floor(start)` in whole seconds of the server's wall
/// clock, so it overstates the process's age by up to 1 s: a process started at x.95 s reports
/// 1 s at (x+1).05 s, when it is 0.1 s old. The age is at least `uptime − 1 s` (saturating), and
/// a little more by `now`, so the grace counted from that ends no earlier than `grace` after the
/// process started. (A step of the node's wall clock after the start overstates it too; that is
/// the clock guard's business.)
fn grace_until(grace: Option<Duration>, uptime: Duration, now: Instant) -> Option<Instant> {
    let age = uptime.saturating_sub(Duration::from_secs(1));
    grace
        .and_then(|grace| grace.checked_sub(age))
        .filter(|left| !left.is_zero())
        .map(|left| now + left)
}

/// The text of a connection error; a socket timeout reads "timed out", not as the OS's EAGAIN.
fn describe_connect_error(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        format!("timed out: {e}")
    } else {
        e.to_string()
    }
}

/// The warning of a node whose URL says `#insecure`, among its server warnings from every
/// connect on (it refuses nothing, even with `strict_servers`).
const INSECURE_WARNING: &str = "its TLS certificate is not verified (#insecure in its URL): \
    anyone on the network path can impersonate it and read the password; give its CA with \
    tls_ca_file instead (TLSCAFile in Go, --tls-ca-file for the redlock command)";

/// What to try when a connection fails in a way typical of a TLS mismatch.
fn tls_hint(e: &redis::RedisError, tls: bool) -> &'static str {
    let text = e.to_string();
    if tls && text.contains("CertificateRequired") {
        " (the node requires a client certificate: give one with tls_client_cert_file; \
         TLSClientCertFile in Go, --tls-client-cert-file for the redlock command)"
    } else if tls && text.contains("certificate") {
        " (the node's TLS certificate was not accepted: give its CA with tls_ca_file \
         (TLSCAFile in Go, --tls-ca-file or SSL_CERT_FILE for the redlock command), and connect \
         by a host name or IP address the certificate names)"
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
    index: usize,
    /// Which server process each node of the client reached (see [`Servers`]).
    servers: Arc<Servers>,
    address: String,
    client: Target,
    conn: Option<Link>,
    rx: Receiver<Request>,
    settings: Settings,
    /// Until then, with `restart_grace` set, this node's acquire successes do not count.
    grace_until: Option<Instant>,
    /// The clock guard (see `clock.rs`).
    guard: Guard,
    /// The warnings last logged, so that a reconnect every second does not repeat them.
    logged: Vec<String>,
    backoff: Duration,
    /// While down: no connection attempt before this.
    retry_at: Instant,
    down_reason: String,
    /// Every sender is gone: the client was dropped and only queued requests remain.
    closing: bool,
    /// When the connection last carried a command (or was opened).
    used_at: Instant,
    /// When the last batch was answered, and how many requests in a row came within
    /// `WORKER_SPIN` of the answer before them (see `next_request`).
    answered_at: Instant,
    quick: u8,
    /// When the last batch's answers began to go out, and how many of them went to callers
    /// still waiting for votes, who will likely be back soon (see `gather`).
    answering_at: Instant,
    awaited: usize,
    health: Arc<Health>,
    buf: Vec<u8>,
    /// Cleanups that found the node down, sent once it is back (see `Request::live_until`).
    deferred: Vec<Request>,
    /// The connection's user may not run `SCRIPT LOAD` (a managed service, a tight ACL): its
    /// scripts go whole with `EVAL` instead of by hash with `EVALSHA`.
    inline_scripts: bool,
    /// A Sentinel node's connection answered `READONLY`: dropped once the batch is answered.
    demoted: bool,
    /// A Sentinel node's watch (see `follow_the_sentinels`), and its generation the worker
    /// last compared its master with.
    watch: Option<Arc<Watch>>,
    watch_seen: u64,
    /// A Sentinel node's master on the current connection (`host:port`) and the `config-epoch`
    /// it was named with.
    master: Option<(String, Option<u64>)>,
    /// On a node's `WAIT` lane: `min_replicas`, which every batch waits for.
    wait_for: Option<u32>,
    /// On a `WAIT` lane: the node's connected replicas at the last check (on a cluster, those
    /// of its master with the fewest, named), and when that was, while they are fewer than
    /// `wait_for` (see `short_of_replicas`).
    replicas: Option<(Option<String>, u64, Instant)>,
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
                self.next_request()
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
            self.gather(&mut batch);
            self.awaited = 0;
            self.serve(&mut batch);
            batch.clear();
            self.answered_at = Instant::now();
        }
    }

    /// The next request. A caller in a tight loop sends its next command (a release after an
    /// acquire) right after our answer, and catching it awake saves waking a sleeping thread,
    /// so while requests have been coming within `WORKER_SPIN` of the answers, the worker
    /// looks for one that long before it sleeps on the channel; once one comes later, it
    /// sleeps at once, so that a client holding its locks for longer burns no CPU looking.
    fn next_request(&mut self) -> Result<Request, ()> {
        let until = self.answered_at + WORKER_SPIN;
        let next = loop {
            match self.rx.try_recv() {
                Ok(r) => break Ok(r),
                Err(TryRecvError::Disconnected) => break Err(()),
                Err(TryRecvError::Empty)
                    if self.quick >= QUICK_TO_SPIN && Instant::now() < until =>
                {
                    std::thread::yield_now()
                }
                Err(TryRecvError::Empty) if self.watch.is_none() => {
                    break self.rx.recv().map_err(|_| ());
                }
                // A Sentinel node looks at its watch while idle too, so that its status shows
                // a change of master without waiting for a call.
                Err(TryRecvError::Empty) => match self.rx.recv_timeout(WATCH_INTERVAL) {
                    Ok(r) => break Ok(r),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        if self.follow_the_sentinels() {
                            self.connect();
                        }
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break Err(()),
                },
            }
        };
        self.quick = if Instant::now() < until {
            self.quick.saturating_add(1)
        } else {
            0
        };
        next
    }

    /// Waits a little for the callers that the last batch answered, so that their next requests
    /// share this round trip. Without it, callers in a loop split into groups that take turns:
    /// one group's round trip runs while the other's requests queue, each round trip carries
    /// only its group, and every request costs twice the round trips, wake-ups and syscalls (the
    /// slow mode of the hot-node benchmark). A caller in a loop is back within microseconds of
    /// its answer, so the wait ends `GATHER` after the answers went out at the latest, and as
    /// soon as as many requests came in since then as the last batch answered callers still
    /// waiting for votes (one that had decided on other nodes' votes may be back before our
    /// answer, so it is not waited for), or once the batch holds `GATHER_UP_TO`. Nothing else
    /// changes: the batch is still checked against its requests' deadlines, and its send time
    /// is when it is written.
    ///
    /// Tried and measured slower: writing the next batch while one is still on the wire (two in
    /// flight, so that this wait overlaps a round trip instead of holding the connection idle).
    /// It sends the callers that come back first as batches of their own, so the same work
    /// takes more writes, reads and server wake-ups: at 4 threads on one node, 0.97× and 0.89×
    /// the floor against 1.27× and 1.63× without it in the same runs, 58 and 51 µs of client CPU
    /// per cycle against 43 and 34 (`bench -- --hot`, 2026-11-27).
    fn gather(&mut self, batch: &mut Vec<Request>) {
        if self.closing {
            return;
        }
        let since = self.answering_at;
        let until = since + GATHER;
        let back = |r: &Request| r.reply.is_some() && r.queued_at >= since;
        let mut came = batch.iter().filter(|r| back(r)).count();
        while came < self.awaited && batch.len() < GATHER_UP_TO {
            match self.rx.recv_deadline(until) {
                Ok(r) => {
                    came += usize::from(back(&r));
                    batch.push(r);
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => break,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    self.closing = true;
                    break;
                }
            }
        }
    }

    fn serve(&mut self, batch: &mut Vec<Request>) {
        let now = Instant::now();
        let queued = batch.len();
        batch.retain(|r| r.deadline.is_none_or(|d| d > now));
        if batch.len() < queued {
            // Their callers stopped waiting while the node was slow: timeouts too.
            self.health
                .errors
                .fetch_add((queued - batch.len()) as u64, Ordering::Relaxed);
        }
        self.deferred.retain(|r| r.worth_keeping(now));
        if batch.is_empty() && (self.deferred.is_empty() || now < self.retry_at) {
            return;
        }
        if self.follow_the_sentinels() {
            self.retry_at = now;
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
        // A cleanup that followed its acquisition over a `WAIT` lane needs no replicas.
        if batch.iter().any(|r| needs_ack(&r.command))
            && let Some(problem) = self.short_of_replicas()
        {
            let now = Instant::now();
            let (refused, cleanups): (Vec<Request>, Vec<Request>) =
                batch.drain(..).partition(|r| needs_ack(&r.command));
            for r in refused {
                self.fail(r, &problem, now);
            }
            *batch = cleanups;
            if batch.is_empty() {
                return;
            }
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

    /// On a `WAIT` lane whose node had fewer connected replicas than `min_replicas` at the last
    /// check (on a cluster: one of its masters had): why its batches are refused unsent,
    /// re-reading `INFO replication` (of every master) once the check is `REPLICAS_RECHECK` old
    /// (a read that fails drops the connection and refuses the batch).
    fn short_of_replicas(&mut self) -> Option<NodeProblem> {
        let k = self.wait_for?;
        let (_, _, checked) = self.replicas.as_ref()?;
        if checked.elapsed() >= REPLICAS_RECHECK {
            let info = |conn: &mut redis::Connection| {
                redis::cmd("INFO")
                    .arg("replication")
                    .query::<String>(conn)
                    .map(|text| {
                        let mut report = probe::ServerReport::default();
                        probe::parse_info(&mut report, &text);
                        // As before a check could fail: a master that does not tell has none.
                        Some(report.connected_replicas.unwrap_or(0))
                    })
            };
            let read = match self.conn.as_mut()? {
                Link::Plain(conn) => info(conn).map(|n| vec![(None, n)]),
                Link::Cluster(link) => link
                    .on_each(info)
                    .map(|all| all.into_iter().map(|(m, n)| (Some(m), n)).collect()),
            };
            match read {
                Ok(replicas) => {
                    self.replicas = short_master(&replicas, k).map(|(m, n)| (m, n, Instant::now()));
                }
                Err(e) => {
                    let problem = describe(&e);
                    self.disconnect(&e);
                    return Some(problem);
                }
            }
        }
        self.replicas
            .as_ref()
            .map(|(master, connected, _)| NodeProblem::TooFewReplicas {
                connected: *connected,
                required: k,
                master: master.clone(),
            })
    }

    fn probe(&mut self) -> redis::RedisResult<()> {
        let conn = self
            .conn
            .as_mut()
            .expect("probe is called with a connection");
        conn.ping()?;
        self.used_at = Instant::now();
        Ok(())
    }

    /// Runs the batch on the connection and answers every request. With `resend`, a connection
    /// found closed (the server's idle `timeout`, a proxy, `CLIENT KILL`, a restart) is replaced
    /// at once and what is safe to send twice goes out again, so that a lock held across an
    /// idle spell still releases (or extends) instead of failing on every node at once.
    fn execute_and_answer(&mut self, batch: &mut Vec<Request>, resend: bool) {
        match self.execute(batch) {
            Ok((votes, time, sent)) => {
                let now = Instant::now();
                self.answering_at = now;
                self.used_at = now;
                self.health
                    .command_duration
                    .observe_n(now.saturating_duration_since(sent), batch.len() as u64);
                let errors = votes
                    .iter()
                    .filter(|v| matches!(v, Vote::Failed(_)))
                    .count();
                if errors > 0 {
                    self.health
                        .errors
                        .fetch_add(errors as u64, Ordering::Relaxed);
                }
                if let Some(time) = time.node {
                    let events = self.guard.sample(time, now);
                    self.record(events);
                }
                for (master, time) in time.masters {
                    let events = self.guard.sample_master(&master, time, now);
                    self.record(events);
                }
                let has_acquire = batch.iter().any(|r| r.command.acquire);
                let events = self.guard.before_votes(has_acquire, now);
                self.record(events);
                // As of when the batch was sent: a command that ran before the end of a grace
                // or quarantine does not count, even if its answer came after it.
                let held_out = self.held_out(sent, now);
                let mut cleanups = Vec::new();
                for (r, vote) in batch.drain(..).zip(votes) {
                    // The key stays on the node (and is released with the lock): it is only not
                    // counted, since a young process may have lost another owner's key, and a
                    // clock that jumped may have expired one early. (An uncounted reentrant
                    // hold there is not released but expires with its TTL.)
                    let vote = match (&held_out, vote) {
                        (Some(problem), Vote::Yes | Vote::Value(_)) if r.command.acquire => {
                            Vote::Failed(problem.clone())
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
                    let (waiting, cleanup) = answer_or_clean_up(r, vote);
                    self.awaited += usize::from(waiting);
                    cleanups.extend(cleanup);
                }
                if std::mem::take(&mut self.demoted) {
                    self.disconnect(&redis::RedisError::from((
                        redis::ErrorKind::Client,
                        "READONLY",
                        "the master was demoted to a replica; resolving the master again"
                            .to_owned(),
                    )));
                }
                // Holds counted after their callers stopped reading: undone or released now,
                // on the connection that counted them (dropped meanwhile: they expire).
                if !cleanups.is_empty() && self.conn.is_some() {
                    self.execute_and_answer(&mut cleanups, true);
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
                    self.health
                        .errors
                        .fetch_add(lost.len() as u64, Ordering::Relaxed);
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
    /// reloads the scripts and resends those commands once, with their source. With the clock
    /// guard on, a batch that carries an acquire or an extension carries `TIME` too (last, so
    /// the node reads its clock after the `SET`s), and its reading comes back with the votes.
    fn execute(&mut self, batch: &[Request]) -> redis::RedisResult<(Vec<Vote>, Readings, Instant)> {
        let time = self
            .guard
            .wants_time(batch.iter().any(|r| r.command.samples_clock));
        let sent = Instant::now();
        let io_timeout = self.settings.io_timeout;
        // A cleanup that followed its acquisition over a `WAIT` lane (`Node::send`) needs no
        // acknowledgment: a batch of cleanups alone has no `WAIT`, and a cleanup's yes counts
        // as it is.
        let acks = batch.iter().any(|r| needs_ack(&r.command));
        let wait = self.wait_for.filter(|_| acks).map(|k| {
            let left = batch
                .iter()
                .filter_map(|r| r.deadline)
                .min()
                .map_or(io_timeout / 2, |d| d.saturating_duration_since(sent));
            let ms = (left * WAIT_SHARE.0 / WAIT_SHARE.1).as_millis().max(1);
            Wait {
                k,
                ms: u64::try_from(ms).unwrap_or(u64::MAX),
                answer_by: sent + left * READ_SHARE.0 / READ_SHARE.1,
                io_timeout,
            }
        });
        let conn = match self
            .conn
            .as_mut()
            .expect("execute is called with a connection")
        {
            Link::Plain(conn) => conn,
            Link::Cluster(link) => {
                let wait_for = wait.map(|w| WaitFor {
                    k: w.k,
                    ms: w.ms,
                    answer_by: w.answer_by,
                    sent,
                });
                let (votes, time, refreshed, replicas) = on_cluster(
                    link,
                    batch,
                    self.inline_scripts,
                    time,
                    self.settings.scripts,
                    wait.zip(wait_for),
                )?;
                if let Some((probe, masters)) = refreshed {
                    // New masters seen through a MOVED (a failover): observed before the votes
                    // count, so that the restart grace they start holds this batch out.
                    let master = Master {
                        address: Some(masters),
                        tenure: None,
                        epoch: None,
                    };
                    self.observe(probe, master);
                    // A promoted replica may have fewer replicas of its own: the next batches
                    // are refused at once until it has enough, as after a reconnect.
                    if let Some(k) = self.wait_for {
                        self.replicas = short_master(&replicas, k).map(|(m, n)| (m, n, sent));
                    }
                }
                return Ok((votes, time, sent));
            }
        };
        let inline = self.inline_scripts;
        let (mut values, time, mut acked) =
            pipeline(conn, &mut self.buf, batch.iter(), inline, time, wait)?;
        let noscript: Vec<usize> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT"))
            .map(|(i, _)| i)
            .collect();
        if !noscript.is_empty() {
            // Loaded for the batches to come; the resend carries the scripts' source (`EVAL`),
            // which another flush between the load and the resend cannot fail.
            load_scripts(conn, self.settings.scripts)?;
            let (again, _, acked_again) = pipeline(
                conn,
                &mut self.buf,
                noscript.iter().map(|&i| &batch[i]),
                true,
                false,
                wait,
            )?;
            for (i, v) in noscript.into_iter().zip(again) {
                values[i] = v;
            }
            // The second WAIT covers every write of the connection so far.
            acked = acked_again;
        }
        if self.client.is_sentinel() && values.iter().any(is_readonly) {
            // The sentinels' master was demoted under us: resolve it again.
            self.demoted = true;
        }
        let votes = values
            .into_iter()
            .zip(batch)
            .map(|(v, r)| (r.command.interpret(v), needs_ack(&r.command)))
            .map(|(vote, needs)| match (wait, &acked, vote) {
                (Some(wait), Some(acked), vote) if vote.is_yes() && needs => {
                    acknowledged(acked, &wait).map_or(vote, Vote::Failed)
                }
                (_, _, vote) => vote,
            })
            .collect();
        Ok((votes, time.into(), sent))
    }

    fn connect(&mut self) {
        // What the watch published before this resolution is no news to it.
        let generation = self.watch.as_ref().map_or(0, |w| w.generation());
        match self.open() {
            Ok((conn, probe, inline_scripts, master)) => {
                self.master = master.address.clone().map(|a| (a, master.epoch));
                self.watch_seen = generation;
                self.observe(probe, master);
                self.inline_scripts = inline_scripts;
                self.conn = Some(conn);
                self.used_at = Instant::now();
                self.backoff = BACKOFF_MIN;
                self.health.connected.store(true, Ordering::Relaxed);
                self.health.connects.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let tls = self.client.is_tls();
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

    /// Connects, probes the server (refusing it before any script runs if it cannot hold
    /// locks safely: see `probe.rs`) and loads the scripts; says whether they must go whole
    /// with `EVAL`, because `SCRIPT LOAD` was refused.
    /// For a Sentinel node, the master is resolved first (see `sentinel.rs`), and what was
    /// learnt of it comes back too.
    fn open(&mut self) -> redis::RedisResult<(Link, Probe, bool, Master)> {
        let Linked {
            link: mut conn,
            master,
            tenure,
            epoch,
        } = self
            .client
            .link(self.settings.connect_timeout, self.settings.io_timeout)?;
        if let (Some(watch), Some(reached)) = (&self.watch, &master)
            && let Some(named) = watch.named()
            && named.verdict(reached, epoch) == Verdict::Newer
        {
            // A sentinel that has not switched yet named the old master, which still says it is
            // one (the new master is out of our reach, or that sentinel was asked first): its
            // votes must not count while other clients vote from the new one.
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the sentinels name a newer master",
                format!(
                    "a sentinel named {reached} (config epoch {}), but another named {} (config \
                     epoch {}) since: not voting from the older master; resolving again",
                    epoch.map_or("?".to_owned(), |e| e.to_string()),
                    named.master,
                    named.epoch.map_or("?".to_owned(), |e| e.to_string()),
                ),
            )));
        }
        let mut probe = conn.probe()?;
        if master.is_some() {
            probe::expect_replicas(&mut probe.assessment);
            if self.settings.restart_grace.is_some() && tenure.as_ref().is_some_and(|t| !t.records)
            {
                // Without the sentinels' records the master's time as master is unbounded: it
                // counts as new, so the node sits out restart_grace after every connect.
                probe.assessment.warnings.push(
                    "the sentinels refuse SENTINEL MASTER, so how long this master has been the \
                     master is unknown: the node stays out of acquire quorums for restart_grace \
                     after every connect; allow +sentinel|master for the sentinel user"
                        .to_owned(),
                );
            }
        }
        if self.guard.is_on()
            && let Some(why) = &probe.time_error
        {
            probe.assessment.warnings.push(format!(
                "TIME failed ({why}): the clock guard is off for this node; allow TIME for this \
                 user (+time)"
            ));
        }
        // Each master's connected replicas: the node's one master, or every master of a cluster
        // (each named in the warnings), all of which need `min_replicas`.
        let replicas: Vec<(Option<String>, Option<u64>)> = match &conn {
            Link::Plain(_) => vec![(None, probe.report.connected_replicas)],
            Link::Cluster(link) => link
                .probed_replicas()
                .into_iter()
                .map(|(m, n)| (Some(m), n))
                .collect(),
        };
        let named = |master: &Option<String>, warning: String| match master {
            Some(m) => format!("master {m}: {warning}"),
            None => warning,
        };
        if let Some(k) = self.settings.min_replicas {
            for (master, n) in &replicas {
                match n {
                    // Every replica acknowledges each counted lock write, so whichever is
                    // promoted has it: the probe's warning about replicas does not apply. (A
                    // cluster's merged probe expects replicas anyway.)
                    Some(n) if *n <= u64::from(k) && master.is_none() => {
                        probe::expect_replicas(&mut probe.assessment);
                    }
                    Some(n) if *n > u64::from(k) => probe.assessment.warnings.push(named(
                        master,
                        format!(
                            "min_replicas {k} is below its {n} connected replicas: a failover \
                             may promote one that did not acknowledge a lock; set min_replicas \
                             to {n}"
                        ),
                    )),
                    Some(_) => {}
                    None => {}
                }
            }
        } else if self.client.is_cluster() && self.settings.restart_grace.is_some() {
            for (master, n) in &replicas {
                if let Some(n) = n.filter(|n| *n > 0) {
                    probe.assessment.warnings.push(named(
                        master,
                        format!(
                            "{n} connected replica(s) and no min_replicas: a client that starts \
                             after a failover of this master is not covered by restart_grace (a \
                             cluster records no promotion time); set min_replicas to {n}"
                        ),
                    ));
                }
            }
        }
        if let Some(refusal) = probe.assessment.refusal(self.settings.strict_servers) {
            self.log_once(std::slice::from_ref(&refusal));
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "refused by the server probe",
                refusal,
            )));
        }
        if let Some(run_id) = &probe.report.run_id
            && let Some((j, other)) = self.servers.claim(self.index, run_id, &self.address)
        {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the same server as another node",
                format!(
                    "node {} ({}) reached the same server process as node {j} ({other}), run_id \
                     {run_id}: one server must not count twice toward the quorum; give each \
                     server once (an alias, a proxy or a Sentinel group's current master named \
                     again?)",
                    self.index, self.address
                ),
            )));
        }
        let identified = probe.report.run_id.is_some() && probe.report.uptime.is_some();
        if self.settings.restart_grace.is_some() && !identified {
            // Without a grace period the identity is only informative: a server that denies or
            // renames INFO (a tight ACL, a managed service) is still usable.
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "restart_grace needs the node's uptime, but INFO server failed",
                format!(
                    "{}; allow INFO for this user (+info), or unset restart_grace",
                    probe
                        .report
                        .info_error
                        .as_deref()
                        .unwrap_or("no run_id or uptime_in_seconds")
                ),
            )));
        }
        if let Some(k) = self.wait_for {
            // WAIT 0 answers at once: whether this user may run it, before any lock is written
            // that a refused WAIT would leave uncounted (on every master of a cluster).
            let wait0 =
                |c: &mut redis::Connection| redis::cmd("WAIT").arg(0).arg(1).query::<i64>(c);
            let tried = match &mut conn {
                Link::Plain(c) => wait0(c).map(|_| ()),
                Link::Cluster(link) => link.on_each(wait0).map(|_| ()),
            };
            if let Err(e) = tried {
                if !command_refused(&e) {
                    return Err(e);
                }
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "min_replicas needs the WAIT command",
                    format!(
                        "WAIT is refused ({e}): allow +wait for this user, or unset \
                         min_replicas ({k})"
                    ),
                )));
            }
        }
        if let Some(k) = self.settings.min_replicas {
            for (master, connected) in &replicas {
                match connected {
                    Some(n) if *n < u64::from(k) => probe.assessment.warnings.push(named(
                        master,
                        format!(
                            "{n} replicas connected (INFO replication connected_slaves), fewer \
                             than min_replicas {k}: acquisitions and extensions on this node \
                             fail until enough replicas are attached"
                        ),
                    )),
                    None => probe.assessment.warnings.push(named(
                        master,
                        format!(
                            "INFO did not tell how many replicas are connected: min_replicas {k} \
                             is only checked by WAIT, each short vote waiting out its timeout; \
                             allow INFO for this user (+info)"
                        ),
                    )),
                    Some(_) => {}
                }
            }
            if self.wait_for.is_some() {
                self.replicas = short_master(&replicas, k).map(|(m, n)| (m, n, Instant::now()));
            }
        }
        let inline_scripts = match conn.load_scripts(self.settings.scripts) {
            Ok(()) => false,
            Err(e) if command_refused(&e) => {
                probe.assessment.warnings.push(format!(
                    "SCRIPT LOAD is refused ({e}): scripts go whole with EVAL on this node, each \
                     call carrying its script's source; allow +script|load for this user to send \
                     them by hash"
                ));
                true
            }
            Err(e) => return Err(e),
        };
        Ok((
            conn,
            probe,
            inline_scripts,
            Master {
                address: master,
                tenure,
                epoch,
            },
        ))
    }

    /// For a Sentinel node: whether the watch has heard the sentinels name another master than
    /// the connection's, from a newer configuration (or one it cannot order); then the
    /// connection is dropped, so that no vote comes from the old master, and the sentinel that
    /// named the new one is asked first at the reconnect, which sees the change as a failover.
    /// Called before every batch: while nothing changes it costs one atomic load.
    fn follow_the_sentinels(&mut self) -> bool {
        let Some(watch) = &self.watch else {
            return false;
        };
        if self.conn.is_none() {
            return false;
        }
        let Some((named, (master, epoch))) =
            watch.switched(&mut self.watch_seen, self.master.as_ref())
        else {
            return false;
        };
        if let Target::Sentinel(s) = &self.client {
            s.prefer(named.sentinel);
        }
        let why = format!(
            "the sentinels now name {} as the master (config epoch {}), not {master} (config \
             epoch {}): a failover; resolving the master again",
            named.master,
            named.epoch.map_or("?".to_owned(), |e| e.to_string()),
            epoch.map_or("?".to_owned(), |e| e.to_string()),
        );
        self.disconnect(&redis::RedisError::from((
            redis::ErrorKind::Client,
            "the master changed",
            why,
        )));
        true
    }

    /// Logs `warnings` unless they are the ones logged last.
    /// A `WAIT` lane logs nothing of its own: its node's first worker logs the same server.
    fn log_once(&mut self, warnings: &[String]) {
        if self.logged != warnings && self.wait_for.is_none() {
            for w in warnings {
                log::warn!("redlock: node {}: {w}", self.address);
            }
            self.logged = warnings.to_vec();
        }
    }

    /// Records which server process this connection reached and what it said about itself,
    /// notices restarts (and, for a Sentinel node, changes of master), and gives the clock guard
    /// its sample.
    fn observe(&mut self, mut probe: Probe, master: Master) {
        let now = Instant::now();
        if self.client.is_insecure() {
            probe.assessment.warnings.push(INSECURE_WARNING.to_owned());
        }
        self.log_once(&probe.assessment.warnings);
        let (previous_master, previous_run_id, previous_replid) = self
            .health
            .identity
            .lock()
            .map(|i| (i.master.clone(), i.run_id.clone(), i.replid.clone()))
            .unwrap_or_default();
        let sentinel = master.address.is_some();
        // A Sentinel node whose master is at another address now: a failover.
        let moved = sentinel && previous_master.is_some() && master.address != previous_master;
        let differs = |old: &Option<String>, new: &Option<String>| matches!((old, new), (Some(a), Some(b)) if a != b);
        // Another master process, or the same one with another dataset lineage (promoted, or
        // restarted empty): it may lack keys the previous one acknowledged. A restart.
        let new_master = sentinel
            && (moved
                || differs(&previous_run_id, &probe.report.run_id)
                || differs(&previous_replid, &probe.report.replid));
        if moved {
            // The clock sample belongs to the server, not to the logical node: on a cluster,
            // the node's clock is the first master's, and each other master has its own.
            match (self.client.is_cluster(), &previous_master, &master.address) {
                (true, Some(old), Some(new)) => {
                    let first = |list: &str| list.split(',').next().map(str::to_owned);
                    let masters: Vec<&str> = new.split(',').collect();
                    self.guard.new_masters(first(old) != first(new), &masters);
                }
                _ => self.guard.new_server(),
            }
        }
        self.guard.connected(probe.time.is_some());
        if let Some(time) = probe.time {
            // The previous sample survives a reconnect (a restarted process still reads the
            // same host clock), so a jump while disconnected is seen here.
            let events = self.guard.sample(time, now);
            self.record(events);
        }
        // A cluster's other masters: a first sample of each, or the next one after a reconnect.
        for (master, time) in probe.masters_time {
            let events = self.guard.sample_master(&master, time, now);
            self.record(events);
        }
        let Ok(mut identity) = self.health.identity.lock() else {
            return;
        };
        identity.persistence = probe::persistence(&probe.report);
        (identity.server_name, identity.server_version) = probe::server(&probe.report);
        identity.server_warnings = probe.assessment.warnings;
        if sentinel {
            if moved {
                identity.failovers += 1;
            }
            if moved && self.wait_for.is_none() {
                log::warn!(
                    "redlock: node {}: its master changed from {} to {} (a failover){}",
                    self.address,
                    previous_master.as_deref().unwrap_or("?"),
                    master.address.as_deref().unwrap_or("?"),
                    match self.settings.restart_grace {
                        Some(g) => format!(
                            "; not counted toward acquire quorums for {} ms (restart_grace), \
                             since the new master may lack lock keys the old one had",
                            g.as_millis()
                        ),
                        None => "; the new master may lack lock keys the old one had: \
                                 consider restart_grace"
                            .to_owned(),
                    }
                );
            }
            identity.master = master.address;
            identity.replid = probe.report.replid.clone();
        }
        let (Some(run_id), Some(uptime)) = (probe.report.run_id, probe.report.uptime) else {
            identity.run_id = None;
            identity.uptime = None;
            return;
        };
        let previous = identity.run_id.take();
        if let Some(old) = previous.filter(|old| *old != run_id && !moved) {
            identity.restarts += 1;
            // A WAIT lane's is logged by the node's first worker.
            if self.wait_for.is_none() {
                log::warn!(
                    "redlock: node {} restarted (run_id {old} -> {run_id}, up {} s){}",
                    self.address,
                    uptime.as_secs(),
                    if self.settings.restart_grace.is_some() {
                        ""
                    } else {
                        "; if it runs without persistence it may have lost lock keys: \
                     consider restart_grace"
                    }
                );
            }
        }
        // A Sentinel node's master has been the master for no longer than the sentinels have
        // known it as such (a promoted replica is old by its uptime), and for no time at all
        // where no sentinel's record bounds it (see `sentinel::Tenure`).
        let newest = self
            .watch
            .as_ref()
            .and_then(|w| w.named())
            .and_then(|n| n.epoch);
        let age = match &master.tenure {
            Some(tenure) => tenure.lower_bound(Some(&run_id), newest).min(uptime),
            // A cluster records no promotion time: a master promoted since it started
            // (`master_replid2` set) counts as new, a one-way tripwire (docs/guarantees.md, A9).
            None if self.client.is_cluster() && probe.report.promoted => Duration::ZERO,
            None => uptime,
        };
        let mut until = grace_until(self.settings.restart_grace, age, now);
        if new_master && let Some(grace) = self.settings.restart_grace {
            // A change of master is a restart, counted from when it is seen.
            until = until.max(Some(now + grace));
        }
        // A grace under way is not ended by a reconnect.
        self.grace_until = until.max(self.grace_until.filter(|t| *t > now));
        identity.grace_until = self.grace_until;
        identity.uptime = Some((uptime, now));
        identity.run_id = Some(run_id);
    }

    /// Shows what the clock guard reported in `node_status()`.
    fn record(&self, events: Vec<Event>) {
        if let Some(ms) = self.guard.offset_ms() {
            self.health.clock_offset_ms.store(ms, Ordering::Relaxed);
        }
        if events.is_empty() {
            return;
        }
        let Ok(mut identity) = self.health.identity.lock() else {
            return;
        };
        for event in events {
            match event {
                Event::Quarantined(until, why) => identity.quarantine = Some((until, why)),
                Event::Warning(w) => {
                    let kept = &mut identity.clock_warnings;
                    if kept.len() == CLOCK_WARNINGS_KEPT {
                        kept.remove(0);
                    }
                    kept.push(w);
                }
            }
        }
    }

    /// Why this node's acquire successes do not count now, if they do not.
    /// A batch sent at `sent` ran on the node after that, so it is held out while a grace or
    /// quarantine lasted past `sent`; `remaining` is counted from `now`.
    fn held_out(&self, sent: Instant, now: Instant) -> Option<NodeProblem> {
        match self.grace_until.filter(|until| *until > sent) {
            Some(until) => Some(NodeProblem::InGrace {
                remaining: until.saturating_duration_since(now),
            }),
            None => self.guard.held_out(sent, now),
        }
    }

    /// Drops a broken connection; the next request tries to reconnect at once.
    fn disconnect(&mut self, e: &redis::RedisError) {
        self.conn = None;
        self.master = None;
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

/// Sends the requests as one pipeline and reads their replies. The first failed read ends it:
/// after a timeout the connection is out of step and gets dropped, and reading on (as
/// redis-rs's `req_packed_commands` does) would cost one more timeout per queued request.
///
/// With `wait`, `WAIT` follows everything else, and its reply comes back apart; `TIME` goes
/// before it and is read as soon as its reply is in, so the wait does not count in the clock
/// sample's round trip.
fn pipeline<'a>(
    conn: &mut redis::Connection,
    buf: &mut Vec<u8>,
    requests: impl Iterator<Item = &'a Request>,
    inline_scripts: bool,
    time: bool,
    wait: Option<Wait>,
) -> redis::RedisResult<(Vec<Value>, Option<TimeReading>, Option<Acked>)> {
    buf.clear();
    let mut count = 0;
    for r in requests {
        r.command.write_resp(&r.key, &r.token, inline_scripts, buf);
        count += 1;
    }
    let commands = count;
    if time {
        buf.extend_from_slice(TIME_COMMAND);
        count += 1;
    }
    if let Some(w) = wait {
        crate::wire::write_wait(w.k, w.ms, buf);
    }
    let sent = Instant::now();
    conn.send_packed_command(buf)?;
    let mut values = Vec::with_capacity(count);
    let mut reading = None;
    while values.len() < count {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value if time && reading.is_none() && values.len() == commands => {
                reading = Some(TimeReading::new(value, sent));
                count -= 1;
            }
            value => values.push(value),
        }
    }
    let acked = match wait {
        Some(w) => Some(w.read(conn, sent)?),
        None => None,
    };
    Ok((values, reading, acked))
}

/// The `WAIT k ms` that ends a `WAIT` lane's pipeline, and until when its reply is read.
#[derive(Debug, Clone, Copy)]
struct Wait {
    k: u32,
    ms: u64,
    /// Past this, the callers are answered that the replicas did not acknowledge, and redis-rs
    /// skips the late reply when the connection reads its next one.
    answer_by: Instant,
    /// The connection's read timeout otherwise.
    io_timeout: Duration,
}

/// What the `WAIT` of a pipeline answered.
enum Acked {
    Reply(Value),
    /// No reply by `answer_by`, this long after the pipeline was sent.
    Late(Duration),
}

impl Wait {
    fn read(&self, conn: &mut redis::Connection, sent: Instant) -> redis::RedisResult<Acked> {
        let left = self
            .answer_by
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        conn.set_read_timeout(Some(left))?;
        let reply = conn.recv_response();
        conn.set_read_timeout(Some(self.io_timeout))?;
        match reply {
            Ok(value) => Ok(Acked::Reply(value)),
            Err(e) if e.is_timeout() => Ok(Acked::Late(sent.elapsed())),
            Err(e) => Err(e),
        }
    }
}

/// Why a yes does not count, when `WAIT` answered fewer than `k` replicas (or not with a
/// number, or not in time).
fn acknowledged(acked: &Acked, wait: &Wait) -> Option<NodeProblem> {
    let k = wait.k;
    let reply = match acked {
        Acked::Reply(reply) => reply,
        Acked::Late(waited) => {
            return Some(NodeProblem::NotReplicated {
                acknowledged: 0,
                required: k,
                waited: *waited,
            });
        }
    };
    match reply {
        Value::Int(n) if *n >= i64::from(k) => None,
        Value::Int(n) => Some(NodeProblem::NotReplicated {
            acknowledged: u64::try_from(*n).unwrap_or(0),
            required: k,
            waited: Duration::from_millis(wait.ms),
        }),
        Value::ServerError(e) => Some(NodeProblem::Server(format!(
            "WAIT failed: {e}; min_replicas needs the WAIT command (+wait)"
        ))),
        other => Some(NodeProblem::Server(format!(
            "WAIT answered {other:?}, not a count of replicas"
        ))),
    }
}

/// A batch on a cluster's masters (see `cluster.rs`, which handles `NOSCRIPT`, `MOVED` and
/// `ASK` itself): the votes, the `TIME` reading, when the masters changed on the way their
/// merged probe and list for the worker to observe, and each master's connected replicas as
/// the link last read them.
type OnCluster = (
    Vec<Vote>,
    Readings,
    Option<(Probe, String)>,
    Vec<(Option<String>, Option<u64>)>,
);

/// With `wait` (a `WAIT` lane), a yes counts only if the `WAIT` on the connection of the master
/// that took it confirmed `k` replicas.
fn on_cluster(
    link: &mut ClusterLink,
    batch: &[Request],
    inline: bool,
    time: bool,
    scripts: &[&[&Script]],
    wait: Option<(Wait, WaitFor)>,
) -> redis::RedisResult<OnCluster> {
    let routed: Vec<Routed<'_>> = batch
        .iter()
        .map(|r| Routed {
            command: &r.command,
            key: &r.key,
            token: &r.token,
            deadline: r.deadline,
        })
        .collect();
    let (values, time, acks) = link.execute(&routed, inline, time, scripts, wait.map(|w| w.1))?;
    let refreshed = link.take_refreshed().map(|probe| (probe, link.masters()));
    let mut acks = acks.map(Vec::into_iter);
    let votes = values
        .into_iter()
        .zip(batch)
        .map(|(v, r)| {
            let vote = r.command.interpret(v);
            let ack = acks.as_mut().and_then(Iterator::next);
            match (wait, ack) {
                (Some((wait, _)), Some(ack)) if vote.is_yes() && needs_ack(&r.command) => {
                    let problem = match ack {
                        Waited::Reply(value) => acknowledged(&Acked::Reply(value), &wait),
                        Waited::Late(waited) => acknowledged(&Acked::Late(waited), &wait),
                        Waited::Gone(master) => Some(NodeProblem::Unavailable(format!(
                            "master {master} took the write but left the cluster's slot map \
                             before its WAIT (min_replicas) could run"
                        ))),
                    };
                    problem.map_or(vote, Vote::Failed)
                }
                _ => vote,
            }
        })
        .collect();
    let replicas = link
        .probed_replicas()
        .into_iter()
        .map(|(m, n)| (Some(m), n))
        .collect();
    Ok((votes, time, refreshed, replicas))
}

/// The master with the fewest connected replicas among `replicas` (`None`: the node's one
/// master), and how many, if that is fewer than `k`. A master that did not tell is not counted
/// here (`WAIT` checks it).
fn short_master(
    replicas: &[(Option<String>, Option<u64>)],
    k: u32,
) -> Option<(Option<String>, u64)> {
    replicas
        .iter()
        .filter_map(|(m, n)| Some((m.clone(), (*n)?)))
        .min_by_key(|(_, n)| *n)
        .filter(|(_, n)| *n < u64::from(k))
}

/// Whether a reply says the server is a read-only replica now.
fn is_readonly(value: &Value) -> bool {
    matches!(value, Value::ServerError(e)
        if e.code() == "READONLY"
            || e.details().is_some_and(|d| d.contains("read only replica")))
}

/// Whether a server error says the command is not for this user or not on this server (an
/// ACL denial, a renamed or disabled command), rather than that something went wrong.
fn command_refused(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    crate::wire::is_denied(&text)
        || text.contains("NoPerm")
        || text.contains("unknown command")
        || text.contains("unknown subcommand")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(k: u32) -> Wait {
        Wait {
            k,
            ms: 25,
            answer_by: Instant::now(),
            io_timeout: Duration::from_millis(100),
        }
    }

    #[test]
    fn a_wait_short_of_replicas_fails_the_vote_with_the_count() {
        let enough = Acked::Reply(Value::Int(2));
        assert_eq!(acknowledged(&enough, &wait(2)), None);
        let short = Acked::Reply(Value::Int(1));
        let problem = acknowledged(&short, &wait(2)).expect("short");
        assert_eq!(
            problem,
            NodeProblem::NotReplicated {
                acknowledged: 1,
                required: 2,
                waited: Duration::from_millis(25)
            }
        );
        assert!(
            problem
                .to_string()
                .starts_with("WAIT: 1 of 2 replicas acknowledged within 25 ms"),
            "{problem}"
        );
        let late = Acked::Late(Duration::from_millis(37));
        assert!(matches!(
            acknowledged(&late, &wait(1)),
            Some(NodeProblem::NotReplicated {
                acknowledged: 0,
                required: 1,
                waited
            }) if waited == Duration::from_millis(37)
        ));
        let denied = Acked::Reply(
            redis::parse_redis_value(b"-NOPERM this user has no permissions to run 'wait'\r\n")
                .expect("an error reply"),
        );
        assert!(matches!(
            acknowledged(&denied, &wait(1)),
            Some(NodeProblem::Server(why)) if why.contains("+wait")
        ));
    }

    #[test]
    fn a_failed_acknowledgement_counts_as_applied_for_the_undo() {
        let vote = Vote::Failed(NodeProblem::NotReplicated {
            acknowledged: 0,
            required: 1,
            waited: Duration::from_millis(25),
        });
        assert!(vote.applied());
        let refused = Vote::Failed(NodeProblem::TooFewReplicas {
            connected: 0,
            required: 1,
            master: None,
        });
        assert!(!refused.applied(), "nothing was sent");
    }
}
