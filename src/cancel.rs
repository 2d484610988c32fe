//! Cancellation: a handle that ends pending acquisitions from any thread, or from a signal
//! handler.
//!
//! A waiter parks on channels (its release notification, its deadline); an atomic flag alone
//! would wake nobody. So each handle owns a channel that disconnects when it fires — every
//! waiter selecting on it wakes at once, like Go's `ctx.Done()` — and firing must be possible
//! where almost nothing is allowed: in a signal handler (Python's Ctrl-C, a C program's
//! `SIGALRM`) a thread may not lock, allocate or touch a channel. [`Cancel::cancel`] therefore
//! only stores the flag and writes one byte to a process-wide self-pipe (both async-signal-safe);
//! one relay thread, started with the first handle, reads the pipe and disconnects the channel
//! of every handle whose flag is set.

#![allow(unsafe_code)]

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crossbeam_channel::{Receiver, Sender};

use crate::sync::relock;

/// Ends pending acquisitions: pass it to [`LockRequest::cancel`](crate::LockRequest::cancel),
/// then call [`cancel`](Cancel::cancel) from any thread or signal handler.
///
/// An acquisition that sees the cancel returns [`Error::Cancelled`](crate::Error::Cancelled)
/// after undoing what it had taken on the nodes, exactly as a failed attempt is undone. A cancel
/// racing with success ends in exactly one of two ways: the caller gets the lock (and owns its
/// release), or the undo has been sent to every node before `Cancelled` returns (for a
/// reentrant hold: to every node known to have counted it; see
/// [`Redlock::acquire`](crate::Redlock::acquire)). A handle fires
/// once and stays fired: every later acquisition with it fails at once. Cheap to clone; clones
/// share the state.
#[derive(Clone)]
pub struct Cancel {
    inner: Arc<Inner>,
}

struct Inner {
    fired: AtomicBool,
    /// Dropped (disconnecting `rx`) once the cancel has been relayed.
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
}

impl Inner {
    fn wake(&self) {
        relock(&self.tx).take();
    }
}

/// The self-pipe and the handles it relays for.
struct Relay {
    write_fd: libc::c_int,
    handles: Mutex<Vec<Weak<Inner>>>,
}

static RELAY: OnceLock<Option<Relay>> = OnceLock::new();

fn relay() -> Option<&'static Relay> {
    RELAY.get_or_init(start_relay).as_ref()
}

/// Creates the pipe and the thread that reads it; `None` if the system refuses either (then
/// [`Cancel::cancel`] wakes waiters directly and is not signal-safe).
fn start_relay() -> Option<Relay> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    let [read_fd, write_fd] = fds;
    // A full pipe already holds a wake-up: the writer must never block in a signal handler.
    // SAFETY: plain fcntl calls on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(write_fd, libc::F_GETFL);
        libc::fcntl(write_fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let spawned = std::thread::Builder::new()
        .name("redlock-cancel".into())
        .stack_size(64 * 1024)
        .spawn(move || run_relay(read_fd));
    if spawned.is_err() {
        // SAFETY: both descriptors are ours and used nowhere else.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
        return None;
    }
    Some(Relay {
        write_fd,
        handles: Mutex::new(Vec::new()),
    })
}

fn run_relay(read_fd: libc::c_int) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reads into a buffer of the given length from a descriptor we own.
        let n = unsafe { libc::read(read_fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
        let Some(relay) = RELAY.get().and_then(Option::as_ref) else {
            continue;
        };
        relock(&relay.handles).retain(|weak| match weak.upgrade() {
            Some(inner) => {
                if inner.fired.load(Ordering::SeqCst) {
                    inner.wake();
                    false
                } else {
                    true
                }
            }
            None => false,
        });
    }
}

impl Cancel {
    /// A handle that has not fired.
    pub fn new() -> Cancel {
        let (tx, rx) = crossbeam_channel::bounded(0);
        let inner = Arc::new(Inner {
            fired: AtomicBool::new(false),
            tx: Mutex::new(Some(tx)),
            rx,
        });
        if let Some(relay) = relay() {
            let mut handles = relock(&relay.handles);
            // Handles dropped without firing leave dead entries: sweep them whenever the list
            // doubles, so it stays within twice the live handles at amortised O(1) a call.
            if handles.len() >= 32 && handles.len().is_power_of_two() {
                handles.retain(|h| h.strong_count() > 0);
            }
            handles.push(Arc::downgrade(&inner));
        }
        Cancel { inner }
    }

    /// Fires the handle: every acquisition using it ends with `Error::Cancelled` (unless it
    /// already got its lock), waiters wake at once. Idempotent.
    ///
    /// Async-signal-safe: it stores a flag and writes one byte to a pipe, nothing else, so it
    /// may be called from a signal handler. (Only if the system refused the pipe or its relay
    /// thread, which no normal process sees, does it wake waiters directly; that path is not
    /// signal-safe.)
    pub fn cancel(&self) {
        self.inner.fired.store(true, Ordering::SeqCst);
        match RELAY.get().and_then(Option::as_ref) {
            Some(relay) => {
                // SAFETY: write(2) of one byte from a valid buffer; a full pipe (EAGAIN) already
                // has a wake-up pending, which reads every fired flag.
                unsafe { libc::write(relay.write_fd, b"c".as_ptr().cast(), 1) };
            }
            None => self.inner.wake(),
        }
    }

    /// Whether [`cancel`](Cancel::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Disconnects (so `recv` returns at once) once the cancel has fired.
    pub(crate) fn fired(&self) -> &Receiver<()> {
        &self.inner.rx
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_cancel_wakes_every_waiter_and_stays_fired() {
        let cancel = Cancel::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let c = cancel.clone();
                std::thread::spawn(move || c.fired().recv_timeout(Duration::from_secs(10)))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!cancel.is_cancelled());
        let start = Instant::now();
        cancel.cancel();
        for w in waiters {
            // Disconnected, not timed out.
            assert_eq!(
                w.join().unwrap(),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected)
            );
        }
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(cancel.is_cancelled());
        assert!(cancel.fired().recv_timeout(Duration::from_secs(5)).is_err());
        cancel.cancel();
    }

    #[test]
    fn handles_dropped_without_firing_do_not_pile_up() {
        for _ in 0..100_000 {
            drop(Cancel::new());
        }
        let live = relay().map_or(0, |r| relock(&r.handles).len());
        assert!(live < 1_000, "{live} entries for handles long dropped");
    }

    #[test]
    fn unfired_handles_are_not_woken_by_others() {
        let a = Cancel::new();
        let b = Cancel::new();
        a.cancel();
        assert!(a.fired().recv_timeout(Duration::from_secs(5)).is_err());
        assert_eq!(
            b.fired().recv_timeout(Duration::from_millis(50)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout)
        );
    }
}
