//! The demo: workers contend for one resource, each doing a deliberately non-atomic
//! read-modify-write on a shared counter inside the lock, while a minority of the nodes hangs
//! (SIGSTOP) and crashes (SIGKILL) part-way through. A lost update would mean two holders at once.
//!
//! With `REDLOCK_NODES` unset it starts 5 local redis-server nodes itself (and injects faults);
//! with `REDLOCK_NODES=redis://h1:p1,redis://h2:p2,...` it runs against those (no faults).
//! `REDLOCK_DEMO_SECONDS` sets the length (default 10), `REDLOCK_DEMO_WORKERS` the workers (6).
//!
//! `--timeline FILE` also writes what happened when, as JSON lines (`t`: seconds since the
//! start), for `examples/dashboard.py` to draw: first the run (`"type": "run"`, `nodes`,
//! `workers`, `seconds`), then each acquisition attempt of the workers
//! (`"type": "acquire"`, `outcome`, `latency_ms`, `t` when it began), each fault the demo
//! injects (`"type": "fault"`, `node`, `action`: hang, resume, crash, restart) and the client's
//! node events (`"type": "event"`, `kind`, `node`, `reason`). They are kept in memory and written
//! at the end, so that recording does not slow the workload down.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use redquorum::{Error, Event, Redlock};

const RESOURCE: &str = "demo:counter";

#[derive(Default)]
struct Stats {
    acquired: AtomicU64,
    not_acquired: AtomicU64,
    no_quorum: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `--timeline` record: JSON lines, kept in memory until the end of the run.
struct Timeline {
    started: Instant,
    /// The same moment by the wall clock, which the library's events are stamped with.
    started_wall: SystemTime,
    lines: Mutex<Vec<(f64, String)>>,
}

impl Timeline {
    fn new() -> Timeline {
        Timeline {
            started: Instant::now(),
            started_wall: SystemTime::now(),
            lines: Mutex::new(Vec::new()),
        }
    }

    fn since_start(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }

    fn push(&self, t: f64, line: String) {
        self.lines.lock().unwrap().push((t, line));
    }

    fn acquire_line(&self, began: Instant, outcome: &str, latency_us: u64) -> (f64, String) {
        let t = self.since_start(began);
        let line = format!(
            r#"{{"t": {t:.6}, "type": "acquire", "outcome": "{outcome}", "latency_ms": {:.3}}}"#,
            latency_us as f64 / 1000.0
        );
        (t, line)
    }

    fn fault(&self, node: &str, action: &str) {
        let t = self.since_start(Instant::now());
        self.push(
            t,
            format!(
                r#"{{"t": {t:.6}, "type": "fault", "node": {}, "action": "{action}"}}"#,
                json_string(node)
            ),
        );
    }

    /// A node event of the library (the others are left out).
    fn event(&self, e: &Event) {
        let kind = e.kind.name();
        if !kind.starts_with("node_") {
            return;
        }
        // Events of the moment the listener started may come from before `started_wall`.
        let t = match e.at.duration_since(self.started_wall) {
            Ok(d) => d.as_secs_f64(),
            Err(early) => -early.duration().as_secs_f64(),
        };
        let optional = |s: &Option<String>| s.as_deref().map_or("null".into(), json_string);
        self.push(
            t,
            format!(
                r#"{{"t": {t:.6}, "type": "event", "kind": "{kind}", "node": {}, "reason": {}}}"#,
                optional(&e.node),
                optional(&e.reason)
            ),
        );
    }

