//! The C ABI of fenced, reentrant and multi-resource locks. They are `redlock_lock`s like any
//! other: extend, release, validity and free work the same on them.

use std::ffi::c_char;
use std::time::Duration;

use super::{
    Failure, guard, hand_out, handle, invalid, locked, redlock_client, redlock_error, redlock_lock,
    redlock_status, str_arg,
};

/// How many times to try: with the client's retries, or once.
#[derive(Clone, Copy)]
enum Tries {
    Retry,
    Once,
}

/// # Safety
/// `client` is NULL or a live client; `resource` is NULL or a C string; `out` and `err` are
/// NULL or writable.
unsafe fn fenced(
    client: *const redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
    tries: Tries,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: per the caller's contract.
        let resource = unsafe { str_arg(resource, "resource") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let ttl = Duration::from_millis(ttl_ms);
        let lock = match tries {
            Tries::Retry => client.client.lock_fenced(resource, ttl),
            Tries::Once => client.client.try_lock_fenced(resource, ttl),
        }?;
        // SAFETY: checked non-NULL above.
        unsafe { hand_out(lock, out) }
    })
}

/// Acquires `resource` like `redlock_client_lock`, with a fencing token: read it with
/// `redlock_lock_fence`. The token is strictly greater than that of every fenced lock of the
/// same resource whose holder came before, also when nodes restart without their data,
/// provided they stay out a restart delay or `restart_grace` (see `src/kinds/fenced.rs`); pass
/// it with every write to the protected resource, which rejects tokens lower than the highest
/// it has seen. The counter lives in the key `redlock:fence:{resource}` on each node (no TTL).
/// One more round to the nodes than a plain lock, counted against the validity. Statuses as for
/// `redlock_client_lock`.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_fenced(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { fenced(client, resource, ttl_ms, out, err, Tries::Retry) }
}

/// Like `redlock_client_lock_fenced`, with a single attempt.
///
/// # Safety
/// As for `redlock_client_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_try_lock_fenced(
    client: *mut redlock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { fenced(client, resource, ttl_ms, out, err, Tries::Once) }
}

/// # Safety
/// As for `redlock_client_lock_reentrant`.
unsafe fn reentrant(
    client: *const redlock_client,
    resource: *const c_char,
    owner: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
    tries: Tries,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: per the caller's contract.
        let resource = unsafe { str_arg(resource, "resource") }?;
        // SAFETY: per the caller's contract.
        let owner = unsafe { str_arg(owner, "owner") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let ttl = Duration::from_millis(ttl_ms);
        let lock = match tries {
            Tries::Retry => client.client.reentrant_lock(resource, owner, ttl),
            Tries::Once => client.client.try_reentrant_lock(resource, owner, ttl),
        }?;
        // SAFETY: checked non-NULL above.
        unsafe { hand_out(lock, out) }
    })
}

/// Acquires one hold of a reentrant lock on `resource` for `owner`, retrying like
/// `redlock_client_lock`.
///
/// `owner` names the holder: a non-empty string of at most 1024 bytes that the caller picks,
/// one per logical owner (a random one works well). It is not a thread: any thread, goroutine
/// or process passing the same owner shares its holds. While `owner` holds the resource it can
/// acquire it again at once; every hold is a lock to release (or free), and the resource is
/// free for others when the last hold goes or the key expires. `redlock_lock_hold_count` tells
/// how many holds there are; `redlock_lock_token` returns the owner. Reentrant and plain locks
/// on one resource exclude each other. Extending a hold keeps the resource at least `ttl_ms`
/// from now; no hold shortens it. Statuses as for `redlock_client_lock`; a NULL, empty,
/// non-UTF-8 or too long owner is `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
/// strings; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_reentrant(
    client: *mut redlock_client,
    resource: *const c_char,
    owner: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { reentrant(client, resource, owner, ttl_ms, out, err, Tries::Retry) }
}

