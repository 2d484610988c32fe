//! `bench -- --faults`: the hung-node question of issue 45. The demo's contended workload
//! (`WORKERS` callers on one resource, 200 µs holds, TTL 2 s; a retrying lock with 50 retries at
//! 5 ms ± 5 ms, or with `--wait` a waiting one of up to 5 s) on five nodes through phases of
//! `--seconds` each: healthy, then one node hung (SIGSTOP), resumed, killed (SIGKILL) and
//! restarted empty, then the same with two nodes.
//!
//! Each client runs the whole sequence in turn on the same five nodes: redquorum with its
//! callers as threads of this process, redquorum with them spread over five processes, and
//! (retrying only: neither has a waiting lock) node-redlock v5 and redsync v4.18 with
//! `WithFailFast`, where `node`/`npm` and `go` are here. Every client's nodes time out after
//! [`TIMEOUT`]: redquorum's `node_timeout`, the peers' per-command timeouts (ioredis's
//! `commandTimeout`; go-redis's dial, read and write timeouts, its command retries off).
//!
//! A waiting lock's queue across processes is on the second node hung ([`QUEUE_NODE`]): the
//! first hang is of another node, the second of both (each client's resource is named so that
//! its queue lands there, and the healthy phase checks that it does).
//!
//! One JSON line per client and phase (acquisitions per second, attempts that gave up, and for
//! redquorum each node's errors in the phase), then one per client with the ratios the question
//! asks for: hung ÷ killed, and each phase after a node came back ÷ healthy.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redquorum::{LockRequest, Redlock};

use super::peers::{self, Peer};
use super::support::Cluster;

/// How long every client waits for a node's answer.
pub const TIMEOUT: Duration = Duration::from_millis(50);

/// Callers of the demo's workload, in all.
const WORKERS: usize = 6;

/// The node that keeps a waiting lock's queue across processes (`notify/queue.rs`): the second
/// node hung, so that one node hangs while the queue's stays up, then both.
const QUEUE_NODE: usize = 2;

/// The phases: name, the nodes (indices) acted on, and the action.
const PHASES: [(&str, &[usize], Action); 9] = [
    ("healthy", &[], Action::None),
    ("1 hung", &[1], Action::Hang),
    ("1 resumed", &[1], Action::Resume),
    ("1 killed", &[1], Action::Kill),
    ("1 restarted", &[1], Action::Restart),
    ("2 hung", &[1, 2], Action::Hang),
    ("2 resumed", &[1, 2], Action::Resume),
    ("2 killed", &[1, 2], Action::Kill),
    ("2 restarted", &[1, 2], Action::Restart),
];

#[derive(Clone, Copy)]
enum Action {
    None,
    Hang,
    Resume,
    Kill,
    Restart,
}

/// What each node's counts hold, in order: its errors, then its votes in acquire attempts
/// (redquorum's `NodeStatus::errors` and `votes`).
const NODE_COUNTS: [&str; 7] = [
    "errors",
    "yes",
    "no",
    "unavailable",
    "timed_out",
    "failed",
    "unanswered",
];

/// A client's counts so far.
#[derive(Default)]
struct Counts {
    acquired: u64,
    gave_up: u64,
    /// Each node's [`NODE_COUNTS`]; empty for a peer.
    nodes: Vec<[u64; 7]>,
}

impl Counts {
    /// "ACQUIRED GAVE_UP [NODE_COUNTS of each node...]", as a child process answers.
    fn line(&self) -> String {
        let mut line = format!("{} {}", self.acquired, self.gave_up);
        for n in self.nodes.iter().flatten() {
            line += &format!(" {n}");
        }
        line
    }

    fn parse(line: &str) -> Counts {
        let numbers: Vec<u64> = line
            .split_whitespace()
            .map(|n| n.parse().expect("a count"))
            .collect();
        Counts {
            acquired: numbers[0],
            gave_up: numbers[1],
            nodes: numbers[2..]
                .chunks_exact(NODE_COUNTS.len())
                .map(|c| c.try_into().expect("a node's counts"))
                .collect(),
        }
    }

    fn add(&mut self, other: Counts) {
        self.acquired += other.acquired;
        self.gave_up += other.gave_up;
        self.nodes.resize(other.nodes.len(), [0; 7]);
        for (sum, n) in self.nodes.iter_mut().zip(other.nodes) {
            for (s, c) in sum.iter_mut().zip(n) {
                *s += c;
            }
        }
    }

