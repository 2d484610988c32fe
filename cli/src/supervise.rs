//! A command run under a lock (`redlock run`) or a leadership (`redlock elect`): the options
//! both take ([`Supervision`]), the command started in its own process group, watched while it
//! runs, and stopped before what it runs under can end.
//!
//! The command must not outlive the lock: when the lock is found lost, its group gets SIGKILL at
//! once, since another holder may already have it (no lock-delay keeps the resource closed
//! after a loss); while extensions cannot reach a quorum it gets the kill signal no later than
//! the grace before the validity ends, and SIGKILL before it ends.
//!
//! Should redlock die while the command runs (SIGKILL, the OOM killer, a crash), the command's
//! whole tree gets SIGKILL on Linux, instead of running on unsupervised: its process group and
//! every process it started, a daemon in a session of its own included, as [`reaper`] says.
//! Other systems run the command without a reaper, and it outlives a killed redlock.
//!
//! Signals: SIGINT, SIGTERM and SIGHUP are forwarded to the command's group while it runs;
//! before (or between two commands) they cancel the wait. Either way the signal is remembered,
//! so that `elect` stops campaigning.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use clap::ValueHint;
use redquorum::{Cancel, DEFAULT_DRIFT_FACTOR, DEFAULT_EXTEND_FRACTION, Lock, Redlock};

use crate::args::{self, human};
use crate::exit::{EXIT_SOFTWARE, Failure};
use crate::metrics;
use crate::nodes::Nodes;

#[cfg(target_os = "linux")]
pub mod reaper;

/// The options of `run` and `elect`, after their RESOURCE or NAME: how the command is stopped,
/// what it inherits, the metrics endpoint, the command itself, and the nodes.
#[derive(clap::Args, Debug)]
pub struct Supervision {
    /// Signal asking the command to stop in a partition
    ///
    /// While extensions cannot reach a quorum. A lost lock or leadership gets SIGKILL instead,
    /// at once: another holder may already have it.
    #[arg(
        long,
        value_name = "SIG",
        default_value = "TERM",
        value_parser = args::signal,
        verbatim_doc_comment
    )]
    pub kill_signal: i32,
    /// Time between --kill-signal and the end of the validity
    ///
    /// While extensions cannot reach a quorum, the command gets --kill-signal this long before
    /// the validity ends, and SIGKILL before it ends. Default 5s, or half the validity left
    /// before an extension when the TTL is shorter than about 15s; a grace given must fit in
    /// that validity.
    #[arg(long, value_name = "DUR", value_parser = args::duration, verbatim_doc_comment)]
    pub kill_grace: Option<Duration>,
    /// Serve metrics at http://ADDR/metrics and /stats.json
    ///
    /// The client's counters as Prometheus text, and as the JSON that 'redlock stats ADDR'
    /// reads, while redlock runs. PORT alone binds localhost. No authentication: a HOST
    /// beyond localhost gets a warning.
    #[arg(long, value_name = "ADDR", value_parser = metrics::address, verbatim_doc_comment)]
    pub metrics_addr: Option<String>,
    /// Leave REDLOCK_NODES in the command's environment
    ///
    /// Removed by default: it may hold passwords.
    #[arg(long, verbatim_doc_comment)]
    pub pass_nodes: bool,
    /// The command to run, and its arguments
    #[arg(
        value_name = "COMMAND",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        value_hint = ValueHint::CommandWithArguments
    )]
    pub command: Vec<OsString>,
    #[command(flatten)]
    pub nodes: Nodes,
}

impl Supervision {
    /// What `command` (`run`, `elect`) needs before it may run anything under a TTL of `ttl`:
    /// the grace, checked against the TTL first; the signal handlers, with the cancel handle
    /// they trip while nothing runs; the client; its metrics endpoint when asked.
    pub fn start(&self, command: &str, ttl: Duration) -> Result<Started, Failure> {
        let node_timeout = self
            .nodes
            .node_timeout
            .unwrap_or(redquorum::DEFAULT_NODE_TIMEOUT);
        let grace = kill_grace(command, ttl, self.kill_grace, node_timeout)?;
        let cancel = Cancel::new();
        install_handlers(&cancel)?;
        let client = self.nodes.client(command)?;
        if let Some(addr) = &self.metrics_addr {
            metrics::serve(addr, &client)?;
        }
        Ok(Started {
            client,
            cancel,
            grace,
        })
    }

    /// The command, with each variable of `env` set (`Some`) or removed (`None`, so that a
    /// nested run does not pass on its parent's); without `REDLOCK_NODES` unless
    /// `--pass-nodes`.
    pub fn command(&self, env: &[(&str, Option<String>)]) -> Command {
        let mut command = Command::new(&self.command[0]);
        command.args(&self.command[1..]);
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if !self.pass_nodes {
            command.env_remove("REDLOCK_NODES");
        }
        command
    }
}

