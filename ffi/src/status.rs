//! What a call came to: `redlock_status`, and `redlock_error` for the message.

use std::ffi::{CStr, CString, c_char, c_int};

use redlock::Error;

use crate::boundary::{c_string, free_box, read};

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
    status: redlock_status,
    message: CString,
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
    // SAFETY: per the contract.
    unsafe { read(err, |e| e.message.as_ptr()) }
}

/// Frees an error. NULL is a no-op.
///
/// # Safety
/// `err` is NULL or a pointer written by a redlock call, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_error_free(err: *mut redlock_error) {
    // SAFETY: per the contract.
    unsafe { free_box(err) }
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

/// The library version, e.g. "1.0.0" (static storage); equals `REDLOCK_VERSION` of a matching
/// header.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::fallible;

    #[test]
    fn panics_become_a_status_and_a_message() {
        let mut err: *mut redlock_error = std::ptr::null_mut();
        let status = fallible(&mut err, || panic!("boom"));
        assert_eq!(status, REDLOCK_PANIC);
        // SAFETY: written by `fallible` just above.
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
