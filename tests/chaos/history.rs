//! The run's history, and rule (pc): a second opinion from a checker we did not write.
//!
//! After the run, the logs the clients kept become a history of operations, `history.jsonl` in
//! the run's log directory (kept when the run fails): one JSON object a line, with the
//! operation's model and resource (`model`, `key`), who made it (`client`, `thread`; -1 for the
//! harness), what it did (`kind`), when it was called and returned (`call`, `ret`: ns of
//! `CLOCK_MONOTONIC` since the run's start; `ret` null for an outcome unknown), the fencing
//! token or term it carried (`token`), and the values it read and wrote (`read`, null when not
//! asserted; `write`). The Go program `tests/chaos/porcupine` checks it for linearizability with
//! Porcupine (`github.com/anishathalye/porcupine` v1.3.1), whose package doc gives the models
//! and why each is not a tautology:
//! - **counter** (`chaos:r<i>`, `chaos-rw`): each holder's read-modify-write of the counter
//!   inside the lock, `[lock returned, SET returned]`, as one operation on a register (read r,
//!   write w), from the `H` lines (the value read is the one written less one) and the
//!   read-write lock's writers' `R` lines. A write the run classifies as late (its SET returned
//!   after the lock's deadline: rule (b)'s known limit) is split into its GET, a read asserted
//!   on its own over `[lock returned, validity check]` (`[lock returned, SET returned]` for
//!   `chaos-rw`, whose holders log no check time), and its SET, a blind write over
//!   `[validity check, SET returned]` that may have been overwritten inside an in-time holder's
//!   read-modify-write; the harness's GET of each counter after the clients ended is a final
//!   read;
//! - **store** (`chaos-fenced`, `chaos-election`): the token- and term-checking storage as the
//!   holders saw it, from the `F` lines and the election's `TS` lines (one a storage read, with
//!   the write that followed it): a read and a write both accepted as one operation, a read
//!   accepted alone, a read or a write refused, and the storage's final counter;
//! - **order** (`chaos-fenced`, `chaos-election`): the fenced lock's acquisitions (`F` lines)
//!   and the won campaigns (`E` lines) as intervals `[call, return]` with their token or term.
//!
//! Every client process logs each operation's completion before it exits, and a run whose
//! client did not finish fails (c) before the history is written, so the history holds no
//! operation of unknown outcome today; the format and the models take them (an open-ended
//! return, and no effect allowed) for clients that may be killed.
//!
//! The rule: (pc) Porcupine finds every model's history linearizable, within its timeout (10 s a
//! model for the short profile, more for longer runs). Illegal fails the run with Porcupine's
//! explanation and its visualization (`porcupine-<model>.html` in the log directory); a model
//! that times out is Unknown, printed and counted as not checked, and fails the run as well: a
//! rule that gave no verdict has not passed. Before each run the Go program's self-test checks
//! made-up histories (`-self-test`, also `go test` in `scripts/test`), and this file's own
//! self-test writes made-up logs as a history that Porcupine must find legal, and made-up
//! violations (a lost update, a stale fenced write accepted, a term going backwards) that it
//! must find illegal, each under its model. The Go program is built once into `target/porcupine`
//! (`go build`; Porcupine comes from the Go module proxy the first time, and `go.sum` pins it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::checker::{Hold, Logs, Verdict};
use crate::election::{ELECTION, ElectionHold};
use crate::fenced::{FENCED_RESOURCE, FencedHold};
use crate::kinds::{KindHold, RW_RESOURCE};
use crate::{MS, SHORT_CHAOS_MS, now_ns};

/// One read of the election's term-checking storage, and the write that followed it (a `TS`
/// line).
#[derive(Debug, Clone)]
pub struct TermOp {
    pub client: usize,
    pub thread: usize,
    pub term: u64,
    pub read_start: u64,
    pub read_end: u64,
    /// The value read, when the storage accepted the read.
    pub seen: Option<u64>,
    /// The write: when the validity was checked, when it returned, the value, whether the
    /// storage accepted it.
    pub write: Option<(u64, u64, u64, bool)>,
}

/// The `TS` line of a storage read (`seen`: its value, `None` when refused) and its write.
pub fn term_op_line(
    client: usize,
    thread: usize,
    term: u64,
    read: (u64, u64),
    seen: Option<u64>,
    write: Option<(u64, u64, u64, bool)>,
) -> String {
    let seen = seen.map_or("-".to_owned(), |v| v.to_string());
    let write = write.map_or("0 0 - -".to_owned(), |(checked, done, value, accepted)| {
        format!(
            "{checked} {done} {value} {}",
            if accepted { "accepted" } else { "rejected" }
        )
    });
    format!(
        "TS {client} {thread} {term} {} {} {seen} {write}",
        read.0, read.1
    )
}

