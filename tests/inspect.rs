//! The operator's tools of the library: `Redlock::inspect` and `Redlock::force_release`.

mod support;

use std::time::{Duration, Instant};

use redquorum::{KeyState, LockRequest, NodeProblem, Redlock, Released};
use support::Shorthands;
use support::{Cluster, NODE_TIMEOUT};

const TTL: Duration = Duration::from_secs(20);

fn quorum(c: &Cluster) -> usize {
    c.nodes.len() / 2 + 1
}

#[test]
fn inspect_shows_a_plain_fenced_and_reentrant_lock_node_by_node() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();

    let free = rl.inspect("nothing").unwrap();
    assert!(!free.held);
    assert_eq!(free.holder, None);
    assert_eq!(free.fence, None);
    assert_eq!(free.quorum, 2);
    assert_eq!(free.nodes.len(), 3);
    for n in &free.nodes {
        let s = n.state.as_ref().unwrap();
        assert_eq!(s.key, KeyState::Absent);
        assert_eq!((s.ttl, s.persistent, s.fence), (None, false, None));
    }
    let names: Vec<String> = free.nodes.iter().map(|n| n.node.clone()).collect();
    let expected: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    assert_eq!(names, expected);

    let lock = rl
        .acquire(&LockRequest::new("fenced", TTL).fenced())
        .unwrap();
    let seen = rl.inspect("fenced").unwrap();
    assert!(seen.held);
    assert_eq!(seen.holder.as_deref(), Some(lock.token()));
    // The highest counter: the token, or a node's own later reading (its acquire came after
    // the decision).
    assert!(
        seen.fence >= lock.fence(),
        "{:?} {:?}",
        seen.fence,
        lock.fence()
    );
    let with_token = seen
        .nodes
        .iter()
        .filter_map(|n| n.state.as_ref().ok())
        .filter(|s| {
            s.key == KeyState::Token(lock.token().to_owned())
                && s.ttl.is_some_and(|t| t > Duration::ZERO && t <= TTL)
        })
        .count();
    assert!(with_token >= quorum(&cluster));
    lock.release().unwrap();
    let after = rl.inspect("fenced").unwrap();
    assert!(!after.held);
    // The counter outlives the lock.
    assert!(after.fence.is_some());

    let outer = rl.reentrant_lock("re", "owner-a", TTL).unwrap();
    let inner = rl.reentrant_lock("re", "owner-a", TTL).unwrap();
    let seen = rl.inspect("re").unwrap();
    assert!(seen.held);
    assert_eq!(seen.holder.as_deref(), Some("owner-a"));
    let counted = seen
        .nodes
        .iter()
        .filter_map(|n| n.state.as_ref().ok())
        .filter(|s| s.key == KeyState::Owners(vec![("owner-a".to_owned(), 2)]))
        .count();
    assert!(counted >= quorum(&cluster), "{seen:?}");
    drop((inner, outer));
}

#[test]
fn inspect_reports_other_types_persistent_keys_and_split_tokens() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    for n in &cluster.nodes {
        let _: () = redis::cmd("RPUSH")
            .arg("listy")
            .arg("x")
            .query(&mut n.conn())
            .unwrap();
    }
    let seen = rl.inspect("listy").unwrap();
    assert!(seen.held, "a key of any type blocks the resource");
    assert_eq!(seen.holder, None);
    for n in &seen.nodes {
        let s = n.state.as_ref().unwrap();
        assert_eq!(s.key, KeyState::Other("list".into()));
        assert!(s.persistent && s.ttl.is_none());
    }
    // Three different tokens: live keys on every node, but no holder on a quorum.
    for (i, n) in cluster.nodes.iter().enumerate() {
        n.set("split", &format!("t{i}"), 10_000);
    }
    let seen = rl.inspect("split").unwrap();
    assert!(seen.held);
    assert_eq!(seen.holder, None);
}

