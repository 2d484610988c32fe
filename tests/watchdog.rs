//! Auto-extension: the extender keeps a lock alive while its holder works, reports a lost lock,
//! and stops for certain on release, drop, panic and client drop. Real nodes, real threads.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redquorum::{AutoExtend, Error, Lock, LockRequest};
use support::{Cluster, RedisNode, eventually};

/// Auto-extension needs `ttl × extend_fraction + node_timeout < ttl`: with the test client's
/// patient node timeout (1 s), a TTL whose extensions (every third of it) outrun a stalled one.
const TTL: Duration = Duration::from_secs(2);

fn auto() -> AutoExtend {
    AutoExtend::new()
}

/// Every command a node runs (scripts' inner calls included), as `MONITOR` prints them.
struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stream: TcpStream,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(node: &RedisNode) -> Monitor {
        let mut stream = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert!(ok.starts_with("+OK"), "{ok}");
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line.to_lowercase());
            }
        });
        Monitor {
            lines,
            stream,
            reader: Some(reader),
        }
    }

    /// `PEXPIRE`s of `key` after its last `DEL`, and whether a `DEL` was seen.
    fn pexpires_after_del(&self, key: &str) -> (usize, bool) {
        let lines = self.lines.lock().unwrap();
        let del = format!("\"del\" \"{key}\"");
        let pexpire = format!("\"pexpire\" \"{key}\"");
        match lines.iter().rposition(|l| l.contains(&del)) {
            Some(at) => (
                lines[at..].iter().filter(|l| l.contains(&pexpire)).count(),
                true,
            ),
            None => (0, false),
        }
    }

    fn pexpires(&self, key: &str) -> usize {
        let pexpire = format!("\"pexpire\" \"{key}\"");
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|l| l.contains(&pexpire)).count()
    }
}

/// Watches every node of `cluster`.
fn monitors(cluster: &Cluster) -> Vec<Monitor> {
    cluster.nodes.iter().map(Monitor::start).collect()
}

/// The nodes where `token` holds `key` now (a quorum at least, right after a lock call): each of
/// them runs every later extension and release of it, where a node whose SET was still on its
/// way, or dropped at the call's deadline, might not.
fn holders(cluster: &Cluster, key: &str, token: &str) -> Vec<usize> {
    let held: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| cluster.nodes[i].get(key).as_deref() == Some(token))
        .collect();
    assert!(held.len() * 2 > cluster.nodes.len(), "held on {held:?}");
    held
}

/// Whatever the other client's attempt says, it must not get the lock.
fn refused(result: Result<Lock, Error>) {
    match result {
        // NoQuorum when a node is too slow to answer in time: still not acquired.
        Err(Error::NotAcquired { .. } | Error::NoQuorum { .. }) => {}
        other => panic!("another client got in: {other:?}"),
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

#[test]
fn holder_outlives_its_ttl_many_times_and_nobody_else_gets_in() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let other = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("long-work", TTL).auto_extend(auto()))
        .unwrap();
    let start = Instant::now();
    // Three TTLs of work.
    while start.elapsed() < TTL * 3 {
        assert!(lock.is_held(), "lost after {:?}", start.elapsed());
        assert!(lock.validity() <= TTL);
        refused(other.try_lock("long-work", TTL));
        std::thread::sleep(Duration::from_millis(40));
    }
    assert!(!lock.is_lost());
    assert!(lock.lost().try_recv().is_err_and(|e| e.is_empty()));
    lock.release().unwrap();
    other.try_lock("long-work", TTL).unwrap().release().unwrap();
}

