//! A node's worker thread: it takes the jobs callers queued, sends them as one batch, and
//! answers each.
//!
//! Owns [`Worker`]: the job channel, the pace of its batches (how long it looks for callers'
//! next jobs), the cleanups it keeps for after a reconnect, and its parts: the
//! [`Connection`], the [`Server`] it reaches and, on a `WAIT` lane, the [`WaitLane`]. Decides
//! what happens to a batch: jobs past their deadline are dropped, a node known down answers at
//! once, a lane short of replicas refuses, an idle connection is checked before a command that
//! cannot be resent, and a connection found closed is replaced and the batch resent. Uses every
//! other part of the node but the handle (`mod.rs`), which starts it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender, TryRecvError};

use super::connection::Connection;
use super::errors::describe;
use super::job::{Job, OnLane, answer};
use super::pipeline::Ran;
use super::queue::JobReceiver;
use super::server::{Master, Server};
use super::status::Health;
use super::wait_lane::{WaitLane, needs_ack};
use crate::error::NodeProblem;
use crate::rules::quorum::Vote;
use crate::topology::WATCH_INTERVAL;

/// Most jobs sent in one pipeline.
const MAX_BATCH: usize = 256;
/// Idle this long, a connection may have been closed by the server (`timeout` counts whole
/// seconds) or a proxy: one that must carry a command not safe to resend is checked first.
const IDLE_PROBE: Duration = Duration::from_secs(1);
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
/// At most this many acquisitions and extensions written to a node that has not answered
/// them are remembered (see `Worker::unanswered`): those of the batches before the workers
/// find it hung and skip it.
const MAX_UNANSWERED: usize = 4096;
/// A stalled node is probed every node timeout while idle, but not more often than this.
const MIN_PROBE_EVERY: Duration = Duration::from_millis(10);

/// One worker thread's state: a node's first worker, or its `WAIT` lane's.
pub(super) struct Worker {
    rx: JobReceiver,
    pace: Pace,
    /// Every sender is gone: the client was dropped and only queued jobs remain.
    closing: bool,
    /// Cleanups that found the node down, sent once it is back (see `Job::live_until`).
    deferred: Vec<Job>,
    /// The keys and tokens of acquisitions and extensions written in batches the node has not
    /// answered (timed out: hung, say) and no batch answered since: it may run them when it
    /// resumes, with a fresh TTL, however long after their callers' `live_until`. Their
    /// cleanups are kept until a batch is answered again, which carries them.
    unanswered: Vec<(Arc<str>, Arc<str>)>,
    /// On a `WAIT` lane, the marks of those acquisitions and extensions, kept as long: a
    /// cleanup of theirs follows them over the lane, where it is kept, not over the node's first
    /// worker, which does not know they are unanswered.
    unanswered_marks: Vec<OnLane>,
    conn: Connection,
    server: Server,
    /// On a node's `WAIT` lane.
    lane: Option<WaitLane>,
    health: Arc<Health>,
    /// Dropped when the thread ends, which the client's drop waits for.
    _exited: Sender<()>,
}

/// When the worker's last answers went out, and who is likely back soon: how long it looks for
/// its callers' next jobs.
struct Pace {
    /// When the last batch was answered, and how many jobs in a row came within
    /// `WORKER_SPIN` of the answer before them (see `next_job`).
    answered_at: Instant,
    quick: u8,
    /// When the last batch's answers began to go out, and how many of them went to callers
    /// still waiting for votes, who will likely be back soon (see `gather`).
    answering_at: Instant,
    awaited: usize,
}

impl Worker {
    pub(super) fn new(
        rx: JobReceiver,
        conn: Connection,
        server: Server,
        lane: Option<WaitLane>,
        health: Arc<Health>,
        exited: Sender<()>,
    ) -> Worker {
        Worker {
            rx,
            pace: Pace {
                answered_at: Instant::now(),
                quick: 0,
                answering_at: Instant::now(),
                awaited: 0,
            },
            closing: false,
            deferred: Vec::new(),
            unanswered: Vec::new(),
            unanswered_marks: Vec::new(),
            conn,
            server,
            lane,
            health,
            _exited: exited,
        }
    }

