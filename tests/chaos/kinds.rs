//! The read-write lock and the counting semaphore under the same faults, each on a resource of
//! its own: the client threads that use them and the checker's rules for them.
//!
//! **Read-write** (`chaos-rw`): each round a thread is a reader (60 %, `.read()`), a writer
//! (30 %, `.write()`) or a plain holder (10 %, `LockRequest::new`, which a writer must exclude
//! like any other Redlock client's `SET NX`), always with `.wait()` (writers and plain holders
//! queued across the client processes, `src/notify/queue.rs`, but a fifth of them with `fair(false)`),
//! often auto-extended, now and then holding for longer than its TTL. Writers and plain holders do the counter's non-atomic
//! read-modify-write, then write the new value to two fields in two steps; readers read the two
//! fields in two steps and log what they saw. A few readers that are not auto-extended sleep
//! until their entry has surely expired on every node and then extend: the library must refuse
//! (an extension never revives a reader). Rules:
//! - (rw1) no writer or plain window overlaps any other window on the resource, a reader's
//!   window counting as continuous from acquisition to its last deadline (moved forward by each
//!   extension that succeeded, manual or automatic);
//! - (rw2) readers do overlap: the largest number of reader windows open at one instant is above
//!   one over the run (reported for the fault-free stretches too);
//! - (rw3) no lost update by writers and plain holders (the counter rule (b) of the mutex), and
//!   no torn read: a reader that finished both reads within its window saw the fields equal;
//! - (rw4) no revived reader: an extension started after `acquired + ttl` (when the entry had
//!   expired on every node, whose scripts scored it at most `ttl` after the acquire call
//!   returned) never succeeds.
//!
//! **Semaphore** (`chaos-sem`, `PERMITS` = L = 3, 2L threads): holders log their
//! [`permit`](redquorum::Lock::permit). Now and then a holder, while it holds its permit, asks
//! once with L + 1 permits: every node of its quorum stores L, so that must never be granted.
//! Rules:
//! - (sem1) at no instant more than L valid windows;
//! - (sem2) no two valid windows of the same permit overlap, and every permit is below L;
//! - (sem3) L is reached at an instant when no node was down or hung;
//! - (sem4) an L + 1 request never gets a permit while a holder of L is valid (its window
//!   overlaps none), and the L-callers' `InvalidArgument` (the stored L differs) comes only
//!   while an L + 1 request may have left its number on some node (from its start until its TTL
//!   ran out after it returned).
//!
//! Windows are those of the mutex: from after the acquire call returned to the last deadline
//! known (each sample reads the clock, then the validity, so a stall shortens the window
//! instead of lengthening it) or the start of the release, whichever came first.

use std::collections::BTreeMap;
use std::time::Duration;

use redquorum::{AutoExtend, Lock, LockRequest};

use crate::checker::{Logs, Verdict, ms};
use crate::client::{Worker, outcome};
use crate::keys::KeyKind;
use crate::schedule::Outage;
use crate::{MIN_VALIDITY_TO_WRITE, MS, NODE_TIMEOUT, TTL_MAX_MS, TTL_MIN_MS, WAIT_MS, now_ns};

pub const RW_RESOURCE: &str = "chaos-rw";
pub const SEM_RESOURCE: &str = "chaos-sem";
pub const PERMITS: u32 = 3;
/// Threads per client process on each of the two resources (3 processes: 2L semaphore threads).
pub const RW_THREADS: usize = 2;
pub const SEM_THREADS: usize = 2;
/// An extension this long after the entry surely expired must be refused.
const REVIVE_SLACK_NS: u64 = 5 * MS;

/// Op numbers in [`crate::client::OPS`].
const OP_EXTEND: usize = 2;
const OP_RELEASE: usize = 3;
const OP_WAIT: usize = 4;
const OP_OVERASK: usize = 5;

fn field_key(which: &str) -> String {
    format!("{RW_RESOURCE}:{which}")
}

/// A hold of either kind (an `R` line).
#[derive(Debug, Clone)]
pub struct KindHold {
    pub client: usize,
    pub resource: String,
    /// `read`, `write`, `plain`, `permit` (a semaphore of L) or `over` (one of L + 1).
    pub role: String,
    pub token: String,
    pub permit: Option<u32>,
    pub acquired: u64,
    pub deadline: u64,
    pub end: u64,
    pub wrote: Option<u64>,
    pub set_done: u64,
    /// A reader's two fields and when it finished reading them.
    pub seen: Option<(u64, u64, u64)>,
    pub ttl_ms: u64,
    /// A late extension: when it started and how it ended.
    pub late: Option<(u64, String)>,
}

