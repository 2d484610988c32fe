//! `redlock_request`: one description of an acquisition (kind, patience, auto-extension), built
//! once with setters and acquired as often as needed; the cancel handle and the caller are
//! arguments of each acquisition.

use std::ffi::c_char;
use std::time::Duration;

use redquorum::{AutoExtend, LockRequest, MAX_RESOURCES, MAX_TTL};

use crate::boundary::{
    Failure, arg, arg_ms, arg_mut, arg_opt_str, arg_str, arg_strs, fallible, free_box, invalid,
    out, redlock_error, redlock_status, to_ms,
};
use crate::cancel::redlock_cancel;
use crate::client::redlock_client;
use crate::lock::redlock_lock;

/// One acquisition's description: kind, patience and auto-extension. Build it with
/// `redlock_request_new` (or `_new_many`) and the setters, acquire it with
/// `redlock_request_acquire` (as often as you like, from any number of threads at once: it does
/// not change), free it with `redlock_request_free`. Not thread-safe while a setter runs.
pub struct redlock_request {
    request: LockRequest,
}

/// Checks `request` and hands it to the caller.
fn hand_out(
    request: LockRequest,
    out: crate::boundary::Out<'_, redlock_request>,
) -> Result<(), Failure> {
    request.check()?;
    out.write(redlock_request { request });
    Ok(())
}

/// A request for a plain lock on `resource` for `ttl_ms` ms, with the client's retries. The TTL
/// is checked by `redlock_request_acquire` (it depends on the client's drift factor).
/// `REDLOCK_INVALID_ARGUMENT`: NULL, empty, non-UTF-8 or too long (over 4096 bytes) resource,
/// NULL `out`.
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
    fallible(err, || {
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        // SAFETY: per the contract.
        let resource = unsafe { arg_str(resource, "resource") }?;
        hand_out(
            LockRequest::new(resource, Duration::from_millis(ttl_ms)),
            out,
        )
    })
}

/// A request for all of `resources` (`n_resources` names, 1 to 64, no name twice, each 1 to 4096
/// bytes) at once or none, for `ttl_ms` ms. Each node sets all keys in one script or none, so
/// clients locking overlapping sets cannot deadlock; extend and release act on all of them, and
/// `redlock_lock_resource` is the sorted names joined with ','.
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
    fallible(err, || {
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        if n_resources > MAX_RESOURCES {
            return Err(invalid(format!(
                "{n_resources} resources; at most {MAX_RESOURCES} are allowed"
            )));
        }
        // SAFETY: per the contract.
        let names = unsafe { arg_strs(resources, n_resources, "resources") }?;
        hand_out(LockRequest::many(names, Duration::from_millis(ttl_ms)), out)
    })
}

/// Applies `f` to the request if the result is valid; otherwise leaves it unchanged.
///
/// # Safety
/// `request` is NULL or a live request not used by another thread meanwhile; `err` is NULL or
/// writable.
unsafe fn update(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
    f: impl FnOnce(LockRequest) -> Result<LockRequest, Failure>,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the function's contract.
        let r = unsafe { arg_mut(request, "request") }?;
        let next = f(r.request.clone())?;
        next.check()?;
        r.request = next;
        Ok(())
    })
}

/// Makes it a fenced lock (`redlock_lock_fence`): a plain lock plus a token greater than that
/// of every fenced lock of the resource whose holder came before (`src/kinds/fenced.rs`). Costs
/// one more round to the nodes, counted against the validity. Replaces the request's kind.
/// `REDLOCK_INVALID_ARGUMENT` for a request of several resources.
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

/// Makes it one hold of a reentrant lock for `owner` (1 to 1024 bytes, copied): a hash
/// `{owner: count}`, plus a field of each hold's own, at the resource's key. `owner` is any name
/// chosen by the caller, not a thread. Each acquisition is one hold and one `redlock_lock` to
/// release or free; the key goes with the last hold. `REDLOCK_INVALID_ARGUMENT` for a NULL,
/// empty, too long or non-UTF-8 owner, or a request of several resources.
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
    let owner = unsafe { arg_str(owner, "owner") };
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.reentrant(owner?))) }
}

/// Makes it a read lock: any number of readers hold the resource at once while no writer does.
/// A writer is a `redlock_request_set_write` lock and also any plain or fenced lock of the
/// resource (of this or any other Redlock client). The readers live in a sorted set at the
/// resource's key, each with its own expiry; extension and release touch only this reader.
/// Waiting readers all wake when a writer releases; writers can starve under a steady stream of
/// overlapping readers. No fencing token. Replaces the request's kind.
/// `REDLOCK_INVALID_ARGUMENT` for a request of several resources (the request is left
/// unchanged). A caller that holds the write lock of the resource and acquires its read lock
/// gets `REDLOCK_INVALID_ARGUMENT` from `redlock_request_acquire` instead of waiting for itself.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_read(
    request: *mut redlock_request,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.read())) }
}

