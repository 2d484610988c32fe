//! The quorum fan-out: one worker per node, and the call that sends a command to all of them
//! and decides as soon as the outcome is certain.
//!
//! Below the lock kinds and above the node workers: it knows commands and votes, not locks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::cancel::Cancel;
use crate::config::Config;
use crate::error::{Error, NodeProblem, QuorumReport, Result};
use crate::node::{self, Job, Node, ReplyTo, Settings};
use crate::rules::clock::ClockBoard;
use crate::rules::quorum::{Decision, Gate, Tally, Vote};
use crate::telemetry::NodeStatus;
use crate::telemetry::Telemetry;
use crate::wire::{Command, Script};

/// Looks at the answers a caller takes spinning, then yielding (while yields are cheap, see
/// `sync::yield_if_cheap`), before it sleeps on the gate.
const SPIN_LOOKS: u32 = 6;
const YIELD_LOOKS: u32 = 4;
/// How long a caller looks (yielding) before it sleeps, while its recent calls have been
/// deciding within `SPIN_WHILE_UNDER` on average: on a fast network, catching the answers
/// awake saves a wake-up per call; on a slower one the looking would mostly be in vain and burn
/// CPU, so the caller sleeps after the few looks above. (Twice the spin: a call that sleeps
/// also pays for its wake-up, which must not keep a fast network counted as slow.)
const CALLER_SPIN: Duration = Duration::from_micros(100);
const SPIN_WHILE_UNDER: Duration = Duration::from_micros(200);

/// The node workers of one client and its validated configuration.
pub(crate) struct Engine {
    nodes: Vec<Node>,
    workers: Vec<JoinHandle<()>>,
    /// Disconnects once every worker thread has ended.
    exited: Receiver<()>,
    pub(crate) config: Config,
    /// For connections of other kinds (the subscribers of `notify/`).
    pub(crate) clients: Vec<crate::topology::Target>,
    /// What the workers learn about clocks; held locks watch its count of our host's
    /// suspensions ([`ClockBoard::epoch`]).
    pub(crate) board: Arc<ClockBoard>,
    /// How long recent calls took to decide, in ns (a moving average), for `CALLER_SPIN`.
    recent_ns: AtomicU64,
    /// The client's counters and event listeners.
    pub(crate) telemetry: Arc<Telemetry>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the channels lets each worker send what is queued (releases from dropped
        // locks among it) and stop. Wait for that, so that no thread or connection outlives
        // the client, but no longer than one I/O timeout: a worker stuck on an unresponsive
        // node is left to end on its own once its socket gives up.
        self.nodes.clear();
        let deadline = Instant::now() + self.config.io_timeout();
        if let Err(RecvTimeoutError::Disconnected) = self.exited.recv_deadline(deadline) {
            for worker in self.workers.drain(..) {
                let _ = worker.join();
            }
        }
        // Otherwise dropping the handles detaches the stragglers.
    }
}

/// How one fan-out ended.
pub(crate) struct Outcome {
    pub decision: Decision,
    pub tally: Tally,
    /// Taken before the first command was sent.
    pub t0: Instant,
    /// When the decision was certain.
    pub decided: Instant,
    /// Where the votes that came after the decision arrive.
    pub late: Receiver<(usize, Vote)>,
    /// The wait was cut short by a cancel: the tally is incomplete.
    pub cancelled: bool,
}

impl Outcome {
    /// Takes in the votes that come after the decision, waiting for them until as long again
    /// as the decision took (they are usually that close behind), so that the tally says what
    /// the nodes answered; a node that has not answered by then (hung) stays unknown. Not after
    /// a decision that timed some node out: a late answer from one cannot be recorded.
    pub(crate) fn settle(&mut self) {
        if self
            .tally
            .votes()
            .any(|v| matches!(v, Vote::Failed(NodeProblem::TimedOut)))
        {
            return;
        }
        let by = self.decided + (self.decided - self.t0);
        loop {
            let next = match self.late.recv_deadline(by) {
                Ok(answer) => Ok(answer),
                Err(_) => self.late.try_recv(),
            };
            let Ok((i, vote)) = next else { return };
            self.tally.record(i, vote);
        }
    }

