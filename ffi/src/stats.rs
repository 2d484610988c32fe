//! `redlock_stats`: a snapshot of a client's counters, read with accessors, and its Prometheus
//! text.

use std::ffi::{CString, c_char};
use std::sync::OnceLock;

use redquorum::Stats;

use crate::boundary::{
    Failure, arg, arg_opt_str, c_string, fallible, free_box, infallible, out, read, redlock_error,
    redlock_status,
};
use crate::client::redlock_client;

/// A snapshot of a client's counters and latency histograms and of its nodes' status, from
/// `redlock_client_stats`. It does not change after it was taken; read it from any thread.
pub struct redlock_stats {
    stats: Stats,
    /// Written at the first `redlock_stats_prometheus`.
    prometheus: OnceLock<CString>,
}

/// Writes to `*out` a new snapshot of the client's counters (free it with `redlock_stats_free`):
/// cheap (atomic reads), it never waits for the nodes. The counters count from the client's
/// creation, whether anyone listens to events or not; resource names are never part of them.
///
/// `REDLOCK_INVALID_ARGUMENT` for a NULL client or out.
///
/// # Safety
/// `client` is NULL or a live client; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_stats(
    client: *const redlock_client,
    out: *mut *mut redlock_stats,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        out.write(redlock_stats {
            stats: client.client.stats(),
            prometheus: OnceLock::new(),
        });
        Ok(())
    })
}

/// Frees a snapshot. NULL is a no-op.
///
/// # Safety
/// `stats` is NULL or a pointer written by `redlock_client_stats`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_free(stats: *mut redlock_stats) {
    // SAFETY: per the contract.
    unsafe { free_box(stats) }
}

/// The snapshot in the Prometheus text exposition format (version 0.0.4): every counter, gauge
/// and histogram under its `redlock_` name (see docs/c-abi.md, "Telemetry"), ready to serve on
/// a `/metrics` endpoint. Owned by the snapshot (valid until `redlock_stats_free`); NULL for
/// NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_prometheus(stats: *const redlock_stats) -> *const c_char {
    // SAFETY: per the contract.
    unsafe {
        read(stats, |s| {
            s.prometheus
                .get_or_init(|| c_string(&s.stats.prometheus()))
                .as_ptr()
        })
    }
}

/// Reads a counter selected by an optional name: NULL for the sum over all names.
///
/// # Safety
/// `stats` is NULL or a live snapshot; `name` is NULL or a NUL-terminated string.
unsafe fn by_name(
    stats: *const redlock_stats,
    name: *const c_char,
    count: impl FnOnce(&Stats, Option<&str>) -> u64,
) -> u64 {
    infallible(|| {
        // SAFETY: per the caller's contract.
        let Some(s) = (unsafe { stats.as_ref() }) else {
            return 0;
        };
        // SAFETY: per the caller's contract.
        let name: Result<_, Failure> = unsafe { arg_opt_str(name, "name") };
        name.map_or(0, |name| count(&s.stats, name))
    })
}

/// Acquisitions that ended with `outcome` (`acquired`, `refused`, `no_quorum`, `cancelled` or
/// `error`), of every kind of lock; NULL for all of them, whatever their outcome. 0 for an
/// outcome no acquisition had (an unknown one included), and for a NULL snapshot.
///
/// # Safety
/// `stats` is NULL or a live snapshot; `outcome` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_acquisitions(
    stats: *const redlock_stats,
    outcome: *const c_char,
) -> u64 {
    // SAFETY: same contract.
    unsafe {
        by_name(stats, outcome, |s, outcome| match outcome {
            Some(outcome) => s.acquisitions(outcome),
            None => s.acquisitions.iter().map(|a| a.duration.count).sum(),
        })
    }
}

/// Held locks found lost for `reason` (`refused`: a quorum no longer had them, `expired`: their
/// validity ran out before an extension succeeded, `suspended`: this host was suspended while
/// they were held); NULL for all reasons. 0 for an unknown reason and for a NULL snapshot.
///
/// # Safety
/// `stats` is NULL or a live snapshot; `reason` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_lost(
    stats: *const redlock_stats,
    reason: *const c_char,
) -> u64 {
    // SAFETY: same contract.
    unsafe {
        by_name(stats, reason, |s, reason| {
            s.lost
                .iter()
                .filter(|(r, _)| reason.is_none_or(|want| *r == want))
                .map(|(_, n)| n)
                .sum()
        })
    }
}

/// Locks of the client held now (acquired, neither released nor found lost); 0 for NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_locks_held(stats: *const redlock_stats) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(stats, |s| s.stats.locks_held) }
}

/// Acquisitions waiting now for a resource to be released; 0 for NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_waiters(stats: *const redlock_stats) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(stats, |s| s.stats.waiters) }
}

/// Extensions that succeeded (by hand or automatic); 0 for NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_extensions(stats: *const redlock_stats) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(stats, |s| s.stats.extensions) }
}

/// Extensions that failed without losing the lock (too few nodes answered; retried while
/// validity remained); 0 for NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_extensions_failed(stats: *const redlock_stats) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(stats, |s| s.stats.extensions_failed) }
}

/// Events dropped because the listeners' queue was full (a callback too slow for the rate of
/// events); 0 for NULL.
///
/// # Safety
/// `stats` is NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_stats_events_dropped(stats: *const redlock_stats) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(stats, |s| s.stats.events_dropped) }
}
