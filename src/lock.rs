//! A held lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Redlock;
use crate::error::{Error, Operation, Result};
use crossbeam_channel::Receiver;

use crate::node::Command;
use crate::quorum::Vote;
use crate::quorum::{Decision, earliest_expiry, note_late, validity_deadline};

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
    kind: Kind,
}

/// What kind of lock a [`Lock`] is, and what that kind carries.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// `SET NX PX` of the resource.
    Plain,
    /// A plain lock with a fencing token (see the `fence` module).
    Fenced { fence: u64 },
    /// One hold of the owner's hash `{owner: count}`; the lock's token is the owner. `counted`
    /// marks the nodes that counted this hold: its release goes only there, so that it never
    /// takes a hold away from a node that did not count it. Nodes that answered after the
    /// quorum was decided report on `late`, in time until `answers_by`.
    Reentrant {
        holds: u64,
        counted: Box<[bool]>,
        late: Receiver<(usize, Vote)>,
        answers_by: Instant,
    },
    /// Several resources (sorted) at once, all with the lock's token.
    Many { keys: Arc<[Arc<str>]> },
}

impl Kind {
    pub(crate) fn extend(&self, ttl_ms: u64) -> Command {
        match self {
            Kind::Plain | Kind::Fenced { .. } => Command::Extend { ttl_ms },
            Kind::Reentrant { .. } => Command::ExtendReentrant { ttl_ms },
            Kind::Many { keys } => Command::ExtendMany {
                ttl_ms,
                keys: Arc::clone(keys),
            },
        }
    }

    pub(crate) fn release(&self) -> Command {
        match self {
            Kind::Plain | Kind::Fenced { .. } => Command::Release,
            Kind::Reentrant { .. } => Command::ReleaseReentrant,
            Kind::Many { keys } => Command::ReleaseMany {
                keys: Arc::clone(keys),
            },
        }
    }

    /// Takes in the votes that arrived since the decision (waiting for them until the acquire's
    /// deadline, for a lock released at once), so a release reaches every node known to have
    /// counted the hold. (A node whose answer never came may have counted it: that hold stays
    /// there until the key expires, which is safe, unlike a release where nothing was counted,
    /// which could take away one of the owner's other holds.)
    fn settle(&mut self) {
        if let Kind::Reentrant {
            counted,
            late,
            answers_by,
            ..
        } = self
        {
            note_late(counted, late, *answers_by);
        }
    }

    /// The nodes a release goes to: `None` for all.
    pub(crate) fn release_targets(&self) -> Option<&[bool]> {
        match self {
            Kind::Reentrant { counted, .. } => Some(counted),
            _ => None,
        }
    }
}

impl Lock {
    pub(crate) fn of_kind(
        client: Redlock,
        resource: Arc<str>,
        token: Arc<str>,
        deadline: Instant,
        kind: Kind,
    ) -> Self {
        Lock {
            client,
            resource,
            token,
            deadline,
            extensions: 0,
            released: false,
            kind,
        }
    }

    /// The fencing token of a lock from [`Redlock::lock_fenced`]: greater than the token of
    /// every fenced lock on the same resource whose holder came before this one (see the crate
    /// docs on fencing). `None` for other kinds of lock.
    pub fn fence(&self) -> Option<u64> {
        match self.kind {
            Kind::Fenced { fence } => Some(fence),
            _ => None,
        }
    }

    /// For a lock from [`Redlock::reentrant_lock`]: how many holds its owner had on the
    /// resource once this one was counted (1 for the outermost), as the quorum's nodes reported
    /// it (the largest count among them). `None` for other kinds of lock.
    pub fn hold_count(&self) -> Option<u64> {
        match self.kind {
            Kind::Reentrant { holds, .. } => Some(holds),
            _ => None,
        }
    }

    /// The resources this lock holds: one, or for [`Redlock::lock_many`] all of them, sorted.
    pub fn resources(&self) -> Vec<&str> {
        match &self.kind {
            Kind::Many { keys } => keys.iter().map(|k| &**k).collect(),
            _ => vec![&*self.resource],
        }
    }

    /// The locked resource (the Redis key); for [`Redlock::lock_many`], the sorted names joined
    /// with `,` (see [`resources`](Lock::resources) for the list).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The random value that marks this acquisition on every node; for a reentrant lock, the
    /// owner.
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
                .quorum_call(self.kind.extend(ttl_ms), &self.resource, &self.token);
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
        self.kind.settle();
        let outcome = self.client.fan_out(
            self.kind.release(),
            &self.resource,
            &self.token,
            self.kind.release_targets(),
        );
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
            self.kind.settle();
            self.client.send_nowait(
                self.kind.release(),
                &self.resource,
                &self.token,
                self.kind.release_targets(),
            );
        }
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.resource)
            .field("validity", &self.validity())
            .field("released", &self.released)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}
