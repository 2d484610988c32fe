//! Redlock's rules, free of I/O so that they can be tested with injected times: the quorum and
//! the validity a vote gives (`quorum`), the clock guard that keeps a node whose wall clock jumps
//! out of quorums (`clock`), and the random token that signs a lock (`token`).
//!
//! May use: `error`. Used by everything above.

pub(crate) mod clock;
pub(crate) mod quorum;
pub(crate) mod token;
