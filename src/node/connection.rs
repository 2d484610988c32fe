//! The life of a worker's connection: opening it (resolving a Sentinel node's master, the
//! server probe and the checks that may refuse the server, loading the scripts), dropping it
//! when it breaks, reconnecting with capped backoff, a `PING` after an idle spell, and lending
//! it to a batch.
//!
//! Owns [`Connection`]: the link, why it is down and when to retry, when it was last used,
//! whether scripts go whole, its write and read buffers, and a Sentinel node's [`Follow`]. Uses
//! `follow.rs`, `server.rs` (which observes what a connect learnt, and logs a refusal),
//! `wait_lane.rs` (the replica checks and warnings at connect), `pipeline.rs` (a batch on the
//! link), `status.rs` and `errors.rs`; the worker (`worker.rs`) drives it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Settings;
use super::errors::{command_refused, describe_connect_error, refusal, tls_hint};
use super::follow::Follow;
use super::job::Job;
use super::pipeline::{self, Buffers, Outgoing, Ran};
use super::server::{Master, Server, Servers};
use super::status::{ConnectEnd, Health};
use super::wait_lane::{self, Wait, WaitLane};
use crate::error::NodeProblem;
use crate::rules::quorum::Vote;
use crate::topology::Link;
use crate::topology::probe::{self, Probe};
use crate::topology::{Linked, Target, Tenure};
use crate::wire::Script;

/// One worker's connection to its node.
pub(super) struct Connection {
    /// The node's index among the client's, and its name (see [`Servers`]).
    index: usize,
    address: String,
    client: Target,
    settings: Settings,
    /// Which server process each node of the client reached (see [`Servers`]).
    servers: Arc<Servers>,
    link: Option<Link>,
    outage: Outage,
    /// When the connection last carried a command (or was opened).
    used_at: Instant,
    /// The connection's user may not run `SCRIPT LOAD` (a managed service, a tight ACL): its
    /// scripts go whole with `EVAL` instead of by hash with `EVALSHA`.
    inline_scripts: bool,
    bufs: Buffers,
    /// A Sentinel node's follow of its watch.
    follow: Option<Follow>,
    health: Arc<Health>,
}

/// Why the connection is down, and when to try again.
struct Outage {
    reason: String,
    /// No connection attempt before this.
    retry_at: Instant,
    /// How long after the next failed attempt.
    backoff: Duration,
}

/// What a connect brought.
struct Opened {
    link: Link,
    probe: Probe,
    /// `SCRIPT LOAD` was refused: scripts go whole with `EVAL`.
    inline_scripts: bool,
    master: Master,
}

impl Connection {
    pub(super) fn new(
        index: usize,
        client: Target,
        settings: Settings,
        servers: Arc<Servers>,
        follow: Option<Follow>,
        health: Arc<Health>,
    ) -> Connection {
        Connection {
            index,
            address: client.address(),
            client,
            settings,
            servers,
            link: None,
            outage: Outage {
                reason: String::from("not connected yet"),
                retry_at: Instant::now(),
                backoff: crate::wire::BACKOFF_MIN,
            },
            used_at: Instant::now(),
            inline_scripts: false,
            bufs: Buffers::new(),
            follow,
            health,
        }
    }

    pub(super) fn is_up(&self) -> bool {
        self.link.is_some()
    }

    /// While down: no connection attempt before this.
    pub(super) fn retry_at(&self) -> Instant {
        self.outage.retry_at
    }

    /// Lets the next attempt come at `now` (the master changed: no backoff).
    pub(super) fn retry_from(&mut self, now: Instant) {
        self.outage.retry_at = now;
    }

    /// Why a job finds the connection down.
    pub(super) fn down(&self) -> NodeProblem {
        NodeProblem::Unavailable(self.outage.reason.clone())
    }

    /// How long the connection has carried nothing.
    pub(super) fn idle(&self) -> Duration {
        self.used_at.elapsed()
    }

    /// The connection carried a command at `now`.
    pub(super) fn used(&mut self, now: Instant) {
        self.used_at = now;
    }

    pub(super) fn io_timeout(&self) -> Duration {
        self.settings.io_timeout
    }

    pub(super) fn node_timeout(&self) -> Duration {
        self.settings.node_timeout
    }

    pub(super) fn link_mut(&mut self) -> Option<&mut Link> {
        self.link.as_mut()
    }

    /// Whether this is a Sentinel node's connection, which follows its watch.
    pub(super) fn follows_a_watch(&self) -> bool {
        self.follow.is_some()
    }

    /// The newest `config-epoch` a Sentinel node's watch heard named.
    pub(super) fn newest_epoch(&self) -> Option<u64> {
        self.follow.as_ref().and_then(Follow::newest_epoch)
    }

