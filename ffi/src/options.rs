//! `redlock_options`: a client's settings as an opaque handle built with setters, so that a
//! later version can add a setting (a function) without changing the size of anything a caller
//! allocates. The clock guard's and the server probe's settings are here too.

use std::ffi::c_char;

use redquorum::{Builder, Config, DEFAULT_CLOCK_JUMP};

use crate::boundary::{
    Failure, Nothing, arg_ms, arg_mut, arg_str, fallible, free_box, infallible, invalid, out,
    redlock_error, redlock_status, to_ms,
};

/// Client settings for `redlock_client_new`: create with `redlock_options_new`, change with the
/// `redlock_options_set_*` functions, free with `redlock_options_free`. Not thread-safe while
/// being changed; a client keeps no reference to it, so it may be freed (or reused for another
/// client) right after `redlock_client_new`.
pub struct redlock_options {
    /// A builder without nodes; every setter leaves it with settings that pass its check.
    pub(crate) builder: Builder,
}

impl redlock_options {
    /// The builder of `o`, or the defaults' for NULL.
    ///
    /// # Safety
    /// `o` is NULL or live options.
    pub(crate) unsafe fn builder_of(o: *const redlock_options) -> Builder {
        // SAFETY: per the function's contract.
        unsafe { o.as_ref() }.map_or_else(Builder::default, |o| o.builder.clone())
    }
}

/// Changes the settings of `o` with `f`, keeping the change only if the settings then pass the
/// builder's check.
///
/// # Safety
/// `o` is NULL or live options not used by another thread meanwhile; `err` is NULL or
/// writable.
unsafe fn set(
    o: *mut redlock_options,
    err: *mut *mut redlock_error,
    f: impl FnOnce(&mut Config) -> Result<(), Failure>,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the function's contract.
        let o = unsafe { arg_mut(o, "options") }?;
        let mut settings = *o.builder.settings();
        f(&mut settings)?;
        let next = o.builder.clone().with_settings(settings);
        next.check()?;
        o.builder = next;
        Ok(())
    })
}

/// A setting of `o`, or the default's for NULL.
///
/// # Safety
/// `o` is NULL or live options.
unsafe fn get<T: Nothing>(o: *const redlock_options, f: impl FnOnce(&Config) -> T) -> T {
    // SAFETY: per the function's contract.
    infallible(|| match unsafe { o.as_ref() } {
        Some(o) => f(o.builder.settings()),
        None => f(Builder::default().settings()),
    })
}

/// Writes new client options with the default settings to `*out`: retry_count 50,
/// retry_delay_ms 200, retry_jitter_ms 100, drift_factor 0.01, node_timeout_ms 50,
/// max_extensions 0 (no cap), restart_grace_ms 0 (off), the clock guard on with
/// clock_jump_threshold_ms 50 and clock_quarantine_ms 60000, strict_servers false,
/// min_replicas 0 (off), the system's trusted roots and no client certificate for TLS. Free them with `redlock_options_free`.
///
/// # Safety
/// `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_new(
    out: *mut *mut redlock_options,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        out.write(redlock_options {
            builder: Builder::default(),
        });
        Ok(())
    })
}

/// Frees client options. NULL is a no-op.
///
/// # Safety
/// `o` is NULL or a pointer from `redlock_options_new`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_free(o: *mut redlock_options) {
    // SAFETY: per the contract.
    unsafe { free_box(o) }
}

/// Retries after the first attempt in `redlock_client_lock` (default 50, about 10 s with the
/// default delay; 0 = one attempt).
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
        set(o, err, |c| {
            c.retry_count = count;
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
        set(o, err, |c| {
            c.retry_delay = arg_ms(ms, "retry_delay_ms")?;
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
        set(o, err, |c| {
            c.retry_jitter = arg_ms(ms, "retry_jitter_ms")?;
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
        set(o, err, |c| {
            c.drift_factor = factor;
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
        set(o, err, |c| {
            if ms == 0 {
                return Err(invalid("node_timeout_ms must be greater than zero"));
            }
            c.node_timeout = arg_ms(ms, "node_timeout_ms")?;
            Ok(())
        })
    }
}

/// Replicas that must acknowledge (`WAIT`) an acquisition's or an extension's write before a
/// node's vote counts; 0 = off (default). The commands that need it go over a second connection
/// per node, so releases and inspections never wait behind a lagging replica; a node with too
/// few replicas fails its vote saying so (on a Redis Cluster node, every master needs them, and
/// each vote waits for its own master's `WAIT`). See `min_replicas` in docs/guarantees.md.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_min_replicas(
    o: *mut redlock_options,
    replicas: u32,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, err, |c| {
            c.min_replicas = (replicas > 0).then_some(replicas);
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
        set(o, err, |c| {
            c.max_extensions = (max > 0).then_some(max);
            Ok(())
        })
    }
}

/// A node whose Redis process is younger than this many ms does not count toward acquire
/// quorums; 0 = off (default), at most 10 years. Set it to at least your largest TTL when
/// nodes run without persistence: a restarted node has forgotten its locks. Needs the `INFO`
/// command. The age is taken from `uptime_in_seconds`, one second less than it says (it counts
/// whole seconds of the node's clock).
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
        set(o, err, |c| {
            let grace = arg_ms(ms, "restart_grace_ms")?;
            c.restart_grace = (ms > 0).then_some(grace);
            Ok(())
        })
    }
}

/// Turns the clock guard on (the default) or off. With it on, `TIME` rides in the pipeline of
/// every acquire and extension, and a node whose wall clock jumps forward is kept out of
/// acquire quorums for `clock_quarantine_ms`; a suspension of this host (or a pause of its VM,
/// seen as a quorum of nodes jumping at once) marks the client's held locks lost. Turning it off
/// forgets the threshold: turned on again, it is the default, 50 ms (as with the Rust builder);
/// `redlock_options_set_clock_jump_threshold_ms` turns it on with another.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_guard(
    o: *mut redlock_options,
    on: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, err, |c| {
            c.clock_jump = on.then(|| c.clock_jump.unwrap_or(DEFAULT_CLOCK_JUMP));
            Ok(())
        })
    }
}

