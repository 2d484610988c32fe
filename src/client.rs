//! The client: one worker per node, and the fan-out that every lock operation goes through.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::config::{Builder, Config};
use crate::error::{Error, NodeProblem, Operation, QuorumReport, Result};
use crate::lock::{Lock, relock};
use crate::node::{self, Command, Node, NodeStatus, ReplyTo, Request, Timeouts};
use crate::notify::Notifier;
use crate::options::LockOptions;
use crate::quorum::{Decision, Tally, backoff_delay, retry_delay, validity_deadline};
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
        let timeouts = Timeouts {
            connect: config.connect_timeout(),
            io: config.io_timeout(),
        };
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
            let (node, worker) = node::spawn(i, client, timeouts, ready.clone(), exited_tx.clone())
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
        let deadline = Instant::now() + timeouts.connect;
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

    /// What each node's worker last saw of its node.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        self.inner.nodes.iter().map(Node::status).collect()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    fn acquire(&self, resource: &str, ttl: Duration, patience: Patience) -> Result<Lock> {
        if resource.is_empty() {
            return Err(Error::invalid("resource name is empty"));
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
            let token: Arc<str> = new_token()?.into();
            let outcome = self.quorum_call(Command::Acquire { ttl_ms }, &key, &token);
            if outcome.decision == Decision::Quorum
                && let Some(deadline) =
                    validity_deadline(outcome.t0, outcome.decided, ttl, config.drift_factor)
            {
                return Ok(Lock::new(self.clone(), key, token, deadline));
            }
            // A SET may have landed where the reply was lost or late: undo it everywhere.
            self.send_nowait(Command::Undo, &key, &token);
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
                let report = outcome.report(self);
                return Err(match outcome.decision {
                    Decision::Refused => Error::NotAcquired {
                        resource: resource.to_owned(),
                        attempts: attempt,
                        report,
                    },
                    Decision::Quorum | Decision::Unreachable => Error::NoQuorum {
                        resource: resource.to_owned(),
                        operation: Operation::Acquire,
                        attempts: attempt,
                        report,
                    },
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
        let nodes = &self.inner.nodes;
        let t0 = Instant::now();
        let deadline = t0 + self.inner.config.node_timeout;
        let (tx, rx) = crossbeam_channel::bounded(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            node.send(Request {
                command,
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
        let mut tally = Tally::new(nodes.len());
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
        }
    }

    /// Queues a release on every node without waiting for the answers.
    pub(crate) fn release_nowait(&self, key: &Arc<str>, token: &Arc<str>) {
        self.send_nowait(Command::Release, key, token);
    }

    fn send_nowait(&self, command: Command, key: &Arc<str>, token: &Arc<str>) {
        for node in &self.inner.nodes {
            node.send(Request {
                command,
                key: Arc::clone(key),
                token: Arc::clone(token),
                deadline: None,
                reply: None,
            });
        }
    }
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
