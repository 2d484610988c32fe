//! Running one batch of jobs on a connection: writing it as one pipeline (with `TIME` for the
//! clock guard and `WAIT` on a lane), reading the replies, and turning them into votes.
//!
//! Owns no state: the connection (`connection.rs`) lends its link and write buffer. Handles a
//! `NOSCRIPT` reply (reload, resend once with the source) and notices a demoted Sentinel
//! master (`READONLY`); a cluster's batch goes through `topology/cluster/link.rs`, which routes it.
//! Uses `job.rs` and `wait_lane.rs` (the `WAIT` and how its answer counts).

use std::time::Instant;

use redis::Value;

use super::errors::command_refused;
use super::job::Job;
use super::wait_lane::{Acked, Replicas, Wait, acknowledged, needs_ack};
use crate::error::NodeProblem;
use crate::rules::clock::{Readings, TIME_COMMAND, TimeReading};
use crate::rules::quorum::Vote;
use crate::topology::probe::Probe;
use crate::topology::{ClusterLink, Routed, WaitFor, Waited};
use crate::wire::{Script, load_scripts};

/// A batch and how to send it.
pub(super) struct Outgoing<'a> {
    pub jobs: &'a [Job],
    /// The connection's scripts go whole with `EVAL` (see `Connection::inline_scripts`).
    pub inline_scripts: bool,
    pub scripts: &'static [&'static [&'static Script]],
    /// `TIME` goes with it, for the clock guard.
    pub time: bool,
    /// On a `WAIT` lane: the `WAIT` that ends it.
    pub wait: Option<Wait>,
    /// When it is sent.
    pub sent: Instant,
}

/// What the batches of a connection are written and read into, kept from one batch to the
/// next so that a batch allocates nothing of its own.
pub(super) struct Buffers {
    /// The pipeline as sent.
    packed: Vec<u8>,
    /// The replies as read.
    values: Vec<Value>,
    /// The votes, lent to each [`Ran`] and given back with [`Buffers::recycle`].
    votes: Vec<Vote>,
}

impl Buffers {
    pub fn new() -> Self {
        Buffers {
            packed: Vec::with_capacity(4096),
            values: Vec::new(),
            votes: Vec::new(),
        }
    }

    /// Takes back the votes of a [`Ran`] that has been answered, for the next batch.
    pub fn recycle(&mut self, mut votes: Vec<Vote>) {
        votes.clear();
        self.votes = votes;
    }
}

/// What a batch brought back.
pub(super) struct Ran {
    /// One per job, in order.
    pub votes: Vec<Vote>,
    pub time: Readings,
    pub sent: Instant,
    /// A Sentinel node's connection answered `READONLY`: the master was demoted to a replica.
    pub demoted: bool,
    /// On a cluster whose masters changed on the way (a `MOVED`): their merged probe and list,
    /// for the worker to observe, and each master's connected replicas as the link last read
    /// them.
    pub refreshed: Option<(Probe, String, Replicas)>,
}

