//! The client: one worker per node, and the fan-out that every lock operation goes through.

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::config::{Builder, Config};
use crate::error::{Error, NodeProblem, Operation, QuorumReport, Result};
use crate::lock::Lock;
use crate::node::{self, Command, Node, NodeStatus, ReplyTo, Request, Settings};
use crate::quorum::{Decision, Tally, retry_delay, validity_deadline};
use crate::token::new_token;

/// A Redlock client over N independent Redis nodes.
///
/// Cheap to clone (clones share the workers) and safe to use from many threads at once: their
/// requests to a node share one connection and are pipelined. The workers stop when the last
/// clone and the last [`Lock`] from it are dropped.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

struct Inner {
    nodes: Vec<Node>,
    workers: Vec<JoinHandle<()>>,
    /// Disconnects once every worker thread has ended.
    exited: Receiver<()>,
    config: Config,
}

impl Drop for Inner {
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

    pub(crate) fn start(clients: Vec<redis::Client>, config: Config) -> Result<Redlock> {
        let settings = Settings {
            connect_timeout: config.connect_timeout(),
            io_timeout: config.io_timeout(),
            restart_grace: config.restart_grace,
        };
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        // Built up in place, so that a failure half-way stops the workers already started.
        let mut inner = Inner {
            nodes: Vec::with_capacity(clients.len()),
            workers: Vec::with_capacity(clients.len()),
            exited,
            config,
        };
        let (ready, connected) = crossbeam_channel::bounded(clients.len());
        for (i, client) in clients.into_iter().enumerate() {
            let (node, worker) = node::spawn(i, client, settings, ready.clone(), exited_tx.clone())
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
        self.acquire(resource, ttl, self.inner.config.retry_count)
    }

    /// Like [`lock`](Redlock::lock), with a single attempt.
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(resource, ttl, 0)
    }

    /// What each node's worker last saw of its node.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        self.inner.nodes.iter().map(Node::status).collect()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    fn acquire(&self, resource: &str, ttl: Duration, retries: u32) -> Result<Lock> {
        if resource.is_empty() {
            return Err(Error::invalid("resource name is empty"));
        }
        let config = self.inner.config;
        let ttl_ms = config.ttl_ms(ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        let key: Arc<str> = resource.into();
        let mut attempt: u32 = 0;
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
            self.release_nowait(&key, &token);
            if attempt > retries {
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
            }
            std::thread::sleep(retry_delay(
                config.retry_delay,
                config.retry_jitter,
                rand::random::<f64>(),
            ));
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
        for node in &self.inner.nodes {
            node.send(Request {
                command: Command::Release,
                key: Arc::clone(key),
                token: Arc::clone(token),
                deadline: None,
                reply: None,
            });
        }
    }
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
