//! Misbehaving servers and awkward input: every failure is a clear error that names the node,
//! nothing panics or hangs, and nothing of ours stays behind on the healthy nodes.
//!
//! A bad node is mixed into an otherwise healthy 3-node cluster where that shows the quorum
//! still working; a 1-node client is used where the error itself is the point.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redquorum::{Error, Lock, NodeProblem, QuorumReport, Redlock};
use support::Shorthands;
use support::fake_server::{Behaviour, DeadPort, FakeServer};
use support::{Cluster, RedisNode, assert_no_worker_panicked, eventually, timed, watch_workers};

const TTL: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `127.0.0.1:port`, as the library names a node.
fn local(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// A client with fast retries.
fn client(urls: &[String], node_timeout: Duration) -> Redlock {
    support::builder(urls)
        .node_timeout(node_timeout)
        .build()
        .expect("build client")
}

/// The node-by-node report of a failed acquire, extend or release.
fn report_of(err: &Error) -> &QuorumReport {
    match err {
        Error::NoQuorum { report, .. }
        | Error::NotAcquired { report, .. }
        | Error::Lost {
            report: Some(report),
            ..
        } => report,
        other => panic!("expected an error with a node report, got {other:?}"),
    }
}

/// The problem reported for `node`; checks that the error's text names the node.
fn problem_at<'a>(err: &'a Error, node: &str) -> &'a NodeProblem {
    let text = err.to_string();
    assert!(text.contains(node), "the message names {node}: {text}");
    assert!(!text.contains("worker stopped"), "a worker died: {text}");
    let report = report_of(err);
    let found: Vec<_> = report.failures.iter().filter(|r| r.node == node).collect();
    assert_eq!(found.len(), 1, "{node} reported exactly once: {report:?}");
    &found[0].problem
}

/// The failed attempt of a single-node client: always `NoQuorum`, never `NotAcquired`.
fn no_quorum(result: redquorum::Result<Lock>) -> Error {
    match result {
        Err(e @ Error::NoQuorum { .. }) => e,
        Err(other) => panic!("expected NoQuorum, got {other:?} ({other})"),
        Ok(lock) => panic!("a misbehaving node gave a lock: {lock:?}"),
    }
}

/// The server's words in a `Server` or `Unavailable` problem.
fn words(problem: &NodeProblem) -> &str {
    match problem {
        NodeProblem::Unavailable(why) | NodeProblem::Server(why) => why,
        other => panic!("expected a problem with the server's words, got {other:?}"),
    }
}

fn dbsize(node: &RedisNode) -> i64 {
    redis::cmd("DBSIZE")
        .query(&mut node.conn())
        .expect("DBSIZE")
}

/// Nothing of ours stays behind: every given node ends up empty (releases may be asynchronous).
fn assert_empty<'a>(nodes: impl IntoIterator<Item = &'a RedisNode> + Clone) {
    assert!(
        eventually(Duration::from_secs(2), || nodes
            .clone()
            .into_iter()
            .all(|n| dbsize(n) == 0)),
        "keys left behind (port, keys): {:?}",
        nodes
            .into_iter()
            .filter(|n| dbsize(n) != 0)
            .map(|n| {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg("*")
                    .query(&mut n.conn())
                    .unwrap_or_default();
                (n.port, keys)
            })
            .collect::<Vec<_>>()
    );
}

