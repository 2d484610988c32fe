//! A pause of the client's whole VM, which the client's own clocks do not show.
//!
//! A hypervisor that pauses a VM stops the guest's clocks: after the resume, `CLOCK_MONOTONIC`
//! (and so `Instant` and every lock's validity) reads as if no time had passed, and the kernel's
//! suspend counter (`CLOCK_BOOTTIME − CLOCK_MONOTONIC`) has not grown. Meanwhile the nodes'
//! clocks ran on, expired the holder's keys and let another client take the lock. SIGSTOP alone
//! does not model this (the stopped process's monotonic clock keeps running, so it sees its
//! validity gone on resume); the client here runs under `tests/support/pauseshift.c`, which
//! takes the pause's length off its monotonic clocks.
//!
//! The holder can only learn of the pause from the nodes: the first time it talks to them, every
//! node's clock has moved on by the pause more than its own. From then on every lock it held
//! across the pause must be reported lost. Two ways it talks to them:
//! - another acquisition of the same client (its batches carry `TIME`);
//! - the extender extending another, auto-extended lock (extensions carry `TIME` too).
//!
//! What no one can do is warn a holder that acts before any node contact: that window is what
//! fencing tokens are for (`src/kinds/fenced.rs`).
//!
//! A plain stop and continue of the client's process mid-call (SIGSTOP, then SIGCONT: its
//! clocks run on) has a case here too, since it needs the same holder process:
//! `a_stop_and_continue_mid_call_holds_no_node_against_the_next_call`.
//!
//! Its own `main`: the holder is this binary run again with `--holder`.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use redquorum::{AutoExtend, Error, LockRequest, NodeProblem, Redlock};
use support::{Cluster, eventually};

/// The lock the paused holder keeps; its keys expire during the pause.
const TTL: Duration = Duration::from_secs(3);
/// The pause: longer than the TTL.
const PAUSE: Duration = Duration::from_secs(5);
/// The auto-extended lock whose extension is the node contact in the second case: longer than
/// the pause, so its keys survive it and its extension succeeds; extended every third.
const LONG_TTL: Duration = Duration::from_secs(12);

fn main() {
    let cases: &[(&str, fn())] = &[
        (
            "an_acquisition_after_a_vm_pause_reports_the_held_lock_lost",
            an_acquisition_after_a_vm_pause_reports_the_held_lock_lost,
        ),
        (
            "an_extension_after_a_vm_pause_reports_the_held_lock_lost",
            an_extension_after_a_vm_pause_reports_the_held_lock_lost,
        ),
        (
            "a_stop_and_continue_mid_call_holds_no_node_against_the_next_call",
            a_stop_and_continue_mid_call_holds_no_node_against_the_next_call,
        ),
    ];
    support::own_harness("--holder", |a: &[String]| holder(&a[0], &a[1]), cases);
}

// ---------------------------------------------------------------------------------------------
// The holder: a client process that takes "pause:held" and answers the test's commands.

fn holder(nodes: &str, mode: &str) {
    let urls: Vec<&str> = nodes.split(',').collect();
    // The clock guard's defaults (it is on by default); patient with the nodes.
    let rl = Redlock::builder()
        .nodes(&urls)
        .node_timeout(support::NODE_TIMEOUT)
        .retry_count(0)
        .build()
        .expect("client");
    let held = rl
        .acquire(&LockRequest::new("pause:held", TTL).once())
        .expect("the holder's lock");
    // Only in the extension case: a lock the extender keeps, and the holder's only node contact
    // after the pause.
    let kept = (mode == "extension").then(|| {
        rl.acquire(
            &LockRequest::new("pause:kept", LONG_TTL)
                .once()
                .auto_extend(AutoExtend::new()),
        )
        .expect("the auto-extended lock")
    });
    println!("HELD {}", held.validity().as_millis());
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        match line.trim() {
            // Asked right after the resume: before any node contact, nothing can know.
            "VALIDITY" => println!("VALIDITY {}", held.validity().as_millis()),
            "ACQUIRE" => {
                let other = rl.acquire(&LockRequest::new("pause:other", TTL).once());
                println!("ACQUIRED {}", describe(&other));
            }
            // Waits, without touching the nodes itself, for the extender to find out.
            "WATCH" => {
                let until = Instant::now() + LONG_TTL;
                while !held.is_lost() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            "EXTEND" => match held.extend(TTL) {
                Ok(()) => println!("EXTENDED ok"),
                Err(e) => println!("EXTENDED {}", e.to_string().replace('\n', " ")),
            },
            // One attempt at another resource, with the answer in words.
            line if line.starts_with("TRY ") => {
                let tried = rl.acquire(&LockRequest::new(&line[4..], TTL).once());
                match &tried {
                    Ok(_) => println!("TRIED ok"),
                    Err(e) => println!("TRIED {}", e.to_string().replace('\n', " ")),
                }
            }
            "ERRORS" => {
                let errors: Vec<String> = rl
                    .node_status()
                    .into_iter()
                    .map(|s| s.last_error.unwrap_or_default())
                    .collect();
                println!("ERRORS {}", errors.join(" | "));
            }
            "STATE" => println!(
                "STATE lost={} validity={} kept_lost={}",
                held.is_lost(),
                held.validity().as_millis(),
                kept.as_ref().is_some_and(|k| k.is_lost())
            ),
            _ => break,
        }
        out.flush().unwrap();
    }
}