/// Makes it the write lock of a read-write lock: excludes readers and other writers. On the
/// nodes it is exactly a plain lock; it adds the check that the caller holds no read or write
/// lock of the resource itself (there is no upgrade from read to write):
/// `redlock_request_acquire` returns `REDLOCK_INVALID_ARGUMENT` at once instead of waiting for
/// itself. For a fenced writer use `redlock_request_set_fenced` instead. Replaces the request's
/// kind. `REDLOCK_INVALID_ARGUMENT` for a request of several resources.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
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
/// `REDLOCK_INVALID_ARGUMENT` from `redlock_request_acquire` (it can change once every permit
/// is released and its TTL has run out). `redlock_lock_permit` says which slot is held. No
/// fencing token. Replaces the request's kind. `REDLOCK_INVALID_ARGUMENT` (request unchanged)
/// for 0 or more than 1024 permits, or a request of several resources.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_semaphore(
    request: *mut redlock_request,
    permits: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.semaphore(permits))) }
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
    // SAFETY: per the contract.
    unsafe {
        update(request, err, |r| {
            Ok(r.retry_delay(arg_ms(delay_ms, "retry delay")?)
                .retry_jitter(arg_ms(jitter_ms, "retry jitter")?))
        })
    }
}

/// Waits up to `timeout_ms` for a busy resource, woken by the release notifications the nodes
/// publish, with a jittered backoff as the fallback (0: a single attempt). A waiter of an
/// exclusive kind queues in arrival order behind this client's other waiters of the resource.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_wait(
    request: *mut redlock_request,
    timeout_ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    let timeout = Duration::from_millis(timeout_ms.min(to_ms(MAX_TTL)));
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.wait(timeout))) }
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

/// Whether a waiter (`redlock_request_set_wait`) for a plain, fenced or write lock on one resource
/// queues in arrival order with the waiters of every process, so that a release wakes only the next
/// one (default true), or, with false, one waiter per client tries on each release, as every
/// earlier version did. Readers, semaphores, reentrant locks, several resources and waits without
/// notifications never queue. The queue only orders the tries: exclusion stays with the nodes
/// either way.
///
/// # Safety
/// As for `redlock_request_set_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_set_fair(
    request: *mut redlock_request,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { update(request, err, |r| Ok(r.fair(on))) }
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
                        "extend fraction must be above 0 and below 1 (or 0 for the default), got {fraction}"
                    )));
                }
                auto = auto.fraction(fraction);
            }
            if max_hold_ms > 0 {
                auto = auto.max_hold(arg_ms(max_hold_ms, "max_hold_ms")?);
            }
            if max_extensions > 0 {
                auto = auto.max_extensions(max_extensions);
            }
            Ok(r.auto_extend(auto))
        })
    }
}

/// Frees a request; NULL is ignored. Free it once no `redlock_request_acquire` with it is still
/// running.
///
/// # Safety
/// `request` is NULL or from `redlock_request_new*`, freed once, not used afterwards and not by
/// a call still running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_free(request: *mut redlock_request) {
    // SAFETY: per the contract.
    unsafe { free_box(request) }
}

/// Acquires the lock `request` describes on `client`; blocks until acquired, given up or
/// cancelled. On success writes a new lock to `*out` (free it with `redlock_lock_free`).
///
/// `cancel` (NULL: none) ends the acquisition once triggered; it must stay alive until this
/// call returns. `caller` (NULL or empty: the calling OS thread) names who the acquisition is
/// for, for the check that refuses a read-write lock its caller would wait for forever: pass
/// your language's notion of a thread (a Python thread, a goroutine's owner) when it is not an
/// OS thread.
///
/// `REDLOCK_NOT_ACQUIRED`: held by another owner through the last attempt or the wait.
/// `REDLOCK_NO_QUORUM`: too few nodes answered. `REDLOCK_CANCELLED`: `cancel` fired first;
/// nothing of the acquisition is left on the nodes (a node that was down or hung keeps its key
/// until the TTL). `REDLOCK_INVALID_ARGUMENT`: NULL request, client or out, a TTL of 0, too
/// small to leave validity or over 10 years, a TTL too short to auto-extend, a caller that is
/// not UTF-8. Thread-safe.
///
/// # Safety
/// `request`, `client` and `cancel` are NULL or live; `caller` is NULL or a NUL-terminated
/// string; `out` and `err` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_request_acquire(
    request: *const redlock_request,
    client: *const redlock_client,
    cancel: *const redlock_cancel,
    caller: *const c_char,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let request = unsafe { arg(request, "request") }?;
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let caller = unsafe { arg_opt_str(caller, "caller") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let mut this = request.request.clone();
        // SAFETY: NULL or a live handle per the contract.
        if let Some(c) = unsafe { cancel.as_ref() } {
            this = this.cancel(&c.cancel);
        }
        if let Some(caller) = caller {
            this = this.caller(caller);
        }
        out.write(redlock_lock::new(client.client.acquire(&this)?));
        Ok(())
    })
}
