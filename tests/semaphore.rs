//! The counting semaphore on real nodes: at most L valid holders at once and L under load, one
//! slot per holder, the stored L checked by every caller, and waiting, auto-extension and
//! cancellation like every kind.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redquorum::{AutoExtend, Cancel, Error, LockRequest, MAX_PERMITS};
use support::{Cluster, assert_no_worker_panicked, eventually, watch_workers};

const TTL: Duration = Duration::from_secs(10);

fn slot(resource: &str, i: u32) -> String {
    format!("redlock:sem:{{{resource}}}:{i}")
}

#[derive(Default)]
struct Inside {
    permits: HashSet<u32>,
    max: usize,
    rounds: usize,
}

#[test]
fn at_most_l_holders_at_once_and_l_under_load() {
    watch_workers();
    let cluster = Cluster::start(3);
    const L: u32 = 3;
    let inside = Arc::new(Mutex::new(Inside::default()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            // Each thread its own client, as separate processes would be.
            let rl = cluster.client();
            let inside = Arc::clone(&inside);
            std::thread::spawn(move || {
                let request = LockRequest::new("sem", TTL)
                    .semaphore(L)
                    .wait(Duration::from_secs(60));
                for r in 0..12 {
                    let lock = rl.acquire(&request).expect("a permit");
                    let permit = lock.permit().expect("a semaphore lock has a permit");
                    assert!(permit < L);
                    {
                        let mut s = inside.lock().unwrap();
                        assert!(
                            s.permits.insert(permit),
                            "thread {t} round {r}: permit {permit} held twice"
                        );
                        assert!(s.permits.len() <= L as usize, "{:?}", s.permits);
                        s.max = s.max.max(s.permits.len());
                        s.rounds += 1;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    assert!(lock.is_held());
                    inside.lock().unwrap().permits.remove(&permit);
                    lock.release().expect("release");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no assertion failed in a thread");
    }
    let s = inside.lock().unwrap();
    assert_eq!(s.rounds, 8 * 12);
    assert_eq!(s.max, L as usize, "never reached L holders under load");
    assert_no_worker_panicked();
}

#[test]
fn one_attempt_finds_the_free_slot_and_l_plus_one_is_refused() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let once = LockRequest::new("once", TTL).semaphore(4).once();
    let held: Vec<_> = (0..4)
        .map(|_| rl.acquire(&once).expect("a free permit"))
        .collect();
    let permits: HashSet<u32> = held.iter().map(|l| l.permit().unwrap()).collect();
    assert_eq!(permits, HashSet::from([0, 1, 2, 3]));
    for l in &held {
        let key = slot("once", l.permit().unwrap());
        assert!(cluster.holding(&key, l.token()) >= 2);
    }
    let err = rl.acquire(&once).unwrap_err();
    assert!(matches!(err, Error::NotAcquired { .. }), "{err:?}");
    // A semaphore's slots are not the resource's own key: a plain lock of it is independent.
    rl.try_lock("once", TTL).unwrap().release().unwrap();
    let mut held = held;
    let freed = held.pop().unwrap();
    let freed_permit = freed.permit().unwrap();
    freed.release().unwrap();
    let again = rl.acquire(&once).expect("the freed permit");
    assert_eq!(again.permit(), Some(freed_permit));
}

#[test]
fn callers_with_another_number_of_permits_get_a_clear_error() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let short = Duration::from_millis(600);
    let two = rl
        .acquire(&LockRequest::new("mixed", short).semaphore(2))
        .unwrap();
    let started = Instant::now();
    for request in [
        LockRequest::new("mixed", TTL).semaphore(3).once(),
        LockRequest::new("mixed", TTL)
            .semaphore(3)
            .wait(Duration::from_secs(30)),
        LockRequest::new("mixed", TTL).semaphore(1),
    ] {
        match rl.acquire(&request) {
            Err(Error::InvalidArgument { message }) => {
                assert!(message.contains("has 2 permits"), "{message}");
                assert!(message.contains("mixed"), "{message}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10), "it waited");
    // No slot of the 3-permit callers is left behind. (One can be set for a moment on a node
    // that missed the holder's SET, dropped at its call's deadline: the attempt's undo goes
    // out without waiting for its answer.)
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.pttl(&slot("mixed", 2)) == -2)));
    // Same L: fine.
    rl.acquire(&LockRequest::new("mixed", short).semaphore(2).once())
        .unwrap()
        .release()
        .unwrap();
    two.release().unwrap();
    // Once every permit is gone and the TTLs have passed, L can change.
    std::thread::sleep(Duration::from_millis(1200));
    rl.acquire(&LockRequest::new("mixed", TTL).semaphore(3).once())
        .expect("a new L after the old holders' TTL")
        .release()
        .unwrap();
}

#[test]
fn bad_permit_counts_are_invalid() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    for permits in [0, MAX_PERMITS + 1, u32::MAX] {
        let err = rl
            .acquire(&LockRequest::new("bad", TTL).semaphore(permits))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }
    let err = rl
        .acquire(&LockRequest::many(["a", "b"], TTL).semaphore(2))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = rl
        .acquire(&LockRequest::new("", TTL).semaphore(2))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn a_released_permit_wakes_a_waiter_and_extension_keeps_the_stored_l_alive() {
    watch_workers();
    let cluster = Cluster::start(3);
    // Fallback waits of 10 to 20 s: only a notification lets the waiter in sooner.
    let rl = cluster
        .builder()
        .retry_delay(Duration::from_secs(20))
        .build()
        .unwrap();
    let request = LockRequest::new("wake", TTL).semaphore(2);
    let first = rl.acquire(&request).unwrap();
    let second = rl.acquire(&request).unwrap();
    first.extend(Duration::from_secs(60)).unwrap();
    // The stored L lives at least as long as the longest slot.
    let limit_ok = cluster
        .nodes
        .iter()
        .filter(|n| n.pttl("redlock:sem:{wake}") > 30_000)
        .count();
    assert!(limit_ok >= 2);

    let waiter = {
        let rl = rl.clone();
        let request = request.clone().wait(Duration::from_secs(60));
        std::thread::spawn(move || {
            let lock = rl.acquire(&request).expect("a permit after the wait");
            (Instant::now(), lock.permit())
        })
    };
    let second_permit = second.permit();
    std::thread::sleep(Duration::from_millis(1000));
    let released = Instant::now();
    second.release().unwrap();
    let (at, permit) = waiter.join().unwrap();
    assert!(
        at.duration_since(released) < Duration::from_secs(5),
        "the waiter was not woken: {:?}",
        at.duration_since(released)
    );
    assert_eq!(permit, second_permit);
    first.release().unwrap();
    assert_no_worker_panicked();
}

#[test]
fn permits_auto_extend_and_a_waiting_acquisition_can_be_cancelled() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Three node timeouts (support::NODE_TIMEOUT), so one slow extension can be retried.
    let ttl = Duration::from_secs(3);
    let request = LockRequest::new("ext", ttl)
        .semaphore(2)
        .auto_extend(AutoExtend::new());
    let a = rl.acquire(&request).unwrap();
    let b = rl.acquire(&request).unwrap();
    std::thread::sleep(Duration::from_millis(7000));
    assert!(a.is_held() && b.is_held(), "auto-extended past their TTL");
    assert!(matches!(
        rl.acquire(&request.clone().once()),
        Err(Error::NotAcquired { .. })
    ));

    let cancel = Cancel::new();
    let waiter = {
        let rl = rl.clone();
        let request = LockRequest::new("ext", TTL)
            .semaphore(2)
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
    // The cancelled waiter holds nothing: the two holders still own both slots.
    let (ta, tb) = (a.token().to_owned(), b.token().to_owned());
    let (pa, pb) = (a.permit().unwrap(), b.permit().unwrap());
    assert!(cluster.holding(&slot("ext", pa), &ta) >= 2);
    assert!(cluster.holding(&slot("ext", pb), &tb) >= 2);
    a.release().unwrap();
    b.release().unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(
            |n| n.pttl(&slot("ext", 0)) == -2 && n.pttl(&slot("ext", 1)) == -2
        )));
    assert_no_worker_panicked();
}
