//! The built `redlock` binary against real redis-server nodes.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{Cluster, RedisNode, eventually, wait_timeout};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// A patient node timeout for a loaded machine (the default 50 ms can miss a node).
const NODE_TIMEOUT: &str = "500ms";

fn tmp(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "redquorum-cli-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `redlock SUBCOMMAND --node-timeout … ARGS…` with the cluster in `REDLOCK_NODES`.
fn redlock(cluster: &Cluster, sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg(sub)
        .args(["--node-timeout", NODE_TIMEOUT])
        .args(args)
        .env("REDLOCK_NODES", cluster.urls().join(","))
        .stdin(Stdio::null());
    c
}

fn output(mut c: impl std::borrow::BorrowMut<Command>) -> Output {
    let c = c.borrow_mut();
    c.output().expect("run redlock")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn quorum(cluster: &Cluster) -> usize {
    cluster.nodes.len() / 2 + 1
}

/// Nodes without the key (answering, as a string or any type).
fn absent_on(cluster: &Cluster, key: &str) -> usize {
    cluster.nodes.iter().filter(|n| n.pttl(key) == -2).count()
}

fn wait_for_file(path: &Path, limit: Duration) -> bool {
    eventually(limit, || {
        std::fs::read_to_string(path).is_ok_and(|s| !s.trim().is_empty())
    })
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

#[test]
fn four_shells_incrementing_one_counter_never_overlap() {
    let cluster = Cluster::start(3);
    let dir = tmp("counter");
    let counter = dir.join("n");
    std::fs::write(&counter, "0").unwrap();
    // Read, pause, write: two holders at once would lose an increment.
    let script = format!(
        "n=$(cat {0}); sleep 0.005; echo $((n + 1)) > {0}",
        counter.display()
    );
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..15 {
                    let o = output(redlock(
                        &cluster,
                        "run",
                        &["--ttl", "10s", "counter", "--", "sh", "-c", &script],
                    ));
                    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
                }
            });
        }
    });
    let n: u32 = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(n, 60);
    assert!(absent_on(&cluster, "counter") >= quorum(&cluster));
}

#[test]
fn a_busy_lock_exits_75_without_running_the_command() {
    let cluster = Cluster::start(3);
    let client = cluster.client();
    let held = client.lock("busy", Duration::from_secs(30)).unwrap();
    let dir = tmp("busy");
    let marker = dir.join("ran");
    let touch = format!("touch {}", marker.display());

    let o = output(redlock(
        &cluster,
        "run",
        &["--wait", "0", "busy", "--", "sh", "-c", &touch],
    ));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("held by another owner"),
        "{}",
        stderr(&o)
    );

    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--conflict-exit-code",
            "3",
            "--wait",
            "0",
            "busy",
            "--",
            "sh",
            "-c",
            &touch,
        ],
    ));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));

    let started = Instant::now();
    let o = output(redlock(
        &cluster,
        "run",
        &["--wait", "300ms", "busy", "--", "sh", "-c", &touch],
    ));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!marker.exists(), "the command ran without the lock");
    // The holder's key is untouched.
    assert!(cluster.holding("busy", held.token()) >= quorum(&cluster));
    held.release().unwrap();
}

#[test]
fn the_commands_exit_code_passes_through_and_the_lock_is_released() {
    let cluster = Cluster::start(3);
    for (script, code) in [
        ("exit 0", 0),
        ("exit 7", 7),
        ("kill -TERM $$", 128 + libc::SIGTERM),
        ("kill -KILL $$", 128 + libc::SIGKILL),
    ] {
        let o = output(redlock(
            &cluster,
            "run",
            &["--ttl", "30s", "codes", "--", "sh", "-c", script],
        ));
        assert_eq!(o.status.code(), Some(code), "{script}: {}", stderr(&o));
        // Released at once, not left to its 30 s TTL.
        assert!(absent_on(&cluster, "codes") >= quorum(&cluster), "{script}");
    }
    // A command that cannot be run: the shell's 127, and the lock released.
    let o = output(redlock(
        &cluster,
        "run",
        &["codes", "--", "/nonexistent/redlock-test-command"],
    ));
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(absent_on(&cluster, "codes") >= quorum(&cluster));
}

