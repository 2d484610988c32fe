//! Redis Cluster nodes (`redis+cluster://`), against real processes (`support::RedisCluster`):
//! a whole cluster as one Redlock node, and three small clusters as three nodes; failovers by
//! `CLUSTER FAILOVER` and by SIGKILL.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Cancel, Error, Lock, LockRequest, NodeProblem, Redlock};
use support::Shorthands;
use support::{RedisCluster, RedisNode, eventually};

fn client(urls: &[String]) -> Redlock {
    support::builder(urls)
        .retry_count(0)
        .build()
        .expect("client")
}

fn guarded(urls: &[String], grace: Duration) -> Redlock {
    support::builder(urls)
        .retry_count(0)
        .restart_grace(grace)
        .build()
        .expect("client")
}

/// The cluster's problem in a failed acquisition's report, if it is listed.
fn cluster_problem(err: &Error, cluster: &RedisCluster) -> Option<NodeProblem> {
    match err {
        Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => report
            .failures
            .iter()
            .find(|f| f.node == cluster.address())
            .map(|f| f.problem.clone()),
        _ => None,
    }
}

/// Waits until the replica of `key`'s master has the key as the master has it, so that a
/// failover loses nothing. (Not `WAIT` on a connection of the test's own: it waits only for
/// that connection's writes, and a fresh one has made none, so it returned at once, and a
/// failover under load could lose the key the test then expected on the promoted replica.)
fn replicate(cluster: &RedisCluster, key: &str) {
    let m = cluster.master_of(key);
    let value = cluster.nodes[m].get(key);
    assert!(value.is_some(), "{key} is on its master");
    let replica = cluster.replica_of(m);
    assert!(
        eventually(Duration::from_secs(5), || on_replica(cluster, replica, key)
            .0
            == value),
        "the replica has {key}"
    );
}

#[test]
fn a_whole_cluster_is_one_node_for_every_kind() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 1);
    let rl = client(&[cluster.url()]);
    let status = &rl.node_status()[0];
    assert_eq!(status.address, cluster.address(), "{status:?}");
    assert!(status.connected, "{status:?}");
    let masters = status.master.clone().expect("the masters are listed");
    assert_eq!(masters.split(',').count(), 3, "{status:?}");
    assert_eq!(status.failovers, 0);
    assert!(
        status
            .warnings
            .iter()
            .all(|w| !w.contains("replica") && !w.contains("Cluster mode")),
        "a cluster's replicas and mode are expected: {:?}",
        status.warnings
    );

    // Keys in every master's slots.
    let ttl = Duration::from_secs(10);
    for resource in [
        "cluster:a",
        "cluster:b",
        "cluster:c",
        "cluster:d",
        "cluster:e",
    ] {
        let lock = rl.try_lock(resource, ttl).expect("lock");
        assert_eq!(cluster.get(resource).as_deref(), Some(lock.token()));
        assert!(matches!(
            rl.try_lock(resource, ttl),
            Err(Error::NotAcquired { .. })
        ));
        lock.extend(ttl).expect("extend");
        lock.release().expect("release");
        assert_eq!(cluster.get(resource), None);
    }
    let covered: std::collections::HashSet<usize> = ["cluster:a", "cluster:b", "cluster:c"]
        .iter()
        .chain(&["cluster:d", "cluster:e"])
        .map(|r| cluster.master_of(r))
        .collect();
    assert!(covered.len() >= 2, "the resources spread over the masters");

    // Every kind, with its own keys in its resource's slot.
    let fenced = rl.lock_fenced("cluster:fenced", ttl).expect("fenced");
    let first = fenced.fence().expect("a fencing token");
    fenced.release().expect("release fenced");
    let fenced = rl.lock_fenced("cluster:fenced", ttl).expect("fenced again");
    assert!(fenced.fence().expect("token") > first, "tokens rise");
    fenced.release().expect("release fenced");
    let owner = Redlock::new_owner().expect("owner");
    let outer = rl.reentrant_lock("cluster:re", &owner, ttl).expect("outer");
    let inner = rl.reentrant_lock("cluster:re", &owner, ttl).expect("inner");
    assert_eq!(inner.hold_count(), Some(2));
    inner.release().expect("inner release");
    outer.release().expect("outer release");
    let r1 = rl
        .acquire(&LockRequest::new("cluster:rw", ttl).read())
        .expect("reader");
    let r2 = rl
        .acquire(&LockRequest::new("cluster:rw", ttl).read())
        .expect("second reader");
    assert!(
        rl.acquire(&LockRequest::new("cluster:rw", ttl).write().once())
            .is_err()
    );
    r1.release().expect("release reader");
    r2.release().expect("release reader");
    let permits: Vec<_> = (0..2)
        .map(|_| {
            rl.acquire(&LockRequest::new("cluster:sem", ttl).semaphore(2))
                .expect("permit")
        })
        .collect();
    assert!(
        rl.acquire(&LockRequest::new("cluster:sem", ttl).semaphore(2).once())
            .is_err()
    );
    for p in permits {
        p.release().expect("release permit");
    }
    let many = rl
        .lock_many(["{cluster}:1", "{cluster}:2"], ttl)
        .expect("several resources in one slot");
    many.release().expect("release many");

    // inspect and force_release.
    let lock = rl.try_lock("cluster:inspect", ttl).expect("lock");
    let seen = rl.inspect("cluster:inspect").expect("inspect");
    assert_eq!(seen.holder.as_deref(), Some(lock.token()), "{seen:?}");
    assert!(seen.held);
    rl.force_release("cluster:inspect", None)
        .expect("force_release");
    assert_eq!(cluster.get("cluster:inspect"), None);
    assert!(matches!(lock.release(), Err(Error::Lost { .. }) | Ok(())));
    support::assert_no_worker_panicked();
}

