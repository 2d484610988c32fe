//! The demo: workers contend for one resource, each doing a deliberately non-atomic
//! read-modify-write on a shared counter inside the lock, while a minority of the nodes hangs
//! (SIGSTOP) and crashes (SIGKILL) part-way through. A lost update would mean two holders at once.
//!
//! With `REDLOCK_NODES` unset it starts 5 local redis-server nodes itself (and injects faults);
//! with `REDLOCK_NODES=redis://h1:p1,redis://h2:p2,...` it runs against those (no faults).
//! `REDLOCK_DEMO_SECONDS` sets the length (default 10), `REDLOCK_DEMO_WORKERS` the workers (6).

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock::{Error, Redlock};

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

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn main() {
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

    let stats = Arc::new(Stats::default());
    let counter = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (rl, stats, counter, stop) = (
                rl.clone(),
                Arc::clone(&stats),
                Arc::clone(&counter),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    match rl.lock(RESOURCE, Duration::from_secs(2)) {
                        Ok(lock) => {
                            latencies.push(t.elapsed().as_micros() as u64);
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
    if acquired != count {
        eprintln!("SAFETY VIOLATION: two holders at once");
        std::process::exit(1);
    }
}
