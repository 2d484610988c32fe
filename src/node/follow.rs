//! How a Sentinel node's worker follows its watch: which master the connection reached, and
//! whether the sentinels named a newer one since.
//!
//! Owns [`Follow`]: the watch (shared with the node's other worker and its release
//! subscriber), the watch's generation last compared, and the connection's master with the
//! `config-epoch` it was named with. It decides; the connection (`connection.rs`) refuses or
//! drops. Uses only the topology's Sentinel types.

use std::sync::Arc;

use crate::topology::{Target, Verdict, Watch};

/// A Sentinel node's follow of its watch.
pub(super) struct Follow {
    watch: Arc<Watch>,
    /// The watch's generation the worker last compared its master with.
    seen: u64,
    /// The master on the current connection (`host:port`) and the `config-epoch` it was named
    /// with.
    master: Option<(String, Option<u64>)>,
}

impl Follow {
    pub(super) fn new(watch: Arc<Watch>) -> Follow {
        Follow {
            watch,
            seen: 0,
            master: None,
        }
    }

    /// What the watch has published so far; taken before a connect resolves the master, which
    /// is then no news to it.
    pub(super) fn generation(&self) -> u64 {
        self.watch.generation()
    }

    /// The newest `config-epoch` the watch heard named.
    pub(super) fn newest_epoch(&self) -> Option<u64> {
        self.watch.named().and_then(|n| n.epoch)
    }

    /// At connect: refuses the master `reached` (named with `epoch`) if the watch heard a newer
    /// one named since. A sentinel that has not switched yet named the old master, which still
    /// says it is one (the new master is out of our reach, or that sentinel was asked first):
    /// its votes must not count while other clients vote from the new one.
    pub(super) fn refuse_older(&self, reached: &str, epoch: Option<u64>) -> redis::RedisResult<()> {
        if let Some(named) = self.watch.named()
            && named.verdict(reached, epoch) == Verdict::Newer
        {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the sentinels name a newer master",
                format!(
                    "a sentinel named {reached} (config epoch {}), but another named {} (config \
                     epoch {}) since: not voting from the older master; resolving again",
                    epoch.map_or("?".to_owned(), |e| e.to_string()),
                    named.master,
                    named.epoch.map_or("?".to_owned(), |e| e.to_string()),
                ),
            )));
        }
        Ok(())
    }

    /// A connect reached `master` (`host:port`, with its `config-epoch`) as of the watch's
    /// `generation`.
    pub(super) fn connected(&mut self, generation: u64, master: Option<(String, Option<u64>)>) {
        self.master = master;
        self.seen = generation;
    }

    /// The connection was dropped: it has no master.
    pub(super) fn disconnected(&mut self) {
        self.master = None;
    }

    /// Whether the watch has heard the sentinels name another master than the connection's,
    /// from a newer configuration (or one it cannot order): then why the connection must be
    /// dropped, so that no vote comes from the old master, and the sentinel that named the new
    /// one is asked first at the reconnect, which sees the change as a failover. While nothing
    /// changes it costs one atomic load.
    pub(super) fn switched(&mut self, client: &Target) -> Option<redis::RedisError> {
        let (named, (master, epoch)) = self.watch.switched(&mut self.seen, self.master.as_ref())?;
        if let Target::Sentinel(s) = client {
            s.prefer(named.sentinel);
        }
        let why = format!(
            "the sentinels now name {} as the master (config epoch {}), not {master} (config \
             epoch {}): a failover; resolving the master again",
            named.master,
            named.epoch.map_or("?".to_owned(), |e| e.to_string()),
            epoch.map_or("?".to_owned(), |e| e.to_string()),
        );
        Some(redis::RedisError::from((
            redis::ErrorKind::Client,
            "the master changed",
            why,
        )))
    }
}
