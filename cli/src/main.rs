//! `redlock`: the command line over the redlock library.
//!
//! `run` holds a lock while a command runs (and kills the command before the lock can end
//! under it), `status` shows a lock on every node, `release --force` removes a stuck one and
//! `nodes` shows the nodes; `elect` runs a command while this process leads an election and
//! `leader` shows who leads; `stats` reads the counters of a running `run` or `elect`. Exit codes follow sysexits: 64 bad usage, 69 no quorum, 70 the
//! lock was lost, 75 the lock is busy.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use lexopt::prelude::*;

#[macro_use]
mod output;
mod args;
mod elect;
mod metrics;
mod run;
mod show;
mod supervise;

use args::Common;

/// The nodes answered, and nobody holds the lock (`status`) or leads the election (`leader`):
/// as an LSB init script's `status` says "not running".
pub const EXIT_NOBODY: u8 = 3;
/// Bad arguments (EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// No quorum of nodes reachable (EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;
/// The lock was lost while the command ran, or an internal error (EX_SOFTWARE).
pub const EXIT_SOFTWARE: u8 = 70;
/// The lock was not acquired in time (EX_TEMPFAIL).
pub const EXIT_TEMPFAIL: u8 = 75;

/// A failure that ends the program: a one-line message for stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn usage(command: &str, message: impl std::fmt::Display) -> Failure {
        let help = if command.is_empty() {
            "redlock --help".to_owned()
        } else {
            format!("redlock {command} --help")
        };
        Failure {
            code: EXIT_USAGE,
            message: format!("{message} (see '{help}')"),
        }
    }

    pub fn new(code: u8, message: impl std::fmt::Display) -> Failure {
        Failure {
            code,
            message: message.to_string(),
        }
    }
}

/// One line, whatever the text: errors of the library can span lines.
pub fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

const HELP: &str = "\
redlock: the Redlock distributed lock from the command line

Usage: redlock <COMMAND> [OPTIONS] ...

