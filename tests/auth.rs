//! Authentication as a least-privilege ACL user: the ACL documented in docs/operations.md is enough to
//! lock, extend and release keys matching its pattern, every permission in it is needed, keys
//! outside the pattern fail with a NOPERM error naming the node, and passwords never show in
//! any error, `Debug` output or node status.
//!
//! Password-only servers (`requirepass`, NOAUTH, WRONGPASS) are covered in `misbehaving.rs`.

mod support;

use std::time::Duration;

use redquorum::{Error, LockRequest, NodeProblem, Redlock};
use support::Shorthands;
use support::{RedisNode, assert_no_worker_panicked, watch_workers};

const TTL: Duration = Duration::from_secs(10);

/// The `ACL SETUSER` command of the least-privilege section of docs/operations.md, split into arguments.
fn documented_acl() -> Vec<String> {
    let readme = include_str!("../docs/operations.md");
    let line = readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ACL SETUSER "))
        .expect("docs/operations.md documents an `ACL SETUSER` line");
    line.split_whitespace().skip(2).map(str::to_owned).collect()
}

/// The user name and password the documented ACL sets.
fn documented_user() -> (String, String) {
    let acl = documented_acl();
    let password = acl
        .iter()
        .find_map(|a| a.strip_prefix('>'))
        .expect("the documented ACL sets a password with >");
    (acl[0].clone(), password.to_owned())
}

/// Runs `ACL SETUSER` with `rules` on `node` (as the default user, which the tests keep open
/// for looking at keys).
fn set_user(node: &RedisNode, rules: &[String]) {
    let mut conn = node.conn();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(rules)
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("ACL SETUSER {}: {e}", rules.join(" ")));
}

/// Empties `node`'s `ACL LOG`.
fn acl_log_reset(node: &RedisNode) {
    let _: () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut node.conn())
        .unwrap();
}

/// Asserts that no node's `ACL LOG` has an entry: nothing was refused, but for the
/// `CLIENT SETINFO` that redis-rs sends on connect to Redis 7.2+ and Valkey and whose refusal it
/// ignores (docs/operations.md says so, and how to quiet it).
fn assert_acl_log_empty(nodes: &[RedisNode]) {
    for node in nodes {
        let log: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("ACL")
            .arg("LOG")
            .query(&mut node.conn())
            .unwrap();
        let refused: Vec<_> = log
            .iter()
            .filter(|e| {
                !matches!(e.get("object"), Some(redis::Value::BulkString(o)) if o == b"client|setinfo")
            })
            .collect();
        assert!(
            refused.is_empty(),
            "the documented ACL refused: {refused:?}"
        );
    }
}

fn user_url(node: &RedisNode, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}", node.port)
}

fn client(urls: &[String]) -> Redlock {
    support::builder(urls)
        .retry_count(0)
        .build()
        .expect("build client")
}

fn address(node: &RedisNode) -> String {
    format!("127.0.0.1:{}", node.port)
}

/// The node-by-node failures of an error, as text.
fn problems(err: &Error) -> Vec<(String, String)> {
    let report = match err {
        Error::NoQuorum { report, .. } | Error::NotAcquired { report, .. } => report,
        Error::Lost {
            report: Some(report),
            ..
        } => report,
        other => panic!("expected a quorum error, got {other:?}"),
    };
    report
        .failures
        .iter()
        .map(|r| {
            let why = match &r.problem {
                NodeProblem::Unavailable(why)
                | NodeProblem::Server(why)
                | NodeProblem::Denied(why) => why.clone(),
                other => format!("{other:?}"),
            };
            (r.node.clone(), why)
        })
        .collect()
}

