//! `redlock elect`: run a command while this process leads an election, in the manner of a
//! leader-elector sidecar; `redlock leader`: who leads.

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, SystemTime};

use lexopt::prelude::*;
use redquorum::{Cancel, Error, Leader};
use serde_json::json;

use crate::args::{self, Common};
use crate::supervise::{self, Supervised};
use crate::{
    COMMON, EXIT_NOBODY, EXIT_SOFTWARE, EXIT_UNAVAILABLE, Failure, common_option, human, one_line,
};

pub const HELP: &str = "\
Run a command while this process leads an election (a leader-elector sidecar)

Usage: redlock elect [OPTIONS] NAME -- COMMAND [ARGS...]

Campaigns in the election NAME; once elected, runs COMMAND in its own process group with
REDLOCK_ELECTION, REDLOCK_IDENTITY and REDLOCK_TERM in its environment (and without
REDLOCK_NODES unless --pass-nodes). The term is a fencing
token: greater than every earlier leader's. Pass it with every write the leader makes, to a
store that refuses writes with a lower term than it has seen.

The leadership is extended while COMMAND runs. COMMAND must not outlive it: when the
leadership is found lost, another leader may already be in, and COMMAND's group gets SIGKILL
at once, with no grace; while extensions cannot reach a quorum it gets --kill-signal no later
than --kill-grace before the leadership's validity ends, and SIGKILL before it ends. Should
redlock itself be killed (SIGKILL, the OOM killer), COMMAND's whole tree gets SIGKILL (Linux).

When COMMAND exits, or the leadership is lost, redlock resigns and campaigns again, until it
gets SIGINT or SIGTERM. With --once it exits instead, with COMMAND's exit code (70 if the
leadership was lost while COMMAND ran).

SIGINT, SIGTERM and SIGHUP stop COMMAND first (the signal is forwarded to its group, then
SIGKILL after --kill-grace) and only then resign: resigning while COMMAND still ran would let
two leaders act at once. While campaigning they stop at once, leaving nothing behind. Exit 0
after such a stop (with --once: COMMAND's exit code, or 128 + N if COMMAND never ran).

Options:
  --identity ID             Who this candidate is, as `redlock leader` shows it (default:
                            HOSTNAME:PID); 1 to 256 bytes
  --ttl DUR                 Leadership TTL, renewed every third of it (default 15s)
  --once                    Exit after COMMAND exits or the leadership is lost
  --kill-signal SIG         Signal that asks COMMAND to stop while extensions cannot reach a
                            quorum (default TERM); a lost leadership gets SIGKILL
  --kill-grace DUR          Time COMMAND gets between a signal and SIGKILL, and between
                            --kill-signal and the end of the leadership's validity (default 5s,
                            or half the validity left before an extension for short TTLs)
  --metrics-addr ADDR       Serve this client's metrics at http://ADDR/metrics (Prometheus
                            text) and http://ADDR/stats.json ('redlock stats ADDR' reads it)
                            while redlock runs; PORT alone binds localhost. No
                            authentication: a HOST beyond localhost gets a warning
  --pass-nodes              Leave REDLOCK_NODES in COMMAND's environment (removed by default:
                            it may hold passwords)
  --nodes URL,URL,...       Nodes (or REDLOCK_NODES, or --nodes-file PATH)
  --node-timeout DUR        How long to wait for any one node (default 50ms)
  --tls-ca-file PATH        CA for rediss:// nodes (client certificates: see redlock --help)
  -h, --help                Show this

