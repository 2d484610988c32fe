//! One long-lived worker thread per Redis node.
//!
//! The worker owns the node's blocking connection. Callers hand it [`Job`]s over a channel;
//! it takes everything queued (waiting a few microseconds for the callers it just answered, see
//! `Worker::gather`) and sends it as one pipeline, so many caller threads share one connection
//! and one round trip. A broken connection answers its jobs with an error and is rebuilt with
//! capped backoff; while the node is known to be down, jobs are answered at once so callers
//! never wait on it.
//!
//! This file is the caller's side: the [`Node`] handle (which worker a job goes to, the node's
//! status), the [`Settings`] a worker takes from the configuration, and [`spawn`]. The parts,
//! each in its own file, lowest first (a file uses only those above it, and `Settings`):
//!
//! - `status.rs`: what a worker publishes, and how `node_status()` reads it;
//! - `job.rs`: a [`Job`], and how its caller is answered;
//! - `queue.rs`: a worker's job queue, whose worker yields the core only while that is cheap;
//! - `errors.rs`: how a failure is worded;
//! - `wait_lane.rs`: the `WAIT` lane (`min_replicas`), both the handle's and the worker's side;
//! - `server.rs`: the server process behind a connection, and whether its yes counts now;
//! - `follow.rs`: a Sentinel node's follow of its watch;
//! - `pipeline.rs`: one batch on the wire, and its replies as votes;
//! - `connection.rs`: the connection's life (open, checks, backoff, drop);
//! - `worker.rs`: the thread's loop, from queued jobs to answers.

mod connection;
mod errors;
mod follow;
mod job;
mod pipeline;
mod queue;
mod server;
mod status;
mod wait_lane;
mod worker;

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::error::NodeProblem;
use crate::rules::clock::{self, ClockBoard, Guard};
use crate::rules::quorum::Vote;
use crate::telemetry::NodeStatus;
use crate::topology::{Target, Watch};
use crate::wire::Script;

use connection::Connection;
use follow::Follow;
use job::answer;
pub(crate) use job::{Job, ReplyTo};
use queue::JobSender;
use server::Server;
pub(crate) use server::Servers;
use status::{Health, VoteCount};
use wait_lane::{Lane, WaitLane};
use worker::Worker;

const WORKER_STACK: usize = 256 * 1024;

/// The caller's side of one node.
pub(crate) struct Node {
    pub address: String,
    node_timeout: Duration,
    tx: JobSender,
    health: Arc<Health>,
    /// With `min_replicas`: the second worker, which carries what needs `WAIT` (see
    /// `wait_lane.rs`).
    lane: Option<Lane>,
    /// For a Sentinel node: what its watch thread heard, which the node's release subscriber
    /// follows too (`notify/`), and the thread's stop, dropped with the node.
    watch: Option<Arc<Watch>>,
    _watch_thread: Option<WatchThread>,
}

/// A Sentinel node's watch thread: its stop and its handle.
type WatchThread = (Sender<()>, JoinHandle<()>);

impl Node {
    /// A Sentinel node's watch: which master the sentinels name now.
    pub(crate) fn watch(&self) -> Option<Arc<Watch>> {
        self.watch.clone()
    }

    /// Queues a job; if the worker is gone (it never stops while this handle exists), the
    /// job's caller is answered at once.
    ///
    /// With a `WAIT` lane, acquisitions and extensions go over it and everything else over the
    /// first connection, except a cleanup (an undo, a release) of a key and token whose
    /// acquisition or extension the lane has not answered yet: it follows that over the lane,
    /// which sends in order. Over the first connection it could reach the server first (the
    /// lane may be waiting for a `WAIT`, or hold the write queued behind one), find nothing,
    /// and leave the key the lane writes next until its TTL: after a caller whose quorum came
    /// from other nodes released at once, say.
    ///
    /// An acquisition or an extension that a caller waits for is not sent to a node that has
    /// stalled (see [`Health::stalled`]): it fails at once, as `Unavailable`, so that a split
    /// vote decides without waiting out the node timeout for a node that has not answered in
    /// time for a while. Nothing is written, so there is nothing to undo; the caller's undo
    /// goes out all the same, as for any failed vote. Cleanups are always queued.
    pub(crate) fn send(&self, mut job: Job) {
        let (tx, health) = match &self.lane {
            Some(lane) if lane.carries(&mut job) => (&lane.tx, &*lane.health),
            _ => (&self.tx, &*self.health),
        };
        if job.reply.is_some()
            && wait_lane::needs_ack(&job.command)
            && health.stalled(self.node_timeout)
        {
            health
                .errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ms = self.node_timeout.as_millis();
            answer(
                job,
                Vote::Failed(NodeProblem::Unavailable(format!(
                    "not answering within the node timeout ({ms} ms): skipped until it does"
                ))),
            );
            return;
        }
        if let Some(job) = tx.send(job) {
            answer(
                job,
                Vote::Failed(NodeProblem::Unavailable("worker stopped".into())),
            );
        }
    }

