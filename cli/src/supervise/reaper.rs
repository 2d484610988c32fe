//! The reaper (Linux): a small process between redlock and the command, so that the command's
//! whole tree dies with redlock however redlock dies (SIGKILL, the OOM killer, a crash).
//!
//! `PR_SET_PDEATHSIG` alone reaches only the process it is set on: the command's own children
//! would run on after redlock, while the lock can become someone else's. So redlock re-runs
//! itself (`/proc/self/exe`, never a path that an upgrade could have replaced) as
//! `redlock __reap FD -- COMMAND ARGS...`, in a process group of its own (a SIGKILL to
//! redlock's group, such as `kill -9 %1`, does not reach it). The reaper:
//!
//! - makes itself the children's subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant whose
//!   parent exits (a double fork, a daemon that `setsid`s) is re-parented to the reaper, so
//!   every process the command starts stays in the reaper's tree;
//! - starts the command in a process group of its own (redlock signals that group, as it
//!   would without a reaper), with `PR_SET_PDEATHSIG` so that the command's leader dies if the
//!   reaper itself is SIGKILLed;
//! - tells redlock the command's pid, or why it could not start it, over a socket (FD) that
//!   only redlock holds the other end of;
//! - exits with the command's exit code (128 + N for signal N) once it exits;
//! - when the socket closes while the command runs, which happens only when redlock is gone
//!   (the kernel closes a dead process's descriptors), sends SIGKILL to the command's group
//!   and to every descendant left in its tree, until none is left.
//!
//! A forked child that has not exec'd must keep to async-signal-safe calls (redlock has
//! threads), hence a re-run of the binary rather than a fork that goes on running Rust code.
//!
//! What escapes: work the command hands to a process outside its tree (a service manager, `at`,
//! another host). If the reaper alone is SIGKILLed, the command's first process dies with it
//! and redlock kills the rest of its group, but a daemon in a session of its own runs on; if
//! redlock and the reaper are SIGKILLed together, only the command's first process dies. What
//! the command leaves running when it exits by itself is not the reaper's: it runs on, as
//! without a reaper. The reaper blocks every signal it can, so that a SIGTERM to every process
//! of a service (systemd's stop) or a `pkill` does not take it before the command; redlock
//! forwards those signals to the command.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Duration;

use crate::exit::{EXIT_SOFTWARE, EXIT_USAGE, Failure};

/// The hidden first argument that makes `redlock` the reaper.
pub const ARG: &str = "__reap";

/// Set, under the lock, once redlock is gone: the command's exit no longer ends the reaper,
/// which is busy killing what is left of its tree.
static REDLOCK_GONE: Mutex<bool> = Mutex::new(false);

