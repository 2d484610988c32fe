//! A master idle past its failover: confirmed by another node of the cluster before a batch
//! goes to it.
//!
//! A client idle through a master's whole stop (a SIGSTOP, a VM pause) sees neither a `MOVED`
//! nor a broken connection, and after the stop the old master still believes it is the master
//! until the cluster's gossip reaches it: the client's first write gets `OK` there and is lost
//! at the demotion, while a client that saw the failover and waited out its grace takes the
//! same lock on the promoted replica. So before a batch goes to a master whose connection has
//! not carried a batch's replies for `T`, the link confirms that master with **another node**
//! of the cluster (`confirm_idle`).
//!
//! An automatic failover completes at least `cluster-node-timeout` + 500 ms (the replica's
//! election delay) after the master's last answer, so a master failed over while stopped left
//! our connection to it idle at least that long. `T` is the smallest `cluster-node-timeout` the
//! masters tell (`CONFIG GET` at connect), a margin of 500 ms below that bound for the clocks'
//! rates and the scheduling; where `CONFIG GET` is refused (managed services), [`IDLE_DEFAULT`],
//! below the election delay alone. A
//! reply confirms its master only if its round took less than `T` (a command sent just before a
//! stop and answered after it would hide the stop otherwise); a `PING` or a `TIME` alone
//! confirms nothing.
//!
//! The other node is another master, on the link's connection to it (the most recently
//! confirmed first; the answer of one idle itself tells of the others only, since one back
//! from a stop would name itself), else a fresh connection to a seed or a node of the last
//! slot map (a replica too: a one-master cluster never fails over by itself, only by `CLUSTER
//! FAILOVER TAKEOVER`, which A9 leaves out, and its replicas' `CLUSTER SLOTS` names a replica
//! so promoted), never the idle masters themselves. A map that
//! differs from the link's is taken as after a `MOVED` (the worker observes the change as a
//! failover before this batch's votes count); the same map confirms the idle masters. A map
//! read at a (re)connect from a master names that master on its own word, so that master too is
//! confirmed by another node before its first batch. The check counts against the per-node
//! timeout like any round trip: a busy client sends nothing more; an idle client's first batch
//! pays one round trip (two, with a fresh connection).
//!
//! When no other node answers, nothing tells, and the batch goes as it would without the check:
//! refusing it would take a one-master cluster down with its replica, and a client cut off from
//! every other node but not from the old master is A9's partition. The idle masters then count
//! as confirmed for `T`, so that a dead replica costs one connection attempt per `T`. Not
//! covered: a promotion that completes between the check and the write (A9's bound for any
//! client connected to an old master), an asked node that was itself cut off through the
//! failover and has not heard of it yet, a map read at a reconnect from a seed named by another
//! address than the map's own (a host name against the cluster's IP), and a forced failover or
//! takeover, which has no time bound.
//!
//! May use: its parent (`ClusterLink`, its masters), the slot map ([`Map`]), `urls`.

use std::time::{Duration, Instant};

use redis::Value;

use super::{ClusterLink, Routed};
use crate::topology::cluster::map::{Map, NO_MASTER};
use crate::topology::urls::address;
use crate::wire::Script;

/// `T` when a master does not tell its `cluster-node-timeout` (`CONFIG GET` refused, as on
/// managed services): below the smallest time any automatic failover takes.
const IDLE_DEFAULT: Duration = Duration::from_millis(500);

/// `T` for a master just connected: its `cluster-node-timeout`, if `CONFIG GET` may read it,
/// else [`IDLE_DEFAULT`].
pub(super) fn threshold(conn: &mut redis::Connection) -> Duration {
    node_timeout(conn).unwrap_or(IDLE_DEFAULT)
}

