//! The acquisition request and the cancel handle in C: opaque handles built with setters, so
//! that a later option adds a function and breaks no compiled program.

use std::ffi::c_char;
use std::time::Duration;

use super::{
    Failure, guard, hand_out, handle, invalid, redlock_client, redlock_error, redlock_lock,
    redlock_status, str_arg,
};
use crate::{AutoExtend, Cancel, LockRequest};

/// A cancel handle: ends the pending acquisitions whose request names it.
pub struct redlock_cancel {
    cancel: Cancel,
}

/// One acquisition: kind, patience, auto-extension and cancel handle. Build it with
/// `redlock_request_new` (or `_new_many`) and the setters, pass it to `redlock_client_acquire`
/// (as often as you like: it is a description), free it with `redlock_request_free`. Not
/// thread-safe while a setter runs; acquiring from many threads with one request is fine.
pub struct redlock_request {
    pub(super) request: LockRequest,
}

/// Creates a cancel handle that has not fired. Free it with `redlock_cancel_free` (requests
/// that name it keep what they need: the handle may be freed before them).
///
/// # Safety
/// `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_new(
    out: *mut *mut redlock_cancel,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let boxed = Box::new(redlock_cancel {
            cancel: Cancel::new(),
        });
        // SAFETY: `out` is writable (checked non-NULL above).
        unsafe { *out = Box::into_raw(boxed) };
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
    // No catch_unwind: nothing here can panic, and a signal handler must not allocate.
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
    // SAFETY: NULL or a live handle per the contract.
    unsafe { cancel.as_ref() }.is_some_and(|c| c.cancel.is_cancelled())
}

/// Frees a cancel handle; NULL is ignored.
///
/// # Safety
/// `cancel` is NULL or a handle from `redlock_cancel_new`, freed once, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_free(cancel: *mut redlock_cancel) {
    if !cancel.is_null() {
        // SAFETY: from Box::into_raw in redlock_cancel_new, freed once per the contract.
        drop(unsafe { Box::from_raw(cancel) });
    }
}

/// # Safety
/// `out` is NULL or writable.
unsafe fn hand_out_request(
    request: LockRequest,
    out: *mut *mut redlock_request,
) -> Result<(), Failure> {
    if out.is_null() {
        return Err(invalid("out is NULL"));
    }
    request.checked_kind().map_err(Failure::from)?;
    // SAFETY: `out` is writable (checked non-NULL above).
    unsafe { *out = Box::into_raw(Box::new(redlock_request { request })) };
    Ok(())
}

/// A request for a plain lock on `resource` for `ttl_ms` ms, with the client's retries. The TTL
/// is checked by `redlock_client_acquire` (it depends on the client's drift factor).
/// `REDLOCK_INVALID_ARGUMENT`: NULL, empty or non-UTF-8 resource, NULL `out`.
///
/// # Safety
/// `resource` is NULL or a NUL-terminated string (copied); `out` and `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_new(
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        // SAFETY: NULL or a C string per the contract.
        let resource = unsafe { str_arg(resource, "resource") }?;
        let request = LockRequest::new(resource, Duration::from_millis(ttl_ms));
        // SAFETY: per the contract.
        unsafe { hand_out_request(request, out) }
    })
}

/// A request for all of `resources` (`n_resources` names, 1 to 64, no name twice) at once or
/// none, for `ttl_ms` ms.
///
/// # Safety
/// `resources` is NULL or an array of `n_resources` pointers, each NULL or a NUL-terminated
/// string (copied); `out` and `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_new_many(
    resources: *const *const c_char,
    n_resources: usize,
    ttl_ms: u64,
    out: *mut *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        if resources.is_null() {
            return Err(invalid("resources is NULL"));
        }
        if n_resources > crate::MAX_RESOURCES {
            return Err(invalid(format!(
                "{n_resources} resources; at most {} are allowed",
                crate::MAX_RESOURCES
            )));
        }
        let mut names = Vec::with_capacity(n_resources);
        for i in 0..n_resources {
            // SAFETY: `resources` holds `n_resources` pointers per the contract.
            let p = unsafe { *resources.add(i) };
            // SAFETY: NULL or a C string per the contract.
            names.push(unsafe { str_arg(p, &format!("resources[{i}]")) }?);
        }
        let request = LockRequest::many(names, Duration::from_millis(ttl_ms));
        // SAFETY: per the contract.
        unsafe { hand_out_request(request, out) }
    })
}

/// Applies `f` to the request if the result is valid; otherwise leaves it unchanged.
///
/// # Safety
/// `request` is NULL or a live request not used by another thread meanwhile.
pub(super) unsafe fn update(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
    f: impl FnOnce(LockRequest) -> Result<LockRequest, Failure>,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the contract.
        let r = unsafe { request.as_mut() }.ok_or_else(|| invalid("request is NULL"))?;
        let next = f(r.request.clone())?;
        next.checked_kind().map_err(Failure::from)?;
        r.request = next;
        Ok(())
    })
}

/// Makes it a fenced lock (`redlock_lock_fence`). `REDLOCK_INVALID_ARGUMENT` for a request of
/// several resources.
///
/// # Safety
/// `request` is NULL or a live request not used elsewhere meanwhile; `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_fenced(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.fenced())) }
}

