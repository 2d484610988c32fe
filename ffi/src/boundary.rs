//! Every crossing between C and Rust, once: what a call comes to (`redlock_status`, and
//! `redlock_error` for the message), the panic boundary, the readers of arguments, the writers of
//! results, the freeing of handles. An export is its own logic plus these calls.
//!
//! The contract they implement (`docs/c-abi.md`): no panic unwinds into C (it becomes
//! `REDLOCK_PANIC`, or a getter's "nothing" value); a NULL, non-UTF-8 or otherwise bad argument
//! is `REDLOCK_INVALID_ARGUMENT` with a message naming it; a result is written to `*out` only on
//! success, and an error to `*err` (when `err` is not NULL) only on failure.

use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use redquorum::{Error, MAX_TTL};

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

/// An error: a status and a message naming the failing node(s) where known.
pub struct redlock_error {
    pub(crate) status: redlock_status,
    pub(crate) message: CString,
}

/// A failed call, before it is handed to C.
pub(crate) struct Failure {
    pub(crate) status: redlock_status,
    message: String,
}

impl Failure {
    pub(crate) fn panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Failure {
            status: REDLOCK_PANIC,
            message: format!("redlock panicked: {what}; please report this bug"),
        }
    }
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
            // A kind of error added to the library later reads as "too few nodes" until it
            // gets a status of its own.
            _ => REDLOCK_NO_QUORUM,
        };
        Failure {
            status,
            message: e.to_string(),
        }
    }
}

impl From<Failure> for redlock_error {
    fn from(f: Failure) -> Self {
        redlock_error {
            status: f.status,
            message: c_string(&f.message),
        }
    }
}

/// `REDLOCK_INVALID_ARGUMENT` with what is wrong.
pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        status: REDLOCK_INVALID_ARGUMENT,
        message: format!("invalid argument: {}", message.into()),
    }
}

/// `REDLOCK_CANCELLED` with what was cancelled.
pub(crate) fn cancelled(message: impl Into<String>) -> Failure {
    Failure {
        status: REDLOCK_CANCELLED,
        message: message.into(),
    }
}

/// Runs a fallible export: its failure, or a panic, becomes the status it returns and, when
/// `err` is not NULL, a new `redlock_error` in `*err`.
pub(crate) fn fallible(
    err: *mut *mut redlock_error,
    f: impl FnOnce() -> Result<(), Failure>,
) -> redlock_status {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return redlock_status::REDLOCK_OK,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::panic(&*payload),
    };
    let status = failure.status;
    if !err.is_null() {
        // SAFETY: the caller passes NULL (checked) or a writable `redlock_error **`.
        unsafe { *err = Box::into_raw(Box::new(redlock_error::from(failure))) };
    }
    status
}

/// Runs an export that cannot fail (a getter, a free): a panic returns `T`'s "nothing" value
/// instead of unwinding into C.
pub(crate) fn infallible<T: Nothing>(f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| T::nothing())
}

/// What an infallible export returns for NULL arguments and after a panic.
pub(crate) trait Nothing {
    fn nothing() -> Self;
}

impl Nothing for () {
    fn nothing() {}
}

impl Nothing for bool {
    fn nothing() -> bool {
        false
    }
}

impl Nothing for u32 {
    fn nothing() -> u32 {
        0
    }
}

impl Nothing for u64 {
    fn nothing() -> u64 {
        0
    }
}

impl Nothing for usize {
    fn nothing() -> usize {
        0
    }
}

impl Nothing for f64 {
    fn nothing() -> f64 {
        0.0
    }
}

impl Nothing for *const c_char {
    fn nothing() -> *const c_char {
        std::ptr::null()
    }
}

/// Reads a handle that may be NULL, for a getter: `f` of it, or `R`'s "nothing" value for NULL
/// and after a panic.
///
/// # Safety
/// `p` is NULL or points to a live `T`.
pub(crate) unsafe fn read<T, R: Nothing>(p: *const T, f: impl FnOnce(&T) -> R) -> R {
    // SAFETY: per the function's contract.
    infallible(|| unsafe { p.as_ref() }.map_or_else(R::nothing, f))
}

