//! `min_replicas`: a node's vote for an acquisition or an extension counts once `WAIT`
//! confirms that enough replicas have the write. Against real processes: a master with one
//! replica (`--replicaof`), a replica hung with SIGSTOP, a Sentinel group failing over.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Error, NodeProblem, Redlock};
use support::{RedisNode, SentinelGroup, Shorthands, eventually};

/// A master with one replica in sync.
fn replicated() -> (RedisNode, RedisNode) {
    let master = RedisNode::start_with(&support::DATA_ARGS);
    let port = master.port.to_string();
    let replica = RedisNode::start_with(
        &[
            &support::DATA_ARGS[..],
            &["--replicaof", "127.0.0.1", &port],
        ]
        .concat(),
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            replica
                .info("replication")
                .contains("master_link_status:up")
        }) && master.replicas_acknowledge(1, Duration::from_secs(10)),
        "the replica did not sync within 10 s, or acknowledged nothing in 10 s more"
    );
    (master, replica)
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[test]
fn an_acquired_lock_is_on_the_replica_when_acquire_returns() {
    support::watch_workers();
    let (master, replica) = replicated();
    let rl = support::builder(&[master.url()])
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    assert_eq!(rl.settings().min_replicas, Some(1));
    let status = &rl.node_status()[0];
    assert!(
        status.warnings.iter().all(|w| !w.contains("replica")),
        "one replica is enough for min_replicas 1, and then expected: {:?}",
        status.warnings
    );
    let mut took = Vec::new();
    for i in 0..20 {
        let resource = format!("replicas:acked:{i}");
        let started = Instant::now();
        let lock = rl
            .try_lock(&resource, Duration::from_secs(10))
            .expect("locked with the replica's acknowledgement");
        took.push(started.elapsed());
        // No polling: WAIT returned only once the replica had it.
        assert_eq!(replica.get(&resource).as_deref(), Some(lock.token()));
        lock.extend(Duration::from_secs(30)).expect("extend");
        assert!(
            replica.pttl(&resource) > 10_000,
            "the extension is on the replica when extend returns"
        );
        lock.release().expect("release");
    }
    took.sort();
    let plain = support::builder(&[master.url()])
        .retry_count(0)
        .build()
        .expect("client");
    let mut baseline = Vec::new();
    for i in 0..20 {
        let started = Instant::now();
        let lock = plain
            .try_lock(&format!("replicas:plain:{i}"), Duration::from_secs(10))
            .expect("lock");
        baseline.push(started.elapsed());
        lock.release().expect("release");
    }
    baseline.sort();
    eprintln!(
        "acquire, replica well: with min_replicas(1) median {:.2} ms (max {:.2}), without \
         median {:.2} ms (max {:.2})",
        ms(took[took.len() / 2]),
        ms(took[took.len() - 1]),
        ms(baseline[baseline.len() / 2]),
        ms(baseline[baseline.len() - 1])
    );
    // Concurrent callers share each pipeline's WAIT.
    for (name, client) in [("min_replicas(1)", &rl), ("without", &plain)] {
        let started = Instant::now();
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for i in 0..100 {
                        client
                            .try_lock(&format!("replicas:many:{t}:{i}"), Duration::from_secs(10))
                            .expect("lock")
                            .release()
                            .expect("release");
                    }
                });
            }
        });
        eprintln!(
            "4 threads x 100 lock+release, {name}: {:.0} ms",
            ms(started.elapsed())
        );
    }
    let status = &rl.node_status()[0];
    assert_eq!(status.errors, 0, "{status:?}");
    support::assert_no_worker_panicked();
}

