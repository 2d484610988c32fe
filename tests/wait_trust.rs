//! A waiter sleeps on the release notification only while the release would be heard: a quorum
//! of the holder's nodes announces it. Whatever takes that away while it sleeps (a node of the
//! holder dying, hanging with no traffic from the waiter's client, restarting empty between two
//! looks), and for kinds whose keys tell no one holder (readers, a semaphore's slots), it gets
//! the lock on its fallback tries soon after the release, never at its deadline (25 s here)
//! or the holder's TTL (30 s). Each case ran into the deadline before its fix.

mod support;

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redquorum::{Error, Lock, LockRequest, Redlock};
use support::proxy::Proxy;
use support::{Cluster, RedisNode, eventually};

const HOLD: Duration = Duration::from_secs(30);
/// Well before the waiters' 25 s deadline, and many fallback tries (at most 1 s apart) after
/// the release.
const SOON: Duration = Duration::from_secs(10);

fn subscribed(cluster: &Cluster, key: &str, skip: &[usize]) -> bool {
    cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
        .all(|(_, n)| n.release_subscribers(key) >= 1)
}

/// Runs `req`'s acquisition on a thread of its own: whether it got the lock, and when.
fn wait_on_a_thread(rl: &Redlock, req: LockRequest) -> JoinHandle<(Result<(), Error>, Instant)> {
    let rl = rl.clone();
    std::thread::spawn(move || {
        let l = rl.acquire(&req);
        (l.map(|_| ()), Instant::now())
    })
}

/// The waiter got the lock `SOON` after the release at `released`.
fn assert_got_soon(
    waiter: JoinHandle<(Result<(), Error>, Instant)>,
    released: Instant,
    what: &str,
) {
    let (got, at) = waiter.join().unwrap();
    let took = at - released;
    eprintln!("{what}: got {got:?} {took:?} after the release");
    assert!(got.is_ok(), "{what}: {got:?}");
    assert!(took < SOON, "{what}: slept {took:?}");
}

/// The waiter still waits 300 ms on (the holder holds the lock on a quorum), then gets the
/// lock `SOON` after the holder releases it.
fn still_waits_then_gets_it_soon(
    waiter: JoinHandle<(Result<(), Error>, Instant)>,
    holder: Lock,
    what: &str,
) {
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiter.is_finished(),
        "{what}: got the lock while it was held"
    );
    let _ = holder.release();
    assert_got_soon(waiter, Instant::now(), what);
}

/// Semaphore(2), 5 nodes. Slot 0's holder is on exactly {0,1,2} (a stray key of slot 0 on 3 and
/// 4), slot 1's holder on all five. The waiter sleeps on the notification; node 2 dies,
/// the strays go, slot 0's holder releases: slot 0 is free on {0,1,3,4}, but its release is
/// announced by nodes 0 and 1 only.
#[test]
fn a_semaphore_waiter_gets_a_slot_soon_after_its_release_when_a_node_of_that_slot_dies() {
    semaphore(false);
}

/// The same with node 2 dead before the waiter comes: the slots' keys hold on {0,1,3,4}, but
/// several keys tell no one holder, so the waiter does not trust the notification.
#[test]
fn a_semaphore_waiter_started_with_a_node_down_gets_a_slot_soon_after_its_release() {
    semaphore(true);
}

fn semaphore(dead_before: bool) {
    let mut cluster = Cluster::start(5);
    let rl = cluster.client();
    let sem = "sem";
    let slot0 = format!("redlock:sem:{{{sem}}}:0");
    let slot1 = format!("redlock:sem:{{{sem}}}:1");
    for node in &cluster.nodes[3..] {
        node.set(&slot0, "stray", 30_000);
    }
    let req = LockRequest::new(sem, HOLD).semaphore(2);
    let a = rl.acquire(&req).unwrap();
    let b = rl.acquire(&req).unwrap();
    let (on_slot0, other) = if a.permit() == Some(0) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(cluster.holding(&slot0, on_slot0.token()), 3);
    assert_eq!(cluster.holding(&slot1, other.token()), 5);
    if dead_before {
        cluster.nodes[2].kill();
    }
    let req = LockRequest::new(sem, Duration::from_secs(10))
        .semaphore(2)
        .wait(Duration::from_secs(25));
    let waiter = wait_on_a_thread(&rl, req);
    let skip: &[usize] = if dead_before { &[2] } else { &[] };
    assert!(eventually(Duration::from_secs(10), || subscribed(
        &cluster, &slot0, skip
    )));
    std::thread::sleep(Duration::from_millis(500));
    cluster.nodes[2].kill();
    for node in &cluster.nodes[3..] {
        node.del(&slot0);
    }
    std::thread::sleep(Duration::from_millis(200));
    let _ = on_slot0.release(); // NoQuorum: on 0,1 only (2 is dead)
    let released = Instant::now();
    assert_got_soon(
        waiter,
        released,
        &format!("semaphore waiter, dead_before={dead_before}"),
    );
    drop(other);
}

