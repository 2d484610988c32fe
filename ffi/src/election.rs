//! `redlock_election`: one candidate in a leader election, its callbacks and its campaigns.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use redquorum::{Election, Leader, MAX_TTL, Redlock};

use crate::boundary::{
    Failure, arg, arg_mut, arg_str, fallible, free_box, invalid, out, redlock_error,
    redlock_status, to_ms,
};
use crate::cancel::redlock_cancel;
use crate::client::redlock_client;
use crate::leader::redlock_leader;
use crate::leadership::redlock_leadership;

/// The callback type of `redlock_election_on_started_leading` and
/// `redlock_election_on_stopped_leading`: `user` as given, and the term of the leadership that
/// began or ended.
pub type redlock_term_callback = Option<unsafe extern "C" fn(user: *mut c_void, term: u64)>;

/// The callback type of `redlock_election_on_new_leader`: `user` as given, and the new leader
/// (NULL: nobody leads), owned by the library and valid only during the call.
pub type redlock_new_leader_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, leader: *const redlock_leader)>;

/// The C side of a term callback, which may run on several threads at once.
#[derive(Clone, Copy)]
struct TermCallback {
    cb: unsafe extern "C" fn(*mut c_void, u64),
    user: *mut c_void,
}

// SAFETY: the setters document that the callback and `user` are called from other threads, at
// once from several when campaigns run side by side; the caller agrees by registering them.
unsafe impl Send for TermCallback {}
// SAFETY: as above.
unsafe impl Sync for TermCallback {}

impl TermCallback {
    fn new(callback: redlock_term_callback, user: *mut c_void) -> Result<Self, Failure> {
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        Ok(TermCallback { cb, user })
    }

    fn call(&self, term: u64) {
        // SAFETY: a valid function pointer and its user pointer per the setter's contract.
        unsafe { (self.cb)(self.user, term) }
    }
}

/// The C side of a new-leader callback, called on the election's watcher thread.
struct NewLeaderCallback {
    cb: unsafe extern "C" fn(*mut c_void, *const redlock_leader),
    user: *mut c_void,
}

// SAFETY: `redlock_election_on_new_leader` documents that the callback and `user` are called
// from the election's own thread; the caller agrees by registering them.
unsafe impl Send for NewLeaderCallback {}
// SAFETY: as above; it is only ever called from that one thread.
unsafe impl Sync for NewLeaderCallback {}

impl NewLeaderCallback {
    fn call(&self, leader: Option<&Leader>) {
        let leader = leader.map(redlock_leader::from);
        let pointer = leader
            .as_ref()
            .map_or(std::ptr::null(), |l| l as *const redlock_leader);
        // SAFETY: a valid function pointer and its user pointer per
        // `redlock_election_on_new_leader`; `pointer` is NULL or lives until the call returns.
        unsafe { (self.cb)(self.user, pointer) }
    }
}

/// One candidate in an election, with its leaderships' TTL and its callbacks. Any number of
/// threads may campaign with it at once; a setter must not run while anything else uses it.
pub struct redlock_election {
    /// `None` only while a setter hands it to the core's builder-style setters and back.
    election: Option<Election>,
    /// To make the candidate again when the core's `on_new_leader` fails, having consumed it.
    client: Redlock,
    started: Option<TermCallback>,
    stopped: Option<TermCallback>,
    /// The thread that runs the new-leader callback, once it ran: that thread cannot stop
    /// itself, so the election is dropped elsewhere when the callback frees it.
    watcher: Arc<OnceLock<ThreadId>>,
}

impl redlock_election {
    fn election(&self) -> Result<&Election, Failure> {
        self.election.as_ref().ok_or_else(unusable)
    }

    fn on_watcher_thread(&self) -> bool {
        self.watcher.get() == Some(&std::thread::current().id())
    }

    /// The candidate with the term callbacks registered so far, and no new-leader callback.
    fn candidate(&self, name: &str, identity: &str, ttl: Duration) -> Result<Election, Failure> {
        let mut election = self.client.election(name, identity, ttl)?;
        if let Some(cb) = self.started {
            election = election.on_started_leading(move |l| cb.call(l.term()));
        }
        if let Some(cb) = self.stopped {
            election = election.on_stopped_leading(move |term| cb.call(term));
        }
        Ok(election)
    }
}

/// What a handle whose setter was interrupted by a panic says from then on.
fn unusable() -> Failure {
    invalid("the election is unusable after an earlier call panicked; free it and make another")
}

impl Drop for redlock_election {
    fn drop(&mut self) {
        if self.on_watcher_thread()
            && let Some(election) = self.election.take()
        {
            // Freed by its own new-leader callback: dropping the election stops its watcher
            // thread and waits for it, which that thread cannot do for itself. Another thread
            // does, once the callback returned.
            let _ = std::thread::Builder::new()
                .name("redlock-election-free".into())
                .spawn(move || drop(election));
        }
    }
}