    pub(crate) fn report(&self, engine: &Engine) -> QuorumReport {
        let names: Vec<String> = engine.nodes.iter().map(|n| n.address.clone()).collect();
        self.tally.report(&names, self.decided - self.t0)
    }
}

/// How a caller reads the answers of one fan-out.
struct Answers {
    rx: Receiver<(usize, Vote)>,
    /// Whether the workers wake this thread through a [`Gate`] (no cancel to watch).
    gated: bool,
    /// Whether recent calls decided fast enough to keep spinning a while (`CALLER_SPIN`).
    fast: bool,
    looks: u32,
    t0: Instant,
    deadline: Instant,
}

impl Answers {
    /// Reads answers into `tally` until it decides; and whether the cancel fired.
    fn decide(&mut self, tally: &mut Tally, cancel: Option<&Cancel>) -> (Decision, bool) {
        let mut cancelled = false;
        loop {
            if let Some(decision) = tally.decision() {
                return (decision, cancelled);
            }
            match self.next(cancel) {
                Some(Ok((i, vote))) => tally.record(i, vote),
                Some(Err(true)) => {
                    cancelled = true;
                    tally.fail_unanswered(NodeProblem::Cancelled);
                }
                // Every worker has answered or dropped the request (those that dropped it
                // found the deadline already passed), or the deadline has passed.
                Some(Err(false)) => tally.fail_unanswered(NodeProblem::TimedOut),
                None => {}
            }
        }
    }

    /// The next answer; `Err(true)`: cancelled; `Err(false)`: no answer will come in time (the
    /// deadline passed, or every worker answered or dropped its job); `None`: nothing yet,
    /// look again.
    fn next(
        &mut self,
        cancel: Option<&Cancel>,
    ) -> Option<std::result::Result<(usize, Vote), bool>> {
        if !self.gated {
            return Some(match cancel {
                None => self.rx.recv_deadline(self.deadline).map_err(|_| false),
                Some(c) => crossbeam_channel::select! {
                    recv(self.rx) -> msg => msg.map_err(|_| false),
                    recv(c.fired()) -> _ => Err(true),
                    default(self.deadline.saturating_duration_since(Instant::now())) => Err(false),
                },
            });
        }
        match self.rx.try_recv() {
            Ok(answer) => Some(Ok(answer)),
            Err(TryRecvError::Disconnected) => Some(Err(false)),
            Err(TryRecvError::Empty) => {
                let now = Instant::now();
                if now >= self.deadline {
                    return Some(Err(false));
                }
                self.pause(now);
                None
            }
        }
    }

    /// First a few short looks (spinning, then yielding the core to the workers while that is
    /// cheap: `sync::yield_if_cheap`), then sleep until the gate wakes this thread. A wake-up
    /// that came before the park (or a stray one) makes it return at once; the caller looks
    /// again.
    fn pause(&mut self, now: Instant) {
        self.looks += 1;
        if self.looks <= SPIN_LOOKS && crate::sync::spinning() {
            for _ in 0..1u32 << self.looks.min(6) {
                std::hint::spin_loop();
            }
            return;
        }
        let looking =
            self.looks <= SPIN_LOOKS + YIELD_LOOKS || (self.fast && now < self.t0 + CALLER_SPIN);
        if !(looking && crate::sync::yield_if_cheap()) {
            std::thread::park_timeout(self.deadline - now);
        }
    }
}

