//! A node's `WAIT` lane (`min_replicas`): a second worker and connection for the commands
//! whose vote waits for replicas, acquisitions and extensions, each batch followed by
//! `WAIT k timeout`.
//!
//! `WAIT` blocks the connection it runs on, and must run on the one that made the write, so it
//! gets a connection of its own: a lagging replica delays only the callers that need its
//! acknowledgement, never a release, an inspection or a queue command on the first one.
//!
//! Owns both sides of the lane: the handle's [`Lane`] (its sender, its published [`Health`],
//! and which jobs it carries), and the worker's [`WaitLane`] (`min_replicas`, the replicas
//! counted at the last check, the `WAIT` that ends a batch and how its answer counts), with the
//! checks and warnings about replicas at connect. Uses `job.rs`, `status.rs`, `errors.rs` and
//! the topology's links and probe; the worker (`worker.rs`, `connection.rs`) drives it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::errors::command_refused;
use super::job::{Job, OnLane, Pending};
use super::queue::JobSender;
use super::status::Health;
use crate::error::NodeProblem;
use crate::sync::relock;
use crate::topology::Link;
use crate::topology::probe::{self, Probe};
use crate::wire::Command;

/// How often a `WAIT` lane re-reads the replicas of a node that had too few.
const REPLICAS_RECHECK: Duration = Duration::from_secs(1);
/// The share of the time left to a batch's earliest deadline that its `WAIT` may take.
/// Redis ends a timed-out `WAIT` at its event loop's next wake-up, up to `1000 / hz` ms (100 ms
/// by default) late on an idle server, so the lane also stops reading for it at `READ_SHARE`
/// (see [`Wait`]).
const WAIT_SHARE: (u32, u32) = (1, 2);
const READ_SHARE: (u32, u32) = (3, 4);

/// Whether a command's vote waits for replicas, with `min_replicas`: what takes or prolongs a
/// lock (a release needs no acknowledgement: a lost release only lets the key expire).
pub(super) fn needs_ack(command: &Command) -> bool {
    command.acquire || command.samples_clock
}

/// The handle's side of a node's `WAIT` lane.
pub(super) struct Lane {
    pub tx: JobSender,
    pub health: Arc<Health>,
    /// The key and token of each acquisition or extension the lane has not answered yet.
    pending: Pending,
}

impl Lane {
    pub(super) fn new(tx: JobSender, health: Arc<Health>) -> Lane {
        Lane {
            tx,
            health,
            pending: Pending::default(),
        }
    }

    /// Whether the lane carries `job`: an acquisition or an extension (marked as pending on the
    /// lane until it is done with), or a cleanup of a key and token whose acquisition or
    /// extension it has not answered yet (see `Node::send`).
    pub(super) fn carries(&self, job: &mut Job) -> bool {
        if needs_ack(&job.command) {
            job.on_lane = Some(OnLane::mark(&self.pending, job));
            return true;
        }
        relock(&self.pending)
            .iter()
            .any(|(k, t)| *k == job.key && *t == job.token)
    }
}

/// Each master's connected replicas as a probe or `INFO replication` read them: `None` for the
/// node's one master (else the cluster master's address), and `None` for a master that did not
/// tell.
pub(super) type Replicas = Vec<(Option<String>, Option<u64>)>;

/// The worker's side of a node's `WAIT` lane.
pub(super) struct WaitLane {
    /// `min_replicas`, which every batch waits for.
    k: u32,
    /// The node's connected replicas at the last check (on a cluster, those of its master with
    /// the fewest, named), and when that was, while they are fewer than `k` (see
    /// [`shortage`](WaitLane::shortage)).
    replicas: Option<(Option<String>, u64, Instant)>,
}

impl WaitLane {
    pub(super) fn new(k: u32) -> WaitLane {
        WaitLane { k, replicas: None }
    }