/// The bad node between two healthy ones: locks, extends and releases still work on the
/// quorum, without waiting out the bad node's `node_timeout`, and leave nothing behind.
fn quorum_ignores(bad_url: &str) {
    let healthy = Cluster::start(2);
    let urls = [
        healthy.nodes[0].url(),
        bad_url.to_owned(),
        healthy.nodes[1].url(),
    ];
    // Long enough that waiting on the bad node would show, also against the bounds below on a
    // loaded machine; short enough that a worker stuck connecting to a silent node does not
    // hold up dropping the client for long (one I/O timeout, 2 s).
    let node_timeout = Duration::from_secs(1);
    let rl = client(&urls, node_timeout);
    let (lock, took) = timed("lock", || rl.lock("mixed", TTL));
    let lock = lock.unwrap_or_else(|e| panic!("1 bad node of 3 must not stop locking: {e}"));
    assert!(took < node_timeout, "lock waited on the bad node: {took:?}");
    assert!(lock.validity() > TTL - Duration::from_secs(1));
    assert_eq!(healthy.holding("mixed", lock.token()), 2);

    // Still exclusive: another owner is turned away while the lock is held.
    let other = client(&urls, node_timeout);
    let (result, _) = timed("competing try_lock", || other.try_lock("mixed", TTL));
    match result {
        // Refusals and the bad node's failure together rule out a quorum; which of the two
        // errors the library reports depends on which answers arrive first.
        Err(Error::NotAcquired { .. } | Error::NoQuorum { .. }) => {}
        other => panic!("expected the lock to be refused, got {other:?}"),
    }
    assert_eq!(healthy.holding("mixed", lock.token()), 2, "ours untouched");

    let (extended, took) = timed("extend", || lock.extend(TTL));
    extended.unwrap_or_else(|e| panic!("extend with 1 bad node of 3: {e}"));
    assert!(
        took < node_timeout,
        "extend waited on the bad node: {took:?}"
    );
    let token = lock.token().to_owned();
    let (released, took) = timed("release", || lock.release());
    released.unwrap_or_else(|e| panic!("release with 1 bad node of 3: {e}"));
    assert!(
        took < node_timeout,
        "release waited on the bad node: {took:?}"
    );
    assert_eq!(healthy.holding("mixed", &token), 0);
    timed("dropping the client", || drop(rl));
    timed("dropping the other client", || drop(other));
    assert_empty(&healthy.nodes);
    assert_no_worker_panicked();
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

#[test]
fn refused_connection_is_named_at_once_and_outvoted() {
    watch_workers();
    let dead = DeadPort::bind();
    let port = dead.port;
    let url = format!("redis://127.0.0.1:{port}");
    let addr = local(port);
    let rl = client(std::slice::from_ref(&url), Duration::from_secs(1));

    let (result, took) = timed("try_lock", || rl.try_lock("refused", TTL));
    let err = no_quorum(result);
    let why = words(problem_at(&err, &addr));
    assert!(why.to_lowercase().contains("refused"), "{err}");
    // A refused connection is known at once: no waiting for the (1 s) node_timeout.
    assert!(took < Duration::from_millis(500), "{took:?}");

    // lock() gives up after its retries, with the same clear error.
    let (result, _) = timed("lock", || rl.lock("refused", TTL));
    match result {
        Err(ref err @ Error::NoQuorum { attempts, .. }) => {
            assert_eq!(attempts, 4);
            problem_at(err, &addr);
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    let status = &rl.node_status()[0];
    assert_eq!(status.address, addr);
    assert!(!status.connected);
    assert!(status.last_error.is_some());
    timed("dropping the client", || drop(rl));

    quorum_ignores(&url);
}

#[test]
fn unresolvable_host_is_named_and_outvoted() {
    watch_workers();
    let url = "redis://nonexistent.invalid:6379";
    let addr = "nonexistent.invalid:6379";
    let rl = client(&[url.to_owned()], Duration::from_secs(1));
    for _ in 0..3 {
        let (result, _) = timed("try_lock", || rl.try_lock("nowhere", TTL));
        let err = no_quorum(result);
        match problem_at(&err, addr) {
            NodeProblem::Unavailable(why) => assert!(!why.is_empty(), "{err}"),
            // The first call may find the worker still resolving the name.
            NodeProblem::TimedOut => {}
            other => panic!("expected Unavailable, got {other:?}: {err}"),
        }
    }
    timed("dropping the client", || drop(rl));

    quorum_ignores(url);
}

#[test]
fn silent_port_times_out_after_node_timeout_without_hanging() {
    watch_workers();
    let server = FakeServer::start(Behaviour::Silent);
    let addr = local(server.port);
    let node_timeout = Duration::from_millis(200);
    // build() waits for the first connection attempts, at most the connect timeout (500 ms at
    // this node_timeout), not for the silent node.
    let (rl, took) = timed("build", || client(&[server.url()], node_timeout));
    assert!(took < Duration::from_millis(1500), "build took {took:?}");
    for _ in 0..4 {
        let (result, took) = timed("try_lock", || rl.try_lock("silent", TTL));
        let err = no_quorum(result);
        match problem_at(&err, &addr) {
            NodeProblem::TimedOut => assert!(took >= node_timeout, "{took:?}"),
            // Between connection attempts the worker answers at once with why it is down.
            NodeProblem::Unavailable(why) => assert!(!why.is_empty()),
            other => panic!("expected TimedOut or Unavailable, got {other:?}"),
        }
        // Around node_timeout: neither the socket's timeout nor the connect timeout is waited.
        assert!(took < node_timeout * 5, "{took:?}");
    }
    let (result, took) = timed("lock with retries", || rl.lock("silent", TTL));
    problem_at(&no_quorum(result), &addr);
    assert!(took < Duration::from_secs(3), "{took:?}");
    timed("dropping the client", || drop(rl));

    quorum_ignores(&server.url());
}

#[test]
fn server_closing_or_garbling_a_reply_is_an_error_never_a_hang() {
    watch_workers();
    // (reply to SET and the scripts, close after it, what the node's problem must be)
    let cases: [(&[u8], bool, &str); 7] = [
        (b"+O", true, "unavailable"),
        (b"", true, "unavailable"),
        (b"$40\r\nabc", true, "unavailable"),
        (b"*2\r\n:1\r\n", true, "unavailable"),
        // Half a reply on a connection left open: the worker's socket timeout ends the wait.
        (b"+O", false, "any"),
        (b"?garbage\r\n", false, "any"),
        // Well-formed, but not an answer to SET.
        (b"+PONG\r\n", false, "server"),
    ];
    for (reply, close, expect) in cases {
        let what = format!("{:?} close={close}", String::from_utf8_lossy(reply));
        let server = FakeServer::start(Behaviour::Answer { reply, close });
        let addr = local(server.port);
        let node_timeout = Duration::from_millis(200);
        let rl = client(&[server.url()], node_timeout);
        for _ in 0..3 {
            let (result, took) = timed(&what, || rl.try_lock("garbled", TTL));
            let err = no_quorum(result);
            let problem = problem_at(&err, &addr);
            match (expect, problem) {
                ("unavailable", NodeProblem::Unavailable(why)) => assert!(!why.is_empty()),
                ("server", NodeProblem::Server(why)) => assert!(why.contains("PONG"), "{err}"),
                ("any", NodeProblem::Unavailable(_) | NodeProblem::Server(_)) => {}
                ("any", NodeProblem::TimedOut) => assert!(took >= node_timeout),
                _ => panic!("{what}: unexpected problem {problem:?}: {err}"),
            }
            assert!(took < node_timeout * 5, "{what}: {took:?}");
        }
        assert!(
            server.misbehaved.load(Ordering::SeqCst) >= 1,
            "{what}: the library's commands reached the fake server"
        );
        timed("dropping the client", || drop(rl));
        assert_no_worker_panicked();
        if reply == b"+O" && close {
            quorum_ignores(&server.url());
        }
    }
}

/// A port where another kind of server listens (here one answering like HTTP) is named as not
/// a Redis server, not by the protocol parser's position and byte.
#[test]
fn a_server_that_is_not_redis_is_named_as_such() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 512];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let rl = client(
        &[format!("redis://127.0.0.1:{port}")],
        Duration::from_millis(500),
    );
    let err = no_quorum(rl.try_lock("not-redis", TTL));
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "{} (unavailable: did not answer as a Redis server",
            local(port)
        )),
        "{text}"
    );
    assert!(!text.contains("Parse error"), "{text}");
}

