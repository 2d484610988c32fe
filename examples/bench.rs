//! The benchmark: one JSON line per configuration, all measured in one run against local
//! redis-server nodes it starts itself, so ratios compare like with like on a noisy machine.
//!
//! - `floor`: one thread with a plain redis-rs connection per node doing `SET NX PX` +
//!   `EVALSHA` release, sent to every node and every answer read, on one node and on five:
//!   what one uncontended lock cycle costs without redlock (no token, quorum logic or
//!   workers), on blocking sockets.
//! - `redlock`: uncontended `try_lock` + `release` cycles (each thread its own resource) for
//!   N = 1 and N = 5 nodes at 1 and 4 caller threads.
//! - `hung`: N = 5 with 2 nodes hung (SIGSTOP): acquire latency.
//! - `fenced`: N = 5, 500 sequential one-attempt fenced acquisitions + `release` cycles interleaved with 500
//!   plain ones: the extra cost of the fence write-back round, as a difference of medians.
//! - `allocations`: heap allocations per uncontended acquire + release at N = 5 (all threads,
//!   the node workers included), from a counting global allocator. `-- --allocations` runs
//!   only this, at N = 1 and N = 5.
//! - `held-10k`: resident memory added by 10,000 auto-extended locks held at once, and the
//!   extender's share of a CPU while it keeps them.
//! - `node-redlock`: when `node` and `npm` are on PATH, the same uncontended cycle with
//!   node-redlock v5 and ioredis (installed into a scratch directory on first use) against the
//!   same five nodes, so the ratios to it come out of one run; skipped with a message otherwise.
//! - `clock-guard-on-vs-off`: N = 5, 1000 sequential `try_lock` + `release` cycles with the
//!   clock guard on (the default: `TIME` in each acquire's pipeline) interleaved with 1000 with
//!   it off, as a difference of medians.
//! - `rw-sem-vs-plain`: N = 5, 500 rounds, each one uncontended plain `try_lock` + `release`,
//!   one read lock and one semaphore permit (L = 4, all free) acquired once and released,
//!   interleaved: medians side by side.
//!
//! - `cancel-latency`: N = 5, a waiter parked on a held resource is cancelled, 200 times: time
//!   from `Cancel::cancel` to the acquisition's return.
//!
//! Every timed configuration also reports `cpu_us_per_cycle`: the CPU time the whole process
//! used per cycle (callers and node workers, not the redis servers), from /proc in 10 ms ticks;
//! and `switches_per_cycle`: the context switches of all its threads per cycle, from
//! `getrusage`.
//!
//! `cargo run --release --example bench [-- --seconds S]` (default 3 s per configuration, 2 s
//! with `--cluster`).
//!
//! `-- --latency` runs only the placement question of issue 30: five nodes behind relays that
//! delay them like nodes in one zone, across regions, or with one slow node, and the
//! acquire + release cycle of redlock (which decides on a quorum), the floor (which reads every
//! answer) and node-redlock. `--toxiproxy SERVER` puts Toxiproxy (`SERVER`: its
//! `toxiproxy-server` binary, e.g. from `go install github.com/Shopify/toxiproxy/v2/cmd/server@latest`)
//! in front of the nodes instead of the bench's own relays, with a `latency` toxic on each
//! direction; its latencies are whole milliseconds, so each round trip is rounded up to one.
//!
//! `-- --cost [--repeats R]` runs only the cost question of issue 29: the uncontended cycle on
//! one thread at N = 1 and N = 5 with no event listener, with a listener that logs every event
//! at INFO through the `log` crate (formatted into a sink), and with a metrics exporter that
//! renders the Prometheus text every 100 ms (a scrape every 15 s is usual: this is an upper
//! bound), interleaved R times (default 5), with the medians of CPU per cycle and the ratios
//! to no listener.
//!
//! `-- --faults [--wait] [--seconds S] [--repeats R] [--clients A,B]` runs only the hung-node
//! question of issue 45: the demo's contended workload through phases of S seconds (default 3)
//! with one and two of five nodes hung, resumed, killed and restarted, for redquorum in one
//! process and in five, and for node-redlock and redsync beside it (`examples/faults/mod.rs`
//! says how), R times (default 1); `--clients` runs only those named (`redquorum`,
//! `redquorum-5-processes`, `node-redlock`, `redsync-failfast`).
//!
//! `-- --hot [--repeats R] [--nodes 1,5] [--threads 1,4,16] [--fresh] [--spin]` runs only the
//! hot-node question of issue 30: redlock's uncontended cycle at N = 1 (with `--nodes 1,5` also
//! N = 5) against the naive client with one connection per thread per node, at 1, 4 and 16
//! threads (or those given), interleaved R times (default 3), with the medians and ratios. Each
//! thread locks a key of its own; `--fresh` runs both again with a new key every cycle, and
//! `--spin` runs redlock again with its waits for its own threads sleeping at once instead of
//! looking awake first (`redquorum::set_spinning`).
//!
//! `-- --cluster [--repeats R]` runs only the Redis Cluster question of issue 27: redlock's
//! uncontended cycle with a whole Redis Cluster of three masters (no replicas) as its one node
//! against one standalone master (N = 1); and with three single-master clusters, or that
//! three-master cluster beside two standalone masters, against three standalone masters
//! (N = 3); at 1 and 4 caller threads, interleaved R times (default 3) of 2 s each (unless
//! `--seconds`). Each thread goes round six resources of its own whose hash slots take the
//! three masters in turn (the standalone configurations use the same ones). Prints each run
//! (with `server_cpu_us_per_cycle`: what the configuration's redis-servers used, from /proc),
//! the medians, the commands each master of the three-master cluster ran and the `PUBLISH`
//! messages it sent over the cluster bus (`cluster-masters`), and the ratio of each
//! cluster configuration's medians to its standalone one's (`cluster_n1_over_standalone_n1`,
//! `cluster_x3_over_standalone_n3`, `mixed_n3_over_standalone_n3`: cycles/s below 1, latency
//! or CPU above 1, is the cluster's cost). About 70 s with the defaults.
//!
//! `--svg FILE` also writes a chart (examples/chart): in the default mode, with `--hot` and
//! with `--cluster`, cycles/s by caller threads per client or configuration, one panel per
//! number of nodes (medians over repeats; `--hot` and `--cluster` add CPU per cycle); with
//! `--latency`, the CDF of the acquire + release latency per client, one panel per placement,
//! from the raw samples (the peers write theirs to a file named in `BENCH_SAMPLES`). Clients
//! that could not run are left out. The JSON lines are the same with or without it.

#[path = "chart/mod.rs"]
mod chart;
#[path = "faults/mod.rs"]
mod faults;
#[path = "peers/mod.rs"]
mod peers;
#[path = "../tests/support/mod.rs"]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{AutoExtend, LockRequest, Redlock};
use support::{Cluster, RedisCluster};

/// Counts every allocation of the process.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The per-configuration JSON lines printed so far, kept for `--svg`.
static PRINTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Prints one JSON line and keeps it for the chart.
fn emit(line: String) {
    println!("{line}");
    PRINTED.lock().unwrap().push(line);
}

struct Sample {
    cycles: usize,
    elapsed: Duration,
    /// Per cycle (or per acquire), µs.
    latencies: Vec<f64>,
    /// CPU time the whole process used meanwhile (callers and node workers), in ticks.
    cpu_ticks: u64,
    /// Context switches of the whole process meanwhile (voluntary and not).
    switches: u64,
}

