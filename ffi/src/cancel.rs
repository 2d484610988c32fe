//! `redlock_cancel`: ends pending acquisitions, from any thread or a signal handler.

use redquorum::Cancel;

use crate::boundary::{fallible, free_box, out, read, redlock_error, redlock_status};

/// A cancel handle: ends the pending acquisitions it is passed to.
pub struct redlock_cancel {
    pub(crate) cancel: Cancel,
}

/// Creates a cancel handle that has not fired. Free it with `redlock_cancel_free`, once no call
/// it was passed to is still running (a call takes what it needs when it starts, but one whose
/// start races the free would read a freed handle).
///
/// # Safety
/// `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_new(
    out: *mut *mut redlock_cancel,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        out.write(redlock_cancel {
            cancel: Cancel::new(),
        });
        Ok(())
    })
}

/// Fires the handle: every acquisition using it returns `REDLOCK_CANCELLED` at once (unless it
/// already got its lock), after undoing what it had taken on the nodes. Idempotent; NULL is
/// ignored.
///
/// **Async-signal-safe**: it stores a flag and writes one byte to a pipe, nothing else, so it
/// may be called from a signal handler (SIGINT, SIGALRM, ...) and from any thread.
///
/// # Safety
/// `cancel` is NULL or a live handle (not being freed meanwhile).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_trigger(cancel: *const redlock_cancel) {
    // No panic boundary: nothing here can panic, and a signal handler must not allocate.
    // SAFETY: NULL or a live handle per the contract.
    if let Some(c) = unsafe { cancel.as_ref() } {
        c.cancel.cancel();
    }
}

/// Whether `redlock_cancel_trigger` was called; false for NULL.
///
/// # Safety
/// `cancel` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_is_triggered(cancel: *const redlock_cancel) -> bool {
    // SAFETY: per the contract.
    unsafe { read(cancel, |c| c.cancel.is_cancelled()) }
}

/// Frees a cancel handle; NULL is ignored.
///
/// # Safety
/// `cancel` is NULL or a handle from `redlock_cancel_new`, freed once, not used afterwards and
/// not by a call still running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_free(cancel: *mut redlock_cancel) {
    // SAFETY: per the contract.
    unsafe { free_box(cancel) }
}
