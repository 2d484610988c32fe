//! Client options and lock options as opaque handles built with setters, so that a later
//! version can add a setting (a function) without changing the size of anything a caller
//! allocates.

use std::ffi::c_char;
use std::time::Duration;

use super::{Failure, guard, invalid, quiet, redlock_error, redlock_status, str_arg};
use crate::{Builder, LockOptions, MAX_TTL};

/// Client settings for `redlock_client_new`: create with `redlock_options_new`, change with the
/// `redlock_options_set_*` functions, free with `redlock_options_free`. Not thread-safe while
/// being changed; a client keeps no reference to it, so it may be freed (or reused for another
/// client) right after `redlock_client_new`.
pub struct redlock_options {
    /// The client builder without nodes; its settings are checked by each setter.
    pub(super) builder: Builder,
}

/// How one lock is taken and kept, for `redlock_client_lock_with`: create with
/// `redlock_lock_options_new`, change with the `redlock_lock_options_set_*` functions, free
/// with `redlock_lock_options_free`. Not thread-safe while being changed; may be reused for
/// many calls.
pub struct redlock_lock_options {
    pub(super) options: LockOptions,
}

const MAX_TTL_MS: u64 = MAX_TTL.as_millis() as u64;

/// `ms` as a Duration, at most 10 years.
pub(super) fn millis(ms: u64, what: &str) -> Result<Duration, Failure> {
    if ms > MAX_TTL_MS {
        return Err(invalid(format!(
            "{what} of {ms} ms is larger than the maximum of {MAX_TTL_MS} ms (10 years)"
        )));
    }
    Ok(Duration::from_millis(ms))
}

pub(super) fn as_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// # Safety
/// `p` is NULL or points to a live `T` that nothing else uses during the call.
unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_mut() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string; an empty path is refused.
unsafe fn path_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: per the function's contract.
    let path = unsafe { str_arg(p, what) }?;
    if path.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    Ok(path)
}

/// Runs a setter on a live options handle.
///
/// # Safety
/// `o` is NULL or a live handle not used by another thread during the call; `err` is NULL or
/// writable.
pub(super) unsafe fn set<T>(
    o: *mut T,
    what: &str,
    err: *mut *mut redlock_error,
    f: impl FnOnce(&mut T) -> Result<(), Failure>,
) -> redlock_status {
    guard(err, || {
        // SAFETY: per the function's contract.
        let o = unsafe { handle_mut(o, what) }?;
        f(o)
    })
}

/// The settings of `o`, or the defaults for NULL.
///
/// # Safety
/// `o` is NULL or a live options handle.
pub(super) unsafe fn settings<'a>(o: *const redlock_options) -> std::borrow::Cow<'a, Builder> {
    // SAFETY: per the function's contract.
    match unsafe { o.as_ref() } {
        Some(o) => std::borrow::Cow::Borrowed(&o.builder),
        None => std::borrow::Cow::Owned(Builder::default()),
    }
}

/// Writes new client options with the default settings to `*out`: retry_count 3,
/// retry_delay_ms 200, retry_jitter_ms 100, drift_factor 0.01, node_timeout_ms 50,
/// max_extensions 0 (no cap), restart_grace_ms 0 (off), the clock guard on with
/// clock_jump_threshold_ms 50 and clock_quarantine_ms 60000, strict_servers false, the system's
/// trusted roots and no client certificate for TLS. Free them with `redlock_options_free`.
///
/// # Safety
/// `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_new(
    out: *mut *mut redlock_options,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let boxed = Box::new(redlock_options {
            builder: Builder::default(),
        });
        // SAFETY: checked non-NULL above; writable per the contract.
        unsafe { *out = Box::into_raw(boxed) };
        Ok(())
    })
}

/// Frees client options. NULL is a no-op.
///
/// # Safety
/// `o` is NULL or a pointer from `redlock_options_new`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_free(o: *mut redlock_options) {
    quiet((), || {
        if !o.is_null() {
            // SAFETY: from Box::into_raw in redlock_options_new, freed once per the contract.
            drop(unsafe { Box::from_raw(o) });
        }
    })
}

/// Retries after the first attempt in `redlock_client_lock` (default 3; 0 = one attempt).
///
/// # Safety
/// `o` is NULL or live options not used by another thread during the call; `err` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_retry_count(
    o: *mut redlock_options,
    count: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.retry_count = count;
            Ok(())
        })
    }
}

