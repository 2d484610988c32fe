//! The read-write lock on real nodes: readers share, writers and plain holders exclude them,
//! reader entries expire and are never revived, waiting readers all wake on a writer's
//! release, and a thread cannot wait for its own lock.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redquorum::{AutoExtend, Cancel, Error, LockRequest, Redlock};
use support::Shorthands;
use support::{Cluster, RedisNode, assert_no_worker_panicked, eventually, watch_workers};

const TTL: Duration = Duration::from_secs(10);

/// The live reader tokens in the set at `key` on `node` (empty when the key is not a set).
fn readers(node: &RedisNode, key: &str) -> HashSet<String> {
    let kind: String = redis::cmd("TYPE").arg(key).query(&mut node.conn()).unwrap();
    if kind != "zset" {
        return HashSet::new();
    }
    // Live entries only: scored by their expiry in the node's own clock. (An expired entry
    // stays in the set until the next script prunes it, and a refused extension sends none.)
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut node.conn()).unwrap();
    let now_ms = secs * 1000 + micros / 1000;
    let members: Vec<String> = redis::cmd("ZRANGEBYSCORE")
        .arg(key)
        .arg(format!("({now_ms}"))
        .arg("+inf")
        .query(&mut node.conn())
        .unwrap();
    members.into_iter().collect()
}

/// How many nodes have `token` among the readers of `key`.
fn reading(cluster: &Cluster, key: &str, token: &str) -> usize {
    cluster
        .nodes
        .iter()
        .filter(|n| readers(n, key).contains(token))
        .count()
}

/// Returns once every node has run (or its worker dropped) the commands `rl` sent before: a
/// lock call returns on a quorum, and the last node's command may be sent up to the node
/// timeout later. A read through the same client queues behind it on each node's worker.
fn settled(rl: &Redlock, key: &str) {
    let seen = rl.inspect(key).expect("inspect");
    assert!(seen.nodes.iter().all(|n| n.state.is_ok()), "{seen:?}");
}

#[derive(Default)]
struct Inside {
    readers: usize,
    exclusive: usize,
    max_readers: usize,
    rounds: [usize; 3],
}

#[test]
fn readers_overlap_but_never_with_a_writer_or_a_plain_holder() {
    watch_workers();
    let cluster = Cluster::start(3);
    let inside = Arc::new(Mutex::new(Inside::default()));
    let mut threads = Vec::new();
    // 0: reader, 1: write lock, 2: plain lock (another Redlock client's view of a writer).
    let roles = [0, 0, 0, 0, 0, 1, 1, 2];
    for (i, &role) in roles.iter().enumerate() {
        let rl = cluster.client();
        let inside = Arc::clone(&inside);
        threads.push(std::thread::spawn(move || {
            let base = LockRequest::new("rw", TTL).wait(Duration::from_secs(60));
            let request = match role {
                0 => base.read(),
                1 => base.write(),
                _ => base,
            };
            let rounds = if role == 0 { 25 } else { 8 };
            for r in 0..rounds {
                let lock = rl.acquire(&request).expect("acquire");
                {
                    let mut s = inside.lock().unwrap();
                    if role == 0 {
                        assert_eq!(s.exclusive, 0, "a reader got in beside a writer");
                        s.readers += 1;
                        s.max_readers = s.max_readers.max(s.readers);
                    } else {
                        assert_eq!(s.exclusive, 0, "two writers at once");
                        assert_eq!(s.readers, 0, "a writer got in beside readers");
                        s.exclusive += 1;
                    }
                    s.rounds[role] += 1;
                }
                std::thread::sleep(Duration::from_millis(if role == 0 { 15 } else { 5 }));
                assert!(lock.is_held(), "thread {i} round {r}: validity left");
                {
                    let mut s = inside.lock().unwrap();
                    if role == 0 {
                        s.readers -= 1;
                    } else {
                        s.exclusive -= 1;
                    }
                }
                lock.release().expect("release");
                // Gaps between reads, so that writers get in (they are not preferred).
                std::thread::sleep(Duration::from_millis((i as u64 * 7 + r as u64 * 13) % 30));
            }
        }));
    }
    for t in threads {
        t.join().expect("no assertion failed in a thread");
    }
    let s = inside.lock().unwrap();
    assert_eq!(s.rounds, [125, 16, 8]);
    assert!(
        s.max_readers > 1,
        "readers never overlapped: max {}",
        s.max_readers
    );
    assert_no_worker_panicked();
}