/// A handle argument, which must not be NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that stays so for `'a`.
pub(crate) unsafe fn arg<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// A handle argument the export changes, which must not be NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing else uses for `'a`.
pub(crate) unsafe fn arg_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_mut() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// A string argument: not NULL, valid UTF-8 (it may be empty; the library says where that is
/// wrong, in its own words).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn arg_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated per the function's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

/// A string argument that may be NULL (`None`), otherwise as [`arg_str`].
///
/// # Safety
/// As for [`arg_str`].
pub(crate) unsafe fn arg_opt_str<'a>(
    p: *const c_char,
    what: &str,
) -> Result<Option<&'a str>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: per the function's contract.
    unsafe { arg_str(p, what) }.map(Some)
}

/// An array of `n` strings, each as [`arg_str`]; `what` names the array in errors.
///
/// # Safety
/// `p` is NULL or points to `n` pointers, each NULL or a NUL-terminated string living for `'a`.
pub(crate) unsafe fn arg_strs<'a>(
    p: *const *const c_char,
    n: usize,
    what: &str,
) -> Result<Vec<&'a str>, Failure> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: `p` holds `n` pointers per the function's contract.
    let pointers = unsafe { std::slice::from_raw_parts(p, n) };
    pointers
        .iter()
        .enumerate()
        // SAFETY: each is NULL or a C string per the function's contract.
        .map(|(i, &s)| unsafe { arg_str(s, &format!("{what}[{i}]")) })
        .collect()
}

/// A duration in milliseconds, at most 10 years.
pub(crate) fn arg_ms(ms: u64, what: &str) -> Result<Duration, Failure> {
    let max = to_ms(MAX_TTL);
    if ms > max {
        return Err(invalid(format!(
            "{what} must be at most 10 years ({max} ms), got {ms} ms"
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// A duration in whole milliseconds for C, saturating.
pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Where an export writes the handle it creates: checked before the work is done, written
/// only on success.
pub(crate) struct Out<'a, T>(&'a mut *mut T);

/// An out-parameter for a new handle, which must not be NULL.
///
/// # Safety
/// `p` is NULL or writable for `'a`.
pub(crate) unsafe fn out<'a, T>(p: *mut *mut T) -> Result<Out<'a, T>, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_mut() }
        .map(Out)
        .ok_or_else(|| invalid("out is NULL"))
}

impl<T> Out<'_, T> {
    /// Boxes `value` and hands it to the caller, who frees it with the type's `_free`.
    pub(crate) fn write(self, value: T) {
        *self.0 = Box::into_raw(Box::new(value));
    }

    /// As [`write`](Out::write) for `Some`; NULL for `None` (a result that may be nothing).
    pub(crate) fn write_or_null(self, value: Option<T>) {
        match value {
            Some(value) => self.write(value),
            None => *self.0 = std::ptr::null_mut(),
        }
    }
}

/// An out-parameter for a scalar result, which must not be NULL.
///
/// # Safety
/// `p` is NULL or writable for `'a`.
pub(crate) unsafe fn out_value<'a, T>(p: *mut T) -> Result<&'a mut T, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_mut() }.ok_or_else(|| invalid("out is NULL"))
}

/// Writes an optional scalar result to `*out` (when `out` is not NULL) and says whether there
/// was one.
///
/// # Safety
/// `out` is NULL or writable.
pub(crate) unsafe fn write_opt<T>(value: Option<T>, out: *mut T) -> bool {
    let Some(value) = value else {
        return false;
    };
    // SAFETY: per the function's contract.
    if let Some(slot) = unsafe { out.as_mut() } {
        *slot = value;
    }
    true
}

/// Frees a handle made by [`Out::write`]; NULL is a no-op.
///
/// # Safety
/// `p` is NULL or a pointer from [`Out::write`] of this `T`, freed once and not used after.
pub(crate) unsafe fn free_box<T>(p: *mut T) {
    infallible(|| {
        if !p.is_null() {
            // SAFETY: from Box::into_raw in Out::write, freed once per the contract.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

/// A handle's string for C. Strings come from C or from our own messages and so hold no NUL;
/// one that does (a value read from a node, say) shows it as `\0` rather than being cut there.
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// An optional string of a handle, for C: NULL when absent.
pub(crate) fn c_ptr(s: Option<&CString>) -> *const c_char {
    s.map_or(std::ptr::null(), |s| s.as_ptr())
}