/// Read-write lock, 5 nodes. Reader R1 on exactly {0,1,2} (a writer's string on 3 and 4 while
/// it acquires), reader R2 on all five. A writer waits; node 2 dies; both readers release:
/// the key is gone from {0,1,3,4}, but R2's release empties only 3 and 4 (R1 still on 0, 1)
/// and R1's only 0 and 1: no release is announced by a quorum.
fn rw_writer(fair: bool, dead_before: bool) {
    let mut cluster = Cluster::start(5);
    let rl = cluster.client();
    let res = "rw";
    for node in &cluster.nodes[3..] {
        node.set(res, "stray-writer", 30_000);
    }
    let r1 = rl.acquire(&LockRequest::new(res, HOLD).read()).unwrap();
    for node in &cluster.nodes[3..] {
        node.del(res);
    }
    let r2 = {
        // Another thread: the same caller may hold reads at once anyway, but keep it plain.
        let rl = rl.clone();
        std::thread::spawn(move || rl.acquire(&LockRequest::new("rw", HOLD).read()).unwrap())
            .join()
            .unwrap()
    };
    if dead_before {
        cluster.nodes[2].kill();
    }
    let req = LockRequest::new(res, Duration::from_secs(10))
        .write()
        .fair(fair)
        .wait(Duration::from_secs(25));
    let waiter = wait_on_a_thread(&rl, req);
    let skip: &[usize] = if dead_before { &[2] } else { &[] };
    assert!(eventually(Duration::from_secs(10), || subscribed(
        &cluster, res, skip
    )));
    std::thread::sleep(Duration::from_millis(500));
    cluster.nodes[2].kill();
    std::thread::sleep(Duration::from_millis(200));
    r2.release().unwrap(); // on 0,1,3,4
    let _ = r1.release(); // NoQuorum: on 0,1 only (2 is dead)
    let released = Instant::now();
    assert_got_soon(
        waiter,
        released,
        &format!("writer, fair={fair} dead_before={dead_before}"),
    );
}

#[test]
fn a_writer_gets_the_lock_soon_after_the_readers_release_when_a_node_dies() {
    rw_writer(false, false);
}

#[test]
fn a_fair_writer_gets_the_lock_soon_after_the_readers_release_when_a_node_dies() {
    rw_writer(true, false);
}

/// Node 2 dead before the writer comes: the readers' keys tell no one holder, so the writer does
/// not count the nodes that hold them, {0,1,3,4}, as the ones that would announce a release.
#[test]
fn a_writer_started_with_a_node_down_gets_the_lock_soon_after_the_readers_release() {
    rw_writer(false, true);
}

#[test]
fn a_fair_writer_started_with_a_node_down_gets_the_lock_soon_after_the_readers_release() {
    rw_writer(true, true);
}

/// Plain lock held by another client (another process, in real life) on exactly {0,1,2} of 5.
/// The waiter's client sends nothing to node 2 while it sleeps: its subscriber's probe after a
/// silence finds node 2 hung, and the waiter stops trusting a notification that nodes 0 and 1
/// alone cannot complete.
fn hung_holder_node(fair: bool) {
    let cluster = Cluster::start(5);
    let holder_client = cluster.client();
    let waiter_client = cluster.client();
    let res = "hung";
    for node in &cluster.nodes[3..] {
        node.set(res, "stray", 30_000);
    }
    let holder = holder_client.lock(res, HOLD).unwrap();
    assert_eq!(cluster.holding(res, holder.token()), 3);
    let req = LockRequest::new(res, Duration::from_secs(10))
        .fair(fair)
        .wait(Duration::from_secs(25));
    let waiter = wait_on_a_thread(&waiter_client, req);
    assert!(eventually(Duration::from_secs(10), || subscribed(
        &cluster,
        res,
        &[]
    )));
    std::thread::sleep(Duration::from_millis(500));
    cluster.nodes[2].hang();
    for node in &cluster.nodes[3..] {
        node.del(res);
    }
    let t = Instant::now();
    let _ = holder.release();
    let released = Instant::now();
    eprintln!("hung fair={fair}: release took {:?}", released - t);
    assert_got_soon(waiter, released, &format!("waiter, hung, fair={fair}"));
    cluster.nodes[2].resume();
}

#[test]
fn a_waiter_gets_the_lock_soon_after_a_release_when_a_holder_node_hangs_unseen() {
    hung_holder_node(false);
}

#[test]
fn a_fair_waiter_gets_the_lock_soon_after_a_release_when_a_holder_node_hangs_unseen() {
    hung_holder_node(true);
}

