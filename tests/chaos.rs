//! Fault injection with a safety checker.
//!
//! Five lock nodes and one separate "data" node (holding one counter per resource) run as real
//! `redis-server` processes. Several client processes (this binary, re-executed in child mode),
//! each with several threads, contend for a few resources through the public API. Every holder
//! does a deliberately non-atomic read-modify-write (GET, sleep, SET) of its resource's counter
//! inside the lock and logs what it did, with times from `CLOCK_MONOTONIC`, which all processes
//! on the machine share. Meanwhile a driver replays a seeded random schedule of faults on the
//! lock nodes: hangs (SIGSTOP … SIGCONT), crashes (SIGKILL, then a restart with an empty
//! dataset), and at least once a majority (3 of 5) down at the same time.
//!
//! Afterwards a checker reads the logs and asserts:
//! - (a) safety: no two holders' windows `[lock() returned, min(validity deadline, release
//!   started)]` overlap on one resource;
//! - (b) no lost update: each resource's final counter equals the number of writes made inside
//!   the lock, and the written values are exactly 1..=n;
//! - (c) no hang: every call returned within its bound, computed from the configuration
//!   (`node_timeout × (retries + 1) + retries × (retry_delay + retry_jitter)` for `lock`), plus a
//!   generous margin, plus the time its process was measurably not running (a probe thread
//!   logs every late wake-up), for a noisy machine;
//! - (d) recovery: after the last fault healed, every client process acquired again, its workers
//!   are all connected again (`node_status`), every lock node sees exactly one connection per
//!   client process, and the data node none once the client threads ended: nothing wedged,
//!   nothing leaked;
//! - (e) no acquisition succeeded while a majority of the nodes was down.
//!
//! Short profile (about a minute; part of `cargo test --release` and so of `scripts/test`):
//! ```sh
//! cargo test --release --test chaos
//! ```
//! Soak for N minutes of faults, and replay of a run's schedule from its printed seed:
//! ```sh
//! cargo test --release --test chaos -- --minutes 30
//! cargo test --release --test chaos -- --seed 1234 [--minutes 30]
//! ```
//!
//! Restarted nodes come back empty (no persistence), and the seed on delayed restarts explains
//! that a node that forgets a live lock can let a second owner in. The driver therefore keeps a
//! crashed node down for longer than the largest TTL before restarting it, as the README advises
//! operators to: every key it held has expired by then anyway, so the checker needs no exception
//! for restarts and counts every overlap as a violation. `--eager-restarts` brings crashed
//! minority nodes back within 100 ms instead, to watch the checker catch that hazard (expect it
//! to fail). Before each run the checker is also fed made-up violations of each kind, which it
//! must report.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redlock::{Error, Lock, Redlock};
use support::{Cluster, RedisNode, eventually};

const NODES: usize = 5;
const CLIENTS: usize = 3;
const THREADS: usize = 3;
const RESOURCES: usize = 3;
const TTL_MIN_MS: u64 = 250;
const TTL_MAX_MS: u64 = 500;
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
const RETRY_COUNT: u32 = 3;
const RETRY_DELAY: Duration = Duration::from_millis(40);
const RETRY_JITTER: Duration = Duration::from_millis(20);
/// A holder writes only with at least this much validity left, so that the SET lands well
/// inside the lock even if the thread is descheduled for a while on a busy machine.
const MIN_VALIDITY_TO_WRITE: Duration = Duration::from_millis(100);
/// Slack on top of each call's computed bound: a hang is unbounded, scheduling noise is not.
/// Stalls of the whole client process (measured by a probe thread) are added on top.
const CALL_MARGIN_MS: u64 = 1_000;
/// The stall probe sleeps this long in a loop; a wake-up later than `STALL_MIN` is a stall.
const PROBE_SLEEP: Duration = Duration::from_millis(2);
const STALL_MIN_NS_MS: u64 = 10;
const STALL_MIN_NS: u64 = STALL_MIN_NS_MS * MS;
/// A crashed node stays down at least this long: longer than any TTL (see the module docs).
const MIN_DOWN_AFTER_KILL_MS: u64 = TTL_MAX_MS + 200;
const SHORT_CHAOS_MS: u64 = 40_000;
const WARMUP_MS: u64 = 2_000;
/// Clients keep working this long after the last fault healed.
const TAIL_MS: u64 = 5_000;
const MS: u64 = 1_000_000;

/// Nanoseconds on `CLOCK_MONOTONIC`: one clock for every process on the machine (it is also
/// what `std::time::Instant`, and so `Lock::validity`, counts with on Linux).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(t_ns: u64) {
    let now = now_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