#[test]
fn a_waiter_on_a_cluster_node_wakes_at_the_release_and_a_cancel_stops_it() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 0);
    let rl = client(&[cluster.url()]);
    let ttl = Duration::from_secs(30);
    let held = rl.try_lock("cluster:wait", ttl).expect("lock");

    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let lock = rl.acquire(
                &LockRequest::new("cluster:wait", Duration::from_secs(5))
                    .wait(Duration::from_secs(20)),
            );
            (lock, started.elapsed())
        })
    };
    // The waiter listens on one node of the cluster (classic pub/sub reaches every node).
    let listening = eventually(Duration::from_secs(5), || {
        cluster
            .nodes
            .iter()
            .map(|n| n.release_subscribers("cluster:wait"))
            .sum::<i64>()
            == 1
    });
    assert!(listening, "the waiter subscribed to the release channel");
    std::thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    held.release().expect("release");
    let (lock, _) = waiter.join().expect("waiter");
    let woke = released.elapsed();
    let lock = lock.expect("the waiter gets the lock after the release");
    assert!(
        woke < Duration::from_secs(5),
        "woken by the release, long before the holder's 30 s TTL: {woke:?}"
    );

    let cancel = Cancel::new();
    let waiter = {
        let rl = rl.clone();
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            rl.acquire(
                &LockRequest::new("cluster:wait", ttl)
                    .wait(Duration::from_secs(20))
                    .cancel(&cancel),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    cancel.cancel();
    let (result, _) = support::timed("a cancelled wait", || waiter.join().expect("waiter"));
    assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
    lock.release().expect("release");
    support::assert_no_worker_panicked();
}

/// `SCRIPT FLUSH`es back to back on a master: one can land between the reload of the scripts
/// and the resend of what came back `NOSCRIPT`. The resend carries the scripts' source, so no
/// call fails for it.
#[test]
fn a_flush_between_the_reload_and_the_resend_fails_no_call() {
    let cluster = RedisCluster::start(3, 0);
    let rl = client(&[cluster.url()]);
    let master = &cluster.nodes[cluster.master_of("flushed")];
    let stop = AtomicBool::new(false);
    let flushes = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut conn = master.conn();
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
            }
        });
        let started = Instant::now();
        let mut cycles = 0;
        while started.elapsed() < Duration::from_secs(2) {
            let outcome = rl
                .lock("flushed", Duration::from_secs(10))
                .and_then(|lock| {
                    lock.extend(Duration::from_secs(10))?;
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
    assert_eq!(master.get("flushed"), None);
}

#[test]
fn keys_that_do_not_fit_one_slot_are_refused_with_the_reason() {
    let cluster = RedisCluster::start(1, 0);
    let before = cluster.nodes[0].clients("");
    let rl = client(&[cluster.url()]);
    let ttl = Duration::from_secs(5);
    match rl.lock_many(["orders:1", "orders:2"], ttl) {
        Err(Error::InvalidArgument { message: why }) => {
            assert!(
                why.contains("hash slot") && why.contains("hash tag"),
                "{why}"
            );
            assert!(why.contains(&cluster.address()), "names the node: {why}");
        }
        other => panic!("resources in two slots: {other:?}"),
    }
    match rl.lock_fenced("a{b}c", ttl) {
        Err(Error::InvalidArgument { message: why }) => {
            assert!(why.contains("braces"), "{why}")
        }
        other => panic!("a name with braces of its own, fenced: {other:?}"),
    }
    // A plain lock's keys are the name and its channel, which shares the name's slot.
    rl.try_lock("a{b}c", ttl)
        .expect("plain lock of a name with braces")
        .release()
        .expect("release");

    // Nothing is left open once the client is gone.
    drop(rl);
    assert!(
        eventually(Duration::from_secs(5), || cluster.nodes[0].clients("")
            == before),
        "the client's connections are closed"
    );

    // A standalone URL to a cluster node says what to write instead.
    let plain = client(&[format!("redis://127.0.0.1:{}", cluster.nodes[0].port)]);
    let status = &plain.node_status()[0];
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("redis+cluster://")),
        "{status:?}"
    );

    for (url, why) in [
        ("redis+cluster://127.0.0.1:1/2", "only database 0"),
        ("redis+cluster://127.0.0.1:1?seed=nope", "not host:port"),
        (
            "redis+cluster://u:s3cret@127.0.0.1:1?x=1",
            "unknown query parameter",
        ),
    ] {
        match Redlock::builder().node(url).build() {
            Err(Error::InvalidArgument { message: msg }) => {
                assert!(msg.contains(why), "{url}: {msg}");
                assert!(!msg.contains("s3cret"), "{msg}");
                assert!(msg.contains("redis[s]+cluster://"), "{msg}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
}

#[test]
fn a_held_lock_follows_a_manual_failover_of_its_master() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 1);
    let rl = client(&[cluster.url()]);
    let lock = rl
        .try_lock("cluster:failover", Duration::from_secs(20))
        .expect("lock");
    let old = cluster.master_of("cluster:failover");
    let replica = cluster.replica_of(old);
    replicate(&cluster, "cluster:failover");
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut cluster.nodes[replica].conn())
        .expect("CLUSTER FAILOVER");
    assert!(
        cluster.wait_until_master(replica, Duration::from_secs(15)),
        "the replica took over"
    );

    let (extended, _) = support::timed("extend after the failover", || {
        lock.extend(Duration::from_secs(20))
    });
    extended.expect("the extension follows the new master (MOVED)");
    assert!(cluster.nodes[replica].pttl("cluster:failover") > 10_000);
    let status = &rl.node_status()[0];
    assert_eq!(status.failovers, 1, "{status:?}");
    assert!(
        status
            .master
            .as_deref()
            .is_some_and(|m| m.contains(&format!(":{}", cluster.nodes[replica].port))),
        "{status:?}"
    );
    lock.release().expect("release on the new master");
    assert_eq!(cluster.nodes[replica].get("cluster:failover"), None);
    support::assert_no_worker_panicked();
}

#[test]
fn a_killed_master_fails_over_and_the_holder_and_a_new_client_carry_on() {
    support::watch_workers();
    let mut cluster = RedisCluster::start(3, 1);
    let old = cluster.master_of("cluster:killed");
    // Its only seed is the master about to die: after the failover the worker finds the
    // cluster through the nodes of the slot map it read before.
    let rl = client(&[format!(
        "redis+cluster://127.0.0.1:{}",
        cluster.nodes[old].port
    )]);
    // A TTL that outlives a slow failover on a loaded machine (up to 20 s below, then 10 s of
    // tries): with 20 s, the lock's validity ran out first in one Valkey run, and `extend`
    // rightly said Lost (no report: its own clock, not the nodes).
    let lock = rl
        .try_lock("cluster:killed", Duration::from_secs(60))
        .expect("lock");
    let replica = cluster.replica_of(old);
    replicate(&cluster, "cluster:killed");
    cluster.nodes[old].kill();

    // While the cluster fails over: clean errors, within the bound, never a hang.
    let (early, _) = support::timed("extend during the failover", || {
        lock.extend(Duration::from_secs(20))
    });
    if let Err(e) = &early {
        assert!(
            matches!(e, Error::NoQuorum { .. } | Error::Lost { .. }),
            "{e:?}"
        );
    }
    assert!(
        cluster.wait_until_master(replica, Duration::from_secs(20)),
        "the replica took over"
    );
    extend_within(&lock, Duration::from_secs(20), Duration::from_secs(10), &rl);
    assert_eq!(
        cluster.nodes[replica].get("cluster:killed").as_deref(),
        Some(lock.token())
    );
    let (released, _) = support::timed("release after the failover", || lock.release());
    released.expect("release");

    let other = client(&[cluster.url()]);
    let got = eventually(Duration::from_secs(10), || {
        other
            .try_lock("cluster:killed", Duration::from_secs(5))
            .and_then(|l| l.release())
            .is_ok()
    });
    assert!(got, "a new client locks on the cluster after the failover");
    assert!(
        other.node_status()[0].failovers == 0,
        "it never saw the old master"
    );
    assert!(rl.node_status()[0].failovers >= 1, "{:?}", rl.node_status());
    support::assert_no_worker_panicked();
}

#[test]
fn three_clusters_as_three_nodes_keep_exclusion_while_one_is_down() {
    support::watch_workers();
    let mut clusters: Vec<RedisCluster> = (0..3).map(|_| RedisCluster::start(1, 0)).collect();
    let urls: Vec<String> = clusters.iter().map(RedisCluster::url).collect();
    let a = client(&urls);
    let b = client(&urls);
    let ttl = Duration::from_secs(20);
    let lock = a
        .try_lock("clusters:three", ttl)
        .expect("lock on 3 clusters");
    // The lock returned on a quorum: the third cluster's SET may still be on its way.
    assert!(
        eventually(Duration::from_secs(5), || clusters
            .iter()
            .all(|c| c.get("clusters:three").as_deref() == Some(lock.token()))),
        "every cluster holds the lock's key"
    );
    let down: &mut RedisNode = &mut clusters[2].nodes[0];
    down.kill();
    let (refused, _) = support::timed("a second client's try", || {
        b.try_lock("clusters:three", ttl)
    });
    assert!(
        matches!(refused, Err(Error::NotAcquired { .. })),
        "exclusion holds with one cluster down: {refused:?}"
    );
    // N = 1 on the cluster that is down: nothing is granted.
    let alone = client(&[clusters[2].url()]);
    assert!(
        matches!(
            alone.try_lock("clusters:alone", ttl),
            Err(Error::NoQuorum { .. })
        ),
        "a cluster that is down grants nothing"
    );
    lock.extend(ttl).expect("2 of 3 extend");
    lock.release().expect("2 of 3 release");
    let next = b
        .try_lock("clusters:three", ttl)
        .expect("the next client locks on the 2 clusters left");
    next.release().expect("release");
    support::assert_no_worker_panicked();
}

/// N = 3: a cluster (one master, one replica) and two standalone nodes. A holds a lock on the
/// cluster and A; the cluster's master is killed and the promoted replica lacks the key (removed
/// by hand: what asynchronous replication loses). A client that saw the failover keeps the
/// cluster out of its quorums for `restart_grace`, so no second holder gets in while A's lock
/// is valid; a client without the grace hands the lock out again.
#[test]
fn a_lock_key_lost_in_a_cluster_failover_lets_no_second_holder_in_during_the_grace() {
    const TTL: Duration = Duration::from_secs(8);
    const GRACE: Duration = TTL;
    support::watch_workers();
    let a = RedisNode::start();
    let b = RedisNode::start();
    let mut cluster = RedisCluster::start(1, 1);
    let urls = vec![cluster.url(), a.url(), b.url()];
    let holder = client(&urls);
    let watching = guarded(&urls, GRACE);
    assert!(
        eventually(GRACE + Duration::from_secs(2), || watching
            .node_status()
            .iter()
            .all(|s| s.grace_remaining.is_none())),
        "every node outgrows the grace"
    );
    // The watching client has talked to the cluster before the failover.
    assert!(matches!(
        watching.try_lock("cluster:other", TTL).map(|l| l.release()),
        Ok(Ok(()))
    ));

    // B refuses A's acquire: a key left by an earlier owner, gone once A's SET there has been
    // answered. (The lock returns on a quorum, and its SET to B may be sent up to the node
    // timeout later: a key that merely expired could be gone by then.) A read through A's
    // workers queues behind that SET.
    b.set("cluster:safety", "an earlier owner", 60_000);
    let held = holder
        .try_lock("cluster:safety", TTL)
        .expect("A on {cluster, A}");
    let seen = holder.inspect("cluster:safety").expect("inspect");
    assert!(seen.nodes[2].state.is_ok(), "{seen:?}");
    assert_eq!(b.get("cluster:safety").as_deref(), Some("an earlier owner"));
    b.del("cluster:safety");
    replicate(&cluster, "cluster:safety");
    cluster.nodes[0].kill();
    // A lone master's replica finds no other master to vote for it: it takes over.
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("TAKEOVER")
        .query(&mut cluster.nodes[1].conn())
        .expect("CLUSTER FAILOVER TAKEOVER");
    assert!(
        cluster.wait_until_master(1, Duration::from_secs(20)),
        "the replica took over"
    );
    cluster.nodes[1].del("cluster:safety");
    let unguarded = client(&urls);

    // A client started after the failover has no previous master to compare with; the promoted
    // master's `master_replid2` is its tripwire (docs/guarantees.md, A9).
    let mut in_grace = [false, false];
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && held.validity() > Duration::from_millis(500) {
        let fresh = guarded(&urls, GRACE);
        for (k, (name, c)) in [
            ("the client that saw the failover", &watching),
            ("a client started after it", &fresh),
        ]
        .into_iter()
        .enumerate()
        {
            match c.try_lock("cluster:safety", TTL) {
                Ok(second) => panic!(
                    "{name} got the lock while A's is valid for {:?}: two holders ({second:?})",
                    held.validity()
                ),
                Err(e) => {
                    if matches!(
                        cluster_problem(&e, &cluster),
                        Some(NodeProblem::InGrace { .. })
                    ) {
                        in_grace[k] = true;
                    }
                    // The attempt's undo goes out without waiting for its answer.
                    assert!(
                        eventually(Duration::from_secs(2), || cluster.nodes[1]
                            .get("cluster:safety")
                            .is_none()
                            && b.get("cluster:safety").is_none()),
                        "{name}'s attempt was undone"
                    );
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        in_grace,
        [true, true],
        "the cluster was in grace for the client that saw the failover and one started after it"
    );
    let status = &watching.node_status()[0];
    assert_eq!(status.failovers, 1, "{status:?}");
    assert!(status.grace_remaining.is_some(), "{status:?}");

    // Without it: the unsafety the grace is there for.
    let mut second = None;
    assert!(
        eventually(Duration::from_secs(3), || {
            second = unguarded.try_lock("cluster:safety", TTL).ok();
            second.is_some()
        }),
        "without restart_grace, the new master and B hand out the lock again"
    );
    assert!(
        held.validity() > Duration::ZERO,
        "two holders: A's lock is valid while the second one is held"
    );
    second
        .unwrap()
        .release()
        .expect("release the second holder");
    support::assert_no_worker_panicked();
}

/// A client of the cluster with `min_replicas(k)`.
fn acked(urls: &[String], k: u32) -> Redlock {
    support::builder(urls)
        .retry_count(0)
        .min_replicas(k)
        .build()
        .expect("client")
}

/// `key`'s value and PTTL on cluster replica `i` (after `READONLY`: a replica redirects reads
/// to its master otherwise).
fn on_replica(cluster: &RedisCluster, i: usize, key: &str) -> (Option<String>, i64) {
    let mut conn = cluster.nodes[i].conn();
    let _: () = redis::cmd("READONLY").query(&mut conn).expect("READONLY");
    let value: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).expect("GET");
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut conn).expect("PTTL");
    (value, pttl)
}

/// `try_lock`, tried again for up to `limit` while it fails: on a loaded machine a replica's
/// acknowledgement can take longer than the half node timeout `WAIT` gets (liveness, which
/// Redlock leaves to retries; what a failure may never be is a second holder).
fn lock_within(rl: &Redlock, resource: &str, ttl: Duration, limit: Duration) -> Lock {
    let mut last = None;
    let mut lock = None;
    let got = eventually(limit, || match rl.try_lock(resource, ttl) {
        Ok(l) => {
            lock = Some(l);
            true
        }
        Err(e) => {
            last = Some(e);
            false
        }
    });
    assert!(got, "{resource} not locked within {limit:?}: {last:?}");
    lock.expect("locked")
}

/// Extends `lock` to `ttl`, retrying for up to `limit`: after a failover the holder's first
/// extensions may still meet the old topology (a `MOVED`, a reconnect, a grace) before one lands
/// on the promoted replica.
fn extend_within(lock: &Lock, ttl: Duration, limit: Duration, holder: &Redlock) {
    let mut last = None;
    let extended = eventually(limit, || match lock.extend(ttl) {
        Ok(()) => true,
        Err(e) => {
            last = Some(e);
            false
        }
    });
    assert!(
        extended,
        "the holder extends on the promoted replica: {last:?}, {:?}",
        holder.node_status()
    );
}

/// The problems a failed acquisition reports.
fn problems(err: &Error) -> Vec<NodeProblem> {
    match err {
        Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => {
            report.failures.iter().map(|f| f.problem.clone()).collect()
        }
        _ => Vec::new(),
    }
}

/// `min_replicas(1)` on a 3-master, 3-replica cluster: the lock's master is SIGKILLed with no
/// help from the test (no `WAIT` of its own), and the promoted replica has the lock, because
/// the acquisition counted only once the `WAIT` on that master's connection said its replica
/// had it. A second client is refused there; once the killed node is back as the new master's
/// replica, the holder's extension is acknowledged by it, on the new topology.
#[test]
fn with_min_replicas_a_lock_survives_the_kill_of_its_master() {
    support::watch_workers();
    let mut cluster = RedisCluster::start(3, 1);
    let key = "cluster:acked";
    let old = cluster.master_of(key);
    let replica = cluster.replica_of(old);
    let holder = acked(&[cluster.url()], 1);
    let status = &holder.node_status()[0];
    assert!(
        status.warnings.iter().all(|w| !w.contains("replica")),
        "one replica per master is enough for min_replicas 1: {:?}",
        status.warnings
    );
    // Long enough to outlive a slow failover on a loaded machine (see the killed-master test).
    let lock = lock_within(
        &holder,
        key,
        Duration::from_secs(60),
        Duration::from_secs(10),
    );
    // No polling: the WAIT on the key's master returned only once its replica had the key.
    assert_eq!(
        on_replica(&cluster, replica, key).0.as_deref(),
        Some(lock.token()),
        "the replica has the lock when try_lock returns"
    );
    // Another key, on another master: each master's own WAIT covers its writes.
    let elsewhere = (0..64)
        .map(|i| format!("cluster:acked:{i}"))
        .find(|k| cluster.master_of(k) != old)
        .expect("a key on another master");
    let other_replica = cluster.replica_of(cluster.master_of(&elsewhere));
    let second = lock_within(
        &holder,
        &elsewhere,
        Duration::from_secs(60),
        Duration::from_secs(10),
    );
    assert_eq!(
        on_replica(&cluster, other_replica, &elsewhere).0.as_deref(),
        Some(second.token()),
        "the other master's replica has its lock"
    );
    second.release().expect("release");

    // A hung replica (SIGSTOP) fails the votes of its own master's keys, within the node
    // timeout, and the undo takes the unacknowledged key away; the other masters' WAITs are
    // their own, so a key on the lock's master still locks meanwhile.
    let near = (0..64)
        .map(|i| format!("cluster:near:{i}"))
        .find(|k| cluster.master_of(k) == old)
        .expect("another key on the lock's master");
    cluster.nodes[other_replica].hang();
    let started = Instant::now();
    let refused = holder.try_lock(&elsewhere, Duration::from_secs(60));
    let took = started.elapsed();
    let fine = lock_within(
        &holder,
        &near,
        Duration::from_secs(60),
        Duration::from_secs(5),
    );
    cluster.nodes[other_replica].resume();
    let err = refused.expect_err("its master's replica acknowledges nothing");
    assert!(
        matches!(
            problems(&err).as_slice(),
            [NodeProblem::NotReplicated {
                acknowledged: 0,
                required: 1,
                ..
            }]
        ),
        "{err}"
    );
    assert!(
        took < support::NODE_TIMEOUT + Duration::from_millis(300),
        "the vote is bounded by node_timeout: {took:?}"
    );
    assert!(
        eventually(Duration::from_secs(2), || cluster.get(&elsewhere).is_none()),
        "the undo removed the unacknowledged key"
    );
    fine.release().expect("release");
    // Once the replica is back, that master's connection is in step: the next lock there is
    // acknowledged and on the replica.
    let again = lock_within(
        &holder,
        &elsewhere,
        Duration::from_secs(60),
        Duration::from_secs(10),
    );
    assert_eq!(
        on_replica(&cluster, other_replica, &elsewhere).0.as_deref(),
        Some(again.token())
    );
    again.release().expect("release");

    cluster.nodes[old].kill();
    assert!(
        cluster.wait_until_master(replica, Duration::from_secs(20)),
        "the replica took over"
    );
    assert_eq!(
        cluster.nodes[replica].get(key).as_deref(),
        Some(lock.token()),
        "the promoted replica has the acknowledged lock"
    );

    // A second client finds the lock there: refused, never granted while it is held.
    let rival = client(&[cluster.url()]);
    let mut last = None;
    let refused = eventually(Duration::from_secs(10), || {
        match rival.try_lock(key, Duration::from_secs(5)) {
            Ok(got) => panic!(
                "a second holder on the promoted replica while the lock is valid for {:?}: \
                 {got:?}",
                lock.validity()
            ),
            Err(e) => {
                let refused = problems(&e) == [NodeProblem::Refused];
                last = Some(e);
                refused
            }
        }
    });
    assert!(refused, "the new master refuses the key it has: {last:?}");

    // The killed node comes back (empty) and rejoins as the new master's replica.
    cluster.nodes[old].restart();
    let rejoined = eventually(Duration::from_secs(20), || {
        cluster.nodes[old]
            .info("replication")
            .contains("master_link_status:up")
            && cluster.nodes[replica]
                .info("replication")
                .contains("connected_slaves:1")
    });
    assert!(rejoined, "the killed node is the new master's replica");
    extend_within(
        &lock,
        Duration::from_secs(30),
        Duration::from_secs(10),
        &holder,
    );
    assert!(
        on_replica(&cluster, old, key).1 > 20_000,
        "the extension is on the new master's replica when extend returns"
    );
    let rival = acked(&[cluster.url()], 1);
    match rival.try_lock(key, Duration::from_secs(5)) {
        Err(e) => assert_eq!(problems(&e), [NodeProblem::Refused], "{e}"),
        Ok(got) => panic!("a second holder: {got:?}"),
    }
    let status = &holder.node_status()[0];
    assert!(status.failovers >= 1, "{status:?}");
    lock.release().expect("release on the new master");
    assert_eq!(cluster.nodes[replica].get(key), None);
    support::assert_no_worker_panicked();
}

/// `min_replicas(1)` through a manual `CLUSTER FAILOVER` of the lock's master: the holder keeps
/// extending through the switch, so its `WAIT` lane is never idle long enough for the idle
/// check (`cluster-node-timeout`) and meets the switch as a `MOVED` from the old master (counted
/// in its `errorstats`). The lane follows it to the promoted replica, and an extension counts
/// only once the old master, now its replica, has it.
#[test]
fn with_min_replicas_an_extension_follows_a_manual_failover() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 1);
    let key = "cluster:acked-moved";
    let old = cluster.master_of(key);
    let replica = cluster.replica_of(old);
    // The manual failover pauses the old master's clients until its replica has caught up: an
    // extension sent then is answered once the pause ends (with the MOVED). A lane that stops
    // reading first drops its connection, the old master frees the paused client without
    // running its command, and the reconnect finds the new master: another path. The patient
    // node timeout keeps the lane reading through a pause that a loaded machine stretches
    // (R22: 0 MOVED, load average 15).
    let holder = support::builder(&[cluster.url()])
        .retry_count(0)
        .min_replicas(1)
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let lock = lock_within(
        &holder,
        key,
        Duration::from_secs(60),
        Duration::from_secs(10),
    );
    assert_eq!(
        on_replica(&cluster, replica, key).0.as_deref(),
        Some(lock.token()),
        "the replica has the lock when try_lock returns"
    );
    let moved_replies = |i: usize| -> u64 {
        cluster.nodes[i]
            .info("errorstats")
            .lines()
            .find_map(|l| l.strip_prefix("errorstat_MOVED:count="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    let moved_before = moved_replies(old);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let extensions = std::thread::scope(|s| {
        let extender = s.spawn(|| {
            let mut results = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                results.push((Instant::now(), lock.extend(Duration::from_secs(60)).is_ok()));
                std::thread::sleep(Duration::from_millis(100));
            }
            results
        });
        std::thread::sleep(Duration::from_millis(300));
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut cluster.nodes[replica].conn())
            .expect("CLUSTER FAILOVER");
        let switched = cluster.wait_until_master(replica, Duration::from_secs(15))
            && eventually(Duration::from_secs(15), || {
                cluster.nodes[old]
                    .info("replication")
                    .contains("master_link_status:up")
            });
        let after = Instant::now();
        // About 20 extensions on the new topology.
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let results = extender.join().expect("extender");
        assert!(
            switched,
            "the replica took over and the old master follows it"
        );
        results
            .into_iter()
            .filter(|(t, _)| *t > after)
            .collect::<Vec<_>>()
    });
    eprintln!(
        "extensions after the switch: {} of {} acknowledged; MOVED from the old master: {}",
        extensions.iter().filter(|(_, ok)| *ok).count(),
        extensions.len(),
        moved_replies(old) - moved_before
    );
    assert!(
        moved_replies(old) > moved_before,
        "the old master answered the lane's extension with MOVED; the lane: {:?}",
        holder.node_status()
    );
    assert!(
        extensions.iter().any(|(_, ok)| *ok),
        "an extension after the switch was acknowledged: {} tried, {:?}",
        extensions.len(),
        holder.node_status()
    );
    // One more, then straight to the old master (now the replica): no polling.
    extend_within(
        &lock,
        Duration::from_secs(40),
        Duration::from_secs(10),
        &holder,
    );
    let (token, pttl) = on_replica(&cluster, old, key);
    assert_eq!(token.as_deref(), Some(lock.token()));
    assert!(
        (30_001..=40_000).contains(&pttl),
        "the last extension is on the new master's replica when extend returns: PTTL {pttl}"
    );
    let status = &holder.node_status()[0];
    assert!(status.failovers >= 1, "{status:?}");
    let rival = acked(&[cluster.url()], 1);
    match rival.try_lock(key, Duration::from_secs(5)) {
        Err(e) => assert_eq!(problems(&e), [NodeProblem::Refused], "{e}"),
        Ok(got) => panic!("a second holder: {got:?}"),
    }
    lock.release().expect("release on the new master");
    assert_eq!(cluster.nodes[replica].get(key), None);
    support::assert_no_worker_panicked();
}

/// Each master's keys expire on its own clock, so the clock guard samples every master at
/// connect and in every batch that writes to it, not only the first one (whose clock is the
/// node's offset): a forward jump of another master's clock, even before this client's first
/// write there, keeps the whole node out of acquire quorums, naming that master; and so does
/// that master's clock ahead at connect, for a client started after the jump.
#[test]
fn a_jump_of_any_masters_clock_quarantines_the_cluster_node() {
    support::watch_workers();
    let (dir, cluster, first) = shifted_cluster("redlock-cluster-clock");
    let offset = |i: usize| offset_file(&dir, i);
    // The first master by address is the node's clock; the key lives on another one.
    let key = (0..64)
        .map(|i| format!("cluster:clock:{i}"))
        .find(|k| cluster.master_of(k) != first)
        .expect("a key on another master");
    let jumped = cluster.master_of(&key);
    let quarantine = Duration::from_secs(5);
    let rl = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(quarantine)
        .build()
        .expect("client");
    // No write to that master before the jump: its clock's first sample is the one the client
    // took at connect, when it probed every master.
    let time = |i: usize| -> Duration {
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query(&mut cluster.nodes[i].conn())
            .expect("TIME");
        Duration::from_secs(secs) + Duration::from_micros(micros)
    };
    let real = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
    };
    std::fs::write(offset(jumped), "3000").expect("offset file");
    assert!(
        eventually(Duration::from_secs(5), || time(jumped)
            > real() + Duration::from_millis(2000)),
        "the master's clock moved"
    );
    let err = rl
        .try_lock(&key, Duration::from_secs(10))
        .expect_err("the node's vote is held out");
    assert!(
        matches!(
            problems(&err).as_slice(),
            [NodeProblem::ClockJump { jump, .. }] if *jump > Duration::from_millis(2000)
        ),
        "{err}"
    );
    let status = &rl.node_status()[0];
    let named = format!("master 127.0.0.1:{}", cluster.nodes[jumped].port);
    assert!(status.quarantine_remaining.is_some(), "{status:?}");
    assert!(
        status
            .quarantine_reason
            .as_deref()
            .is_some_and(|w| w.contains(&named) && w.contains("jumped forward")),
        "the reason names the master whose clock jumped: {:?}",
        status.quarantine_reason
    );
    // A client started after the jump has no earlier sample of any master: it compares each
    // master's first reading with its own clock and the other nodes', and holds the node out
    // all the same. (Once the first client's undo of its held-out write has run there.)
    assert!(
        eventually(Duration::from_secs(5), || cluster.get(&key).is_none()),
        "the first client's write is undone"
    );
    let fresh = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(quarantine)
        .build()
        .expect("client");
    let err = fresh
        .try_lock(&key, Duration::from_secs(10))
        .expect_err("the fresh client's node vote is held out");
    assert!(
        matches!(
            problems(&err).as_slice(),
            [NodeProblem::ClockJump { jump, .. }] if *jump > Duration::from_millis(2000)
        ),
        "{err}"
    );
    let status = &fresh.node_status()[0];
    assert!(
        status
            .quarantine_reason
            .as_deref()
            .is_some_and(|w| w.contains(&named) && w.contains("ahead")),
        "the fresh client's reason names the master ahead: {:?}",
        status.quarantine_reason
    );
    let _ = std::fs::remove_dir_all(&dir);
    support::assert_no_worker_panicked();
}

