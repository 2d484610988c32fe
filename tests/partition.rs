//! A real network partition. Each of 5 lock nodes runs in its own network namespace with two
//! links: one to the root namespace, where client A (this test) runs, and one to a namespace of
//! its own where client B (this binary re-executed, see `partition_child`) runs. Taking three
//! nodes' links to the root namespace down leaves A with a minority and B with every node:
//! A must get no lock (and not hang), B keeps exclusion, a lock A held before the cut expires
//! and passes to B, and after healing A acquires again.
//!
//! Needs root and `ip netns` (iproute2); where those are missing or not permitted (an
//! unprivileged container, say) the test prints why and passes without running.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use redquorum::{Error, Redlock};
use support::eventually;

const NODES: usize = 5;
/// Nodes cut off from the root namespace: a majority, leaving A with two of five.
const CUT: [usize; 3] = [2, 3, 4];

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_output(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Why this machine cannot run the test, if it cannot: tries everything the test does once.
fn not_permitted() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    let ns = format!("rlq{}", std::process::id());
    if let Err(e) = ip(&["netns", "add", &ns]) {
        return Some(format!("cannot create a network namespace: {e}"));
    }
    let host = format!("{ns}h");
    let probe = ip(&[
        "link", "add", &host, "type", "veth", "peer", "name", "probe", "netns", &ns,
    ])
    .and_then(|()| ip(&["netns", "exec", &ns, "ip", "link", "set", "probe", "up"]));
    let _ = ip(&["link", "del", &host]);
    let _ = ip(&["netns", "del", &ns]);
    probe
        .err()
        .map(|e| format!("cannot link network namespaces: {e}"))
}

/// The namespaces, links and servers of one run; all removed on drop, also when the test fails.
struct Net {
    prefix: String,
    /// Second octet of the 10.x.0.0/16 block this run uses.
    octet: u8,
    dir: std::path::PathBuf,
    servers: Vec<Child>,
    namespaces: Vec<String>,
    links: Vec<String>,
    peer: Option<Peer>,
}

impl Net {
    fn node_ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    fn peer_ns(&self) -> String {
        format!("{}b", self.prefix)
    }

    /// Node i's address as the root namespace (client A) reaches it.
    fn a_addr(&self, i: usize) -> String {
        format!("10.{}.{}.2", self.octet, i + 1)
    }

    /// Node i's address as client B's namespace reaches it.
    fn b_addr(&self, i: usize) -> String {
        format!("10.{}.{}.2", self.octet, i + 101)
    }

    fn a_urls(&self) -> Vec<String> {
        (0..NODES)
            .map(|i| format!("redis://{}:6379", self.a_addr(i)))
            .collect()
    }

    fn b_urls(&self) -> Vec<String> {
        (0..NODES)
            .map(|i| format!("redis://{}:6379", self.b_addr(i)))
            .collect()
    }

