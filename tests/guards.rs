//! Guards against nodes that silently lose locks (issue 18), on real servers:
//!
//! - the server probe: replicas and Cluster-mode nodes are refused before any script runs; a
//!   master with replicas and an evicting `maxmemory-policy` are warned about (and refused with
//!   `strict_servers`); persistence shows in `node_status()`; a user whose ACL denies `CONFIG`
//!   or `TIME` still locks;
//! - the clock guard: a node whose wall clock jumps forward (moved at run time by our
//!   `LD_PRELOAD` shim, `tests/support/clockshift.c`) is kept out of acquire quorums, so a
//!   second client cannot take a lock the first still holds on a bare majority, which it does
//!   without the guard.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use redquorum::{Error, NodeProblem, NodeStatus, Redlock};
use support::{NODE_TIMEOUT, RedisNode, assert_no_worker_panicked, eventually, watch_workers};

const TTL: Duration = Duration::from_secs(10);

fn address(node: &RedisNode) -> String {
    format!("127.0.0.1:{}", node.port)
}

fn builder(urls: &[String]) -> redquorum::Builder {
    Redlock::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .retry_count(0)
}

fn client(urls: &[String]) -> Redlock {
    builder(urls).build().expect("build client")
}

fn status(rl: &Redlock, node: &RedisNode) -> NodeStatus {
    let addr = address(node);
    rl.node_status()
        .into_iter()
        .find(|s| s.address == addr)
        .expect("the node is in the status")
}

/// The problem the failed call reports for `node`.
fn problem_at(err: &Error, node: &RedisNode) -> NodeProblem {
    let report = match err {
        Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => report,
        other => panic!("expected a quorum error, got {other:?}"),
    };
    let addr = address(node);
    report
        .failures
        .iter()
        .find(|f| f.node == addr)
        .map(|f| f.problem.clone())
        .unwrap_or_else(|| panic!("{addr} is not among the failures: {err}"))
}

fn unavailable_reason(err: &Error, node: &RedisNode) -> String {
    match problem_at(err, node) {
        NodeProblem::Unavailable(why) => why,
        other => panic!("expected the node to be refused, got {other:?}: {err}"),
    }
}

fn info(node: &RedisNode, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut node.conn())
        .expect("INFO")
}

fn start_replica_of(master: &RedisNode) -> RedisNode {
    let replica = RedisNode::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    assert!(
        eventually(Duration::from_secs(10), || {
            info(&replica, "replication").contains("master_link_status:up")
                && info(master, "replication").contains("connected_slaves:1")
        }),
        "the replica connected to its master"
    );
    replica
}

// ---------------------------------------------------------------------------------------------
// The server probe
// ---------------------------------------------------------------------------------------------

#[test]
fn replica_is_refused_before_any_script_runs() {
    watch_workers();
    let master = RedisNode::start_with(&support::DATA_ARGS);
    let replica = start_replica_of(&master);
    let rl = client(&[replica.url()]);
    let err = rl.try_lock("probe:replica", TTL).unwrap_err();
    let why = unavailable_reason(&err, &replica);
    assert!(
        why.contains("replica")
            && why.contains("role:slave")
            && why.contains(&master.port.to_string()),
        "says it is a replica, and of which master: {err}"
    );
    let text = err.to_string();
    assert!(text.contains(&address(&replica)), "names the node: {text}");
    let s = status(&rl, &replica);
    assert!(!s.connected);
    assert!(
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("replica")),
        "{s:?}"
    );
    // Refused before any script was loaded on it.
    assert!(
        !info(&replica, "commandstats").contains("cmdstat_script|load"),
        "no SCRIPT LOAD reached the replica"
    );
    drop(rl);
    assert_no_worker_panicked();
}