pub fn parse_term_op(f: &[&str]) -> TermOp {
    let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad TS line {f:?}")) };
    TermOp {
        client: num(1) as usize,
        thread: num(2) as usize,
        term: num(3),
        read_start: num(4),
        read_end: num(5),
        seen: f[6].parse().ok(),
        write: f[9]
            .parse()
            .ok()
            .map(|v| (num(7), num(8), v, f[10] == "accepted")),
    }
}

/// What the harness read at the end: each counter resource's final value (the mutex's and the
/// read-write lock's), and the fenced and the election storage's counters.
pub struct Finals {
    pub counters: BTreeMap<String, u64>,
    pub fenced: u64,
    pub election: u64,
}

/// One operation of the history (see the module doc for the fields).
struct Op<'a> {
    model: &'static str,
    key: &'a str,
    client: i64,
    thread: i64,
    kind: &'static str,
    call: u64,
    ret: Option<u64>,
    token: u64,
    read: Option<u64>,
    write: u64,
}

impl Op<'_> {
    fn json(&self, origin: u64) -> String {
        let t = |ns: u64| ns.saturating_sub(origin);
        let mut s = String::new();
        let _ = write!(
            s,
            r#"{{"model":"{}","key":"{}","client":{},"thread":{},"kind":"{}","call":{},"ret":{},"token":{},"read":{},"write":{}}}"#,
            self.model,
            self.key,
            self.client,
            self.thread,
            self.kind,
            t(self.call),
            self.ret.map_or("null".to_owned(), |r| t(r).to_string()),
            self.token,
            self.read.map_or("null".to_owned(), |r| r.to_string()),
            self.write
        );
        s
    }
}

/// Operations by model, for the summary.
#[derive(Debug, Default)]
pub struct Counts {
    pub counter: usize,
    pub late: usize,
    pub store: usize,
    pub order: usize,
}

