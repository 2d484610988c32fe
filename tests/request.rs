//! One acquisition request: every kind × patience × auto-extension × cancellation on real nodes.
//! Each case asserts the outcome, that nothing is left on any node after release or cancel,
//! that a plain holder of the same resource is excluded, and that waiters of every kind wake on
//! the release notification rather than their fallback polls.

mod support;

use std::time::{Duration, Instant};

use redquorum::{AutoExtend, Cancel, Error, Lock, LockRequest, Redlock};
use support::Shorthands;
use support::{Cluster, RedisNode, eventually};

const TTL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Fenced,
    Reentrant,
    Many,
}

const KINDS: [Kind; 4] = [Kind::Plain, Kind::Fenced, Kind::Reentrant, Kind::Many];

/// A request of `kind` on `name` (for several resources: `name` and `name:b`, so that every
/// kind on one name contends with every other).
fn request(kind: Kind, name: &str, ttl: Duration) -> LockRequest {
    match kind {
        Kind::Plain => LockRequest::new(name, ttl),
        Kind::Fenced => LockRequest::new(name, ttl).fenced(),
        // A fresh owner each time: two requests of this kind are two owners, which exclude
        // each other like any two holders.
        Kind::Reentrant => LockRequest::new(name, ttl).reentrant(&Redlock::new_owner().unwrap()),
        Kind::Many => LockRequest::many(keys(kind, name), ttl),
    }
}

/// The keys a lock of `kind` on `name` takes.
fn keys(kind: Kind, name: &str) -> Vec<String> {
    match kind {
        Kind::Many => vec![name.to_owned(), format!("{name}:b")],
        _ => vec![name.to_owned()],
    }
}

/// Whether any node still has any of `keys` (any type).
fn any_key_left(cluster: &Cluster, keys: &[String]) -> bool {
    cluster.nodes.iter().any(|n| {
        let mut conn = n.conn();
        keys.iter()
            .any(|k| redis::cmd("EXISTS").arg(k).query::<i64>(&mut conn).unwrap() == 1)
    })
}

/// Nothing of `keys` is left on any node, within the time an undo or release takes to land.
fn assert_gone(cluster: &Cluster, keys: &[String], what: &str) {
    assert!(
        eventually(Duration::from_secs(3), || !any_key_left(cluster, keys)),
        "{what}: keys {keys:?} still on some node"
    );
}

/// The kind-specific facts a holder relies on.
fn check_kind(kind: Kind, lock: &Lock, name: &str) {
    match kind {
        Kind::Plain => assert_eq!((lock.fence(), lock.hold_count()), (None, None)),
        Kind::Fenced => assert!(lock.fence().is_some_and(|f| f >= 1)),
        Kind::Reentrant => assert_eq!(lock.hold_count(), Some(1)),
        Kind::Many => assert_eq!(lock.resources(), keys(kind, name)),
    }
}

/// A plain holder of the (first) resource is refused while the lock is held.
fn assert_excludes_plain(rl: &Redlock, kind: Kind, name: &str) {
    let first = keys(kind, name).remove(0);
    match rl.try_lock(&first, TTL) {
        Err(Error::NotAcquired { .. }) => {}
        other => panic!("{kind:?}: a plain lock on {first} while held: {other:?}"),
    }
}

#[test]
fn every_kind_with_every_patience_and_auto_extension_acquires_excludes_and_cleans_up() {
    let cluster = Cluster::start(3);
    // A node timeout short enough for a 1.5 s TTL to be auto-extended every 375 ms.
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let ttl = Duration::from_millis(1500);
    type Patience = fn(LockRequest) -> LockRequest;
    let patiences: [(&str, Patience); 4] = [
        ("default", |r| r),
        ("once", |r| r.once()),
        ("retries", |r| {
            r.retries(2)
                .retry_delay(Duration::from_millis(5))
                .retry_jitter(Duration::from_millis(1))
        }),
        ("wait", |r| r.wait(Duration::from_secs(5))),
    ];
    let mut extended = Vec::new();
    for kind in KINDS {
        for (pname, patience) in patiences {
            for auto in [false, true] {
                let name = format!("m:{kind:?}:{pname}:{auto}");
                let mut req = patience(request(kind, &name, ttl));
                if auto {
                    req = req.auto_extend(AutoExtend::new().fraction(0.25));
                }
                let lock = rl.acquire(&req).unwrap_or_else(|e| panic!("{name}: {e}"));
                check_kind(kind, &lock, &name);
                assert_excludes_plain(&rl, kind, &name);
                if auto {
                    extended.push((kind, name, lock));
                } else {
                    lock.release()
                        .unwrap_or_else(|e| panic!("{name} release: {e}"));
                    assert_gone(&cluster, &keys(kind, &name), &name);
                }
            }
        }
    }
    // Two full TTLs later the auto-extended locks are still ours: the extender kept them.
    std::thread::sleep(ttl * 2 + Duration::from_millis(200));
    for (kind, name, lock) in extended {
        assert!(lock.is_held(), "{name}: auto-extended lock ran out");
        assert_excludes_plain(&rl, kind, &name);
        lock.release()
            .unwrap_or_else(|e| panic!("{name} release: {e}"));
        assert_gone(&cluster, &keys(kind, &name), &name);
    }
}

