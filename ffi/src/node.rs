//! `redlock_node_status`: what a client's worker last saw of one node (its connection, the
//! server's identity and restarts, the server probe's warnings, the clock guard's view), as an
//! opaque snapshot read with accessors, so that a later version can report more without
//! changing anything a caller allocates.

use std::ffi::{CString, c_char};

use redquorum::NodeStatus;

use crate::boundary::{
    arg, c_ptr, c_string, fallible, free_box, infallible, invalid, out, read, redlock_error,
    redlock_status, to_ms, write_opt,
};
use crate::client::redlock_client;

/// A snapshot of what a client's worker saw of one node, from `redlock_client_node_status`;
/// read it with the `redlock_node_status_*` accessors and free it with
/// `redlock_node_status_free`. It does not change after it was taken.
pub struct redlock_node_status {
    status: NodeStatus,
    address: CString,
    run_id: CString,
    last_error: Option<CString>,
    server_version: Option<CString>,
    server_name: Option<CString>,
    persistence: Option<CString>,
    warnings: Vec<CString>,
    quarantine_reason: Option<CString>,
    master: Option<CString>,
}

impl From<NodeStatus> for redlock_node_status {
    fn from(status: NodeStatus) -> Self {
        redlock_node_status {
            address: c_string(&status.address),
            run_id: c_string(status.run_id.as_deref().unwrap_or("")),
            last_error: status.last_error.as_deref().map(c_string),
            server_version: status.server_version.as_deref().map(c_string),
            server_name: status.server_name.as_deref().map(c_string),
            persistence: status.persistence.as_deref().map(c_string),
            warnings: status.warnings.iter().map(|w| c_string(w)).collect(),
            quarantine_reason: status.quarantine_reason.as_deref().map(c_string),
            master: status.master.as_deref().map(c_string),
            status,
        }
    }
}

/// Writes to `*out` a new snapshot of what the client's worker last saw of node `index`
/// (0-based, in the order of the URLs): connection, server uptime and `run_id`, restarts seen,
/// restart grace left, the server's version, persistence and warnings, the clock guard's
/// offset and quarantine. Free it with `redlock_node_status_free`. `REDLOCK_INVALID_ARGUMENT`
/// for a NULL argument or an index out of range.
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
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let all = client.client.node_status();
        let n = all.len();
        let status = all
            .into_iter()
            .nth(index)
            .ok_or_else(|| invalid(format!("node index {index} is out of range (0..{n})")))?;
        out.write(redlock_node_status::from(status));
        Ok(())
    })
}

/// Frees a node status. NULL is a no-op.
///
/// # Safety
/// `status` is NULL or a pointer from `redlock_client_node_status`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_free(status: *mut redlock_node_status) {
    // SAFETY: per the contract.
    unsafe { free_box(status) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.address.as_ptr()) }
}

/// Whether the worker held a working connection; false for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_connected(status: *const redlock_node_status) -> bool {
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.connected) }
}

/// Connections established so far; 0 for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_connects(status: *const redlock_node_status) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.connects) }
}

/// Restarts seen: reconnects that found a different server `run_id`; 0 for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_restarts(status: *const redlock_node_status) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.restarts) }
}

/// For a Sentinel-managed node (`redis+sentinel://`): the master (`host:port`) the sentinels
/// named at the last connect, owned by the status; NULL for a standalone node, before the
/// first connect, and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_master(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.master.as_ref())) }
}

/// For a Sentinel-managed node: changes of master seen (each one starts a restart grace when
/// `redlock_options_set_restart_grace_ms` is set); 0 for a standalone node and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_failovers(status: *const redlock_node_status) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.failovers) }
}

/// Requests that failed on this node so far: error replies, timeouts, dropped connections, not
/// sent while it was down, or dropped unsent once their caller stopped waiting; 0 for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_errors(status: *const redlock_node_status) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.errors) }
}

/// The server's uptime in ms (whole seconds when reported, plus time since; it can overstate
/// the age by up to a second); `UINT64_MAX` when unknown (not connected yet, or `INFO` denied)
/// and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_uptime_ms(status: *const redlock_node_status) -> u64 {
    infallible(|| {
        // SAFETY: per the contract.
        let status = unsafe { status.as_ref() };
        status.and_then(|s| s.status.uptime).map_or(u64::MAX, to_ms)
    })
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.grace_remaining.map_or(0, to_ms)) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.run_id.as_ptr()) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.last_error.as_ref())) }
}

/// The server's own version at the last connect (`redis_version`, or `valkey_version` on
/// Valkey), owned by the status; NULL when unknown (not connected yet, `INFO` denied) and for
/// NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_server_version(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.server_version.as_ref())) }
}

/// Which server the node is, by what it says of itself: `"redis"`, `"valkey"`, or the
/// `server_name` another one reports; owned by the status; NULL when unknown and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_server_name(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.server_name.as_ref())) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.persistence.as_ref())) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.warnings.len()) }
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.warnings.get(index))) }
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
    // SAFETY: per the contract.
    unsafe {
        read(status, |s| {
            !out.is_null() && write_opt(s.status.clock_offset_ms, out)
        })
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
    // SAFETY: per the contract.
    unsafe { read(status, |s| s.status.quarantine_remaining.map_or(0, to_ms)) }
}

/// Why the node is in clock quarantine, owned by the status; NULL when it is not, and for NULL.
///
/// # Safety
/// `status` is NULL or a live node status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_node_status_quarantine_reason(
    status: *const redlock_node_status,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(status, |s| c_ptr(s.quarantine_reason.as_ref())) }
}