/// The replica hangs: acquisitions wait out `WAIT` and fail with its reason, their undo removes
/// the key from the master, and what needs no acknowledgement on the same client and node (a
/// release, an inspection) goes over the first connection, not stalled behind `WAIT`.
/// A release must not overtake its own acquisition. With `min_replicas` an acquisition goes
/// over the node's `WAIT` lane and a release over the first connection: on a node whose lane is
/// still waiting for a `WAIT` (a hung replica), the next acquisition's write waits behind it,
/// while a quorum of other nodes lets the caller take the lock and release it at once. Its
/// release must still remove that write, whenever the lane makes it.
#[test]
fn a_release_follows_its_acquisition_over_a_waiting_lane() {
    support::watch_workers();
    let groups: Vec<(RedisNode, RedisNode)> = (0..3).map(|_| replicated()).collect();
    let urls: Vec<String> = groups.iter().map(|(m, _)| m.url()).collect();
    let rl = support::builder(&urls)
        .node_timeout(Duration::from_millis(300))
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let (slow, slow_replica) = &groups[2];
    slow_replica.hang();
    for i in 0..3 {
        // The first lock leaves node 2's lane waiting for its WAIT; the second one's write
        // waits behind that, and its release comes before it is made.
        let first = rl
            .try_lock(&format!("replicas:lane:first:{i}"), Duration::from_secs(30))
            .expect("a quorum of two nodes whose replicas acknowledge");
        first.release().expect("release");
        let resource = format!("replicas:lane:second:{i}");
        let second = rl
            .try_lock(&resource, Duration::from_secs(30))
            .expect("a quorum of two nodes whose replicas acknowledge");
        second.release().expect("release");
        // A third lock's write on node 2 comes over the lane after the second one's: once it
        // is there, so is everything the lane had for the second lock.
        let marker = format!("replicas:lane:third:{i}");
        let third = rl
            .try_lock(&marker, Duration::from_secs(30))
            .expect("a quorum of two nodes whose replicas acknowledge");
        assert!(
            eventually(Duration::from_secs(5), || slow.get(&marker).is_some()),
            "node 2's lane never made the third write"
        );
        assert_eq!(
            slow.get(&resource),
            None,
            "the key of a released lock stayed on the node whose lane was waiting (PTTL {} ms): \
             its release overtook the acquisition's write",
            slow.pttl(&resource)
        );
        third.release().expect("release");
    }
    slow_replica.resume();
}

