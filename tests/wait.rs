//! Waiting for a busy lock: release notifications wake waiters, a backoff covers lost ones, and
//! subscriptions are shared and cleaned up. Real nodes, real threads.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Error, LockRequest};
use support::Shorthands;
use support::{Cluster, RedisNode, eventually};

const TTL: Duration = Duration::from_secs(10);

/// A request for `resource` that waits up to `d`.
fn waiting(resource: &str, d: Duration) -> LockRequest {
    LockRequest::new(resource, TTL).wait(d)
}

#[test]
fn a_waiter_wakes_on_the_release_notification_not_its_backoff() {
    let cluster = Cluster::start(3);
    let nodes: Vec<&RedisNode> = cluster.nodes.iter().collect();
    support::wakes_on_the_release_notification(&nodes, cluster.builder());
}

/// Nodes reached on Unix sockets: their subscriptions are read as those over TCP are.
#[test]
fn a_waiter_on_unix_socket_nodes_wakes_on_the_release_notification() {
    let dir = support::server_dir("redlock-unix");
    let sockets: Vec<String> = (0..3)
        .map(|i| format!("{}/{i}.sock", dir.display()))
        .collect();
    let nodes: Vec<RedisNode> = sockets
        .iter()
        .map(|s| RedisNode::start_with(&["--unixsocket", s, "--unixsocketperm", "700"]))
        .collect();
    let urls: Vec<String> = sockets
        .iter()
        .map(|s| format!("redis+unix://{s}"))
        .collect();
    let nodes: Vec<&RedisNode> = nodes.iter().collect();
    support::wakes_on_the_release_notification(&nodes, support::builder(&urls));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_waiter_gives_up_at_its_deadline_and_unsubscribes() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holder = rl.lock("deadline", TTL).unwrap();
    let start = Instant::now();
    match rl.acquire(&waiting("deadline", Duration::from_millis(700))) {
        Err(Error::NotAcquired { attempts, .. }) => assert!(attempts > 1),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert!(eventually(Duration::from_secs(3), || cluster
        .nodes
        .iter()
        .all(|n| n.release_subscribers("deadline") == 0)));
    holder.release().unwrap();
    // A zero wait is one attempt.
    let _h = rl.lock("deadline", TTL).unwrap();
    assert!(matches!(
        rl.acquire(&waiting("deadline", Duration::ZERO)),
        Err(Error::NotAcquired { attempts: 1, .. })
    ));
}

/// A client whose waiters come back soon after its last one left (a worker that locks one
/// resource in a loop) keeps its subscriptions in between: one `SUBSCRIBE` per node for all of
/// its waits, not an `UNSUBSCRIBE` and a `SUBSCRIBE` on every node per wait; once none comes
/// back they go.
#[test]
fn a_client_waiting_again_soon_keeps_its_subscriptions() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let other = cluster.client();
    let before = cluster.calls("subscribe");
    let mut longest_gap = Duration::ZERO;
    let mut left: Option<Instant> = None;
    for _ in 0..4 {
        let held = other.lock("again", TTL).unwrap();
        let waiter = {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let lock = rl
                    .acquire(&waiting("again", Duration::from_secs(20)))
                    .unwrap();
                lock.release().unwrap();
                Instant::now()
            })
        };
        assert!(eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.release_subscribers("again") == 1)));
        if let Some(left) = left {
            longest_gap = longest_gap.max(left.elapsed());
        }
        held.release().unwrap();
        left = Some(waiter.join().unwrap());
    }
    let subscribes = cluster.calls("subscribe") - before;
    // The subscriptions stay for a second after the last waiter left; a machine that stalled
    // this test for longer between two waits lets them go in between.
    if longest_gap < Duration::from_millis(900) {
        assert_eq!(
            subscribes, 3,
            "SUBSCRIBEs for four waits in a row on 3 nodes"
        );
    } else {
        eprintln!("a gap of {longest_gap:?} between two waits: {subscribes} SUBSCRIBEs");
    }
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.release_subscribers("again") == 0)));
}

