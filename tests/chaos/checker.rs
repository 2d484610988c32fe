//! The checker: reads the client processes' logs and the driver's record of outages, and
//! reports every violation of the rules in the test's module docs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::client::OPS;
use crate::election::{self, ELECTION_KEY, ElectionHold, Observed};
use crate::fenced::{self, FENCED_RESOURCE, FencedHold, paused_across};
use crate::kinds::{self, KindHold};
use crate::schedule::{Action, Outage, Pause, Record, Restart, majority_down};
use crate::{
    CALL_MARGIN_MS, CANCEL_BOUND_MS, CLIENTS, MIN_VALIDITY_TO_WRITE, MS, NODE_TIMEOUT, RETRY_COUNT,
    RETRY_DELAY, RETRY_JITTER, STALL_MIN_NS_MS, TTL_MAX_MS, WAIT_MS, resource,
};

pub fn lock_bound_ms() -> u64 {
    let attempts = u64::from(RETRY_COUNT) + 1;
    attempts * NODE_TIMEOUT.as_millis() as u64
        + u64::from(RETRY_COUNT) * (RETRY_DELAY + RETRY_JITTER).as_millis() as u64
}

/// A wait sleeps no later than its deadline; past it come at most one attempt, the reading of
/// the holder's TTL, the subscription and a reentrant undo's wait for late answers, each
/// bounded by `node_timeout`.
pub fn wait_bound_ms() -> u64 {
    WAIT_MS + 4 * NODE_TIMEOUT.as_millis() as u64
}

/// Bound on one call, from the configuration: the decision waits at most `node_timeout` per
/// attempt, and `lock` sleeps at most `retry_delay + retry_jitter` between attempts.
pub fn bound_ms(op: &str) -> u64 {
    match op {
        "lock" => lock_bound_ms(),
        "wait" => wait_bound_ms(),
        // One attempt on each of the L + 1 slots.
        "overask" => (u64::from(kinds::PERMITS) + 1) * NODE_TIMEOUT.as_millis() as u64,
        _ => NODE_TIMEOUT.as_millis() as u64,
    }
}

/// Rule (c)'s bound on a call of `op` on `resource`, before the stalls of its process are
/// added: [`bound_ms`], what the kinds and the election add, and the margin.
pub fn call_bound_ms(op: &str, resource: &str) -> u64 {
    bound_ms(op)
        + kinds::extra_bound_ms(op, resource)
        + election::extra_bound_ms(op, resource)
        + CALL_MARGIN_MS
}

/// A cancellable wait (an `A` line): a reentrant request whose owner is its token.
pub struct Wait {
    pub client: usize,
    pub resource: String,
    pub token: String,
    pub mode: String,
    /// When its cancel fired (0: not yet when the call returned, or never).
    pub fired: u64,
    pub start: u64,
    pub end: u64,
    pub outcome: String,
    /// How long the waiting thread waited for a core from its cancel's firing to its return,
    /// in ms, and how often it was scheduled in meanwhile.
    pub waited_ms: Option<u64>,
    pub scheduled: Option<u64>,
}

/// A key of a finished acquisition that a client's key probe found on a node `NODE_TIMEOUT`
/// after the call returned (a `K` line), and how it went: `removed` before it expired,
/// `expired`, `stayed` (still there long after any TTL), or `unreachable` (the node stopped
/// answering while watched).
pub struct Sighting {
    pub client: usize,
    pub kind: String,
    pub resource: String,
    pub token: String,
    pub node: usize,
    /// The acquisition's start and the end of the call that finished it.
    pub start: u64,
    pub end: u64,
    pub first_seen: u64,
    pub first_pttl: i64,
    pub gone: u64,
    pub how: String,
    /// The call that finished the acquisition, and its outcome.
    pub call: String,
}

/// What a sighting amounts to (rule (f)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFate {
    /// The node was down, hung or cut off from the client while the key could be set or
    /// removed: Redlock lets it keep the key until its TTL.
    NodeWasDown,
    /// Removed, later than `NODE_TIMEOUT`: a slow cleanup (a starved machine), not a leak.
    Late,
    /// The client process, or the parent whose relays carry its traffic, was measurably not
    /// running for at least `NODE_TIMEOUT / 2` (the two added up) between the acquisition's
    /// start and the sighting: its workers may have taken a node's answer, or
    /// the cleanup, after the caller's `node_timeout`, which the library's contract does not
    /// cover (a release a worker picks up after its caller's deadline is dropped). Printed,
    /// counted, not failed.
    Starved,
    /// The node stopped answering while watched, without a recorded outage: unknown.
    Unknown,
    /// Nothing removed it: a leak.
    Leak,
}

/// The chaos cluster's `cluster-node-timeout` (`support::RedisCluster`).
const CLUSTER_NODE_TIMEOUT_MS: u64 = 1_000;

/// Margin around a recorded outage, which is never longer than the real one.
const OUTAGE_SLACK_NS: u64 = 5 * MS;
/// After a hang or a blackhole ends, the node first works through what was queued meanwhile
/// (every connection's requests of up to seconds), so it answers late for a while yet: an
/// answer after `node_timeout` is one the library may leave until its TTL.
const BACKLOG_SLACK_NS: u64 = 2 * NODE_TIMEOUT.as_nanos() as u64;

pub fn judge(s: &Sighting, outages: &[Outage], logs: &Logs) -> KeyFate {
    let down = outages.iter().any(|o| {
        let backlog = match o.action {
            // A stopped cluster master's backlog goes to a replica by then, but a worker that
            // followed the failover reconnects within its backoff like after a hang.
            Action::Hang
            | Action::Blackhole
            | Action::MasterBlackhole
            | Action::OldMasterBlackhole
            | Action::ClusterKill
            | Action::ClusterStop
            | Action::ClusterFailover
            | Action::GroupKill
            | Action::GroupFailover => BACKLOG_SLACK_NS,
            _ => 0,
        };
        o.node == s.node
            && o.hits(s.client)
            && o.down_ns <= s.gone + OUTAGE_SLACK_NS
            && o.up_ns + OUTAGE_SLACK_NS + backlog >= s.start
    });
    let starved = logs.stalled_with_relays_and_node(s.client, s.node, s.start, s.gone)
        >= NODE_TIMEOUT.as_nanos() as u64 / 2;
    match s.how.as_str() {
        _ if down => KeyFate::NodeWasDown,
        "removed" => KeyFate::Late,
        _ if starved => KeyFate::Starved,
        "unreachable" => KeyFate::Unknown,
        _ => KeyFate::Leak,
    }
}

pub struct Call {
    pub client: usize,
    pub op: String,
    pub resource: String,
    pub start: u64,
    pub end: u64,
    pub outcome: String,
    /// Which Redlock client of its process made it: `g` (with `restart_grace`), `n` (none).
    pub variant: String,
    /// How long the calling thread ran, and waited for a core, during the call, in ms
    /// (`/proc/thread-self/schedstat`): the rest it slept.
    pub ran_ms: Option<u64>,
    pub waited_ms: Option<u64>,
    /// How often the calling thread was scheduled in during the call.
    pub scheduled: Option<u64>,
}

impl Call {
    pub fn acquires(&self) -> bool {
        matches!(self.op.as_str(), "lock" | "try_lock" | "wait" | "overask")
    }
}

pub struct Hold {
    pub client: usize,
    pub resource: String,
    pub token: String,
    pub acquired: u64,
    pub deadline: u64,
    pub end: u64,
    pub abandoned: bool,
    pub wrote: Option<u64>,
    pub set_done: u64,
    /// When the holder checked its validity before writing.
    pub checked: u64,
    /// How long the writing thread waited for a core from `checked` to `set_done`, in ms, and
    /// how often it was scheduled in meanwhile (`schedstat`).
    pub waited_ms: Option<u64>,
    pub scheduled: Option<u64>,
}

impl Hold {
    /// The window runs from `acquired` (after `lock`/`try_lock` returned: a call that started
    /// while someone else held the lock merely waited, which is no overlap) to the last known
    /// deadline, or to the start of the release if that came first (the holder relies on the
    /// lock no more; its keys may be gone, and a new owner in, before `release` returns).
    pub fn window_end(&self) -> u64 {
        self.deadline.min(self.end)
    }
}

pub struct Status {
    pub connected: usize,
    pub acquired: bool,
    pub detail: String,
}

