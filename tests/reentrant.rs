//! Reentrant locks (a hash `{owner: count}` plus a field per hold, per resource) against real
//! redis-server nodes.

mod support;

use std::time::Duration;

use redquorum::{Error, Redlock};
use support::Shorthands;
use support::{Cluster, RedisNode, eventually};

const TTL: Duration = Duration::from_secs(10);

/// `owner`'s hold count of `resource` on `node`; `None` when the key holds no such field, or
/// is not a hash at all (a refused plain attempt's SET can sit there until its undo arrives,
/// since calls return on a quorum).
fn holds(node: &RedisNode, resource: &str, owner: &str) -> Option<u64> {
    match redis::cmd("HGET")
        .arg(resource)
        .arg(owner)
        .query(&mut node.conn())
    {
        Ok(count) => count,
        Err(e) if e.code() == Some("WRONGTYPE") => None,
        Err(e) => panic!("HGET on {}: {e}", node.port),
    }
}

/// While alice's `fresh` hold is valid, bob is refused: a stale release, drop or extension of
/// an earlier hold of alice's (`stale`, for the message) left it alone.
fn assert_bob_stays_out(cluster: &Cluster, client: &Redlock, resource: &str, stale: &str) {
    let bob = client.try_reentrant_lock(resource, "bob", TTL);
    assert!(
        matches!(bob, Err(Error::NotAcquired { .. })),
        "bob got the lock while alice's fresh hold is valid{stale}; holds of alice per node: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, resource, "alice"))
            .collect::<Vec<_>>()
    );
}

/// Nodes where `owner` has exactly `count` holds of `resource`.
fn nodes_with(cluster: &Cluster, resource: &str, owner: &str, count: u64) -> usize {
    cluster
        .nodes
        .iter()
        .filter(|n| holds(n, resource, owner) == Some(count))
        .count()
}

fn gone(cluster: &Cluster, resource: &str) -> bool {
    cluster.nodes.iter().all(|n| n.pttl(resource) == -2)
}

#[test]
fn nested_holds_count_up_and_down_and_block_other_owners() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let outer = rl.reentrant_lock("re", "alice", TTL).unwrap();
    assert_eq!(outer.hold_count(), Some(1));
    assert_eq!(outer.token(), "alice");
    assert_eq!(outer.fence(), None);
    let middle = rl.reentrant_lock("re", "alice", TTL).unwrap();
    let inner = rl.try_reentrant_lock("re", "alice", TTL).unwrap();
    assert_eq!(middle.hold_count(), Some(2));
    assert_eq!(inner.hold_count(), Some(3));
    assert!(nodes_with(&cluster, "re", "alice", 3) >= 2);

    // Another owner, reentrant or plain, waits for the outermost release.
    assert!(matches!(
        rl.try_reentrant_lock("re", "bob", TTL),
        Err(Error::NotAcquired { .. })
    ));
    assert!(matches!(
        rl.try_lock("re", TTL),
        Err(Error::NotAcquired { .. })
    ));
    inner.release().unwrap();
    assert!(nodes_with(&cluster, "re", "alice", 2) >= 2);
    middle.release().unwrap();
    assert!(nodes_with(&cluster, "re", "alice", 1) >= 2);
    assert!(matches!(
        rl.try_reentrant_lock("re", "bob", TTL),
        Err(Error::NotAcquired { .. })
    ));
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(&cluster, "re")));
    let bob = rl.try_reentrant_lock("re", "bob", TTL).unwrap();
    assert_eq!(bob.hold_count(), Some(1));
    bob.release().unwrap();
}

#[test]
fn the_owner_is_not_a_thread_and_drop_releases_one_hold() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let owner = Redlock::new_owner().unwrap();
    let outer = rl.reentrant_lock("moving", &owner, TTL).unwrap();
    // Another thread acting for the same owner (a goroutine on another OS thread, say).
    let (rl2, owner2) = (rl.clone(), owner.clone());
    let nested = std::thread::spawn(move || {
        let lock = rl2.reentrant_lock("moving", &owner2, TTL).unwrap();
        assert_eq!(lock.hold_count(), Some(2));
        drop(lock); // best effort, without waiting
    });
    nested.join().unwrap();
    assert!(eventually(Duration::from_secs(2), || nodes_with(
        &cluster, "moving", &owner, 1
    ) == 3));
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(
        &cluster, "moving"
    )));
}

#[test]
fn plain_and_reentrant_locks_exclude_each_other() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let plain = rl.try_lock("mixed", TTL).unwrap();
    match rl.try_reentrant_lock("mixed", "alice", TTL) {
        Err(Error::NotAcquired { report, .. }) => assert!(report.refused() >= 2),
        other => panic!("a reentrant lock over a plain one: {other:?}"),
    }
    // The refused attempt left the plain lock's strings alone (on the quorum that has them by
    // now; the last node's SET may still be on its way).
    assert!(cluster.holding("mixed", plain.token()) >= 2, "untouched");
    plain.release().unwrap();

    let re = rl.try_reentrant_lock("mixed", "alice", TTL).unwrap();
    assert!(matches!(
        rl.try_lock("mixed", TTL),
        Err(Error::NotAcquired { .. })
    ));
    assert!(matches!(
        rl.try_lock_fenced("mixed", TTL),
        Err(Error::NotAcquired { .. })
    ));
    assert!(matches!(
        rl.try_lock_many(["mixed", "other"], TTL),
        Err(Error::NotAcquired { .. })
    ));
    // The refused plain attempts did not disturb the hash.
    assert!(nodes_with(&cluster, "mixed", "alice", 1) >= 2);
    re.release().unwrap();
}