/// With `restart_grace`, a cluster master with replicas and no `min_replicas` is a warning (a
/// client that starts after its failover is covered only by the `master_replid2` tripwire),
/// which `strict_servers` turns into a refusal; `min_replicas` covering the replicas lifts it.
#[test]
fn strict_servers_refuses_a_cluster_whose_replicas_min_replicas_does_not_cover() {
    support::watch_workers();
    let cluster = RedisCluster::start(1, 1);
    let build = |strict: bool, k: Option<u32>| {
        let mut b = support::builder(&[cluster.url()])
            .retry_count(0)
            .restart_grace(Duration::from_secs(1))
            .strict_servers(strict);
        if let Some(k) = k {
            b = b.min_replicas(k);
        }
        b.build().expect("client")
    };
    let warned = build(false, None);
    let status = &warned.node_status()[0];
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.contains("no min_replicas") && w.contains("set min_replicas to 1")),
        "{:?}",
        status.warnings
    );
    assert!(
        eventually(Duration::from_secs(5), || warned
            .try_lock("cluster:strict", Duration::from_secs(5))
            .map(|l| l.release())
            .is_ok()),
        "a warning refuses nothing"
    );
    let err = build(true, None)
        .try_lock("cluster:strict", Duration::from_secs(5))
        .expect_err("refused under strict_servers");
    assert!(
        err.to_string().contains("no min_replicas"),
        "names what to do: {err}"
    );
    let covered = build(true, Some(1));
    assert!(
        eventually(Duration::from_secs(5), || covered
            .try_lock("cluster:strict", Duration::from_secs(5))
            .map(|l| l.release())
            .is_ok()),
        "min_replicas 1 covers the one replica: {:?}",
        covered.node_status()[0]
    );
    support::assert_no_worker_panicked();
}