impl KindHold {
    pub fn window_end(&self) -> u64 {
        self.deadline.min(self.end)
    }

    fn exclusive(&self) -> bool {
        self.role == "write" || self.role == "plain"
    }
}

/// Parses an `R` line (fields split on whitespace).
pub fn parse(f: &[&str]) -> KindHold {
    let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad R line {f:?}")) };
    let seen = (f[13] != "-").then(|| {
        let v: Vec<u64> = f[13].split(',').map(|x| x.parse().unwrap_or(0)).collect();
        (v[0], v[1], v[2])
    });
    let late = (f[15] != "-").then(|| {
        let (at, how) = f[15].split_once(',').expect("late extension");
        (at.parse().unwrap_or(0), how.to_owned())
    });
    KindHold {
        client: num(1) as usize,
        resource: f[3].to_owned(),
        role: f[4].to_owned(),
        token: f[5].to_owned(),
        permit: f[6].parse().ok(),
        acquired: num(8),
        deadline: num(9),
        end: num(10),
        wrote: f[11].parse().ok(),
        set_done: num(12),
        seen,
        ttl_ms: num(14),
        late,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Read,
    Write,
    Plain,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Plain => "plain",
        }
    }
}

/// The deadline as known now: never later than the lock's (clock first, then validity).
fn sample(lock: &Lock, deadline: &mut u64) {
    let now = now_ns();
    let validity = lock.validity();
    if !validity.is_zero() {
        *deadline = (*deadline).max(now + validity.as_nanos() as u64);
    }
}

/// Sleeps `d`, sampling the deadline every 10 ms.
fn sleep_sampling(lock: &Lock, deadline: &mut u64, d: Duration) {
    let until = now_ns() + d.as_nanos() as u64;
    loop {
        sample(lock, deadline);
        let now = now_ns();
        if now >= until {
            return;
        }
        std::thread::sleep(Duration::from_nanos((until - now).min(10 * MS)));
    }
}

