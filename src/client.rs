//! The client: one worker per node, and the fan-out that every lock operation goes through.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::clock::ClockBoard;
use crate::config::{Builder, Config};
use crate::error::{Error, NodeProblem, Operation, QuorumReport, Result};
use crate::lock::{Kind, Lock, relock};
use crate::node::{self, Command, Node, NodeStatus, ReplyTo, Request, Settings};
use crate::notify::Notifier;
use crate::options::LockOptions;
use crate::quorum::{
    Decision, Tally, Vote, backoff_delay, note_late, retry_delay, validity_deadline,
};
use crate::token::new_token;
use crate::watchdog::{Job, Watchdog};

/// Longest fallback wait between two attempts of a waiter that gets no notification (or
/// `retry_delay`, if that is longer).
const WAIT_BACKOFF_CAP: Duration = Duration::from_secs(1);

/// A Redlock client over N independent Redis nodes.
///
/// Cheap to clone (clones share the workers) and safe to use from many threads at once: their
/// requests to a node share one connection and are pipelined. The workers stop when the last
/// clone and the last [`Lock`] from it are dropped.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    nodes: Vec<Node>,
    workers: Vec<JoinHandle<()>>,
    /// Disconnects once every worker thread has ended.
    exited: Receiver<()>,
    config: Config,
    /// For the subscriber connections, opened on the first wait.
    clients: Vec<redis::Client>,
    /// The extender thread, started with the first auto-extended lock.
    watchdog: Mutex<Option<Watchdog>>,
    /// The subscriber threads, started with the first waiter.
    notifier: Mutex<Option<Arc<Notifier>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The extender and the subscribers first: neither holds a strong reference between two
        // operations, so they are idle and stop at once.
        let limit = self.config.io_timeout();
        if let Some(w) = relock(&self.watchdog).take() {
            w.stop(limit);
        }
        if let Some(n) = relock(&self.notifier).take()
            && let Some(mut n) = Arc::into_inner(n)
        {
            n.stop(limit);
        }
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
}

impl Outcome {
    pub(crate) fn report(&self, client: &Redlock) -> QuorumReport {
        let names: Vec<String> = client
            .inner
            .nodes
            .iter()
            .map(|n| n.address.clone())
            .collect();
        self.tally.report(&names, self.decided - self.t0)
    }
}

impl Redlock {
    /// Starts configuring a client. `build` connects to all nodes in parallel and returns once
    /// each has connected or failed to (at most the connect timeout, 500 ms by default).
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Redlock {
        Redlock { inner }
    }

    pub(crate) fn start(clients: Vec<redis::Client>, config: Config) -> Result<Redlock> {
        let settings = Settings {
            connect_timeout: config.connect_timeout(),
            io_timeout: config.io_timeout(),
            restart_grace: config.restart_grace,
            clock_guard: config.clock_limits(),
            strict_servers: config.strict_servers,
        };
        let board = Arc::new(ClockBoard::new(clients.len()));
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        // Built up in place, so that a failure half-way stops the workers already started.
        let mut inner = Inner {
            nodes: Vec::with_capacity(clients.len()),
            workers: Vec::with_capacity(clients.len()),
            exited,
            config,
            clients: clients.clone(),
            watchdog: Mutex::new(None),
            notifier: Mutex::new(None),
        };
        let (ready, connected) = crossbeam_channel::bounded(clients.len());
        for (i, client) in clients.into_iter().enumerate() {
            let (node, worker) = node::spawn(
                i,
                client,
                settings,
                ready.clone(),
                exited_tx.clone(),
                Arc::clone(&board),
            )
            .map_err(|source| Error::Io {
                context: format!("starting the worker thread for node {i}"),
                source,
            })?;
            inner.nodes.push(node);
            inner.workers.push(worker);
        }
        drop((ready, exited_tx));
        // Wait for the first connection attempts (in parallel, bounded by the connect timeout),
        // so that the first lock call does not race the connects against `node_timeout`.
        // Unreachable nodes do not fail the build: their workers keep trying.
        let deadline = Instant::now() + settings.connect_timeout;
        for _ in 0..inner.nodes.len() {
            if connected.recv_deadline(deadline).is_err() {
                break;
            }
        }
        Ok(Redlock {
            inner: Arc::new(inner),
        })
    }

