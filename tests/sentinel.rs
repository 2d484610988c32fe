//! Sentinel-managed nodes (`redis+sentinel://`), against real processes: one master, one
//! replica and three sentinels per group (`support::SentinelGroup`), failovers by SIGKILL.

mod support;

use std::time::{Duration, Instant};

use redquorum::{Error, LockRequest, NodeProblem, Redlock};
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
    // A quorum holds it at once; the last node's SET may still be on its way.
    let holding = || {
        [&group.master, &a, &b]
            .iter()
            .filter(|n| n.get("sentinel:three").as_deref() == Some(lock.token()))
            .count()
    };
    assert!(holding() >= 2, "a quorum holds the lock");
    assert!(
        eventually(Duration::from_secs(2), || holding() == 3),
        "the last node's SET arrives"
    );
    lock.extend(Duration::from_secs(5)).expect("extend");
    let seen = mixed.inspect("sentinel:three").expect("inspect");
    assert_eq!(seen.holder.as_deref(), Some(lock.token()), "{seen:?}");
    assert!(seen.nodes[0].state.is_ok(), "{seen:?}");
    lock.release().expect("release");
    // A quorum confirmed the release; the last node's may still be on its way.
    assert!(
        eventually(Duration::from_secs(2), || [&group.master, &a, &b]
            .iter()
            .all(|n| n.get("sentinel:three").is_none())),
        "released on every node"
    );
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
    group.failover();
    assert!(
        group.until_switched(Duration::from_secs(20), || group
            .all_name(group.replica.port)
            && group.master.info("replication").contains("role:slave")),
        "the replica was promoted and the old master demoted; the sentinels' logs:\n{}",
        group.log_tails(20)
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
/// key, which goes right after), and the group fails over to a replica that never got the key:
/// the write is simulated as unreplicated by deleting the key on the replica
/// (`replica-read-only no` for the moment) before the master is killed. Without a grace, a second
/// client now gets the lock on {group, B} while A's is valid: two holders. With `restart_grace` ≥
/// the TTL nobody does, neither a client that saw the failover nor one started after it.
#[test]
fn a_lock_key_lost_in_a_failover_lets_no_second_holder_in_during_the_grace() {
    // A's lock must still be valid once the sentinels have switched: down-after-milliseconds
    // (2 s), their election, and on a loaded machine an election that fails and is tried again
    // 2 × failover-timeout (6 s) later, twice (8.7 s seen with one retry).
    const TTL: Duration = Duration::from_secs(20);
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

    // B refuses A's acquire: a key left by an earlier owner, gone once A's SET there has been
    // answered. (The lock returns on a quorum, and its SET to B may be sent up to the node
    // timeout later: a key that merely expired could be gone by then. Not a restart of B: B's
    // own restart grace would then keep the guarded clients out, and this test would not show
    // that the failover's does.) A read through A's workers queues behind that SET.
    b.set("sentinel:safety", "an earlier owner", 60_000);
    let held = holder
        .try_lock("sentinel:safety", TTL)
        .expect("A on {group, A}");
    let seen = holder.inspect("sentinel:safety").expect("inspect");
    assert!(seen.nodes[2].state.is_ok(), "{seen:?}");
    assert_eq!(
        b.get("sentinel:safety").as_deref(),
        Some("an earlier owner")
    );
    b.del("sentinel:safety");
    assert!(
        eventually(Duration::from_secs(5), || group
            .replica
            .get("sentinel:safety")
            .is_some()),
        "the key reached the replica"
    );
    unreplicate(&group, "sentinel:safety");
    assert_eq!(
        group.master.get("sentinel:safety").as_deref(),
        Some(held.token())
    );

    let killed = Instant::now();
    group.master.kill();
    assert!(
        group.until_switched(Duration::from_secs(20), || group
            .all_name(group.replica.port)),
        "Sentinel promoted the replica; the sentinels' logs:\n{}",
        group.log_tails(20)
    );
    eprintln!("sentinels switched {:?} after the kill", killed.elapsed());
    assert!(
        held.validity() > Duration::from_secs(2),
        "the sentinels took {:?} to switch, too long for A's {TTL:?} lock to be asked about",
        killed.elapsed()
    );
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
                    // The attempt's undo goes out without waiting for its answer: on a loaded
                    // machine the other client's attempt could find its keys still there, and
                    // the group would refuse it instead of being in grace for it.
                    assert!(
                        eventually(Duration::from_secs(2), || group
                            .replica
                            .get("sentinel:safety")
                            .is_none()
                            && b.get("sentinel:safety").is_none()),
                        "{name}'s attempt was undone"
                    );
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

/// Models a write the replica never received: once `key` has reached the replica, deletes it
/// there (`replica-read-only no` for the moment).
fn unreplicate(group: &SentinelGroup, key: &str) {
    assert!(
        eventually(Duration::from_secs(5), || group.replica.get(key).is_some()),
        "{key} reached the replica"
    );
    let mut r = group.replica.conn();
    for read_only in ["no", "yes"] {
        if read_only == "yes" {
            group.replica.del(key);
        }
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("replica-read-only")
            .arg(read_only)
            .query(&mut r)
            .expect("CONFIG SET");
    }
    assert_eq!(group.replica.get(key), None);
}

/// A participant with no history during a failover. The group (N = 1) fails over to a replica
/// that never got the holder's key, and all along brand-new clients, each seeded at the next
/// sentinel, try the lock once, every 10 ms: a command-line call, a restarted service. While the
/// sentinels switch, the leader sentinel names the new master before its `SENTINEL MASTER`
/// record describes it (the record still shows the old master's address and age): a client
/// that took that age would count the promoted replica at once. None may get the lock while the
/// holder's is valid; once the grace since the switch is over, one does.
#[test]
fn clients_started_during_a_failover_let_no_second_holder_in() {
    const TTL: Duration = Duration::from_secs(5);
    const GRACE: Duration = Duration::from_secs(6);
    const KEY: &str = "sentinel:fresh";
    support::watch_workers();
    let mut group = SentinelGroup::start();
    let seeded = |first: usize| {
        let n = group.sentinels.len();
        let mut url = format!(
            "redis+sentinel://127.0.0.1:{}/{}",
            group.sentinels[first].port,
            SentinelGroup::NAME
        );
        for k in 1..n {
            url.push(if k == 1 { '?' } else { '&' });
            url.push_str(&format!(
                "sentinel=127.0.0.1:{}",
                group.sentinels[(first + k) % n].port
            ));
        }
        url
    };
    // Every process, and every sentinel's time with this master, older than the grace.
    let settled = client(&[group.url()], Some(GRACE));
    assert!(
        eventually(GRACE + Duration::from_secs(5), || settled.node_status()[0]
            .grace_remaining
            .is_none()
            && group.sentinels.iter().all(|s| s
                .master_field("role-reported-time")
                .and_then(|ms| ms.parse::<u64>().ok())
                .is_some_and(|ms| ms > GRACE.as_millis() as u64))),
        "the group outgrows the grace"
    );
    let holder = client(&[group.url()], None);
    let held = holder.try_lock(KEY, TTL).expect("the holder on the group");
    unreplicate(&group, KEY);

    group.master.kill();
    let killed = Instant::now();
    let mut tries = 0;
    let mut in_grace = 0;
    let mut switched = None;
    while held.validity() > Duration::from_millis(50) {
        let fresh = client(&[seeded(tries % 3)], Some(GRACE));
        tries += 1;
        match fresh.try_lock(KEY, TTL) {
            Ok(second) if held.validity() > Duration::ZERO => panic!(
                "a client started {:?} after the kill got the lock while the holder's is valid \
                 for {:?}: two holders ({second:?}, {:?})",
                killed.elapsed(),
                held.validity(),
                fresh.node_status()[0]
            ),
            Ok(second) => {
                second.release().expect("release");
                break;
            }
            Err(e) => {
                let grace = match &e {
                    Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => report
                        .failures
                        .iter()
                        .any(|f| matches!(f.problem, NodeProblem::InGrace { .. })),
                    _ => false,
                };
                if grace {
                    in_grace += 1;
                    switched.get_or_insert(killed.elapsed());
                }
            }
        }
        drop(fresh);
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "{tries} fresh clients during the holder's lock; {in_grace} found the group in grace, \
         the first {switched:?} after the kill"
    );
    assert!(
        group.all_name(group.replica.port),
        "Sentinel promoted the replica within the holder's TTL; the sentinels' logs:\n{}",
        group.log_tails(20)
    );
    assert!(in_grace > 0, "fresh clients found the new master in grace");
    // Liveness: the grace counts from the switch, not from each fresh client's connect.
    let mut got = None;
    assert!(
        eventually(GRACE + Duration::from_secs(3), || {
            got = client(&[seeded(tries % 3)], Some(GRACE))
                .try_lock(KEY, TTL)
                .ok();
            tries += 1;
            got.is_some()
        }),
        "a fresh client gets the lock once the grace since the switch is over"
    );
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

/// A sentinel other than the seed hangs (SIGSTOP). A connect asks every sentinel at once, but
/// does not wait for one that does not answer once another named the master: brand-new clients,
/// each trying once (a command-line call), get the lock.
#[test]
fn a_hung_sentinel_does_not_hold_up_a_new_clients_first_try() {
    support::watch_workers();
    let group = SentinelGroup::start();
    group.sentinels[2].hang();
    for k in 0..5 {
        let rl = Redlock::builder()
            .node(group.url())
            .node_timeout(Duration::from_millis(200))
            .retry_count(0)
            .build()
            .expect("client");
        match rl.try_lock("sentinel:hung-other", Duration::from_secs(5)) {
            Ok(lock) => lock.release().expect("release"),
            Err(e) => panic!(
                "new client {k}'s first try, with sentinel 2 hung: {e} ({:?})",
                rl.node_status()[0]
            ),
        }
    }
    group.sentinels[2].resume();
    support::assert_no_worker_panicked();
}

/// How often a client re-asks the sentinels which master they name while connected
/// (`sentinel::WATCH_INTERVAL`).
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// The node timeout of the watch tests: their I/O timeout is twice that (`io_timeout`).
const WATCH_NODE_TIMEOUT: Duration = Duration::from_millis(250);
/// The module's bound: a client stops counting the old master's votes within one interval and
/// two rounds of questions after the first sentinel it can reach switched; with answering
/// sentinels a round is one round trip, and never more than the I/O timeout (no connection to
/// reopen here).
const SWITCH_BOUND: Duration = Duration::from_millis(1000 + 2 * 2 * 250);

fn watch_client(urls: &[String], grace: Option<Duration>) -> Redlock {
    let mut b = support::builder(urls)
        .node_timeout(WATCH_NODE_TIMEOUT)
        .retry_count(0);
    if let Some(grace) = grace {
        b = b.restart_grace(grace);
    }
    b.build().expect("client")
}

/// Makes the group's master one the sentinels cannot demote: its ACL refuses them `REPLICAOF`,
/// and with it the `CLIENT KILL` of the same transaction. After a switch it stays a writable
/// master that keeps its clients, as the old master of a partition does for clients on its side
/// (or as any old master does until the sentinels reconfigure it, seconds after the switch).
fn undemotable(node: &RedisNode) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-replicaof")
        .arg("-slaveof")
        .query(&mut node.conn())
        .expect("ACL SETUSER");
}

/// `SENTINEL FAILOVER` on the first sentinel (the one that switches first); returns when the test
/// first saw it name the replica.
fn switch(group: &SentinelGroup) -> Instant {
    group.failover();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if group
            .sentinels
            .iter()
            .any(|s| s.master_port() == Some(group.replica.port))
        {
            return Instant::now();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the sentinels did not switch within 20 s");
}

/// The gap the watch closes. The sentinels promote the replica while the client's connection
/// to the old master works and the old master still takes writes. Without re-asking the
/// sentinels the client would go on voting from it for as long as it stays up, while clients
/// that connect now vote from the new master: one node answering twice. Locks taken all along
/// show where the client's votes come from: none from the old master once the bound has passed.
#[test]
fn a_master_switched_under_a_live_connection_is_left_within_the_bound() {
    support::watch_workers();
    let group = SentinelGroup::start();
    undemotable(&group.master);
    let rl = watch_client(&[group.url()], None);
    assert_eq!(rl.node_status()[0].master, Some(addr(&group.master)));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hammer = {
        let (rl, stop) = (rl.clone(), stop.clone());
        let (old, new) = (group.master.port, group.replica.port);
        std::thread::spawn(move || {
            let on = |port: u16, token: &str| {
                let node = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
                let mut c = node
                    .get_connection_with_timeout(Duration::from_secs(1))
                    .ok()?;
                let v: Option<String> =
                    redis::cmd("GET").arg("sentinel:watch").query(&mut c).ok()?;
                Some(v.as_deref() == Some(token))
            };
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                if let Ok(lock) = rl.try_lock("sentinel:watch", Duration::from_secs(2)) {
                    let old = on(old, lock.token()) == Some(true);
                    let new = on(new, lock.token()) == Some(true);
                    seen.push((started, old, new));
                    let _ = lock.release();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let switched = switch(&group);
    let mut moved = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            let status = rl.node_status().remove(0);
            if status.master == Some(addr(&group.replica)) {
                moved = Some((Instant::now(), status));
            }
            moved.is_some()
        }),
        "the client went on with the old master: {:?}",
        rl.node_status()[0]
    );
    let (moved_at, status) = moved.unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = hammer.join().expect("hammer");
    let last_old = seen
        .iter()
        .filter(|(_, old, _)| *old)
        .map(|(t, ..)| *t)
        .max();
    eprintln!(
        "switch -> the client's status names the new master: {:?}; the last lock started on the \
         old master {:?} after the switch; {} locks in all",
        moved_at - switched,
        last_old.map(|t| t.saturating_duration_since(switched)),
        seen.len()
    );
    assert!(
        group.master.info("replication").contains("role:master"),
        "the old master stayed a writable master, as this test needs"
    );
    assert!(
        seen.iter().any(|(t, old, _)| *old && *t < switched),
        "locks were taken on the old master before the switch"
    );
    assert!(
        last_old.is_some_and(|t| t < switched + SWITCH_BOUND),
        "a lock started {:?} after the switch was counted from the old master",
        last_old.map(|t| t.saturating_duration_since(switched))
    );
    assert!(
        moved_at - switched <= SWITCH_BOUND + Duration::from_millis(100),
        "the node status named the new master {:?} after the switch",
        moved_at - switched
    );
    assert!(
        seen.iter().any(|(t, _, new)| *new && *t > moved_at),
        "locks go to the new master after the switch"
    );
    assert_eq!(
        status.failovers, 1,
        "a change of master is a failover: {status:?}"
    );
    assert!(
        rl.node_status()[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("the sentinels now name")),
        "{:?}",
        rl.node_status()[0]
    );
    support::assert_no_worker_panicked();
}

/// The same switch under N = 3 ({group, A, B}), with `restart_grace` at least the TTL plus the
/// bound: no two clients hold the lock at once, neither in the window before the watching client
/// notices the switch (a client that connects after it has the group in its grace from the
/// switch on) nor after it. The last step is the one that fails without the watch: once every
/// grace counted from the switch is over, the watching client tries while B is held by an
/// earlier owner (it would get {old master, A}), then a fresh client once B is free again
/// ({new master, B}).
#[test]
fn no_two_holders_while_the_old_master_stays_writable() {
    const TTL: Duration = Duration::from_secs(3);
    // TTL + the bound + slack for the sentinels' own spread.
    const GRACE: Duration = Duration::from_secs(6);
    support::watch_workers();
    let a = RedisNode::start();
    let b = RedisNode::start();
    let group = SentinelGroup::start();
    undemotable(&group.master);
    let urls = vec![group.url(), a.url(), b.url()];
    let watching = watch_client(&urls, Some(GRACE));
    assert!(
        eventually(GRACE + Duration::from_secs(2), || watching
            .node_status()
            .iter()
            .all(|s| s.grace_remaining.is_none())),
        "every node outgrows the grace"
    );
    const KEY: &str = "sentinel:split";
    let mut held: Vec<(&str, redquorum::Lock, Instant)> = Vec::new();
    let take = |who: &'static str,
                c: &Redlock,
                held: &mut Vec<(&str, redquorum::Lock, Instant)>| {
        let Ok(lock) = c.try_lock(KEY, TTL) else {
            return false;
        };
        let until = Instant::now() + lock.validity();
        let now = Instant::now();
        if let Some((other, _, other_until)) = held.iter().find(|(w, _, u)| *w != who && *u > now) {
            panic!(
                "two holders: {who} got the lock while {other}'s is valid for {:?} more",
                other_until.saturating_duration_since(now)
            );
        }
        held.push((who, lock, until));
        true
    };
    // B refuses: an earlier owner's key, so that the watching client needs the group and A.
    b.set(KEY, "an earlier owner", 60_000);
    let switched = switch(&group);
    let fresh = watch_client(&urls, Some(GRACE));
    // The window, and the graces counted from the switch.
    let mut windowed = 0;
    while switched.elapsed() < GRACE {
        if take("the watching client", &watching, &mut held) {
            windowed += 1;
        }
        take("a client started after the switch", &fresh, &mut held);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        eventually(Duration::from_secs(3), || fresh.node_status()[0]
            .grace_remaining
            .is_none()
            && watching.node_status()[0].grace_remaining.is_none()
            && held.iter().all(|(_, _, u)| *u <= Instant::now())),
        "the graces ended"
    );
    // The step that fails without the watch. B's earlier owner goes once the watching client's
    // SET there has been answered (sent up to the node timeout after its call returned on a
    // quorum, it must find the key still there); a read through its workers queues behind it.
    b.set(KEY, "an earlier owner", 60_000);
    let watching_got = take("the watching client", &watching, &mut held);
    let on_old_master = watching_got && {
        let (_, lock, _) = held.last().unwrap();
        group.master.get(KEY).as_deref() == Some(lock.token())
    };
    let seen = watching.inspect(KEY).expect("inspect");
    assert!(seen.nodes[2].state.is_ok(), "{seen:?}");
    assert_eq!(b.get(KEY).as_deref(), Some("an earlier owner"));
    b.del(KEY);
    let mut fresh_got = false;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && !fresh_got {
        fresh_got = take("a client started after the switch", &fresh, &mut held);
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "split-master window: the watching client held {windowed} locks in the graces' span; \
         after them, watching got it: {watching_got}, fresh got it: {fresh_got}"
    );
    assert!(
        !on_old_master,
        "the watching client's votes came from the old master"
    );
    assert!(
        watching_got || fresh_got,
        "one of them holds the lock once the graces are over"
    );
    let status = &watching.node_status()[0];
    assert_eq!(status.master, Some(addr(&group.replica)), "{status:?}");
    assert_eq!(status.failovers, 1, "{status:?}");
    assert!(group.master.info("replication").contains("role:master"));
    support::assert_no_worker_panicked();
}

/// A waiter's release subscriber follows the switch too. It listens on its own connection to the
/// master; if it stayed on the old one (still up and writable here), the releases published on
/// the new master would go unheard, and the waiter would sleep until the holder's keys expire
/// (20 s here) instead of waking at the release.
#[test]
fn a_waiters_release_subscription_follows_the_master_switch() {
    const RES: &str = "sentinel:notify";
    const TTL: Duration = Duration::from_secs(20);
    support::watch_workers();
    let group = SentinelGroup::start();
    undemotable(&group.master);
    let holder = watch_client(&[group.url()], None);
    let waiter = watch_client(&[group.url()], None);
    let lock = holder.try_lock(RES, TTL).expect("lock");
    let waiting = std::thread::spawn(move || {
        let got = waiter.acquire(&LockRequest::new(RES, TTL).wait(Duration::from_secs(30)));
        (got.map(|l| (Instant::now(), l)), waiter)
    });
    assert!(
        eventually(Duration::from_secs(5), || group
            .master
            .release_subscribers(RES)
            >= 1),
        "the waiter subscribed on the master"
    );
    let switched = switch(&group);
    let mut moved = None;
    assert!(
        eventually(SWITCH_BOUND + Duration::from_secs(3), || {
            if group.replica.release_subscribers(RES) >= 1 {
                moved = Some(Instant::now());
            }
            moved.is_some()
        }),
        "the waiter's subscription stayed with the old master: {} subscriber(s) there, {} on \
         the new master",
        group.master.release_subscribers(RES),
        group.replica.release_subscribers(RES)
    );
    eprintln!(
        "switch -> the waiter listens on the new master: {:?}",
        moved.unwrap() - switched
    );
    assert!(
        group.master.info("replication").contains("role:master"),
        "the old master stayed a writable master, as this test needs"
    );
    assert_eq!(
        group.master.release_subscribers(RES),
        0,
        "the connection to the old master was dropped"
    );
    // The holder's client follows the switch on its own watch, which may hear of it after the
    // waiter's did; until then its release goes to the old master, still writable here, and
    // the key stays on the new one until it expires.
    assert!(
        eventually(SWITCH_BOUND + Duration::from_secs(3), || holder
            .node_status()[0]
            .master
            == Some(addr(&group.replica))),
        "the holder's client followed the switch: {:?}",
        holder.node_status()[0]
    );
    lock.release().expect("release on the new master");
    let released = Instant::now();
    let (got, waiter) = waiting.join().expect("waiter");
    let (acquired, lock) = got.expect("the waiter got the lock");
    eprintln!(
        "release -> the waiter holds the lock: {:?}",
        acquired - released
    );
    assert!(
        acquired - released < Duration::from_secs(3),
        "the waiter woke {:?} after the release, not at it",
        acquired - released
    );
    lock.release().expect("release");
    drop(waiter);
    support::assert_no_worker_panicked();
}

/// The hidden test hook `Builder::address_map_for_tests`, through which the chaos test puts a
/// relay of each client's own between it and the group's data nodes: every connection to the
/// master the sentinels name goes to the mapped address instead (here a decoy master with a
/// replica of its own), the worker's, its `WAIT` lane's and the release subscriber's alike,
/// while the node still reports the master the sentinels name. A connection that skipped the map
/// would reach the group's master, and a relay's cut would not cut it.
#[test]
fn a_test_address_map_redirects_every_connection_to_the_named_master() {
    const RES: &str = "sentinel:mapped";
    support::watch_workers();
    let group = SentinelGroup::start();
    let decoy = RedisNode::start_with(&support::DATA_ARGS);
    let decoy_replica =
        RedisNode::start_with(&["--replicaof", "127.0.0.1", &decoy.port.to_string()]);
    assert!(
        eventually(Duration::from_secs(15), || decoy_replica
            .info("replication")
            .contains("master_link_status:up")),
        "the decoy's replica did not sync"
    );
    assert!(
        decoy.replicas_acknowledge(1, Duration::from_secs(10)),
        "the decoy's replica acknowledged nothing in 10 s"
    );
    let rl = support::builder(&[group.url()])
        .retry_count(0)
        .min_replicas(1)
        .address_map_for_tests([(("127.0.0.1", group.master.port), ("127.0.0.1", decoy.port))])
        .build()
        .expect("client");
    let status = &rl.node_status()[0];
    assert!(status.connected, "{status:?}");
    assert_eq!(
        status.master,
        Some(addr(&group.master)),
        "the node reports the master the sentinels name"
    );
    let lock = rl
        .try_lock(RES, Duration::from_secs(10))
        .expect("lock through the map, its write acknowledged by the decoy's replica");
    assert_eq!(
        decoy.get(RES).as_deref(),
        Some(lock.token()),
        "on the decoy"
    );
    assert_eq!(group.master.get(RES), None, "not on the group's master");
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(&LockRequest::new(RES, Duration::from_secs(10)).wait(Duration::from_secs(8)))
                .map(|l| l.release())
        })
    };
    assert!(
        eventually(Duration::from_secs(5), || decoy.release_subscribers(RES)
            >= 1),
        "the waiter's subscriber listens on the decoy"
    );
    assert_eq!(group.master.release_subscribers(RES), 0);
    lock.release().expect("release");
    waiter
        .join()
        .expect("waiter")
        .expect("the waiter got the lock at the release")
        .expect("its release");
    drop(rl);
    support::assert_no_worker_panicked();
}

/// Re-asking the sentinels while nothing changes costs one pipelined question a second to each
/// sentinel (two commands), no reconnect and no failover: counted on the sentinels themselves
/// (`total_commands_processed`, against a span without the client). Sentinel's `INFO` has no
/// `commandstats`, so the sentinels' own traffic is in both spans: each pings the others every
/// second and publishes its hello every 2 s, which varies by up to 4 commands between two spans
/// with the phases. Spans of 6 s keep that within the bound's margin of a command a second.
#[test]
fn watching_the_sentinels_costs_little_at_rest() {
    const SPAN: Duration = Duration::from_secs(6);
    support::watch_workers();
    let group = SentinelGroup::start();
    let processed = |s: &support::SentinelProcess| -> u64 {
        let info: String = s
            .query(redis::cmd("INFO").arg("stats"))
            .expect("INFO stats");
        info.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("total_commands_processed")
    };
    let count = |span: Duration| -> Vec<u64> {
        let before: Vec<u64> = group.sentinels.iter().map(processed).collect();
        std::thread::sleep(span);
        group
            .sentinels
            .iter()
            .zip(before)
            // Less our own INFO.
            .map(|(s, b)| processed(s) - b - 1)
            .collect()
    };
    let baseline = count(SPAN);
    let (rl, built) = support::timed("build", || watch_client(&[group.url()], None));
    // The build waits for the workers' first connects, not for the watch: a Sentinel node's
    // client is ready as soon as its master is.
    eprintln!("a client of one Sentinel node built in {built:?}");
    std::thread::sleep(Duration::from_millis(300));
    let connects = rl.node_status()[0].connects;
    let watched = count(SPAN);
    let per_second: Vec<f64> = watched
        .iter()
        .zip(&baseline)
        .map(|(w, b)| (*w as f64 - *b as f64) / SPAN.as_secs_f64())
        .collect();
    eprintln!(
        "sentinel commands per second at rest, per sentinel, from the client: {per_second:.2?} \
         (baseline over {SPAN:?}: {baseline:?}, with the client: {watched:?})"
    );
    for rate in &per_second {
        // Two commands a round, one round a WATCH_INTERVAL; one more round may fall in the
        // span, and the sentinels' own traffic varies by up to 4 commands between the spans.
        assert!(
            *rate
                <= 2.0 * (SPAN.as_secs_f64() / WATCH_INTERVAL.as_secs_f64() + 1.0)
                    / SPAN.as_secs_f64()
                    + 1.0,
            "{rate:.2} sentinel commands a second from one idle client"
        );
    }
    let status = &rl.node_status()[0];
    assert_eq!(
        status.connects, connects,
        "no reconnect at rest: {status:?}"
    );
    assert_eq!(status.failovers, 0, "{status:?}");
    let lock = rl
        .try_lock("sentinel:rest", Duration::from_secs(5))
        .expect("lock");
    lock.release().expect("release");
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
