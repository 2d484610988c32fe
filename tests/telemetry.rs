//! Counters, histograms and events against real redis-server nodes: they match the operations
//! made, events arrive with their fields off the caller's thread, and a listener's panic stops
//! no other listener (`tests/leaks_extender.rs` counts the dispatcher's thread).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redquorum::{AutoExtend, Cancel, Error, Event, EventKind, LockRequest};
use support::{Cluster, eventually};

const TTL: Duration = Duration::from_secs(5);

#[test]
fn counters_match_the_operations_made() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let before = rl.stats();
    assert_eq!(before.acquisitions("acquired"), 0);
    assert_eq!(before.locks_held, 0);

    let mut held = Vec::new();
    for i in 0..5 {
        held.push(rl.lock(&format!("count:{i}"), TTL).unwrap());
    }
    let fenced = rl.lock_fenced("count:fenced", TTL).unwrap();
    let s = rl.stats();
    assert_eq!(s.acquisitions("acquired"), 6);
    assert_eq!(s.locks_held, 6);
    let by_kind = |kind: &str| {
        s.acquisitions
            .iter()
            .filter(|a| a.kind == kind && a.outcome == "acquired")
            .map(|a| a.duration.count)
            .sum::<u64>()
    };
    assert_eq!((by_kind("plain"), by_kind("fenced")), (5, 1));

    // Two refusals (a busy resource, one attempt each) and a cancelled wait.
    for _ in 0..2 {
        let r = rl.acquire(&LockRequest::new("count:0", TTL).once());
        assert!(matches!(r, Err(Error::NotAcquired { .. })));
    }
    let cancel = Cancel::new();
    cancel.cancel();
    let r = rl.acquire(
        &LockRequest::new("count:1", TTL)
            .wait(Duration::from_secs(5))
            .cancel(&cancel),
    );
    assert!(matches!(r, Err(Error::Cancelled { .. })));

    for lock in held.drain(..) {
        lock.release().unwrap();
    }
    fenced.extend(TTL).unwrap();
    drop(fenced); // a drop releases too
    let s = rl.stats();
    assert_eq!(s.acquisitions("refused"), 2);
    assert_eq!(s.acquisitions("cancelled"), 1);
    assert_eq!(s.locks_held, 0);
    assert_eq!(s.hold.count, 6);
    assert_eq!(s.extensions, 1);
    assert_eq!(s.wait.count, 1, "one acquisition waited");
    assert_eq!(s.waiters, 0);
    assert_eq!(s.nodes.len(), 3);
    assert_eq!(s.events_dropped, 0);
    let acquired: u64 = s
        .acquisitions
        .iter()
        .filter(|a| a.outcome == "acquired")
        .map(|a| a.duration.buckets.iter().sum::<u64>())
        .sum();
    assert_eq!(acquired, 6, "every observation is in one bucket");

    let text = s.prometheus();
    assert!(text.contains("redlock_acquisitions_total{outcome=\"acquired\",kind=\"plain\"} 5"));
    assert!(text.contains("redlock_locks_held 0"));
    assert!(text.contains(
        "redlock_acquire_duration_seconds_bucket{outcome=\"refused\",kind=\"plain\",le=\"+Inf\"} 2"
    ));
    assert!(
        !text.contains("count:0"),
        "resource names never become labels"
    );
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn each_node_counts_its_command_latency_and_errors() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    for i in 0..10 {
        rl.lock(&format!("per-node:{i}"), TTL)
            .unwrap()
            .release()
            .unwrap();
    }
    // Every node answered each acquire and each release; a quorum return may leave the last
    // answer of one node a moment behind.
    assert!(
        eventually(Duration::from_secs(5), || rl
            .stats()
            .nodes
            .iter()
            .all(|n| n.command_duration.count == 20)),
        "{:?}",
        rl.stats()
            .nodes
            .iter()
            .map(|n| n.command_duration.count)
            .collect::<Vec<_>>()
    );
    let s = rl.stats();
    for n in &s.nodes {
        assert_eq!(n.errors, 0, "{}", n.address);
        assert_eq!(n.command_duration.buckets.iter().sum::<u64>(), 20);
        assert!(!n.command_duration.sum.is_zero());
    }

    // A hung node fails what it is sent (timeouts, then not sent while it is down); the others
    // answer everything.
    cluster.nodes[2].hang();
    for i in 0..3 {
        let _ = rl.acquire(&LockRequest::new(format!("per-node:hang:{i}"), TTL).once());
    }
    // Each acquire returned with the quorum of the other two; the hung node's failures are
    // counted when its worker times out.
    assert!(
        eventually(Duration::from_secs(5), || rl.stats().nodes[2].errors >= 3),
        "{}",
        rl.stats().nodes[2].errors
    );
    let s = rl.stats();
    cluster.nodes[2].resume();
    assert_eq!((s.nodes[0].errors, s.nodes[1].errors), (0, 0));
    assert!(s.nodes[0].command_duration.count >= 23);

    let text = s.prometheus();
    let hung = cluster.nodes[2]
        .url()
        .trim_start_matches("redis://")
        .to_owned();
    assert!(text.contains(&format!(
        "redlock_node_errors_total{{node=\"{hung}\"}} {}",
        s.nodes[2].errors
    )));
    assert!(text.contains(&format!(
        "db_client_operation_duration_seconds_count{{node=\"{hung}\"}} {}",
        s.nodes[2].command_duration.count
    )));
}