    /// Acquires `resource` for `ttl`, retrying up to `retry_count` times after a random delay.
    ///
    /// Errors: [`Error::NotAcquired`] (held by another owner), [`Error::NoQuorum`] (too few nodes
    /// answered), [`Error::InvalidArgument`] (empty resource, TTL zero, too small to leave any
    /// validity, or over 10 years).
    pub fn lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(
            resource,
            ttl,
            Patience::Count(self.inner.config.retry_count),
        )
    }

    /// Like [`lock`](Redlock::lock), with a single attempt.
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(resource, ttl, Patience::Count(0))
    }

    /// Acquires `resource` for `ttl` as [`options`](LockOptions) say:
    ///
    /// - `wait_timeout`: keep trying until then instead of `retry_count` times. A waiter wakes on
    ///   the release notification the nodes publish (one subscriber connection per node per
    ///   client, shared by all waiters) and otherwise retries after a jittered exponential
    ///   backoff from `retry_delay` up to 1 s (or `retry_delay`, if longer), so a lost notification costs at most that.
    /// - `auto_extend`: the client's extender thread extends the lock every
    ///   `extend_fraction × ttl` while it is held, each time a quorum extend with the validity
    ///   rule; see [`Lock::is_held`], [`Lock::lost`] and [`Lock::on_lost`] for how the holder
    ///   learns that it was lost. Extension stops for good when the lock is released or dropped
    ///   (a panicking holder drops it), after `max_hold`, or at `max_extensions`. The `Lock`
    ///   keeps its client alive, so extension goes on while the lock is held even after the
    ///   last `Redlock` handle is dropped; the extender thread ends with the last lock.
    ///
    /// Errors as for [`lock`](Redlock::lock); [`Error::InvalidArgument`] for an
    /// `extend_fraction` outside (0, 1) or a TTL too short to be extended in time.
    pub fn lock_with(&self, resource: &str, ttl: Duration, options: LockOptions) -> Result<Lock> {
        let every = if options.auto_extend {
            let f = options.extend_fraction;
            if !(f.is_finite() && f > 0.0 && f < 1.0) {
                return Err(Error::invalid(format!(
                    "extend_fraction must be in (0, 1), got {f}"
                )));
            }
            let ttl_ms = self.inner.config.ttl_ms(ttl)?;
            let every = Duration::from_millis(ttl_ms).mul_f64(f);
            // An extension has to fit in what is left after `every`.
            if every.is_zero() || every + self.inner.config.node_timeout >= ttl {
                return Err(Error::invalid(format!(
                    "ttl of {ttl:?} is too short to auto-extend: extensions every {every:?} plus \
                     node_timeout must fit within it"
                )));
            }
            Some(every)
        } else {
            None
        };
        let patience = match options.wait_timeout {
            Some(limit) => Patience::Until {
                deadline: Instant::now()
                    .checked_add(limit.min(crate::MAX_TTL))
                    .ok_or_else(|| Error::invalid("wait_timeout is too large"))?,
                notify: options.notifications,
            },
            None => Patience::Count(self.inner.config.retry_count),
        };
        let lock = self.acquire(resource, ttl, patience)?;
        if let Some(every) = every {
            self.watch(&lock, ttl, every, options.max_hold)?;
        }
        Ok(lock)
    }

    /// Runs `f` under an auto-extended lock on `resource` and releases it afterwards (also when
    /// `f` panics: the lock is dropped while unwinding, which releases it and stops extension).
    ///
    /// `f` gets the lock, to check [`Lock::is_held`] or select on [`Lock::lost`] during long
    /// work. Returns `f`'s value, or [`Error::Lost`] if the lock was lost while `f` ran (the
    /// work may have overlapped another holder's); acquisition errors as for
    /// [`lock`](Redlock::lock).
    pub fn with_lock<T>(
        &self,
        resource: &str,
        ttl: Duration,
        f: impl FnOnce(&Lock) -> T,
    ) -> Result<T> {
        let lock = self.lock_with(resource, ttl, LockOptions::new().auto_extend(true))?;
        let value = f(&lock);
        if lock.is_lost() {
            return Err(lock.shared().lost_error(None));
        }
        match lock.release() {
            Ok(()) => Ok(value),
            Err(e @ Error::Lost { .. }) => Err(e),
            // Too few nodes answered the release: the keys expire with their TTL, the work
            // itself was done under the lock.
            Err(_) => Ok(value),
        }
    }

    /// Hands `lock` to the extender thread, starting it if this is the first.
    fn watch(
        &self,
        lock: &Lock,
        ttl: Duration,
        every: Duration,
        max_hold: Option<Duration>,
    ) -> Result<()> {
        let mut watchdog = relock(&self.inner.watchdog);
        if watchdog.is_none() {
            *watchdog = Some(
                Watchdog::spawn(Arc::downgrade(&self.inner)).map_err(|source| Error::Io {
                    context: "starting the lock extender thread".into(),
                    source,
                })?,
            );
        }
        if let Some(w) = watchdog.as_ref() {
            w.add(Job {
                lock: Arc::clone(lock.shared()),
                ttl,
                every,
                hold_until: max_hold.and_then(|d| Instant::now().checked_add(d)),
                capped: false,
            });
        }
        Ok(())
    }

    /// The subscriber threads, started on first use.
    fn notifier(&self) -> Result<Arc<Notifier>> {
        let mut notifier = relock(&self.inner.notifier);
        if let Some(n) = notifier.as_ref() {
            return Ok(Arc::clone(n));
        }
        let config = &self.inner.config;
        let n = Arc::new(
            Notifier::start(
                &self.inner.clients,
                config.connect_timeout(),
                config.io_timeout(),
            )
            .map_err(|source| Error::Io {
                context: "starting the release-notification threads".into(),
                source,
            })?,
        );
        *notifier = Some(Arc::clone(&n));
        Ok(n)
    }

    /// Acquires `resource` like [`lock`](Redlock::lock) and returns it with a fencing token,
    /// [`Lock::fence`]: strictly greater than the token of every fenced lock of `resource` whose
    /// holder came before, as long as a majority of nodes keeps its data. Costs one more round
    /// to the nodes than a plain lock, counted against the validity. The lock itself is a plain
    /// one (it excludes plain locks on the same resource); the counter lives in the key
    /// `redlock:fence:{resource}` on each node. Pass the token with every write to the
    /// protected resource, which rejects tokens lower than the highest it has seen.
    pub fn lock_fenced(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire_as(
            resource,
            Want::Fenced,
            ttl,
            Patience::Count(self.inner.config.retry_count),
        )
    }

    /// Like [`lock_fenced`](Redlock::lock_fenced), with a single attempt.
    pub fn try_lock_fenced(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire_as(resource, Want::Fenced, ttl, Patience::Count(0))
    }

    /// Acquires one hold of a reentrant lock on `resource` for `owner`, retrying like
    /// [`lock`](Redlock::lock).
    ///
    /// `owner` names the holder (any non-empty string up to 1024 bytes; a random one from
    /// [`Redlock::new_owner`] per logical owner is a good choice). It is not a thread: any
    /// thread (or goroutine, or process) that passes the same owner shares its holds. While
    /// `owner` holds the resource, it can acquire it again at once; every hold is a [`Lock`] to
    /// release, and the resource is free for others when the last one is released (or when
    /// the key expires). [`Lock::hold_count`] tells how many holds there are. Reentrant and
    /// plain locks on one resource exclude each other. Extending any hold keeps the resource
    /// at least `ttl` from now; no hold ever shortens it.
    pub fn reentrant_lock(&self, resource: &str, owner: &str, ttl: Duration) -> Result<Lock> {
        self.acquire_as(
            resource,
            Want::Reentrant(owner),
            ttl,
            Patience::Count(self.inner.config.retry_count),
        )
    }

    /// Like [`reentrant_lock`](Redlock::reentrant_lock), with a single attempt.
    pub fn try_reentrant_lock(&self, resource: &str, owner: &str, ttl: Duration) -> Result<Lock> {
        self.acquire_as(resource, Want::Reentrant(owner), ttl, Patience::Count(0))
    }

    /// A fresh random owner name for [`reentrant_lock`](Redlock::reentrant_lock).
    pub fn new_owner() -> Result<String> {
        new_token()
    }

    /// Acquires all `resources` at once or none of them, retrying like
    /// [`lock`](Redlock::lock).
    ///
    /// Each node sets all keys in one script (in sorted order) or none, so two clients locking
    /// overlapping sets cannot deadlock; a failed attempt is undone on every node. The lock's
    /// extend and release act on all resources. Errors: [`Error::InvalidArgument`] for an empty
    /// list, an empty name, a name given twice, or more than [`MAX_RESOURCES`] names.
    pub fn lock_many<I, S>(&self, resources: I, ttl: Duration) -> Result<Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (name, keys) = many_keys(resources)?;
        self.acquire_as(
            &name,
            Want::Many(keys),
            ttl,
            Patience::Count(self.inner.config.retry_count),
        )
    }

    /// Like [`lock_many`](Redlock::lock_many), with a single attempt.
    pub fn try_lock_many<I, S>(&self, resources: I, ttl: Duration) -> Result<Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (name, keys) = many_keys(resources)?;
        self.acquire_as(&name, Want::Many(keys), ttl, Patience::Count(0))
    }

    /// What each node's worker last saw of its node.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        self.inner.nodes.iter().map(Node::status).collect()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    fn acquire(&self, resource: &str, ttl: Duration, patience: Patience) -> Result<Lock> {
        self.acquire_as(resource, Want::Plain, ttl, patience)
    }

    fn acquire_as(
        &self,
        resource: &str,
        want: Want,
        ttl: Duration,
        patience: Patience,
    ) -> Result<Lock> {
        if resource.is_empty() {
            return Err(Error::invalid("resource name is empty"));
        }
        if let Want::Reentrant(owner) = want {
            if owner.is_empty() {
                return Err(Error::invalid("owner is empty"));
            }
            if owner.len() > MAX_OWNER_LEN {
                return Err(Error::invalid(format!(
                    "owner is {} bytes long; at most {MAX_OWNER_LEN} are allowed",
                    owner.len()
                )));
            }
        }
        let config = self.inner.config;
        let ttl_ms = config.ttl_ms(ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        let key: Arc<str> = resource.into();
        let mut attempt: u32 = 0;
        // Waiters only: our subscription to release notifications, and how many fallback waits
        // have passed.
        let mut subscription = None;
        let mut round: u32 = 0;
        loop {
            attempt = attempt.saturating_add(1);
            let token: Arc<str> = match want {
                Want::Reentrant(owner) => owner.into(),
                _ => new_token()?.into(),
            };
            let command = match &want {
                Want::Plain => Command::Acquire { ttl_ms },
                Want::Fenced => Command::AcquireFenced { ttl_ms },
                Want::Reentrant(_) => Command::AcquireReentrant { ttl_ms },
                Want::Many(keys) => Command::AcquireMany {
                    ttl_ms,
                    keys: Arc::clone(keys),
                },
            };
            let outcome = self.quorum_call(command, &key, &token);
            // The outcome that decides the error, and the kind of lock if it is ours.
            let (last, kind) = if outcome.decision == Decision::Quorum {
                match &want {
                    Want::Plain => (None, Some(Kind::Plain)),
                    Want::Many(keys) => (
                        None,
                        Some(Kind::Many {
                            keys: Arc::clone(keys),
                        }),
                    ),
                    Want::Reentrant(_) => (
                        None,
                        Some(Kind::Reentrant {
                            holds: outcome.tally.max_value().unwrap_or(1),
                            counted: Mutex::new(outcome.tally.applied_nodes()),
                            late: outcome.late.clone(),
                            answers_by: outcome.t0 + config.node_timeout,
                        }),
                    ),
                    Want::Fenced => {
                        let fence = outcome.tally.max_value().unwrap_or(0);
                        let mut written =
                            self.quorum_call(Command::WriteFence { fence }, &key, &token);
                        // Validity and the report count from the acquire's start.
                        written.t0 = outcome.t0;
                        if written.decision == Decision::Quorum {
                            (Some(written), Some(Kind::Fenced { fence }))
                        } else {
                            (Some(written), None)
                        }
                    }
                }
            } else {
                (None, None)
            };
            let decided = last.as_ref().map_or(outcome.decided, |l| l.decided);
            if let Some(kind) = kind
                && let Some(deadline) =
                    validity_deadline(outcome.t0, decided, ttl, config.drift_factor)
            {
                return Ok(Lock::of_kind(self.clone(), key, token, deadline, kind));
            }
            // A SET may have landed where the reply was lost or late: undo it everywhere. A
            // reentrant hold is undone only where it was counted: elsewhere a release would
            // take away one of the owner's other holds, and an uncounted increment expires.
            match &want {
                Want::Reentrant(_) => {
                    // Answers still on their way tell where else the hold was counted: wait for
                    // them, so that no stray hold blocks the resource until its TTL runs out.
                    let mut applied = outcome.tally.applied_nodes();
                    note_late(
                        &mut applied,
                        &outcome.late,
                        outcome.t0 + config.node_timeout,
                    );
                    self.send_nowait(Command::ReleaseReentrant, &key, &token, Some(&applied))
                }
                Want::Many(keys) => self.send_nowait(
                    Command::ReleaseMany {
                        keys: Arc::clone(keys),
                    },
                    &key,
                    &token,
                    None,
                ),
                // Undo, unlike a release, announces nothing: waiters need not wake for a failed try.
                Want::Plain | Want::Fenced => self.send_nowait(Command::Undo, &key, &token, None),
            }
            let pause = match patience {
                Patience::Count(retries) => (attempt <= retries)
                    .then(|| retry_delay(config.retry_delay, config.retry_jitter, rand::random())),
                Patience::Until { deadline, notify } => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        None
                    } else if !notify {
                        Some(
                            retry_delay(config.retry_delay, config.retry_jitter, rand::random())
                                .min(left),
                        )
                    } else {
                        Some(
                            backoff_delay(
                                config.retry_delay.max(Duration::from_millis(1)),
                                round,
                                WAIT_BACKOFF_CAP.max(config.retry_delay),
                                rand::random(),
                            )
                            .min(left),
                        )
                    }
                }
            };
            let Some(pause) = pause else {
                // A failed fence write-back is reported as such: too few nodes took it.
                let refused = last.is_none() && outcome.decision == Decision::Refused;
                let report = last.as_ref().unwrap_or(&outcome).report(self);
                return Err(if refused {
                    Error::NotAcquired {
                        resource: resource.to_owned(),
                        attempts: attempt,
                        report,
                    }
                } else {
                    Error::NoQuorum {
                        resource: resource.to_owned(),
                        operation: Operation::Acquire,
                        attempts: attempt,
                        report,
                    }
                });
            };
            let refused = outcome.decision == Decision::Refused;
            let notify = matches!(patience, Patience::Until { notify: true, .. });
            match &subscription {
                None if notify && refused => {
                    // Subscribed from now on: a release from here is seen. Try again at once,
                    // since one may have happened before the subscription was active.
                    subscription = Some(self.notifier()?.subscribe(&key, config.node_timeout));
                }
                Some(sub) if refused => {
                    if !sub.wait(pause) {
                        round = round.saturating_add(1);
                    }
                }
                _ => {
                    std::thread::sleep(pause);
                    round = round.saturating_add(1);
                }
            }
        }
    }

    /// Sends `command` to every node at once and waits until the outcome is certain, or until
    /// `node_timeout` has passed (silent nodes then count as timed out).
    pub(crate) fn quorum_call(
        &self,
        command: Command,
        key: &Arc<str>,
        token: &Arc<str>,
    ) -> Outcome {
        self.fan_out(command, key, token, None)
    }

    /// [`quorum_call`](Redlock::quorum_call) sent only to the nodes marked in `targets` (all
    /// when `None`); the others count as refusals.
    pub(crate) fn fan_out(
        &self,
        command: Command,
        key: &Arc<str>,
        token: &Arc<str>,
        targets: Option<&[bool]>,
    ) -> Outcome {
        let nodes = &self.inner.nodes;
        let t0 = Instant::now();
        let deadline = t0 + self.inner.config.node_timeout;
        let (tx, rx) = crossbeam_channel::bounded(nodes.len());
        let mut tally = Tally::new(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            if targets.is_some_and(|t| !t.get(i).copied().unwrap_or(false)) {
                tally.record(i, Vote::No);
                continue;
            }
            node.send(Request {
                command: command.clone(),
                key: Arc::clone(key),
                token: Arc::clone(token),
                deadline: Some(deadline),
                reply: Some(ReplyTo {
                    node: i,
                    tx: tx.clone(),
                }),
            });
        }
        drop(tx);
        let decision = loop {
            if let Some(decision) = tally.decision() {
                break decision;
            }
            match rx.recv_deadline(deadline) {
                Ok((i, vote)) => tally.record(i, vote),
                // Every worker has answered or dropped the request: those that dropped it
                // found the deadline already passed.
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    tally.fail_unanswered(NodeProblem::TimedOut)
                }
            }
        };
        Outcome {
            decision,
            tally,
            t0,
            decided: Instant::now(),
            late: rx,
        }
    }

    /// Queues `command` on the nodes marked in `targets` (all when `None`) without waiting.
    pub(crate) fn send_nowait(
        &self,
        command: Command,
        key: &Arc<str>,
        token: &Arc<str>,
        targets: Option<&[bool]>,
    ) {
        for (i, node) in self.inner.nodes.iter().enumerate() {
            if targets.is_some_and(|t| !t.get(i).copied().unwrap_or(false)) {
                continue;
            }
            node.send(Request {
                command: command.clone(),
                key: Arc::clone(key),
                token: Arc::clone(token),
                deadline: None,
                reply: None,
            });
        }
    }
}