/// SplitMix64: a seeded generator whose sequence depends on nothing but the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

fn resource(i: usize) -> String {
    format!("chaos:r{i}")
}

fn counter_key(resource: &str) -> String {
    format!("{resource}:count")
}

// ---------------------------------------------------------------------------------------------
// The fault schedule

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Hang,
    Kill,
}

/// Some nodes go down together at `at_ms` (from the start of the chaos phase) for `dur_ms`.
#[derive(Debug, Clone)]
struct Fault {
    at_ms: u64,
    dur_ms: u64,
    targets: Vec<(usize, Action)>,
}

impl Fault {
    fn is_majority(&self) -> bool {
        self.targets.len() > NODES / 2
    }
}

/// Faults one after the other: one or two nodes at a time, and a majority (three) about every
/// 20 s, the first after 18 s. Crashed nodes stay down longer than any TTL, unless `eager`
/// (the unsafe way: see `--eager-restarts`).
fn schedule(seed: u64, chaos_ms: u64, eager: bool) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    let mut faults = Vec::new();
    let mut next_majority = 18_000.min(chaos_ms / 2);
    let mut t = rng.range(200, 800);
    while t < chaos_ms {
        let majority = t >= next_majority;
        let count = if majority {
            3
        } else {
            1 + rng.below(2) as usize
        };
        let mut nodes: Vec<usize> = (0..NODES).collect();
        let mut targets = Vec::new();
        for _ in 0..count {
            let n = nodes.remove(rng.below(nodes.len() as u64) as usize);
            let action = if rng.chance(0.5) {
                Action::Hang
            } else {
                Action::Kill
            };
            targets.push((n, action));
        }
        targets.sort_unstable_by_key(|&(n, _)| n);
        let any_kill = targets.iter().any(|&(_, a)| a == Action::Kill);
        let mut dur_ms = if majority {
            rng.range(1_000, 2_500)
        } else {
            // Short hangs end within node_timeout; long ones break the connections.
            rng.range(30, 1_500)
        };
        if any_kill && eager && !majority {
            dur_ms = dur_ms.min(100);
        } else if any_kill {
            dur_ms = dur_ms.max(MIN_DOWN_AFTER_KILL_MS);
        }
        if majority {
            next_majority += 20_000;
        }
        faults.push(Fault {
            at_ms: t,
            dur_ms,
            targets,
        });
        t += dur_ms + rng.range(200, 1_200);
    }
    faults
}

fn describe(fault: &Fault) -> String {
    let what: Vec<String> = fault
        .targets
        .iter()
        .map(|(n, a)| format!("{} n{n}", if *a == Action::Hang { "hang" } else { "kill" }))
        .collect();
    format!(
        "+{:>7.3}s  {:<28} for {:>4} ms{}",
        fault.at_ms as f64 / 1000.0,
        what.join(", "),
        fault.dur_ms,
        if fault.is_majority() {
            "   (MAJORITY DOWN)"
        } else {
            ""
        }
    )
}

/// One node's outage, as the driver saw it: down from after the signal, up from before the
/// resume or restart, so the recorded interval is never longer than the real one.
#[derive(Debug, Clone, Copy)]
struct Outage {
    node: usize,
    action: Action,
    down_ns: u64,
    up_ns: u64,
}

fn drive(cluster: &mut Cluster, faults: &[Fault], chaos_start_ns: u64) -> Vec<Outage> {
    let mut outages = Vec::new();
    for fault in faults {
        sleep_until(chaos_start_ns + fault.at_ms * MS);
        let mut down = Vec::new();
        for &(n, action) in &fault.targets {
            match action {
                Action::Hang => cluster.nodes[n].hang(),
                Action::Kill => cluster.nodes[n].kill(),
            }
            down.push((n, action, now_ns()));
        }
        sleep_until(now_ns() + fault.dur_ms * MS);
        for (n, action, down_ns) in down {
            let up_ns = now_ns();
            match action {
                Action::Hang => cluster.nodes[n].resume(),
                Action::Kill => cluster.nodes[n].restart(),
            }
            outages.push(Outage {
                node: n,
                action,
                down_ns,
                up_ns,
            });
        }
    }
    outages
}

