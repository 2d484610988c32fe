//! Restart-aware quorum: the Redlock page's scenario of a node that restarts without persistence
//! and forgets a lock, with and without `restart_grace`.

mod support;

use std::time::{Duration, Instant};

use redquorum::{Error, NodeProblem, Redlock};
use support::Shorthands;
use support::{Cluster, RedisNode, eventually};

/// A's lock must stay valid through two restarts and the attempts that follow them, also on a
/// loaded machine; the grace covers it.
const TTL: Duration = Duration::from_secs(5);
const GRACE: Duration = TTL;

fn client(urls: &[String], grace: Option<Duration>) -> Redlock {
    // Single attempts that must succeed: patient (the support client's node timeout).
    let mut b = support::builder(urls).retry_count(0);
    if let Some(grace) = grace {
        b = b.restart_grace(grace);
    }
    b.build().expect("client")
}

/// Three nodes; A holds the lock on a bare majority (C is down during its acquire), then B is
/// killed and restarted empty, and C comes back (empty too). Without a grace period a second client gets the same lock while
/// A's is still valid: two holders. With `restart_grace` ≥ TTL it does not, until the grace is
/// over, by which time A's lock has expired.
#[test]
fn restarted_node_is_kept_out_of_acquire_quorums_during_its_grace() {
    let mut cluster = Cluster::start(3);
    let urls = cluster.urls();
    let first = client(&urls, None);
    // The guarded client exists before the restart, like a long-running service would.
    let guarded = client(&urls, Some(GRACE));
    let unguarded = client(&urls, None);
    // Every node is young now; let them outgrow the grace (uptime is in whole seconds, hence
    // one more), so that only the restarted ones are kept out.
    std::thread::sleep(GRACE + Duration::from_millis(1100));
    assert!(
        guarded
            .node_status()
            .iter()
            .all(|s| s.grace_remaining.is_none())
    );

    cluster.nodes[2].kill();
    let held = first
        .try_lock("restart:res", TTL)
        .expect("A acquires on A+B");

    cluster.nodes[1].restart();
    cluster.nodes[2].restart();
    let restarted_at = Instant::now();
    assert_eq!(
        cluster.nodes[1].get("restart:res"),
        None,
        "B forgot the lock"
    );
    let b_address = cluster.nodes[1]
        .url()
        .trim_start_matches("redis://")
        .to_owned();

    // With the grace: B's yes does not count, A refuses, C alone is no quorum. (The first calls
    // may find the connections to the old B and C broken; none may succeed.)
    let mut b_problem = None;
    assert!(
        eventually(Duration::from_secs(5), || {
            match guarded.try_lock("restart:res", TTL) {
                Err(Error::NoQuorum { report, .. }) => {
                    b_problem = report
                        .failures
                        .iter()
                        .find(|f| f.node == b_address)
                        .map(|f| f.problem.clone());
                    matches!(b_problem, Some(NodeProblem::InGrace { .. }))
                }
                other => panic!("a second holder got in during the grace: {other:?}"),
            }
        }),
        "B should be in grace, last seen {b_problem:?}"
    );
    if let Some(NodeProblem::InGrace { remaining }) = b_problem {
        assert!(remaining <= GRACE && !remaining.is_zero(), "{remaining:?}");
    }
    let err = guarded
        .try_lock("restart:res", TTL)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&b_address) && err.contains("restart_grace"),
        "{err}"
    );
    let status = &guarded.node_status()[1];
    assert!(status.grace_remaining.is_some(), "{status:?}");
    assert!(status.uptime.is_some_and(|u| u < GRACE), "{status:?}");
    assert_eq!(guarded.node_status()[0].grace_remaining, None);
    assert!(held.validity() > Duration::ZERO, "A's lock is still valid");

    // Without it: the unsafety the Redlock page warns about.
    // (Its first call may also find broken connections to the old B and C.)
    let mut second = None;
    assert!(
        eventually(Duration::from_secs(3), || {
            second = unguarded.try_lock("restart:res", TTL).ok();
            second.is_some()
        }),
        "without restart_grace, B and C should hand out the lock again"
    );
    let second = second.unwrap();
    assert!(
        held.validity() > Duration::ZERO,
        "two holders at once: A's lock is valid while the second one is held"
    );
    second.release().expect("release the second holder");

    // The worker of the first client saw B's new run_id when it reconnected.
    assert!(
        eventually(Duration::from_secs(5), || {
            let _ = first.try_lock("restart:probe", Duration::from_millis(500));
            first.node_status()[1].restarts == 1
        }),
        "restart not detected: {:?}",
        first.node_status()[1]
    );
    assert_eq!(first.node_status()[0].restarts, 0);
    drop(held); // best-effort release; A's key also expires with the TTL

    // Once the grace is over, B counts again and the guarded client acquires.
    let wait = (restarted_at + GRACE).saturating_duration_since(Instant::now());
    std::thread::sleep(wait);
    assert!(
        eventually(Duration::from_secs(5), || guarded
            .try_lock("restart:res", TTL)
            .map(|l| l.release())
            .is_ok()),
        "still refused after the grace: {:?}",
        guarded.node_status()
    );
    // The worker saw the restart a little after `restarted_at` (and A and C alone are a
    // quorum), so its grace may still have a few ms to run: it ends.
    assert!(
        eventually(Duration::from_secs(2), || guarded.node_status()[1]
            .grace_remaining
            .is_none()),
        "the grace does not end: {:?}",
        guarded.node_status()[1]
    );
}