impl ClusterLink {
    /// Before a batch goes to a master that has not been confirmed for `T` (`idle_after`),
    /// reads the slot map from another node: another master on the link's connection to it,
    /// else a fresh connection to a seed or a node of the last map, never the idle masters
    /// themselves. A map that differs from the link's is taken as after a `MOVED` (new masters:
    /// a failover, observed by the worker before this batch's votes count); the same map
    /// confirms the idle masters. When no other node answers (or there is none), the batch
    /// goes as it would without the check.
    pub(super) fn confirm_idle(
        &mut self,
        batch: &[Routed<'_>],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        let Some(idle_after) = self.idle_after else {
            return Ok(());
        };
        let idle = self.idle(batch, idle_after);
        if idle.is_empty() {
            return Ok(());
        }
        let except: Vec<(String, u16)> = idle
            .iter()
            .map(|&m| (self.masters[m].host.clone(), self.masters[m].port))
            .collect();
        let mut problems = Vec::new();
        let map = match self.map_from_other_masters(&idle, &mut problems) {
            Some(map) => map,
            None => match self.cluster.discover_except(&[], &except, self.timeouts) {
                Ok(map) => map,
                Err(e) => {
                    // Nobody else answers (a one-master cluster whose replicas are down or cut
                    // off from us): nothing tells, and the batch goes, as without the check.
                    // The idle masters count as confirmed for `T`, so that an unreachable
                    // replica costs one attempt per `T`, not one per batch.
                    problems.push(e.to_string());
                    log::debug!(
                        "redlock: node {}: no other node of the cluster confirmed the idle \
                         masters {}: {}",
                        self.cluster.id(),
                        except
                            .iter()
                            .map(|(h, p)| address(h, *p))
                            .collect::<Vec<_>>()
                            .join(","),
                        problems.join("; ")
                    );
                    self.confirm(&idle);
                    return Ok(());
                }
            },
        };
        if map.masters == self.addresses() && map.owner == self.owner {
            self.confirm(&idle);
            return Ok(());
        }
        self.take(map, scripts)
    }

    /// The masters (their indices, sorted) that `batch` goes to and that have not been
    /// confirmed for `idle_after`.
    fn idle(&self, batch: &[Routed<'_>], idle_after: Duration) -> Vec<usize> {
        let now = Instant::now();
        let mut idle: Vec<usize> = batch
            .iter()
            .map(|r| self.owner[r.slot()])
            .filter(|&m| m != NO_MASTER)
            .map(usize::from)
            .filter(|&m| self.is_idle(m, now, idle_after))
            .collect();
        idle.sort_unstable();
        idle.dedup();
        idle
    }

    /// The slot map as another master than the `idle` ones tells it, on the link's connection
    /// to it, the most recently confirmed first (its answer within `T` confirms it if it was
    /// confirmed within `T` before); what each one asked gave instead goes to `problems`.
    pub(super) fn map_from_other_masters(
        &mut self,
        idle: &[usize],
        problems: &mut Vec<String>,
    ) -> Option<Map> {
        let mut others: Vec<usize> = (0..self.masters.len())
            .filter(|m| !idle.contains(m))
            .collect();
        others.sort_by_key(|&m| std::cmp::Reverse(self.masters[m].confirmed));
        let idle_after = self.idle_after;
        for m in others {
            let asked = Instant::now();
            // An idle master's answer is its own word, which could be the stale map of one back
            // from a stop past its failover: it tells of the others, and confirms it only if
            // it was confirmed within `T` before (and answered within `T`, as a batch's replies).
            let keeps = idle_after.is_some_and(|t| !self.is_idle(m, asked, t));
            let master = &mut self.masters[m];
            let reply = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Value>(&mut master.conn);
            match reply.map(|reply| Map::read(&reply, &master.host)) {
                Ok(Some(read)) if !read.masters.is_empty() => {
                    let now = Instant::now();
                    if keeps && idle_after.is_some_and(|t| now.saturating_duration_since(asked) < t)
                    {
                        master.confirmed = Some(now);
                    }
                    return Some(read);
                }
                Ok(_) => problems.push(format!(
                    "{}: CLUSTER SLOTS named no master",
                    master.address()
                )),
                Err(e) => problems.push(format!("{}: {e}", master.address())),
            }
        }
        None
    }

    /// Whether master `m` has not been confirmed for `idle_after` at `now`.
    fn is_idle(&self, m: usize, now: Instant, idle_after: Duration) -> bool {
        self.masters[m]
            .confirmed
            .is_none_or(|at| now.saturating_duration_since(at) >= idle_after)
    }

    /// The masters `idle` count as confirmed from now.
    fn confirm(&mut self, idle: &[usize]) {
        let now = Instant::now();
        for &m in idle {
            self.masters[m].confirmed = Some(now);
        }
    }
}

/// The master's `cluster-node-timeout`, if `CONFIG GET` may read it.
fn node_timeout(conn: &mut redis::Connection) -> Option<Duration> {
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("cluster-node-timeout")
        .query(conn)
        .ok()?;
    let ms: u64 = reply.get(1)?.parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}