#[derive(Default)]
pub struct Logs {
    pub calls: Vec<Call>,
    pub holds: Vec<Hold>,
    pub status: BTreeMap<usize, Status>,
    /// Per client process: intervals during which it, or one core it runs on, did not get to
    /// run (its stall probes, merged).
    pub stalls: BTreeMap<usize, Vec<(u64, u64)>>,
    /// Per client process: the stalls in `stalls` that only a probe pinned to one core saw,
    /// as (core, from, to) (`LC` lines), for the totals.
    pub core_stalls: BTreeMap<usize, Vec<(usize, u64, u64)>>,
    /// Per client process: the stalls in `stalls` that its memory-map probe saw and its free
    /// probe saw less than half of (`LM` lines; a pinned probe may have seen them too), for
    /// the totals.
    pub map_stalls: BTreeMap<usize, Vec<(u64, u64)>>,
    /// Per client process: when `gdb` held it stopped for the slow-call snapshot (`G` lines;
    /// also within `stalls`).
    pub gdb: BTreeMap<usize, Vec<(u64, u64)>>,
    pub waits: Vec<Wait>,
    pub sightings: Vec<Sighting>,
    /// Per client process: calls its key probe looked after, and node looks that got no answer.
    pub probes: BTreeMap<usize, (u64, u64)>,
    /// Holds of the read-write lock and the semaphore (`R` lines; see `kinds.rs`).
    pub kinds: Vec<KindHold>,
    /// Fenced holds (`F` lines; see `fenced.rs`).
    pub fenced: Vec<FencedHold>,
    /// Leaderships (`E` lines) and answers of `leader` (`O` lines; see `election.rs`).
    pub elections: Vec<ElectionHold>,
    pub observed: Vec<Observed>,
    /// The election's storage reads and writes (`TS` lines; see `history.rs`).
    pub term_ops: Vec<crate::history::TermOp>,
    /// Intervals during which the parent, which runs the relays, or one of its cores did not
    /// get to run (its stall probes): every client's traffic waited meanwhile, as on a slow
    /// network.
    pub relay_stalls: Vec<(u64, u64)>,
    /// Per lock node: intervals during which one of its servers answered a `PING` of the
    /// parent's responsiveness probe late (a server the machine did not get to run answers
    /// every client late).
    pub node_stalls: BTreeMap<usize, Vec<(u64, u64)>>,
    /// The Sentinel group's servers (port, from, to): late answers to the same probe, read by
    /// rule (sn) to say whether a server the sentinels judged down was answering late.
    pub group_stalls: Vec<(u16, u64, u64)>,
}

impl Logs {
    /// How long `client` was stalled within `[start, end]`.
    pub fn stalled(&self, client: usize, start: u64, end: u64) -> u64 {
        self.stalls
            .get(&client)
            .map_or(0, |stalls| overlap(stalls, start, end))
    }

    /// How long, within `[start, end]`, `client`, the relays or a server of lock node `node` was
    /// stalled: their stalls merged, so that one stall that several saw (a core that ran
    /// nothing, seen by the probes pinned to it in each process) counts once.
    pub fn stalled_with_relays_and_node(
        &self,
        client: usize,
        node: usize,
        start: u64,
        end: u64,
    ) -> u64 {
        let all: Vec<(u64, u64)> = self
            .stalls
            .get(&client)
            .into_iter()
            .flatten()
            .chain(&self.relay_stalls)
            .chain(self.node_stalls.get(&node).into_iter().flatten())
            .copied()
            .collect();
        overlap(&merged(all), start, end)
    }

    /// How long the relays were stalled within `[start, end]`.
    pub fn relay_stalled(&self, start: u64, end: u64) -> u64 {
        overlap(&self.relay_stalls, start, end)
    }

    /// How long a server of lock node `node` answered late within `[start, end]`.
    pub fn node_stalled(&self, node: usize, start: u64, end: u64) -> u64 {
        self.node_stalls
            .get(&node)
            .map_or(0, |stalls| overlap(stalls, start, end))
    }
}

/// How often a thread may be scheduled in during one call for its wait for a core to count
/// (see [`not_running_ms`]). A thread that waits for a core because it yields in a loop (a
/// library defect) waits about a time slice of the busy loops per yield, so it is scheduled in
/// once per slice: over this many, its wait is its own doing, not the machine's. The library's
/// own looks and yields per call stay well under it (tens per attempt, see `sync.rs`).
pub const SCHEDULED_BUDGET: u64 = 300;

/// Set while the checker checks made-up logs: its NOTEs would read as the run's.
static SELF_TEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long a call of `client` over `[start, end]` did not run for reasons of the machine or
/// the harness, in ms, for the bounds of rules (c) and (g) and what explains a late write
/// ((b)): its process's stops (the driver's
/// pauses, `gdb`'s snapshot, merged), and beyond them the longer of two views of starvation,
/// the rest of the process's stalls (its stall probes, threads that sleep between looks)
/// and the calling thread's own wait for a core (`waited_ms`, from its `schedstat`, without
/// its wait within `gdb`'s span). The two views overlap, so the longer one counts, not their
/// sum; a stopped thread does not wait for a core, so the stops count apart. The thread's wait
/// counts only when it was scheduled in at most [`SCHEDULED_BUDGET`] times. Without
/// `waited_ms` this is the process's stalls, as before threads were measured.
pub fn not_running_ms(
    logs: &Logs,
    pauses: &[crate::schedule::Pause],
    client: usize,
    (start, end): (u64, u64),
    (waited_ms, scheduled): (Option<u64>, Option<u64>),
) -> u64 {
    let stalled = logs.stalled(client, start, end);
    let stops: Vec<(u64, u64)> = pauses
        .iter()
        .filter(|p| p.client == client)
        .map(|p| (p.from, p.to))
        .chain(logs.gdb.get(&client).into_iter().flatten().copied())
        .collect();
    let stopped = overlap(&merged(stops), start, end).min(stalled);
    let starved = (stalled - stopped) / MS;
    let waited = match scheduled {
        Some(n) if n > SCHEDULED_BUDGET => 0,
        _ => waited_ms.unwrap_or(0),
    };
    stopped / MS + starved.max(waited)
}

/// `intervals` sorted, the overlapping ones merged.
pub fn merged(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (from, to) in intervals {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

pub fn overlap(intervals: &[(u64, u64)], start: u64, end: u64) -> u64 {
    intervals
        .iter()
        .map(|&(from, to)| to.min(end).saturating_sub(from.max(start)))
        .sum()
}

pub fn read_logs(paths: &[PathBuf]) -> Logs {
    let mut logs = Logs::default();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let num =
                |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad line {line:?}")) };
            match f[0] {
                "C" => logs.calls.push(Call {
                    client: num(1) as usize,
                    op: f[3].to_owned(),
                    resource: f[4].to_owned(),
                    start: num(5),
                    end: num(6),
                    outcome: f[7].to_owned(),
                    variant: f.get(8).unwrap_or(&"-").to_string(),
                    ran_ms: f
                        .get(9)
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|ns| ns / MS),
                    waited_ms: f
                        .get(10)
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|ns| ns / MS),
                    scheduled: f.get(11).and_then(|v| v.parse::<u64>().ok()),
                }),
                "H" => logs.holds.push(Hold {
                    client: num(1) as usize,
                    resource: f[3].to_owned(),
                    token: f[4].to_owned(),
                    acquired: num(6),
                    deadline: num(7),
                    end: num(8),
                    abandoned: f[9] == "abandoned",
                    wrote: f[10].parse().ok(),
                    set_done: num(11),
                    checked: num(12),
                    waited_ms: f
                        .get(13)
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|ns| ns / MS),
                    scheduled: f.get(14).and_then(|v| v.parse().ok()),
                }),
                "S" => {
                    logs.status.insert(
                        num(1) as usize,
                        Status {
                            connected: num(2) as usize,
                            acquired: f[3] == "1",
                            detail: f.get(4).unwrap_or(&"").to_string(),
                        },
                    );
                }
                "L" => logs
                    .stalls
                    .entry(num(1) as usize)
                    .or_default()
                    .push((num(2), num(3))),
                "LC" => logs.core_stalls.entry(num(1) as usize).or_default().push((
                    num(2) as usize,
                    num(3),
                    num(4),
                )),
                "LM" => logs
                    .map_stalls
                    .entry(num(1) as usize)
                    .or_default()
                    .push((num(2), num(3))),
                "G" => logs
                    .gdb
                    .entry(num(1) as usize)
                    .or_default()
                    .push((num(2), num(3))),
                "A" => logs.waits.push(Wait {
                    client: num(1) as usize,
                    resource: f[3].to_owned(),
                    token: f[4].to_owned(),
                    mode: f[5].to_owned(),
                    fired: num(6),
                    start: num(7),
                    end: num(8),
                    outcome: f[9].to_owned(),
                    waited_ms: f
                        .get(10)
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|ns| ns / MS),
                    scheduled: f.get(11).and_then(|v| v.parse::<u64>().ok()),
                }),
                "K" => logs.sightings.push(Sighting {
                    client: num(1) as usize,
                    kind: f[2].to_owned(),
                    resource: f[3].to_owned(),
                    token: f[4].to_owned(),
                    node: num(5) as usize,
                    start: num(6),
                    end: num(7),
                    first_seen: num(8),
                    first_pttl: f[9].parse().unwrap_or(-3),
                    gone: num(11),
                    how: f[12].to_owned(),
                    call: f[13].to_owned(),
                }),
                "P" => {
                    logs.probes.insert(num(1) as usize, (num(2), num(3)));
                }
                "R" => logs.kinds.push(kinds::parse(&f)),
                "F" => logs.fenced.push(fenced::parse(&f)),
                "E" => logs.elections.push(election::parse(&f)),
                "O" => logs.observed.push(election::parse_observed(&f)),
                "TS" => logs.term_ops.push(crate::history::parse_term_op(&f)),
                _ => panic!("bad line {line:?}"),
            }
        }
    }
    logs
}