#[test]
fn the_child_sees_the_resource_token_and_fence() {
    let cluster = Cluster::start(3);
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "env-check",
            "--",
            "sh",
            "-c",
            "echo \"$REDLOCK_RESOURCE ${REDLOCK_TOKEN:-none} ${REDLOCK_FENCE:-nofence}\"",
        ],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let parts: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(parts[0], "env-check");
    assert_eq!(parts[1].len(), 40, "{out}");
    assert_eq!(parts[2], "nofence");
}

#[test]
fn fenced_tokens_strictly_increase_across_runs() {
    let cluster = Cluster::start(3);
    let mut fences = Vec::new();
    for _ in 0..5 {
        let o = output(redlock(
            &cluster,
            "run",
            &[
                "--fenced",
                "fenced",
                "--",
                "sh",
                "-c",
                "echo $REDLOCK_FENCE",
            ],
        ));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let fence: u64 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
        fences.push(fence);
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[test]
fn keys_deleted_by_hand_kill_the_command_and_exit_70() {
    let cluster = Cluster::start(3);
    let dir = tmp("deleted");
    let started = dir.join("started");
    let script = format!("echo $$ > {}; exec sleep 60", started.display());
    let mut child = redlock(
        &cluster,
        "run",
        &[
            "--ttl",
            "3s",
            "--kill-grace",
            "1s",
            "gone",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(wait_for_file(&started, Duration::from_secs(10)));
    for node in &cluster.nodes {
        node.del("gone");
    }
    let deleted = Instant::now();
    // The next extension (every 1 s) finds the key gone.
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("redlock ended");
    assert!(deleted.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(70));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("lost the lock"), "{err}");
    let pid: i32 = std::fs::read_to_string(&started)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: probing a pid with signal 0.
    assert!(unsafe { libc::kill(pid, 0) } != 0, "the command still runs");
}

#[test]
fn a_partition_kills_the_command_before_the_validity_ends() {
    let cluster = Cluster::start(3);
    let dir = tmp("partition");
    let beats = dir.join("beats");
    // Ignores SIGTERM, so only the SIGKILL before the end of the validity stops it. Each beat
    // is a time in ms; the first comes after the acquisition.
    let script = format!(
        "trap '' TERM; while :; do echo $(($(date +%s%N) / 1000000)) >> {}; sleep 0.02; done",
        beats.display()
    );
    let ttl = Duration::from_secs(3);
    let mut child = redlock(
        &cluster,
        "run",
        &[
            "--ttl",
            "3s",
            "--kill-grace",
            "1s",
            "part",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .args(["--node-timeout", "200ms"])
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(wait_for_file(&beats, Duration::from_secs(10)));
    // A majority hangs before the first extension (due 1 s after the acquisition).
    cluster.nodes[0].hang();
    cluster.nodes[1].hang();
    let status = wait_timeout(&mut child, Duration::from_secs(15)).expect("redlock ended");
    cluster.nodes[0].resume();
    cluster.nodes[1].resume();
    assert_eq!(status.code(), Some(70));
    let text = std::fs::read_to_string(&beats).unwrap();
    let times: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let (first, last) = (times[0], *times.last().unwrap());
    // The lock's validity ends at most `ttl` after the acquisition, which came before the first
    // beat; the command beat for the last time before that.
    // SIGKILL is due half the grace (500 ms) before the end; a quarter second of that may go
    // to a loaded machine's scheduling.
    assert!(
        last - first < ttl.as_millis() as u64 - 250,
        "the command ran {} ms, past the lock's {} ms",
        last - first,
        ttl.as_millis()
    );
    // And it was not killed at once: the watchdog waited for the grace period.
    assert!(last - first > 1000, "killed after only {} ms", last - first);
    // Nothing beats any more.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::read_to_string(&beats).unwrap(), text);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("cannot extend") && err.contains("SIGKILL"),
        "{err}"
    );
}

#[test]
fn a_forced_release_removes_the_keys_and_kills_the_holders_command() {
    let cluster = Cluster::start(3);
    let dir = tmp("forced");
    let started = dir.join("started");
    let script = format!("echo $REDLOCK_TOKEN > {}; exec sleep 60", started.display());
    let mut child = redlock(
        &cluster,
        "run",
        &[
            "--ttl",
            "3s",
            "--kill-grace",
            "1s",
            "stuck",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(wait_for_file(&started, Duration::from_secs(10)));
    let token = std::fs::read_to_string(&started).unwrap().trim().to_owned();
    // The lock returns on a quorum, and the last SET may be sent up to the node timeout later:
    // wait for it, or it could land after the forced release.
    assert!(eventually(Duration::from_secs(5), || {
        cluster.holding("stuck", &token) == cluster.nodes.len()
    }));

    // Another token: nothing is removed, and the exit code says the lock is busy.
    let o = output(redlock(
        &cluster,
        "release",
        &["--force", "--token", "not-the-holder", "stuck"],
    ));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(cluster.holding("stuck", &token) >= quorum(&cluster));

    let o = output(redlock(
        &cluster,
        "release",
        &["--force", "--token", &token, "stuck"],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The forced release waits for every node up to the node timeout; each node it reports
    // deleted or absent holds the key no longer, and they are a quorum (exit 0).
    let out = String::from_utf8_lossy(&o.stdout);
    let confirmed: Vec<&RedisNode> = cluster
        .nodes
        .iter()
        .filter(|n| {
            out.lines().any(|l| {
                l.contains(&format!(":{} ", n.port))
                    && (l.contains("deleted") || l.contains("absent"))
            })
        })
        .collect();
    assert!(confirmed.len() >= quorum(&cluster), "{out}");
    for n in confirmed {
        assert_eq!(
            n.pttl("stuck"),
            -2,
            "node {} reported it gone: {out}",
            n.port
        );
    }
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("redlock ended");
    assert_eq!(status.code(), Some(70));
}

/// A lost lock (here: `release --force` from another shell) may already be someone else's, so
/// the command gets SIGKILL at once, with no grace, whether it would have trapped SIGTERM or
/// died of it; redlock says so, and nothing else, and exits 70.
#[test]
fn a_lost_lock_kills_the_command_at_once_and_says_so() {
    let cluster = Cluster::start(3);
    let dir = tmp("lost");
    for (name, body) in [
        // Would run its trap, and exit 0, on SIGTERM.
        (
            "traps-term",
            "trap 'echo trapped > {trapped}; exit 0' TERM; while :; do sleep 0.05; done",
        ),
        // Would die of SIGTERM.
        ("dies-of-term", "exec sleep 60"),
    ] {
        let started = dir.join(format!("{name}.started"));
        let trapped = dir.join(format!("{name}.trapped"));
        let script = format!(
            "echo $$ > {}; {}",
            started.display(),
            body.replace("{trapped}", &trapped.display().to_string())
        );
        let mut child = redlock(
            &cluster,
            "run",
            &["--ttl", "3s", name, "--", "sh", "-c", &script],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        assert!(wait_for_file(&started, Duration::from_secs(10)), "{name}");
        let o = output(redlock(&cluster, "release", &["--force", name]));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        // The next extension (every second) finds the lock lost.
        let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("redlock ended");
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(70), "{name}: {err}");
        assert!(
            err.contains("lost the lock on") && err.contains("SIGKILL at once"),
            "{name}: {err}"
        );
        assert!(!err.contains("still running"), "{name}: {err}");
        assert!(
            !err.contains("SIGTERM"),
            "{name}: no SIGTERM is sent: {err}"
        );
        assert!(err.contains("its exit code was 137"), "{name}: {err}");
        assert!(
            !trapped.exists(),
            "{name}: the command got a SIGTERM to trap"
        );
        let pid: i32 = std::fs::read_to_string(&started)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: probing a pid with signal 0.
        assert!(
            unsafe { libc::kill(pid, 0) } != 0,
            "{name}: the command still runs"
        );
    }
}

#[test]
fn sigint_is_forwarded_and_the_lock_released_at_once() {
    let cluster = Cluster::start(3);
    let dir = tmp("sigint");
    let ready = dir.join("ready");
    let script = format!(
        "trap 'exit 3' INT; echo ok > {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let mut child = redlock(
        &cluster,
        "run",
        &["--ttl", "30s", "forward", "--", "sh", "-c", &script],
    )
    .spawn()
    .unwrap();
    assert!(wait_for_file(&ready, Duration::from_secs(10)));
    assert!(absent_on(&cluster, "forward") < quorum(&cluster));
    signal(&child, libc::SIGINT);
    let status = wait_timeout(&mut child, Duration::from_secs(5)).expect("redlock ended");
    assert_eq!(status.code(), Some(3));
    // Released when redlock returned, not left to the 30 s TTL.
    assert!(absent_on(&cluster, "forward") >= quorum(&cluster));
}

#[test]
fn ctrl_c_while_waiting_gives_up_and_leaves_no_key() {
    let cluster = Cluster::start(3);
    let client = cluster.client();
    let held = client.lock("waiting", Duration::from_secs(30)).unwrap();
    let dir = tmp("waiting");
    let marker = dir.join("ran");
    let mut child = redlock(
        &cluster,
        "run",
        &["waiting", "--", "touch", marker.to_str().unwrap()],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Waiting: it listens for the release (its signal handlers come before its client).
    assert!(eventually(Duration::from_secs(10), || cluster
        .nodes
        .iter()
        .any(|node| node.release_subscribers("waiting") > 0)));
    signal(&child, libc::SIGINT);
    let status = wait_timeout(&mut child, Duration::from_secs(5)).expect("redlock ended");
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    assert!(!marker.exists());
    // Only the holder's key is there; once it lets go, the resource is free.
    assert!(cluster.holding("waiting", held.token()) >= quorum(&cluster));
    held.release().unwrap();
    assert!(absent_on(&cluster, "waiting") >= quorum(&cluster));
}

/// One rule for every command: 0 when what was asked is so (held, leads, released), 3 when the
/// nodes answered that nobody holds or leads, 75 when another owner holds it, 69 when too few
/// nodes answered to tell.
#[test]
fn exit_codes_follow_one_rule_across_commands() {
    let mut cluster = Cluster::start(3);
    let code = |cluster: &Cluster, sub: &str, args: &[&str]| {
        let o = output(redlock(cluster, sub, args));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    // Nobody holds it, nobody leads: 3 for both, with or without --json.
    let (c, out) = code(&cluster, "status", &["free"]);
    assert_eq!(c, Some(3), "{out}");
    assert!(out.contains("free: not held"), "{out}");
    assert_eq!(code(&cluster, "status", &["--json", "free"]).0, Some(3));
    assert_eq!(
        code(&cluster, "status", &["--permits", "2", "pool"]).0,
        Some(3)
    );
    assert_eq!(code(&cluster, "leader", &["nobody"]).0, Some(3));
    // Releasing what nobody holds leaves it released: done.
    assert_eq!(code(&cluster, "release", &["--force", "free"]).0, Some(0));

    let client = cluster.client();
    let ttl = Duration::from_secs(20);
    let lock = client.lock("held", ttl).unwrap();
    let permit = client
        .acquire(&redquorum::LockRequest::new("pool", ttl).semaphore(2))
        .unwrap();
    assert_eq!(code(&cluster, "status", &["held"]).0, Some(0));
    assert_eq!(
        code(&cluster, "status", &["--permits", "2", "pool"]).0,
        Some(0)
    );
    // Held by another token: busy, as for a run that finds it held.
    let (c, _) = code(
        &cluster,
        "release",
        &["--force", "--token", "someone-else", "held"],
    );
    assert_eq!(c, Some(75));
    assert!(cluster.holding("held", lock.token()) >= quorum(&cluster));
    permit.release().unwrap();

    // Too few nodes answer to tell: 69, whatever the key holds.
    cluster.nodes[0].kill();
    cluster.nodes[1].kill();
    for (sub, args) in [
        ("status", &["held"][..]),
        ("status", &["free"]),
        ("leader", &["nobody"]),
        ("release", &["--force", "held"]),
        ("nodes", &[]),
    ] {
        assert_eq!(code(&cluster, sub, args).0, Some(69), "{sub} {args:?}");
    }
}

#[test]
fn status_json_matches_the_nodes() {
    let mut cluster = Cluster::start(3);
    let client = cluster.client();
    let lock = client
        .acquire(&redquorum::LockRequest::new("shown", Duration::from_secs(20)).fenced())
        .unwrap();
    let o = output(redlock(&cluster, "status", &["--json", "shown"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["resource"], "shown");
    assert_eq!(v["held"], true);
    assert_eq!(v["holder"], lock.token());
    // The highest counter: the token, or a node's own later reading (its acquire came after
    // the decision).
    assert!(v["fence"].as_u64().unwrap() >= lock.fence().unwrap(), "{v}");
    let nodes = v["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    let expected: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    assert_eq!(names, expected);
    let with_token = nodes
        .iter()
        .filter(|n| {
            n["error"].is_null()
                && n["token"] == lock.token()
                && n["ttl_ms"].as_u64().is_some_and(|t| t > 0 && t <= 20_000)
        })
        .count();
    assert!(with_token >= quorum(&cluster), "{v}");

    // A node down: its row has the error, the rest still answer. The two left must both hold
    // the key for it to show as held, and the lock returned on a quorum: the last node's SET
    // may be sent up to the node timeout later.
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .holding("shown", lock.token())
            == cluster.nodes.len()),
        "every node gets the lock's key"
    );
    cluster.nodes[2].kill();
    let o = output(redlock(&cluster, "status", &["--json", "shown"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["nodes"][2]["error"].is_string(), "{v}");
    assert!(v["nodes"][2]["ttl_ms"].is_null());
    assert_eq!(v["held"], true);

    // Released: not held, no TTL, the fence counter stays.
    lock.release().unwrap();
    let o = output(redlock(&cluster, "status", &["--json", "shown"]));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["held"], false);
    assert!(v["holder"].is_null());
    assert!(v["fence"].as_u64().is_some());
    let absent = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["error"].is_null() && n["ttl_ms"].is_null() && n["key"] == "absent")
        .count();
    assert!(absent >= quorum(&cluster), "{v}");

    // A password never shows.
    let o = output(
        redlock(&cluster, "status", &["--json", "shown"]).env(
            "REDLOCK_NODES",
            cluster
                .nodes
                .iter()
                .map(|n| format!("redis://:hunter2@127.0.0.1:{}", n.port))
                .collect::<Vec<_>>()
                .join(","),
        ),
    );
    let text = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
    assert!(!text.contains("hunter2"), "{text}");
}

/// No password shows, whatever it holds, however the URLs are given: `REDLOCK_NODES`, `--nodes`
/// (split on commas and white space) and `--nodes-file` (with `#` comments). The secrets are
/// `L3FT` and `R1GHT`, around each character that ends a part of a URL or a list item.
#[test]
fn no_password_shows_whatever_it_holds() {
    let dir = tmp("secrets");
    let file = dir.join("nodes");
    let mut urls = Vec::new();
    for c in ['#', '/', '?', '&', '@', ':', '%', '+', ' ', ','] {
        for (scheme, path) in [
            ("redis", ""),
            ("redis+sentinel", "/m"),
            ("redis+cluster", ""),
        ] {
            urls.push(format!(
                "{scheme}://localhost{c}x:L3FT-R1GHT@127.0.0.1:1{path}"
            ));
            urls.push(format!("{scheme}://u:L3FT{c}R1GHT@127.0.0.1:1{path}"));
        }
        urls.push(format!(
            "redis+sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=L3FT{c}R1GHT"
        ));
        urls.push(format!(
            "redis+sentinel://127.0.0.1:1/m?sentinel_password=L3FT{c}R1GHT&sentinel=127.0.0.1:2"
        ));
    }
    let (mut refused, mut leaks) = (0, Vec::new());
    for url in &urls {
        std::fs::write(&file, format!("# the node\n{url}\n")).unwrap();
        let base = || {
            let mut c = Command::new(BIN);
            c.args(["nodes", "--node-timeout", "50ms"])
                .env_remove("REDLOCK_NODES")
                .stdin(Stdio::null());
            c
        };
        let mut from_env = base();
        from_env.env("REDLOCK_NODES", url);
        let mut from_option = base();
        from_option.args(["--nodes", url]);
        let mut from_file = base();
        from_file.arg("--nodes-file").arg(&file);
        for (how, c) in [
            ("REDLOCK_NODES", from_env),
            ("--nodes", from_option),
            ("--nodes-file", from_file),
        ] {
            let o = output(c);
            let text = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
            if text.contains("L3FT") || text.contains("R1GHT") {
                leaks.push(format!("{url} in {how} shows: {text}"));
            }
            if o.status.code() == Some(64) {
                refused += 1;
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks in {} runs:\n{}",
        leaks.len(),
        urls.len() * 3,
        leaks.join("\n")
    );
    assert!(
        refused > 60,
        "only {refused} refused: the table tests too little"
    );
}

/// A default never refuses a valid option: `--ttl 5s` once exited 64 because the default
/// `--kill-grace` (5 s) did not fit in it.
#[test]
fn a_short_ttl_runs_with_the_default_grace_or_is_refused_naming_one_that_works() {
    let cluster = Cluster::start(1);
    let run = |ttl: &str| {
        output(redlock(
            &cluster,
            "run",
            &["--ttl", ttl, "short", "--", "sh", "-c", "exit 3"],
        ))
    };
    for ttl in ["5s", "1s"] {
        let o = run(ttl);
        // The command ran (its code passes through) and released the lock.
        assert_eq!(o.status.code(), Some(3), "--ttl {ttl}: {}", stderr(&o));
        assert_eq!(absent_on(&cluster, "short"), 1, "--ttl {ttl}");
    }
    // With a 500 ms node timeout a 60 ms TTL leaves no time to stop a command before the
    // lock would end: refused, naming the shortest TTL that works, and that one does.
    let o = run("60ms");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(64), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let named = err
        .split("use --ttl ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("no TTL named: {err}"))
        .to_owned();
    let o = run(&named);
    assert_eq!(o.status.code(), Some(3), "--ttl {named}: {}", stderr(&o));
}

#[test]
fn bad_arguments_exit_64_with_one_line() {
    let cluster = Cluster::start(1);
    let dir = tmp("bad");
    let marker = dir.join("ran");
    let touch = marker.to_str().unwrap().to_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["frobnicate"],
        vec!["run"],
        vec!["run", "r"],
        vec!["run", "--bogus", "r", "--", "touch", &touch],
        vec!["run", "--ttl", "abc", "r", "--", "touch", &touch],
        vec!["run", "--ttl", "-3s", "r", "--", "touch", &touch],
        vec!["run", "--ttl", "0", "r", "--", "touch", &touch],
        vec!["run", "--wait", "5d", "r", "--", "touch", &touch],
        vec![
            "run",
            "--ttl",
            "10s",
            "--kill-grace",
            "9s",
            "r",
            "--",
            "touch",
            &touch,
        ],
        vec!["run", "--kill-grace", "0", "r", "--", "touch", &touch],
        vec!["run", "--kill-signal", "NOPE", "r", "--", "touch", &touch],
        vec![
            "run",
            "--conflict-exit-code",
            "300",
            "r",
            "--",
            "touch",
            &touch,
        ],
        vec!["run", "--nodes", "http://x", "r", "--", "touch", &touch],
        vec!["run", "--nodes", ",", "r", "--", "touch", &touch],
        vec!["run", "", "--", "touch", &touch],
        vec![
            "run",
            "--shared",
            "--permits",
            "2",
            "r",
            "--",
            "touch",
            &touch,
        ],
        vec!["run", "--shared", "--fenced", "r", "--", "touch", &touch],
        vec![
            "run",
            "--fenced",
            "--permits",
            "2",
            "r",
            "--",
            "touch",
            &touch,
        ],
        vec!["run", "--permits", "0", "r", "--", "touch", &touch],
        vec!["run", "--permits", "1025", "r", "--", "touch", &touch],
        vec!["run", "--permits", "two", "r", "--", "touch", &touch],
        vec!["status"],
        vec!["status", "a", "b"],
        vec!["release", "r"],
        vec!["release", "--force", "--token", "", "r"],
        vec!["nodes", "extra"],
    ];
    for args in cases {
        let mut c = Command::new(BIN);
        c.args(&args)
            .env("REDLOCK_NODES", cluster.urls().join(","))
            .stdin(Stdio::null());
        let o = output(c);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("redlock: "), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // No nodes at all.
    let o = output({
        let mut c = Command::new(BIN);
        c.args(["run", "r", "--", "touch", &touch])
            .env_remove("REDLOCK_NODES");
        c
    });
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains("REDLOCK_NODES"), "{}", stderr(&o));
    assert!(!marker.exists(), "a bad invocation ran the command");

    // Every subcommand has its help, on stdout with exit 0.
    for sub in ["run", "status", "release", "nodes"] {
        let o = output({
            let mut c = Command::new(BIN);
            c.args([sub, "--help"]);
            c
        });
        assert_eq!(o.status.code(), Some(0), "{sub}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: redlock"));
    }
}

/// Options read as they always have: a repeated option takes its last value, so that a script
/// may add to a default set (`redlock run $DEFAULTS --ttl 5s ...`), and a value may start with a
/// dash (a reentrant owner or an identity of the user's choosing).
#[test]
fn a_repeated_option_takes_its_last_value_and_a_value_may_start_with_a_dash() {
    let cluster = Cluster::start(1);
    // --ttl 60ms alone is refused as too short (64); given last, 5s is the TTL.
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--ttl", "60ms", "--ttl", "5s", "--fenced", "--fenced", "twice", "--", "sh", "-c",
            "exit 3",
        ],
    ));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = output(redlock(&cluster, "status", &["--json", "--json", "twice"]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = output(redlock(
        &cluster,
        "release",
        &["--force", "--token", "-owner", "twice"],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn no_quorum_exits_69() {
    let mut cluster = Cluster::start(3);
    cluster.nodes[0].kill();
    cluster.nodes[1].kill();
    let o = output(redlock(
        &cluster,
        "run",
        &["--wait", "0", "down", "--", "true"],
    ));
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    let o = output(redlock(&cluster, "nodes", &["--json"]));
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let reachable: Vec<bool> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["reachable"].as_bool().unwrap())
        .collect();
    assert_eq!(reachable, [false, false, true]);
    // The live node says which server it is, on Redis and on Valkey alike.
    let server = v[2]["server"].as_str().unwrap_or_default();
    assert!(server == "redis" || server == "valkey", "{v}");
    assert!(
        v[2]["server_version"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{v}"
    );
}

/// A `redlock run` in the background whose command writes `$REDLOCK_PERMIT` (or "held") to
/// `marker`, then sleeps `hold`.
fn background_run(
    cluster: &Cluster,
    flags: &[&str],
    resource: &str,
    marker: &Path,
    hold: &str,
) -> Child {
    let script = format!(
        "echo ${{REDLOCK_PERMIT:-held}} > {}; sleep {hold}",
        marker.display()
    );
    let mut args: Vec<&str> = flags.to_vec();
    args.extend([resource, "--", "sh", "-c", &script]);
    redlock(cluster, "run", &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn shared_runs_overlap() {
    let cluster = Cluster::start(3);
    let dir = tmp("shared");
    let (a, b) = (dir.join("a"), dir.join("b"));
    // Each run, while holding, waits to see the other one start: only overlapping holders can
    // both succeed (excluding runs would leave the first waiting for the second until exit 3).
    let script = |mine: &Path, theirs: &Path| {
        format!(
            "touch {0}; i=0; while [ ! -e {1} ]; do i=$((i + 1)); [ $i -gt 200 ] && exit 3; \
             sleep 0.05; done",
            mine.display(),
            theirs.display()
        )
    };
    let (sa, sb) = (script(&a, &b), script(&b, &a));
    std::thread::scope(|s| {
        for script in [&sa, &sb] {
            s.spawn(|| {
                let o = output(redlock(
                    &cluster,
                    "run",
                    &[
                        "--shared", "--ttl", "10s", "shared", "--", "sh", "-c", script,
                    ],
                ));
                assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            });
        }
    });
    assert!(absent_on(&cluster, "shared") >= quorum(&cluster));
}

#[test]
fn a_plain_run_and_a_shared_run_exclude_each_other() {
    let cluster = Cluster::start(3);
    let dir = tmp("rw");
    let touch = dir.join("ran");
    let touch_cmd = format!("touch {}", touch.display());
    for (holder, other) in [(&[][..], &["--shared"][..]), (&["--shared"][..], &[][..])] {
        let marker = dir.join(format!("held{}", holder.len()));
        let mut child = background_run(&cluster, holder, "rw", &marker, "3");
        assert!(
            wait_for_file(&marker, Duration::from_secs(10)),
            "the holder never ran"
        );
        let mut args: Vec<&str> = other.to_vec();
        args.extend(["--wait", "0", "rw", "--", "sh", "-c", &touch_cmd]);
        let o = output(redlock(&cluster, "run", &args));
        assert_eq!(
            o.status.code(),
            Some(75),
            "{holder:?} then {other:?}: {}",
            stderr(&o)
        );
        assert!(!touch.exists(), "{other:?} ran beside {holder:?}");
        let status = wait_timeout(&mut child, Duration::from_secs(30)).expect("holder ends");
        assert!(status.success());
    }
    // Once free, a shared run gets in.
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--shared", "--wait", "0", "rw", "--", "sh", "-c", &touch_cmd,
        ],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(touch.exists());
}

#[test]
fn permits_let_two_runs_in_and_not_a_third() {
    let cluster = Cluster::start(3);
    let dir = tmp("permits");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let mut first = background_run(&cluster, &["--permits", "2"], "pool", &a, "4");
    let mut second = background_run(&cluster, &["--permits", "2"], "pool", &b, "4");
    assert!(
        wait_for_file(&a, Duration::from_secs(10)) && wait_for_file(&b, Duration::from_secs(10))
    );
    let mut permits: Vec<String> = [&a, &b]
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().trim().to_owned())
        .collect();
    permits.sort();
    assert_eq!(permits, ["0", "1"]);
    let touch = dir.join("ran");
    let touch_cmd = format!("touch {}", touch.display());
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--permits",
            "2",
            "--wait",
            "0",
            "pool",
            "--",
            "sh",
            "-c",
            &touch_cmd,
        ],
    ));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    // Another number of permits for the same semaphore is a usage error, on one line.
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--permits",
            "3",
            "--wait",
            "0",
            "pool",
            "--",
            "sh",
            "-c",
            &touch_cmd,
        ],
    ));
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(!touch.exists(), "a third permit ran");
    for child in [&mut first, &mut second] {
        assert!(
            wait_timeout(child, Duration::from_secs(30))
                .expect("holder ends")
                .success()
        );
    }
    let o = output(redlock(
        &cluster,
        "run",
        &[
            "--permits",
            "2",
            "--wait",
            "0",
            "pool",
            "--",
            "sh",
            "-c",
            &touch_cmd,
        ],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(touch.exists());
}

#[test]
fn status_shows_the_readers_and_a_semaphores_slots() {
    let cluster = Cluster::start(3);
    let client = cluster.client();
    let ttl = Duration::from_secs(20);
    let a = client
        .acquire(&redquorum::LockRequest::new("readers", ttl).read())
        .unwrap();
    let b = client
        .acquire(&redquorum::LockRequest::new("readers", ttl).read())
        .unwrap();
    let o = output(redlock(&cluster, "status", &["--json", "readers"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["held"], true);
    let with_both = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            let Some(readers) = n["readers"].as_array() else {
                return false;
            };
            let mut tokens: Vec<&str> = readers
                .iter()
                .map(|r| r["token"].as_str().unwrap())
                .collect();
            tokens.sort_unstable();
            let mut want = [a.token(), b.token()];
            want.sort_unstable();
            n["key"] == "readers"
                && tokens == want
                && readers
                    .iter()
                    .all(|r| r["ttl_ms"].as_u64().is_some_and(|t| t > 0 && t <= 20_000))
        })
        .count();
    assert!(with_both >= quorum(&cluster), "{v}");
    let o = output(redlock(&cluster, "status", &["readers"]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("readers ") && text.contains(a.token()) && text.contains(b.token()),
        "{text}"
    );
    a.release().unwrap();
    b.release().unwrap();

    let permit = client
        .acquire(&redquorum::LockRequest::new("pool", ttl).semaphore(2))
        .unwrap();
    let slot = permit.permit().unwrap() as usize;
    let o = output(redlock(
        &cluster,
        "status",
        &["--permits", "2", "--json", "pool"],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["permits"], 2);
    let slots = v["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 2);
    assert_eq!(slots[slot]["holder"], permit.token(), "{v}");
    assert_eq!(slots[1 - slot]["held"], false, "{v}");
    let stored = v["stored_permits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| **l == 2)
        .count();
    assert!(stored >= quorum(&cluster), "{v}");
    let o = output(redlock(&cluster, "status", &["--permits", "2", "pool"]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1 of 2 permits held") && text.contains(permit.token()),
        "{text}"
    );
    permit.release().unwrap();
    // --permits is a number from 1 to 1024.
    for bad in ["0", "1025", "x"] {
        let o = output(redlock(&cluster, "status", &["--permits", bad, "pool"]));
        assert_eq!(o.status.code(), Some(64), "{bad}");
    }
}