impl Sample {
    fn json(&mut self, name: &str, nodes: usize, threads: usize) -> String {
        let [rate, p50, p99, cpu] = self.figures();
        format!(
            "{{\"config\":\"{name}\",\"nodes\":{nodes},\"threads\":{threads},\"cycles\":{},\
             \"cycles_per_s\":{rate:.0},\"p50_us\":{p50:.1},\"p99_us\":{p99:.1},\"cpu_us_per_cycle\":{cpu:.0},\"switches_per_cycle\":{:.1}}}",
            self.cycles,
            self.switches as f64 / self.cycles.max(1) as f64,
        )
    }

    /// Cycles/s, p50 and p99 (µs), and CPU µs per cycle; sorts the latencies.
    fn figures(&mut self) -> [f64; 4] {
        self.latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let i = ((self.latencies.len() - 1) as f64 * p).round() as usize;
            self.latencies[i]
        };
        [
            self.cycles as f64 / self.elapsed.as_secs_f64(),
            pct(0.50),
            pct(0.99),
            self.cpu_ticks as f64 * 1e4 / self.cycles.max(1) as f64,
        ]
    }
}

/// Runs `cycle` on `threads` threads for `length`; each call returns one latency in µs.
fn measure<F>(threads: usize, length: Duration, make: impl Fn(usize) -> F) -> Sample
where
    F: FnMut(u64) -> f64 + Send + 'static,
{
    let started = Instant::now();
    let ticks = cpu_ticks();
    let switched = switches();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mut cycle = make(t);
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let end = Instant::now() + length;
                let mut i = 0;
                while Instant::now() < end {
                    latencies.push(cycle(i));
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let latencies: Vec<f64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    Sample {
        cycles: latencies.len(),
        elapsed: started.elapsed(),
        latencies,
        cpu_ticks: cpu_ticks() - ticks,
        switches: switches() - switched,
    }
}

/// Threads with a bare redis-rs connection each to each node: each cycle sends `SET NX PX` to
/// every node, reads every answer, then does the same with the `EVALSHA` release. What a
/// thread does on blocking sockets with nothing around it: no token, no quorum logic, no
/// workers; with several threads, a naive client with one connection per thread.
fn floor(cluster: &Cluster, threads: usize, length: Duration) -> Sample {
    floor_at(cluster.urls(), threads, length, Keys::Fixed)
}

/// Which key each cycle locks: one per thread, or a new one each cycle.
#[derive(Clone, Copy, PartialEq)]
enum Keys {
    Fixed,
    Fresh,
}

impl Keys {
    /// The key of cycle `i` of thread `t`, under `prefix`.
    fn of(self, prefix: &str, t: usize, i: u64) -> String {
        match self {
            Keys::Fixed => format!("{prefix}-{t}"),
            Keys::Fresh => format!("{prefix}-{t}-{i}"),
        }
    }
}

/// [`floor`] on nodes at `urls`.
fn floor_at(urls: Vec<String>, threads: usize, length: Duration, keys: Keys) -> Sample {
    const RELEASE: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#;
    measure(threads, length, move |t| {
        let mut conns: Vec<redis::Connection> = urls
            .iter()
            .map(|url| {
                let mut conn = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let _: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(RELEASE)
                    .query(&mut conn)
                    .unwrap();
                conn
            })
            .collect();
        let sha = redis::Script::new(RELEASE).get_hash().to_owned();
        let quorum = conns.len() / 2 + 1;
        move |i| {
            let start = Instant::now();
            let key = keys.of("floor", t, i);
            let token = format!("{i:040}");
            let set = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(10_000)
                .get_packed_command();
            assert!(everywhere(&mut conns, &set, redis::Value::Okay) >= quorum);
            let release = redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(&key)
                .arg(&token)
                .get_packed_command();
            assert!(everywhere(&mut conns, &release, redis::Value::Int(1)) >= quorum);
            start.elapsed().as_secs_f64() * 1e6
        }
    })
}

/// `--hot [--repeats R] [--nodes 1,5] [--threads 1,4,16]`: many caller threads on one node (and
/// on five): redlock's uncontended cycle against the naive client with a connection per thread
/// per node (`floor`), the configurations interleaved R times (default 3) so that machine noise
/// hits all alike. Prints each run, then the medians of cycles/s and CPU per cycle, and
/// redlock's ratio to the floor.
fn hot(one: &Cluster, length: Duration, args: &[String]) {
    let repeats = repeats(args, 3);
    let list = |name: &str, default: &[usize]| -> Vec<usize> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.split(',')
                    .map(|n| n.parse().expect("a comma-separated list of numbers"))
                    .collect()
            })
            .unwrap_or_else(|| default.to_vec())
    };
    let sizes = list("--nodes", &[1]);
    let threads = list("--threads", &[1, 4, 16]);
    let five = sizes.contains(&5).then(|| Cluster::start(5));
    let cluster = |n: usize| match n {
        1 => one,
        5 => five.as_ref().expect("started above"),
        _ => panic!("--nodes takes 1 and/or 5"),
    };
    let clients: Vec<(usize, Redlock)> = sizes.iter().map(|&n| (n, client(cluster(n)))).collect();
    // The fixed-key floor and redlock always; with `--fresh` both again on a new key per cycle;
    // with `--spin` redlock with its waits sleeping at once (`redquorum::set_spinning`).
    let mut variants = vec!["floor", "redlock"];
    if args.iter().any(|a| a == "--fresh") {
        variants.extend(["floor-fresh", "redlock-fresh"]);
    }
    if args.iter().any(|a| a == "--spin") {
        variants.push("redlock-nospin");
    }
    let mut runs: Vec<(&str, usize, usize, [f64; 4])> = Vec::new();
    for _ in 0..repeats {
        for (n, rl) in &clients {
            for &t in &threads {
                for &name in &variants {
                    let keys = if name.ends_with("-fresh") {
                        Keys::Fresh
                    } else {
                        Keys::Fixed
                    };
                    let mut s = if name.starts_with("floor") {
                        floor_at(cluster(*n).urls(), t, length, keys)
                    } else {
                        redquorum::set_spinning(name != "redlock-nospin");
                        let s = cycles_on(rl, t, length, keys);
                        redquorum::set_spinning(true);
                        s
                    };
                    emit(s.json(name, *n, t));
                    let [rate, p50, _, cpu] = s.figures();
                    let switches = s.switches as f64 / s.cycles.max(1) as f64;
                    runs.push((name, *n, t, [rate, p50, cpu, switches]));
                }
            }
        }
    }
    // Medians of cycles/s, p50 (µs), CPU µs and context switches per cycle.
    let median = |name: &str, n: usize, t: usize, k: usize| {
        let mut v: Vec<f64> = runs
            .iter()
            .filter(|r| r.0 == name && r.1 == n && r.2 == t)
            .map(|r| r.3[k])
            .collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for &n in &sizes {
        for &t in &threads {
            let mut line = format!(
                "{{\"config\":\"hot-node\",\"nodes\":{n},\"threads\":{t},\"repeats\":{repeats}"
            );
            for &name in &variants {
                let key = name.replace('-', "_");
                line += &format!(
                    ",\"{key}_cycles_per_s\":{:.0},\"{key}_p50_us\":{:.0},\
                     \"{key}_cpu_us_per_cycle\":{:.1},\"{key}_switches_per_cycle\":{:.1}",
                    median(name, n, t, 0),
                    median(name, n, t, 1),
                    median(name, n, t, 2),
                    median(name, n, t, 3),
                );
            }
            // The ratios: cycles/s and CPU per cycle to the floor of the same keys, and with the
            // spin off to on.
            let ratio = |a: &str, b: &str, k: usize| median(a, n, t, k) / median(b, n, t, k);
            line += &format!(
                ",\"ratio\":{:.2},\"cpu_ratio\":{:.2}",
                ratio("redlock", "floor", 0),
                ratio("redlock", "floor", 2)
            );
            if variants.contains(&"redlock-fresh") {
                line += &format!(
                    ",\"fresh_ratio\":{:.2},\"fresh_cpu_ratio\":{:.2}",
                    ratio("redlock-fresh", "floor-fresh", 0),
                    ratio("redlock-fresh", "floor-fresh", 2)
                );
            }
            if variants.contains(&"redlock-nospin") {
                line += &format!(
                    ",\"nospin_ratio\":{:.2},\"nospin_cpu_ratio\":{:.2},\"nospin_cpu_to_floor\":{:.2}",
                    ratio("redlock-nospin", "redlock", 0),
                    ratio("redlock-nospin", "redlock", 2),
                    ratio("redlock-nospin", "floor", 2)
                );
            }
            println!("{line}}}");
        }
    }
}