#[test]
fn master_with_a_replica_is_warned_about_and_refused_when_strict() {
    watch_workers();
    let master = RedisNode::start_with(&support::DATA_ARGS);
    let _replica = start_replica_of(&master);
    let rl = client(&[master.url()]);
    rl.try_lock("probe:master", TTL)
        .expect("a master with a replica is usable")
        .release()
        .expect("release");
    let s = status(&rl, &master);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("1 connected replica") && w.contains("failover")),
        "{s:?}"
    );

    let strict = builder(&[master.url()])
        .strict_servers(true)
        .build()
        .unwrap();
    let err = strict.try_lock("probe:master", TTL).unwrap_err();
    let why = unavailable_reason(&err, &master);
    assert!(
        why.contains("connected replica") && why.contains("strict_servers"),
        "{err}"
    );
    assert_eq!(master.get("probe:master"), None, "nothing left locked");
    assert_no_worker_panicked();
}

#[test]
fn evicting_maxmemory_policies_are_warned_about() {
    watch_workers();
    let allkeys =
        RedisNode::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]);
    let volatile =
        RedisNode::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl"]);
    // A policy without a limit never evicts; a limit with noeviction refuses writes instead.
    let unlimited = RedisNode::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let noeviction =
        RedisNode::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "noeviction"]);
    let nodes = [&allkeys, &volatile, &unlimited, &noeviction];
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let rl = client(&urls);
    rl.try_lock("probe:evict", TTL)
        .expect("warnings do not refuse")
        .release()
        .expect("release");

    let w = status(&rl, &allkeys).warnings;
    assert!(
        w.iter().any(|w| w.contains("allkeys-lru")
            && w.contains("evicted")
            && w.contains("fence counters")),
        "{w:?}"
    );
    let w = status(&rl, &volatile).warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("volatile-ttl") && w.contains("evicted") && !w.contains("fence")),
        "{w:?}"
    );
    assert_eq!(status(&rl, &unlimited).warnings, Vec::<String>::new());
    assert_eq!(status(&rl, &noeviction).warnings, Vec::<String>::new());

    let strict = builder(&[allkeys.url()])
        .strict_servers(true)
        .build()
        .unwrap();
    let err = strict.try_lock("probe:evict", TTL).unwrap_err();
    assert!(
        unavailable_reason(&err, &allkeys).contains("allkeys-lru"),
        "{err}"
    );
    // A strict client accepts a node with nothing to warn about.
    let strict = builder(&[noeviction.url()])
        .strict_servers(true)
        .build()
        .unwrap();
    strict
        .try_lock("probe:evict", TTL)
        .expect("nothing to warn about")
        .release()
        .unwrap();
    assert_no_worker_panicked();
}

#[test]
fn persistence_is_shown_in_node_status() {
    watch_workers();
    let aof = RedisNode::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let rdb = RedisNode::start_with(&["--save", "3600 1 60 1000"]);
    let none = RedisNode::start();
    let rl = client(&[aof.url(), rdb.url(), none.url()]);
    assert_eq!(
        status(&rl, &aof).persistence.as_deref(),
        Some("AOF (appendfsync always), no RDB snapshots")
    );
    assert_eq!(
        status(&rl, &rdb).persistence.as_deref(),
        Some("no AOF, RDB (save 3600 1 60 1000)")
    );
    assert_eq!(
        status(&rl, &none).persistence.as_deref(),
        Some("no AOF, no RDB snapshots")
    );
    let s = status(&rl, &none);
    assert!(
        s.server_version.as_deref().is_some_and(|v| !v.is_empty()),
        "{s:?}"
    );
    assert!(s.warnings.is_empty(), "{s:?}");
    assert_no_worker_panicked();
}

/// KeyDB's active replication makes every replica a master that takes writes: two clients'
/// `SET NX` can both succeed. A node that says so is refused before any script runs, with the
/// reason, and counts as unavailable.
#[test]
fn an_active_replica_is_refused_with_the_reason() {
    use support::fake_server::{Behaviour, FakeServer};
    let fake = FakeServer::start(Behaviour::Node {
        phase: Duration::ZERO,
        role: "active-replica",
    });
    let rl = builder(&[fake.url()]).retry_count(0).build().unwrap();
    let err = rl
        .try_lock("lock:active", TTL)
        .expect_err("an active replica cannot hold locks");
    let text = err.to_string();
    assert!(
        text.contains("active-replica") && text.contains("SET NX"),
        "says why: {text}"
    );
    let status = &rl.node_status()[0];
    assert!(!status.connected, "{status:?}");
}