#[test]
fn a_busy_resource_is_refused_with_every_kind_and_every_patience_but_wait() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    for kind in KINDS {
        let name = format!("busy:{kind:?}");
        // Held by a plain lock on the (first) resource, for longer than any patience here.
        let blocker = rl.lock(&keys(kind, &name)[0], TTL).unwrap();
        for req in [
            request(kind, &name, TTL).once(),
            request(kind, &name, TTL)
                .retries(2)
                .retry_delay(Duration::from_millis(5)),
            request(kind, &name, TTL).wait(Duration::from_millis(300)),
        ] {
            match rl.acquire(&req) {
                Err(Error::NotAcquired { attempts, .. }) => assert!(attempts >= 1),
                other => panic!("{kind:?} {req:?}: {other:?}"),
            }
        }
        blocker.release().unwrap();
        // Every failed attempt was undone: nothing is left.
        assert_gone(&cluster, &keys(kind, &name), &name);
    }
}

/// A client whose fallback polls would first come after 2.5 to 5 s: a waiter that gets the
/// lock sooner than that after the release was woken by the notification.
fn slow_polling(cluster: &Cluster) -> Redlock {
    cluster
        .builder()
        .retry_delay(Duration::from_secs(5))
        .retry_jitter(Duration::from_millis(100))
        .build()
        .unwrap()
}

#[test]
fn waiters_of_every_kind_wake_on_the_release_of_every_kind() {
    let cluster = Cluster::start(3);
    let rl = slow_polling(&cluster);
    for holder_kind in KINDS {
        for waiter_kind in KINDS {
            let name = format!("wake:{holder_kind:?}:{waiter_kind:?}");
            let holder = rl.acquire(&request(holder_kind, &name, TTL)).unwrap();
            let waiter = {
                let rl = rl.clone();
                let req = request(waiter_kind, &name, TTL).wait(Duration::from_secs(30));
                std::thread::spawn(move || {
                    let lock = rl.acquire(&req).unwrap();
                    let at = Instant::now();
                    lock.release().unwrap();
                    at
                })
            };
            // Let the waiter subscribe and start its (long) fallback wait.
            let first = keys(waiter_kind, &name).remove(0);
            assert!(
                eventually(Duration::from_secs(5), || cluster
                    .nodes
                    .iter()
                    .all(|n| n.release_subscribers(&first) == 1)),
                "{holder_kind:?} → {waiter_kind:?}: the waiter did not subscribe"
            );
            std::thread::sleep(Duration::from_millis(300));
            let released = Instant::now();
            holder.release().unwrap();
            let woke = waiter.join().unwrap();
            let took = woke.saturating_duration_since(released);
            assert!(
                took < Duration::from_millis(2000),
                "{holder_kind:?} → {waiter_kind:?}: woke {took:?} after the release"
            );
            assert_gone(&cluster, &keys(waiter_kind, &name), &name);
        }
    }
}