#[test]
fn a_plain_lock_whose_key_became_a_reentrant_hash_is_lost_not_an_error() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // lock, not try_lock: on a loaded machine one attempt can take longer than this TTL.
    let ttl = Duration::from_millis(200);
    let plain = rl.lock("taken-over", ttl).unwrap();
    // The quorum's keys were set before the lock was returned: gone one TTL later.
    std::thread::sleep(ttl + Duration::from_millis(200));
    let re = rl.try_reentrant_lock("taken-over", "alice", TTL).unwrap();
    assert!(matches!(plain.extend(TTL), Err(Error::Lost { .. })));
    assert!(matches!(plain.release(), Err(Error::Lost { .. })));
    assert!(nodes_with(&cluster, "taken-over", "alice", 1) >= 2);
    re.release().unwrap();
}

#[test]
fn expiry_while_nested_frees_the_resource_and_later_releases_are_lost() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Long enough that the inner hold is taken while the outer one is surely still there.
    let ttl = Duration::from_secs(1);
    let outer = rl.reentrant_lock("expiring", "alice", ttl).unwrap();
    let inner = rl.reentrant_lock("expiring", "alice", ttl).unwrap();
    assert_eq!(inner.hold_count(), Some(2));
    // The quorum's TTLs were set before the inner hold was returned: gone one TTL later.
    std::thread::sleep(ttl + Duration::from_millis(200));
    assert_eq!(outer.validity(), Duration::ZERO);
    let bob = rl.try_reentrant_lock("expiring", "bob", TTL).unwrap();
    assert!(matches!(inner.release(), Err(Error::Lost { .. })));
    assert!(matches!(outer.extend(TTL), Err(Error::Lost { .. })));
    assert!(matches!(outer.release(), Err(Error::Lost { .. })));
    // Bob's hold is untouched by alice's late calls.
    assert!(nodes_with(&cluster, "expiring", "bob", 1) >= 2);
    bob.release().unwrap();
}

#[test]
fn nested_holds_never_shorten_the_ttl_and_extend_keeps_it_at_least() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let outer = rl.reentrant_lock("ttl", "alice", TTL).unwrap();
    let inner = rl
        .reentrant_lock("ttl", "alice", Duration::from_secs(1))
        .unwrap();
    assert!(inner.validity() <= Duration::from_secs(1));
    for node in &cluster.nodes {
        if holds(node, "ttl", "alice").is_some() {
            assert!(node.pttl("ttl") > 9_000, "the outer hold's TTL stands");
        }
    }
    outer.extend(Duration::from_secs(30)).unwrap();
    assert!(outer.validity() > Duration::from_secs(25));
    // On a quorum at once; the last node may apply the extension a moment later.
    let extended = cluster
        .nodes
        .iter()
        .filter(|n| holds(n, "ttl", "alice").is_some() && n.pttl("ttl") > 25_000)
        .count();
    assert!(extended >= 2, "extended on {extended} nodes");
    inner.release().unwrap();
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(&cluster, "ttl")));
}

#[test]
fn bad_owners_are_invalid_arguments() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    for owner in [String::new(), "x".repeat(1025), "a\0b".into()] {
        match rl.try_reentrant_lock("bad", &owner, TTL) {
            Err(Error::InvalidArgument { message }) => assert!(message.contains("owner")),
            other => panic!("owner of {} bytes: {other:?}", owner.len()),
        }
    }
    assert!(matches!(
        rl.try_reentrant_lock("", "alice", TTL),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        rl.try_reentrant_lock("bad", "alice", Duration::ZERO),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(gone(&cluster, "bad"));
    let ok = rl
        .try_reentrant_lock("bad", &"x".repeat(1024), TTL)
        .unwrap();
    ok.release().unwrap();
}

/// A client whose calls wait 200 ms for a node, so that a node hung for a moment answers
/// after the call has decided but within the I/O timeout (twice that): its answer is read.
fn patient_client(cluster: &Cluster) -> Redlock {
    cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .retry_count(0)
        .build()
        .unwrap()
}

#[test]
fn a_hold_a_slow_node_counted_after_the_call_is_released_there_too() {
    let cluster = Cluster::start(3);
    let rl = patient_client(&cluster);
    let outer = rl.reentrant_lock("slow", "alice", TTL).unwrap();
    assert!(eventually(Duration::from_secs(2), || nodes_with(
        &cluster, "slow", "alice", 1
    ) == 3));
    // The third node is slow: it counts the inner hold only after the acquire decided on the
    // other two, and after its release went out (which waits the node timeout for its answer).
    let slow = &cluster.nodes[2];
    slow.hang();
    let inner = rl.reentrant_lock("slow", "alice", TTL).unwrap();
    assert_eq!(inner.hold_count(), Some(2));
    let released = inner.release();
    slow.resume();
    released.unwrap();
    // The slow node answered that it counted the hold: the release reaches it, leaving the
    // outer hold alone there, rather than a second hold until the TTL.
    assert!(
        eventually(Duration::from_secs(2), || nodes_with(
            &cluster, "slow", "alice", 1
        ) == 3),
        "holds of alice per node after the inner release: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "slow", "alice"))
            .collect::<Vec<_>>()
    );
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(
        &cluster, "slow"
    )));
}