pub struct Verdict {
    pub violations: Vec<String>,
}

impl Verdict {
    pub fn fail(&mut self, what: String) {
        self.violations.push(what);
    }
}

/// The first 8 characters of a token (a reentrant owner may be shorter).
fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}

pub fn ms(ns: u64, origin: u64) -> String {
    format!("{:.3}s", ns.saturating_sub(origin) as f64 / 1e9)
}

/// Late writes and the lost updates they caused, by cause.
#[derive(Debug, Default)]
pub struct Stats {
    /// Writes that landed after their lock's validity, with the process stopped by the driver
    /// across the write, or starved without it (its stall probes saw it, or one of its cores,
    /// not running, or the writing thread waited for a core, as `not_running_ms` counts).
    pub late_paused: usize,
    pub late_starved: usize,
    /// Counters that lost an update through such writes, described: the known limit of locks
    /// without fencing, not a violation.
    pub known_limit: Vec<String>,
}

/// Whether the mutex rules run in a schedule built to break them (`--eager-restarts`): the
/// phase rule (p) then stands aside, since no-grace clients meeting quick restarts is the point.
pub struct Options {
    pub eager: bool,
    /// The clients without grace set `min_replicas` (`--min-replicas`).
    pub replicated: bool,
}

pub fn check(
    logs: &Logs,
    record: &Record,
    counters: &BTreeMap<String, u64>,
    origin: u64,
    options: &Options,
    verdict: &mut Verdict,
) -> Stats {
    let outages = &record.outages;
    let mut stats = Stats::default();
    // (a) Validity windows on one resource never overlap.
    let mut by_resource: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in &logs.holds {
        by_resource.entry(&h.resource).or_default().push(h);
    }
    for (res, holds) in &mut by_resource {
        holds.sort_by_key(|h| h.acquired);
        let mut latest: Option<&Hold> = None;
        // A lock whose validity ran out before `acquired` was read (its process stopped as it
        // was granted) has an empty window: it overlaps nothing.
        for &h in holds.iter().filter(|h| h.window_end() > h.acquired) {
            if let Some(prev) = latest
                && h.acquired < prev.window_end()
            {
                verdict.fail(format!(
                    "(a) {res}: holder {} (client {}) acquired at {} while holder {} (client {}) \
                     held it [{} .. {}]: overlap {:.3} ms",
                    short(&h.token),
                    h.client,
                    ms(h.acquired, origin),
                    short(&prev.token),
                    prev.client,
                    ms(prev.acquired, origin),
                    ms(prev.window_end(), origin),
                    (prev.window_end().min(h.window_end()) - h.acquired) as f64 / 1e6
                ));
            }
            if latest.is_none_or(|p| h.window_end() > p.window_end()) {
                latest = Some(h);
            }
        }
    }

    // (b) No lost update: the writes account for the counter exactly. A write that landed after
    // its lock's validity (the holder stopped between its validity check and its SET) is
    // outside the lock's promise, and the counter may then lose updates: that is the known
    // limit of locks without fencing when every such write came with its process stopped
    // across it, by the driver (a client pause) or by a starved machine (the stall probes, or
    // the writing thread's wait for a core, as `not_running_ms` counts for (c)), and
    // every write made in time read what the last write before it left (a late one included):
    // so the late writes explain every lost update. Anything else is a violation.
    for (res, holds) in &by_resource {
        if res.starts_with("chaos:final") || *res == FENCED_RESOURCE {
            continue;
        }
        let mut written: Vec<u64> = holds.iter().filter_map(|h| h.wrote).collect();
        written.sort_unstable();
        let final_value = counters.get(*res).copied().unwrap_or(0);
        let expected: Vec<u64> = (1..=written.len() as u64).collect();
        let lost = final_value != written.len() as u64 || written != expected;
        let dups = written.windows(2).filter(|w| w[0] == w[1]).count();
        let late: Vec<&Hold> = holds
            .iter()
            .copied()
            .filter(|h| h.wrote.is_some() && h.set_done > h.deadline)
            .collect();
        if late.is_empty() {
            if lost {
                verdict.fail(format!(
                    "(b) {res}: counter is {final_value} after {} writes inside the lock \
                     ({dups} value(s) written twice): lost update",
                    written.len()
                ));
            }
            continue;
        }
        let mut unexplained = Vec::new();
        for h in &late {
            // The write had `MIN_VALIDITY_TO_WRITE` or more left at its check: run for as long
            // as it did not, it would have landed in time, give or take half of that for the
            // waits too short for the probes.
            let half = MIN_VALIDITY_TO_WRITE.as_millis() as u64 / 2;
            let needed = half.max(((h.set_done - h.deadline) / MS).saturating_sub(half));
            let not_running = not_running_ms(
                logs,
                &record.pauses,
                h.client,
                (h.checked, h.set_done),
                (h.waited_ms, h.scheduled),
            );
            if paused_across(&record.pauses, h.client, h.checked, h.set_done) {
                stats.late_paused += 1;
            } else if not_running >= needed {
                stats.late_starved += 1;
            } else {
                unexplained.push(format!(
                    "a write of {} by client {} at {} after its validity ended at {} ({} ms \
                     after its check), with no pause of its process and {not_running} ms of it \
                     not running where {needed} ms would explain it ({} ms of stalls of the \
                     process, a core of it or its memory map, its thread waiting {} ms for a core, scheduled in \
                     {} times)",
                    h.wrote.unwrap_or(0),
                    h.client,
                    ms(h.set_done, origin),
                    ms(h.deadline, origin),
                    (h.set_done - h.checked) / MS,
                    logs.stalled(h.client, h.checked, h.set_done) / MS,
                    h.waited_ms.unwrap_or(0),
                    h.scheduled.unwrap_or(0)
                ));
            }
        }
        unexplained.extend(unexplained_reads(holds, &late, origin));
        if !unexplained.is_empty() {
            verdict.fail(format!(
                "(b) {res}: counter is {final_value} after {} writes ({dups} value(s) written \
                 twice), {} after their validity; not explained by them: {}",
                written.len(),
                late.len(),
                unexplained.join("; ")
            ));
        } else if lost {
            stats.known_limit.push(format!(
                "{res}: counter is {final_value} after {} writes ({dups} value(s) written \
                 twice): {} write(s) landed after their lock's validity, each with its process \
                 or thread not running across it (the pause fencing is for; this lock has none)",
                written.len(),
                late.len()
            ));
        } else {
            println!(
                "NOTE {res}: {} write(s) landed after their lock's validity, no update lost",
                late.len()
            );
        }
    }

    // (c) Every call returned within its bound (plus the time its process was not running).
    for c in &logs.calls {
        let took = (c.end - c.start) / MS;
        let stalled = not_running_ms(
            logs,
            &record.pauses,
            c.client,
            (c.start, c.end),
            (c.waited_ms, c.scheduled),
        );
        let bound = call_bound_ms(&c.op, &c.resource) + stalled;
        let process_only =
            call_bound_ms(&c.op, &c.resource) + logs.stalled(c.client, c.start, c.end) / MS;
        if took > process_only
            && took <= bound
            && !SELF_TEST.load(std::sync::atomic::Ordering::Relaxed)
        {
            println!(
                "NOTE (c) client {} {} {} took {took} ms at {}: within its bound ({bound} ms) only \
                 with its thread's {} ms of waiting for a core",
                c.client,
                c.op,
                c.resource,
                ms(c.start, origin),
                c.waited_ms.unwrap_or(0)
            );
        }
        if took > bound {
            let thread = match (c.ran_ms, c.waited_ms) {
                (Some(ran), Some(waited)) => format!(
                    "; its thread ran {ran} ms, waited {waited} ms for a core and slept {} ms, \
                     scheduled in {} times",
                    took.saturating_sub(ran + waited),
                    c.scheduled.unwrap_or(0)
                ),
                _ => String::new(),
            };
            verdict.fail(format!(
                "(c) client {} {} {} took {took} ms at {} (bound {bound} ms, of which {stalled} \
                 ms the process or the thread did not run{thread})",
                c.client,
                c.op,
                c.resource,
                ms(c.start, origin)
            ));
        }
        let cancelled = c.op == "wait" && c.outcome == "cancelled";
        if !cancelled
            && !kinds::judged_here(&c.op, &c.resource, &c.outcome)
            && !matches!(
                c.outcome.as_str(),
                "ok" | "not_acquired" | "no_quorum" | "lost"
            )
        {
            verdict.fail(format!(
                "client {} {} {} failed unexpectedly: {}",
                c.client, c.op, c.resource, c.outcome
            ));
        }
    }

    // (d) Recovery: after the last fault, every client acquired again and is connected to all.
    let last_heal = last_heal(record);
    for client in 0..CLIENTS {
        let recovered = logs.calls.iter().any(|c| {
            c.client == client
                && !c.resource.starts_with("chaos:final")
                && c.start >= last_heal
                && matches!(c.op.as_str(), "lock" | "try_lock" | "wait")
                && c.outcome == "ok"
        });
        if !recovered {
            verdict.fail(format!(
                "(d) client {client} did not acquire any resource after the last fault healed \
                 at {}",
                ms(last_heal, origin)
            ));
        }
        match logs.status.get(&client) {
            Some(s) if s.connected == crate::nodes() && s.acquired => {}
            Some(s) => verdict.fail(format!(
                "(d) client {client}: {} of {} workers connected, final lock {}: {}",
                s.connected,
                crate::nodes(),
                if s.acquired {
                    "acquired"
                } else {
                    "NOT acquired"
                },
                s.detail
            )),
            None => verdict.fail(format!("(d) client {client} reported no status")),
        }
    }

    // (e) No client acquired while a majority of the nodes was down or cut off from it (5 ms
    // after the last signal or cut, for it to take hold). Fresh clients included; a Sentinel
    // group failing over by `SENTINEL FAILOVER` still answers (its outage is for (f)).
    let clients: BTreeSet<usize> = logs.calls.iter().map(|c| c.client).collect();
    for client in clients {
        let outages: Vec<Outage> = record
            .outages_for(client)
            .into_iter()
            .filter(|o| o.action != Action::GroupFailover)
            .collect();
        for (down, up) in majority_down(&outages) {
            for c in logs.calls.iter().filter(|c| c.client == client) {
                if c.acquires() && c.outcome == "ok" && c.start >= down + 5 * MS && c.end <= up {
                    verdict.fail(format!(
                        "(e) client {} acquired {} at {} while a majority of the nodes was down \
                         or cut off from it [{} .. {}]",
                        c.client,
                        c.resource,
                        ms(c.end, origin),
                        ms(down, origin),
                        ms(up, origin)
                    ));
                }
            }
        }
    }

    // (p) The phases held (a check of the harness, not of the library): no acquisition by a
    // client without restart grace ran while a quickly restarted node could still have
    // forgotten a live lock, from its kill until the largest TTL (plus the drift allowance)
    // had passed.
    if !options.eager {
        let drift_ms = TTL_MAX_MS / 100 + 2;
        for r in record.restarts.iter().filter(|r| r.quick) {
            let until = r.killed + (TTL_MAX_MS + drift_ms) * MS;
            for c in logs
                .calls
                .iter()
                .filter(|c| c.variant == "n" && c.acquires() && c.start < until && c.end > r.killed)
            {
                verdict.fail(format!(
                    "(p) client {} without restart grace ran {} {} [{} .. {}] while n{} could \
                     still have forgotten a live lock (quick restart at {}): the phases failed \
                     (a stalled call outlived its guard band?)",
                    c.client,
                    c.op,
                    c.resource,
                    ms(c.start, origin),
                    ms(c.end, origin),
                    r.node,
                    ms(r.killed, origin)
                ));
            }
        }
        // The cluster node: a master stopped or killed is replaced by a replica promoted only
        // after the largest TTL (plus the drift allowance), so every key the replica may lack
        // had expired: a delayed restart, safe for clients without grace. But the old master,
        // back, believes itself the master until it is demoted, and a vote a client without
        // `min_replicas` (one with grace) takes there meanwhile is lost: a quick restart for
        // the clients without grace (which set `min_replicas`, so that none of their own votes
        // there counts). So no acquisition with grace ran from the return until the demotion
        // while one without grace ran from the return until the largest TTL after it.
        let drift_ms = TTL_MAX_MS / 100 + 2;
        for f in record
            .failovers
            .iter()
            .filter(|f| f.back.is_some() && !options.eager)
        {
            if let Some(p) = f.promoted
                && p < f.start + (TTL_MAX_MS + drift_ms) * MS
            {
                // A fault makes a replica the master no sooner than `cluster-node-timeout`
                // after it: one sooner was under way already, the cluster's own.
                let own = if p < f.start + CLUSTER_NODE_TIMEOUT_MS * MS {
                    format!(
                        ": sooner than cluster-node-timeout ({CLUSTER_NODE_TIMEOUT_MS} ms) lets \
                         a fault cause, so the cluster failed it over by itself (a starved \
                         machine?), which covers only clients with grace; the verdicts on n{} \
                         from then on are the run's, not the library's",
                        crate::cluster_node()
                    )
                } else {
                    String::new()
                };
                verdict.fail(format!(
                    "(p) cluster master {} failed over to {} {:.0} ms after its {:?}, before \
                     every key the replica may lack had expired{own}",
                    f.master,
                    f.replica,
                    (p - f.start) as f64 / 1e6,
                    f.action
                ));
            }
            let back = f.back.unwrap_or(0);
            let demoted = f.demoted.unwrap_or(u64::MAX / 2);
            let until = demoted + (TTL_MAX_MS + drift_ms) * MS;
            let during = |variant: &str, until: u64| {
                logs.calls.iter().find(|c| {
                    c.variant == variant && c.acquires() && c.start < until && c.end > back
                })
            };
            // Without `min_replicas`, a client without grace loses votes there itself.
            let with_grace = if options.replicated {
                during("g", demoted)
            } else {
                during("n", until)
            };
            if let (Some(g), Some(n)) = (with_grace, during("n", until)) {
                verdict.fail(format!(
                    "(p) client {} {} ran {} {} [{} .. {}] while the old cluster master {} \
                     could still count its vote and lose it (back at {}, a replica at {}), and \
                     client {} without grace ran {} {} [{} .. {}] before such a lock expired: \
                     the phases failed",
                    g.client,
                    if g.variant == "g" {
                        "with restart grace"
                    } else {
                        "without grace or min_replicas"
                    },
                    g.op,
                    g.resource,
                    ms(g.start, origin),
                    ms(g.end, origin),
                    f.master,
                    ms(back, origin),
                    f.demoted.map_or("never".into(), |d| ms(d, origin)),
                    n.client,
                    n.op,
                    n.resource,
                    ms(n.start, origin),
                    ms(n.end, origin)
                ));
            }
        }
    }

    // (cl) Every fault of the cluster node ran its course (a check of the harness and of the
    // cluster, not of the library): the replica was promoted, the old master came back as a
    // replica, and the cluster was whole again before the next fault.
    for f in &record.failovers {
        if f.promoted.is_none() || f.demoted.is_none() || f.healthy.is_none() {
            verdict.fail(format!(
                "(cl) cluster fault {:?} of master {} (replica {}) at {}: promoted {}, old \
                 master a replica {}, cluster healthy {}",
                f.action,
                f.master,
                f.replica,
                ms(f.start, origin),
                f.promoted.map_or("never".into(), |t| ms(t, origin)),
                f.demoted.map_or("never".into(), |t| ms(t, origin)),
                f.healthy.map_or("never".into(), |t| ms(t, origin)),
            ));
        }
    }

    // (f) No key of a finished acquisition outlives its call: NODE_TIMEOUT after a wait that
    // gave no lock (failed or cancelled) or a release returned, no node holds a key with its
    // token, except a node that was down or hung meanwhile (it keeps the key until its TTL).
    for s in &logs.sightings {
        let fate = judge(s, outages, logs);
        if fate == KeyFate::Starved {
            println!(
                "NOTE (f) client {} was starved for {} ms, the relays for {} ms and n{}'s \
                 servers for {} ms: {} key {} of {} stayed on n{} after its call ({}) ended at \
                 {}, {} at {}",
                s.client,
                logs.stalled(s.client, s.start, s.gone) / MS,
                logs.relay_stalled(s.start, s.gone) / MS,
                s.node,
                logs.node_stalled(s.node, s.start, s.gone) / MS,
                s.kind,
                s.resource,
                s.token,
                s.node,
                s.call,
                ms(s.end, origin),
                s.how,
                ms(s.gone, origin)
            );
        }
        if fate == KeyFate::Leak {
            verdict.fail(format!(
                "(f) client {}: {} key {} of {} stayed on n{} after its call ({}) ended at {} \
                 ({} ms stalled since the acquisition began, the relays {} ms, the node's \
                 servers {} ms): seen {:.1} ms after it with PTTL {} ms, then {} at {}",
                s.client,
                s.kind,
                s.resource,
                s.token,
                s.node,
                s.call,
                ms(s.end, origin),
                logs.stalled(s.client, s.start, s.first_seen) / MS,
                logs.relay_stalled(s.start, s.first_seen) / MS,
                logs.node_stalled(s.node, s.start, s.first_seen) / MS,
                s.first_seen.saturating_sub(s.end) as f64 / 1e6,
                s.first_pttl,
                s.how,
                ms(s.gone, origin)
            ));
        }
    }

    // (g) Cancellation: a wait ends with `Cancelled` only after its cancel fired, within
    // CANCEL_BOUND_MS of it (plus the time its process was stalled); a cancel fired before the
    // call makes it fail at once.
    for w in &logs.waits {
        let cancelled = w.outcome == "cancelled";
        if cancelled && (w.fired == 0 || w.fired > w.end) {
            verdict.fail(format!(
                "(g) client {} wait {} for {} at {} returned Cancelled, but its cancel had not \
                 fired",
                w.client,
                w.token,
                w.resource,
                ms(w.start, origin)
            ));
        }
        if cancelled && w.fired != 0 && w.fired <= w.end {
            let took = (w.end - w.fired.max(w.start)) / MS;
            let stalled = not_running_ms(
                logs,
                &record.pauses,
                w.client,
                (w.fired.max(w.start), w.end),
                (w.waited_ms, w.scheduled),
            );
            let process_only = logs.stalled(w.client, w.fired.max(w.start), w.end) / MS;
            if took > CANCEL_BOUND_MS + process_only
                && took <= CANCEL_BOUND_MS + stalled
                && !SELF_TEST.load(std::sync::atomic::Ordering::Relaxed)
            {
                println!(
                    "NOTE (g) client {} wait for {} returned {took} ms after its cancel fired at \
                     {}: within its bound only with its thread's {} ms of waiting for a core",
                    w.client,
                    w.resource,
                    ms(w.fired, origin),
                    w.waited_ms.unwrap_or(0)
                );
            }
            if took > CANCEL_BOUND_MS + stalled {
                verdict.fail(format!(
                    "(g) client {} wait for {} returned {took} ms after its cancel fired at {} \
                     (bound {CANCEL_BOUND_MS} ms + {stalled} ms the process or the thread did \
                     not run)",
                    w.client,
                    w.resource,
                    ms(w.fired, origin)
                ));
            }
        }
        if w.mode == "before" && !cancelled {
            verdict.fail(format!(
                "(g) client {} wait for {} with a cancel fired before the call ended {}",
                w.client, w.resource, w.outcome
            ));
        }
    }
    stats
}

