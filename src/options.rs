//! Per-call options for [`Redlock::lock_with`](crate::Redlock::lock_with), the form before
//! [`LockRequest`] that stays for the programs that use it.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::request::{AutoExtend, DEFAULT_EXTEND_FRACTION, LockRequest};

/// How one lock is taken and kept. Build it with the methods; the default is what
/// [`Redlock::lock`](crate::Redlock::lock) does (no auto-extension, `retry_count` attempts).
///
/// ```no_run
/// # use std::time::Duration;
/// # let rl = redlock::Redlock::builder().node("redis://127.0.0.1:7000").build()?;
/// let opts = redlock::LockOptions::new()
///     .auto_extend(true)
///     .wait_timeout(Duration::from_secs(30));
/// let lock = rl.lock_with("orders:42", Duration::from_secs(10), opts)?;
/// # Ok::<(), redlock::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LockOptions {
    /// Keep the lock alive on the client's extender thread while it is held.
    pub auto_extend: bool,
    /// Extend after this fraction of the TTL, in (0, 1) (default 1/3).
    pub extend_fraction: f64,
    /// Stop auto-extending this long after the lock was acquired (default: never). The lock then
    /// runs out within one TTL and is reported lost if still held.
    pub max_hold: Option<Duration>,
    /// Wait for a busy resource up to this long instead of making `retry_count` attempts.
    pub wait_timeout: Option<Duration>,
    /// While waiting, wake up on the release notification the nodes publish (default true).
    /// Without it a waiter polls at `retry_delay ± retry_jitter`, like `lock`.
    pub notifications: bool,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            auto_extend: false,
            extend_fraction: DEFAULT_EXTEND_FRACTION,
            max_hold: None,
            wait_timeout: None,
            notifications: true,
        }
    }
}

impl LockOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the lock alive while it is held (see [`LockOptions::auto_extend`](#structfield.auto_extend)).
    pub fn auto_extend(mut self, on: bool) -> Self {
        self.auto_extend = on;
        self
    }

    /// Extends after `fraction` of the TTL, in (0, 1).
    pub fn extend_fraction(mut self, fraction: f64) -> Self {
        self.extend_fraction = fraction;
        self
    }

    /// Stops auto-extending `d` after acquisition.
    pub fn max_hold(mut self, d: Duration) -> Self {
        self.max_hold = Some(d);
        self
    }

    /// Waits up to `d` for a busy resource.
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.wait_timeout = Some(d);
        self
    }

    /// Wakes waiters on release notifications (default) or polls.
    pub fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }
}

impl LockOptions {
    /// The same as a [`LockRequest`] for a plain lock on `resource`. A `max_hold` without
    /// `auto_extend` is an error: nothing would stop at it.
    pub fn request(&self, resource: &str, ttl: Duration) -> Result<LockRequest> {
        let mut request = LockRequest::new(resource, ttl).notifications(self.notifications);
        if let Some(limit) = self.wait_timeout {
            request = request.wait(limit);
        }
        match (self.auto_extend, self.max_hold) {
            (true, max_hold) => {
                let mut auto = AutoExtend::new().fraction(self.extend_fraction);
                if let Some(d) = max_hold {
                    auto = auto.max_hold(d);
                }
                request = request.auto_extend(auto);
            }
            (false, Some(_)) => {
                return Err(Error::invalid(
                    "max_hold limits auto-extension: set auto_extend too, or drop max_hold",
                ));
            }
            (false, None) => {}
        }
        Ok(request)
    }
}