    fn new() -> Net {
        let prefix = format!("rlp{}", std::process::id());
        // A /16 that nothing on this machine routes yet (several test runs may share it).
        let used = ip_output(&["-o", "addr"]) + &ip_output(&["route"]);
        let octet = (0..200u32)
            .map(|k| (20 + (std::process::id() + k) % 200) as u8)
            .find(|o| !used.contains(&format!("10.{o}.")))
            .expect("a free 10.x.0.0/16 block");
        let dir = std::env::temp_dir().join(format!("redlock-partition-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Net {
            prefix,
            octet,
            dir,
            servers: Vec::new(),
            namespaces: Vec::new(),
            links: Vec::new(),
            peer: None,
        }
    }

    fn add_ns(&mut self, name: String) {
        ip(&["netns", "add", &name]).unwrap();
        self.namespaces.push(name);
    }

    /// A veth pair: `outer` in `outer_ns` (None: the root namespace) with `.1`, its peer in
    /// `inner_ns` with `.2`, both up, in 10.octet.subnet.0/24.
    fn link(
        &mut self,
        outer: &str,
        outer_ns: Option<&str>,
        inner: &str,
        inner_ns: &str,
        subnet: usize,
    ) {
        let mut add = vec![
            "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", inner_ns,
        ];
        if let Some(ns) = outer_ns {
            add.splice(0..0, ["-n", ns]);
        }
        ip(&add).unwrap();
        if outer_ns.is_none() {
            self.links.push(outer.to_owned());
        }
        let outer_addr = format!("10.{}.{subnet}.1/24", self.octet);
        let inner_addr = format!("10.{}.{subnet}.2/24", self.octet);
        for (ns, dev, addr) in [
            (outer_ns, outer, &outer_addr),
            (Some(inner_ns), inner, &inner_addr),
        ] {
            let mut args: Vec<&str> = ns.map(|n| vec!["-n", n]).unwrap_or_default();
            let mut set = args.clone();
            args.extend(["addr", "add", addr, "dev", dev]);
            ip(&args).unwrap();
            set.extend(["link", "set", dev, "up"]);
            ip(&set).unwrap();
        }
    }

    fn setup(&mut self) {
        let peer_ns = self.peer_ns();
        self.add_ns(peer_ns.clone());
        for i in 0..NODES {
            let ns = self.node_ns(i);
            self.add_ns(ns.clone());
            let p = self.prefix.clone();
            self.link(&format!("{p}a{i}"), None, &format!("{p}x{i}"), &ns, i + 1);
            self.link(
                &format!("{p}b{i}"),
                Some(&peer_ns),
                &format!("{p}y{i}"),
                &ns,
                i + 101,
            );
        }
        for i in 0..NODES {
            let dir = self.dir.join(format!("n{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let server = Command::new("ip")
                .args(["netns", "exec", &self.node_ns(i)])
                .arg(
                    std::env::var("REDLOCK_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into()),
                )
                .args(["--port", "6379", "--bind", &self.a_addr(i), &self.b_addr(i)])
                .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server in its namespace");
            self.servers.push(server);
        }
        for i in 0..NODES {
            let url = format!("redis://{}:6379", self.a_addr(i));
            assert!(
                eventually(Duration::from_secs(10), || ping(&url)),
                "node {i} did not answer on {url}"
            );
        }
    }

    /// Cuts (or heals) the root namespace's links to the `CUT` nodes, at the nodes' ends, so
    /// packets vanish silently as on a broken network (the root end stays up: with it down, the
    /// kernel would route the addresses elsewhere).
    fn set_cut(&self, cut: bool) {
        for i in CUT {
            let dev = format!("{}x{i}", self.prefix);
            ip(&[
                "-n",
                &self.node_ns(i),
                "link",
                "set",
                &dev,
                if cut { "down" } else { "up" },
            ])
            .unwrap();
        }
    }

    fn start_peer(&mut self) -> &mut Peer {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.peer_ns()])
            .arg(exe)
            .args([
                "partition_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("REDLOCK_PARTITION_NODES", self.b_urls().join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start client B");
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness prints its own lines too; replies start with "R ".
                if let Some(at) = line.find("R ") {
                    let _ = tx.send(line[at + 2..].to_owned());
                }
            }
        });
        let stdin = child.stdin.take();
        self.peer.insert(Peer {
            child,
            stdin,
            replies,
        })
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut peer) = self.peer.take() {
            drop(peer.stdin.take());
            let _ = peer.child.kill();
            let _ = peer.child.wait();
        }
        for server in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        // Deleting a namespace takes its veth ends along, asynchronously; do not wait for it.
        for link in &self.links {
            let _ = ip(&["link", "del", link]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
        return false;
    };
    redis::cmd("PING").query::<String>(&mut conn).is_ok()
}

/// Client B, in its own namespace, driven line by line over stdin.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
}

impl Peer {
    fn ask(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.replies
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("client B did not answer {command:?}"))
    }
}

fn kind<T>(result: &redquorum::Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(Error::NotAcquired { .. }) => "not_acquired",
        Err(Error::NoQuorum { .. }) => "no_quorum",
        Err(Error::Lost { .. }) => "lost",
        Err(_) => "other",
    }
}

/// Child half of `partition_cuts_a_minority_off`: runs only when the parent sets the variable.
/// Commands: `lock R TTL_MS`, `try R TTL_MS` (a second owner; released at once if it gets the
/// lock), `extend R TTL_MS`, `release R`; each answers `R <outcome>`.
#[test]
fn partition_child() {
    let Ok(urls) = std::env::var("REDLOCK_PARTITION_NODES") else {
        return;
    };
    let rl = Redlock::builder()
        .nodes(urls.split(','))
        .retry_count(3)
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
        .build()
        .unwrap();
    let mut held = std::collections::HashMap::new();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ttl = || Duration::from_millis(words[2].parse().unwrap());
        let reply = match words[0] {
            "lock" => {
                let result = rl.lock(words[1], ttl());
                let k = kind(&result);
                if let Ok(lock) = result {
                    held.insert(words[1].to_owned(), lock);
                }
                k
            }
            "try" => {
                let result = rl.try_lock(words[1], ttl());
                let k = kind(&result);
                if let Ok(lock) = result {
                    lock.release().unwrap();
                }
                k
            }
            "extend" => match held.get_mut(words[1]) {
                Some(lock) => kind(&lock.extend(ttl())),
                None => "not_held",
            },
            "release" => match held.remove(words[1]) {
                Some(lock) => kind(&lock.release()),
                None => "not_held",
            },
            _ => "bad_command",
        };
        println!("R {reply}");
        std::io::stdout().flush().unwrap();
    }
}

