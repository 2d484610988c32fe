//! Sentinel-managed nodes (`redis+sentinel://`), against real processes: one master, one
//! replica and three sentinels per group (`support::SentinelGroup`), failovers by SIGKILL.

mod support;

use std::time::{Duration, Instant};

use redlock::{Error, LockRequest, NodeProblem, Redlock};
use support::{RedisNode, SentinelGroup, eventually};

fn client(urls: &[String], grace: Option<Duration>) -> Redlock {
    let mut b = support::builder(urls).retry_count(0);
    if let Some(grace) = grace {
        b = b.restart_grace(grace);
    }
    b.build().expect("client")
}

fn addr(node: &RedisNode) -> String {
    format!("127.0.0.1:{}", node.port)
}

/// The group's problem in a failed acquisition's report, if it is listed.
fn group_problem(err: &Error, group: &SentinelGroup) -> Option<NodeProblem> {
    match err {
        Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => report
            .failures
            .iter()
            .find(|f| f.node == group.address())
            .map(|f| f.problem.clone()),
        _ => None,
    }
}

#[test]
fn locks_through_a_sentinel_node_alone_and_beside_standalone_nodes() {
    support::watch_workers();
    let group = SentinelGroup::start();
    let alone = client(&[group.url()], None);
    let status = &alone.node_status()[0];
    assert_eq!(status.address, group.address(), "{status:?}");
    assert_eq!(status.master, Some(addr(&group.master)), "{status:?}");
    assert_eq!(status.failovers, 0);
    assert!(status.connected, "{status:?}");
    assert!(
        status.warnings.iter().all(|w| !w.contains("replica")),
        "a Sentinel master's replicas are expected: {:?}",
        status.warnings
    );

    let lock = alone
        .try_lock("sentinel:one", Duration::from_secs(5))
        .expect("N = 1 through the sentinels");
    assert_eq!(
        group.master.get("sentinel:one").as_deref(),
        Some(lock.token()),
        "the key is on the master the sentinels named"
    );
    lock.extend(Duration::from_secs(10)).expect("extend");
    assert!(group.master.pttl("sentinel:one") > 5_000);
    lock.release().expect("release");
    assert_eq!(group.master.get("sentinel:one"), None);

    let a = RedisNode::start();
    let b = RedisNode::start();
    let mixed = client(&[group.url(), a.url(), b.url()], None);
    let lock = mixed
        .try_lock("sentinel:three", Duration::from_secs(5))
        .expect("N = 3, one of them a Sentinel group");
    for node in [&group.master, &a, &b] {
        assert_eq!(node.get("sentinel:three").as_deref(), Some(lock.token()));
    }
    lock.extend(Duration::from_secs(5)).expect("extend");
    let seen = mixed.inspect("sentinel:three").expect("inspect");
    assert_eq!(seen.holder.as_deref(), Some(lock.token()), "{seen:?}");
    assert!(seen.nodes[0].state.is_ok(), "{seen:?}");
    lock.release().expect("release");
    for node in [&group.master, &a, &b] {
        assert_eq!(node.get("sentinel:three"), None);
    }
    // Waiting through release notifications: the subscriber finds the master through the
    // sentinels too.
    let held = mixed
        .try_lock("sentinel:wait", Duration::from_secs(5))
        .expect("lock");
    let waiter = {
        let mixed = mixed.clone();
        std::thread::spawn(move || {
            let request = LockRequest::new("sentinel:wait", Duration::from_secs(5))
                .wait(Duration::from_secs(4));
            mixed.acquire(&request).map(|l| l.release())
        })
    };
    assert!(
        eventually(Duration::from_secs(3), || group
            .master
            .release_subscribers("sentinel:wait")
            >= 1),
        "the waiter subscribed on the master the sentinels named"
    );
    held.release().expect("release");
    let got = waiter.join().expect("waiter");
    assert!(matches!(got, Ok(Ok(()))), "{got:?}");
    support::assert_no_worker_panicked();
}

