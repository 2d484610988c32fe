//! `redlock_client`: a client over N nodes, and the two simplest acquisitions.

use std::ffi::c_char;
use std::time::Duration;

use redquorum::{LockRequest, Redlock};

use crate::boundary::{
    arg, arg_str, arg_strs, fallible, free_box, invalid, out, read, redlock_error, redlock_status,
};
use crate::lock::redlock_lock;
use crate::options::redlock_options;

/// A client over N Redis nodes. Thread-safe: share one among all threads.
pub struct redlock_client {
    pub(crate) client: Redlock,
    /// How many nodes it was created with.
    nodes: usize,
}

/// Creates a client over `n_urls` nodes given as `redis://[user:password@]host:port[/db]` URLs
/// (`rediss://` for TLS; see `redlock_options_set_tls_ca_file`).
///
/// `opts` is NULL for the defaults, or options from `redlock_options_new`; the client copies
/// them, so they may be freed or changed afterwards. On success writes a new client to `*out`;
/// free it with `redlock_client_free`. Unreachable nodes do not fail this call (their workers
/// keep trying); an empty list, a NULL or non-UTF-8 URL, an unparsable or too long (over 4096
/// bytes) URL, a node listed twice, an unreadable TLS file, or TLS files without any `rediss://`
/// node returns `REDLOCK_INVALID_ARGUMENT`; its message never shows a password, whatever it holds. On failure `*err` (when `err` is not NULL) gets a new error to
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
    fallible(err, || {
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        if n_urls == 0 {
            return Err(invalid(
                "no nodes: n_urls is 0; give at least one redis:// URL",
            ));
        }
        // SAFETY: per the contract.
        let urls = unsafe { arg_strs(urls, n_urls, "urls") }?;
        // SAFETY: per the contract.
        let client = unsafe { redlock_options::builder_of(opts) }
            .nodes(urls)
            .build()?;
        out.write(redlock_client {
            client,
            nodes: n_urls,
        });
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
    // SAFETY: per the contract.
    unsafe { free_box(client) }
}

/// The number of nodes the client was created with; 0 for NULL.
///
/// # Safety
/// `client` is NULL or a live client.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_node_count(client: *const redlock_client) -> usize {
    // SAFETY: per the contract.
    unsafe { read(client, |c| c.nodes) }
}

/// # Safety
/// As for `redlock_client_lock`.
unsafe fn lock(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    kind: impl FnOnce(LockRequest) -> LockRequest,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the caller's contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the caller's contract.
        let resource = unsafe { arg_str(resource, "resource") }?;
        // SAFETY: per the caller's contract.
        let out = unsafe { self::out(out) }?;
        let request = kind(LockRequest::new(resource, Duration::from_millis(ttl_ms)));
        out.write(redlock_lock::new(client.client.acquire(&request)?));
        Ok(())
    })
}

/// Acquires a plain lock on `resource` for `ttl_ms` milliseconds, retrying up to `retry_count`
/// times after a random delay. Blocks until acquired or given up. The read, write, semaphore
/// and fenced shorthands below are the same for their kinds; every other kind and every other
/// patience goes through a request (`redlock_request_new`, `redlock_request_acquire`).
///
/// On success writes a new lock to `*out` (free it with `redlock_lock_free`).
/// `REDLOCK_NOT_ACQUIRED`: held by another owner. `REDLOCK_NO_QUORUM`: too few nodes answered.
/// `REDLOCK_INVALID_ARGUMENT`: NULL client/resource/out, empty, non-UTF-8 or too long (over 4096
/// bytes) resource, ttl_ms 0, too small to leave validity (with the default drift, below 3), or
/// over 10 years. Thread-safe: many threads may lock through one client at once.
///
/// # Safety
/// `client` is NULL or a live client; `resource` is NULL or a NUL-terminated string; `out` and
/// `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, |r| r, out, err) }
}

/// Like `redlock_client_lock`, with a single attempt.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_try_lock(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, LockRequest::once, out, err) }
}

/// The read side of a read-write lock on `resource`, retrying like `redlock_client_lock`: a
/// request with `redlock_request_set_read`. Any number of readers hold it at once while no
/// writer does. Errors as for `redlock_client_lock`, and `REDLOCK_INVALID_ARGUMENT` if the
/// calling thread holds the write lock of `resource`.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_read_lock(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, LockRequest::read, out, err) }
}

/// The write side of a read-write lock on `resource`, retrying like `redlock_client_lock`: a
/// request with `redlock_request_set_write`. Excludes readers and other writers. Errors as for
/// `redlock_client_lock`, and `REDLOCK_INVALID_ARGUMENT` if the calling thread holds a read or
/// write lock of `resource`.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_write_lock(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, LockRequest::write, out, err) }
}

/// One of `permits` permits (1 to 1024) of a counting semaphore on `resource`, retrying like
/// `redlock_client_lock`: a request with `redlock_request_set_semaphore`. `redlock_lock_permit`
/// says which slot it holds. Errors as for `redlock_client_lock`, and
/// `REDLOCK_INVALID_ARGUMENT` for 0 or over 1024 permits, or a number other than the one the
/// semaphore's holders passed.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_semaphore(
    client: *const redlock_client,
    resource: *const c_char,
    permits: u32,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, |r| r.semaphore(permits), out, err) }
}

/// A fenced lock on `resource`, retrying like `redlock_client_lock`: a request with
/// `redlock_request_set_fenced`. `redlock_lock_fence` gives its token. Errors as for
/// `redlock_client_lock`.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_fenced(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { lock(client, resource, ttl_ms, LockRequest::fenced, out, err) }
}