/// Makes it one hold of a reentrant lock for `owner` (1 to 1024 bytes, copied).
/// `REDLOCK_INVALID_ARGUMENT` for a NULL, empty, too long or non-UTF-8 owner, or a request of
/// several resources.
///
/// # Safety
/// As for `redlock_request_set_fenced`; `owner` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_reentrant(
    request: *mut redlock_request,
    owner: *const c_char,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: NULL or a C string per the contract.
    let owner = unsafe { str_arg(owner, "owner") };
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.reentrant(owner?))) }
}

/// Up to `retries` retries after the first attempt (0: a single attempt), instead of the
/// client's retry count.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_retries(
    request: *mut redlock_request,
    retries: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.retries(retries))) }
}

/// The delay between attempts, `delay_ms ± jitter_ms`, for this request. Each at most 10 years.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_retry_delay(
    request: *mut redlock_request,
    delay_ms: u64,
    jitter_ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    let max = crate::MAX_TTL.as_millis() as u64;
    // SAFETY: per the contract.
    unsafe {
        update(request, err, |r| {
            if delay_ms > max || jitter_ms > max {
                return Err(invalid(
                    "retry delay and jitter must each be at most 10 years",
                ));
            }
            Ok(r.retry_delay(Duration::from_millis(delay_ms))
                .retry_jitter(Duration::from_millis(jitter_ms)))
        })
    }
}

/// Waits up to `timeout_ms` for a busy resource, woken by the release notifications the nodes
/// publish, with a jittered backoff as the fallback (0: a single attempt).
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_wait(
    request: *mut redlock_request,
    timeout_ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe {
        update(request, err, |r| {
            Ok(r.wait(Duration::from_millis(timeout_ms).min(crate::MAX_TTL)))
        })
    }
}

/// Whether a waiter wakes on release notifications (default true) or only polls.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_notifications(
    request: *mut redlock_request,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.notifications(on))) }
}

/// Keeps the lock alive while it is held, on the client's extender thread: extends every
/// `fraction × ttl` (0: the default 1/3; otherwise in (0, 1)), stops `max_hold_ms` after
/// acquisition (0: never) or after `max_extensions` extensions (0: the client's cap). See
/// `redlock_lock_is_lost` and `redlock_lock_on_lost` for how the holder learns of a loss.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_auto_extend(
    request: *mut redlock_request,
    fraction: f64,
    max_hold_ms: u64,
    max_extensions: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe {
        update(request, err, |r| {
            let mut auto = AutoExtend::new();
            if fraction != 0.0 {
                if !(fraction.is_finite() && fraction > 0.0 && fraction < 1.0) {
                    return Err(invalid(format!(
                        "extend fraction must be in (0, 1) (or 0 for the default), got {fraction}"
                    )));
                }
                auto = auto.fraction(fraction);
            }
            if max_hold_ms > 0 {
                if max_hold_ms > crate::MAX_TTL.as_millis() as u64 {
                    return Err(invalid("max_hold_ms must be at most 10 years"));
                }
                auto = auto.max_hold(Duration::from_millis(max_hold_ms));
            }
            if max_extensions > 0 {
                auto = auto.max_extensions(max_extensions);
            }
            Ok(r.auto_extend(auto))
        })
    }
}

/// Ends acquisitions with this request with `REDLOCK_CANCELLED` once `cancel` fires. The
/// request keeps its own reference: `cancel` may be freed first. NULL `cancel` is
/// `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `redlock_request_set_fenced`; `cancel` NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_cancel(
    request: *mut redlock_request,
    cancel: *const redlock_cancel,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: NULL or a live handle per the contract.
    let cancel = unsafe { handle(cancel, "cancel") }.map(|c| c.cancel.clone());
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.cancel(&cancel?))) }
}

/// Frees a request; NULL is ignored.
///
/// # Safety
/// `request` is NULL or from `redlock_request_new*`, freed once, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_free(request: *mut redlock_request) {
    if !request.is_null() {
        // SAFETY: from Box::into_raw, freed once per the contract.
        drop(unsafe { Box::from_raw(request) });
    }
}

/// Acquires the lock `request` describes; blocks until acquired, given up or cancelled. On
/// success writes a new lock to `*out` (free it with `redlock_lock_free`).
///
/// `REDLOCK_NOT_ACQUIRED`: held by another owner through the last attempt or the wait.
/// `REDLOCK_NO_QUORUM`: too few nodes answered. `REDLOCK_CANCELLED`: the request's cancel
/// handle fired first; nothing of the acquisition is left on the nodes (a node that was down or
/// hung keeps its key until the TTL). `REDLOCK_INVALID_ARGUMENT`: NULL arguments, a TTL of 0,
/// too small to leave validity or over 10 years, a TTL too short to auto-extend. Thread-safe.
///
/// # Safety
/// `client` and `request` NULL or live; `out` and `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_acquire(
    client: *const redlock_client,
    request: *const redlock_request,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        // SAFETY: NULL or live per the contract.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: NULL or live per the contract.
        let request = unsafe { handle(request, "request") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let lock = client.client.acquire(&request.request)?;
        // SAFETY: `out` is writable (checked non-NULL above).
        unsafe { hand_out(lock, out) }
    })
}
