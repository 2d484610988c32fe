//! `redlock_lock`: a held (or released) lock of any kind.

use std::ffi::{CString, c_char, c_void};
use std::time::Duration;

use redquorum::Lock;

use crate::boundary::{
    Failure, arg, c_string, fallible, free_box, invalid, out_value, read, redlock_error,
    redlock_status, to_ms,
};

/// A held (or released) lock. Its calls may come from any thread; the lock serializes its
/// network operations itself (a release waits for an extension in flight).
pub struct redlock_lock {
    lock: Lock,
    resource: CString,
    token: CString,
}

impl redlock_lock {
    pub(crate) fn new(lock: Lock) -> Self {
        redlock_lock {
            resource: c_string(lock.resource()),
            token: c_string(lock.token()),
            lock,
        }
    }
}

/// Whether the lock is still ours: not released, not found lost, validity left. Cheap, never
/// blocks behind another call on the lock; false for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_is_held(lock: *const redlock_lock) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lock, |l| l.lock.is_held()) }
}

/// Whether the lock was found lost (an extension found it no longer ours on a quorum, an
/// auto-extended lock ran out of validity, or this host was suspended while it was held); a
/// released lock is not lost. False for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_is_lost(lock: *const redlock_lock) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lock, |l| l.lock.is_lost()) }
}

/// The callback type of `redlock_lock_on_lost`: `user` as given, and the resource name, valid
/// only during the call.
pub type redlock_lost_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, resource: *const c_char)>;

/// The C side of a lost callback (of a lock, or of a leadership); the caller vouches that `user`
/// may be used from the extender thread.
pub(crate) struct LostCallback {
    cb: unsafe extern "C" fn(*mut c_void, *const c_char),
    user: *mut c_void,
}

// SAFETY: `redlock_lock_on_lost` and `redlock_leadership_on_lost` document that the callback and
// `user` are called from another thread; the caller agrees to that by registering them.
unsafe impl Send for LostCallback {}

impl LostCallback {
    /// `REDLOCK_INVALID_ARGUMENT` for a NULL callback.
    pub(crate) fn new(callback: redlock_lost_callback, user: *mut c_void) -> Result<Self, Failure> {
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        Ok(LostCallback { cb, user })
    }

    pub(crate) fn call(self, resource: &str) {
        let resource = c_string(resource);
        // SAFETY: a valid function pointer and its user pointer per `redlock_lock_on_lost`.
        unsafe { (self.cb)(self.user, resource.as_ptr()) }
    }
}

/// Registers `callback(user, resource)` to run once if the lock is found lost; at once, on the
/// calling thread, if it already was. A release or free does not run it.
///
/// For an auto-extended lock it runs on the client's extender thread, which serves all of the
/// client's auto-extended locks: keep it short and do not block in it. It may call any redlock
/// function, including `redlock_lock_release` and `redlock_lock_free` on this very lock (the
/// extender holds nothing of the lock while it runs), but must not unwind (no C++ exceptions, no
/// longjmp) out of it. `user` must stay valid until the callback has run or the lock is freed.
/// Several callbacks may be registered; each runs at most once.
///
/// # Safety
/// `lock` is NULL or a live lock; `callback` is NULL or a function safe to call from another
/// thread with `user`; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_on_lost(
    lock: *mut redlock_lock,
    callback: redlock_lost_callback,
    user: *mut c_void,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let lock = unsafe { arg(lock, "lock") }?;
        let callback = LostCallback::new(callback, user)?;
        lock.lock.on_lost(move |resource| callback.call(resource));
        Ok(())
    })
}

/// Sets the lock's TTL to `ttl_ms` from now on every node where it is still ours.
///
/// `REDLOCK_OK` when a quorum extended it with validity left. `REDLOCK_LOST` when it is no
/// longer ours (expired, released). `REDLOCK_NO_QUORUM` when too few nodes answered; the old
/// validity (or the new one, if shorter) still stands. `REDLOCK_EXTENSION_LIMIT` past
/// `max_extensions`. Never deletes keys. Calls on one lock are serialized; it may be used from
/// any thread.
///
/// # Safety
/// `lock` is NULL or a live lock; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_extend(
    lock: *mut redlock_lock,
    ttl_ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let lock = unsafe { arg(lock, "lock") }?;
        lock.lock.extend(Duration::from_millis(ttl_ms))?;
        Ok(())
    })
}

