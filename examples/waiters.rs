//! Waiters on one busy resource: the Redis commands they cause, how soon one of them gets the
//! lock after a release, and whether they get it in the order they came.
//!
//! 50 waiter threads take turns on one resource: each holds it for a hold (`--hold-ms`, a list,
//! default `100,20`), releases it, steps back for 2⅓ times that (or `--step-ms`) and queues
//! again, for `--seconds` (default 8) per mode, against 5 local redis-server nodes started here.
//! (Not a whole multiple of the hold: a thread coming back exactly as another releases kept the
//! cores awake at each release and made wake-ups look about 0.4 ms faster than they are on an
//! idle machine.) For each hold the modes are: polling on `retry_delay` (200 ms ± 100 ms, the
//! defaults) in one client; then for each number of processes in `--processes` (default
//! `1,5,25`; 1: all waiters in one client of this process, else spread over that many
//! processes, this program again with `--child`), release notifications with `fair(false)`
//! (`notify`: one waiter per client tries on each release) and with the default queue across
//! processes (`fair`, `src/notify/queue.rs`).
//!
//! Reported per mode, one JSON line each: commands per second the nodes ran (`INFO stats`
//! `total_commands_processed` deltas, summed over the nodes), handovers, the wake-up latency
//! from a release to the next acquisition (median, p90, the longest, and how many took over
//! 100 ms: stalls; measured from the holder's call to `release`), the median time that call
//! took (`release_p50_ms`: until a quorum answered, which the next holder's acquisition often
//! beats), per handover the commands the nodes
//! ran (`commands_per_handover`, script-internal ones included, so a release is 4 on each node:
//! EVALSHA, GET, DEL, PUBLISH), the same with the clients' starts and ends
//! (`commands_per_handover_with_starts`: from before the clients are built, or their processes
//! start, to after they closed and exited), the same in the steady part of the run
//! (`commands_per_handover_steady`: from 1 s after the start, when every waiter has come at once
//! and each client has loaded its scripts, to 100 ms before the end, when every wait ends and
//! makes its last try; `steady_handovers` of them), the commands the clients sent
//! (`sent_per_handover`), and the calls per command name in the steady part
//! (`per_handover_by_command`), and arrival-order inversions per 1,000 handovers: acquisitions whose `acquire`
//! was called after that of another which got the lock later, leaving out the first second
//! (when every waiter comes at once), with no margin and with 5 ms. Times come from
//! `CLOCK_MONOTONIC`, which all processes of the host share.
//!
//! `cargo run --release --example waiters [-- --seconds S --waiters W --hold-ms H,H
//! --step-ms S --processes P,P --svg FILE]`; `--svg` also charts commands per hand-over against processes.

#[path = "chart/mod.rs"]
mod chart;
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redquorum::{LockRequest, Redlock};
use support::Cluster;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Now on the host's monotonic clock, in ns: comparable across this host's processes.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A release (before it was sent) or an acquisition (once it returned, with when its `acquire`
/// was called), at `now_ns` times.
#[derive(Clone, Copy)]
enum Event {
    /// When the holder called `release`, and how long the call took (ns).
    Released {
        at: u64,
        took: u64,
    },
    Acquired {
        arrived: u64,
        at: u64,
    },
}

impl Event {
    fn at(self) -> u64 {
        match self {
            Event::Released { at: t, .. } | Event::Acquired { at: t, .. } => t,
        }
    }
}

/// How a waiter waits.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Polling on its `retry_delay`.
    Poll,
    /// Woken by release notifications, one waiter per client trying (`fair(false)`).
    Notify,
    /// In the queue across processes (the default).
    Fair,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Poll => "poll",
            Mode::Notify => "notify",
            Mode::Fair => "fair",
        }
    }

    fn parse(s: &str) -> Mode {
        match s {
            "poll" => Mode::Poll,
            "notify" => Mode::Notify,
            "fair" => Mode::Fair,
            other => panic!("unknown mode {other:?}"),
        }
    }
}

