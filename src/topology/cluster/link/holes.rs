//! A slot map with a hole: read again before a batch goes to a slot no master of it serves.
//!
//! For a moment around a failover's promotion (tens of milliseconds, seen on Redis 7.0), nodes
//! leave the failed-over master's slots out of `CLUSTER SLOTS`. A map read then (at a reconnect
//! during the failover, or by the idle check) has a hole, and nothing else would ever fill it:
//! no command goes to those slots, so none gets a `MOVED` or breaks a connection, and every
//! command for them would fail with the link's own `CLUSTERDOWN` for as long as the link lives.
//!
//! So before a batch with a command for such a slot goes out, while its caller still waits, the
//! link reads the map again: from each master on the link's connection to it, the most
//! recently confirmed first, else from a fresh connection to a seed or a node of the last map.
//! An answer confirms its master only as the idle check's answers do (see `idle`): a master
//! idle past `T` is still confirmed by another node before a batch goes to it, and a master
//! that gave the map and is new to the link is too, as at a connect. A map that differs is
//! taken as after a `MOVED` (the worker observes the new masters as a failover before this
//! batch's votes count). At most every [`RECHECK`]; when nobody answers, the wait doubles up
//! to [`RECHECK_MAX`], so a dead seed costs its timeout that rarely. Until the map is whole,
//! the commands for the hole fail as before.
//!
//! May use: its parent (`ClusterLink`), the slot map ([`Map`], [`NO_MASTER`]), the idle check.

use std::time::{Duration, Instant};

use super::{ClusterLink, Routed};
use crate::topology::cluster::map::{Map, NO_MASTER};
use crate::wire::Script;

/// How often a link whose map has a hole reads it again while batches go to the hole: the
/// promoted replica's slots are served within this of when a batch first needs them.
const RECHECK: Duration = Duration::from_millis(100);

/// The longest wait between two tries that nobody answered.
const RECHECK_MAX: Duration = Duration::from_secs(2);

/// When the next re-read may run, and the wait after a try nobody answered.
pub(super) struct Holes {
    next: Option<Instant>,
    backoff: Duration,
}

impl Default for Holes {
    fn default() -> Self {
        Holes {
            next: None,
            backoff: RECHECK,
        }
    }
}

impl ClusterLink {
    /// Before a batch with a command for a slot no master serves, whose caller still waits:
    /// reads the slot map again (see the module's doc) and takes it if it differs.
    pub(super) fn fill_holes(
        &mut self,
        batch: &[Routed<'_>],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        let now = Instant::now();
        let awaited = batch
            .iter()
            .any(|r| self.owner[r.slot()] == NO_MASTER && r.deadline.is_none_or(|d| d > now));
        if !awaited || self.holes.next.is_some_and(|next| now < next) {
            return Ok(());
        }
        let mut problems = Vec::new();
        let read = self.read_map_again(&mut problems);
        let end = Instant::now();
        let Some(map) = read else {
            self.holes.next = Some(end + self.holes.backoff);
            self.holes.backoff = (self.holes.backoff * 2).min(RECHECK_MAX);
            log::debug!(
                "redlock: node {}: the slot map has slots no master serves, and no node told it \
                 again: {}",
                self.cluster.id(),
                problems.join("; ")
            );
            return Ok(());
        };
        self.holes = Holes {
            next: Some(end + RECHECK),
            backoff: RECHECK,
        };
        if map.masters == self.addresses() && map.owner == self.owner {
            return Ok(());
        }
        let before = self.addresses();
        let source = map.source.clone();
        self.take(map, scripts)?;
        if let Some((host, port)) = source
            && !before.contains(&(host.clone(), port))
            && let Some(m) = self.position(&host, port)
        {
            self.masters[m].confirmed = None;
        }
        Ok(())
    }

    /// The slot map from the link's masters on their connections, the most recently confirmed
    /// first, else from a fresh connection to a seed or a node of the last map; what each one
    /// asked gave instead goes to `problems`.
    fn read_map_again(&mut self, problems: &mut Vec<String>) -> Option<Map> {
        if let Some(map) = self.map_from_other_masters(&[], problems) {
            return Some(map);
        }
        match self.cluster.discover(&[], self.timeouts) {
            Ok(map) => Some(map),
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        }
    }
}
