//! Leader election across processes, against real redis-server nodes: candidates are this
//! binary run again with `--candidate`, and the faults are real signals.
//!
//! - 5 candidates; the leader gets SIGKILL: another leads within the TTL and a retry.
//! - The leader gets SIGSTOP past its TTL, then SIGCONT: its write with the old term is refused
//!   by a store that checks terms, and it reports the leadership lost.
//! - 1,000 campaign/resign cycles over 5 processes: terms strictly increase in the order the
//!   leaderships happened, and no two overlap.
//!
//! Its own `main` (no libtest): the candidates are child processes of the test.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use redquorum::Redlock;
use support::{Cluster, RedisNode};

/// The leadership TTL of the fault cases.
const TTL: Duration = Duration::from_millis(1500);
const NODE_TIMEOUT: Duration = Duration::from_millis(200);

fn main() {
    let cases: &[(&str, fn())] = &[
        (
            "a_killed_leader_is_replaced_within_its_ttl",
            a_killed_leader_is_replaced_within_its_ttl,
        ),
        (
            "a_stopped_leaders_stale_writes_are_refused_and_it_reports_the_loss",
            a_stopped_leaders_stale_writes_are_refused_and_it_reports_the_loss,
        ),
        (
            "a_thousand_campaign_resign_cycles_never_overlap_and_terms_increase",
            a_thousand_campaign_resign_cycles_never_overlap_and_terms_increase,
        ),
    ];
    support::own_harness("--candidate", candidate, cases);
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

// ---------------------------------------------------------------------------------------------
// The candidate.

/// A term-checking store: a write with a lower term than the highest seen is refused.
const STORE: &str = r#"local t = redis.call("get", KEYS[1])
if t and tonumber(t) > tonumber(ARGV[1]) then
    return 0
end
redis.call("set", KEYS[1], ARGV[1])
redis.call("rpush", KEYS[2], ARGV[1])
return 1"#;

fn candidate(args: &[String]) {
    let urls: Vec<&str> = args[0].split(',').collect();
    let rl = Redlock::builder()
        .nodes(&urls)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("client");
    let id = &args[2];
    let mut out = std::io::stdout();
    match args[1].as_str() {
        // Leads, then writes its term to the store every 20 ms for as long as it leads.
        "hold" => {
            let store = redis::Client::open(args[3].as_str()).unwrap();
            let mut store = store.get_connection().unwrap();
            let election = rl.election("procs", id, TTL).unwrap();
            let leadership = election.campaign(None).unwrap();
            let term = leadership.term();
            writeln!(out, "LEAD {term} {}", now_ns()).unwrap();
            // It writes until the store refuses its term, as a fenced writer does; each accepted
            // write is also logged in the store, in the order the store took them (a line
            // printed here may come late: a SIGSTOP between a write and its line).
            loop {
                let accepted: i64 = redis::cmd("EVAL")
                    .arg(STORE)
                    .arg(2)
                    .arg("store")
                    .arg("store:log")
                    .arg(term)
                    .query(&mut store)
                    .unwrap();
                if accepted == 1 {
                    writeln!(out, "WROTE {term}").unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                writeln!(out, "REFUSED {term}").unwrap();
                // A higher term wrote: its validity is gone by its own clock, and the lost
                // signal follows at the extender's next tick, due since the pause (this thread
                // may look first).
                let _ = leadership.lost().recv_timeout(Duration::from_secs(5));
                writeln!(
                    out,
                    "LOST {term} lost={} leader={}",
                    leadership.is_lost(),
                    leadership.is_leader()
                )
                .unwrap();
                return;
            }
        }
        // Campaigns, leads briefly and resigns, `n` times; each leadership's start (after the
        // campaign returned) and end (before the resignation) on the wall clock.
        "cycles" => {
            let n: usize = args[3].parse().unwrap();
            let election = rl.election("cycles", id, Duration::from_secs(5)).unwrap();
            for _ in 0..n {
                let leadership = election.campaign(None).unwrap();
                let start = now_ns();
                let term = leadership.term();
                std::hint::black_box(term);
                let end = now_ns();
                leadership.resign().unwrap();
                writeln!(out, "CYCLE {term} {start} {end}").unwrap();
            }
        }
        other => panic!("unknown mode {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The test's side.

struct Candidate {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Candidate {
    fn spawn(cluster: &Cluster, mode: &str, id: &str, extra: &[&str]) -> Candidate {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--candidate")
            .arg(cluster.urls().join(","))
            .arg(mode)
            .arg(id)
            .args(extra)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn a candidate");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Candidate { child, lines }
    }

    /// The next line starting with `prefix`, within `limit`.
    fn expect(&self, prefix: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for the first of `candidates` to print `LEAD`: its index, term and when.
fn first_to_lead(candidates: &[Candidate], limit: Duration) -> Option<(usize, u64, Instant)> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        for (i, c) in candidates.iter().enumerate() {
            while let Ok(line) = c.lines.try_recv() {
                if let Some(rest) = line.strip_prefix("LEAD ") {
                    let term = rest.split(' ').next().unwrap().parse().unwrap();
                    return Some((i, term, Instant::now()));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn a_killed_leader_is_replaced_within_its_ttl() {
    let cluster = Cluster::start(3);
    let store = RedisNode::start();
    let mut candidates: Vec<Candidate> = (0..5)
        .map(|i| Candidate::spawn(&cluster, "hold", &format!("c{i}"), &[&store.url()]))
        .collect();
    let (i, first_term, _) =
        first_to_lead(&candidates, Duration::from_secs(20)).expect("one of 5 leads");
    let mut leader = candidates.remove(i);
    // Let it renew at least once.
    std::thread::sleep(TTL);
    let killed = Instant::now();
    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    let (_, term, at) = first_to_lead(&candidates, TTL * 4).expect("another candidate takes over");
    let took = at - killed;
    println!("    the next leader after a SIGKILL: {took:?} (TTL {TTL:?})");
    assert!(term > first_term, "term {term} after {first_term}");
    // At most the TTL left on the nodes and one attempt's retry, with room for a busy machine.
    assert!(took <= TTL + Duration::from_secs(1), "{took:?}");
    // The TTL had to run out: nobody leads while the killed leader's keys live.
    assert!(took >= TTL / 3, "{took:?}");
}

fn a_stopped_leaders_stale_writes_are_refused_and_it_reports_the_loss() {
    let cluster = Cluster::start(3);
    let store = RedisNode::start();
    let a = Candidate::spawn(&cluster, "hold", "a", &[&store.url()]);
    let line = a.expect("LEAD", Duration::from_secs(20)).expect("a leads");
    let a_term: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(a.expect("WROTE", Duration::from_secs(5)).is_some());
    let b = Candidate::spawn(&cluster, "hold", "b", &[&store.url()]);
    std::thread::sleep(Duration::from_millis(300));
    a.signal(libc::SIGSTOP);
    let line = b
        .expect("LEAD", TTL * 4)
        .expect("b leads once a's leadership ran out");
    let b_term: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(b_term > a_term);
    assert!(b.expect("WROTE", Duration::from_secs(5)).is_some());
    // What a printed before it stopped.
    std::thread::sleep(Duration::from_millis(100));
    while a.lines.try_recv().is_ok() {}
    a.signal(libc::SIGCONT);
    // Its next write is with its old term: refused. Then it sees its loss. (A line of a write
    // made before the stop may come first: the store's log says which writes it took when.)
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match a.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let lost = line.starts_with("LOST");
                seen.push(line);
                if lost {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let last = &seen[seen.len().saturating_sub(5)..];
    assert!(
        seen.iter().any(|l| l.starts_with("REFUSED")),
        "a, resumed, was not refused within 10 s: {} lines, the last {last:?}",
        seen.len()
    );
    assert!(
        seen.last()
            .is_some_and(|l| l == &format!("LOST {a_term} lost=true leader=false")),
        "a did not report its leadership lost: the last lines {last:?}"
    );
    // No write of a's was taken after one of b's: the terms the store took never go down.
    let log: Vec<u64> = redis::cmd("LRANGE")
        .arg("store:log")
        .arg(0)
        .arg(-1)
        .query(&mut store.conn())
        .unwrap();
    assert!(
        log.windows(2).all(|w| w[0] <= w[1]),
        "a stale write was accepted: the store took the terms {log:?} in this order ({a_term} \
         is a's, {b_term} b's)"
    );
    assert!(log.contains(&a_term) && log.contains(&b_term), "{log:?}");
    let stored: u64 = redis::cmd("GET")
        .arg("store")
        .query(&mut store.conn())
        .unwrap();
    assert_eq!(stored, b_term);
}

fn a_thousand_campaign_resign_cycles_never_overlap_and_terms_increase() {
    let cluster = Cluster::start(3);
    let processes = 5;
    let per = 200;
    let candidates: Vec<Candidate> = (0..processes)
        .map(|i| Candidate::spawn(&cluster, "cycles", &format!("c{i}"), &[&per.to_string()]))
        .collect();
    let mut cycles: Vec<(u64, u128, u128, usize)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    for (who, c) in candidates.iter().enumerate() {
        let mut got = 0;
        while got < per {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = c
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{got} cycles of {per} done in time"));
            let parts: Vec<&str> = line.split(' ').collect();
            if let ["CYCLE", term, start, end] = parts[..] {
                cycles.push((
                    term.parse().unwrap(),
                    start.parse().unwrap(),
                    end.parse().unwrap(),
                    who,
                ));
                got += 1;
            }
        }
    }
    assert_eq!(cycles.len(), processes * per);
    cycles.sort_by_key(|c| c.0);
    let mut handovers = Vec::new();
    let mut across = Vec::new();
    for pair in cycles.windows(2) {
        let ((t1, s1, e1, p1), (t2, s2, _, p2)) = (pair[0], pair[1]);
        assert!(t2 > t1, "term {t1} twice");
        // In term order, each leadership ended before the next one began: the terms follow the
        // order of the leaderships, and no two were held at once.
        assert!(
            e1 < s2,
            "term {t1} ({s1}..{e1} ns) overlaps the next term {t2} starting at {s2} ns"
        );
        let gap = Duration::from_nanos((s2 - e1) as u64);
        handovers.push(gap);
        if p1 != p2 {
            across.push(gap);
        }
    }
    let p = |v: &mut Vec<Duration>, q: f64| {
        v.sort();
        v.get(((v.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "    {} hand-overs between 5 processes: p50 {:?}, p90 {:?}; the {} to another process: \
         p50 {:?}, p90 {:?} (from the end of one leadership to the start of the next, \
         resignation included)",
        handovers.len(),
        p(&mut handovers, 0.5),
        p(&mut handovers, 0.9),
        across.len(),
        p(&mut across, 0.5),
        p(&mut across, 0.9),
    );
    // A resignation wakes the next candidate; the TTL (5 s) is never waited out.
    assert!(!across.is_empty(), "the leadership moved between processes");
    let median = p(&mut across, 0.5);
    assert!(median < Duration::from_millis(200), "{median:?}");
}
