//! Waiters on one busy resource: the Redis commands they cause and how soon one of them gets
//! the lock after a release, with release notifications and with plain polling.
//!
//! 50 waiter threads (one client, as in one service) take turns on one resource: each holds it
//! for `--hold-ms` (default 100), releases it, steps back for 2⅓ times that and queues again, for
//! `--seconds` (default 8) per mode, against 5 local redis-server nodes started here. (Not a
//! whole multiple of the hold: a thread coming back exactly as another releases kept the cores
//! awake at each release and made wake-ups look about 0.4 ms faster than they are on an idle
//! machine.) Reported per mode, one JSON line each:
//! commands per second the nodes ran (`INFO stats` `total_commands_processed` deltas, summed
//! over the nodes), handovers, and the wake-up latency from a release to the next acquisition
//! (median, p90), and per handover both the commands the nodes ran (`commands_per_handover`,
//! script-internal ones included) and the commands the clients sent (`sent_per_handover`). Polling uses the client's `retry_delay` (200 ms ±
//! 100 ms, the defaults). Notifications run twice: all waiters in one client, and spread over 5
//! clients (separate connections and subscriptions, as 5 processes would have; one process here,
//! so they share its CPU).
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

fn run(
    cluster: &Cluster,
    notifications: bool,
    waiters: usize,
    clients: usize,
    hold: Duration,
    length: Duration,
) {
    let clients: Vec<Redlock> = (0..clients)
        .map(|_| Redlock::builder().nodes(cluster.urls()).build().unwrap())
        .collect();
    let resource = format!("busy-{notifications}-{}", clients.len());
    let last_release: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(Vec::new()));
    let before = cluster.commands_processed();
    let sent_before = sent(cluster);
    let started = Instant::now();
    let end = started + length;
    let threads: Vec<_> = (0..waiters)
        .map(|i| {
            let (rl, resource) = (clients[i % clients.len()].clone(), resource.clone());
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
                    std::thread::sleep(hold * 2 + hold / 3);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let issued = cluster.commands_processed() - before;
    let sent = sent(cluster) - sent_before;
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
        "{{\"mode\":\"{}\",\"nodes\":{},\"waiters\":{waiters},\"clients\":{},\"hold_ms\":{},\
         \"seconds\":{elapsed:.1},\"commands_per_s\":{:.0},\"handovers\":{},\
         \"commands_per_handover\":{:.1},\"sent_per_handover\":{:.1},\"wake_p50_ms\":{:.1},\
         \"wake_p90_ms\":{:.1}}}",
        if notifications { "notify" } else { "poll" },
        cluster.nodes.len(),
        clients.len(),
        hold.as_millis(),
        issued as f64 / elapsed,
        l.len(),
        issued as f64 / l.len().max(1) as f64,
        sent as f64 / l.len().max(1) as f64,
        pct(0.5),
        pct(0.9)
    );
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
    let seconds = arg("--seconds", 8);
    let waiters = arg("--waiters", 50) as usize;
    let hold = Duration::from_millis(arg("--hold-ms", 100));
    let cluster = Cluster::start(5);
    // Polling, notifications in one client (one service), and notifications with the waiters
    // spread over 5 clients, each with its own connections as 5 processes would have.
    for (notifications, clients) in [(false, 1), (true, 1), (true, 5)] {
        run(
            &cluster,
            notifications,
            waiters,
            clients,
            hold,
            Duration::from_secs(seconds),
        );
    }
}
