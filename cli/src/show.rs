//! `status`, `release --force` and `nodes`: the operator's commands.

use redquorum::{Inspection, KeyState, NodeProblem, Released};
use serde_json::{Value as Json, json};

use crate::args::{self, human};
use crate::exit::{EXIT_NOBODY, EXIT_TEMPFAIL, EXIT_UNAVAILABLE, Failure, one_line};
use crate::nodes::Nodes;

/// Show a lock on every node
///
/// For each node: whether it answered, what the key holds (a token, reentrant owners and their
/// counts, the readers of a read lock ('run --shared') with the time each has left, another
/// type, or nothing), the remaining TTL and the fence counter; then whether a quorum holds the
/// lock and by which token. Read-only.
///
/// With --permits L, RESOURCE is a semaphore ('run --permits L'): one row per slot (0 to L-1)
/// with the token holding it on a quorum, the nodes it is live on and the least TTL left, and
/// the number of permits the nodes have stored.
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    after_help = "\
Exit codes: 0 the lock is held (with --permits: a permit is); 3 nobody holds it; 69 too few
nodes answered to tell; 64 bad arguments."
)]
pub struct StatusArgs {
    /// Show the L slots of the semaphore RESOURCE
    #[arg(long, value_name = "L", value_parser = args::permits)]
    permits: Option<u32>,
    /// Print one JSON object
    ///
    /// {"resource", "held", "holder", "quorum", "fence", "nodes": [{"node", "error", "key",
    /// "token", "owners", "readers", "ttl_ms", "persistent", "fence"}]}; key is absent, token,
    /// owners, readers or other; readers is a list of {"token", "ttl_ms"}; ttl_ms is null when
    /// the key is absent and -1 when it never expires; error is null when the node answered.
    /// With --permits: {"resource", "permits", "stored_permits": [per node, null if none],
    /// "slots": [one object as above per slot, its resource the slot's key]}
    #[arg(long, verbatim_doc_comment)]
    json: bool,
    /// The lock's name
    #[arg(value_name = "RESOURCE", value_parser = args::name)]
    resource: String,
    #[command(flatten)]
    nodes: Nodes,
}

/// Force-release a lock: an operator's tool
///
/// Deletes RESOURCE's lock key on every node, and announces the release so that waiters try at
/// once. With --token, only where the key still holds TOKEN (a token or a reentrant owner, as
/// 'redlock status' shows it): a holder that took the lock after you looked is left alone.
/// Without it, whatever holds the lock is removed. The fence counter is never touched.
///
/// Danger: the holder is not told. If it is alive it keeps working without the lock while the
/// next holder starts; its own extension finds the lock lost only at its next renewal (a
/// 'redlock run' holder then kills its command).
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    override_usage = "redlock release --force [--token TOKEN] [OPTIONS] <RESOURCE>",
    after_help = "\
Exit codes: 0 a quorum of nodes confirmed the keys are gone (or were never there); 75 another
token than --token holds the lock; 69 too few nodes answered; 64 bad arguments."
)]
pub struct ReleaseArgs {
    /// Required: confirms you mean it
    #[arg(long)]
    force: bool,
    /// Release only this holder's keys
    #[arg(long, value_name = "TOKEN", value_parser = args::name, allow_hyphen_values = true)]
    token: Option<String>,
    /// Print the per-node results as JSON
    #[arg(long)]
    json: bool,
    /// The lock's name
    #[arg(value_name = "RESOURCE", value_parser = args::name)]
    resource: String,
    #[command(flatten)]
    nodes: Nodes,
}

/// Show each node's status
///
/// For each node: whether it is reachable, which server it is (name and version), its run id
/// and uptime, restarts seen, the last connection error, and the restart grace left. A
/// Sentinel-managed node (redis+sentinel://) also shows its current master and the failovers
/// seen, a Redis Cluster (redis+cluster://) its masters and the failovers seen.
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    after_help = "\
Exit codes: 0 a quorum of nodes is reachable; 69 otherwise; 64 bad arguments."
)]
pub struct NodesArgs {
    /// Print one JSON object per node, in a list
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    nodes: Nodes,
}

fn problem(p: &NodeProblem) -> String {
    let text = match p {
        NodeProblem::TimedOut => "timed out".to_owned(),
        NodeProblem::Unavailable(why) => format!("unreachable: {why}"),
        NodeProblem::Server(e) => e.clone(),
        other => format!("{other:?}"),
    };
    one_line(&text)
}

