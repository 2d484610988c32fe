//! The benchmark: one JSON line per configuration, all measured in one run against local
//! redis-server nodes it starts itself, so ratios compare like with like on a noisy machine.
//!
//! - `floor`: a plain redis-rs connection on one node doing `SET NX PX` + `EVALSHA` release:
//!   what one uncontended lock cycle costs without redlock.
//! - `redlock`: uncontended `try_lock` + `release` cycles (each thread its own resource) for
//!   N = 1 and N = 5 nodes at 1 and 4 caller threads.
//! - `hung`: N = 5 with 2 nodes hung (SIGSTOP): acquire latency.
//! - `fenced`: N = 5, 500 sequential `try_lock_fenced` + `release` cycles interleaved with 500
//!   plain ones: the extra cost of the fence write-back round, as a difference of medians.
//! - `rw-sem-vs-plain`: N = 5, 500 rounds, each one uncontended plain `try_lock` + `release`,
//!   one read lock and one semaphore permit (L = 4, all free) acquired once and released,
//!   interleaved: medians side by side.
//!
//! `cargo run --release --example bench [-- --seconds S]` (default 3 s per configuration).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redlock::{LockRequest, Redlock};
use support::Cluster;

struct Sample {
    cycles: usize,
    elapsed: Duration,
    /// Per cycle (or per acquire), µs.
    latencies: Vec<f64>,
}

impl Sample {
    fn json(&mut self, name: &str, nodes: usize, threads: usize) -> String {
        self.latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let i = ((self.latencies.len() - 1) as f64 * p).round() as usize;
            self.latencies[i]
        };
        format!(
            "{{\"config\":\"{name}\",\"nodes\":{nodes},\"threads\":{threads},\"cycles\":{},\
             \"cycles_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1}}}",
            self.cycles,
            self.cycles as f64 / self.elapsed.as_secs_f64(),
            pct(0.50),
            pct(0.99)
        )
    }
}

/// Runs `cycle` on `threads` threads for `length`; each call returns one latency in µs.
fn measure<F>(threads: usize, length: Duration, make: impl Fn(usize) -> F) -> Sample
where
    F: FnMut(u64) -> f64 + Send + 'static,
{
    let started = Instant::now();
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
    }
}

fn floor(cluster: &Cluster, length: Duration) -> Sample {
    let url = cluster.urls()[0].clone();
    measure(1, length, move |t| {
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let release = redis::Script::new(
            r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#,
        );
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(
                r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#,
            )
            .query(&mut conn)
            .unwrap();
        let sha = release.get_hash().to_owned();
        let key = format!("floor-{t}");
        move |i| {
            let start = Instant::now();
            let token = format!("{i:040}");
            let ok: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(10_000)
                .query(&mut conn)
                .unwrap();
            assert!(ok.is_some());
            let deleted: i64 = redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(&key)
                .arg(&token)
                .query(&mut conn)
                .unwrap();
            assert_eq!(deleted, 1);
            start.elapsed().as_secs_f64() * 1e6
        }
    })
}

fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder().nodes(cluster.urls()).build().unwrap()
}

fn cycles(rl: &Redlock, threads: usize, length: Duration) -> Sample {
    measure(threads, length, |t| {
        let rl = rl.clone();
        let key = format!("bench-{t}");
        move |_| {
            let start = Instant::now();
            rl.try_lock(&key, Duration::from_secs(10))
                .expect("uncontended lock")
                .release()
                .expect("release");
            start.elapsed().as_secs_f64() * 1e6
        }
    })
}

fn main() {
    let mut length = Duration::from_secs(3);
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--seconds") {
        let s: f64 = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("--seconds takes a number");
        length = Duration::from_secs_f64(s);
    }
    let five = Cluster::start(5);
    let one = Cluster {
        nodes: vec![support::RedisNode::start()],
    };

    let mut floor = floor(&one, length);
    println!("{}", floor.json("floor", 1, 1));
    let mut results = Vec::new();
    for (cluster, n) in [(&one, 1), (&five, 5)] {
        let rl = client(cluster);
        for threads in [1, 4] {
            let mut s = cycles(&rl, threads, length);
            println!("{}", s.json("redlock", n, threads));
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
            .try_lock_fenced("bench-fence", Duration::from_secs(10))
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
        p50(find(5, 1)) / p50(&floor),
        rate(find(5, 4)) / rate(find(5, 1)),
        p50(find(1, 1)) / p50(&floor),
        p50(&hung) / 1000.0
    );
}