/// Most resources one [`Redlock::lock_many`] takes.
pub const MAX_RESOURCES: usize = 64;

/// Longest owner name of a reentrant lock, in bytes.
const MAX_OWNER_LEN: usize = 1024;

/// What an acquisition asks for.
enum Want<'a> {
    Plain,
    Fenced,
    Reentrant(&'a str),
    Many(Arc<[Arc<str>]>),
}

/// Checks and sorts the resources of a multi-resource lock; returns its display name (the
/// sorted names joined with `,`) and the keys.
fn many_keys<I, S>(resources: I) -> Result<(String, Arc<[Arc<str>]>)>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut keys: Vec<Arc<str>> = Vec::new();
    for r in resources {
        let r = r.as_ref();
        if r.is_empty() {
            return Err(Error::invalid(format!(
                "resource name {} of the list is empty",
                keys.len()
            )));
        }
        keys.push(r.into());
        if keys.len() > MAX_RESOURCES {
            return Err(Error::invalid(format!(
                "more than {MAX_RESOURCES} resources in one lock_many"
            )));
        }
    }
    if keys.is_empty() {
        return Err(Error::invalid("the list of resources is empty"));
    }
    keys.sort();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::invalid(format!(
            "resource {:?} is listed twice",
            &*w[0]
        )));
    }
    let name = keys.join(",");
    Ok((name, keys.into()))
}

