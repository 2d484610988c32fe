//! The C ABI: `libredlock` and `include/redlock.h` (generated from this file by cbindgen).
//!
//! The only module with `unsafe`. Every export is panic-safe (a panic becomes `REDLOCK_PANIC`)
//! and NULL-safe (a NULL or non-UTF-8 argument is `REDLOCK_INVALID_ARGUMENT`); results go through
//! out-params written only on success; errors through an optional `redlock_error **err`, not a
//! thread-local, because Go may move a goroutine between OS threads between two calls.
#![allow(non_camel_case_types)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::lock::Shared;
use crate::{Error, Lock, LockOptions, Redlock};

mod guard;
mod inspect;
mod kinds;
mod node;
mod options;
mod request;
mod rwsem;

pub use inspect::{
    redlock_forced_release, redlock_inspection, redlock_key_kind, redlock_release_outcome,
};
pub use node::redlock_node_status;
pub use options::{redlock_lock_options, redlock_options};

/// What a call came to. The numbers are part of the ABI and never reused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_status {
    /// Success.
    REDLOCK_OK = 0,
    /// The resource is held by another owner.
    REDLOCK_NOT_ACQUIRED = 1,
    /// Too few nodes answered in time (down, hung or erroring), or so late that no validity was
    /// left.
    REDLOCK_NO_QUORUM = 2,
    /// extend/release: the lock is no longer ours on a quorum (it expired or was released).
    REDLOCK_LOST = 3,
    /// NULL, non-UTF-8 or empty string, zero or huge TTL, bad URL, no nodes, bad option.
    REDLOCK_INVALID_ARGUMENT = 4,
    /// extend: `max_extensions` reached; the lock stays held until its validity runs out.
    REDLOCK_EXTENSION_LIMIT = 5,
    /// A bug in redlock was caught at the boundary; please report it.
    REDLOCK_PANIC = 6,
    /// The operating system refused a resource (a worker thread, say).
    REDLOCK_IO = 7,
    /// The acquisition was cancelled through its `redlock_cancel` handle; nothing of it is left
    /// on the nodes.
    REDLOCK_CANCELLED = 8,
}

use redlock_status::*;

/// A client over N Redis nodes. Thread-safe: share one among all threads.
pub struct redlock_client {
    client: Redlock,
    /// How many nodes it was created with.
    nodes: usize,
}

/// A held (or released) lock.
pub struct redlock_lock {
    lock: Mutex<Lock>,
    /// Read without `lock`'s mutex, so that polling the state never waits behind a release
    /// or extend in progress, and an `on_lost` callback may call back in.
    shared: Arc<Shared>,
    resource: CString,
    token: CString,
}

/// An error: a status and a message naming the failing node(s) where known.
pub struct redlock_error {
    status: redlock_status,
    message: CString,
}

/// A failed call, before it is handed to C.
struct Failure {
    status: redlock_status,
    message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::InvalidArgument { .. } => REDLOCK_INVALID_ARGUMENT,
            Error::NotAcquired { .. } => REDLOCK_NOT_ACQUIRED,
            Error::NoQuorum { .. } => REDLOCK_NO_QUORUM,
            Error::Lost { .. } => REDLOCK_LOST,
            Error::ExtensionLimit { .. } => REDLOCK_EXTENSION_LIMIT,
            Error::Io { .. } => REDLOCK_IO,
            Error::Cancelled { .. } => REDLOCK_CANCELLED,
        };
        Failure {
            status,
            message: e.to_string(),
        }
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        status: REDLOCK_INVALID_ARGUMENT,
        message: format!("invalid argument: {}", message.into()),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("redlock panicked: {what}; please report this bug")
}

/// Runs one export: catches panics, turns failures into a status and, when `err` is not NULL,
/// a `redlock_error`.
fn guard(err: *mut *mut redlock_error, f: impl FnOnce() -> Result<(), Failure>) -> redlock_status {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return REDLOCK_OK,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure {
            status: REDLOCK_PANIC,
            message: panic_message(&*payload),
        },
    };
    if !err.is_null() {
        // Messages come from our own Display impls and C strings, which hold no NUL; be
        // safe anyway.
        let message = CString::new(failure.message.replace('\0', "\\0")).unwrap_or_default();
        let boxed = Box::new(redlock_error {
            status: failure.status,
            message,
        });
        // SAFETY: the caller passes a writable `redlock_error **` or NULL (checked above).
        unsafe { *err = Box::into_raw(boxed) };
    }
    failure.status
}

