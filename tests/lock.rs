//! The lock against real redis-server nodes that each test starts itself.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Error, NodeProblem, Redlock};
use support::{Cluster, NODE_TIMEOUT, RedisNode, eventually};

const TTL: Duration = Duration::from_secs(10);

#[test]
fn round_trip_sets_and_removes_the_key_on_every_node() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl.lock("round-trip", TTL).unwrap();
    assert_eq!(lock.resource(), "round-trip");
    assert_eq!(lock.token().len(), 40);
    assert!(lock.validity() > Duration::ZERO && lock.validity() <= TTL);
    // A quorum holds it at once; the last node's SET may still be on its way.
    assert!(cluster.holding("round-trip", lock.token()) >= 2);
    for node in &cluster.nodes {
        if node.get("round-trip").as_deref() == Some(lock.token()) {
            let pttl = node.pttl("round-trip");
            assert!(pttl > 9_000 && pttl <= 10_000, "PX ttl set, got {pttl}");
        }
    }
    let token = lock.token().to_owned();
    lock.release().unwrap();
    assert!(cluster.holding("round-trip", &token) <= 1);
    assert!(eventually(Duration::from_secs(2), || {
        cluster.nodes.iter().all(|n| n.get("round-trip").is_none())
    }));
}

#[test]
fn second_owner_is_refused_until_release() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let a = rl.try_lock("busy", TTL).unwrap();
    match rl.try_lock("busy", TTL) {
        Err(Error::NotAcquired {
            resource,
            attempts,
            report,
        }) => {
            assert_eq!(resource, "busy");
            assert_eq!(attempts, 1);
            assert_eq!(report.refused(), 2, "decided as soon as a quorum refused");
        }
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    // lock() retries retry_count times (3 for the suite's client), then gives up with the
    // attempt count.
    match rl.lock("busy", TTL) {
        Err(Error::NotAcquired { attempts, .. }) => assert_eq!(attempts, 4),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    a.release().unwrap();
    rl.try_lock("busy", TTL).unwrap().release().unwrap();
}

/// A client with the default settings waits out a holder that releases after 2 s: its `lock()`
/// gets the lock instead of giving up. The default patience is 50 retries 200 ± 100 ms apart,
/// about 10 s (at least 5 s), as the README says.
#[test]
fn default_lock_waits_out_a_holder_that_releases_within_seconds() {
    let cluster = Cluster::start(3);
    let holder = cluster.client();
    let held = holder.try_lock("patient", TTL).unwrap();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        held.release().unwrap();
    });
    // Every retry setting the library's default; the node timeout is the suite's, since a
    // loaded machine misses the default 50 ms.
    let rl = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    let lock = rl
        .lock("patient", TTL)
        .expect("the default lock() waits out a 2 s hold");
    releaser.join().unwrap();
    assert!(cluster.holding("patient", lock.token()) >= 2);
    lock.release().unwrap();
    assert_eq!(
        redquorum::DEFAULT_RETRY_DELAY * redquorum::DEFAULT_RETRY_COUNT,
        Duration::from_secs(10),
        "the README states a default patience of about 10 s"
    );
}

#[test]
fn tokens_differ_between_acquisitions() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let t1 = rl.lock("tok", TTL).unwrap();
    let first = t1.token().to_owned();
    t1.release().unwrap();
    let t2 = rl.lock("tok", TTL).unwrap();
    assert_ne!(first, t2.token());
}

/// The non-atomic read-modify-write that mutual exclusion must protect.
fn contend(rl: &Redlock, counter: &AtomicU64, iterations: usize) -> u64 {
    let mut wins = 0;
    for _ in 0..iterations {
        if let Ok(lock) = rl.lock("counter", Duration::from_secs(5)) {
            let seen = counter.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(200));
            counter.store(seen + 1, Ordering::SeqCst);
            wins += 1;
            lock.release().unwrap();
        }
    }
    wins
}

#[test]
fn threads_exclude_each_other() {
    let cluster = Cluster::start(5);
    let rl = Redlock::builder()
        .nodes(cluster.urls())
        .retry_count(200)
        .retry_delay(Duration::from_millis(2))
        .retry_jitter(Duration::from_millis(2))
        // Each release is a single attempt that must reach a quorum.
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let rl = rl.clone();
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || contend(&rl, &counter, 25))
        })
        .collect();
    let wins: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(wins > 0);
    assert_eq!(
        counter.load(Ordering::SeqCst),
        wins,
        "a lost update means two holders at once"
    );
}