    /// Connects, says so on `ready` once that first attempt is over (whatever its outcome), and
    /// serves batches until every sender of its channel is gone.
    pub(super) fn run(mut self, ready: Sender<()>) {
        self.connect();
        let _ = ready.send(());
        drop(ready);
        let mut batch = Vec::new();
        loop {
            // Receiving fails only once every sender is gone: the client was dropped, and its
            // deferred cleanups go with it (their keys expire with the TTL).
            let first = if self.deferred.is_empty() {
                self.next_job()
            } else {
                // A stalled node is probed at its pace, not the reconnect backoff's.
                let mut until = self.conn.retry_at();
                if self.health.is_stalled() {
                    until = until.min(Instant::now() + self.probe_every());
                }
                match self.rx.recv_deadline(Some(until)) {
                    Ok(r) => Ok(r),
                    Err(RecvTimeoutError::Timeout) => {
                        if self.health.is_stalled() {
                            self.probe();
                        }
                        self.serve(&mut batch);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => Err(()),
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
            self.pace.awaited = 0;
            self.serve(&mut batch);
            batch.clear();
            self.pace.answered_at = Instant::now();
        }
    }

    /// The next job. A caller in a tight loop sends its next command (a release after an
    /// acquire) right after our answer, and catching it awake saves waking a sleeping thread,
    /// so while jobs have been coming within `WORKER_SPIN` of the answers, the worker
    /// looks for one that long before it sleeps on the channel; once one comes later, it
    /// sleeps at once, so that a client holding its locks for longer burns no CPU looking.
    fn next_job(&mut self) -> Result<Job, ()> {
        let until = self.pace.answered_at + WORKER_SPIN;
        let next = loop {
            match self.rx.try_recv() {
                Ok(r) => break Ok(r),
                Err(TryRecvError::Disconnected) => break Err(()),
                // Looks again after a yield, while yields are cheap (`sync::yield_if_cheap`).
                Err(TryRecvError::Empty)
                    if self.pace.quick >= QUICK_TO_SPIN
                        && Instant::now() < until
                        && crate::sync::yield_if_cheap() => {}
                // A stalled node gets no acquisitions (see `Node::send`): probed while idle.
                Err(TryRecvError::Empty) if self.health.is_stalled() => {
                    match self
                        .rx
                        .recv_deadline(Some(Instant::now() + self.probe_every()))
                    {
                        Ok(r) => break Ok(r),
                        Err(RecvTimeoutError::Timeout) => self.probe(),
                        Err(RecvTimeoutError::Disconnected) => break Err(()),
                    }
                }
                Err(TryRecvError::Empty) if !self.conn.follows_a_watch() => {
                    break self.rx.recv();
                }
                // A Sentinel node looks at its watch while idle too, so that its status shows
                // a change of master without waiting for a call.
                Err(TryRecvError::Empty) => {
                    match self.rx.recv_deadline(Some(Instant::now() + WATCH_INTERVAL)) {
                        Ok(r) => break Ok(r),
                        Err(RecvTimeoutError::Timeout) => {
                            if self.conn.follow_the_sentinels() {
                                self.connect();
                            }
                        }
                        Err(RecvTimeoutError::Disconnected) => break Err(()),
                    }
                }
            }
        };
        self.pace.quick = if Instant::now() < until {
            self.pace.quick.saturating_add(1)
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
    fn gather(&mut self, batch: &mut Vec<Job>) {
        if self.closing {
            return;
        }
        let since = self.pace.answering_at;
        let until = since + GATHER;
        let back = |r: &Job| r.reply.is_some() && r.queued_at >= since;
        let mut came = batch.iter().filter(|r| back(r)).count();
        while came < self.pace.awaited && batch.len() < GATHER_UP_TO {
            match self.rx.recv_deadline(Some(until)) {
                Ok(r) => {
                    came += usize::from(back(&r));
                    batch.push(r);
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    self.closing = true;
                    break;
                }
            }
        }
    }

    fn connect(&mut self) {
        let began = Instant::now();
        self.health.begin_wait();
        let end = self.conn.connect(&mut self.server, self.lane.as_mut());
        self.health
            .end_connect(began.elapsed(), end, self.conn.node_timeout());
    }

    /// How often a stalled node is probed while idle.
    fn probe_every(&self) -> Duration {
        self.conn.node_timeout().max(MIN_PROBE_EVERY)
    }

    /// A `PING`, timed for the stall check (see `Health::stalled`).
    fn ping(&mut self) -> redis::RedisResult<()> {
        let began = Instant::now();
        self.health.begin_wait();
        let pinged = self.conn.ping();
        self.end_wait(began, pinged.as_ref().err());
        pinged
    }

    /// Ends a wait on the node that began at `began` (see `Health::end_wait`). A read cut short
    /// by a signal says our process was stopped meanwhile, so the time says nothing of the
    /// node: the wait ends without a verdict, and the reconnect that follows gives one.
    fn end_wait(&self, began: Instant, failed: Option<&redis::RedisError>) {
        if failed.is_some_and(crate::wire::interrupted) {
            self.health.end_wait_unjudged();
        } else {
            self.health
                .end_wait(began.elapsed(), self.conn.node_timeout());
        }
    }

    /// Probes a stalled node while no job comes: a `PING`, or a connect (whatever the backoff:
    /// the probe's own pace bounds it) when the connection is down or a Sentinel node's master
    /// changed. A `PING` answered within the node timeout, or a connect that succeeds, ends the
    /// stall (see `Health::end_wait`), so the node rejoins within one probe of answering in
    /// time; a `PING` answered later leaves it out, so a node that answers, but always too late,
    /// does not flap in and out. A connect runs the server probe, so a restarted server sits out
    /// `restart_grace`.
    fn probe(&mut self) {
        // A Sentinel node whose master the sentinels replaced probes the new one.
        if !self.conn.is_up() || self.conn.follow_the_sentinels() {
            self.connect();
        } else if let Err(e) = self.ping() {
            self.conn.disconnect(&e);
        }
    }

    /// Sends a batch and answers it, with the cleanups kept for after a reconnect: unless
    /// the node is known to be down, or (on a `WAIT` lane) short of replicas.
    fn serve(&mut self, batch: &mut Vec<Job>) {
        let now = Instant::now();
        self.drop_expired(batch, now);
        if batch.is_empty() && (self.deferred.is_empty() || now < self.conn.retry_at()) {
            return;
        }
        if self.conn.follow_the_sentinels() {
            self.conn.retry_from(now);
        }
        // A closing client's last releases go out on a live connection, but are not worth
        // reconnecting for: their keys expire with the TTL.
        if !self.conn.is_up() && now >= self.conn.retry_at() && !self.closing {
            self.connect();
        }
        if !self.conn.is_up() {
            let problem = self.conn.down();
            self.fail_all(batch, &problem, now);
            return;
        }
        if !self.refuse_if_short(batch) {
            return;
        }
        // The replica check may have dropped the connection; what is left (cleanups) waits.
        if !self.conn.is_up() {
            let problem = self.conn.down();
            self.fail_all(batch, &problem, now);
            return;
        }
        batch.append(&mut self.deferred);
        if !self.check_if_idle(batch) {
            return;
        }
        self.execute_and_answer(batch, true);
    }

    /// Drops the jobs whose callers stopped waiting while the node was slow (timeouts too), and
    /// the kept cleanups no longer worth sending.
    fn drop_expired(&mut self, batch: &mut Vec<Job>, now: Instant) {
        let queued = batch.len();
        batch.retain(|r| r.deadline.is_none_or(|d| d > now));
        if batch.len() < queued {
            self.health
                .errors
                .fetch_add((queued - batch.len()) as u64, Ordering::Relaxed);
        }
        let unanswered = &self.unanswered;
        self.deferred
            .retain(|r| r.worth_keeping(now) || written_unanswered(unanswered, r));
    }

    /// On a `WAIT` lane short of replicas: fails the batch's acquisitions and extensions unsent
    /// (a cleanup that followed its acquisition over the lane needs no replicas). Says whether
    /// anything is left to send.
    fn refuse_if_short(&mut self, batch: &mut Vec<Job>) -> bool {
        if !batch.iter().any(|r| needs_ack(&r.command)) {
            return true;
        }
        let Some(problem) = self.short_of_replicas() else {
            return true;
        };
        let now = Instant::now();
        let (refused, cleanups): (Vec<Job>, Vec<Job>) =
            batch.drain(..).partition(|r| needs_ack(&r.command));
        for r in refused {
            self.fail(r, &problem, now);
        }
        *batch = cleanups;
        !batch.is_empty()
    }

    /// On a `WAIT` lane: why its batches are refused now, if they are (see
    /// [`WaitLane::shortage`]). A read of the replicas that fails drops the connection.
    fn short_of_replicas(&mut self) -> Option<NodeProblem> {
        let lane = self.lane.as_mut()?;
        match lane.shortage(self.conn.link_mut()) {
            Ok(problem) => problem,
            Err(e) => {
                let problem = describe(&e);
                self.conn.disconnect(&e);
                Some(problem)
            }
        }
    }

    /// Reentrant acquires and releases count holds, so unlike the rest they cannot be resent
    /// when their connection turns out closed. A connection idle long enough to have been
    /// closed is checked with a `PING` before it carries one; only a close in between remains.
    /// Says whether the batch can go; if not, it was answered.
    fn check_if_idle(&mut self, batch: &mut Vec<Job>) -> bool {
        if self.conn.idle() < IDLE_PROBE || batch.iter().all(|r| r.command.resendable) {
            return true;
        }
        let Err(e) = self.ping() else {
            return true;
        };
        let mut problem = describe(&e);
        self.conn.disconnect(&e);
        if e.is_connection_dropped() && !e.is_timeout() {
            self.connect();
            problem = self.conn.down();
        }
        if self.conn.is_up() {
            return true;
        }
        self.fail_all(batch, &problem, Instant::now());
        false
    }

    /// Answers a job that could not be sent, or keeps it for after the reconnect.
    /// A caller waiting for the answer hears of the failure now either way.
    fn fail(&mut self, mut r: Job, problem: &NodeProblem, now: Instant) {
        self.health.errors.fetch_add(1, Ordering::Relaxed);
        let keep = r.worth_keeping(now) || written_unanswered(&self.unanswered, &r);
        if keep && !self.closing {
            if let Some(reply) = r.reply.take() {
                let _ = reply.send(Vote::Failed(problem.clone()));
            }
            self.deferred.push(r);
        } else {
            answer(r, Vote::Failed(problem.clone()));
        }
    }

    fn fail_all(&mut self, batch: &mut Vec<Job>, problem: &NodeProblem, now: Instant) {
        for r in batch.drain(..) {
            self.fail(r, problem, now);
        }
    }

    /// Runs the batch on the connection and answers every job. With `resend`, a connection
    /// found closed (the server's idle `timeout`, a proxy, `CLIENT KILL`, a restart) is replaced
    /// at once and what is safe to send twice goes out again, so that a lock held across an
    /// idle spell still releases (or extends) instead of failing on every node at once.
    fn execute_and_answer(&mut self, batch: &mut Vec<Job>, resend: bool) {
        match self.execute(batch) {
            Ok(ran) => self.answer(batch, ran, resend),
            Err(e) => self.execute_failed(batch, &e, resend),
        }
    }

    /// Sends the batch (see `pipeline.rs`). With the clock guard on, a batch that carries an
    /// acquire or an extension carries `TIME` too (last, so the node reads its clock after the
    /// `SET`s), and its reading comes back with the votes; on a `WAIT` lane, `WAIT` ends it.
    fn execute(&mut self, batch: &[Job]) -> redis::RedisResult<Ran> {
        let time = self
            .server
            .wants_time(batch.iter().any(|r| r.command.samples_clock));
        let sent = Instant::now();
        let io_timeout = self.conn.io_timeout();
        let wait = self
            .lane
            .as_ref()
            .and_then(|lane| lane.wait(batch, sent, io_timeout));
        self.health.begin_wait();
        let ran = self.conn.execute(batch, time, wait, sent);
        self.end_wait(sent, ran.as_ref().err());
        let mut ran = ran?;
        if let Some((probe, masters, replicas)) = ran.refreshed.take() {
            // New masters seen through a MOVED (a failover): observed before the votes count,
            // so that the restart grace they start holds this batch out.
            let master = Master {
                address: Some(masters),
                tenure: None,
                epoch: None,
            };
            self.server.observe(probe, master, self.conn.newest_epoch());
            // A promoted replica may have fewer replicas of its own: the next batches are
            // refused at once until it has enough, as after a reconnect.
            if let Some(lane) = &mut self.lane {
                lane.counted(&replicas, sent);
            }
        }
        Ok(ran)
    }

    /// Answers each job of a batch that ran with its vote, as it counts (see [`counted`]).
    fn answer(&mut self, batch: &mut Vec<Job>, mut ran: Ran, resend: bool) {
        let now = Instant::now();
        self.pace.answering_at = now;
        self.conn.used(now);
        self.health
            .command_duration
            .observe_n(now.saturating_duration_since(ran.sent), batch.len() as u64);
        let errors = ran
            .votes
            .iter()
            .filter(|v| matches!(v, Vote::Failed(_)))
            .count();
        if errors > 0 {
            self.health
                .errors
                .fetch_add(errors as u64, Ordering::Relaxed);
        }
        self.server.sample(ran.time, now);
        let has_acquire = batch.iter().any(|r| r.command.acquire);
        self.server.before_votes(has_acquire, now);
        // As of when the batch was sent: a command that ran before the end of a grace or
        // quarantine does not count, even if its answer came after it.
        let held_out = self.server.held_out(ran.sent, now);
        // The node answers again, after the cleanups kept for it went out in this batch.
        self.unanswered.clear();
        self.unanswered_marks.clear();
        for (r, vote) in batch.drain(..).zip(ran.votes.drain(..)) {
            let vote = counted(&r, vote, held_out.as_ref(), resend);
            self.pace.awaited += usize::from(answer(r, vote));
        }
        self.conn.recycle(ran.votes);
        if ran.demoted {
            self.conn.disconnect(&redis::RedisError::from((
                redis::ErrorKind::Client,
                "READONLY",
                "the master was demoted to a replica; resolving the master again".to_owned(),
            )));
        }
    }

    /// A batch whose connection failed: with `resend`, one found closed is replaced and what is
    /// safe to send twice goes out again; otherwise every job fails (or is kept).
    fn execute_failed(&mut self, batch: &mut Vec<Job>, e: &redis::RedisError, resend: bool) {
        let problem = describe(e);
        self.conn.disconnect(e);
        if resend && e.is_connection_dropped() && !e.is_timeout() {
            self.resend(batch, &problem);
            return;
        }
        // A hung node may still run what it had read once it resumes: its cleanups wait for it.
        if e.is_timeout() && self.unanswered.len() < MAX_UNANSWERED {
            for r in batch.iter_mut().filter(|r| r.command.samples_clock) {
                self.unanswered
                    .push((Arc::clone(&r.key), Arc::clone(&r.token)));
                self.unanswered_marks.extend(r.on_lane.take());
            }
        }
        self.fail_all(batch, &problem, Instant::now());
    }

    /// Reconnects and sends again what is safe to send twice and still awaited; the rest
    /// fails with `problem`.
    fn resend(&mut self, batch: &mut Vec<Job>, problem: &NodeProblem) {
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
        if self.conn.is_up() {
            self.execute_and_answer(&mut again, false);
        } else {
            let problem = self.conn.down();
            self.fail_all(&mut again, &problem, now);
        }
    }
}

/// Whether `job` is a cleanup (an undo, a release: it has a `live_until`) of a key and token
/// the node was written and has not answered (see `Worker::unanswered`).
fn written_unanswered(unanswered: &[(Arc<str>, Arc<str>)], job: &Job) -> bool {
    job.command.resendable
        && job.live_until.is_some()
        && unanswered
            .iter()
            .any(|(key, token)| *key == job.key && *token == job.token)
}

/// A job's vote as it counts. The key stays on the node (and is released with the lock): it
/// is only not counted, since a young process may have lost another owner's key, and a clock
/// that jumped may have expired one early.
fn counted(job: &Job, vote: Vote, held_out: Option<&NodeProblem>, resend: bool) -> Vote {
    match (held_out, vote) {
        (Some(problem), Vote::Yes | Vote::Value(_)) if job.command.acquire => {
            Vote::Failed(problem.clone())
        }
        // Resent after the connection dropped: a refusal may be our own first copy's key, so
        // it is no definite "no" (which would skip the undo).
        (_, Vote::No) if job.command.acquire && !resend => Vote::Failed(NodeProblem::Unavailable(
            "connection dropped; the resent acquire was refused, perhaps by its own first copy"
                .into(),
        )),
        // Likewise a resent release (it has a `live_until`) that found nothing: its first copy
        // may have run, and a "no" would report a lock released in time as lost.
        (_, Vote::No) if job.live_until.is_some() && !resend => {
            Vote::Failed(NodeProblem::Unavailable(
                "connection dropped; the resent release found nothing, perhaps because its \
                 first copy ran"
                    .into(),
            ))
        }
        (_, vote) => vote,
    }
}