Exit codes: 0 stopped by a signal (or with --once, COMMAND's own); 64 bad arguments; 69 no
quorum of nodes reachable; 70 the leadership was lost while COMMAND ran (--once);
126/127 COMMAND cannot be run.

Example:
  export REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379
  redlock elect --ttl 15s scheduler -- /usr/local/bin/scheduler --term-from-env
";

pub const LEADER_HELP: &str = "\
Show who leads an election

Usage: redlock leader [OPTIONS] NAME

Prints the leader's identity, its term (a fencing token), how long it has led and how many
terms the election has seen (best effort: a node restarted without persistence counts anew).

Options:
  --json                    One JSON object: name, leader (null when nobody leads), and the
                            leader's identity, term, since_unix_ms, age_ms, transitions, ttl_ms
  --nodes URL,URL,...       Nodes (or REDLOCK_NODES, or --nodes-file PATH)
  --node-timeout DUR        How long to wait for any one node (default 50ms)
  --tls-ca-file PATH        CA for rediss:// nodes (client certificates: see redlock --help)
  -h, --help                Show this

Exit codes: 0 there is a leader; 3 nobody leads; 64 bad arguments; 69 the nodes cannot tell
(too few answered, a leader's node hangs, a new leader is being confirmed).
";

struct Options {
    common: Common,
    name: String,
    identity: Option<String>,
    ttl: Duration,
    once: bool,
    kill_signal: i32,
    kill_grace: Option<Duration>,
    metrics_addr: Option<String>,
    /// Leave `REDLOCK_NODES` in the command's environment.
    pass_nodes: bool,
    command: Vec<OsString>,
}

fn parse(mut parser: lexopt::Parser) -> Result<Option<Options>, Failure> {
    let usage = |m: &dyn std::fmt::Display| Failure::usage("elect", m);
    let mut o = Options {
        common: Common::default(),
        name: String::new(),
        identity: None,
        ttl: Duration::from_secs(15),
        once: false,
        kill_signal: libc::SIGTERM,
        kill_grace: None,
        metrics_addr: None,
        pass_nodes: false,
        command: Vec::new(),
    };
    let mut name: Option<String> = None;
    let duration = |n: &str, v: OsString| -> Result<Duration, Failure> {
        args::duration(&v.to_string_lossy()).map_err(|m| usage(&format!("{n}: {m}")))
    };
    while let Some(arg) = parser.next().map_err(|e| usage(&e))? {
        match arg {
            Long(n) if COMMON.contains(&n) => {
                let n = n.to_owned();
                let value = parser.value().map_err(|e| usage(&e))?;
                common_option(&mut o.common, &n, value).map_err(|m| usage(&m))?;
            }
            Short('h') | Long("help") => {
                out!("{HELP}");
                return Ok(None);
            }
            Long("identity") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                o.identity = Some(
                    v.into_string()
                        .map_err(|_| usage(&"--identity is not valid UTF-8"))?,
                );
            }
            Long("ttl") => o.ttl = duration("--ttl", parser.value().map_err(|e| usage(&e))?)?,
            Long("once") => o.once = true,
            Long("pass-nodes") => o.pass_nodes = true,
            Long("metrics-addr") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                o.metrics_addr =
                    Some(crate::metrics::address(&v.to_string_lossy()).map_err(|m| usage(&m))?);
            }
            Long("kill-signal") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                o.kill_signal = args::signal(&v.to_string_lossy())
                    .map_err(|m| usage(&format!("--kill-signal: {m}")))?;
            }
            Long("kill-grace") => {
                o.kill_grace = Some(duration(
                    "--kill-grace",
                    parser.value().map_err(|e| usage(&e))?,
                )?)
            }
            Value(v) if name.is_none() => {
                name = Some(
                    v.into_string()
                        .map_err(|_| usage(&"NAME is not valid UTF-8"))?,
                );
            }
            Value(v) => {
                o.command.push(v);
                o.command
                    .extend(parser.raw_args().map_err(|e| usage(&e))?.by_ref());
                break;
            }
            other => return Err(usage(&other.unexpected())),
        }
    }
    let Some(name) = name else {
        return Err(usage(&"missing NAME and COMMAND"));
    };
    if o.command.is_empty() {
        return Err(usage(
            &"missing COMMAND: redlock elect NAME -- COMMAND [ARGS...]",
        ));
    }
    o.name = name;
    Ok(Some(o))
}

/// `HOSTNAME:PID`.
fn default_identity() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let host = if rc == 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".to_owned()
    };
    format!("{host}:{}", std::process::id())
}

