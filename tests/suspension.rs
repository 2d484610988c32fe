//! Our own host suspended (laptop sleep, VM pause): the clock guard counts it, and every lock
//! this client held across it is reported lost, since its validity, kept on our monotonic clock
//! that stood still, overstates what is left on the nodes. An acquisition whose batch spanned
//! a suspension fails and is undone.
//!
//! A test cannot suspend the host it runs on, so these count a suspension through the hidden
//! `Redlock::simulate_host_suspension`, exactly as a worker does when its `TIME` samples (or
//! the kernel's suspend counter) show one. Real nodes, real threads.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redquorum::{AutoExtend, Error, LockRequest};
use support::{Cluster, eventually};

/// Auto-extension every third of it; long enough that an unnoticed suspension would leave the
/// lock held for the whole test.
const TTL: Duration = Duration::from_secs(3);

#[test]
fn auto_extended_lock_is_lost_after_a_host_suspension() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("susp-auto", TTL).auto_extend(AutoExtend::new()))
        .expect("lock");
    let fired = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&fired);
    lock.on_lost(move |resource| {
        assert_eq!(resource, "susp-auto");
        count.fetch_add(1, Ordering::SeqCst);
    });
    let lost = lock.lost();
    // Held and extended before: the extender keeps it past its TTL.
    std::thread::sleep(TTL + Duration::from_millis(500));
    assert!(lost.try_recv().is_err_and(|e| e.is_empty()), "still held");
    assert!(lock.is_held() && !lock.is_lost());

    rl.simulate_host_suspension();
    // The extender's next tick (within a third of the TTL) finds it and reports it lost,
    // without anyone asking the lock.
    assert!(
        lost.recv_timeout(Duration::from_secs(10)).is_err(),
        "lost() disconnects"
    );
    assert!(
        eventually(Duration::from_secs(5), || fired.load(Ordering::SeqCst) == 1),
        "on_lost ran once"
    );
    assert!(lock.is_lost() && !lock.is_held());
    assert_eq!(lock.validity(), Duration::ZERO);

    // A lock taken after the suspension is not affected by it.
    let after = rl
        .acquire(&LockRequest::new("susp-after", TTL).auto_extend(AutoExtend::new()))
        .expect("lock after the suspension");
    std::thread::sleep(TTL / 2);
    assert!(after.is_held() && !after.is_lost());
    after.release().expect("release");
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn plain_lock_reports_the_suspension_to_its_holder() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl
        .lock("susp-plain", Duration::from_secs(30))
        .expect("lock");
    let fired = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&fired);
    lock.on_lost(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    assert!(lock.is_held());
    rl.simulate_host_suspension();
    assert!(!lock.is_held(), "validity is wrong after a suspension");
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(lock.is_lost());
    assert!(lock.lost().try_recv().is_err_and(|e| e.is_disconnected()));
    // An extension would stretch a lock that may be someone else's by now: refused, and no
    // node is asked (the keys keep their TTL).
    // (A node that holds the key: the lock returned on a quorum, a third SET may be late.)
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.pttl("susp-plain") > 0)
        .expect("a quorum holds the key");
    let before = node.pttl("susp-plain");
    match lock.extend(Duration::from_secs(60)) {
        Err(Error::Lost { resource, .. }) => assert_eq!(resource, "susp-plain"),
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(node.pttl("susp-plain") <= before);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "on_lost runs once");
    // Dropping it still releases its keys (best effort): the resource is free again.
    drop(lock);
    assert!(eventually(Duration::from_secs(5), || rl
        .try_lock("susp-plain", TTL)
        .is_ok()));
}

#[test]
fn acquisition_spanning_a_suspension_fails_and_is_undone() {
    // Two nodes: the quorum is both, so a stopped node holds the batch open while the
    // suspension is counted.
    let cluster = Cluster::start(2);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_secs(5))
        .retry_count(0)
        .build()
        .expect("client");
    cluster.nodes[1].hang();
    let acquiring = {
        let rl = rl.clone();
        std::thread::spawn(move || rl.acquire(&LockRequest::new("susp-span", TTL).once()))
    };
    std::thread::sleep(Duration::from_millis(500));
    rl.simulate_host_suspension();
    cluster.nodes[1].resume();
    let result = acquiring.join().expect("no panic");
    assert!(
        matches!(result, Err(Error::NoQuorum { .. })),
        "an attempt spanning a suspension does not count: {result:?}"
    );
    // Undone on both nodes (the stopped one applied the SET once resumed, then the undo).
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.get("susp-span").is_none())),
        "the attempt's keys are removed"
    );
    // The next attempt, with no suspension during it, succeeds.
    let lock = rl
        .acquire(&LockRequest::new("susp-span", TTL).once())
        .expect("lock");
    assert!(lock.is_held());
    lock.release().expect("release");
}
