//! The shell lines of the docs: every line of every ```sh block of README.md, docs/*.md and the
//! READMEs of cli/ and the bindings (a trailing `\` joins the next line; a ` #` starts a comment).
//!
//! - `redlock` lines run here, in the order printed, against three local nodes: `REDLOCK_NODES`
//!   names the test's nodes, the commands they run are the stand-ins of [`STAND_INS`], and each
//!   exits as [`REDLOCK_LINES`] says;
//! - the README's line that starts three local nodes runs here, on free ports, and they answer;
//! - `scripts/test` lines parse their arguments (`REDLOCK_TEST_ARGS_ONLY=1`), `scripts/demo` exists;
//! - every other line is of a kind another check covers ([`COVERED`] names it); a line of no
//!   known kind fails here, so a new kind of line needs a check before it can be printed.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use support::{Cluster, eventually, free_port, server_binary, wait_timeout};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// How a `redlock` line of the docs ends here.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// It exits with this code.
    Exits(i32),
    /// It exits with this code once what an earlier background line starts is up: tried again
    /// until then (10 s at most).
    Becomes(i32),
    /// It runs until the test's end; then SIGTERM, and it exits with this code.
    Background(i32),
}

/// Every `redlock` line of the docs as printed (its comment aside), and how it ends against
/// the test's nodes with the stand-ins in place. A line missing here, or an entry no page
/// prints, fails the test.
const REDLOCK_LINES: &[(&str, Expect)] = &[
    // cli/README.md
    ("redlock --help", Expect::Exits(0)),
    // docs/cli.md
    (
        "redlock run --ttl 30s --wait 10m nightly-backup -- /usr/local/bin/backup.sh",
        Expect::Exits(0),
    ),
    (
        "redlock run --shared report -- ./read-report.sh",
        Expect::Exits(0),
    ),
    (
        "redlock run --permits 3 encoder -- ./encode.sh",
        Expect::Exits(0),
    ),
    // 3: the nodes answered and nobody holds it (the runs above released it).
    ("redlock status nightly-backup", Expect::Exits(3)),
    ("redlock status --permits 3 encoder", Expect::Exits(3)),
    // 0: the keys are gone (or were never there).
    (
        "redlock release --force --token TOKEN nightly-backup",
        Expect::Exits(0),
    ),
    ("redlock nodes", Expect::Exits(0)),
    // It leads until stopped; on SIGTERM it stops its command, resigns and exits 0.
    (
        "redlock elect --ttl 15s scheduler -- ./scheduler",
        Expect::Background(0),
    ),
    ("redlock leader scheduler", Expect::Becomes(0)),
    // SIGTERM goes on to the command, which dies of it: 128 + 15.
    (
        "redlock run --metrics-addr 9464 job -- ./job.sh &",
        Expect::Background(143),
    ),
    ("redlock stats 9464", Expect::Becomes(0)),
];

/// The commands the docs' `redlock` lines run, and what runs in their place here: the short
/// jobs succeed at once, the long ones last until the test stops them.
const STAND_INS: &[(&str, &str)] = &[
    ("/usr/local/bin/backup.sh", "true"),
    ("./read-report.sh", "true"),
    ("./encode.sh", "true"),
    ("./scheduler", "sleep 60"),
    ("./job.sh", "sleep 60"),
];

/// The metrics port the docs' `redlock` lines name; a free one takes its place.
const PRINTED_METRICS_PORT: &str = "9464";