/// What [`Supervision::start`] set up.
pub struct Started {
    pub client: Redlock,
    pub cancel: Cancel,
    /// The time the command gets to stop (`--kill-grace`, or the default).
    pub grace: Duration,
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

/// The grace the command of `command` (`run`, `elect`) gets: the one given, if it fits in the
/// TTL; by default 5 s, or half the validity left before an extension when that is less. A
/// default never refuses a valid `--ttl`: a TTL too short for any grace is refused for what it
/// is, with the shortest that works.
fn kill_grace(
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

/// The command's process group, once it runs (0 before): signals go there.
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);
/// A signal that came while no command ran (or just before it started): not yet forwarded.
static PENDING: AtomicI32 = AtomicI32::new(0);
/// The last signal redlock got, forwarded or not: asks `elect` to stop.
static STOP: AtomicI32 = AtomicI32::new(0);

/// The signal that came while no command ran, if any, taking it.
pub fn take_pending() -> i32 {
    PENDING.swap(0, Ordering::SeqCst)
}

/// The last signal redlock got (0: none).
pub fn stop_requested() -> i32 {
    STOP.load(Ordering::SeqCst)
}

/// How a supervised command ended.
pub struct Supervised {
    /// Its exit code (128 + N for signal N).
    pub code: u8,
    /// Why it was stopped, when the lock stopped being safe to rely on.
    pub stopping: Option<String>,
    /// How long it ran.
    pub held_for: Duration,
}

/// When, before the validity ends, the command gets SIGKILL if it is still running.
pub fn kill_margin(grace: Duration) -> Duration {
    (grace / 2).min(Duration::from_secs(1))
}

/// Runs `command` in its own process group while `lock` is held, and returns once it exited.
/// `what` names the lock in messages ("the lock on R"). With `stop_on_signal`, a signal
/// redlock gets while the command runs (which the handler forwards) also starts the grace,
/// after which the command gets SIGKILL.
pub fn run(
    lock: &Lock,
    command: Command,
    what: &str,
    kill_signal: i32,
    grace: Duration,
    stop_on_signal: bool,
) -> Result<Supervised, Failure> {
    let started = Instant::now();
    // Closing the link (redlock's death) kills the command's tree; it stays open until the
    // command has exited.
    let (child, pid, _link) = start(command)?;
    CHILD_GROUP.store(pid, Ordering::SeqCst);

    let (exited_tx, exited) = crossbeam_channel::bounded::<std::io::Result<ExitStatus>>(1);
    let mut child = child;
    std::thread::Builder::new()
        .name("redlock-child".into())
        .spawn(move || {
            let _ = exited_tx.send(child.wait());
        })
        .map_err(|e| {
            signal_group(pid, libc::SIGKILL);
            Failure::new(EXIT_SOFTWARE, format!("cannot start a thread: {e}"))
        })?;

    // Disconnects when the lock ends; replaced by a channel that never fires once it did.
    let mut lost_rx = lock.lost();
    let tick = Duration::from_millis(10);
    let margin = kill_margin(grace);
    // Why the command is being stopped, once it is: the lock is no longer safe to rely on.
    let mut stopping: Option<String> = None;
    let mut signalled_at: Option<Instant> = None;
    let mut killed = false;
    let status = loop {
        let ended = crossbeam_channel::select! {
            recv(exited) -> status => break status,
            recv(lost_rx) -> _ => true,
            default(tick) => false,
        };
        if ended {
            lost_rx = crossbeam_channel::never();
        }
        // Signals redlock got before the command's group was known.
        let pending = PENDING.swap(0, Ordering::SeqCst);
        if pending != 0 {
            signal_group(pid, pending);
        }
        let now = Instant::now();
        if stop_on_signal && signalled_at.is_none() && stop_requested() != 0 {
            // The handler forwarded the signal; SIGKILL follows after the grace.
            signalled_at = Some(now);
        }
        let validity = lock.validity();
        if !killed && lock.is_lost() {
            // Another holder may already be in: no grace, whatever was sent before.
            let why = format!(
                "lost {what}: it is no longer held on a quorum of nodes (deleted, expired or \
                 taken)"
            );
            errln!(
                "redlock: {why}; another holder may already have it, so the command gets \
                 SIGKILL at once"
            );
            signal_group(pid, libc::SIGKILL);
            killed = true;
            stopping = Some(why);
        } else if stopping.is_none() && validity <= grace {
            let why = format!(
                "cannot extend {what}: no quorum of nodes answered, and its validity ends in {}",
                human(validity)
            );
            errln!(
                "redlock: {why}; sending {} to the command",
                args::signal_name(kill_signal)
            );
            signal_group(pid, kill_signal);
            signalled_at = signalled_at.or(Some(now));
            stopping = Some(why);
        }
        if let Some(at) = signalled_at
            && !killed
            && ((stopping.is_some() && validity <= margin) || now.duration_since(at) >= grace)
        {
            // It may have ended since the last look.
            if let Ok(status) = exited.try_recv() {
                break Ok(status);
            }
            errln!(
                "redlock: the command is still running {} after it was told to stop; sending \
                 SIGKILL",
                human(now.duration_since(at))
            );
            signal_group(pid, libc::SIGKILL);
            killed = true;
        }
    };
    CHILD_GROUP.store(0, Ordering::SeqCst);
    let held_for = started.elapsed();
    #[cfg(target_os = "linux")]
    if let Ok(Ok(status)) = &status
        && let Some(sig) = status.signal()
    {
        // The reaper exits with the command's code: a signal means it was killed itself. The
        // command's leader got SIGKILL from the kernel; the rest of its group gets it here.
        signal_group(pid, libc::SIGKILL);
        return Err(Failure::new(
            EXIT_SOFTWARE,
            format!(
                "lost track of the command: its watcher (redlock-reaper) died of {}; the \
                 command's process group got SIGKILL",
                args::signal_name(sig)
            ),
        ));
    }
    match status {
        Ok(Ok(status)) => Ok(Supervised {
            code: exit_code(status),
            stopping,
            held_for,
        }),
        Ok(Err(e)) => Err(Failure::new(
            EXIT_SOFTWARE,
            format!("lost track of the command: {e}"),
        )),
        Err(_) => Err(Failure::new(EXIT_SOFTWARE, "lost track of the command")),
    }
}

/// Redlock's end of the socket to the command's reaper: it must stay open while the command
/// may run.
#[cfg(target_os = "linux")]
type Link = std::os::unix::net::UnixStream;
#[cfg(not(target_os = "linux"))]
type Link = ();

/// Starts `command` in a process group of its own. Returns the process whose exit code is the
/// command's (on Linux its reaper, else the command itself), the group's leader and the link.
#[cfg(target_os = "linux")]
fn start(command: Command) -> Result<(Child, i32, Link), Failure> {
    reaper::spawn(&command)
}

#[cfg(not(target_os = "linux"))]
fn start(mut command: Command) -> Result<(Child, i32, Link), Failure> {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    let child = command.spawn().map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        Failure::new(
            code,
            format!(
                "cannot run {}: {e} (the lock is released)",
                command.get_program().to_string_lossy()
            ),
        )
    })?;
    let pid = child.id() as i32;
    Ok((child, pid, ()))
}