#[test]
fn partition_cuts_a_minority_off() {
    if let Some(reason) = not_permitted() {
        println!("SKIPPED partition_cuts_a_minority_off: {reason}");
        return;
    }
    let started = Instant::now();
    let mut net = Net::new();
    net.setup();
    let a = Redlock::builder()
        .nodes(net.a_urls())
        .retry_count(3)
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
        .build()
        .unwrap();
    // A bound on one `lock` call (4 attempts of 50 ms, 3 delays of at most 30 ms) plus slack.
    let call_bound = Duration::from_millis(4 * 50 + 3 * 30 + 1_000);
    let b = net.start_peer();

    // Before the cut both sides see every node.
    assert_eq!(b.ask("lock held-by-b 30000"), "ok");
    assert!(matches!(
        a.try_lock("held-by-b", Duration::from_secs(5)),
        Err(Error::NotAcquired { .. })
    ));
    let held_by_a = a.lock("held-by-a", Duration::from_millis(2_000)).unwrap();

    net.set_cut(true);
    let b = net.peer.as_mut().unwrap();

    // A sees two nodes of five: no lock, and no waiting beyond its bound.
    let t = Instant::now();
    let free = a.try_lock("free", Duration::from_secs(5));
    assert!(matches!(free, Err(Error::NoQuorum { .. })), "{free:?}");
    let free = a.lock("free", Duration::from_secs(5));
    assert!(matches!(free, Err(Error::NoQuorum { .. })), "{free:?}");
    let held = a.lock("held-by-b", Duration::from_secs(5));
    assert!(held.is_err(), "A acquired B's lock from the minority side");
    assert!(t.elapsed() < 3 * call_bound, "calls took {:?}", t.elapsed());

    // B, with every node, keeps its lock (A's failed attempts removed nothing) and excludes a
    // second owner; the resources A could not take are free for B.
    assert_eq!(b.ask("extend held-by-b 30000"), "ok");
    assert_eq!(b.ask("try held-by-b 30000"), "not_acquired");
    assert_eq!(b.ask("lock free 5000"), "ok");
    assert_eq!(b.ask("release free"), "ok");

    // A's lock from before the cut still excludes B until it expires, then passes to B.
    assert_eq!(b.ask("try held-by-a 30000"), "not_acquired");
    std::thread::sleep(held_by_a.validity() + Duration::from_millis(100));
    assert_eq!(b.ask("lock held-by-a 30000"), "ok");

    net.set_cut(false);
    let b = net.peer.as_mut().unwrap();

    // Healed: A acquires again once its workers have reconnected.
    assert!(
        eventually(Duration::from_secs(10), || a
            .try_lock("free", Duration::from_secs(5))
            .and_then(|l| l.release())
            .is_ok()),
        "A did not acquire after the partition healed: {:?}",
        a.node_status()
    );
    assert!(eventually(Duration::from_secs(5), || a
        .node_status()
        .iter()
        .all(|s| s.connected)));
    // A's expired lock is B's now: A's release must say so and leave B's key alone.
    assert!(matches!(held_by_a.release(), Err(Error::Lost { .. })));
    assert_eq!(b.ask("extend held-by-a 30000"), "ok");
    assert!(matches!(
        a.try_lock("held-by-b", Duration::from_secs(5)),
        Err(Error::NotAcquired { .. })
    ));
    assert_eq!(b.ask("release held-by-b"), "ok");
    assert_eq!(b.ask("release held-by-a"), "ok");
    a.lock("held-by-b", Duration::from_secs(5))
        .unwrap()
        .release()
        .unwrap();
    a.lock("held-by-a", Duration::from_secs(5))
        .unwrap()
        .release()
        .unwrap();

    drop(net);
    println!("partition test took {:?}", started.elapsed());
}