/// `min_replicas(2)` on a cluster whose masters have one replica each: every master is named
/// in the node's warnings, and a lock fails at once, unsent, naming a master that is short.
#[test]
fn min_replicas_a_cluster_master_cannot_meet_is_refused_naming_it() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 1);
    let masters: Vec<String> = (0..cluster.nodes.len())
        .filter(|&i| cluster.is_master(i))
        .map(|i| format!("127.0.0.1:{}", cluster.nodes[i].port))
        .collect();
    assert_eq!(masters.len(), 3);
    let rl = acked(&[cluster.url()], 2);
    let status = &rl.node_status()[0];
    for m in &masters {
        assert!(
            status
                .warnings
                .iter()
                .any(|w| w.contains(&format!("master {m}"))
                    && w.contains("1 replicas connected")
                    && w.contains("fewer than min_replicas 2")),
            "master {m} is named: {:?}",
            status.warnings
        );
    }
    let started = Instant::now();
    let err = rl
        .try_lock("cluster:short", Duration::from_secs(5))
        .expect_err("no master has two replicas");
    let took = started.elapsed();
    let text = err.to_string();
    assert!(
        text.contains(&cluster.address())
            && text.contains("1 replicas connected")
            && text.contains("fewer than min_replicas 2"),
        "names the node and what to do: {text}"
    );
    match problems(&err).as_slice() {
        [
            NodeProblem::TooFewReplicas {
                connected: 1,
                required: 2,
                master: Some(m),
            },
        ] => assert!(masters.contains(m), "{m} is a master: {text}"),
        other => panic!("{other:?}: {text}"),
    }
    assert!(
        took < Duration::from_millis(500),
        "refused at once, not after a WAIT: {took:?}"
    );
    assert_eq!(cluster.get("cluster:short"), None, "nothing was sent");

    // The same cluster meets min_replicas 1.
    let one = acked(&[cluster.url()], 1);
    lock_within(
        &one,
        "cluster:short",
        Duration::from_secs(5),
        Duration::from_secs(10),
    )
    .release()
    .expect("release");
    support::assert_no_worker_panicked();
}

