//! Multi-resource locks (all or nothing, one script per node) against real redis-server nodes.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Error, MAX_RESOURCES, Redlock};
use support::Shorthands;
use support::{Cluster, NODE_TIMEOUT, eventually};

const TTL: Duration = Duration::from_secs(10);

#[test]
fn all_resources_are_taken_extended_and_released_together() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl.lock_many(["m-c", "m-a", "m-b"], TTL).unwrap();
    assert_eq!(lock.resources(), ["m-a", "m-b", "m-c"], "sorted");
    assert_eq!(lock.resource(), "m-a,m-b,m-c");
    for key in ["m-a", "m-b", "m-c"] {
        assert!(cluster.holding(key, lock.token()) >= 2, "{key}");
    }
    lock.extend(Duration::from_secs(30)).unwrap();
    // On a quorum at once (a third node may apply the extension a moment later).
    let extended = cluster
        .nodes
        .iter()
        .filter(|n| ["m-a", "m-b", "m-c"].iter().all(|k| n.pttl(k) > 25_000))
        .count();
    assert!(extended >= 2, "extended on {extended} nodes");
    // Each resource alone is held.
    assert!(matches!(
        rl.try_lock("m-b", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || {
        cluster
            .nodes
            .iter()
            .all(|n| ["m-a", "m-b", "m-c"].iter().all(|k| n.get(k).is_none()))
    }));
}

#[test]
fn one_held_resource_blocks_the_set_and_nothing_is_left_behind() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let single = rl.try_lock("n-b", TTL).unwrap();
    match rl.try_lock_many(["n-a", "n-b", "n-c"], TTL) {
        Err(Error::NotAcquired { resource, .. }) => assert_eq!(resource, "n-a,n-b,n-c"),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    assert!(
        cluster.holding("n-b", single.token()) >= 2,
        "held on a quorum"
    );
    // All or nothing on every node: where "n-b" was held first, the set took nothing...
    for node in &cluster.nodes {
        if node.get("n-b").as_deref() == Some(single.token()) {
            assert_eq!(node.get("n-a"), None, "all or nothing on {}", node.port);
            assert_eq!(node.get("n-c"), None);
        }
    }
    // ...and the failed attempt is undone wherever it got in.
    assert!(eventually(Duration::from_secs(2), || {
        cluster
            .nodes
            .iter()
            .all(|n| n.get("n-a").is_none() && n.get("n-c").is_none())
    }));
    single.release().unwrap();
    rl.try_lock_many(["n-a", "n-b", "n-c"], TTL)
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn a_partial_acquisition_is_rolled_back_on_every_node() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // "p-b" is held on one node only: that node refuses the whole set, the others accept, so
    // the lock is ours on a quorum; with it held on two nodes, the attempt fails and the
    // third node's keys are removed again.
    cluster.nodes[0].set("p-b", "someone", 60_000);
    let lock = rl.try_lock_many(["p-a", "p-b"], TTL).unwrap();
    assert_eq!(cluster.nodes[0].get("p-a"), None);
    lock.release().unwrap();
    cluster.nodes[1].set("p-b", "someone", 60_000);
    assert!(matches!(
        rl.try_lock_many(["p-a", "p-b"], TTL),
        Err(Error::NotAcquired { .. })
    ));
    assert!(eventually(Duration::from_secs(2), || {
        cluster.nodes.iter().all(|n| n.get("p-a").is_none())
            && cluster.nodes[2].get("p-b").is_none()
    }));
}

#[test]
fn overlapping_sets_never_deadlock_and_never_both_hold() {
    let cluster = Cluster::start(5);
    let build = || {
        Redlock::builder()
            .nodes(cluster.urls())
            .retry_count(1000)
            .retry_delay(Duration::from_millis(3))
            .retry_jitter(Duration::from_millis(3))
            // Each release is a single attempt that must reach a quorum.
            .node_timeout(NODE_TIMEOUT)
            .build()
            .unwrap()
    };
    // Holders per key: any value above 1 means two holders at once.
    let in_use: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let wins = Arc::new(AtomicU64::new(0));
    let sets: [&[usize]; 4] = [&[0, 1], &[1, 2], &[2, 0], &[0, 1, 2]];
    let started = Instant::now();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let rl = build();
            let (in_use, wins) = (Arc::clone(&in_use), Arc::clone(&wins));
            let set = sets[t % sets.len()];
            std::thread::spawn(move || {
                let keys: Vec<String> = set.iter().map(|i| format!("o-{i}")).collect();
                for _ in 0..20 {
                    let lock = rl
                        .lock_many(&keys, TTL)
                        .expect("no deadlock, no starvation");
                    for &i in set {
                        assert_eq!(in_use[i].fetch_add(1, Ordering::SeqCst), 0, "o-{i} twice");
                    }
                    std::thread::sleep(Duration::from_micros(300));
                    for &i in set {
                        in_use[i].fetch_sub(1, Ordering::SeqCst);
                    }
                    lock.release().unwrap();
                    wins.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(wins.load(Ordering::Relaxed), 120);
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn bad_lists_are_invalid_arguments_and_change_nothing() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let too_many: Vec<String> = (0..=MAX_RESOURCES).map(|i| format!("k{i}")).collect();
    let cases: [(&str, Vec<String>); 4] = [
        ("empty", vec![]),
        ("is empty", vec!["a".into(), String::new()]),
        ("twice", vec!["a".into(), "b".into(), "a".into()]),
        ("more than", too_many),
    ];
    for (want, list) in cases {
        match rl.try_lock_many(&list, TTL) {
            Err(Error::InvalidArgument { message }) => {
                assert!(message.contains(want), "{message}")
            }
            other => panic!("{list:?}: {other:?}"),
        }
    }
    assert!(matches!(
        rl.try_lock_many(["a"], Duration::ZERO),
        Err(Error::InvalidArgument { .. })
    ));
    let size: i64 = redis::cmd("DBSIZE")
        .query(&mut cluster.nodes[0].conn())
        .unwrap();
    assert_eq!(size, 0);
    let max: Vec<String> = (0..MAX_RESOURCES).map(|i| format!("k{i}")).collect();
    rl.try_lock_many(&max, TTL).unwrap().release().unwrap();
}