/// Writes made in time that read something other than what the last write made in time
/// before their acquisition left (in the order the writes returned, which is the order they
/// ran), or what a late write may have left: with late writes about, what (b) cannot put down
/// to them. A late SET ran at some moment between its holder's validity check and its reply
/// (its process may have been stopped on either side of it), so it may explain any read made
/// after that check.
fn unexplained_reads(holds: &[&Hold], late: &[&Hold], origin: u64) -> Vec<String> {
    let mut in_time: Vec<&Hold> = holds
        .iter()
        .copied()
        .filter(|h| h.wrote.is_some() && h.set_done <= h.deadline)
        .collect();
    in_time.sort_by_key(|h| h.set_done);
    let mut out = Vec::new();
    for w in &in_time {
        let value = w.wrote.unwrap_or(0);
        let before = in_time
            .iter()
            .rfind(|p| p.set_done < w.acquired)
            .map_or(0, |p| p.wrote.unwrap_or(0));
        let raced = late
            .iter()
            .any(|l| l.checked < w.set_done && l.wrote == Some(value - 1));
        if value != before + 1 && !raced {
            out.push(format!(
                "client {} wrote {value} at {} having acquired at {}, when the last write made \
                 in time before had left {before} and no late write {}",
                w.client,
                ms(w.set_done, origin),
                ms(w.acquired, origin),
                value - 1
            ));
        }
    }
    out
}

