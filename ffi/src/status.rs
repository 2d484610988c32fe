//! What a call came to, for C: the status's name, the error's message, the version.

use std::ffi::{CStr, c_char, c_int};

use crate::boundary::{free_box, read, redlock_error, redlock_status};

/// The status an error carries; `REDLOCK_OK` for NULL.
///
/// # Safety
/// `err` is NULL or a live error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_error_status(err: *const redlock_error) -> redlock_status {
    // SAFETY: NULL or a live error per the contract.
    unsafe { err.as_ref() }.map_or(redlock_status::REDLOCK_OK, |e| e.status)
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
    use redlock_status::*;

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
