//! The fault schedule: a seeded plan of node hangs and crashes, and the driver that carries it
//! out with real signals, recording when each node was really down.

use crate::support::Cluster;
use crate::{MIN_DOWN_AFTER_KILL_MS, MS, NODES, Rng, now_ns, sleep_until};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Hang,
    Kill,
}

/// Some nodes go down together at `at_ms` (from the start of the chaos phase) for `dur_ms`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub at_ms: u64,
    pub dur_ms: u64,
    pub targets: Vec<(usize, Action)>,
}

impl Fault {
    pub fn is_majority(&self) -> bool {
        self.targets.len() > NODES / 2
    }
}

/// Faults one after the other: one or two nodes at a time, and a majority (three) about every
/// 20 s, the first after 18 s. Crashed nodes stay down longer than any TTL, unless `eager`
/// (the unsafe way: see `--eager-restarts`).
pub fn schedule(seed: u64, chaos_ms: u64, eager: bool) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    let mut faults = Vec::new();
    let mut next_majority = 18_000.min(chaos_ms / 2);
    let mut t = rng.range(200, 800);
    while t < chaos_ms {
        let majority = t >= next_majority;
        let count = if majority {
            3
        } else {
            1 + rng.below(2) as usize
        };
        let mut nodes: Vec<usize> = (0..NODES).collect();
        let mut targets = Vec::new();
        for _ in 0..count {
            let n = nodes.remove(rng.below(nodes.len() as u64) as usize);
            let action = if rng.chance(0.5) {
                Action::Hang
            } else {
                Action::Kill
            };
            targets.push((n, action));
        }
        targets.sort_unstable_by_key(|&(n, _)| n);
        let any_kill = targets.iter().any(|&(_, a)| a == Action::Kill);
        let mut dur_ms = if majority {
            rng.range(1_000, 2_500)
        } else {
            // Short hangs end within node_timeout; long ones break the connections.
            rng.range(30, 1_500)
        };
        if any_kill && eager && !majority {
            dur_ms = dur_ms.min(100);
        } else if any_kill {
            dur_ms = dur_ms.max(MIN_DOWN_AFTER_KILL_MS);
        }
        if majority {
            next_majority += 20_000;
        }
        faults.push(Fault {
            at_ms: t,
            dur_ms,
            targets,
        });
        t += dur_ms + rng.range(200, 1_200);
    }
    faults
}

pub fn describe(fault: &Fault) -> String {
    let what: Vec<String> = fault
        .targets
        .iter()
        .map(|(n, a)| format!("{} n{n}", if *a == Action::Hang { "hang" } else { "kill" }))
        .collect();
    format!(
        "+{:>7.3}s  {:<28} for {:>4} ms{}",
        fault.at_ms as f64 / 1000.0,
        what.join(", "),
        fault.dur_ms,
        if fault.is_majority() {
            "   (MAJORITY DOWN)"
        } else {
            ""
        }
    )
}

/// One node's outage, as the driver saw it: down from after the signal, up from before the
/// resume or restart, so the recorded interval is never longer than the real one.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub node: usize,
    pub action: Action,
    pub down_ns: u64,
    pub up_ns: u64,
}

pub fn drive(cluster: &mut Cluster, faults: &[Fault], chaos_start_ns: u64) -> Vec<Outage> {
    let mut outages = Vec::new();
    for fault in faults {
        sleep_until(chaos_start_ns + fault.at_ms * MS);
        let mut down = Vec::new();
        for &(n, action) in &fault.targets {
            match action {
                Action::Hang => cluster.nodes[n].hang(),
                Action::Kill => cluster.nodes[n].kill(),
            }
            down.push((n, action, now_ns()));
        }
        sleep_until(now_ns() + fault.dur_ms * MS);
        for (n, action, down_ns) in down {
            let up_ns = now_ns();
            match action {
                Action::Hang => cluster.nodes[n].resume(),
                Action::Kill => cluster.nodes[n].restart(),
            }
            outages.push(Outage {
                node: n,
                action,
                down_ns,
                up_ns,
            });
        }
    }
    outages
}

/// Intervals during which more than half of the nodes were down.
pub fn majority_down(outages: &[Outage]) -> Vec<(u64, u64)> {
    let mut edges: Vec<(u64, i32)> = outages
        .iter()
        .flat_map(|o| [(o.down_ns, 1), (o.up_ns, -1)])
        .collect();
    // At equal times, count ups before downs: never widen an interval.
    edges.sort_unstable();
    let mut down = 0;
    let mut start = 0;
    let mut intervals = Vec::new();
    for (t, delta) in edges {
        let before = down;
        down += delta;
        if before <= (NODES / 2) as i32 && down > (NODES / 2) as i32 {
            start = t;
        } else if before > (NODES / 2) as i32 && down <= (NODES / 2) as i32 {
            intervals.push((start, t));
        }
    }
    intervals
}
