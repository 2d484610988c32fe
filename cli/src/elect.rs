//! `redlock elect`: run a command while this process leads an election, in the manner of a
//! leader-elector sidecar; `redlock leader`: who leads.

use std::time::{Duration, SystemTime};

use redquorum::{Error, Leader};
use serde_json::json;

use crate::args::{self, human};
use crate::exit::{EXIT_NOBODY, EXIT_SOFTWARE, EXIT_UNAVAILABLE, Failure, one_line};
use crate::nodes::Nodes;
use crate::supervise::{self, Started, Supervised, Supervision};

/// Run a command while this process leads an election (a leader-elector sidecar)
///
/// Campaigns in the election NAME; once elected, runs COMMAND in its own process group with
/// REDLOCK_ELECTION, REDLOCK_IDENTITY and REDLOCK_TERM in its environment (and without
/// REDLOCK_NODES unless --pass-nodes). The term is a fencing token: greater than every earlier
/// leader's. Pass it with every write the leader makes, to a store that refuses writes with a
/// lower term than it has seen.
///
/// The leadership is extended while COMMAND runs. COMMAND must not outlive it: when the
/// leadership is found lost, another leader may already be in, and COMMAND's group gets
/// SIGKILL at once, with no grace; while extensions cannot reach a quorum it gets
/// --kill-signal no later than --kill-grace before the leadership's validity ends, and SIGKILL
/// before it ends. Should redlock itself be killed (SIGKILL, the OOM killer), COMMAND's whole
/// tree gets SIGKILL (Linux).
///
/// When COMMAND exits, or the leadership is lost, redlock resigns and campaigns again, until
/// it gets SIGINT or SIGTERM. With --once it exits instead, with COMMAND's exit code (70 if
/// the leadership was lost while COMMAND ran).
///
/// SIGINT, SIGTERM and SIGHUP stop COMMAND first (the signal is forwarded to its group, then
/// SIGKILL after --kill-grace) and only then resign: resigning while COMMAND still ran would
/// let two leaders act at once. While campaigning they stop at once, leaving nothing behind.
/// Exit 0 after such a stop (with --once: COMMAND's exit code, or 128 + N if COMMAND never
/// ran).
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    override_usage = "redlock elect [OPTIONS] <NAME> -- <COMMAND> [ARGS]...",
    after_help = "\
Exit codes: 0 stopped by a signal (or with --once, COMMAND's own); 64 bad arguments; 69 no
quorum of nodes reachable; 70 the leadership was lost while COMMAND ran (--once);
126/127 COMMAND cannot be run.

Example:
  export REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379
  redlock elect --ttl 15s scheduler -- /usr/local/bin/scheduler --term-from-env"
)]
pub struct Args {
    /// Who this candidate is (default: HOSTNAME:PID)
    ///
    /// As 'redlock leader' shows it; 1 to 256 bytes.
    #[arg(
        long,
        value_name = "ID",
        allow_hyphen_values = true,
        verbatim_doc_comment
    )]
    identity: Option<String>,
    /// Leadership TTL, renewed every third of it
    #[arg(long, value_name = "DUR", default_value = "15s", value_parser = args::duration)]
    ttl: Duration,
    /// Exit after COMMAND exits or the leadership is lost
    #[arg(long)]
    once: bool,
    /// The election's name
    #[arg(value_name = "NAME", value_parser = args::name)]
    name: String,
    #[command(flatten)]
    supervision: Supervision,
}

/// Show who leads an election
///
/// Prints the leader's identity, its term (a fencing token), how long it has led and how many
/// terms the election has seen (best effort: a node restarted without persistence counts
/// anew).
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    after_help = "\
Exit codes: 0 there is a leader; 3 nobody leads; 64 bad arguments; 69 the nodes cannot tell
(too few answered, a leader's node hangs, a new leader is being confirmed)."
)]
pub struct LeaderArgs {
    /// One JSON object: name, leader (null when nobody leads), and the leader's identity,
    /// term, since_unix_ms, age_ms, transitions, ttl_ms
    #[arg(long, verbatim_doc_comment)]
    json: bool,
    /// The election's name
    #[arg(value_name = "NAME", value_parser = args::name)]
    name: String,
    #[command(flatten)]
    nodes: Nodes,
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

pub fn main(o: Args) -> Result<u8, Failure> {
    let Started {
        client,
        cancel,
        grace,
    } = o.supervision.start("elect", o.ttl)?;
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
        let command = o.supervision.command(&[
            ("REDLOCK_ELECTION", Some(o.name.clone())),
            ("REDLOCK_IDENTITY", Some(identity.clone())),
            ("REDLOCK_TERM", Some(term.to_string())),
        ]);
        let what = format!("the leadership of {}", o.name);
        let supervised = supervise::run(
            leadership.lock(),
            command,
            &what,
            o.supervision.kill_signal,
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
pub fn leader(o: LeaderArgs) -> Result<u8, Failure> {
    let LeaderArgs { json, name, nodes } = o;
    let usage = |m: &dyn std::fmt::Display| Failure::usage("leader", m);
    let client = nodes.client("leader")?;
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
