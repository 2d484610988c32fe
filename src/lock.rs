//! A held lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Redlock;
use crate::error::{Error, Operation, Result};
use crate::node::Command;
use crate::quorum::{Decision, earliest_expiry, validity_deadline};

/// A lock acquired on a quorum of nodes. It stays valid for [`validity`](Lock::validity); after
/// that another owner may hold the resource.
///
/// [`release`](Lock::release) it when done. Dropping it unreleased releases it too, best effort
/// and without waiting for the nodes. A `Lock` keeps its client's workers alive.
pub struct Lock {
    client: Redlock,
    resource: Arc<str>,
    token: Arc<str>,
    /// Until when the lock is safe to rely on.
    deadline: Instant,
    extensions: u32,
    released: bool,
}

impl Lock {
    pub(crate) fn new(
        client: Redlock,
        resource: Arc<str>,
        token: Arc<str>,
        deadline: Instant,
    ) -> Self {
        Lock {
            client,
            resource,
            token,
            deadline,
            extensions: 0,
            released: false,
        }
    }

    /// The locked resource (the Redis key).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The random value that marks this acquisition on every node.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Time left before the lock may expire on the nodes; zero once released or expired. Finish
    /// the protected work (or [`extend`](Lock::extend)) within it.
    pub fn validity(&self) -> Duration {
        if self.released {
            return Duration::ZERO;
        }
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether [`release`](Lock::release) was called (through the C ABI, say).
    pub fn is_released(&self) -> bool {
        self.released
    }

    /// Sets the lock's TTL on every node to `ttl` from now, if it is still ours.
    ///
    /// Succeeds when a quorum extended it with validity left; then [`validity`](Lock::validity)
    /// is `ttl` minus the time taken and the drift allowance. [`Error::Lost`] when the lock is
    /// no longer ours on enough nodes; [`Error::NoQuorum`] when too few nodes answered, in which
    /// case the old validity (or the new one, if shorter) still stands. A failed extend never
    /// deletes keys.
    pub fn extend(&mut self, ttl: Duration) -> Result<()> {
        if self.released {
            return Err(self.lost(None));
        }
        let config = self.client.config();
        let ttl_ms = config.ttl_ms(ttl)?;
        if let Some(max) = config.max_extensions
            && self.extensions >= max
        {
            return Err(Error::ExtensionLimit {
                resource: self.resource.to_string(),
                max_extensions: max,
            });
        }
        let ttl = Duration::from_millis(ttl_ms);
        let outcome =
            self.client
                .quorum_call(Command::Extend { ttl_ms }, &self.resource, &self.token);
        if outcome.decision == Decision::Quorum
            && let Some(deadline) =
                validity_deadline(outcome.t0, outcome.decided, ttl, config.drift_factor)
        {
            self.deadline = deadline;
            self.extensions += 1;
            return Ok(());
        }
        let report = outcome.report(&self.client);
        if outcome.decision == Decision::Refused {
            self.deadline = outcome.decided;
            return Err(self.lost(Some(report)));
        }
        // Nodes that applied the new TTL keep the key until t0 + ttl, the others until the old
        // deadline: the earlier of the two still holds on a quorum.
        self.deadline = self
            .deadline
            .min(earliest_expiry(outcome.t0, ttl, config.drift_factor));
        Err(Error::NoQuorum {
            resource: self.resource.to_string(),
            operation: Operation::Extend,
            attempts: 1,
            report,
        })
    }

    /// Releases the lock on every node, deleting only keys that still hold this lock's token.
    ///
    /// Ok when a quorum deleted it; [`Error::Lost`] when it was no longer ours on enough nodes
    /// (it expired before the release: the protected work may have overlapped another owner's);
    /// [`Error::NoQuorum`] when too few nodes answered (their keys expire with the TTL).
    pub fn release(mut self) -> Result<()> {
        self.release_in_place()
    }

    /// [`release`](Lock::release) that keeps the handle, for the C ABI: afterwards validity is
    /// zero, extend reports `Lost`, and releasing again does nothing.
    pub(crate) fn release_in_place(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        let outcome = self
            .client
            .quorum_call(Command::Release, &self.resource, &self.token);
        match outcome.decision {
            Decision::Quorum => Ok(()),
            Decision::Refused => Err(self.lost(Some(outcome.report(&self.client)))),
            Decision::Unreachable => Err(Error::NoQuorum {
                resource: self.resource.to_string(),
                operation: Operation::Release,
                attempts: 1,
                report: outcome.report(&self.client),
            }),
        }
    }

    fn lost(&self, report: Option<crate::error::QuorumReport>) -> Error {
        Error::Lost {
            resource: self.resource.to_string(),
            report,
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if !self.released {
            self.client.release_nowait(&self.resource, &self.token);
        }
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.resource)
            .field("validity", &self.validity())
            .field("released", &self.released)
            .finish_non_exhaustive()
    }
}