#[test]
fn two_successive_reentrant_releases_by_one_owner_each_wake_a_waiter() {
    let cluster = Cluster::start(3);
    let rl = slow_polling(&cluster);
    let owner = Redlock::new_owner().unwrap();
    for round in 0..3 {
        // The same owner takes and frees the resource again and again: each release must wake
        // the waiter of its round, which counting announcements by token would not.
        let outer = rl.reentrant_lock("rr", &owner, TTL).unwrap();
        let inner = rl.reentrant_lock("rr", &owner, TTL).unwrap();
        assert_eq!(inner.hold_count(), Some(2));
        let waiter = {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let lock = rl
                    .acquire(&LockRequest::new("rr", TTL).wait(Duration::from_secs(30)))
                    .unwrap();
                let at = Instant::now();
                lock.release().unwrap();
                at
            })
        };
        assert!(eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.release_subscribers("rr") == 1)));
        std::thread::sleep(Duration::from_millis(300));
        inner.release().unwrap();
        // One hold is left: the waiter must not get in.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !waiter.is_finished(),
            "round {round}: waiter got in past a hold"
        );
        let released = Instant::now();
        outer.release().unwrap();
        let took = waiter.join().unwrap().saturating_duration_since(released);
        assert!(
            took < Duration::from_millis(2000),
            "round {round}: woke {took:?} after the last release"
        );
    }
}

#[test]
fn a_waiter_sleeps_no_longer_than_the_holders_ttl_without_notifications() {
    let cluster = Cluster::start(3);
    // Fallback polls every 5 s and no notifications: only the cap at the holder's remaining TTL
    // (read from the nodes) can get the waiter in soon after the holder's key expires.
    let rl = slow_polling(&cluster);
    let holder = rl.lock("capped", Duration::from_millis(800)).unwrap();
    std::mem::forget(holder); // never released: it expires
    let start = Instant::now();
    let lock = rl
        .acquire(
            &LockRequest::new("capped", TTL)
                .wait(Duration::from_secs(30))
                .notifications(false),
        )
        .unwrap();
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "waited {took:?} for an 800 ms lock"
    );
    lock.release().unwrap();
}

#[test]
fn a_cancel_before_or_during_the_wait_returns_cancelled_and_leaves_nothing() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    for kind in KINDS {
        for auto in [false, true] {
            let name = format!("cancel:{kind:?}:{auto}");
            // Fired before: nothing is sent at all.
            let fired = Cancel::new();
            fired.cancel();
            let mut req = request(kind, &name, TTL).cancel(&fired);
            if auto {
                req = req.auto_extend(AutoExtend::new());
            }
            assert!(matches!(rl.acquire(&req), Err(Error::Cancelled { .. })));
            assert!(!any_key_left(&cluster, &keys(kind, &name)));

            // Fired during the wait for a busy resource.
            let blocker = rl.lock(&keys(kind, &name)[0], TTL).unwrap();
            let cancel = Cancel::new();
            let req = request(kind, &name, TTL)
                .wait(Duration::from_secs(60))
                .cancel(&cancel);
            let waiter = {
                let rl = rl.clone();
                std::thread::spawn(move || rl.acquire(&req).map(drop))
            };
            std::thread::sleep(Duration::from_millis(300));
            let fired_at = Instant::now();
            cancel.cancel();
            let result = waiter.join().unwrap();
            let took = fired_at.elapsed();
            assert!(
                matches!(result, Err(Error::Cancelled { .. })),
                "{name}: {result:?}"
            );
            assert!(
                took < Duration::from_secs(1),
                "{name}: cancel took {took:?}"
            );
            blocker.release().unwrap();
            assert_gone(&cluster, &keys(kind, &name), &name);
        }
    }
}

