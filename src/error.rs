//! The crate's one error type.

use std::fmt;
use std::time::Duration;

/// `Result` with [`Error`] as its error type.
pub type Result<T> = std::result::Result<T, Error>;

/// Why one node did not count toward a quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeProblem {
    /// The node answered, but the key is held by another owner (acquire) or is no longer ours
    /// (extend, release).
    Refused,
    /// The node did not answer within `node_timeout`.
    TimedOut,
    /// The node could not be reached, or its connection broke; the text says how.
    Unavailable(String),
    /// The node answered with an error reply (`WRONGTYPE`, `OOM`, `READONLY`, `NOAUTH`, ...).
    Server(String),
    /// The node accepted the lock, but its process started less than
    /// [`restart_grace`](crate::Builder::restart_grace) ago, so it may have lost another owner's
    /// key and does not count toward the quorum yet.
    InGrace {
        /// How much longer the node is kept out of acquire quorums.
        remaining: Duration,
    },
    /// The acquisition was cancelled before the node answered.
    Cancelled,
    /// The node's ACL does not let this user run a command redlock needs: Redis's `NOPERM`,
    /// its "can't run this command" inside a script, or Valkey's "ACL failure in script". The
    /// text is the server's; the README's Security section lists the ACL redlock needs.
    Denied(String),
    /// The node accepted the lock, but its wall clock was seen jumping forward (an NTP step, a
    /// VM resume, `date -s`), which expires lock keys early, so it does not count toward
    /// acquire quorums during its [`clock_quarantine`](crate::Builder::clock_quarantine).
    ClockJump {
        /// How far the clock jumped beyond what our clock and the drift allowance explain (or,
        /// seen at connect, how far it was ahead of the other nodes).
        jump: Duration,
        /// How much longer the node is kept out of acquire quorums.
        remaining: Duration,
    },
    /// With [`min_replicas`](crate::Builder::min_replicas): the node took the write, but `WAIT`
    /// confirmed fewer replicas than required within its timeout (a replica lags, hangs or is
    /// cut off). The write stays on the master: an acquisition's undo removes it.
    NotReplicated {
        /// Replicas that acknowledged the write.
        acknowledged: u64,
        /// `min_replicas`.
        required: u32,
        /// The `WAIT` timeout.
        waited: Duration,
    },
    /// With [`min_replicas`](crate::Builder::min_replicas): the node has fewer connected
    /// replicas (`connected_slaves` of `INFO replication`) than required, so nothing was sent.
    TooFewReplicas {
        /// Replicas connected at the last check.
        connected: u64,
        /// `min_replicas`.
        required: u32,
        /// On a Redis Cluster node: the master (`host:port`) with the fewest connected replicas
        /// (every master of the cluster needs `required`). `None` for other nodes, whose one
        /// master is the node.
        master: Option<String>,
    },
}

/// One node's part in a failed quorum operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The node's address, `host:port` (never with credentials).
    pub node: String,
    /// What went wrong there.
    pub problem: NodeProblem,
}

/// How a quorum operation ended on the nodes, for errors that need it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumReport {
    /// Number of nodes (N).
    pub nodes: usize,
    /// Successes needed (N/2 + 1).
    pub quorum: usize,
    /// Nodes that succeeded.
    pub succeeded: usize,
    /// The nodes that succeeded (`host:port`).
    pub granted: Vec<String>,
    /// The nodes that did not succeed and why (refused, or failed).
    pub failures: Vec<NodeReport>,
    /// The nodes whose answer was not waited for: the outcome was certain without it.
    pub pending: Vec<String>,
    /// Time from sending the first command to the decision.
    pub elapsed: Duration,
}

impl QuorumReport {
    /// A report of `nodes` nodes, none of them heard yet.
    pub(crate) fn new(nodes: usize, quorum: usize, elapsed: Duration) -> QuorumReport {
        QuorumReport {
            nodes,
            quorum,
            succeeded: 0,
            granted: Vec::new(),
            failures: Vec::new(),
            pending: Vec::new(),
            elapsed,
        }
    }

    /// Nodes that refused (held by another owner / no longer ours).
    pub fn refused(&self) -> usize {
        self.failures
            .iter()
            .filter(|r| r.problem == NodeProblem::Refused)
            .count()
    }

