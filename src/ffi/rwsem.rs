//! The C ABI of the read-write lock and the counting semaphore: three request setters and the
//! permit a semaphore lock holds. The locks are `redlock_lock`s like any other: extend,
//! release, validity, auto-extension and free work the same on them.

use super::request::{redlock_request, update};
use super::{Failure, guard, handle, invalid, locked, redlock_error, redlock_lock, redlock_status};

/// Makes it a read lock: any number of readers hold the resource at once while no writer does.
/// A writer is a `redlock_request_set_write` lock and also any plain or fenced lock of the
/// resource (of this or any other Redlock client). The readers live in a sorted set at the
/// resource's key, each with its own expiry; extension and release touch only this reader.
/// Waiting readers all wake when a writer releases; writers can starve under a steady stream of
/// overlapping readers. No fencing token. Replaces the request's kind (fenced, reentrant,
/// write, semaphore). `REDLOCK_INVALID_ARGUMENT` for a request of several resources (the
/// request is left unchanged). A thread that holds the write lock of the resource and acquires
/// its read lock gets `REDLOCK_INVALID_ARGUMENT` from `redlock_client_acquire` instead of
/// waiting for itself.
///
/// # Safety
/// `request` is NULL or a live request not used elsewhere meanwhile; `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_read(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.read())) }
}

/// Makes it the write lock of a read-write lock: excludes readers and other writers. On the
/// nodes it is exactly a plain lock; it adds the check that the calling thread holds no read or
/// write lock of the resource itself (there is no upgrade from read to write):
/// `redlock_client_acquire` returns `REDLOCK_INVALID_ARGUMENT` at once instead of waiting for
/// itself. For a fenced writer use `redlock_request_set_fenced` instead. Replaces the
/// request's kind. `REDLOCK_INVALID_ARGUMENT` for a request of several resources.
///
/// # Safety
/// As for `redlock_request_set_read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_write(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.write())) }
}

/// Makes it one of `permits` permits (1 to 1024) of a counting semaphore on the resource: at
/// most `permits` holders at once. Each permit is a slot, an ordinary Redlock mutex on its own
/// key (`redlock:sem:{<resource>}:<i>`, next to the stored number at `redlock:sem:{<resource>}`);
/// an attempt tries the slots in random order, and a waiter wakes when any slot is released.
/// Every caller of one semaphore must pass the same `permits`: a caller with another number gets
/// `REDLOCK_INVALID_ARGUMENT` from `redlock_client_acquire` (it can change once every permit is
/// released and its TTL has run out). `redlock_lock_permit` says which slot is held. No
/// fencing token. Replaces the request's kind. `REDLOCK_INVALID_ARGUMENT` (request unchanged)
/// for 0 or more than 1024 permits, or a request of several resources.
///
/// # Safety
/// As for `redlock_request_set_read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_semaphore(
    request: *mut redlock_request,
    permits: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.semaphore(permits))) }
}

/// Writes to `*out` the slot (0 to permits - 1) a semaphore lock holds. `REDLOCK_INVALID_ARGUMENT`
/// for a NULL lock or out, or a lock of another kind. Stays readable after release.
///
/// # Safety
/// `lock` is NULL or a live lock; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_permit(
    lock: *const redlock_lock,
    out: *mut u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the contract.
        let lock = unsafe { handle(lock, "lock") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let permit = locked(lock)
            .permit()
            .ok_or_else(|| invalid("the lock holds no permit: it is not a semaphore lock"))?;
        // SAFETY: checked non-NULL above.
        unsafe { *out = permit };
        Ok::<(), Failure>(())
    })
}