#[test]
fn a_down_node_or_a_noperm_is_one_row_not_a_failed_call() {
    let mut cluster = Cluster::start(3);
    // Node 1's user may run the scripts but not PTTL.
    let mut conn = cluster.nodes[1].conn();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "viewer", "on", ">pw", "~*", "&*", "+@all", "-pttl",
        ])
        .query(&mut conn)
        .unwrap();
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == 1 {
                format!("redis://viewer:pw@127.0.0.1:{}", n.port)
            } else {
                n.url()
            }
        })
        .collect();
    cluster.nodes[2].kill();
    let rl = Redlock::builder()
        .nodes(&urls)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    let seen = rl.inspect("r").unwrap();
    assert!(seen.nodes[0].state.is_ok());
    // Each server words an ACL denial inside a script its own way (Redis 7.0: an ERR; later
    // Redis: NOPERM; Valkey: "ACL failure in script"): it reads as a denial on all of them.
    match &seen.nodes[1].state {
        Err(NodeProblem::Denied(_)) => {}
        other => panic!("expected the ACL denial, got {other:?}"),
    }
    assert!(matches!(
        seen.nodes[2].state,
        Err(NodeProblem::Unavailable(_) | NodeProblem::TimedOut)
    ));
    assert!(!seen.held);
    let forced = rl.force_release("r", None).unwrap();
    // The forced release needs no PTTL: two nodes of three confirm, the down one does not.
    assert_eq!(forced.nodes[0].outcome, Ok(Released::Absent));
    assert_eq!(forced.nodes[1].outcome, Ok(Released::Absent));
    assert!(forced.nodes[2].outcome.is_err());
    assert_eq!(forced.confirmed(), 2);
    assert!(forced.on_quorum());
}

#[test]
fn force_release_with_a_token_spares_a_newer_holder_and_keeps_the_fence() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let lock = rl
        .acquire(&LockRequest::new("stuck", TTL).fenced())
        .unwrap();
    let fence = lock.fence().unwrap();

    let spared = rl.force_release("stuck", Some("someone-else")).unwrap();
    assert!(!spared.on_quorum());
    assert!(
        spared
            .nodes
            .iter()
            .filter(|n| n.outcome == Ok(Released::HeldByOther))
            .count()
            >= quorum(&cluster)
    );
    assert!(cluster.holding("stuck", lock.token()) >= quorum(&cluster));

    let done = rl.force_release("stuck", Some(lock.token())).unwrap();
    assert!(done.on_quorum());
    assert_eq!(done.confirmed(), 3);
    assert_eq!(cluster.holding("stuck", lock.token()), 0);
    // The holder's own release now finds it gone.
    assert!(matches!(lock.release(), Err(redquorum::Error::Lost { .. })));
    // Fencing tokens stay monotonic across a forced release.
    let next = rl
        .acquire(&LockRequest::new("stuck", TTL).fenced())
        .unwrap();
    assert!(next.fence().unwrap() > fence);
    next.release().unwrap();

    assert!(matches!(
        rl.force_release("", None),
        Err(redquorum::Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        rl.force_release("x", Some("")),
        Err(redquorum::Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        rl.inspect(""),
        Err(redquorum::Error::InvalidArgument { .. })
    ));
}

#[test]
fn force_release_wakes_a_waiter_at_once() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    // Held for a minute by a holder that will never release it.
    let stuck = rl.lock("wake", Duration::from_secs(60)).unwrap();
    std::mem::forget(stuck);
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            let lock = rl
                .acquire(&LockRequest::new("wake", TTL).wait(Duration::from_secs(30)))
                .unwrap();
            let got = Instant::now();
            lock.release().unwrap();
            got
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let forced_at = Instant::now();
    assert!(rl.force_release("wake", None).unwrap().on_quorum());
    let got = waiter.join().unwrap();
    // Woken by the announcement, not by the waiter's fallback backoff (1 s at most) or the
    // 60 s TTL.
    assert!(
        got.duration_since(forced_at) < Duration::from_millis(900),
        "{:?}",
        got.duration_since(forced_at)
    );
}