#[test]
fn events_arrive_off_the_callers_thread_with_their_fields() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<(Event, std::thread::ThreadId)>>> = Arc::default();
    let listener = {
        let seen = Arc::clone(&seen);
        rl.on_event(move |e| {
            seen.lock()
                .unwrap()
                .push((e.clone(), std::thread::current().id()))
        })
        .unwrap()
    };
    let me = std::thread::current().id();
    let lock = rl.lock("ev", TTL).unwrap();
    lock.release().unwrap();
    let _held = rl.lock("ev", TTL).unwrap();
    let cancel = Cancel::new();
    cancel.cancel();
    let _ = rl.acquire(&LockRequest::new("ev", TTL).wait(TTL).cancel(&cancel));
    // A lost lock: its keys deleted by hand, the extender finds it refused.
    let lost = rl
        .acquire(
            &LockRequest::new("ev:lost", Duration::from_secs(4)).auto_extend(AutoExtend::new()),
        )
        .unwrap();
    for node in &cluster.nodes {
        node.del("ev:lost");
    }
    assert!(eventually(Duration::from_secs(5), || lost.is_lost()));
    // A hung node: its worker's connection times out and the node is reported down.
    cluster.nodes[2].hang();
    let _ = rl.acquire(&LockRequest::new("ev:hang", TTL).once());
    let down = eventually(Duration::from_secs(10), || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|(e, _)| e.kind == EventKind::NodeDisconnected)
    });
    cluster.nodes[2].resume();

    let kinds_of = |kind: EventKind| -> Vec<Event> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(e, _)| e.kind == kind)
            .map(|(e, _)| e.clone())
            .collect()
    };
    assert!(eventually(Duration::from_secs(5), || {
        kinds_of(EventKind::Lost).len() == 1
    }));
    let acquired = kinds_of(EventKind::Acquired);
    assert!(acquired.len() >= 3);
    assert_eq!(acquired[0].resource.as_deref(), Some("ev"));
    assert_eq!(acquired[0].lock_kind, Some("plain"));
    assert!(acquired[0].duration.is_some());
    assert_eq!(
        kinds_of(EventKind::Released)[0].resource.as_deref(),
        Some("ev")
    );
    assert_eq!(kinds_of(EventKind::Cancelled).len(), 1);
    let lost_event = &kinds_of(EventKind::Lost)[0];
    assert_eq!(lost_event.resource.as_deref(), Some("ev:lost"));
    assert_eq!(lost_event.reason.as_deref(), Some("refused"));
    assert!(down, "the hung node was reported disconnected");
    let node = &kinds_of(EventKind::NodeDisconnected)[0];
    assert_eq!(
        node.node.as_deref(),
        Some(cluster.nodes[2].url().trim_start_matches("redis://"))
    );
    assert!(
        seen.lock().unwrap().iter().all(|(_, t)| *t != me),
        "never delivered on the caller's thread"
    );
    drop(listener);
}