/// The history of `logs` as JSON lines, times relative to `origin`; `end` is when the harness
/// read `finals`.
pub fn build(logs: &Logs, finals: &Finals, origin: u64, end: u64) -> (Vec<String>, Counts) {
    let mut ops: Vec<Op> = Vec::new();
    let counter = |key, client: usize, thread: i64, kind, span: (u64, u64), read, write| Op {
        model: "counter",
        key,
        client: client as i64,
        thread,
        kind,
        call: span.0,
        ret: Some(span.1),
        token: 0,
        read,
        write,
    };
    // The mutex's counters (`H` lines of the resources whose counter the harness read).
    for h in &logs.holds {
        let (Some(w), true) = (h.wrote, finals.counters.contains_key(&h.resource)) else {
            continue;
        };
        // The H lines' thread is not parsed: -1, unknown.
        let t = -1;
        if h.set_done > h.deadline {
            ops.push(counter(
                &h.resource,
                h.client,
                t,
                "read",
                (h.acquired, h.checked),
                Some(w - 1),
                0,
            ));
            ops.push(counter(
                &h.resource,
                h.client,
                t,
                "late-write",
                (h.checked, h.set_done),
                None,
                w,
            ));
        } else {
            ops.push(counter(
                &h.resource,
                h.client,
                t,
                "rmw",
                (h.acquired, h.set_done),
                Some(w - 1),
                w,
            ));
        }
    }
    // The read-write lock's counter: writers and plain holders (`R` lines).
    let rw = |k: &&KindHold| k.resource == RW_RESOURCE && k.wrote.is_some();
    for k in logs.kinds.iter().filter(rw) {
        let w = k.wrote.unwrap_or(0);
        let span = (k.acquired, k.set_done);
        if k.set_done > k.deadline {
            ops.push(counter(
                RW_RESOURCE,
                k.client,
                -1,
                "read",
                span,
                Some(w - 1),
                0,
            ));
            ops.push(counter(
                RW_RESOURCE,
                k.client,
                -1,
                "late-write",
                span,
                None,
                w,
            ));
        } else {
            ops.push(counter(
                RW_RESOURCE,
                k.client,
                -1,
                "rmw",
                span,
                Some(w - 1),
                w,
            ));
        }
    }
    for (key, value) in &finals.counters {
        ops.push(Op {
            client: -1,
            thread: -1,
            ..counter(key, 0, -1, "final", (end, end), Some(*value), 0)
        });
    }

    let store = |key, client: usize, thread: i64, kind, span: (u64, u64), token, read, write| Op {
        model: "store",
        key,
        client: client as i64,
        thread,
        kind,
        call: span.0,
        ret: Some(span.1),
        token,
        read,
        write,
    };
    let grant = |key, client: usize, thread: i64, span: (u64, u64), token| Op {
        model: "order",
        key,
        client: client as i64,
        thread,
        kind: "grant",
        call: span.0,
        ret: Some(span.1),
        token,
        read: None,
        write: 0,
    };
    // The fenced lock: its grants, and its holders' storage reads and writes (`F` lines).
    for f in &logs.fenced {
        let FencedHold {
            client,
            fence,
            call_end,
            checked,
            set_done,
            ..
        } = *f;
        ops.push(grant(
            FENCED_RESOURCE,
            client,
            -1,
            (f.call_start, call_end),
            fence,
        ));
        let key = FENCED_RESOURCE;
        match (f.read_ok, f.wrote) {
            (false, _) => ops.push(store(
                key,
                client,
                -1,
                "read-refused",
                (call_end, checked),
                fence,
                None,
                0,
            )),
            (true, None) => ops.push(store(
                key,
                client,
                -1,
                "read",
                (call_end, checked),
                fence,
                None,
                0,
            )),
            (true, Some((w, true))) => ops.push(store(
                key,
                client,
                -1,
                "rmw",
                (call_end, set_done),
                fence,
                Some(w - 1),
                w,
            )),
            (true, Some((w, false))) => {
                ops.push(store(
                    key,
                    client,
                    -1,
                    "read",
                    (call_end, checked),
                    fence,
                    Some(w - 1),
                    0,
                ));
                ops.push(store(
                    key,
                    client,
                    -1,
                    "write-refused",
                    (checked, set_done),
                    fence,
                    None,
                    w,
                ));
            }
        }
    }
    // The election: its grants (`E` lines) and its leaders' storage reads and writes (`TS`).
    for e in &logs.elections {
        let ElectionHold {
            client,
            term,
            call_start,
            call_end,
            ..
        } = *e;
        ops.push(grant(ELECTION, client, -1, (call_start, call_end), term));
    }
    for o in &logs.term_ops {
        let read = (o.read_start, o.read_end);
        let (c, t, term) = (o.client, o.thread as i64, o.term);
        match (o.seen, o.write) {
            (None, _) => ops.push(store(ELECTION, c, t, "read-refused", read, term, None, 0)),
            (Some(seen), None) => {
                ops.push(store(ELECTION, c, t, "read", read, term, Some(seen), 0))
            }
            (Some(seen), Some((_, done, w, true))) => ops.push(store(
                ELECTION,
                c,
                t,
                "rmw",
                (o.read_start, done),
                term,
                Some(seen),
                w,
            )),
            (Some(seen), Some((checked, done, w, false))) => {
                ops.push(store(ELECTION, c, t, "read", read, term, Some(seen), 0));
                ops.push(store(
                    ELECTION,
                    c,
                    t,
                    "write-refused",
                    (checked, done),
                    term,
                    None,
                    w,
                ));
            }
        }
    }
    for (key, value) in [
        (FENCED_RESOURCE, finals.fenced),
        (ELECTION, finals.election),
    ] {
        ops.push(Op {
            client: -1,
            thread: -1,
            ..store(key, 0, -1, "final", (end, end), 0, Some(value), 0)
        });
    }

    let mut counts = Counts::default();
    for op in &ops {
        match op.model {
            "counter" => counts.counter += 1,
            "store" => counts.store += 1,
            _ => counts.order += 1,
        }
        counts.late += usize::from(op.kind == "late-write");
    }
    (ops.iter().map(|op| op.json(origin)).collect(), counts)
}

/// The Go program, built once a process (into `target/porcupine`), or why it cannot be.
fn checker_binary() -> &'static Result<PathBuf, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chaos/porcupine");
        // This binary is target/<profile>/deps/chaos-<hash>.
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let target = exe
            .ancestors()
            .nth(3)
            .ok_or("the test binary is not under a target directory")?;
        let out = target.join("porcupine").join("porcupine-check");
        let built = Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(&source)
            .output()
            .map_err(|e| {
                format!(
                    "rule (pc) needs Go (1.19 or later) on PATH to build {}: cannot run `go`: \
                     {e}; install Go (Debian: apt-get install golang-go; scripts/test installs it)",
                    source.display()
                )
            })?;
        if !built.status.success() {
            return Err(format!(
                "rule (pc): `go build` in {} failed (the first build fetches Porcupine from the Go \
                 module proxy; offline, the module cache must hold it): {}",
                source.display(),
                String::from_utf8_lossy(&built.stderr).trim()
            ));
        }
        Ok(out)
    })
}

