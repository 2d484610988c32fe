//! `redlock run`: a command under a lock, killed before the lock can end under it.

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use lexopt::prelude::*;
use redquorum::{AutoExtend, Cancel, DEFAULT_DRIFT_FACTOR, DEFAULT_EXTEND_FRACTION, LockRequest};

use crate::args::{self, Common};
use crate::supervise::{self, Supervised};
use crate::{
    COMMON, EXIT_SOFTWARE, EXIT_TEMPFAIL, EXIT_UNAVAILABLE, Failure, common_option, human, one_line,
};

pub const HELP: &str = "\
Run a command while holding a lock, like flock(1) across machines

Usage: redlock run [OPTIONS] RESOURCE -- COMMAND [ARGS...]

Acquires RESOURCE (waiting for ever unless --wait says otherwise), runs COMMAND in its own
process group, extends the lock while it runs, and releases it the moment COMMAND exits.
Exits with COMMAND's exit code (128 + N if it died of signal N).

The command must not outlive the lock. When an extension finds the lock lost (deleted, say by
'redlock release --force', expired or taken), another holder may already have it: the
command's process group gets SIGKILL at once, with no grace. While extensions cannot reach a
quorum (a partition), it gets --kill-signal no later than --kill-grace before the lock's
validity ends, and SIGKILL before it ends. Either way redlock says why and exits 70. Should
redlock itself be killed (SIGKILL, the OOM killer), the command's whole tree gets SIGKILL
(Linux).
SIGINT, SIGTERM and SIGHUP are forwarded to the command; Ctrl-C while waiting gives up and
leaves nothing locked.

With --shared the lock is the read side of a read-write lock: any number of --shared runs
hold RESOURCE at once, while a plain run (the write side) excludes them and every other run.
With --permits L the lock is one of L permits of a counting semaphore named RESOURCE: at most
L runs at once (every run on RESOURCE must pass the same L; another L is refused with 64).

The command's environment gets REDLOCK_RESOURCE, REDLOCK_TOKEN, with --fenced REDLOCK_FENCE
(the fencing token: pass it with every write the lock protects) and with --permits
REDLOCK_PERMIT (the slot held, 0 to L-1); it loses REDLOCK_NODES unless --pass-nodes.

Options:
  --ttl DUR                 Lock TTL, renewed every third of it (default 30s)
  --wait DUR                Give up after this long (default: wait for ever; 0: one attempt)
  --fenced                  Take a fenced lock and export REDLOCK_FENCE
  --shared                  Take a read lock: shared with other --shared runs, excluded by
                            plain runs (not with --fenced or --permits)
  --permits L               Take one of L permits (1 to 1024) of the semaphore RESOURCE and
                            export REDLOCK_PERMIT (not with --fenced or --shared)
  --conflict-exit-code N    Exit code when the lock is busy after --wait (default 75)
  --kill-signal SIG         Signal that asks the command to stop while extensions cannot
                            reach a quorum (default TERM); a lost lock gets SIGKILL
  --kill-grace DUR          Time the command gets between --kill-signal and the end of the
                            lock's validity (default 5s, or half the validity left before
                            an extension when the TTL is shorter than about 15s; a grace
                            given must fit in that validity)
  --metrics-addr ADDR       Serve this client's metrics at http://ADDR/metrics (Prometheus
                            text) and http://ADDR/stats.json ('redlock stats ADDR' reads it)
                            while redlock runs; PORT alone binds localhost. No
                            authentication: a HOST beyond localhost gets a warning
  --pass-nodes              Leave REDLOCK_NODES in COMMAND's environment (removed by default:
                            it may hold passwords)
  --nodes URL,URL,...       Nodes (or REDLOCK_NODES, or --nodes-file PATH; prefer those for
                            URLs with passwords: --nodes shows in `ps`)
  --node-timeout DUR        How long to wait for any one node (default 50ms)
  --tls-ca-file PATH        CA for rediss:// nodes (client certificates: see redlock --help)
  -h, --help                Show this