/// In redlock: starts the reaper, which starts `command` (its program, arguments, environment
/// and directory). Returns the reaper (its exit code is the command's), the command's pid
/// (the leader of its process group) and redlock's end of the socket, which must stay open
/// for as long as the command may run: closing it kills the command's tree.
pub fn spawn(command: &Command) -> Result<(Child, i32, UnixStream), Failure> {
    let program = command.get_program().to_string_lossy().into_owned();
    let cannot = |e: &dyn std::fmt::Display| {
        Failure::new(
            126,
            format!(
                "cannot run {program}: cannot start redlock's watcher of it \
                 (/proc/self/exe, needs /proc): {e} (the lock is released)"
            ),
        )
    };
    let (ours, theirs) = UnixStream::pair().map_err(|e| cannot(&e))?;
    let fd = theirs.as_raw_fd();
    let mut reaper = Command::new("/proc/self/exe");
    reaper
        .arg0("redlock")
        .arg(ARG)
        .arg(fd.to_string())
        .arg("--")
        .arg(command.get_program())
        .args(command.get_args())
        .process_group(0);
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => reaper.env(name, value),
            None => reaper.env_remove(name),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        reaper.current_dir(dir);
    }
    // SAFETY: between fork and exec the closure only calls fcntl(2), async-signal-safe.
    unsafe {
        reaper.pre_exec(move || {
            // The reaper's end of the socket survives the exec (the pair is close-on-exec).
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = reaper.spawn().map_err(|e| cannot(&e))?;
    drop(theirs);
    // The reaper's first line: `pid N`, or `error CODE MESSAGE`.
    let mut line = String::new();
    let read = BufReader::new(&ours).read_line(&mut line);
    let mut words = line.trim_end().splitn(3, ' ');
    match (words.next(), words.next(), words.next()) {
        (Some("pid"), Some(pid), None) if pid.parse::<i32>().is_ok_and(|p| p > 0) => {
            Ok((child, pid.parse().unwrap_or_default(), ours))
        }
        (Some("error"), Some(code), Some(message)) => {
            let _ = child.wait();
            Err(Failure::new(
                code.parse().unwrap_or(126),
                format!("cannot run {program}: {message} (the lock is released)"),
            ))
        }
        _ => {
            let _ = child.kill();
            let status = child.wait();
            let why = match (read, status) {
                (Err(e), _) => e.to_string(),
                (_, Ok(status)) => format!("it ended ({status}) before starting the command"),
                (_, Err(e)) => e.to_string(),
            };
            Err(cannot(&why))
        }
    }
}

/// `redlock __reap FD -- COMMAND ARGS...`: the reaper itself (see the module's docs), given
/// the arguments after `__reap`.
pub fn main(mut args: Vec<OsString>) -> Result<u8, Failure> {
    let misuse = || {
        Failure::new(
            EXIT_USAGE,
            format!("'{ARG}' is redlock's own, started by 'redlock run' and 'redlock elect'"),
        )
    };
    if args.len() < 3 || args[1] != "--" {
        return Err(misuse());
    }
    let fd: i32 = args[0]
        .to_str()
        .and_then(|t| t.parse().ok())
        .ok_or_else(misuse)?;
    // SAFETY: fstat(2) into a local struct; fcntl(2) on a descriptor checked to be a socket.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFSOCK
    };
    if !is_socket || unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(misuse());
    }
    // SAFETY: the descriptor is a socket that nothing else in this process owns.
    let mut link = unsafe { UnixStream::from_raw_fd(fd) };
    let command: Vec<OsString> = args.drain(2..).collect();

    // SAFETY: plain system calls on this process, into locals.
    let (me, mask) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut mask);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_NAME, c"redlock-reaper".as_ptr(), 0, 0, 0);
        (libc::getpid(), mask)
    };

    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).process_group(0);
    // SAFETY: between fork and exec the closure only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || {
            // The command gets the signal mask redlock gave the reaper, as it would without
            // a reaper (exec keeps the mask).
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            // Should the reaper die (SIGKILL), the command's leader goes with it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != me {
                libc::_exit(EXIT_SOFTWARE as i32);
            }
            Ok(())
        });
    }
    let pid = match cmd.spawn() {
        Ok(child) => child.id() as i32,
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let _ = writeln!(link, "error {code} {e}");
            return Ok(code);
        }
    };

    // Redlock learns the pid before the command's exit can end the reaper.
    if writeln!(link, "pid {pid}").is_ok() {
        // Reaps every child (the command, and the orphans of its tree re-parented here); the
        // command's exit ends the reaper with its code, unless redlock is gone.
        let reaping = std::thread::Builder::new()
            .name("reap".into())
            .spawn(move || {
                loop {
                    let mut status = 0;
                    // SAFETY: waitpid(2) into a local.
                    let reaped = unsafe { libc::waitpid(-1, &mut status, 0) };
                    if reaped == pid {
                        let gone = REDLOCK_GONE.lock().unwrap_or_else(|e| e.into_inner());
                        if !*gone {
                            std::process::exit(exit_code(status));
                        }
                    } else if reaped < 0
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            });
        if let Err(e) = reaping {
            kill_tree(pid, me);
            return Err(Failure::new(
                EXIT_SOFTWARE,
                format!("cannot watch the command: cannot start a thread: {e}; killed it"),
            ));
        }
        // Redlock writes nothing: the read returns at end of file, when redlock is gone.
        let mut buf = [0u8; 16];
        loop {
            match link.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() != std::io::ErrorKind::Interrupted => break,
                _ => {}
            }
        }
    }
    *REDLOCK_GONE.lock().unwrap_or_else(|e| e.into_inner()) = true;
    kill_tree(pid, me);
    Ok(EXIT_SOFTWARE)
}

/// The shell's convention, as redlock reports it: the code, or 128 + the signal.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// SIGKILL to the command's group, then to every process below the reaper, until two scans
/// of /proc in a row find none alive (a process read before its parent was reaped can be
/// missed by one scan; the next finds it re-parented here).
fn kill_tree(group: i32, me: i32) {
    // SAFETY: kill(2) of the command's group and of this process's descendants.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let mut pause = Duration::from_millis(1);
    let mut empty = 0;
    while empty < 2 {
        let left = descendants(me);
        if left.is_empty() {
            empty += 1;
        } else {
            empty = 0;
            for pid in left {
                // SAFETY: as above.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The live (not zombie) processes below `root`, from /proc (none if it cannot be read).
fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut alive: HashSet<i32> = HashSet::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (name) state ppid ...`; the name may hold spaces and parentheses.
        let mut fields = stat
            .rsplit_once(')')
            .map_or("", |(_, f)| f)
            .split_whitespace();
        let (Some(state), Some(Ok(parent))) = (fields.next(), fields.next().map(str::parse)) else {
            continue;
        };
        children.entry(parent).or_default().push(pid);
        if state != "Z" && state != "X" {
            alive.insert(pid);
        }
    }
    let mut seen: HashSet<i32> = HashSet::from([root]);
    let mut below = vec![root];
    let mut i = 0;
    while let Some(&p) = below.get(i) {
        for &c in children.get(&p).into_iter().flatten() {
            if seen.insert(c) {
                below.push(c);
            }
        }
        i += 1;
    }
    below.retain(|p| *p != root && alive.contains(p));
    below
}