/// A node hung for longer than the inner hold's TTL counts that hold when it resumes: it had
/// read the acquire. The inner hold was released meanwhile on the other nodes; the release kept
/// for the hung node reaches it after the acquire ran there, so the node is left with the outer
/// hold alone, not with a second hold until the hash's TTL.
#[test]
fn a_node_hung_past_the_ttl_gets_the_release_of_the_hold_it_counts_on_resume() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(100))
        .retry_count(0)
        .build()
        .unwrap();
    let outer = rl.reentrant_lock("resumed", "alice", TTL).unwrap();
    assert!(eventually(Duration::from_secs(2), || nodes_with(
        &cluster, "resumed", "alice", 1
    ) == 3));
    let hung = &cluster.nodes[2];
    hung.hang();
    // Nodes 0 and 1 count it; node 2 has the acquire in its socket, unread.
    let ttl = Duration::from_secs(2);
    let inner = rl.reentrant_lock("resumed", "alice", ttl).unwrap();
    assert_eq!(inner.hold_count(), Some(2));
    inner.release().unwrap();
    for n in &cluster.nodes[..2] {
        assert_eq!(holds(n, "resumed", "alice"), Some(1));
    }
    // Past the inner hold's TTL and the node timeout: its release's own `live_until` is past.
    std::thread::sleep(ttl + Duration::from_millis(500));
    hung.resume();
    let per_node = || {
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "resumed", "alice"))
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(Duration::from_secs(5), || per_node()[2] == Some(1)),
        "alice's holds per node after node 2 resumed: {:?} (node 2 should count the outer hold \
         alone)",
        per_node()
    );
    // It was counted there, then released: node 2 ran the acquire it had read.
    let stats = hung.info("commandstats");
    assert!(stats.contains("cmdstat_hincrby:calls=2,"), "{stats}");
    assert_eq!(per_node(), vec![Some(1); 3]);
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(
        &cluster, "resumed"
    )));
}

#[test]
fn a_cancelled_wait_leaves_no_hold_on_a_node_that_counted_it_after_the_cancel() {
    let cluster = Cluster::start(3);
    let rl = patient_client(&cluster);
    // Bob holds the second node, so alice's attempt waits for the third one's answer.
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg("cancel")
        .arg("bob")
        .arg(1)
        .ignore()
        .cmd("PEXPIRE")
        .arg("cancel")
        .arg(TTL.as_millis() as u64)
        .ignore()
        .query(&mut cluster.nodes[1].conn())
        .unwrap();
    let slow = &cluster.nodes[2];
    slow.hang();
    let cancel = redquorum::Cancel::new();
    let waiter = {
        let (rl, cancel) = (rl.clone(), cancel.clone());
        std::thread::spawn(move || {
            let request = redquorum::LockRequest::new("cancel", TTL)
                .reentrant("alice")
                .wait(Duration::from_secs(10))
                .cancel(&cancel);
            rl.acquire(&request)
        })
    };
    assert!(eventually(Duration::from_secs(5), || holds(
        &cluster.nodes[0],
        "cancel",
        "alice"
    ) == Some(1)));
    cancel.cancel();
    let result = waiter.join().unwrap();
    slow.resume();
    assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
    // The slow node counts alice's hold once it resumes, and says so: the undo reaches it.
    assert!(
        eventually(Duration::from_secs(2), || cluster
            .nodes
            .iter()
            .all(|n| holds(n, "cancel", "alice").is_none())),
        "holds of alice per node after the cancelled wait: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "cancel", "alice"))
            .collect::<Vec<_>>()
    );
    assert_eq!(holds(&cluster.nodes[1], "cancel", "bob"), Some(1));
}