/// The configurations of `--cluster`: config, legend in its chart, style.
const CLUSTER_CONFIGS: [(&str, &str, usize); 5] = [
    (
        "standalone-n1",
        "one standalone master",
        chart::style::REDLOCK,
    ),
    (
        "cluster-n1",
        "one 3-master Redis Cluster",
        chart::style::CLUSTER,
    ),
    (
        "standalone-n3",
        "three standalone masters",
        chart::style::REDLOCK,
    ),
    (
        "cluster-x3",
        "three 1-master clusters",
        chart::style::CLUSTER,
    ),
    (
        "mixed-n3",
        "a 3-master cluster + two standalone",
        chart::style::CLUSTER_MIXED,
    ),
];

/// `--cluster [--repeats R]`: a Redis Cluster as a Redlock node against standalone masters
/// (issue 27), the configurations of [`CLUSTER_CONFIGS`] interleaved R times (default 3) at 1
/// and 4 caller threads. Prints each run, the medians, and the ratios of each cluster
/// configuration to its standalone one (N = 1 to N = 1, the N = 3 ones to N = 3); with `svg`,
/// writes the chart there.
fn cluster(one: &Cluster, length: Duration, args: &[String], svg: Option<&str>) {
    let repeats = repeats(args, 3);
    let threads = [1usize, 4];
    // No replicas: they would take CPU from the masters and do nothing for an uncontended cycle.
    let wide = RedisCluster::start(3, 0);
    let singles: Vec<RedisCluster> = (0..3).map(|_| RedisCluster::start(1, 0)).collect();
    let three = Cluster::start(3);
    let keys = spread_keys(&wide, threads[threads.len() - 1]);
    let of = |urls: Vec<String>| Redlock::builder().nodes(urls).build().unwrap();
    // In the order of CLUSTER_CONFIGS.
    let clients = [
        client(one),
        of(vec![wide.url()]),
        client(&three),
        of(singles.iter().map(RedisCluster::url).collect()),
        of(vec![wide.url(), three.nodes[0].url(), three.nodes[1].url()]),
    ];
    let nodes = |i: usize| if i < 2 { 1 } else { 3 };
    // The redis-servers of each configuration, in the same order.
    let servers: [Vec<&support::RedisNode>; 5] = [
        one.nodes.iter().collect(),
        wide.nodes.iter().collect(),
        three.nodes.iter().collect(),
        singles.iter().flat_map(|c| &c.nodes).collect(),
        wide.nodes.iter().chain(&three.nodes[..2]).collect(),
    ];
    // Connected, scripts loaded and every key's master met once before any timing.
    for rl in &clients {
        spread_cycles(rl, &keys, 1, Duration::from_millis(200));
    }
    let counters = |n: &support::RedisNode| {
        (
            commands_processed(n),
            cluster_info(n, "cluster_stats_messages_publish_sent"),
        )
    };
    let before: Vec<(u64, u64)> = wide.nodes.iter().map(counters).collect();
    // (config index, threads, [cycles/s, p50, p99, CPU per cycle, the servers' CPU per cycle],
    // failed cycles) of every run.
    let mut runs: Vec<(usize, usize, [f64; 5], usize)> = Vec::new();
    // Cycles on the 3-master cluster (cluster-n1 and mixed-n3).
    let mut wide_cycles = 0;
    for round in 0..repeats {
        for &t in &threads {
            let mut order: Vec<usize> = (0..clients.len()).collect();
            // Each goes first and last in turn, so that none gets the warmer (or noisier) slot.
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let ticks = server_ticks(&servers[i]);
                let (mut s, failed) = spread_cycles(&clients[i], &keys, t, length);
                let server_cpu =
                    (server_ticks(&servers[i]) - ticks) as f64 * 1e4 / s.cycles.max(1) as f64;
                let mut line = s.json(CLUSTER_CONFIGS[i].0, nodes(i), t);
                line.pop();
                line += &format!(",\"server_cpu_us_per_cycle\":{server_cpu:.0}");
                if failed > 0 {
                    line += &format!(",\"failed\":{failed}");
                }
                emit(line + "}");
                if i == 1 || i == 4 {
                    wide_cycles += s.cycles;
                }
                let [rate, p50, p99, cpu] = s.figures();
                runs.push((i, t, [rate, p50, p99, cpu, server_cpu], failed));
            }
        }
    }
    // What each master of the 3-master cluster did over the runs of cluster-n1 and mixed-n3, by
    // port: the commands it ran (the lowest port, first by address, also gets the clock guard's
    // TIME with every acquire, so an acquire whose key is elsewhere is a pipeline to two
    // masters), and the PUBLISH messages it sent its peers over the cluster bus (a cluster
    // carries each release's PUBLISH to every node).
    let mut after: Vec<(u16, u64, u64)> = wide
        .nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| {
            let (commands, published) = counters(n);
            (n.port, commands - b.0, published - b.1)
        })
        .collect();
    after.sort_unstable();
    let by_port = |pick: fn(&(u16, u64, u64)) -> u64| {
        let listed: Vec<String> = after
            .iter()
            .map(|m| format!("\"{}\":{}", m.0, pick(m)))
            .collect();
        listed.join(",")
    };
    println!(
        "{{\"config\":\"cluster-masters\",\"cycles\":{wide_cycles},\"keys_per_thread\":{},\
         \"commands_by_port\":{{{}}},\"bus_publish_sent_by_port\":{{{}}}}}",
        keys[0].len(),
        by_port(|m| m.1),
        by_port(|m| m.2),
    );
    let median = |i: usize, t: usize| -> [f64; 5] {
        let of: Vec<&[f64; 5]> = runs
            .iter()
            .filter(|r| r.0 == i && r.1 == t)
            .map(|r| &r.2)
            .collect();
        std::array::from_fn(|k| {
            let mut v: Vec<f64> = of.iter().map(|f| f[k]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
    };
    const FIELDS: [&str; 5] = [
        "cycles_per_s",
        "p50_us",
        "p99_us",
        "cpu_us_per_cycle",
        "server_cpu_us_per_cycle",
    ];
    for (i, (config, _, _)) in CLUSTER_CONFIGS.iter().enumerate() {
        for &t in &threads {
            let m = median(i, t);
            let failed: usize = runs
                .iter()
                .filter(|r| r.0 == i && r.1 == t)
                .map(|r| r.3)
                .sum();
            println!(
                "{{\"config\":\"{config}\",\"median_of_runs\":{repeats},\"nodes\":{},\
                 \"threads\":{t},\"cycles_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\
                 \"cpu_us_per_cycle\":{:.0},\"server_cpu_us_per_cycle\":{:.0},\"failed\":{failed}}}",
                nodes(i),
                m[0],
                m[1],
                m[2],
                m[3],
                m[4]
            );
        }
    }
    // Each cluster configuration over its standalone one, as ratios of the medians.
    let pairs = [(1, 0), (3, 2), (4, 2)];
    let ratios: Vec<String> = pairs
        .iter()
        .map(|&(c, s)| {
            let per_threads: Vec<String> = threads
                .iter()
                .map(|&t| {
                    let (mc, ms) = (median(c, t), median(s, t));
                    let fields: Vec<String> = FIELDS
                        .iter()
                        .enumerate()
                        .map(|(k, f)| format!("\"{f}\":{:.2}", mc[k] / ms[k]))
                        .collect();
                    format!("\"t{t}\":{{{}}}", fields.join(","))
                })
                .collect();
            format!(
                "\"{}_over_{}\":{{{}}}",
                CLUSTER_CONFIGS[c].0.replace('-', "_"),
                CLUSTER_CONFIGS[s].0.replace('-', "_"),
                per_threads.join(",")
            )
        })
        .collect();
    println!(
        "{{\"ratios\":{{\"median_of_runs\":{repeats},{}}}}}",
        ratios.join(",")
    );
    if let Some(path) = svg {
        let caption = format!(
            "uncontended acquire + release, each thread cycling over {} resources of its own \
             spread over the 3-master cluster's masters, medians of {repeats} runs of {} s each\n{}",
            keys[0].len(),
            length.as_secs_f64(),
            chart::machine()
        );
        let lines = PRINTED.lock().unwrap();
        write_chart(
            path,
            &chart::figure(
                "Redis Cluster as a node: cycles/s by caller threads",
                &caption,
                &rate_plots(&lines, &CLUSTER_CONFIGS, true),
            ),
        );
    }
}

/// For each of `threads` threads, six resources of its own whose slots take the three masters
/// of `cluster` in turn (two each), so that successive cycles use every master.
fn spread_keys(cluster: &RedisCluster, threads: usize) -> Vec<Vec<String>> {
    const EACH: usize = 2;
    let masters = cluster.nodes.len();
    (0..threads)
        .map(|t| {
            let mut by_master: Vec<Vec<String>> = vec![Vec::new(); masters];
            for j in 0.. {
                if by_master.iter().all(|keys| keys.len() == EACH) {
                    break;
                }
                let key = format!("bench-{t}-{j}");
                let keys = &mut by_master[cluster.master_of(&key)];
                if keys.len() < EACH {
                    keys.push(key);
                }
            }
            (0..EACH)
                .flat_map(|k| by_master.iter().map(move |keys| keys[k].clone()))
                .collect()
        })
        .collect()
}

/// Uncontended `try_lock` + `release` cycles on `threads` threads, thread `t` going round
/// `keys[t]`; a cycle that fails (a node timed out on this busy machine) is counted, not timed.
fn spread_cycles(
    rl: &Redlock,
    keys: &[Vec<String>],
    threads: usize,
    length: Duration,
) -> (Sample, usize) {
    let mut s = measure(threads, length, |t| {
        let (rl, keys) = (rl.clone(), keys[t].clone());
        move |i| {
            let key = &keys[i as usize % keys.len()];
            let start = Instant::now();
            let done = rl
                .try_lock(key, Duration::from_secs(10))
                .is_ok_and(|lock| lock.release().is_ok());
            if done {
                start.elapsed().as_secs_f64() * 1e6
            } else {
                f64::NAN
            }
        }
    });
    let failed = s.latencies.iter().filter(|v| v.is_nan()).count();
    s.latencies.retain(|v| !v.is_nan());
    s.cycles = s.latencies.len();
    assert!(s.cycles > 0, "every cycle failed");
    (s, failed)
}

/// A counter of the node's `CLUSTER INFO` (0 where there is none).
fn cluster_info(node: &support::RedisNode, field: &str) -> u64 {
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query::<String>(&mut node.conn())
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The node's `total_commands_processed`.
fn commands_processed(node: &support::RedisNode) -> u64 {
    node.info("stats")
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Where five nodes are, as round trips from the client (ms), for `--latency`.
const PLACEMENTS: [(&str, [f64; 5]); 3] = [
    // Five nodes in the client's zone.
    ("one-zone", [0.5, 0.5, 0.5, 0.5, 0.5]),
    // Two nodes in the client's region, one in a neighbouring region, two far away.
    ("regions", [1.0, 1.0, 12.0, 70.0, 140.0]),
    // One zone, one node slow to answer (overloaded, a long fork, a far replica set).
    ("one-slow-node", [0.5, 0.5, 0.5, 0.5, 100.0]),
];

/// `--latency`: acquire + release on five nodes behind relays that delay each direction by half
/// a round trip of [`PLACEMENTS`]: redlock (which decides once a quorum has answered), the
/// floor (a bare client that reads every answer before it decides, as redsync does by
/// default), node-redlock (which returns on a quorum too) and redsync with and without
/// `WithFailFast`, one thread each. Prints each run and the medians' ratios; with `svg`, writes
/// the CDFs there, one panel per placement.
fn latency(five: &Cluster, length: Duration, svg: Option<&str>, toxiproxy: Option<&str>) {
    let mut panels = Vec::new();
    let toxi = toxiproxy.map(Toxiproxy::start);
    for (name, rtts) in PLACEMENTS {
        // Toxiproxy's latencies are whole milliseconds.
        let rtts = match toxi {
            Some(_) => rtts.map(f64::ceil),
            None => rtts,
        };
        let _relays: Vec<support::DelayRelay>;
        let ports: Vec<u16> = match &toxi {
            Some(t) => five
                .nodes
                .iter()
                .zip(rtts)
                .enumerate()
                .map(|(i, (n, rtt))| t.proxy(&format!("{name}-n{i}"), n.port, rtt as u64))
                .collect(),
            None => {
                _relays = five
                    .nodes
                    .iter()
                    .zip(rtts)
                    .map(|(n, rtt)| {
                        support::DelayRelay::start(n.port, Duration::from_secs_f64(rtt / 2000.0))
                    })
                    .collect();
                _relays.iter().map(|r| r.port).collect()
            }
        };
        let urls: Vec<String> = ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        let rl = Redlock::builder()
            .nodes(&urls)
            .node_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let mut ours = cycles(&rl, 1, length);
        println!("{}", ours.json(&format!("latency-{name}-redlock"), 5, 1));
        let mut all = floor_at(urls.clone(), 1, length, Keys::Fixed);
        println!("{}", all.json(&format!("latency-{name}-floor"), 5, 1));
        // Where each peer writes its raw samples (µs, one a line), when there is a chart.
        let file = |peer: &str| {
            svg.map(|_| {
                std::env::temp_dir().join(format!(
                    "redlock-bench-{}-{name}-{peer}.samples",
                    std::process::id()
                ))
            })
        };
        let peers = [
            (
                "node_redlock",
                peers::node_redlock_at(&urls, length, file("node_redlock").as_deref()),
            ),
            (
                "redsync",
                peers::redsync_at(&urls, length, false, file("redsync").as_deref()),
            ),
            (
                "redsync_failfast",
                peers::redsync_at(&urls, length, true, file("redsync_failfast").as_deref()),
            ),
        ];
        let p50 = |s: &Sample| s.latencies[s.latencies.len() / 2];
        let mut summary = format!(
            "{{\"config\":\"latency\",\"placement\":\"{name}\",\"relays\":\"{}\",\"rtts_ms\":{rtts:?},\
             \"redlock_p50_ms\":{:.2},\"floor_p50_ms\":{:.2}",
            if toxi.is_some() { "toxiproxy" } else { "bench" },
            p50(&ours) / 1000.0,
            p50(&all) / 1000.0,
        );
        for (peer, line) in &peers {
            let Some(line) = line else { continue };
            println!("{line}");
            let peer_p50 = line
                .split("\"p50_us\":")
                .nth(1)
                .and_then(|v| v.split([',', '}']).next())
                .and_then(|v| v.parse::<f64>().ok());
            if let Some(v) = peer_p50 {
                summary += &format!(
                    ",\"{peer}_p50_ms\":{:.2},\"{peer}_over_redlock\":{:.2}",
                    v / 1000.0,
                    v / p50(&ours)
                );
            }
        }
        println!("{summary}}}");
        if svg.is_some() {
            let ms = |us: &[f64]| us.iter().map(|v| v / 1000.0).collect::<Vec<f64>>();
            let mut series = vec![
                (
                    "redlock".to_owned(),
                    chart::style::REDLOCK,
                    ms(&ours.latencies),
                ),
                (
                    "floor: reads every answer".to_owned(),
                    chart::style::FLOOR,
                    ms(&all.latencies),
                ),
            ];
            for ((peer, line), (label, style)) in peers.iter().zip([
                ("node-redlock v5", chart::style::NODE_REDLOCK),
                ("redsync v4.18", chart::style::REDSYNC),
                ("redsync WithFailFast", chart::style::REDSYNC_FAILFAST),
            ]) {
                let path = file(peer).unwrap();
                let samples: Option<Vec<f64>> = std::fs::read_to_string(&path)
                    .ok()
                    .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect());
                let _ = std::fs::remove_file(&path);
                if let (Some(_), Some(samples)) = (line, samples) {
                    series.push((label.to_owned(), style, ms(&samples)));
                }
            }
            let mut sorted = rtts;
            sorted.sort_by(f64::total_cmp);
            let quorum = sorted[sorted.len() / 2];
            let listed: Vec<String> = rtts.iter().map(|r| format!("{r}")).collect();
            panels.push(chart::CdfPanel {
                title: format!("{name}: round trips {} ms", listed.join(", ")),
                series,
                rules: vec![(
                    2.0 * quorum,
                    format!("2 × the 3rd-fastest round trip ({} ms)", 2.0 * quorum),
                )],
            });
        }
    }
    if let Some(path) = svg {
        let relays = match toxi {
            Some(_) => "Toxiproxy latency toxics, round trips rounded up to whole ms",
            None => "delaying relays (which add about 0.3 ms per round trip)",
        };
        let caption = format!(
            "acquire + release on one thread, five nodes behind {relays}, {} s per client and \
             placement\n{}",
            length.as_secs_f64(),
            chart::machine()
        );
        write_chart(
            path,
            &chart::cdf_chart(
                "Where the nodes are: acquire + release latency",
                &caption,
                "acquire + release, ms",
                true,
                &panels,
            ),
        );
    }
}

/// A `toxiproxy-server` of the bench's own (killed on drop), driven through its HTTP API.
struct Toxiproxy {
    child: std::process::Child,
    api: u16,
}

impl Toxiproxy {
    fn start(binary: &str) -> Toxiproxy {
        let api = support::free_port();
        let child = std::process::Command::new(binary)
            .args(["-host", "127.0.0.1", "-port", &api.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let t = Toxiproxy { child, api };
        let up = support::eventually(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", api)).is_ok()
        });
        assert!(up, "{binary} did not listen on {api} within 10 s");
        t
    }

    /// One HTTP/1.1 request to the API; panics unless it answers 2xx.
    fn post(&self, path: &str, body: &str) {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.api)).expect("API");
        write!(
            conn,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("API request");
        let mut reply = String::new();
        let _ = conn.read_to_string(&mut reply);
        assert!(
            reply.starts_with("HTTP/1.1 2"),
            "toxiproxy {path} {body}: {reply}"
        );
    }

    /// A proxy to the node at `node_port` whose round trip is `rtt_ms` more (half each way,
    /// the odd millisecond on the replies): its listening port.
    fn proxy(&self, name: &str, node_port: u16, rtt_ms: u64) -> u16 {
        let port = support::free_port();
        self.post(
            "/proxies",
            &format!(
                "{{\"name\":\"{name}\",\"listen\":\"127.0.0.1:{port}\",\
                 \"upstream\":\"127.0.0.1:{node_port}\",\"enabled\":true}}"
            ),
        );
        for (stream, ms) in [
            ("upstream", rtt_ms / 2),
            ("downstream", rtt_ms - rtt_ms / 2),
        ] {
            self.post(
                &format!("/proxies/{name}/toxics"),
                &format!(
                    "{{\"name\":\"{stream}\",\"type\":\"latency\",\"stream\":\"{stream}\",\
                     \"attributes\":{{\"latency\":{ms},\"jitter\":0}}}}"
                ),
            );
        }
        port
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--cost [--repeats R]`: the telemetry's cost (see the module's doc).
fn cost(one: &Cluster, five: &Cluster, length: Duration, args: &[String]) {
    /// Formats each record into a sink: what a logger costs, without the terminal's.
    struct Sink;
    impl log::Log for Sink {
        fn enabled(&self, m: &log::Metadata) -> bool {
            m.level() <= log::max_level()
        }
        fn log(&self, r: &log::Record) {
            use std::io::Write;
            let _ = writeln!(
                std::io::sink(),
                "{} {}: {}",
                r.level(),
                r.target(),
                r.args()
            );
        }
        fn flush(&self) {}
    }
    let repeats = repeats(args, 5);
    static SINK: Sink = Sink;
    log::set_logger(&SINK).expect("no other logger");
    log::set_max_level(log::LevelFilter::Off);
    let variants = ["none", "log", "metrics"];
    // (nodes, variant, CPU µs per cycle, round)
    let mut runs: Vec<(usize, &str, f64, usize)> = Vec::new();
    for round in 0..repeats {
        for (cluster, n) in [(one, 1), (five, 5)] {
            let mut order = variants;
            if round % 2 == 1 {
                order.reverse();
            }
            for variant in order {
                let rl = client(cluster);
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let mut listener = None;
                let mut exporter = None;
                match variant {
                    "log" => {
                        log::set_max_level(log::LevelFilter::Info);
                        listener = Some(
                            rl.on_event(|e| {
                                log::info!(target: "redlock", "{} {:?} {:?} {:?}", e.kind, e.resource, e.lock_kind, e.duration)
                            })
                            .unwrap(),
                        );
                    }
                    "metrics" => {
                        let (rl, stop) = (rl.clone(), stop.clone());
                        exporter = Some(std::thread::spawn(move || {
                            while !stop.load(Ordering::Relaxed) {
                                std::hint::black_box(rl.stats().prometheus());
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }));
                    }
                    _ => {}
                }
                let mut s = cycles(&rl, 1, length);
                drop(listener);
                log::set_max_level(log::LevelFilter::Off);
                stop.store(true, Ordering::Relaxed);
                if let Some(e) = exporter {
                    e.join().unwrap();
                }
                println!("{}", s.json(&format!("cost-{variant}"), n, 1));
                let cpu = s.cpu_ticks as f64 * 1e4 / s.cycles.max(1) as f64;
                runs.push((n, variant, cpu, round));
            }
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for n in [1, 5] {
        let of = |variant: &str| -> Vec<(usize, f64)> {
            runs.iter()
                .filter(|r| r.0 == n && r.1 == variant)
                .map(|r| (r.3, r.2))
                .collect()
        };
        let none = of("none");
        for variant in variants {
            let runs = of(variant);
            // Each round's ratio to the same round's run with no listener.
            let ratio = median(
                runs.iter()
                    .zip(&none)
                    .map(|((_, cpu), (_, base))| cpu / base)
                    .collect(),
            );
            println!(
                "{{\"config\":\"telemetry-cost\",\"nodes\":{n},\"listener\":\"{variant}\",\
                 \"repeats\":{repeats},\"cpu_us_per_cycle\":{:.1},\"ratio_to_none\":{ratio:.3}}}",
                median(runs.iter().map(|r| r.1).collect()),
            );
        }
    }
}

fn repeats(args: &[String], default: usize) -> usize {
    args.iter()
        .position(|a| a == "--repeats")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("--repeats takes a number"))
        .unwrap_or(default)
}

/// Sends `command` on every connection, then reads every answer: how many were `expected`.
fn everywhere(conns: &mut [redis::Connection], command: &[u8], expected: redis::Value) -> usize {
    for conn in conns.iter_mut() {
        conn.send_packed_command(command).unwrap();
    }
    conns
        .iter_mut()
        .map(|conn| conn.recv_response().unwrap())
        .filter(|answer| *answer == expected)
        .count()
}

/// Heap allocations per uncontended `try_lock` + `release` on one thread, after a warm-up.
fn allocations(cluster: &Cluster, nodes: usize) {
    let rl = client(cluster);
    let cycle = || {
        rl.try_lock("bench-alloc", Duration::from_secs(10))
            .unwrap()
            .release()
            .unwrap()
    };
    for _ in 0..200 {
        cycle();
    }
    let rounds = 2000u64;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..rounds {
        cycle();
    }
    let per_cycle = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / rounds as f64;
    println!(
        "{{\"config\":\"allocations\",\"nodes\":{nodes},\"cycles\":{rounds},\"per_cycle\":{per_cycle:.1}}}"
    );
}

fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder().nodes(cluster.urls()).build().unwrap()
}

fn cycles(rl: &Redlock, threads: usize, length: Duration) -> Sample {
    cycles_on(rl, threads, length, Keys::Fixed)
}

/// [`cycles`] on the keys `keys` gives.
fn cycles_on(rl: &Redlock, threads: usize, length: Duration, keys: Keys) -> Sample {
    measure(threads, length, |t| {
        let rl = rl.clone();
        move |i| {
            let start = Instant::now();
            let key = keys.of("bench", t, i);
            rl.try_lock(&key, Duration::from_secs(10))
                .expect("uncontended lock")
                .release()
                .expect("release");
            start.elapsed().as_secs_f64() * 1e6
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--faults-child") {
        return faults::child(&args[i + 1..]);
    }
    let mut length = Duration::from_secs(if args.iter().any(|a| a == "--cluster") {
        2
    } else {
        3
    });
    if let Some(i) = args.iter().position(|a| a == "--seconds") {
        let s: f64 = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("--seconds takes a number");
        length = Duration::from_secs_f64(s);
    }
    let svg = args
        .iter()
        .position(|a| a == "--svg")
        .map(|i| args.get(i + 1).expect("--svg takes a file name").clone());
    let one = Cluster {
        nodes: vec![support::RedisNode::start()],
    };
    if args.iter().any(|a| a == "--cluster") {
        return cluster(&one, length, &args, svg.as_deref());
    }
    if args.iter().any(|a| a == "--hot") {
        hot(&one, length, &args);
        if let Some(path) = &svg {
            let caption = match repeats(&args, 3) {
                1 => format!(
                    "uncontended acquire + release, one run of {} s",
                    length.as_secs_f64()
                ),
                r => format!(
                    "uncontended acquire + release, medians of {r} runs of {} s each",
                    length.as_secs_f64()
                ),
            } + "\n"
                + &chart::machine();
            let lines = PRINTED.lock().unwrap();
            write_chart(
                path,
                &rates_chart(
                    "Hot node: cycles/s by caller threads",
                    &caption,
                    &lines,
                    true,
                ),
            );
        }
        return;
    }
    if args.iter().any(|a| a == "--allocations") {
        allocations(&one, 1);
        return allocations(&Cluster::start(5), 5);
    }
    if args.iter().any(|a| a == "--faults") {
        return faults::run(
            length,
            args.iter().any(|a| a == "--wait"),
            repeats(&args, 1),
            args.iter()
                .position(|a| a == "--clients")
                .and_then(|i| args.get(i + 1))
                .map(String::as_str),
            emit,
        );
    }
    let five = Cluster::start(5);
    if args.iter().any(|a| a == "--cost") {
        return cost(&one, &five, length, &args);
    }
    if args.iter().any(|a| a == "--latency") {
        let toxiproxy = args.iter().position(|a| a == "--toxiproxy").map(|i| {
            args.get(i + 1)
                .expect("--toxiproxy takes the server binary")
                .clone()
        });
        return latency(&five, length, svg.as_deref(), toxiproxy.as_deref());
    }

    let mut floor1 = floor(&one, 1, length);
    emit(floor1.json("floor", 1, 1));
    let mut floor5 = floor(&five, 1, length);
    emit(floor5.json("floor", 5, 1));
    let mut results = Vec::new();
    for (cluster, n) in [(&one, 1), (&five, 5)] {
        let rl = client(cluster);
        let threads: &[usize] = if n == 5 { &[1, 4, 16] } else { &[1, 4] };
        for &threads in threads {
            let mut s = cycles(&rl, threads, length);
            emit(s.json("redlock", n, threads));
            results.push((n, threads, s));
        }
    }

    // Two of five nodes hung: acquisition must not wait on them.
    let rl = client(&five);
    five.nodes[1].hang();
    five.nodes[2].hang();
    let mut hung = measure(1, length, |_| {
        let rl = rl.clone();
        move |_| {
            let start = Instant::now();
            let lock = rl.try_lock("bench-hung", Duration::from_secs(10)).unwrap();
            let acquire = start.elapsed().as_secs_f64() * 1e6;
            lock.release().unwrap();
            acquire
        }
    });
    five.nodes[1].resume();
    five.nodes[2].resume();
    println!("{}", hung.json("hung-2-of-5-acquire", 5, 1));

    // Fenced vs plain, interleaved so that machine noise hits both alike.
    let rl = client(&five);
    let (mut plain, mut fenced) = (Vec::new(), Vec::new());
    for _ in 0..500 {
        let start = Instant::now();
        rl.try_lock("bench-fence", Duration::from_secs(10))
            .unwrap()
            .release()
            .unwrap();
        plain.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        let lock = rl
            .acquire(
                &LockRequest::new("bench-fence", Duration::from_secs(10))
                    .fenced()
                    .once(),
            )
            .unwrap();
        assert!(lock.fence().is_some());
        lock.release().unwrap();
        fenced.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (plain_p50, fenced_p50) = (median(&mut plain), median(&mut fenced));
    println!(
        "{{\"config\":\"fenced-vs-plain\",\"nodes\":5,\"cycles\":500,\"plain_p50_us\":{plain_p50:.1},\
         \"fenced_p50_us\":{fenced_p50:.1},\"extra_p50_us\":{:.1},\"ratio\":{:.2}}}",
        fenced_p50 - plain_p50,
        fenced_p50 / plain_p50
    );

    allocations(&five, 5);

    held_10k(&five);
    let node = node_redlock(&five, length);

    // The clock guard (TIME in every acquire's pipeline) on vs off, interleaved likewise.
    let guarded = client(&five);
    let unguarded = Redlock::builder()
        .nodes(five.urls())
        .clock_guard(false)
        .build()
        .unwrap();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for i in 0..1000 {
        // Each goes first every other round, so that neither gets the warmer caches.
        let mut pair = [(&guarded, &mut on), (&unguarded, &mut off)];
        if i % 2 == 1 {
            pair.reverse();
        }
        for (rl, times) in pair {
            let start = Instant::now();
            rl.try_lock("bench-clock", Duration::from_secs(10))
                .unwrap()
                .release()
                .unwrap();
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let (on_p50, off_p50) = (median(&mut on), median(&mut off));
    println!(
        "{{\"config\":\"clock-guard-on-vs-off\",\"nodes\":5,\"cycles\":1000,\"off_p50_us\":{off_p50:.1},\
         \"on_p50_us\":{on_p50:.1},\"extra_p50_us\":{:.1},\"ratio\":{:.2}}}",
        on_p50 - off_p50,
        on_p50 / off_p50
    );

    // Read lock and semaphore permit vs plain, interleaved alike.
    let (mut plain, mut read, mut permit) = (Vec::new(), Vec::new(), Vec::new());
    let read_request = LockRequest::new("bench-rw", Duration::from_secs(10))
        .read()
        .once();
    let permit_request = LockRequest::new("bench-sem", Duration::from_secs(10))
        .semaphore(4)
        .once();
    for _ in 0..500 {
        let start = Instant::now();
        rl.try_lock("bench-plain", Duration::from_secs(10))
            .unwrap()
            .release()
            .unwrap();
        plain.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        rl.acquire(&read_request).unwrap().release().unwrap();
        read.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        rl.acquire(&permit_request).unwrap().release().unwrap();
        permit.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let (plain_p50, read_p50, permit_p50) =
        (median(&mut plain), median(&mut read), median(&mut permit));
    println!(
        "{{\"config\":\"rw-sem-vs-plain\",\"nodes\":5,\"cycles\":500,\"plain_p50_us\":{plain_p50:.1},\
         \"read_p50_us\":{read_p50:.1},\"permit_p50_us\":{permit_p50:.1},\"read_ratio\":{:.2},\
         \"permit_ratio\":{:.2}}}",
        read_p50 / plain_p50,
        permit_p50 / plain_p50
    );

    // Cancel latency: a waiter parked on a held resource, cancelled; from cancel() to return.
    let holder = rl.lock("bench-cancel", Duration::from_secs(60)).unwrap();
    let mut latencies = Vec::new();
    for _ in 0..200 {
        let cancel = redquorum::Cancel::new();
        let request = LockRequest::new("bench-cancel", Duration::from_secs(10))
            .wait(Duration::from_secs(30))
            .cancel(&cancel);
        let (rl, (tx, rx)) = (rl.clone(), std::sync::mpsc::channel());
        let waiter = std::thread::spawn(move || {
            let result = rl.acquire(&request);
            tx.send(Instant::now()).unwrap();
            result
        });
        std::thread::sleep(Duration::from_millis(5));
        let fired = Instant::now();
        cancel.cancel();
        let returned = rx.recv().unwrap();
        assert!(matches!(
            waiter.join().unwrap(),
            Err(redquorum::Error::Cancelled { .. })
        ));
        latencies.push(returned.saturating_duration_since(fired).as_secs_f64() * 1e6);
    }
    holder.release().unwrap();
    latencies.sort_by(f64::total_cmp);
    println!(
        "{{\"config\":\"cancel-latency\",\"nodes\":5,\"rounds\":200,\"p50_us\":{:.1},\"p99_us\":{:.1},\"max_us\":{:.1}}}",
        latencies[100], latencies[197], latencies[199]
    );

    let find = |n: usize, t: usize| {
        results
            .iter()
            .find(|(rn, rt, _)| *rn == n && *rt == t)
            .map(|(_, _, s)| s)
            .unwrap()
    };
    let p50 = |s: &Sample| s.latencies[s.latencies.len() / 2];
    let rate = |s: &Sample| s.cycles as f64 / s.elapsed.as_secs_f64();
    println!(
        "{{\"ratios\":{{\"n5_t1_p50_over_floor_p50\":{:.2},\"n5_t4_over_n5_t1_cycles\":{:.2},\
         \"n1_t1_p50_over_floor_p50\":{:.2},\"hung_acquire_p50_ms\":{:.3}}}}}",
        p50(find(5, 1)) / p50(&floor5),
        rate(find(5, 4)) / rate(find(5, 1)),
        p50(find(1, 1)) / p50(&floor1),
        p50(&hung) / 1000.0
    );
    if let Some(node) = node {
        println!(
            "{{\"ratios_to_node_redlock\":{{\"n5_t1\":{:.2},\"n5_t4\":{:.2},\"n5_t16\":{:.2},\
             \"floor_n5\":{:.2}}}}}",
            rate(find(5, 1)) / node,
            rate(find(5, 4)) / node,
            rate(find(5, 16)) / node,
            rate(&floor5) / node
        );
    }
    println!(
        "{{\"ratios\":{{\"n1_t1_cycles_over_floor_cycles\":{:.2},\
         \"n5_t1_cycles_over_floor_cycles\":{:.2},\"n5_t16_over_n5_t4_cycles\":{:.2}}}}}",
        rate(find(1, 1)) / rate(&floor1),
        rate(find(5, 1)) / rate(&floor5),
        rate(find(5, 16)) / rate(find(5, 4))
    );
    if let Some(path) = &svg {
        let caption = format!(
            "uncontended acquire + release on loopback, each thread its own resource, {} s per configuration\n{}",
            length.as_secs_f64(),
            chart::machine()
        );
        let lines = PRINTED.lock().unwrap();
        write_chart(
            path,
            &rates_chart(
                "Loopback: cycles/s by caller threads",
                &caption,
                &lines,
                false,
            ),
        );
    }
}

fn write_chart(path: &str, svg: &str) {
    std::fs::write(path, svg).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    eprintln!("chart: {path}");
}

/// The clients of the default mode's and `--hot`'s charts: config, legend, style.
const LOOPBACK_CLIENTS: [(&str, &str, usize); 3] = [
    ("redlock", "redlock", chart::style::REDLOCK),
    (
        "floor",
        "floor: bare redis-rs, a connection per thread",
        chart::style::FLOOR,
    ),
    (
        "node-redlock",
        "node-redlock v5 + ioredis",
        chart::style::NODE_REDLOCK,
    ),
];

/// Cycles/s by caller threads, from the JSON lines of `floor`, `redlock` and `node-redlock`
/// runs: one panel per number of nodes, one series per client, the median where a
/// configuration ran more than once; with `cpu`, a panel of CPU per cycle below each.
fn rates_chart(title: &str, caption: &str, lines: &[String], cpu: bool) -> String {
    chart::figure(title, caption, &rate_plots(lines, &LOOPBACK_CLIENTS, cpu))
}

/// The panels of [`rates_chart`], for the runs of `clients` (config, legend, style) in `lines`.
fn rate_plots(lines: &[String], clients: &[(&str, &str, usize)], cpu: bool) -> Vec<chart::Plot> {
    // (config, nodes, threads, cycles/s, CPU µs per cycle) of every run.
    type Run<'a> = (&'a str, u64, u64, f64, f64);
    let runs: Vec<Run> = lines
        .iter()
        .filter_map(|l| {
            Some((
                chart::json_field(l, "config")?,
                chart::json_number(l, "nodes")? as u64,
                chart::json_number(l, "threads")? as u64,
                chart::json_number(l, "cycles_per_s")?,
                chart::json_number(l, "cpu_us_per_cycle").unwrap_or(f64::NAN),
            ))
        })
        .filter(|r| clients.iter().any(|c| c.0 == r.0))
        .collect();
    let mut sizes: Vec<u64> = runs.iter().map(|r| r.1).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut threads: Vec<f64> = runs.iter().map(|r| r.2 as f64).collect();
    threads.sort_by(f64::total_cmp);
    threads.dedup();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let series = |n: u64, pick: fn(&Run) -> f64| -> Vec<chart::Series> {
        clients
            .iter()
            .filter(|c| runs.iter().any(|r| r.0 == c.0 && r.1 == n))
            .map(|&(config, name, style)| {
                let mut ts: Vec<u64> = runs
                    .iter()
                    .filter(|r| r.0 == config && r.1 == n)
                    .map(|r| r.2)
                    .collect();
                ts.sort_unstable();
                ts.dedup();
                let points = ts
                    .iter()
                    .map(|&t| {
                        let of = runs
                            .iter()
                            .filter(|r| r.0 == config && r.1 == n && r.2 == t);
                        (t as f64, median(of.map(pick).collect()))
                    })
                    .collect();
                chart::Series::new(name, style, points)
            })
            .collect()
    };
    let mut plots = Vec::new();
    for &n in &sizes {
        let nodes = match n {
            1 => "one node (N = 1)".to_owned(),
            3 => "three nodes (N = 3)".to_owned(),
            5 => "five nodes (N = 5)".to_owned(),
            n => format!("{n} nodes"),
        };
        plots.push(chart::Plot {
            title: nodes.clone(),
            x_label: "caller threads".to_owned(),
            y_label: "cycles/s".to_owned(),
            log_x: threads.len() > 1,
            x_ticks: Some(threads.clone()),
            series: series(n, |r| r.3),
            ..chart::Plot::default()
        });
        if cpu {
            plots.push(chart::Plot {
                title: format!("{nodes}: CPU per cycle of this process (callers and workers)"),
                x_label: "caller threads".to_owned(),
                y_label: "CPU µs per cycle".to_owned(),
                log_x: threads.len() > 1,
                x_ticks: Some(threads.clone()),
                series: series(n, |r| r.4),
                ..chart::Plot::default()
            });
        }
    }
    plots
}

/// Resident memory of this process, from /proc (0 where there is none).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time this process has used, from /proc (utime + stime, in clock ticks of 10 ms: 10,000
/// µs).
fn cpu_ticks() -> u64 {
    ticks_of("/proc/self/stat")
}

/// Context switches of every thread of this process so far, voluntary (a thread that sleeps)
/// and involuntary (one preempted), from `getrusage`.
fn switches() -> u64 {
    // SAFETY: `getrusage` fills the struct it is given; zeroes are a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a struct of the right type.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

/// CPU time the redis-servers `nodes` have used, in clock ticks like [`cpu_ticks`].
fn server_ticks(nodes: &[&support::RedisNode]) -> u64 {
    nodes
        .iter()
        .filter_map(|n| n.pid())
        .map(|pid| ticks_of(&format!("/proc/{pid}/stat")))
        .sum()
}

/// utime + stime from a `/proc/…/stat` file, in clock ticks (0 where there is none).
fn ticks_of(stat: &str) -> u64 {
    std::fs::read_to_string(stat)
        .ok()
        .and_then(|s| {
            let fields: Vec<&str> = s.rsplit(')').next()?.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// 10,000 auto-extended locks held at once: memory per lock, and the extender's CPU share.
fn held_10k(cluster: &Cluster) {
    let rl = client(cluster);
    let before = rss_kib();
    let ttl = Duration::from_secs(30);
    let locks: Vec<_> = (0..10_000)
        .map(|i| {
            rl.acquire(
                &LockRequest::new(format!("held-{i}"), ttl)
                    .once()
                    .auto_extend(AutoExtend::new()),
            )
            .expect("uncontended lock")
        })
        .collect();
    let after = rss_kib();
    // One extension round of all of them falls within 10 s (every ttl/3).
    let (ticks, started) = (cpu_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(11));
    let cpu = (cpu_ticks() - ticks) as f64 * 10.0 / started.elapsed().as_millis() as f64;
    let held = locks.iter().filter(|l| l.is_held()).count();
    println!(
        "{{\"config\":\"held-10k\",\"nodes\":5,\"locks\":10000,\"still_held\":{held},\"rss_added_kib\":{},\"bytes_per_lock\":{:.0},\"cpu_share_while_held\":{cpu:.3}}}",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 * 1024.0 / 10_000.0
    );
    for lock in locks {
        let _ = lock.release();
    }
}

/// node-redlock v5 on the same nodes, if node and npm are here: its cycles per second.
fn node_redlock(cluster: &Cluster, length: Duration) -> Option<f64> {
    let line = peers::node_redlock_at(&cluster.urls(), length, None)?;
    emit(line.clone());
    line.split("\"cycles_per_s\":")
        .nth(1)?
        .split([',', '}'])
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rates_chart_has_a_panel_per_node_count_and_takes_medians() {
        let lines: Vec<String> = [
            r#"{"config":"floor","nodes":1,"threads":1,"cycles":10,"cycles_per_s":1000,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":20}"#,
            r#"{"config":"floor","nodes":1,"threads":1,"cycles":10,"cycles_per_s":3000,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":20}"#,
            r#"{"config":"floor","nodes":1,"threads":1,"cycles":10,"cycles_per_s":2000,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":20}"#,
            r#"{"config":"redlock","nodes":1,"threads":4,"cycles":10,"cycles_per_s":9000,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":40}"#,
            r#"{"config":"redlock","nodes":5,"threads":16,"cycles":10,"cycles_per_s":7000,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":40}"#,
            r#"{"config":"hung-2-of-5-acquire","nodes":5,"threads":1,"cycles":10,"cycles_per_s":50,"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":40}"#,
        ]
        .map(str::to_owned)
        .to_vec();
        let svg = rates_chart("t", "c", &lines, false);
        assert_eq!(svg.matches("class=\"panel\"").count(), 2);
        // One node: floor and redlock; five nodes: redlock alone (no peer ran).
        assert_eq!(svg.matches("class=\"series\"").count(), 3);
        assert!(!svg.contains("node-redlock"));
        // The floor's point is the median of its three runs.
        let plots = rate_plots(&lines, &LOOPBACK_CLIENTS, false);
        let floor = plots[0].series.iter().find(|s| s.name.starts_with("floor"));
        assert_eq!(floor.unwrap().points, [(1.0, 2000.0)]);
        let with_cpu = rates_chart("t", "c", &lines, true);
        assert_eq!(with_cpu.matches("class=\"panel\"").count(), 4);
        assert!(!with_cpu.contains("NaN"));
        assert!(rates_chart("t", "c", &[], true).contains("</svg>"));
    }

    #[test]
    fn the_cluster_chart_sets_each_cluster_beside_its_standalone_configuration() {
        let run = |config: &str, nodes: u32, threads: u32, rate: u32| {
            format!(
                r#"{{"config":"{config}","nodes":{nodes},"threads":{threads},"cycles":10,"cycles_per_s":{rate},"p50_us":1.0,"p99_us":2.0,"cpu_us_per_cycle":30}}"#
            )
        };
        let mut lines = Vec::new();
        for t in [1, 4] {
            lines.push(run("standalone-n1", 1, t, 9000));
            lines.push(run("cluster-n1", 1, t, 7000));
            lines.push(run("cluster-n1", 1, t, 5000));
            lines.push(run("cluster-n1", 1, t, 6000));
            lines.push(run("standalone-n3", 3, t, 5000));
            lines.push(run("cluster-x3", 3, t, 4000));
            lines.push(run("mixed-n3", 3, t, 4500));
        }
        // Not a run: left out.
        lines
            .push(r#"{"config":"cluster-masters","commands_by_port":{"7001":10,"7002":5}}"#.into());
        let plots = rate_plots(&lines, &CLUSTER_CONFIGS, true);
        let titles: Vec<&str> = plots.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles.len(), 4, "{titles:?}");
        assert_eq!(titles[0], "one node (N = 1)");
        assert_eq!(titles[2], "three nodes (N = 3)");
        let names =
            |p: &chart::Plot| -> Vec<String> { p.series.iter().map(|s| s.name.clone()).collect() };
        assert_eq!(
            names(&plots[0]),
            ["one standalone master", "one 3-master Redis Cluster"]
        );
        assert_eq!(names(&plots[2]).len(), 3);
        // The cluster's points are the medians of its runs, at 1 and 4 threads.
        assert_eq!(plots[0].series[1].points, [(1.0, 6000.0), (4.0, 6000.0)]);
        assert_eq!(plots[1].series[1].points, [(1.0, 30.0), (4.0, 30.0)]);
        // A cluster has one colour in both panels, apart from the standalone one's.
        assert_eq!(plots[0].series[1].style, plots[2].series[1].style);
        assert_ne!(plots[0].series[0].style, plots[0].series[1].style);
    }
}
