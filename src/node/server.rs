//! What a worker knows of the server process behind its connection, and whether that
//! server's yes counts now.
//!
//! Owns [`Server`]: which process the connection reached (its `run_id`, uptime and what the
//! probe said of it), its restarts and a Sentinel node's failovers, the restart grace, the clock
//! guard's samples, and the warnings last logged; it publishes all of it to the worker's
//! [`Health`]. Owns [`Servers`] too, which keeps two nodes of one client from reaching the same
//! process. Uses `status.rs`, the clock guard and the probe's report; the connection
//! (`connection.rs`) and the batch (`worker.rs`) hand it what they read.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::status::{Health, Identity};
use crate::error::NodeProblem;
use crate::rules::clock::{Event, Guard, Readings};
use crate::sync::relock;
use crate::topology::probe::{self, Probe, ServerReport};
use crate::topology::{Target, Tenure};

/// Clock warnings kept for `node_status()`.
const CLOCK_WARNINGS_KEPT: usize = 4;

/// The warning of a node whose URL says `#insecure`, among its server warnings from every
/// connect on (it refuses nothing, even with `strict_servers`).
const INSECURE_WARNING: &str = "its TLS certificate is not verified (#insecure in its URL): \
    anyone on the network path can impersonate it and read the password; give its CA with \
    tls_ca_file instead (TLSCAFile in Go, --tls-ca-file for the redlock command)";

/// What resolving a Sentinel node's master told (nothing for a standalone node).
pub(super) struct Master {
    /// `host:port` (a cluster's masters, comma-separated).
    pub address: Option<String>,
    /// What the sentinels said of its time as the master (a Sentinel node's only).
    pub tenure: Option<Tenure>,
    /// The answering sentinel's `config-epoch`.
    pub epoch: Option<u64>,
}

/// The worker's view of its server.
pub(super) struct Server {
    /// The node's name in logs.
    address: String,
    /// The node's URL says `#insecure`.
    insecure: bool,
    /// The node is a Redis Cluster.
    cluster: bool,
    restart_grace: Option<Duration>,
    /// Whether this worker logs what it notices: a `WAIT` lane logs nothing of its own, since
    /// its node's first worker logs the same server.
    logs: bool,
    /// The clock guard (see `clock.rs`).
    guard: Guard,
    /// Until then, with `restart_grace` set, this node's acquire successes do not count.
    grace_until: Option<Instant>,
    /// The warnings last logged, so that a reconnect every second does not repeat them.
    logged: Vec<String>,
    health: Arc<Health>,
}

/// How a connect's master compares with the last connect's.
struct Change {
    previous_master: Option<String>,
    /// A Sentinel node whose master is at another address now: a failover.
    moved: bool,
    /// Another master process, or the same one with another dataset lineage (promoted, or
    /// restarted empty): it may lack keys the previous one acknowledged. A restart.
    new_master: bool,
}

impl Server {
    /// `logs`: whether this worker logs what it notices (a `WAIT` lane's does not).
    pub(super) fn new(
        client: &Target,
        restart_grace: Option<Duration>,
        logs: bool,
        guard: Guard,
        health: Arc<Health>,
    ) -> Server {
        Server {
            address: client.address(),
            insecure: client.is_insecure(),
            cluster: client.is_cluster(),
            restart_grace,
            logs,
            guard,
            grace_until: None,
            logged: Vec::new(),
            health,
        }
    }

    /// Whether the clock guard is on.
    pub(super) fn clock_guard_on(&self) -> bool {
        self.guard.is_on()
    }

    /// Whether a batch (`samples_clock`: with an acquire or an extension) carries `TIME`.
    pub(super) fn wants_time(&self, samples_clock: bool) -> bool {
        self.guard.wants_time(samples_clock)
    }

    /// Logs `warnings` unless they are the ones logged last.
    pub(super) fn log_once(&mut self, warnings: &[String]) {
        if self.logged != warnings && self.logs {
            for w in warnings {
                log::warn!("redlock: node {}: {w}", self.address);
            }
            self.logged = warnings.to_vec();
        }
    }