#[test]
fn lost_signal_fires_within_an_interval_when_a_majority_loses_the_keys() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let ttl = Duration::from_secs(3);
    let lock = rl
        .acquire(&LockRequest::new("deleted", ttl).auto_extend(auto()))
        .unwrap();
    let called = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&called);
    lock.on_lost(move |resource| {
        assert_eq!(resource, "deleted");
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let lost = lock.lost();
    // Let one extension go through first (one comes every third of the TTL). By then the
    // acquire's deadline (one node timeout) is long past: no node gets its SET any more.
    std::thread::sleep(ttl / 2);
    assert!(lock.is_held());
    // Deleted on all holders but one: a majority has lost the key for good.
    let held = holders(&cluster, "deleted", lock.token());
    let keep = held[0];
    for &i in &held[1..] {
        cluster.nodes[i].del("deleted");
    }
    let deleted = Instant::now();
    // Disconnects at the next extension: one interval (1 s), with a generous margin.
    assert!(matches!(
        lost.recv_timeout(Duration::from_secs(5)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected)
    ));
    let after = deleted.elapsed();
    assert!(after < Duration::from_secs(5), "{after:?}");
    assert!(lock.is_lost());
    assert!(!lock.is_held());
    assert_eq!(lock.validity(), Duration::ZERO);
    assert!(eventually(Duration::from_secs(1), || called
        .load(Ordering::SeqCst)
        == 1));
    // A failed extension never deletes keys: the remaining holder keeps ours.
    assert_eq!(
        cluster.nodes[keep].get("deleted").as_deref(),
        Some(lock.token())
    );
    // A callback registered after the loss runs at once.
    let late = Arc::new(AtomicUsize::new(0));
    let l2 = Arc::clone(&late);
    lock.on_lost(move |_| {
        l2.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(late.load(Ordering::SeqCst), 1);
    assert!(matches!(lock.release(), Err(Error::Lost { .. })));
}

#[test]
fn extender_stops_when_the_lock_is_dropped() {
    let cluster = Cluster::start(3);
    let monitors = monitors(&cluster);
    let rl = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("dropped", TTL).auto_extend(auto()))
        .unwrap();
    let monitor = &monitors[holders(&cluster, "dropped", lock.token())[0]];
    assert!(eventually(Duration::from_secs(5), || monitor
        .pexpires("dropped")
        >= 2));
    drop(lock);
    // Several intervals (a third of the TTL each) pass with no extension after the release.
    std::thread::sleep(TTL);
    assert!(eventually(Duration::from_secs(2), || monitor
        .pexpires_after_del("dropped")
        .1));
    assert_eq!(monitor.pexpires_after_del("dropped").0, 0);
    assert!(eventually(Duration::from_secs(2), || cluster
        .nodes
        .iter()
        .all(|n| n.get("dropped").is_none())));
}

#[test]
fn extender_stops_when_the_lock_is_released() {
    let cluster = Cluster::start(3);
    let monitors = monitors(&cluster);
    let rl = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("released", TTL).auto_extend(auto()))
        .unwrap();
    let monitor = &monitors[holders(&cluster, "released", lock.token())[0]];
    assert!(eventually(Duration::from_secs(5), || monitor
        .pexpires("released")
        >= 2));
    let lost = lock.lost();
    lock.release().unwrap();
    // The signal ends with the lock, and says it was not lost.
    assert!(lost.recv_timeout(Duration::from_secs(1)).is_err());
    // Several intervals pass with no extension after the release.
    std::thread::sleep(TTL);
    assert!(eventually(Duration::from_secs(2), || monitor
        .pexpires_after_del("released")
        .1));
    assert_eq!(monitor.pexpires_after_del("released").0, 0);
}

#[test]
fn extender_stops_when_the_holder_thread_panics() {
    let cluster = Cluster::start(3);
    let monitors = monitors(&cluster);
    let rl = cluster.client();
    let (token_tx, token_rx) = crossbeam_channel::bounded(1);
    let holder = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            let lock = rl
                .acquire(&LockRequest::new("panicked", TTL).auto_extend(auto()))
                .unwrap();
            token_tx.send(lock.token().to_owned()).unwrap();
            std::thread::sleep(TTL * 2);
            panic!("the holder's work failed");
        })
    };
    let token = token_rx.recv().expect("the holder took the lock");
    let monitor = &monitors[holders(&cluster, "panicked", &token)[0]];
    assert!(holder.join().is_err());
    assert!(monitor.pexpires("panicked") >= 2, "it was being extended");
    // Several intervals pass with no extension after the release.
    std::thread::sleep(TTL);
    assert!(eventually(Duration::from_secs(2), || monitor
        .pexpires_after_del("panicked")
        .1));
    assert_eq!(monitor.pexpires_after_del("panicked").0, 0);
    rl.try_lock("panicked", TTL).unwrap().release().unwrap();
}

#[test]
fn dropping_the_client_handle_keeps_a_held_lock_extended_until_the_lock_goes() {
    let cluster = Cluster::start(3);
    let monitors = monitors(&cluster);
    let rl = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("client-dropped", TTL).auto_extend(auto()))
        .unwrap();
    let monitor = &monitors[holders(&cluster, "client-dropped", lock.token())[0]];
    drop(rl);
    // The lock keeps its client alive: it is still held, two TTLs later.
    std::thread::sleep(TTL * 2);
    assert!(lock.is_held());
    let before = monitor.pexpires("client-dropped");
    assert!(before >= 3, "{before}");
    drop(lock);
    // Several intervals pass with no extension after the release.
    std::thread::sleep(TTL);
    assert!(eventually(Duration::from_secs(2), || monitor
        .pexpires_after_del("client-dropped")
        .1));
    assert_eq!(monitor.pexpires_after_del("client-dropped").0, 0);
    assert!(eventually(Duration::from_secs(2), || cluster
        .nodes
        .iter()
        .all(|n| n.get("client-dropped").is_none())));
}