/// A client idle through its master's whole stop (SIGSTOP past the failover, SIGCONT) sees no
/// change of master on its connection, and the old master, back, still says it is the master
/// for a moment: the worker confirms an idle master with another node before a batch goes to
/// it (`cluster.rs`, "A master idle past its failover"). Several rounds on one cluster, each
/// stopping the master of the round before's promoted replica: no two holders with validity
/// left, and the idle client's first acquisition after the SIGCONT counts the failover.
#[test]
fn a_client_idle_through_a_masters_stop_counts_the_failover() {
    const TTL: Duration = Duration::from_millis(200);
    // A9: the largest TTL plus `cluster-node-timeout` (1000 ms).
    const GRACE: Duration = Duration::from_millis(1_200);
    const ROUNDS: usize = 3;
    support::watch_workers();
    let cluster = RedisCluster::start_with(3, 1, &support::DATA_ARGS);
    let build = || {
        Redlock::builder()
            .nodes(&[cluster.url()])
            .node_timeout(Duration::from_millis(200))
            .retry_count(0)
            .restart_grace(GRACE)
            .build()
            .expect("client")
    };
    let (idle, busy) = (build(), build());
    let key = "idle:r";
    assert!(
        eventually(GRACE + Duration::from_secs(3), || {
            [&idle, &busy].iter().all(|c| {
                c.try_lock(key, TTL)
                    .map(|l| l.release().is_ok())
                    .unwrap_or(false)
            })
        }),
        "both clients lock before any failover"
    );
    for round in 0..ROUNDS {
        let old = cluster.master_of(key);
        let replica = cluster.replica_of(old);
        let idle_failovers = idle.node_status()[0].failovers;
        let busy_failovers = busy.node_status()[0].failovers;
        cluster.nodes[old].hang();
        // The busy client sees the failover and waits out its grace; the idle one sends nothing.
        let busy_ready = eventually(Duration::from_secs(20), || {
            let got = busy
                .try_lock("idle:other{idle:r}", TTL)
                .map(|l| l.release().is_ok())
                .unwrap_or(false);
            got && cluster.is_master(replica) && busy.node_status()[0].failovers > busy_failovers
        });
        cluster.nodes[old].resume();
        assert!(
            busy_ready,
            "round {round}: the replica was promoted and the busy client saw it"
        );
        // First command of the idle client since before the stop.
        let first = idle.try_lock(key, TTL);
        let status = idle.node_status().remove(0);
        assert!(
            eventually(Duration::from_secs(10), || cluster.nodes[old]
                .info("replication")
                .contains("role:slave")),
            "round {round}: the old master was demoted"
        );
        let second = busy.try_lock(key, TTL);
        if let (Ok(first), Ok(second)) = (&first, &second) {
            assert!(
                first.validity().is_zero(),
                "round {round}: two holders: the idle client's lock valid for {:?}, the busy \
                 client's for {:?}",
                first.validity(),
                second.validity()
            );
        }
        assert!(
            status.failovers > idle_failovers,
            "round {round}: the idle client's first acquisition after the SIGCONT counted the \
             failover ({:?}; {status:?})",
            first.as_ref().map(Lock::validity)
        );
        drop((first, second));
        // The next round stops the master this one promoted, once the cluster is whole again.
        assert!(
            cluster.wait_until_master(replica, Duration::from_secs(10)),
            "round {round}: the cluster is whole again"
        );
        std::thread::sleep(Duration::from_millis(1_500));
    }
    support::assert_no_worker_panicked();
}