#[test]
fn documented_acl_user_can_lock_extend_and_release() {
    watch_workers();
    let (user, password) = documented_user();
    let nodes: Vec<RedisNode> = (0..3).map(|_| RedisNode::start()).collect();
    for node in &nodes {
        set_user(node, &documented_acl());
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| user_url(n, &user, &password))
        .collect();
    let rl = client(&urls);
    // The documented ACL lets the server probe and the clock guard read all they need.
    for s in rl.node_status() {
        assert!(s.warnings.is_empty(), "{s:?}");
        assert_eq!(
            s.persistence.as_deref(),
            Some("no AOF, no RDB snapshots"),
            "{s:?}"
        );
        assert!(s.clock_offset_ms.is_some() && s.run_id.is_some(), "{s:?}");
    }

    let lock = rl
        .lock("lock:orders:42", TTL)
        .expect("lock as the ACL user");
    let holding = |token: &str| {
        nodes
            .iter()
            .filter(|n| n.get("lock:orders:42").as_deref() == Some(token))
            .count()
    };
    assert!(holding(lock.token()) >= 2);
    assert!(matches!(
        rl.try_lock("lock:orders:42", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.extend(Duration::from_secs(30)).expect("extend");
    assert!(nodes.iter().any(|n| n.pttl("lock:orders:42") > 20_000));

    for shown in [
        format!("{rl:?}"),
        format!("{lock:?}"),
        format!("{:?}", rl.node_status()),
    ] {
        assert!(!shown.contains(&password), "password shown: {shown}");
    }
    let token = lock.token().to_owned();
    lock.release().expect("release");
    assert!(support::eventually(Duration::from_secs(5), || holding(
        &token
    ) == 0));

    // The connections really are the limited user's.
    for node in &nodes {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut node.conn())
            .unwrap();
        assert!(clients.contains(&format!("user={user}")), "{clients}");
    }
    assert_no_worker_panicked();
}

#[test]
fn key_outside_the_acl_pattern_is_noperm_naming_the_node() {
    watch_workers();
    let (user, password) = documented_user();
    let node = RedisNode::start();
    set_user(&node, &documented_acl());
    let rl = client(&[user_url(&node, &user, &password)]);

    let err = rl.try_lock("orders:42", TTL).unwrap_err();
    assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&address(&node)), "names the node: {text}");
    assert!(text.contains("NOPERM"), "says permission denied: {text}");
    for shown in [text, format!("{err:?}")] {
        assert!(!shown.contains(&password), "password shown: {shown}");
    }
    assert_eq!(node.get("orders:42"), None);

    // The connection survives a refused command: the next lock in the pattern works.
    rl.try_lock("lock:ok", TTL).unwrap().release().unwrap();
    assert_eq!(rl.node_status()[0].connects, 1, "no reconnect was needed");
    assert_no_worker_panicked();
}

#[test]
fn every_permission_of_the_documented_acl_is_needed() {
    watch_workers();
    let (user, password) = documented_user();
    let node = RedisNode::start();
    let url = user_url(&node, &user, &password);
    let acl = documented_acl();
    // `+info` (restart detection, the server probe), `+time` (the clock guard) and
    // `+config|get` (persistence in node_status) inform the client at connect; without them it
    // still locks, with a warning: `tests/guards.rs` checks that. `+script|exists` saves a
    // connection loading the scripts the server has: without it, every script is loaded.
    let informative = ["+info", "+time", "+config|get", "+script|exists"];
    for permission in informative {
        assert!(
            acl.iter().any(|a| a == permission),
            "{permission} is documented"
        );
    }
    let needed: Vec<&String> = acl
        .iter()
        .filter(|a| a.starts_with('+') && !informative.contains(&a.as_str()))
        .collect();
    assert!(!needed.is_empty());
    for dropped in needed {
        // `reset` (right after the user name) forgets the previous round's rules.
        let mut rules: Vec<String> = acl.iter().filter(|a| *a != dropped).cloned().collect();
        rules.insert(1, "reset".to_owned());
        set_user(&node, &rules);
        // A server that has the scripts already needs no `SCRIPT LOAD`: each round starts from
        // one that has none.
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node.conn())
            .unwrap();
        let rl = client(std::slice::from_ref(&url));
        let failed = match rl.try_lock("lock:perm", TTL) {
            Err(e) => Some(e),
            Ok(lock) => lock.extend(TTL).err().or_else(|| lock.release().err()),
        };
        let err = failed.unwrap_or_else(|| panic!("works without {dropped}: it is not needed"));
        let text = err.to_string();
        // A command the node refuses is a denial on every server, however it words it (inside a
        // script: Redis 7.0 "can't run this command", Valkey "ACL failure in script"); one
        // refused at connect makes the node unavailable, which redis-rs spells "NoPerm".
        assert!(
            text.contains("permission denied (NOPERM)") || text.contains("NoPerm"),
            "without {dropped}, the error says permission denied: {text}"
        );
        assert!(text.contains(&address(&node)), "{text}");
        drop(rl);
        node.del("lock:perm");
    }
    assert_no_worker_panicked();
}