    /// Notes the replicas just read (at a connect, or after a cluster's masters changed): if a
    /// master has fewer than `k`, the next batches are refused at once until it has enough.
    pub(super) fn counted(&mut self, replicas: &Replicas, at: Instant) {
        self.replicas = short_master(replicas, self.k).map(|(m, n)| (m, n, at));
    }

    /// If the node had fewer connected replicas than `min_replicas` at the last check (on a
    /// cluster: one of its masters had): why its batches are refused unsent, re-reading
    /// `INFO replication` (of every master) on `link` once the check is `REPLICAS_RECHECK` old.
    /// A read that fails gives its error: the caller drops the connection and refuses the batch.
    pub(super) fn shortage(
        &mut self,
        link: Option<&mut Link>,
    ) -> redis::RedisResult<Option<NodeProblem>> {
        let Some((_, _, checked)) = &self.replicas else {
            return Ok(None);
        };
        if checked.elapsed() >= REPLICAS_RECHECK {
            let Some(link) = link else {
                return Ok(None);
            };
            let replicas = read_replicas(link)?;
            self.counted(&replicas, Instant::now());
        }
        Ok(self
            .replicas
            .as_ref()
            .map(|(master, connected, _)| NodeProblem::TooFewReplicas {
                connected: *connected,
                required: self.k,
                master: master.clone(),
            }))
    }

    /// The `WAIT` that ends a batch sent at `sent`, if the batch has a command that needs it (a
    /// cleanup that followed its acquisition over the lane (`Node::send`) needs no
    /// acknowledgment: a batch of cleanups alone has no `WAIT`, and a cleanup's yes counts as
    /// it is). It may take `WAIT_SHARE` of the time left to the batch's earliest deadline.
    pub(super) fn wait(&self, batch: &[Job], sent: Instant, io_timeout: Duration) -> Option<Wait> {
        if !batch.iter().any(|r| needs_ack(&r.command)) {
            return None;
        }
        let left = batch
            .iter()
            .filter_map(|r| r.deadline)
            .min()
            .map_or(io_timeout / 2, |d| d.saturating_duration_since(sent));
        let ms = (left * WAIT_SHARE.0 / WAIT_SHARE.1).as_millis().max(1);
        Some(Wait {
            k: self.k,
            ms: u64::try_from(ms).unwrap_or(u64::MAX),
            answer_by: sent + left * READ_SHARE.0 / READ_SHARE.1,
            io_timeout,
        })
    }

    /// At connect: whether this user may run `WAIT`, before any lock is written that a refused
    /// `WAIT` would leave uncounted (on every master of a cluster). `WAIT 0` answers at once.
    pub(super) fn check_wait(&self, link: &mut Link) -> redis::RedisResult<()> {
        let wait0 = |c: &mut redis::Connection| redis::cmd("WAIT").arg(0).arg(1).query::<i64>(c);
        let tried = match link {
            Link::Plain(c) => wait0(c).map(|_| ()),
            Link::Cluster(link) => link.on_each(wait0).map(|_| ()),
        };
        match tried {
            Err(e) if command_refused(&e) => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "min_replicas needs the WAIT command",
                format!(
                    "WAIT is refused ({e}): allow +wait for this user, or unset min_replicas ({})",
                    self.k
                ),
            ))),
            tried => tried,
        }
    }
}

/// Each master's connected replicas as the connect's probe read them: the node's one master,
/// or every master of a cluster.
pub(super) fn probed_replicas(link: &Link, probe: &Probe) -> Replicas {
    match link {
        Link::Plain(_) => vec![(None, probe.report.connected_replicas)],
        Link::Cluster(link) => link
            .probed_replicas()
            .into_iter()
            .map(|(m, n)| (Some(m), n))
            .collect(),
    }
}

