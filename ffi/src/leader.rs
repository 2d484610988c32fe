//! `redlock_leader`: who leads an election, as a quorum of its nodes told at one moment.

use std::ffi::{CString, c_char};
use std::time::SystemTime;

use redquorum::Leader;

use crate::boundary::{
    arg, arg_str, c_string, fallible, free_box, out, read, redlock_error, redlock_status, to_ms,
};
use crate::client::redlock_client;

/// A snapshot of an election's leader, from `redlock_client_leader`, `redlock_observer_next` or
/// a new-leader callback. It never changes; read it from any thread.
pub struct redlock_leader {
    identity: CString,
    term: u64,
    since_unix_ms: u64,
    transitions: u64,
    ttl_ms: u64,
}

impl From<&Leader> for redlock_leader {
    fn from(l: &Leader) -> Self {
        redlock_leader {
            identity: c_string(&l.identity),
            term: l.term,
            since_unix_ms: l
                .since
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, to_ms),
            transitions: l.transitions,
            ttl_ms: to_ms(l.ttl),
        }
    }
}

/// Reads who leads the election `name` now, from any process, candidate or not: on success
/// writes a new leader to `*out` (free it with `redlock_leader_free`), only one whose campaign
/// returned its leadership, or NULL only when no leadership can be held on a quorum of nodes.
///
/// Waits for every node up to node_timeout. `REDLOCK_NO_QUORUM` when the nodes cannot tell: too
/// few answered, a node of a leader that holds a bare quorum hangs or restarted within
/// restart_grace, or a new leader is being confirmed. `REDLOCK_INVALID_ARGUMENT` for a NULL client, name or out, and an empty, non-UTF-8 or
/// too long (over 1024 bytes) name. Thread-safe.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string; `out` and
/// `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_leader(
    client: *const redlock_client,
    name: *const c_char,
    out: *mut *mut redlock_leader,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let name = unsafe { arg_str(name, "name") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let leader = client.client.leader(name)?;
        out.write_or_null(leader.as_ref().map(redlock_leader::from));
        Ok(())
    })
}

/// The leader's identity, owned by the leader (valid until `redlock_leader_free`); NULL for
/// NULL.
///
/// # Safety
/// `leader` is NULL or a live leader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_identity(leader: *const redlock_leader) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(leader, |l| l.identity.as_ptr()) }
}

/// The leader's term: the fencing token of its leadership, greater than every earlier
/// leader's. 0 for NULL.
///
/// # Safety
/// `leader` is NULL or a live leader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_term(leader: *const redlock_leader) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leader, |l| l.term) }
}

/// When the term began, in ms since the Unix epoch, by the clock of the nodes that recorded it
/// (best effort: it does not affect exclusion). 0 for NULL.
///
/// # Safety
/// `leader` is NULL or a live leader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_since_unix_ms(leader: *const redlock_leader) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leader, |l| l.since_unix_ms) }
}

/// Terms begun in the election so far, this one included (best effort: a node restarted
/// without persistence counts again from zero; the largest count among the nodes that answered
/// is reported). 0 for NULL.
///
/// # Safety
/// `leader` is NULL or a live leader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_transitions(leader: *const redlock_leader) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leader, |l| l.transitions) }
}

/// Milliseconds until the leadership expires on a quorum of nodes unless it is extended (as
/// read: the snapshot does not count down). 0 for NULL.
///
/// # Safety
/// `leader` is NULL or a live leader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_ttl_ms(leader: *const redlock_leader) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leader, |l| l.ttl_ms) }
}

/// Frees a leader. NULL is a no-op. Not for the leader a new-leader callback is given: that one
/// belongs to the library.
///
/// # Safety
/// `leader` is NULL or a pointer written by `redlock_client_leader` or `redlock_observer_next`,
/// not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_free(leader: *mut redlock_leader) {
    // SAFETY: per the contract.
    unsafe { free_box(leader) }
}