/// A waiter on a cluster with a node that is not Redis (an HTTP server) waits as it would with
/// that node down: its subscriber connects to it again with a backoff, not in a loop.
#[test]
fn a_waiter_does_not_reconnect_in_a_loop_to_a_node_that_is_not_redis() {
    let connects = connects_while_waiting(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    assert!(connects <= 30, "{connects} connections in 2 s");
}

/// Likewise with a node that confirms a subscription and then drops the connection.
#[test]
fn a_waiter_does_not_reconnect_in_a_loop_to_a_node_that_drops_what_it_confirms() {
    let connects = connects_while_waiting(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n");
    assert!(connects <= 30, "{connects} connections in 2 s");
}

/// The connections a client makes in 2 s to the third of three nodes, which answers the first
/// thing it reads with `reply` and closes the connection, while a waiter waits for a lock
/// another client holds on the other two. The worker's and the subscriber's connects each
/// have a backoff that doubles from 10 ms to 1 s: about 8 each in 2 s. In a loop they would be
/// thousands.
fn connects_while_waiting(reply: &'static [u8]) -> usize {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let accepted = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                accepted.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 512];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(reply);
            }
        });
    }
    let cluster = Cluster::start(2);
    let mut urls = cluster.urls();
    urls.push(format!("redis://127.0.0.1:{port}"));
    let holder = client(&urls, Duration::from_millis(500));
    let held = holder.lock("not-redis-wait", TTL).unwrap();
    let rl = client(&urls, Duration::from_millis(500));
    let before = accepted.load(Ordering::SeqCst);
    let waited = rl
        .acquire(&redquorum::LockRequest::new("not-redis-wait", TTL).wait(Duration::from_secs(2)));
    assert!(
        matches!(waited, Err(Error::NotAcquired { .. })),
        "{waited:?}"
    );
    let connects = accepted.load(Ordering::SeqCst) - before;
    held.release().unwrap();
    connects
}