#[test]
fn a_hung_replica_fails_acquisitions_without_stalling_the_other_callers() {
    const NODE_TIMEOUT: Duration = Duration::from_millis(400);
    support::watch_workers();
    let (master, replica) = replicated();
    let rl = support::builder(&[master.url()])
        .node_timeout(NODE_TIMEOUT)
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let held: Vec<_> = (0..20)
        .map(|i| {
            rl.try_lock(&format!("replicas:held:{i}"), Duration::from_secs(30))
                .expect("lock while the replica is well")
        })
        .collect();

    let extended = rl
        .try_lock("replicas:extended", Duration::from_secs(30))
        .expect("lock while the replica is well");
    replica.hang();
    let started = Instant::now();
    let err = extended
        .extend(Duration::from_secs(60))
        .expect_err("no acknowledgement, no extension");
    eprintln!(
        "hung replica: extension refused in {:.1} ms: {err}",
        ms(started.elapsed())
    );
    assert!(err.to_string().contains("WAIT: 0 of 1 replicas"), "{err}");
    let _ = extended.release();
    let stop = Arc::new(AtomicBool::new(false));
    // Acquisitions from another thread keep the WAIT connection blocked throughout.
    let acquirer = {
        let rl = rl.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut took = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let resource = format!("replicas:stalled:{i}");
                i += 1;
                let started = Instant::now();
                let result = rl.try_lock(&resource, Duration::from_secs(30));
                took.push((
                    resource,
                    started.elapsed(),
                    result.map(|l| l.token().to_owned()),
                ));
            }
            took
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let mut inspects = Vec::new();
    let mut releases = Vec::new();
    for lock in held {
        let started = Instant::now();
        let seen = rl.inspect(lock.resource()).expect("inspect");
        inspects.push(started.elapsed());
        assert_eq!(seen.holder.as_deref(), Some(lock.token()), "{seen:?}");
        let started = Instant::now();
        lock.release()
            .expect("release, which needs no acknowledgement");
        releases.push(started.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let attempts = acquirer.join().expect("acquirer thread");
    replica.resume();

    let max = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    let acquire_times: Vec<Duration> = attempts.iter().map(|(_, d, _)| *d).collect();
    eprintln!(
        "hung replica, node_timeout {} ms: {} acquisitions took {:.1}..{:.1} ms (WAIT); on the \
         same client and node meanwhile, inspect max {:.2} ms, release max {:.2} ms",
        NODE_TIMEOUT.as_millis(),
        attempts.len(),
        ms(acquire_times.iter().min().copied().unwrap_or_default()),
        ms(max(&acquire_times)),
        ms(max(&inspects)),
        ms(max(&releases)),
    );
    assert!(!attempts.is_empty());
    for (resource, took, result) in &attempts {
        let err = result.as_ref().expect_err("no acknowledgement, no lock");
        assert!(
            *took < NODE_TIMEOUT + Duration::from_millis(300),
            "the vote is bounded by node_timeout: {took:?}"
        );
        let problems = problems(err);
        assert!(
            matches!(
                problems.as_slice(),
                [NodeProblem::NotReplicated {
                    acknowledged: 0,
                    required: 1,
                    ..
                }]
            ),
            "{err}"
        );
        assert!(err.to_string().contains("WAIT: 0 of 1 replicas"), "{err}");
        assert!(
            eventually(Duration::from_secs(2), || master.get(resource).is_none()),
            "the failed attempt's undo removed {resource} from the master"
        );
    }
    // Behind a WAIT on the same connection they would take most of node_timeout.
    let bound = NODE_TIMEOUT / 4;
    assert!(max(&inspects) < bound, "inspect stalled: {inspects:?}");
    assert!(max(&releases) < bound, "release stalled: {releases:?}");

    assert!(
        eventually(Duration::from_secs(5), || rl
            .try_lock("replicas:after", Duration::from_secs(5))
            .is_ok_and(|l| l.release().is_ok())),
        "locks again once the replica is back"
    );
    support::assert_no_worker_panicked();
}

/// With the default `node_timeout` of 50 ms, an idle Redis ends a timed-out `WAIT` too late
/// (at its event loop's next wake-up, up to 100 ms): the lane stops reading for it before the
/// deadline, the vote still fails with the `WAIT` reason, and the connection stays in step.
#[test]
fn a_short_node_timeout_still_gives_the_wait_reason_and_keeps_the_connection_in_step() {
    support::watch_workers();
    let (master, replica) = replicated();
    let rl = Redlock::builder()
        .node(master.url())
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    assert_eq!(rl.settings().node_timeout, Duration::from_millis(50));
    replica.hang();
    let mut with_reason = 0;
    for i in 0..5 {
        let resource = format!("replicas:short:{i}");
        let started = Instant::now();
        let err = rl
            .try_lock(&resource, Duration::from_secs(5))
            .expect_err("no acknowledgement");
        let took = started.elapsed();
        eprintln!(
            "node_timeout 50 ms, replica hung: failed in {:.1} ms: {err}",
            ms(took)
        );
        // On a loaded machine the answer can miss the deadline by a few ms: a timeout then.
        match problems(&err).as_slice() {
            [
                NodeProblem::NotReplicated {
                    acknowledged: 0,
                    required: 1,
                    ..
                },
            ] => with_reason += 1,
            [NodeProblem::TimedOut] => {}
            other => panic!("{other:?}: {err}"),
        }
        assert!(
            eventually(Duration::from_secs(2), || master.get(&resource).is_none()),
            "undone"
        );
    }
    assert!(with_reason >= 3, "most votes carry the WAIT reason");
    replica.resume();
    assert!(
        eventually(Duration::from_secs(5), || {
            match rl.try_lock("replicas:short:after", Duration::from_secs(5)) {
                Ok(lock) => {
                    assert_eq!(
                        master.get("replicas:short:after").as_deref(),
                        Some(lock.token())
                    );
                    lock.release().expect("release");
                    true
                }
                Err(_) => false,
            }
        }),
        "locks again once the replica is back"
    );
    for i in 0..20 {
        let lock = rl
            .try_lock(&format!("replicas:short:again:{i}"), Duration::from_secs(5))
            .expect("the lane's connection is in step");
        lock.extend(Duration::from_secs(5)).expect("extend");
        lock.release().expect("release");
    }
    support::assert_no_worker_panicked();
}

/// The Sentinel group's master is killed while a lock is held: with `min_replicas(1)` the
/// promoted replica has the key, so a new client that finds the new master is refused. The new
/// master has no replica left, so a client with `min_replicas(1)` is refused for that.
#[test]
fn a_lock_acknowledged_by_the_replica_survives_the_failover() {
    support::watch_workers();
    let mut group = SentinelGroup::start();
    let holder = support::builder(&[group.url()])
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let lock = holder
        .try_lock("replicas:failover", Duration::from_secs(60))
        .expect("lock before the failover");
    assert_eq!(
        group.replica.get("replicas:failover").as_deref(),
        Some(lock.token())
    );

    let killed = Instant::now();
    group.master.kill();
    let promoted = group.replica.port;
    assert!(
        group.until_switched(Duration::from_secs(30), || group.all_name(promoted)
            && group.replica.info("replication").contains("role:master")),
        "the sentinels promoted the replica; the sentinels' logs:\n{}",
        group.log_tails(20)
    );
    eprintln!("failover: kill -> replica promoted {:?}", killed.elapsed());
    assert_eq!(
        group.replica.get("replicas:failover").as_deref(),
        Some(lock.token()),
        "the promoted master has the lock key"
    );

    let newcomer = support::builder(&[group.url()])
        .retry_count(0)
        .build()
        .expect("client");
    assert_eq!(
        newcomer.node_status()[0].master,
        Some(format!("127.0.0.1:{promoted}"))
    );
    match newcomer.try_lock("replicas:failover", Duration::from_secs(5)) {
        Err(Error::NotAcquired { .. }) => {}
        other => panic!("the lock survived the failover, so no second holder: {other:?}"),
    }

    let strict = support::builder(&[group.url()])
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let status = &strict.node_status()[0];
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.contains("0 replicas connected") && w.contains("min_replicas 1")),
        "{status:?}"
    );
    let err = strict
        .try_lock("replicas:other", Duration::from_secs(5))
        .expect_err("the new master has no replica");
    assert!(
        matches!(
            problems(&err).as_slice(),
            [NodeProblem::TooFewReplicas {
                connected: 0,
                required: 1,
                master: None
            }]
        ),
        "{err}"
    );
    assert_eq!(
        group.replica.get("replicas:other"),
        None,
        "nothing was sent"
    );
    drop(lock);
    support::assert_no_worker_panicked();
}

