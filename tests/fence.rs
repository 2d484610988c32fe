//! Fenced locks against real redis-server nodes: tokens grow from holder to holder, also while
//! a minority of nodes hangs or crashes and comes back empty.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redquorum::{Error, Redlock};
use support::Shorthands;
use support::{Cluster, RedisNode, eventually};

const TTL: Duration = Duration::from_secs(10);

fn counter(node: &RedisNode, resource: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(format!("redlock:fence:{{{resource}}}"))
        .query(&mut node.conn())
        .expect("GET counter")
}

fn counter_pttl(node: &RedisNode, resource: &str) -> i64 {
    node.pttl(&format!("redlock:fence:{{{resource}}}"))
}

#[test]
fn tokens_grow_and_the_counter_is_written_back_without_ttl() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let mut last = 0;
    for _ in 0..5 {
        let lock = rl.lock_fenced("fenced", TTL).unwrap();
        let fence = lock.fence().expect("a fenced lock has a token");
        // Not necessarily consecutive: an attempt that failed on some nodes, or a command
        // resent on a fresh connection, may skip a number.
        assert!(fence > last, "token {fence} after {last}");
        last = fence;
        // The lock is a plain one: the same bytes as lock() puts there.
        assert!(cluster.holding("fenced", lock.token()) >= 2);
        let written = cluster
            .nodes
            .iter()
            .filter(|n| counter(n, "fenced") == Some(fence))
            .count();
        assert!(written >= 2, "the fence is written back to a quorum");
        lock.release().unwrap();
    }
    // Every node catches up through the write-backs (a node whose acquire came after the
    // decision counted from its own clock, a little later: above the token, which is as good),
    // and no counter ever expires.
    assert!(eventually(Duration::from_secs(2), || {
        cluster
            .nodes
            .iter()
            .all(|n| counter(n, "fenced") >= Some(last) && counter_pttl(n, "fenced") == -1)
    }));
    let counters: Vec<Option<u64>> = cluster.nodes.iter().map(|n| counter(n, "fenced")).collect();
    // Plain locks carry no token, and do not touch the counter.
    let plain = rl.lock("fenced", TTL).unwrap();
    assert_eq!(plain.fence(), None);
    plain.release().unwrap();
    let after: Vec<Option<u64>> = cluster.nodes.iter().map(|n| counter(n, "fenced")).collect();
    assert_eq!(after, counters);
    let next = rl.lock_fenced("fenced", TTL).unwrap().fence().unwrap();
    assert!(next > last, "token {next} after {last}");
}

/// The counters of the nodes where `token` holds `resource` now, by node. Every command this
/// client sent before that lock's acquire has run there (one connection per node, in order).
fn counters_where_held(cluster: &Cluster, resource: &str, token: &str) -> Vec<(usize, u64)> {
    let held: Vec<(usize, u64)> = cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.get(resource).as_deref() == Some(token))
        .map(|(i, n)| (i, counter(n, resource).unwrap_or(0)))
        .collect();
    assert!(held.len() >= 2, "held on a quorum: {held:?}");
    held
}

#[test]
fn fenced_and_plain_locks_exclude_each_other() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let fenced = rl.try_lock_fenced("shared", TTL).unwrap();
    let first = fenced.fence().unwrap();
    let before = counters_where_held(&cluster, "shared", fenced.token());
    assert!(matches!(
        rl.try_lock("shared", TTL),
        Err(Error::NotAcquired { .. })
    ));
    assert!(matches!(
        rl.try_lock_fenced("shared", TTL),
        Err(Error::NotAcquired { .. })
    ));
    // A refused fenced attempt does not count: where the key is held, its counter stands.
    for (i, count) in &before {
        assert_eq!(
            counter(&cluster.nodes[*i], "shared"),
            Some(*count),
            "node {i}"
        );
    }
    fenced.release().unwrap();
    let plain = rl.try_lock("shared", TTL).unwrap();
    let before = counters_where_held(&cluster, "shared", plain.token());
    assert!(matches!(
        rl.try_lock_fenced("shared", TTL),
        Err(Error::NotAcquired { .. })
    ));
    for (i, count) in &before {
        assert_eq!(
            counter(&cluster.nodes[*i], "shared").unwrap_or(0),
            *count,
            "node {i}"
        );
    }
    plain.release().unwrap();
    let next = rl.try_lock_fenced("shared", TTL).unwrap().fence().unwrap();
    assert!(next > first, "token {next} after {first}");
}

