//! Waiters on one busy resource: the Redis commands they cause and how soon one of them gets
//! the lock after a release, with release notifications and with plain polling.
//!
//! 50 waiter threads take turns on one resource: each holds it for `--hold-ms` (default 100),
//! releases it, steps back for 2⅓ times that and queues again, for `--seconds` (default 8) per
//! mode, against 5 local redis-server nodes started here. (Not a whole multiple of the hold: a
//! thread coming back exactly as another releases kept the cores awake at each release and made
//! wake-ups look about 0.4 ms faster than they are on an idle machine.) Reported per mode, one
//! JSON line each: commands per second the nodes ran (`INFO stats` `total_commands_processed`
//! deltas, summed over the nodes), handovers, and the wake-up latency from a release to the next
//! acquisition (median, p90), and per handover both the commands the nodes ran
//! (`commands_per_handover`, script-internal ones included) and the commands the clients sent
//! (`sent_per_handover`). Polling uses the client's `retry_delay` (200 ms ± 100 ms, the
//! defaults). Notifications run twice: all waiters in one client (as in one service), and
//! spread over 5 processes of 10 waiters each (this program again, with `--child`); times come
//! from `CLOCK_MONOTONIC`, which all processes of the host share.
//!
//! `cargo run --release --example waiters [-- --seconds S --waiters W --hold-ms H --svg FILE]`
//!
//! `--svg FILE` also writes a chart of commands per hand-over against the number of processes,
//! one series per mode, from the JSON lines printed.

#[path = "chart/mod.rs"]
mod chart;
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock::{LockRequest, Redlock};
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

/// A release (before it was sent) or an acquisition (once it returned), at a `now_ns` time.
#[derive(Clone, Copy)]
enum Event {
    Released(u64),
    Acquired(u64),
}

impl Event {
    fn at(self) -> u64 {
        match self {
            Event::Released(t) | Event::Acquired(t) => t,
        }
    }
}

/// `waiters` threads sharing `rl` take turns on `resource` until `end_ns`; their events.
fn take_turns(
    rl: &Redlock,
    resource: &str,
    notifications: bool,
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
                        .notifications(notifications);
                    let Ok(lock) = rl.acquire(&request) else {
                        break;
                    };
                    events.lock().unwrap().push(Event::Acquired(now_ns()));
                    std::thread::sleep(hold);
                    events.lock().unwrap().push(Event::Released(now_ns()));
                    let _ = lock.release();
                    // Step back, so that the next holder is one of the waiters, not the thread
                    // that just released; then queue again.
                    std::thread::sleep(hold * 2 + hold / 3);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    std::mem::take(&mut *events.lock().unwrap())
}

/// Wake-ups in ms: from each release to the acquisition that follows it.
fn wake_ups(mut events: Vec<Event>) -> Vec<f64> {
    events.sort_by_key(|e| e.at());
    let mut released = None;
    let mut wake = Vec::new();
    for e in events {
        match e {
            Event::Released(t) => released = Some(t),
            Event::Acquired(t) => {
                if let Some(r) = released.take() {
                    wake.push(t.saturating_sub(r) as f64 / 1e6);
                }
            }
        }
    }
    wake
}

/// One mode: the waiters in one client of this process, or spread over `processes` children.
/// Prints its JSON line and returns it.
fn run(
    cluster: &Cluster,
    notifications: bool,
    waiters: usize,
    processes: usize,
    hold: Duration,
    length: Duration,
) -> String {
    let resource = format!("busy-{notifications}-{processes}");
    let (events, before, sent_before, elapsed) = if processes == 0 {
        let rl = Redlock::builder().nodes(cluster.urls()).build().unwrap();
        let (before, sent_before, start) = (cluster.commands_processed(), sent(cluster), now_ns());
        let events = take_turns(
            &rl,
            &resource,
            notifications,
            waiters,
            hold,
            start + length.as_nanos() as u64,
        );
        (events, before, sent_before, now_ns() - start)
    } else {
        children(cluster, &resource, waiters, processes, hold, length)
    };
    let elapsed = elapsed as f64 / 1e9;
    let issued = cluster.commands_processed() - before;
    let sent = sent(cluster) - sent_before;
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
         \"commands_per_handover\":{:.1},\"sent_per_handover\":{:.1},\"wake_p50_ms\":{:.1},\
         \"wake_p90_ms\":{:.1}}}",
        if notifications { "notify" } else { "poll" },
        cluster.nodes.len(),
        processes.max(1),
        hold.as_millis(),
        issued as f64 / elapsed,
        l.len(),
        issued as f64 / l.len().max(1) as f64,
        sent as f64 / l.len().max(1) as f64,
        pct(0.5),
        pct(0.9)
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
    resource: &str,
    waiters: usize,
    processes: usize,
    hold: Duration,
    length: Duration,
) -> (Vec<Event>, u64, u64, u64) {
    let exe = std::env::current_exe().unwrap();
    let mut kids: Vec<_> = (0..processes)
        .map(|i| {
            // The first children take one more waiter when they do not divide evenly.
            let share = waiters / processes + usize::from(i < waiters % processes);
            Command::new(&exe)
                .args(["--child", &cluster.urls().join(","), resource])
                .args(["--waiters", &share.to_string()])
                .args(["--hold-ms", &hold.as_millis().to_string()])
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
    for k in &mut kids {
        writeln!(k.stdin.as_mut().unwrap(), "{end}").unwrap();
    }
    let mut events = Vec::new();
    for i in 0..processes {
        loop {
            let l = line(i);
            let (kind, t) = l.split_once(' ').unwrap_or((&l, "0"));
            let t: u64 = t.parse().unwrap();
            match kind {
                "A" => events.push(Event::Acquired(t)),
                "R" => events.push(Event::Released(t)),
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
    let events = take_turns(&rl, resource, true, waiters, hold, end);
    let mut out = std::io::stdout().lock();
    for e in events {
        match e {
            Event::Acquired(t) => writeln!(out, "A {t}").unwrap(),
            Event::Released(t) => writeln!(out, "R {t}").unwrap(),
        }
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
    drop(out);
    let mut rest = String::new();
    let _ = input.read_line(&mut rest);
}

/// Commands the clients sent, summed over the nodes: `total_commands_processed` also counts
/// what scripts call (a release is EVALSHA, GET, DEL and PUBLISH), this only what came over
/// the wire.
fn sent(cluster: &Cluster) -> u64 {
    const WIRE: [&str; 6] = [
        "set",
        "evalsha",
        "subscribe",
        "unsubscribe",
        "ping",
        "script|load",
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
    let hold = Duration::from_millis(arg("--hold-ms", 100));
    let cluster = Cluster::start(5);
    let mut lines = Vec::new();
    // Polling and notifications in one client (one service), and notifications with the
    // waiters spread over 5 processes.
    for (notifications, processes) in [(false, 0), (true, 0), (true, 5)] {
        lines.push(run(
            &cluster,
            notifications,
            waiters,
            processes,
            hold,
            Duration::from_secs(seconds),
        ));
    }
    if let Some(i) = args.iter().position(|a| a == "--svg") {
        let caption = format!(
            "{} waiters, {} ms holds, {} nodes, {seconds} s per mode\n{}",
            waiters,
            hold.as_millis(),
            cluster.nodes.len(),
            chart::machine()
        );
        let svg = chart::handover_chart_from_json(&lines, &caption);
        std::fs::write(args.get(i + 1).expect("--svg takes a file name"), svg)
            .expect("write the chart");
    }
}