/// Runs an infallible export, turning a panic into `fallback`.
fn quiet<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for `'a`.
unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated per the function's contract.
    let bytes = unsafe { CStr::from_ptr(p) };
    bytes
        .to_str()
        .map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

/// # Safety
/// `p` is NULL or points to a live `T` not mutated elsewhere for `'a`.
unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

fn locked(lock: &redlock_lock) -> MutexGuard<'_, Lock> {
    // A panic while holding the mutex leaves the Lock in a consistent state: keep using it.
    lock.lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates a client over `n_urls` nodes given as `redis://[user:password@]host:port[/db]` URLs
/// (`rediss://` for TLS; see `redlock_options_set_tls_ca_file`).
///
/// `opts` is NULL for the defaults, or options from `redlock_options_new`; the client copies
/// them, so they may be freed or changed afterwards. On success writes a new client to `*out`;
/// free it with `redlock_client_free`. Unreachable nodes do not fail this call (their workers
/// keep trying); an empty list, a NULL or non-UTF-8 URL, an unparsable URL, a node listed twice,
/// an unreadable TLS file, or TLS files without any `rediss://` node returns
/// `REDLOCK_INVALID_ARGUMENT`. On failure `*err` (when `err` is not NULL) gets a new error to
/// free with `redlock_error_free`.
///
/// # Safety
/// `urls` points to `n_urls` pointers, each NULL or a NUL-terminated string; `opts` is NULL or
/// live options; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_new(
    urls: *const *const c_char,
    n_urls: usize,
    opts: *const redlock_options,
    out: *mut *mut redlock_client,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        if n_urls == 0 {
            return Err(invalid(
                "no nodes: n_urls is 0; give at least one redis:// URL",
            ));
        }
        if urls.is_null() {
            return Err(invalid("urls is NULL"));
        }
        // SAFETY: `urls` holds `n_urls` pointers per the contract.
        let pointers = unsafe { std::slice::from_raw_parts(urls, n_urls) };
        let mut list = Vec::with_capacity(n_urls);
        for (i, &p) in pointers.iter().enumerate() {
            // SAFETY: each entry is NULL or a C string per the contract.
            list.push(unsafe { str_arg(p, &format!("urls[{i}]")) }?);
        }
        // SAFETY: NULL or live options per the contract.
        let builder = match unsafe { opts.as_ref() } {
            Some(o) => o.builder.clone(),
            None => crate::Builder::default(),
        };
        let client = builder.nodes(list).build()?;
        // SAFETY: `out` is writable (checked non-NULL above).
        unsafe {
            *out = Box::into_raw(Box::new(redlock_client {
                client,
                nodes: n_urls,
            }))
        };
        Ok(())
    })
}

/// Frees a client. Locks created from it stay usable until they are freed; the worker threads
/// stop and the connections close when the client and all its locks are gone, so the last of
/// these frees may block briefly (up to 2 × node_timeout, at least 100 ms) while a worker stuck
/// on a hung node gives up. NULL is a no-op.
///
/// # Safety
/// `client` is NULL or a pointer from `redlock_client_new`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_free(client: *mut redlock_client) {
    quiet((), || {
        if !client.is_null() {
            // SAFETY: from Box::into_raw in redlock_client_new, freed once per the contract.
            drop(unsafe { Box::from_raw(client) });
        }
    })
}

/// The number of nodes the client was created with; 0 for NULL.
///
/// # Safety
/// `client` is NULL or a live client.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_node_count(client: *const redlock_client) -> usize {
    // SAFETY: NULL or a live client per the contract.
    unsafe { client.as_ref() }.map_or(0, |c| c.nodes)
}