#[test]
fn missing_or_wrong_password_is_named_without_the_password() {
    watch_workers();
    let secured = RedisNode::start_with(&["--requirepass", "s3cret-pw"]);
    let addr = local(secured.port);

    // NOAUTH: the URL has no password.
    let rl = client(&[secured.url()], Duration::from_secs(1));
    let (result, _) = timed("try_lock without password", || rl.try_lock("authed", TTL));
    let err = no_quorum(result);
    let why = words(problem_at(&err, &addr));
    assert!(why.contains("NOAUTH"), "{err}");
    drop(rl);

    // WRONGPASS: the URL has a wrong password, with and without a user name.
    for url in [
        format!("redis://:wrong-pw-123@127.0.0.1:{}", secured.port),
        format!("redis://default:wrong-pw-123@127.0.0.1:{}", secured.port),
    ] {
        let rl = client(std::slice::from_ref(&url), Duration::from_secs(1));
        let (result, _) = timed("try_lock with a wrong password", || {
            rl.try_lock("authed", TTL)
        });
        let err = no_quorum(result);
        let why = words(problem_at(&err, &addr));
        let lower = why.to_lowercase();
        assert!(
            why.contains("WRONGPASS") || lower.contains("auth") || lower.contains("password"),
            "says authentication failed: {err}"
        );
        for shown in [
            err.to_string(),
            format!("{err:?}"),
            format!("{rl:?}"),
            format!("{:?}", rl.node_status()),
        ] {
            assert!(!shown.contains("wrong-pw-123"), "password shown: {shown}");
        }
        drop(rl);
        quorum_ignores(&url);
    }

    // With the right password everything works, and nothing was left on the node.
    let good = format!("redis://:s3cret-pw@127.0.0.1:{}", secured.port);
    let rl = client(&[good], Duration::from_secs(1));
    rl.lock("authed", TTL).unwrap().release().unwrap();
    let mut conn = secured.conn();
    let _: () = redis::cmd("AUTH")
        .arg("s3cret-pw")
        .query(&mut conn)
        .unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(size, 0, "nothing left on the secured node");
    assert_no_worker_panicked();
}

fn hset(node: &RedisNode, key: &str) {
    let _: i64 = redis::cmd("HSET")
        .arg(key)
        .arg("field")
        .arg("value")
        .query(&mut node.conn())
        .expect("HSET");
}

fn key_type(node: &RedisNode, key: &str) -> String {
    redis::cmd("TYPE")
        .arg(key)
        .query(&mut node.conn())
        .expect("TYPE")
}

/// Replaces our lock's key on `node` with a hash, as a careless other program might. In one
/// transaction: our SET, if still on its way, lands before (and is replaced) or after (and is
/// refused by the hash), never between the DEL and the HSET.
fn replace_with_hash(node: &RedisNode, key: &str) {
    let _: () = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg(key)
        .ignore()
        .cmd("HSET")
        .arg(key)
        .arg("field")
        .arg("value")
        .ignore()
        .query(&mut node.conn())
        .expect("DEL and HSET");
}