pub fn status(p: StatusArgs) -> Result<u8, Failure> {
    let resource = p.resource;
    let client = p.nodes.client("status")?;
    if let Some(permits) = p.permits {
        return semaphore_status(&client, &resource, permits, p.json);
    }
    let inspection = client
        .inspect(&resource)
        .map_err(|e| Failure::usage("status", e))?;
    if p.json {
        outln!("{}", status_json(&inspection));
    } else {
        print_status(&inspection);
    }
    let answered = inspection.nodes.iter().filter(|n| n.state.is_ok()).count();
    Ok(if answered < inspection.quorum {
        EXIT_UNAVAILABLE
    } else if inspection.held {
        0
    } else {
        EXIT_NOBODY
    })
}

fn status_json(i: &Inspection) -> Json {
    let nodes: Vec<Json> = i
        .nodes
        .iter()
        .map(|n| match &n.state {
            Ok(s) => {
                let mut readers = Json::Null;
                let (key, token, owners, kind) = match &s.key {
                    KeyState::Absent => ("absent", Json::Null, Json::Null, Json::Null),
                    KeyState::Token(t) => ("token", json!(t), Json::Null, Json::Null),
                    KeyState::Owners(o) => (
                        "owners",
                        Json::Null,
                        Json::Object(o.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
                        Json::Null,
                    ),
                    KeyState::Readers(r) => {
                        readers = r
                            .iter()
                            .map(|(t, left)| json!({"token": t, "ttl_ms": left.as_millis() as u64}))
                            .collect();
                        ("readers", Json::Null, Json::Null, Json::Null)
                    }
                    KeyState::Other(t) => ("other", Json::Null, Json::Null, json!(t)),
                    _ => ("unknown", Json::Null, Json::Null, Json::Null),
                };
                let ttl_ms = match (s.ttl, s.persistent) {
                    (Some(t), _) => json!(t.as_millis() as u64),
                    (None, true) => json!(-1),
                    (None, false) => Json::Null,
                };
                json!({
                    "node": n.node,
                    "error": null,
                    "key": key,
                    "token": token,
                    "owners": owners,
                    "readers": readers,
                    "type": kind,
                    "ttl_ms": ttl_ms,
                    "persistent": s.persistent,
                    "fence": s.fence,
                })
            }
            Err(e) => json!({
                "node": n.node,
                "error": problem(e),
                "key": null,
                "token": null,
                "owners": null,
                "readers": null,
                "type": null,
                "ttl_ms": null,
                "persistent": null,
                "fence": null,
            }),
        })
        .collect();
    json!({
        "resource": i.resource,
        "held": i.held,
        "holder": i.holder,
        "quorum": i.quorum,
        "fence": i.fence,
        "nodes": nodes,
    })
}

fn print_status(i: &Inspection) {
    let live = i
        .nodes
        .iter()
        .filter(|n| n.state.as_ref().is_ok_and(|s| s.is_live()))
        .count();
    let held = if i.held { "held" } else { "not held" };
    outln!(
        "{}: {held} (a live key on {live} of {} nodes, quorum {})",
        i.resource,
        i.nodes.len(),
        i.quorum
    );
    if let Some(h) = &i.holder {
        outln!("holder: {h}");
    }
    if let Some(f) = i.fence {
        outln!("fence counter: {f}");
    }
    let rows: Vec<[String; 4]> = i
        .nodes
        .iter()
        .map(|n| match &n.state {
            Ok(s) => [
                n.node.clone(),
                match &s.key {
                    KeyState::Absent => "-".to_owned(),
                    KeyState::Token(t) => format!("token {t}"),
                    KeyState::Owners(o) => {
                        let list: Vec<String> =
                            o.iter().map(|(k, c)| format!("{k} ×{c}")).collect();
                        format!("reentrant {}", list.join(", "))
                    }
                    KeyState::Readers(r) if r.is_empty() => "readers (all expired)".to_owned(),
                    KeyState::Readers(r) => {
                        let list: Vec<String> = r
                            .iter()
                            .map(|(t, left)| format!("{t} ({})", human(*left)))
                            .collect();
                        format!("readers {}", list.join(", "))
                    }
                    KeyState::Other(t) => format!("a {t} (not a lock)"),
                    _ => "?".to_owned(),
                },
                match (s.ttl, s.persistent) {
                    (Some(t), _) => human(t),
                    (None, true) => "never".to_owned(),
                    (None, false) => "-".to_owned(),
                },
                s.fence.map_or("-".to_owned(), |f| f.to_string()),
            ],
            Err(e) => [
                n.node.clone(),
                format!("error: {}", problem(e)),
                String::new(),
                String::new(),
            ],
        })
        .collect();
    print_table(&["NODE", "KEY", "TTL", "FENCE"], &rows);
}

/// `status --permits L`: the semaphore's slots, each an ordinary lock on its own key.
fn semaphore_status(
    client: &redquorum::Redlock,
    resource: &str,
    permits: u32,
    json: bool,
) -> Result<u8, Failure> {
    let inspect = |key: &str| client.inspect(key).map_err(|e| Failure::usage("status", e));
    let stored = inspect(&format!("redlock:sem:{{{resource}}}"))?;
    let slots = (0..permits)
        .map(|i| inspect(&format!("redlock:sem:{{{resource}}}:{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let stored_permits: Vec<Option<String>> = stored
        .nodes
        .iter()
        .map(|n| match &n.state {
            Ok(s) => match &s.key {
                KeyState::Token(l) => Some(l.clone()),
                _ => None,
            },
            Err(_) => None,
        })
        .collect();
    if json {
        outln!(
            "{}",
            json!({
                "resource": resource,
                "permits": permits,
                "stored_permits": stored_permits
                    .iter()
                    .map(|l| l.as_ref().and_then(|l| l.parse::<u64>().ok()))
                    .collect::<Vec<_>>(),
                "slots": slots.iter().map(status_json).collect::<Vec<_>>(),
            })
        );
    } else {
        let held = slots.iter().filter(|s| s.held).count();
        let mut stored_values: Vec<&str> = stored_permits
            .iter()
            .flatten()
            .map(|s| s.as_str())
            .collect();
        stored_values.sort_unstable();
        stored_values.dedup();
        outln!(
            "{resource}: semaphore, {held} of {permits} permits held (quorum {}); stored permits: {}",
            stored.quorum,
            if stored_values.is_empty() {
                "none".to_owned()
            } else {
                stored_values.join(", ")
            }
        );
        let rows: Vec<[String; 4]> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let live: Vec<&redquorum::NodeState> = s
                    .nodes
                    .iter()
                    .filter_map(|n| n.state.as_ref().ok())
                    .filter(|st| st.is_live())
                    .collect();
                let ttl = live
                    .iter()
                    .filter(|st| st.holder() == s.holder.as_deref())
                    .filter_map(|st| st.ttl)
                    .min();
                [
                    i.to_string(),
                    match (&s.holder, s.held) {
                        (Some(h), _) => h.clone(),
                        (None, true) => "held (no single token on a quorum)".to_owned(),
                        (None, false) => "-".to_owned(),
                    },
                    format!("{} of {}", live.len(), s.nodes.len()),
                    ttl.map_or("-".to_owned(), human),
                ]
            })
            .collect();
        print_table(&["SLOT", "HOLDER", "LIVE ON", "TTL"], &rows);
    }
    let answered = |i: &Inspection| i.nodes.iter().filter(|n| n.state.is_ok()).count() >= i.quorum;
    Ok(if !(answered(&stored) && slots.iter().all(answered)) {
        EXIT_UNAVAILABLE
    } else if slots.iter().any(|s| s.held) {
        0
    } else {
        EXIT_NOBODY
    })
}

fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (k, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if k + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        outln!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

pub fn release(p: ReleaseArgs) -> Result<u8, Failure> {
    if !p.force {
        return Err(Failure::usage(
            "release",
            "release needs --force: it removes the lock from under its holder, who is not told",
        ));
    }
    let resource = p.resource;
    let client = p.nodes.client("release")?;
    let result = client
        .force_release(&resource, p.token.as_deref())
        .map_err(|e| Failure::usage("release", e))?;
    let describe = |o: &Result<Released, NodeProblem>| match o {
        Ok(Released::Deleted) => "deleted".to_owned(),
        Ok(Released::Absent) => "absent".to_owned(),
        Ok(Released::HeldByOther) => "kept: held by another token".to_owned(),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("error: {}", problem(e)),
    };
    if p.json {
        let nodes: Vec<Json> = result
            .nodes
            .iter()
            .map(|n| {
                let (outcome, error) = match &n.outcome {
                    Ok(Released::Deleted) => (json!("deleted"), Json::Null),
                    Ok(Released::Absent) => (json!("absent"), Json::Null),
                    Ok(Released::HeldByOther) => (json!("held_by_other"), Json::Null),
                    Ok(_) => (json!("unknown"), Json::Null),
                    Err(e) => (Json::Null, json!(problem(e))),
                };
                json!({"node": n.node, "outcome": outcome, "error": error})
            })
            .collect();
        outln!(
            "{}",
            json!({
                "resource": result.resource,
                "token": result.token,
                "confirmed": result.confirmed(),
                "quorum": result.quorum,
                "released": result.on_quorum(),
                "nodes": nodes,
            })
        );
    } else {
        let rows: Vec<[String; 2]> = result
            .nodes
            .iter()
            .map(|n| [n.node.clone(), describe(&n.outcome)])
            .collect();
        print_table(&["NODE", "RESULT"], &rows);
    }
    let held_by_other = result
        .nodes
        .iter()
        .filter(|n| matches!(n.outcome, Ok(Released::HeldByOther)))
        .count();
    if result.on_quorum() {
        Ok(0)
    } else if result.confirmed() + held_by_other >= result.quorum {
        Err(Failure::new(
            EXIT_TEMPFAIL,
            format!(
                "{resource} is held by another token than {} on {held_by_other} of {} nodes \
                 (quorum {}): left alone there",
                p.token.as_deref().unwrap_or_default(),
                result.nodes.len(),
                result.quorum
            ),
        ))
    } else {
        Err(Failure::new(
            EXIT_UNAVAILABLE,
            format!(
                "only {} of {} nodes confirmed the keys of {resource} are gone (quorum {}); \
                 the rest expire with their TTL",
                result.confirmed(),
                result.nodes.len(),
                result.quorum
            ),
        ))
    }
}

pub fn nodes(p: NodesArgs) -> Result<u8, Failure> {
    let client = p.nodes.client("nodes")?;
    let statuses = client.node_status();
    let reachable = statuses.iter().filter(|s| s.connected).count();
    if p.json {
        let list: Vec<Json> = statuses
            .iter()
            .map(|s| {
                json!({
                    "node": s.address,
                    "reachable": s.connected,
                    "server": s.server_name,
                    "server_version": s.server_version,
                    "run_id": s.run_id,
                    "uptime_s": s.uptime.map(|u| u.as_secs()),
                    "connects": s.connects,
                    "restarts": s.restarts,
                    "grace_remaining_ms": s.grace_remaining.map(|g| g.as_millis() as u64),
                    "master": s.master,
                    "failovers": s.failovers,
                    "error": s.last_error.as_deref().map(one_line),
                })
            })
            .collect();
        outln!("{}", Json::Array(list));
    } else {
        let rows: Vec<[String; 6]> = statuses
            .iter()
            .map(|s| {
                [
                    s.address.clone(),
                    if s.connected { "yes" } else { "no" }.to_owned(),
                    match (&s.server_name, &s.server_version) {
                        (Some(name), Some(version)) => format!("{name} {version}"),
                        (Some(name), None) => name.clone(),
                        _ => "-".into(),
                    },
                    s.run_id.clone().unwrap_or_else(|| "-".into()),
                    s.uptime.map_or("-".into(), human),
                    if s.connected {
                        s.restarts.to_string()
                    } else {
                        format!(
                            "{} ({})",
                            s.restarts,
                            one_line(s.last_error.as_deref().unwrap_or("not connected"))
                        )
                    },
                ]
            })
            .collect();
        let group = |s: &redquorum::NodeStatus| {
            s.address.starts_with("sentinel:") || s.address.starts_with("cluster:")
        };
        if statuses.iter().any(group) {
            // Sentinel-managed nodes and clusters: their current master(s) and the failovers
            // seen.
            let rows: Vec<[String; 8]> = rows
                .into_iter()
                .zip(&statuses)
                .map(|([node, reachable, server, run_id, uptime, restarts], s)| {
                    let sentinel = group(s);
                    [
                        node,
                        s.master.clone().unwrap_or_else(|| "-".into()),
                        reachable,
                        server,
                        run_id,
                        uptime,
                        restarts,
                        if sentinel {
                            s.failovers.to_string()
                        } else {
                            "-".into()
                        },
                    ]
                })
                .collect();
            print_table(
                &[
                    "NODE",
                    "MASTER",
                    "REACHABLE",
                    "SERVER",
                    "RUN ID",
                    "UPTIME",
                    "RESTARTS",
                    "FAILOVERS",
                ],
                &rows,
            );
        } else {
            print_table(
                &[
                    "NODE",
                    "REACHABLE",
                    "SERVER",
                    "RUN ID",
                    "UPTIME",
                    "RESTARTS",
                ],
                &rows,
            );
        }
    }
    let quorum = statuses.len() / 2 + 1;
    Ok(if reachable >= quorum {
        0
    } else {
        EXIT_UNAVAILABLE
    })
}