impl Engine {
    /// Starts one worker per node and waits for their first connection attempts (in parallel,
    /// bounded by the connect timeout), so that the first call does not race the connects
    /// against `node_timeout`. Unreachable nodes do not fail the start: their workers keep
    /// trying.
    pub(crate) fn start(
        clients: Vec<crate::topology::Target>,
        config: Config,
        scripts: &'static [&'static [&'static Script]],
    ) -> Result<Engine> {
        let settings = Settings {
            node_timeout: config.node_timeout,
            connect_timeout: config.connect_timeout(),
            io_timeout: config.io_timeout(),
            restart_grace: config.restart_grace,
            clock_guard: config.clock_limits(),
            strict_servers: config.strict_servers,
            min_replicas: config.min_replicas,
            scripts,
        };
        let board = Arc::new(ClockBoard::new(
            clients.len(),
            settings.clock_guard.map(|l| l.threshold),
        ));
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        // Built up in place, so that a failure half-way stops the workers already started.
        let mut engine = Engine {
            nodes: Vec::with_capacity(clients.len()),
            workers: Vec::with_capacity(clients.len()),
            exited,
            config,
            clients: clients.clone(),
            board: Arc::clone(&board),
            recent_ns: AtomicU64::new(0),
            telemetry: Arc::new(Telemetry::new()),
        };
        let servers = Arc::new(node::Servers::new(clients.len()));
        // With min_replicas, a node has two workers (see `node::wait_lane`).
        let (ready, connected) = crossbeam_channel::bounded(2 * clients.len());
        for (i, client) in clients.into_iter().enumerate() {
            let (node, workers) = node::spawn(
                i,
                client,
                settings,
                ready.clone(),
                exited_tx.clone(),
                Arc::clone(&board),
                Arc::clone(&servers),
            )
            .map_err(|source| Error::Io {
                context: format!("starting the worker thread for node {i}"),
                source,
            })?;
            engine.nodes.push(node);
            engine.workers.extend(workers);
        }
        drop((ready, exited_tx));
        let deadline = Instant::now() + settings.connect_timeout;
        for _ in 0..engine.workers.len() {
            if connected.recv_deadline(deadline).is_err() {
                break;
            }
        }
        Ok(engine)
    }

    /// Each node's Sentinel watch (`None` for other nodes), for the release subscribers.
    pub(crate) fn watches(&self) -> Vec<Option<Arc<crate::topology::Watch>>> {
        self.nodes.iter().map(Node::watch).collect()
    }

    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn addresses(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.address.as_str())
    }

    /// Whether callers skip node `i` (see `Node::stalled`).
    pub(crate) fn stalled(&self, i: usize) -> bool {
        self.nodes.get(i).is_some_and(Node::stalled)
    }

    pub(crate) fn node_status(&self) -> Vec<NodeStatus> {
        self.nodes.iter().map(Node::status).collect()
    }

    /// Sends `command` to every node at once and waits until the outcome is certain, or until
    /// `node_timeout` has passed (silent nodes then count as timed out).
    pub(crate) fn quorum_call(
        &self,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
    ) -> Outcome {
        self.fan_out(command, key, token, None, None)
    }

    /// [`quorum_call`](Engine::quorum_call) sent only to the nodes marked in `targets` (all
    /// when `None`); the others count as refusals. A `cancel` that fires before the decision
    /// ends the wait at once, with `cancelled` set and the decision `Unreachable`: the caller
    /// undoes whatever may have been applied, as for any failed attempt.
    pub(crate) fn fan_out(
        &self,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
        targets: Option<&[bool]>,
        cancel: Option<&Cancel>,
    ) -> Outcome {
        self.call(command, key, token, targets, cancel, None)
    }

    /// A release, waited for like [`fan_out`](Engine::fan_out), but never dropped: a worker
    /// that reaches it after the caller stopped waiting still sends it, and one whose node is
    /// down sends it after the reconnect while the keys may be live (`live_until`).
    pub(crate) fn release_call(
        &self,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
        live_until: Option<Instant>,
    ) -> Outcome {
        self.call(command, key, token, None, None, Some(live_until))
    }

