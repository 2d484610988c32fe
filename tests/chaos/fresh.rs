//! Fresh clients: short-lived client processes with no history (a CLI invocation, a restarted
//! service, a scaled-up replica of an application), started by the parent at random instants
//! and right after each kill or failover of the group or cluster node, while the long-lived
//! clients run (in the cluster configuration, only where A9 covers a client with no history:
//! from the largest TTL after each fault of the cluster node has ended until the next one,
//! `Lab::fresh_hold`; `min_replicas`, A9's other cover, would refuse every standalone node,
//! which has no replica). Each builds brand-new Redlock clients (the phase's: with
//! `restart_grace` in quick phases, without in delayed ones, like every acquisition), takes a lock once or twice on the mutex resources and does the
//! holders' read-modify-write (`H` lines: their first acquisition is checked by (a), (b), (c),
//! (e), (f) like every other), asks `leader` of the election once and observes it briefly (`O`
//! lines, checked by el4), and exits. Their log lines carry the id `FRESH_BASE + k`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::client::{Busy, Clients, Shared, Worker, builder};
use crate::{Flags, MS, RESOURCES, Rng, TTL_MAX_MS, TTL_MIN_MS, now_ns, resource};

/// The client id of the first fresh client's log lines.
pub const FRESH_BASE: usize = 100;
/// At most this many fresh clients run at once (the machine is small).
const MAX_LIVE: usize = 3;
/// A fresh client still running this long after the last one could start is killed and counts
/// as hung: its few calls are bounded (a second or two on a healthy machine), and the run must
/// end with a verdict, not wait for it forever.
pub const EXIT_WITHIN_MS: u64 = 60_000;

/// A fresh client as the parent saw it.
#[derive(Debug, Clone)]
pub struct FreshRun {
    pub id: usize,
    pub started: u64,
    /// Exited with success.
    pub ok: bool,
    /// Killed, still running [`EXIT_WITHIN_MS`] after the last start.
    pub hung: bool,
    pub log: PathBuf,
}

/// What the spawner needs to start a fresh client.
pub struct Spawn {
    pub exe: PathBuf,
    /// The lock nodes, directly (fresh clients are not cut off by relays).
    pub urls: Vec<String>,
    pub data: String,
    pub chaos_start_ns: u64,
    /// No fresh client starts after this.
    pub until_ns: u64,
    pub seed: u64,
    pub dir: PathBuf,
    pub flags: Flags,
}

/// Starts fresh clients until `until_ns`, each after a random wait of 0.5-3 s or at once on a
/// nudge (the driver's, right after a kill or a failover), at most `MAX_LIVE` at a time; then
/// waits for every one of them to exit, [`EXIT_WITHIN_MS`] at most.
pub fn spawner(
    spawn: Spawn,
    nudges: Receiver<()>,
    hold: Arc<AtomicU64>,
) -> JoinHandle<Vec<FreshRun>> {
    std::thread::spawn(move || {
        let mut rng = Rng::new(spawn.seed ^ 0x0F2E_5B1D_0000_0001);
        let mut live: Vec<(usize, Child)> = Vec::new();
        let mut runs: Vec<FreshRun> = Vec::new();
        let reap = |live: &mut Vec<(usize, Child)>, runs: &mut Vec<FreshRun>| {
            live.retain_mut(|(i, child)| match child.try_wait() {
                Ok(Some(s)) => {
                    runs[*i].ok = s.success();
                    false
                }
                Ok(None) => true,
                Err(_) => false,
            });
        };
        while now_ns() < spawn.until_ns {
            let wait = Duration::from_millis(rng.range(500, 3_000))
                .min(Duration::from_nanos(spawn.until_ns - now_ns()));
            let _ = nudges.recv_timeout(wait);
            reap(&mut live, &mut runs);
            // Broken on purpose (`--fresh-grace-ms`): more at once, to meet a failover's window.
            let max_live = if spawn.flags.fresh_grace_ms.is_some() {
                2 * MAX_LIVE
            } else {
                MAX_LIVE
            };
            if now_ns() >= spawn.until_ns
                || live.len() >= max_live
                || now_ns() < hold.load(Ordering::SeqCst)
            {
                continue;
            }
            let id = FRESH_BASE + runs.len();
            let log = spawn.dir.join(format!("fresh-{id}.log"));
            let started = now_ns();
            let child = Command::new(&spawn.exe)
                .arg("--fresh")
                .arg(id.to_string())
                .arg(spawn.urls.join(","))
                .arg(&spawn.data)
                .arg(spawn.chaos_start_ns.to_string())
                .arg(spawn.seed.to_string())
                .arg(&log)
                .arg(spawn.flags.arg())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("start a fresh client");
            live.push((runs.len(), child));
            runs.push(FreshRun {
                id,
                started,
                ok: false,
                hung: false,
                log,
            });
        }
        let give_up = spawn.until_ns + EXIT_WITHIN_MS * MS;
        while !live.is_empty() && now_ns() < give_up {
            std::thread::sleep(Duration::from_millis(20));
            reap(&mut live, &mut runs);
        }
        for (i, mut child) in live {
            let _ = child.kill();
            let _ = child.wait();
            runs[i].hung = true;
        }
        runs
    })
}