/// Re-reads `INFO replication` (of every master of a cluster).
fn read_replicas(link: &mut Link) -> redis::RedisResult<Replicas> {
    let info = |conn: &mut redis::Connection| {
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(conn)
            .map(|text| {
                let mut report = probe::ServerReport::default();
                probe::parse_info(&mut report, &text);
                // As before a check could fail: a master that does not tell has none.
                Some(report.connected_replicas.unwrap_or(0))
            })
    };
    match link {
        Link::Plain(conn) => info(conn).map(|n| vec![(None, n)]),
        Link::Cluster(link) => link
            .on_each(info)
            .map(|all| all.into_iter().map(|(m, n)| (Some(m), n)).collect()),
    }
}

/// A warning about `master` (`None`: the node's one master, which needs no name).
fn named(master: &Option<String>, warning: String) -> String {
    match master {
        Some(m) => format!("master {m}: {warning}"),
        None => warning,
    }
}

/// At connect, before the checks that may refuse the server: what each master's replicas mean
/// for `min_replicas`, all of which need it. Without it, on a cluster with `restart_grace`,
/// a master with replicas is not covered after a failover.
pub(super) fn warn_of_replicas(
    probe: &mut Probe,
    replicas: &Replicas,
    min_replicas: Option<u32>,
    cluster_grace: bool,
) {
    if let Some(k) = min_replicas {
        for (master, n) in replicas {
            match n {
                // Every replica acknowledges each counted lock write, so whichever is
                // promoted has it: the probe's warning about replicas does not apply. (A
                // cluster's merged probe expects replicas anyway.)
                Some(n) if *n <= u64::from(k) && master.is_none() => {
                    probe::expect_replicas(&mut probe.assessment);
                }
                Some(n) if *n > u64::from(k) => probe.assessment.warnings.push(named(
                    master,
                    format!(
                        "min_replicas {k} is below its {n} connected replicas: a failover \
                         may promote one that did not acknowledge a lock; set min_replicas \
                         to {n}"
                    ),
                )),
                Some(_) => {}
                None => {}
            }
        }
    } else if cluster_grace {
        for (master, n) in replicas {
            if let Some(n) = n.filter(|n| *n > 0) {
                probe.assessment.warnings.push(named(
                    master,
                    format!(
                        "{n} connected replica(s) and no min_replicas: a client that starts \
                         after a failover of this master is not covered by restart_grace (a \
                         cluster records no promotion time); set min_replicas to {n}"
                    ),
                ));
            }
        }
    }
}

/// At connect, once the server is accepted: the masters with fewer connected replicas than
/// `min_replicas` `k`, or that did not tell.
pub(super) fn warn_of_too_few(probe: &mut Probe, replicas: &Replicas, k: u32) {
    for (master, connected) in replicas {
        match connected {
            Some(n) if *n < u64::from(k) => probe.assessment.warnings.push(named(
                master,
                format!(
                    "{n} replicas connected (INFO replication connected_slaves), fewer \
                     than min_replicas {k}: acquisitions and extensions on this node \
                     fail until enough replicas are attached"
                ),
            )),
            None => probe.assessment.warnings.push(named(
                master,
                format!(
                    "INFO did not tell how many replicas are connected: min_replicas {k} \
                     is only checked by WAIT, each short vote waiting out its timeout; \
                     allow INFO for this user (+info)"
                ),
            )),
            Some(_) => {}
        }
    }
}

/// The `WAIT k ms` that ends a `WAIT` lane's pipeline, and until when its reply is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wait {
    pub k: u32,
    pub ms: u64,
    /// Past this, the callers are answered that the replicas did not acknowledge, and redis-rs
    /// skips the late reply when the connection reads its next one.
    pub answer_by: Instant,
    /// The connection's read timeout otherwise.
    io_timeout: Duration,
}

/// What the `WAIT` of a pipeline answered.
pub(super) enum Acked {
    Reply(Value),
    /// No reply by `answer_by`, this long after the pipeline was sent.
    Late(Duration),
}