#[test]
fn waiters_share_one_subscriber_connection_per_node_and_leave_none_behind() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holders = [
        rl.lock("shared-a", TTL).unwrap(),
        rl.lock("shared-b", TTL).unwrap(),
    ];
    let waiters: Vec<_> = (0..10)
        .map(|i| {
            let rl = rl.clone();
            let resource = if i % 2 == 0 { "shared-a" } else { "shared-b" };
            std::thread::spawn(move || {
                rl.acquire(&waiting(resource, Duration::from_secs(30)))
                    .unwrap()
                    .release()
                    .unwrap();
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| {
            n.release_subscribers("shared-a") == 1 && n.release_subscribers("shared-b") == 1
        })));
    for node in &cluster.nodes {
        assert_eq!(
            node.clients("pubsub"),
            1,
            "one subscriber connection per node"
        );
    }
    for h in holders {
        h.release().unwrap();
    }
    for w in waiters {
        w.join().unwrap();
    }
    assert!(eventually(Duration::from_secs(3), || cluster
        .nodes
        .iter()
        .all(|n| {
            n.release_subscribers("shared-a") == 0 && n.release_subscribers("shared-b") == 0
        })));
}

#[test]
fn a_waiter_gets_a_lock_that_expired_without_a_release() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // A crashed holder: its keys just expire, and nothing is published.
    let start = Instant::now();
    for node in &cluster.nodes {
        node.set("expired", "someone-else", 600);
    }
    let lock = rl
        .acquire(&waiting("expired", Duration::from_secs(10)))
        .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(500));
    lock.release().unwrap();
}

#[test]
fn waiters_exclude_each_other_and_all_get_their_turn() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let counter = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let rl = rl.clone();
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let lock = rl
                        .acquire(&waiting("turns", Duration::from_secs(60)))
                        .unwrap();
                    let seen = counter.load(Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    counter.store(seen + 1, Ordering::SeqCst);
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 40);
}