/// The clock guard's threshold in ms (default 50; this also turns the guard on): the largest
/// step of a node's wall clock tolerated between two samples beyond the rate difference
/// `drift_factor` allows, and how far a node's clock may be from ours for fencing tokens. 0 is
/// allowed (only the round trips and the drift are tolerated); more than 10 years is
/// `REDLOCK_INVALID_ARGUMENT`.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_jump_threshold_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, err, |c| {
            c.clock_jump = Some(arg_ms(ms, "clock_jump_threshold_ms")?);
            Ok(())
        })
    }
}

/// How long, in ms, a node whose clock jumped forward is kept out of acquire quorums (default
/// 60000). Make it at least your largest TTL. 0 and more than 10 years are
/// `REDLOCK_INVALID_ARGUMENT` (to do without the guard, use `redlock_options_set_clock_guard`).
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_clock_quarantine_ms(
    o: *mut redlock_options,
    ms: u64,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, err, |c| {
            if ms == 0 {
                return Err(invalid(
                    "clock_quarantine_ms must be greater than zero (make it at least your \
                     largest TTL); to turn the clock guard off use \
                     redlock_options_set_clock_guard(o, false, err)",
                ));
            }
            c.clock_quarantine = arg_ms(ms, "clock_quarantine_ms")?;
            Ok(())
        })
    }
}

/// Refuses the nodes the server probe warns about (default false: they are logged and shown
/// in the node status's warnings): a master with connected replicas, a `maxmemory-policy` that
/// can evict lock keys, a server whose `INFO` or `TIME` is denied. Replicas, Redis Cluster
/// nodes and too-old servers are always refused.
///
/// # Safety
/// As for `redlock_options_set_retry_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_set_strict_servers(
    o: *mut redlock_options,
    strict: bool,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe {
        set(o, err, |c| {
            c.strict_servers = strict;
            Ok(())
        })
    }
}

/// A TLS file path: not NULL, not empty, UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn path<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: per the function's contract.
    let path = unsafe { arg_str(p, what) }?;
    if path.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    Ok(path)
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
    fallible(err, || {
        // SAFETY: per the contract.
        let o = unsafe { arg_mut(o, "options") }?;
        // SAFETY: per the contract.
        let path = unsafe { self::path(path, "tls_ca_file") }?;
        o.builder = o.builder.clone().tls_ca_file(path);
        Ok(())
    })
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
    fallible(err, || {
        // SAFETY: per the contract.
        let o = unsafe { arg_mut(o, "options") }?;
        // SAFETY: per the contract.
        let cert = unsafe { path(cert_path, "tls client certificate path") }?;
        // SAFETY: per the contract.
        let key = unsafe { path(key_path, "tls client key path") }?;
        o.builder = o.builder.clone().tls_client_cert_file(cert, key);
        Ok(())
    })
}

/// The retry count of `o`; the default (50) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_count(o: *const redlock_options) -> u32 {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.retry_count) }
}

/// The retry delay of `o`, ms; the default (200) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_delay_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| to_ms(c.retry_delay)) }
}

/// The retry jitter of `o`, ms; the default (100) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_retry_jitter_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| to_ms(c.retry_jitter)) }
}

/// The drift factor of `o`; the default (0.01) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_drift_factor(o: *const redlock_options) -> f64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.drift_factor) }
}

/// The node timeout of `o`, ms; the default (50) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_node_timeout_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| to_ms(c.node_timeout)) }
}

/// The extension cap of `o`; 0 (no cap, the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_max_extensions(o: *const redlock_options) -> u32 {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.max_extensions.unwrap_or(0)) }
}

/// The restart grace of `o`, ms; 0 (off, the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_restart_grace_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.restart_grace.map_or(0, to_ms)) }
}

/// Whether the clock guard is on in `o`; true (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_guard(o: *const redlock_options) -> bool {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.clock_jump.is_some()) }
}

/// The clock guard's threshold in `o`, ms; 50 (the default) while the guard is off, and for
/// NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_jump_threshold_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| to_ms(c.clock_jump.unwrap_or(DEFAULT_CLOCK_JUMP))) }
}

/// The clock quarantine in `o`, ms; 60000 (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_clock_quarantine_ms(o: *const redlock_options) -> u64 {
    // SAFETY: same contract.
    unsafe { get(o, |c| to_ms(c.clock_quarantine)) }
}

/// The replicas `o` waits for (`redlock_options_set_min_replicas`); 0 (off, the default) for
/// NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_min_replicas(o: *const redlock_options) -> u32 {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.min_replicas.unwrap_or(0)) }
}

/// Whether `o` refuses the servers the probe warns about; false (the default) for NULL.
///
/// # Safety
/// `o` is NULL or live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_options_strict_servers(o: *const redlock_options) -> bool {
    // SAFETY: same contract.
    unsafe { get(o, |c| c.strict_servers) }
}
