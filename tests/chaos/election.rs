//! Leader elections, and a storage that checks their terms, on an election of their own.
//!
//! One thread per client process is a candidate in the election `chaos-election`, under an
//! identity of its own (`c<client>.t<thread>`). It campaigns with the phase's client (with or
//! without restart grace, like every acquisition), each campaign a cancellable wait of 100 ms
//! to 1 s (`Election::campaign_for` with a `Cancel`, fired before the call or at a random moment
//! during it, as the other cancellable waits' are; no other thread of the process campaigns, so
//! none fires one around a release: half the campaigns are not cancelled). A campaign that wins leads for a random short time (up to
//! 800 ms, over several extensions of the shortest TTLs), or for up to 3 s unless its
//! leadership is found lost first, doing the term-checked read-modify-write of `fenced.rs` with
//! its term on the data node, under keys of its own (`chaos-election:count`, `:highest`,
//! `:accepted`, `:rejected`: the same Lua scripts, so the storage refuses a read or a write with
//! a term below the highest it has seen). It stops writing once its validity is gone, and ends by
//! resigning (most), by dropping the leadership (best-effort release), or, after riding it until
//! it was lost or 3 s passed, by resigning what may be lost. Now and then, before a campaign,
//! it asks who leads (`Redlock::leader`). Each leadership is an `E` line: its window
//! `[campaign returned, min(validity deadline as last sampled, resign or drop started)]`, its
//! term, identity and the writes the storage accepted and rejected; each answer of `leader` an
//! `O` line; each storage read, with the write that followed it, a `TS` line (for the history
//! Porcupine checks, `history.rs`).
//!
//! Rules:
//! - (el1): at most one leader with validity left at any instant: no two leadership windows
//!   overlap;
//! - (el2): terms strictly increase from leader to leader: when B's campaign started after A's
//!   returned, `term(B) > term(A)`; and no term is handed out twice;
//! - (el3): no stale write accepted: the writes the term-checking storage accepted carry
//!   non-decreasing terms in its order, their values are 1..=n in that order and its counter is
//!   n (as (f2)). A stale write it rejected (a leader paused past its validity) is counted, not a
//!   violation;
//! - (el4): what `leader` and an observer (`Redlock::observe`) report names a leadership that
//!   was granted: the identity of a candidate, and a term that a campaign of that identity
//!   returned, a campaign that started before the report. A term that no campaign returned is
//!   a violation: a record is confirmed only after its campaign decided it leads, and a campaign
//!   that decided returns its leadership (`src/election.rs`, "What readers are told").
//!
//! The election's calls are folded into the generic rules too: the campaigns are `wait` calls
//! (bounded by (c), refused while a majority is down or cut off by (e), phased by (p), their
//! cancels judged by (g)), resignations `release` calls, and both a resignation and a drop are
//! probed for the lock key `redlock:election:chaos-election` holding the leadership's token
//! (f). The record `redlock:leader:{redlock:election:chaos-election}` and the fence counter are
//! persistent by design and never probed. A cancelled or failed campaign's token is random and
//! unknown (an election takes no `token_for_tests`), so its keys are not probed. (cov) asks for
//! won elections and cancelled campaigns.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redquorum::{Cancel, Leadership};

use crate::checker::{Logs, Verdict, ms};
use crate::client::{Worker, outcome};
use crate::fenced::{Accepted, READ, Storage, WRITE, paused_across, storage_rule, tokens_rise};
use crate::history::term_op_line;
use crate::keys::KeyKind;
use crate::schedule::Pause;
use crate::{MIN_VALIDITY_TO_WRITE, MS, NODE_TIMEOUT, TTL_MAX_MS, TTL_MIN_MS, WAIT_MS, now_ns};

/// The election's name.
pub const ELECTION: &str = "chaos-election";
/// Its lock key (the library's `redlock:election:<name>`), as calls and probes name it.
pub const ELECTION_KEY: &str = "redlock:election:chaos-election";
/// Candidate threads per client process.
pub const ELECTION_THREADS: usize = 1;