/// Node status names the server by what it says of itself, with its own version: the matrix
/// runs this on Redis and on Valkey (whose `redis_version` is only the Redis it matches).
#[test]
fn node_status_names_the_server_and_its_own_version() {
    let out = Command::new(support::server_binary())
        .arg("--version")
        .output()
        .expect("server --version");
    let banner = String::from_utf8_lossy(&out.stdout).to_string();
    // "Redis server v=7.0.15 sha=…" or "Valkey server v=8.1.8 sha=…".
    let name = banner.split_whitespace().next().unwrap().to_lowercase();
    let version = banner
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap()
        .to_owned();
    let node = RedisNode::start();
    let rl = builder(&[node.url()]).build().unwrap();
    let status = &rl.node_status()[0];
    assert_eq!(
        status.server_name.as_deref(),
        Some(name.as_str()),
        "{banner}"
    );
    assert_eq!(
        status.server_version.as_deref(),
        Some(version.as_str()),
        "{banner}"
    );
}

#[test]
fn cluster_mode_node_is_refused() {
    watch_workers();
    let node = RedisNode::start_with(&["--cluster-enabled", "yes"]);
    let rl = client(&[node.url()]);
    let err = rl.try_lock("probe:cluster", TTL).unwrap_err();
    let why = unavailable_reason(&err, &node);
    assert!(
        why.contains("Cluster mode") && why.contains("redis+cluster://"),
        "{err}"
    );
    assert_no_worker_panicked();
}

/// The least-privilege `ACL SETUSER` line of docs/operations.md, split into arguments.
fn documented_acl() -> Vec<String> {
    let readme = include_str!("../docs/operations.md");
    let line = readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ACL SETUSER "))
        .expect("docs/operations.md documents an `ACL SETUSER` line");
    line.split_whitespace().skip(2).map(str::to_owned).collect()
}

fn acl_user_url(node: &RedisNode, without: &str) -> String {
    let acl = documented_acl();
    assert!(
        acl.iter().any(|a| a == without),
        "the documented ACL allows {without}"
    );
    let mut rules: Vec<String> = acl.iter().filter(|a| *a != without).cloned().collect();
    rules.insert(1, "reset".to_owned());
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&rules)
        .query(&mut node.conn())
        .expect("ACL SETUSER");
    let password = acl
        .iter()
        .find_map(|a| a.strip_prefix('>'))
        .expect("a password");
    format!("redis://{}:{password}@127.0.0.1:{}", acl[0], node.port)
}

/// Managed services often rename `CONFIG` away. The probe reads `maxmemory_policy` from `INFO`
/// and tolerates the unknown command: the node locks normally, its persistence is partly known.
#[test]
fn a_node_with_config_renamed_away_locks_normally() {
    watch_workers();
    let node = RedisNode::start_with(&["--rename-command", "CONFIG", ""]);
    let rl = builder(&[node.url()]).build().unwrap();
    rl.try_lock("lock:renamed", TTL)
        .expect("CONFIG is not needed to lock")
        .release()
        .unwrap();
    let s = status(&rl, &node);
    assert!(s.connected && s.warnings.is_empty(), "{s:?}");
    assert_eq!(
        s.persistence.as_deref(),
        Some("no AOF, RDB unknown (CONFIG GET denied)")
    );
    assert_no_worker_panicked();
}