#[test]
fn a_node_without_enough_replicas_is_refused_clearly() {
    support::watch_workers();
    let lone = RedisNode::start_with(&support::DATA_ARGS);
    let rl = support::builder(&[lone.url()])
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let status = &rl.node_status()[0];
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.contains("0 replicas connected") && w.contains("min_replicas 1")),
        "{status:?}"
    );
    let started = Instant::now();
    let err = rl
        .try_lock("replicas:lone", Duration::from_secs(5))
        .expect_err("no replica to acknowledge");
    let took = started.elapsed();
    let text = err.to_string();
    assert!(
        text.contains(&lone.url().replace("redis://", ""))
            && text.contains("0 replicas connected")
            && text.contains("min_replicas 1"),
        "names the node and what to do: {text}"
    );
    assert!(
        took < Duration::from_millis(500),
        "refused at once: {took:?}"
    );
    assert_eq!(lone.get("replicas:lone"), None, "nothing was sent");

    // A user without WAIT: the second connection is refused at connect, saying what to allow.
    let mut admin = lone.conn();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "nowait",
            "on",
            ">nowait-secret",
            "~*",
            "&*",
            "+@all",
            "-wait",
        ])
        .query(&mut admin)
        .expect("ACL SETUSER");
    let denied = support::builder(&[format!(
        "redis://nowait:nowait-secret@127.0.0.1:{}",
        lone.port
    )])
    .retry_count(0)
    .min_replicas(1)
    .build()
    .expect("client");
    let err = denied
        .try_lock("replicas:nowait", Duration::from_secs(5))
        .expect_err("WAIT is refused");
    assert!(err.to_string().contains("allow +wait"), "{err}");
    let status = &denied.node_status()[0];
    assert!(
        status.warnings.iter().any(|w| w.contains("allow +wait")),
        "{status:?}"
    );
    assert_eq!(lone.get("replicas:nowait"), None, "nothing was written");

    // A replica attached later is seen within the re-check interval.
    let port = lone.port.to_string();
    let replica = RedisNode::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(
        eventually(Duration::from_secs(10), || rl
            .try_lock("replicas:lone", Duration::from_secs(5))
            .is_ok_and(|l| l.release().is_ok())),
        "locks once a replica is attached"
    );
    drop(replica);
    support::assert_no_worker_panicked();
}

