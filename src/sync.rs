//! Small synchronisation helpers shared by every layer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Locks a mutex whatever a panicking holder left behind: every state guarded in this crate
/// stays consistent between statements.
pub(crate) fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a `sched_yield` may take and still count as cheap: longer than our own threads'
/// bursts of work (a worker's round of a batch, tens of µs), about the time slice another
/// runnable process gets. 0.5 ms stopped yields on an idle machine too (our own 4 to 16 caller
/// threads), 1 ms kept the busy machine's gains (`bench -- --hot`, docs/performance.md).
const SLOW_YIELD: Duration = Duration::from_millis(1);
/// How long a slow yield stops every wait in the process from yielding.
const NO_YIELD_FOR: Duration = Duration::from_secs(1);

static ORIGIN: OnceLock<Instant> = OnceLock::new();
/// Until when (µs after `ORIGIN`) no wait yields.
static NO_YIELD_UNTIL: AtomicU64 = AtomicU64::new(0);

/// Yields the core once if yielding is cheap now, and says whether it did: a thread that waits
/// a few microseconds for another of ours (a worker's answer, a caller's next job) looks again
/// while this says yes, and sleeps (parks) once it says no.
///
/// On a machine with an idle core a yield returns at once, and looking again saves the wait a
/// wake-up. On a machine with none, a yield may hand the core to other runnable threads for a
/// time slice (on Linux's EEVDF scheduler, 6.6 and later, it also moves the yielding thread's
/// deadline back): a thread that yields while it waits is runnable without running. With yields
/// on every wait, an uncontended lock cycle at one thread beside two busy loops took 4 to 6 ms
/// at p50 instead of 0.08 to 0.4 ms (docs/performance.md, "A busy machine"). So each yield is
/// timed, and one slower than `SLOW_YIELD` (the core was wanted) stops yielding in the whole
/// process for `NO_YIELD_FOR`. Each thread that yields before that is known pays one slow
/// yield, about a time slice, at most once per `NO_YIELD_FOR`.
pub(crate) fn yield_if_cheap() -> bool {
    if !spinning() {
        return false;
    }
    let origin = *ORIGIN.get_or_init(Instant::now);
    let micros =
        |at: Instant| u64::try_from(at.duration_since(origin).as_micros()).unwrap_or(u64::MAX);
    let before = Instant::now();
    if micros(before) < NO_YIELD_UNTIL.load(Ordering::Relaxed) {
        return false;
    }
    std::thread::yield_now();
    let after = Instant::now();
    if after - before > SLOW_YIELD {
        NO_YIELD_UNTIL.fetch_max(micros(after + NO_YIELD_FOR), Ordering::Relaxed);
    }
    true
}

/// Whether a wait for another of the client's threads looks again awake (spins, then yields
/// while [`yield_if_cheap`] allows) before it sleeps; off, every such wait sleeps at once.
static SPIN: AtomicBool = AtomicBool::new(true);

/// Whether waits spin before they sleep (see [`set_spinning`]).
pub(crate) fn spinning() -> bool {
    SPIN.load(Ordering::Relaxed)
}

/// Turns the looking-awake of every client in the process on (the default) or off, so that the
/// benchmark can measure what it buys in one run (`bench -- --hot --spin`,
/// docs/performance.md). Not part of the API: no language's binding exposes it.
#[doc(hidden)]
pub fn set_spinning(on: bool) {
    SPIN.store(on, Ordering::Relaxed);
}
