//! Fenced locks and a storage that checks their tokens, on a resource of their own.
//!
//! One thread per client process takes fenced locks on `chaos-fenced` (`LockRequest::fenced`,
//! `Lock::fence`) and does the counter's read-modify-write through the data node, which plays a
//! storage that checks fencing tokens: the read and the write are each one Lua script that
//! rejects a token lower than the highest the storage has seen for the resource, and otherwise
//! raises the highest to it. The read must register its token too: otherwise a stale holder's
//! write could land between a newer holder's read and its write, and the newer holder would
//! overwrite it unaware (a lost update that no token comparison at the write sees). The storage
//! keeps its own log of accepted writes, in its order, and of what it rejected.
//!
//! Rules:
//! - (f1) tokens strictly increase in the order holders were granted: when B's acquire call
//!   started after A's returned successfully, `fence(B) > fence(A)`; and no two holders ever get
//!   the same token;
//! - (f2) no stale write is accepted: the writes the storage accepted carry non-decreasing
//!   tokens in its order, and the counter has no lost update (the accepted values are exactly
//!   1..=n in that order, and the counter is n). A stale write the storage rejected (a holder
//!   paused past its validity, see the client pauses) is logged and counted, not a violation.
//!
//! Fenced holds are also plain holds: their windows are checked by (a) like the mutex's; their
//! counter by (f2), not (b).

use std::collections::BTreeMap;
use std::time::Duration;

use redquorum::{Lock, LockRequest};

use crate::checker::{Logs, Verdict, ms};
use crate::client::{Worker, outcome};
use crate::keys::KeyKind;
use crate::schedule::Pause;
use crate::{MIN_VALIDITY_TO_WRITE, MS, TTL_MAX_MS, TTL_MIN_MS, counter_key, now_ns};

pub const FENCED_RESOURCE: &str = "chaos-fenced";
/// Fenced threads per client process.
pub const FENCED_THREADS: usize = 1;

const OP_LOCK: usize = 0;
const OP_RELEASE: usize = 3;

fn highest_key() -> String {
    format!("{FENCED_RESOURCE}:highest")
}

pub fn accepted_key() -> String {
    format!("{FENCED_RESOURCE}:accepted")
}

pub fn rejected_key() -> String {
    format!("{FENCED_RESOURCE}:rejected")
}

/// The storage's read (KEYS: counter, highest, rejected log; ARGV: token, check, who): `{1,
/// value}`, or `{0, highest}` for a token below the highest seen. ARGV[2] = "0" is the broken
/// storage of `--unchecked-storage`, which checks nothing. Tokens stay below 2^53 (exact in
/// Lua's doubles) whether they count acquisitions or microseconds since the epoch.
pub const READ: &str = r#"
local highest = tonumber(redis.call("get", KEYS[2]) or "0")
local token = tonumber(ARGV[1])
if ARGV[2] == "1" and token < highest then
    redis.call("rpush", KEYS[3], "read " .. ARGV[1] .. " " .. highest .. " " .. ARGV[3])
    return {0, highest}
end
if token > highest then
    redis.call("set", KEYS[2], ARGV[1])
end
return {1, tonumber(redis.call("get", KEYS[1]) or "0")}
"#;

/// The storage's write (KEYS: counter, highest, accepted log, rejected log; ARGV: token, check,
/// who, value): 1 when accepted (and logged with its token), 0 when the token is below the
/// highest seen.
pub const WRITE: &str = r#"
local highest = tonumber(redis.call("get", KEYS[2]) or "0")
local token = tonumber(ARGV[1])
if ARGV[2] == "1" and token < highest then
    redis.call("rpush", KEYS[4], "write " .. ARGV[1] .. " " .. highest .. " " .. ARGV[3])
    return 0
end
if token > highest then
    redis.call("set", KEYS[2], ARGV[1])