/// Makes a candidate named `identity` in the election `name` of `client`, whose leaderships
/// last `ttl_ms` and are extended while held (every third of the TTL, on the client's extender
/// thread, with no cap). Nothing is sent yet. On success writes a new election to `*out`; free
/// it with `redlock_election_free`. It keeps what it needs of the client, which may be freed
/// first.
///
/// `REDLOCK_INVALID_ARGUMENT` for a NULL client, name, identity or out; a name or identity that
/// is empty or not UTF-8; a name over 1024 bytes or an identity over 256; a TTL of 0, over 10
/// years, or too short to be extended in time (a third of it must exceed the node timeout).
///
/// # Safety
/// `client` is NULL or a live client; `name` and `identity` are NULL or NUL-terminated strings
/// (copied); `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_election(
    client: *const redlock_client,
    name: *const c_char,
    identity: *const c_char,
    ttl_ms: u64,
    out: *mut *mut redlock_election,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let name = unsafe { arg_str(name, "name") }?;
        // SAFETY: per the contract.
        let identity = unsafe { arg_str(identity, "identity") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let election = client
            .client
            .election(name, identity, Duration::from_millis(ttl_ms))?;
        out.write(redlock_election {
            election: Some(election),
            client: client.client.clone(),
            started: None,
            stopped: None,
            watcher: Arc::default(),
        });
        Ok(())
    })
}

/// Frees an election, first stopping its new-leader callback: this waits for a call of it in
/// progress to return. Leaderships won through it stay valid (and keep its stopped-leading
/// callback). NULL is a no-op. It may be called from the election's own new-leader callback:
/// then the callback's thread ends once the callback returned.
///
/// # Safety
/// `election` is NULL or a pointer written by `redlock_client_election`, not used again
/// afterwards and not by a call still running (a campaign, or a started-leading callback).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_free(election: *mut redlock_election) {
    // SAFETY: per the contract.
    unsafe { free_box(election) }
}

/// Registers `callback(user, term)` to run each time this candidate becomes leader, on the
/// campaigning thread, before `redlock_election_campaign` (or `_campaign_for`) returns the
/// leadership; with campaigns on several threads, on several at once. Replaces the previous
/// started-leading callback.
///
/// It may call any redlock function (`redlock_client_leader`, say) but `redlock_election_free`
/// on this election and the election's setters (the campaign still uses it), and must not
/// unwind out of it. `user` must stay valid until the election is freed or the callback
/// replaced. `REDLOCK_INVALID_ARGUMENT` for a NULL election or callback.
///
/// # Safety
/// `election` is NULL or a live election that no other call uses meanwhile; `callback` is NULL
/// or a function safe to call from any thread with `user`; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_on_started_leading(
    election: *mut redlock_election,
    callback: redlock_term_callback,
    user: *mut c_void,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let e = unsafe { arg_mut(election, "election") }?;
        let cb = TermCallback::new(callback, user)?;
        let election = e.election.take().ok_or_else(unusable)?;
        e.election = Some(election.on_started_leading(move |l| cb.call(l.term())));
        e.started = Some(cb);
        Ok(())
    })
}

/// Registers `callback(user, term)` to run once when each leadership won from now on ends: on
/// the thread that resigns or frees it, or, when it is found lost, on the client's extender
/// thread (keep it short: that thread extends all of the client's locks and leaderships).
/// Replaces the previous stopped-leading callback for leaderships won from now on; those
/// already won keep theirs.
///
/// It may call any redlock function but `redlock_leadership_free` on the leadership that ended
/// (the call that ended it may still be using it), and must not unwind out of it. `user` must
/// stay valid until every leadership won with the callback registered is freed.
/// `REDLOCK_INVALID_ARGUMENT` for a NULL election or callback.
///
/// # Safety
/// `election` is NULL or a live election that no other call uses meanwhile; `callback` is NULL
/// or a function safe to call from any thread with `user`; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_on_stopped_leading(
    election: *mut redlock_election,
    callback: redlock_term_callback,
    user: *mut c_void,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let e = unsafe { arg_mut(election, "election") }?;
        let cb = TermCallback::new(callback, user)?;
        let election = e.election.take().ok_or_else(unusable)?;
        e.election = Some(election.on_stopped_leading(move |term| cb.call(term)));
        e.stopped = Some(cb);
        Ok(())
    })
}

