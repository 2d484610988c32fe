//! Who leads, as the nodes tell: each node's view of the election (its lock key and the
//! leader's record), read at once from every node, and the leader a quorum of them confirm,
//! nobody, or an error when too few answered to tell (see "What readers are told" in the
//! election's docs). It uses the client's engine and the leader kind's read; nothing of the
//! candidate's or the observer's state.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use redis::Value;

use crate::client::Redlock;
use crate::engine::Engine;
use crate::error::{Error, NodeProblem, NodeReport, Operation, QuorumReport, Result};
use crate::kinds::leader;
use crate::rules::quorum::quorum;
use crate::telemetry::NodeStatus;

use super::Leader;

/// One node's view of an election.
struct NodeView {
    /// The token the lock key holds, whatever its TTL.
    lock: Option<String>,
    ttl_ms: u64,
    /// Whether the lock key has a TTL left and the record is its token's, confirmed.
    confirmed: bool,
    identity: Option<String>,
    term: Option<u64>,
    since_ms: Option<u64>,
    transitions: Option<u64>,
}

/// Who leads, as the nodes tell (see "What readers are told" in the module docs).
pub(super) fn read_leader(client: &Redlock, key: &Arc<str>) -> Result<Option<Leader>> {
    let engine = client.engine();
    let started = Instant::now();
    let answers =
        crate::client::inspect::every_answer(engine, &leader::read(key), key, &Arc::from(""));
    // Read after the answers: a node that answered from a new process is known by now.
    let statuses = engine.node_status();
    let n = answers.len();
    let q = quorum(n);
    let (views, failures, unsure) = node_views(engine, answers, &statuses);
    let unknown = |failures: Vec<NodeReport>| Error::NoQuorum {
        resource: format!("election {}", &key[leader::ELECTION_PREFIX.len()..]),
        operation: Operation::Read,
        attempts: 1,
        report: Box::new(QuorumReport {
            succeeded: n - failures.len(),
            granted: (engine.addresses())
                .filter(|a| failures.iter().all(|f| f.node != *a))
                .map(str::to_owned)
                .collect(),
            failures,
            ..QuorumReport::new(n, q, started.elapsed())
        }),
    };
    if views.len() < q {
        return Err(unknown(failures));
    }
    let transitions = views
        .iter()
        .filter_map(|(v, _)| v.transitions)
        .max()
        .unwrap_or(0);
    let mut confirmed: Vec<&str> = views
        .iter()
        .filter(|(v, _)| v.confirmed)
        .filter_map(|(v, _)| v.lock.as_deref())
        .collect();
    confirmed.sort_unstable();
    let leader = confirmed
        .chunk_by(|a, b| a == b)
        .find(|run| run.len() >= q)
        .map(|run| run[0]);
    let Some(token) = leader else {
        // Nobody leads only if no token can be held on a quorum: its holders, plus the nodes
        // that may hold it unseen, are fewer.
        let mut held: Vec<&str> = views
            .iter()
            .filter(|(_, in_grace)| !in_grace)
            .filter_map(|(v, _)| v.lock.as_deref())
            .collect();
        held.sort_unstable();
        let most = held.chunk_by(|a, b| a == b).map(<[_]>::len).max();
        if unsure + most.unwrap_or(0) < q {
            return Ok(None);
        }
        return Err(unknown(failures));
    };
    Ok(Some(leader_of(&views, token, q, transitions)))
}

/// Each node's view, with whether the node is in its restart grace (`statuses`); the nodes
/// that did not answer or may have lost a leader's key (restarted within this client's
/// restart_grace), reported; and how many of them there are: any leader may hold them.
fn node_views(
    engine: &Engine,
    answers: Vec<std::result::Result<Value, NodeProblem>>,
    statuses: &[NodeStatus],
) -> (Vec<(NodeView, bool)>, Vec<NodeReport>, usize) {
    let mut views = Vec::with_capacity(answers.len());
    let mut failures = Vec::new();
    let mut unsure = 0;
    for ((address, answer), status) in engine.addresses().zip(answers).zip(statuses) {
        match answer.and_then(|v| decode_view(&v)) {
            Ok(view) => {
                if let Some(remaining) = status.grace_remaining {
                    unsure += 1;
                    failures.push(NodeReport {
                        node: address.to_owned(),
                        problem: NodeProblem::InGrace { remaining },
                    });
                }
                views.push((view, status.grace_remaining.is_some()));
            }
            Err(problem) => {
                unsure += 1;
                failures.push(NodeReport {
                    node: address.to_owned(),
                    problem,
                });
            }
        }
    }
    (views, failures, unsure)
}

/// The leader whose `token` a quorum (`q`) of the nodes hold, confirmed, as those nodes tell:
/// its TTL is the one a quorum still gives it; `transitions`, the most any node counted.
fn leader_of(views: &[(NodeView, bool)], token: &str, q: usize, transitions: u64) -> Leader {
    let mine: Vec<&NodeView> = views
        .iter()
        .map(|(v, _)| v)
        .filter(|v| v.confirmed && v.lock.as_deref() == Some(token))
        .collect();
    let mut ttls: Vec<u64> = mine.iter().map(|v| v.ttl_ms).collect();
    ttls.sort_unstable_by(|a, b| b.cmp(a));
    let since_ms = mine.iter().filter_map(|v| v.since_ms).min().unwrap_or(0);
    Leader {
        identity: mine
            .iter()
            .find_map(|v| v.identity.clone())
            .unwrap_or_default(),
        term: mine.iter().filter_map(|v| v.term).max().unwrap_or(0),
        since: SystemTime::UNIX_EPOCH + Duration::from_millis(since_ms),
        transitions,
        ttl: Duration::from_millis(ttls.get(q - 1).copied().unwrap_or(0)),
    }
}

fn decode_view(value: &Value) -> std::result::Result<NodeView, NodeProblem> {
    let bad = || NodeProblem::Server(format!("unexpected reply {value:?}"));
    let Value::Array(parts) = value else {
        return Err(bad());
    };
    let [
        lock,
        ttl,
        token,
        identity,
        term,
        since,
        transitions,
        confirmed,
    ] = parts.as_slice()
    else {
        return Err(bad());
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let number = |v: &Value| text(v).and_then(|s| s.parse::<u64>().ok());
    let Value::Int(ttl) = *ttl else {
        return Err(bad());
    };
    let lock = text(lock);
    let confirmed =
        ttl > 0 && lock.is_some() && text(token) == lock && text(confirmed).as_deref() == Some("1");
    Ok(NodeView {
        lock,
        ttl_ms: ttl.max(0) as u64,
        confirmed,
        identity: text(identity),
        term: number(term),
        since_ms: number(since),
        transitions: number(transitions),
    })
}
