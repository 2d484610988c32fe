//! What a client's worker last saw of one node, as an opaque snapshot read with accessors, so
//! that a later version can report more without changing anything a caller allocates.

use std::ffi::{CString, c_char};
use std::time::Duration;

use super::{guard, handle, invalid, quiet, redlock_client, redlock_error, redlock_status};

/// A snapshot of what a client's worker saw of one node, from `redlock_client_node_status`;
/// read it with the `redlock_node_status_*` accessors and free it with
/// `redlock_node_status_free`. It does not change after it was taken.
pub struct redlock_node_status {
    address: CString,
    connected: bool,
    connects: u64,
    restarts: u64,
    uptime_ms: u64,
    grace_remaining_ms: u64,
    run_id: CString,
    last_error: Option<CString>,
    /// The clock guard's and server probe's part (read in `guard.rs`).
    pub(super) guard: super::guard::GuardStatus,
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// Writes to `*out` a new snapshot of what the client's worker last saw of node `index`
/// (0-based, in the order of the URLs): connection, server uptime and `run_id`, restarts seen,
/// restart grace left. Free it with `redlock_node_status_free`. `REDLOCK_INVALID_ARGUMENT` for
/// a NULL argument or an index out of range.
///
/// # Safety
/// `client` is NULL or a live client; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_node_status(
    client: *const redlock_client,
    index: usize,
    out: *mut *mut redlock_node_status,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        // SAFETY: NULL or a live client per the contract.
        let client = unsafe { handle(client, "client") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let all = client.client.node_status();
        let n = all.len();
        let status = all
            .into_iter()
            .nth(index)
            .ok_or_else(|| invalid(format!("node index {index} is out of range (0..{n})")))?;
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let boxed = Box::new(redlock_node_status {
            address: c_string(&status.address),
            connected: status.connected,
            connects: status.connects,
            restarts: status.restarts,
            uptime_ms: status.uptime.map_or(u64::MAX, ms),
            grace_remaining_ms: status.grace_remaining.map_or(0, ms),
            run_id: c_string(status.run_id.as_deref().unwrap_or("")),
            last_error: status.last_error.as_deref().map(c_string),
            guard: super::guard::GuardStatus::new(&status),
        });
        // SAFETY: `out` is writable (checked non-NULL above).
        unsafe { *out = Box::into_raw(boxed) };
        Ok(())
    })
}

/// Frees a node status. NULL is a no-op.
///
/// # Safety
/// `status` is NULL or a pointer from `redlock_client_node_status`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_free(status: *mut redlock_node_status) {
    quiet((), || {
        if !status.is_null() {
            // SAFETY: from Box::into_raw in redlock_client_node_status, freed once.
            drop(unsafe { Box::from_raw(status) });
        }
    })
}

/// The node's `host:port` (never with credentials), owned by the status: valid until
/// `redlock_node_status_free`. NULL for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_address(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(std::ptr::null(), |s| s.address.as_ptr())
}

/// Whether the worker held a working connection; false for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_connected(status: *const redlock_node_status) -> bool {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.is_some_and(|s| s.connected)
}

/// Connections established so far; 0 for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_connects(status: *const redlock_node_status) -> u64 {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(0, |s| s.connects)
}

/// Restarts seen: reconnects that found a different server `run_id`; 0 for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_restarts(status: *const redlock_node_status) -> u64 {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(0, |s| s.restarts)
}

/// The server's uptime in ms (whole seconds when reported, plus time since); `UINT64_MAX`
/// when unknown (not connected yet, or `INFO` denied) and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_uptime_ms(status: *const redlock_node_status) -> u64 {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(u64::MAX, |s| s.uptime_ms)
}

/// With a restart grace set: ms until the node counts toward acquire quorums again; 0 when it
/// counts, and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_grace_remaining_ms(
    status: *const redlock_node_status,
) -> u64 {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(0, |s| s.grace_remaining_ms)
}

/// The server's `run_id` (40 hex characters), owned by the status; empty when unknown, NULL
/// for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_run_id(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }.map_or(std::ptr::null(), |s| s.run_id.as_ptr())
}

/// The worker's last connection problem, owned by the status; NULL when there was none, and
/// for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_last_error(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: NULL or a live status per the contract.
    unsafe { status.as_ref() }
        .and_then(|s| s.last_error.as_ref())
        .map_or(std::ptr::null(), |e| e.as_ptr())
}