/// How an export acquires.
enum How {
    Retry,
    Once,
    With(LockOptions),
}

/// # Safety
/// As for `redlock_client_lock`.
unsafe fn acquire(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
    how: How,
) -> redlock_status {
    guard(err, || {
        // SAFETY: NULL or a live client per the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: NULL or a C string per the caller's contract.
        let resource = unsafe { str_arg(resource, "resource") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let ttl = Duration::from_millis(ttl_ms);
        let lock = match how {
            How::Retry => client.client.lock(resource, ttl),
            How::Once => client.client.try_lock(resource, ttl),
            How::With(options) => client.client.lock_with(resource, ttl, options),
        }?;
        // SAFETY: `out` is writable (checked non-NULL above).
        unsafe { hand_out(lock, out) }
    })
}

/// Boxes `lock` for C and writes it to `*out`.
///
/// # Safety
/// `out` is non-NULL and writable.
unsafe fn hand_out(lock: Lock, out: *mut *mut redlock_lock) -> Result<(), Failure> {
    let boxed = Box::new(redlock_lock {
        resource: CString::new(lock.resource()).map_err(|_| invalid("resource has a NUL"))?,
        token: CString::new(lock.token()).map_err(|_| invalid("token has a NUL"))?,
        shared: Arc::clone(lock.shared()),
        lock: Mutex::new(lock),
    });
    // SAFETY: per the function's contract.
    unsafe { *out = Box::into_raw(boxed) };
    Ok(())
}

/// Acquires `resource` for `ttl_ms` milliseconds, retrying up to `retry_count` times after a
/// random delay. Blocks until acquired or given up.
///
/// On success writes a new lock to `*out` (free it with `redlock_lock_free`).
/// `REDLOCK_NOT_ACQUIRED`: held by another owner. `REDLOCK_NO_QUORUM`: too few nodes answered.
/// `REDLOCK_INVALID_ARGUMENT`: NULL client/resource/out, empty or non-UTF-8 resource, ttl_ms 0,
/// too small to leave validity (with the default drift, below 3), or over 10 years. Thread-safe:
/// many threads may lock through one client at once.
///
/// # Safety
/// `client` is NULL or a live client; `resource` is NULL or a NUL-terminated string; `out` and
/// `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { acquire(client, resource, ttl_ms, out, err, How::Retry) }
}

/// Like `redlock_client_lock`, with a single attempt.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_try_lock(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { acquire(client, resource, ttl_ms, out, err, How::Once) }
}

/// Acquires `resource` for `ttl_ms` as `opts` (from `redlock_lock_options_new`) say; NULL: the
/// defaults, i.e. like `redlock_client_lock`.
///
/// With auto-extension (`redlock_lock_options_set_auto_extend`), the client's extender thread
/// (one per client, started with the first such lock) extends the lock every
/// `extend_fraction × ttl` while it is held; poll `redlock_lock_is_held` /
/// `redlock_lock_is_lost` or register `redlock_lock_on_lost` to learn that it was lost.
/// Extension stops for good when the lock is released or freed, after `max_hold_ms`, or at
/// `max_extensions`; the lock keeps its client's internals alive, so it goes on after
/// `redlock_client_free` while the lock is held.
///
/// With a wait (`redlock_lock_options_set_wait_timeout_ms`), blocks that long for a busy
/// resource, woken by the release notification the nodes publish (one subscriber connection
/// per node per client), with a jittered backoff as the fallback. Statuses as for
/// `redlock_client_lock`; `REDLOCK_INVALID_ARGUMENT` also for a TTL too short to auto-extend
/// (it must exceed extend_fraction × ttl + node_timeout).
///
/// # Safety
/// As for `redlock_client_lock`; `opts` is NULL or live lock options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_with(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    opts: *const redlock_lock_options,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: NULL or live lock options per the contract.
    let options = unsafe { opts.as_ref() }.map_or_else(LockOptions::default, |o| o.options);
    // SAFETY: same contract.
    unsafe { acquire(client, resource, ttl_ms, out, err, How::With(options)) }
}

