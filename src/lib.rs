//! # redlock
//!
//! The [Redlock](https://redis.io/docs/latest/develop/use/patterns/distributed-locks/) distributed
//! lock over N independent Redis masters, as a synchronous library: no async runtime.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let rl = redlock::Redlock::builder()
//!     .nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])
//!     .build()?;
//! let mut lock = rl.lock("orders:42", Duration::from_secs(10))?;
//! // ... work that must not overlap another holder's, within lock.validity() ...
//! lock.extend(Duration::from_secs(10))?;
//! lock.release()?;
//! # Ok::<(), redlock::Error>(())
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
//! persistence should stay out for longer than the largest TTL (see the README).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod config;
mod error;
#[allow(unsafe_code)]
pub mod ffi;
mod lock;
mod node;
mod notify;
mod options;
mod quorum;
mod token;
mod watchdog;

pub use client::Redlock;
pub use config::{
    Builder, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT, DEFAULT_RETRY_DELAY,
    DEFAULT_RETRY_JITTER, MAX_TTL,
};
pub use error::{Error, NodeProblem, NodeReport, Operation, QuorumReport, Result};
pub use lock::Lock;
pub use node::NodeStatus;
pub use options::{DEFAULT_EXTEND_FRACTION, LockOptions};