/// Child mode `--fresh`: one fresh client (see the module docs).
pub fn child(args: &[String]) {
    let id: usize = args[0].parse().expect("fresh id");
    let urls: Vec<String> = args[1].split(',').map(str::to_owned).collect();
    let data = args[2].clone();
    let chaos_start_ns: u64 = args[3].parse().expect("chaos start");
    let seed: u64 = args[4].parse().expect("seed");
    let log_path = Path::new(&args[5]).to_path_buf();
    let flags = Flags::parse(&args[6]);
    flags.apply();
    let build = |grace: Option<u64>| {
        builder(&urls, grace.map(Duration::from_millis), &flags, &[])
            .build()
            .expect("build a fresh client")
    };
    // Broken on purpose (`--fresh-grace-ms N`): the quick phases' fresh client uses N ms.
    let grace = flags.fresh_grace_ms.unwrap_or(flags.grace_ms);
    let clients = Arc::new(Clients {
        grace: build((grace > 0).then_some(grace)),
        plain: build(None),
        seed,
        chaos_start_ns,
    });
    let (probes_tx, probes) = crossbeam_channel::unbounded();
    let key_probe = {
        let urls = urls.clone();
        std::thread::spawn(move || crate::keys::run(id, urls, probes))
    };
    let (shared, canceller) = Shared::start(probes_tx);
    let probe_end = Arc::new(AtomicU64::new(0));
    let probe = {
        let probe_end = Arc::clone(&probe_end);
        std::thread::spawn(move || crate::stall_probe(&probe_end, true))
    };
    let conn = redis::Client::open(data.as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("connect to the data node");
    let mut worker = Worker {
        client: id,
        thread: 0,
        clients: Arc::clone(&clients),
        variant: "-",
        data: conn,
        rng: Rng::new(seed ^ (id as u64).wrapping_mul(0xA24B_AED4_963E_E407)),
        busy: Arc::new(Busy::default()),
        shared: Arc::clone(&shared),
        log: Vec::new(),
        flags,
        waits: 0,
        armed: 0,
        waited_at_end: 0,
    };
    // Broken on purpose (`--fresh-grace-ms`): attempts for 1.5 s, to meet a failover's window.
    let attempts = worker.rng.range(1, 2);
    let broken_until = now_ns() + 1_500 * MS;
    let mut made = 0;
    while made < attempts || (flags.fresh_grace_ms.is_some() && now_ns() < broken_until) {
        made += 1;
        let res = resource(worker.rng.below(RESOURCES as u64) as usize);
        let ttl = Duration::from_millis(worker.rng.range(TTL_MIN_MS, TTL_MAX_MS));
        let rl = worker.rl();
        let (call_start, _, result) = if worker.rng.chance(0.5) {
            worker.call(0, &res, || rl.lock(&res, ttl))
        } else {
            worker.call(1, &res, || rl.try_lock(&res, ttl))
        };
        if let Ok(lock) = result {
            worker.hold(lock, &res, ttl, call_start, crate::keys::KeyKind::Plain);
        }
    }
    worker.ask_leader();
    worker.watch_leader(now_ns() + 800 * MS);
    let mut log = std::mem::take(&mut worker.log);
    drop(worker);
    drop(shared);
    canceller.join().expect("canceller panicked");
    log.extend(key_probe.join().expect("key probe panicked"));
    probe_end.store(1, Ordering::Relaxed);
    let stalls = probe.join().expect("stall probe panicked");
    log.extend(
        stalls
            .all
            .iter()
            .map(|(from, to)| format!("L {id} {from} {to}")),
    );
    log.extend(
        stalls
            .one_core
            .iter()
            .map(|(core, from, to)| format!("LC {id} {core} {from} {to}")),
    );
    log.extend(
        stalls
            .map
            .iter()
            .map(|(from, to)| format!("LM {id} {from} {to}")),
    );
    drop(clients);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&log_path).expect("log file"));
    for line in &log {
        writeln!(file, "{line}").expect("write log");
    }
    file.flush().expect("write log");
}