const CAMPAIGN_MIN_MS: u64 = 100;
const CAMPAIGN_MAX_MS: u64 = 1_000;
const LEAD_MAX_MS: u64 = 800;
const RIDE_MAX_MS: u64 = 3_000;

const OP_RELEASE: usize = 3;
const OP_WAIT: usize = 4;
const OP_LEADER: usize = 6;

pub fn storage_key(what: &str) -> String {
    format!("{ELECTION}:{what}")
}

/// The storage's log of this election's writes.
pub fn read_storage(data: &mut redis::Connection) -> Storage {
    Storage::read_keys(
        data,
        &storage_key("accepted"),
        &storage_key("rejected"),
        &storage_key("count"),
    )
}

/// Extra time a call may take over the generic bound: a campaign waits up to
/// `CAMPAIGN_MAX_MS` (not `WAIT_MS`), each attempt has a second round, the write-back, and a
/// won campaign a third, the confirmation of its record.
pub fn extra_bound_ms(op: &str, resource: &str) -> u64 {
    match (op, resource) {
        ("wait", ELECTION_KEY) => CAMPAIGN_MAX_MS - WAIT_MS + 3 * NODE_TIMEOUT.as_millis() as u64,
        _ => 0,
    }
}

/// The deadline as known now: never later than the leadership's (clock first, then validity).
fn sample(l: &Leadership, deadline: &mut u64) {
    let now = now_ns();
    let validity = l.validity();
    if !validity.is_zero() {
        *deadline = (*deadline).max(now + validity.as_nanos() as u64);
    }
}

/// What one leadership did with the storage.
#[derive(Default)]
struct Tally {
    writes: u64,
    accepted: u64,
    rejected: u64,
    reads_rejected: u64,
    /// The write made after the validity ended (at most one: the leader stops then): when its
    /// validity was checked, when it returned, whether it was accepted.
    late: Option<(u64, u64, bool)>,
}