/// Base delay between attempts, ms, at most 10 years (default 200).
/// `REDLOCK_INVALID_ARGUMENT` for a larger value; the options are then unchanged.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_retry_delay_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.retry_delay = millis(ms, "retry_delay_ms")?;
            Ok(())
        })
    }
}

/// Each delay is `retry_delay_ms ± a random part of this`, ms, at most 10 years (default 100).
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_retry_jitter_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.retry_jitter = millis(ms, "retry_jitter_ms")?;
            Ok(())
        })
    }
}

/// Clock drift as a fraction of the TTL, in [0, 1) (default 0.01). Validity is
/// `ttl − elapsed − (ttl × drift_factor + 2 ms)`. `REDLOCK_INVALID_ARGUMENT` outside [0, 1)
/// or for NaN.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_drift_factor(
    o: *mut redlock_options,
    factor: f64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            if !(factor.is_finite() && (0.0..1.0).contains(&factor)) {
                return Err(invalid(format!(
                    "drift_factor must be in [0, 1), got {factor}"
                )));
            }
            o.builder.config.drift_factor = factor;
            Ok(())
        })
    }
}

/// How long a call waits for any one node, ms: more than 0, at most 10 years (default 50).
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_node_timeout_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            if ms == 0 {
                return Err(invalid("node_timeout_ms must be greater than zero"));
            }
            o.builder.config.node_timeout = millis(ms, "node_timeout_ms")?;
            Ok(())
        })
    }
}

/// Cap on `redlock_lock_extend` calls per lock (and on auto-extensions); 0 = no cap (default).
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_max_extensions(
    o: *mut redlock_options,
    max: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            o.builder.config.max_extensions = (max > 0).then_some(max);
            Ok(())
        })
    }
}

/// A node whose Redis process is younger than this many ms does not count toward acquire
/// quorums; 0 = off (default), at most 10 years. Set it to at least your largest TTL when
/// nodes run without persistence: a restarted node has forgotten its locks. Needs the `INFO`
/// command.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_restart_grace_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            let grace = millis(ms, "restart_grace_ms")?;
            o.builder.config.restart_grace = (ms > 0).then_some(grace);
            Ok(())
        })
    }
}

/// Trusts the CA certificate(s) in the PEM file at `path` for `rediss://` nodes, instead of the
/// system's trusted roots. The path is copied; the file is read by `redlock_client_new`, which
/// fails with `REDLOCK_INVALID_ARGUMENT` if it is unreadable or holds no certificate, or if no
/// node is `rediss://`. Certificates are always verified; only a URL ending in `#insecure`
/// skips that (for tests only). A NULL, empty or non-UTF-8 path is `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `redlock_options_set_retry_count`; `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_tls_ca_file(
    o: *mut redlock_options,
    path: *const c_char,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            // In the caller's unsafe block: `path` is NULL or a C string per the contract.
            let path = path_arg(path, "tls_ca_file")?;
            o.builder = std::mem::take(&mut o.builder).tls_ca_file(path);
            Ok(())
        })
    }
}

/// Presents the PEM client certificate (with its chain) at `cert_path` and its PEM private key
/// at `key_path` to `rediss://` nodes that require one (mutual TLS, `tls-auth-clients yes`).
/// Both paths are copied and read by `redlock_client_new`, like `redlock_options_set_tls_ca_file`.
/// A NULL, empty or non-UTF-8 path is `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `redlock_options_set_retry_count`; `cert_path` and `key_path` are NULL or
/// NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_tls_client_cert_file(
    o: *mut redlock_options,
    cert_path: *const c_char,
    key_path: *const c_char,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "options", err, |o| {
            // In the caller's unsafe block: NULL or C strings per the contract.
            let cert = path_arg(cert_path, "tls client certificate path")?;
            let key = path_arg(key_path, "tls client key path")?;
            o.builder = std::mem::take(&mut o.builder).tls_client_cert_file(cert, key);
            Ok(())
        })
    }
}

/// The retry count of `o`; the default (3) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_count(o: *const redlock_options) -> u32 {
    // SAFETY: same contract.
    unsafe { settings(o) }.config.retry_count
}

/// The retry delay of `o`, ms; the default (200) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_delay_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    as_millis(unsafe { settings(o) }.config.retry_delay)
}