fn describe(result: &redquorum::Result<redquorum::Lock>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(Error::NoQuorum { report, .. }) => {
            let clock = report
                .failures
                .iter()
                .filter(|f| matches!(f.problem, NodeProblem::ClockJump { .. }))
                .count();
            format!("no_quorum clock_jumps={clock}")
        }
        Err(e) => format!("error {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The test's side.

struct Holder {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    offset_file: PathBuf,
    offset: Duration,
}

impl Holder {
    fn start(cluster: &Cluster, mode: &str, dir: &Path) -> Holder {
        let shim = support::build_shim("pauseshift", dir, &["-ldl"]);
        let offset_file = dir.join("pause_ns");
        std::fs::write(&offset_file, "0").unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--holder")
            .arg(cluster.urls().join(","))
            .arg(mode)
            .env("LD_PRELOAD", &shim)
            .env("PAUSESHIFT_FILE", &offset_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the holder");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut holder = Holder {
            child,
            stdin,
            lines,
            offset_file,
            offset: Duration::ZERO,
        };
        let held = holder.line();
        assert!(held.starts_with("HELD "), "{held}");
        holder
    }

    fn line(&mut self) -> String {
        self.lines
            .next()
            .expect("the holder answers")
            .expect("read from the holder")
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }

    fn tell(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Stops the holder for `pause`, then resumes it with its monotonic clocks set back by the
    /// time it was stopped: it sees no time pass. `meanwhile` runs while it is stopped.
    fn vm_pause(&mut self, pause: Duration, meanwhile: impl FnOnce()) {
        let pid = self.child.id() as i32;
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        assert!(
            eventually(Duration::from_secs(5), || stopped(pid)),
            "the holder stops"
        );
        // Counted from when it is surely stopped, so that the shift is never more than the
        // time it was: its monotonic clock must not run backwards.
        let stopped_at = Instant::now();
        meanwhile();
        let rest = pause.saturating_sub(stopped_at.elapsed());
        std::thread::sleep(rest);
        self.offset += stopped_at.elapsed();
        std::fs::write(&self.offset_file, self.offset.as_nanos().to_string()).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `/proc/<pid>/stat` says the process is stopped.
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|s| s == "T")
        })
        .unwrap_or(false)
}

/// The setting of both cases: the holder keeps "pause:held" on three nodes and is paused for
/// longer than its TTL; meanwhile the keys expire and another client takes the lock.
fn paused_while_another_takes_over(mode: &str, check: impl FnOnce(&mut Holder)) {
    let cluster = Cluster::start(3);
    let dir = std::env::temp_dir().join(format!("redlock-pause-{}-{mode}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let other = cluster.builder().retry_count(0).build().expect("client");
    let mut holder = Holder::start(&cluster, mode, &dir);

    let mut taken = None;
    holder.vm_pause(PAUSE, || {
        assert!(
            eventually(TTL * 2, || {
                taken = other
                    .acquire(&LockRequest::new("pause:held", PAUSE * 3).once())
                    .ok();
                taken.is_some()
            }),
            "the keys expire during the pause and another client takes the lock"
        );
    });
    let taken = taken.expect("taken");
    // Right after the resume, before any node contact, the holder cannot know: its validity
    // still reads most of the TTL. (The window fencing tokens exist for.)
    let first = holder.ask("VALIDITY");
    let left: u64 = first["VALIDITY ".len()..].parse().unwrap();
    assert!(
        left > 0,
        "the shim hides the pause, so the holder's clock says time is left: {first}"
    );

    check(&mut holder);

    let state = holder.ask("STATE");
    assert!(
        state.starts_with("STATE lost=true validity=0"),
        "after talking to the nodes, the holder must report the lock lost while another \
         client holds it (validity {:?} left there): {state}",
        taken.validity()
    );
    assert!(taken.is_held(), "the other client still holds it");
    holder.tell("QUIT");
    let _ = std::fs::remove_dir_all(&dir);
}

fn an_acquisition_after_a_vm_pause_reports_the_held_lock_lost() {
    paused_while_another_takes_over("acquire", |holder| {
        // Every node's clock jumped forward by the pause: each is quarantined (a node's own step
        // cannot be told from our pause), so this acquisition fails, and a quorum of them at
        // once is our pause: the held lock is lost.
        let acquired = holder.ask("ACQUIRE");
        assert!(
            acquired.starts_with("ACQUIRED no_quorum clock_jumps="),
            "{acquired}"
        );
    });
}

fn an_extension_after_a_vm_pause_reports_the_held_lock_lost() {
    paused_while_another_takes_over("extension", |holder| {
        // The holder makes no call of its own: the extender's next extension of the other lock
        // (within a third of its TTL) is its only node contact.
        holder.tell("WATCH");
        let state = holder.ask("STATE");
        assert!(state.contains("kept_lost=true"), "{state}");
    });
}

/// A stop and continue of the client's process (SIGSTOP, then SIGCONT) while its node workers
/// wait for answers. Linux does not restart a socket read that has a timeout after a stop: each
/// fails with `EINTR` though its node did nothing wrong. The stop outlasts the node timeout, a
/// wait that long from a node marks it as not answering in time, so that acquisitions skip it
/// until it answers a probe; the interrupted waits must not, since the time was ours. So the
/// next call is served by every node, and each node's last error says what happened.
fn a_stop_and_continue_mid_call_holds_no_node_against_the_next_call() {
    let cluster = Cluster::start(3);
    let dir = std::env::temp_dir().join(format!("redlock-pause-{}-stop", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut holder = Holder::start(&cluster, "stop", &dir);
    let pid = holder.child.id() as i32;
    for node in &cluster.nodes {
        node.hang();
    }
    // An extension: a failed one sends nothing after it, so no reconnect follows before the
    // next call (a failed acquisition's undo would reconnect, and a reconnect ends a stall).
    holder.tell("EXTEND");
    assert!(
        eventually(Duration::from_secs(10), || workers_reading(pid) == 3),
        "each of the holder's 3 node workers waits in a socket read for its hung node"
    );
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // Every worker is stopped, so each has left its read with EINTR: were one still on its way
    // to the stop when its node answered, its read would return the answer instead.
    assert!(
        eventually(Duration::from_secs(5), || stopped(pid)
            && workers_stopped(pid) == 3),
        "the holder and its 3 node workers stop"
    );
    for node in &cluster.nodes {
        node.resume();
    }
    // The fault's length: longer than the node timeout.
    std::thread::sleep(support::NODE_TIMEOUT + Duration::from_millis(300));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    // Whatever the interrupted call says (its own deadline passed during the stop too).
    let first = holder.line();
    assert!(first.starts_with("EXTENDED "), "{first}");

    // Each worker words its error once its wait is over.
    let mut errors = String::new();
    assert!(
        eventually(Duration::from_secs(5), || {
            errors = holder.ask("ERRORS");
            errors.matches(CUT_SHORT).count() == 3
        }),
        "each node's last error says why its read was cut short: {errors}"
    );

    let next = holder.ask("TRY pause:next");
    assert_eq!(
        next, "TRIED ok",
        "the call right after the continue is served by the nodes the stop interrupted"
    );
    holder.tell("QUIT");
    let _ = std::fs::remove_dir_all(&dir);
}

/// How a node's error says that a read was cut short by our own stop.
const CUT_SHORT: &str = "a read was cut short by a signal: this process was stopped and continued";

/// How many of the process's node workers are stopped (state `T`).
fn workers_stopped(pid: i32) -> usize {
    node_workers(pid)
        .filter(|task| {
            let stat = std::fs::read_to_string(task.join("stat")).unwrap_or_default();
            stat.rsplit_once(')')
                .and_then(|(_, after)| after.split_whitespace().next())
                == Some("T")
        })
        .count()
}

/// How many of the process's node workers are blocked in a socket read.
fn workers_reading(pid: i32) -> usize {
    node_workers(pid)
        .filter(|task| {
            let wchan = std::fs::read_to_string(task.join("wchan")).unwrap_or_default();
            wchan == "wait_woken" || wchan.starts_with("sk_wait")
        })
        .count()
}

/// The `/proc` directories of the process's node workers' threads.
fn node_workers(pid: i32) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|task| task.path())
        .filter(|task| {
            std::fs::read_to_string(task.join("comm"))
                .unwrap_or_default()
                .starts_with("redlock-node-")
        })
}