impl Worker {
    pub fn run_election(mut self) -> Vec<String> {
        let identity = format!("c{}.t{}", self.client, self.thread);
        while now_ns() < crate::client::end_ns() {
            if self.rng.chance(0.5) {
                self.ask_leader();
            } else if self.rng.chance(0.2) {
                self.watch_leader(crate::client::end_ns());
            }
            let ttl = Duration::from_millis(self.rng.range(TTL_MIN_MS, TTL_MAX_MS));
            let rl = self.rl();
            let election = rl.election(ELECTION, &identity, ttl).expect("election");
            let label = self.wait_token();
            let armed = self.arm_as(ELECTION_KEY, false);
            let wait = Duration::from_millis(self.rng.range(CAMPAIGN_MIN_MS, CAMPAIGN_MAX_MS));
            let (start, end, result) = self.call(OP_WAIT, ELECTION_KEY, || {
                election.campaign_for(wait, Some(&armed.cancel))
            });
            let token = result
                .as_ref()
                .map_or(label, |l| l.lock().token().to_owned());
            self.disarm(&armed, ELECTION_KEY, &token, (start, end), outcome(&result));
            if let Ok(leadership) = result {
                self.lead(leadership, &identity, start, end);
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    /// Who leads, as `Redlock::leader` says: an `O` line.
    pub fn ask_leader(&mut self) {
        let rl = self.rl();
        let (start, end, result) = self.call(OP_LEADER, ELECTION, || rl.leader(ELECTION));
        if let Ok(seen) = result {
            let (who, term) = seen.map_or(("-".to_owned(), 0), |l| (l.identity, l.term));
            self.log.push(format!(
                "O {} {} {start} {end} {who} {term}",
                self.client, self.thread
            ));
        }
    }

    /// Who leads, as an observer (`Redlock::observe`) reports it for up to 1.5 s: an `O` line per
    /// change it reports, read between the previous report (or the start) and this one.
    pub fn watch_leader(&mut self, end_ns: u64) {
        let rl = self.rl();
        let cancel = Cancel::new();
        let Ok(observer) = rl.observe(ELECTION, Some(&cancel)) else {
            return;
        };
        let for_ns = (self.rng.range(100, 1_500) * MS).min(end_ns.saturating_sub(now_ns()));
        let timer = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_nanos(for_ns));
                cancel.cancel();
            })
        };
        let mut start = now_ns();
        for seen in observer {
            let end = now_ns();
            let (who, term) = seen.map_or(("-".to_owned(), 0), |l| (l.identity, l.term));
            self.log.push(format!(
                "O {} {} {start} {end} {who} {term}",
                self.client, self.thread
            ));
            start = end;
        }
        let _ = timer.join();
    }

    /// Leads: term-checked writes while the leadership lasts, then the end; an `E` line.
    fn lead(&mut self, l: Leadership, identity: &str, call_start: u64, call_end: u64) {
        let acquired = now_ns();
        let mut deadline = acquired + l.validity().as_nanos() as u64;
        let term = l.term();
        let token = l.lock().token().to_owned();
        let ending = self.rng.below(100);
        let ride = ending >= 85;
        let lead_ms = if ride {
            RIDE_MAX_MS
        } else {
            self.rng.range(0, LEAD_MAX_MS)
        };
        let until = acquired + lead_ms * MS;
        let mut tally = Tally::default();
        while now_ns() < until && l.is_leader() {
            self.term_checked_write(&l, identity, &mut deadline, &mut tally);
            let pause = now_ns() + self.rng.range(0, 50) * MS;
            while now_ns() < pause.min(until) {
                sample(&l, &mut deadline);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        sample(&l, &mut deadline);
        let (end, how) = if (70..85).contains(&ending) {
            let at = now_ns();
            drop(l);
            self.probe(
                KeyKind::Plain,
                ELECTION_KEY,
                &token,
                (call_start, now_ns()),
                "drop".to_owned(),
            );
            (at, "dropped")
        } else {
            let lost = l.is_lost();
            let (start, end, result) = self.call(OP_RELEASE, ELECTION_KEY, || l.resign());
            let call = format!("release:{}", outcome(&result));
            self.probe(
                KeyKind::Plain,
                ELECTION_KEY,
                &token,
                (call_start, end),
                call,
            );
            (start, if lost { "lost" } else { "resigned" })
        };
        let late = tally
            .late
            .map_or("0 0 -".to_owned(), |(checked, done, ok)| {
                format!(
                    "{checked} {done} {}",
                    if ok { "accepted" } else { "rejected" }
                )
            });
        self.log.push(format!(
            "E {} {} {identity} {term} {} {call_start} {call_end} {acquired} {deadline} {end} \
             {how} {} {} {} {} {late}",
            self.client,
            self.thread,
            self.variant,
            tally.writes,
            tally.accepted,
            tally.rejected,
            tally.reads_rejected
        ));
    }

    /// One read-modify-write of the election's counter through the storage, with the term, as
    /// `fenced.rs` does with its token.
    fn term_checked_write(
        &mut self,
        l: &Leadership,
        identity: &str,
        deadline: &mut u64,
        tally: &mut Tally,
    ) {
        if l.validity() < MIN_VALIDITY_TO_WRITE {
            return;
        }
        let check = if self.flags.unchecked_storage {
            "0"
        } else {
            "1"
        };
        let count = storage_key("count");
        let read_start = now_ns();
        let (read_ok, seen): (u64, u64) = redis::Script::new(READ)
            .key(&count)
            .key(storage_key("highest"))
            .key(storage_key("rejected"))
            .arg(l.term())
            .arg(check)
            .arg(identity)
            .invoke(&mut self.data)
            .expect("storage read");
        let read = (read_start, now_ns());
        let (client, thread, term) = (self.client, self.thread, l.term());
        if read_ok != 1 {
            tally.reads_rejected += 1;
            self.log
                .push(term_op_line(client, thread, term, read, None, None));
            return;
        }
        std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        sample(l, deadline);
        let checked = now_ns();
        if l.validity() < MIN_VALIDITY_TO_WRITE {
            self.log
                .push(term_op_line(client, thread, term, read, Some(seen), None));
            return;
        }
        self.about_to_write("election");
        let accepted: u64 = redis::Script::new(WRITE)
            .key(&count)
            .key(storage_key("highest"))
            .key(storage_key("accepted"))
            .key(storage_key("rejected"))
            .arg(l.term())
            .arg(check)
            .arg(identity)
            .arg(seen + 1)
            .invoke(&mut self.data)
            .expect("storage write");
        let done = now_ns();
        let write = (checked, done, seen + 1, accepted == 1);
        self.log.push(term_op_line(
            client,
            thread,
            term,
            read,
            Some(seen),
            Some(write),
        ));
        tally.writes += 1;
        if accepted == 1 {
            tally.accepted += 1;
        } else {
            tally.rejected += 1;
        }
        if done > *deadline && l.validity().is_zero() {
            tally.late = Some((checked, done, accepted == 1));
        }
    }
}

/// A leadership (an `E` line).
#[derive(Debug, Clone)]
pub struct ElectionHold {
    pub client: usize,
    pub identity: String,
    pub term: u64,
    pub call_start: u64,
    pub call_end: u64,
    pub acquired: u64,
    pub deadline: u64,
    /// When the resignation or the drop started.
    pub end: u64,
    /// `resigned`, `dropped`, `lost` (found lost, then resigned).
    pub how: String,
    pub writes: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub reads_rejected: u64,
    pub late: Option<(u64, u64, bool)>,
}

impl ElectionHold {
    pub fn window_end(&self) -> u64 {
        self.deadline.min(self.end)
    }
}

pub fn parse(f: &[&str]) -> ElectionHold {
    let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad E line {f:?}")) };
    ElectionHold {
        client: num(1) as usize,
        identity: f[3].to_owned(),
        term: num(4),
        call_start: num(6),
        call_end: num(7),
        acquired: num(8),
        deadline: num(9),
        end: num(10),
        how: f[11].to_owned(),
        writes: num(12),
        accepted: num(13),
        rejected: num(14),
        reads_rejected: num(15),
        late: (f[18] != "-").then(|| (num(16), num(17), f[18] == "accepted")),
    }
}

/// An answer of `Redlock::leader` (an `O` line): who it named (`None`: nobody leads).
#[derive(Debug, Clone)]
pub struct Observed {
    pub client: usize,
    pub start: u64,
    pub end: u64,
    pub leader: Option<(String, u64)>,
}

pub fn parse_observed(f: &[&str]) -> Observed {
    let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad O line {f:?}")) };
    Observed {
        client: num(1) as usize,
        start: num(3),
        end: num(4),
        leader: (f[5] != "-").then(|| (f[5].to_owned(), num(6))),
    }
}

/// What the rules measured, for the summary.
#[derive(Debug, Default)]
pub struct Stats {
    pub leaderships: usize,
    pub by_how: BTreeMap<String, usize>,
    pub campaigns: usize,
    pub cancelled: usize,
    pub ordered_pairs: u64,
    pub writes: u64,
    pub accepted: usize,
    pub rejected_reads: usize,
    pub rejected_writes: usize,
    pub late: usize,
    pub late_rejected: usize,
    pub late_paused: usize,
    pub observed: usize,
    pub observed_nobody: usize,
    pub observed_ungranted: usize,
}

/// At most this many violations of each rule are listed; the rest are counted.
const LISTED: usize = 10;

pub fn check(
    logs: &Logs,
    storage: &Storage,
    pauses: &[Pause],
    origin: u64,
    verdict: &mut Verdict,
) -> Stats {
    let mut found: BTreeMap<&str, Verdict> = ["el1", "el2", "el3", "el4"]
        .into_iter()
        .map(|r| {
            (
                r,
                Verdict {
                    violations: Vec::new(),
                },
            )
        })
        .collect();
    let stats = check_rules(logs, storage, pauses, origin, &mut found);
    for (rule, v) in found {
        let more = v.violations.len().saturating_sub(LISTED);
        verdict
            .violations
            .extend(v.violations.into_iter().take(LISTED));
        if more > 0 {
            verdict.fail(format!("{rule} {ELECTION}: and {more} more like these"));
        }
    }
    stats
}

fn check_rules(
    logs: &Logs,
    storage: &Storage,
    pauses: &[Pause],
    origin: u64,
    found: &mut BTreeMap<&str, Verdict>,
) -> Stats {
    let holds = &logs.elections;
    let mut stats = Stats {
        leaderships: holds.len(),
        accepted: storage.accepted.len(),
        observed: logs.observed.len(),
        ..Stats::default()
    };
    for h in holds {
        *stats.by_how.entry(h.how.clone()).or_default() += 1;
        stats.writes += h.writes;
    }
    let campaigns = logs.waits.iter().filter(|w| w.resource == ELECTION_KEY);
    stats.campaigns = campaigns.clone().count();
    stats.cancelled = campaigns.filter(|w| w.outcome == "cancelled").count();

    // el1: no two leadership windows overlap.
    let el1 = found.get_mut("el1").expect("el1");
    // A leadership whose validity ran out before the campaign returned (its process stopped as
    // it was granted) has an empty window: it leads at no instant, and overlaps nothing.
    let mut by_acquired: Vec<&ElectionHold> = holds
        .iter()
        .filter(|h| h.window_end() > h.acquired)
        .collect();
    by_acquired.sort_by_key(|h| h.acquired);
    let mut latest: Option<&ElectionHold> = None;
    for &h in &by_acquired {
        if let Some(prev) = latest
            && h.acquired < prev.window_end()
        {
            el1.fail(format!(
                "el1 {ELECTION}: {} (client {}) became leader in term {} at {} while {} (client \
                 {}) led in term {} [{} .. {}]: two leaders for {:.3} ms",
                h.identity,
                h.client,
                h.term,
                ms(h.acquired, origin),
                prev.identity,
                prev.client,
                prev.term,
                ms(prev.acquired, origin),
                ms(prev.window_end(), origin),
                (prev.window_end().min(h.window_end()) - h.acquired) as f64 / 1e6
            ));
        }
        if latest.is_none_or(|p| h.window_end() > p.window_end()) {
            latest = Some(h);
        }
    }

    // el2: no term handed out twice; a campaign that started after another returned a
    // leadership gets a greater term.
    let el2 = found.get_mut("el2").expect("el2");
    let mut by_term: BTreeMap<u64, Vec<&ElectionHold>> = BTreeMap::new();
    for h in holds {
        by_term.entry(h.term).or_default().push(h);
    }
    for (term, hs) in by_term.iter().filter(|(_, hs)| hs.len() > 1) {
        el2.fail(format!(
            "el2 {ELECTION}: {} leaderships got term {term}: {}",
            hs.len(),
            hs.iter()
                .map(|h| format!("{} granted at {}", h.identity, ms(h.call_end, origin)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let order = |h: &ElectionHold| (h.call_start, h.call_end, h.term);
    stats.ordered_pairs += tokens_rise(holds, order, |a, b| {
        el2.fail(format!(
            "el2 {ELECTION}: {} started campaigning at {} and got term {}, not above term {} \
             of {} elected before, at {}",
            b.identity,
            ms(b.call_start, origin),
            b.term,
            a.term,
            a.identity,
            ms(a.call_end, origin)
        ))
    });

    // el3: the storage accepted no stale write and lost no update.
    let el3 = found.get_mut("el3").expect("el3");
    storage_rule(storage, "el3", ELECTION, el3);
    stats.rejected_reads = storage
        .rejected
        .iter()
        .filter(|r| r.starts_with("read"))
        .count();
    stats.rejected_writes = storage.rejected.len() - stats.rejected_reads;
    for h in holds {
        if let Some((checked, done, accepted)) = h.late {
            stats.late += 1;
            stats.late_rejected += usize::from(!accepted);
            stats.late_paused += usize::from(paused_across(pauses, h.client, checked, done));
        }
    }
    // Every write the storage accepted was one a leader made and was told was accepted, and
    // every refusal one it was told of.
    let told = |f: &dyn Fn(&ElectionHold) -> u64| holds.iter().map(f).sum::<u64>() as usize;
    let told = (
        told(&|h| h.accepted),
        told(&|h| h.rejected),
        told(&|h| h.reads_rejected),
    );
    if told != (stats.accepted, stats.rejected_writes, stats.rejected_reads) {
        el3.fail(format!(
            "el3 {ELECTION}: the storage accepted {} writes and rejected {} writes and {} reads, \
             the leaders were told {} / {} / {}",
            stats.accepted, stats.rejected_writes, stats.rejected_reads, told.0, told.1, told.2
        ));
    }
    if stats.writes == 0 {
        el3.fail(format!(
            "el3 {ELECTION}: no leader wrote: the run tested nothing"
        ));
    }

    // el4: `leader` names granted leaderships only.
    let el4 = found.get_mut("el4").expect("el4");
    let identities: BTreeSet<&str> = holds.iter().map(|h| h.identity.as_str()).collect();
    for o in &logs.observed {
        let Some((identity, term)) = &o.leader else {
            stats.observed_nobody += 1;
            continue;
        };
        // Candidates are named c<client>.t<thread>: one that never led may be asked about too.
        let candidate = identities.contains(identity.as_str())
            || identity
                .strip_prefix('c')
                .and_then(|r| r.split_once(".t"))
                .is_some_and(|(c, t)| c.parse::<usize>().is_ok() && t.parse::<usize>().is_ok());
        if !candidate {
            el4.fail(format!(
                "el4 {ELECTION}: client {} asked at {} and was told {identity:?} leads in term \
                 {term}: no candidate has that identity",
                o.client,
                ms(o.start, origin)
            ));
            continue;
        }
        match by_term.get(term).and_then(|hs| hs.first()) {
            None => {
                stats.observed_ungranted += 1;
                el4.fail(format!(
                    "el4 {ELECTION}: client {} was told at {} that {identity} leads in term \
                     {term}, which no campaign returned",
                    o.client,
                    ms(o.end, origin)
                ));
            }
            Some(h) if h.identity != *identity => el4.fail(format!(
                "el4 {ELECTION}: client {} asked at {} and was told {identity} leads in term \
                 {term}, but that term was granted to {}",
                o.client,
                ms(o.start, origin),
                h.identity
            )),
            Some(h) if h.call_start > o.end => el4.fail(format!(
                "el4 {ELECTION}: client {} was told at {} that {identity} leads in term {term}, \
                 before its campaign began at {}",
                o.client,
                ms(o.end, origin),
                ms(h.call_start, origin)
            )),
            Some(_) => {}
        }
    }
    stats
}

pub fn summarize(s: &Stats) {
    let how: Vec<String> = s.by_how.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "  {ELECTION:<17} leaderships {} ({}) of {} campaigns ({} cancelled), {} ordered pairs \
         checked (el2); storage accepted {} writes, rejected {} stale reads and {} stale writes; \
         writes after validity {} (after a driver pause {}, rejected by the term {}); leader \
         asked {} times ({} nobody, {} a term no campaign returned)",
        s.leaderships,
        how.join(", "),
        s.campaigns,
        s.cancelled,
        s.ordered_pairs,
        s.accepted,
        s.rejected_reads,
        s.rejected_writes,
        s.late,
        s.late_paused,
        s.late_rejected,
        s.observed,
        s.observed_nobody,
        s.observed_ungranted
    );
}

/// Each rule must be able to fail: made-up histories that break it.
pub fn checker_catches_made_up_violations() {
    let t = 1_000 * 1_000 * MS;
    let hold = |client: usize, term: u64, start: u64, end: u64, until: u64| ElectionHold {
        client,
        identity: format!("c{client}.t12"),
        term,
        call_start: t + start * MS,
        call_end: t + end * MS,
        acquired: t + end * MS,
        deadline: t + (end + TTL_MAX_MS) * MS,
        end: t + until * MS,
        how: "resigned".to_owned(),
        writes: 1,
        accepted: 1,
        rejected: 0,
        reads_rejected: 0,
        late: None,
    };
    let accepted = |term: u64, value: u64| Accepted {
        fence: term,
        value,
        who: "c0.t12".to_owned(),
    };
    let observed = |who: &str, term: u64, at: u64| Observed {
        client: 2,
        start: t + at * MS,
        end: t + (at + 1) * MS,
        leader: Some((who.to_owned(), term)),
    };
    let run = |holds: Vec<ElectionHold>, observed: Vec<Observed>, storage: Storage| {
        let logs = Logs {
            elections: holds,
            observed,
            ..Logs::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        check(&logs, &storage, &[], t, &mut verdict);
        verdict.violations
    };
    // Client 1 campaigned from 5 ms and took over at 20 ms, once client 0 resigned at 15 ms;
    // client 0's second write, late, was refused.
    let good_holds = || {
        vec![
            ElectionHold {
                writes: 2,
                rejected: 1,
                ..hold(0, 5, 0, 10, 15)
            },
            hold(1, 7, 5, 20, 40),
            hold(2, 9, 50, 60, 70),
        ]
    };
    let good_observed = || {
        vec![
            observed("c1.t12", 7, 30),
            observed("c0.t12", 5, 12),
            Observed {
                leader: None,
                ..observed("-", 0, 45)
            },
        ]
    };
    let good_storage = || Storage {
        accepted: vec![accepted(5, 1), accepted(7, 2), accepted(9, 3)],
        rejected: vec!["write 5 7 c0.t12".to_owned()],
        counter: 3,
    };
    let ok = run(good_holds(), good_observed(), good_storage());
    assert!(ok.is_empty(), "a good history fails the checker: {ok:?}");
    let expect = |what: &str, rule: &str, violations: Vec<String>| {
        assert!(
            violations.iter().any(|v| v.starts_with(rule)),
            "the checker missed a made-up {rule} violation ({what}): {violations:?}"
        );
    };
    // el1: client 2 became leader at 30 ms while client 1 led until 40 ms.
    let mut two = good_holds();
    two[2] = hold(2, 9, 25, 30, 70);
    expect(
        "two leaders at once",
        "el1",
        run(two, good_observed(), good_storage()),
    );
    // el2: a campaign that began after client 1 was elected in term 7, and got term 6.
    let mut back = good_holds();
    back.push(hold(0, 6, 45, 48, 49));
    expect(
        "a term lower than an earlier leader's",
        "el2",
        run(back, good_observed(), good_storage()),
    );
    let mut twice = good_holds();
    twice.push(hold(0, 9, 80, 90, 95));
    expect(
        "one term handed out twice",
        "el2",
        run(twice, good_observed(), good_storage()),
    );
    // el3: a stale write (term 6, after term 7's) accepted; a lost update.
    let mut stale = good_storage();
    stale.accepted.insert(2, accepted(6, 3));
    stale.accepted[3].value = 4;
    stale.counter = 4;
    expect(
        "an accepted stale write",
        "el3",
        run(good_holds(), good_observed(), stale),
    );
    let mut lost = good_storage();
    lost.accepted[2].value = 2;
    lost.counter = 2;
    expect(
        "a lost update",
        "el3",
        run(good_holds(), good_observed(), lost),
    );
    // el4: an identity no candidate has; a term granted to another identity; a leader
    // reported before its campaign began.
    for (what, o) in [
        ("an invented identity", observed("someone", 7, 30)),
        ("a mixed identity and term", observed("c2.t12", 7, 30)),
        ("a leader from the future", observed("c2.t12", 9, 45)),
        ("a term no campaign returned", observed("c2.t12", 8, 30)),
    ] {
        let mut seen = good_observed();
        seen.push(o);
        expect(what, "el4", run(good_holds(), seen, good_storage()));
    }
}