#[test]
fn acl_user_without_config_or_time_still_locks() {
    watch_workers();
    let node = RedisNode::start();

    let url = acl_user_url(&node, "+config|get");
    let rl = client(std::slice::from_ref(&url));
    rl.try_lock("lock:acl", TTL)
        .expect("CONFIG is not needed to lock")
        .release()
        .unwrap();
    let s = status(&rl, &node);
    // INFO persistence still tells AOF; the RDB save points need CONFIG GET.
    assert_eq!(
        s.persistence.as_deref(),
        Some("no AOF, RDB unknown (CONFIG GET denied)")
    );
    assert!(s.warnings.is_empty(), "{s:?}");
    drop(rl);

    let url = acl_user_url(&node, "+time");
    let rl = client(std::slice::from_ref(&url));
    rl.try_lock("lock:acl", TTL)
        .expect("TIME is not needed to lock")
        .release()
        .unwrap();
    let s = status(&rl, &node);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("TIME failed") && w.contains("clock guard is off")),
        "{s:?}"
    );
    assert_eq!(s.clock_offset_ms, None);
    let strict = builder(std::slice::from_ref(&url))
        .strict_servers(true)
        .build()
        .unwrap();
    let err = strict.try_lock("lock:acl", TTL).unwrap_err();
    assert!(unavailable_reason(&err, &node).contains("+time"), "{err}");
    // With the guard off, TIME is not asked for: nothing to warn about.
    let off = builder(std::slice::from_ref(&url))
        .clock_guard(false)
        .strict_servers(true)
        .build()
        .unwrap();
    off.try_lock("lock:acl", TTL)
        .expect("no guard, no TIME")
        .release()
        .unwrap();
    assert_no_worker_panicked();
}

// ---------------------------------------------------------------------------------------------
// The clock guard
// ---------------------------------------------------------------------------------------------

/// A node whose wall clock runs `offset_ms` (rewritten at run time) ahead of the real one.
struct ShiftedNode {
    node: RedisNode,
    offset_file: PathBuf,
    dir: PathBuf,
}