impl Worker {
    fn get(&mut self, key: &str) -> Option<u64> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.data)
            .expect("GET on the data node")
    }

    fn set(&mut self, key: &str, value: u64) {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query(&mut self.data)
            .expect("SET on the data node");
    }

    /// The request with `.wait()`, auto-extended if `long` and sometimes otherwise; whether it
    /// is.
    fn request(&mut self, req: LockRequest, long: bool) -> (LockRequest, bool) {
        // Writers and plain waiters queue across the client processes (`src/notify/queue.rs`), with
        // the cancels and pauses below; a fifth wait the old way (`fair(false)`), contending
        // with them.
        let fair = !self.rng.chance(0.2);
        let req = req.wait(Duration::from_millis(WAIT_MS)).fair(fair);
        if long || self.rng.chance(0.3) {
            (req.auto_extend(AutoExtend::new()), true)
        } else {
            (req, false)
        }
    }

    /// Release (probed for keys left behind like the mutex's), and the hold's `R` line.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        lock: Lock,
        role: &str,
        key: (KeyKind, String),
        times: (u64, u64, u64),
        writes: (String, u64, String),
        ttl_ms: u64,
        late: String,
    ) {
        let (call_start, acquired, mut deadline) = times;
        sample(&lock, &mut deadline);
        let token = lock.token().to_owned();
        let permit = lock.permit().map_or("-".to_owned(), |p| p.to_string());
        let res = lock.resource().to_owned();
        self.cancel_a_waiter(&res);
        let (start, end, result) = self.call(OP_RELEASE, &res, || lock.release());
        let call = format!("release:{}", outcome(&result));
        self.probe(key.0, &key.1, &token, (call_start, end), call);
        let (wrote, set_done, seen) = writes;
        self.log.push(format!(
            "R {} {} {res} {role} {token} {permit} {call_start} {acquired} {deadline} {start} \
             {wrote} {set_done} {seen} {ttl_ms} {late}",
            self.client, self.thread
        ));
    }

    /// Acquires with `req`. A quarter of the calls are cancellable waits with a token of their
    /// own (cancelled like the mutex's, logged as `A` lines), probed for keys of `kind` left
    /// behind. Such a wait gives every attempt that one token, so a late undo of one attempt
    /// can remove a later attempt's key from a node the holder counted (the hidden
    /// `token_for_tests` says as much): a lock it gets is released at once, its release probed,
    /// and never judged as a holder (`Ok(None)`). Gives when the call started, and its result.
    fn acquire_kind(
        &mut self,
        req: LockRequest,
        res: &str,
        kind: KeyKind,
    ) -> (u64, redquorum::Result<Option<Lock>>) {
        let rl = self.rl();
        if !self.rng.chance(0.25) {
            let (start, _, result) = self.call(OP_WAIT, res, || rl.acquire(&req));
            return (start, result.map(Some));
        }
        let token = self.wait_token();
        let armed = self.arm(res);
        let req = req.token_for_tests(&token).cancel(&armed.cancel);
        let (start, end, result) = self.call(OP_WAIT, res, || rl.acquire(&req));
        self.disarm(&armed, res, &token, (start, end), outcome(&result));
        let waited = format!("wait:{}", outcome(&result));
        match result {
            Ok(lock) => {
                let (_, end, released) = self.call(OP_RELEASE, res, || lock.release());
                let call = format!("release:{}", outcome(&released));
                self.probe(kind, res, &token, (start, end), call);
                (start, Ok(None))
            }
            Err(e) => {
                self.probe(kind, res, &token, (start, end), waited);
                (start, Err(e))
            }
        }
    }

    pub fn run_rw(mut self) -> Vec<String> {
        while now_ns() < crate::client::end_ns() {
            let ttl_ms = self.rng.range(TTL_MIN_MS, TTL_MAX_MS);
            let ttl = Duration::from_millis(ttl_ms);
            let role = match self.rng.below(100) {
                0..60 => Role::Read,
                60..90 => Role::Write,
                _ => Role::Plain,
            };
            let long = self.rng.chance(0.08);
            let base = LockRequest::new(RW_RESOURCE, ttl);
            let base = match role {
                Role::Read => base.read(),
                Role::Write => base.write(),
                Role::Plain => base,
            };
            let (req, auto) = self.request(base, long);
            // No extender may move the deadline behind a late extension's back.
            let late = role == Role::Read && !auto && self.rng.chance(0.05);
            let kind = if role == Role::Read {
                KeyKind::Reader
            } else {
                KeyKind::Plain
            };
            let (call_start, result) = self.acquire_kind(req, RW_RESOURCE, kind);
            if let Ok(Some(lock)) = result {
                self.hold_rw(lock, role, call_start, ttl_ms, long, late);
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    fn hold_rw(
        &mut self,
        lock: Lock,
        role: Role,
        call_start: u64,
        ttl_ms: u64,
        long: bool,
        late: bool,
    ) {
        let acquired = now_ns();
        let mut deadline = acquired;
        sample(&lock, &mut deadline);
        let (a, b) = (field_key("a"), field_key("b"));
        let mut wrote = String::from("-");
        let mut set_done = 0;
        let mut seen = String::from("-");
        if role == Role::Read {
            let first = self.get(&a).unwrap_or(0);
            std::thread::sleep(Duration::from_micros(self.rng.range(500, 4_000)));
            let second = self.get(&b).unwrap_or(0);
            seen = format!("{first},{second},{}", now_ns());
        } else {
            let counter = crate::counter_key(RW_RESOURCE);
            let value = self.get(&counter).unwrap_or(0) + 1;
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
            if lock.validity() >= MIN_VALIDITY_TO_WRITE {
                self.set(&counter, value);
                self.set(&a, value);
                std::thread::sleep(Duration::from_micros(self.rng.range(0, 1_000)));
                self.set(&b, value);
                set_done = now_ns();
                wrote = value.to_string();
            }
        }
        sample(&lock, &mut deadline);
        let hold_us = if long {
            self.rng.range(ttl_ms * 500, ttl_ms * 1_500)
        } else {
            self.rng.range(500, 4_000)
        };
        sleep_sampling(&lock, &mut deadline, Duration::from_micros(hold_us));
        let mut late_how = String::from("-");
        if late {
            // Sleep until the entry has surely expired on every node (its score was at most the
            // acquire call's end plus the TTL), plus a while for a writer to come and go, then
            // ask to extend: an extension never revives a reader.
            let expired = acquired + ttl_ms * MS + REVIVE_SLACK_NS;
            crate::sleep_until(expired + self.rng.range(10, 120) * MS);
            sample(&lock, &mut deadline);
            let at = now_ns();
            let (_, _, result) = self.call(OP_EXTEND, RW_RESOURCE, || {
                lock.extend(Duration::from_millis(ttl_ms))
            });
            late_how = format!("{at},{}", outcome(&result));
            sample(&lock, &mut deadline);
        }
        let kind = if role == Role::Read {
            KeyKind::Reader
        } else {
            KeyKind::Plain
        };
        self.finish(
            lock,
            role.name(),
            (kind, RW_RESOURCE.to_owned()),
            (call_start, acquired, deadline),
            (wrote, set_done, seen),
            ttl_ms,
            late_how,
        );
    }

    pub fn run_sem(mut self) -> Vec<String> {
        while now_ns() < crate::client::end_ns() {
            let ttl_ms = self.rng.range(TTL_MIN_MS, TTL_MAX_MS);
            let ttl = Duration::from_millis(ttl_ms);
            let long = self.rng.chance(0.08);
            let (req, _) =
                self.request(LockRequest::new(SEM_RESOURCE, ttl).semaphore(PERMITS), long);
            let (call_start, result) = self.acquire_kind(req, SEM_RESOURCE, KeyKind::Slots);
            match result {
                Ok(None) => {}
                Ok(Some(lock)) => {
                    let acquired = now_ns();
                    let mut deadline = acquired;
                    sample(&lock, &mut deadline);
                    if self.rng.chance(0.05) {
                        self.overask(ttl_ms);
                    }
                    let hold_us = if long {
                        self.rng.range(ttl_ms * 500, ttl_ms * 1_500)
                    } else {
                        self.rng.range(2_000, 15_000)
                    };
                    sleep_sampling(&lock, &mut deadline, Duration::from_micros(hold_us));
                    self.finish_sem(lock, "permit", (call_start, acquired, deadline), ttl_ms);
                }
                // Another number of permits is stored on some node (an L + 1 request was
                // about): it lasts a TTL at most, do not spin meanwhile.
                Err(redquorum::Error::InvalidArgument { .. }) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    /// While holding a permit of L: ask once for one of L + 1, which the nodes that store L
    /// (every node of this holder's quorum) refuse, so it must not be granted.
    fn overask(&mut self, ttl_ms: u64) {
        let rl = self.rl();
        let req = LockRequest::new(SEM_RESOURCE, Duration::from_millis(ttl_ms))
            .semaphore(PERMITS + 1)
            .once();
        let (call_start, _, result) = self.call(OP_OVERASK, SEM_RESOURCE, || rl.acquire(&req));
        if let Ok(lock) = result {
            let acquired = now_ns();
            let mut deadline = acquired;
            sample(&lock, &mut deadline);
            self.finish_sem(lock, "over", (call_start, acquired, deadline), ttl_ms);
        }
    }

    fn finish_sem(&mut self, lock: Lock, role: &str, times: (u64, u64, u64), ttl_ms: u64) {
        let slot = match lock.permit() {
            Some(p) => format!("redlock:sem:{{{SEM_RESOURCE}}}:{p}"),
            None => SEM_RESOURCE.to_owned(),
        };
        self.finish(
            lock,
            role,
            (KeyKind::Plain, slot),
            times,
            ("-".to_owned(), 0, "-".to_owned()),
            ttl_ms,
            "-".to_owned(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The checker

/// Extra time a call on these resources may take over the mutex's bound: a semaphore attempt
/// tries up to all its slots, each within `node_timeout`.
pub fn extra_bound_ms(op: &str, resource: &str) -> u64 {
    let nt = NODE_TIMEOUT.as_millis() as u64;
    match (op, resource) {
        ("wait", SEM_RESOURCE) => u64::from(PERMITS - 1) * nt,
        // A fenced attempt has a second round, the write-back, within its own node_timeout.
        ("lock", crate::fenced::FENCED_RESOURCE) => (u64::from(crate::RETRY_COUNT) + 1) * nt,
        _ => 0,
    }
}

/// Whether a call's outcome is for these rules to judge rather than the generic (c).
pub fn judged_here(op: &str, resource: &str, outcome: &str) -> bool {
    op == "overask" || (resource == SEM_RESOURCE && outcome == "invalid_argument")
}

/// What the rules measured, for the summary.
#[derive(Debug, Default)]
pub struct Stats {
    pub reads: usize,
    pub writes: usize,
    pub plains: usize,
    pub max_readers: usize,
    pub max_readers_calm: usize,
    pub reader_overlap_ms: f64,
    pub extended_readers: usize,
    pub late_extends: BTreeMap<String, usize>,
    pub torn_checked: usize,
    pub permits: usize,
    pub max_permits: usize,
    pub max_permits_calm: usize,
    pub at_l_ms: f64,
    pub overasks: BTreeMap<String, usize>,
    pub refused_l: usize,
}

/// Largest number of windows open at one instant, the same counting only instants when no
/// node was down or hung, and the time spent with more than `over` open.
fn concurrency(windows: &[(u64, u64)], outages: &[Outage], over: usize) -> (usize, usize, u64) {
    let mut edges: Vec<(u64, i32)> = windows
        .iter()
        .filter(|(a, b)| b > a)
        .flat_map(|&(a, b)| [(a, 1), (b, -1)])
        .collect();
    // At one instant, ends before starts: windows that touch do not overlap.
    edges.sort_unstable();
    let (mut open, mut max, mut calm, mut above, mut since) = (0i32, 0, 0, 0u64, 0u64);
    for (t, d) in edges {
        if open as usize > over {
            above += t - since;
        }
        open += d;
        since = t;
        let n = open as usize;
        max = max.max(n);
        let quiet = !outages.iter().any(|o| o.down_ns <= t && t <= o.up_ns);
        if quiet {
            calm = calm.max(n);
        }
    }
    (max, calm, above)
}

/// Windows with something in them (a lock lost before `acquired` was read has none).
fn open(h: &KindHold) -> bool {
    h.window_end() > h.acquired
}

pub fn check(
    logs: &Logs,
    outages: &[Outage],
    rw_counter: u64,
    origin: u64,
    verdict: &mut Verdict,
) -> Stats {
    let mut stats = Stats::default();
    let rw: Vec<&KindHold> = logs
        .kinds
        .iter()
        .filter(|h| h.resource == RW_RESOURCE)
        .collect();
    let sem: Vec<&KindHold> = logs
        .kinds
        .iter()
        .filter(|h| h.resource == SEM_RESOURCE)
        .collect();
    stats.reads = rw.iter().filter(|h| h.role == "read").count();
    stats.writes = rw.iter().filter(|h| h.role == "write").count();
    stats.plains = rw.iter().filter(|h| h.role == "plain").count();

    // (rw1) An exclusive window overlaps no other window.
    let mut sorted: Vec<&KindHold> = rw.iter().copied().filter(|h| open(h)).collect();
    sorted.sort_by_key(|h| h.acquired);
    let mut active: Vec<&KindHold> = Vec::new();
    for &h in &sorted {
        active.retain(|p| p.window_end() > h.acquired);
        for &p in &active {
            if !(h.exclusive() || p.exclusive()) {
                continue;
            }
            let (reader, other) = if p.role == "read" { (p, h) } else { (h, p) };
            let extended = reader.role == "read"
                && reader.deadline > reader.acquired
                && reader.late.as_ref().is_some_and(|(_, how)| how == "ok");
            verdict.fail(format!(
                "({}) {RW_RESOURCE}: {} {} (client {}) [{} .. {}] overlaps {} {} (client {}) \
                 [{} .. {}] by {:.3} ms{}",
                if extended { "rw4" } else { "rw1" },
                other.role,
                short(&other.token),
                other.client,
                ms(other.acquired, origin),
                ms(other.window_end(), origin),
                reader.role,
                short(&reader.token),
                reader.client,
                ms(reader.acquired, origin),
                ms(reader.window_end(), origin),
                (p.window_end().min(h.window_end()) - h.acquired) as f64 / 1e6,
                if extended {
                    " (inside a reader's window extended after its entry expired)"
                } else {
                    ""
                }
            ));
        }
        active.push(h);
    }

    // (rw2) Readers overlap.
    let readers: Vec<(u64, u64)> = rw
        .iter()
        .filter(|h| h.role == "read" && open(h))
        .map(|h| (h.acquired, h.window_end()))
        .collect();
    let (max, calm, above) = concurrency(&readers, outages, 1);
    (stats.max_readers, stats.max_readers_calm) = (max, calm);
    stats.reader_overlap_ms = above as f64 / 1e6;
    stats.extended_readers = rw
        .iter()
        .filter(|h| h.role == "read" && h.deadline > h.acquired + h.ttl_ms * MS)
        .count();
    if max <= 1 {
        verdict.fail(format!(
            "(rw2) {RW_RESOURCE}: {} reader windows, never two at once: readers do not share",
            readers.len()
        ));
    }

    // (rw3) No lost update, no torn read.
    let late_writes = rw
        .iter()
        .filter(|h| h.wrote.is_some() && h.set_done > h.deadline)
        .count();
    let mut written: Vec<u64> = rw.iter().filter_map(|h| h.wrote).collect();
    written.sort_unstable();
    if written.is_empty() {
        verdict.fail(format!(
            "(rw3) {RW_RESOURCE}: no writer or plain holder wrote: the run tested nothing"
        ));
    }
    if late_writes > 0 {
        println!(
            "NOTE {RW_RESOURCE}: {late_writes} write(s) landed after their lock's validity; \
             counter and torn-read checks skipped"
        );
    } else {
        let expected: Vec<u64> = (1..=written.len() as u64).collect();
        if rw_counter != written.len() as u64 || written != expected {
            verdict.fail(format!(
                "(rw3) {RW_RESOURCE}: counter is {rw_counter} after {} writes by writers and \
                 plain holders ({} value(s) written twice): lost update",
                written.len(),
                written.windows(2).filter(|w| w[0] == w[1]).count()
            ));
        }
        for h in &rw {
            let Some((a, b, done)) = h.seen else { continue };
            if done > h.window_end() {
                continue;
            }
            stats.torn_checked += 1;
            if a != b {
                verdict.fail(format!(
                    "(rw3) {RW_RESOURCE}: reader {} (client {}) [{} .. {}] read the fields {a} \
                     and {b}: a writer wrote between its two reads",
                    short(&h.token),
                    h.client,
                    ms(h.acquired, origin),
                    ms(h.window_end(), origin)
                ));
            }
        }
    }

    // (rw4) No extension revives an expired reader.
    for h in &rw {
        let Some((at, how)) = &h.late else { continue };
        *stats.late_extends.entry(how.clone()).or_default() += 1;
        if how == "ok" && *at > h.acquired + h.ttl_ms * MS + REVIVE_SLACK_NS {
            verdict.fail(format!(
                "(rw4) {RW_RESOURCE}: reader {} (client {}) acquired at {} with TTL {} ms was \
                 extended at {}, after its entry had expired on every node: revived",
                short(&h.token),
                h.client,
                ms(h.acquired, origin),
                h.ttl_ms,
                ms(*at, origin)
            ));
        }
    }

    // (sem1) At most L valid windows at once; (sem3) L reached with every node up.
    let holders: Vec<&KindHold> = sem
        .iter()
        .copied()
        .filter(|h| h.role == "permit" && open(h))
        .collect();
    stats.permits = sem.iter().filter(|h| h.role == "permit").count();
    let windows: Vec<(u64, u64)> = holders
        .iter()
        .map(|h| (h.acquired, h.window_end()))
        .collect();
    let l = PERMITS as usize;
    let (max, calm, _) = concurrency(&windows, outages, l);
    let (_, _, at_l) = concurrency(&windows, outages, l - 1);
    (stats.max_permits, stats.max_permits_calm) = (max, calm);
    stats.at_l_ms = at_l as f64 / 1e6;
    if max > l {
        verdict.fail(format!(
            "(sem1) {SEM_RESOURCE}: {max} valid permits at once, L = {l}"
        ));
    }
    if calm < l {
        verdict.fail(format!(
            "(sem3) {SEM_RESOURCE}: at most {calm} permits held at once while every node was up \
             ({max} in all), never L = {l}"
        ));
    }

    // (sem2) One valid holder per permit, every permit below L.
    let mut by_permit: BTreeMap<Option<u32>, Vec<&KindHold>> = BTreeMap::new();
    for &h in &holders {
        by_permit.entry(h.permit).or_default().push(h);
    }
    for (permit, hs) in &mut by_permit {
        if permit.is_none_or(|p| p >= PERMITS) {
            verdict.fail(format!(
                "(sem2) {SEM_RESOURCE}: {} holder(s) of L = {l} got permit {permit:?}",
                hs.len()
            ));
        }
        hs.sort_by_key(|h| h.acquired);
        let mut latest: Option<&KindHold> = None;
        for &h in hs.iter().filter(|h| open(h)) {
            if let Some(p) = latest
                && h.acquired < p.window_end()
            {
                verdict.fail(format!(
                    "(sem2) {SEM_RESOURCE}: permit {permit:?} held by {} (client {}) from {} \
                     while {} (client {}) held it [{} .. {}]",
                    short(&h.token),
                    h.client,
                    ms(h.acquired, origin),
                    short(&p.token),
                    p.client,
                    ms(p.acquired, origin),
                    ms(p.window_end(), origin)
                ));
            }
            if latest.is_none_or(|p| h.window_end() > p.window_end()) {
                latest = Some(h);
            }
        }
    }

    // (sem4) L + 1 never joins holders of L; L-callers hear of another L only after one asked.
    let overasks: Vec<_> = logs.calls.iter().filter(|c| c.op == "overask").collect();
    for c in &overasks {
        *stats.overasks.entry(c.outcome.clone()).or_default() += 1;
    }
    for o in sem.iter().filter(|h| h.role == "over" && open(h)) {
        for h in &holders {
            if h.acquired < o.window_end() && o.acquired < h.window_end() {
                verdict.fail(format!(
                    "(sem4) {SEM_RESOURCE}: a request with L + 1 = {} permits got permit {:?} at \
                     {} while a holder of L (client {}) held permit {:?} [{} .. {}]",
                    l + 1,
                    o.permit,
                    ms(o.acquired, origin),
                    h.client,
                    h.permit,
                    ms(h.acquired, origin),
                    ms(h.window_end(), origin)
                ));
            }
        }
    }
    let taint = (TTL_MAX_MS + 200) * MS;
    for c in logs.calls.iter().filter(|c| {
        c.resource == SEM_RESOURCE && c.op != "overask" && c.outcome == "invalid_argument"
    }) {
        stats.refused_l += 1;
        let explained = overasks
            .iter()
            .any(|o| o.start <= c.end && c.start <= o.end + taint);
        if !explained {
            verdict.fail(format!(
                "(sem4) {SEM_RESOURCE}: client {} asking with L = {l} got InvalidArgument at {} \
                 with no request of another L about",
                c.client,
                ms(c.end, origin)
            ));
        }
    }
    stats
}

fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}

pub fn summarize(logs: &Logs, s: &Stats) {
    let acquired = |res: &str| {
        logs.calls
            .iter()
            .filter(|c| c.resource == res && c.op == "wait" && c.outcome == "ok")
            .count()
    };
    let failed = |res: &str| {
        logs.calls
            .iter()
            .filter(|c| c.resource == res && c.op == "wait" && c.outcome != "ok")
            .count()
    };
    println!(
        "  {RW_RESOURCE:<17} acquisitions {} (read {}, write {}, plain {}), waits that gave none {}",
        acquired(RW_RESOURCE),
        s.reads,
        s.writes,
        s.plains,
        failed(RW_RESOURCE)
    );
    println!(
        "  {RW_RESOURCE:<17} readers at once: at most {} ({} with every node up), {:.0} ms with \
         two or more; {} readers held past their TTL by extension; late extensions {:?}; {} \
         reads checked for tearing",
        s.max_readers,
        s.max_readers_calm,
        s.reader_overlap_ms,
        s.extended_readers,
        s.late_extends,
        s.torn_checked
    );
    println!(
        "  {SEM_RESOURCE:<17} acquisitions {} (permit windows {}), waits that gave none {}; \
         permits at once: at most {} ({} with every node up, L = {PERMITS}), {:.0} ms at L; \
         L + 1 requests {:?}; InvalidArgument to L-callers {}",
        acquired(SEM_RESOURCE),
        s.permits,
        failed(SEM_RESOURCE),
        s.max_permits,
        s.max_permits_calm,
        s.at_l_ms,
        s.overasks,
        s.refused_l
    );
}

/// Each rule must be able to fail: made-up histories that break it.
pub fn checker_catches_made_up_violations() {
    use crate::checker::Call;
    use crate::schedule::Action;
    let t = 1_000 * 1_000 * MS;
    let hold = |client: usize, res: &str, role: &str, at: u64, end: u64| KindHold {
        client,
        resource: res.to_owned(),
        role: role.to_owned(),
        token: format!("{role}-{client}-{at}"),
        permit: None,
        acquired: t + at * MS,
        deadline: t + (at + 300) * MS,
        end: t + end * MS,
        wrote: None,
        set_done: 0,
        seen: None,
        ttl_ms: 300,
        late: None,
    };
    let rw = |client, role, at, end| hold(client, RW_RESOURCE, role, at, end);
    let permit = |client, p: Option<u32>, at, end| KindHold {
        permit: p,
        ..hold(client, SEM_RESOURCE, "permit", at, end)
    };
    let call = |client: usize, op: &str, outcome: &str, start: u64, end: u64| Call {
        client,
        op: op.to_owned(),
        resource: SEM_RESOURCE.to_owned(),
        start: t + start * MS,
        end: t + end * MS,
        outcome: outcome.to_owned(),
        variant: "g".to_owned(),
        ran_ms: None,
        waited_ms: None,
        scheduled: None,
    };
    let run = |kinds: Vec<KindHold>, calls: Vec<Call>, outages: &[Outage], counter: u64| {
        let logs = Logs {
            kinds,
            calls,
            ..Logs::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        check(&logs, outages, counter, t, &mut verdict);
        verdict.violations
    };
    // A history that keeps every rule: two readers overlap, a writer and a plain holder after
    // them, each writing once; three permits at once; an L + 1 refused, an L-caller refused
    // right after it.
    let writer = |client, role, at, v: u64| KindHold {
        wrote: Some(v),
        set_done: t + (at + 1) * MS,
        ..rw(client, role, at, at + 10)
    };
    let reader = |client, at, end, seen: (u64, u64)| KindHold {
        seen: Some((seen.0, seen.1, t + (at + 2) * MS)),
        ..rw(client, "read", at, end)
    };
    let good_rw = vec![
        reader(0, 0, 50, (0, 0)),
        reader(1, 20, 60, (0, 0)),
        writer(2, "write", 100, 1),
        writer(0, "plain", 120, 2),
        reader(1, 140, 150, (2, 2)),
    ];
    let good_sem = vec![
        permit(0, Some(0), 0, 50),
        permit(1, Some(1), 10, 50),
        permit(2, Some(2), 20, 50),
        permit(0, Some(0), 60, 70),
    ];
    let good_calls = vec![
        call(0, "overask", "invalid_argument", 100, 110),
        call(1, "wait", "invalid_argument", 200, 210),
    ];
    let all = |rw: Vec<KindHold>, sem: Vec<KindHold>| rw.into_iter().chain(sem).collect();
    let ok = run(all(good_rw.clone(), good_sem.clone()), good_calls, &[], 2);
    assert!(ok.is_empty(), "a good history fails the checker: {ok:?}");

    let expect = |what: &str, rule: &str, violations: Vec<String>| {
        assert!(
            violations.iter().any(|v| v.starts_with(rule)),
            "the checker missed a made-up {rule} violation ({what}): {violations:?}"
        );
    };
    let with = |extra: KindHold| {
        let mut v = good_rw.clone();
        v.push(extra);
        all(v, good_sem.clone())
    };
    expect(
        "a writer inside a reader",
        "(rw1)",
        run(with(writer(2, "write", 30, 3)), vec![], &[], 3),
    );
    expect(
        "a plain holder inside a writer",
        "(rw1)",
        run(with(writer(1, "plain", 105, 3)), vec![], &[], 3),
    );
    expect(
        "a reader inside a plain holder",
        "(rw1)",
        run(with(reader(2, 125, 127, (2, 2))), vec![], &[], 2),
    );
    // A reader acquired at 500 ms with a TTL of 300 ms, extended at 860 ms after its entry
    // expired: revived. Its window counts as continuous, and a writer came and went in its gap.
    let revived = KindHold {
        deadline: t + 1_100 * MS,
        late: Some((t + 860 * MS, "ok".to_owned())),
        ..rw(2, "read", 500, 1_150)
    };
    let v = run(with(revived.clone()), vec![], &[], 2);
    expect("an extension that revived a reader", "(rw4)", v);
    let gap_writer = writer(1, "write", 900, 1);
    let v = run(
        all(
            vec![
                revived.clone(),
                reader(0, 0, 50, (0, 0)),
                reader(1, 20, 60, (0, 0)),
                gap_writer,
            ],
            vec![],
        ),
        vec![],
        &[],
        1,
    );
    assert!(
        v.iter()
            .any(|v| v.starts_with("(rw4)") && v.contains("inside a reader's window")),
        "a writer inside a revived reader's window: {v:?}"
    );
    expect(
        "readers that never overlap",
        "(rw2)",
        run(
            vec![reader(0, 0, 10, (0, 0)), reader(1, 20, 30, (0, 0))],
            vec![],
            &[],
            0,
        ),
    );
    expect(
        "a lost update",
        "(rw3)",
        run(with(writer(1, "write", 400, 2)), vec![], &[], 2),
    );
    expect(
        "a torn read",
        "(rw3)",
        run(with(reader(1, 400, 450, (2, 1))), vec![], &[], 2),
    );

    let sem_with = |extra: KindHold| {
        let mut v = good_sem.clone();
        v.push(extra);
        all(good_rw.clone(), v)
    };
    expect(
        "L + 1 holders",
        "(sem1)",
        run(sem_with(permit(1, Some(1), 30, 40)), vec![], &[], 2),
    );
    expect(
        "two holders of one permit",
        "(sem2)",
        run(sem_with(permit(1, Some(0), 55, 65)), vec![], &[], 2),
    );
    expect(
        "a permit out of range",
        "(sem2)",
        run(sem_with(permit(1, Some(PERMITS), 80, 90)), vec![], &[], 2),
    );
    // L reached only while a node was hung.
    let hung = [Outage {
        node: 0,
        client: None,
        action: Action::Hang,
        down_ns: t,
        up_ns: t + 55 * MS,
    }];
    expect(
        "L reached only during a fault",
        "(sem3)",
        run(all(good_rw.clone(), good_sem.clone()), vec![], &hung, 2),
    );
    let over = KindHold {
        permit: Some(PERMITS),
        ..hold(1, SEM_RESOURCE, "over", 40, 45)
    };
    expect(
        "an L + 1 permit among holders of L",
        "(sem4)",
        run(
            sem_with(over),
            vec![call(1, "overask", "ok", 39, 40)],
            &[],
            2,
        ),
    );
    expect(
        "an L-caller refused with no other L about",
        "(sem4)",
        run(
            all(good_rw.clone(), good_sem.clone()),
            vec![call(1, "wait", "invalid_argument", 5_000, 5_010)],
            &[],
            2,
        ),
    );
}
