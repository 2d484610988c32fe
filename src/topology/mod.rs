//! What a node is: one Redis server, a Sentinel-managed master, or a whole Redis Cluster, and how
//! each is reached: URLs (`urls`), the server probe at each connect (`probe`), Sentinel's master
//! discovery and watch (`sentinel`), and Cluster's slot map and routing (`cluster`).
//!
//! May use: `error`, `sync`, `rules`, `wire`. Used by `node` (a worker connects through its
//! target), `notify` (a subscriber follows a Sentinel master), `config` (parses the URLs).

pub(crate) mod cluster;
pub(crate) mod probe;
pub(crate) mod sentinel;
pub(crate) mod urls;
