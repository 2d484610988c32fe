//! A command run under a lock (`redlock run`) or a leadership (`redlock elect`): started in its
//! own process group, watched while it runs, and stopped before what it runs under can end.
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

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use redquorum::{Cancel, Lock};

use crate::args;
use crate::{EXIT_SOFTWARE, Failure, human};

#[cfg(target_os = "linux")]
pub mod reaper;

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
pub fn install_handlers(cancel: &Cancel) -> Result<(), Failure> {
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