/// Releases the lock on every node, deleting only keys that still hold its token. The handle
/// stays valid: afterwards validity is 0, extend returns `REDLOCK_LOST`, and releasing again
/// returns `REDLOCK_OK` without doing anything.
///
/// `REDLOCK_LOST`: it was no longer ours on a quorum (it expired before the release: the work it
/// protected may have overlapped another owner's). `REDLOCK_NO_QUORUM`: too few nodes answered;
/// their keys expire with the TTL.
///
/// # Safety
/// `lock` is NULL or a live lock; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_release(
    lock: *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let lock = unsafe { arg(lock, "lock") }?;
        lock.lock.release()?;
        Ok(())
    })
}

/// Milliseconds left before the lock may expire on the nodes; 0 when released, expired or NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_validity_ms(lock: *const redlock_lock) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(lock, |l| to_ms(l.lock.validity())) }
}

/// The locked resource name, owned by the lock (valid until `redlock_lock_free`); for a lock of
/// several resources, their sorted names joined with ','. NULL for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_resource(lock: *const redlock_lock) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(lock, |l| l.resource.as_ptr()) }
}

/// The lock's random token (40 hex characters; a reentrant lock's owner), owned by the lock;
/// NULL for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_token(lock: *const redlock_lock) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(lock, |l| l.token.as_ptr()) }
}

/// Writes one number the lock carries to `*out`, or says which kind of lock has one.
///
/// # Safety
/// `lock` is NULL or a live lock; `out` and `err` are NULL or writable.
unsafe fn number<T>(
    lock: *const redlock_lock,
    out: *mut T,
    err: *mut *mut redlock_error,
    get: impl FnOnce(&Lock) -> Option<T>,
    missing: &str,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the caller's contract.
        let lock = unsafe { arg(lock, "lock") }?;
        // SAFETY: per the caller's contract.
        let out = unsafe { out_value(out) }?;
        *out = get(&lock.lock).ok_or_else(|| -> Failure { invalid(missing) })?;
        Ok(())
    })
}

/// Writes the fencing token of a fenced lock (`redlock_request_set_fenced`) to `*out`: greater
/// than the token of every fenced lock of the resource whose holder came before.
/// `REDLOCK_INVALID_ARGUMENT` for a NULL lock or out, or a lock of another kind. The token stays
/// readable after release.
///
/// # Safety
/// `lock` is NULL or a live lock; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_fence(
    lock: *const redlock_lock,
    out: *mut u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        number(
            lock,
            out,
            err,
            Lock::fence,
            "the lock has no fencing token: it was not locked fenced",
        )
    }
}

/// Writes to `*out` how many holds the owner of a reentrant lock had once this hold was
/// counted (1 for the outermost). `REDLOCK_INVALID_ARGUMENT` for a NULL lock or out, or a lock
/// of another kind.
///
/// # Safety
/// `lock` is NULL or a live lock; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_hold_count(
    lock: *const redlock_lock,
    out: *mut u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        number(
            lock,
            out,
            err,
            Lock::hold_count,
            "the lock is not reentrant",
        )
    }
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
    // SAFETY: same contract.
    unsafe {
        number(
            lock,
            out,
            err,
            Lock::permit,
            "the lock holds no permit: it is not a semaphore lock",
        )
    }
}

/// Frees a lock, releasing it first (without waiting for the nodes) if it is still held.
/// NULL is a no-op.
///
/// # Safety
/// `lock` is NULL or a pointer written by one of the `redlock_client_*lock*` and
/// `redlock_client_semaphore` shorthands or `redlock_request_acquire`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_free(lock: *mut redlock_lock) {
    // SAFETY: per the contract.
    unsafe { free_box(lock) }
}