    /// Nodes that timed out, were unreachable or answered with an error.
    pub fn errors(&self) -> usize {
        self.failures.len() - self.refused()
    }
}

/// Which quorum operation a [`Error::NoQuorum`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Acquiring a lock.
    Acquire,
    /// Extending a lock.
    Extend,
    /// Releasing a lock.
    Release,
    /// Reading state from the nodes (who leads an election).
    Read,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Acquire => "acquire",
            Operation::Extend => "extend",
            Operation::Release => "release",
            Operation::Read => "read",
        })
    }
}

/// Everything that can go wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A caller-supplied value is unusable; nothing was sent to any node.
    InvalidArgument {
        /// What is wrong and what to do instead.
        message: String,
    },
    /// The resource is held by another owner: enough nodes refused that no quorum was possible.
    NotAcquired {
        /// The resource that was asked for.
        resource: String,
        /// How many attempts were made (1 + retries).
        attempts: u32,
        /// The last attempt, node by node.
        report: Box<QuorumReport>,
    },
    /// Too few nodes answered in time (down, hung, or erroring), or they answered so late that
    /// no validity was left.
    NoQuorum {
        /// The resource concerned.
        resource: String,
        /// What was being done.
        operation: Operation,
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt, node by node.
        report: Box<QuorumReport>,
    },
    /// The lock is no longer ours on a quorum: it expired (and may have been taken by another
    /// owner), was released already, or its keys were removed.
    Lost {
        /// The resource concerned.
        resource: String,
        /// The failed extend or release, when one was made.
        report: Option<Box<QuorumReport>>,
    },
    /// `extend` was called more often than `max_extensions` allows; the lock is still held until
    /// its validity runs out.
    ExtensionLimit {
        /// The resource concerned.
        resource: String,
        /// The configured cap.
        max_extensions: u32,
    },
    /// The acquisition was cancelled through its [`Cancel`](crate::Cancel) handle before it got
    /// the lock. What it had taken on any node was undone (sent to every node before this
    /// returned); a node that was down or hung keeps such a key until its TTL runs out.
    Cancelled {
        /// The resource that was asked for.
        resource: String,
    },
    /// The operating system refused a resource the client needs (a worker thread, say).
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            message: message.into(),
        }
    }
}

/// How a node failed, in words: "no answer in time", "error reply: NOPERM …".
impl fmt::Display for NodeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeProblem::Refused => f.write_str("refused"),
            NodeProblem::TimedOut => f.write_str("no answer in time"),
            NodeProblem::Unavailable(why) => write!(f, "unavailable: {why}"),
            NodeProblem::Server(reply) => write!(f, "error reply: {reply}"),
            NodeProblem::InGrace { remaining } => write!(
                f,
                "restarted recently, not counted for another {} ms (restart_grace)",
                remaining.as_millis()
            ),
            NodeProblem::Cancelled => f.write_str("cancelled before it answered"),
            NodeProblem::Denied(reply) => write!(
                f,
                "permission denied (NOPERM): {reply}; give the user the ACL the README's \
                 Security section lists"
            ),
            NodeProblem::ClockJump { jump, remaining } => write!(
                f,
                "clock jumped forward by {} ms, not counted for another {} ms (clock_quarantine)",
                jump.as_millis(),
                remaining.as_millis()
            ),
            NodeProblem::NotReplicated {
                acknowledged,
                required,
                waited,
            } => write!(
                f,
                "WAIT: {acknowledged} of {required} replicas acknowledged within {} ms \
                 (min_replicas); check the replicas' link and lag (INFO replication)",
                waited.as_millis()
            ),
            NodeProblem::TooFewReplicas {
                connected,
                required,
                master: None,
            } => write!(
                f,
                "{connected} replicas connected (INFO replication connected_slaves), fewer than \
                 min_replicas {required}: attach replicas to this master or lower min_replicas"
            ),
            NodeProblem::TooFewReplicas {
                connected,
                required,
                master: Some(master),
            } => write!(
                f,
                "master {master} of the cluster has {connected} replicas connected (INFO \
                 replication connected_slaves), fewer than min_replicas {required}, which every \
                 master needs: attach replicas to it or lower min_replicas"
            ),
        }
    }
}