/// The check above costs a busy client nothing: a client whose masters answered within the
/// last `cluster-node-timeout` sends no `CLUSTER` command, however many cycles it runs.
#[test]
fn a_busy_client_sends_no_extra_command_to_confirm_its_masters() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 1);
    let rl = client(&[cluster.url()]);
    // Hash tags spreading over the three masters.
    let keys: Vec<String> = (0..6).map(|i| format!("busy:{{t{i}}}")).collect();
    let mut warm = 0;
    for k in &keys {
        if rl
            .try_lock(k, Duration::from_secs(5))
            .map(|l| l.release())
            .is_ok()
        {
            warm += 1;
        }
    }
    assert_eq!(warm, keys.len(), "every key locks");
    let cluster_calls = || -> u64 {
        cluster
            .nodes
            .iter()
            .map(|n| {
                n.info("commandstats")
                    .lines()
                    .filter(|l| l.starts_with("cmdstat_cluster"))
                    .filter_map(|l| {
                        l.split_once("calls=")?
                            .1
                            .split(',')
                            .next()?
                            .parse::<u64>()
                            .ok()
                    })
                    .sum::<u64>()
            })
            .sum()
    };
    let before = cluster_calls();
    let start = Instant::now();
    let mut cycles = 0;
    while start.elapsed() < Duration::from_secs(3) {
        for k in &keys {
            let lock = rl.try_lock(k, Duration::from_secs(5)).expect("lock");
            lock.release().expect("release");
            cycles += 1;
        }
    }
    let after = cluster_calls();
    // Reading the counters (`INFO`) sends no CLUSTER command either.
    assert_eq!(
        after - before,
        0,
        "{cycles} cycles in 3 s sent {} CLUSTER commands",
        after - before
    );
    assert!(cycles > 100, "{cycles} cycles");
    support::assert_no_worker_panicked();
}

/// The ranges of slots `node`'s `CLUSTER SLOTS` gives a master, with that master's port.
fn slot_ranges(node: &RedisNode) -> Vec<(u16, u16, u16)> {
    let reply: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut node.conn())
        .expect("CLUSTER SLOTS");
    reply
        .into_iter()
        .filter_map(|range| {
            let redis::Value::Array(parts) = range else {
                return None;
            };
            let int = |v: &redis::Value| match v {
                redis::Value::Int(i) => u16::try_from(*i).ok(),
                _ => None,
            };
            let redis::Value::Array(master) = parts.get(2)? else {
                return None;
            };
            Some((int(&parts[0])?, int(&parts[1])?, int(master.get(1)?)?))
        })
        .collect()
}

/// A hole in a cluster's slot map: `key`'s master (its index and port) has its slots
/// unassigned on every node, so that no node names a master for them; `other` is a key another
/// master serves.
struct Hole {
    m: usize,
    port: u16,
    ranges: Vec<(u16, u16)>,
    other: String,
}

impl Hole {
    fn make(cluster: &RedisCluster, key: &str) -> Hole {
        let m = cluster.master_of(key);
        let port = cluster.nodes[m].port;
        let ranges: Vec<(u16, u16)> = slot_ranges(&cluster.nodes[m])
            .into_iter()
            .filter(|&(_, _, p)| p == port)
            .map(|(a, b, _)| (a, b))
            .collect();
        let other = (0..)
            .map(|i| format!("holes:other:{{{i}}}"))
            .find(|k| cluster.master_of(k) != m)
            .expect("a key of another master");
        let hole = Hole {
            m,
            port,
            ranges,
            other,
        };
        for node in &cluster.nodes {
            hole.slots("DELSLOTSRANGE", node);
        }
        assert!(
            cluster.nodes.iter().all(|n| !hole.served_on(n)),
            "no node names a master for {:?}",
            hole.ranges
        );
        hole
    }

    /// `CLUSTER <sub> start end …` of the hole's ranges, on `node`.
    fn slots(&self, sub: &str, node: &RedisNode) {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg(sub);
        for &(a, b) in &self.ranges {
            cmd.arg(a).arg(b);
        }
        cmd.query::<()>(&mut node.conn())
            .unwrap_or_else(|e| panic!("CLUSTER {sub}: {e}"));
    }

    /// Whether `node`'s `CLUSTER SLOTS` names the hole's master.
    fn served_on(&self, node: &RedisNode) -> bool {
        slot_ranges(node).iter().any(|&(_, _, p)| p == self.port)
    }
}