#[test]
fn wrong_password_or_unknown_user_is_clear_and_never_shown() {
    watch_workers();
    let (user, _) = documented_user();
    let node = RedisNode::start();
    set_user(&node, &documented_acl());
    for (who, pass) in [
        (user.as_str(), "wrong-pw-5150"),
        ("nobody", "wrong-pw-5150"),
    ] {
        let url = user_url(&node, who, pass);
        // Patient: a reconnect slower than the 50 ms default would make the answer TimedOut
        // instead of the refused authentication.
        let builder = Redlock::builder()
            .node(&url)
            .retry_count(0)
            .node_timeout(Duration::from_secs(1));
        assert!(!format!("{builder:?}").contains(pass));
        let rl = builder.build().unwrap();
        let err = rl.try_lock("lock:auth", TTL).unwrap_err();
        let failures = problems(&err);
        assert_eq!(failures.len(), 1, "{err}");
        let (at, why) = &failures[0];
        assert_eq!(at, &address(&node));
        let lower = why.to_lowercase();
        assert!(
            why.contains("WRONGPASS") || lower.contains("auth") || lower.contains("password"),
            "says authentication failed: {err}"
        );
        let status = rl.node_status();
        assert!(status[0].last_error.is_some(), "{status:?}");
        for shown in [
            err.to_string(),
            format!("{err:?}"),
            format!("{rl:?}"),
            format!("{status:?}"),
        ] {
            assert!(!shown.contains(pass), "password shown: {shown}");
        }
    }
    assert_eq!(node.get("lock:auth"), None);
    assert_no_worker_panicked();
}

/// The documented addition for the other features (`ACL SETUSER locker ~... +...`), after the
/// documented base line.
fn documented_acl_additions() -> Vec<String> {
    let readme = include_str!("../docs/operations.md");
    let line = readme
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("ACL SETUSER "))
        .nth(1)
        .expect("docs/operations.md documents a second `ACL SETUSER` line for the other features");
    line.split_whitespace().skip(3).map(str::to_owned).collect()
}

#[test]
fn documented_acl_additions_cover_every_kind_of_lock_and_waiting() {
    watch_workers();
    let (user, password) = documented_user();
    let nodes: Vec<RedisNode> = (0..3).map(|_| RedisNode::start()).collect();
    let mut rules = documented_acl();
    rules.extend(documented_acl_additions());
    for node in &nodes {
        set_user(node, &rules);
        acl_log_reset(node);
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| user_url(n, &user, &password))
        .collect();
    let rl = client(&urls);

    let fenced = rl.lock_fenced("lock:f", TTL).expect("fenced lock");
    assert!(fenced.fence().is_some_and(|f| f >= 1));
    fenced.release().expect("fenced release");

    let owner = Redlock::new_owner().unwrap();
    let outer = rl.reentrant_lock("lock:r", &owner, TTL).expect("reentrant");
    let inner = rl.reentrant_lock("lock:r", &owner, TTL).expect("nested");
    assert_eq!(inner.hold_count(), Some(2));
    outer.extend(TTL).expect("reentrant extend");
    inner.release().expect("nested release");
    outer.release().expect("outer release");

    let many = rl
        .lock_many(["lock:m1", "lock:m2"], TTL)
        .expect("lock_many");
    many.extend(TTL).expect("extend many");
    many.release().expect("release many");

    let read = redquorum::LockRequest::new("lock:rw", TTL).read().once();
    let reader = rl.acquire(&read).expect("read lock");
    let other = rl.acquire(&read).expect("second reader");
    reader.extend(TTL).expect("reader extend");
    other.release().expect("reader release");
    reader.release().expect("last reader release");
    let writer = rl
        .acquire(&redquorum::LockRequest::new("lock:rw", TTL).write().once())
        .expect("write lock");
    writer.release().expect("writer release");

    let permit = redquorum::LockRequest::new("lock:s", TTL)
        .semaphore(2)
        .once();
    let a = rl.acquire(&permit).expect("a permit");
    let b = rl.acquire(&permit).expect("another permit");
    a.extend(TTL).expect("permit extend");
    // A waiter for a permit subscribes to every slot's channel.
    let waiter = {
        let rl = rl.clone();
        let request = permit.clone().wait(Duration::from_secs(10));
        std::thread::spawn(move || rl.acquire(&request).map(|l| l.release()))
    };
    assert!(support::eventually(Duration::from_secs(5), || {
        nodes.iter().all(|n| {
            let (_, count): (String, u64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redlock:released:{lock:s}:redlock:sem:{lock:s}:1")
                .query(&mut n.conn())
                .expect("PUBSUB NUMSUB");
            count == 1
        })
    }));
    b.release().expect("permit release");
    let got = waiter.join().expect("permit waiter");
    assert!(matches!(got, Ok(Ok(()))), "permit waiter: {got:?}");
    a.release().expect("permit release");

    // A waiter subscribes to the release notification and wakes when the holder lets go.
    let held = rl.lock("lock:w", TTL).expect("held");
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(&redquorum::LockRequest::new("lock:w", TTL).wait(Duration::from_secs(10)))
                .map(|l| l.release())
        })
    };
    let subscribed = support::eventually(Duration::from_secs(5), || {
        nodes.iter().all(|n| {
            let (_, count): (String, u64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redlock:released:{lock:w}:lock:w")
                .query(&mut n.conn())
                .expect("PUBSUB NUMSUB");
            count == 1
        })
    });
    assert!(subscribed, "the waiter's subscriptions were refused");
    held.release().expect("release for the waiter");
    let got = waiter.join().expect("waiter thread");
    assert!(matches!(got, Ok(Ok(()))), "waiter: {got:?}");
    // Nothing was refused on the way, not even what a feature works around (a fair queue's
    // commands, a waiter's TTL read).
    assert_acl_log_empty(&nodes);
    assert_no_worker_panicked();
}

