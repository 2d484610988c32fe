//! What a node is: one Redis server, a Sentinel-managed master, or a whole Redis Cluster, and how
//! each is reached. The rest of the crate sees one seam, [`Target`] (the node a URL describes)
//! and the [`Link`] a worker reaches it by (`target`); behind it, URLs (`urls`), the server probe
//! at each connect (`probe`), Sentinel's master discovery and watch (`sentinel`), and Cluster's
//! slot map and routing (`cluster`).
//!
//! May use: `error`, `sync`, `rules`, `wire`. Used by `node` (a worker connects through its
//! target and drives its link), `notify` (a subscriber follows a Sentinel master), `config`
//! (parses the URLs), `client` (asks the targets whether a command can run on them).

mod cluster;
pub(crate) mod probe;
mod sentinel;
mod target;
mod urls;

pub(crate) use cluster::{ClusterLink, Routed, WaitFor, Waited};
pub(crate) use sentinel::{Tenure, Verdict, WATCH_INTERVAL, Watch};
pub(crate) use target::{Link, Linked, Target};
pub(crate) use urls::AddressMap;