    /// Records which server process this connection reached and what it said about itself,
    /// notices restarts (and, for a Sentinel node, changes of master), and gives the clock guard
    /// its sample. `newest`: the newest `config-epoch` a Sentinel node's watch heard named.
    pub(super) fn observe(&mut self, probe: Probe, master: Master, newest: Option<u64>) {
        let now = Instant::now();
        let Probe {
            report,
            mut assessment,
            time,
            masters_time,
            ..
        } = probe;
        if self.insecure {
            assessment.warnings.push(INSECURE_WARNING.to_owned());
        }
        self.log_once(&assessment.warnings);
        let change = self.change(&report, &master);
        if change.moved {
            self.new_clock(change.previous_master.as_deref(), master.address.as_deref());
        }
        self.guard.connected(time.is_some());
        // The previous sample survives a reconnect (a restarted process still reads the same
        // host clock), so a jump while disconnected is seen here. A cluster's other masters: a
        // first sample of each, or the next one after a reconnect.
        self.sample(
            Readings {
                node: time,
                masters: masters_time,
            },
            now,
        );
        let health = Arc::clone(&self.health);
        let Ok(mut identity) = health.identity.lock() else {
            return;
        };
        identity.persistence = probe::persistence(&report);
        (identity.server_name, identity.server_version) = probe::server(&report);
        identity.server_warnings = assessment.warnings;
        if master.address.is_some() {
            self.note_master(&mut identity, &change, master.address.clone(), &report);
        }
        let (Some(run_id), Some(uptime)) = (report.run_id, report.uptime) else {
            identity.run_id = None;
            identity.uptime = None;
            return;
        };
        self.note_restart(&mut identity, &run_id, uptime, change.moved);
        // A Sentinel node's master has been the master for no longer than the sentinels have
        // known it as such (a promoted replica is old by its uptime), and for no time at all
        // where no sentinel's record bounds it (see `sentinel::Tenure`).
        let age = match &master.tenure {
            Some(tenure) => tenure.lower_bound(Some(&run_id), newest).min(uptime),
            // A cluster records no promotion time: a master promoted since it started
            // (`master_replid2` set) counts as new, a one-way tripwire (docs/guarantees.md, A9).
            None if self.cluster && report.promoted => Duration::ZERO,
            None => uptime,
        };
        identity.grace_until = self.start_grace(age, change.new_master, now);
        identity.uptime = Some((uptime, now));
        identity.run_id = Some(run_id);
    }

    /// How the master `master` reached compares with the last connect's (a Sentinel node's or a
    /// cluster's; `report`: what the probe said of it).
    fn change(&self, report: &ServerReport, master: &Master) -> Change {
        let (previous_master, previous_run_id, previous_replid) = self
            .health
            .identity
            .lock()
            .map(|i| (i.master.clone(), i.run_id.clone(), i.replid.clone()))
            .unwrap_or_default();
        let sentinel = master.address.is_some();
        let moved = sentinel && previous_master.is_some() && master.address != previous_master;
        let differs = |old: &Option<String>, new: &Option<String>| matches!((old, new), (Some(a), Some(b)) if a != b);
        let new_master = sentinel
            && (moved
                || differs(&previous_run_id, &report.run_id)
                || differs(&previous_replid, &report.replid));
        Change {
            previous_master,
            moved,
            new_master,
        }
    }

    /// After a change of master: the clock sample belongs to the server, not to the logical
    /// node. On a cluster, the node's clock is the first master's, and each other master has
    /// its own.
    fn new_clock(&mut self, old: Option<&str>, new: Option<&str>) {
        match (self.cluster, old, new) {
            (true, Some(old), Some(new)) => {
                let first = |list: &str| list.split(',').next().map(str::to_owned);
                let masters: Vec<&str> = new.split(',').collect();
                self.guard.new_masters(first(old) != first(new), &masters);
            }
            _ => self.guard.new_server(),
        }
    }

    /// Records a Sentinel node's (or a cluster's) master, counting and logging a failover.
    fn note_master(
        &self,
        identity: &mut Identity,
        change: &Change,
        master: Option<String>,
        report: &ServerReport,
    ) {
        if change.moved {
            identity.failovers += 1;
        }
        if change.moved && self.logs {
            log::warn!(
                "redlock: node {}: its master changed from {} to {} (a failover){}",
                self.address,
                change.previous_master.as_deref().unwrap_or("?"),
                master.as_deref().unwrap_or("?"),
                match self.restart_grace {
                    Some(g) => format!(
                        "; not counted toward acquire quorums for {} ms (restart_grace), \
                         since the new master may lack lock keys the old one had",
                        g.as_millis()
                    ),
                    None => "; the new master may lack lock keys the old one had: \
                             consider restart_grace"
                        .to_owned(),
                }
            );
        }
        identity.master = master;
        identity.replid = report.replid.clone();
    }

    /// Counts and logs a restart: another `run_id` than the last connect's, at the same master.
    fn note_restart(&self, identity: &mut Identity, run_id: &str, uptime: Duration, moved: bool) {
        let previous = identity.run_id.take();
        let Some(old) = previous.filter(|old| *old != run_id && !moved) else {
            return;
        };
        identity.restarts += 1;
        // A WAIT lane's is logged by the node's first worker.
        if self.logs {
            log::warn!(
                "redlock: node {} restarted (run_id {old} -> {run_id}, up {} s){}",
                self.address,
                uptime.as_secs(),
                if self.restart_grace.is_some() {
                    ""
                } else {
                    "; if it runs without persistence it may have lost lock keys: \
                     consider restart_grace"
                }
            );
        }
    }