/// A waiter needs only what the docs list for waiting (`+subscribe +unsubscribe +pttl`) and, for
/// a semaphore, `+exists` and its keys: its read of the holder's TTL and tokens sends nothing
/// else (no `TYPE`), so it sleeps on the holder's TTL instead of polling at its fallback, and
/// the node's `ACL LOG` stays empty.
#[test]
fn a_waiter_needs_no_permission_beyond_the_documented_ones_for_waiting() {
    watch_workers();
    let (user, password) = documented_user();
    let nodes: Vec<RedisNode> = (0..3).map(|_| RedisNode::start()).collect();
    let mut rules = documented_acl();
    rules.extend(
        [
            "+subscribe",
            "+unsubscribe",
            "+pttl",
            "+exists",
            "~redlock:sem:{lock:*",
        ]
        .map(String::from),
    );
    for node in &nodes {
        set_user(node, &rules);
        acl_log_reset(node);
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| user_url(n, &user, &password))
        .collect();
    let rl = client(&urls);
    let wait = Duration::from_millis(700);
    let held = rl.lock("lock:w", TTL).expect("held");
    let waited = rl.acquire(&LockRequest::new("lock:w", TTL).fair(false).wait(wait));
    assert!(
        matches!(waited, Err(Error::NotAcquired { .. })),
        "{waited:?}"
    );
    held.release().expect("release");
    let permit = LockRequest::new("lock:s", TTL).semaphore(1);
    let holder = rl.acquire(&permit.clone().once()).expect("permit");
    let waited = rl.acquire(&permit.wait(wait));
    assert!(
        matches!(waited, Err(Error::NotAcquired { .. })),
        "{waited:?}"
    );
    holder.release().expect("release");
    assert_acl_log_empty(&nodes);
    assert_no_worker_panicked();
}