/// The batch on a plain connection: a `NOSCRIPT` reply (restart, `SCRIPT FLUSH`, failover)
/// reloads the scripts and resends those commands once, with their source. `sentinel`: the
/// connection is a Sentinel node's, whose master may be demoted under it.
pub(super) fn plain(
    conn: &mut redis::Connection,
    bufs: &mut Buffers,
    out: &Outgoing<'_>,
    sentinel: bool,
) -> redis::RedisResult<Ran> {
    let batch = out.jobs;
    let wait = out.wait;
    let values = &mut bufs.values;
    let buf = &mut bufs.packed;
    let (time, mut acked) = pipeline(
        conn,
        buf,
        values,
        batch.iter(),
        out.inline_scripts,
        out.time,
        wait,
    )?;
    let noscript: Vec<usize> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT"))
        .map(|(i, _)| i)
        .collect();
    if !noscript.is_empty() {
        // Loaded for the batches to come; the resend carries the scripts' source (`EVAL`),
        // which another flush between the load and the resend cannot fail, nor a user that may
        // not load scripts (its connection found them loaded by another): the next connection
        // sends them whole.
        if let Err(e) = load_scripts(conn, out.scripts, None)
            && !command_refused(&e)
        {
            return Err(e);
        }
        let mut again = Vec::new();
        let (_, acked_again) = pipeline(
            conn,
            buf,
            &mut again,
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
    // The sentinels' master was demoted under us: resolve it again.
    let demoted = sentinel && values.iter().any(is_readonly);
    let mut votes = std::mem::take(&mut bufs.votes);
    votes.extend(
        values
            .drain(..)
            .zip(batch)
            .map(|(v, r)| (r.command.interpret(v), needs_ack(&r.command)))
            .map(|(vote, needs)| match (wait, &acked, vote) {
                (Some(wait), Some(acked), vote) if vote.is_yes() && needs => {
                    acknowledged(acked, &wait).map_or(vote, Vote::Failed)
                }
                (_, _, vote) => vote,
            }),
    );
    Ok(Ran {
        votes,
        time: time.into(),
        sent: out.sent,
        demoted,
        refreshed: None,
    })
}

/// Sends the requests as one pipeline and reads their replies into `values` (cleared first).
/// The first failed read ends it: after a timeout the connection is out of step and gets
/// dropped, and reading on (as redis-rs's `req_packed_commands` does) would cost one more
/// timeout per queued request.
///
/// With `wait`, `WAIT` follows everything else, and its reply comes back apart; `TIME` goes
/// before it and is read as soon as its reply is in, so the wait does not count in the clock
/// sample's round trip.
fn pipeline<'a>(
    conn: &mut redis::Connection,
    buf: &mut Vec<u8>,
    values: &mut Vec<Value>,
    requests: impl Iterator<Item = &'a Job>,
    inline_scripts: bool,
    time: bool,
    wait: Option<Wait>,
) -> redis::RedisResult<(Option<TimeReading>, Option<Acked>)> {
    buf.clear();
    values.clear();
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
    values.reserve(count);
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
    Ok((reading, acked))
}

/// The batch on a cluster's masters (see `topology/cluster/link.rs`, which handles `NOSCRIPT`, `MOVED` and
/// `ASK` itself). With `wait` (a `WAIT` lane), a yes counts only if the `WAIT` on the
/// connection of the master that took it confirmed `k` replicas.
pub(super) fn cluster(link: &mut ClusterLink, out: &Outgoing<'_>) -> redis::RedisResult<Ran> {
    let batch = out.jobs;
    let wait = out.wait.map(|w| {
        let wait_for = WaitFor {
            k: w.k,
            ms: w.ms,
            answer_by: w.answer_by,
            sent: out.sent,
        };
        (w, wait_for)
    });
    let routed: Vec<Routed<'_>> = batch
        .iter()
        .map(|r| Routed {
            command: &r.command,
            key: &r.key,
            token: &r.token,
            deadline: r.deadline,
        })
        .collect();
    let (values, time, acks) = link.execute(
        &routed,
        out.inline_scripts,
        out.time,
        out.scripts,
        wait.map(|w| w.1),
    )?;
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
                    master_acknowledged(ack, &wait).map_or(vote, Vote::Failed)
                }
                _ => vote,
            }
        })
        .collect();
    let refreshed = refreshed.map(|(probe, masters)| {
        let replicas = link
            .probed_replicas()
            .into_iter()
            .map(|(m, n)| (Some(m), n))
            .collect();
        (probe, masters, replicas)
    });
    Ok(Ran {
        votes,
        time,
        sent: out.sent,
        demoted: false,
        refreshed,
    })
}

/// Why a yes from a cluster's master does not count, by what its `WAIT` answered.
fn master_acknowledged(ack: Waited, wait: &Wait) -> Option<NodeProblem> {
    match ack {
        Waited::Reply(value) => acknowledged(&Acked::Reply(value), wait),
        Waited::Late(waited) => acknowledged(&Acked::Late(waited), wait),
        Waited::Gone(master) => Some(NodeProblem::Unavailable(format!(
            "master {master} took the write but left the cluster's slot map \
             before its WAIT (min_replicas) could run"
        ))),
    }
}

/// Whether a reply says the server is a read-only replica now.
fn is_readonly(value: &Value) -> bool {
    matches!(value, Value::ServerError(e)
        if e.code() == "READONLY"
            || e.details().is_some_and(|d| d.contains("read only replica")))
}