    /// Each of [`NODE_COUNTS`] since `before`, as JSON: `"errors":[per node],"yes":[...],...`.
    fn node_json(&self, before: &Counts) -> String {
        let since = |k: usize| -> Vec<String> {
            let then = before
                .nodes
                .iter()
                .map(|n| n[k])
                .chain(std::iter::repeat(0));
            self.nodes
                .iter()
                .zip(then)
                .map(|(n, b)| (n[k] - b).to_string())
                .collect()
        };
        NODE_COUNTS
            .iter()
            .enumerate()
            .map(|(k, name)| format!("\"{name}\":[{}]", since(k).join(",")))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// redquorum's callers as threads of this process, taking turns on `resource`.
struct Workers {
    rl: Redlock,
    acquired: Arc<AtomicU64>,
    gave_up: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    fn start(urls: &[String], workers: usize, wait: bool, resource: &str) -> Workers {
        let rl = Redlock::builder()
            .nodes(urls)
            .node_timeout(TIMEOUT)
            .retry_count(50)
            .retry_delay(Duration::from_millis(5))
            .retry_jitter(Duration::from_millis(5))
            .build()
            .expect("client");
        let acquired = Arc::new(AtomicU64::new(0));
        let gave_up = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..workers)
            .map(|_| {
                let (rl, acquired, gave_up, stop) = (
                    rl.clone(),
                    Arc::clone(&acquired),
                    Arc::clone(&gave_up),
                    Arc::clone(&stop),
                );
                let request = LockRequest::new(resource, Duration::from_secs(2));
                let request = if wait {
                    request.wait(Duration::from_secs(5))
                } else {
                    request
                };
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match rl.acquire(&request) {
                            Ok(lock) => {
                                std::thread::sleep(Duration::from_micros(200));
                                acquired.fetch_add(1, Ordering::Relaxed);
                                let _ = lock.release();
                            }
                            Err(_) => {
                                gave_up.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        Workers {
            rl,
            acquired,
            gave_up,
            stop,
            handles,
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            acquired: self.acquired.load(Ordering::Relaxed),
            gave_up: self.gave_up.load(Ordering::Relaxed),
            nodes: self
                .rl
                .node_status()
                .iter()
                .map(|s| {
                    let v = s.votes;
                    [
                        s.errors,
                        v.yes,
                        v.no,
                        v.unavailable,
                        v.timed_out,
                        v.failed,
                        v.unanswered,
                    ]
                })
                .collect(),
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// A client under load: threads here, or processes that answer each line on their stdin with
/// their [`Counts`] and end with it.
enum Load {
    Here(Workers),
    Children(Vec<(Child, Lines<BufReader<ChildStdout>>)>),
}

impl Load {
    fn children(kids: Vec<Child>) -> Load {
        Load::Children(
            kids.into_iter()
                .map(|mut k| {
                    let out = BufReader::new(k.stdout.take().expect("piped stdout")).lines();
                    (k, out)
                })
                .collect(),
        )
    }

    fn counts(&mut self) -> Counts {
        match self {
            Load::Here(w) => w.counts(),
            Load::Children(kids) => {
                let mut sum = Counts::default();
                for (kid, _) in kids.iter_mut() {
                    writeln!(kid.stdin.as_mut().expect("piped stdin")).expect("ask a child");
                }
                for (_, out) in kids.iter_mut() {
                    let line = out
                        .next()
                        .expect("a child answered nothing: it ended")
                        .expect("read a child");
                    sum.add(Counts::parse(&line));
                }
                sum
            }
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Load::Children(kids) = self {
            for (kid, _) in kids.iter_mut() {
                drop(kid.stdin.take());
            }
            for (kid, _) in kids.iter_mut() {
                let _ = kid.wait();
            }
        }
    }
}

/// A child process of `--faults`: `URLS WORKERS wait|retry RESOURCE`.
pub fn child(args: &[String]) {
    let urls: Vec<String> = args[0].split(',').map(str::to_owned).collect();
    let workers = Workers::start(&urls, args[1].parse().unwrap(), args[2] == "wait", &args[3]);
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        writeln!(out, "{}", workers.counts().line()).unwrap();
        out.flush().unwrap();
    }
}

/// The clients of the run.
#[derive(Clone, Copy)]
enum Client {
    /// redquorum, its callers threads of this process.
    Here,
    /// redquorum, its callers spread over five processes.
    Processes,
    Peer(Peer),
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::Here => "redquorum",
            Client::Processes => "redquorum-5-processes",
            Client::Peer(peer) => peer.name(),
        }
    }

    /// The client under load, or `None` (with a message) when a peer cannot run here.
    fn start(self, urls: &[String], wait: bool, resource: &str) -> Option<Load> {
        match self {
            Client::Here => Some(Load::Here(Workers::start(urls, WORKERS, wait, resource))),
            Client::Processes => Some(processes(urls, 5, wait, resource)),
            Client::Peer(peer) => {
                peers::faults_peer(peer, urls, WORKERS, TIMEOUT).map(|k| Load::children(vec![k]))
            }
        }
    }
}

/// The whole `--faults` run, `repeats` times over.
pub fn run(length: Duration, wait: bool, repeats: usize, only: Option<&str>, emit: fn(String)) {
    let mut five = Cluster::start(5);
    let urls = five.urls();
    let kind = if wait { "waiting" } else { "retrying" };
    let mut clients = vec![Client::Here, Client::Processes];
    if !wait {
        clients.extend([Client::Peer(Peer::NodeRedlock), Client::Peer(Peer::Redsync)]);
    }
    clients.retain(|c| only.is_none_or(|only| only.split(',').any(|name| name == c.name())));
    for _ in 0..repeats {
        for &client in &clients {
            let resource = resource_queued_on(&urls, QUEUE_NODE, client.name());
            let Some(mut load) = client.start(&urls, wait, &resource) else {
                continue;
            };
            phases(&mut five, &mut load, length, client.name(), kind, emit);
        }
    }
}

/// A resource named after `name` whose queue across processes is on node `node`: the
/// rendezvous hash of `notify::queue::queue_node` (FNV-1a of the resource, a zero byte and the
/// node's address, the highest wins), which the healthy phase checks against the queue's keys.
fn resource_queued_on(urls: &[String], node: usize, name: &str) -> String {
    let rl = Redlock::builder().nodes(urls).build().expect("client");
    let addresses: Vec<String> = rl.node_status().into_iter().map(|s| s.address).collect();
    let hash = |resource: &str, address: &str| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in resource.bytes().chain([0]).chain(address.bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    (0..)
        .map(|i| format!("bench-faults-{name}-{i}"))
        .find(|r| {
            let mine = hash(r, &addresses[node]);
            addresses
                .iter()
                .all(|a| *a == addresses[node] || hash(r, a) < mine)
        })
        .expect("some name hashes to each node")
}

/// The nodes that hold a queue across processes, by index (nodes that do not answer left out).
fn queue_nodes(five: &Cluster) -> Vec<usize> {
    (0..five.nodes.len())
        .filter(|&i| {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("redlock:queue:*")
                .query(&mut five.nodes[i].conn())
                .unwrap_or_default();
            !keys.is_empty()
        })
        .collect()
}

/// redquorum's callers spread over `n` processes of this program (the first ones take one
/// more when they do not divide evenly).
fn processes(urls: &[String], n: usize, wait: bool, resource: &str) -> Load {
    let exe = std::env::current_exe().expect("this program");
    let kids = (0..n)
        .map(|i| {
            let share = WORKERS / n + usize::from(i < WORKERS % n);
            Command::new(&exe)
                .arg("--faults-child")
                .arg(urls.join(","))
                .arg(share.to_string())
                .arg(if wait { "wait" } else { "retry" })
                .arg(resource)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a child process")
        })
        .collect();
    Load::children(kids)
}

/// How many parts of a phase the JSON line counts the acquisitions of.
const SLICES: usize = 10;

/// One client through the phases; all five nodes are up again at the end.
fn phases(
    five: &mut Cluster,
    load: &mut Load,
    length: Duration,
    client: &str,
    kind: &str,
    emit: fn(String),
) {
    // Healthy is measured from the first acquisition on, not from the client's start.
    let started = Instant::now();
    while load.counts().acquired == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{client} acquired nothing in 30 s on five healthy nodes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rates = Vec::new();
    for (phase, nodes, action) in PHASES {
        for &i in nodes {
            match action {
                Action::None => {}
                Action::Hang => five.nodes[i].hang(),
                Action::Resume => five.nodes[i].resume(),
                Action::Kill => five.nodes[i].kill(),
                Action::Restart => five.nodes[i].restart(),
            }
        }
        let (before, t0) = (load.counts(), Instant::now());
        // Acquisitions in each tenth of the phase: how fast it recovers within the phase.
        let mut slices = Vec::with_capacity(SLICES);
        let mut last = before.acquired;
        for k in 1..=SLICES as u32 {
            std::thread::sleep(
                (t0 + length * k / SLICES as u32).saturating_duration_since(Instant::now()),
            );
            let now = load.counts().acquired;
            slices.push((now - last).to_string());
            last = now;
        }
        let after = load.counts();
        let secs = t0.elapsed().as_secs_f64();
        let rate = (after.acquired - before.acquired) as f64 / secs;
        emit(format!(
            "{{\"config\":\"faults\",\"client\":\"{client}\",\"lock\":\"{kind}\",\"phase\":\"{phase}\",\
             \"workers\":{WORKERS},\"acquired_per_s\":{rate:.0},\"gave_up\":{},\"slices\":[{}],{}}}",
            after.gave_up - before.gave_up,
            slices.join(","),
            after.node_json(&before),
        ));
        rates.push(rate);
        if phase == "healthy" && kind == "waiting" {
            let queues = queue_nodes(five);
            assert!(
                queues == [QUEUE_NODE],
                "{client}'s queue is on nodes {queues:?}, not on node {QUEUE_NODE}"
            );
        }
    }
    let r = |a: usize, b: usize| rates[a] / rates[b].max(1.0);
    emit(format!(
        "{{\"config\":\"faults-ratios\",\"client\":\"{client}\",\"lock\":\"{kind}\",\
         \"hung_over_killed_1\":{:.2},\"hung_over_killed_2\":{:.2},\
         \"resumed_over_healthy_1\":{:.2},\"restarted_over_healthy_1\":{:.2},\
         \"resumed_over_healthy_2\":{:.2},\"restarted_over_healthy_2\":{:.2}}}",
        r(1, 3),
        r(5, 7),
        r(2, 0),
        r(4, 0),
        r(6, 0),
        r(8, 0),
    ));
}
