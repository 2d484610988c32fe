//! libredlock: the C ABI of the [`redlock`] crate, declared in `include/redlock.h` (generated
//! from these files by cbindgen; `docs/c-abi.md` is the contract).
//!
//! It uses only the crate's public API. `boundary` holds every crossing between C and Rust (the
//! panic boundary, argument readers, result writers, frees); each other module is one C handle
//! type and its functions.
#![allow(non_camel_case_types)]

mod boundary;
mod cancel;
mod client;
mod election;
mod event;
mod event_listener;
mod inspect;
mod leader;
mod leadership;
mod lock;
mod node;
mod observer;
mod options;
mod request;
mod stats;
mod status;

pub use boundary::{redlock_error, redlock_status};
pub use cancel::redlock_cancel;
pub use client::redlock_client;
pub use election::{redlock_election, redlock_new_leader_callback, redlock_term_callback};
pub use event::{redlock_event, redlock_event_kind};
pub use event_listener::{redlock_event_callback, redlock_event_listener};
pub use inspect::{
    redlock_forced_release, redlock_inspection, redlock_key_kind, redlock_release_outcome,
};
pub use leader::redlock_leader;
pub use leadership::redlock_leadership;
pub use lock::{redlock_lock, redlock_lost_callback};
pub use node::redlock_node_status;
pub use observer::redlock_observer;
pub use options::redlock_options;
pub use request::redlock_request;
pub use stats::redlock_stats;