/// `waiters` threads sharing `rl` take turns on `resource` until `end_ns`; their events.
fn take_turns(
    rl: &Redlock,
    resource: &str,
    mode: Mode,
    waiters: usize,
    hold: Duration,
    end_ns: u64,
) -> Vec<Event> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..waiters)
        .map(|_| {
            let (rl, resource, events) = (rl.clone(), resource.to_owned(), Arc::clone(&events));
            std::thread::spawn(move || {
                while now_ns() < end_ns {
                    let left = Duration::from_nanos(end_ns.saturating_sub(now_ns()));
                    let request = LockRequest::new(&resource, Duration::from_secs(10))
                        .wait(left)
                        .notifications(mode != Mode::Poll)
                        .fair(mode == Mode::Fair);
                    let arrived = now_ns();
                    let lock = match rl.acquire(&request) {
                        Ok(lock) => lock,
                        // The wait ended at the end of the run.
                        Err(redquorum::Error::NotAcquired { .. }) if now_ns() >= end_ns => break,
                        Err(e) => {
                            // A waiter gone early would lighten the load the figures claim.
                            eprintln!("waiters: a waiter stopped early: {e}");
                            break;
                        }
                    };
                    let at = now_ns();
                    if at >= end_ns {
                        // A last try at the wait's deadline, after the measured time.
                        break;
                    }
                    events.lock().unwrap().push(Event::Acquired { arrived, at });
                    std::thread::sleep(hold);
                    let released = now_ns();
                    let _ = lock.release();
                    let took = now_ns() - released;
                    events
                        .lock()
                        .unwrap()
                        .push(Event::Released { at: released, took });
                    // Step back, so that the next holder is one of the waiters, not the thread
                    // that just released; then queue again.
                    std::thread::sleep(step_back(hold));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    std::mem::take(&mut *events.lock().unwrap())
}

/// How long a waiter steps back after its release: `--step-ms`, or 2⅓ holds.
fn step_back(hold: Duration) -> Duration {
    text_arg("--step-ms")
        .and_then(|ms| ms.parse().ok())
        .map_or(hold * 2 + hold / 3, Duration::from_millis)
}

/// Wake-ups in ms: from each release to the acquisition that follows it.
fn wake_ups(mut events: Vec<Event>) -> Vec<f64> {
    events.sort_by_key(|e| e.at());
    let mut released = None;
    let mut wake = Vec::new();
    for e in events {
        match e {
            Event::Released { at, .. } => released = Some(at),
            Event::Acquired { at, .. } => {
                if let Some(r) = released.take() {
                    wake.push(at.saturating_sub(r) as f64 / 1e6);
                }
            }
        }
    }
    wake
}

/// Acquisitions that overtook a waiter: some other acquisition's `acquire` was called more than
/// `margin_ns` before this one's, and returned after it. Not those that arrived in the first
/// second, when every waiter calls `acquire` at once and no order is meant.
fn inversions(events: &[Event], margin_ns: u64) -> usize {
    let start = events
        .iter()
        .filter_map(|e| match *e {
            Event::Acquired { arrived, .. } => Some(arrived),
            Event::Released { .. } => None,
        })
        .min()
        .unwrap_or(0);
    let mut got: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Acquired { arrived, at } => Some((at, arrived)),
            Event::Released { .. } => None,
        })
        .collect();
    got.sort();
    // From the last acquisition back: the earliest arrival among those acquired later.
    let mut earliest_later = u64::MAX;
    let mut overtook = 0;
    for &(_, arrived) in got.iter().rev() {
        if earliest_later.saturating_add(margin_ns) < arrived && arrived > start + 1_000_000_000 {
            overtook += 1;
        }
        earliest_later = earliest_later.min(arrived);
    }
    overtook
}

/// The commands the nodes ran in the steady part of a run: from one second after its start
/// (when every waiter has called `acquire` at once, each client has loaded its scripts and
/// tried once) to 100 ms before its end (when every waiter's wait ends together and each makes
/// a last try), with the hand-overs whose release fell within it.
struct Steady {
    from: u64,
    to: u64,
    commands: u64,
    /// Calls per command name (`INFO commandstats`), `INFO` itself left out.
    calls: std::collections::BTreeMap<String, u64>,
}

impl Steady {
    /// Samples the nodes at both ends of the window of a run that started at `start` (ns) for
    /// `length`; `None` for a run too short to have one.
    fn measure(cluster: &Cluster, start: u64, length: Duration) -> Option<Steady> {
        let (from, to) = (
            start + 1_000_000_000,
            (start + length.as_nanos() as u64).checked_sub(100_000_000)?,
        );
        if to <= from {
            return None;
        }
        let sleep_until =
            |t: u64| std::thread::sleep(Duration::from_nanos(t.saturating_sub(now_ns())));
        sleep_until(from);
        let (c0, b0) = (cluster.commands_processed(), by_command(cluster));
        sleep_until(to);
        let (c1, b1) = (cluster.commands_processed(), by_command(cluster));
        let calls = b1
            .into_iter()
            .filter(|(name, _)| name != "info")
            .map(|(name, n)| {
                let d = n - b0.get(&name).copied().unwrap_or(0);
                (name, d)
            })
            .collect();
        // The two samples' own `INFO` calls (two per node) are not the waiters'.
        let infos = 2 * cluster.nodes.len() as u64;
        Some(Steady {
            from,
            to,
            commands: (c1 - c0).saturating_sub(infos),
            calls,
        })
    }
}

/// The resource one mode's waiters take turns on.
fn resource(mode: Mode, processes: usize, hold: Duration) -> String {
    format!("busy-{}-{processes}-{}", mode.name(), hold.as_millis())
}

/// One mode: the waiters in one client of this process, or spread over `processes` children.
/// Prints its JSON line and returns it.
fn run(
    cluster: &Cluster,
    mode: Mode,
    waiters: usize,
    processes: usize,
    hold: Duration,
    length: Duration,
) -> String {
    let resource = resource(mode, processes, hold);
    let calls_before = by_command(cluster);
    let (started, start) = std::sync::mpsc::channel();
    let ((events, before, sent_before, elapsed), steady) = std::thread::scope(|s| {
        let steady = s.spawn(move || {
            start
                .recv()
                .ok()
                .and_then(|t| Steady::measure(cluster, t, length))
        });
        let run = if processes == 0 {
            let rl = Redlock::builder().nodes(cluster.urls()).build().unwrap();
            let (before, sent_before, start) =
                (cluster.commands_processed(), sent(cluster), now_ns());
            let _ = started.send(start);
            let events = take_turns(
                &rl,
                &resource,
                mode,
                waiters,
                hold,
                start + length.as_nanos() as u64,
            );
            (events, before, sent_before, now_ns() - start)
        } else {
            children(cluster, mode, waiters, processes, hold, length, started)
        };
        (run, steady.join().unwrap())
    });
    // Hand-overs whose release fell within the steady window.
    let steady_handovers = steady.as_ref().map_or(0, |w| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Released { at, .. } if (w.from..w.to).contains(at)))
            .count()
    });
    // Waiters that call `acquire` within a few ms of each other reach the queue node in either
    // order (the first try, the subscription): only larger leads count, besides all of them.
    // Per 1,000 hand-overs after the first second.
    let calls_after = by_command(cluster);
    // Every command from before the clients were built to after they closed (processes
    // started and exited), but the samples' own `INFO`.
    let with_starts: u64 = calls_after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, n)| n - calls_before.get(name).copied().unwrap_or(0))
        .sum();
    let per_steady = |n: u64| n as f64 / steady_handovers.max(1) as f64;
    let overtook = inversions(&events, 0);
    let overtook_5ms = inversions(&events, 5_000_000);
    let elapsed = elapsed as f64 / 1e9;
    let issued = cluster.commands_processed() - before;
    let sent = sent(cluster) - sent_before;
    let mut releases: Vec<f64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Released { took, .. } => Some(took as f64 / 1e6),
            Event::Acquired { .. } => None,
        })
        .collect();
    releases.sort_by(f64::total_cmp);
    let release_p50 = releases
        .get(releases.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    let mut l = wake_ups(events);
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if l.is_empty() {
            f64::NAN
        } else {
            l[((l.len() - 1) as f64 * p).round() as usize]
        }
    };
    let line = format!(
        "{{\"mode\":\"{}\",\"nodes\":{},\"waiters\":{waiters},\"processes\":{},\"hold_ms\":{},\
         \"seconds\":{elapsed:.1},\"commands_per_s\":{:.0},\"handovers\":{},\
         \"commands_per_handover\":{:.1},\"commands_per_handover_with_starts\":{:.1},\
         \"steady_handovers\":{steady_handovers},\
         \"commands_per_handover_steady\":{},\"sent_per_handover\":{:.1},\"wake_p50_ms\":{:.1},\
         \"wake_p90_ms\":{:.1},\"wake_max_ms\":{:.1},\"wake_over_100ms\":{},\"release_p50_ms\":{release_p50:.1},\"inversions_per_1000\":{:.1},\"inversions_5ms_per_1000\":{:.1},\"per_handover_by_command\":{{{}}}}}",
        mode.name(),
        cluster.nodes.len(),
        processes.max(1),
        hold.as_millis(),
        issued as f64 / elapsed,
        l.len(),
        issued as f64 / l.len().max(1) as f64,
        with_starts as f64 / l.len().max(1) as f64,
        steady.as_ref().map_or("null".to_owned(), |w| format!(
            "{:.1}",
            per_steady(w.commands)
        )),
        sent as f64 / l.len().max(1) as f64,
        pct(0.5),
        pct(0.9),
        pct(1.0),
        l.iter().filter(|&&ms| ms > 100.0).count(),
        overtook as f64 * 1000.0 / l.len().max(1) as f64,
        overtook_5ms as f64 * 1000.0 / l.len().max(1) as f64,
        match &steady {
            Some(w) => w
                .calls
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(name, n)| format!("\"{name}\":{:.1}", per_steady(*n)))
                .collect::<Vec<_>>()
                .join(","),
            None => calls_after
                .iter()
                .filter(|(name, _)| name.as_str() != "info")
                .map(|(name, n)| {
                    let d = n - calls_before.get(name).copied().unwrap_or(0);
                    format!("\"{name}\":{:.1}", d as f64 / l.len().max(1) as f64)
                })
                .collect::<Vec<_>>()
                .join(","),
        }
    );
    println!("{line}");
    line
}