pub fn main(parser: lexopt::Parser) -> Result<u8, Failure> {
    let Some(o) = parse(parser)? else {
        return Ok(0);
    };
    let node_timeout = o
        .common
        .node_timeout
        .unwrap_or(redquorum::DEFAULT_NODE_TIMEOUT);
    let grace = crate::run::grace_for("elect", o.ttl, o.kill_grace, node_timeout)?;
    let cancel = Cancel::new();
    supervise::install_handlers(&cancel)?;
    let client = crate::client(&o.common, "elect")?;
    if let Some(addr) = &o.metrics_addr {
        crate::metrics::serve(addr, &client)?;
    }
    let identity = o.identity.clone().unwrap_or_else(default_identity);
    let election = client
        .election(&o.name, &identity, o.ttl)
        .map_err(|e| match e {
            Error::InvalidArgument { message } => Failure::usage("elect", message),
            other => Failure::new(EXIT_SOFTWARE, one_line(&other.to_string())),
        })?;
    loop {
        let leadership = match election.campaign(Some(&cancel)) {
            Ok(l) => l,
            Err(Error::Cancelled { .. }) => {
                supervise::take_pending();
                let sig = supervise::stop_requested().max(libc::SIGINT);
                return Ok(if o.once { 128 + sig as u8 } else { 0 });
            }
            Err(Error::NoQuorum { .. }) if !o.once => {
                // Nodes down: keep campaigning, as a sidecar should, without spinning.
                if cancel.is_cancelled() {
                    return Ok(0);
                }
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Err(e @ Error::NoQuorum { .. }) => {
                return Err(Failure::new(
                    EXIT_UNAVAILABLE,
                    format!(
                        "no quorum of nodes reachable: {}; check the nodes with 'redlock nodes'",
                        one_line(&e.to_string())
                    ),
                ));
            }
            Err(e) => return Err(Failure::new(EXIT_SOFTWARE, one_line(&e.to_string()))),
        };
        // A signal that came as the campaign was won: resign without running anything.
        if supervise::take_pending() != 0 || supervise::stop_requested() != 0 {
            let _ = leadership.resign();
            return Ok(0);
        }
        let term = leadership.term();
        errln!(
            "redlock: {identity} leads {} in term {term}; starting the command",
            o.name
        );
        let mut command = Command::new(&o.command[0]);
        command
            .args(&o.command[1..])
            .env("REDLOCK_ELECTION", &o.name)
            .env("REDLOCK_IDENTITY", &identity)
            .env("REDLOCK_TERM", term.to_string());
        if !o.pass_nodes {
            command.env_remove("REDLOCK_NODES");
        }
        let what = format!("the leadership of {}", o.name);
        let supervised = supervise::run(
            leadership.lock(),
            command,
            &what,
            o.kill_signal,
            grace,
            true,
        );
        // The command has exited (or never started): only now may another candidate lead.
        let resigned = leadership.resign();
        let Supervised {
            code,
            stopping,
            held_for,
        } = supervised?;
        let stopped = supervise::stop_requested() != 0;
        if let Some(why) = &stopping {
            errln!(
                "redlock: {why}; the command was stopped after {} (its exit code was {code})",
                human(held_for)
            );
        } else if let Err(e @ Error::Lost { .. }) = &resigned {
            errln!(
                "redlock: the leadership of {} was lost before the command ended (exit code \
                 {code}); its work may have overlapped another leader's: {}",
                o.name,
                one_line(&e.to_string())
            );
        }
        let lost = stopping.is_some() || matches!(resigned, Err(Error::Lost { .. }));
        if o.once {
            return Ok(if lost && !stopped {
                EXIT_SOFTWARE
            } else {
                code
            });
        }
        if stopped {
            return Ok(0);
        }
        errln!(
            "redlock: resigned {} after {} (the command's exit code was {code}); campaigning again",
            o.name,
            human(held_for)
        );
    }
}

/// `redlock leader NAME [--json]`.
pub fn leader(mut parser: lexopt::Parser) -> Result<u8, Failure> {
    let usage = |m: &dyn std::fmt::Display| Failure::usage("leader", m);
    let mut common = Common::default();
    let mut json = false;
    let mut name: Option<String> = None;
    while let Some(arg) = parser.next().map_err(|e| usage(&e))? {
        match arg {
            Long(n) if COMMON.contains(&n) => {
                let n = n.to_owned();
                let value = parser.value().map_err(|e| usage(&e))?;
                common_option(&mut common, &n, value).map_err(|m| usage(&m))?;
            }
            Short('h') | Long("help") => {
                out!("{LEADER_HELP}");
                return Ok(0);
            }
            Long("json") => json = true,
            Value(v) if name.is_none() => {
                name = Some(
                    v.into_string()
                        .map_err(|_| usage(&"NAME is not valid UTF-8"))?,
                );
            }
            other => return Err(usage(&other.unexpected())),
        }
    }
    let Some(name) = name else {
        return Err(usage(&"missing NAME"));
    };
    let client = crate::client(&common, "leader")?;
    let leader = client.leader(&name).map_err(|e| match e {
        Error::InvalidArgument { message } => usage(&message),
        // "too few nodes answered", or "cannot tell who leads": the error says which.
        Error::NoQuorum { .. } => Failure::new(EXIT_UNAVAILABLE, one_line(&e.to_string())),
        other => Failure::new(EXIT_SOFTWARE, one_line(&other.to_string())),
    })?;
    if json {
        outln!("{}", leader_json(&name, leader.as_ref()));
    } else {
        match &leader {
            Some(l) => outln!(
                "{name}: {} leads in term {} for {} ({} terms so far; expires in {} unless extended)",
                l.identity,
                l.term,
                human(l.age()),
                l.transitions,
                human(l.ttl)
            ),
            None => outln!("{name}: nobody leads"),
        }
    }
    Ok(if leader.is_some() { 0 } else { EXIT_NOBODY })
}

fn leader_json(name: &str, leader: Option<&Leader>) -> serde_json::Value {
    let ms = |d: Duration| d.as_millis() as u64;
    json!({
        "name": name,
        "leader": leader.map(|l| json!({
            "identity": l.identity,
            "term": l.term,
            "since_unix_ms": l.since.duration_since(SystemTime::UNIX_EPOCH).map(ms).unwrap_or(0),
            "age_ms": ms(l.age()),
            "transitions": l.transitions,
            "ttl_ms": ms(l.ttl),
        })),
    })
}