/// A slot map read with a hole (slots no master serves) is read again before a batch goes to
/// the hole, so the slots serve as soon as a master serves them again, without a broken
/// connection or a `MOVED` (neither comes: no command goes there). During a failover, nodes
/// leave the failed-over slots out of `CLUSTER SLOTS` for a moment around the promotion (tens
/// of milliseconds, seen on Redis 7.0), and a worker that reconnected then kept failing every
/// command for those slots with its own `CLUSTERDOWN`. The hole is made here by unassigning one
/// master's slots on every node while a client connects, then giving them back: its first
/// lock there after that succeeds and counts the master's return as a failover.
#[test]
fn a_slot_map_read_with_a_hole_is_read_again_once_a_master_serves_it() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 0);
    let key = "holes:r";
    let hole = Hole::make(&cluster, key);
    let Hole { m, port, .. } = hole;

    let rl = client(&[cluster.url()]);
    rl.try_lock(&hole.other, Duration::from_secs(5))
        .expect("a key another master serves locks")
        .release()
        .expect("release");
    let err = rl
        .try_lock(key, Duration::from_secs(5))
        .expect_err("no master serves the key's slot");
    let problem = format!("{:?}", cluster_problem(&err, &cluster));
    assert!(problem.contains("no master serves slot"), "{problem}");
    let failovers = rl.node_status()[0].failovers;

    hole.slots("ADDSLOTSRANGE", &cluster.nodes[m]);
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .nodes
            .iter()
            .all(|n| hole.served_on(n))),
        "every node names the master of {:?} again",
        hole.ranges
    );
    // Within one recheck of the map (the failed try above read it last).
    let got = eventually(Duration::from_secs(2), || {
        rl.try_lock(key, Duration::from_secs(5))
            .and_then(|l| l.release())
            .is_ok()
    });
    assert!(
        got,
        "the key locks once its master serves it again: {:?}",
        rl.try_lock(key, Duration::from_secs(5)).err()
    );
    let status = rl.node_status().remove(0);
    assert!(
        status.failovers > failovers
            && status
                .master
                .as_deref()
                .is_some_and(|masters| masters.contains(&format!(":{port}"))),
        "the client counts the master's return as a change of masters: {status:?}"
    );
    support::assert_no_worker_panicked();
}

/// While a client's map has a hole and a caller keeps locking a key in it, the re-reads of the
/// map do not hold up the keys the cluster serves, even when every master is idle and the
/// URL's first seed is hung (it accepts connections and answers nothing, as a blackholed host
/// would): the link asks its masters on their connections before any seed, and backs off when
/// nobody answers.
#[test]
fn a_hole_in_the_slot_map_and_a_hung_seed_leave_the_served_keys_locking() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 0);
    let hole = "holes:r";
    let served = Hole::make(&cluster, hole).other;
    let seed = RedisNode::start();
    seed.hang();
    let mut url = format!("redis+cluster://127.0.0.1:{}", seed.port);
    for (i, n) in cluster.nodes.iter().enumerate() {
        url.push(if i == 0 { '?' } else { '&' });
        url.push_str(&format!("seed=127.0.0.1:{}", n.port));
    }
    let rl = std::sync::Arc::new(
        Redlock::builder()
            .nodes(&[url])
            .node_timeout(Duration::from_millis(500))
            .retry_count(0)
            .build()
            .expect("client"),
    );
    assert!(
        eventually(Duration::from_secs(10), || rl
            .try_lock(&served, Duration::from_secs(5))
            .and_then(|l| l.release())
            .is_ok()),
        "the served key locks"
    );
    // Every master idle past its `cluster-node-timeout` (1 s), so none is confirmed.
    std::thread::sleep(Duration::from_millis(1_500));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let hammer = {
        let (rl, stop) = (std::sync::Arc::clone(&rl), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(
                    rl.try_lock(hole, Duration::from_secs(5)).is_err(),
                    "no master serves the hole"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1_000));
    let mut failed = Vec::new();
    for _ in 0..5 {
        match rl.try_lock(&served, Duration::from_secs(5)) {
            Ok(lock) => lock.release().expect("release"),
            Err(e) => failed.push(e.to_string()),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::Relaxed);
    hammer.join().expect("the hole's caller");
    seed.resume();
    assert!(
        failed.is_empty(),
        "the served key failed {} times of 5 beside the hole's traffic: {failed:?}",
        failed.len()
    );
    support::assert_no_worker_panicked();
}

/// A master idle past its `cluster-node-timeout` is confirmed by another node before a batch
/// goes to it, never by its own answer: a master back from a stop past its failover still
/// answers with the stale map that names it. The client's last batch before it went idle was on
/// S's key, so S is its most recently confirmed master, and the check of the first batch after
/// the idle spell, which goes to A, asks S first. S's answer must not count as S's own
/// confirmation: S's batch next is checked with another node. Counted by the `CLUSTER`
/// commands each node receives.
#[test]
fn an_idle_master_is_confirmed_by_another_node_never_by_its_own_answer() {
    support::watch_workers();
    let cluster = RedisCluster::start(3, 0);
    let rl = Redlock::builder()
        .nodes(&[cluster.url()])
        .node_timeout(Duration::from_millis(500))
        .retry_count(0)
        .build()
        .expect("client");
    let ks = "own:s";
    let s = cluster.master_of(ks);
    let ka = (0..)
        .map(|i| format!("own:a{i}"))
        .find(|k| cluster.master_of(k) != s)
        .expect("a key of another master");
    let locks = |key: &str| {
        rl.try_lock(key, Duration::from_secs(5))
            .and_then(|l| l.release())
            .is_ok()
    };
    assert!(
        eventually(Duration::from_secs(10), || locks(&ka) && locks(ks)),
        "both keys lock, S's last"
    );
    // `CLUSTER SLOTS` counts as `cluster|slots` on Redis 7 and Valkey.
    let calls = || -> Vec<u64> {
        cluster
            .nodes
            .iter()
            .map(|n| n.calls("cluster|slots") + n.calls("cluster"))
            .collect()
    };
    // Every master idle past T (the test clusters' `cluster-node-timeout`, 1 s).
    std::thread::sleep(Duration::from_millis(1_500));
    let before = calls();
    assert!(locks(&ka), "A's key locks after the idle spell");
    let between = calls();
    assert!(locks(ks), "S's key locks");
    let after = calls();
    let during = |from: &[u64], to: &[u64]| -> Vec<u64> {
        from.iter().zip(to).map(|(f, t)| t - f).collect()
    };
    let (first, second) = (during(&before, &between), during(&between, &after));
    assert!(
        second.iter().enumerate().any(|(i, &n)| i != s && n > 0),
        "S was confirmed before its batch by another node (CLUSTER commands per node during \
         A's lock {first:?}, during S's lock {second:?})"
    );
    support::assert_no_worker_panicked();
}

/// Three masters, each under the clock shim (`tests/support/clockshift.c`) with an offset file
/// of its own in a temp dir named after `name`, all at 0: the dir, the cluster, and which master
/// is the first by address (the node's clock for the guard's cross-checks).
fn shifted_cluster(name: &str) -> (std::path::PathBuf, RedisCluster, usize) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let shim = support::build_shim("clockshift", &dir, &[]);
    for i in 0..3 {
        shift_clock(&offset_file(&dir, i), 0);
    }
    let cluster = RedisCluster::start_with_env(3, 0, &[], |i| {
        vec![
            ("LD_PRELOAD".into(), shim.display().to_string()),
            (
                "CLOCKSHIFT_FILE".into(),
                offset_file(&dir, i).display().to_string(),
            ),
        ]
    });
    let first = (0..3)
        .min_by_key(|&i| format!("127.0.0.1:{}", cluster.nodes[i].port))
        .expect("three masters");
    (dir, cluster, first)
}

/// The clock shim's offset file of master `i` in `dir`.
fn offset_file(dir: &std::path::Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("offset_ms.{i}"))
}

fn real_time() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
}

fn node_time(node: &RedisNode) -> Duration {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut node.conn()).expect("TIME");
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

fn key_slot(node: &RedisNode, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node.conn())
        .expect("KEYSLOT")
}

fn node_id(node: &RedisNode) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .expect("MYID")
}