/// Commands the nodes run while `waiters` threads wait `hold` for one busy resource.
fn commands_while_waiting(cluster: &Cluster, notifications: bool, waiters: usize) -> u64 {
    let rl = cluster.client();
    let resource = format!("storm-{notifications}");
    let holder = rl.lock(&resource, TTL).unwrap();
    let before = cluster.commands_processed();
    let threads: Vec<_> = (0..waiters)
        .map(|_| {
            let rl = rl.clone();
            let resource = resource.clone();
            std::thread::spawn(move || {
                let request =
                    waiting(&resource, Duration::from_secs(60)).notifications(notifications);
                rl.acquire(&request).unwrap().release().unwrap();
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let during = cluster.commands_processed() - before;
    holder.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    during
}

#[test]
fn notifications_cut_the_commands_waiters_cause() {
    let cluster = Cluster::start(3);
    let polling = commands_while_waiting(&cluster, false, 20);
    let notified = commands_while_waiting(&cluster, true, 20);
    assert!(
        notified * 2 < polling,
        "with notifications {notified} commands, polling {polling}"
    );
}

/// Starts a thread that waits for `resource` and records `id` once it holds it, and returns
/// once the waiter is queued in `rl` (the `queued`-th).
fn queue_waiter(
    rl: &redquorum::Redlock,
    resource: &'static str,
    id: usize,
    queued: usize,
    order: &Arc<std::sync::Mutex<Vec<usize>>>,
) -> std::thread::JoinHandle<()> {
    queue_waiter_fair(rl, resource, id, queued, order, true)
}

/// [`queue_waiter`] in the queue across processes (`fair`) or only in its client's.
fn queue_waiter_fair(
    rl: &redquorum::Redlock,
    resource: &'static str,
    id: usize,
    queued: usize,
    order: &Arc<std::sync::Mutex<Vec<usize>>>,
    fair: bool,
) -> std::thread::JoinHandle<()> {
    let (rl2, order) = (rl.clone(), Arc::clone(order));
    let t = std::thread::spawn(move || {
        let lock = rl2
            .acquire(&waiting(resource, Duration::from_secs(60)).fair(fair))
            .unwrap();
        order.lock().unwrap().push(id);
        std::thread::sleep(Duration::from_millis(5));
        lock.release().unwrap();
    });
    assert!(
        eventually(Duration::from_secs(10), || rl.queued_waiters(resource)
            == queued),
        "waiter {id} did not queue"
    );
    t
}

#[test]
fn local_waiters_get_the_lock_in_arrival_order() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holder = rl.lock("fifo", TTL).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..6)
        .map(|i| queue_waiter(&rl, "fifo", i, i + 1, &order))
        .collect();
    holder.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(rl.queued_waiters("fifo"), 0);
}

#[test]
fn waiters_queued_behind_another_send_nothing_until_their_turn() {
    quiet_waiters(false);
}

#[test]
fn fair_waiters_queued_behind_another_send_only_their_join_until_their_turn() {
    quiet_waiters(true);
}

/// Ten waiters queue behind one at the front: with `fair`, each sends its `JOIN` (one script
/// on the queue node), and without, nothing; neither tries nor reads TTLs.
fn quiet_waiters(fair: bool) {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holder = rl.lock("quiet", TTL).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    // The first waiter tries, is refused and waits for the release at the front.
    let mut threads = vec![queue_waiter_fair(&rl, "quiet", 0, 1, &order, fair)];
    // It queues before its last commands land (the refused attempt's third SET, the TTL read
    // once its subscriptions are up): count from when the nodes' counts stand still.
    // (The head of a queue across processes renews its place: `evalsha` of `JOIN`.)
    let calls = || (cluster.calls("set"), cluster.calls("pttl"));
    let mut last = calls();
    assert!(
        eventually(Duration::from_secs(5), || {
            std::thread::sleep(Duration::from_millis(200));
            let now = calls();
            std::mem::replace(&mut last, now) == now
        }),
        "the waiter in front keeps sending commands"
    );
    let (sets, reads) = last;
    let joins = cluster.calls("zrank");
    for i in 1..11 {
        threads.push(queue_waiter_fair(&rl, "quiet", i, i + 1, &order, fair));
    }
    // Ten more waiters, and not one attempt or read among them.
    assert_eq!(cluster.calls("set"), sets);
    assert_eq!(cluster.calls("pttl"), reads);
    // Each fair one joined the queue once (one `ZRANK` in each `JOIN`; the head's renewals
    // may add a few).
    let joined = cluster.calls("zrank") - joins;
    if fair {
        assert!((10..14).contains(&joined), "{joined} JOINs");
    } else {
        assert_eq!(joined, 0);
    }
    holder.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(order.lock().unwrap().len(), 11);
    if fair {
        // Through the eleven hand-overs: each waiter's JOIN and LEAVE (one ZRANK each), and
        // not a JOIN from every waiter further back at every release (55 more).
        let queue_calls = cluster.calls("zrank") - joins;
        assert!(queue_calls < 35, "{queue_calls} JOINs and LEAVEs");
    }
}

#[test]
fn the_turn_passes_on_when_the_waiter_in_front_gives_up() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holder = rl.lock("giveup", Duration::from_secs(60)).unwrap();
    // In front: one that will be cancelled, one that times out; both leave without the lock.
    let cancel = redquorum::Cancel::new();
    let cancelled = {
        let (rl, cancel) = (rl.clone(), cancel.clone());
        std::thread::spawn(move || {
            let request = redquorum::LockRequest::new("giveup", TTL)
                .wait(Duration::from_secs(60))
                .cancel(&cancel);
            rl.acquire(&request)
        })
    };
    assert!(eventually(Duration::from_secs(10), || rl
        .queued_waiters("giveup")
        == 1));
    let timing_out = {
        let rl = rl.clone();
        std::thread::spawn(move || rl.acquire(&waiting("giveup", Duration::from_secs(1))))
    };
    assert!(eventually(Duration::from_secs(10), || rl
        .queued_waiters("giveup")
        == 2));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let last = queue_waiter(&rl, "giveup", 2, 3, &order);
    cancel.cancel();
    assert!(matches!(
        cancelled.join().unwrap(),
        Err(Error::Cancelled { .. })
    ));
    assert!(matches!(
        timing_out.join().unwrap(),
        Err(Error::NotAcquired { .. })
    ));
    // The last waiter is at the front now: the release wakes it, long before its 60 s are up
    // or the holder's 60 s TTL runs out.
    let released = Instant::now();
    holder.release().unwrap();
    last.join().unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(20),
        "took {:?}",
        released.elapsed()
    );
    assert_eq!(*order.lock().unwrap(), vec![2]);
}

#[test]
fn a_split_vote_does_not_leave_a_waiter_asleep_until_the_keys_expire() {
    // The keys of another client's failed attempt on a quorum, about to be undone (an undo
    // announces nothing): this waiter's own attempt gets two yes votes and three refusals.
    split_vote_then_undone(&["another-attempt"; 3], true);
}

/// The split vote that the waiter's own attempt cannot see: every node refuses it, but with the
/// keys of three other failed attempts, none on a quorum (as when many waiters try at once, in
/// one process or several). Nobody holds the lock, and their undos announce nothing: the waiter
/// must not sleep until the keys' TTL, queued (`fair`) or not. (The fair queue's head did,
/// stalling `examples/waiters.rs` for its whole 8 s run now and then.)
#[test]
fn a_waiter_refused_everywhere_by_a_split_vote_does_not_sleep_until_the_keys_expire() {
    let attempts = [
        "attempt-a",
        "attempt-a",
        "attempt-b",
        "attempt-b",
        "attempt-c",
    ];
    split_vote_then_undone(&attempts, true);
    split_vote_then_undone(&attempts, false);
}