/// Runs the waiters in `processes` children (with notifications), counting the nodes'
/// commands only between all of them having connected and all of them having finished, so
/// that connecting and closing are left out as in the one-process modes. Returns their events,
/// the counts before and how long they ran (ns).
fn children(
    cluster: &Cluster,
    mode: Mode,
    waiters: usize,
    processes: usize,
    hold: Duration,
    length: Duration,
    started: std::sync::mpsc::Sender<u64>,
) -> (Vec<Event>, u64, u64, u64) {
    let exe = std::env::current_exe().unwrap();
    let resource = &resource(mode, processes, hold);
    let mut kids: Vec<_> = (0..processes)
        .map(|i| {
            // The first children take one more waiter when they do not divide evenly.
            let share = waiters / processes + usize::from(i < waiters % processes);
            Command::new(&exe)
                .args(["--child", &cluster.urls().join(","), resource])
                .args(["--waiters", &share.to_string()])
                .args(["--hold-ms", &hold.as_millis().to_string()])
                .args(["--step-ms", &step_back(hold).as_millis().to_string()])
                .args(["--mode", mode.name()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a waiter process")
        })
        .collect();
    let mut outputs: Vec<_> = kids
        .iter_mut()
        .map(|k| BufReader::new(k.stdout.take().unwrap()).lines())
        .collect();
    let mut line = |i: usize| outputs[i].next().unwrap().unwrap();
    for i in 0..processes {
        assert_eq!(line(i), "ready");
    }
    let (before, sent_before, start) = (cluster.commands_processed(), sent(cluster), now_ns());
    let end = start + length.as_nanos() as u64;
    let _ = started.send(start);
    for k in &mut kids {
        writeln!(k.stdin.as_mut().unwrap(), "{end}").unwrap();
    }
    let mut events = Vec::new();
    for i in 0..processes {
        loop {
            let l = line(i);
            let mut parts = l.split(' ');
            let kind = parts.next().unwrap_or("");
            let mut t = || -> u64 { parts.next().unwrap_or("0").parse().unwrap() };
            match kind {
                "A" => {
                    let (arrived, at) = (t(), t());
                    events.push(Event::Acquired { arrived, at })
                }
                "R" => {
                    let (at, took) = (t(), t());
                    events.push(Event::Released { at, took })
                }
                _ => break,
            }
        }
    }
    let elapsed = now_ns() - start;
    // The counts are taken by the caller now; then the children may close and go.
    let counts = (events, before, sent_before, elapsed);
    for mut k in kids {
        drop(k.stdin.take());
        k.wait().unwrap();
    }
    counts
}

/// A child: builds its client, says "ready", reads when to stop, takes turns until then,
/// prints its events and "done", and waits for its stdin to close before closing the client.
fn child(args: &[String]) {
    let urls: Vec<&str> = args[0].split(',').collect();
    let resource = &args[1];
    let rl = Redlock::builder().nodes(&urls).build().unwrap();
    println!("ready");
    let mut input = std::io::stdin().lock();
    let mut end = String::new();
    input.read_line(&mut end).unwrap();
    let end: u64 = end.trim().parse().unwrap();
    let waiters = arg("--waiters", 10) as usize;
    let hold = Duration::from_millis(arg("--hold-ms", 100));
    let mode = text_arg("--mode").map_or(Mode::Fair, |m| Mode::parse(&m));
    let events = take_turns(&rl, resource, mode, waiters, hold, end);
    let mut out = std::io::stdout().lock();
    for e in events {
        match e {
            Event::Acquired { arrived, at } => writeln!(out, "A {arrived} {at}").unwrap(),
            Event::Released { at, took } => writeln!(out, "R {at} {took}").unwrap(),
        }
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
    drop(out);
    let mut rest = String::new();
    let _ = input.read_line(&mut rest);
}

/// Calls per command name (`INFO commandstats`), summed over the nodes.
fn by_command(cluster: &Cluster) -> std::collections::BTreeMap<String, u64> {
    let mut calls = std::collections::BTreeMap::new();
    for node in &cluster.nodes {
        for line in node.info("commandstats").lines() {
            let Some((name, rest)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(":calls="))
            else {
                continue;
            };
            let n: u64 = rest
                .split(',')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            *calls.entry(name.to_owned()).or_default() += n;
        }
    }
    calls
}

/// Commands the clients sent, summed over the nodes: `total_commands_processed` also counts
/// what scripts call (a release is EVALSHA, GET, DEL and PUBLISH), this only what came over
/// the wire.
fn sent(cluster: &Cluster) -> u64 {
    const WIRE: [&str; 7] = [
        "set",
        "evalsha",
        "subscribe",
        "unsubscribe",
        "ping",
        "script|load",
        "script|exists",
    ];
    WIRE.iter().map(|c| cluster.calls(c)).sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child(&args[i + 1..]);
    }
    let seconds = arg("--seconds", 8);
    let waiters = arg("--waiters", 50) as usize;
    let list = |name: &str, default: &str| -> Vec<u64> {
        text_arg(name)
            .unwrap_or_else(|| default.to_owned())
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let holds = list("--hold-ms", "100,20");
    let processes = list("--processes", "1,5,25");
    let cluster = Cluster::start(5);
    let mut lines = Vec::new();
    for &hold in &holds {
        let hold = Duration::from_millis(hold);
        // Polling in one client (one service) as the baseline; then, for each number of
        // processes (1: the waiters in one client of this process), one waiter per client
        // trying on each release (`fair(false)`) against the queue across processes.
        let mut plan = vec![(Mode::Poll, 0)];
        for &p in &processes {
            let p = if p <= 1 { 0 } else { p as usize };
            plan.push((Mode::Notify, p));
            plan.push((Mode::Fair, p));
        }
        for (mode, p) in plan {
            let line = run(
                &cluster,
                mode,
                waiters,
                p,
                hold,
                Duration::from_secs(seconds),
            );
            if mode != Mode::Poll {
                lines.push((
                    format!("{}, {} ms holds", mode.name(), hold.as_millis()),
                    line,
                ));
            }
        }
    }
    if let Some(file) = text_arg("--svg") {
        let points: Vec<(&str, u32, f64)> = lines
            .iter()
            .filter_map(|(series, l)| {
                let number = |field: &str| -> Option<f64> {
                    let at = l.find(&format!("\"{field}\":"))? + field.len() + 3;
                    let end = l[at..].find([',', '}'])?;
                    l[at..at + end].parse().ok()
                };
                Some((
                    series.as_str(),
                    number("processes")? as u32,
                    number("commands_per_handover_steady")
                        .or_else(|| number("commands_per_handover"))?,
                ))
            })
            .collect();
        let caption = format!(
            "{waiters} waiters, {} nodes, {seconds} s per mode (commands from 1 s after the \
             start to 100 ms before the end); fair: the queue across processes, notify: \
             fair(false)\n{}",
            cluster.nodes.len(),
            chart::machine()
        );
        std::fs::write(&file, chart::handover_chart(&points, &caption)).expect("write the chart");
    }
}

/// The text after `name` on the command line.
fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}