/// `slot` migrating from `from` to `to` (the key is not on `from`: `ASK` sends it to `to`).
fn migrate(from: &RedisNode, to: &RedisNode, slot: u16) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(node_id(from))
        .query(&mut to.conn())
        .expect("IMPORTING");
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(node_id(to))
        .query(&mut from.conn())
        .expect("MIGRATING");
}

/// PTTL of `key` on an importing node (after `ASKING`).
fn asking_pttl(node: &RedisNode, key: &str) -> i64 {
    let (_, pttl): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("PTTL")
        .arg(key)
        .query(&mut node.conn())
        .expect("ASKING PTTL");
    pttl
}

fn shift_clock(path: &std::path::Path, ms: i64) {
    std::fs::write(path, ms.to_string()).expect("offset file");
}

/// A slot being migrated: a command `ASK` sends on to the importing master `X` counts there, so
/// it carries `TIME` to `X` too. A jump of `X`'s clock after both clients connected (which
/// expired the holder's key there early) keeps `X`'s vote out for the second client, as a jump
/// of a master it writes to directly does.
#[test]
fn a_vote_taken_through_ask_on_a_master_whose_clock_jumped_is_held_out() {
    support::watch_workers();
    let (dir, cluster, first) = shifted_cluster("redlock-cluster-ask");
    let offset = |i: usize| offset_file(&dir, i);
    let others: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    let (m, x) = (others[0], others[1]);
    let key = (0..200)
        .map(|i| format!("h3:ask:{i}"))
        .find(|k| cluster.master_of(k) == m)
        .unwrap();
    let quarantine = Duration::from_secs(5);
    let a = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(quarantine)
        .build()
        .unwrap();
    let b = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(quarantine)
        .build()
        .unwrap();
    // Both clients connected and past their first acquire (every master in step).
    for c in [&a, &b] {
        let warm = c.try_lock("h3:warm", Duration::from_secs(1)).expect("warm");
        warm.release().expect("release");
    }
    migrate(
        &cluster.nodes[m],
        &cluster.nodes[x],
        key_slot(&cluster.nodes[m], &key),
    );
    let held = a
        .try_lock(&key, Duration::from_secs(10))
        .expect("A takes the lock");
    let pttl = asking_pttl(&cluster.nodes[x], &key);
    assert!(
        pttl > 5000,
        "the key went to the importing master X: {pttl}"
    );
    // X's clock jumps 20 s forward: A's key expires there at once.
    shift_clock(&offset(x), 20_000);
    assert!(eventually(Duration::from_secs(5), || node_time(
        &cluster.nodes[x]
    ) > real_time()
        + Duration::from_secs(15)));
    assert_eq!(
        asking_pttl(&cluster.nodes[x], &key),
        -2,
        "X expired A's key early"
    );
    let second = b.try_lock(&key, Duration::from_secs(10));
    let a_valid = held.validity();
    assert!(
        second.is_err(),
        "TWO HOLDERS: A still valid for {a_valid:?}, and B took the lock through X whose clock \
         is 20 s ahead (B status: {:?})",
        b.node_status()
    );
    let _ = std::fs::remove_dir_all(&dir);
    support::assert_no_worker_panicked();
}

/// The importing master outside the slot map (a new master taking its first slot by
/// migration), and a client started after its clock jumped: no earlier reading of it, so its
/// first reading, taken with the command `ASK` sent on, is compared with the other clocks, and
/// the vote is held out.
#[test]
fn a_fresh_clients_vote_through_ask_on_an_unlisted_master_ahead_is_held_out() {
    support::watch_workers();
    let dir = std::env::temp_dir().join(format!(
        "redlock-cluster-ask-unlisted-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let shim = support::build_shim("clockshift", &dir, &[]);
    let xfile = dir.join("offset_ms.x");
    shift_clock(&xfile, 0);
    let cluster = RedisCluster::start(3, 0);
    let xenv = [
        ("LD_PRELOAD", shim.to_str().unwrap()),
        ("CLOCKSHIFT_FILE", xfile.to_str().unwrap()),
    ];
    let x = RedisNode::start_with_env(
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "1000",
            "--cluster-require-full-coverage",
            "no",
        ],
        &xenv,
    );
    let seed = &cluster.nodes[0];
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(seed.port)
        .arg(seed.cluster_port.unwrap())
        .query(&mut x.conn())
        .expect("MEET");
    let xid = node_id(&x);
    assert!(eventually(Duration::from_secs(10), || {
        cluster.nodes.iter().all(|n| {
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut n.conn())
                .unwrap_or_default();
            nodes
                .lines()
                .any(|l| l.starts_with(&xid) && l.contains("connected"))
        })
    }));
    assert!(
        eventually(Duration::from_secs(20), || {
            cluster.nodes.iter().chain(std::iter::once(&x)).all(|n| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.conn())
                    .unwrap_or_default();
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:4\r")
            })
        }),
        "the cluster is ok with X"
    );
    let key = "h3:unlisted";
    let m = cluster.master_of(key);
    let s = key_slot(&cluster.nodes[m], key);
    // IMPORTING needs X to know M.
    assert!(eventually(Duration::from_secs(10), || {
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(s)
            .arg("IMPORTING")
            .arg(node_id(&cluster.nodes[m]))
            .query::<()>(&mut x.conn())
            .is_ok()
    }));
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(s)
        .arg("MIGRATING")
        .arg(&xid)
        .query(&mut cluster.nodes[m].conn())
        .expect("MIGRATING");
    let a = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(Duration::from_secs(5))
        .build()
        .unwrap();
    let held = a
        .try_lock(key, Duration::from_secs(10))
        .expect("A takes the lock");
    assert!(asking_pttl(&x, key) > 5000, "the key is on X");
    shift_clock(&xfile, 20_000);
    assert!(eventually(Duration::from_secs(5), || node_time(&x)
        > real_time() + Duration::from_secs(15)));
    assert_eq!(asking_pttl(&x, key), -2, "X expired A's key early");
    // A client started after the jump.
    let fresh = support::builder(&[cluster.url()])
        .retry_count(0)
        .clock_quarantine(Duration::from_secs(5))
        .build()
        .unwrap();
    let second = fresh.try_lock(key, Duration::from_secs(10));
    assert!(
        second.is_err(),
        "TWO HOLDERS: A still valid for {:?}; the fresh client took the lock through X, 20 s \
         ahead (status {:?})",
        held.validity(),
        fresh.node_status()
    );
    let _ = std::fs::remove_dir_all(&dir);
    support::assert_no_worker_panicked();
}

/// A client connecting to a cluster node loads on each master the scripts that master lacks,
/// as that master's probe found them: a second client loads none, and after one master's
/// `SCRIPT FLUSH` a third loads every script on that master and none on the others.
#[test]
fn each_master_gets_the_scripts_it_lacks_and_no_other() {
    let cluster = RedisCluster::start(3, 0);
    let loads = || support::calls_per_node(&cluster.nodes, "script|load");
    let connected = |rl: &Redlock| {
        assert!(
            eventually(Duration::from_secs(10), || rl.node_status()[0].connected),
            "the client connected"
        );
    };
    let first = client(&[cluster.url()]);
    connected(&first);
    let loaded = loads();
    assert!(loaded.iter().all(|&n| n > 0), "{loaded:?}");
    let second = client(&[cluster.url()]);
    connected(&second);
    assert_eq!(
        loads(),
        loaded,
        "the second client loaded scripts the masters had"
    );
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut cluster.nodes[1].conn())
        .unwrap();
    let third = client(&[cluster.url()]);
    connected(&third);
    let expected: Vec<u64> = loaded
        .iter()
        .enumerate()
        .map(|(i, &n)| if i == 1 { 2 * n } else { n })
        .collect();
    assert_eq!(
        loads(),
        expected,
        "only the flushed master got the scripts again"
    );
    third
        .try_lock("scripts", Duration::from_secs(5))
        .unwrap()
        .release()
        .unwrap();
}