/// Intervals during which more than half of the nodes were down.
fn majority_down(outages: &[Outage]) -> Vec<(u64, u64)> {
    let mut edges: Vec<(u64, i32)> = outages
        .iter()
        .flat_map(|o| [(o.down_ns, 1), (o.up_ns, -1)])
        .collect();
    // At equal times, count ups before downs: never widen an interval.
    edges.sort_unstable();
    let mut down = 0;
    let mut start = 0;
    let mut intervals = Vec::new();
    for (t, delta) in edges {
        let before = down;
        down += delta;
        if before <= (NODES / 2) as i32 && down > (NODES / 2) as i32 {
            start = t;
        } else if before > (NODES / 2) as i32 && down <= (NODES / 2) as i32 {
            intervals.push((start, t));
        }
    }
    intervals
}

// ---------------------------------------------------------------------------------------------
// Child mode: one client process

struct ChildArgs {
    id: usize,
    nodes: Vec<String>,
    data: String,
    end_ns: u64,
    seed: u64,
    log: PathBuf,
}

fn outcome<T>(result: &redlock::Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(Error::NotAcquired { .. }) => "not_acquired",
        Err(Error::NoQuorum { .. }) => "no_quorum",
        Err(Error::Lost { .. }) => "lost",
        Err(Error::ExtensionLimit { .. }) => "extension_limit",
        Err(Error::InvalidArgument { .. }) => "invalid_argument",
        Err(_) => "other",
    }
}

/// Which call a thread is in, and since when (0: none), for the hang watchdog.
#[derive(Default)]
struct Busy {
    since_ns: AtomicU64,
    op: AtomicU64,
}

const OPS: [&str; 4] = ["lock", "try_lock", "extend", "release"];

struct Worker {
    client: usize,
    thread: usize,
    rl: Redlock,
    data: redis::Connection,
    rng: Rng,
    busy: Arc<Busy>,
    log: Vec<String>,
}

impl Worker {
    fn call<T>(
        &mut self,
        op: usize,
        res: &str,
        f: impl FnOnce() -> redlock::Result<T>,
    ) -> (u64, u64, redlock::Result<T>) {
        let start = now_ns();
        self.busy.op.store(op as u64, Ordering::Relaxed);
        self.busy.since_ns.store(start, Ordering::Relaxed);
        let result = f();
        let end = now_ns();
        self.busy.since_ns.store(0, Ordering::Relaxed);
        self.log.push(format!(
            "C {} {} {} {res} {start} {end} {}",
            self.client,
            self.thread,
            OPS[op],
            outcome(&result)
        ));
        (start, end, result)
    }

