//! One acquisition request: kind × patience × auto-extension × cancellation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::kinds::fenced::Fenced;
use crate::kinds::many::Many;
use crate::kinds::plain::Plain;
use crate::kinds::reentrant::Reentrant;
use crate::kinds::rwlock::{Mode, ReadWrite};
use crate::kinds::semaphore::Semaphore;
use crate::kinds::{Caller, Kind, check_resource_name};

/// Default fraction of the TTL after which an auto-extended lock is extended.
pub const DEFAULT_EXTEND_FRACTION: f64 = 1.0 / 3.0;

/// Describes one acquisition; [`Redlock::acquire`](crate::Redlock::acquire) carries it out.
/// Its parts are independent and every combination is valid:
///
/// - **kind**: plain ([`new`](LockRequest::new)), [`fenced`](LockRequest::fenced),
///   [`reentrant`](LockRequest::reentrant) for an owner, several resources at once
///   ([`many`](LockRequest::many)), the [`read`](LockRequest::read) or
///   [`write`](LockRequest::write) side of a read-write lock, or one permit of a
///   [`semaphore`](LockRequest::semaphore);
/// - **patience**: the client's retries (default), [`retries`](LockRequest::retries) with
///   their own delay and jitter, a single attempt ([`once`](LockRequest::once)), or
///   [`wait`](LockRequest::wait) up to a deadline, woken by release notifications;
/// - **auto-extension**: off (default) or [`auto_extend`](LockRequest::auto_extend);
/// - **cancellation**: a [`Cancel`] handle ([`cancel`](LockRequest::cancel)).
///
/// ```no_run
/// # use std::time::Duration;
/// use redquorum::{AutoExtend, Cancel, LockRequest};
/// # let rl = redquorum::Redlock::builder().node("redis://127.0.0.1:7000").build()?;
/// let cancel = Cancel::new(); // cancel.cancel() from another thread or a signal handler
/// let request = LockRequest::new("orders:42", Duration::from_secs(10))
///     .fenced()
///     .wait(Duration::from_secs(30))
///     .auto_extend(AutoExtend::new())
///     .cancel(&cancel);
/// let lock = rl.acquire(&request)?;
/// println!("fencing token {:?}", lock.fence());
/// lock.release()?;
/// # Ok::<(), redquorum::Error>(())
/// ```
///
/// A request is a description: one can serve many acquisitions. Problems with its parts (an
/// empty owner, say) are reported by `acquire` as [`Error::InvalidArgument`], before anything
/// is sent.
#[derive(Clone)]
pub struct LockRequest {
    pub(crate) kind: std::result::Result<Arc<dyn Kind>, String>,
    pub(crate) ttl: Duration,
    pub(crate) patience: Patience,
    pub(crate) retry_delay: Option<Duration>,
    pub(crate) retry_jitter: Option<Duration>,
    pub(crate) notifications: bool,
    pub(crate) fair: bool,
    pub(crate) auto_extend: Option<AutoExtend>,
    pub(crate) cancel: Option<Cancel>,
    /// Who the acquisition is for, for the read-write self-wait check; `None`: the thread.
    pub(crate) caller: Option<Arc<str>>,
    /// Every attempt's token instead of a random one: tests only (see `token_for_tests`).
    pub(crate) test_token: Option<Arc<str>>,
}

/// How long an acquisition keeps trying.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Patience {
    /// The client's `retry_count`.
    Default,
    /// Retries after the first attempt.
    Retries(u32),
    /// Until this long after the call began.
    Wait(Duration),
}

/// Keeps a lock alive on the client's extender thread while it is held (see
/// [`LockRequest::auto_extend`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoExtend {
    pub(crate) fraction: f64,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_extensions: Option<u32>,
}

impl Default for AutoExtend {
    fn default() -> Self {
        AutoExtend {
            fraction: DEFAULT_EXTEND_FRACTION,
            max_hold: None,
            max_extensions: None,
        }
    }
}

impl AutoExtend {
    /// Extends every third of the TTL, for as long as the lock is held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Extends after `fraction` of the TTL, in (0, 1) (default 1/3).
    pub fn fraction(mut self, fraction: f64) -> Self {
        self.fraction = fraction;
        self
    }

    /// Stops extending `d` after the lock was acquired; it then runs out within one TTL and is
    /// reported lost if still held.
    pub fn max_hold(mut self, d: Duration) -> Self {
        self.max_hold = Some(d);
        self
    }

    /// Extends at most `n` times (automatic and manual extensions count alike), instead of the
    /// client's [`max_extensions`](crate::Builder::max_extensions).
    pub fn max_extensions(mut self, n: u32) -> Self {
        self.max_extensions = Some(n);
        self
    }
}