    /// Whether callers skip the node: it has not answered its worker within the node timeout,
    /// and no probe has answered in time since (see [`Health::stalled`]).
    pub(crate) fn stalled(&self) -> bool {
        self.health.stalled(self.node_timeout)
    }

    /// Counts the node's vote in an acquire attempt as it decided (`None`: not answered yet).
    pub(crate) fn count_vote(&self, vote: Option<&Vote>) {
        let count = match vote {
            None => VoteCount::Unanswered,
            Some(Vote::No) => VoteCount::No,
            Some(Vote::Failed(NodeProblem::TimedOut)) => VoteCount::TimedOut,
            Some(Vote::Failed(NodeProblem::Unavailable(_))) => VoteCount::Unavailable,
            Some(Vote::Failed(_)) => VoteCount::Failed,
            Some(_) => VoteCount::Yes,
        };
        self.health.count_vote(count);
    }

    pub(crate) fn status(&self) -> NodeStatus {
        let lane = self.lane.as_ref().map(|lane| &*lane.health);
        self.health.status(&self.address, lane)
    }
}

/// What a worker needs to know from the client's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// How long a caller waits for a node's answer; a node that lets its worker wait longer is
    /// skipped until it answers within it again.
    pub node_timeout: Duration,
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
    let (watch, watch_thread) = start_watch(index, &client, &settings, &exited)?;
    let start = Start {
        index,
        client,
        settings,
        ready,
        exited,
        board,
        servers,
        watch: watch.clone(),
    };
    let (tx, health, handle) = start.worker(None)?;
    let mut handles = vec![handle];
    let lane = match settings.min_replicas {
        Some(k) => {
            let (tx, health, handle) = start.worker(Some(k))?;
            handles.push(handle);
            Some(Lane::new(tx, health))
        }
        None => None,
    };
    let node = Node {
        address,
        node_timeout: settings.node_timeout,
        tx,
        health,
        lane,
        watch,
        _watch_thread: watch_thread,
    };
    Ok((node, handles))
}

/// A Sentinel node's watch: one thread that asks the sentinels which master they name, for
/// both of the node's workers (see `topology/sentinel/watch.rs`), and its stop and
/// handle. The handle stays with the node, not among the workers', whose count the engine
/// takes for how many first connects to wait for; the client's drop still waits for it
/// through `exited`.
fn start_watch(
    index: usize,
    client: &Target,
    settings: &Settings,
    exited: &Sender<()>,
) -> io::Result<(Option<Arc<Watch>>, Option<WatchThread>)> {
    let Target::Sentinel(s) = client else {
        return Ok((None, None));
    };
    let (stop_tx, stop) = crossbeam_channel::bounded(0);
    let (watch, handle) = s.watch(
        index,
        settings.connect_timeout,
        settings.io_timeout,
        stop,
        exited.clone(),
    )?;
    Ok((Some(watch), Some((stop_tx, handle))))
}

/// What each of a node's workers is started with.
struct Start {
    index: usize,
    client: Target,
    settings: Settings,
    ready: Sender<()>,
    exited: Sender<()>,
    board: Arc<ClockBoard>,
    servers: Arc<Servers>,
    watch: Option<Arc<Watch>>,
}

impl Start {
    /// Starts a worker (with `wait_for`, the node's `WAIT` lane); gives its channel, its
    /// published health and its thread.
    fn worker(
        &self,
        wait_for: Option<u32>,
    ) -> io::Result<(JobSender, Arc<Health>, JoinHandle<()>)> {
        let (tx, rx) = queue::queue();
        let health = Arc::new(Health::new());
        let guard = Guard::new(
            self.settings.clock_guard,
            self.client.address(),
            self.index,
            Arc::clone(&self.board),
        );
        let server = Server::new(
            &self.client,
            self.settings.restart_grace,
            wait_for.is_none(),
            guard,
            Arc::clone(&health),
        );
        let conn = Connection::new(
            self.index,
            self.client.clone(),
            self.settings,
            Arc::clone(&self.servers),
            self.watch.clone().map(Follow::new),
            Arc::clone(&health),
        );
        let lane = wait_for.map(WaitLane::new);
        let worker = Worker::new(
            rx,
            conn,
            server,
            lane,
            Arc::clone(&health),
            self.exited.clone(),
        );
        let ready = self.ready.clone();
        let name = match wait_for {
            Some(_) => format!("redlock-node-{}-wait", self.index),
            None => format!("redlock-node-{}", self.index),
        };
        let handle = std::thread::Builder::new()
            .name(name)
            .stack_size(WORKER_STACK)
            .spawn(move || worker.run(ready))?;
        Ok((tx, health, handle))
    }
}
