//! A release that a worker reaches after its caller stopped waiting, or that finds its node
//! down, still reaches the node: the key does not stay until its TTL.
mod support;

use std::time::Duration;

use support::{Cluster, Shorthands, eventually};

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

/// A node hung for longer than the TTL runs the `SET` it had read when it resumes, with a fresh
/// TTL. The lock was released meanwhile (on the other nodes), and the release kept for that
/// node reaches it after the `SET` ran: the key does not block the resource there for a TTL.
#[test]
fn a_node_hung_past_the_ttl_gets_the_release_after_the_set_it_runs_on_resume() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(2);
    cluster.nodes[2].hang();
    // Nodes 0 and 1 grant it; node 2 has the `SET` in its socket, unread.
    let lock = rl.lock("resumed", ttl).unwrap();
    let token = lock.token().to_owned();
    lock.release().unwrap();
    // Longer than the TTL and the node timeout after the release: the release's own
    // `live_until` is past.
    std::thread::sleep(ttl + Duration::from_millis(500));
    cluster.nodes[2].resume();
    // The resumed node runs the `SET` (a fresh 2 s TTL); the kept release deletes it long before.
    let seen = std::time::Instant::now();
    let gone = eventually(Duration::from_secs(10), || {
        cluster.nodes[2].get("resumed").is_none()
    });
    let after = seen.elapsed();
    assert!(gone, "the key stayed");
    // It was there: the node ran the `SET` it had read.
    let stats = cluster.nodes[2].info("commandstats");
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    assert!(
        after < ttl - Duration::from_millis(200),
        "node 2's key went after {after:?}: it expired, the release never reached the node ({token})"
    );
}

/// A connection to `node` that has said `PING`, to kill the others' connections with later.
fn killer(node: &support::RedisNode) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 16];
    let _ = s.read(&mut buf).unwrap();
    s
}

/// A release runs on two of three nodes, which then drop the client's connections before its
/// replies go out (a `CLIENT KILL` queued behind it while they are stopped). The worker resends
/// the release on a new connection, which finds nothing: that is no refusal, and the release
/// is not reported as `Lost` (the lock was held until it was released).
#[test]
fn a_release_whose_replies_were_lost_after_it_ran_is_not_reported_lost() {
    use std::io::Write;
    for reentrant in [false, true] {
        let cluster = Cluster::start(3);
        let rl = cluster
            .builder()
            .node_timeout(Duration::from_millis(1000))
            .retry_count(0)
            .build()
            .unwrap();
        let ttl = Duration::from_secs(10);
        let lock = if reentrant {
            rl.reentrant_lock("lost-replies", "alice", ttl).unwrap()
        } else {
            rl.try_lock("lost-replies", ttl).unwrap()
        };
        assert!(eventually(Duration::from_secs(2), || cluster
            .nodes
            .iter()
            .all(|n| n.pttl("lost-replies") > 0)));
        let mut killers: Vec<_> = cluster.nodes[1..].iter().map(killer).collect();
        for n in &cluster.nodes[1..] {
            n.hang();
        }
        let releaser = std::thread::spawn(move || lock.release());
        // The release is written to the stopped nodes; the kill queues behind it.
        std::thread::sleep(Duration::from_millis(150));
        for k in &mut killers {
            k.write_all(b"CLIENT KILL TYPE normal SKIPME yes\r\n")
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        for n in &cluster.nodes[1..] {
            n.resume();
        }
        let result = releaser.join().unwrap();
        assert!(
            !matches!(result, Err(redquorum::Error::Lost { .. })),
            "a lock released in time reported lost (reentrant: {reentrant}): {result:?}"
        );
        assert!(
            eventually(Duration::from_secs(2), || cluster
                .nodes
                .iter()
                .all(|n| n.pttl("lost-replies") == -2)),
            "a key stayed (reentrant: {reentrant})"
        );
    }
}

/// A lock released after its validity ran out and its keys expired is reported lost, even when
/// every node dropped the client's connection before the release (the worker resends it, and a
/// resent release that finds nothing is no refusal by itself).
#[test]
fn a_release_after_the_validity_ran_out_is_lost_even_when_the_connections_dropped() {
    use std::io::Write;
    let cluster = Cluster::start(3);
    let rl = cluster.builder().retry_count(0).build().unwrap();
    let lock = rl.try_lock("expired", Duration::from_millis(300)).unwrap();
    assert!(eventually(Duration::from_secs(2), || lock
        .validity()
        .is_zero()));
    // The validity ends a drift margin before the keys do: a release in between deletes them on
    // a quorum, which is no loss.
    assert!(eventually(Duration::from_secs(2), || cluster
        .nodes
        .iter()
        .all(|n| n.pttl("expired") == -2)));
    for n in &cluster.nodes {
        use std::io::Read;
        let mut k = killer(n);
        k.write_all(b"CLIENT KILL TYPE normal SKIPME yes\r\n")
            .unwrap();
        // Its reply (how many it killed): the kill is done before the release.
        let mut reply = [0u8; 16];
        let _ = k.read(&mut reply).unwrap();
    }
    let result = lock.release();
    assert!(
        matches!(result, Err(redquorum::Error::Lost { .. })),
        "a lock released after its validity: {result:?}"
    );
}