    fn run(mut self, end_ns: u64) -> Vec<String> {
        while now_ns() < end_ns {
            let res = resource(self.rng.below(RESOURCES as u64) as usize);
            let ttl = Duration::from_millis(self.rng.range(TTL_MIN_MS, TTL_MAX_MS));
            let rl = self.rl.clone();
            let (call_start, _, result) = if self.rng.chance(0.7) {
                self.call(0, &res, || rl.lock(&res, ttl))
            } else {
                self.call(1, &res, || rl.try_lock(&res, ttl))
            };
            if let Ok(lock) = result {
                self.hold(lock, &res, ttl, call_start);
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    /// The critical section: a non-atomic increment of the resource's counter.
    fn hold(&mut self, mut lock: Lock, res: &str, ttl: Duration, call_start: u64) {
        // The clock first, then validity: the deadline logged is never later than the lock's, so
        // a stall in between shortens the window checked instead of making a false overlap (or
        // hiding a write made after validity).
        let acquired = now_ns();
        let validity = lock.validity();
        let mut deadline = acquired + validity.as_nanos() as u64;
        let key = counter_key(res);
        let seen: Option<u64> = redis::cmd("GET")
            .arg(&key)
            .query(&mut self.data)
            .expect("GET on the data node");
        std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        if self.rng.chance(0.1) {
            let _ = self.call(2, res, || lock.extend(ttl));
            let before = now_ns();
            deadline = before + lock.validity().as_nanos() as u64;
        }
        let mut wrote = String::from("-");
        let mut set_done = 0;
        if lock.validity() >= MIN_VALIDITY_TO_WRITE {
            let value = seen.unwrap_or(0) + 1;
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg(value)
                .query(&mut self.data)
                .expect("SET on the data node");
            set_done = now_ns();
            wrote = value.to_string();
        }
        std::thread::sleep(Duration::from_micros(self.rng.range(0, 1_000)));
        let token = lock.token().to_owned();
        let (end, how) = if self.rng.chance(0.03) {
            // A holder that vanishes without releasing: the lock must free itself at its TTL.
            std::mem::forget(lock);
            (deadline, "abandoned")
        } else {
            let (start, _, _) = self.call(3, res, || lock.release());
            (start, "released")
        };
        self.log.push(format!(
            "H {} {} {res} {token} {call_start} {acquired} {deadline} {end} {how} {wrote} {set_done}",
            self.client, self.thread
        ));
    }
}

fn build_client(nodes: &[String]) -> Redlock {
    Redlock::builder()
        .nodes(nodes)
        .node_timeout(NODE_TIMEOUT)
        .retry_count(RETRY_COUNT)
        .retry_delay(RETRY_DELAY)
        .retry_jitter(RETRY_JITTER)
        .build()
        .expect("build client")
}

fn child(args: ChildArgs) {
    let rl = build_client(&args.nodes);
    let data_client = redis::Client::open(args.data.as_str()).expect("data url");
    let busy: Vec<Arc<Busy>> = (0..THREADS).map(|_| Arc::default()).collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let data = data_client
                .get_connection_with_timeout(Duration::from_secs(5))
                .expect("connect to the data node");
            data.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let worker = Worker {
                client: args.id,
                thread: t,
                rl: rl.clone(),
                data,
                rng: Rng::new(
                    args.seed
                        ^ ((args.id * THREADS + t + 1) as u64).wrapping_mul(0xA24B_AED4_963E_E407),
                ),
                busy: Arc::clone(&busy[t]),
                log: Vec::new(),
            };
            let end_ns = args.end_ns;
            std::thread::spawn(move || worker.run(end_ns))
        })
        .collect();

    // The stall probe: when the machine is too busy to run this process for a while, calls
    // take longer by as much; the checker adds these stalls to each call's bound.
    let probe_end = Arc::new(AtomicU64::new(0));
    let probe = {
        let (id, probe_end) = (args.id, Arc::clone(&probe_end));
        std::thread::spawn(move || {
            let mut stalls = Vec::new();
            let mut last = now_ns();
            while probe_end.load(Ordering::Relaxed) == 0 {
                std::thread::sleep(PROBE_SLEEP);
                let now = now_ns();
                let expected = last + PROBE_SLEEP.as_nanos() as u64;
                if now > expected + STALL_MIN_NS {
                    stalls.push(format!("L {id} {expected} {now}"));
                }
                last = now;
            }
            stalls
        })
    };

    // The watchdog: every call is bounded, so every thread ends soon after end_ns.
    let give_up = args.end_ns + (lock_bound_ms() + 10_000) * MS;
    while !handles.iter().all(|h| h.is_finished()) {
        if now_ns() > give_up {
            for (t, b) in busy.iter().enumerate() {
                let since = b.since_ns.load(Ordering::Relaxed);
                if since != 0 {
                    eprintln!(
                        "chaos client {}: HUNG: thread {t} in {} for {} ms",
                        args.id,
                        OPS[b.op.load(Ordering::Relaxed) as usize],
                        (now_ns() - since) / MS
                    );
                }
            }
            eprintln!("chaos client {}: threads did not finish", args.id);
            std::process::exit(3);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut log: Vec<String> = Vec::new();
    for h in handles {
        log.extend(h.join().expect("client thread panicked"));
    }

    // Every worker reconnects once it has work: give it some until all are connected.
    let final_res = format!("chaos:final:{}", args.id);
    let ttl = Duration::from_millis(TTL_MAX_MS);
    let status_deadline = now_ns() + 10_000 * MS;
    let mut acquired_after = None;
    loop {
        let start = now_ns();
        let result = rl.try_lock(&final_res, ttl);
        let end = now_ns();
        log.push(format!(
            "C {} final try_lock {final_res} {start} {end} {}",
            args.id,
            outcome(&result)
        ));
        if let Ok(lock) = result {
            acquired_after.get_or_insert(end);
            let start = now_ns();
            let result = lock.release();
            log.push(format!(
                "C {} final release {final_res} {start} {} {}",
                args.id,
                now_ns(),
                outcome(&result)
            ));
        }
        let connected = rl.node_status().iter().filter(|s| s.connected).count();
        if (connected == NODES && acquired_after.is_some()) || now_ns() > status_deadline {
            let status: Vec<String> = rl
                .node_status()
                .iter()
                .map(|s| format!("{}:{}:{}", s.address, s.connected, s.connects))
                .collect();
            log.push(format!(
                "S {} {connected} {} {}",
                args.id,
                u8::from(acquired_after.is_some()),
                status.join(",")
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    probe_end.store(1, Ordering::Relaxed);
    log.extend(probe.join().expect("stall probe panicked"));

    let mut file = std::io::BufWriter::new(std::fs::File::create(&args.log).expect("log file"));
    for line in &log {
        writeln!(file, "{line}").expect("write log");
    }
    file.flush().expect("write log");
    drop(file);
    println!("READY");
    std::io::stdout().flush().unwrap();
    // Stay connected until the parent has counted the connections on the nodes (stdin closes).
    let mut sink = String::new();
    while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
    drop(rl);
}

// ---------------------------------------------------------------------------------------------
// The checker

fn lock_bound_ms() -> u64 {
    let attempts = u64::from(RETRY_COUNT) + 1;
    attempts * NODE_TIMEOUT.as_millis() as u64
        + u64::from(RETRY_COUNT) * (RETRY_DELAY + RETRY_JITTER).as_millis() as u64
}

/// Bound on one call, from the configuration: the decision waits at most `node_timeout` per
/// attempt, and `lock` sleeps at most `retry_delay + retry_jitter` between attempts.
fn bound_ms(op: &str) -> u64 {
    match op {
        "lock" => lock_bound_ms(),
        _ => NODE_TIMEOUT.as_millis() as u64,
    }
}

struct Call {
    client: usize,
    op: String,
    resource: String,
    start: u64,
    end: u64,
    outcome: String,
}

struct Hold {
    client: usize,
    resource: String,
    token: String,
    acquired: u64,
    deadline: u64,
    end: u64,
    abandoned: bool,
    wrote: Option<u64>,
    set_done: u64,
}

impl Hold {
    /// The window runs from `acquired` (after `lock`/`try_lock` returned: a call that started
    /// while someone else held the lock merely waited, which is no overlap) to the last known
    /// deadline, or to the start of the release if that came first (the holder relies on the
    /// lock no more; its keys may be gone, and a new owner in, before `release` returns).
    fn window_end(&self) -> u64 {
        self.deadline.min(self.end)
    }
}

struct Status {
    connected: usize,
    acquired: bool,
    detail: String,
}

#[derive(Default)]
struct Logs {
    calls: Vec<Call>,
    holds: Vec<Hold>,
    status: BTreeMap<usize, Status>,
    /// Per client process: intervals during which it did not get to run (the stall probe).
    stalls: BTreeMap<usize, Vec<(u64, u64)>>,
}

impl Logs {
    /// How long `client` was stalled within `[start, end]`.
    fn stalled(&self, client: usize, start: u64, end: u64) -> u64 {
        self.stalls.get(&client).map_or(0, |stalls| {
            stalls
                .iter()
                .map(|&(from, to)| to.min(end).saturating_sub(from.max(start)))
                .sum()
        })
    }
}

fn read_logs(paths: &[PathBuf]) -> Logs {
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
                _ => panic!("bad line {line:?}"),
            }
        }
    }
    logs
}

struct Verdict {
    violations: Vec<String>,
}

impl Verdict {
    fn fail(&mut self, what: String) {
        self.violations.push(what);
    }
}

fn ms(ns: u64, origin: u64) -> String {
    format!("{:.3}s", ns.saturating_sub(origin) as f64 / 1e9)
}

fn check(
    logs: &Logs,
    outages: &[Outage],
    counters: &BTreeMap<String, u64>,
    origin: u64,
    verdict: &mut Verdict,
) {
    // (a) Validity windows on one resource never overlap.
    let mut by_resource: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in &logs.holds {
        by_resource.entry(&h.resource).or_default().push(h);
    }
    for (res, holds) in &mut by_resource {
        holds.sort_by_key(|h| h.acquired);
        let mut latest: Option<&Hold> = None;
        for &h in holds.iter() {
            if let Some(prev) = latest
                && h.acquired < prev.window_end()
            {
                verdict.fail(format!(
                    "(a) {res}: holder {} (client {}) acquired at {} while holder {} (client {}) \
                     held it [{} .. {}]: overlap {:.3} ms",
                    &h.token[..8],
                    h.client,
                    ms(h.acquired, origin),
                    &prev.token[..8],
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

    // (b) No lost update: the writes made inside validity account for the counter exactly.
    for (res, holds) in &by_resource {
        if res.starts_with("chaos:final") {
            continue;
        }
        let late: Vec<&&Hold> = holds
            .iter()
            .filter(|h| h.wrote.is_some() && h.set_done > h.deadline)
            .collect();
        let mut written: Vec<u64> = holds.iter().filter_map(|h| h.wrote).collect();
        written.sort_unstable();
        let final_value = counters.get(*res).copied().unwrap_or(0);
        if !late.is_empty() {
            // The thread stalled for longer than MIN_VALIDITY_TO_WRITE between its validity
            // check and its SET: the write left the lock, which promises nothing past validity.
            println!(
                "NOTE {res}: {} write(s) landed after their lock's validity (client stalled {} ms \
                 at most); exact counter check skipped for this resource",
                late.len(),
                late.iter()
                    .map(|h| (h.set_done - h.deadline) / MS)
                    .max()
                    .unwrap_or(0)
            );
            continue;
        }
        let expected: Vec<u64> = (1..=written.len() as u64).collect();
        if final_value != written.len() as u64 || written != expected {
            let dups = written.windows(2).filter(|w| w[0] == w[1]).count();
            verdict.fail(format!(
                "(b) {res}: counter is {final_value} after {} writes inside the lock \
                 ({dups} value(s) written twice): lost update",
                written.len()
            ));
        }
    }

    // (c) Every call returned within its bound (plus the time its process was not running).
    for c in &logs.calls {
        let took = (c.end - c.start) / MS;
        let stalled = logs.stalled(c.client, c.start, c.end) / MS;
        let bound = bound_ms(&c.op) + CALL_MARGIN_MS + stalled;
        if took > bound {
            verdict.fail(format!(
                "(c) client {} {} {} took {took} ms at {} (bound {bound} ms, of which {stalled} \
                 ms the process was stalled)",
                c.client,
                c.op,
                c.resource,
                ms(c.start, origin)
            ));
        }
        if !matches!(
            c.outcome.as_str(),
            "ok" | "not_acquired" | "no_quorum" | "lost"
        ) {
            verdict.fail(format!(
                "client {} {} {} failed unexpectedly: {}",
                c.client, c.op, c.resource, c.outcome
            ));
        }
    }

    // (d) Recovery: after the last fault, every client acquired again and is connected to all.
    let last_heal = outages.iter().map(|o| o.up_ns).max().unwrap_or(0);
    for client in 0..CLIENTS {
        let recovered = logs.calls.iter().any(|c| {
            c.client == client
                && !c.resource.starts_with("chaos:final")
                && c.start >= last_heal
                && (c.op == "lock" || c.op == "try_lock")
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
            Some(s) if s.connected == NODES && s.acquired => {}
            Some(s) => verdict.fail(format!(
                "(d) client {client}: {} of {NODES} workers connected, final lock {}: {}",
                s.connected,
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

    // (e) Nobody acquired while a majority of the nodes was down (5 ms after the last signal,
    // for it to take hold).
    for (down, up) in majority_down(outages) {
        for c in &logs.calls {
            if (c.op == "lock" || c.op == "try_lock")
                && c.outcome == "ok"
                && c.start >= down + 5 * MS
                && c.end <= up
            {
                verdict.fail(format!(
                    "(e) client {} acquired {} at {} while a majority was down [{} .. {}]",
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

fn summarize(logs: &Logs, outages: &[Outage], faults: &[Fault], verdict: &Verdict) {
    let count = |op: &str, outcome: &str| {
        logs.calls
            .iter()
            .filter(|c| c.op == op && c.outcome == outcome)
            .count()
    };
    let acquired = count("lock", "ok") + count("try_lock", "ok");
    let refused = count("lock", "not_acquired") + count("try_lock", "not_acquired");
    let no_quorum = count("lock", "no_quorum") + count("try_lock", "no_quorum");
    let writes = logs.holds.iter().filter(|h| h.wrote.is_some()).count();
    let skipped = logs.holds.iter().filter(|h| h.wrote.is_none()).count();
    let abandoned = logs.holds.iter().filter(|h| h.abandoned).count();
    let hangs = outages.iter().filter(|o| o.action == Action::Hang).count();
    let kills = outages.iter().filter(|o| o.action == Action::Kill).count();
    let majorities = faults.iter().filter(|f| f.is_majority()).count();
    let down_ms: u64 = majority_down(outages)
        .iter()
        .map(|(d, u)| (u - d) / MS)
        .sum();
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
    println!(
        "  faults injected   {} ({hangs} node hangs, {kills} node crashes+restarts; {majorities} majority outages, {down_ms} ms in all)",
        faults.len()
    );
    let per_node: Vec<String> = (0..NODES)
        .map(|n| {
            let down: u64 = outages
                .iter()
                .filter(|o| o.node == n)
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
    println!(
        "  process stalls    {} over {STALL_MIN_NS_MS} ms, longest {:.1} ms",
        logs.stalls.values().map(Vec::len).sum::<usize>(),
        longest as f64 / 1e6
    );
    println!("  violations        {}", verdict.violations.len());
}

// ---------------------------------------------------------------------------------------------
// The parent

/// Kills the client processes, even when the test fails.
struct Children(Vec<(Child, Option<ChildStdin>)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (child, stdin) in &mut self.0 {
            drop(stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Removes the log directory.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(seed: u64, chaos_ms: u64, eager: bool) -> bool {
    checker_catches_made_up_violations();
    let faults = schedule(seed, chaos_ms, eager);
    println!(
        "chaos: seed {seed} ({} s of faults; replay with: cargo test --release --test chaos -- --seed {seed}{}{})",
        chaos_ms / 1000,
        if chaos_ms == SHORT_CHAOS_MS {
            String::new()
        } else {
            format!(" --minutes {}", chaos_ms / 60_000)
        },
        if eager { " --eager-restarts" } else { "" }
    );
    if eager {
        println!(
            "EAGER RESTARTS: crashed minority nodes come back empty within 100 ms, while locks \
             they held are live; the seed predicts violations, and the checker should find them"
        );
    }
    println!(
        "{NODES} lock nodes, {CLIENTS} client processes × {THREADS} threads, {RESOURCES} resources, TTL {TTL_MIN_MS}-{TTL_MAX_MS} ms, node_timeout {} ms, retries {RETRY_COUNT} × ({} ± {}) ms",
        NODE_TIMEOUT.as_millis(),
        RETRY_DELAY.as_millis(),
        RETRY_JITTER.as_millis()
    );
    println!("schedule ({} faults):", faults.len());
    for f in &faults {
        println!("  {}", describe(f));
    }

    let mut cluster = Cluster::start(NODES);
    let data = RedisNode::start();
    let dir = TempDir(std::env::temp_dir().join(format!("redlock-chaos-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("log dir");
    let logs: Vec<PathBuf> = (0..CLIENTS)
        .map(|i| dir.0.join(format!("client-{i}.log")))
        .collect();

    let origin = now_ns();
    let chaos_start = origin + WARMUP_MS * MS;
    let last_fault_end = faults.iter().map(|f| f.at_ms + f.dur_ms).max().unwrap_or(0);
    // Restarts take a moment each; the tail is counted from the planned end, generously.
    let end_ns = chaos_start + (last_fault_end + TAIL_MS + 1_000) * MS;

    let exe = std::env::current_exe().expect("current_exe");
    let (lines_tx, lines) = crossbeam_channel::unbounded::<(usize, String)>();
    let mut children = Children(Vec::new());
    for (i, log) in logs.iter().enumerate() {
        let mut child = Command::new(&exe)
            .arg("--child")
            .arg(i.to_string())
            .arg(cluster.urls().join(","))
            .arg(data.url())
            .arg(end_ns.to_string())
            .arg(seed.to_string())
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a client process");
        let stdout = child.stdout.take().expect("piped stdout");
        let tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send((i, line));
            }
        });
        let stdin = child.stdin.take();
        children.0.push((child, stdin));
    }
    drop(lines_tx);

    let outages = drive(&mut cluster, &faults, chaos_start);
    let last_heal = outages.iter().map(|o| o.up_ns).max().unwrap_or(0);
    println!("last fault healed at {}", ms(last_heal, origin));

    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    let mut ready = [false; CLIENTS];
    let ready_deadline = end_ns + (lock_bound_ms() + 25_000) * MS;
    while !ready.iter().all(|&r| r) {
        let left = ready_deadline.saturating_sub(now_ns());
        match lines.recv_timeout(Duration::from_nanos(left)) {
            Ok((i, line)) if line.trim() == "READY" => ready[i] = true,
            Ok((i, line)) => println!("client {i}: {line}"),
            Err(_) => break,
        }
    }
    for (i, r) in ready.iter().enumerate() {
        if !r {
            verdict.fail(format!(
                "(c) client {i} did not finish: a call hung or the process died"
            ));
        }
    }
    if !verdict.violations.is_empty() {
        for v in &verdict.violations {
            println!("VIOLATION {v}");
        }
        return false;
    }

    // (d) Connections: one per client process on each lock node, plus the one counting. Closed
    // sockets leave the list once the server has seen them close.
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut seen = 0;
        if !eventually(Duration::from_secs(5), || {
            seen = node.clients("");
            seen == CLIENTS + 1
        }) {
            verdict.fail(format!(
                "(d) lock node n{i} has {seen} client connections, expected {} (one per client \
                 process plus this check)",
                CLIENTS + 1
            ));
        }
    }
    // Client threads closed their data connections when they ended: only the counting one is left.
    let mut seen = 0;
    if !eventually(Duration::from_secs(5), || {
        seen = data.clients("");
        seen == 1
    }) {
        verdict.fail(format!(
            "(d) data node has {seen} client connections after the client threads ended, \
             expected 1 (this check's)"
        ));
    }

    for (child, stdin) in &mut children.0 {
        drop(stdin.take());
        let status = child.wait().expect("wait for a client process");
        if !status.success() {
            verdict.fail(format!("client process exited with {status}"));
        }
    }

    let logs = read_logs(&logs);
    let mut counters = BTreeMap::new();
    for r in 0..RESOURCES {
        let res = resource(r);
        let value: Option<u64> = redis::cmd("GET")
            .arg(counter_key(&res))
            .query(&mut data.conn())
            .expect("GET counter");
        counters.insert(res, value.unwrap_or(0));
    }
    check(&logs, &outages, &counters, origin, &mut verdict);
    if logs.holds.iter().filter(|h| h.wrote.is_some()).count() == 0 {
        verdict.fail("no holder wrote anything: the run tested nothing".into());
    }
    summarize(&logs, &outages, &faults, &verdict);
    for v in &verdict.violations {
        println!("VIOLATION {v}");
    }
    verdict.violations.is_empty()
}

/// The checker must be able to fail: it is fed one made-up violation of each kind.
fn checker_catches_made_up_violations() {
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
    };
    let call = |client: usize, op: &str, start: u64, end: u64| Call {
        client,
        op: op.to_owned(),
        resource: resource(0),
        start: t + start * MS,
        end: t + end * MS,
        outcome: "ok".to_owned(),
    };
    let logs = Logs {
        // A lock call far over its bound; a try_lock that succeeded with a majority down.
        calls: vec![call(0, "lock", 0, 2_000), call(1, "try_lock", 5_010, 5_020)],
        // Overlapping windows, both writing 1 (a lost update); no status from any client.
        holds: vec![hold(0, 0, 100), hold(1, 50, 150)],
        status: BTreeMap::new(),
        stalls: BTreeMap::new(),
    };
    let outages: Vec<Outage> = (0..3)
        .map(|node| Outage {
            node,
            action: Action::Hang,
            down_ns: t + 5_000 * MS,
            up_ns: t + 6_000 * MS,
        })
        .collect();
    let counters = BTreeMap::from([(resource(0), 1)]);
    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    check(&logs, &outages, &counters, t, &mut verdict);
    for kind in ["(a)", "(b)", "(c)", "(d)", "(e)"] {
        assert!(
            verdict.violations.iter().any(|v| v.starts_with(kind)),
            "the checker missed a made-up {kind} violation: {:?}",
            verdict.violations
        );
    }
}

fn parse_child(args: &[String]) -> ChildArgs {
    ChildArgs {
        id: args[0].parse().expect("child id"),
        nodes: args[1].split(',').map(str::to_owned).collect(),
        data: args[2].clone(),
        end_ns: args[3].parse().expect("end time"),
        seed: args[4].parse().expect("seed"),
        log: Path::new(&args[5]).to_path_buf(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(parse_child(&args[1..]));
        return;
    }
    let mut seed = None;
    let mut minutes = None;
    let mut eager = false;
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seed" => {
                seed = it.next().and_then(|s| s.parse::<u64>().ok()).or_else(|| {
                    eprintln!("--seed needs a number");
                    std::process::exit(2)
                })
            }
            "--minutes" => {
                minutes = it.next().and_then(|s| s.parse::<u64>().ok()).or_else(|| {
                    eprintln!("--minutes needs a number");
                    std::process::exit(2)
                })
            }
            "--eager-restarts" => eager = true,
            "--list" => {
                println!("chaos: test");
                return;
            }
            // libtest's own flags, passed along by `cargo test -- ...` to every test binary.
            a if a.starts_with('-') => {}
            filter => filters.push(filter.to_owned()),
        }
    }
    // `cargo test <filter>` passes the filter to every test binary: run only when it matches.
    if !filters.is_empty() && !filters.iter().any(|f| "chaos".contains(f.as_str())) {
        println!("chaos: filtered out");
        return;
    }
    let seed = seed.unwrap_or_else(|| now_ns() ^ (u64::from(std::process::id()) << 32));
    let chaos_ms = minutes.map_or(SHORT_CHAOS_MS, |m| m.max(1) * 60_000);
    if !run(seed, chaos_ms, eager) {
        eprintln!("chaos: FAILED (seed {seed})");
        std::process::exit(1);
    }
    println!("chaos: ok (seed {seed})");
}