#[test]
fn plain_fenced_and_reentrant_holders_exclude_readers_both_ways() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let read = LockRequest::new("mix", TTL).read().once();

    let plain = rl.lock("mix", TTL).unwrap();
    assert!(matches!(rl.acquire(&read), Err(Error::NotAcquired { .. })));
    plain.release().unwrap();
    let fenced = rl.lock_fenced("mix", TTL).unwrap();
    assert!(matches!(rl.acquire(&read), Err(Error::NotAcquired { .. })));
    fenced.release().unwrap();
    let owner = Redlock::new_owner().unwrap();
    let reentrant = rl.reentrant_lock("mix", &owner, TTL).unwrap();
    assert!(matches!(rl.acquire(&read), Err(Error::NotAcquired { .. })));
    reentrant.release().unwrap();

    let reader = rl.acquire(&read).unwrap();
    assert!(reading(&cluster, "mix", reader.token()) >= 2);
    for refused in [
        rl.try_lock("mix", TTL),
        rl.try_lock_fenced("mix", TTL),
        rl.try_reentrant_lock("mix", &owner, TTL),
        rl.try_lock_many(["mix", "other"], TTL),
    ] {
        assert!(
            matches!(refused, Err(Error::NotAcquired { .. })),
            "{refused:?}"
        );
    }
    reader.release().unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.pttl("mix") == -2)));
    rl.try_lock("mix", TTL).unwrap().release().unwrap();
}

#[test]
fn a_reader_release_touches_only_its_own_entry_and_the_last_frees_the_key() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let read = LockRequest::new("own", TTL).read().once();
    let short = rl.acquire(&read).unwrap();
    let long = rl
        .acquire(
            &LockRequest::new("own", Duration::from_secs(60))
                .read()
                .once(),
        )
        .unwrap();
    let (short_token, long_token) = (short.token().to_owned(), long.token().to_owned());
    assert_ne!(short_token, long_token);
    // The key lives as long as its longest reader.
    assert!(
        cluster
            .nodes
            .iter()
            .filter(|n| n.pttl("own") > 30_000)
            .count()
            >= 2
    );

    short.release().unwrap();
    assert!(eventually(Duration::from_secs(5), || reading(
        &cluster,
        "own",
        &short_token
    ) == 0));
    assert!(reading(&cluster, "own", &long_token) >= 2);
    assert!(matches!(
        rl.try_lock("own", TTL),
        Err(Error::NotAcquired { .. })
    ));
    long.extend(Duration::from_secs(5)).unwrap();
    // The key's expiry follows its (now only) reader down.
    assert!(
        cluster
            .nodes
            .iter()
            .filter(|n| (1..=5_000).contains(&n.pttl("own")))
            .count()
            >= 2
    );
    long.release().unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.pttl("own") == -2)));
    rl.try_lock("own", TTL).unwrap().release().unwrap();
}

#[test]
fn an_expired_reader_is_not_revived_by_an_extension() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Another reader keeps the set alive, so the expired entry is pruned rather than dropped
    // with its key.
    let keeper = rl
        .acquire(&LockRequest::new("revive", Duration::from_secs(30)).read())
        .unwrap();
    let brief = rl
        .acquire(&LockRequest::new("revive", Duration::from_millis(400)).read())
        .unwrap();
    let token = brief.token().to_owned();
    settled(&rl, "revive");
    std::thread::sleep(Duration::from_millis(800));
    assert!(!brief.is_held());
    let err = brief.extend(TTL).unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
    assert_eq!(reading(&cluster, "revive", &token), 0, "entry revived");
    assert!(reading(&cluster, "revive", keeper.token()) >= 2);

    // Without another reader, the key itself expired: refused as well.
    let alone = rl
        .acquire(&LockRequest::new("revive2", Duration::from_millis(400)).read())
        .unwrap();
    settled(&rl, "revive2");
    std::thread::sleep(Duration::from_millis(800));
    assert!(matches!(alone.extend(TTL), Err(Error::Lost { .. })));
    assert!(cluster.nodes.iter().all(|n| n.pttl("revive2") == -2));
    keeper.release().unwrap();
}

#[test]
fn a_writer_release_wakes_every_waiting_reader() {
    watch_workers();
    let cluster = Cluster::start(3);
    // Fallback waits of 10 to 20 s: only notifications can let the readers in sooner.
    let rl = cluster
        .builder()
        .retry_delay(Duration::from_secs(20))
        .build()
        .unwrap();
    let writer = rl.acquire(&LockRequest::new("wake", TTL).write()).unwrap();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let lock = rl
                    .acquire(
                        &LockRequest::new("wake", TTL)
                            .read()
                            .wait(Duration::from_secs(60)),
                    )
                    .expect("read lock");
                let at = Instant::now();
                // Held long: a reader woken only by another's release would come 3 s late.
                std::thread::sleep(Duration::from_millis(3000));
                lock.release().unwrap();
                at
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(10), || {
        cluster
            .nodes
            .iter()
            .all(|n| n.release_subscribers("wake") == 1)
    }));
    std::thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    writer.release().unwrap();
    for r in readers {
        let at = r.join().expect("reader");
        assert!(
            at.duration_since(released) < Duration::from_millis(2500),
            "a reader waited {:?} after the writer's release: it was not woken",
            at.duration_since(released)
        );
    }
    assert_no_worker_panicked();
}