#[test]
fn hash_key_refuses_acquire_and_reads_as_not_ours_for_extend_and_release() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = client(&cluster.urls(), Duration::from_secs(1));
    let [a, b, c] = [0, 1, 2].map(|i| local(cluster.nodes[i].port));

    // The resource already holds a hash on a majority: SET NX refuses, nothing is overwritten.
    for node in &cluster.nodes[..2] {
        hset(node, "hashed");
    }
    let (result, _) = timed("try_lock on a hash", || rl.try_lock("hashed", TTL));
    match result {
        Err(Error::NotAcquired { report, .. }) => assert!(report.refused() >= 2, "{report:?}"),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    for node in &cluster.nodes[..2] {
        assert_eq!(key_type(node, "hashed"), "hash", "the hash is untouched");
    }
    assert!(
        eventually(Duration::from_secs(2), || dbsize(&cluster.nodes[2]) == 0),
        "our SET on the free node was undone"
    );

    // One key of a held lock replaced by a hash: the quorum carries extend and release.
    let lock = rl.lock("one-hashed", TTL).unwrap();
    // The lock returned on a quorum: its last SET may still be on its way.
    assert!(eventually(Duration::from_secs(2), || cluster
        .holding("one-hashed", lock.token())
        == 3));
    replace_with_hash(&cluster.nodes[1], "one-hashed");
    lock.extend(TTL).unwrap();
    lock.release().unwrap();
    assert_eq!(key_type(&cluster.nodes[1], "one-hashed"), "hash");
    cluster.nodes[1].del("one-hashed");

    // Replaced on a majority: a hash is not our lock (it may be a reentrant lock's), so
    // extend and release find the lock lost there, without an error reply.
    let lock = rl.lock("two-hashed", TTL).unwrap();
    // The lock returned on a quorum: its last SET may still be on its way.
    assert!(eventually(Duration::from_secs(2), || cluster
        .holding("two-hashed", lock.token())
        == 3));
    for node in &cluster.nodes[..2] {
        replace_with_hash(node, "two-hashed");
    }
    let (result, _) = timed("extend", || lock.extend(TTL));
    let err = result.expect_err("extend of a lock whose keys became hashes");
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
    for node in [&a, &b] {
        assert_eq!(problem_at(&err, node), &NodeProblem::Refused, "{err}");
    }
    assert!(
        report_of(&err).failures.iter().all(|r| r.node != c),
        "the healthy node extended: {err}"
    );
    let (result, _) = timed("release", || lock.release());
    let err = result.expect_err("release of a lock whose keys became hashes");
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
    for node in [&a, &b] {
        assert_eq!(problem_at(&err, node), &NodeProblem::Refused, "{err}");
    }
    // The healthy node's key is deleted all the same; the hashes are left alone.
    assert!(
        eventually(Duration::from_secs(2), || dbsize(&cluster.nodes[2]) == 0),
        "release still removed our key from the healthy node"
    );
    for node in &cluster.nodes[..2] {
        assert_eq!(key_type(node, "two-hashed"), "hash");
    }
    timed("dropping the client", || drop(rl));
    assert_no_worker_panicked();
}

fn role_is_connected_replica(node: &RedisNode) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut node.conn())
        .expect("INFO");
    info.contains("role:slave") && info.contains("master_link_status:up")
}

/// A replica is refused at connect by the server probe (before it could answer `READONLY`),
/// with an error that says so; `tests/guards.rs` has the details.
#[test]
fn replica_is_refused_and_outvoted() {
    watch_workers();
    let master = RedisNode::start_with(&support::DATA_ARGS);
    let replica = RedisNode::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    assert!(
        eventually(Duration::from_secs(10), || role_is_connected_replica(
            &replica
        )),
        "the node became a replica"
    );
    let addr = local(replica.port);
    let rl = client(&[replica.url()], Duration::from_secs(1));
    let (result, _) = timed("try_lock on a replica", || rl.try_lock("ro", TTL));
    let err = no_quorum(result);
    match problem_at(&err, &addr) {
        NodeProblem::Unavailable(why) => {
            assert!(
                why.contains("replica") && why.contains("role:slave"),
                "{err}"
            );
        }
        other => panic!("expected the replica to be refused, got {other:?}: {err}"),
    }
    timed("dropping the client", || drop(rl));
    assert_empty([&master, &replica]);

    quorum_ignores(&replica.url());
    assert_empty([&master, &replica]);
}