Commands:
  run      Run a command while holding a lock (like flock(1)); killed if the lock is lost
  status   Show a lock on every node: token, owners, remaining TTL, fence counter
  release  Force-release a stuck lock (--force; an operator's tool)
  nodes    Show each node's status
  elect    Run a command while this process leads an election (a leader-elector sidecar)
  leader   Show who leads an election: identity, term, age, transitions
  stats    Show the counters of a running 'run' or 'elect' (its --metrics-addr)
  help     Show this, or a command's help: redlock help <COMMAND>

Nodes (every command but stats):
  --nodes URL,URL,...   Redis nodes (redis:// or rediss:// URLs), an odd number of
                        independent masters; a Sentinel-managed master is one node:
                        redis+sentinel://host:port/MASTERNAME?sentinel=host:port,
                        and so is a whole Redis Cluster:
                        redis+cluster://host:port?seed=host:port
  --nodes-file PATH     Read the URLs from a file (one per line or comma-separated;
                        lines starting with # are comments)
  REDLOCK_NODES         Environment variable used when neither option is given
  --node-timeout DUR    How long to wait for any one node (default 50ms)
  --tls-ca-file PATH    Trust the CA certificate(s) in this PEM file for rediss:// nodes,
                        instead of the system's roots (or SSL_CERT_FILE)
  --tls-client-cert-file PATH, --tls-client-key-file PATH
                        A client certificate (PEM, with its chain) and its key, for nodes
                        that require one (tls-auth-clients yes)
  A password in --nodes shows in `ps`: for URLs with passwords use REDLOCK_NODES or
  --nodes-file (readable by you alone: redlock warns otherwise). A URL ending in #insecure
  skips the certificate check, with a warning: give the CA instead. Each node's warnings
  (also a master with replicas, an evicting maxmemory-policy) go to stderr once connected.

Durations take a unit: 500ms, 30s, 5m, 1h (a bare number is seconds).

Exit codes, the same for every command:
  0        Done: run and elect --once exit with the command's own code; status: the lock is
           held; leader: someone leads; release: the keys are gone; nodes: a quorum answers
  3        The nodes answered, and nobody holds the lock (status) or leads (leader)
  64       Bad arguments
  69       Too few nodes answered to do it or to tell (no quorum); stats: ADDR cannot be read
  70       The lock or leadership was lost while the command ran (or an internal error)
  75       Another owner holds the lock: run (after --wait; or --conflict-exit-code N),
           release --token
  126, 127 run, elect: the command cannot be run, or is not found
  128+N    run: redlock got signal N while waiting (the command's own 128+N when it dies of
           signal N)
  141      The reader of the output went away (as for a tool killed by SIGPIPE)
Run 'redlock <COMMAND> --help' for a command's options.
";

fn main() -> ExitCode {
    match dispatch() {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            errln!("redlock: {}", one_line(&f.message));
            ExitCode::from(f.code)
        }
    }
}

fn dispatch() -> Result<u8, Failure> {
    let mut parser = lexopt::Parser::from_env();
    let command = match parser.next() {
        Ok(Some(Value(v))) => v,
        Ok(Some(Long("help") | Short('h'))) => {
            out!("{HELP}");
            return Ok(0);
        }
        Ok(Some(Long("version") | Short('V'))) => {
            outln!("redlock {}", env!("CARGO_PKG_VERSION"));
            return Ok(0);
        }
        Ok(Some(other)) => {
            return Err(Failure::usage(
                "",
                format!("expected a command before {}", other.unexpected()),
            ));
        }
        Ok(None) => {
            return Err(Failure::usage(
                "",
                "missing command (run, status, release, nodes, elect, leader, stats)",
            ));
        }
        Err(e) => return Err(Failure::usage("", e)),
    };
    let command = command.to_string_lossy().into_owned();
    match command.as_str() {
        "run" => run::main(parser),
        "status" => show::status(parser),
        "release" => show::release(parser),
        "nodes" => show::nodes(parser),
        "elect" => elect::main(parser),
        "leader" => elect::leader(parser),
        "stats" => metrics::stats(parser),
        #[cfg(target_os = "linux")]
        supervise::reaper::ARG => supervise::reaper::main(parser),
        "help" => {
            let topic = parser
                .next()
                .ok()
                .flatten()
                .and_then(|a| match a {
                    Value(v) => Some(v),
                    _ => None,
                })
                .map(|v: OsString| v.to_string_lossy().into_owned());
            match topic.as_deref() {
                None => out!("{HELP}"),
                Some("run") => out!("{}", run::HELP),
                Some("status") => out!("{}", show::STATUS_HELP),
                Some("release") => out!("{}", show::RELEASE_HELP),
                Some("nodes") => out!("{}", show::NODES_HELP),
                Some("elect") => out!("{}", elect::HELP),
                Some("leader") => out!("{}", elect::LEADER_HELP),
                Some("stats") => out!("{}", metrics::STATS_HELP),
                Some(other) => {
                    return Err(Failure::usage("", format!("unknown command '{other}'")));
                }
            }
            Ok(0)
        }
        other => Err(Failure::usage(
            "",
            format!(
                "unknown command '{other}' (expected run, status, release, nodes, elect, leader or \
                 stats)"
            ),
        )),
    }
}

/// Names of the options every command takes.
pub const COMMON: [&str; 6] = [
    "nodes",
    "nodes-file",
    "node-timeout",
    "tls-ca-file",
    "tls-client-cert-file",
    "tls-client-key-file",
];

/// Sets the common option `name` (one of [`COMMON`]) to `value`.
pub fn common_option(common: &mut Common, name: &str, value: OsString) -> Result<(), String> {
    let text = || {
        value
            .clone()
            .into_string()
            .map_err(|_| format!("--{name} is not valid UTF-8"))
    };
    match name {
        "nodes" => common.nodes = Some(text()?),
        "nodes-file" => common.nodes_file = Some(value.into()),
        "tls-ca-file" => common.tls_ca_file = Some(value.into()),
        "tls-client-cert-file" => common.tls_client_cert_file = Some(value.into()),
        "tls-client-key-file" => common.tls_client_key_file = Some(value.into()),
        _ => {
            let t = text()?;
            common.node_timeout =
                Some(args::duration(&t).map_err(|m| format!("--node-timeout: {m}"))?);
        }
    }
    Ok(())
}

/// Builds the client from the common options.
pub fn client(common: &Common, command: &str) -> Result<redquorum::Redlock, Failure> {
    let urls = common.urls().map_err(|m| Failure::usage(command, m))?;
    let mut builder = redquorum::Redlock::builder().nodes(&urls);
    if let Some(t) = common.node_timeout {
        if t.is_zero() {
            return Err(Failure::usage(command, "--node-timeout must be above zero"));
        }
        builder = builder.node_timeout(t);
    }
    if let Some(ca) = &common.tls_ca_file {
        builder = builder.tls_ca_file(ca);
    }
    match (&common.tls_client_cert_file, &common.tls_client_key_file) {
        (Some(cert), Some(key)) => builder = builder.tls_client_cert_file(cert, key),
        (None, None) => {}
        _ => {
            return Err(Failure::usage(
                command,
                "--tls-client-cert-file and --tls-client-key-file go together",
            ));
        }
    }
    let client = builder.build().map_err(|e| match e {
        redquorum::Error::InvalidArgument { message } => Failure::usage(command, message),
        other => Failure::new(EXIT_UNAVAILABLE, other),
    })?;
    // The warnings of the nodes' first connect: nothing else shows them to a user of the
    // command line.
    for node in client.node_status() {
        for warning in &node.warnings {
            errln!(
                "redlock: warning: node {}: {}",
                node.address,
                one_line(warning)
            );
        }
    }
    Ok(client)
}

/// `Duration` as a short text: `1.5s`, `250ms`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}