/// The same for a read-write lock: its writers' keys are strings with a token, as a plain
/// lock's, so neither a writer nor a reader refused by a split vote of writers sleeps until
/// their TTL.
#[test]
fn a_reader_or_writer_refused_by_a_split_vote_of_writers_does_not_sleep_until_the_keys_expire() {
    let attempts = ["writer-a", "writer-a", "writer-b", "writer-b", "writer-c"];
    for fair in [true, false] {
        split_vote_then_undone_for(&attempts, |r| r.write().fair(fair));
    }
    split_vote_then_undone_for(&attempts, LockRequest::read);
}

/// Sets `owners[i]` as the key of "split" on node i (30 s TTL), has a waiter try and wait, then
/// deletes them without an announcement, as the undos of failed attempts do: the waiter gets
/// the lock long before the keys would have expired.
fn split_vote_then_undone(owners: &[&str], fair: bool) {
    split_vote_then_undone_for(owners, |r| r.fair(fair));
}

/// [`split_vote_then_undone`] for the waiting request that `kind` makes of a plain one.
fn split_vote_then_undone_for(owners: &[&str], kind: impl Fn(LockRequest) -> LockRequest) {
    split_keys_then_undone(
        &[("split", owners)],
        kind(waiting("split", Duration::from_secs(25))),
    );
}

/// A semaphore's waiter refused everywhere, one slot held on every node and the other filled
/// by the keys of a split vote: that slot is free, so it must not sleep until the keys expire.
#[test]
fn a_semaphore_waiter_refused_by_a_split_vote_on_a_slot_does_not_sleep_until_the_keys_expire() {
    split_keys_then_undone(
        &[
            ("redlock:sem:{split}:0", &["held"; 5]),
            (
                "redlock:sem:{split}:1",
                &["try-a", "try-a", "try-b", "try-b", "try-c"],
            ),
        ],
        waiting("split", Duration::from_secs(25)).semaphore(2),
    );
}

/// Sets `owners[i]` as `key` on node i for each `(key, owners)` of `keys` (30 s TTL), has a
/// waiter make `request`, then deletes the last key without an announcement, as the undos of
/// failed attempts do: the waiter gets the lock long before the keys would have expired.
fn split_keys_then_undone(keys: &[(&str, &[&str])], request: LockRequest) {
    let cluster = Cluster::start(5);
    let rl = cluster.client();
    for (key, owners) in keys {
        for (node, owner) in cluster.nodes.iter().zip(owners.iter()) {
            node.set(key, owner, 30_000);
        }
    }
    let waiter = {
        let rl = rl.clone();
        let request = request.clone();
        std::thread::spawn(move || rl.acquire(&request).map(|l| l.release()))
    };
    let (undone_key, _) = keys.last().unwrap();
    assert!(eventually(Duration::from_secs(10), || cluster
        .nodes
        .iter()
        .all(|n| n.release_subscribers(undone_key) == 1)));
    std::thread::sleep(Duration::from_millis(300));
    for node in &cluster.nodes {
        node.del(undone_key);
    }
    let undone = Instant::now();
    waiter.join().unwrap().unwrap().unwrap();
    // Its fallback retries (at most 1 s apart) find the keys gone, long before their 30 s.
    assert!(
        undone.elapsed() < Duration::from_secs(10),
        "{request:?}: took {:?}",
        undone.elapsed()
    );
}

#[test]
fn a_reentrant_owner_takes_its_lock_again_past_queued_waiters() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let outer = rl.reentrant_lock("owner", "alice", TTL).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let waiter = queue_waiter(&rl, "owner", 0, 1, &order);
    let request = redquorum::LockRequest::new("owner", TTL)
        .reentrant("alice")
        .wait(Duration::from_secs(5));
    let inner = rl.acquire(&request).unwrap();
    inner.release().unwrap();
    outer.release().unwrap();
    waiter.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec![0]);
}