#[test]
fn out_of_memory_node_answers_oom_and_is_outvoted() {
    watch_workers();
    let full = RedisNode::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let addr = local(full.port);
    let rl = client(&[full.url()], Duration::from_secs(1));
    let (result, _) = timed("try_lock on a full node", || rl.try_lock("oom", TTL));
    let err = no_quorum(result);
    match problem_at(&err, &addr) {
        NodeProblem::Server(why) => assert!(why.contains("OOM"), "{err}"),
        other => panic!("expected the OOM reply, got {other:?}: {err}"),
    }
    timed("dropping the client", || drop(rl));
    assert_empty([&full]);

    quorum_ignores(&full.url());
    assert_empty([&full]);
}

/// Calls `f` until it succeeds, at most `tries` times; returns the value and how many calls
/// failed (each failure must be a clear, node-naming error).
fn until_ok<T>(
    tries: usize,
    nodes: &[RedisNode],
    mut f: impl FnMut() -> redquorum::Result<T>,
) -> (T, usize) {
    let mut failures = 0;
    for _ in 0..tries {
        let (result, _) = timed("call after CLIENT KILL", &mut f);
        match result {
            Ok(v) => return (v, failures),
            Err(err) => {
                failures += 1;
                let text = err.to_string();
                assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
                assert!(
                    nodes.iter().any(|n| text.contains(&local(n.port))),
                    "names a node: {text}"
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("still failing after {tries} calls");
}

#[test]
fn killed_connections_cost_no_failed_call() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = client(&cluster.urls(), Duration::from_secs(1));
    rl.lock("warm-up", TTL).unwrap().release().unwrap();

    // The warm-up's release may still be on its way to the last node: let it land first.
    assert_empty(&cluster.nodes);

    // A held lock survives its connections being killed: the extend goes out again on fresh
    // connections.
    let lock = rl.lock("killed", TTL).unwrap();
    for node in &cluster.nodes {
        assert!(
            node.kill_clients() >= 1,
            "the worker's connection was killed"
        );
    }
    let ((), failures) = until_ok(5, &cluster.nodes, || lock.extend(TTL));
    assert_eq!(failures, 0, "failed extends");
    assert!(
        cluster.holding("killed", lock.token()) >= 2,
        "a failed extend deletes nothing"
    );
    lock.release().unwrap();
    assert_empty(&cluster.nodes);

    // Killed between calls: the next acquire goes out again on fresh connections. A worker
    // whose reconnect after the kills above failed (a loaded machine) stays without a
    // connection until its next call, which is the design: then there is nothing to kill on
    // its node, but every quorum still meets a killed connection.
    let killed = cluster
        .nodes
        .iter()
        .filter(|node| node.kill_clients() >= 1)
        .count();
    assert!(killed >= 2, "connections killed on {killed} of 3 nodes");
    let (lock, failures) = until_ok(5, &cluster.nodes, || rl.try_lock("killed", TTL));
    assert_eq!(failures, 0, "failed acquires");
    // A node whose connection was just killed may miss this SET; the quorum carries it.
    assert!(cluster.holding("killed", lock.token()) >= 2);
    lock.release().unwrap();
    assert_empty(&cluster.nodes);

    // Killed on one node only: the quorum carries the next call, and the node rejoins. The
    // calls above returned on a quorum, which need not include node 1: its worker may still be
    // without a connection, so first give it work until it has one (ours and the worker's).
    assert!(
        eventually(Duration::from_secs(5), || {
            let _ = rl.inspect("killed");
            cluster.nodes[1].clients("normal") >= 2
        }),
        "node 1's worker did not reconnect"
    );
    assert!(cluster.nodes[1].kill_clients() >= 1);
    let (lock, _) = timed("try_lock", || rl.try_lock("killed", TTL));
    lock.expect("1 of 3 connections killed").release().unwrap();
    assert!(
        eventually(Duration::from_secs(5), || {
            let Ok(lock) = rl.try_lock("killed", TTL) else {
                return false;
            };
            // The call returned on a quorum: the last nodes' SETs may still be on their way.
            let all = eventually(Duration::from_secs(1), || {
                cluster.holding("killed", lock.token()) == 3
            });
            let _ = lock.release();
            all
        }),
        "the killed node takes locks again"
    );
    timed("dropping the client", || drop(rl));
    assert_empty(&cluster.nodes);
    assert_no_worker_panicked();
}

#[test]
fn every_ascii_and_multibyte_resource_name_round_trips() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = client(&cluster.urls(), Duration::from_secs(1));
    let mut conns: Vec<redis::Connection> = cluster.nodes.iter().map(RedisNode::conn).collect();
    let ascii: String = (1u8..=0x7f).map(char::from).collect();
    let mut names = vec![
        format!("{ascii}é日本語🔒\u{200b}\u{feff}\u{10ffff}"),
        ascii,
        // Looks like a second RESP command to a sloppy client.
        "x\r\n*1\r\n$8\r\nFLUSHALL\r\n".to_owned(),
        "ünïcødé 🔒 \u{7f}\u{1}".to_owned(),
    ];
    names.extend((1u8..=0x7f).map(|b| char::from(b).to_string()));
    let other = client(&cluster.urls(), Duration::from_secs(1));
    for name in &names {
        let lock = rl
            .lock(name, TTL)
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(lock.resource(), name);
        // The key is the exact bytes of the name on every node (the last SET may land a
        // moment after the quorum decided).
        assert!(
            eventually(Duration::from_secs(2), || conns.iter_mut().all(|conn| {
                redis::cmd("GET")
                    .arg(name.as_bytes())
                    .query::<Option<String>>(conn)
                    .unwrap()
                    .as_deref()
                    == Some(lock.token())
            })),
            "{name:?} not held on every node"
        );
        match other.try_lock(name, TTL) {
            Err(Error::NotAcquired { resource, .. }) => assert_eq!(&resource, name),
            other => panic!("{name:?}: expected NotAcquired, got {other:?}"),
        }
        lock.extend(TTL).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        lock.release().unwrap_or_else(|e| panic!("{name:?}: {e}"));
        // A release returns on a quorum; the last node may follow a moment later.
        assert!(
            eventually(Duration::from_secs(2), || conns.iter_mut().all(|conn| {
                redis::cmd("DBSIZE").query::<i64>(conn).unwrap() == 0
            })),
            "{name:?} left behind"
        );
    }
    assert_no_worker_panicked();
}

#[test]
fn error_replies_keep_the_redis_error_code() {
    watch_workers();
    // (error reply the node sends to SET, the code a user greps the message for)
    let cases: [(&[u8], &str); 5] = [
        (
            b"-READONLY You can't write against a read only replica.\r\n",
            "READONLY",
        ),
        (
            b"-LOADING Redis is loading the dataset in memory\r\n",
            "LOADING",
        ),
        (b"-ERR something went wrong\r\n", "ERR"),
        (b"-MASTERDOWN Link with MASTER is down\r\n", "MASTERDOWN"),
        (b"-BUSY Redis is busy running a script\r\n", "BUSY"),
    ];
    for (reply, code) in cases {
        let server = FakeServer::start(Behaviour::Answer {
            reply,
            close: false,
        });
        let addr = local(server.port);
        let rl = client(&[server.url()], Duration::from_secs(1));
        let (result, _) = timed(code, || rl.try_lock("coded", TTL));
        let err = no_quorum(result);
        match problem_at(&err, &addr) {
            NodeProblem::Server(why) => assert!(why.starts_with(code), "{code}: {err}"),
            other => panic!("{code}: expected an error reply, got {other:?}: {err}"),
        }
    }
    assert_no_worker_panicked();
}

/// What `redlock_client_free` documents for the last free of a client and its locks: "may block
/// briefly (up to 2 × node_timeout, at least 100 ms) while a worker stuck on a hung node gives
/// up"; plus a second of slack for a loaded machine.
fn documented_drop_bound(node_timeout: Duration) -> Duration {
    (node_timeout * 2).max(Duration::from_millis(100)) + Duration::from_secs(1)
}

/// Drops `rl`, asserting it takes no longer than the documented bound.
fn drop_within_documented_bound(rl: Redlock, node_timeout: Duration) {
    let started = Instant::now();
    drop(rl);
    let took = started.elapsed();
    let bound = documented_drop_bound(node_timeout);
    assert!(
        took < bound,
        "dropping the client took {took:?}, over {bound:?}"
    );
}

#[test]
fn dropping_the_client_behind_a_silent_node_returns_promptly() {
    watch_workers();
    let server = FakeServer::start(Behaviour::Silent);
    let node_timeout = Duration::from_secs(1);
    let rl = client(&[server.url()], node_timeout);
    let (result, _) = timed("try_lock", || rl.try_lock("silent-drop", TTL));
    problem_at(&no_quorum(result), &local(server.port));
    // The failed attempt queued a release (it has no deadline); the worker is connecting.
    drop_within_documented_bound(rl, node_timeout);
    assert_no_worker_panicked();
}

#[test]
fn dropping_the_client_with_a_hung_node_returns_promptly() {
    watch_workers();
    let cluster = Cluster::start(3);
    // The defaults: node_timeout 50 ms, so the worker's socket timeout is 100 ms.
    let rl = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let locks: Vec<Lock> = (0..100)
        .map(|i| rl.lock(&format!("many-{i}"), TTL).unwrap())
        .collect();
    cluster.nodes[0].hang();
    // Dropped locks are released without waiting: their releases queue up for every node.
    timed("dropping the locks", || drop(locks));
    drop_within_documented_bound(rl, redquorum::DEFAULT_NODE_TIMEOUT);
    cluster.nodes[0].resume();
    assert_empty(&cluster.nodes[1..]);
    assert_no_worker_panicked();
}

/// Servers close idle connections (`timeout` in redis.conf; proxies and load balancers do the
/// same). A lock held across that idle spell must still release on every node at once, not sit
/// locked until its TTL: compare-and-delete is safe to resend on a fresh connection.
#[test]
fn a_release_after_the_server_closed_idle_connections_still_releases_everywhere() {
    watch_workers();
    let cluster = Cluster::start(3);
    for node in &cluster.nodes {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("timeout")
            .arg("1")
            .query(&mut node.conn())
            .expect("CONFIG SET timeout");
    }
    let rl = client(&cluster.urls(), Duration::from_secs(1));
    let lock = rl.lock("idle", TTL).unwrap();
    let token = lock.token().to_owned();
    // Every worker's connection goes idle and the servers close it (checked every ~100 ms).
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.clients("normal") == 1)),
        "the servers closed the idle connections"
    );
    let (released, _) = timed("release", || lock.release());
    released.expect("a release on fresh connections");
    assert!(
        eventually(Duration::from_secs(2), || cluster.holding("idle", &token)
            == 0),
        "the keys are gone long before their {TTL:?} TTL"
    );
    // An extend and an acquire after the same idle spell cost no failed call either.
    let lock = rl.lock("idle", TTL).unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .nodes
        .iter()
        .all(|n| n.clients("normal") == 1)));
    timed("extend", || lock.extend(TTL))
        .0
        .expect("an extend on fresh connections");
    lock.release().unwrap();
    assert_empty(&cluster.nodes);

    // Reentrant holds are counted and never resent: an idle connection is checked first, so
    // neither a nested acquire nor the releases fail, and no hold is counted twice.
    let idle_spell = || {
        assert!(eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.clients("normal") == 1)))
    };
    let outer = rl.try_reentrant_lock("idle-re", "alice", TTL).unwrap();
    idle_spell();
    let inner = timed("nested acquire", || {
        rl.try_reentrant_lock("idle-re", "alice", TTL)
    })
    .0
    .expect("a nested acquire after an idle spell");
    assert_eq!(inner.hold_count(), Some(2));
    idle_spell();
    timed("inner release", || inner.release())
        .0
        .expect("an inner release after an idle spell");
    idle_spell();
    timed("outer release", || outer.release())
        .0
        .expect("an outer release after an idle spell");
    assert_empty(&cluster.nodes);
}
