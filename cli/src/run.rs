//! `redlock run`: a command under a lock, killed before the lock can end under it.

use std::time::Duration;

use redquorum::{AutoExtend, LockRequest};

use crate::args::{self, human};
use crate::exit::{EXIT_SOFTWARE, EXIT_TEMPFAIL, EXIT_UNAVAILABLE, Failure, one_line};
use crate::supervise::{self, Started, Supervised, Supervision};

/// Run a command while holding a lock, like flock(1) across machines
///
/// Acquires RESOURCE (waiting for ever unless --wait says otherwise), runs COMMAND in its own
/// process group, extends the lock while it runs, and releases it the moment COMMAND exits.
/// Exits with COMMAND's exit code (128 + N if it died of signal N).
///
/// The command must not outlive the lock. When an extension finds the lock lost (deleted, say
/// by 'redlock release --force', expired or taken), another holder may already have it: the
/// command's process group gets SIGKILL at once, with no grace. While extensions cannot reach
/// a quorum (a partition), it gets --kill-signal no later than --kill-grace before the lock's
/// validity ends, and SIGKILL before it ends. Either way redlock says why and exits 70. Should
/// redlock itself be killed (SIGKILL, the OOM killer), the command's whole tree gets SIGKILL
/// (Linux). SIGINT, SIGTERM and SIGHUP are forwarded to the command; Ctrl-C while waiting
/// gives up and leaves nothing locked.
///
/// With --shared the lock is the read side of a read-write lock: any number of --shared runs
/// hold RESOURCE at once, while a plain run (the write side) excludes them and every other
/// run. With --permits L the lock is one of L permits of a counting semaphore named RESOURCE:
/// at most L runs at once (every run on RESOURCE must pass the same L; another L is refused
/// with 64).
///
/// The command's environment gets REDLOCK_RESOURCE, REDLOCK_TOKEN, with --fenced
/// REDLOCK_FENCE (the fencing token: pass it with every write the lock protects) and with
/// --permits REDLOCK_PERMIT (the slot held, 0 to L-1); it loses REDLOCK_NODES unless
/// --pass-nodes.
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    override_usage = "redlock run [OPTIONS] <RESOURCE> -- <COMMAND> [ARGS]...",
    after_help = "\
Exit codes: COMMAND's own; 64 bad arguments; 69 no quorum of nodes reachable; 70 the lock
was lost while COMMAND ran; 75 (or --conflict-exit-code) the lock is busy; 126/127 COMMAND
cannot be run; 128 + N when redlock itself got signal N while waiting.

Example:
  export REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379
  redlock run --ttl 30s --wait 10m nightly-backup -- /usr/local/bin/backup.sh"
)]
pub struct Args {
    /// Lock TTL, renewed every third of it
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = args::duration)]
    ttl: Duration,
    /// Give up after this long (default: wait for ever; 0: one attempt)
    #[arg(long, value_name = "DUR", value_parser = args::duration)]
    wait: Option<Duration>,
    /// Take a fenced lock and export REDLOCK_FENCE
    #[arg(long)]
    fenced: bool,
    /// Take a read lock, shared with other --shared runs
    ///
    /// Plain runs exclude it; not with --fenced or --permits.
    #[arg(long, verbatim_doc_comment)]
    shared: bool,
    /// Take one of L permits of the semaphore RESOURCE
    ///
    /// L is 1 to 1024. The command gets the slot held in REDLOCK_PERMIT. Not with --fenced or
    /// --shared.
    #[arg(long, value_name = "L", value_parser = args::permits, verbatim_doc_comment)]
    permits: Option<u32>,
    /// Exit code when the lock is busy after --wait
    #[arg(long, value_name = "N", default_value_t = EXIT_TEMPFAIL)]
    conflict_exit_code: u8,
    /// The lock's name
    #[arg(value_name = "RESOURCE", value_parser = args::name)]
    resource: String,
    #[command(flatten)]
    supervision: Supervision,
}

