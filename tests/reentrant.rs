//! Reentrant locks (a hash `{owner: count}` per resource) against real redis-server nodes.

mod support;

use std::time::Duration;

use redlock::{Error, Redlock};
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
    for owner in [String::new(), "x".repeat(1025)] {
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
    let cancel = redlock::Cancel::new();
    let waiter = {
        let (rl, cancel) = (rl.clone(), cancel.clone());
        std::thread::spawn(move || {
            let request = redlock::LockRequest::new("cancel", TTL)
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