/// The grace needs `INFO`: without it the node cannot count, and the error says why. Without a
/// grace, a server that refuses `INFO` is still usable.
#[test]
fn grace_without_info_is_a_clear_error_and_info_is_optional_otherwise() {
    let node = RedisNode::start_with(&["--rename-command", "INFO", ""]);
    let urls = [node.url()];

    let plain = client(&urls, None);
    plain
        .try_lock("noinfo:res", Duration::from_secs(2))
        .expect("INFO is not needed without restart_grace")
        .release()
        .unwrap();
    assert_eq!(plain.node_status()[0].run_id, None);

    let guarded = client(&urls, Some(Duration::from_secs(1)));
    let err = guarded
        .try_lock("noinfo:res", Duration::from_secs(2))
        .unwrap_err();
    assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("restart_grace") && text.contains("INFO"),
        "{text}"
    );
    assert_eq!(node.get("noinfo:res"), None, "nothing left locked");
}

/// A node that has been up longer than the grace counts at once; zero turns the grace off.
#[test]
fn grace_only_applies_to_young_processes() {
    let cluster = Cluster::start(1);
    let status = client(&cluster.urls(), None).node_status();
    assert_eq!(status[0].run_id.as_ref().map(String::len), Some(40));
    assert_eq!(status[0].grace_remaining, None);

    let off = client(&cluster.urls(), Some(Duration::ZERO));
    off.try_lock("young:res", Duration::from_secs(2))
        .expect("a zero grace is off")
        .release()
        .unwrap();

    // uptime_in_seconds >= 2: the process is surely older than 1 s (a reported 1 s may be 0.05).
    std::thread::sleep(Duration::from_millis(2100));
    let short = client(&cluster.urls(), Some(Duration::from_secs(1)));
    short
        .try_lock("young:res", Duration::from_secs(2))
        .expect("a node older than the grace counts")
        .release()
        .unwrap();
}

/// Every kind of acquire respects the grace: fenced, reentrant and multi-resource locks too, and
/// none leaves a key behind that blocks a client without the grace.
#[test]
fn every_kind_of_acquire_respects_the_grace() {
    let cluster = Cluster::start(3);
    let urls = cluster.urls();
    let guarded = client(&urls, Some(Duration::from_secs(3600)));
    let ttl = Duration::from_secs(5);
    let owner = Redlock::new_owner().unwrap();
    let attempts = [
        ("plain", guarded.try_lock("kinds:a", ttl)),
        ("fenced", guarded.try_lock_fenced("kinds:a", ttl)),
        (
            "reentrant",
            guarded.try_reentrant_lock("kinds:a", &owner, ttl),
        ),
        ("many", guarded.try_lock_many(["kinds:a", "kinds:b"], ttl)),
    ];
    for (kind, result) in attempts {
        match result {
            // A node may also refuse: an earlier attempt's key can still be on its way out.
            Err(Error::NoQuorum { report, .. }) => assert!(
                report.succeeded == 0
                    && report
                        .failures
                        .iter()
                        .any(|f| matches!(f.problem, NodeProblem::InGrace { .. })),
                "{kind}: {report:?}"
            ),
            other => panic!("{kind}: acquired on nodes in their grace: {other:?}"),
        }
    }
    let plain = cluster.client();
    let both = plain
        .lock_many(["kinds:a", "kinds:b"], ttl)
        .expect("the guarded attempts were undone");
    both.release().unwrap();
}

/// `uptime_in_seconds` is `floor(now) − floor(start)`: a process that started late in a
/// wall-clock second reports a whole second as soon as the next one begins. A fake node that
/// started 0.95 s into a second says 1 s at 0.1 s of age, so the grace must not be shortened
/// by what it says: no attempt sent before the process is `grace` old may count. (With the age
/// taken as reported, the lock came at about 1.1 s into a 2 s grace.)
#[test]
fn the_grace_is_counted_from_the_earliest_start_the_uptime_allows() {
    use support::fake_server::{Behaviour, FakeServer};
    const GRACE: Duration = Duration::from_secs(2);
    let node = FakeServer::start(Behaviour::Node {
        phase: Duration::from_millis(950),
        role: "master",
    });
    let born = Instant::now();
    // Connected once the process is 0.1 s old, in the next wall-clock second of its own.
    std::thread::sleep(Duration::from_millis(100));
    let rl = support::builder(&[node.url()])
        .restart_grace(GRACE)
        .retry_count(0)
        .build()
        .expect("client");
    let status = &rl.node_status()[0];
    assert_eq!(
        status.uptime.map(|u| u.as_secs()),
        Some(1),
        "the fake reports the overstated uptime: {status:?}"
    );
    loop {
        let sent = born.elapsed();
        match rl.try_lock("grace:phase", TTL) {
            Ok(lock) => {
                assert!(
                    sent >= GRACE,
                    "an attempt sent {sent:?} after the process started counted, in a grace \
                     of {GRACE:?}"
                );
                lock.release().expect("release");
                return;
            }
            Err(Error::NoQuorum { report, .. }) => assert!(
                matches!(report.failures[0].problem, NodeProblem::InGrace { .. }),
                "{report:?}"
            ),
            Err(e) => panic!("{e}"),
        }
        assert!(
            born.elapsed() < GRACE * 3,
            "the grace never ended: {:?}",
            rl.node_status()[0]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
