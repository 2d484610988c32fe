//! A slot map with a hole: read again before a batch goes to a slot no master of it serves.
//!
//! While the other nodes hold a master failed (from its `cluster-node-timeout` until its replica
//! is promoted, or until it answers again when it has none), Redis leaves that master and its
//! slots out of `CLUSTER SLOTS`. A map read then (at a reconnect during the failover, or by the
//! idle check) has a hole, and nothing else would ever fill it: no command goes to those slots,
//! so none gets a `MOVED` or breaks a connection, and every command for them fails with the
//! link's own `CLUSTERDOWN` for as long as the link lives.
//!
//! So before a batch with a command for such a slot goes out, the link reads the map again, at
//! most every [`RECHECK`]: from another master on the link's connection to it (one that answered
//! within `T`, see `idle`), else from a fresh connection to a seed or a node of the last map,
//! never an idle master. A map that differs is taken as after a `MOVED` (the worker observes
//! the new masters as a failover before this batch's votes count), and a master that gave it
//! and is new to the link is confirmed by another node before its first batch, as at a
//! connect. When nobody answers or the hole is still there, the commands for it fail as before.
//!
//! May use: its parent (`ClusterLink`), the slot map ([`NO_MASTER`]), the idle check.

use std::time::{Duration, Instant};

use super::{ClusterLink, Routed};
use crate::topology::cluster::map::NO_MASTER;
use crate::wire::Script;

/// How often a link whose map has a hole reads it again while batches go to the hole: the
/// promoted replica's slots are served within this of when a batch first needs them.
pub(super) const RECHECK: Duration = Duration::from_millis(100);

impl ClusterLink {
    /// Before a batch with a command for a slot no master serves: reads the slot map again
    /// (at most every [`RECHECK`]) and takes it if it differs. See the module's doc.
    pub(super) fn fill_holes(
        &mut self,
        batch: &[Routed<'_>],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        if batch.iter().all(|r| self.owner[r.slot()] != NO_MASTER) {
            return Ok(());
        }
        let now = Instant::now();
        if self
            .holes_read_at
            .is_some_and(|at| now.saturating_duration_since(at) < RECHECK)
        {
            return Ok(());
        }
        self.holes_read_at = Some(now);
        let idle = self.idle_masters(now);
        let mut problems = Vec::new();
        let map = match self.map_from_other_masters(&idle, &mut problems) {
            Some(map) => map,
            None => {
                let except: Vec<(String, u16)> = idle
                    .iter()
                    .map(|&m| (self.masters[m].host.clone(), self.masters[m].port))
                    .collect();
                match self.cluster.discover_except(&[], &except, self.timeouts) {
                    Ok(map) => map,
                    Err(e) => {
                        problems.push(e.to_string());
                        log::debug!(
                            "redlock: node {}: the slot map has slots no master serves, and no \
                             node told it again: {}",
                            self.cluster.id(),
                            problems.join("; ")
                        );
                        return Ok(());
                    }
                }
            }
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
}