#[test]
fn max_hold_ends_extension_and_reports_the_lock_lost_when_it_runs_out() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Beyond one TTL: reached only if the lock was extended.
    let max_hold = TTL + TTL / 2;
    let lock = rl
        .acquire(&LockRequest::new("capped", TTL).auto_extend(auto().max_hold(max_hold)))
        .unwrap();
    let start = Instant::now();
    assert!(lock.lost().recv_timeout(Duration::from_secs(15)).is_err());
    assert!(lock.is_lost());
    // Not before max_hold: extended until then.
    assert!(start.elapsed() >= max_hold, "{:?}", start.elapsed());
    assert!(eventually(Duration::from_secs(2), || rl
        .try_lock("capped", TTL)
        .map(|l| l.release())
        .is_ok()));
}

#[test]
fn max_extensions_caps_auto_extension() {
    let cluster = Cluster::start(3);
    let rl = cluster.builder().max_extensions(2).build().unwrap();
    let lock = rl
        .acquire(&LockRequest::new("limited", TTL).auto_extend(auto()))
        .unwrap();
    let start = Instant::now();
    assert!(lock.lost().recv_timeout(Duration::from_secs(15)).is_err());
    assert!(lock.is_lost());
    // Two extensions at TTL/3, then the last TTL runs out.
    assert!(start.elapsed() >= TTL, "{:?}", start.elapsed());
}

#[test]
fn a_short_outage_of_a_majority_is_ridden_out_while_validity_remains() {
    let cluster = Cluster::start(3);
    // A node timeout well below the outage, so that the extension due during it fails (and is
    // retried) instead of simply waiting the outage out.
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(3);
    let lock = rl
        .acquire(&LockRequest::new("outage", ttl).auto_extend(auto()))
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    cluster.nodes[0].hang();
    cluster.nodes[1].hang();
    // Over the first extension (at 1 s), over by the second third of the TTL.
    std::thread::sleep(Duration::from_millis(1500));
    cluster.nodes[0].resume();
    cluster.nodes[1].resume();
    // Past the deadline of the acquire: held only if an extension got through.
    std::thread::sleep(ttl);
    assert!(lock.is_held(), "lost through a short outage");
    assert!(!lock.is_lost());
    refused(cluster.client().try_lock("outage", ttl));
    lock.release().unwrap();
}

#[test]
fn with_lock_runs_the_closure_under_an_extended_lock_and_releases_after() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let other = cluster.client();
    let value = rl
        .with_lock("scoped", TTL, |lock| {
            std::thread::sleep(TTL + TTL / 2);
            assert!(lock.is_held());
            refused(other.try_lock("scoped", TTL));
            42
        })
        .unwrap();
    assert_eq!(value, 42);
    other.try_lock("scoped", TTL).unwrap().release().unwrap();
}

#[test]
fn with_lock_tells_the_closure_and_the_caller_when_the_lock_was_lost() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let result = rl.with_lock("scoped-lost", TTL, |lock| {
        // Gone from every node that has it (a quorum): a SET still on its way to the last
        // node leaves it on one node at most.
        for i in holders(&cluster, "scoped-lost", lock.token()) {
            cluster.nodes[i].del("scoped-lost");
        }
        // The closure can wait on (or poll) the signal during its work.
        let ended = lock.lost().recv_timeout(Duration::from_secs(5)).is_err();
        (ended, lock.is_held())
    });
    match result {
        Err(Error::Lost { resource, .. }) => assert_eq!(resource, "scoped-lost"),
        other => panic!("expected Lost, got {other:?}"),
    }
}

#[test]
fn bad_auto_extend_options_are_rejected() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    for (ttl, opts) in [
        (TTL, auto().fraction(0.0)),
        (TTL, auto().fraction(1.0)),
        (TTL, auto().fraction(f64::NAN)),
        // The client's node_timeout (1 s) does not fit after the first third of 1.2 s.
        (Duration::from_millis(1200), auto()),
    ] {
        assert!(matches!(
            rl.acquire(&LockRequest::new("bad-opts", ttl).auto_extend(opts)),
            Err(Error::InvalidArgument { .. })
        ));
    }
    assert!(cluster.nodes[0].get("bad-opts").is_none());
}