/// Child half of `processes_exclude_each_other`: runs only when the parent sets the variables.
#[test]
fn contention_child() {
    let (Ok(urls), Ok(file)) = (
        std::env::var("REDLOCK_CHILD_NODES"),
        std::env::var("REDLOCK_CHILD_COUNTER"),
    ) else {
        return;
    };
    let rl = Redlock::builder()
        .nodes(urls.split(','))
        .retry_count(500)
        .retry_delay(Duration::from_millis(3))
        .retry_jitter(Duration::from_millis(3))
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    let mut wins = 0;
    let give_up = Instant::now() + Duration::from_secs(120);
    while wins < 30 {
        // A retrying lock is not fair: a process that releases and locks again at once can
        // keep the others out for all their retries (seen beside two busy loops, where the
        // winner's 30 cycles outlasted 500 retries of the others). Exclusion is what this
        // test checks, so a lock that was not acquired is tried again.
        let lock = match rl.lock("file-counter", Duration::from_secs(5)) {
            Ok(lock) => lock,
            Err(Error::NotAcquired { .. }) if Instant::now() < give_up => continue,
            Err(e) => panic!("lock: {e}"),
        };
        let seen: u64 = std::fs::read_to_string(&file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_micros(300));
        std::fs::write(&file, (seen + 1).to_string()).unwrap();
        wins += 1;
        lock.release().unwrap();
    }
    println!("WINS={wins}");
}

#[test]
fn processes_exclude_each_other() {
    let cluster = Cluster::start(3);
    let file = std::env::temp_dir().join(format!("redlock-counter-{}", std::process::id()));
    std::fs::write(&file, "0").unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "contention_child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("REDLOCK_CHILD_NODES", cluster.urls().join(","))
                .env("REDLOCK_CHILD_COUNTER", &file)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut wins = 0u64;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "child failed");
        let text = String::from_utf8_lossy(&out.stdout);
        // The harness may print its own text on the same line.
        let at = text.find("WINS=").expect("child reported") + 5;
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        wins += digits.parse::<u64>().unwrap();
    }
    let total: u64 = std::fs::read_to_string(&file).unwrap().parse().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(wins, 90);
    assert_eq!(
        total, wins,
        "a lost update means two processes held the lock at once"
    );
}

#[test]
fn an_abandoned_lock_frees_itself_after_its_ttl() {
    let cluster = Cluster::start(3);
    let holder = cluster.client();
    // Built before the lock is taken: the refusal below must come within the short TTL.
    let rl = cluster.client();
    let ttl = Duration::from_secs(1);
    let lock = holder.try_lock("abandoned", ttl).unwrap();
    let acquired = Instant::now();
    // A holder that never releases (crashed, say): its Drop never runs.
    std::mem::forget(lock);
    assert!(matches!(
        rl.try_lock("abandoned", TTL),
        Err(Error::NotAcquired { .. })
    ));
    // The quorum's keys were set before the lock was returned: gone one TTL later.
    std::thread::sleep(
        (acquired + ttl + Duration::from_millis(100)).saturating_duration_since(Instant::now()),
    );
    rl.try_lock("abandoned", TTL).unwrap().release().unwrap();
}