/// `HGETALL` of `key` on `node`, fields with their NUL shown as `\0`.
fn fields(node: &RedisNode, key: &str) -> Vec<(String, String)> {
    let all: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
        .arg(key)
        .query(&mut node.conn())
        .unwrap_or_default();
    all.iter()
        .map(|(f, v)| {
            (
                String::from_utf8_lossy(f).replace('\0', "\\0"),
                String::from_utf8_lossy(v).into(),
            )
        })
        .collect()
}

/// A hung master's lane times out an inner reentrant acquire it had written, and the release
/// comes after that: the release still follows the acquire over the lane, which keeps it until
/// the master answers again, instead of going to the node's first worker, which knows nothing
/// of the unanswered acquire and drops it once its `live_until` is past.
#[test]
fn a_hung_master_gets_the_release_of_a_hold_its_lane_timed_out_after_it_resumes() {
    let groups: Vec<(RedisNode, RedisNode)> = (0..3).map(|_| replicated()).collect();
    let urls: Vec<String> = groups.iter().map(|(m, _)| m.url()).collect();
    let rl = support::builder(&urls)
        .node_timeout(Duration::from_millis(100))
        .retry_count(0)
        .min_replicas(1)
        .build()
        .expect("client");
    let outer = rl
        .reentrant_lock("replicas:hung", "alice", Duration::from_secs(30))
        .expect("outer hold");
    let plain = rl
        .try_lock("replicas:other", Duration::from_secs(30))
        .expect("plain lock");
    let node2 = &groups[2].0;
    assert!(eventually(Duration::from_secs(2), || fields(
        node2,
        "replicas:hung"
    )
    .len()
        == 2));
    node2.hang();
    // A release over node 2's first connection times out: that connection is down too.
    let _ = plain.release();
    let inner = rl
        .reentrant_lock("replicas:hung", "alice", Duration::from_secs(1))
        .expect("inner hold on nodes 0 and 1");
    assert_eq!(inner.hold_count(), Some(2));
    // Past the lane's I/O timeout: the lane has timed out the acquire.
    std::thread::sleep(Duration::from_millis(400));
    inner.release().expect("release on nodes 0 and 1");
    // Past the inner hold's `live_until`.
    std::thread::sleep(Duration::from_secs(2));
    node2.resume();
    assert!(
        eventually(Duration::from_secs(5), || fields(node2, "replicas:hung")
            .iter()
            .any(|(f, v)| f == "alice" && v == "1")),
        "node 2 after it resumed: {:?} (the outer hold alone expected)",
        fields(node2, "replicas:hung")
    );
    assert_eq!(fields(node2, "replicas:hung").len(), 2);
    outer.release().expect("outer release");
    assert!(
        eventually(Duration::from_secs(2), || node2.pttl("replicas:hung") == -2),
        "node 2 keeps a hold after every release: {:?}",
        fields(node2, "replicas:hung")
    );
}