    /// For a Sentinel node: whether the watch has heard the sentinels name another master than
    /// the connection's (see [`Follow::switched`]); then the connection is dropped. Called
    /// before every batch.
    pub(super) fn follow_the_sentinels(&mut self) -> bool {
        if self.link.is_none() {
            return false;
        }
        let Some(switched) = self.follow.as_mut().and_then(|f| f.switched(&self.client)) else {
            return false;
        };
        self.disconnect(&switched);
        true
    }

    /// Checks an idle connection with a `PING`.
    pub(super) fn ping(&mut self) -> redis::RedisResult<()> {
        let conn = self
            .link
            .as_mut()
            .expect("ping is called with a connection");
        conn.ping()?;
        self.used_at = Instant::now();
        Ok(())
    }

    /// Runs a batch on the connection (see `pipeline.rs`), sent at `sent`, with `TIME` if
    /// `time`, and ended by `wait` on a `WAIT` lane.
    pub(super) fn execute(
        &mut self,
        jobs: &[Job],
        time: bool,
        wait: Option<Wait>,
        sent: Instant,
    ) -> redis::RedisResult<Ran> {
        let out = Outgoing {
            jobs,
            inline_scripts: self.inline_scripts,
            scripts: self.settings.scripts,
            time,
            wait,
            sent,
        };
        let sentinel = self.client.is_sentinel();
        match self
            .link
            .as_mut()
            .expect("execute is called with a connection")
        {
            Link::Plain(conn) => pipeline::plain(conn, &mut self.bufs, &out, sentinel),
            Link::Cluster(link) => pipeline::cluster(link, &out),
        }
    }

    /// Takes back the votes of a batch that has been answered (see [`Buffers::recycle`]).
    pub(super) fn recycle(&mut self, votes: Vec<Vote>) {
        self.bufs.recycle(votes);
    }

    /// Connects (see [`open`](Connection::open)), and has `server` observe what the connect
    /// learnt; on failure, notes why and backs off. Says how it ended for the stall check: on
    /// a timeout (a node that accepts connections but does not answer), cut short by a signal,
    /// or otherwise.
    pub(super) fn connect(
        &mut self,
        server: &mut Server,
        lane: Option<&mut WaitLane>,
    ) -> ConnectEnd {
        // What the watch published before this resolution is no news to it.
        let generation = self.follow.as_ref().map_or(0, Follow::generation);
        match self.open(server, lane) {
            Ok(opened) => {
                let master = opened.master;
                if let Some(follow) = &mut self.follow {
                    follow.connected(
                        generation,
                        master.address.clone().map(|a| (a, master.epoch)),
                    );
                }
                server.observe(opened.probe, master, self.newest_epoch());
                self.inline_scripts = opened.inline_scripts;
                self.link = Some(opened.link);
                self.used_at = Instant::now();
                self.outage.backoff = crate::wire::BACKOFF_MIN;
                self.health.connected.store(true, Ordering::Relaxed);
                self.health.connects.fetch_add(1, Ordering::Relaxed);
                ConnectEnd::Answered
            }
            Err(e) => {
                let tls = self.client.is_tls();
                let outage = &mut self.outage;
                outage.reason = describe_connect_error(&e) + tls_hint(&e, tls);
                // Counted from the end of the attempt, which can itself take a timeout.
                outage.retry_at = Instant::now() + outage.backoff;
                outage.backoff = crate::wire::next_backoff(outage.backoff, &e);
                self.health.set_last_error(outage.reason.clone());
                if e.is_timeout() {
                    ConnectEnd::TimedOut
                } else if crate::wire::interrupted(&e) {
                    ConnectEnd::Interrupted
                } else {
                    ConnectEnd::Answered
                }
            }
        }
    }

    /// Drops a broken connection; the next request tries to reconnect at once.
    pub(super) fn disconnect(&mut self, e: &redis::RedisError) {
        self.link = None;
        if let Some(follow) = &mut self.follow {
            follow.disconnected();
        }
        self.outage.reason = describe_connect_error(e);
        self.outage.retry_at = Instant::now();
        self.health.connected.store(false, Ordering::Relaxed);
        self.health.set_last_error(self.outage.reason.clone());
    }