    /// `release`: `Some(live_until)` for a release (no deadline on the requests).
    fn call(
        &self,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
        targets: Option<&[bool]>,
        cancel: Option<&Cancel>,
        release: Option<Option<Instant>>,
    ) -> Outcome {
        let nodes = &self.nodes;
        let t0 = Instant::now();
        let deadline = t0 + self.config.node_timeout;
        let (tx, rx) = crossbeam_channel::bounded(nodes.len());
        let mut tally = Tally::new(nodes.len());
        let skipped = (0..nodes.len()).filter(|&i| !is_target(targets, i)).count();
        // Without a cancel to watch, the caller sleeps until the answers can decide (one
        // wake-up per fan-out); with one, it selects on the votes and the cancel.
        let gate = cancel
            .is_none()
            .then(|| Arc::new(Gate::new(std::thread::current(), nodes.len(), skipped)));
        for (i, node) in nodes.iter().enumerate() {
            if !is_target(targets, i) {
                tally.record(i, Vote::No);
                continue;
            }
            node.send(Job {
                command: command.clone(),
                key: Arc::clone(key),
                token: Arc::clone(token),
                queued_at: t0,
                deadline: release.is_none().then_some(deadline),
                reply: Some(ReplyTo {
                    node: i,
                    tx: tx.clone(),
                    gate: gate.clone(),
                }),
                live_until: release.flatten(),
                on_lane: None,
            });
        }
        drop(tx);
        // The workers hold the gate now: its last one going wakes this thread.
        let mut answers = Answers {
            rx,
            gated: gate.is_some(),
            fast: self.recent_ns.load(Ordering::Relaxed) < SPIN_WHILE_UNDER.as_nanos() as u64,
            looks: 0,
            t0,
            deadline,
        };
        drop(gate);
        let (decision, cancelled) = answers.decide(&mut tally, cancel);
        let decided = Instant::now();
        if answers.gated {
            self.note_took(decided - t0);
        }
        if command.acquire && targets.is_none() {
            for (i, node) in nodes.iter().enumerate() {
                node.count_vote(tally.vote(i));
            }
        }
        Outcome {
            decision,
            tally,
            t0,
            decided,
            late: answers.rx,
            cancelled,
        }
    }

    /// Keeps the moving average of how long calls take to decide (`CALLER_SPIN`).
    fn note_took(&self, took: Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let recent = self.recent_ns.load(Ordering::Relaxed);
        self.recent_ns
            .store(recent - recent / 8 + took / 8, Ordering::Relaxed);
    }

    /// Sends `command` to node `i` alone and waits for its answer up to `node_timeout` (a
    /// queue's command, see `queue.rs`).
    pub(crate) fn call_one(
        &self,
        i: usize,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
    ) -> Vote {
        let Some(node) = self.nodes.get(i) else {
            return Vote::Failed(NodeProblem::Server(format!("no node {i}")));
        };
        let deadline = Instant::now() + self.config.node_timeout;
        let (tx, rx) = crossbeam_channel::bounded(1);
        node.send(Job {
            queued_at: Instant::now(),
            command: command.clone(),
            key: Arc::clone(key),
            token: Arc::clone(token),
            deadline: Some(deadline),
            reply: Some(ReplyTo {
                node: i,
                tx,
                gate: None,
            }),
            live_until: None,
            on_lane: None,
        });
        match rx.recv_deadline(deadline) {
            Ok((_, vote)) => vote,
            Err(_) => Vote::Failed(NodeProblem::TimedOut),
        }
    }

    /// Queues `command` on the nodes marked in `targets` (all when `None`) without waiting.
    /// `live_until`: how long the keys it removes may live, so that a node found down gets the
    /// command after its reconnect instead of never (see `Job::live_until`).
    pub(crate) fn send_nowait(
        &self,
        command: &Command,
        key: &Arc<str>,
        token: &Arc<str>,
        targets: Option<&[bool]>,
        live_until: Option<Instant>,
    ) {
        let queued_at = Instant::now();
        for (i, node) in self.nodes.iter().enumerate() {
            if !is_target(targets, i) {
                continue;
            }
            node.send(Job {
                queued_at,
                command: command.clone(),
                key: Arc::clone(key),
                token: Arc::clone(token),
                deadline: None,
                reply: None,
                live_until,
                on_lane: None,
            });
        }
    }

    /// The latest moment a key set with `ttl` now could still be live on a node.
    pub(crate) fn live_until(&self, ttl: Duration) -> Option<Instant> {
        Instant::now().checked_add(ttl + self.config.node_timeout)
    }
}

/// Whether node `i` gets the command: all nodes when `targets` is `None`.
fn is_target(targets: Option<&[bool]>, i: usize) -> bool {
    targets.is_none_or(|t| t.get(i).copied().unwrap_or(false))
}
