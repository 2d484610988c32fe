//! `redlock_leadership`: a won campaign, extended while it is held.

use std::ffi::{CString, c_char, c_void};

use redquorum::Leadership;

use crate::boundary::{
    arg, c_string, fallible, free_box, read, redlock_error, redlock_status, to_ms,
};
use crate::lock::{LostCallback, redlock_lost_callback};

/// This process's leadership of an election, from `redlock_election_campaign`. Its calls may
/// come from any thread (like a `redlock_lock`'s); it must not be freed while another thread
/// uses it.
pub struct redlock_leadership {
    leadership: Leadership,
    name: CString,
    identity: CString,
}

impl redlock_leadership {
    pub(crate) fn new(leadership: Leadership) -> Self {
        redlock_leadership {
            name: c_string(leadership.name()),
            identity: c_string(leadership.identity()),
            leadership,
        }
    }
}

/// The leadership's term: greater than every earlier leader's in the election, never reused.
/// Pass it with every write to a store that refuses writes with a lower term than it has seen.
/// Stays readable after resigning. 0 for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_term(leadership: *const redlock_leadership) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| l.leadership.term()) }
}

/// Whether this process still leads: not resigned, not found lost, validity left. Cheap, never
/// blocks; false for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_is_leader(
    leadership: *const redlock_leadership,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| l.leadership.is_leader()) }
}

/// Whether the leadership was found lost (an extension found it no longer ours on a quorum, it
/// ran out of validity, or this host was suspended while it was held); a resigned leadership is
/// not lost. False for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_is_lost(leadership: *const redlock_leadership) -> bool {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| l.leadership.is_lost()) }
}

/// Milliseconds left before another candidate could be granted the leadership; 0 once
/// resigned or lost, and for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_validity_ms(
    leadership: *const redlock_leadership,
) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| to_ms(l.leadership.validity())) }
}

/// The election's name, owned by the leadership (valid until `redlock_leadership_free`); NULL
/// for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_name(
    leadership: *const redlock_leadership,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| l.name.as_ptr()) }
}

/// This leader's identity, owned by the leadership (valid until `redlock_leadership_free`);
/// NULL for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_identity(
    leadership: *const redlock_leadership,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(leadership, |l| l.identity.as_ptr()) }
}

/// Registers `callback(user, name)` (`name`: the election's, valid only during the call) to run
/// once if the leadership is found lost; at once, on the calling thread, if it already was.
/// Resigning or freeing does not run it.
///
/// Exactly as `redlock_lock_on_lost`: it runs on the client's extender thread, which serves all
/// of the client's auto-extended locks and leaderships, so keep it short and do not block in
/// it. It may call any redlock function, including `redlock_leadership_resign` and
/// `redlock_leadership_free` on this very leadership (the extender holds nothing of it while
/// the callback runs), but must not unwind out of it. `user` must stay valid until the callback
/// has run or the leadership is freed. Several callbacks may be registered; each runs at most
/// once.
///
/// # Safety
/// `leadership` is NULL or a live leadership; `callback` is NULL or a function safe to call
/// from another thread with `user`; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_on_lost(
    leadership: *mut redlock_leadership,
    callback: redlock_lost_callback,
    user: *mut c_void,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let l = unsafe { arg(leadership, "leadership") }?;
        let callback = LostCallback::new(callback, user)?;
        let name = l.leadership.name().to_owned();
        l.leadership.on_lost(move || callback.call(&name));
        Ok(())
    })
}

/// Ends the leadership at once, on every node: waiting candidates are woken by the release, and
/// the election's stopped-leading callback runs (on this thread) if it has not yet. The handle
/// stays valid (the term and name stay readable); resigning again returns `REDLOCK_OK` and does
/// nothing.
///
/// `REDLOCK_LOST`: it was no longer ours (it had expired, or was found lost: work done under
/// its term may have overlapped the next leader's). `REDLOCK_NO_QUORUM`: too few nodes
/// answered; their keys expire with the TTL. `REDLOCK_INVALID_ARGUMENT` for NULL.
///
/// # Safety
/// `leadership` is NULL or a live leadership; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_resign(
    leadership: *mut redlock_leadership,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let l = unsafe { arg(leadership, "leadership") }?;
        l.leadership.resign()?;
        Ok(())
    })
}

/// Frees a leadership, resigning first (best effort, without waiting for the nodes) if it is
/// still held; the election's stopped-leading callback runs on this thread if it has not yet.
/// NULL is a no-op.
///
/// # Safety
/// `leadership` is NULL or a pointer written by `redlock_election_campaign` or
/// `redlock_election_campaign_for`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leadership_free(leadership: *mut redlock_leadership) {
    // SAFETY: per the contract.
    unsafe { free_box(leadership) }
}