#[test]
fn a_higher_counter_on_a_quorum_node_is_followed() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Every node of any quorum sees at least one node with a counter ahead of every clock (set
    // by hand: the library never goes past its clocks): the token continues from there.
    const AHEAD: u64 = 4_000_000_000_000_000; // µs since the epoch: the year 2096
    for node in &cluster.nodes[..2] {
        let _: () = redis::cmd("SET")
            .arg("redlock:fence:{jump}")
            .arg(AHEAD)
            .query(&mut node.conn())
            .unwrap();
    }
    let lock = rl.lock_fenced("jump", TTL).unwrap();
    assert_eq!(lock.fence(), Some(AHEAD + 1));
    lock.release().unwrap();
    // The lagging node caught up through the write-back.
    assert!(eventually(Duration::from_secs(2), || counter(
        &cluster.nodes[2],
        "jump"
    )
    .is_some_and(|c| c > AHEAD)));
}

#[test]
fn a_counter_that_is_not_a_number_fails_cleanly_and_leaves_no_lock() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    cluster.nodes[0].set("redlock:fence:{garbled}", "not a number", 60_000);
    match rl.try_lock_fenced("garbled", TTL) {
        Err(Error::NoQuorum { report, .. }) => {
            let text = format!("{:?}", report.failures);
            assert!(text.contains("ERR"), "{text}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    assert_eq!(cluster.nodes[0].get("garbled"), None, "the SET was undone");
    // The resource is free for a plain lock.
    rl.try_lock("garbled", TTL).unwrap().release().unwrap();
}

/// Many clients take turns on a few resources while a minority of the five nodes hangs or is
/// killed and restarted empty. Every holder records its token while it holds the lock: per
/// resource, the tokens must strictly increase in the order the holders came.
///
/// The fault schedule keeps to the documented assumption: one fault at a time (one or two
/// hung nodes, or one killed node, which stays down longer than the TTL, as the Redlock page
/// asks of restarts), and before the next fault, every node has caught up with every token
/// handed out so far (re-replicated by later write-backs, which this test also asserts).
#[test]
fn tokens_strictly_increase_under_contention_and_minority_faults() {
    const RESOURCES: [&str; 3] = ["f-a", "f-b", "f-c"];
    const CLIENTS: usize = 4;
    let ttl = Duration::from_millis(800);
    let length = Duration::from_secs(12);

    let cluster = Arc::new(Mutex::new(Cluster::start(5)));
    let urls = cluster.lock().unwrap().urls();
    let seen: Arc<HashMap<&str, Mutex<Vec<u64>>>> = Arc::new(
        RESOURCES
            .iter()
            .map(|r| (*r, Mutex::new(Vec::new())))
            .collect(),
    );
    let held: Arc<HashMap<&str, AtomicBool>> = Arc::new(
        RESOURCES
            .iter()
            .map(|r| (*r, AtomicBool::new(false)))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicU64::new(0));

    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let rl = Redlock::builder()
                .nodes(&urls)
                .retry_count(0)
                .node_timeout(Duration::from_millis(100))
                .build()
                .unwrap();
            let (seen, held, stop, failures) = (
                Arc::clone(&seen),
                Arc::clone(&held),
                Arc::clone(&stop),
                Arc::clone(&failures),
            );
            std::thread::spawn(move || {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let resource = RESOURCES[i % RESOURCES.len()];
                    let Ok(lock) = rl.try_lock_fenced(resource, ttl) else {
                        failures.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    assert!(
                        !held[resource].swap(true, Ordering::SeqCst),
                        "two holders of {resource} at once"
                    );
                    seen[resource].lock().unwrap().push(lock.fence().unwrap());
                    std::thread::sleep(Duration::from_micros(500));
                    held[resource].store(false, Ordering::SeqCst);
                    // A release may fail while nodes are down: the keys expire.
                    let _ = lock.release();
                }
            })
        })
        .collect();

    let highest = |r: &str| seen[r].lock().unwrap().iter().copied().max().unwrap_or(0);
    let caught_up = |cluster: &Cluster| {
        RESOURCES.iter().all(|r| {
            let want = highest(r);
            cluster
                .nodes
                .iter()
                .all(|n| counter(n, r).unwrap_or(0) >= want)
        })
    };
    let started = Instant::now();
    let mut round = 0usize;
    let (mut hangs, mut kills) = (0, 0);
    while started.elapsed() < length {
        round += 1;
        {
            let mut cluster = cluster.lock().unwrap();
            let victim = round % 5;
            match round % 3 {
                0 => {
                    cluster.nodes[victim].kill();
                    std::thread::sleep(ttl + Duration::from_millis(200));
                    cluster.nodes[victim].restart();
                    kills += 1;
                }
                1 => {
                    cluster.nodes[victim].hang();
                    std::thread::sleep(Duration::from_millis(300));
                    cluster.nodes[victim].resume();
                    hangs += 1;
                }
                _ => {
                    let other = (victim + 2) % 5;
                    cluster.nodes[victim].hang();
                    cluster.nodes[other].hang();
                    std::thread::sleep(Duration::from_millis(300));
                    cluster.nodes[victim].resume();
                    cluster.nodes[other].resume();
                    hangs += 2;
                }
            }
            // The assumption: every node holds every token handed out before the next fault.
            assert!(
                eventually(Duration::from_secs(20), || caught_up(&cluster)),
                "write-backs did not re-replicate the counters after round {round}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }

    let mut total = 0;
    for r in RESOURCES {
        let tokens = seen[r].lock().unwrap();
        for pair in tokens.windows(2) {
            assert!(
                pair[0] < pair[1],
                "{r}: token {} after {}: {:?}",
                pair[1],
                pair[0],
                *tokens
            );
        }
        assert!(tokens.len() >= 20, "{r}: only {} holders", tokens.len());
        total += tokens.len();
    }
    eprintln!(
        "fenced fault test: {total} successful fenced acquisitions, {} failed attempts, \
         {hangs} node hangs, {kills} kills with empty restarts in {round} rounds",
        failures.load(Ordering::Relaxed)
    );
}

/// The review's reproduction. Five nodes; client A cannot reach n3 and n4, and takes three
/// fenced locks on n0..n2, whose write-backs reach only those. n0 crashes, stays down longer
/// than the TTL (the Redlock page's delayed restart) and comes back empty. Client B cannot reach
/// n1 and n2, so its quorum is {n0, n3, n4}, where no trace of the counter is left. The lock is
/// safe throughout (A's locks are long gone); B's token must still be above A's. With a bare
/// counter it started again at 1.
#[test]
fn a_delayed_restart_of_one_node_does_not_send_tokens_backwards() {
    use support::fake_server::DeadPort;
    const SHORT: Duration = Duration::from_millis(500);
    let mut cluster = Cluster::start(5);
    let urls = cluster.urls();
    let (dead_a, dead_b) = (
        [DeadPort::bind(), DeadPort::bind()],
        [DeadPort::bind(), DeadPort::bind()],
    );
    let dead = |d: &DeadPort| format!("redis://127.0.0.1:{}", d.port);
    let a_sees = [
        urls[0].clone(),
        urls[1].clone(),
        urls[2].clone(),
        dead(&dead_a[0]),
        dead(&dead_a[1]),
    ];
    let b_sees = [
        urls[0].clone(),
        dead(&dead_b[0]),
        dead(&dead_b[1]),
        urls[3].clone(),
        urls[4].clone(),
    ];
    let a = support::builder(&a_sees)
        .retry_count(0)
        .build()
        .expect("client A");
    let mut fences = Vec::new();
    for _ in 0..3 {
        let lock = a
            .lock_fenced("fence:delayed", SHORT)
            .expect("A locks on n0..n2");
        fences.push(lock.fence().unwrap());
        lock.release().expect("release");
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    for node in &cluster.nodes[3..] {
        assert_eq!(
            counter(node, "fence:delayed"),
            None,
            "A never reached n3, n4"
        );
    }

    cluster.nodes[0].kill();
    std::thread::sleep(SHORT * 2);
    cluster.nodes[0].restart();
    assert_eq!(
        counter(&cluster.nodes[0], "fence:delayed"),
        None,
        "n0 came back empty"
    );

    let b = support::builder(&b_sees)
        .retry_count(0)
        .build()
        .expect("client B");
    let lock = b
        .lock_fenced("fence:delayed", SHORT)
        .expect("B locks on n0, n3, n4");
    let fence = lock.fence().unwrap();
    assert!(
        fence > fences[2],
        "B got token {fence} after A's {fences:?}: tokens went backwards"
    );
    lock.release().expect("release");
}

/// A node whose clock is far from the client's can neither push fencing tokens towards the
/// future nor give them a floor from the past: its fenced acquires are refused with the reason,
/// before the node touches anything, while the other nodes make the quorum. Plain locks do not
/// read the node's clock for this.
#[test]
fn a_node_with_a_skewed_clock_is_refused_for_fencing_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("redlock-fence-skew-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = support::build_shim("clockshift", &dir, &[]);
    for (skew_ms, words) in [("5000", "ahead of"), ("-5000", "behind")] {
        let offset = dir.join(format!("offset{skew_ms}"));
        std::fs::write(&offset, skew_ms).unwrap();
        let skewed = RedisNode::start_with_env(
            &[],
            &[
                ("LD_PRELOAD", shim.to_str().unwrap()),
                ("CLOCKSHIFT_FILE", offset.to_str().unwrap()),
            ],
        );
        let good = Cluster::start(2);
        let mut urls = good.urls();
        urls.push(skewed.url());
        // The clock guard is off here, so that it does not quarantine the skewed node first:
        // the fence's own check must hold without it.
        let rl = support::builder(&urls)
            .clock_guard(false)
            .retry_count(0)
            .build()
            .expect("client");
        let lock = rl
            .lock_fenced("fence:skew", TTL)
            .expect("the two good nodes");
        assert_eq!(
            counter(&skewed, "fence:skew"),
            None,
            "the skewed node wrote no counter ({skew_ms} ms)"
        );
        assert_eq!(skewed.get("fence:skew"), None, "nor took the lock");
        lock.release().unwrap();

        // Alone with a good node, it makes no quorum, and the error says why.
        let pair = support::builder(&[good.urls()[0].clone(), skewed.url()])
            .clock_guard(false)
            .retry_count(0)
            .build()
            .expect("client");
        match pair.try_lock_fenced("fence:skew", TTL) {
            Err(Error::NoQuorum { report, .. }) => {
                let text = format!("{}", report.failures[0].problem);
                assert!(
                    text.contains("CLOCKSKEW") && text.contains(words),
                    "{skew_ms} ms: {text}"
                );
            }
            other => panic!("{skew_ms} ms: expected NoQuorum, got {other:?}"),
        }
        pair.try_lock("fence:skew", TTL)
            .expect("a plain lock does not need the node's clock")
            .release()
            .unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