/// Registers `callback(user, leader)` to run each time the election's leader changes, from now
/// until the election is freed, on a thread of the election's own: first with the state that
/// thread first reads, after this returns (a leader that campaigned meanwhile can be that first
/// state: wait for the first call before campaigning to know the state before), then as
/// `redlock_observer_next` would return it (`leader` NULL: nobody leads; otherwise valid only
/// during the call, and not to be freed). Replaces the previous new-leader callback, after
/// waiting for a call of it in progress to return.
///
/// It may call any redlock function, including `redlock_election_free` on this very election
/// (the election's thread then ends once the callback returned), but not the election's
/// setters (`REDLOCK_INVALID_ARGUMENT` for this one), and must not unwind out of it. Keep it
/// short: the next change is reported once it returned. `user` must stay valid until the
/// election is freed or the callback replaced.
///
/// `REDLOCK_INVALID_ARGUMENT` for a NULL election or callback. `REDLOCK_IO` when the system
/// refuses the thread: then the election has no new-leader callback any more.
///
/// # Safety
/// `election` is NULL or a live election that no other call uses meanwhile; `callback` is NULL
/// or a function safe to call from another thread with `user`; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_on_new_leader(
    election: *mut redlock_election,
    callback: redlock_new_leader_callback,
    user: *mut c_void,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let e = unsafe { arg_mut(election, "election") }?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        if e.on_watcher_thread() {
            return Err(invalid(
                "the new-leader callback cannot be replaced from within itself",
            ));
        }
        let cb = NewLeaderCallback { cb, user };
        let watcher: Arc<OnceLock<ThreadId>> = Arc::default();
        let seen = Arc::clone(&watcher);
        let election = e.election.take().ok_or_else(unusable)?;
        let (name, identity, ttl) = (
            election.name().to_owned(),
            election.identity().to_owned(),
            election.ttl(),
        );
        match election.on_new_leader(move |leader| {
            seen.get_or_init(|| std::thread::current().id());
            cb.call(leader);
        }) {
            Ok(election) => {
                e.election = Some(election);
                e.watcher = watcher;
                Ok(())
            }
            Err(error) => {
                // The core consumed the candidate; make it again, without a watcher.
                e.election = Some(e.candidate(&name, &identity, ttl)?);
                e.watcher = Arc::default();
                Err(error.into())
            }
        }
    })
}

/// # Safety
/// As for `redlock_election_campaign_for`.
unsafe fn campaign(
    election: *const redlock_election,
    wait: Option<Duration>,
    cancel: *const redlock_cancel,
    out: *mut *mut redlock_leadership,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the caller's contract.
        let e = unsafe { arg(election, "election") }?.election()?;
        // SAFETY: per the caller's contract.
        let out = unsafe { self::out(out) }?;
        // SAFETY: NULL or a live handle per the caller's contract.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.cancel);
        let leadership = match wait {
            None => e.campaign(cancel)?,
            Some(wait) => e.campaign_for(wait, cancel)?,
        };
        out.write(redlock_leadership::new(leadership));
        Ok(())
    })
}

/// Blocks until this candidate leads, woken by the releases and takeovers the nodes announce,
/// and writes the leadership to `*out` (free it with `redlock_leadership_free`). The leadership
/// is extended while held, and the started-leading callback has run before this returns.
///
/// While too few nodes answer it keeps trying, with a backoff. `cancel` (NULL: none) ends the
/// wait: `REDLOCK_CANCELLED`, with nothing of the campaign left on any node (a node that was
/// down or hung keeps its key until the TTL); it must stay alive until this call returns.
/// `REDLOCK_INVALID_ARGUMENT` for a NULL election or out. Thread-safe: several threads may
/// campaign with one election at once (each wins its own leadership, one after the other).
///
/// # Safety
/// `election` and `cancel` are NULL or live; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_campaign(
    election: *const redlock_election,
    cancel: *const redlock_cancel,
    out: *mut *mut redlock_leadership,
    err: *mut *mut redlock_error,
) -> redlock_status {
    // SAFETY: same contract.
    unsafe { campaign(election, None, cancel, out, err) }
}

/// `redlock_election_campaign`, giving up after `wait_ms` (0: a single attempt; over 10 years
/// counts as 10 years): `REDLOCK_NOT_ACQUIRED` while another candidate leads,
/// `REDLOCK_NO_QUORUM` when too few nodes answered.
///
/// # Safety
/// `election` and `cancel` are NULL or live; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_election_campaign_for(
    election: *const redlock_election,
    wait_ms: u64,
    cancel: *const redlock_cancel,
    out: *mut *mut redlock_leadership,
    err: *mut *mut redlock_error,
) -> redlock_status {
    let wait = Duration::from_millis(wait_ms.min(to_ms(MAX_TTL)));
    // SAFETY: same contract.
    unsafe { campaign(election, Some(wait), cancel, out, err) }
}