/// What the fresh clients did, for the summary and rule (cov).
#[derive(Debug, Default)]
pub struct Stats {
    pub started: usize,
    /// Started while a master of the group or the cluster was failing over: from the kill, the
    /// stop or the failover command until every sentinel switched (plus `D` after a
    /// `SENTINEL FAILOVER`), or until the cluster's replica was promoted.
    pub during_failover: usize,
    pub attempts: usize,
    pub acquired: usize,
    pub acquired_with_grace: usize,
    /// Calls of `leader`, and the answers of `leader` and observer reports el4 checked.
    pub leader_calls: usize,
    pub reports: usize,
}

pub fn stats(
    logs: &crate::checker::Logs,
    record: &crate::schedule::Record,
    runs: &[FreshRun],
) -> Stats {
    let mut windows: Vec<(u64, u64)> = record
        .group
        .iter()
        .filter(|g| g.step.action != crate::sentinel::GroupAction::Replica)
        .map(|g| {
            let d = crate::sentinel::SENTINEL_D_MS * MS;
            (g.start, g.switched.map_or(u64::MAX, |s| s.0 + d))
        })
        .collect();
    windows.extend(
        record
            .failovers
            .iter()
            .map(|f| (f.start, f.promoted.unwrap_or(u64::MAX))),
    );
    let fresh = |client: usize| client >= FRESH_BASE;
    let acquiring = || {
        logs.calls
            .iter()
            .filter(|c| fresh(c.client) && c.acquires() && c.resource.starts_with("chaos:r"))
    };
    Stats {
        started: runs.len(),
        during_failover: runs
            .iter()
            .filter(|r| windows.iter().any(|w| w.0 <= r.started && r.started <= w.1))
            .count(),
        attempts: acquiring().count(),
        acquired: acquiring().filter(|c| c.outcome == "ok").count(),
        acquired_with_grace: acquiring()
            .filter(|c| c.outcome == "ok" && c.variant == "g")
            .count(),
        leader_calls: logs
            .calls
            .iter()
            .filter(|c| fresh(c.client) && c.op == "leader")
            .count(),
        reports: logs.observed.iter().filter(|o| fresh(o.client)).count(),
    }
}

/// Rule (cov) for fresh clients (the run started some, during a failover too where it has
/// failovers, and they acquired and read the leader) and for the Sentinel group's faults.
pub fn check_coverage(
    stats: &Stats,
    record: &crate::schedule::Record,
    sentinel: bool,
    verdict: &mut crate::checker::Verdict,
) {
    let failovers = !record.group.is_empty() || !record.failovers.is_empty();
    let mut classes = vec![
        ("fresh clients", stats.started),
        (
            "fresh clients started during a failover",
            if sentinel && failovers {
                stats.during_failover
            } else {
                1
            },
        ),
        ("acquisitions by fresh clients", stats.acquired),
        ("leader reads by fresh clients", stats.reports),
    ];
    if sentinel {
        classes.extend(crate::sentinel::coverage(record));
    }
    for (what, n) in classes {
        if n == 0 {
            verdict.fail(format!(
                "(cov) the run had no {what}: it tested nothing of them"
            ));
        }
    }
}
