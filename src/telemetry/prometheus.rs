//! The Prometheus text exposition format (version 0.0.4) of a [`Stats`] snapshot: the client's
//! metrics, then each node's.
//!
//! May use: the rest of `telemetry`.

use std::fmt::Write as _;

use super::histogram::{BUCKETS, Histogram};
use super::{NodeStatus, Stats};

/// A per-node metric: name, type, help, and how to read it from the status.
type NodeMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&NodeStatus) -> u64,
);

const PER_NODE: [NodeMetric; 5] = [
    (
        "redlock_node_up",
        "gauge",
        "Whether the node's worker is connected.",
        |n| u64::from(n.connected),
    ),
    (
        "redlock_node_connects_total",
        "counter",
        "Connections made to the node.",
        |n| n.connects,
    ),
    (
        "redlock_node_restarts_total",
        "counter",
        "Restarts of the node seen.",
        |n| n.restarts,
    ),
    (
        "redlock_node_quarantined",
        "gauge",
        "Whether the clock guard keeps the node out of acquire quorums.",
        |n| u64::from(n.quarantine_remaining.is_some()),
    ),
    (
        "redlock_node_errors_total",
        "counter",
        "Requests that failed on the node: error replies, timeouts, dropped connections, \
         not sent while it was down.",
        |n| n.errors,
    ),
];

/// The text of `stats`.
pub(super) fn render(stats: &Stats) -> String {
    let mut out = Exposition(String::new());
    client_metrics(&mut out, stats);
    node_metrics(&mut out, &stats.nodes);
    out.0
}

/// Text written line by line; writing to a `String` cannot fail.
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: u64) {
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }

    fn histogram(&mut self, name: &str, labels: &str, h: &Histogram) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |b| format!("{b}"));
            let _ = writeln!(
                self.0,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(self.0, "{name}_sum{braces} {}", h.sum.as_secs_f64());
        let _ = writeln!(self.0, "{name}_count{braces} {}", h.count);
    }
}

fn client_metrics(out: &mut Exposition, s: &Stats) {
    let labels: Vec<String> = (s.acquisitions.iter())
        .map(|a| format!("outcome=\"{}\",kind=\"{}\"", a.outcome, a.kind))
        .collect();
    let acquire = "redlock_acquire_duration_seconds";
    let help = "How long acquisitions took, by outcome and kind of lock.";
    out.family(acquire, "histogram", help);
    for (a, labels) in s.acquisitions.iter().zip(&labels) {
        out.histogram(acquire, labels, &a.duration);
    }
    let total = "redlock_acquisitions_total";
    out.family(
        total,
        "counter",
        "Acquisitions by outcome and kind of lock.",
    );
    for (a, labels) in s.acquisitions.iter().zip(&labels) {
        out.sample(total, labels, a.duration.count);
    }
    for (name, help, h) in [
        (
            "redlock_hold_duration_seconds",
            "How long locks were held.",
            &s.hold,
        ),
        (
            "redlock_wait_duration_seconds",
            "How long waiters waited.",
            &s.wait,
        ),
    ] {
        out.family(name, "histogram", help);
        out.histogram(name, "", h);
    }
    let extensions = "redlock_extensions_total";
    out.family(extensions, "counter", "Extensions by result.");
    out.sample(extensions, "result=\"ok\"", s.extensions);
    out.sample(extensions, "result=\"failed\"", s.extensions_failed);
    out.family(
        "redlock_lost_total",
        "counter",
        "Held locks found lost, by reason.",
    );
    for (reason, n) in &s.lost {
        out.sample("redlock_lost_total", &format!("reason=\"{reason}\""), *n);
    }
    for (name, help, v) in [
        ("redlock_locks_held", "Locks held now.", s.locks_held),
        ("redlock_waiters", "Acquisitions waiting now.", s.waiters),
    ] {
        out.family(name, "gauge", help);
        out.sample(name, "", v);
    }
    let dropped = "redlock_events_dropped_total";
    out.family(
        dropped,
        "counter",
        "Events dropped because the listeners' queue was full.",
    );
    out.sample(dropped, "", s.events_dropped);
}

fn node_metrics(out: &mut Exposition, nodes: &[NodeStatus]) {
    let label = |n: &NodeStatus| {
        format!(
            "node=\"{}\"",
            n.address.replace('\\', "\\\\").replace('"', "\\\"")
        )
    };
    let duration = "db_client_operation_duration_seconds";
    out.family(
        duration,
        "histogram",
        "How long each node took to answer a request (its pipeline's round trip).",
    );
    for n in nodes {
        out.histogram(duration, &label(n), &n.command_duration);
    }
    for (name, kind, help, value) in PER_NODE {
        out.family(name, kind, help);
        for n in nodes {
            out.sample(name, &label(n), value(n));
        }
    }
    let votes = "redlock_node_votes_total";
    out.family(
        votes,
        "counter",
        "The node's votes in acquire attempts, as each decided: yes, no, unavailable (down or \
         skipped), timed_out (waited the node timeout for), failed (an error, held out, \
         cancelled), unanswered (decided without it).",
    );
    for n in nodes {
        let v = &n.votes;
        for (vote, count) in [
            ("yes", v.yes),
            ("no", v.no),
            ("unavailable", v.unavailable),
            ("timed_out", v.timed_out),
            ("failed", v.failed),
            ("unanswered", v.unanswered),
        ] {
            out.sample(votes, &format!("{},vote=\"{vote}\"", label(n)), count);
        }
    }
}
