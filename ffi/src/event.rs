//! `redlock_event`: one event of a client, as its listeners see it (`redlock_client_on_event`),
//! read with accessors and valid only during the callback.

use std::ffi::{CString, c_char};
use std::time::UNIX_EPOCH;

use redquorum::{Event, EventKind};

use crate::boundary::{Nothing, c_ptr, c_string, infallible, read, to_ms, write_opt};

/// What happened, from `redlock_event_kind_of`. The numbers are part of the ABI and never
/// reused; later versions append kinds, so a `switch` needs a `default:` (an event of a kind
/// this header does not name comes as `REDLOCK_EVENT_UNKNOWN`, and `redlock_event_name` still
/// names it).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_event_kind {
    /// A kind of event newer than this version of the ABI (see `redlock_event_name`); also for
    /// NULL.
    REDLOCK_EVENT_UNKNOWN = 0,
    /// A lock was acquired; the duration is the acquisition's, retries and waits included.
    REDLOCK_EVENT_ACQUIRED = 1,
    /// An acquisition gave up: the resource was held by another owner.
    REDLOCK_EVENT_REFUSED = 2,
    /// An acquisition gave up: too few nodes answered.
    REDLOCK_EVENT_NO_QUORUM = 3,
    /// An acquisition was cancelled.
    REDLOCK_EVENT_CANCELLED = 4,
    /// A lock was released; the duration is how long it was held.
    REDLOCK_EVENT_RELEASED = 5,
    /// A lock was extended.
    REDLOCK_EVENT_EXTENDED = 6,
    /// An extension failed without losing the lock (too few nodes answered; it is retried).
    REDLOCK_EVENT_EXTENSION_FAILED = 7,
    /// A held lock was found lost; the reason says why (`refused`, `expired`, `suspended`), the
    /// duration how long it was held.
    REDLOCK_EVENT_LOST = 8,
    /// A node's worker connected.
    REDLOCK_EVENT_NODE_CONNECTED = 9,
    /// A node's worker lost its connection; the reason is the error.
    REDLOCK_EVENT_NODE_DISCONNECTED = 10,
    /// A node was seen restarted (a new `run_id` at a reconnect); the reason is the new run id.
    REDLOCK_EVENT_NODE_RESTARTED = 11,
    /// The clock guard quarantined a node; the reason says why.
    REDLOCK_EVENT_NODE_QUARANTINED = 12,
    /// A warning of the server probe or the clock guard, or a URL's `#insecure`; the reason is
    /// its text.
    REDLOCK_EVENT_SERVER_WARNING = 13,
}

use redlock_event_kind::*;

impl Nothing for redlock_event_kind {
    fn nothing() -> Self {
        REDLOCK_EVENT_UNKNOWN
    }
}

impl From<EventKind> for redlock_event_kind {
    fn from(kind: EventKind) -> Self {
        // The one place that maps a kind of event to C: a new `EventKind` gets its number
        // (appended) here.
        match kind {
            EventKind::Acquired => REDLOCK_EVENT_ACQUIRED,
            EventKind::Refused => REDLOCK_EVENT_REFUSED,
            EventKind::NoQuorum => REDLOCK_EVENT_NO_QUORUM,
            EventKind::Cancelled => REDLOCK_EVENT_CANCELLED,
            EventKind::Released => REDLOCK_EVENT_RELEASED,
            EventKind::Extended => REDLOCK_EVENT_EXTENDED,
            EventKind::ExtensionFailed => REDLOCK_EVENT_EXTENSION_FAILED,
            EventKind::Lost => REDLOCK_EVENT_LOST,
            EventKind::NodeConnected => REDLOCK_EVENT_NODE_CONNECTED,
            EventKind::NodeDisconnected => REDLOCK_EVENT_NODE_DISCONNECTED,
            EventKind::NodeRestarted => REDLOCK_EVENT_NODE_RESTARTED,
            EventKind::NodeQuarantined => REDLOCK_EVENT_NODE_QUARANTINED,
            EventKind::ServerWarning => REDLOCK_EVENT_SERVER_WARNING,
            _ => REDLOCK_EVENT_UNKNOWN,
        }
    }
}

/// One event, lent to a `redlock_event_callback` for the duration of the call: read it with the
/// `redlock_event_*` accessors, copy what is to outlive the call, never free it.
pub struct redlock_event {
    kind: redlock_event_kind,
    name: CString,
    unix_ms: u64,
    resource: Option<CString>,
    lock_kind: Option<CString>,
    node: Option<CString>,
    reason: Option<CString>,
    duration_ms: Option<u64>,
}

impl From<&Event> for redlock_event {
    fn from(e: &Event) -> Self {
        redlock_event {
            kind: e.kind.into(),
            name: c_string(e.kind.name()),
            unix_ms: e.at.duration_since(UNIX_EPOCH).map_or(0, to_ms),
            resource: e.resource.as_deref().map(c_string),
            lock_kind: e.lock_kind.map(c_string),
            node: e.node.as_deref().map(c_string),
            reason: e.reason.as_deref().map(c_string),
            duration_ms: e.duration.map(to_ms),
        }
    }
}

/// What happened; `REDLOCK_EVENT_UNKNOWN` for a kind newer than this header, and for NULL.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_kind_of(event: *const redlock_event) -> redlock_event_kind {
    // SAFETY: per the contract.
    unsafe { read(event, |e| e.kind) }
}

/// The event's name, as in logs: `acquired`, `lost`, `node_disconnected`, ... (also for kinds
/// newer than this header). Owned by the event; NULL for NULL.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_name(event: *const redlock_event) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(event, |e| e.name.as_ptr()) }
}

/// When it happened, by the client's wall clock, in ms since the Unix epoch; 0 for NULL.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_unix_ms(event: *const redlock_event) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(event, |e| e.unix_ms) }
}

/// The resource of a lock event (a lock of several resources: their sorted names joined with
/// ','); NULL for node events, and for NULL. Owned by the event.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_resource(event: *const redlock_event) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(event, |e| c_ptr(e.resource.as_ref())) }
}

/// The kind of lock of a lock event: `plain`, `fenced`, `reentrant`, `many`, `read`, `write`,
/// `semaphore` or `leader` (later versions may add some); NULL for node events, and for NULL.
/// Owned by the event.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_lock_kind(event: *const redlock_event) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(event, |e| c_ptr(e.lock_kind.as_ref())) }
}

/// The node of a node event, `host:port`; NULL for lock events, and for NULL. Owned by the
/// event.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_node(event: *const redlock_event) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(event, |e| c_ptr(e.node.as_ref())) }
}

/// Why (a lost lock's reason, a node's error, a warning's text); NULL when the event has none,
/// and for NULL. Owned by the event.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_reason(event: *const redlock_event) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(event, |e| c_ptr(e.reason.as_ref())) }
}

/// The event's duration in ms (an acquisition's, or how long a released or lost lock was
/// held; see `redlock_event_kind`): true and `*duration_ms` (when not NULL) set when it has
/// one; false when it has none, and for NULL.
///
/// # Safety
/// `event` is NULL or the event a callback was given, during the call; `duration_ms` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_duration_ms(
    event: *const redlock_event,
    duration_ms: *mut u64,
) -> bool {
    infallible(|| {
        // SAFETY: per the contract.
        let value = unsafe { event.as_ref() }.and_then(|e| e.duration_ms);
        // SAFETY: per the contract.
        unsafe { write_opt(value, duration_ms) }
    })
}