/// Managed services refuse some commands. `SCRIPT LOAD` refused: the scripts go whole with
/// `EVAL`, and every kind locks, waits and releases as usual (the node status says why).
/// `CONFIG` and `CLIENT` refused: only informative, locking is unaffected.
#[test]
fn a_user_without_script_load_config_or_client_locks_normally() {
    watch_workers();
    let (user, password) = documented_user();
    let nodes: Vec<RedisNode> = (0..3).map(|_| RedisNode::start()).collect();
    let mut rules: Vec<String> = documented_acl()
        .into_iter()
        .filter(|r| r != "+script|load" && r != "+config|get" && r != "+evalsha")
        .collect();
    rules.push("+eval".into());
    for node in &nodes {
        set_user(node, &rules);
        // The additions of the documented second line, for the fenced lock and the waiter.
        set_user(
            node,
            &[
                user.clone(),
                "~redlock:fence:{lock:*}".into(),
                "+subscribe".into(),
                "+unsubscribe".into(),
                "+incr".into(),
                "+pttl".into(),
            ],
        );
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| user_url(n, &user, &password))
        .collect();
    let rl = client(&urls);
    for s in rl.node_status() {
        assert!(s.connected, "{s:?}");
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("SCRIPT LOAD is refused")),
            "{s:?}"
        );
    }
    let lock = rl.lock("lock:eval", TTL).expect("lock without SCRIPT LOAD");
    lock.extend(TTL).expect("extend with EVAL");
    let fenced = rl
        .try_lock_fenced("lock:eval:f", TTL)
        .expect("fenced with EVAL");
    assert!(fenced.fence().is_some());
    let waiter = {
        let rl = rl.clone();
        std::thread::spawn(move || {
            rl.acquire(&redquorum::LockRequest::new("lock:eval", TTL).wait(Duration::from_secs(10)))
                .map(|l| l.release())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    lock.release().expect("release with EVAL");
    let got = waiter.join().expect("waiter");
    assert!(
        matches!(got, Ok(Ok(()))),
        "the waiter got the lock: {got:?}"
    );
    fenced.release().expect("fenced release");
    // The waiter's release returned on a quorum: the last node's DEL may still be on its way.
    assert!(
        support::eventually(Duration::from_secs(5), || nodes
            .iter()
            .all(|n| n.get("lock:eval").is_none())),
        "the released lock's key stayed on a node"
    );
    assert_no_worker_panicked();
}

/// An ACL may allow `INFO` for some sections alone (first-argument rules, `+info|server`), which
/// refuses a plain `INFO`: the server probe then asks per section, so such a user still has a
/// replica refused and `restart_grace` still reads the uptime.
#[test]
fn a_user_allowed_info_per_section_still_has_the_node_checked() {
    watch_workers();
    let (user, password) = documented_user();
    let mut rules: Vec<String> = Vec::new();
    for rule in documented_acl() {
        if rule == "+info" {
            for section in ["server", "replication", "persistence", "memory", "cluster"] {
                rules.push(format!("+info|{section}"));
            }
        } else {
            rules.push(rule);
        }
    }
    let master = RedisNode::start_with(&support::DATA_ARGS);
    // Writable, so that only the probe can refuse it.
    let replica = RedisNode::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
        "--replica-read-only",
        "no",
    ]);
    assert!(
        support::eventually(Duration::from_secs(10), || {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut replica.conn())
                .is_ok_and(|i| i.contains("master_link_status:up"))
        }),
        "the replica connected to its master"
    );
    for node in [&master, &replica] {
        set_user(node, &rules);
    }
    let plain: redis::RedisResult<String> = redis::cmd("INFO").query(
        &mut redis::Client::open(user_url(&master, &user, &password))
            .unwrap()
            .get_connection()
            .unwrap(),
    );
    assert!(
        plain.is_err_and(|e| e.code() == Some("NOPERM")),
        "the rules refuse a plain INFO"
    );

    let rl = client(&[user_url(&replica, &user, &password)]);
    let err = rl.try_lock("lock:section", TTL).unwrap_err();
    let failures = problems(&err);
    assert!(
        failures
            .iter()
            .any(|(_, why)| why.contains("server probe") && why.contains("role:slave")),
        "the probe refuses the replica: {err}"
    );

    let rl = support::builder(&[user_url(&master, &user, &password)])
        .retry_count(0)
        .restart_grace(Duration::from_millis(300))
        .build()
        .expect("build client");
    assert!(
        support::eventually(Duration::from_secs(5), || rl
            .try_lock("lock:section", TTL)
            .is_ok_and(|lock| lock.release().is_ok())),
        "the master's uptime is read, and its grace ends"
    );
    let status = rl.node_status();
    assert!(
        status[0]
            .warnings
            .iter()
            .all(|w| !w.contains("INFO failed")),
        "{status:?}"
    );
    assert_no_worker_panicked();
}

/// A user denied `SCRIPT EXISTS` has every script loaded at each connect, and is refused it
/// once per connect, as often as a user allowed it asks: the probe's refused answer stands,
/// and `SCRIPT EXISTS` is not sent again before the loads.
#[test]
fn a_user_denied_script_exists_is_asked_once_per_connect() {
    let (user, password) = documented_user();
    let node = RedisNode::start();
    set_user(&node, &documented_acl());
    let denied: Vec<String> = std::iter::once("denied".to_owned())
        .chain(
            documented_acl()
                .into_iter()
                .skip(1)
                .filter(|r| r != "+script|exists"),
        )
        .collect();
    set_user(&node, &denied);
    let rejected = || -> u64 {
        node.info("commandstats")
            .lines()
            .find_map(|l| {
                l.strip_prefix("cmdstat_script|exists:")?
                    .split(',')
                    .find_map(|f| f.strip_prefix("rejected_calls=")?.parse().ok())
            })
            .unwrap_or(0)
    };
    let connect_and_lock = |user: &str| {
        let rl = client(&[user_url(&node, user, &password)]);
        rl.try_lock("lock:exists", TTL).unwrap().release().unwrap();
    };

    connect_and_lock(&user);
    let asked = node.calls("script|exists");
    assert!(asked > 0, "the allowed user's connect asked");
    let loads = node.calls("script|load");
    connect_and_lock("denied");
    assert_eq!(
        rejected(),
        asked,
        "refused as often as the allowed user asked"
    );
    assert_eq!(
        node.calls("script|load"),
        2 * loads,
        "every script loaded for the denied user"
    );
    connect_and_lock("denied");
    assert_eq!(rejected(), 2 * asked);
}