/// Fires cancels at random offsets around a release, many times over: after each round, either
/// the waiter got the lock (and released it) or it was cancelled, and then no key of it is left
/// on any node. The race redis-py issue 3847 loses.
#[test]
fn cancels_racing_a_release_never_leave_a_key_behind() {
    let rounds: usize = std::env::var("REDLOCK_CANCEL_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let cluster = Cluster::start(3);
    let holder = cluster.client();
    let waiter = cluster.client();
    let mut got = 0;
    let mut cancelled = 0;
    for round in 0..rounds {
        let kind = KINDS[round % KINDS.len()];
        let name = format!("race:{}", round % 7);
        let mut keys = keys(kind, &name);
        // A waiter queued across processes leaves its queue too (see `queue.rs`).
        keys.push(format!("redlock:queue:{{{name}}}:{name}"));
        keys.push(format!("redlock:queue-lease:{{{name}}}:{name}"));
        let held = holder
            .acquire(&request(kind, &name, TTL).wait(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("round {round}: holder: {e}"));
        let cancel = Cancel::new();
        let req = request(kind, &name, TTL)
            .wait(Duration::from_secs(10))
            .cancel(&cancel);
        let w = {
            let waiter = waiter.clone();
            std::thread::spawn(move || waiter.acquire(&req))
        };
        // Around the release: -1.5 ms to +1.5 ms, in 100 µs steps.
        std::thread::sleep(Duration::from_micros(rand_below(3000)));
        let offset = rand_below(31) as i64 - 15;
        if offset < 0 {
            cancel.cancel();
            std::thread::sleep(Duration::from_micros((-offset * 100) as u64));
            held.release().unwrap();
        } else {
            held.release().unwrap();
            std::thread::sleep(Duration::from_micros((offset * 100) as u64));
            cancel.cancel();
        }
        match w.join().unwrap() {
            Ok(lock) => {
                got += 1;
                lock.release()
                    .unwrap_or_else(|e| panic!("round {round}: release: {e}"));
            }
            Err(Error::Cancelled { .. }) => cancelled += 1,
            Err(e) => panic!("round {round} ({kind:?}): {e}"),
        }
        assert_gone(&cluster, &keys, &format!("round {round} ({kind:?})"));
    }
    eprintln!("{rounds} rounds: {got} got the lock, {cancelled} cancelled");
    assert!(
        got > 0 && cancelled > 0,
        "the race was not exercised both ways"
    );
}

fn rand_below(n: u64) -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() % n
}

#[test]
fn bad_requests_are_invalid_arguments_before_anything_is_sent() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let bad = [
        LockRequest::new("", TTL),
        LockRequest::new("x", Duration::ZERO),
        LockRequest::new("x", Duration::from_secs(20 * 365 * 24 * 3600)),
        LockRequest::new("x", TTL).reentrant(""),
        LockRequest::new("x", TTL).reentrant(&"o".repeat(1025)),
        LockRequest::many(Vec::<String>::new(), TTL),
        LockRequest::many(["a", "a"], TTL),
        LockRequest::many(["a", ""], TTL),
        LockRequest::many(["a", "b"], TTL).fenced(),
        LockRequest::new("x", TTL).auto_extend(AutoExtend::new().fraction(1.5)),
        LockRequest::new("x", TTL).auto_extend(AutoExtend::new().fraction(f64::NAN)),
        LockRequest::new("x", Duration::from_millis(100))
            .auto_extend(AutoExtend::new().fraction(0.99)),
        LockRequest::new("x", TTL).retry_delay(Duration::from_secs(20 * 365 * 24 * 3600)),
    ];
    let before = cluster.commands_processed();
    for (i, req) in bad.iter().enumerate() {
        match rl.acquire(req) {
            Err(Error::InvalidArgument { message }) => assert!(!message.is_empty(), "case {i}"),
            other => panic!("case {i} {req:?}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Only our own INFO calls reached the node.
    assert_eq!(cluster.commands_processed() - before, 1);
}

/// Commands the clients sent to `node` so far (`SET` and `EVALSHA`; what scripts call inside
/// is not counted).
fn sent(node: &RedisNode) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.conn())
        .unwrap();
    stats
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            if name != "set" && name != "evalsha" {
                return None;
            }
            rest.strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[test]
fn a_waiter_with_a_healthy_subscription_does_not_poll() {
    waiter_does_not_poll(3, None, None);
}

/// A node down announces nothing, but the holder's other nodes are a quorum: their
/// announcements wake the waiter, which does not poll.
#[test]
fn a_waiter_does_not_poll_while_a_node_is_down() {
    waiter_does_not_poll(5, None, Some(0));
}

/// A token other than the holder's on a minority of the nodes (a failed attempt not yet undone,
/// a stale key) is no split vote: the holder has a quorum, and the waiter waits for its release
/// as without that key (`kinds::split_vote` reads every node's answer, not the first quorum's).
#[test]
fn a_waiter_does_not_poll_beside_a_minority_key_of_another_token() {
    waiter_does_not_poll(5, Some(4), None);
}

/// One node of five, holding the holder's key like the others, is slow now and then (paused
/// for 300 ms every 1.5 s by `CLIENT PAUSE`, as a long command of another application would
/// hold it): its subscriber's probes come back late, which marks it failing for a while, but
/// it loses no key, and the other four are a quorum of the holder's nodes. The waiter does not
/// poll them.
#[test]
fn a_waiter_does_not_poll_while_one_node_is_slow_now_and_then() {
    let cluster = Cluster::start(5);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    // Longer than the test: the holder's release must find its keys.
    let ttl = Duration::from_secs(60);
    let holder = rl.lock("busy", ttl).unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .holding("busy", holder.token())
        == 5));
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(&LockRequest::new("busy", TTL).wait(Duration::from_secs(60)))
                .map(|l| l.release())
        })
    };
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.release_subscribers("busy") == 1)));
    // Node 4 paused for 300 ms every 1.5 s, 6 times, beside the count.
    let port = cluster.nodes[4].port;
    let pauser = std::thread::spawn(move || {
        let url = format!("redis://127.0.0.1:{port}/");
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        for _ in 0..6 {
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(300)
                .arg("ALL")
                .query(&mut c)
                .unwrap();
            std::thread::sleep(Duration::from_millis(1500));
        }
    });
    // The waiter's first tries may be retried on its backoff (a refusal before a node's answer
    // came counts as contested, see `waiter_does_not_poll`): it must then go quiet on nodes 0
    // to 3 for 3.5 s, two of node 4's pauses, while they go on.
    const QUIET: Duration = Duration::from_millis(3500);
    let sent_0_to_3 = || -> Vec<u64> { cluster.nodes[..4].iter().map(sent).collect() };
    let mut counts = sent_0_to_3();
    let mut changed = Instant::now();
    while changed.elapsed() < QUIET && !pauser.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        let now = sent_0_to_3();
        if now != counts {
            counts = now;
            changed = Instant::now();
        }
    }
    let quiet = changed.elapsed();
    pauser.join().unwrap();
    holder.release().unwrap();
    assert!(matches!(waiter.join().unwrap(), Ok(Ok(()))));
    assert!(
        quiet >= QUIET,
        "the waiter was never quiet on nodes 0 to 3 for {QUIET:?} while node 4 was only slow"
    );
}