#[test]
fn release_and_extend_are_owner_only() {
    let cluster = Cluster::start(5);
    let rl = cluster.client();
    let a = rl.try_lock("owned", Duration::from_millis(100)).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(a.validity(), Duration::ZERO);
    let b = rl.try_lock("owned", TTL).unwrap();
    let held_by_b = cluster.holding("owned", b.token());
    assert!(held_by_b >= 3);
    // Past its validity an extension is refused as lost without asking the nodes: another owner
    // may have come and gone meanwhile.
    match a.extend(TTL) {
        Err(Error::Lost { report: None, .. }) => {}
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(a.is_lost());
    assert!(matches!(a.release(), Err(Error::Lost { .. })));
    assert!(
        cluster.holding("owned", b.token()) >= held_by_b,
        "B's keys untouched"
    );
    for node in &cluster.nodes {
        if node.get("owned").as_deref() == Some(b.token()) {
            assert!(
                node.pttl("owned") > 9_000,
                "A's extend did not touch B's TTL"
            );
        }
    }
    b.release().unwrap();
}

/// A release that one node deleted, one found no longer ours and one did not answer in time
/// proves nothing lost: it is `NoQuorum` (the hung node's key expires with its TTL), not `Lost`.
#[test]
fn a_release_refused_by_a_minority_with_a_node_silent_is_no_quorum_not_lost() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl.try_lock("minority", TTL).unwrap();
    // The lock returns on a quorum: wait for the third SET, or the DEL below may come first.
    assert!(eventually(Duration::from_secs(5), || {
        cluster.holding("minority", lock.token()) == 3
    }));
    let _: () = redis::cmd("DEL")
        .arg("minority")
        .query(&mut cluster.nodes[1].conn())
        .unwrap();
    cluster.nodes[2].hang();
    let released = lock.release();
    cluster.nodes[2].resume();
    match released {
        Err(Error::NoQuorum { report, .. }) => {
            assert_eq!((report.refused(), report.errors()), (1, 1), "{report:?}")
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    assert_eq!(cluster.nodes[0].get("minority"), None);
}

#[test]
fn extend_moves_the_deadline_on_a_quorum() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let short = Duration::from_secs(1);
    let lock = rl.try_lock("extend", short).unwrap();
    let acquired = Instant::now();
    assert!(lock.validity() <= short);
    lock.extend(Duration::from_secs(20)).unwrap();
    assert!(lock.validity() > Duration::from_secs(19));
    // A quorum has the new TTL at once; the last node's reply may still be on its way.
    let extended = cluster
        .nodes
        .iter()
        .filter(|n| n.pttl("extend") > 19_000)
        .count();
    assert!(extended >= 2, "extended on {extended} nodes");
    // Outlive the short TTL: still held thanks to the extension.
    std::thread::sleep(
        (acquired + short + Duration::from_millis(100)).saturating_duration_since(Instant::now()),
    );
    assert!(matches!(
        rl.try_lock("extend", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.release().unwrap();
}

#[test]
fn extend_after_expiry_is_lost_and_deletes_nothing() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // lock, not try_lock: on a loaded machine one attempt can take longer than this TTL.
    let ttl = Duration::from_millis(200);
    let lock = rl.lock("late", ttl).unwrap();
    // The quorum's keys were set before the lock was returned: gone one TTL later.
    std::thread::sleep(ttl + Duration::from_millis(100));
    assert!(matches!(lock.extend(TTL), Err(Error::Lost { .. })));
    assert_eq!(lock.validity(), Duration::ZERO);
}

#[test]
fn extension_cap_is_enforced() {
    let cluster = Cluster::start(1);
    let rl = cluster.builder().max_extensions(2).build().unwrap();
    let lock = rl.lock("capped", TTL).unwrap();
    lock.extend(TTL).unwrap();
    lock.extend(TTL).unwrap();
    assert!(matches!(
        lock.extend(TTL),
        Err(Error::ExtensionLimit {
            max_extensions: 2,
            ..
        })
    ));
    assert!(lock.validity() > Duration::ZERO, "still held after the cap");
    lock.release().unwrap();
}

#[test]
fn dropping_a_lock_releases_it() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl.lock("dropped", TTL).unwrap();
    let token = lock.token().to_owned();
    drop(lock);
    assert!(eventually(Duration::from_secs(2), || cluster
        .holding("dropped", &token)
        == 0));
}

#[test]
fn two_of_five_killed_still_lock_three_killed_is_no_quorum() {
    let mut cluster = Cluster::start(5);
    // A node timeout far above the bound below: waiting for one would show.
    let node_timeout = Duration::from_secs(5);
    let rl = cluster
        .builder()
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    cluster.nodes[0].kill();
    cluster.nodes[3].kill();
    let lock = rl.lock("minority-down", TTL).unwrap();
    assert_eq!(cluster.holding("minority-down", lock.token()), 3);
    lock.release().unwrap();

    cluster.nodes[4].kill();
    let started = Instant::now();
    match rl.try_lock("minority-down", TTL) {
        Err(Error::NoQuorum { report, .. }) => {
            // Decided as soon as 3 failures made a quorum impossible, possibly before the two
            // live nodes answered: the three dead ones are named as unavailable.
            assert!(report.succeeded <= 2);
            for i in [0, 3, 4] {
                let address = format!("127.0.0.1:{}", cluster.nodes[i].port);
                assert!(
                    report
                        .failures
                        .iter()
                        .any(|f| f.node == address
                            && matches!(f.problem, NodeProblem::Unavailable(_))),
                    "{address} not reported unavailable: {report:?}"
                );
            }
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    // Refused connections are known at once: no waiting for timeouts (generous bound).
    assert!(
        started.elapsed() < node_timeout / 2,
        "{:?}",
        started.elapsed()
    );
    let text = rl.try_lock("minority-down", TTL).unwrap_err().to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{}", cluster.nodes[4].port)),
        "{text}"
    );

    // The nodes come back: the workers reconnect.
    for i in [0, 3, 4] {
        cluster.nodes[i].restart();
    }
    assert!(eventually(Duration::from_secs(10), || {
        let Ok(lock) = rl.try_lock("minority-down", TTL) else {
            return false;
        };
        // The call returned on a quorum: the last nodes' SETs may still be on their way.
        eventually(Duration::from_secs(1), || {
            cluster.holding("minority-down", lock.token()) == 5
        })
    }));
}

#[test]
fn hung_nodes_do_not_slow_acquisition_and_rejoin_after_resume() {
    let cluster = Cluster::start(5);
    // A long node_timeout: waiting on a hung node would show against the (generous) bounds.
    let node_timeout = Duration::from_secs(5);
    let rl = cluster
        .builder()
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    rl.lock("warmup", TTL).unwrap().release().unwrap();
    cluster.nodes[1].hang();
    cluster.nodes[2].hang();
    for i in 0..5 {
        let started = Instant::now();
        let lock = rl.try_lock("hung", TTL).unwrap();
        assert!(
            started.elapsed() < node_timeout / 2,
            "attempt {i} took {:?}",
            started.elapsed()
        );
        // Release waits for a quorum only, not for the hung nodes either.
        lock.release().unwrap();
        assert!(
            started.elapsed() < node_timeout * 3 / 4,
            "attempt {i} with its release took {:?}",
            started.elapsed()
        );
    }
    cluster.nodes[1].resume();
    cluster.nodes[2].resume();
    assert!(
        eventually(Duration::from_secs(10), || {
            // An attempt can meet the previous one's keys still being released: try again.
            let Ok(lock) = rl.try_lock("hung", TTL) else {
                return false;
            };
            // The call returned on a quorum: the last nodes' SETs may still be on their way.
            let all = eventually(Duration::from_secs(1), || {
                cluster.holding("hung", lock.token()) == 5
            });
            let _ = lock.release();
            all
        }),
        "resumed nodes take locks again"
    );
}

/// The report's verdict on the node at `address`, if the error has a report that names it.
fn problem_of(e: &Error, address: &str) -> Option<NodeProblem> {
    let report = match e {
        Error::NotAcquired { report, .. } | Error::NoQuorum { report, .. } => report,
        _ => return None,
    };
    report
        .failures
        .iter()
        .find(|f| f.node == address)
        .map(|f| f.problem.clone())
}

fn skipped(problem: &Option<NodeProblem>) -> bool {
    matches!(problem, Some(NodeProblem::Unavailable(why)) if why.contains("skipped"))
}

/// A hung node whose vote decides (two nodes refuse, two grant): the first attempts wait the
/// node timeout for it; once its worker has waited past that, attempts skip it and decide on
/// the others. Its late yes to an attempt that failed is undone, it rejoins once it answers in
/// time, and a second client is refused while the first holds the lock.
#[test]
fn a_hung_node_is_skipped_until_it_answers_in_time_and_its_late_yes_is_undone() {
    let cluster = Cluster::start(5);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .retry_count(0)
        .build()
        .unwrap();
    rl.lock("warmup", TTL).unwrap().release().unwrap();
    for i in [0, 2] {
        cluster.nodes[i].set("stall", "another-owner", 60_000);
    }
    let hung = cluster.nodes[1]
        .url()
        .trim_start_matches("redis://")
        .to_owned();
    cluster.nodes[1].hang();
    let mut tokens_tried = 0;
    assert!(
        eventually(Duration::from_secs(10), || {
            tokens_tried += 1;
            match rl.try_lock("stall", TTL) {
                Ok(lock) => panic!("acquired a resource two of five nodes refuse: {lock:?}"),
                Err(e) => skipped(&problem_of(&e, &hung)),
            }
        }),
        "an attempt skipped the hung node"
    );
    // Skipped from then on, until it answers: a skipped vote is a failure, never a refusal.
    for _ in 0..20 {
        let e = rl.try_lock("stall", TTL).unwrap_err();
        assert!(skipped(&problem_of(&e, &hung)), "{e:?}");
    }
    cluster.nodes[1].resume();
    // The first attempts' SET reached node 1 before it hung: it runs on resume, and the undo
    // after it removes it.
    assert!(
        eventually(Duration::from_secs(10), || cluster.nodes[1]
            .get("stall")
            .is_none()),
        "the late yes on the resumed node is undone: {:?} after {tokens_tried} attempts",
        cluster.nodes[1].get("stall")
    );
    // Node 1 answers again: with its yes, three of five grant.
    let mut lock = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            lock = rl.try_lock("stall", TTL).ok();
            lock.is_some()
        }),
        "the resumed node rejoins"
    );
    let lock = lock.unwrap();
    let other = cluster.client();
    assert!(matches!(
        other.try_lock("stall", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.release().unwrap();
    assert_eq!(cluster.nodes[1].get("stall"), None);
    assert_eq!(
        cluster.nodes[0].get("stall").as_deref(),
        Some("another-owner")
    );
}

/// A node that answers, but always later than the node timeout (a 200 ms round trip against
/// 50 ms), stays out once it is found stalled: its probes answer too late to let it back in, so
/// no attempt waits for it again.
#[test]
fn a_node_that_always_answers_too_late_stays_out_without_flapping() {
    let cluster = Cluster::start(3);
    let relay = support::DelayRelay::start(cluster.nodes[2].port, Duration::from_millis(100));
    let slow = format!("127.0.0.1:{}", relay.port);
    let mut urls = cluster.urls();
    urls[2] = format!("redis://{slow}");
    let rl = support::builder(&urls)
        .node_timeout(Duration::from_millis(50))
        .retry_count(0)
        .build()
        .unwrap();
    // Node 0 refuses, node 1 grants: node 2 decides.
    cluster.nodes[0].set("slow", "another-owner", 60_000);
    assert!(
        eventually(Duration::from_secs(10), || {
            let e = rl.try_lock("slow", TTL).unwrap_err();
            skipped(&problem_of(&e, &slow))
        }),
        "an attempt skipped the slow node"
    );
    for i in 0..50 {
        let e = rl.try_lock("slow", TTL).unwrap_err();
        assert!(skipped(&problem_of(&e, &slow)), "attempt {i}: {e:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn partial_acquisition_leaves_nothing_behind() {
    let cluster = Cluster::start(5);
    for node in &cluster.nodes[..3] {
        node.set("partial", "competitor", 10_000);
    }
    let rl = cluster.client();
    assert!(matches!(
        rl.try_lock("partial", TTL),
        Err(Error::NotAcquired { .. })
    ));
    // Our SETs on the 2 free nodes are undone; the competitor's keys stay.
    assert!(eventually(Duration::from_secs(2), || {
        cluster.nodes[3..]
            .iter()
            .all(|n| n.get("partial").is_none())
    }));
    assert_eq!(cluster.holding("partial", "competitor"), 3);
}

#[test]
fn one_node_is_the_single_instance_lock() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let lock = rl.try_lock("single", TTL).unwrap();
    assert_eq!(
        cluster.nodes[0].get("single").as_deref(),
        Some(lock.token())
    );
    assert!(matches!(
        rl.try_lock("single", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.release().unwrap();
    assert_eq!(cluster.nodes[0].get("single"), None);
}

#[test]
fn bad_input_is_rejected_before_any_node_is_touched() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    for (resource, ttl) in [
        ("", TTL),
        ("x", Duration::ZERO),
        ("x", Duration::from_millis(1)),
        ("x", Duration::from_millis(2)),
        ("x", redquorum::MAX_TTL + Duration::from_secs(1)),
    ] {
        match rl.try_lock(resource, ttl) {
            Err(Error::InvalidArgument { message }) => assert!(!message.is_empty()),
            other => panic!("{resource:?} {ttl:?}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert_eq!(cluster.nodes[0].get("x"), None);
    let lock = rl.lock("x", TTL).unwrap();
    assert!(matches!(
        lock.extend(Duration::ZERO),
        Err(Error::InvalidArgument { .. })
    ));
    lock.release().unwrap();
    // The largest TTL is accepted by Redis too.
    let lock = rl.lock("x", redquorum::MAX_TTL).unwrap();
    assert!(lock.validity() > Duration::from_secs(9 * 365 * 24 * 3600));
    lock.release().unwrap();
}

#[test]
fn unusual_resource_names_round_trip() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    // The longest name accepted (`MAX_RESOURCE_NAME` bytes).
    let long = "k".repeat(redquorum::MAX_RESOURCE_NAME);
    for name in ["with space", "new\nline", "ünïcødé 🔒", long.as_str()] {
        let lock = rl.lock(name, TTL).unwrap();
        assert_eq!(cluster.nodes[0].get(name).as_deref(), Some(lock.token()));
        lock.release().unwrap();
        assert_eq!(cluster.nodes[0].get(name), None);
    }
}

/// A server's scripts are shared by every connection to it: a client that connects to nodes
/// that have them (another process of the library loaded them) loads none, and one that lacks
/// some after a `SCRIPT FLUSH` gets them again and locks.
#[test]
fn a_client_loads_only_the_scripts_a_node_lacks() {
    let cluster = Cluster::start(3);
    let first = cluster.client();
    first.lock("scripts", TTL).unwrap().release().unwrap();
    let loads = || support::calls_per_node(&cluster.nodes, "script|load");
    let loaded = loads();
    assert!(loaded.iter().all(|&n| n > 0), "{loaded:?}");
    let second = cluster.client();
    second.lock("scripts", TTL).unwrap().release().unwrap();
    let after = loads();
    assert_eq!(
        after, loaded,
        "the second client loaded scripts the nodes had"
    );
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut cluster.nodes[0].conn())
        .unwrap();
    let third = cluster.client();
    let lock = third.lock("scripts", TTL).unwrap();
    assert_eq!(
        cluster.nodes[0].calls("script|load"),
        2 * loaded[0],
        "the flushed node gets every script again"
    );
    lock.extend(TTL).unwrap();
    lock.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || {
        cluster.nodes.iter().all(|n| n.get("scripts").is_none())
    }));
}

#[test]
fn scripts_are_reloaded_after_script_flush() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl.lock("flushed", TTL).unwrap();
    for node in &cluster.nodes {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node.conn())
            .unwrap();
    }
    lock.extend(TTL).unwrap();
    for node in &cluster.nodes {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node.conn())
            .unwrap();
    }
    // Extend and release would have failed with NOSCRIPT on every node without the reload.
    lock.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || {
        cluster.nodes.iter().all(|n| n.get("flushed").is_none())
    }));
}