/// When the last fault ended: a node back, a cut healed, a client resumed.
pub fn last_heal(record: &Record) -> u64 {
    let outages = record.outages.iter().map(|o| o.up_ns);
    let pauses = record.pauses.iter().map(|p| p.to);
    outages.chain(pauses).max().unwrap_or(0)
}

/// Every fault class the docs claim we survive was injected, and every kind of call made:
/// a run that skipped one tested nothing about it.
pub fn check_coverage(logs: &Logs, record: &Record, cluster: bool, verdict: &mut Verdict) {
    let outages = |a: Action| record.outages.iter().filter(|o| o.action == a).count();
    let restarts = |quick: bool| record.restarts.iter().filter(|r| r.quick == quick).count();
    let calls = |f: &dyn Fn(&Call) -> bool| logs.calls.iter().filter(|c| f(c)).count();
    let rw_waits = logs
        .waits
        .iter()
        .filter(|w| w.resource == kinds::RW_RESOURCE)
        .count();
    let sem_waits = logs
        .waits
        .iter()
        .filter(|w| w.resource == kinds::SEM_RESOURCE)
        .count();
    let campaigns = |outcome: &str| {
        logs.waits
            .iter()
            .filter(|w| w.resource == ELECTION_KEY && w.outcome == outcome)
            .count()
    };
    // In the cluster configuration, each fault of the cluster node, run its course.
    let failovers = |a: Action| {
        let done = record
            .failovers
            .iter()
            .filter(|f| f.action == a && f.healthy.is_some())
            .count();
        if cluster { done } else { 1 }
    };
    let back_in = |quick: bool| {
        let done = record
            .failovers
            .iter()
            .filter(|f| f.back.is_some() && f.back_quick == quick && f.healthy.is_some())
            .count();
        if cluster { done } else { 1 }
    };
    let classes = [
        (
            "cluster master SIGKILLs (failed over, restarted, a replica again)",
            failovers(Action::ClusterKill),
        ),
        (
            "cluster master SIGSTOPs (failed over, resumed, a replica again)",
            failovers(Action::ClusterStop),
        ),
        (
            "CLUSTER FAILOVERs of a replica",
            failovers(Action::ClusterFailover),
        ),
        (
            "old cluster masters back in a quick phase (clients with grace)",
            back_in(true),
        ),
        (
            "old cluster masters back in a delayed phase (clients with min_replicas)",
            if crate::replicated() {
                back_in(false)
            } else {
                1
            },
        ),
        ("node hangs", outages(Action::Hang)),
        ("crashes with a delayed restart", restarts(false)),
        ("crashes with a quick restart", restarts(true)),
        ("majority outages", majority_down(&record.outages).len()),
        (
            "clock jumps",
            record.shifts.iter().filter(|s| s.2 > 0).count(),
        ),
        ("refusing cuts", outages(Action::Refuse)),
        ("blackholing cuts", outages(Action::Blackhole)),
        (
            "refusing cuts of a cluster master",
            if cluster {
                outages(Action::MasterRefuse)
            } else {
                1
            },
        ),
        (
            "blackholing cuts of a cluster master",
            if cluster {
                outages(Action::MasterBlackhole)
            } else {
                1
            },
        ),
        (
            "clock jumps of a cluster master",
            if cluster {
                record
                    .shifts
                    .iter()
                    .filter(|s| s.1 == crate::cluster_node() && s.2 > 0)
                    .count()
            } else {
                1
            },
        ),
        ("client pauses", record.pauses.len()),
        (
            "acquisitions with restart grace",
            calls(&|c| c.variant == "g" && c.acquires() && c.outcome == "ok"),
        ),
        (
            "acquisitions without restart grace",
            calls(&|c| c.variant == "n" && c.acquires() && c.outcome == "ok"),
        ),
        ("cancellable read-write waits", rw_waits),
        ("cancellable semaphore waits", sem_waits),
        ("elections won", campaigns("ok").min(logs.elections.len())),
        ("cancelled campaigns", campaigns("cancelled")),
    ];
    for (what, n) in classes {
        if n == 0 {
            verdict.fail(format!(
                "(cov) the run had no {what}: it tested nothing of them"
            ));
        }
    }
}

/// Whether the restart was timed to start its process in the last tenth of a second.
pub fn near_boundary(r: &Restart) -> bool {
    r.permille >= 895
}