/// A waiter behind a holder on `n` nodes (with `stray`, that node's key overwritten with another
/// token; with `down`, that node killed before the waiter comes) goes quiet until the holder's keys would expire, and gets the lock at the release.
/// Quiet: no command to any node for 1.5 s, which a polling waiter cannot do: its fallback polls
/// come at most 1 s apart (`WAIT_BACKOFF_CAP`). Before that it may try again: an attempt refused
/// before a node's answer came (a slow node, a starved machine) counts as contested and is
/// retried on the backoff, by design (`client/acquisition.rs`); a count of commands in a fixed
/// window failed there ([4, 4, 5, 6, 4] on an idle two-core machine running three test binaries).
fn waiter_does_not_poll(n: usize, stray: Option<usize>, down: Option<usize>) {
    const QUIET: Duration = Duration::from_millis(1500);
    let mut cluster = Cluster::start(n);
    // Fallback polls would start 10 to 20 ms apart. A new subscription is waited on for up to
    // the node timeout: one that a starved machine's round trips stay under.
    let rl = cluster
        .builder()
        .retry_delay(Duration::from_millis(20))
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let holder = rl.lock("quiet", TTL).unwrap();
    // The call returned on a quorum: let the last node take its SET before counting.
    assert!(eventually(Duration::from_secs(5), || cluster
        .holding("quiet", holder.token())
        == n));
    if let Some(i) = stray {
        cluster.nodes[i].set("quiet", "another-token", 30_000);
    }
    if let Some(i) = down {
        cluster.nodes[i].kill();
    }
    let sent = |cluster: &Cluster| -> Vec<u64> {
        let up = cluster.nodes.iter().enumerate();
        up.map(|(i, node)| if down == Some(i) { 0 } else { sent(node) })
            .collect()
    };
    let before = sent(&cluster);
    let started = Instant::now();
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(&LockRequest::new("quiet", TTL).wait(Duration::from_secs(30)))
                .map(|l| l.release())
        })
    };
    // Well before the holder's keys expire (TTL), when the waiter wakes to look.
    let limit = TTL * 7 / 10;
    let mut counts = before.clone();
    let mut changed = Instant::now();
    while changed.elapsed() < QUIET && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
        let now = sent(&cluster);
        if now != counts {
            counts = now;
            changed = Instant::now();
        }
    }
    let during: Vec<u64> = counts.iter().zip(&before).map(|(c, b)| c - b).collect();
    assert!(
        changed.elapsed() >= QUIET,
        "the waiter was never quiet for {QUIET:?} in {limit:?}: it polls (it sent {during:?} \
         commands per node)"
    );
    if let Some(i) = stray {
        cluster.nodes[i].del("quiet");
    }
    holder.release().unwrap();
    assert!(matches!(waiter.join().unwrap(), Ok(Ok(()))));
}
