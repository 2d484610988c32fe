//! # redquorum
//!
//! The [Redlock](https://redis.io/docs/latest/develop/use/patterns/distributed-locks/) distributed
//! lock over N independent Redis masters, as a synchronous library: no async runtime.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let rl = redquorum::Redlock::builder()
//!     .nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])
//!     .build()?;
//! let lock = rl.lock("orders:42", Duration::from_secs(10))?;
//! // ... work that must not overlap another holder's, within lock.validity() ...
//! lock.extend(Duration::from_secs(10))?;
//! lock.release()?;
//! # Ok::<(), redquorum::Error>(())
//! ```
//!
//! ## The algorithm
//! A lock is the key `resource` holding a fresh random token (20 bytes from the OS CSPRNG,
//! hex-encoded), set with `SET resource token NX PX ttl` on all N nodes at once. It is acquired
//! when `N/2 + 1` nodes accepted it and validity remains:
//! `validity = ttl − elapsed − (ttl × drift_factor + 2 ms)`, from a monotonic clock. A failed
//! attempt is undone on all nodes (also those that timed out), then retried after
//! `retry_delay ± retry_jitter`. Release and extend are compare-and-delete and
//! compare-and-`PEXPIRE` Lua scripts run with `EVALSHA`; an extend succeeds only on a quorum with
//! validity left and never deletes keys. Keys and values are plain strings, so other Redlock
//! clients contend correctly on the same keys.
//!
//! ## Fencing tokens, reentrant and multi-resource locks
//! - [`Redlock::lock_fenced`] returns a lock with a 64-bit token, [`Lock::fence`], that is
//!   strictly greater than the token of every fenced lock of the resource whose holder came
//!   before, also when nodes restart without their data, as long as they come back (or count
//!   again) a restart delay or `restart_grace` later: a quorum register of per-node counters
//!   (`redlock:fence:{resource}`), raised with the lock to at least the node's clock in µs
//!   (so a counter a node lost restarts above every earlier token) and written back to a
//!   quorum. The protected resource rejects writes with a lower token than it has seen, which
//!   stops a holder that paused past its validity. Why it is monotonic, what it assumes and how
//!   to use the token: see the source documentation of `src/kinds/fenced.rs`.
//! - [`LockRequest::reentrant`] keys a lock on an owner name chosen by the caller (not a
//!   thread): the hash `{owner: count}`; each hold is a [`Lock`]; plain and reentrant locks on
//!   one resource exclude each other.
//! - [`LockRequest::many`] takes several resources all or none, one script per node.
//!
//! ## Leader election
//! [`Redlock::election`] makes a candidate; [`Election::campaign`] blocks until it leads and
//! returns a [`Leadership`], auto-extended while held, whose [`term`](Leadership::term) is a
//! fencing token greater than every earlier leader's. [`Redlock::leader`] tells anyone who
//! leads; [`Redlock::observe`] follows the changes. The argument is in `src/election.rs`.
//!
//! ## One request, cancellation
//! Every acquisition is a [`LockRequest`]: kind × patience (retries, one attempt, or a wait
//! woken by release notifications) × [`AutoExtend`] × a [`Cancel`] handle, in any combination,
//! carried out by [`Redlock::acquire`]. The methods above are shorthands for it. A cancel
//! (callable from any thread or a signal handler) ends a pending acquisition with
//! [`Error::Cancelled`] after undoing its partial votes on every node.
//!
//! ## How it runs
//! Each node has one long-lived worker thread that owns its connection; calls fan out to the
//! workers over channels and return as soon as the outcome is certain, without waiting on slow or
//! hung nodes beyond `node_timeout`. Workers pipeline whatever is queued, so threads sharing a
//! client share one connection per node. A worker whose connection breaks reconnects with capped
//! backoff and, while its node is down, answers at once.
//!
//! ## Safety notes
//! Mutual exclusion holds only within [`Lock::validity`]; finish the work (or extend) before it
//! runs out. Use independent masters, an odd number of them; a node restarted without
//! persistence must stay out of quorums for longer than the largest TTL:
//! [`Builder::restart_grace`] does that in the client. A node whose wall clock jumps forward
//! expires locks early; the clock guard ([`Builder::clock_jump_threshold`], on by default) keeps
//! it out of acquire quorums for [`Builder::clock_quarantine`]. At each connect a server probe
//! refuses replicas, Redis Cluster nodes and too-old servers, and warns about replicas of a
//! master and evicting `maxmemory` policies ([`Builder::strict_servers`] refuses those too).
//! What each guard can and cannot catch: the `clock` and `probe` modules' source documentation
//! (`src/rules/clock.rs`, `src/topology/probe.rs`) and docs/operations.md.
#![deny(unsafe_code)]
#![warn(missing_docs)]

// The modules stand in layers, each importing only from those below it: docs/api.md#layers,
// generated from and enforced by scripts/check-layers.
mod cancel;
mod client;
mod config;
mod election;
mod engine;
mod error;
mod kinds;
mod node;
mod notify;
mod rules;
mod sync;
mod telemetry;
mod topology;
mod wire;

pub use cancel::Cancel;
pub use client::inspect::{
    ForcedRelease, Inspection, KeyState, NodeInspection, NodeRelease, NodeState, Released,
};
pub use client::lock::Lock;
pub use client::request::{AutoExtend, DEFAULT_EXTEND_FRACTION, LockRequest};
pub use client::{EventListener, Redlock};
pub use config::{
    Builder, Config, DEFAULT_CLOCK_JUMP, DEFAULT_CLOCK_QUARANTINE, DEFAULT_DRIFT_FACTOR,
    DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER,
    MAX_NODE_URL, MAX_TTL,
};
pub use election::{
    DEFAULT_OBSERVE_POLL, Election, Leader, Leadership, MAX_ELECTION_NAME, MAX_IDENTITY, Observer,
};
pub use error::{Error, NodeProblem, NodeReport, Operation, QuorumReport, Result};
pub use kinds::MAX_RESOURCE_NAME;
pub use kinds::many::MAX_RESOURCES;
pub use kinds::semaphore::MAX_PERMITS;
#[doc(hidden)]
pub use sync::set_spinning;
pub use telemetry::histogram::{BUCKETS, Histogram};
pub use telemetry::{
    AcquireStats, EVENT_QUEUE, Event, EventKind, KINDS, LOST_REASONS, NODE_POLL, OUTCOMES, Stats,
};
pub use telemetry::{NodeStatus, Votes};