/// `redlock_client_lock_with` with only `auto_extend` set: acquires with retries, then keeps the
/// lock alive while it is held.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_auto(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    let options = LockOptions::new().auto_extend(true);
    // SAFETY: same contract.
    unsafe { acquire(client, resource, ttl_ms, out, err, How::With(options)) }
}

/// `redlock_client_lock_with` with only `wait` set: blocks up to `wait_ms` for a busy resource,
/// woken by release notifications.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_wait(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    let options = LockOptions::new().wait_timeout(Duration::from_millis(wait_ms));
    // SAFETY: same contract.
    unsafe { acquire(client, resource, ttl_ms, out, err, How::With(options)) }
}

/// Whether the lock is still ours: not released, not found lost, validity left. Cheap, never
/// blocks behind another call on the lock; false for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_is_held(lock: *const redlock_lock) -> bool {
    quiet(false, || {
        // SAFETY: NULL or a live lock per the contract.
        unsafe { lock.as_ref() }.is_some_and(|l| l.shared.is_held())
    })
}

/// Whether the lock was found lost (an extension found it no longer ours on a quorum, or an
/// auto-extended lock ran out of validity); a released lock is not lost. False for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_is_lost(lock: *const redlock_lock) -> bool {
    quiet(false, || {
        // SAFETY: NULL or a live lock per the contract.
        unsafe { lock.as_ref() }.is_some_and(|l| {
            l.shared.check_suspension();
            l.shared.is_lost()
        })
    })
}

/// The callback type of `redlock_lock_on_lost`: `user` as given, and the resource name, valid
/// only during the call.
pub type redlock_lost_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, resource: *const c_char)>;

/// The C side of a lost callback; the caller vouches that `user` may be used from the extender
/// thread.
struct LostCallback {
    cb: unsafe extern "C" fn(*mut c_void, *const c_char),
    user: *mut c_void,
}

// SAFETY: `redlock_lock_on_lost` documents that the callback and `user` are called from another
// thread; the caller agrees to that by registering them.
unsafe impl Send for LostCallback {}

impl LostCallback {
    fn call(self, resource: &str) {
        let resource = CString::new(resource.replace('\0', "")).unwrap_or_default();
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
/// extender holds no lock mutex while it runs), but must not unwind (no C++ exceptions, no
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
    guard(err, || {
        // SAFETY: NULL or a live lock per the contract.
        let lock = unsafe { handle(lock, "lock") }?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let callback = LostCallback { cb, user };
        lock.shared
            .on_lost(Box::new(move |resource: &str| callback.call(resource)));
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
    guard(err, || {
        // SAFETY: NULL or a live lock per the contract.
        let lock = unsafe { handle(lock, "lock") }?;
        locked(lock).extend(Duration::from_millis(ttl_ms))?;
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
    guard(err, || {
        // SAFETY: NULL or a live lock per the contract.
        let lock = unsafe { handle(lock, "lock") }?;
        locked(lock).release()?;
        Ok(())
    })
}

/// Milliseconds left before the lock may expire on the nodes; 0 when released, expired or NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_validity_ms(lock: *const redlock_lock) -> u64 {
    quiet(0, || {
        // SAFETY: NULL or a live lock per the contract.
        match unsafe { lock.as_ref() } {
            Some(lock) => lock.shared.validity().as_millis() as u64,
            None => 0,
        }
    })
}

/// The locked resource name, owned by the lock (valid until `redlock_lock_free`); NULL for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_resource(lock: *const redlock_lock) -> *const c_char {
    // SAFETY: NULL or a live lock per the contract.
    unsafe { lock.as_ref() }.map_or(std::ptr::null(), |l| l.resource.as_ptr())
}

/// The lock's random token (40 hex characters), owned by the lock; NULL for NULL.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_token(lock: *const redlock_lock) -> *const c_char {
    // SAFETY: NULL or a live lock per the contract.
    unsafe { lock.as_ref() }.map_or(std::ptr::null(), |l| l.token.as_ptr())
}

/// Frees a lock, releasing it first (without waiting for the nodes) if it is still held.
/// NULL is a no-op.
///
/// # Safety
/// `lock` is NULL or a pointer written by one of the `redlock_client_*lock*` calls, not used
/// again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_free(lock: *mut redlock_lock) {
    quiet((), || {
        if !lock.is_null() {
            // SAFETY: from Box::into_raw in acquire, freed once per the contract.
            drop(unsafe { Box::from_raw(lock) });
        }
    })
}

/// The status an error carries; `REDLOCK_OK` for NULL.
///
/// # Safety
/// `err` is NULL or a live error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_error_status(err: *const redlock_error) -> redlock_status {
    // SAFETY: NULL or a live error per the contract.
    unsafe { err.as_ref() }.map_or(REDLOCK_OK, |e| e.status)
}