/// How long an acquisition keeps trying.
#[derive(Clone, Copy)]
enum Patience {
    /// Retries after the first attempt.
    Count(u32),
    /// Until a deadline; `notify`: wake on release notifications.
    Until { deadline: Instant, notify: bool },
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<&str> = self
            .inner
            .nodes
            .iter()
            .map(|n| n.address.as_str())
            .collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("config", &self.inner.config)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redlock_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Redlock>();
        fn send<T: Send>() {}
        send::<Lock>();
    }

    #[test]
    fn builder_rejects_bad_configuration() {
        let bad = [
            Redlock::builder().build(),
            Redlock::builder().node("").build(),
            Redlock::builder().node("not a url").build(),
            Redlock::builder().node("http://127.0.0.1:1").build(),
            Redlock::builder()
                .nodes(["redis://127.0.0.1:1", "redis://127.0.0.1:1/"])
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(1.0)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(-0.1)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(f64::NAN)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .node_timeout(Duration::ZERO)
                .build(),
        ];
        for (i, result) in bad.into_iter().enumerate() {
            match result {
                Err(Error::InvalidArgument { message }) => assert!(!message.is_empty(), "case {i}"),
                other => panic!("case {i}: expected InvalidArgument, got {other:?}"),
            }
        }
    }

    #[test]
    fn bad_url_errors_hide_the_password() {
        let err = Redlock::builder()
            .node("redis://u:hunter2@host:notaport")
            .build()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("node 0"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