pub fn main(o: Args) -> Result<u8, Failure> {
    let kinds: Vec<&str> = [
        ("--fenced", o.fenced),
        ("--shared", o.shared),
        ("--permits", o.permits.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    if kinds.len() > 1 {
        return Err(Failure::usage(
            "run",
            format!(
                "{} and {} exclude each other: a lock is fenced, shared or one of several permits",
                kinds[0], kinds[1]
            ),
        ));
    }
    let Started {
        client,
        cancel,
        grace,
    } = o.supervision.start("run", o.ttl)?;

    let mut request = LockRequest::new(&o.resource, o.ttl)
        .auto_extend(AutoExtend::new())
        .cancel(&cancel);
    if o.fenced {
        request = request.fenced();
    }
    if o.shared {
        request = request.read();
    }
    if let Some(permits) = o.permits {
        request = request.semaphore(permits);
    }
    request = match o.wait {
        Some(w) if w.is_zero() => request.once(),
        Some(w) => request.wait(w),
        None => request.wait(redquorum::MAX_TTL),
    };
    let lock = match client.acquire(&request) {
        Ok(lock) => lock,
        Err(e) => return Err(acquire_failure(e, &o)),
    };
    // A signal that came too late to cancel the acquisition: give up the lock at once.
    let early = supervise::take_pending();
    if early != 0 {
        let _ = lock.release();
        return Err(Failure::new(
            128 + early as u8,
            format!(
                "got {} while acquiring {}; released it without running the command",
                args::signal_name(early),
                o.resource
            ),
        ));
    }

    let command = o.supervision.command(&[
        ("REDLOCK_RESOURCE", Some(o.resource.clone())),
        ("REDLOCK_TOKEN", Some(lock.token().to_owned())),
        ("REDLOCK_FENCE", lock.fence().map(|f| f.to_string())),
        ("REDLOCK_PERMIT", lock.permit().map(|p| p.to_string())),
    ]);
    let what = format!("the lock on {}", o.resource);
    let Supervised {
        code,
        stopping,
        held_for,
    } = match supervise::run(
        &lock,
        command,
        &what,
        o.supervision.kill_signal,
        grace,
        false,
    ) {
        Ok(s) => s,
        Err(f) => {
            let _ = lock.release();
            return Err(f);
        }
    };
    if let Some(why) = stopping {
        let _ = lock.release();
        return Err(Failure::new(
            EXIT_SOFTWARE,
            format!(
                "{why}; the command was stopped after {} (its exit code was {code})",
                human(held_for)
            ),
        ));
    }
    match lock.release() {
        Ok(()) => Ok(code),
        Err(e @ redquorum::Error::Lost { .. }) => Err(Failure::new(
            EXIT_SOFTWARE,
            format!(
                "the lock on {} was lost before the command ended (exit code {code}); its \
                 work may have overlapped another holder's: {}",
                o.resource,
                one_line(&e.to_string())
            ),
        )),
        Err(e) => {
            // The command ran under the lock; its keys expire with the TTL.
            errln!(
                "redlock: releasing {} failed, its keys expire within {}: {}",
                o.resource,
                human(o.ttl),
                one_line(&e.to_string())
            );
            Ok(code)
        }
    }
}

fn acquire_failure(e: redquorum::Error, o: &Args) -> Failure {
    let text = one_line(&e.to_string());
    match e {
        redquorum::Error::NotAcquired { .. } => Failure::new(
            o.conflict_exit_code,
            format!(
                "{} is held by another owner{}; the command was not run",
                o.resource,
                match o.wait {
                    Some(w) if w.is_zero() => String::new(),
                    Some(w) => format!(" (waited {})", human(w)),
                    None => String::new(),
                }
            ),
        ),
        redquorum::Error::NoQuorum { .. } => Failure::new(
            EXIT_UNAVAILABLE,
            format!("no quorum of nodes reachable: {text}; check the nodes with 'redlock nodes'"),
        ),
        redquorum::Error::Cancelled { .. } => {
            let sig = supervise::take_pending();
            let sig = if sig == 0 { libc::SIGINT } else { sig };
            Failure::new(
                128 + sig as u8,
                format!(
                    "got {} while waiting for {}; gave up, nothing is locked",
                    args::signal_name(sig),
                    o.resource
                ),
            )
        }
        redquorum::Error::InvalidArgument { message } => Failure::usage("run", message),
        _ => Failure::new(EXIT_SOFTWARE, text),
    }
}