impl ShiftedNode {
    fn start() -> ShiftedNode {
        let dir = std::env::temp_dir().join(format!("redlock-clockshift-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shim = support::build_shim("clockshift", &dir, &[]);
        let offset_file = dir.join("offset_ms");
        std::fs::write(&offset_file, "0").unwrap();
        let node = RedisNode::start_with_env(
            &[],
            &[
                ("LD_PRELOAD", shim.to_str().unwrap()),
                ("CLOCKSHIFT_FILE", offset_file.to_str().unwrap()),
            ],
        );
        ShiftedNode {
            node,
            offset_file,
            dir,
        }
    }

    fn time(&self) -> Duration {
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query(&mut self.node.conn())
            .expect("TIME");
        Duration::from_secs(secs) + Duration::from_micros(micros)
    }

    /// Moves the node's clock to `offset` ahead of the real one, and waits until it shows.
    fn shift(&self, offset: Duration) {
        std::fs::write(&self.offset_file, offset.as_millis().to_string()).unwrap();
        let expected = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                + offset
        };
        assert!(
            eventually(Duration::from_secs(5), || {
                let (t, e) = (self.time(), expected());
                t.max(e) - t.min(e) < Duration::from_secs(1)
            }),
            "the node's clock moved"
        );
    }
}

impl Drop for ShiftedNode {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The seed's delayed-restart hole through a clock: A holds a lock on a bare majority {X, Y};
/// X's clock jumps forward past the TTL, so A's key there expires early. Without the guard a
/// second client then gets the lock on {X, Z} while A's is still valid; with the guard X's yes
/// does not count and it does not. A client that connects after the jump catches it by
/// comparing X's clock with the others' at connect.
#[test]
fn node_whose_clock_jumps_forward_is_kept_out_of_acquire_quorums() {
    watch_workers();
    let x = ShiftedNode::start();
    let y = RedisNode::start();
    let z = RedisNode::start();
    let urls = vec![x.node.url(), y.url(), z.url()];
    let quarantine = Duration::from_secs(30);
    let a = builder(&urls).clock_guard(false).build().unwrap();
    let unguarded = builder(&urls).clock_guard(false).build().unwrap();
    let guarded = builder(&urls).clock_quarantine(quarantine).build().unwrap();
    // What an operator listening to the guarded client hears (issue 29).
    let heard: std::sync::Arc<std::sync::Mutex<Vec<redquorum::Event>>> = Default::default();
    let _listening = {
        let heard = heard.clone();
        guarded
            .on_event(move |e| heard.lock().unwrap().push(e.clone()))
            .unwrap()
    };
    // The guarded client samples the clocks in an acquire before the jump: all is well then.
    guarded
        .try_lock("clock:warmup", TTL)
        .expect("no jump yet")
        .release()
        .unwrap();
    for s in guarded.node_status() {
        assert_eq!(s.quarantine_remaining, None, "{s:?}");
        assert!(s.clock_offset_ms.is_some_and(|o| o.abs() < 1000), "{s:?}");
    }

    // A holds the lock on X and Y only (Z's key removed behind its back).
    let key = "clock:res";
    let held = a.try_lock(key, TTL).expect("A locks");
    let token = held.token().to_owned();
    // (It returned on a quorum: wait for the third SET too.)
    assert!(eventually(Duration::from_secs(5), || [
        x.node.get(key),
        y.get(key),
        z.get(key)
    ]
    .iter()
    .all(|v| v.as_deref() == Some(&token))));
    z.del(key);

    // X's clock jumps 30 s forward: A's key there expires at once, though A's lock is valid.
    x.shift(Duration::from_secs(30));
    assert!(
        eventually(Duration::from_secs(5), || x.node.get(key).is_none()),
        "the jump expired A's key on X"
    );
    assert!(held.validity() > Duration::from_secs(3), "A still holds it");

    // Without the guard: a second holder (this is the hole the guard closes).
    let stolen = unguarded
        .try_lock(key, TTL)
        .expect("without the guard, the jumped node's yes completes a quorum");
    assert!(held.validity() > Duration::ZERO, "two holders at once");
    stolen.release().expect("release the second holder");

    // With the guard: X's yes does not count, Y refuses, Z alone is no quorum.
    let err = guarded
        .try_lock(key, TTL)
        .expect_err("the guard keeps the jumped node out");
    match problem_at(&err, &x.node) {
        NodeProblem::ClockJump { jump, remaining } => {
            assert!(jump > Duration::from_secs(25), "{jump:?}");
            assert!(remaining > Duration::ZERO && remaining <= quarantine);
        }
        other => panic!("expected a clock jump on X, got {other:?}: {err}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&address(&x.node))
            && text.contains("clock jumped forward")
            && text.contains("clock_quarantine"),
        "names the node, the reason and for how long: {text}"
    );
    let s = status(&guarded, &x.node);
    assert!(s.quarantine_remaining.is_some(), "{s:?}");
    assert!(
        s.quarantine_reason
            .as_deref()
            .is_some_and(|r| r.contains("jumped forward")),
        "{s:?}"
    );
    assert!(s.clock_offset_ms.is_some_and(|o| o > 25_000), "{s:?}");
    // The quarantine is an event naming the node and the reason, and a gauge.
    let quarantined = || {
        heard
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.kind == redquorum::EventKind::NodeQuarantined)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(Duration::from_secs(5), || !quarantined().is_empty()),
        "{:?}",
        heard.lock().unwrap()
    );
    let event = &quarantined()[0];
    assert_eq!(event.node.as_deref(), Some(address(&x.node).as_str()));
    assert!(
        event
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("jumped forward")),
        "{event:?}"
    );
    assert!(guarded.stats().prometheus().contains(&format!(
        "redlock_node_quarantined{{node=\"{}\"}} 1",
        address(&x.node)
    )));
    for other in [&y, &z] {
        assert_eq!(status(&guarded, other).quarantine_remaining, None);
    }
    assert!(held.validity() > Duration::ZERO, "A held it all along");