/// `SCRIPT FLUSH`es back to back: one can land between the worker's reload of the scripts and
/// its resend of what came back `NOSCRIPT`. The resend carries the scripts' source, so no call
/// fails for it.
#[test]
fn a_flush_between_the_reload_and_the_resend_fails_no_call() {
    let cluster = Cluster::start(1);
    let node = &cluster.nodes[0];
    let rl = cluster.client();
    let stop = AtomicBool::new(false);
    let flushes = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut conn = node.conn();
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
            }
        });
        let started = Instant::now();
        let mut cycles = 0;
        while started.elapsed() < Duration::from_secs(2) {
            let outcome = rl.lock("flushed", TTL).and_then(|lock| {
                lock.extend(TTL)?;
                lock.release()
            });
            if let Err(e) = outcome {
                stop.store(true, Ordering::Relaxed);
                panic!("cycle {cycles} failed amid flushes: {e}");
            }
            cycles += 1;
        }
        stop.store(true, Ordering::Relaxed);
        assert!(cycles > 50, "{cycles} cycles in 2 s");
    });
    assert!(flushes.load(Ordering::Relaxed) > 100);
    assert_eq!(node.get("flushed"), None);
}

/// Caller threads share a node's one connection, whose worker sends whatever they queued as one
/// pipeline: each caller must get its own replies, through `SCRIPT FLUSH`es (a `NOSCRIPT` in a
/// batch, whose scripts are reloaded and its commands resent) and killed connections (a whole
/// batch lost at once, what is safe to resend resent). Four threads contend for one resource,
/// where a reply handed to the wrong caller would let two in; four cycle resources of their
/// own, where it would fail a call.
#[test]
fn callers_sharing_a_node_get_their_own_replies_through_flushes_and_kills() {
    const TTL: Duration = Duration::from_secs(3);
    let cluster = Cluster::start(1);
    let node = &cluster.nodes[0];
    let rl = cluster.client();
    let held = AtomicBool::new(false);
    let faults = AtomicU64::new(0); // 0: none, 1: flushes, 2: kills
    let stop = AtomicBool::new(false);
    let won = AtomicU64::new(0);
    let cycles = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    std::thread::scope(|s| {
        for i in 0..8 {
            let (rl, held, faults, stop, won, cycles) = (&rl, &held, &faults, &stop, &won, &cycles);
            s.spawn(move || {
                let own = format!("own-{i}");
                while !stop.load(Ordering::Relaxed) {
                    let phase = faults.load(Ordering::Relaxed);
                    let contending = i < 4;
                    let resource = if contending { "shared" } else { own.as_str() };
                    let result = rl.try_lock(resource, TTL);
                    // Kills began during the call: it may have lost its connection.
                    let killed = faults.load(Ordering::Relaxed) == 2;
                    match result {
                        Ok(lock) => {
                            if contending {
                                assert!(!held.swap(true, Ordering::SeqCst), "two holders");
                                won.fetch_add(1, Ordering::Relaxed);
                                held.store(false, Ordering::SeqCst);
                            }
                            let released = lock.release();
                            let killed = faults.load(Ordering::Relaxed) == 2;
                            assert!(released.is_ok() || killed, "{released:?}");
                            if !contending {
                                cycles[phase as usize].fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(Error::NotAcquired { .. }) if contending => {}
                        // A killed connection fails the calls it carried, naming the node.
                        Err(e @ Error::NoQuorum { .. }) if killed => {
                            assert!(
                                e.to_string().contains(&format!("127.0.0.1:{}", node.port)),
                                "{e}"
                            );
                        }
                        Err(e) => panic!("{resource} in phase {phase}: {e:?}"),
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        faults.store(1, Ordering::Relaxed);
        for _ in 0..10 {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query(&mut node.conn())
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        faults.store(2, Ordering::Relaxed);
        for _ in 0..5 {
            node.kill_clients();
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let counts: Vec<u64> = cycles.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    assert!(
        counts.iter().all(|&c| c > 50),
        "cycles per phase: {counts:?}"
    );
    assert!(
        won.load(Ordering::Relaxed) > 50,
        "the contended resource changed hands"
    );
    // What a killed connection's release could not remove expires with its TTL.
    assert!(eventually(TTL + Duration::from_secs(1), || {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut node.conn()).unwrap();
        keys == 0
    }));
}

#[test]
fn password_and_database_come_from_the_url() {
    let node = RedisNode::start_with(&["--requirepass", "s3cret"]);
    let url = format!("redis://:s3cret@127.0.0.1:{}/3", node.port);
    let rl = Redlock::builder()
        .node(&url)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    let lock = rl.lock("authed", TTL).unwrap();
    let mut conn = node.conn();
    let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut conn).unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut conn).unwrap();
    let v: Option<String> = redis::cmd("GET").arg("authed").query(&mut conn).unwrap();
    assert_eq!(v.as_deref(), Some(lock.token()));
    lock.release().unwrap();

    // A wrong password is reported per node, without the password.
    let bad = format!("redis://:wrong-pw@127.0.0.1:{}", node.port);
    let rl = Redlock::builder().node(&bad).build().unwrap();
    let err = rl.try_lock("authed", TTL).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::NoQuorum { .. }), "{text}");
    assert!(text.contains(&node.port.to_string()), "{text}");
    assert!(
        !text.contains("wrong-pw") && !format!("{rl:?}").contains("wrong-pw"),
        "{text}"
    );
}