impl Wait {
    /// Reads the `WAIT`'s reply until `answer_by`.
    pub(super) fn read(
        &self,
        conn: &mut redis::Connection,
        sent: Instant,
    ) -> redis::RedisResult<Acked> {
        let left = self
            .answer_by
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        conn.set_read_timeout(Some(left))?;
        let reply = conn.recv_response();
        conn.set_read_timeout(Some(self.io_timeout))?;
        match reply {
            Ok(value) => Ok(Acked::Reply(value)),
            Err(e) if e.is_timeout() => Ok(Acked::Late(sent.elapsed())),
            Err(e) => Err(e),
        }
    }
}

/// Why a yes does not count, when `WAIT` answered fewer than `k` replicas (or not with a
/// number, or not in time).
pub(super) fn acknowledged(acked: &Acked, wait: &Wait) -> Option<NodeProblem> {
    let k = wait.k;
    let reply = match acked {
        Acked::Reply(reply) => reply,
        Acked::Late(waited) => {
            return Some(NodeProblem::NotReplicated {
                acknowledged: 0,
                required: k,
                waited: *waited,
            });
        }
    };
    match reply {
        Value::Int(n) if *n >= i64::from(k) => None,
        Value::Int(n) => Some(NodeProblem::NotReplicated {
            acknowledged: u64::try_from(*n).unwrap_or(0),
            required: k,
            waited: Duration::from_millis(wait.ms),
        }),
        Value::ServerError(e) => Some(NodeProblem::Server(format!(
            "WAIT failed: {e}; min_replicas needs the WAIT command (+wait)"
        ))),
        other => Some(NodeProblem::Server(format!(
            "WAIT answered {other:?}, not a count of replicas"
        ))),
    }
}

/// The master with the fewest connected replicas among `replicas` (`None`: the node's one
/// master), and how many, if that is fewer than `k`. A master that did not tell is not counted
/// here (`WAIT` checks it).
fn short_master(
    replicas: &[(Option<String>, Option<u64>)],
    k: u32,
) -> Option<(Option<String>, u64)> {
    replicas
        .iter()
        .filter_map(|(m, n)| Some((m.clone(), (*n)?)))
        .min_by_key(|(_, n)| *n)
        .filter(|(_, n)| *n < u64::from(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::quorum::Vote;

    fn wait(k: u32) -> Wait {
        Wait {
            k,
            ms: 25,
            answer_by: Instant::now(),
            io_timeout: Duration::from_millis(100),
        }
    }

    #[test]
    fn a_wait_short_of_replicas_fails_the_vote_with_the_count() {
        let enough = Acked::Reply(Value::Int(2));
        assert_eq!(acknowledged(&enough, &wait(2)), None);
        let short = Acked::Reply(Value::Int(1));
        let problem = acknowledged(&short, &wait(2)).expect("short");
        assert_eq!(
            problem,
            NodeProblem::NotReplicated {
                acknowledged: 1,
                required: 2,
                waited: Duration::from_millis(25)
            }
        );
        assert!(
            problem
                .to_string()
                .starts_with("WAIT: 1 of 2 replicas acknowledged within 25 ms"),
            "{problem}"
        );
        let late = Acked::Late(Duration::from_millis(37));
        assert!(matches!(
            acknowledged(&late, &wait(1)),
            Some(NodeProblem::NotReplicated {
                acknowledged: 0,
                required: 1,
                waited
            }) if waited == Duration::from_millis(37)
        ));
        let denied = Acked::Reply(
            redis::parse_redis_value(b"-NOPERM this user has no permissions to run 'wait'\r\n")
                .expect("an error reply"),
        );
        assert!(matches!(
            acknowledged(&denied, &wait(1)),
            Some(NodeProblem::Server(why)) if why.contains("+wait")
        ));
    }

    #[test]
    fn a_failed_acknowledgement_counts_as_applied_for_the_undo() {
        let vote = Vote::Failed(NodeProblem::NotReplicated {
            acknowledged: 0,
            required: 1,
            waited: Duration::from_millis(25),
        });
        assert!(vote.applied());
        let refused = Vote::Failed(NodeProblem::TooFewReplicas {
            connected: 0,
            required: 1,
            master: None,
        });
        assert!(!refused.applied(), "nothing was sent");
    }
}