/// The master is killed: Sentinel promotes the replica, the worker finds it, and with
/// `restart_grace` the new master does not count until the grace, counted from when it was
/// seen, is over (it is old by its uptime, which would not have kept it out).
#[test]
fn a_killed_master_is_replaced_and_the_change_counts_as_a_restart() {
    const GRACE: Duration = Duration::from_secs(2);
    support::watch_workers();
    let mut group = SentinelGroup::start();
    let rl = client(&[group.url()], Some(GRACE));
    assert!(
        eventually(Duration::from_secs(5), || rl.node_status()[0]
            .grace_remaining
            .is_none()),
        "the young master outgrows the grace"
    );
    rl.try_lock("sentinel:failover", Duration::from_secs(5))
        .expect("lock before the failover")
        .release()
        .expect("release");
    let new_master = addr(&group.replica);

    let killed = Instant::now();
    group.master.kill();
    let mut seen = None;
    let mut in_grace = 0;
    let mut locked = None;
    while killed.elapsed() < Duration::from_secs(30) {
        let status = rl.node_status().remove(0);
        if seen.is_none() && status.master.as_deref() == Some(new_master.as_str()) {
            seen = Some(Instant::now());
            assert_eq!(status.failovers, 1, "{status:?}");
            assert_eq!(status.restarts, 0, "{status:?}");
            assert!(
                status.grace_remaining.is_some(),
                "a new master is a restart: {status:?}"
            );
            assert_eq!(
                status.quarantine_remaining, None,
                "the clock guard must not trip on a change of master: {status:?}"
            );
        }
        match rl.try_lock("sentinel:failover", Duration::from_secs(5)) {
            Ok(lock) => {
                locked = Some((Instant::now(), lock));
                break;
            }
            Err(e) => {
                if matches!(group_problem(&e, &group), Some(NodeProblem::InGrace { .. })) {
                    in_grace += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = seen.expect("the worker reached the new master");
    let (locked_at, lock) = locked.expect("a lock on the new master after the grace");
    eprintln!(
        "failover timings: kill -> new master seen {:?}, kill -> first lock {:?}",
        seen - killed,
        locked_at - killed
    );
    assert!(in_grace > 0, "the new master was refused as in grace");
    assert!(
        locked_at + Duration::from_millis(300) >= seen + GRACE,
        "locked {:?} after the new master was seen, within the grace of {GRACE:?}",
        locked_at - seen
    );
    assert_eq!(
        group.replica.get("sentinel:failover").as_deref(),
        Some(lock.token())
    );
    lock.release().expect("release on the new master");
    let status = &rl.node_status()[0];
    assert_eq!(status.failovers, 1, "{status:?}");
    assert_eq!(status.master.as_deref(), Some(new_master.as_str()));
    support::assert_no_worker_panicked();
}

/// `SENTINEL FAILOVER` while a lock is held: the old master stays up and becomes a replica. The
/// worker must not keep talking to it (Sentinel closes its clients; the `ROLE` check and a
/// `READONLY` reply would catch one it did not): the held lock's extension and release follow
/// the new master, which has the key by replication.
#[test]
fn a_held_lock_follows_a_graceful_failover_to_the_new_master() {
    support::watch_workers();
    let group = SentinelGroup::start();
    let rl = client(&[group.url()], None);
    let lock = rl
        .try_lock("sentinel:graceful", Duration::from_secs(20))
        .expect("lock");
    assert!(
        eventually(Duration::from_secs(5), || group
            .replica
            .get("sentinel:graceful")
            .is_some()),
        "the key reached the replica"
    );
    let _: String = group.sentinels[0]
        .query(
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(SentinelGroup::NAME),
        )
        .expect("SENTINEL FAILOVER");
    assert!(
        eventually(Duration::from_secs(20), || group
            .all_name(group.replica.port)
            && group.master.info("replication").contains("role:slave")),
        "the replica was promoted and the old master demoted"
    );
    let mut extended = false;
    assert!(
        eventually(Duration::from_secs(10), || {
            extended = lock.extend(Duration::from_secs(20)).is_ok();
            extended
        }),
        "the extension reaches the new master"
    );
    assert!(group.replica.pttl("sentinel:graceful") > 15_000);
    let status = &rl.node_status()[0];
    assert_eq!(status.master, Some(addr(&group.replica)), "{status:?}");
    assert_eq!(status.failovers, 1, "{status:?}");
    eprintln!(
        "graceful failover: the worker's last connection error was {:?}",
        status.last_error
    );
    lock.release().expect("release on the new master");
    assert_eq!(group.replica.get("sentinel:graceful"), None);
    support::assert_no_worker_panicked();
}

/// The safety case. A holds a lock on a bare majority {group, A} (B refuses: an earlier owner's
/// key, which expires soon after), and the group fails over to a replica that never got the key:
/// the write is simulated as unreplicated by deleting the key on the replica
/// (`replica-read-only no` for the moment) before the master is killed. Without a grace, a second
/// client now gets the lock on {group, B} while A's is valid: two holders. With `restart_grace` ≥
/// the TTL nobody does, neither a client that saw the failover nor one started after it.
#[test]
fn a_lock_key_lost_in_a_failover_lets_no_second_holder_in_during_the_grace() {
    const TTL: Duration = Duration::from_secs(8);
    const GRACE: Duration = TTL;
    support::watch_workers();
    let a = RedisNode::start();
    let b = RedisNode::start();
    let mut group = SentinelGroup::start();
    let urls = vec![group.url(), a.url(), b.url()];
    let holder = client(&urls, None);
    let watching = client(&urls, Some(GRACE));
    assert!(
        eventually(GRACE + Duration::from_secs(2), || watching
            .node_status()
            .iter()
            .all(|s| s.grace_remaining.is_none())),
        "every node outgrows the grace"
    );

    // B refuses A's acquire: a key left by an earlier owner, which expires soon after. (Not a
    // restart of B: B's own restart grace would then keep the guarded clients out, and this test
    // would not show that the failover's does.)
    b.set("sentinel:safety", "an earlier owner", 1000);
    let held = holder
        .try_lock("sentinel:safety", TTL)
        .expect("A on {group, A}");
    assert_eq!(
        b.get("sentinel:safety").as_deref(),
        Some("an earlier owner")
    );
    assert!(
        eventually(Duration::from_secs(5), || group
            .replica
            .get("sentinel:safety")
            .is_some()),
        "the key reached the replica"
    );
    let mut r = group.replica.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut r)
        .expect("CONFIG SET");
    group.replica.del("sentinel:safety");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("yes")
        .query(&mut r)
        .expect("CONFIG SET");
    assert_eq!(group.replica.get("sentinel:safety"), None);
    assert_eq!(
        group.master.get("sentinel:safety").as_deref(),
        Some(held.token())
    );

    let killed = Instant::now();
    group.master.kill();
    assert!(
        eventually(Duration::from_secs(20), || group
            .all_name(group.replica.port)),
        "Sentinel promoted the replica"
    );
    eprintln!("sentinels switched {:?} after the kill", killed.elapsed());
    let fresh = client(&urls, Some(GRACE));
    let unguarded = client(&urls, None);

    // With the grace: no second holder while A's lock is valid, from either client.
    let mut watching_in_grace = false;
    let mut fresh_in_grace = false;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && held.validity() > Duration::from_millis(500) {
        for (name, c, flag) in [
            (
                "the client that saw the failover",
                &watching,
                &mut watching_in_grace,
            ),
            ("a client started after it", &fresh, &mut fresh_in_grace),
        ] {
            match c.try_lock("sentinel:safety", TTL) {
                Ok(second) => panic!(
                    "{name} got the lock while A's is valid for {:?}: two holders ({second:?})",
                    held.validity()
                ),
                Err(e) => {
                    if matches!(group_problem(&e, &group), Some(NodeProblem::InGrace { .. })) {
                        *flag = true;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        watching_in_grace,
        "the group was in grace for the client that saw the failover"
    );
    assert!(
        fresh_in_grace,
        "the group was in grace for a client started after the failover"
    );
    let status = &watching.node_status()[0];
    assert_eq!(status.failovers, 1, "{status:?}");
    assert!(status.grace_remaining.is_some(), "{status:?}");

    // Without it: the unsafety this test is here to catch.
    let mut second = None;
    assert!(
        eventually(Duration::from_secs(3), || {
            second = unguarded.try_lock("sentinel:safety", TTL).ok();
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

/// The first sentinel of the URL hangs (SIGSTOP): its query costs the client's timeouts, then the
/// next sentinel names the master. No call waits longer than its node timeout meanwhile.
#[test]
fn a_hung_sentinel_is_passed_over_within_the_timeouts() {
    support::watch_workers();
    let group = SentinelGroup::start();
    group.sentinels[0].hang();
    let started = Instant::now();
    let (rl, _) = support::timed("build", || {
        Redlock::builder()
            .node(group.url())
            .node_timeout(Duration::from_millis(200))
            .retry_count(0)
            .build()
            .expect("client")
    });
    let mut locked = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            let (got, _) = support::timed("try_lock", || {
                rl.try_lock("sentinel:hung", Duration::from_secs(5))
            });
            locked = got.ok();
            locked.is_some()
        }),
        "the other sentinels named the master: {:?}",
        rl.node_status()[0]
    );
    eprintln!(
        "with the seed sentinel hung, the first lock after {:?}",
        started.elapsed()
    );
    let status = &rl.node_status()[0];
    assert_eq!(status.master, Some(addr(&group.master)), "{status:?}");
    locked.unwrap().release().expect("release");
    group.sentinels[0].resume();
    support::assert_no_worker_panicked();
}

#[test]
fn bad_sentinel_urls_are_refused_at_build_with_what_is_wrong() {
    for (url, why) in [
        ("redis+sentinel://127.0.0.1:26379", "no master name"),
        (
            "redis+sentinel://127.0.0.1:26379/m?sentinel=nohost",
            "is not host:port",
        ),
        (
            "redis+sentinel://127.0.0.1:26379/m?seed=127.0.0.1:1",
            "unknown query parameter",
        ),
        (
            "redis+sentinel://127.0.0.1:26379/m/notadb",
            "not a database number",
        ),
        ("redis+sentinel://:s3cret@127.0.0.1:99999/m", "invalid port"),
        (
            "redis+sentinel://u:s3cret@127.0.0.1:1/m?sentinel_password=s3cret&bogus=1",
            "unknown query parameter",
        ),
    ] {
        let err = Redlock::builder()
            .node(url)
            .build()
            .expect_err(url)
            .to_string();
        assert!(err.contains("not a usable Sentinel URL"), "{url}: {err}");
        assert!(err.contains(why), "{url}: {err}");
        assert!(err.contains("MASTERNAME"), "{url}: {err}");
        assert!(!err.contains("s3cret"), "a password in an error: {err}");
    }
    // The same group twice would vote twice.
    let url = "redis+sentinel://127.0.0.1:1/m";
    let err = Redlock::builder()
        .nodes([url, url])
        .build()
        .expect_err("duplicate")
        .to_string();
    assert!(err.contains("same node"), "{err}");
    // Nothing listens there: the build succeeds and the node is down with the reason.
    let rl = Redlock::builder()
        .node("redis+sentinel://u:s3cret@127.0.0.1:1/m?sentinel_password=s3cret")
        .build()
        .expect("an unreachable node does not fail the build");
    let status = &rl.node_status()[0];
    assert!(!status.connected);
    assert_eq!(status.address, "sentinel:m@127.0.0.1:1");
    let text = format!("{status:?} {rl:?}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("sentinel")),
        "{status:?}"
    );
}
