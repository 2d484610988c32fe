//! `redlock_observer`: an election's leader changes, one blocking call per change.

use std::ffi::c_char;

use redquorum::{DEFAULT_OBSERVE_POLL, Observer};

use crate::boundary::{
    arg, arg_ms, arg_mut, arg_str, cancelled, fallible, free_box, out, redlock_error,
    redlock_status,
};
use crate::cancel::redlock_cancel;
use crate::client::redlock_client;
use crate::leader::redlock_leader;

/// Follows one election's leader; from `redlock_client_observe`. One thread at a time may call
/// `redlock_observer_next`; it must not be freed while a call on it runs.
pub struct redlock_observer {
    observer: Observer,
    name: String,
}

/// Follows the election `name`: writes to `*out` a new observer (free it with
/// `redlock_observer_free`) whose `redlock_observer_next` returns each change of leader. Nothing
/// is read yet.
///
/// Between announcements (each takeover and resignation is published on the nodes) the
/// observer reads the nodes every `poll_ms` (0: the default, 1000 ms; at most 10 years), and
/// when the leader's TTL runs out, since an expiry is announced by no one. `cancel` (NULL: none)
/// ends it: once it fired, `redlock_observer_next` returns `REDLOCK_CANCELLED` promptly, also
/// from a wait. The observer keeps what it needs of the handle, which may be freed once this
/// call returned (fire it before, if it is to end a wait). Without a cancel handle,
/// `redlock_observer_next` may block for as long as the leader does not change.
///
/// `REDLOCK_INVALID_ARGUMENT` for a NULL client, name or out, an empty, non-UTF-8 or too long
/// (over 1024 bytes) name, and a poll over 10 years.
///
/// # Safety
/// `client` and `cancel` are NULL or live; `name` is NULL or a NUL-terminated string; `out` and
/// `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_observe(
    client: *const redlock_client,
    name: *const c_char,
    cancel: *const redlock_cancel,
    poll_ms: u64,
    out: *mut *mut redlock_observer,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let name = unsafe { arg_str(name, "name") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let poll = match poll_ms {
            0 => DEFAULT_OBSERVE_POLL,
            ms => arg_ms(ms, "poll_ms")?,
        };
        // SAFETY: NULL or a live handle per the contract.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.cancel);
        let observer = client.client.observe(name, cancel)?.poll(poll);
        out.write(redlock_observer {
            observer,
            name: name.to_owned(),
        });
        Ok(())
    })
}

/// Blocks until the election's leader differs from what this observer last returned, then
/// writes it to `*out`: a new leader (free it with `redlock_leader_free`), or NULL when nobody
/// leads. The first call returns the state at once.
///
/// A change is a new term or a change between someone and nobody; a leader that lost its
/// leadership and won it again comes back with a new term. Changes that come and go between two
/// calls (or two reads) may be missed: the observer reports states, not every transition. While
/// too few nodes answer to tell, it keeps waiting and reading again.
///
/// `REDLOCK_CANCELLED` once the observer's cancel handle fired (every later call too), with
/// `*out` untouched. `REDLOCK_INVALID_ARGUMENT` for a NULL observer or out.
///
/// # Safety
/// `observer` is NULL or a live observer no other thread uses meanwhile; `out` and `err` are
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_observer_next(
    observer: *mut redlock_observer,
    out: *mut *mut redlock_leader,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let o = unsafe { arg_mut(observer, "observer") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        match o.observer.next() {
            Some(leader) => {
                out.write_or_null(leader.as_ref().map(redlock_leader::from));
                Ok(())
            }
            None => Err(cancelled(format!(
                "observing election {:?} was cancelled",
                o.name
            ))),
        }
    })
}

/// Frees an observer. NULL is a no-op.
///
/// # Safety
/// `observer` is NULL or a pointer written by `redlock_client_observe`, not used again
/// afterwards and not by a call still running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_observer_free(observer: *mut redlock_observer) {
    // SAFETY: per the contract.
    unsafe { free_box(observer) }
}
