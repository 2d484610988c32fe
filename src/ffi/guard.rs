//! The clock guard and server probe in C (issue 18): their client settings, and what
//! `redlock_client_node_status` reports of them.

use std::ffi::{CString, c_char};
use std::time::Duration;

use super::node::redlock_node_status;
use super::options::{as_millis, millis, redlock_options, set, settings};
use super::{invalid, redlock_error, redlock_status};
use crate::{DEFAULT_CLOCK_JUMP, NodeStatus};

/// What a node status carries for the guards; filled from the Rust `NodeStatus`.
pub(super) struct GuardStatus {
    server_version: Option<CString>,
    persistence: Option<CString>,
    warnings: Vec<CString>,
    clock_offset_ms: Option<i64>,
    quarantine_remaining_ms: u64,
    quarantine_reason: Option<CString>,
}

impl GuardStatus {
    pub(super) fn new(status: &NodeStatus) -> Self {
        let c = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
        GuardStatus {
            server_version: status.server_version.as_deref().map(c),
            persistence: status.persistence.as_deref().map(c),
            warnings: status.warnings.iter().map(|w| c(w)).collect(),
            clock_offset_ms: status.clock_offset_ms,
            quarantine_remaining_ms: status.quarantine_remaining.map_or(0, |d: Duration| {
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
            }),
            quarantine_reason: status.quarantine_reason.as_deref().map(c),
        }
    }
}

/// Turns the clock guard on (the default) or off. With it on, `TIME` rides in the pipeline of
/// every acquire and a node whose wall clock jumps forward is kept out of acquire quorums for
/// `clock_quarantine_ms`; a suspension of this host marks the client's held locks lost. Turning
/// it off forgets the threshold: turned on again, it is the default, 50 ms (as with the Rust
/// builder); `redlock_options_set_clock_jump_threshold_ms` turns it on with another.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_guard(
    o: *mut redlock_options,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            let c = &mut o.builder.config;
            c.clock_jump = if on {
                Some(c.clock_jump.unwrap_or(DEFAULT_CLOCK_JUMP))
            } else {
                None
            };
            Ok(())
        })
    }
}

/// The clock guard's threshold in ms (default 50; this also turns the guard on): the largest
/// step of a node's wall clock tolerated between two samples beyond the rate difference
/// `drift_factor` allows. 0 is allowed (only the round trips and the drift are tolerated); more
/// than 10 years is `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_jump_threshold_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.clock_jump = Some(millis(ms, "clock_jump_threshold_ms")?);
            Ok(())
        })
    }
}

/// How long, in ms, a node whose clock jumped forward is kept out of acquire quorums (default
/// 60000). Make it at least your largest TTL. 0 and more than 10 years are
/// `REDLOCK_INVALID_ARGUMENT` (to do without the guard, use `redlock_options_set_clock_guard`).
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_quarantine_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            if ms == 0 {
                return Err(invalid(
                    "clock_quarantine_ms must be greater than zero (make it at least your \
                     largest TTL); to turn the clock guard off use \
                     redlock_options_set_clock_guard(o, false, err)",
                ));
            }
            o.builder.config.clock_quarantine = millis(ms, "clock_quarantine_ms")?;
            Ok(())
        })
    }
}

/// Refuses the nodes the server probe warns about (default false: they are logged and shown
/// in the node status's warnings): a master with connected replicas, a `maxmemory-policy` that
/// can evict lock keys, a server whose `INFO` or `TIME` is denied. Replicas, Redis Cluster
/// nodes and too-old servers are always refused.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_strict_servers(
    o: *mut redlock_options,
    strict: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.strict_servers = strict;
            Ok(())
        })
    }
}

/// Whether the clock guard is on in `o`; true (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_guard(o: *const redlock_options) -> bool {
    // SAFETY: same contract.
    unsafe { settings(o) }.config.clock_jump.is_some()
}

/// The clock guard's threshold in `o`, ms; 50 (the default) while the guard is off, and for
/// NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_jump_threshold_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    as_millis(
        unsafe { settings(o) }
            .config
            .clock_jump
            .unwrap_or(DEFAULT_CLOCK_JUMP),
    )
}

/// The clock quarantine in `o`, ms; 60000 (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_quarantine_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    as_millis(unsafe { settings(o) }.config.clock_quarantine)
}

/// Whether `o` refuses the servers the probe warns about; false (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_strict_servers(o: *const redlock_options) -> bool {
    // SAFETY: same contract.
    unsafe { settings(o) }.config.strict_servers
}

/// The guards' part of a live status, or None for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
unsafe fn guards<'a>(status: *const redlock_node_status) -> Option<&'a GuardStatus> {
    // SAFETY: per the function's contract.
    unsafe { status.as_ref() }.map(|s| &s.guard)
}

fn ptr(s: Option<&CString>) -> *const c_char {
    s.map_or(std::ptr::null(), |s| s.as_ptr())
}

/// The server's `redis_version` at the last connect, owned by the status; NULL when unknown
/// (not connected yet, `INFO` denied) and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_server_version(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: same contract.
    ptr(unsafe { guards(status) }.and_then(|g| g.server_version.as_ref()))
}

/// The node's persistence as it reported it at the last connect (e.g. `AOF (appendfsync
/// everysec), RDB (save 3600 1)` or `no AOF, no RDB snapshots`), owned by the status; NULL when
/// unknown and for NULL. Without persistence a restart forgets locks: consider
/// `redlock_options_set_restart_grace_ms`.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_persistence(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: same contract.
    ptr(unsafe { guards(status) }.and_then(|g| g.persistence.as_ref()))
}

/// How many warnings the server probe and the clock guard have for the node (replicas of a
/// master, an evicting `maxmemory-policy`, a clock that stepped back, a command the ACL
/// denies); 0 for NULL. Read them with `redlock_node_status_warning`.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_warning_count(
    status: *const redlock_node_status,
) -> usize {
    // SAFETY: same contract.
    unsafe { guards(status) }.map_or(0, |g| g.warnings.len())
}

/// Warning `index` (0-based, below `redlock_node_status_warning_count`), owned by the status;
/// NULL for an index out of range and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_warning(
    status: *const redlock_node_status,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract.
    ptr(unsafe { guards(status) }.and_then(|g| g.warnings.get(index)))
}

/// The node's clock minus ours (its `TIME` against our wall clock), ms, at the last sample:
/// writes it to `*out` and returns true when known; false, leaving `*out` alone, when the clock
/// guard is off, `TIME` is denied, no sample was taken yet, or for NULL arguments.
///
/// # Safety
/// `status` is NULL or a live node status; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_clock_offset_ms(
    status: *const redlock_node_status,
    out: *mut i64,
) -> bool {
    // SAFETY: same contract.
    match unsafe { guards(status) }.and_then(|g| g.clock_offset_ms) {
        Some(ms) if !out.is_null() => {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { *out = ms };
            true
        }
        _ => false,
    }
}

/// How much longer, in ms, the node is kept out of acquire quorums because its clock jumped
/// forward; 0 when it counts, and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_quarantine_remaining_ms(
    status: *const redlock_node_status,
) -> u64 {
    // SAFETY: same contract.
    unsafe { guards(status) }.map_or(0, |g| g.quarantine_remaining_ms)
}

/// Why the node is in clock quarantine, owned by the status; NULL when it is not, and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_quarantine_reason(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: same contract.
    ptr(unsafe { guards(status) }.and_then(|g| g.quarantine_reason.as_ref()))
}