/// The shell's convention: the code, or 128 + the signal that ended the command.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        (None, None) => EXIT_SOFTWARE,
    }
}

fn signal_group(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group the command leads.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// SIGINT, SIGTERM and SIGHUP: forwarded to the command's group while it runs; before, they
/// cancel the wait. Both are async-signal-safe (atomic loads and stores, kill(2); the cancel's
/// atomic flag and write(2)).
fn install_handlers(cancel: &Cancel) -> Result<(), Failure> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let cancel = cancel.clone();
        let action = move || {
            STOP.store(sig, Ordering::SeqCst);
            let group = CHILD_GROUP.load(Ordering::SeqCst);
            if group > 0 {
                // SAFETY: kill(2) is async-signal-safe.
                unsafe {
                    libc::kill(-group, sig);
                }
            } else {
                PENDING.store(sig, Ordering::SeqCst);
                cancel.cancel();
            }
        };
        // SAFETY: the action only does async-signal-safe things (see above).
        unsafe { signal_hook::low_level::register(sig, action) }.map_err(|e| {
            Failure::new(
                EXIT_SOFTWARE,
                format!("cannot handle {}: {e}", args::signal_name(sig)),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
                match kill_grace("run", ttl, None, nt) {
                    Ok(g) => {
                        assert!(
                            g >= MIN_DEFAULT_KILL_GRACE && g < low,
                            "{ttl:?} {nt:?}: {g:?}"
                        );
                        assert!(g <= DEFAULT_KILL_GRACE);
                        // The same grace, given explicitly, is accepted too.
                        assert_eq!(kill_grace("run", ttl, Some(g), nt).ok(), Some(g));
                    }
                    Err(f) => {
                        let text = f.message;
                        let named = text
                            .rsplit("use --ttl ")
                            .next()
                            .and_then(|t| t.split(' ').next())
                            .and_then(|t| args::duration(t).ok())
                            .unwrap_or_else(|| panic!("no TTL named in {text}"));
                        assert!(named > ttl, "{text}");
                        assert!(kill_grace("run", named, None, nt).is_ok(), "{text}");
                    }
                }
            }
        }
        // Long TTLs keep the documented 5 s.
        let nt = Duration::from_millis(50);
        assert_eq!(
            kill_grace("run", Duration::from_secs(30), None, nt).ok(),
            Some(DEFAULT_KILL_GRACE)
        );
        // A grace the user gave is refused when it does not fit, not shortened.
        assert!(kill_grace("run", Duration::from_secs(5), Some(DEFAULT_KILL_GRACE), nt).is_err());
    }
}