    // `guarded`'s refused attempt returned on X and Y: its SET on Z, and the undo after it, may
    // still be queued. A late client's SET landing between them is refused by Z, and its
    // refusal is then certain from Y and Z without X's answer. `inspect` queues behind the SET.
    guarded.inspect(key).unwrap();
    assert!(
        eventually(Duration::from_secs(5), || z.get(key).is_none()),
        "the refused attempt was undone on Z"
    );

    // A client that connects after the jump has no earlier sample: it compares clocks.
    let late = builder(&urls).clock_quarantine(quarantine).build().unwrap();
    let err = late
        .try_lock(key, TTL)
        .expect_err("the late client keeps X out too");
    assert!(
        matches!(problem_at(&err, &x.node), NodeProblem::ClockJump { .. }),
        "{err}"
    );
    let reason = status(&late, &x.node).quarantine_reason.unwrap_or_default();
    assert!(reason.contains("ahead of the other nodes"), "{reason}");

    // Other resources still lock on Y and Z; X's clock stepping back is reported.
    x.shift(Duration::ZERO);
    guarded
        .try_lock("clock:other", TTL)
        .expect("Y and Z are a quorum")
        .release()
        .unwrap();
    // (X's answer may come after the quorum's: its worker reports it.)
    assert!(
        eventually(Duration::from_secs(5), || status(&guarded, &x.node)
            .warnings
            .iter()
            .any(|w| w.contains("stepped back"))),
        "{:?}",
        status(&guarded, &x.node)
    );
    drop(held);
    assert_no_worker_panicked();
}

#[test]
fn clock_settings_are_validated() {
    let url = "redis://127.0.0.1:1";
    let err = Redlock::builder()
        .node(url)
        .clock_quarantine(Duration::ZERO)
        .build()
        .expect_err("a zero quarantine with the guard on is refused");
    assert!(
        matches!(err, Error::InvalidArgument { .. })
            && err.to_string().contains("clock_quarantine"),
        "{err}"
    );
    let err = Redlock::builder()
        .node(url)
        .clock_jump_threshold(Duration::from_secs(11 * 365 * 24 * 3600))
        .build()
        .expect_err("a huge threshold is refused");
    assert!(err.to_string().contains("clock_jump_threshold"), "{err}");
    // Off, the quarantine does not matter.
    Redlock::builder()
        .node(url)
        .clock_quarantine(Duration::ZERO)
        .clock_guard(false)
        .build()
        .expect("guard off");
    assert_eq!(redquorum::DEFAULT_CLOCK_JUMP, Duration::from_millis(50));
    assert_eq!(redquorum::DEFAULT_CLOCK_QUARANTINE, Duration::from_secs(60));
}

/// One server reached through two URLs (`127.0.0.1` and `localhost`: the build-time check
/// compares URLs only) must not vote twice: otherwise, with the third node down, that one
/// server alone would make a quorum of 2 of 3.
#[test]
fn one_server_named_twice_votes_once() {
    watch_workers();
    let a = RedisNode::start();
    let mut b = RedisNode::start();
    let urls = vec![a.url(), format!("redis://localhost:{}", a.port), b.url()];
    let rl = builder(&urls).build().unwrap();
    // Whichever of the two connected second is refused, saying why.
    let statuses = rl.node_status();
    let refused: Vec<&NodeStatus> = statuses[..2].iter().filter(|s| !s.connected).collect();
    assert_eq!(refused.len(), 1, "{statuses:?}");
    let why = refused[0].last_error.as_deref().unwrap_or_default();
    assert!(
        why.contains("same server process as node") && why.contains("count twice"),
        "{why}"
    );
    // The two real servers still make a quorum.
    rl.try_lock("named-twice", TTL)
        .expect("A and B are 2 of 3")
        .release()
        .unwrap();
    // With B gone, A alone is one vote of three: no quorum.
    b.kill();
    let err = rl
        .try_lock("named-twice", TTL)
        .expect_err("one server cannot make a quorum of 3");
    assert!(matches!(err, Error::NoQuorum { .. }), "{err}");
    assert_no_worker_panicked();
}
