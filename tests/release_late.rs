//! A release that a worker reaches after its caller stopped waiting, or that finds its node
//! down, still reaches the node: the key does not stay until its TTL.
mod support;

use std::time::Duration;

use support::{Cluster, eventually};

#[test]
fn a_release_queued_behind_a_slow_command_still_reaches_the_nodes() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(50))
        .retry_count(0)
        .build()
        .unwrap();
    let ttl = Duration::from_secs(30);
    let lock = rl.lock("held", ttl).unwrap();
    let token = lock.token().to_owned();
    // A quorum holds it; the third SET may still be on its way (the lock returns on a quorum).
    assert!(cluster.holding("held", &token) >= 2);
    // The nodes stall for 150 ms while another call is on its way to them: the release is
    // queued behind it on each node's worker.
    for n in &cluster.nodes {
        n.hang();
    }
    let other = rl.clone();
    let busy = std::thread::spawn(move || other.try_lock("other", ttl).is_ok());
    std::thread::sleep(Duration::from_millis(10));
    let released = lock.release();
    std::thread::sleep(Duration::from_millis(140));
    for n in &cluster.nodes {
        n.resume();
    }
    let _ = busy.join();
    // Every node answers again and the client is alive: the release should reach them (as the
    // undo of the concurrent try_lock does), not leave "held" locked for 30 s.
    let gone = eventually(Duration::from_secs(3), || {
        cluster.holding("held", &token) == 0
    });
    assert!(
        gone,
        "release returned {released:?}; 3 s after the nodes resumed {} of 3 still hold the key, \
         PTTL {} ms",
        cluster.holding("held", &token),
        cluster.nodes[0].pttl("held")
    );
}