#[test]
fn a_listener_that_panics_does_not_stop_the_others() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let count = Arc::new(Mutex::new(0));
    let _p = rl.on_event(|_| panic!("a listener's bug")).unwrap();
    let _c = {
        let count = Arc::clone(&count);
        rl.on_event(move |_| *count.lock().unwrap() += 1).unwrap()
    };
    rl.lock("after-panic", TTL).unwrap().release().unwrap();
    assert!(eventually(Duration::from_secs(5), || *count
        .lock()
        .unwrap()
        >= 2));
}

#[test]
fn a_listener_removed_right_after_a_release_has_heard_it() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    for round in 0..20 {
        let seen: Arc<Mutex<Vec<EventKind>>> = Arc::default();
        let listener = {
            let seen = Arc::clone(&seen);
            rl.on_event(move |e| seen.lock().unwrap().push(e.kind))
                .unwrap()
        };
        rl.lock(&format!("flush:{round}"), TTL)
            .unwrap()
            .release()
            .unwrap();
        // Removing a listener delivers what was queued before it: a client closed right after
        // its last release still tells of it.
        drop(listener);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [EventKind::Acquired, EventKind::Released],
            "round {round}"
        );
    }
}

/// Each node's votes in acquire attempts, one per attempt and node: what a down or hung node
/// costs shows in them (`unavailable`: not waited for; `timed_out`: waited the node timeout).
#[test]
fn each_node_counts_its_votes_in_acquire_attempts() {
    let mut cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let total =
        |v: &redquorum::Votes| v.yes + v.no + v.unavailable + v.timed_out + v.failed + v.unanswered;
    let held = rl.acquire(&LockRequest::new("votes", TTL).once()).unwrap();
    let other = cluster.client();
    assert!(
        other
            .acquire(&LockRequest::new("votes", TTL).once())
            .is_err()
    );
    let (mine, theirs) = (rl.stats(), other.stats());
    for (m, t) in mine.nodes.iter().zip(&theirs.nodes) {
        // One attempt each; a quorum decides without the last node's answer at times.
        assert_eq!(total(&m.votes), 1, "{:?}", m.votes);
        assert_eq!(total(&t.votes), 1, "{:?}", t.votes);
        assert_eq!((m.votes.no, t.votes.yes), (0, 0));
    }
    assert!(mine.nodes.iter().map(|n| n.votes.yes).sum::<u64>() >= 2);
    assert!(theirs.nodes.iter().map(|n| n.votes.no).sum::<u64>() >= 2);
    held.release().unwrap();

    // Node 2 down: no attempt waits for it. Then node 1 hung as well: the attempt
    // waits the node timeout for it, and fails for want of a quorum.
    cluster.nodes[2].kill();
    for i in 0..3 {
        rl.acquire(&LockRequest::new(format!("votes:{i}"), TTL).once())
            .unwrap()
            .release()
            .unwrap();
    }
    cluster.nodes[1].hang();
    assert!(
        rl.acquire(&LockRequest::new("votes:hung", TTL).once())
            .is_err()
    );
    let s = rl.stats();
    cluster.nodes[1].resume();
    let down = &s.nodes[2].votes;
    assert_eq!(total(down), 5, "{down:?}");
    // Since it went down, not waited for: the others' answers decided first, or it failed at
    // once. (Its one yes at most is from the first attempt.)
    assert!(down.yes <= 1 && down.no + down.timed_out == 0, "{down:?}");
    assert!(down.unavailable >= 1, "{down:?}");
    assert_eq!(s.nodes[1].votes.timed_out, 1, "{:?}", s.nodes[1].votes);
    let up = &s.nodes[0].votes;
    assert_eq!((up.yes + up.unanswered, total(up)), (5, 5), "{up:?}");

    let text = s.prometheus();
    let first = cluster.nodes[0]
        .url()
        .trim_start_matches("redis://")
        .to_owned();
    assert!(
        text.contains(&format!(
            "redlock_node_votes_total{{node=\"{first}\",vote=\"yes\"}} {}",
            up.yes
        )),
        "{text}"
    );
}