impl LockRequest {
    /// A plain lock on `resource` (1 to [`MAX_RESOURCE_NAME`](crate::MAX_RESOURCE_NAME) bytes)
    /// for `ttl`, with the client's retries.
    pub fn new(resource: impl AsRef<str>, ttl: Duration) -> Self {
        let resource = resource.as_ref();
        let kind = check_resource_name(resource, "resource name")
            .map(|()| Arc::new(Plain::new(resource.into())) as Arc<dyn Kind>)
            .map_err(message);
        LockRequest {
            kind,
            ttl,
            patience: Patience::Default,
            retry_delay: None,
            retry_jitter: None,
            notifications: true,
            fair: true,
            auto_extend: None,
            cancel: None,
            caller: None,
            test_token: None,
        }
    }

    /// All of `resources` at once or none of them (at most
    /// [`MAX_RESOURCES`](crate::MAX_RESOURCES), no name twice): each node sets all keys in one
    /// script or none, so two clients locking overlapping sets cannot deadlock. The lock's
    /// [`resource`](crate::Lock::resource) is the sorted names joined with `,`.
    pub fn many<I, S>(resources: I, ttl: Duration) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut request = LockRequest::new("-", ttl);
        request.kind = Many::new(resources)
            .map(|m| Arc::new(m) as Arc<dyn Kind>)
            .map_err(message);
        request
    }

    /// Makes it a fenced lock: [`Lock::fence`](crate::Lock::fence) is a token strictly greater
    /// than that of every fenced lock of the resource whose holder came before (see the crate
    /// docs). Costs one more round to the nodes, counted against the validity.
    pub fn fenced(mut self) -> Self {
        self.kind = self
            .single("fenced")
            .map(|r| Arc::new(Fenced::new(r)) as Arc<dyn Kind>);
        self
    }

    /// Makes it one hold of a reentrant lock for `owner` (a non-empty name up to 1024 bytes, no NUL;
    /// [`Redlock::new_owner`](crate::Redlock::new_owner) makes a random one). While `owner`
    /// holds the resource it can acquire it again at once; the resource is free for others when
    /// the last hold is released. Reentrant and plain locks on one resource exclude each other.
    pub fn reentrant(mut self, owner: &str) -> Self {
        self.kind = self.single("reentrant").and_then(|r| {
            Reentrant::new(r, owner)
                .map(|k| Arc::new(k) as Arc<dyn Kind>)
                .map_err(message)
        });
        self
    }

    /// Makes it a read lock: any number of readers hold the resource at once, while no writer
    /// does. A writer is a [`write`](LockRequest::write) lock, and also any plain or fenced
    /// lock on the resource (of this or another Redlock client): readers and they exclude each
    /// other. The readers live in a sorted set at the resource's key, each with its own expiry
    /// (Redis 7.0+ for the scripts' commands); extension and release touch only this reader.
    /// Waiting readers all wake when a writer releases. Writers can starve under a steady
    /// stream of overlapping readers. A thread asking for the read lock while it holds the
    /// write lock of the resource gets [`Error::InvalidArgument`] instead of waiting for
    /// itself. No fencing token.
    pub fn read(mut self) -> Self {
        self.kind = self
            .single("read")
            .map(|r| Arc::new(ReadWrite::new(r, Mode::Read)) as Arc<dyn Kind>);
        self
    }

    /// Makes it the write lock of a read-write lock: excludes readers and other writers. On the
    /// nodes it is exactly a plain lock ([`new`](LockRequest::new)); what it adds is the
    /// check that the calling thread holds no read or write lock of the resource itself,
    /// which would make it wait for itself: that is [`Error::InvalidArgument`] at once (there is
    /// no upgrade from read to write). For a fenced writer use [`fenced`](LockRequest::fenced)
    /// instead (it excludes readers the same way, without the check).
    pub fn write(mut self) -> Self {
        self.kind = self
            .single("write")
            .map(|r| Arc::new(ReadWrite::new(r, Mode::Write)) as Arc<dyn Kind>);
        self
    }

    /// Makes it one of `permits` permits of a counting semaphore on the resource: at most
    /// `permits` holders at once (1 to [`MAX_PERMITS`](crate::MAX_PERMITS)). Each permit is a
    /// slot, an ordinary Redlock mutex on its own key (`redlock:sem:{<resource>}:<i>`, next to
    /// the stored number at `redlock:sem:{<resource>}`); an attempt tries the slots in random
    /// order. Every caller of one semaphore must pass the same `permits`: the nodes store it
    /// and a caller with another number gets [`Error::InvalidArgument`] (it can change once
    /// every permit is released and its TTL has run out). [`Lock::permit`](crate::Lock::permit)
    /// says which slot is held. No fencing token. Not to be combined with other kinds.
    pub fn semaphore(mut self, permits: u32) -> Self {
        self.kind = self.single("semaphore").and_then(|r| {
            Semaphore::new(r, permits)
                .map(|k| Arc::new(k) as Arc<dyn Kind>)
                .map_err(message)
        });
        self
    }

    /// The one resource of a single-resource request, for a kind that needs one.
    fn single(&self, what: &str) -> std::result::Result<Arc<str>, String> {
        let kind = self.kind.as_ref().map_err(Clone::clone)?;
        if kind.keys().len() != 1 {
            return Err(format!("a {what} lock takes one resource, not a list"));
        }
        Ok(Arc::clone(kind.resource()))
    }

    /// Up to `n` retries after the first attempt (instead of the client's `retry_count`), each
    /// after `retry_delay ± retry_jitter`.
    pub fn retries(mut self, n: u32) -> Self {
        self.patience = Patience::Retries(n);
        self
    }

    /// A single attempt.
    pub fn once(self) -> Self {
        self.retries(0)
    }

    /// The base delay between attempts, for this request (default: the client's).
    pub fn retry_delay(mut self, d: Duration) -> Self {
        self.retry_delay = Some(d);
        self
    }

    /// The random spread around the delay, for this request (default: the client's).
    pub fn retry_jitter(mut self, d: Duration) -> Self {
        self.retry_jitter = Some(d);
        self
    }

    /// Waits up to `timeout` for a busy resource. A waiter wakes on the release notification
    /// the nodes publish (one subscriber connection per node per client, shared by all its
    /// waiters), and otherwise retries after a jittered exponential backoff from `retry_delay`
    /// up to 1 s, never sleeping past the moment the holder's keys expire on a quorum (read from
    /// the nodes), so a lost notification costs little. Waiters of an exclusive lock on one
    /// resource also queue across processes ([`fair`](LockRequest::fair)): behind others, a
    /// waiter sleeps until the queue says it is at the front, re-reading its place now and
    /// then (every 15 s at most) instead of the holder's TTLs.
    pub fn wait(mut self, timeout: Duration) -> Self {
        self.patience = Patience::Wait(timeout);
        self
    }

    /// While waiting, wake on release notifications (default) or only poll.
    pub fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }

    /// While waiting for an exclusive lock on one resource, queue in arrival order with the
    /// waiters of every process (default), so that a release wakes only the next one: see
    /// `queue.rs` in the source for how and why it cannot take exclusion away or hang. `false`:
    /// one waiter per client tries on each release, as every earlier version did.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    /// Keeps the lock alive while it is held: the client's extender thread extends it every
    /// `fraction × ttl`, each time a quorum extend with the validity rule. See
    /// [`Lock::is_held`](crate::Lock::is_held), [`Lock::lost`](crate::Lock::lost) and
    /// [`Lock::on_lost`](crate::Lock::on_lost) for how the holder learns that it was lost.
    /// Extension stops for good when the lock is released or dropped, after `max_hold`, or at
    /// `max_extensions`. The lock keeps its client alive meanwhile.
    pub fn auto_extend(mut self, auto: AutoExtend) -> Self {
        self.auto_extend = Some(auto);
        self
    }

    /// Ends the acquisition with [`Error::Cancelled`] once `cancel` fires (see [`Cancel`]).
    pub fn cancel(mut self, cancel: &Cancel) -> Self {
        self.cancel = Some(cancel.clone());
        self
    }

    /// The resource (for several, the sorted names joined with `,`), if the request is valid.
    pub fn resource(&self) -> Option<&str> {
        self.kind.as_ref().ok().map(|k| &**k.resource())
    }

    /// Names who this acquisition is for, in place of the calling OS thread, for the check
    /// that refuses a read-write lock its caller would wait for forever (asking for the write
    /// lock while holding a read or write lock of the resource, or for a read lock while
    /// holding its write lock). For callers whose threads are not OS threads: a binding's
    /// thread or task, a goroutine's owner. Empty is the thread again. Other kinds ignore it.
    pub fn caller(mut self, name: &str) -> Self {
        self.caller = (!name.is_empty()).then(|| name.into());
        self
    }

    /// Who the acquisition is for.
    pub(crate) fn caller_id(&self) -> Caller {
        match &self.caller {
            Some(name) => Caller::Named(Arc::clone(name)),
            None => Caller::Thread(std::thread::current().id()),
        }
    }

    /// Gives every attempt of this request `token` instead of a fresh random one, so that a
    /// test can look for the keys of an attempt that returned no lock (a cancelled wait). Only
    /// for tests: one token for many attempts, or for many requests, defeats the point of a
    /// token. Not for reentrant requests, whose token is their owner. Not part of the API.
    #[doc(hidden)]
    pub fn token_for_tests(mut self, token: &str) -> Self {
        self.test_token = Some(token.into());
        self
    }

    /// Checks the parts of the request that do not depend on a client (an empty resource or
    /// owner, kinds that do not combine): [`Error::InvalidArgument`] for the first bad one, as
    /// [`acquire`](crate::Redlock::acquire) would report it. The TTL and the patience are
    /// checked against the client's settings when it acquires.
    pub fn check(&self) -> Result<()> {
        self.checked_kind().map(|_| ())
    }

    pub(crate) fn checked_kind(&self) -> Result<&Arc<dyn Kind>> {
        self.kind.as_ref().map_err(|m| Error::invalid(m.clone()))
    }
}

fn message(e: Error) -> String {
    match e {
        Error::InvalidArgument { message } => message,
        other => other.to_string(),
    }
}

impl fmt::Debug for LockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRequest")
            .field("kind", &self.kind)
            .field("ttl", &self.ttl)
            .field("patience", &self.patience)
            .field("auto_extend", &self.auto_extend)
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}