#[test]
fn a_thread_cannot_wait_for_its_own_lock() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let patient = |r: LockRequest| r.wait(Duration::from_secs(30));
    let read = patient(LockRequest::new("self", TTL).read());
    let write = patient(LockRequest::new("self", TTL).write());

    let held = rl.acquire(&read).unwrap();
    let started = Instant::now();
    match rl.acquire(&write) {
        Err(Error::InvalidArgument { message }) => {
            assert!(
                message.contains("read lock") && message.contains("self"),
                "{message}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "it waited");
    // Another read lock by the same thread is fine: readers share.
    let again = rl.acquire(&read).unwrap();
    // Another thread may wait for the write lock: it is not waiting for itself.
    let other = {
        let rl = rl.clone();
        let write = write.clone();
        std::thread::spawn(move || rl.acquire(&write).map(|l| l.release()))
    };
    // With that writer queued, this thread still may not queue behind it for a write.
    assert!(eventually(Duration::from_secs(10), || rl
        .queued_waiters("self")
        == 1));
    let started = Instant::now();
    assert!(matches!(
        rl.acquire(&write),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(10), "it waited");
    held.release().unwrap();
    drop(again); // a drop ends the claim like a release
    assert!(matches!(other.join().unwrap(), Ok(Ok(()))));

    let w = rl.acquire(&write).unwrap();
    assert!(matches!(
        rl.acquire(&read),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        rl.acquire(&write),
        Err(Error::InvalidArgument { .. })
    ));
    w.release().unwrap();
    rl.acquire(&write).unwrap().release().unwrap();
    rl.acquire(&read).unwrap().release().unwrap();
}

/// A named caller (a binding's thread, a goroutine's owner) is who the self-wait check goes
/// by, whichever OS thread runs its calls: its own write after its read is refused from any
/// thread, while another caller on the very same OS thread waits for the lock like anyone.
#[test]
fn a_named_caller_cannot_wait_for_its_own_lock_from_any_thread() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let request = |caller: &str| LockRequest::new("named", TTL).caller(caller);
    let held = rl.acquire(&request("alice").read()).unwrap();

    // Alice again, from another OS thread: still alice, still refused at once.
    let started = Instant::now();
    let alice = {
        let (rl, write) = (
            rl.clone(),
            request("alice").write().wait(Duration::from_secs(30)),
        );
        std::thread::spawn(move || rl.acquire(&write).map(|l| l.release()))
    };
    match alice.join().unwrap() {
        Err(Error::InvalidArgument { message }) => {
            assert!(
                message.contains("\"alice\"") && message.contains("read lock"),
                "{message}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "it waited");

    // Bob, on this very thread that took alice's read lock: he waits, and gets in once she
    // lets go.
    let bob = rl.acquire(&request("bob").write().once());
    assert!(matches!(bob, Err(Error::NotAcquired { .. })), "{bob:?}");
    held.release().unwrap();
    rl.acquire(&request("bob").write().wait(Duration::from_secs(10)))
        .expect("bob's write lock")
        .release()
        .unwrap();
    // The thread itself, named by nobody, holds nothing.
    rl.acquire(&LockRequest::new("named", TTL).write())
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn read_and_write_locks_wait_auto_extend_and_cancel() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Three node timeouts (support::NODE_TIMEOUT), so one slow extension can be retried.
    let ttl = Duration::from_secs(3);

    // An auto-extended reader outlives several TTLs and keeps a writer out all along.
    let reader = rl
        .acquire(
            &LockRequest::new("ext", ttl)
                .read()
                .auto_extend(AutoExtend::new()),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(7000));
    assert!(reader.is_held() && !reader.is_lost());
    assert!(matches!(
        rl.try_lock("ext", TTL),
        Err(Error::NotAcquired { .. })
    ));
    // A waiting writer gets in once the reader is done.
    let writer = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(
                &LockRequest::new("ext", ttl)
                    .write()
                    .wait(Duration::from_secs(30))
                    .auto_extend(AutoExtend::new()),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    reader.release().unwrap();
    let writer = writer.join().unwrap().expect("the waiting writer");
    std::thread::sleep(Duration::from_millis(4000));
    assert!(writer.is_held(), "auto-extended writer");

    // A waiting reader is cancelled: it ends at once and leaves no entry behind.
    let cancel = Cancel::new();
    let waiter = {
        let rl = rl.clone();
        let request = LockRequest::new("ext", TTL)
            .read()
            .wait(Duration::from_secs(60))
            .cancel(&cancel);
        std::thread::spawn(move || rl.acquire(&request))
    };
    std::thread::sleep(Duration::from_millis(500));
    let cancelled = Instant::now();
    cancel.cancel();
    let got = waiter.join().unwrap();
    assert!(matches!(got, Err(Error::Cancelled { .. })), "{got:?}");
    assert!(cancelled.elapsed() < Duration::from_secs(5));
    // (An entry can be set for a moment on a node that missed the writer's SET, dropped at its
    // call's deadline: an attempt's undo goes out without waiting for its answer.)
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| readers(n, "ext").is_empty())));
    writer.release().unwrap();
    assert_no_worker_panicked();
}