/// How an operation ended on the nodes, the same way for every error that has a report: how
/// many nodes granted, refused, failed and were not waited for (the outcome was certain
/// without them, so these counts say nothing of those nodes' health), each node named.
fn write_tally(f: &mut fmt::Formatter<'_>, granted: &str, report: &QuorumReport) -> fmt::Result {
    let refused: Vec<&str> = (report.failures.iter())
        .filter(|r| r.problem == NodeProblem::Refused)
        .map(|r| r.node.as_str())
        .collect();
    let failed: Vec<&NodeReport> = (report.failures.iter())
        .filter(|r| r.problem != NodeProblem::Refused)
        .collect();
    write!(
        f,
        "{} {granted}, {} refused, {} failed, {} not waited for, of {} nodes (quorum {})",
        report.granted.len(),
        refused.len(),
        failed.len(),
        report.pending.len(),
        report.nodes,
        report.quorum
    )?;
    let mut parts: Vec<String> = Vec::new();
    if !report.granted.is_empty() {
        parts.push(format!("{granted}: {}", report.granted.join(", ")));
    }
    if !refused.is_empty() {
        parts.push(format!("refused: {}", refused.join(", ")));
    }
    if !failed.is_empty() {
        let each: Vec<String> = failed
            .iter()
            .map(|r| format!("{} ({})", r.node, r.problem))
            .collect();
        parts.push(format!("failed: {}", each.join(", ")));
    }
    if !report.pending.is_empty() {
        parts.push(format!("not waited for: {}", report.pending.join(", ")));
    }
    if !parts.is_empty() {
        write!(f, " [{}]", parts.join("; "))?;
    }
    Ok(())
}

fn granted_word(operation: Operation) -> &'static str {
    match operation {
        Operation::Acquire => "granted",
        Operation::Extend => "extended",
        Operation::Release => "released",
        Operation::Read => "answered",
    }
}

/// The text of [`Error::NoQuorum`].
fn no_quorum(
    f: &mut fmt::Formatter<'_>,
    resource: &str,
    operation: Operation,
    attempts: u32,
    report: &QuorumReport,
) -> fmt::Result {
    if operation == Operation::Read && report.succeeded >= report.quorum {
        write!(
            f,
            "read of {resource:?} cannot tell who leads: no leader is confirmed on a quorum, yet \
             one may hold a lock there: "
        )?;
        write_tally(f, granted_word(operation), report)?;
        f.write_str(
            "; a leader's node may hang or have restarted, or a new leader is being confirmed: \
             read again",
        )
    } else if report.succeeded >= report.quorum {
        write!(
            f,
            "{operation} of {resource:?} reached a quorum only after {:?}, leaving no \
             validity: use a longer TTL or a shorter node_timeout",
            report.elapsed
        )
    } else {
        write!(
            f,
            "{operation} of {resource:?} failed after {attempts} attempt(s): "
        )?;
        write_tally(f, granted_word(operation), report)?;
        f.write_str("; check that a majority of the Redis nodes is up and reachable")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument { message } => write!(f, "invalid argument: {message}"),
            Error::NotAcquired {
                resource,
                attempts,
                report,
            } => {
                write!(
                    f,
                    "lock {resource:?} not acquired after {attempts} attempt(s), held by another \
                     owner; the last attempt: "
                )?;
                write_tally(f, "granted", report)?;
                f.write_str("; retry later or use a longer retry budget")
            }
            Error::NoQuorum {
                resource,
                operation,
                attempts,
                report,
            } => no_quorum(f, resource, *operation, *attempts, report),
            Error::Lost { resource, report } => {
                write!(
                    f,
                    "lock {resource:?} is lost: it expired, was released, or its keys were removed"
                )?;
                if let Some(report) = report {
                    f.write_str(" (still ours: ")?;
                    write_tally(f, "yes", report)?;
                    f.write_str(")")?;
                }
                Ok(())
            }
            Error::ExtensionLimit {
                resource,
                max_extensions,
            } => write!(
                f,
                "lock {resource:?} was already extended {max_extensions} time(s), the configured \
                 max_extensions; it stays held until its validity runs out"
            ),
            Error::Cancelled { resource } => write!(
                f,
                "acquisition of {resource:?} was cancelled; nothing of it is left on the nodes"
            ),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