pub fn summarize(logs: &Logs, record: &Record, stats: &Stats) {
    let outages = &record.outages;
    // The fenced resource has its own summary (fenced.rs).
    let count = |op: &str, outcome: &str| {
        logs.calls
            .iter()
            .filter(|c| c.op == op && c.outcome == outcome && c.resource != FENCED_RESOURCE)
            .count()
    };
    let acquired = count("lock", "ok") + count("try_lock", "ok");
    let refused = count("lock", "not_acquired") + count("try_lock", "not_acquired");
    let no_quorum = count("lock", "no_quorum") + count("try_lock", "no_quorum");
    let mutex = || logs.holds.iter().filter(|h| h.resource != FENCED_RESOURCE);
    let writes = mutex().filter(|h| h.wrote.is_some()).count();
    let skipped = mutex().filter(|h| h.wrote.is_none()).count();
    let abandoned = logs.holds.iter().filter(|h| h.abandoned).count();
    println!("totals");
    println!(
        "  calls             {} (lock/try_lock {}, extend {}, release {})",
        logs.calls.len(),
        logs.calls
            .iter()
            .filter(|c| c.op == "lock" || c.op == "try_lock")
            .count(),
        logs.calls.iter().filter(|c| c.op == "extend").count(),
        logs.calls.iter().filter(|c| c.op == "release").count()
    );
    println!("  acquisitions      {acquired}");
    println!("  refusals          {refused}");
    println!("  no quorum         {no_quorum}");
    println!(
        "  extend            ok {}, lost {}, no quorum {}",
        count("extend", "ok"),
        count("extend", "lost"),
        count("extend", "no_quorum")
    );
    println!(
        "  release           ok {}, lost {}, no quorum {}",
        count("release", "ok"),
        count("release", "lost"),
        count("release", "no_quorum")
    );
    println!(
        "  writes            {writes} (skipped for lack of validity: {skipped}; abandoned locks: {abandoned})"
    );
    let per_node: Vec<String> = (0..crate::nodes())
        .map(|n| {
            let down: u64 = outages
                .iter()
                .filter(|o| o.node == n && o.client.is_none())
                .map(|o| (o.up_ns - o.down_ns) / MS)
                .sum();
            format!("n{n} {down} ms")
        })
        .collect();
    println!("  downtime          {}", per_node.join(", "));
    for op in OPS {
        let max = logs
            .calls
            .iter()
            .filter(|c| c.op == op)
            .max_by_key(|c| c.end - c.start);
        if let Some(c) = max {
            println!(
                "  max {op:<9}     {:.1} ms, {:.1} ms of it stalled (bound {} ms + {CALL_MARGIN_MS} ms margin + stalls)",
                (c.end - c.start) as f64 / 1e6,
                logs.stalled(c.client, c.start, c.end) as f64 / 1e6,
                bound_ms(op)
            );
        }
    }
    let longest = logs
        .stalls
        .values()
        .flatten()
        .map(|(from, to)| to - from)
        .max()
        .unwrap_or(0);
    let relay_longest = logs.relay_stalls.iter().map(|(from, to)| to - from).max();
    println!(
        "  process stalls    {} over {STALL_MIN_NS_MS} ms, longest {:.1} ms (client pauses \
         included); the relays' process: {}, longest {:.1} ms",
        logs.stalls.values().map(Vec::len).sum::<usize>(),
        longest as f64 / 1e6,
        logs.relay_stalls.len(),
        relay_longest.unwrap_or(0) as f64 / 1e6
    );
    let core_longest = logs
        .core_stalls
        .values()
        .flatten()
        .map(|(_, from, to)| to - from)
        .max();
    println!(
        "  one core stalled  {} over {STALL_MIN_NS_MS} ms (a probe pinned to the core woke late \
         without waiting for it; the free probe saw less than half), in the process stalls \
         above, longest {:.1} ms",
        logs.core_stalls.values().map(Vec::len).sum::<usize>(),
        core_longest.unwrap_or(0) as f64 / 1e6
    );
    let map_longest = logs
        .map_stalls
        .values()
        .flatten()
        .map(|(from, to)| to - from)
        .max();
    println!(
        "  map changes held  {} over {STALL_MIN_NS_MS} ms, {:.1} ms in all, longest {:.1} ms (the \
         memory-map probe's change of the map waited in the kernel while neither it nor its \
         process ran for half of it; the free probe saw less than half), in the process stalls \
         above",
        logs.map_stalls.values().map(Vec::len).sum::<usize>(),
        logs.map_stalls
            .values()
            .flatten()
            .map(|(from, to)| to - from)
            .sum::<u64>() as f64
            / 1e6,
        map_longest.unwrap_or(0) as f64 / 1e6
    );
    let mut scheduled: Vec<u64> = logs.calls.iter().filter_map(|c| c.scheduled).collect();
    scheduled.sort_unstable();
    let at = |q: f64| {
        scheduled
            .get(((scheduled.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let waited_longest = logs.calls.iter().filter_map(|c| c.waited_ms).max();
    println!(
        "  calls' threads    scheduled in per call p50 {}, p99 {}, max {} (a wait counts up to \
         {SCHEDULED_BUDGET}); longest wait for a core {} ms",
        at(0.5),
        at(0.99),
        scheduled.last().copied().unwrap_or(0),
        waited_longest.unwrap_or(0)
    );
    let servers: Vec<u64> = logs
        .node_stalls
        .values()
        .flatten()
        .map(|(from, to)| to - from)
        .collect();
    println!(
        "  server stalls     {} PINGs of the responsiveness probe answered over \
         {STALL_MIN_NS_MS} ms late, longest {:.1} ms",
        servers.len(),
        servers.iter().max().copied().unwrap_or(0) as f64 / 1e6
    );
    let waits = |mode: &str, outcome: &str| {
        logs.waits
            .iter()
            .filter(|w| (mode.is_empty() || w.mode == mode) && w.outcome == outcome)
            .count()
    };
    println!(
        "  waits             {} (ok {}, cancelled {}, not acquired {}, no quorum {})",
        logs.waits.len(),
        waits("", "ok"),
        waits("", "cancelled"),
        waits("", "not_acquired"),
        waits("", "no_quorum")
    );
    for mode in ["before", "during", "release", "never"] {
        let of_mode: Vec<&Wait> = logs.waits.iter().filter(|w| w.mode == mode).collect();
        let fired = of_mode
            .iter()
            .filter(|w| w.fired != 0 && w.fired <= w.end)
            .count();
        let raced = of_mode
            .iter()
            .filter(|w| w.fired != 0 && w.fired <= w.end && w.outcome != "cancelled")
            .count();
        println!(
            "  cancels {mode:<9} {} waits, {fired} fired during the call: {} cancelled, {raced} \
             too late (the lock or the wait's end came first)",
            of_mode.len(),
            waits(mode, "cancelled")
        );
    }
    let slowest = logs
        .waits
        .iter()
        .filter(|w| w.outcome == "cancelled" && w.fired != 0)
        .map(|w| w.end.saturating_sub(w.fired.max(w.start)))
        .max()
        .unwrap_or(0);
    println!(
        "  cancel latency    at most {:.1} ms from firing to return (bound {CANCEL_BOUND_MS} ms)",
        slowest as f64 / 1e6
    );
    let probed: u64 = logs.probes.values().map(|p| p.0).sum();
    let unanswered: u64 = logs.probes.values().map(|p| p.1).sum();
    let judged = |v: KeyFate| {
        logs.sightings
            .iter()
            .filter(|s| judge(s, outages, logs) == v)
            .count()
    };
    println!(
        "  keys after calls  {probed} finished calls probed on every node ({unanswered} node looks \
         unanswered); keys found: {} on a node down meanwhile, {} removed late, {} with the client \
         starved, {} unknown, {} LEAKED",
        judged(KeyFate::NodeWasDown),
        judged(KeyFate::Late),
        judged(KeyFate::Starved),
        judged(KeyFate::Unknown),
        judged(KeyFate::Leak)
    );
    if let Some(late) = logs
        .sightings
        .iter()
        .filter(|s| judge(s, outages, logs) == KeyFate::Late)
        .map(|s| s.gone - s.end)
        .max()
    {
        println!(
            "  latest cleanup    {:.1} ms after its call returned",
            late as f64 / 1e6
        );
    }
    println!(
        "  late writes       {} after a driver pause, {} with the process starved; counters \
         broken by them (known limit, no fencing): {}",
        stats.late_paused,
        stats.late_starved,
        stats.known_limit.len()
    );
    for k in &stats.known_limit {
        println!("KNOWN LIMIT {k}");
    }
}

/// Faults by class, as rows of a table for `docs/guarantees.md`.
pub fn fault_table(record: &Record, logs: &Logs) -> Vec<(String, String)> {
    let outages = |a: Action| record.outages.iter().filter(move |o| o.action == a);
    let total_ms = |a: Action| outages(a).map(|o| (o.up_ns - o.down_ns) / MS).sum::<u64>();
    let quick: Vec<&Restart> = record.restarts.iter().filter(|r| r.quick).collect();
    let delayed = record.restarts.iter().filter(|r| !r.quick).count();
    let node_wide: Vec<Outage> = record
        .outages
        .iter()
        .copied()
        .filter(|o| o.client.is_none())
        .collect();
    let per_client_majority: usize = (0..CLIENTS)
        .map(|c| majority_down(&record.outages_for(c)).len())
        .sum();
    let jumps: Vec<u64> = record
        .shifts
        .iter()
        .map(|s| s.2)
        .filter(|&ms| ms > 0)
        .collect();
    let at_write = |k: &str| {
        record
            .pauses
            .iter()
            .filter(|p| p.at_write == Some(k))
            .count()
    };
    let grace_acq = logs
        .calls
        .iter()
        .filter(|c| c.variant == "g" && c.acquires() && c.outcome == "ok")
        .count();
    let count_ms = |a: Action| format!("{} ({} ms in all)", outages(a).count(), total_ms(a));
    // The cluster node's faults: how many, how long until the replica was promoted, and until
    // the old master was a replica again.
    let failovers = |a: Action| {
        let of: Vec<&crate::schedule::Failover> =
            record.failovers.iter().filter(|f| f.action == a).collect();
        let span = |to: fn(&crate::schedule::Failover) -> Option<u64>| {
            let ms: Vec<u64> = of
                .iter()
                .filter_map(|f| to(f).map(|t| (t - f.start) / MS))
                .collect();
            format!(
                "{}..{} ms",
                ms.iter().min().unwrap_or(&0),
                ms.iter().max().unwrap_or(&0)
            )
        };
        format!(
            "{} (promoted after {}; old master a replica after {})",
            of.len(),
            span(|f| f.promoted),
            span(|f| f.demoted)
        )
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    if !record.group.is_empty() {
        rows.extend(crate::sentinel::fault_rows(record));
    }
    if !record.failovers.is_empty() {
        rows.push((
            "cluster master SIGKILL, failover, restart (back as a replica)".into(),
            failovers(Action::ClusterKill),
        ));
        rows.push((
            "cluster master SIGSTOP past its failover, SIGCONT (back as a replica)".into(),
            failovers(Action::ClusterStop),
        ));
        rows.push((
            "CLUSTER FAILOVER on a replica".into(),
            failovers(Action::ClusterFailover),
        ));
    }
    rows.extend(vec![
        ("node hang (SIGSTOP)".into(), count_ms(Action::Hang)),
        (
            "node crash, delayed restart (down > largest TTL; clients without grace)".into(),
            delayed.to_string(),
        ),
        (
            "node crash, quick restart (down 0-100 ms; clients with restart_grace ≥ largest TTL)"
                .into(),
            format!(
                "{} ({} started at x.895-x.999 s of the node's clock; {grace_acq} acquisitions \
                 with grace)",
                quick.len(),
                quick.iter().filter(|r| near_boundary(r)).count()
            ),
        ),
        (
            "majority of nodes down".into(),
            format!(
                "{} ({per_client_majority} per client, cuts included)",
                majority_down(&node_wide).len()
            ),
        ),
        (
            "node clock jump forward".into(),
            format!(
                "{} (+{}..+{} ms)",
                jumps.len(),
                jumps.iter().min().unwrap_or(&0),
                jumps.iter().max().unwrap_or(&0)
            ),
        ),
        (
            "client cut off from a node, refused".into(),
            count_ms(Action::Refuse),
        ),
        (
            "client cut off from a node, blackholed".into(),
            count_ms(Action::Blackhole),
        ),
    ]);
    if !record.failovers.is_empty() {
        let master_jumps: Vec<u64> = record
            .shifts
            .iter()
            .filter(|s| s.1 == crate::cluster_node() && s.2 > 0)
            .map(|s| s.2)
            .collect();
        rows.extend(vec![
            (
                "client cut off from one cluster master, refused / blackholed".into(),
                format!(
                    "{} / {}",
                    count_ms(Action::MasterRefuse),
                    count_ms(Action::MasterBlackhole)
                ),
            ),
            (
                "cluster master clock jump forward".into(),
                format!(
                    "{} (+{}..+{} ms)",
                    master_jumps.len(),
                    master_jumps.iter().min().unwrap_or(&0),
                    master_jumps.iter().max().unwrap_or(&0)
                ),
            ),
        ]);
    }
    rows.extend(vec![(
        "client process paused past its validity (SIGSTOP)".into(),
        format!(
            "{} ({} at a plain write, {} at a fenced write, {} at a leader's write; longest \
                 {} ms)",
            record.pauses.len(),
            at_write("plain"),
            at_write("fenced"),
            at_write("election"),
            record
                .pauses
                .iter()
                .map(|p| (p.to - p.from) / MS)
                .max()
                .unwrap_or(0)
        ),
    )]);
    rows
}

/// The checker must be able to fail: it is fed one made-up violation of each kind.
pub fn checker_catches_made_up_violations() {
    SELF_TEST.store(true, std::sync::atomic::Ordering::Relaxed);
    let t = 1_000 * 1_000 * MS;
    let hold = |client: usize, at: u64, end: u64| Hold {
        client,
        resource: resource(0),
        token: format!("token-of-{client}"),
        acquired: t + at * MS,
        deadline: t + (at + 300) * MS,
        end: t + end * MS,
        abandoned: false,
        wrote: Some(1),
        set_done: t + (at + 1) * MS,
        checked: t + at * MS,
        waited_ms: None,
        scheduled: None,
    };
    let call = |client: usize, op: &str, start: u64, end: u64| Call {
        client,
        op: op.to_owned(),
        resource: resource(0),
        start: t + start * MS,
        end: t + end * MS,
        outcome: "ok".to_owned(),
        variant: "g".to_owned(),
        ran_ms: None,
        waited_ms: None,
        scheduled: None,
    };
    let logs = Logs {
        // A lock call far over its bound; a try_lock that succeeded while a majority was down
        // or cut off from its client (client 1), and one by a client that could reach a
        // majority meanwhile (client 0: no violation); an acquisition by a client without
        // grace right after a quick restart (the phases failed).
        calls: vec![
            call(0, "lock", 0, 2_000),
            call(1, "try_lock", 5_010, 5_020),
            call(0, "try_lock", 5_010, 5_020),
            Call {
                variant: "n".to_owned(),
                ..call(2, "lock", 7_100, 7_150)
            },
            // As far over its bound as the first, but its thread waited 1.5 s for a core (no
            // violation); and once more with 0.1 s of it (a violation).
            Call {
                waited_ms: Some(1_500),
                ..call(0, "lock", 10_000, 12_000)
            },
            Call {
                ran_ms: Some(0),
                waited_ms: Some(100),
                ..call(0, "lock", 13_000, 15_000)
            },
            // Its process stalled 400 ms and its thread waited 400 ms: the same starvation
            // seen twice, counted once (a violation).
            Call {
                ran_ms: Some(5),
                waited_ms: Some(400),
                scheduled: Some(20),
                ..call(3, "lock", 16_000, 18_000)
            },
            // Its thread waited 1.5 s, but was scheduled in 1,000 times: a yield loop of its
            // own, not the machine's doing (a violation).
            Call {
                ran_ms: Some(5),
                waited_ms: Some(1_500),
                scheduled: Some(1_000),
                ..call(0, "lock", 19_000, 21_000)
            },
        ],
        // Overlapping windows, both writing 1 (a lost update); no status from any client.
        holds: vec![hold(0, 0, 100), hold(1, 50, 150)],
        status: BTreeMap::new(),
        stalls: BTreeMap::from([(3, vec![(t + 16_100 * MS, t + 16_500 * MS)])]),
        core_stalls: BTreeMap::new(),
        map_stalls: BTreeMap::new(),
        gdb: BTreeMap::new(),
        // A Cancelled with no cancel fired; a cancel fired before the call that did nothing.
        waits: vec![
            Wait {
                client: 2,
                resource: resource(1),
                token: "w2.0.1".to_owned(),
                mode: "during".to_owned(),
                fired: 0,
                start: t + 100 * MS,
                end: t + 150 * MS,
                outcome: "cancelled".to_owned(),
                waited_ms: None,
                scheduled: None,
            },
            Wait {
                client: 2,
                resource: resource(1),
                token: "w2.0.2".to_owned(),
                mode: "before".to_owned(),
                fired: t + 199 * MS,
                start: t + 200 * MS,
                end: t + 250 * MS,
                outcome: "not_acquired".to_owned(),
                waited_ms: None,
                scheduled: None,
            },
        ],
        // A key left to expire on a node that was up; the same on a node hung meanwhile (no
        // violation).
        sightings: [3, 0]
            .into_iter()
            .map(|node| Sighting {
                client: 2,
                kind: "reentrant".to_owned(),
                resource: resource(1),
                token: "w2.0.1".to_owned(),
                node,
                start: t + 4_900 * MS,
                end: t + 5_000 * MS,
                first_seen: t + 5_050 * MS,
                first_pttl: 200,
                gone: t + 5_250 * MS,
                how: "expired".to_owned(),
                call: "wait:cancelled".to_owned(),
            })
            .collect(),
        probes: BTreeMap::new(),
        kinds: Vec::new(),
        fenced: Vec::new(),
        elections: Vec::new(),
        observed: Vec::new(),
        term_ops: Vec::new(),
        relay_stalls: Vec::new(),
        node_stalls: BTreeMap::new(),
        group_stalls: Vec::new(),
    };
    // n0 hung for everyone; n1 and n2 cut off from client 1 only.
    let outage = |node, client, action| Outage {
        node,
        client,
        action,
        down_ns: t + 5_000 * MS,
        up_ns: t + 6_000 * MS,
    };
    let record = Record {
        outages: vec![
            outage(0, None, Action::Hang),
            outage(1, Some(1), Action::Refuse),
            outage(2, Some(1), Action::Blackhole),
        ],
        restarts: vec![Restart {
            node: 4,
            quick: true,
            killed: t + 7_000 * MS,
            permille: 950,
        }],
        ..Record::default()
    };
    let counters = BTreeMap::from([(resource(0), 1)]);
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    let options = Options {
        eager: false,
        replicated: true,
    };
    check(&logs, &record, &counters, t, &options, &mut verdict);
    let majority = verdict
        .violations
        .iter()
        .filter(|v| v.starts_with("(e)"))
        .count();
    assert_eq!(
        majority, 1,
        "only client 1 had a majority down or cut off: {:?}",
        verdict.violations
    );
    let leaks = verdict
        .violations
        .iter()
        .filter(|v| v.starts_with("(f)"))
        .count();
    assert_eq!(
        leaks, 1,
        "exactly the key on the node that was up is a leak: {:?}",
        verdict.violations
    );
    for kind in ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)", "(p)"] {
        assert!(
            verdict.violations.iter().any(|v| v.starts_with(kind)),
            "the checker missed a made-up {kind} violation: {:?}",
            verdict.violations
        );
    }
    let slow: Vec<_> = verdict
        .violations
        .iter()
        .filter(|v| v.starts_with("(c)"))
        .collect();
    assert!(
        slow.len() == 4
            && slow[1].contains("its thread ran 0 ms, waited 100 ms")
            && slow[2].starts_with("(c) client 3")
            && slow[3].contains("scheduled in 1000 times"),
        "a call's thread's wait for a core counts in its bound, once, and not when it yields \
         in a loop: {slow:?}"
    );

    // The cluster node: a replica promoted 300 ms after its master stopped (before every key
    // it may lack had expired), a client with grace acquiring before the old master was
    // demoted and one without grace 100 ms after, and a killed master that never came back
    // as a replica.
    let failover = |action, promoted: u64, demoted: Option<u64>| crate::schedule::Failover {
        action,
        master: 1,
        replica: 2,
        start: t,
        promoted: Some(t + promoted * MS),
        back: Some(t + 2_000 * MS),
        back_quick: true,
        demoted: demoted.map(|d| t + d * MS),
        healthy: demoted.map(|d| t + (d + 100) * MS),
    };
    let record = Record {
        failovers: vec![
            failover(Action::ClusterStop, 300, Some(2_200)),
            failover(Action::ClusterKill, 2_000, None),
        ],
        ..Record::default()
    };
    let acquisition = |variant: &str, start: u64| Call {
        client: 0,
        op: "lock".to_owned(),
        resource: resource(0),
        start: t + start * MS,
        end: t + (start + 10) * MS,
        outcome: "ok".to_owned(),
        variant: variant.to_owned(),
        ran_ms: None,
        waited_ms: None,
        scheduled: None,
    };
    // The client without grace alone (it sets `min_replicas`): no violation.
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    check(
        &Logs {
            calls: vec![acquisition("n", 2_300)],
            ..Logs::default()
        },
        &Record {
            failovers: vec![failover(Action::ClusterStop, 2_000, Some(2_200))],
            ..Record::default()
        },
        &BTreeMap::new(),
        t,
        &options,
        &mut verdict,
    );
    assert!(
        !verdict.violations.iter().any(|v| v.starts_with("(p)")),
        "the checker took acquisitions with min_replicas alone around an old master's return \
         for a violation: {:?}",
        verdict.violations
    );
    // Without `min_replicas`, the same acquisition alone is one.
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    check(
        &Logs {
            calls: vec![acquisition("n", 2_300)],
            ..Logs::default()
        },
        &Record {
            failovers: vec![failover(Action::ClusterStop, 2_000, Some(2_200))],
            ..Record::default()
        },
        &BTreeMap::new(),
        t,
        &Options {
            eager: false,
            replicated: false,
        },
        &mut verdict,
    );
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.starts_with("(p)") && v.contains("old cluster master")),
        "the checker missed an acquisition without grace or min_replicas around an old \
         master's return: {:?}",
        verdict.violations
    );
    let logs = Logs {
        calls: vec![acquisition("g", 2_100), acquisition("n", 2_300)],
        ..Logs::default()
    };
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    check(&logs, &record, &BTreeMap::new(), t, &options, &mut verdict);
    let count = |rule: &str, what: &str| {
        verdict
            .violations
            .iter()
            .filter(|v| v.starts_with(rule) && v.contains(what))
            .count()
    };
    assert!(
        count("(p)", "before every key") == 1
            && count("(p)", "failed it over by itself") == 1
            && count("(p)", "old cluster master") == 2
            && count("(cl)", "") == 1,
        "the checker missed a made-up cluster (p) or (cl) violation: {:?}",
        verdict.violations
    );

    // A holder stopped between its validity check and its write, which lands after another
    // holder's: the counter loses an update. With the driver's pause across the write it is
    // the known limit of unfenced locks; with no pause or stall to explain it, a violation.
    let run = |pauses: Vec<Pause>, extra: Vec<Hold>, counter: u64, tweak: &dyn Fn(&mut Logs)| {
        let first = Hold {
            acquired: t - 1_000 * MS,
            deadline: t - 800 * MS,
            end: t - 800 * MS,
            set_done: t - 900 * MS,
            ..hold(2, 0, 0)
        };
        let late = Hold {
            wrote: Some(2),
            deadline: t + 300 * MS,
            end: t + 900 * MS,
            set_done: t + 900 * MS,
            checked: t + 150 * MS,
            ..hold(0, 0, 900)
        };
        let next = Hold {
            wrote: Some(2),
            ..hold(1, 400, 500)
        };
        let mut logs = Logs {
            holds: [first, late, next].into_iter().chain(extra).collect(),
            ..Logs::default()
        };
        tweak(&mut logs);
        let record = Record {
            pauses,
            ..Record::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        let counters = BTreeMap::from([(resource(0), counter)]);
        let stats = check(&logs, &record, &counters, t, &options, &mut verdict);
        let lost = verdict.violations.iter().any(|v| v.starts_with("(b)"));
        (lost, stats.known_limit.len())
    };
    let paused = Pause {
        client: 0,
        from: t + 160 * MS,
        to: t + 890 * MS,
        at_write: Some("plain"),
    };
    assert_eq!(
        run(vec![paused.clone()], Vec::new(), 2, &|_| {}),
        (false, 1),
        "a lost update by a write the driver's pause made late is the known limit"
    );
    assert_eq!(
        run(Vec::new(), Vec::new(), 2, &|_| {}),
        (true, 0),
        "a lost update by a late write that no pause explains is a violation"
    );
    // Without a pause: the writing thread waited 700 ms for a core, or a core ran nothing of
    // its process for 700 ms (a probe pinned to it saw it), across the write.
    let thread_waited = |scheduled: u64| {
        move |logs: &mut Logs| {
            logs.holds[1].waited_ms = Some(700);
            logs.holds[1].scheduled = Some(scheduled);
        }
    };
    assert_eq!(
        run(Vec::new(), Vec::new(), 2, &thread_waited(12)),
        (false, 1),
        "a lost update by a write its thread's wait for a core made late is the known limit"
    );
    assert_eq!(
        run(
            Vec::new(),
            Vec::new(),
            2,
            &thread_waited(SCHEDULED_BUDGET + 1)
        ),
        (true, 0),
        "a thread scheduled in more often than the budget waited by its own doing"
    );
    assert_eq!(
        run(Vec::new(), Vec::new(), 2, &|logs: &mut Logs| {
            logs.stalls.insert(0, vec![(t + 170 * MS, t + 870 * MS)]);
            logs.core_stalls
                .insert(0, vec![(1, t + 170 * MS, t + 870 * MS)]);
        }),
        (false, 1),
        "a lost update by a write a stalled core made late is the known limit"
    );
    assert_eq!(
        run(Vec::new(), Vec::new(), 2, &|logs: &mut Logs| {
            logs.stalls.insert(0, vec![(t + 170 * MS, t + 400 * MS)]);
        }),
        (true, 0),
        "a write 600 ms late is not explained by 230 ms of stalls"
    );
    // The late SET ran at once (at 160 ms) and its process stopped before reading the reply:
    // the writes after it in time read what the ones before them left, not what the late one
    // did when its reply came (at 900 ms).
    let after = |client, at: u64, value| Hold {
        wrote: Some(value),
        ..hold(client, at, at + 10)
    };
    assert_eq!(
        run(
            vec![paused.clone()],
            vec![after(2, 600, 3), after(1, 950, 4)],
            4,
            &|_| {}
        ),
        (false, 1),
        "a late write's SET may have run any time after its check"
    );
    // One more holder, in time, that read 1 when the last write before it had left 2: no late
    // write explains that.
    let stale_read = Hold {
        wrote: Some(2),
        ..hold(2, 600, 700)
    };
    assert_eq!(
        run(vec![paused], vec![stale_read], 2, &|_| {}),
        (true, 0),
        "a lost update that the late write does not explain is a violation"
    );

    // A key of a call that began 40 ms after its node came back from a hang: answered late
    // while the node worked through its backlog, not a leak; one that began 200 ms after is.
    let hang = Outage {
        node: 0,
        client: None,
        action: Action::Hang,
        down_ns: t,
        up_ns: t + 2_000 * MS,
    };
    let sighting = |begun: u64| Sighting {
        client: 0,
        kind: "reentrant".to_owned(),
        resource: resource(0),
        token: "w0.0.1".to_owned(),
        node: 0,
        start: t + begun * MS,
        end: t + (begun + 100) * MS,
        first_seen: t + (begun + 150) * MS,
        first_pttl: 200,
        gone: t + (begun + 350) * MS,
        how: "expired".to_owned(),
        call: "wait:cancelled".to_owned(),
    };
    let logs = Logs::default();
    assert_eq!(
        judge(&sighting(2_040), &[hang], &logs),
        KeyFate::NodeWasDown
    );
    assert_eq!(judge(&sighting(2_200), &[hang], &logs), KeyFate::Leak);

    // A run with no fault at all tested nothing.
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    check_coverage(&Logs::default(), &Record::default(), true, &mut verdict);
    assert!(
        verdict.violations.len() >= 8 && verdict.violations.iter().all(|v| v.starts_with("(cov)")),
        "the checker missed a run without faults: {:?}",
        verdict.violations
    );
    SELF_TEST.store(false, std::sync::atomic::Ordering::Relaxed);
}