#[test]
fn a_hung_node_does_not_stretch_a_wait_past_its_deadline() {
    let cluster = Cluster::start(5);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let permits = redquorum::LockRequest::new("hung-wait", TTL).semaphore(4);
    let held: Vec<_> = (0..4)
        .map(|_| rl.acquire(&permits.clone().once()).unwrap())
        .collect();
    cluster.nodes[4].hang();
    // Every slot is refused by a quorum at once; the hung node's answer must not be awaited
    // for each of them (4 slots x 1 s).
    let start = Instant::now();
    let result = rl.acquire(&permits.clone().wait(Duration::from_millis(1500)));
    let waited = start.elapsed();
    cluster.nodes[4].resume();
    assert!(
        matches!(result, Err(Error::NotAcquired { .. })),
        "{result:?}"
    );
    assert!(waited < Duration::from_secs(3), "returned after {waited:?}");
    drop(held);
}

#[test]
fn a_hung_node_does_not_hold_up_each_new_waiter_for_the_node_timeout() {
    let cluster = Cluster::start(3);
    // Long fallback waits: only a release notification wakes a waiter quickly.
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_secs(5))
        .retry_jitter(Duration::from_millis(100))
        .build()
        .unwrap();
    cluster.nodes[2].hang();
    let round = |round: usize| {
        let holder = rl.lock("hung-sub", TTL).unwrap();
        let waiter = {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let lock = rl
                    .acquire(&waiting("hung-sub", Duration::from_secs(30)))
                    .unwrap();
                let at = Instant::now();
                lock.release().unwrap();
                at
            })
        };
        // The waiter subscribes on the two live nodes and waits for a release.
        assert!(eventually(Duration::from_secs(5), || cluster.nodes[..2]
            .iter()
            .all(|n| n.release_subscribers("hung-sub") == 1)));
        std::thread::sleep(Duration::from_millis(100));
        let released = Instant::now();
        holder.release().unwrap();
        let acquired = waiter.join().unwrap();
        // The last subscription goes with the waiter, so the next round subscribes anew.
        assert!(eventually(Duration::from_secs(5), || cluster.nodes[..2]
            .iter()
            .all(|n| n.release_subscribers("hung-sub") == 0)));
        (round, acquired.saturating_duration_since(released))
    };
    // The first waiter after the hang finds the node silent: its subscription there is not
    // confirmed within the I/O timeout. Later waiters do not wait for that node to subscribe,
    // so they hear the release at once instead of after their subscribe's 1 s.
    round(0);
    for r in 1..4 {
        let (r, latency) = round(r);
        assert!(
            latency < Duration::from_millis(500),
            "round {r}: acquired {latency:?} after the release"
        );
    }
    cluster.nodes[2].resume();
}

/// A lock held on just a quorum, one of whose nodes dies or hangs while a waiter sleeps: its
/// release is announced by too few nodes to wake anyone. The waiter, queued (`fair`) or not,
/// stops trusting the notification once it hears too few of the holder's nodes (a hung node
/// found out by the release, which it does not answer), and gets the lock on its fallback tries
/// instead of at the holder's TTL.
#[test]
fn a_waiter_does_not_sleep_until_the_keys_expire_when_a_node_of_the_holder_dies_or_hangs() {
    for (fair, hang) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut cluster = Cluster::start(5);
        let rl = cluster.client();
        // Another token's keys on nodes 3 and 4: the holder gets nodes 0 to 2, just a quorum.
        for node in &cluster.nodes[3..] {
            node.set("dies", "stray", 30_000);
        }
        let holder = rl.lock("dies", Duration::from_secs(30)).unwrap();
        assert!(eventually(Duration::from_secs(5), || cluster
            .holding("dies", holder.token())
            == 3));
        let waiter = {
            let rl = rl.clone();
            let request = waiting("dies", Duration::from_secs(25)).fair(fair);
            std::thread::spawn(move || rl.acquire(&request).map(|l| l.release()))
        };
        assert!(eventually(Duration::from_secs(10), || cluster
            .nodes
            .iter()
            .all(|n| n.release_subscribers("dies") == 1)));
        // The waiter has read whose keys they are and sleeps on the notification.
        std::thread::sleep(Duration::from_millis(300));
        if hang {
            cluster.nodes[2].hang();
        } else {
            cluster.nodes[2].kill();
        }
        for node in &cluster.nodes[3..] {
            node.del("dies");
        }
        // Nodes 0 and 1 announce the release: too few to wake the waiter.
        let _ = holder.release();
        let released = Instant::now();
        waiter.join().unwrap().unwrap().unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(10),
            "fair {fair}, hung {hang}: took {:?}",
            released.elapsed()
        );
        if hang {
            cluster.nodes[2].resume();
        }
    }
}