    /// Starts the restart grace of a server that has been the master for `age` (a change of
    /// master, `new_master`, is a restart, counted from when it is seen); a grace under way is
    /// not ended by a reconnect. Gives when the grace ends.
    fn start_grace(&mut self, age: Duration, new_master: bool, now: Instant) -> Option<Instant> {
        let mut until = grace_until(self.restart_grace, age, now);
        if new_master && let Some(grace) = self.restart_grace {
            until = until.max(Some(now + grace));
        }
        self.grace_until = until.max(self.grace_until.filter(|t| *t > now));
        self.grace_until
    }

    /// Gives the clock guard a batch's `TIME` readings (the node's, and a cluster's other
    /// masters'), and shows what it reports.
    pub(super) fn sample(&mut self, time: Readings, now: Instant) {
        if let Some(time) = time.node {
            let events = self.guard.sample(time, now);
            self.record(events);
        }
        for (master, time) in time.masters {
            let events = self.guard.sample_master(&master, time, now);
            self.record(events);
        }
    }

    /// Lets the clock guard cross-check the node's offset against the others' before a batch's
    /// votes count (`has_acquire`: the batch carries an acquire).
    pub(super) fn before_votes(&mut self, has_acquire: bool, now: Instant) {
        let events = self.guard.before_votes(has_acquire, now);
        self.record(events);
    }

    /// Shows what the clock guard reported in `node_status()`.
    fn record(&self, events: Vec<Event>) {
        if let Some(ms) = self.guard.offset_ms() {
            self.health.set_clock_offset(ms);
        }
        if events.is_empty() {
            return;
        }
        let Ok(mut identity) = self.health.identity.lock() else {
            return;
        };
        for event in events {
            match event {
                Event::Quarantined(until, why) => identity.quarantine = Some((until, why)),
                Event::Warning(w) => {
                    let kept = &mut identity.clock_warnings;
                    if kept.len() == CLOCK_WARNINGS_KEPT {
                        kept.remove(0);
                    }
                    kept.push(w);
                }
            }
        }
    }

    /// Why this node's acquire successes do not count now, if they do not.
    /// A batch sent at `sent` ran on the node after that, so it is held out while a grace or
    /// quarantine lasted past `sent`; `remaining` is counted from `now`.
    pub(super) fn held_out(&self, sent: Instant, now: Instant) -> Option<NodeProblem> {
        match self.grace_until.filter(|until| *until > sent) {
            Some(until) => Some(NodeProblem::InGrace {
                remaining: until.saturating_duration_since(now),
            }),
            None => self.guard.held_out(sent, now),
        }
    }
}

/// Until when a node whose `INFO` reported `uptime` (read before `now`) is in its restart
/// grace, if it still is.
///
/// `uptime_in_seconds` is `floor(now) − floor(start)` in whole seconds of the server's wall
/// clock, so it overstates the process's age by up to 1 s: a process started at x.95 s reports
/// 1 s at (x+1).05 s, when it is 0.1 s old. The age is at least `uptime − 1 s` (saturating), and
/// a little more by `now`, so the grace counted from that ends no earlier than `grace` after the
/// process started. (A step of the node's wall clock after the start overstates it too; that is
/// the clock guard's business.)
fn grace_until(grace: Option<Duration>, uptime: Duration, now: Instant) -> Option<Instant> {
    let age = uptime.saturating_sub(Duration::from_secs(1));
    grace
        .and_then(|grace| grace.checked_sub(age))
        .filter(|left| !left.is_zero())
        .map(|left| now + left)
}

/// Which server process (`run_id`) each node of one client reached at its last connect, so that
/// one server reached through two URLs (an alias, `localhost` and `127.0.0.1`, a proxy, a
/// Sentinel group's master named again as a standalone node) cannot vote twice: the build-time
/// check compares only the URLs. The node that connects second is refused.
pub(crate) struct Servers {
    run_ids: Mutex<Vec<Option<(String, String)>>>,
}

impl Servers {
    pub(crate) fn new(nodes: usize) -> Servers {
        Servers {
            run_ids: Mutex::new(vec![None; nodes]),
        }
    }

    /// Records that node `index` (at `address`) reached the server `run_id`, unless another
    /// node already did: then that node's index and address.
    pub(super) fn claim(
        &self,
        index: usize,
        run_id: &str,
        address: &str,
    ) -> Option<(usize, String)> {
        let mut run_ids = relock(&self.run_ids);
        if let Some((j, (_, other))) = run_ids.iter().enumerate().find_map(|(j, r)| {
            r.as_ref()
                .filter(|(id, _)| j != index && id == run_id)
                .map(|r| (j, r))
        }) {
            return Some((j, other.clone()));
        }
        run_ids[index] = Some((run_id.to_owned(), address.to_owned()));
        None
    }
}