/// Plain lock on exactly {0,1,2} of 5; node 2 restarts empty during the wait, within
/// milliseconds: the subscriber's reconnect counts as a lapse, which ends the trust even though
/// the node is back by the waiter's next look.
fn restarted_holder_node(fair: bool) {
    let mut cluster = Cluster::start(5);
    // A restarted node does not count toward quorums for 4 s: the waiter cannot take
    // {2,3,4} while the holder still holds {0,1}; after the release it can take {0,1,3,4}.
    let rl = cluster
        .builder()
        .restart_grace(Duration::from_secs(4))
        .build()
        .unwrap();
    // The nodes just started are in their grace too.
    std::thread::sleep(Duration::from_millis(4500));
    let res = "restart";
    for node in &cluster.nodes[3..] {
        node.set(res, "stray", 30_000);
    }
    let holder = rl.lock(res, HOLD).unwrap();
    assert_eq!(cluster.holding(res, holder.token()), 3);
    let req = LockRequest::new(res, Duration::from_secs(10))
        .fair(fair)
        .wait(Duration::from_secs(25));
    let waiter = wait_on_a_thread(&rl, req);
    assert!(eventually(Duration::from_secs(10), || subscribed(
        &cluster,
        res,
        &[]
    )));
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    cluster.nodes[2].restart();
    eprintln!("restart took {:?}", t.elapsed());
    for node in &cluster.nodes[3..] {
        node.del(res);
    }
    still_waits_then_gets_it_soon(waiter, holder, &format!("waiter, restart, fair={fair}"));
}

/// Plain lock held by another client on exactly {0,1,2} of 5, node 2 behind a proxy; stray
/// keys on 3 and 4 stay, so the lock is free on a quorum only once released. Node 2 hangs; its
/// subscriber's probe goes unanswered (failing, not a lapse: a slow node keeps its keys), and
/// just after, node 2 "restarts" empty: the proxy cuts every connection and sends the next to
/// an empty server, so the subscriber reconnects within milliseconds. The waiter, looking every
/// 50 ms, may not see the node failing in between; the lost connection is a lapse all the same,
/// so it does not trust nodes 0 and 1 alone to announce the release. Each round is one more
/// chance for the waiter's look to miss the failing.
fn hung_then_restarted_holder_node(fair: bool) {
    const ROUNDS: u64 = 3;
    let node_timeout = Duration::from_millis(50);
    // The client's I/O timeout at that node timeout (`Config::io_timeout`: twice the node
    // timeout, at least 100 ms): a probe is late after it.
    let io_timeout = Duration::from_millis(100);
    let plain: Vec<RedisNode> = (0..4).map(|_| RedisNode::start()).collect();
    let mut node2 = RedisNode::start();
    let proxy = Proxy::start(node2.port);
    let urls = [
        plain[0].url(),
        plain[1].url(),
        proxy.url(),
        plain[2].url(),
        plain[3].url(),
    ];
    let holder_client = support::builder(&urls).build().unwrap();
    let waiter_client = support::builder(&urls)
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    for round in 0..ROUNDS {
        let res = format!("hung-restart-{round}");
        for node in &plain[2..] {
            node.set(&res, "stray", 30_000);
        }
        let holder = holder_client.lock(&res, HOLD).unwrap();
        assert_eq!(node2.get(&res).as_deref(), Some(holder.token()));
        let req = LockRequest::new(&res, Duration::from_secs(10))
            .fair(fair)
            .wait(Duration::from_secs(25));
        let waiter = wait_on_a_thread(&waiter_client, req);
        assert!(eventually(Duration::from_secs(10), || {
            plain
                .iter()
                .chain([&node2])
                .all(|n| n.release_subscribers(&res) >= 1)
        }));
        // The subscriber reconnects at once only to a node whose connection lived a second.
        std::thread::sleep(Duration::from_secs(1));
        let empty = RedisNode::start();
        proxy.forget_subscribes();
        node2.hang();
        let probe = eventually(Duration::from_secs(3), || proxy.first_subscribe().is_some());
        assert!(probe, "no probe of the hung node");
        let probe = proxy.first_subscribe().unwrap();
        let late = io_timeout + Duration::from_millis(21 + round * 3);
        std::thread::sleep(late.saturating_sub(probe.elapsed()));
        proxy.switch(empty.port);
        node2.kill();
        node2 = empty;
        let what = format!("waiter, hung then restarted, fair={fair}, round {round}");
        still_waits_then_gets_it_soon(waiter, holder, &what);
    }
}

#[test]
fn a_waiter_gets_the_lock_soon_after_a_release_when_a_hung_holder_node_restarts_empty() {
    hung_then_restarted_holder_node(false);
}

#[test]
fn a_fair_waiter_gets_the_lock_soon_after_a_release_when_a_hung_holder_node_restarts_empty() {
    hung_then_restarted_holder_node(true);
}

#[test]
fn a_waiter_gets_the_lock_soon_after_a_release_when_a_holder_node_restarts_empty() {
    restarted_holder_node(false);
}

#[test]
fn a_fair_waiter_gets_the_lock_soon_after_a_release_when_a_holder_node_restarts_empty() {
    restarted_holder_node(true);
}
