//! Waiters on one busy resource: the Redis commands they cause and how soon one of them gets
//! the lock after a release, with release notifications and with plain polling.
//!
//! 50 waiter threads (one client, as in one service) take turns on one resource: each holds it
//! for `--hold-ms` (default 100), releases it, steps back for twice that and queues again, for `--seconds` (default 8) per
//! mode, against 5 local redis-server nodes started here. Reported per mode, one JSON line each:
//! commands per second the nodes ran (`INFO stats` `total_commands_processed` deltas, summed
//! over the nodes), handovers, and the wake-up latency from a release to the next acquisition
//! (median, p90). Polling uses the client's `retry_delay` (200 ms ± 100 ms, the defaults).
//!
//! `cargo run --release --example waiters [-- --seconds S --waiters W --hold-ms H]`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock::{LockOptions, Redlock};
use support::Cluster;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(cluster: &Cluster, notifications: bool, waiters: usize, hold: Duration, length: Duration) {
    let rl = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let resource = format!("busy-{notifications}");
    let last_release: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(Vec::new()));
    let before = cluster.commands_processed();
    let started = Instant::now();
    let end = started + length;
    let threads: Vec<_> = (0..waiters)
        .map(|_| {
            let (rl, resource) = (rl.clone(), resource.clone());
            let (last_release, latencies) = (Arc::clone(&last_release), Arc::clone(&latencies));
            std::thread::spawn(move || {
                while Instant::now() < end {
                    let left = end.saturating_duration_since(Instant::now());
                    let opts = LockOptions::new()
                        .wait_timeout(left)
                        .notifications(notifications);
                    let Ok(lock) = rl.lock_with(&resource, Duration::from_secs(10), opts) else {
                        break;
                    };
                    if let Some(at) = last_release.lock().unwrap().take() {
                        latencies
                            .lock()
                            .unwrap()
                            .push(at.elapsed().as_secs_f64() * 1e3);
                    }
                    std::thread::sleep(hold);
                    *last_release.lock().unwrap() = Some(Instant::now());
                    let _ = lock.release();
                    // Step back, so that the next holder is one of the waiters, not the thread
                    // that just released; then queue again.
                    std::thread::sleep(hold * 2);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let issued = cluster.commands_processed() - before;
    if std::env::var_os("WAITERS_COMMANDSTATS").is_some() {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut cluster.nodes[0].conn())
            .unwrap();
        eprintln!("{stats}");
    }
    let mut l = latencies.lock().unwrap().clone();
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if l.is_empty() {
            f64::NAN
        } else {
            l[((l.len() - 1) as f64 * p).round() as usize]
        }
    };
    println!(
        "{{\"mode\":\"{}\",\"nodes\":{},\"waiters\":{waiters},\"hold_ms\":{},\"seconds\":{elapsed:.1},\
         \"commands_per_s\":{:.0},\"handovers\":{},\"wake_p50_ms\":{:.1},\"wake_p90_ms\":{:.1}}}",
        if notifications { "notify" } else { "poll" },
        cluster.nodes.len(),
        hold.as_millis(),
        issued as f64 / elapsed,
        l.len(),
        pct(0.5),
        pct(0.9)
    );
}

fn main() {
    let seconds = arg("--seconds", 8);
    let waiters = arg("--waiters", 50) as usize;
    let hold = Duration::from_millis(arg("--hold-ms", 100));
    let cluster = Cluster::start(5);
    for notifications in [false, true] {
        run(
            &cluster,
            notifications,
            waiters,
            hold,
            Duration::from_secs(seconds),
        );
    }
}
