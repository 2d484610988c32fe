//! `redlock run` and `redlock elect` SIGKILLed while their command runs: the command's whole
//! tree (its background children, and a daemon that double-forked into a session of its own)
//! dies while the lock is still live, before anyone else can take it.

#![cfg(target_os = "linux")]

#[path = "../../tests/support/mod.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{Cluster, eventually};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// The state letter and start time (clock ticks after boot) of a process, from
/// `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields start after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some((
        fields.first()?.chars().next()?,
        fields.get(19)?.parse().ok()?,
    ))
}

/// A process of the command's tree: `sleep SECONDS`, SECONDS unique to this test.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sleeper {
    pid: i32,
    start: u64,
}

impl Sleeper {
    /// Running (not a zombie), and still the same process.
    fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|(state, start)| start == self.start && !"ZX".contains(state))
    }
}

/// Every running `sleep SECONDS`, wherever it is in the process tree.
fn sleepers(seconds: &str) -> Vec<Sleeper> {
    let want = format!("sleep\0{seconds}\0");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let matches =
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == want.as_bytes());
        if let Some((_, start)) = stat(pid).filter(|_| matches) {
            let s = Sleeper { pid, start };
            if s.alive() {
                out.push(s);
            }
        }
    }
    out
}

/// SIGKILLs what is left of a failed test's sleepers.
struct Reap(Vec<Sleeper>);

impl Drop for Reap {
    fn drop(&mut self) {
        for s in self.0.iter().filter(|s| s.alive()) {
            // SAFETY: kill(2) of a process this test started (its start time checked).
            unsafe {
                libc::kill(s.pid, libc::SIGKILL);
            }
        }
    }
}

/// A command whose tree is three sleepers: one in the background of `sh`, one `sh` waits
/// for, and one that `setsid` moved into a session (and process group) of its own after its
/// parent, a subshell, exited: a double-forked daemon. `tag` tells the tests apart.
fn command(tag: u32) -> ([String; 3], String) {
    let seconds = [1, 2, 3].map(|k| format!("{tag}{k}{:07}", std::process::id()));
    let script = format!(
        "sleep {} & (setsid sleep {} &); sleep {}; wait",
        seconds[0], seconds[2], seconds[1]
    );
    (seconds, script)
}

/// Starts `redlock ARGS -- sh -c SCRIPT`, waits for the three sleepers, SIGKILLs redlock,
/// and checks that every sleeper is gone within the validity `key` has left on the nodes
/// then, and that the key was still live on a quorum when they were.
fn killed_redlock_takes_the_tree_along(cluster: &Cluster, args: &[&str], key: &str, tag: u32) {
    let (seconds, script) = command(tag);
    let mut redlock: Child = Command::new(BIN)
        .args(args)
        .args(["--node-timeout", "500ms"])
        .args(["--", "sh", "-c", &script])
        .env("REDLOCK_NODES", cluster.urls().join(","))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut found: Vec<Sleeper> = Vec::new();
    let started = eventually(Duration::from_secs(20), || {
        found = seconds.iter().flat_map(|s| sleepers(s)).collect();
        found.len() == seconds.len()
    });
    let _reap = Reap(found.clone());
    if !started {
        let _ = redlock.kill();
    }
    assert!(
        started,
        "the command's three sleepers did not start: {found:?}"
    );

    redlock.kill().unwrap();
    redlock.wait().unwrap();
    // The lock cannot be anyone else's before the first of its keys expires. It returned on a
    // quorum: the last node's SET may have been still queued in the process just killed.
    let pttls: Vec<i64> = cluster.nodes.iter().map(|n| n.pttl(key)).collect();
    let held: Vec<i64> = pttls.iter().copied().filter(|&t| t > 0).collect();
    assert!(
        held.len() > cluster.nodes.len() / 2,
        "{key} was not live on a quorum when the test killed redlock: PTTLs {pttls:?}"
    );
    let validity = *held.iter().min().unwrap();
    let gone = eventually(Duration::from_millis(validity as u64), || {
        found.iter().all(|s| !s.alive())
    });
    let live = cluster.nodes.iter().filter(|n| n.pttl(key) > 0).count();
    let survivors: Vec<&Sleeper> = found.iter().filter(|s| s.alive()).collect();
    assert!(
        gone,
        "still running {validity} ms after redlock was SIGKILLed: {survivors:?} (of {found:?})"
    );
    assert!(
        live > cluster.nodes.len() / 2,
        "the command's tree died only after the lock expired"
    );
}

#[test]
fn a_killed_run_takes_its_commands_whole_tree_along() {
    let cluster = Cluster::start(3);
    killed_redlock_takes_the_tree_along(&cluster, &["run", "--ttl", "3s", "tree"], "tree", 1);
}

#[test]
fn a_killed_elect_takes_its_commands_whole_tree_along() {
    let cluster = Cluster::start(3);
    killed_redlock_takes_the_tree_along(
        &cluster,
        &["elect", "--ttl", "3s", "tree"],
        "redlock:election:tree",
        2,
    );
}