/// Lines of the docs that run elsewhere, by how they start, with the check that covers them:
/// installs, builds and runs that take a package registry, a C toolchain or minutes.
const COVERED: &[(&str, &str)] = &[
    (
        "cargo add redquorum",
        "scripts/check-release: `cargo package` of redquorum, what crates.io would serve",
    ),
    (
        "cargo install redquorum-cli",
        "scripts/check-release: `cargo package` of redquorum with redquorum-cli; \
         cli/tests run the command it installs",
    ),
    (
        "pip install ",
        "bindings/python/tests/test_packaging.py: the wheel of bindings/python, installed in a \
         fresh venv, takes a lock",
    ),
    (
        "python3 -m pytest bindings/python/tests",
        "scripts/test runs this line",
    ),
    (
        "go get github.com/redquorum/redquorum/bindings/go",
        "bindings/go/modulezip_test.go (TestGoGetModuleZip): `go get` of the module zip through \
         a file:// GOPROXY, then a program runs",
    ),
    (
        "scripts/install ",
        "scripts/test-install: scripts/install into a prefix, and with DESTDIR",
    ),
    (
        "cc app.c ",
        "scripts/test-install: examples/c/example.c built with pkg-config, shared and static, \
         and run",
    ),
    (
        "valgrind --leak-check=full --suppressions=",
        "scripts/test-install: the installed program under valgrind with pkg-config's \
         valgrind_suppressions; ffi/tests/c_abi.rs: the C suites under valgrind",
    ),
    (
        "cargo test --release --test chaos -- ",
        "scripts/test runs the chaos test's short profile; a seed's run takes minutes, and the \
         chaos test hands flags it does not know to libtest, so only the target is checked here",
    ),
    (
        "cargo run --release --example ",
        "the examples build in scripts/test (clippy --all-targets); a run takes minutes, and \
         they ignore flags they do not know, so only the example is checked here",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pages whose ```sh blocks are checked.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    for readme in ["cli", "bindings/python", "bindings/go"] {
        pages.push(root.join(readme).join("README.md"));
    }
    pages
}

/// One command line of a ```sh block: where it is, and its text without the comment.
struct Line {
    at: String,
    text: String,
}

/// The command lines of a page's ```sh blocks.
fn sh_lines(page: &Path) -> Vec<Line> {
    let name = page.strip_prefix(root()).unwrap().display().to_string();
    let mut lines = Vec::new();
    let mut open = false;
    let mut pending: Option<Line> = None;
    for (n, raw) in std::fs::read_to_string(page).unwrap().lines().enumerate() {
        match raw.trim_end() {
            "```sh" if !open => open = true,
            "```" if open => open = false,
            _ if open => {
                let text = raw.split(" #").next().unwrap().trim();
                let line = match pending.take() {
                    Some(mut line) => {
                        line.text.push(' ');
                        line.text.push_str(text);
                        line
                    }
                    None => Line {
                        at: format!("{name}:{}", n + 1),
                        text: text.to_owned(),
                    },
                };
                if let Some(joined) = line.text.strip_suffix('\\') {
                    pending = Some(Line {
                        text: joined.trim_end().to_owned(),
                        ..line
                    });
                } else if !line.text.is_empty() {
                    lines.push(line);
                }
            }
            _ => {}
        }
    }
    lines
}

/// `redlock` lines run as a shell runs them, with the built command first on PATH.
struct Shell {
    path: String,
    nodes: String,
    metrics_port: String,
}

impl Shell {
    /// The line with its stand-ins in place, without a trailing `&`.
    fn command(&self, line: &str) -> String {
        line.split_whitespace()
            .filter(|w| *w != "&")
            .map(|w| {
                STAND_INS
                    .iter()
                    .find(|(printed, _)| *printed == w)
                    .map(|(_, here)| *here)
                    .unwrap_or(if w == PRINTED_METRICS_PORT {
                        &self.metrics_port
                    } else {
                        w
                    })
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn cmd(&self, line: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("exec {}", self.command(line)))
            .env("PATH", &self.path)
            .env("REDLOCK_NODES", &self.nodes)
            .stdin(Stdio::null());
        c
    }

    fn output(&self, line: &str) -> Output {
        self.cmd(line).output().expect("run sh")
    }
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn said(o: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A line run in the background, stopped (SIGTERM) when the test ends, also on a failure.
struct Background {
    at: String,
    child: Child,
    code: i32,
}

impl Background {
    /// SIGTERM, then its exit code (None if it had not exited 10 s later, then killed).
    fn stop(&mut self) -> Option<i32> {
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        wait_timeout(&mut self.child, Duration::from_secs(10)).map(|s| s.code().unwrap_or(-1))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

/// Servers the README's line started, daemonized: shut down when the test ends.
struct Daemons(Vec<u16>);

impl Daemons {
    fn answers(port: u16) -> bool {
        redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok_and(|pong| pong == "PONG")
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for port in &self.0 {
            if let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            {
                let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
            }
        }
    }
}

/// The README's line that starts three local nodes, on three free ports and with the test's
/// server binary: it exits 0 and the three answer.
fn three_local_nodes(at: &str, line: &str) -> Result<(), String> {
    let ports = [free_port(), free_port(), free_port()];
    let ours: Vec<String> = ports.iter().map(u16::to_string).collect();
    let script = line
        .replacen("7000 7001 7002", &ours.join(" "), 1)
        .replacen("redis-server", &format!("'{}'", server_binary()), 1);
    let _daemons = Daemons(ports.to_vec());
    let dir = std::env::temp_dir().join(format!("redquorum-docs-shell-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("run sh");
    let _ = std::fs::remove_dir_all(&dir);
    if !o.status.success() {
        return Err(format!(
            "{at}: `{script}` exited {:?}\n{}",
            code(&o),
            said(&o)
        ));
    }
    for port in ports {
        if !eventually(Duration::from_secs(10), || Daemons::answers(port)) {
            return Err(format!(
                "{at}: no node answers on port {port} after `{script}`"
            ));
        }
    }
    Ok(())
}

/// `scripts/test ARGS` parses its arguments and stops there.
fn test_script_args(at: &str, line: &str) -> Result<(), String> {
    let mut words = line.split_whitespace();
    let script = root().join(words.next().unwrap());
    let o = Command::new("bash")
        .arg(&script)
        .args(words)
        .env("REDLOCK_TEST_ARGS_ONLY", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    match code(&o) {
        Some(0) => Ok(()),
        c => Err(format!(
            "{at}: `{line}` refuses its arguments (exit {c:?})\n{}",
            said(&o)
        )),
    }
}

/// What a covered line names exists: the example, or the test target.
fn target_exists(at: &str, line: &str) -> Result<(), String> {
    let name = |after: &str| {
        line.split(after)
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
    };
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    match (name("--example "), name("--test ")) {
        (Some(example), _) if !root().join(format!("examples/{example}.rs")).is_file() => Err(
            format!("{at}: no example {example} (examples/{example}.rs)"),
        ),
        (_, Some(test)) if !manifest.contains(&format!("name = \"{test}\"")) => {
            Err(format!("{at}: no test target {test} in Cargo.toml"))
        }
        _ => Ok(()),
    }
}

#[test]
fn every_shell_line_of_the_docs_runs_or_is_covered() {
    let cluster = Cluster::start(3);
    let bin_dir = Path::new(BIN).parent().unwrap();
    let shell = Shell {
        path: format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        nodes: cluster.urls().join(","),
        metrics_port: free_port().to_string(),
    };
    let mut failures = Vec::new();
    let mut background = Vec::new();
    let mut printed = Vec::new();
    let mut ran = 0;
    let mut covered = 0;
    let lines: Vec<Line> = pages().iter().flat_map(|p| sh_lines(p)).collect();
    assert!(lines.len() >= 40, "only {} shell lines found", lines.len());
    for Line { at, text } in &lines {
        let line = text.as_str();
        let outcome = if line.starts_with("redlock ") {
            printed.push(line);
            ran += 1;
            match REDLOCK_LINES.iter().find(|(l, _)| *l == line) {
                None => Err(format!(
                    "{at}: `{line}`: a redlock line with no entry in REDLOCK_LINES (say how it \
                     ends there)"
                )),
                Some((_, Expect::Exits(want))) => {
                    let o = shell.output(line);
                    match code(&o) {
                        Some(c) if c == *want => Ok(()),
                        c => Err(format!(
                            "{at}: `{line}` exited {c:?}, not {want}\n{}",
                            said(&o)
                        )),
                    }
                }
                Some((_, Expect::Becomes(want))) => {
                    let mut last = None;
                    let ok = eventually(Duration::from_secs(10), || {
                        let o = shell.output(line);
                        let hit = code(&o) == Some(*want);
                        last = Some(o);
                        hit
                    });
                    match (ok, last) {
                        (true, _) => Ok(()),
                        (false, Some(o)) => Err(format!(
                            "{at}: `{line}` still exits {:?}, not {want}, after 10 s\n{}",
                            code(&o),
                            said(&o)
                        )),
                        (false, None) => unreachable!("eventually runs its check at least once"),
                    }
                }
                Some((_, Expect::Background(want))) => {
                    let child = shell
                        .cmd(line)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn sh");
                    background.push(Background {
                        at: at.clone(),
                        child,
                        code: *want,
                    });
                    Ok(())
                }
            }
        } else if line.starts_with("export REDLOCK_NODES=") {
            // The nodes it names are the test's: every redlock line gets them so.
            Ok(())
        } else if line.starts_with("for p in 7000 7001 7002; do redis-server ") {
            ran += 1;
            three_local_nodes(at, line)
        } else if line.starts_with("scripts/test") {
            ran += 1;
            test_script_args(at, line)
        } else if line == "scripts/demo" {
            // It takes no arguments of its own; the demo itself is examples/demo.rs.
            match std::fs::metadata(root().join("scripts/demo")) {
                Ok(m) if std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0 => {
                    target_exists(at, "--example demo")
                }
                _ => Err(format!("{at}: scripts/demo is missing or not executable")),
            }
        } else if let Some((_, by)) = COVERED.iter().find(|(start, _)| line.starts_with(start)) {
            assert!(!by.is_empty());
            covered += 1;
            target_exists(at, line)
        } else {
            Err(format!(
                "{at}: `{line}`: no check runs or covers this kind of line (run it in \
                 cli/tests/docs_shell.rs, or name the check that covers it in COVERED)"
            ))
        };
        failures.extend(outcome.err());
    }
    for (line, _) in REDLOCK_LINES {
        if !printed.contains(line) {
            failures.push(format!(
                "REDLOCK_LINES has `{line}`, which no page prints any more"
            ));
        }
    }
    // What the background lines started is stopped, and leaves nothing held.
    for mut b in background.drain(..).rev() {
        match b.stop() {
            Some(c) if c == b.code => {}
            c => failures.push(format!(
                "{}: on SIGTERM it exited {c:?}, not {}",
                b.at, b.code
            )),
        }
    }
    for after in ["redlock status job", "redlock leader scheduler"] {
        let o = shell.output(after);
        if code(&o) != Some(3) {
            failures.push(format!(
                "`{after}` exits {:?} once the background lines stopped, not 3 (nobody)\n{}",
                code(&o),
                said(&o)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} shell lines ({ran} run, {covered} covered elsewhere):\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
}

/// The check of `scripts/test` lines can fail: a flag it does not take is refused.
#[test]
fn the_argument_check_of_scripts_test_refuses_an_unknown_flag() {
    assert!(test_script_args("here", "scripts/test --no-such-flag").is_err());
    assert!(test_script_args("here", "scripts/test --quick").is_ok());
}
