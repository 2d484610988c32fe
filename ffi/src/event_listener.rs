//! `redlock_event_listener`: a C callback registered for a client's events, and its removal.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use redquorum::{Event, EventListener};

use crate::boundary::{
    Failure, arg, fallible, free_box, invalid, out, redlock_error, redlock_status,
};
use crate::client::redlock_client;
use crate::event::redlock_event;

/// The callback type of `redlock_client_on_event`: `user` as given, and the event, valid only
/// during the call.
pub type redlock_event_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, event: *const redlock_event)>;

/// A callback registered with `redlock_client_on_event`; freeing it removes the callback.
pub struct redlock_event_listener {
    gate: Arc<Gate>,
    /// Removes the callback from the client's listeners when dropped (taken in `drop`).
    listener: Option<EventListener>,
}

/// The C callback and whether it may still run. The core may call a listener once more after
/// removing it (the dispatcher calls the listeners it read before the removal), so the free
/// closes this gate first, and waits for a call in progress on another thread: once
/// `redlock_event_listener_free` returned, `user` is never touched again.
struct Gate {
    callback: unsafe extern "C" fn(*mut c_void, *const redlock_event),
    user: *mut c_void,
    state: Mutex<GateState>,
    idle: Condvar,
}

struct GateState {
    open: bool,
    /// The thread running the callback now.
    running_on: Option<ThreadId>,
}

// SAFETY: `redlock_client_on_event` documents that the callback runs with `user` on the
// client's dispatcher thread; the caller agrees to that by registering them.
unsafe impl Send for Gate {}
// SAFETY: `user` is only handed to the callback, one call at a time (the dispatcher is one
// thread); the state is behind a mutex.
unsafe impl Sync for Gate {}

impl Gate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn call(&self, event: &Event) {
        {
            let mut state = self.state();
            if !state.open {
                return;
            }
            state.running_on = Some(thread::current().id());
        }
        let event = redlock_event::from(event);
        // SAFETY: a valid function pointer and its user pointer per `redlock_client_on_event`;
        // the gate is open, so the listener has not been freed.
        unsafe { (self.callback)(self.user, &event) };
        self.state().running_on = None;
        self.idle.notify_all();
    }

    /// Closes the gate, then waits for a call running on another thread to return (a call on
    /// this thread is the caller's own: it frees its listener from inside the callback).
    fn close(&self) {
        let mut state = self.state();
        state.open = false;
        let me = thread::current().id();
        while state.running_on.is_some_and(|t| t != me) {
            state = self.idle.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for redlock_event_listener {
    fn drop(&mut self) {
        let inside = self.gate.state().running_on == Some(thread::current().id());
        if inside {
            // Freed from its own callback: the core cannot wait for the dispatcher it runs on,
            // so the gate makes sure it is not called again.
            self.gate.close();
            drop(self.listener.take());
        } else {
            // The core delivers the events queued before the removal (to this callback too),
            // and once the removal returns never calls it again; the gate then only guards.
            drop(self.listener.take());
            self.gate.close();
        }
    }
}

/// Registers `callback(user, event)` to run with each of the client's events (acquired,
/// refused, released, lost, a node disconnected, ...; see `redlock_event_kind`) until the
/// listener written to `*out` is freed with `redlock_event_listener_free`.
///
/// The callback runs on a dispatcher thread of the client's own, in the order the events
/// happened, never on the thread that made them (a caller's, the extender's); the events reach
/// it through a bounded queue, so a slow callback costs dropped events
/// (`redlock_stats_events_dropped`), never a stalled lock. One thread runs all of a client's
/// callbacks, one at a time. The callback may call any redlock function (take a lock, read the
/// stats, free its own listener or another one) but must not wait for an event of its own client
/// (the dispatcher is busy running it) and must not unwind (no C++ exceptions, no longjmp) out of
/// it. Node events come up to 250 ms late (the dispatcher reads the nodes' status that often
/// while someone listens). `user` must stay valid until `redlock_event_listener_free` returned.
///
/// `REDLOCK_INVALID_ARGUMENT` for a NULL client, callback or out; `REDLOCK_IO` when the
/// dispatcher thread cannot be started.
///
/// # Safety
/// `client` is NULL or a live client; `callback` is NULL or a function safe to call from another
/// thread with `user`; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_on_event(
    client: *const redlock_client,
    callback: redlock_event_callback,
    user: *mut c_void,
    out: *mut *mut redlock_event_listener,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        let callback = callback.ok_or_else(|| -> Failure { invalid("callback is NULL") })?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let gate = Arc::new(Gate {
            callback,
            user,
            state: Mutex::new(GateState {
                open: true,
                running_on: None,
            }),
            idle: Condvar::new(),
        });
        let listener = {
            let gate = Arc::clone(&gate);
            client.client.on_event(move |event| gate.call(event))?
        };
        out.write(redlock_event_listener {
            gate,
            listener: Some(listener),
        });
        Ok(())
    })
}

/// Removes the callback and frees the listener. Once this returned, the callback is not running
/// and will not run again, so `user` may be freed; it waits for a call of the callback in
/// progress on the dispatcher thread (do not call it holding something the callback waits
/// for). From inside the callback itself it does not wait: the current call goes on to its
/// end, and no later one comes. It may be called before or after `redlock_client_free`. NULL is
/// a no-op.
///
/// # Safety
/// `listener` is NULL or a pointer written by `redlock_client_on_event`, not used again
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_event_listener_free(listener: *mut redlock_event_listener) {
    // SAFETY: per the contract.
    unsafe { free_box(listener) }
}