/// The error's message (what failed, on which node, what to do), owned by the error; valid
/// until `redlock_error_free`. NULL for NULL.
///
/// # Safety
/// `err` is NULL or a live error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_error_message(err: *const redlock_error) -> *const c_char {
    // SAFETY: NULL or a live error per the contract.
    unsafe { err.as_ref() }.map_or(std::ptr::null(), |e| e.message.as_ptr())
}

/// Frees an error. NULL is a no-op.
///
/// # Safety
/// `err` is NULL or a pointer written by a redlock call, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_error_free(err: *mut redlock_error) {
    quiet((), || {
        if !err.is_null() {
            // SAFETY: from Box::into_raw in guard, freed once per the contract.
            drop(unsafe { Box::from_raw(err) });
        }
    })
}

/// The name of a status, e.g. "REDLOCK_NOT_ACQUIRED"; "REDLOCK_UNKNOWN_STATUS" for a number that
/// is not one. Static storage. Takes an int so any number is safe to pass.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_status_str(status: c_int) -> *const c_char {
    let name: &CStr = match status {
        0 => c"REDLOCK_OK",
        1 => c"REDLOCK_NOT_ACQUIRED",
        2 => c"REDLOCK_NO_QUORUM",
        3 => c"REDLOCK_LOST",
        4 => c"REDLOCK_INVALID_ARGUMENT",
        5 => c"REDLOCK_EXTENSION_LIMIT",
        6 => c"REDLOCK_PANIC",
        7 => c"REDLOCK_IO",
        8 => c"REDLOCK_CANCELLED",
        _ => c"REDLOCK_UNKNOWN_STATUS",
    };
    name.as_ptr()
}

/// The library version, e.g. "0.1.0" (static storage); equals `REDLOCK_VERSION` of a matching
/// header.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_a_status_and_a_message() {
        let mut err: *mut redlock_error = std::ptr::null_mut();
        let status = guard(&mut err, || panic!("boom"));
        assert_eq!(status, REDLOCK_PANIC);
        // SAFETY: written by guard just above.
        unsafe {
            let message = CStr::from_ptr(redlock_error_message(err)).to_str().unwrap();
            assert!(message.contains("boom"), "{message}");
            assert_eq!(redlock_error_status(err), REDLOCK_PANIC);
            redlock_error_free(err);
        }
    }

    #[test]
    fn status_names_match_their_numbers() {
        for (status, name) in [
            (REDLOCK_OK, "REDLOCK_OK"),
            (REDLOCK_NOT_ACQUIRED, "REDLOCK_NOT_ACQUIRED"),
            (REDLOCK_NO_QUORUM, "REDLOCK_NO_QUORUM"),
            (REDLOCK_LOST, "REDLOCK_LOST"),
            (REDLOCK_INVALID_ARGUMENT, "REDLOCK_INVALID_ARGUMENT"),
            (REDLOCK_EXTENSION_LIMIT, "REDLOCK_EXTENSION_LIMIT"),
            (REDLOCK_PANIC, "REDLOCK_PANIC"),
            (REDLOCK_IO, "REDLOCK_IO"),
            (REDLOCK_CANCELLED, "REDLOCK_CANCELLED"),
        ] {
            // SAFETY: static C strings.
            let got = unsafe { CStr::from_ptr(redlock_status_str(status as c_int)) };
            assert_eq!(got.to_str().unwrap(), name);
            assert_eq!(format!("{status:?}"), name);
        }
    }
}