fn binary() -> &'static Path {
    match checker_binary() {
        Ok(path) => path,
        Err(e) => panic!("{e}"),
    }
}

/// Runs the Go program on the history at `path`: its output lines and whether it exited 0.
fn run_checker(path: &Path, timeout_s: u64, html: Option<&Path>) -> (Vec<String>, bool, String) {
    let mut cmd = Command::new(binary());
    cmd.arg("-history")
        .arg(path)
        .arg("-timeout")
        .arg(format!("{timeout_s}s"));
    if let Some(dir) = html {
        cmd.arg("-html").arg(dir);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", binary().display()));
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    (
        lines,
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    )
}

/// Porcupine's findings in its output: one per `ILLEGAL` block (its indented lines with it) and
/// per `UNKNOWN` line.
fn findings(lines: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut open = false;
    for line in lines {
        if let Some(rest) = line.strip_prefix("ILLEGAL ") {
            found.push(format!("Porcupine: illegal: {rest}"));
            open = true;
        } else if let Some(rest) = line.strip_prefix("UNKNOWN ") {
            found.push(format!("Porcupine: not checked: {rest}"));
            open = false;
        } else if open && line.starts_with(' ') {
            let last = found.last_mut().expect("an open block");
            last.push('\n');
            last.push_str(line);
        } else {
            open = false;
        }
    }
    found
}

/// Builds the Go program and checks that both self-tests give their verdicts: the Go program's
/// on its made-up histories, and Porcupine's on histories this file builds from made-up logs.
pub fn checker_catches_made_up_violations() {
    let out = Command::new(binary())
        .arg("-self-test")
        .output()
        .expect("run the Porcupine self-test");
    assert!(
        out.status.success(),
        "the Porcupine checker's self-test failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    made_up_logs();
    // A model Porcupine could not decide in time is a finding: never a pass.
    let unknown = findings(&[
        "porcupine: store: 9 ops on 1 keys, in 1 partitions (0 late writes, 0 of unknown outcome): Unknown in 10.00 s".to_owned(),
        "UNKNOWN store: no verdict within the timeout: not checked (9 ops)".to_owned(),
    ]);
    assert!(
        unknown.len() == 1 && unknown[0].starts_with("Porcupine: not checked: store"),
        "an Unknown verdict is not reported: {unknown:?}"
    );
}

/// Made-up logs: a legal run, then one violation at a time, each of which Porcupine must find
/// illegal under its model.
fn made_up_logs() {
    let t = 1_000 * 1_000 * MS;
    let at = |ms: u64| t + ms * MS;
    let hold = |client: usize, from: u64, wrote: u64| Hold {
        client,
        resource: "chaos:r0".to_owned(),
        token: format!("token-{client}-{from}"),
        acquired: at(from),
        deadline: at(from + 300),
        end: at(from + 8),
        abandoned: false,
        wrote: Some(wrote),
        set_done: at(from + 6),
        checked: at(from + 4),
        waited_ms: None,
        scheduled: None,
    };
    let fenced = |client: usize, fence: u64, from: u64, wrote: u64, accepted: bool| FencedHold {
        client,
        fence,
        read_ok: true,
        call_start: at(from),
        call_end: at(from + 2),
        deadline: at(from + 300),
        wrote: Some((wrote, accepted)),
        set_done: at(from + 6),
        checked: at(from + 4),
    };
    let leader = |client: usize, term: u64, from: u64| ElectionHold {
        client,
        identity: format!("c{client}.t12"),
        term,
        call_start: at(from),
        call_end: at(from + 2),
        acquired: at(from + 2),
        deadline: at(from + 300),
        end: at(from + 9),
        how: "resigned".to_owned(),
        writes: 1,
        accepted: 1,
        rejected: 0,
        reads_rejected: 0,
        late: None,
    };
    let term_op = |client: usize, term: u64, from: u64, seen: u64| TermOp {
        client,
        thread: 12,
        term,
        read_start: at(from + 3),
        read_end: at(from + 4),
        seen: Some(seen),
        write: Some((at(from + 5), at(from + 6), seen + 1, true)),
    };
    // Holders one after the other; a late write (the SET after the deadline) that took effect
    // after the third; fenced holders 5 and 7, and a paused holder of 6 whose write is refused;
    // leaders of terms 3 and 4.
    let late = || Hold {
        deadline: at(20),
        set_done: at(36),
        checked: at(18),
        ..hold(2, 15, 2)
    };
    let good = || Logs {
        holds: vec![
            hold(0, 0, 1),
            hold(1, 10, 2),
            hold(0, 30, 3),
            late(),
            hold(1, 40, 3),
        ],
        fenced: vec![
            fenced(0, 5, 0, 1, true),
            fenced(1, 7, 10, 2, true),
            // Read at 7-17 (between 5's write and 7's read), paused, refused at 17-19.
            FencedHold {
                checked: at(17),
                set_done: at(19),
                ..fenced(2, 6, 5, 2, false)
            },
        ],
        elections: vec![leader(0, 3, 0), leader(1, 4, 20)],
        term_ops: vec![term_op(0, 3, 0, 0), term_op(1, 4, 20, 1)],
        ..Logs::default()
    };
    let finals = || Finals {
        counters: [("chaos:r0".to_owned(), 3)].into(),
        fenced: 2,
        election: 2,
    };
    // Removed when done, failed or not.
    let dir = crate::TempDir(
        std::env::temp_dir().join(format!("redlock-chaos-history-{}", std::process::id())),
        false,
    );
    std::fs::create_dir_all(&dir.0).expect("self-test dir");
    let verdict = |logs: &Logs, finals: &Finals| {
        let path = dir.0.join("history.jsonl");
        let (lines, _) = build(logs, finals, t, at(100));
        std::fs::write(&path, lines.join("\n") + "\n").expect("write the made-up history");
        let (out, ok, err) = run_checker(&path, 5, None);
        (ok, findings(&out), out, err)
    };
    let (ok, found, out, err) = verdict(&good(), &finals());
    assert!(
        ok && found.is_empty(),
        "Porcupine finds the history of made-up legal logs illegal: {out:?} {err}"
    );
    let expect = |what: &str, model: &str, logs: Logs, finals: Finals| {
        let (ok, found, out, err) = verdict(&logs, &finals);
        assert!(
            !ok && found
                .iter()
                .any(|f| f.starts_with(&format!("Porcupine: illegal: {model} "))),
            "Porcupine missed a made-up {what} (model {model}): {out:?} {err}"
        );
    };
    // Two holders inside the lock at once, both reading 1.
    let mut lost = good();
    lost.holds.push(hold(2, 12, 2));
    expect("lost update", "counter", lost, finals());
    // Fenced holder 6 wrote after holder 7, and the storage took it.
    let mut stale = good();
    stale.fenced[2] = fenced(2, 6, 20, 3, true);
    let stale_finals = Finals {
        fenced: 3,
        ..finals()
    };
    expect("stale fenced write accepted", "store", stale, stale_finals);
    // A campaign begun after term 4 was granted got term 2.
    let mut back = good();
    back.elections.push(leader(2, 2, 40));
    expect("term going backwards", "order", back, finals());
}

/// Rule (pc): writes the run's history into `dir` and has Porcupine check it.
pub fn check(
    logs: &Logs,
    finals: &Finals,
    origin: u64,
    dir: &Path,
    chaos_ms: u64,
    verdict: &mut Verdict,
) {
    let started = std::time::Instant::now();
    let (lines, counts) = build(logs, finals, origin, now_ns());
    let path = dir.join("history.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write the history");
    let timeout_s = 10 * chaos_ms.div_ceil(SHORT_CHAOS_MS).max(1);
    let (out, ok, err) = run_checker(&path, timeout_s, Some(dir));
    for line in &out {
        println!("{line}");
    }
    let found = findings(&out);
    for f in &found {
        verdict.fail(format!("(pc) {f}"));
    }
    if !ok && found.is_empty() {
        verdict.fail(format!(
            "(pc) the Porcupine checker failed on {}: {err}",
            path.display()
        ));
    }
    let took_s = started.elapsed().as_secs_f64();
    println!(
        "porcupine: {} operations ({} counter, {} of them late writes; {} store; {} order) checked in {took_s:.2} s",
        lines.len(),
        counts.counter,
        counts.late,
        counts.store,
        counts.order
    );
}