/// Many threads of one owner (and a second client of it, built while a node hangs) take and
/// release nested holds in any order while one node at a time hangs for up to 300 ms (less
/// than the client's I/O timeout, so every answer is read). Meanwhile an observer that sees a
/// thread hold throughout its reads finds the owner counted on a quorum, and another owner
/// trying the lock never gets it while a hold is valid. Once all is released, no key is left.
#[test]
fn one_owners_threads_nesting_across_a_hanging_node_keep_their_quorum_and_leave_nothing() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
    const THREADS: usize = 4;
    let cluster = Arc::new(Cluster::start(3));
    let client = |cluster: &Cluster| {
        cluster
            .builder()
            .node_timeout(Duration::from_millis(250))
            .retry_count(0)
            .build()
            .unwrap()
    };
    let rl = client(&cluster);
    let bob = client(&cluster);
    let stop = Arc::new(AtomicBool::new(false));
    // Per thread: holding now, and how many holds it took (to tell one hold from the next).
    let holding: Arc<Vec<AtomicBool>> =
        Arc::new((0..THREADS).map(|_| AtomicBool::new(false)).collect());
    let taken: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let alice_holds = Arc::new(AtomicUsize::new(0));
    let bob_holds = Arc::new(AtomicBool::new(false));
    let (cycles, bob_got, looks) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let hung_once = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let (rl, cluster, stop, holding, taken, alice_holds, bob_holds, cycles, hung_once) = (
            rl.clone(),
            Arc::clone(&cluster),
            Arc::clone(&stop),
            Arc::clone(&holding),
            Arc::clone(&taken),
            Arc::clone(&alice_holds),
            Arc::clone(&bob_holds),
            Arc::clone(&cycles),
            Arc::clone(&hung_once),
        );
        threads.push(std::thread::spawn(move || {
            // The last thread is another process of the same owner, started mid-fault.
            let rl = if t == THREADS - 1 {
                assert!(eventually(Duration::from_secs(5), || hung_once.load(SeqCst)));
                client(&cluster)
            } else {
                rl
            };
            let request = redquorum::LockRequest::new("many", TTL)
                .reentrant("alice")
                .wait(Duration::from_secs(5));
            let mut round = 0u64;
            while !stop.load(SeqCst) {
                round += 1;
                let mut held = vec![
                    rl.acquire(&request)
                        .unwrap_or_else(|e| panic!("thread {t}: {e}")),
                ];
                taken[t].fetch_add(1, SeqCst);
                holding[t].store(true, SeqCst);
                alice_holds.fetch_add(1, SeqCst);
                assert!(
                    !bob_holds.load(SeqCst),
                    "alice (thread {t}) and bob both hold"
                );
                for _ in 0..(round % 3) {
                    held.push(
                        rl.acquire(&request)
                            .unwrap_or_else(|e| panic!("thread {t}: {e}")),
                    );
                }
                std::thread::sleep(Duration::from_micros(500 * (round % 7)));
                assert!(
                    !bob_holds.load(SeqCst),
                    "alice (thread {t}) and bob both hold"
                );
                alice_holds.fetch_sub(1, SeqCst);
                holding[t].store(false, SeqCst);
                // Released in any order, some by drop.
                if round.is_multiple_of(2) {
                    held.reverse();
                }
                for (i, lock) in held.into_iter().enumerate() {
                    if (round + i as u64).is_multiple_of(4) {
                        drop(lock);
                    } else {
                        let _ = lock.release();
                    }
                }
                cycles.fetch_add(1, SeqCst);
                std::thread::sleep(Duration::from_millis(round % 5));
            }
        }));
    }
    {
        let (stop, alice_holds, bob_holds, bob_got) = (
            Arc::clone(&stop),
            Arc::clone(&alice_holds),
            Arc::clone(&bob_holds),
            Arc::clone(&bob_got),
        );
        threads.push(std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                if let Ok(lock) = bob.try_reentrant_lock("many", "bob", TTL) {
                    bob_holds.store(true, SeqCst);
                    let alice = alice_holds.load(SeqCst);
                    bob_holds.store(false, SeqCst);
                    assert_eq!(alice, 0, "bob holds while alice holds {alice} times");
                    bob_got.fetch_add(1, SeqCst);
                    lock.release().ok();
                }
                std::thread::sleep(Duration::from_millis(3));
            }
        }));
    }
    {
        let (cluster, stop, holding, taken, looks) = (
            Arc::clone(&cluster),
            Arc::clone(&stop),
            Arc::clone(&holding),
            Arc::clone(&taken),
            Arc::clone(&looks),
        );
        threads.push(std::thread::spawn(move || {
            let mut conns: Vec<_> = cluster.nodes.iter().map(|n| n.conn()).collect();
            while !stop.load(SeqCst) {
                let before: Vec<_> = (0..THREADS)
                    .map(|t| (holding[t].load(SeqCst), taken[t].load(SeqCst)))
                    .collect();
                let counts: Vec<Option<u64>> = conns
                    .iter_mut()
                    .map(|c| {
                        redis::cmd("HGET")
                            .arg("many")
                            .arg("alice")
                            .query(c)
                            .unwrap()
                    })
                    .collect();
                let after: Vec<_> = (0..THREADS)
                    .map(|t| (holding[t].load(SeqCst), taken[t].load(SeqCst)))
                    .collect();
                let throughout = (0..THREADS).any(|t| before[t].0 && before[t] == after[t]);
                if throughout {
                    looks.fetch_add(1, SeqCst);
                    let counted = counts.iter().filter(|c| c.is_some_and(|n| n >= 1)).count();
                    assert!(counted >= 2, "alice holds, counted on {counts:?}");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    // One node at a time hangs, for 100 to 300 ms (past the node timeout, within the I/O one).
    let start = std::time::Instant::now();
    let mut hangs = 0u64;
    while start.elapsed() < Duration::from_secs(8) {
        let node = &cluster.nodes[(hangs % 3) as usize];
        std::thread::sleep(Duration::from_millis(50 + 37 * (hangs % 4)));
        node.hang();
        hung_once.store(true, SeqCst);
        std::thread::sleep(Duration::from_millis(100 + 50 * (hangs % 5)));
        node.resume();
        hangs += 1;
    }
    stop.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let (cycles, bob_got, looks) = (
        cycles.load(SeqCst),
        bob_got.load(SeqCst),
        looks.load(SeqCst),
    );
    eprintln!("{hangs} hangs, {cycles} cycles of alice, {bob_got} holds of bob, {looks} looks");
    assert!(cycles > 100 && looks > 100, "too little was exercised");
    assert!(
        eventually(Duration::from_secs(3), || gone(&cluster, "many")),
        "holds per node once all is released: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| (holds(n, "many", "alice"), holds(n, "many", "bob")))
            .collect::<Vec<_>>()
    );
}

/// An owner holds the lock once; another of its threads takes a second hold with a cancel
/// fired at random moments around the answers, one round in four with a node hanging until
/// the attempt is over. An observer reading the hash throughout finds the outer hold on every
/// node (a cancelled attempt's undo reaching a node twice would take it away), and once the
/// attempts are over exactly the outer hold is left: each node that counted a cancelled
/// attempt got its undo (the caller's, or its worker's for an answer read after the cancel).
#[test]
fn cancels_racing_a_nested_hold_leave_exactly_the_outer_hold() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    let rounds: u64 = std::env::var("REDLOCK_CANCEL_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let cluster = Arc::new(Cluster::start(3));
    let rl = patient_client(&cluster);
    // Valid through every round, however slow the machine.
    let outer = rl
        .reentrant_lock("nest", "alice", Duration::from_secs(600))
        .unwrap();
    assert!(eventually(Duration::from_secs(2), || nodes_with(
        &cluster, "nest", "alice", 1
    ) == 3));
    let stop = Arc::new(AtomicBool::new(false));
    let looks = Arc::new(AtomicU64::new(0));
    let observer = {
        let (cluster, stop, looks) = (Arc::clone(&cluster), Arc::clone(&stop), Arc::clone(&looks));
        std::thread::spawn(move || {
            let mut conns: Vec<_> = cluster.nodes.iter().map(|n| n.conn()).collect();
            while !stop.load(SeqCst) {
                for (i, c) in conns.iter_mut().enumerate() {
                    let n: Option<u64> = redis::cmd("HGET")
                        .arg("nest")
                        .arg("alice")
                        .query(c)
                        .unwrap();
                    assert!(n >= Some(1), "node {i} lost the outer hold: {n:?}");
                }
                looks.fetch_add(1, SeqCst);
            }
        })
    };
    let (mut got, mut cancelled) = (0, 0);
    for round in 0..rounds {
        let hung = (round % 4 == 3).then(|| &cluster.nodes[(round / 4 % 3) as usize]);
        if let Some(node) = hung {
            node.hang();
        }
        let cancel = redquorum::Cancel::new();
        let request = redquorum::LockRequest::new("nest", TTL)
            .reentrant("alice")
            .cancel(&cancel);
        let attempt = {
            let rl = rl.clone();
            std::thread::spawn(move || rl.acquire(&request))
        };
        // 0 to 0.6 ms after the call: before, among and after the nodes' answers.
        std::thread::sleep(Duration::from_micros(round * 7919 % 600));
        cancel.cancel();
        let result = attempt.join().unwrap();
        if let Some(node) = hung {
            node.resume();
        }
        match result {
            Ok(inner) => {
                got += 1;
                assert!(inner.hold_count() >= Some(2), "round {round}");
                inner.release().unwrap();
            }
            Err(Error::Cancelled { .. }) => cancelled += 1,
            Err(e) => panic!("round {round}: {e}"),
        }
        // Rounds apart: an attempt's last requests and undos may still be on their way. A
        // count that stays wrong fails below.
        if !eventually(Duration::from_secs(1), || {
            nodes_with(&cluster, "nest", "alice", 1) == 3
        }) {
            break;
        }
    }
    stop.store(true, SeqCst);
    observer.join().unwrap();
    eprintln!(
        "{rounds} rounds: {got} got the hold, {cancelled} cancelled; {} looks",
        looks.load(SeqCst)
    );
    assert!(
        got > 0 && cancelled > 0,
        "the race was not exercised both ways"
    );
    assert!(
        eventually(Duration::from_secs(2), || nodes_with(
            &cluster, "nest", "alice", 1
        ) == 3),
        "holds of alice per node: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "nest", "alice"))
            .collect::<Vec<_>>()
    );
    outer.release().unwrap();
    assert!(eventually(Duration::from_secs(2), || gone(
        &cluster, "nest"
    )));
}

/// A hold whose keys expired, released late, takes nothing from a hold that another process of
/// the same owner took since on a fresh key: another owner stays out while that one is valid.
#[test]
fn a_late_release_of_an_expired_hold_leaves_a_newer_hold_of_the_owner_alone() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let ttl = Duration::from_secs(1);
    let stale = rl.reentrant_lock("late", "alice", ttl).unwrap();
    // The quorum's TTLs were set before the hold was returned: gone one TTL later.
    std::thread::sleep(ttl + Duration::from_millis(200));
    assert_eq!(stale.validity(), Duration::ZERO);
    // Another process of alice, with no history of the first hold.
    let other = cluster.client();
    let fresh = other.reentrant_lock("late", "alice", TTL).unwrap();
    assert_eq!(fresh.hold_count(), Some(1));
    assert!(
        matches!(stale.release(), Err(Error::Lost { .. })),
        "the expired hold's release reports it lost"
    );
    assert!(fresh.validity() > Duration::ZERO);
    assert_bob_stays_out(&cluster, &other, "late", "");
    fresh.release().unwrap();
}

/// As above, with the expired hold dropped instead of released: a drop sends the release too,
/// and must leave the newer hold of the owner alone just the same.
#[test]
fn a_late_drop_of_an_expired_hold_leaves_a_newer_hold_of_the_owner_alone() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let ttl = Duration::from_secs(1);
    let stale = rl.reentrant_lock("late-drop", "alice", ttl).unwrap();
    std::thread::sleep(ttl + Duration::from_millis(200));
    assert_eq!(stale.validity(), Duration::ZERO);
    let other = cluster.client();
    let fresh = other.reentrant_lock("late-drop", "alice", TTL).unwrap();
    assert_eq!(fresh.hold_count(), Some(1));
    drop(stale);
    // The drop's release is sent without waiting: give it time to arrive (a count it takes
    // away does not come back).
    std::thread::sleep(Duration::from_millis(200));
    assert!(fresh.validity() > Duration::ZERO);
    assert_bob_stays_out(&cluster, &other, "late-drop", "");
    fresh.release().unwrap();
}

/// A release decided while the hold is valid, but queued behind another request of the same
/// client on two hung nodes, reaches them after the hold's keys expired there and another
/// process of the owner created the hash again: it must not count down that newer hold.
#[test]
fn a_release_queued_past_the_validity_leaves_a_newer_hold_of_the_owner_alone() {
    use std::sync::Arc;
    let cluster = Arc::new(Cluster::start(3));
    // I/O timeout 1.2 s: the workers wait that long for the hung nodes' answers.
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(600))
        .retry_count(0)
        .build()
        .unwrap();
    let ttl = Duration::from_millis(400);
    let stale = rl.reentrant_lock("queued", "alice", ttl).unwrap();
    // The hold returned on a quorum: the scenario needs it on the nodes about to hang.
    assert!(eventually(Duration::from_secs(5), || {
        nodes_with(&cluster, "queued", "alice", 1) == 3
    }));
    // Another process of alice, connected before the nodes hang.
    let other = cluster
        .builder()
        .node_timeout(Duration::from_millis(600))
        .retry_count(0)
        .build()
        .unwrap();
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    a.hang();
    b.hang();
    // Another lock of the same client: its attempt occupies the workers of the hung nodes.
    let busy = {
        let rl = rl.clone();
        std::thread::spawn(move || rl.try_lock("elsewhere", TTL).err())
    };
    std::thread::sleep(Duration::from_millis(30));
    assert!(stale.validity() > Duration::ZERO);
    let release = std::thread::spawn(move || stale.release());
    // The stale hold's keys expire on the hung nodes; another process of alice asks for the
    // lock while they are still hung, and they resume within its node timeout.
    std::thread::sleep(ttl + Duration::from_millis(100));
    let fresh = {
        let other = other.clone();
        std::thread::spawn(move || other.try_reentrant_lock("queued", "alice", TTL))
    };
    std::thread::sleep(Duration::from_millis(150));
    a.resume();
    b.resume();
    let fresh = fresh.join().unwrap().unwrap();
    let _ = busy.join().unwrap();
    let released = release.join().unwrap();
    // A read through the stale client's workers, queued after its release: once every node
    // answered it, the release has been sent, or dropped.
    rl.inspect("queued").unwrap();
    assert!(fresh.validity() > Duration::ZERO);
    let stale = format!(" (stale release: {released:?})");
    assert_bob_stays_out(&cluster, &other, "queued", &stale);
    fresh.release().unwrap();
}

/// A release sent while the hold is valid, to nodes that hang before it runs, runs once they
/// resume, after the hold's keys expired there. Another process of the owner asked those
/// nodes for the lock just before (its request waits in the nodes' input ahead of the
/// release), so on resuming they create the hash again for it and then run the stale release,
/// which counts that newer hold down: another owner must stay out while it is valid.
#[test]
fn a_release_sent_in_time_to_hung_nodes_leaves_a_newer_hold_of_the_owner_alone() {
    let cluster = Cluster::start(3);
    let quick = |ms| {
        cluster
            .builder()
            .node_timeout(Duration::from_millis(ms))
            .retry_count(0)
            .build()
            .unwrap()
    };
    let rl = quick(100);
    // Another process of alice, patient enough to wait for the hung nodes.
    let other = quick(1000);
    let ttl = Duration::from_millis(500);
    let stale = rl.reentrant_lock("sent", "alice", ttl).unwrap();
    // The hold returned on a quorum: the scenario needs it on the nodes about to hang.
    assert!(eventually(Duration::from_secs(5), || {
        nodes_with(&cluster, "sent", "alice", 1) == 3
    }));
    // Both clients' connections are fresh (no idle probe before the next request).
    other.inspect("sent").unwrap();
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    a.hang();
    b.hang();
    let fresh = {
        let other = other.clone();
        std::thread::spawn(move || other.try_reentrant_lock("sent", "alice", TTL))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(stale.validity() > Duration::ZERO);
    // Sent at once, well within the validity; the hung nodes do not answer it in time.
    let released = stale.release();
    // The stale hold's keys expire on the hung nodes before they resume.
    std::thread::sleep(ttl + Duration::from_millis(100));
    a.resume();
    b.resume();
    let fresh = fresh.join().unwrap().unwrap();
    // A read through the stale client's workers, queued after its release: once every node
    // answered it, the release has run there.
    rl.inspect("sent").unwrap();
    assert!(fresh.validity() > Duration::ZERO);
    let stale = format!(" (stale release: {released:?})");
    assert_bob_stays_out(&cluster, &other, "sent", &stale);
    fresh.release().unwrap();
}

/// An extension sent while the hold is valid, to nodes that hang before it runs, runs once
/// they resume, after the hold's keys expired there and another process of the owner, whose
/// request waited in their input ahead of it, created the hash again: it must not report the
/// stale hold extended on the strength of that newer hold, which another owner may follow as
/// soon as the newer hold is released.
#[test]
fn an_extension_sent_in_time_to_hung_nodes_does_not_renew_an_expired_hold() {
    let cluster = Cluster::start(3);
    let patient = || {
        cluster
            .builder()
            .node_timeout(Duration::from_millis(1000))
            .retry_count(0)
            .build()
            .unwrap()
    };
    let (rl, other) = (patient(), patient());
    let ttl = Duration::from_millis(500);
    let stale = rl.reentrant_lock("ext", "alice", ttl).unwrap();
    // The hold returned on a quorum: the scenario needs it on the nodes about to hang.
    assert!(eventually(Duration::from_secs(5), || {
        nodes_with(&cluster, "ext", "alice", 1) == 3
    }));
    other.inspect("ext").unwrap();
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    a.hang();
    b.hang();
    let (fresh, extended) = std::thread::scope(|s| {
        let fresh = s.spawn(|| other.try_reentrant_lock("ext", "alice", TTL));
        std::thread::sleep(Duration::from_millis(50));
        assert!(stale.validity() > Duration::ZERO);
        let extended = s.spawn(|| stale.extend(TTL));
        // The stale hold's keys expire on the hung nodes before they resume.
        std::thread::sleep(ttl + Duration::from_millis(100));
        a.resume();
        b.resume();
        (fresh.join().unwrap().unwrap(), extended.join().unwrap())
    });
    fresh.release().unwrap();
    let bob = other.try_reentrant_lock("ext", "bob", TTL);
    assert!(
        stale.validity() == Duration::ZERO || matches!(bob, Err(Error::NotAcquired { .. })),
        "bob got the lock while alice's stale hold reports {:?} of validity left (extension: \
         {extended:?}); holds of alice per node: {:?}",
        stale.validity(),
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "ext", "alice"))
            .collect::<Vec<_>>()
    );
}

/// The holds a node counts for `owner` and the hold fields (`NUL id`) it has, from one
/// `HGETALL`; `(0, 0)` when the key is not `owner`'s hash.
fn count_and_fields(conn: &mut redis::Connection, resource: &str, owner: &str) -> (u64, usize) {
    let all: Vec<(Vec<u8>, String)> = match redis::cmd("HGETALL").arg(resource).query(conn) {
        Ok(all) => all,
        Err(e) if e.code() == Some("WRONGTYPE") => return (0, 0),
        Err(e) => panic!("HGETALL: {e}"),
    };
    let Some(count) = all.iter().find(|(f, _)| f == owner.as_bytes()) else {
        return (0, 0);
    };
    let fields = all.iter().filter(|(f, _)| f.first() == Some(&0)).count();
    (count.1.parse().unwrap(), fields)
}

/// Threads of one owner nest holds, some with a cancel fired at once or soon, while one node
/// at a time hangs past the client's I/O timeout (so replies are lost and connections
/// broken). Between hangs every node's count of the owner equals its number of hold fields
/// (a count without a field would never go; a field without a count would let the key go
/// under a valid hold), another owner never holds beside a hold of alice, and once all is
/// released nothing is left after the TTL.
#[test]
fn lost_replies_and_cancels_keep_each_nodes_count_equal_to_its_hold_fields() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
    const THREADS: u64 = 3;
    let ttl = Duration::from_secs(2);
    let cluster = Arc::new(Cluster::start(3));
    let client = || {
        cluster
            .builder()
            .node_timeout(Duration::from_millis(80))
            .retry_count(0)
            .build()
            .unwrap()
    };
    let (rl, bob) = (client(), client());
    let stop = Arc::new(AtomicBool::new(false));
    let alice_holds = Arc::new(AtomicUsize::new(0));
    let (cycles, bob_got, cancelled) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let (rl, stop, alice_holds, cycles, cancelled) = (
            rl.clone(),
            Arc::clone(&stop),
            Arc::clone(&alice_holds),
            Arc::clone(&cycles),
            Arc::clone(&cancelled),
        );
        threads.push(std::thread::spawn(move || {
            let mut round = t;
            while !stop.load(SeqCst) {
                round += 1;
                let mut held = Vec::new();
                for i in 0..=(round % 3) {
                    let cancel = redquorum::Cancel::new();
                    let request = redquorum::LockRequest::new("drift", ttl)
                        .reentrant("alice")
                        .wait(Duration::from_secs(1))
                        .cancel(&cancel);
                    let firing = (round + i).is_multiple_of(3).then(|| {
                        let cancel = cancel.clone();
                        let after = Duration::from_micros(300 * (round % 11));
                        std::thread::spawn(move || {
                            std::thread::sleep(after);
                            cancel.cancel();
                        })
                    });
                    match rl.acquire(&request) {
                        Ok(lock) => {
                            alice_holds.fetch_add(1, SeqCst);
                            held.push(lock);
                        }
                        Err(Error::Cancelled { .. }) => {
                            cancelled.fetch_add(1, SeqCst);
                        }
                        Err(_) => {}
                    }
                    if let Some(f) = firing {
                        f.join().unwrap();
                    }
                }
                std::thread::sleep(Duration::from_micros(700 * (round % 5)));
                if round.is_multiple_of(2) {
                    held.reverse();
                }
                for (i, lock) in held.into_iter().enumerate() {
                    alice_holds.fetch_sub(1, SeqCst);
                    if (round + i as u64).is_multiple_of(4) {
                        drop(lock);
                    } else {
                        let _ = lock.release();
                    }
                }
                cycles.fetch_add(1, SeqCst);
            }
        }));
    }
    {
        let (stop, alice_holds, bob_got) = (
            Arc::clone(&stop),
            Arc::clone(&alice_holds),
            Arc::clone(&bob_got),
        );
        threads.push(std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                if let Ok(lock) = bob.try_reentrant_lock("drift", "bob", ttl) {
                    let alice = alice_holds.load(SeqCst);
                    assert_eq!(alice, 0, "bob holds while alice holds {alice} times");
                    bob_got.fetch_add(1, SeqCst);
                    lock.release().ok();
                }
                std::thread::sleep(Duration::from_millis(3));
            }
        }));
    }
    let mut conns: Vec<_> = cluster.nodes.iter().map(|n| n.conn()).collect();
    let start = std::time::Instant::now();
    let (mut hangs, mut looks) = (0u64, 0u64);
    // At least 9 s, and on a busy machine until alice's threads have done enough (at most 60 s).
    let exercised = || cycles.load(SeqCst) > 100 && cancelled.load(SeqCst) > 10;
    while start.elapsed() < Duration::from_secs(9)
        || (!exercised() && start.elapsed() < Duration::from_secs(60))
    {
        for _ in 0..(5 + hangs % 7) {
            for (i, c) in conns.iter_mut().enumerate() {
                let (count, fields) = count_and_fields(c, "drift", "alice");
                assert_eq!(
                    count as usize, fields,
                    "node {i} counts {count} holds of alice with {fields} hold fields"
                );
                looks += 1;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let node = &cluster.nodes[(hangs % 3) as usize];
        node.hang();
        std::thread::sleep(Duration::from_millis(40 + 60 * (hangs % 6)));
        node.resume();
        hangs += 1;
    }
    stop.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let (cycles, bob_got, cancelled) = (
        cycles.load(SeqCst),
        bob_got.load(SeqCst),
        cancelled.load(SeqCst),
    );
    let left: Vec<_> = cluster
        .nodes
        .iter()
        .map(|n| holds(n, "drift", "alice"))
        .collect();
    eprintln!(
        "{hangs} hangs, {cycles} cycles of alice, {cancelled} cancelled, {bob_got} holds of bob, \
         {looks} looks; holds of alice left per node until the TTL: {left:?}"
    );
    assert!(cycles > 100 && cancelled > 10, "too little was exercised");
    for (i, c) in conns.iter_mut().enumerate() {
        let (count, fields) = count_and_fields(c, "drift", "alice");
        assert_eq!(count as usize, fields, "node {i} after all is released");
    }
    assert!(
        eventually(ttl + Duration::from_secs(1), || gone(&cluster, "drift")),
        "holds per node once all is released and the TTL passed: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "drift", "alice"))
            .collect::<Vec<_>>()
    );
}

/// A hash of the previous format, `{owner: count}` without hold fields (a hold of an older
/// client), takes a nested hold of the owner; the nested hold's release leaves the older hold
/// counted on every node, and another owner stays out until it goes.
#[test]
fn a_hold_of_the_previous_format_stays_counted_when_a_nested_hold_comes_and_goes() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    for n in &cluster.nodes {
        let _: () = redis::pipe()
            .cmd("HSET")
            .arg("mixed")
            .arg("alice")
            .arg(1)
            .ignore()
            .cmd("PEXPIRE")
            .arg("mixed")
            .arg(TTL.as_millis() as u64)
            .ignore()
            .query(&mut n.conn())
            .unwrap();
    }
    let nested = rl.try_reentrant_lock("mixed", "alice", TTL).unwrap();
    assert_eq!(nested.hold_count(), Some(2));
    nested.release().unwrap();
    // The release returns on a quorum; the third node may apply it (or count the nested hold
    // and get its cleanup from the hand-over) a moment later.
    assert!(
        eventually(Duration::from_secs(2), || nodes_with(
            &cluster, "mixed", "alice", 1
        ) == 3),
        "holds of alice per node: {:?}",
        cluster
            .nodes
            .iter()
            .map(|n| holds(n, "mixed", "alice"))
            .collect::<Vec<_>>()
    );
    let bob = rl.try_reentrant_lock("mixed", "bob", TTL);
    assert!(matches!(bob, Err(Error::NotAcquired { .. })), "{bob:?}");
    // The older client's release, as its script did it: the count down to 0 deletes the key.
    for n in &cluster.nodes {
        let left: i64 = redis::cmd("HINCRBY")
            .arg("mixed")
            .arg("alice")
            .arg(-1)
            .query(&mut n.conn())
            .unwrap();
        assert_eq!(left, 0);
        n.del("mixed");
    }
    rl.try_reentrant_lock("mixed", "bob", TTL)
        .unwrap()
        .release()
        .unwrap();
}