    /// Connects, probes the server (refusing it before any script runs if it cannot hold
    /// locks safely: see `probe.rs`) and loads the scripts; says whether they must go whole
    /// with `EVAL`, because `SCRIPT LOAD` was refused.
    /// For a Sentinel node, the master is resolved first (see `topology/sentinel/`), and what was
    /// learnt of it comes back too. On a `WAIT` lane, `lane` learns the replicas.
    fn open(
        &mut self,
        server: &mut Server,
        lane: Option<&mut WaitLane>,
    ) -> redis::RedisResult<Opened> {
        let Linked {
            link: mut conn,
            master,
            tenure,
            epoch,
        } = self
            .client
            .link(self.settings.connect_timeout, self.settings.io_timeout)?;
        if let (Some(follow), Some(reached)) = (&self.follow, &master) {
            follow.refuse_older(reached, epoch)?;
        }
        let scripts: Vec<&Script> = self
            .settings
            .scripts
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect();
        let mut probe = conn.probe(&scripts)?;
        self.warn(&mut probe, master.is_some(), tenure.as_ref(), server);
        // Each master's connected replicas: the node's one master, or every master of a cluster
        // (each named in the warnings), all of which need `min_replicas`.
        let replicas = wait_lane::probed_replicas(&conn, &probe);
        let cluster_grace = self.client.is_cluster() && self.settings.restart_grace.is_some();
        wait_lane::warn_of_replicas(
            &mut probe,
            &replicas,
            self.settings.min_replicas,
            cluster_grace,
        );
        if let Some(refused) = probe.assessment.refusal(self.settings.strict_servers) {
            server.log_once(std::slice::from_ref(&refused));
            return Err(refusal("refused by the server probe", refused));
        }
        self.admit(&probe)?;
        if let Some(lane) = &lane {
            lane.check_wait(&mut conn)?;
        }
        if let Some(k) = self.settings.min_replicas {
            wait_lane::warn_of_too_few(&mut probe, &replicas, k);
            if let Some(lane) = lane {
                lane.counted(&replicas, Instant::now());
            }
        }
        let inline_scripts = self.load_scripts(&mut conn, &mut probe)?;
        Ok(Opened {
            link: conn,
            probe,
            inline_scripts,
            master: Master {
                address: master,
                tenure,
                epoch,
            },
        })
    }

    /// The probe's warnings of a Sentinel node's (or a cluster's: `resolved`) master, and of a
    /// clock guard without `TIME`.
    fn warn(&self, probe: &mut Probe, resolved: bool, tenure: Option<&Tenure>, server: &Server) {
        if resolved {
            probe::expect_replicas(&mut probe.assessment);
            if self.settings.restart_grace.is_some() && tenure.is_some_and(|t| !t.records) {
                // Without the sentinels' records the master's time as master is unbounded: it
                // counts as new, so the node sits out restart_grace after every connect.
                probe.assessment.warnings.push(
                    "the sentinels refuse SENTINEL MASTER, so how long this master has been the \
                     master is unknown: the node stays out of acquire quorums for restart_grace \
                     after every connect; allow +sentinel|master for the sentinel user"
                        .to_owned(),
                );
            }
        }
        if server.clock_guard_on()
            && let Some(why) = &probe.time_error
        {
            probe.assessment.warnings.push(format!(
                "TIME failed ({why}): the clock guard is off for this node; allow TIME for this \
                 user (+time)"
            ));
        }
    }

    /// Refuses a server that another node of the client reached already, and, with
    /// `restart_grace`, one that does not tell its `run_id` and uptime.
    fn admit(&self, probe: &Probe) -> redis::RedisResult<()> {
        if let Some(run_id) = &probe.report.run_id
            && let Some((j, other)) = self.servers.claim(self.index, run_id, &self.address)
        {
            return Err(refusal(
                "the same server as another node",
                format!(
                    "node {} ({}) reached the same server process as node {j} ({other}), run_id \
                     {run_id}: one server must not count twice toward the quorum; give each \
                     server once (an alias, a proxy or a Sentinel group's current master named \
                     again?)",
                    self.index, self.address
                ),
            ));
        }
        let identified = probe.report.run_id.is_some() && probe.report.uptime.is_some();
        if self.settings.restart_grace.is_some() && !identified {
            // Without a grace period the identity is only informative: a server that denies or
            // renames INFO (a tight ACL, a managed service) is still usable.
            return Err(refusal(
                "restart_grace needs the node's uptime, but INFO server failed",
                format!(
                    "{}; allow INFO for this user (+info), or unset restart_grace",
                    probe
                        .report
                        .info_error
                        .as_deref()
                        .unwrap_or("no run_id or uptime_in_seconds")
                ),
            ));
        }
        Ok(())
    }

    /// Loads the scripts; says whether they must go whole with `EVAL` instead, because
    /// `SCRIPT LOAD` was refused (a warning says so).
    fn load_scripts(&self, conn: &mut Link, probe: &mut Probe) -> redis::RedisResult<bool> {
        match conn.load_scripts(self.settings.scripts, probe.scripts_present.as_deref()) {
            Ok(()) => Ok(false),
            Err(e) if command_refused(&e) => {
                probe.assessment.warnings.push(format!(
                    "SCRIPT LOAD is refused ({e}): scripts go whole with EVAL on this node, each \
                     call carrying its script's source; allow +script|load for this user to send \
                     them by hash"
                ));
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }
}
