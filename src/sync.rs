//! Small synchronisation helpers shared by every layer.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Locks a mutex whatever a panicking holder left behind: every state guarded in this crate
/// stays consistent between statements.
pub(crate) fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a `sched_yield` may take and still count as cheap: longer than our own threads'
/// bursts of work (a worker's round of a batch, tens of µs), shorter than the time slice another
/// runnable process gets.
const SLOW_YIELD: Duration = Duration::from_millis(1);
/// A slow yield within this many yields of the same thread's last slow one makes yields
/// expensive.
const SLOW_AGAIN_WITHIN: u64 = 64;
/// How long expensive yields stop every wait in the process from yielding.
const NO_YIELD_FOR: Duration = Duration::from_secs(1);

static ORIGIN: OnceLock<Instant> = OnceLock::new();
/// Until when (µs after `ORIGIN`) no wait yields.
static NO_YIELD_UNTIL: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's yields so far, and the count at its last slow one (0: none yet).
    static YIELDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

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
/// timed, and a thread's yield slower than `SLOW_YIELD` within `SLOW_AGAIN_WITHIN` of its own
/// yields after its last slow one (the core is wanted) stops yielding in the whole process for
/// `NO_YIELD_FOR`. Beside two busy loops a third of the yields are slow: each thread that yields
/// may pay one slow yield (about a time slice) before some thread's second trips the guard,
/// and since a thread's count does not move while no wait yields, the process then pays about
/// one per `NO_YIELD_FOR`. The node workers yield at every wait for a job, so they trip it even
/// where callers are threads that live for one call. A thread's second, not any slow yield:
/// with four callers on one node of an idle 2-core machine, about 6 yields a second among
/// 500,000 took over 1 ms, a few threads' at once (one stall of the core they waited for), and
/// stopping yields at each one cost a third of the cycles (`bench -- --hot --threads 4`,
/// docs/performance.md).
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
    let (counts, expensive) = after_yield(YIELDS.get(), after - before);
    YIELDS.set(counts);
    if expensive {
        NO_YIELD_UNTIL.fetch_max(micros(after + NO_YIELD_FOR), Ordering::Relaxed);
    }
    true
}

/// A thread's yield counts (its yields, the count at its last slow one) after one more yield
/// that took `took`, and whether that yield makes yields expensive (see [`yield_if_cheap`]).
fn after_yield((count, last_slow): (u64, u64), took: Duration) -> ((u64, u64), bool) {
    let count = count + 1;
    if took <= SLOW_YIELD {
        return ((count, last_slow), false);
    }
    let again = last_slow != 0 && count - last_slow <= SLOW_AGAIN_WITHIN;
    ((count, count), again)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `took` (µs) through [`after_yield`] from a fresh thread's counts; says at which
    /// yields (1-based) yields became expensive.
    fn expensive_at(took: &[u64]) -> Vec<usize> {
        let mut counts = (0, 0);
        let mut at = Vec::new();
        for (i, &us) in took.iter().enumerate() {
            let (next, expensive) = after_yield(counts, Duration::from_micros(us));
            counts = next;
            if expensive {
                at.push(i + 1);
            }
        }
        at
    }

    #[test]
    fn one_slow_yield_is_a_stall_and_a_second_soon_after_is_a_busy_core() {
        // One stall among fast yields: yields stay cheap.
        let mut took = vec![10; 1000];
        took[500] = 3000;
        assert!(expensive_at(&took).is_empty());
        // A second slow yield of the same thread within SLOW_AGAIN_WITHIN of its yields.
        took[500 + SLOW_AGAIN_WITHIN as usize] = 1500;
        assert_eq!(expensive_at(&took), [501 + SLOW_AGAIN_WITHIN as usize]);
        // And each slow yield is the last one the next is counted from.
        took[600] = 2000;
        assert_eq!(expensive_at(&took), [501 + SLOW_AGAIN_WITHIN as usize, 601]);
        took[600] = 10;
        // One yield later it counts as a stall of its own.
        took[500 + SLOW_AGAIN_WITHIN as usize] = 10;
        took[501 + SLOW_AGAIN_WITHIN as usize] = 1500;
        assert!(expensive_at(&took).is_empty());
        // Exactly SLOW_YIELD is still cheap; a busy core (every third yield slow) is not.
        assert!(expensive_at(&[1000, 1000, 1000]).is_empty());
        assert_eq!(expensive_at(&[10, 10, 4000, 10, 10, 4000]), [6]);
    }
}