    /// Writes the lines in time order; returns how many.
    fn write(&self, out: std::fs::File) -> std::io::Result<usize> {
        let mut lines = std::mem::take(&mut *self.lines.lock().unwrap());
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = std::io::BufWriter::new(out);
        for (_, line) in &lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        Ok(lines.len())
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The command line: nothing, or `--timeline FILE`. The file is created before the run, so that
/// a bad path fails at once rather than after it.
fn timeline_file() -> Option<(String, std::fs::File)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = match args.as_slice() {
        [] => return None,
        [flag, path] if flag == "--timeline" => path.clone(),
        [arg] if arg.starts_with("--timeline=") => arg["--timeline=".len()..].to_owned(),
        _ => {
            eprintln!("usage: demo [--timeline FILE]");
            std::process::exit(2);
        }
    };
    match std::fs::File::create(&path) {
        Ok(f) => Some((path, f)),
        Err(e) => {
            eprintln!("cannot write the timeline to {path}: {e}");
            std::process::exit(1);
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn main() {
    let timeline_out = timeline_file();
    let seconds = env_number("REDLOCK_DEMO_SECONDS", 10).max(2);
    let workers = env_number("REDLOCK_DEMO_WORKERS", 6).max(1);
    let given = std::env::var("REDLOCK_NODES")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let mut cluster = None;
    let urls: Vec<String> = match &given {
        Some(list) => list.split(',').map(|s| s.trim().to_owned()).collect(),
        None => {
            println!("starting 5 local redis-server nodes (set REDLOCK_NODES to use your own)");
            let c = support::Cluster::start(5);
            let urls = c.urls();
            cluster = Some(c);
            urls
        }
    };
    println!("nodes: {}", urls.join(" "));
    let rl = match Redlock::builder()
        .nodes(&urls)
        .retry_count(50)
        .retry_delay(Duration::from_millis(5))
        .retry_jitter(Duration::from_millis(5))
        .build()
    {
        Ok(rl) => rl,
        Err(e) => {
            eprintln!("cannot start the client: {e}");
            std::process::exit(1);
        }
    };

    let timeline = timeline_out.as_ref().map(|_| Arc::new(Timeline::new()));
    let _listening = match &timeline {
        Some(tl) => {
            let tl = Arc::clone(tl);
            match rl.on_event(move |e| tl.event(e)) {
                Ok(listening) => Some(listening),
                Err(e) => {
                    eprintln!("cannot listen for events: {e}");
                    std::process::exit(1);
                }
            }
        }
        None => None,
    };

    let stats = Arc::new(Stats::default());
    let counter = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = timeline.as_ref().map_or_else(Instant::now, |tl| tl.started);
    if let Some(tl) = &timeline {
        let nodes: Vec<String> = rl
            .node_status()
            .iter()
            .map(|s| json_string(&s.address))
            .collect();
        tl.push(
            0.0,
            format!(
                r#"{{"t": 0.0, "type": "run", "nodes": [{}], "workers": {workers}, "seconds": {seconds}}}"#,
                nodes.join(", ")
            ),
        );
    }
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (rl, stats, counter, stop, timeline) = (
                rl.clone(),
                Arc::clone(&stats),
                Arc::clone(&counter),
                Arc::clone(&stop),
                timeline.clone(),
            );
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                // This worker's attempts, handed to the timeline at the end.
                let mut attempts = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let result = rl.lock(RESOURCE, Duration::from_secs(2));
                    // One measurement for the summary and the timeline, so that they agree.
                    let took_us = t.elapsed().as_micros() as u64;
                    if let Some(tl) = &timeline {
                        let outcome = match &result {
                            Ok(_) => "acquired",
                            Err(Error::NotAcquired { .. }) => "refused",
                            Err(Error::NoQuorum { .. }) => "no_quorum",
                            Err(_) => "error",
                        };
                        attempts.push(tl.acquire_line(t, outcome, took_us));
                    }
                    match result {
                        Ok(lock) => {
                            latencies.push(took_us);
                            let seen = counter.load(Ordering::SeqCst);
                            std::thread::sleep(Duration::from_micros(200));
                            counter.store(seen + 1, Ordering::SeqCst);
                            stats.acquired.fetch_add(1, Ordering::Relaxed);
                            let _ = lock.release();
                        }
                        Err(Error::NotAcquired { .. }) => {
                            stats.not_acquired.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            stats.no_quorum.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                stats.latencies_us.lock().unwrap().extend(latencies);
                if let Some(tl) = &timeline {
                    tl.lines.lock().unwrap().append(&mut attempts);
                }
            })
        })
        .collect();

    // The fault schedule, as fractions of the run: hang one node, crash another, heal both.
    let mut events: Vec<String> = Vec::new();
    let mut schedule: Vec<(f64, &str, usize)> = if cluster.is_some() {
        vec![
            (0.2, "hang", 1),
            (0.4, "kill", 3),
            (0.6, "resume", 1),
            (0.8, "restart", 3),
        ]
    } else {
        Vec::new()
    };
    let total = Duration::from_secs(seconds);
    let mut last_report = Instant::now();
    let mut last_count = 0;
    while started.elapsed() < total {
        std::thread::sleep(Duration::from_millis(50));
        let at = started.elapsed().as_secs_f64() / total.as_secs_f64();
        while let Some(&(when, what, i)) = schedule.first() {
            if at < when {
                break;
            }
            schedule.remove(0);
            let node = &mut cluster
                .as_mut()
                .expect("faults only on our own nodes")
                .nodes[i];
            match what {
                "hang" => node.hang(),
                "kill" => node.kill(),
                "resume" => node.resume(),
                _ => node.restart(),
            }
            let event = format!(
                "{:>5.1}s  {what} node {i} (127.0.0.1:{})",
                started.elapsed().as_secs_f64(),
                node.port
            );
            println!("  ! {event}");
            if let Some(tl) = &timeline {
                let action = if what == "kill" { "crash" } else { what };
                tl.fault(&format!("127.0.0.1:{}", node.port), action);
            }
            events.push(event);
        }
        if last_report.elapsed() >= Duration::from_secs(1) {
            let n = stats.acquired.load(Ordering::Relaxed);
            println!(
                "{:>5.1}s  acquisitions {n:>7}  ({:>5}/s)  counter {:>7}  not acquired {}  no quorum {}",
                started.elapsed().as_secs_f64(),
                ((n - last_count) as f64 / last_report.elapsed().as_secs_f64()) as u64,
                counter.load(Ordering::SeqCst),
                stats.not_acquired.load(Ordering::Relaxed),
                stats.no_quorum.load(Ordering::Relaxed),
            );
            last_count = n;
            last_report = Instant::now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }

    let acquired = stats.acquired.load(Ordering::Relaxed);
    let count = counter.load(Ordering::SeqCst);
    let mut latencies = stats.latencies_us.lock().unwrap().clone();
    latencies.sort_unstable();
    println!();
    println!(
        "summary ({workers} workers, {seconds} s, {} nodes)",
        urls.len()
    );
    println!("  acquisitions       {acquired}");
    println!(
        "  lost updates       {} (counter {count})",
        acquired.saturating_sub(count)
    );
    println!(
        "  gave up            not acquired {}, no quorum {}",
        stats.not_acquired.load(Ordering::Relaxed),
        stats.no_quorum.load(Ordering::Relaxed)
    );
    println!(
        "  acquire latency    p50 {:.2} ms, p99 {:.2} ms",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99)
    );
    println!(
        "  node events        {}",
        if events.is_empty() { "none" } else { "" }
    );
    for e in &events {
        println!("    {e}");
    }
    for s in rl.node_status() {
        println!(
            "  node {:<21} connected {:<5} connections made {}  restarts seen {}",
            s.address, s.connected, s.connects, s.restarts
        );
    }
    if let (Some(tl), Some((path, file))) = (&timeline, timeline_out) {
        drop(_listening); // no event comes in while the lines are written
        match tl.write(file) {
            Ok(n) => println!("  timeline           {n} lines in {path}"),
            Err(e) => {
                eprintln!("cannot write the timeline to {path}: {e}");
                std::process::exit(1);
            }
        }
    }
    if acquired != count {
        eprintln!("SAFETY VIOLATION: two holders at once");
        std::process::exit(1);
    }
}