Exit codes: COMMAND's own; 64 bad arguments; 69 no quorum of nodes reachable; 70 the lock
was lost while COMMAND ran; 75 (or --conflict-exit-code) the lock is busy; 126/127 COMMAND
cannot be run; 128 + N when redlock itself got signal N while waiting.

Example:
  export REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379
  redlock run --ttl 30s --wait 10m nightly-backup -- /usr/local/bin/backup.sh
";

struct Options {
    common: Common,
    ttl: Duration,
    wait: Option<Duration>,
    fenced: bool,
    shared: bool,
    permits: Option<u32>,
    conflict_exit_code: u8,
    kill_signal: i32,
    /// `None`: the default, derived from the TTL ([`kill_grace`]).
    kill_grace: Option<Duration>,
    /// Where to serve the client's metrics while the command runs.
    metrics_addr: Option<String>,
    /// Leave `REDLOCK_NODES` in the command's environment.
    pass_nodes: bool,
    resource: String,
    command: Vec<OsString>,
}

fn parse(mut parser: lexopt::Parser) -> Result<Option<Options>, Failure> {
    let usage = |m: &dyn std::fmt::Display| Failure::usage("run", m);
    let mut o = Options {
        common: Common::default(),
        ttl: Duration::from_secs(30),
        wait: None,
        fenced: false,
        shared: false,
        permits: None,
        conflict_exit_code: EXIT_TEMPFAIL,
        kill_signal: libc::SIGTERM,
        kill_grace: None,
        metrics_addr: None,
        pass_nodes: false,
        resource: String::new(),
        command: Vec::new(),
    };
    let mut resource: Option<String> = None;
    let duration = |name: &str, v: OsString| -> Result<Duration, Failure> {
        let text = v.to_string_lossy();
        args::duration(&text).map_err(|m| usage(&format!("{name}: {m}")))
    };
    loop {
        let arg = parser.next().map_err(|e| usage(&e))?;
        let Some(arg) = arg else { break };
        match arg {
            Long(name) if COMMON.contains(&name) => {
                let name = name.to_owned();
                let value = parser.value().map_err(|e| usage(&e))?;
                common_option(&mut o.common, &name, value).map_err(|m| usage(&m))?;
            }
            Short('h') | Long("help") => {
                out!("{HELP}");
                return Ok(None);
            }
            Long("ttl") => o.ttl = duration("--ttl", parser.value().map_err(|e| usage(&e))?)?,
            Long("wait") => {
                o.wait = Some(duration("--wait", parser.value().map_err(|e| usage(&e))?)?)
            }
            Long("fenced") => o.fenced = true,
            Long("pass-nodes") => o.pass_nodes = true,
            Long("shared") => o.shared = true,
            Long("permits") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                let max = redquorum::MAX_PERMITS;
                o.permits = Some(
                    v.to_string_lossy()
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=max).contains(n))
                        .ok_or_else(|| {
                            usage(&format!("--permits: give a number from 1 to {max}"))
                        })?,
                );
            }
            Long("conflict-exit-code") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                o.conflict_exit_code = v
                    .to_string_lossy()
                    .parse::<u8>()
                    .map_err(|_| usage(&"--conflict-exit-code: give a number from 0 to 255"))?;
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
            Long("metrics-addr") => {
                let v = parser.value().map_err(|e| usage(&e))?;
                o.metrics_addr =
                    Some(crate::metrics::address(&v.to_string_lossy()).map_err(|m| usage(&m))?);
            }
            Value(v) if resource.is_none() => {
                resource = Some(
                    v.into_string()
                        .map_err(|_| usage(&"RESOURCE is not valid UTF-8"))?,
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
    let Some(resource) = resource else {
        return Err(usage(&"missing RESOURCE and COMMAND"));
    };
    if resource.is_empty() {
        return Err(usage(&"RESOURCE is empty"));
    }
    if o.command.is_empty() {
        return Err(usage(
            &"missing COMMAND: redlock run RESOURCE -- COMMAND [ARGS...]",
        ));
    }
    let kinds: Vec<&str> = [
        ("--fenced", o.fenced),
        ("--shared", o.shared),
        ("--permits", o.permits.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    if kinds.len() > 1 {
        return Err(usage(&format!(
            "{} and {} exclude each other: a lock is fenced, shared or one of several permits",
            kinds[0], kinds[1]
        )));
    }
    o.resource = resource;
    Ok(Some(o))
}

/// The default `--kill-grace`, for TTLs long enough to leave room for it.
const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);
/// The shortest default grace: a TTL that leaves less refuses itself, naming the shortest TTL
/// that works (a grace the user gives may be shorter).
const MIN_DEFAULT_KILL_GRACE: Duration = Duration::from_millis(10);

/// The validity left right before a due extension: the TTL less one extension period, the
/// drift allowance and a node timeout for the extension itself. A grace at least this long
/// would stop the command during normal operation.
fn validity_before_extension(ttl: Duration, node_timeout: Duration) -> Duration {
    let drift = ttl.mul_f64(DEFAULT_DRIFT_FACTOR) + Duration::from_millis(2);
    ttl.checked_sub(ttl.mul_f64(DEFAULT_EXTEND_FRACTION) + drift + node_timeout)
        .unwrap_or_default()
}

/// The grace the command gets: the one given, if it fits in the TTL; by default 5 s, or half
/// the validity left before an extension when that is less. A default never refuses a valid
/// `--ttl`: a TTL too short for any grace is refused for what it is, with the shortest that
/// works.
fn kill_grace(o: &Options, node_timeout: Duration) -> Result<Duration, Failure> {
    grace_for("run", o.ttl, o.kill_grace, node_timeout)
}

/// [`kill_grace`] for the command `command` (`run`, `elect`): the grace given, or the default.
pub fn grace_for(
    command: &str,
    ttl: Duration,
    given: Option<Duration>,
    node_timeout: Duration,
) -> Result<Duration, Failure> {
    let low = validity_before_extension(ttl, node_timeout);
    match given {
        Some(grace) if grace.is_zero() => Err(Failure::usage(
            command,
            "--kill-grace must be above zero: the command needs time to stop before the lock ends",
        )),
        Some(grace) if grace >= low => Err(Failure::usage(
            command,
            format!(
                "--kill-grace {} does not fit in --ttl {}: the validity left before an extension \
                 is about {}; use a longer --ttl or a shorter --kill-grace",
                human(grace),
                human(ttl),
                human(low)
            ),
        )),
        Some(grace) => Ok(grace),
        None => {
            let grace = DEFAULT_KILL_GRACE.min(low / 2);
            if grace >= MIN_DEFAULT_KILL_GRACE {
                return Ok(grace);
            }
            // Solve validity_before_extension(ttl) = 2 × MIN for ttl, then round up to what
            // is printed exactly (10 ms below a second, 100 ms above).
            let share = 1.0 - DEFAULT_EXTEND_FRACTION - DEFAULT_DRIFT_FACTOR;
            let need = MIN_DEFAULT_KILL_GRACE * 2 + Duration::from_millis(2) + node_timeout;
            let mut shortest = need.div_f64(share);
            loop {
                let step = if shortest < Duration::from_secs(1) {
                    10
                } else {
                    100
                };
                let ms = (shortest.as_millis() as u64).div_ceil(step) * step;
                shortest = Duration::from_millis(ms);
                if validity_before_extension(shortest, node_timeout) / 2 >= MIN_DEFAULT_KILL_GRACE {
                    break;
                }
                shortest += Duration::from_millis(1);
            }
            Err(Failure::usage(
                command,
                format!(
                    "--ttl {} is too short to run a command under: with --node-timeout {} the \
                     lock must be extended before the command could be told to stop; use --ttl \
                     {} or more",
                    human(ttl),
                    human(node_timeout),
                    // Exactly, in a form --ttl takes (`human` shows minutes as 1m05s).
                    if shortest < Duration::from_secs(1) {
                        format!("{}ms", shortest.as_millis())
                    } else {
                        format!("{:.1}s", shortest.as_secs_f64())
                    }
                ),
            ))
        }
    }
}

pub fn main(parser: lexopt::Parser) -> Result<u8, Failure> {
    let Some(o) = parse(parser)? else {
        return Ok(0);
    };
    let node_timeout = o
        .common
        .node_timeout
        .unwrap_or(redquorum::DEFAULT_NODE_TIMEOUT);
    let grace = kill_grace(&o, node_timeout)?;

    let cancel = Cancel::new();
    supervise::install_handlers(&cancel)?;
    let client = crate::client(&o.common, "run")?;
    if let Some(addr) = &o.metrics_addr {
        crate::metrics::serve(addr, &client)?;
    }

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

    let mut command = Command::new(&o.command[0]);
    command
        .args(&o.command[1..])
        .env("REDLOCK_RESOURCE", &o.resource)
        .env("REDLOCK_TOKEN", lock.token());
    if !o.pass_nodes {
        command.env_remove("REDLOCK_NODES");
    }
    if let Some(fence) = lock.fence() {
        command.env("REDLOCK_FENCE", fence.to_string());
    } else {
        command.env_remove("REDLOCK_FENCE");
    }
    if let Some(permit) = lock.permit() {
        command.env("REDLOCK_PERMIT", permit.to_string());
    } else {
        command.env_remove("REDLOCK_PERMIT");
    }
    let what = format!("the lock on {}", o.resource);
    let Supervised {
        code,
        stopping,
        held_for,
    } = match supervise::run(&lock, command, &what, o.kill_signal, grace, false) {
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

fn acquire_failure(e: redquorum::Error, o: &Options) -> Failure {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn options(ttl: Duration, kill_grace: Option<Duration>) -> Options {
        Options {
            common: Common::default(),
            ttl,
            wait: None,
            fenced: false,
            shared: false,
            permits: None,
            conflict_exit_code: EXIT_TEMPFAIL,
            kill_signal: libc::SIGTERM,
            kill_grace,
            metrics_addr: None,
            pass_nodes: false,
            resource: "r".into(),
            command: vec!["true".into()],
        }
    }

    /// The default grace never refuses a TTL that some grace fits in, and a TTL it refuses is
    /// given the shortest one that works, which does.
    #[test]
    fn the_default_grace_fits_every_ttl_or_names_the_shortest_that_works() {
        for nt in [1, 50, 500, 5_000, 60_000] {
            let nt = Duration::from_millis(nt);
            for ttl in [
                1, 10, 60, 100, 111, 150, 800, 1_000, 5_000, 15_000, 30_000, 86_400_000,
            ] {
                let ttl = Duration::from_millis(ttl);
                let low = validity_before_extension(ttl, nt);
                match kill_grace(&options(ttl, None), nt) {
                    Ok(g) => {
                        assert!(
                            g >= MIN_DEFAULT_KILL_GRACE && g < low,
                            "{ttl:?} {nt:?}: {g:?}"
                        );
                        assert!(g <= DEFAULT_KILL_GRACE);
                        // The same grace, given explicitly, is accepted too.
                        assert_eq!(kill_grace(&options(ttl, Some(g)), nt).ok(), Some(g));
                    }
                    Err(f) => {
                        let text = f.message;
                        let named = text
                            .rsplit("use --ttl ")
                            .next()
                            .and_then(|t| t.split(' ').next())
                            .and_then(|t| crate::args::duration(t).ok())
                            .unwrap_or_else(|| panic!("no TTL named in {text}"));
                        assert!(named > ttl, "{text}");
                        assert!(kill_grace(&options(named, None), nt).is_ok(), "{text}");
                    }
                }
            }
        }
        // Long TTLs keep the documented 5 s.
        let nt = Duration::from_millis(50);
        assert_eq!(
            kill_grace(&options(Duration::from_secs(30), None), nt).ok(),
            Some(DEFAULT_KILL_GRACE)
        );
        // A grace the user gave is refused when it does not fit, not shortened.
        assert!(
            kill_grace(
                &options(Duration::from_secs(5), Some(DEFAULT_KILL_GRACE)),
                nt
            )
            .is_err()
        );
    }
}