end
redis.call("set", KEYS[1], ARGV[4])
redis.call("rpush", KEYS[3], ARGV[1] .. " " .. ARGV[4] .. " " .. ARGV[3])
return 1
"#;

impl Worker {
    pub fn run_fenced(mut self) -> Vec<String> {
        while now_ns() < crate::client::end_ns() {
            let ttl = Duration::from_millis(self.rng.range(TTL_MIN_MS, TTL_MAX_MS));
            let rl = self.rl();
            let req = LockRequest::new(FENCED_RESOURCE, ttl).fenced();
            let req = if self.rng.chance(0.3) {
                req.once()
            } else {
                req
            };
            let (start, end, result) = self.call(OP_LOCK, FENCED_RESOURCE, || rl.acquire(&req));
            if let Ok(lock) = result {
                self.hold_fenced(lock, start, end);
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    /// The read-modify-write through the storage, with the lock's token; an `H` line (for (a))
    /// and an `F` line.
    fn hold_fenced(&mut self, lock: Lock, call_start: u64, call_end: u64) {
        let acquired = now_ns();
        let deadline = acquired + lock.validity().as_nanos() as u64;
        let fence = lock.fence().expect("a fenced lock has a fence");
        let check = if self.flags.unchecked_storage {
            "0"
        } else {
            "1"
        };
        let who = format!("c{}", self.client);
        let count = counter_key(FENCED_RESOURCE);
        let (read_ok, seen): (u64, u64) = redis::Script::new(READ)
            .key(&count)
            .key(highest_key())
            .key(rejected_key())
            .arg(fence)
            .arg(check)
            .arg(&who)
            .invoke(&mut self.data)
            .expect("storage read");
        std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        let checked = now_ns();
        let (mut wrote, mut how, mut set_done) = ("-".to_owned(), "-", 0);
        if read_ok == 1 && lock.validity() >= MIN_VALIDITY_TO_WRITE {
            self.about_to_write("fenced");
            let value = seen + 1;
            let accepted: u64 = redis::Script::new(WRITE)
                .key(&count)
                .key(highest_key())
                .key(accepted_key())
                .key(rejected_key())
                .arg(fence)
                .arg(check)
                .arg(&who)
                .arg(value)
                .invoke(&mut self.data)
                .expect("storage write");
            set_done = now_ns();
            wrote = value.to_string();
            how = if accepted == 1 {
                "accepted"
            } else {
                "rejected"
            };
        }
        let token = lock.token().to_owned();
        let (release, end, result) = self.call(OP_RELEASE, FENCED_RESOURCE, || lock.release());
        let call = format!("release:{}", outcome(&result));
        self.probe(
            KeyKind::Plain,
            FENCED_RESOURCE,
            &token,
            (call_start, end),
            call,
        );
        self.log.push(format!(
            "H {} {} {FENCED_RESOURCE} {token} {call_start} {acquired} {deadline} {release} released - 0 {checked}",
            self.client, self.thread
        ));
        self.log.push(format!(
            "F {} {} {FENCED_RESOURCE} {fence} {call_start} {call_end} {deadline} {} {wrote} {how} {set_done} {checked}",
            self.client,
            self.thread,
            if read_ok == 1 { "read" } else { "read-rejected" },
        ));
    }
}

/// A fenced hold (an `F` line).
#[derive(Debug, Clone)]
pub struct FencedHold {
    pub client: usize,
    pub fence: u64,
    /// Whether the storage accepted its read.
    pub read_ok: bool,
    pub call_start: u64,
    pub call_end: u64,
    pub deadline: u64,
    /// The value it tried to write, and whether the storage accepted it.
    pub wrote: Option<(u64, bool)>,
    pub set_done: u64,
    pub checked: u64,
}

pub fn parse(f: &[&str]) -> FencedHold {
    let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad F line {f:?}")) };
    FencedHold {
        client: num(1) as usize,
        fence: num(4),
        read_ok: f[8] == "read",
        call_start: num(5),
        call_end: num(6),
        deadline: num(7),
        wrote: f[9].parse().ok().map(|v| (v, f[10] == "accepted")),
        set_done: num(11),
        checked: num(12),
    }
}

/// One write the storage accepted, in its order: token, value, who.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub fence: u64,
    pub value: u64,
    pub who: String,
}

/// What the storage logged: its accepted writes in order, its rejections, and its counter.
#[derive(Debug, Default)]
pub struct Storage {
    pub accepted: Vec<Accepted>,
    pub rejected: Vec<String>,
    pub counter: u64,
}

impl Storage {
    pub fn read(data: &mut redis::Connection) -> Storage {
        Storage::read_keys(
            data,
            &accepted_key(),
            &rejected_key(),
            &counter_key(FENCED_RESOURCE),
        )
    }

    /// A storage of the same scripts kept under other keys (the election's).
    pub fn read_keys(
        data: &mut redis::Connection,
        accepted_key: &str,
        rejected_key: &str,
        counter_key: &str,
    ) -> Storage {
        let accepted: Vec<String> = redis::cmd("LRANGE")
            .arg(accepted_key)
            .arg(0)
            .arg(-1)
            .query(data)
            .expect("LRANGE accepted");
        let rejected: Vec<String> = redis::cmd("LRANGE")
            .arg(rejected_key)
            .arg(0)
            .arg(-1)
            .query(data)
            .expect("LRANGE rejected");
        let counter: Option<u64> = redis::cmd("GET")
            .arg(counter_key)
            .query(data)
            .expect("GET counter");
        Storage {
            accepted: accepted
                .iter()
                .map(|line| {
                    let f: Vec<&str> = line.split(' ').collect();
                    Accepted {
                        fence: f[0].parse().expect("accepted token"),
                        value: f[1].parse().expect("accepted value"),
                        who: f[2].to_owned(),
                    }
                })
                .collect(),
            rejected,
            counter: counter.unwrap_or(0),
        }
    }
}

/// What the rules measured, for the summary.
#[derive(Debug, Default)]
pub struct Stats {
    pub holds: usize,
    pub accepted: usize,
    pub rejected_reads: usize,
    pub rejected_writes: usize,
    /// Writes that landed after their lock's validity, and of those, the ones the storage
    /// rejected; each split by whether the driver had stopped the process across it.
    pub late: usize,
    pub late_rejected: usize,
    pub late_paused: usize,
    pub ordered_pairs: u64,
}

/// Whether the driver stopped `client` between `from` and `to`.
pub fn paused_across(pauses: &[Pause], client: usize, from: u64, to: u64) -> bool {
    pauses
        .iter()
        .any(|p| p.client == client && p.from < to && p.to > from)
}

/// At most this many violations of each rule are listed; the rest are counted. One token
/// handed out too low, or one stale write accepted, spoils everything after it.
const LISTED: usize = 10;

pub fn check(
    logs: &Logs,
    storage: &Storage,
    pauses: &[Pause],
    origin: u64,
    verdict: &mut Verdict,
) -> Stats {
    let mut f1 = Verdict {
        violations: Vec::new(),
    };
    let mut f2 = Verdict {
        violations: Vec::new(),
    };
    let stats = check_rules(logs, storage, pauses, origin, &mut f1, &mut f2);
    for (rule, found) in [("(f1)", f1.violations), ("(f2)", f2.violations)] {
        let more = found.len().saturating_sub(LISTED);
        verdict.violations.extend(found.into_iter().take(LISTED));
        if more > 0 {
            verdict.fail(format!(
                "{rule} {FENCED_RESOURCE}: and {more} more like these"
            ));
        }
    }
    stats
}

fn check_rules(
    logs: &Logs,
    storage: &Storage,
    pauses: &[Pause],
    origin: u64,
    verdict: &mut Verdict,
    f2: &mut Verdict,
) -> Stats {
    let holds = &logs.fenced;
    let mut stats = Stats {
        holds: holds.len(),
        accepted: storage.accepted.len(),
        ..Stats::default()
    };

    // (f1) No two holders share a token, and a holder whose call started after another's
    // returned has the greater token.
    let mut by_fence: BTreeMap<u64, Vec<&FencedHold>> = BTreeMap::new();
    for h in holds {
        by_fence.entry(h.fence).or_default().push(h);
    }
    for (fence, hs) in by_fence.iter().filter(|(_, hs)| hs.len() > 1) {
        verdict.fail(format!(
            "(f1) {FENCED_RESOURCE}: {} holders got fence {fence}: {}",
            hs.len(),
            hs.iter()
                .map(|h| format!("client {} granted at {}", h.client, ms(h.call_end, origin)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let order = |h: &FencedHold| (h.call_start, h.call_end, h.fence);
    stats.ordered_pairs = tokens_rise(holds, order, |a, b| {
        verdict.fail(format!(
            "(f1) {FENCED_RESOURCE}: client {} started acquiring at {} and got fence {}, not \
             above fence {} of client {} granted before, at {}",
            b.client,
            ms(b.call_start, origin),
            b.fence,
            a.fence,
            a.client,
            ms(a.call_end, origin)
        ))
    });

    // (f2) The storage accepted no stale write, and lost no update.
    storage_rule(storage, "(f2)", FENCED_RESOURCE, f2);
    stats.rejected_reads = storage
        .rejected
        .iter()
        .filter(|r| r.starts_with("read"))
        .count();
    stats.rejected_writes = storage.rejected.len() - stats.rejected_reads;
    for h in holds {
        let Some((_, accepted)) = h.wrote else {
            continue;
        };
        if h.set_done > h.deadline {
            stats.late += 1;
            stats.late_rejected += usize::from(!accepted);
            stats.late_paused +=
                usize::from(paused_across(pauses, h.client, h.checked, h.set_done));
        }
    }
    if holds.iter().filter(|h| h.wrote.is_some()).count() == 0 {
        f2.fail(format!(
            "(f2) {FENCED_RESOURCE}: no fenced holder wrote: the run tested nothing"
        ));
    }
    stats
}

/// No stale write accepted, no update lost: the writes `storage` accepted carry
/// non-decreasing tokens in its order, their values are 1..=n in that order, and the counter
/// is n. Violations are named `rule` (`(f2)`, `el3`) and `what` (the resource).
/// Tokens rise in real-time order: a call that started after another returned got a greater
/// token. `order` gives an item's call start, call end and token; `fail(a, b)` is called for
/// each `b` whose token is not above that of the greatest `a` returned before `b` started.
/// Returns the number of ordered pairs checked.
pub fn tokens_rise<T>(
    items: &[T],
    order: impl Fn(&T) -> (u64, u64, u64),
    mut fail: impl FnMut(&T, &T),
) -> u64 {
    let mut by_end: Vec<&T> = items.iter().collect();
    by_end.sort_by_key(|h| order(h).1);
    let mut by_start: Vec<&T> = items.iter().collect();
    by_start.sort_by_key(|h| order(h).0);
    let (mut best, mut done, mut pairs): (Option<&T>, usize, u64) = (None, 0, 0);
    for b in by_start {
        while done < by_end.len() && order(by_end[done]).1 < order(b).0 {
            let a = by_end[done];
            if best.is_none_or(|x| order(a).2 > order(x).2) {
                best = Some(a);
            }
            done += 1;
        }
        pairs += done as u64;
        if let Some(a) = best
            && order(b).2 <= order(a).2
        {
            fail(a, b);
        }
    }
    pairs
}

pub fn storage_rule(storage: &Storage, rule: &str, what: &str, f2: &mut Verdict) {
    for (i, w) in storage.accepted.iter().enumerate() {
        if i > 0 && w.fence < storage.accepted[i - 1].fence {
            f2.fail(format!(
                "{rule} {what}: the storage accepted write {} (value {}, {}) with token {} \
                 after one with token {}: a stale write landed",
                i + 1,
                w.value,
                w.who,
                w.fence,
                storage.accepted[i - 1].fence
            ));
        }
        // Each accepted write read what the one before it left: values 1..=n in order. (Judged
        // against the write before, so that one lost update is reported once.)
        let before = i.checked_sub(1).map_or(0, |j| storage.accepted[j].value);
        if w.value != before + 1 {
            f2.fail(format!(
                "{rule} {what}: accepted write {} (token {}, {}) wrote {} after one that \
                 left {before}: lost update",
                i + 1,
                w.fence,
                w.who,
                w.value
            ));
        }
    }
    let last = storage.accepted.last().map_or(0, |w| w.value);
    if storage.counter != last {
        f2.fail(format!(
            "{rule} {what}: counter is {} after {} accepted writes, the last of {last}",
            storage.counter,
            storage.accepted.len()
        ));
    }
}

pub fn summarize(s: &Stats) {
    println!(
        "  {FENCED_RESOURCE:<17} acquisitions {}, {} ordered pairs checked (f1); storage accepted \
         {} writes, rejected {} stale reads and {} stale writes; writes after validity {} (after a \
         driver pause {}, rejected by the fence {})",
        s.holds,
        s.ordered_pairs,
        s.accepted,
        s.rejected_reads,
        s.rejected_writes,
        s.late,
        s.late_paused,
        s.late_rejected
    );
}

/// Each rule must be able to fail: made-up histories that break it.
pub fn checker_catches_made_up_violations() {
    let t = 1_000 * 1_000 * MS;
    let hold = |client: usize, fence: u64, start: u64, end: u64| FencedHold {
        client,
        fence,
        read_ok: true,
        call_start: t + start * MS,
        call_end: t + end * MS,
        deadline: t + (end + TTL_MAX_MS) * MS,
        wrote: Some((fence, true)),
        set_done: t + (end + 2) * MS,
        checked: t + (end + 1) * MS,
    };
    let accepted = |fence: u64, value: u64| Accepted {
        fence,
        value,
        who: "c0".to_owned(),
    };
    let run = |holds: Vec<FencedHold>, storage: Storage| {
        let logs = Logs {
            fenced: holds,
            ..Logs::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        check(&logs, &storage, &[], t, &mut verdict);
        verdict.violations
    };
    let good_holds = || vec![hold(0, 5, 0, 10), hold(1, 7, 5, 20), hold(2, 9, 30, 40)];
    let good_storage = || Storage {
        accepted: vec![accepted(5, 1), accepted(7, 2), accepted(9, 3)],
        rejected: vec!["write 6 7 c2".to_owned()],
        counter: 3,
    };
    let ok = run(good_holds(), good_storage());
    assert!(ok.is_empty(), "a good history fails the checker: {ok:?}");
    let expect = |what: &str, rule: &str, violations: Vec<String>| {
        assert!(
            violations.iter().any(|v| v.starts_with(rule)),
            "the checker missed a made-up {rule} violation ({what}): {violations:?}"
        );
    };
    // A holder that began after client 1 was granted fence 7, and got 6.
    let mut back = good_holds();
    back.push(hold(0, 6, 25, 28));
    expect(
        "a token lower than an earlier holder's",
        "(f1)",
        run(back, good_storage()),
    );
    let mut same = good_holds();
    same.push(hold(2, 7, 50, 60));
    expect(
        "two holders with one token",
        "(f1)",
        run(same, good_storage()),
    );
    let mut stale = good_storage();
    stale.accepted.insert(2, accepted(6, 3));
    stale.accepted[3].value = 4;
    stale.counter = 4;
    expect("an accepted stale write", "(f2)", run(good_holds(), stale));
    let mut lost = good_storage();
    lost.accepted[2].value = 2;
    lost.counter = 2;
    expect("a lost update", "(f2)", run(good_holds(), lost));
}