/// The retry jitter of `o`, ms; the default (100) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_jitter_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    as_millis(unsafe { settings(o) }.config.retry_jitter)
}

/// The drift factor of `o`; the default (0.01) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_drift_factor(o: *const redlock_options) -> f64 {
    // SAFETY: same contract.
    unsafe { settings(o) }.config.drift_factor
}

/// The node timeout of `o`, ms; the default (50) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_node_timeout_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    as_millis(unsafe { settings(o) }.config.node_timeout)
}

/// The extension cap of `o`; 0 (no cap, the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_max_extensions(o: *const redlock_options) -> u32 {
    // SAFETY: same contract.
    unsafe { settings(o) }.config.max_extensions.unwrap_or(0)
}

/// The restart grace of `o`, ms; 0 (off, the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_restart_grace_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { settings(o) }
        .config
        .restart_grace
        .map_or(0, as_millis)
}

/// Writes new lock options with the defaults to `*out`: no auto-extension, extend_fraction 1/3,
/// max_hold_ms 0 (never), no waiting (the client's retries), notifications on. Free them with
/// `redlock_lock_options_free`.
///
/// # Safety
/// `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_new(
    out: *mut *mut redlock_lock_options,
    err: *mut *mut redlock_error,
) -> redlock_status {
    guard(err, || {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let boxed = Box::new(redlock_lock_options {
            options: LockOptions::default(),
        });
        // SAFETY: checked non-NULL above; writable per the contract.
        unsafe { *out = Box::into_raw(boxed) };
        Ok(())
    })
}

/// Frees lock options. NULL is a no-op.
///
/// # Safety
/// `o` is NULL or a pointer from `redlock_lock_options_new`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_free(o: *mut redlock_lock_options) {
    quiet((), || {
        if !o.is_null() {
            // SAFETY: from Box::into_raw in redlock_lock_options_new, freed once per the
            // contract.
            drop(unsafe { Box::from_raw(o) });
        }
    })
}

/// Keep the lock alive on the client's extender thread while it is held (default false).
///
/// # Safety
/// `o` is NULL or live lock options not used by another thread during the call; `err` is NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_set_auto_extend(
    o: *mut redlock_lock_options,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "lock options", err, |o| {
            o.options.auto_extend = on;
            Ok(())
        })
    }
}

/// Extend after this fraction of the TTL, in (0, 1) (default 1/3). `REDLOCK_INVALID_ARGUMENT`
/// outside (0, 1) or for NaN.
///
/// # Safety
/// As for `redlock_lock_options_set_auto_extend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_set_extend_fraction(
    o: *mut redlock_lock_options,
    fraction: f64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "lock options", err, |o| {
            if !(fraction.is_finite() && fraction > 0.0 && fraction < 1.0) {
                return Err(invalid(format!(
                    "extend_fraction must be in (0, 1), got {fraction}"
                )));
            }
            o.options.extend_fraction = fraction;
            Ok(())
        })
    }
}

/// Stop auto-extending this many ms after acquisition; 0 = never (default); at most 10 years.
///
/// # Safety
/// As for `redlock_lock_options_set_auto_extend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_set_max_hold_ms(
    o: *mut redlock_lock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "lock options", err, |o| {
            let hold = millis(ms, "max_hold_ms")?;
            o.options.max_hold = (ms > 0).then_some(hold);
            Ok(())
        })
    }
}

/// Wait up to `ms` for a busy resource (0 = one attempt), woken by the release notifications
/// the nodes publish, instead of the client's `retry_count` attempts; at most 10 years. Waiting
/// cannot be turned off again on these options: use new ones.
///
/// # Safety
/// As for `redlock_lock_options_set_auto_extend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_set_wait_timeout_ms(
    o: *mut redlock_lock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "lock options", err, |o| {
            o.options.wait_timeout = Some(millis(ms, "wait_timeout_ms")?);
            Ok(())
        })
    }
}

/// While waiting, wake on the release notifications the nodes publish (default true); false
/// polls at the client's retry delay.
///
/// # Safety
/// As for `redlock_lock_options_set_auto_extend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_options_set_notifications(
    o: *mut redlock_lock_options,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, "lock options", err, |o| {
            o.options.notifications = on;
            Ok(())
        })
    }
}
