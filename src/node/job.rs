//! What a caller hands a node's worker, and how the worker answers it.
//!
//! Owns [`Job`] (one command for one key and token, with its deadline and where its answer
//! goes), [`ReplyTo`], and [`OnLane`], the mark of a job on its way over a `WAIT` lane. Uses the quorum's votes and
//! gate and the wire's commands; nothing else of the node.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::rules::quorum::{Gate, Vote};
use crate::sync::relock;
use crate::wire::Command;

/// Where a node's answer goes: the caller's channel, tagged with the node's index, and the
/// gate that wakes the caller once the answers can decide (none: the caller waits on the
/// channel itself).
pub(crate) struct ReplyTo {
    pub node: usize,
    pub tx: Sender<(usize, Vote)>,
    pub gate: Option<Arc<Gate>>,
}

impl ReplyTo {
    /// Sends the vote, then counts it at the gate. A caller that stopped waiting needs no
    /// answer, so a full or closed channel is fine. Says whether the caller was still waiting
    /// for votes, as far as the gate knows (a caller without one is taken to be).
    pub(super) fn send(self, vote: Vote) -> bool {
        let kind = vote.kind();
        let _ = self.tx.try_send((self.node, vote));
        self.gate.as_ref().is_none_or(|gate| gate.count(kind))
    }
}

/// One command for the node, for one key and token: what the worker sends, when its caller
/// stops waiting, and where the answer goes.
pub(crate) struct Job {
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
    /// On a `WAIT` lane: marks the job's key and token as on their way over the lane until
    /// the lane has done with it (see `Node::send`). Set by `send`.
    pub on_lane: Option<OnLane>,
}

/// The key and token of each acquisition or extension a `WAIT` lane has not answered yet.
pub(super) type Pending = Arc<Mutex<Vec<(Arc<str>, Arc<str>)>>>;

/// An acquisition or extension on its way over a node's `WAIT` lane: while it lives, a cleanup
/// of the same key and token follows it over the lane, so that it cannot overtake it. Dropped
/// with its job, once the lane answered it (its reply read) or dropped it unsent.
pub(crate) struct OnLane {
    pending: Pending,
    key: Arc<str>,
    token: Arc<str>,
}

impl OnLane {
    /// Marks the job's key and token as pending on the lane until the mark is dropped.
    pub(super) fn mark(pending: &Pending, job: &Job) -> OnLane {
        relock(pending).push((Arc::clone(&job.key), Arc::clone(&job.token)));
        OnLane {
            pending: Arc::clone(pending),
            key: Arc::clone(&job.key),
            token: Arc::clone(&job.token),
        }
    }
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

impl Job {
    pub(super) fn worth_keeping(&self, now: Instant) -> bool {
        self.command.resendable && self.live_until.is_some_and(|t| t > now)
    }
}

/// Answers the job's caller, if one waits for it; says whether it was still waiting.
pub(super) fn answer(job: Job, vote: Vote) -> bool {
    job.reply.is_some_and(|reply| reply.send(vote))
}