/// Like `redlock_client_lock_reentrant`, with a single attempt.
///
/// # Safety
/// As for `redlock_client_lock_reentrant`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_try_lock_reentrant(
    client: *mut redlock_client,
    resource: *const c_char,
    owner: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { reentrant(client, resource, owner, ttl_ms, out, err, Tries::Once) }
}

/// # Safety
/// As for `redlock_client_lock_many`.
unsafe fn many(
    client: *const redlock_client,
    resources: *const *const c_char,
    n_resources: usize,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
    tries: Tries,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        if n_resources == 0 {
            return Err(invalid("the list of resources is empty: n_resources is 0"));
        }
        if resources.is_null() {
            return Err(invalid("resources is NULL"));
        }
        if n_resources > crate::MAX_RESOURCES {
            return Err(invalid(format!(
                "more than {} resources in one lock_many",
                crate::MAX_RESOURCES
            )));
        }
        // SAFETY: `resources` holds `n_resources` pointers per the contract.
        let pointers = unsafe { std::slice::from_raw_parts(resources, n_resources) };
        let mut names = Vec::with_capacity(n_resources);
        for (i, &p) in pointers.iter().enumerate() {
            // SAFETY: each entry is NULL or a C string per the contract.
            names.push(unsafe { str_arg(p, &format!("resources[{i}]")) }?);
        }
        let ttl = Duration::from_millis(ttl_ms);
        let lock = match tries {
            Tries::Retry => client.client.lock_many(names, ttl),
            Tries::Once => client.client.try_lock_many(names, ttl),
        }?;
        // SAFETY: checked non-NULL above.
        unsafe { hand_out(lock, out) }
    })
}

/// Acquires all `n_resources` resources at once or none of them, retrying like
/// `redlock_client_lock`. Each node sets all keys in one script, in sorted order, or none, so
/// clients locking overlapping sets cannot deadlock; a failed attempt is undone on every node.
/// Extend and release act on all resources; `redlock_lock_resource` returns the sorted names
/// joined with ','. An empty list, a NULL, empty or non-UTF-8 name, a name given twice or more
/// than 64 names is `REDLOCK_INVALID_ARGUMENT`; other statuses as for `redlock_client_lock`.
///
/// # Safety
/// `client` is NULL or a live client; `resources` is NULL or points to `n_resources`
/// pointers, each NULL or a NUL-terminated string; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_lock_many(
    client: *mut redlock_client,
    resources: *const *const c_char,
    n_resources: usize,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        many(
            client,
            resources,
            n_resources,
            ttl_ms,
            out,
            err,
            Tries::Retry,
        )
    }
}

/// Like `redlock_client_lock_many`, with a single attempt.
///
/// # Safety
/// As for `redlock_client_lock_many`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_try_lock_many(
    client: *mut redlock_client,
    resources: *const *const c_char,
    n_resources: usize,
    ttl_ms: u64,
    out: *mut *mut redlock_lock,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        many(
            client,
            resources,
            n_resources,
            ttl_ms,
            out,
            err,
            Tries::Once,
        )
    }
}

/// # Safety
/// `lock` is NULL or a live lock; `out` and `err` are NULL or writable.
unsafe fn number_of(
    lock: *const redlock_lock,
    out: *mut u64,
    err: *mut *mut redlock_error,
    read: impl FnOnce(&crate::Lock) -> Result<u64, Failure>,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the caller's contract.
        let lock = unsafe { handle(lock, "lock") }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let value = read(&locked(lock))?;
        // SAFETY: checked non-NULL above.
        unsafe { *out = value };
        Ok(())
    })
}

/// Writes the fencing token of a lock from `redlock_client_lock_fenced` (or its try variant)
/// to `*out`. `REDLOCK_INVALID_ARGUMENT` for a NULL lock or out, or a lock of another kind. The
/// token stays readable after release.
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
        number_of(lock, out, err, |l| {
            l.fence()
                .ok_or_else(|| invalid("the lock has no fencing token: it was not locked fenced"))
        })
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
        number_of(lock, out, err, |l| {
            l.hold_count()
                .ok_or_else(|| invalid("the lock is not reentrant"))
        })
    }
}
