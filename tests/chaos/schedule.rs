//! The fault schedule: a seeded plan of faults, the phases that decide which restarts are
//! allowed when, and the driver that carries the plan out with real signals, relay cuts and
//! clock files, recording when each fault really held.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;

use crate::relay::{CutMode, Relay};
use crate::sentinel::{self, Group, GroupAction, GroupFault, GroupStep};
use crate::support::{Cluster, RedisCluster, RedisNode};
use crate::{
    CLIENTS, Flags, GUARD_IN_MS, GUARD_OUT_MS, MIN_DOWN_AFTER_KILL_MS, MS, PHASE_MS, RESOURCES,
    Rng, TTL_MAX_MS, cluster_node, nodes, now_ns, sleep_until,
};

// ---------------------------------------------------------------------------------------------
// Phases

/// Whether the instant `offset_ms` from the start of the chaos phase (negative: the warm-up)
/// falls in a quick-restart phase. Phases of `PHASE_MS` alternate, the seed choosing the first;
/// the client processes compute the same plan from the same seed (see the module docs of
/// `main.rs`).
pub fn quick_phase(seed: u64, offset_ms: i64) -> bool {
    (offset_ms.div_euclid(PHASE_MS as i64) + (seed & 1) as i64).rem_euclid(2) == 1
}

/// Whether a node may be killed and restarted quickly at `at_ms`: inside a quick phase, at
/// least `GUARD_IN_MS` after it began (no call of a client without grace is still running) and
/// `GUARD_OUT_MS` before it ends (every lock the node forgot has expired before clients
/// without grace come back). `eager` (the unsafe way: `--eager-restarts`) allows it anywhere.
pub fn quick_window(seed: u64, at_ms: u64, eager: bool) -> bool {
    if eager {
        return true;
    }
    let at = at_ms as i64;
    quick_phase(seed, at)
        && quick_phase(seed, at - GUARD_IN_MS as i64)
        && quick_phase(seed, at + GUARD_OUT_MS as i64)
}

/// Whether a clock-jump fault may start at `at_ms`: its step forward (within `JUMP_AFTER_MS`)
/// not within `JUMP_GUARD_MS` of a phase's end. The clients of the next phase may not have
/// sampled that node's clock for a whole phase, and a step smaller than what the guard's rate
/// allowance lets pass over so long would go unseen (a documented limit); a step made this
/// long before they start has let every key it shortened reach its original expiry.
fn jump_window(seed: u64, at_ms: u64) -> bool {
    let at = at_ms as i64;
    quick_phase(seed, at) == quick_phase(seed, at + (JUMP_AFTER_MS + JUMP_GUARD_MS) as i64)
}

/// Whether the step forward itself, made at `at_ms`, is `JUMP_GUARD_MS` from its phase's end:
/// the driver's check when it makes the step (a jump of a fault that began in its window
/// passes unless the driver runs late).
fn jump_fits(seed: u64, at_ms: u64) -> bool {
    let at = at_ms as i64;
    quick_phase(seed, at) == quick_phase(seed, at + JUMP_GUARD_MS as i64)
}

/// A clock jump comes at most this long after its fault began.
const JUMP_AFTER_MS: u64 = 600;
/// The largest TTL, and a margin for the drift allowance and the driver's own timing.
const JUMP_GUARD_MS: u64 = TTL_MAX_MS + 500;

// ---------------------------------------------------------------------------------------------
// The plan

/// What the driver can do, each at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Hang(usize),
    Resume(usize),
    /// SIGKILL; the node stays down until its `Restart`, longer than the largest TTL.
    Kill(usize),
    Restart(usize),
    /// SIGKILL, down for `down_ms`, restarted empty. With `at_permille`, timed so that the new
    /// process starts at that fraction of a second of the node's wall clock, and every client
    /// kept off it (its relays refusing) until `reconnect_ms` after the next second boundary:
    /// the clients then connect to a process a few hundredths of a second old whose
    /// `uptime_in_seconds` already says 1.
    QuickRestart {
        node: usize,
        down_ms: u64,
        at_permille: Option<u64>,
        reconnect_ms: u64,
    },
    /// The node's wall clock is set to `ms` ahead of the real one (0: back to the real time).
    Shift {
        node: usize,
        ms: u64,
    },
    Cut {
        client: usize,
        node: usize,
        mode: CutMode,
    },
    Heal {
        client: usize,
        node: usize,
    },
    /// On the cluster node: one client's relay to one master cut (the master of
    /// [`target_key`]`(k)`'s slot when the cut begins), the others' not.
    MasterCut {
        client: usize,
        k: usize,
        mode: CutMode,
    },
    /// The end of the client's `MasterCut`.
    MasterHeal {
        client: usize,
    },
    /// On the cluster node: the wall clock of the master of [`target_key`]`(k)`'s slot set to `ms`
    /// ahead of the real one; 0 sets the master that jumped back to the real time.
    MasterShift {
        k: usize,
        ms: u64,
    },
    /// SIGSTOP of a whole client process, as one of its holders of `kind` (`plain`, `fenced`,
    /// `election`: a leader) says it is about to write, if one does soon.
    Pause {
        client: usize,
        kind: &'static str,
    },
    Cont(usize),
    /// Faults of the cluster node, each carried out whole by the driver, the `usize` choosing
    /// the master (the k-th of the masters by port, modulo their number). SIGKILL of a master;
    /// once its replica is promoted, and no sooner than the `u64` ms after the fault began (a
    /// quick window opens then: `back_after`), it restarts empty (its `nodes.conf` kept) and
    /// rejoins as a replica.
    ClusterKill(usize, u64),
    /// SIGSTOP of a master until its replica is promoted (and the `u64` ms, likewise), then
    /// SIGCONT: it comes back as a replica.
    ClusterStop(usize, u64),
    /// `CLUSTER FAILOVER` on a replica of a master: a graceful, lossless change of master.
    ClusterFailover(usize),
    /// A fault of the Sentinel group, carried out whole by the driver (`sentinel.rs`).
    Group(GroupStep),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Nodes,
    Majority,
    Partition,
    ClockJump,
    Pause,
    /// One client cut off from two nodes (so it holds its locks on a bare majority), another
    /// from the other two of that majority (so its only quorum shares one node with the
    /// first's, and its threads queue up on what the first holds), then that node restarted
    /// empty. The restart-grace scenario of issue 24.
    Young,
    /// Two nodes hung while the others take fenced acquisitions (their counters fall behind),
    /// then a third node crashes and the other two hang while the first two come back, then it
    /// restarts empty: the only quorum is the restarted node and the two stale ones. The
    /// fencing scenario of issue 24, with hangs instead of partitions.
    Fence,
    /// One standalone node crashed: a quick restart where the phases allow, else a delayed
    /// one. In the cluster configuration, which has too few standalone nodes for Young and
    /// Fence, each phase opens with one, so that both kinds of restart happen in every run.
    Crash,
    /// The cluster configuration's faults of its cluster node (`Step::ClusterKill` and the
    /// next two).
    ClusterKill,
    ClusterStop,
    ClusterFailover,
    /// The cluster configurations' cut of one cluster master: one client refused by one master
    /// of the cluster node, another blackholed by one, each beside cuts of standalone nodes now
    /// and then (the `Partition` class may cut a master too).
    MasterCut,
    /// The cluster configurations' clock jump of one cluster master (a `ClockJump` may pick
    /// the cluster node too).
    MasterJump,
    /// The Sentinel configuration's faults of its group.
    Sentinel(GroupAction),
}

/// Steps at `at_ms` from the start of the chaos phase, each `delay` ms after the previous
/// one ended.
#[derive(Debug, Clone)]
pub struct Fault {
    pub at_ms: u64,
    pub class: Class,
    pub steps: Vec<(u64, Step)>,
}

impl Fault {
    /// Each step with its planned offset from the fault's start, in ms (the sum of the delays
    /// up to it; the waits a step itself may make come on top).
    pub fn steps_at(&self) -> impl Iterator<Item = (u64, Step)> + '_ {
        self.steps.iter().scan(0, |at, &(delay, step)| {
            *at += delay;
            Some((*at, step))
        })
    }

    /// Planned length, with what a timed restart may wait for its moment (a second at most)
    /// and a pause for a write (`WRITE_WAIT_NS`), so that the schedule does not drift.
    fn planned_ms(&self) -> u64 {
        let waits: u64 = self
            .steps
            .iter()
            .map(|(_, s)| match s {
                Step::QuickRestart {
                    at_permille: Some(_),
                    ..
                } => 1_000,
                Step::Pause { .. } => WRITE_WAIT_NS / MS,
                // Typical lengths (the driver waits for the cluster, however long it takes).
                Step::ClusterKill(_, back) | Step::ClusterStop(_, back) => {
                    back + CLUSTER_FAULT_MS - CLUSTER_BACK_MS
                }
                Step::ClusterFailover(_) => 2_000,
                Step::Group(g) => sentinel::planned_ms(g),
                _ => 0,
            })
            .sum();
        self.steps.iter().map(|(d, _)| d).sum::<u64>() + waits
    }
}

/// How long a cluster master's SIGKILL or SIGSTOP usually lasts, from the signal until the old
/// master is a replica again and the cluster whole: about 2 s for the failover
/// (`cluster-node-timeout` 1000 ms, then the replica's election), then its return (planned
/// `CLUSTER_BACK_MS` or later, when a quick window opens), its demotion within a few hundred
/// ms and its resync.
const CLUSTER_FAULT_MS: u64 = CLUSTER_BACK_MS + 1_000;
/// When the old master comes back (SIGCONT, or the restart of a killed one), at the earliest
/// after its fault began: the failover takes this long at least.
const CLUSTER_BACK_MS: u64 = 2_000;
/// The old master, back, believes it is still the master until the cluster tells it
/// otherwise, and a client that rediscovers the cluster from it at that moment can take a
/// vote there that its demotion then loses: a quick restart of the node. So it comes back
/// only where a quick window holds from then for this long (its demotion takes a few hundred
/// ms at most; the driver measures it and rule (p) checks it).
const CLUSTER_BACK_WINDOW_MS: u64 = 1_500;

/// Whether a cluster master may come back from a SIGKILL or a SIGSTOP at `at_ms` (see
/// `CLUSTER_BACK_WINDOW_MS`): where a quick window holds for its demotion, so that only
/// clients with `restart_grace` acquire; or where a delayed phase holds for it, begun at least
/// `GUARD_IN_MS` before (every call of a client with grace, which the quick phase before used,
/// has returned), since the clients without grace set `min_replicas` (equal to the replicas
/// per master) in the cluster configurations: the old master, its replica gone, counts none of
/// their votes.
pub fn cluster_back_window(seed: u64, at_ms: u64, eager: bool) -> bool {
    let quick = quick_window(seed, at_ms, eager)
        && quick_window(seed, at_ms + CLUSTER_BACK_WINDOW_MS, eager);
    let at = at_ms as i64;
    let delayed = crate::replicated()
        && [
            at - GUARD_IN_MS as i64,
            at,
            at + CLUSTER_BACK_WINDOW_MS as i64,
        ]
        .iter()
        .all(|&t| !quick_phase(seed, t));
    quick || delayed
}

/// A cluster master stopped or killed at `at_ms` comes back this many ms later: at the
/// earliest `CLUSTER_BACK_MS` (its failover), else when the next window opens, if one opens
/// within `CLUSTER_BACK_MAX_MS` (`None`: too far).
fn back_after(seed: u64, at_ms: u64, eager: bool) -> Option<u64> {
    (CLUSTER_BACK_MS..=CLUSTER_BACK_MAX_MS)
        .step_by(50)
        .find(|&d| cluster_back_window(seed, at_ms + d, eager))
}

/// A master stopped or killed waits at most this long for its window (the promotion part
/// of its fault is safe in either phase, so it may begin before a quick window opens).
const CLUSTER_BACK_MAX_MS: u64 = 6_000;

/// The nodes the standalone hangs and crashes may hit: in the cluster configurations, all but
/// the cluster node (whose masters the cluster faults stop and kill), or the Sentinel group.
/// Cuts and clock jumps hit every node but a Sentinel group's, a cluster node's one master at a
/// time.
fn cluster_except(flags: &Flags) -> Vec<usize> {
    if flags.cluster || flags.sentinel {
        vec![cluster_node()]
    } else {
        Vec::new()
    }
}

/// The key whose master a `MasterCut` or `MasterShift` hits: `chaos:r<k>`, or for `k ==
/// RESOURCES` the read-write lock's (whose readers hold for hundreds of ms, so that a jump
/// there meets a live hold often: `--no-clock-guard` always picks it).
fn target_key(k: usize) -> String {
    if k < RESOURCES {
        crate::resource(k)
    } else {
        crate::kinds::RW_RESOURCE.to_owned()
    }
}

/// A minority of the nodes, at most: two of five, one of three.
fn minority() -> usize {
    (nodes() - 1) / 2
}

/// A cut of `client` from `node`, and its heal: on the cluster node, from one of its masters.
fn cut_steps(
    rng: &mut Rng,
    flags: &Flags,
    client: usize,
    node: usize,
    mode: CutMode,
) -> (Step, Step) {
    if flags.cluster && node == cluster_node() {
        let k = rng.below(RESOURCES as u64 + 1) as usize;
        (
            Step::MasterCut { client, k, mode },
            Step::MasterHeal { client },
        )
    } else {
        (
            Step::Cut { client, node, mode },
            Step::Heal { client, node },
        )
    }
}

fn pick_nodes(rng: &mut Rng, count: usize, except: &[usize]) -> Vec<usize> {
    let mut nodes: Vec<usize> = (0..nodes()).filter(|n| !except.contains(n)).collect();
    let mut out: Vec<usize> = (0..count)
        .map(|_| nodes.remove(rng.below(nodes.len() as u64) as usize))
        .collect();
    out.sort_unstable();
    out
}

fn mode(rng: &mut Rng) -> CutMode {
    if rng.chance(0.5) {
        CutMode::Refuse
    } else {
        CutMode::Blackhole
    }
}

fn quick(rng: &mut Rng, node: usize) -> Step {
    // Most quick restarts start the new process just before a second boundary of its clock,
    // where `uptime_in_seconds` overstates its age by almost a second.
    let at_permille = rng.chance(0.7).then(|| rng.range(900, 990));
    Step::QuickRestart {
        node,
        down_ms: rng.range(0, 100),
        at_permille,
        reconnect_ms: rng.range(5, 100),
    }
}

/// Faults one after the other. Each phase opens with the two restart combos in a seeded order
/// (quick restarts in quick phases where the guard bands allow, delayed restarts otherwise);
/// the other classes each come once early on in a seeded order, then at random; a majority
/// (three nodes) goes down about every 20 s, the first after 18 s.
///
/// A run broken on purpose steers its faults to what it broke: with `--unchecked-storage`
/// every pause waits for a fenced write or a leader's term-checked write, with `--no-clock-guard` every clock jump comes with
/// a client holding its locks on a bare majority that includes the jumping node.
///
/// Every plan has each class of [`planned_classes`] (rule (cov) wants them): a plan that lacks
/// one (the combinations and the majority outages can crowd out the rest: 1 plan in 1,000 did)
/// is drawn again, from where the seed's random numbers left off.
pub fn schedule(seed: u64, chaos_ms: u64, flags: &Flags) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    for _ in 0..DRAWS {
        let faults = draw(seed, &mut rng, chaos_ms, flags);
        if classes(&faults, seed, flags).iter().all(|c| c.1) {
            return faults;
        }
    }
    panic!(
        "seed {seed}: no plan of {chaos_ms} ms in {DRAWS} draws has every fault class \
         (--plan-coverage counts the plans that lack each)"
    )
}

/// Plans drawn at most for one seed.
const DRAWS: usize = 100;

fn draw(seed: u64, rng: &mut Rng, chaos_ms: u64, flags: &Flags) -> Vec<Fault> {
    let eager = flags.eager;
    let mut faults = Vec::new();
    let mut next_majority = 18_000.min(chaos_ms / 2);
    let mut first = vec![Class::Nodes, Class::Partition, Class::Pause];
    if flags.cluster {
        first.push(Class::MasterCut);
    }
    for i in (1..first.len()).rev() {
        first.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // The clock jumps first: they alone must wait for a window within their phase.
    first.push(Class::ClockJump);
    if flags.cluster {
        first.push(Class::MasterJump);
    }
    let mut phase = None;
    let mut combos = Vec::new();
    let mut returns = 0u64;
    let mut delayed_phases = 0u64;
    let mut t = rng.range(200, 800);
    while t < chaos_ms {
        if phase != Some(t / PHASE_MS) {
            phase = Some(t / PHASE_MS);
            combos = if flags.sentinel {
                sentinel::combos(seed, t)
            } else if flags.cluster {
                // Each phase: a standalone crash, and a fault of the cluster node: in a quick
                // phase a SIGKILL or a SIGSTOP of a master, whose old master comes back to
                // clients with grace; in a delayed phase, in turns, a graceful failover or a
                // SIGKILL or SIGSTOP whose old master comes back to clients with
                // `min_replicas`. SIGKILLs and SIGSTOPs take turns (the seed choosing the
                // first of each).
                let quick = quick_phase(seed, t as i64);
                delayed_phases += u64::from(!quick);
                let cluster = if !quick
                    && (!crate::replicated() || (delayed_phases + seed / 4).is_multiple_of(2))
                {
                    Class::ClusterFailover
                } else {
                    returns += 1;
                    if (returns + seed / 2).is_multiple_of(2) {
                        Class::ClusterKill
                    } else {
                        Class::ClusterStop
                    }
                };
                vec![Class::Crash, cluster]
            } else if rng.chance(0.5) {
                vec![Class::Young, Class::Fence]
            } else {
                vec![Class::Fence, Class::Young]
            };
        }
        // In a quick phase, wait for the guard band to open (for a cluster master's return:
        // for its window).
        // A fault of the Sentinel group once the last one's tail has ended; a failover's window
        // is narrow, so nothing else starts in its phase before the window opens.
        let group_free = sentinel::free_at(&faults) <= t;
        let opens = t - t % PHASE_MS + GUARD_IN_MS;
        if combos.contains(&Class::Sentinel(GroupAction::Failover))
            && quick_phase(seed, t as i64)
            && t < opens
            && sentinel::free_at(&faults) <= opens
        {
            t = opens;
            continue;
        }
        let combo_ok = |c: Class| match c {
            Class::ClusterKill | Class::ClusterStop => back_after(seed, t, eager).is_some(),
            Class::ClusterFailover => true,
            Class::Sentinel(a) => group_free && sentinel::ready(a, seed, t, eager),
            // Its restart comes at once, or within a second and 100 ms when timed.
            Class::Crash => {
                !quick_phase(seed, t as i64)
                    || quick_window(seed, t, eager) && quick_window(seed, t + 1_100, eager)
            }
            _ => {
                !quick_phase(seed, t as i64)
                    || quick_window(seed, t + 300, eager) && quick_window(seed, t + 1_500, eager)
            }
        };
        // The combination whose moment has come (in the cluster configuration, before a
        // majority outage, whose time is loose: a quick phase has room for little more than a
        // cluster master's fault and a crash).
        let mut ready = combos.iter().rposition(|&c| combo_ok(c));
        // A crash first, though, when a cluster master's fault still fits after it (a timed
        // quick restart takes up to a second, and a gap follows).
        if let Some(i) = ready
            && matches!(combos[i], Class::ClusterKill | Class::ClusterStop)
            && let Some(crash) = combos.iter().position(|&c| c == Class::Crash)
            && combo_ok(Class::Crash)
            && back_after(seed, t + 2_500, eager).is_some()
        {
            ready = Some(crash);
        }
        let mut class = if let Some(i) = ready.filter(|_| flags.cluster || flags.sentinel) {
            combos.remove(i)
        } else if t >= next_majority {
            next_majority += 20_000;
            Class::Majority
        } else if let Some(i) = ready {
            combos.remove(i)
        } else if let Some(c) = first.pop() {
            c
        } else if flags.sentinel {
            match rng.below(100) {
                0..30 => Class::Nodes,
                30..50 => Class::Partition,
                50..65 => Class::ClockJump,
                65..80 => Class::Pause,
                80..90 => Class::Sentinel(GroupAction::Replica),
                _ => Class::Crash,
            }
        } else if flags.cluster {
            match rng.below(100) {
                0..25 => Class::Nodes,
                25..40 => Class::Partition,
                40..50 => Class::MasterCut,
                50..60 => Class::ClockJump,
                60..65 => Class::MasterJump,
                65..80 => Class::Pause,
                // The SIGKILLs and SIGSTOPs of cluster masters come as each quick phase's
                // combination only: one at random could take that phase's window from it.
                80..90 => Class::ClusterFailover,
                _ => Class::Crash,
            }
        } else {
            match rng.below(100) {
                0..30 => Class::Nodes,
                30..50 => Class::Partition,
                50..65 => Class::ClockJump,
                65..80 => Class::Pause,
                80..90 => Class::Young,
                _ => Class::Fence,
            }
        };
        if matches!(class, Class::Sentinel(_)) && !group_free {
            // A lost replica drawn at random while the group is not whole yet: a crash.
            class = Class::Crash;
        }
        if matches!(class, Class::ClockJump | Class::MasterJump) && !jump_window(seed, t) {
            // Too close to a phase's end: a partition now, the jump next time.
            first.push(class);
            class = Class::Partition;
        }
        let fault = build(class, t, seed, flags, rng);
        t += fault.planned_ms() + rng.range(200, 1_200);
        faults.push(fault);
    }
    faults
}

/// The fault classes of rule (cov) that the plan alone decides, each with whether `faults`
/// injects it: a run whose plan lacks one cannot cover it, however the run goes.
pub fn planned_classes(faults: &[Fault], seed: u64, cluster: bool) -> Vec<(&'static str, bool)> {
    let any = |f: &dyn Fn(&Step) -> bool| faults.iter().flat_map(|x| &x.steps).any(|(_, s)| f(s));
    // A SIGKILLed or SIGSTOPped master's return, planned in a quick phase or a delayed one.
    let back_in = |quick: bool| {
        faults.iter().any(|f| {
            f.steps.iter().any(|(_, s)| match s {
                Step::ClusterKill(_, back) | Step::ClusterStop(_, back) => {
                    quick_phase(seed, (f.at_ms + back) as i64) == quick
                }
                _ => false,
            })
        })
    };
    let mut classes = vec![
        ("node hangs", any(&|s| matches!(s, Step::Hang(_)))),
        (
            "crashes with a delayed restart",
            any(&|s| matches!(s, Step::Restart(_))),
        ),
        (
            "crashes with a quick restart",
            quick_restart_phases(faults) >= 2,
        ),
        (
            "majority outages",
            faults.iter().any(|f| f.class == Class::Majority),
        ),
        (
            "clock jumps",
            any(&|s| matches!(s, Step::Shift { ms, .. } | Step::MasterShift { ms, .. } if *ms > 0)),
        ),
        (
            "refusing cuts",
            any(&|s| {
                matches!(
                    s,
                    Step::Cut {
                        mode: CutMode::Refuse,
                        ..
                    }
                )
            }),
        ),
        (
            "blackholing cuts",
            any(&|s| {
                matches!(
                    s,
                    Step::Cut {
                        mode: CutMode::Blackhole,
                        ..
                    }
                )
            }),
        ),
        ("client pauses", any(&|s| matches!(s, Step::Pause { .. }))),
    ];
    if cluster {
        classes.extend([
            (
                "cluster master SIGKILLs",
                any(&|s| matches!(s, Step::ClusterKill(..))),
            ),
            (
                "cluster master SIGSTOPs",
                any(&|s| matches!(s, Step::ClusterStop(..))),
            ),
            (
                "CLUSTER FAILOVERs",
                any(&|s| matches!(s, Step::ClusterFailover(_))),
            ),
            (
                "refusing cuts of a cluster master",
                any(&|s| {
                    matches!(
                        s,
                        Step::MasterCut {
                            mode: CutMode::Refuse,
                            ..
                        }
                    )
                }),
            ),
            (
                "blackholing cuts of a cluster master",
                any(&|s| {
                    matches!(
                        s,
                        Step::MasterCut {
                            mode: CutMode::Blackhole,
                            ..
                        }
                    )
                }),
            ),
            (
                "clock jumps of a cluster master",
                any(&|s| matches!(s, Step::MasterShift { ms, .. } if *ms > 0)),
            ),
            (
                "old cluster masters back in a quick phase (clients with grace)",
                back_in(true),
            ),
        ]);
        if crate::replicated() {
            classes.push((
                "old cluster masters back in a delayed phase (clients with min_replicas)",
                back_in(false),
            ));
        }
    }
    classes
}

/// How many phases have a quick restart planned. Rule (cov) wants one made, and the plan has
/// them in two phases: a process of this machine can take seconds to end after a SIGKILL (see
/// `support::START_WITHIN`), which makes that restart a delayed one and the driver late for the
/// rest of its phase.
fn quick_restart_phases(faults: &[Fault]) -> usize {
    let mut phases: Vec<u64> = faults
        .iter()
        .flat_map(|f| f.steps_at().map(move |(at, step)| (f.at_ms + at, step)))
        .filter(|(_, step)| matches!(step, Step::QuickRestart { .. }))
        .map(|(at, _)| at / PHASE_MS)
        .collect();
    phases.dedup();
    phases.len()
}

/// The classes of the configuration `flags` runs ([`planned_classes`], and the Sentinel
/// group's).
pub fn classes(faults: &[Fault], seed: u64, flags: &Flags) -> Vec<(&'static str, bool)> {
    let mut all = planned_classes(faults, seed, flags.cluster);
    if flags.sentinel {
        let groups: Vec<GroupStep> = faults
            .iter()
            .flat_map(|f| &f.steps)
            .filter_map(|(_, s)| match s {
                Step::Group(g) => Some(*g),
                _ => None,
            })
            .collect();
        all.extend(sentinel::planned_classes(&groups));
    }
    all
}

/// For `seeds` seeds (a fixed pseudo-random sequence): each class of [`planned_classes`] with
/// the seeds whose plan of `chaos_ms` lacks it, and how many seeds' first draw lacked one.
pub fn plans_short(
    seeds: u64,
    chaos_ms: u64,
    flags: &Flags,
) -> (Vec<(&'static str, Vec<u64>)>, u64) {
    let mut rng = Rng::new(0x00C0_FFEE);
    let mut short: Vec<(&'static str, Vec<u64>)> = Vec::new();
    let mut redrawn = 0;
    for _ in 0..seeds {
        let seed = rng.next();
        let first = draw(seed, &mut Rng::new(seed), chaos_ms, flags);
        redrawn += u64::from(!classes(&first, seed, flags).iter().all(|c| c.1));
        for (what, has) in classes(&schedule(seed, chaos_ms, flags), seed, flags) {
            let at = match short.iter().position(|(w, _)| *w == what) {
                Some(at) => at,
                None => {
                    short.push((what, Vec::new()));
                    short.len() - 1
                }
            };
            if !has {
                short[at].1.push(seed);
            }
        }
    }
    (short, redrawn)
}

fn build(class: Class, at_ms: u64, seed: u64, flags: &Flags, rng: &mut Rng) -> Fault {
    let eager = flags.eager;
    let except = cluster_except(flags);
    // What these cuts and clock jumps do not reach: a Sentinel group, which has no relay among a
    // client's relays to the lock nodes (its relays to the sentinels and to the data nodes are
    // cut with the group's own faults, while it switches) and whose data nodes run without the
    // clock shim.
    let unrelayed: Vec<usize> = if flags.sentinel {
        vec![cluster_node()]
    } else {
        Vec::new()
    };
    let mut steps = Vec::new();
    match class {
        Class::Nodes | Class::Majority => {
            let majority = class == Class::Majority;
            let count = if majority {
                nodes() / 2 + 1
            } else {
                1 + rng.below(minority() as u64) as usize
            };
            let nodes = pick_nodes(rng, count, &except);
            let mut dur = if majority {
                rng.range(1_000, 2_500)
            } else {
                // Short hangs end within node_timeout; long ones break the connections.
                rng.range(30, 1_500)
            };
            let mut ends = Vec::new();
            for &n in &nodes {
                if rng.chance(0.5) {
                    steps.push((0, Step::Hang(n)));
                    ends.push(Step::Resume(n));
                } else if !majority && quick_window(seed, at_ms, eager) {
                    steps.push((0, quick(rng, n)));
                } else if eager && !majority {
                    // The unsafe way outside quick phases too: back within 100 ms.
                    steps.push((
                        0,
                        Step::QuickRestart {
                            node: n,
                            down_ms: rng.range(0, 100),
                            at_permille: None,
                            reconnect_ms: 0,
                        },
                    ));
                } else {
                    steps.push((0, Step::Kill(n)));
                    ends.push(Step::Restart(n));
                    dur = dur.max(MIN_DOWN_AFTER_KILL_MS);
                }
            }
            for (i, end) in ends.into_iter().enumerate() {
                steps.push((if i == 0 { dur } else { 0 }, end));
            }
        }
        Class::Partition => {
            // Two clients, each cut off from nodes of its own, one refused and one blackholed.
            let clients = pick_clients(rng, 2);
            let mut heals = Vec::new();
            for (c, m) in clients
                .into_iter()
                .zip([CutMode::Refuse, CutMode::Blackhole])
            {
                // Now and then a majority: that client must not acquire meanwhile.
                let count = if rng.chance(0.3) {
                    nodes() / 2 + 1
                } else {
                    1 + rng.below(minority() as u64) as usize
                };
                for n in pick_nodes(rng, count, &unrelayed) {
                    let (cut, heal) = cut_steps(rng, flags, c, n, m);
                    steps.push((0, cut));
                    heals.push(heal);
                }
            }
            let dur = rng.range(300, 2_000);
            for (i, h) in heals.into_iter().enumerate() {
                steps.push((if i == 0 { dur } else { 0 }, h));
            }
        }
        Class::ClockJump | Class::MasterJump => {
            let node = if class == Class::MasterJump {
                cluster_node()
            } else {
                pick_nodes(rng, 1, &unrelayed)[0]
            };
            let ms = rng.range(200, 3_000);
            // On the cluster node, one master's clock: the master of one resource's slot.
            let (jump, back) = if flags.cluster && node == cluster_node() {
                let k = rng.below(RESOURCES as u64 + 1) as usize;
                let k = if flags.no_clock_guard { RESOURCES } else { k };
                (Step::MasterShift { k, ms }, Step::MasterShift { k, ms: 0 })
            } else {
                (Step::Shift { node, ms }, Step::Shift { node, ms: 0 })
            };
            // Often with a client cut off from a minority of other nodes, so that its locks
            // rest on a bare majority that includes the jumping node.
            let cut = (flags.no_clock_guard || rng.chance(0.6)).then(|| {
                let c = rng.below(CLIENTS as u64) as usize;
                let off: Vec<usize> = unrelayed.iter().copied().chain([node]).collect();
                let nodes = pick_nodes(rng, minority(), &off);
                let m = mode(rng);
                let cuts: Vec<(Step, Step)> = nodes
                    .into_iter()
                    .map(|n| cut_steps(rng, flags, c, n, m))
                    .collect();
                cuts
            });
            for (cut, _) in cut.iter().flatten() {
                steps.push((0, *cut));
            }
            steps.push((rng.range(200, JUMP_AFTER_MS), jump));
            let hold = rng.range(300, 1_500);
            for (i, (_, heal)) in cut.iter().flatten().enumerate() {
                steps.push((if i == 0 { hold } else { 0 }, *heal));
            }
            // Back to the real time later: a backward step only makes keys live longer.
            steps.push((
                if cut.is_some() { 0 } else { hold } + rng.range(200, 1_000),
                back,
            ));
        }
        Class::MasterCut => {
            // Two clients, each cut off from one master of the cluster node (one refused, one
            // blackholed), now and then from a standalone node too; the third reaches them all.
            let clients = pick_clients(rng, 2);
            let mut heals = Vec::new();
            for (c, m) in clients
                .into_iter()
                .zip([CutMode::Refuse, CutMode::Blackhole])
            {
                let mut nodes = vec![cluster_node()];
                if rng.chance(0.5) {
                    nodes.extend(pick_nodes(rng, minority() - 1, &except));
                }
                for n in nodes {
                    let (cut, heal) = cut_steps(rng, flags, c, n, m);
                    steps.push((0, cut));
                    heals.push(heal);
                }
            }
            let dur = rng.range(300, 2_000);
            for (i, h) in heals.into_iter().enumerate() {
                steps.push((if i == 0 { dur } else { 0 }, h));
            }
        }
        Class::Pause => {
            let client = rng.below(CLIENTS as u64) as usize;
            // With `--unchecked-storage`, always at a term- or token-checked write.
            let kind = match (flags.unchecked_storage, rng.below(4)) {
                (false, 0 | 1) => "plain",
                (_, k) if k % 2 == 0 => "fenced",
                _ => "election",
            };
            steps.push((0, Step::Pause { client, kind }));
            // Longer than any lock's validity.
            steps.push((rng.range(TTL_MAX_MS + 100, 1_500), Step::Cont(client)));
        }
        Class::Young => {
            let clients = pick_clients(rng, 2);
            let (a, b) = (clients[0], clients[1]);
            let cut_a = pick_nodes(rng, 2, &[]);
            let x = pick_nodes(rng, 1, &cut_a)[0];
            let rest: Vec<usize> = (0..nodes())
                .filter(|n| !cut_a.contains(n) && *n != x)
                .collect();
            for (client, nodes) in [(a, &cut_a), (b, &rest)] {
                let m = mode(rng);
                for &n in nodes {
                    steps.push((
                        0,
                        Step::Cut {
                            client,
                            node: n,
                            mode: m,
                        },
                    ));
                }
            }
            let before = rng.range(300, 1_000);
            if quick_window(seed, at_ms + before, eager) {
                steps.push((before, quick(rng, x)));
            } else {
                steps.push((before, Step::Kill(x)));
                steps.push((rng.range(MIN_DOWN_AFTER_KILL_MS, 1_200), Step::Restart(x)));
            }
            let dur = rng.range(300, 1_000);
            for (i, &n) in cut_a.iter().enumerate() {
                steps.push((
                    if i == 0 { dur } else { 0 },
                    Step::Heal { client: a, node: n },
                ));
            }
            for &n in &rest {
                steps.push((0, Step::Heal { client: b, node: n }));
            }
        }
        Class::Fence => {
            let stale = pick_nodes(rng, 2, &[]);
            let x = pick_nodes(rng, 1, &stale)[0];
            let others: Vec<usize> = (0..nodes())
                .filter(|n| !stale.contains(n) && *n != x)
                .collect();
            for &n in &stale {
                steps.push((0, Step::Hang(n)));
            }
            let before = rng.range(600, 1_500);
            let quick_restart = quick_window(seed, at_ms + before, eager);
            if !quick_restart {
                steps.push((before, Step::Kill(x)));
            }
            for (i, &n) in others.iter().enumerate() {
                let delay = if i == 0 && quick_restart { before } else { 0 };
                steps.push((delay, Step::Hang(n)));
            }
            for &n in &stale {
                steps.push((0, Step::Resume(n)));
            }
            if quick_restart {
                steps.push((0, quick(rng, x)));
                // Past the grace, with the other two still hung.
                steps.push((rng.range(TTL_MAX_MS + 100, 1_200), Step::Resume(others[0])));
            } else {
                steps.push((rng.range(MIN_DOWN_AFTER_KILL_MS, 1_200), Step::Restart(x)));
                steps.push((rng.range(300, 1_000), Step::Resume(others[0])));
            }
            steps.push((0, Step::Resume(others[1])));
        }
        Class::Crash => {
            let n = pick_nodes(rng, 1, &except)[0];
            if quick_window(seed, at_ms, eager) {
                steps.push((0, quick(rng, n)));
            } else {
                steps.push((0, Step::Kill(n)));
                steps.push((rng.range(MIN_DOWN_AFTER_KILL_MS, 1_200), Step::Restart(n)));
            }
        }
        Class::ClusterKill | Class::ClusterStop => {
            let k = rng.below(3) as usize;
            let back = back_after(seed, at_ms, eager).unwrap_or(CLUSTER_BACK_MS);
            steps.push((
                0,
                if class == Class::ClusterKill {
                    Step::ClusterKill(k, back)
                } else {
                    Step::ClusterStop(k, back)
                },
            ));
        }
        Class::ClusterFailover => steps.push((0, Step::ClusterFailover(rng.below(3) as usize))),
        Class::Sentinel(a) => steps.push((0, Step::Group(sentinel::plan(a, rng, flags)))),
    }
    Fault {
        at_ms,
        class,
        steps,
    }
}

fn pick_clients(rng: &mut Rng, count: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..CLIENTS).collect();
    (0..count)
        .map(|_| all.remove(rng.below(all.len() as u64) as usize))
        .collect()
}

pub fn describe(fault: &Fault) -> String {
    let what: Vec<String> = fault
        .steps_at()
        .map(|(at, step)| {
            let s = match step {
                Step::Hang(n) => format!("hang n{n}"),
                Step::Resume(n) => format!("resume n{n}"),
                Step::Kill(n) => format!("kill n{n}"),
                Step::Restart(n) => format!("restart n{n}"),
                Step::QuickRestart {
                    node,
                    down_ms,
                    at_permille,
                    reconnect_ms,
                } => format!(
                    "quick-restart n{node} ({down_ms} ms down{})",
                    at_permille.map_or(String::new(), |p| format!(
                        ", starts at x.{p:03} s, clients back at x+1.{reconnect_ms:03} s"
                    ))
                ),
                Step::Shift { node, ms } => format!("clock n{node} +{ms} ms"),
                Step::Cut { client, node, mode } => {
                    format!("cut c{client}-n{node} {}", mode.name())
                }
                Step::Heal { client, node } => format!("heal c{client}-n{node}"),
                Step::MasterCut { client, k, mode } => format!(
                    "cut c{client}-n{} (the master of {}) {}",
                    cluster_node(),
                    target_key(k),
                    mode.name()
                ),
                Step::MasterHeal { client } => format!("heal c{client}-n{}", cluster_node()),
                Step::MasterShift { k, ms } => {
                    format!(
                        "clock n{} (the master of {}) +{ms} ms",
                        cluster_node(),
                        target_key(k)
                    )
                }
                Step::Pause { client, kind } => format!("SIGSTOP c{client} at a {kind} write"),
                Step::Cont(c) => format!("SIGCONT c{c}"),
                Step::ClusterKill(k, back) => format!(
                    "SIGKILL cluster master #{k} of n{}, restart once failed over \
                     (+{back} at the earliest)",
                    cluster_node()
                ),
                Step::ClusterStop(k, back) => format!(
                    "SIGSTOP cluster master #{k} of n{}, SIGCONT once failed over \
                     (+{back} at the earliest)",
                    cluster_node()
                ),
                Step::ClusterFailover(k) => {
                    format!("CLUSTER FAILOVER of master #{k} of n{}", cluster_node())
                }
                Step::Group(g) => sentinel::describe(&g),
            };
            if at == 0 { s } else { format!("+{at}: {s}") }
        })
        .collect();
    format!(
        "+{:>7.3}s  {:<13} {}",
        fault.at_ms as f64 / 1000.0,
        format!("{:?}", fault.class),
        what.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// The driver

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Hang,
    /// Crashed and restarted after more than the largest TTL.
    Kill,
    /// Crashed and restarted within 100 ms.
    Quick,
    /// One client's relay to the node cut.
    Refuse,
    Blackhole,
    /// The cluster node, from a master's SIGKILL, SIGSTOP or `CLUSTER FAILOVER` until its
    /// replica was seen promoted (the node answers for every slot again).
    ClusterKill,
    ClusterStop,
    ClusterFailover,
    /// One client's relay to one master of the cluster node cut. The node stays reachable in
    /// part (its other masters serve their slots until the worker reconnects), so rule (e)
    /// does not count it down; rule (f) excuses its keys as for any cut.
    MasterRefuse,
    MasterBlackhole,
    /// The Sentinel group, from its master's SIGKILL until every sentinel named the new
    /// master; from a `SENTINEL FAILOVER` until that plus the watch's `D` (its votes may be
    /// lost meanwhile; the old master answers, so rule (e) does not count it).
    GroupKill,
    GroupFailover,
    /// One client's relay to the Sentinel group's old master cut, from before its kill or
    /// failover until every sentinel switched. The client reaches the node again through the
    /// new master once a sentinel it reaches names it, so rule (e) does not count it down;
    /// rule (f) excuses its keys as for any cut.
    OldMasterRefuse,
    OldMasterBlackhole,
}

/// One node's outage, as the driver saw it: down from after the signal, up from before the
/// resume or restart, so the recorded interval is never longer than the real one. A cut
/// (`client` set) is an outage of that node for that client only.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub node: usize,
    pub client: Option<usize>,
    pub action: Action,
    pub down_ns: u64,
    pub up_ns: u64,
}

impl Outage {
    /// Whether `client` could not reach the node through it.
    pub fn hits(&self, client: usize) -> bool {
        self.client.is_none_or(|c| c == client)
    }
}

/// A client process stopped by the driver (SIGSTOP to SIGCONT), and the kind of write it was
/// about to make if it had said so.
#[derive(Debug, Clone)]
pub struct Pause {
    pub client: usize,
    pub from: u64,
    pub to: u64,
    pub at_write: Option<&'static str>,
}

/// A node crashed at `killed` and started again, its new process spawned `permille` of a
/// second into the node's wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    pub node: usize,
    pub quick: bool,
    pub killed: u64,
    pub permille: u64,
}

/// A failover of the cluster node, as the driver saw it.
#[derive(Debug, Clone)]
pub struct Failover {
    /// `ClusterKill`, `ClusterStop` or `ClusterFailover`.
    pub action: Action,
    /// Ports of the old master and of the replica promoted.
    pub master: u16,
    pub replica: u16,
    /// The signal or the `CLUSTER FAILOVER`.
    pub start: u64,
    /// When the replica was first seen a master, with its slots served.
    pub promoted: Option<u64>,
    /// When the old master came back (SIGCONT, or its restart).
    pub back: Option<u64>,
    /// Whether that was in a quick phase (clients with grace acquiring) or a delayed one
    /// (clients with `min_replicas`).
    pub back_quick: bool,
    /// When the old master was first seen a replica again.
    pub demoted: Option<u64>,
    /// When every node of the cluster said `cluster_state:ok` and every replica's link was up.
    pub healthy: Option<u64>,
}

#[derive(Debug, Default)]
pub struct Record {
    /// The cluster node's failovers (cluster configuration).
    pub failovers: Vec<Failover>,
    /// The Sentinel group's faults (Sentinel configuration).
    pub group: Vec<GroupFault>,
    pub outages: Vec<Outage>,
    pub pauses: Vec<Pause>,
    /// Every step of a node's clock: when, which node, the new offset in ms (0: back to the
    /// real time).
    pub shifts: Vec<(u64, usize, u64)>,
    pub restarts: Vec<Restart>,
    /// What the sentinels published (Sentinel configuration), from the group's start to the
    /// checks.
    pub sentinel_events: Vec<sentinel::SentinelEvent>,
}

impl Record {
    /// The outages that `client` saw: the nodes' and its own cuts.
    pub fn outages_for(&self, client: usize) -> Vec<Outage> {
        self.outages
            .iter()
            .copied()
            .filter(|o| o.hits(client))
            .collect()
    }
}

/// What the driver acts on besides the nodes.
pub struct Lab {
    /// Per node, the file its clock shim reads the offset from.
    pub clock_files: Vec<PathBuf>,
    /// Per process of the cluster node (`RedisCluster::nodes`), likewise.
    pub cluster_clock_files: Vec<PathBuf>,
    /// Per client process, per node.
    pub relays: Vec<Vec<Relay>>,
    /// Per client process, per process of the cluster node.
    pub cluster_relays: Vec<Vec<Relay>>,
    pub pids: Vec<i32>,
    /// A holder about to write: (client, kind, when).
    pub writes: Receiver<(usize, String, u64)>,
    /// The run's seed and `--eager-restarts`: when a cluster master may come back.
    pub seed: u64,
    pub eager: bool,
    /// Per client process, per sentinel of the group (Sentinel configuration).
    pub sentinel_relays: Vec<Vec<Relay>>,
    /// Per client process, per data node of the group (`Group::nodes`, whose ports stay while
    /// their roles move; Sentinel configuration).
    pub group_relays: Vec<Vec<Relay>>,
    /// Starts a fresh client now (the driver's nudge, right after a kill or a failover).
    pub fresh: crossbeam_channel::Sender<()>,
    /// No fresh client starts before this instant (ns): the cluster configuration holds them
    /// off from each fault of the cluster node until the largest TTL after it is whole again.
    /// A client with no history is covered there only then (A9): an old master back from a
    /// stop still says it owns its slots until the cluster demotes it, and a client that
    /// reads the slot map from it first votes there, a vote the demotion loses, with nothing
    /// to tell it the master is not new.
    pub fresh_hold: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// `--stall-sentinels`: two sentinels hung through each fault of the group's master.
    pub stall_sentinels: bool,
}

/// How long a pause waits for a holder of the kind it wants to say it is about to write.
const WRITE_WAIT_NS: u64 = 1_500 * MS;
/// An announcement older than this is stale: the write has been made.
const WRITE_FRESH_NS: u64 = 5 * MS;

fn wall_ms(offset_ms: u64) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
        + offset_ms
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: a signal to one of our own child processes.
    unsafe {
        libc::kill(pid, sig);
    }
}

pub fn drive(
    cluster: &mut Cluster,
    mut redis_cluster: Option<&mut RedisCluster>,
    mut group: Option<&mut Group>,
    lab: &Lab,
    faults: &[Fault],
    chaos_start_ns: u64,
) -> Record {
    let mut rec = Record::default();
    let mut offsets = vec![0u64; nodes()];
    // Per client, the cluster process its `MasterCut` cut; the cluster process whose clock a
    // `MasterShift` moved.
    let mut master_cuts: Vec<Option<usize>> = vec![None; CLIENTS];
    let mut shifted_master: Option<usize> = None;
    let mut open: Vec<Open> = Vec::new();
    let mut paused: Vec<(usize, u64, Option<&'static str>)> = Vec::new();
    let since = |t: u64| t.saturating_sub(chaos_start_ns) / MS;
    let mut tail: sentinel::Tail = None;
    for fault in faults {
        sleep_until(chaos_start_ns + fault.at_ms * MS);
        for &(delay, step) in &fault.steps {
            sleep_until(now_ns() + delay * MS);
            match step {
                Step::Hang(n) => {
                    cluster.nodes[n].hang();
                    open.push((n, None, Action::Hang, now_ns()));
                }
                Step::Resume(n) => {
                    close(&mut open, n, None, &mut rec);
                    cluster.nodes[n].resume();
                }
                Step::Kill(n) => {
                    cluster.nodes[n].kill();
                    open.push((n, None, Action::Kill, now_ns()));
                }
                Step::Restart(n) => {
                    let killed = open
                        .iter()
                        .find(|o| o.0 == n && o.1.is_none())
                        .expect("killed")
                        .3;
                    close(&mut open, n, None, &mut rec);
                    let permille = wall_ms(offsets[n]) % 1_000;
                    cluster.nodes[n].restart();
                    rec.restarts.push(Restart {
                        node: n,
                        quick: false,
                        killed,
                        permille,
                    });
                }
                Step::QuickRestart { node, .. }
                    if !quick_window(lab.seed, since(now_ns()), lab.eager) =>
                {
                    // The driver runs late (a cluster fault took longer than planned) and the
                    // phase no longer allows a quick restart: a delayed one instead.
                    println!(
                        "quick restart of n{node} made a delayed one: the driver reached it at \
                         {:.3}s, past its phase's window",
                        since(now_ns()) as f64 / 1e3
                    );
                    cluster.nodes[node].kill();
                    let killed = now_ns();
                    restart_delayed(
                        &mut cluster.nodes[node],
                        node,
                        killed,
                        offsets[node],
                        &mut rec,
                    );
                }
                Step::Shift { ms, .. } if ms > 0 && !jump_fits(lab.seed, since(now_ns())) => {
                    // Late likewise, too close to a phase's end for a jump: none this time.
                }
                Step::QuickRestart {
                    node,
                    down_ms,
                    at_permille,
                    reconnect_ms,
                } => {
                    if let Some(p) = at_permille {
                        // Kill so that the restart comes `down_ms` later at x.p of the node's
                        // clock; a process takes about 2 ms from spawn to reading its clock.
                        let now = wall_ms(offsets[node]);
                        let target = (p + 1_000 - 2) % 1_000;
                        let kill_at = now - now % 1_000 + target;
                        let kill_at = (kill_at.checked_sub(down_ms))
                            .filter(|&k| k >= now)
                            .unwrap_or(kill_at + 1_000 - down_ms);
                        let wait = kill_at.saturating_sub(now);
                        std::thread::sleep(Duration::from_millis(wait));
                        for (client, relays) in lab.relays.iter().enumerate() {
                            relays[node].cut(CutMode::Refuse);
                            open.push((node, Some(client), Action::Refuse, now_ns()));
                        }
                    }
                    let kill_sent = now_ns();
                    cluster.nodes[node].kill();
                    let killed = now_ns();
                    if !quick_window(lab.seed, since(killed), lab.eager) {
                        println!(
                            "quick restart of n{node} made a delayed one: past its phase's window \
                             at {:.3}s, the process's end taking {} ms after its SIGKILL",
                            since(killed) as f64 / 1e3,
                            (killed - kill_sent) / MS
                        );
                        // The wait for the node's clock, the cuts and the kill itself took the
                        // driver past the phase's window (on a starved machine, seconds): the
                        // clients without grace may be running again. A delayed restart then,
                        // as in the late branch above, and the cuts healed.
                        restart_delayed(
                            &mut cluster.nodes[node],
                            node,
                            killed,
                            offsets[node],
                            &mut rec,
                        );
                        if at_permille.is_some() {
                            for (client, relays) in lab.relays.iter().enumerate() {
                                close(&mut open, node, Some(client), &mut rec);
                                relays[node].heal();
                            }
                        }
                        continue;
                    }
                    sleep_until(killed + down_ms * MS);
                    let spawned = now_ns();
                    let permille = wall_ms(offsets[node]) % 1_000;
                    cluster.nodes[node].restart();
                    rec.outages.push(Outage {
                        node,
                        client: None,
                        action: Action::Quick,
                        down_ns: killed,
                        up_ns: spawned,
                    });
                    rec.restarts.push(Restart {
                        node,
                        quick: true,
                        killed,
                        permille,
                    });
                    if at_permille.is_some() {
                        let now = wall_ms(offsets[node]);
                        let back = now - now % 1_000 + 1_000 + reconnect_ms;
                        std::thread::sleep(Duration::from_millis(back - now));
                        for (client, relays) in lab.relays.iter().enumerate() {
                            close(&mut open, node, Some(client), &mut rec);
                            relays[node].heal();
                        }
                    }
                }
                Step::Shift { node, ms } => {
                    std::fs::write(&lab.clock_files[node], ms.to_string()).expect("clock file");
                    offsets[node] = ms;
                    rec.shifts.push((now_ns(), node, ms));
                }
                Step::Cut { client, node, mode } => {
                    lab.relays[client][node].cut(mode);
                    let action = match mode {
                        CutMode::Refuse => Action::Refuse,
                        CutMode::Blackhole => Action::Blackhole,
                    };
                    open.push((node, Some(client), action, now_ns()));
                }
                Step::Heal { client, node } => {
                    close(&mut open, node, Some(client), &mut rec);
                    lab.relays[client][node].heal();
                }
                Step::MasterCut { client, k, mode } => {
                    let rc = redis_cluster.as_deref().expect("a cluster configuration");
                    // None: the cluster did not recover from the fault before (rule (cl)).
                    if let Some(i) = master_serving(rc, &target_key(k)) {
                        lab.cluster_relays[client][i].cut(mode);
                        master_cuts[client] = Some(i);
                        let action = match mode {
                            CutMode::Refuse => Action::MasterRefuse,
                            CutMode::Blackhole => Action::MasterBlackhole,
                        };
                        open.push((cluster_node(), Some(client), action, now_ns()));
                    }
                }
                Step::MasterHeal { client } => {
                    if let Some(i) = master_cuts[client].take() {
                        close(&mut open, cluster_node(), Some(client), &mut rec);
                        lab.cluster_relays[client][i].heal();
                    }
                }
                Step::MasterShift { ms, .. } if ms > 0 && !jump_fits(lab.seed, since(now_ns())) => {
                    // Late, as for `Shift`: no jump this time.
                }
                Step::MasterShift { k, ms } => {
                    let rc = redis_cluster.as_deref().expect("a cluster configuration");
                    let target = if ms > 0 {
                        master_serving(rc, &target_key(k))
                    } else {
                        shifted_master.take()
                    };
                    if let Some(i) = target {
                        std::fs::write(&lab.cluster_clock_files[i], ms.to_string())
                            .expect("clock file");
                        if ms > 0 {
                            shifted_master = Some(i);
                        }
                        rec.shifts.push((now_ns(), cluster_node(), ms));
                    }
                }
                Step::Pause { client, kind } => {
                    let at_write = wait_for_write(lab, client, kind);
                    signal(lab.pids[client], libc::SIGSTOP);
                    paused.push((client, now_ns(), at_write.then_some(kind)));
                }
                Step::ClusterKill(k, _) | Step::ClusterStop(k, _) | Step::ClusterFailover(k) => {
                    let rc = redis_cluster
                        .as_deref_mut()
                        .expect("cluster faults only in the cluster configuration");
                    let action = match step {
                        Step::ClusterKill(..) => Action::ClusterKill,
                        Step::ClusterStop(..) => Action::ClusterStop,
                        _ => Action::ClusterFailover,
                    };
                    let back = match step {
                        Step::ClusterKill(_, b) | Step::ClusterStop(_, b) => b,
                        _ => 0,
                    };
                    cluster_fault(rc, action, (k, back), lab, chaos_start_ns, &mut rec);
                }
                Step::Group(g) => {
                    let group = group
                        .as_deref_mut()
                        .expect("group faults only in the Sentinel configuration");
                    // A failover only where its quick window holds (normally at once: the
                    // fault was scheduled so); a driver that runs late (the group took long
                    // to be whole again) skips it rather than push every fault after it past
                    // the clients' end, and rule (cov) says so if the run then has none.
                    let may_start =
                        || sentinel::ready(g.action, lab.seed, since(now_ns()), lab.eager);
                    sentinel::group_fault(group, g, lab, &mut rec, &mut tail, &may_start);
                }
                Step::Cont(client) => {
                    let at = paused.iter().position(|p| p.0 == client).expect("paused");
                    let (client, from, at_write) = paused.remove(at);
                    let to = now_ns();
                    signal(lab.pids[client], libc::SIGCONT);
                    rec.pauses.push(Pause {
                        client,
                        from,
                        to,
                        at_write,
                    });
                }
            }
        }
        assert!(
            open.is_empty() && paused.is_empty(),
            "a fault left something broken"
        );
    }
    sentinel::finish(&mut tail, &mut rec);
    rec
}

/// A delayed restart of `node`, killed at `killed`: down past the largest TTL (the clients
/// without grace may run meanwhile), then restarted; both recorded.
fn restart_delayed(n: &mut RedisNode, node: usize, killed: u64, offset_ms: u64, rec: &mut Record) {
    sleep_until(killed + MIN_DOWN_AFTER_KILL_MS * MS);
    let permille = wall_ms(offset_ms) % 1_000;
    rec.outages.push(Outage {
        node,
        client: None,
        action: Action::Kill,
        down_ns: killed,
        up_ns: now_ns(),
    });
    n.restart();
    rec.restarts.push(Restart {
        node,
        quick: false,
        killed,
        permille,
    });
}

/// Ends the open outage of `node` (for `client`, if a cut) now.
fn close(open: &mut Vec<Open>, node: usize, client: Option<usize>, rec: &mut Record) {
    let at = open
        .iter()
        .position(|o| o.0 == node && o.1 == client)
        .expect("an outage to end");
    let (node, client, action, down_ns) = open.remove(at);
    rec.outages.push(Outage {
        node,
        client,
        action,
        down_ns,
        up_ns: now_ns(),
    });
}

/// An outage under way: node, client (for a cut), what, since when.
type Open = (usize, Option<usize>, Action, u64);

/// Waits for a holder of `client` of `kind` to say it is about to write (then true), or
/// gives up after `WRITE_WAIT_NS` (the pause lands at a random moment).
fn wait_for_write(lab: &Lab, client: usize, kind: &str) -> bool {
    let give_up = now_ns() + WRITE_WAIT_NS;
    while let Ok((c, k, at)) = lab
        .writes
        .recv_timeout(Duration::from_nanos(give_up.saturating_sub(now_ns())))
    {
        if c == client && k == kind && now_ns() < at + WRITE_FRESH_NS {
            return true;
        }
    }
    false
}

/// Intervals during which more than half of the nodes were down (for the clients the outages
/// are of). A client cut off from one master of a cluster node still reaches the node in part,
/// and one cut off from a Sentinel group's old master reaches it through the new one: not
/// counted.
pub fn majority_down(outages: &[Outage]) -> Vec<(u64, u64)> {
    let mut edges: Vec<(u64, i32, usize)> = outages
        .iter()
        .filter(|o| {
            !matches!(
                o.action,
                Action::MasterRefuse
                    | Action::MasterBlackhole
                    | Action::OldMasterRefuse
                    | Action::OldMasterBlackhole
            )
        })
        .flat_map(|o| [(o.down_ns, 1, o.node), (o.up_ns, -1, o.node)])
        .collect();
    // At equal times, count ups before downs: never widen an interval.
    edges.sort_unstable();
    // A node can be down twice over (hung for everyone and cut for one client): count nodes.
    let nodes = nodes();
    let mut per_node = vec![0i32; nodes];
    let mut down = 0;
    let mut start = 0;
    let mut intervals = Vec::new();
    for (t, delta, node) in edges {
        let before = down;
        let was = per_node[node] > 0;
        per_node[node] += delta;
        let is = per_node[node] > 0;
        down += i32::from(is) - i32::from(was);
        if before <= (nodes / 2) as i32 && down > (nodes / 2) as i32 {
            start = t;
        } else if before > (nodes / 2) as i32 && down <= (nodes / 2) as i32 {
            intervals.push((start, t));
        }
    }
    intervals
}

/// Fresh clients start no sooner than the largest TTL and this margin after a cluster fault
/// ended.
const FRESH_AFTER_CLUSTER_MS: u64 = 500;

/// How long the driver waits for each stage of a cluster fault (a failover, a return, the
/// cluster healthy again) before it records the stage as not reached (rule (cl)).
const CLUSTER_STAGE_NS: u64 = 20_000 * MS;

/// Polls `f` every 10 ms until it holds (then when) or `CLUSTER_STAGE_NS` passed.
fn when(mut f: impl FnMut() -> bool) -> Option<u64> {
    let give_up = now_ns() + CLUSTER_STAGE_NS;
    loop {
        if f() {
            return Some(now_ns());
        }
        if now_ns() > give_up {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `INFO replication` of node `i`, on a new connection with short timeouts: a stopped node
/// must not hold the driver up, and a restarted one has a new process.
fn replication(rc: &RedisCluster, i: usize) -> String {
    let Ok(client) = redis::Client::open(rc.nodes[i].url()) else {
        return String::new();
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
        return String::new();
    };
    if conn
        .set_read_timeout(Some(Duration::from_millis(500)))
        .is_err()
    {
        return String::new();
    }
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .unwrap_or_default()
}

/// The node that serves `key`'s slot as its master: the one that answers `EXISTS` for it
/// (the others, replicas included, redirect).
fn master_serving(rc: &RedisCluster, key: &str) -> Option<usize> {
    (0..rc.nodes.len()).find(|&i| {
        short_conn(rc, i).is_some_and(|mut conn| {
            redis::cmd("EXISTS")
                .arg(key)
                .query::<i64>(&mut conn)
                .is_ok()
        })
    })
}

/// A new connection to node `i` with short timeouts, if it answers.
fn short_conn(rc: &RedisCluster, i: usize) -> Option<redis::Connection> {
    let client = redis::Client::open(rc.nodes[i].url()).ok()?;
    let conn = client
        .get_connection_with_timeout(Duration::from_millis(200))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    Some(conn)
}

/// Whether node `i` says it is a master serving slots, with the cluster ok.
fn serving(rc: &RedisCluster, i: usize) -> bool {
    replication(rc, i).contains("role:master")
        && redis::Client::open(rc.nodes[i].url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut conn| {
                conn.set_read_timeout(Some(Duration::from_millis(500)))?;
                redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut conn)
            })
            .is_ok_and(|info| info.contains("cluster_state:ok"))
}

/// Whether every node of the cluster runs, says `cluster_state:ok`, and is a master or a
/// replica whose link is up.
fn healthy(rc: &RedisCluster) -> bool {
    (0..rc.nodes.len()).all(|i| {
        let r = replication(rc, i);
        (r.contains("role:master") && serving(rc, i)) || r.contains("master_link_status:up")
    })
}

/// One fault of the cluster node, carried out whole: the master (the `k`-th by port) SIGKILLed,
/// SIGSTOPped, or failed over by hand; its replica's promotion awaited; the old master brought
/// back where a quick window holds (see `CLUSTER_BACK_WINDOW_MS`); its demotion and the
/// cluster's health awaited. Recorded as an outage of the node until the promotion, and as a
/// `Failover`.
fn cluster_fault(
    rc: &mut RedisCluster,
    action: Action,
    (k, back_ms): (usize, u64),
    lab: &Lab,
    chaos_start_ns: u64,
    rec: &mut Record,
) {
    let mut masters: Vec<usize> = (0..rc.nodes.len())
        .filter(|&i| replication(rc, i).contains("role:master"))
        .collect();
    masters.sort_by_key(|&i| rc.nodes[i].port);
    let pair = (!masters.is_empty())
        .then(|| masters[k % masters.len()])
        .and_then(|m| {
            let link = format!("master_port:{}\r", rc.nodes[m].port);
            let r = (0..rc.nodes.len()).find(|&i| i != m && replication(rc, i).contains(&link))?;
            Some((m, r))
        });
    let Some((m, r)) = pair else {
        // The cluster did not recover from the fault before (rule (cl) reports it).
        return;
    };
    let mut f = Failover {
        action,
        master: rc.nodes[m].port,
        replica: rc.nodes[r].port,
        start: now_ns(),
        promoted: None,
        back: None,
        back_quick: false,
        demoted: None,
        healthy: None,
    };
    match action {
        Action::ClusterKill => rc.nodes[m].kill(),
        Action::ClusterStop => rc.nodes[m].hang(),
        _ => {
            let asked: redis::RedisResult<()> = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .query(&mut rc.nodes[r].conn());
            if asked.is_err() {
                rec.failovers.push(f);
                return;
            }
        }
    }
    f.start = now_ns();
    // No fresh client starts from the fault until the largest TTL after the cluster is whole
    // again: only there does A9 cover one (below).
    lab.fresh_hold
        .store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
    f.promoted = when(|| serving(rc, r));
    rec.outages.push(Outage {
        node: cluster_node(),
        client: None,
        action,
        down_ns: f.start,
        up_ns: f.promoted.unwrap_or_else(now_ns),
    });
    if action != Action::ClusterFailover {
        // Back only where a quick window holds for its demotion (normally at once: the fault
        // was scheduled so). A wait here delays the faults after it, like a timed restart.
        let since = |t: u64| t.saturating_sub(chaos_start_ns) / MS;
        let give_up = now_ns() + 2 * PHASE_MS * MS;
        let earliest = f.start + back_ms * MS;
        while (now_ns() < earliest || !cluster_back_window(lab.seed, since(now_ns()), lab.eager))
            && now_ns() < give_up
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        f.back = Some(now_ns());
        f.back_quick = quick_phase(lab.seed, since(now_ns()) as i64);
        if action == Action::ClusterKill {
            rc.nodes[m].restart();
        } else {
            rc.nodes[m].resume();
        }
    }
    f.demoted = when(|| replication(rc, m).contains("role:slave"));
    f.healthy = when(|| healthy(rc));
    lab.fresh_hold.store(
        now_ns() + (TTL_MAX_MS + FRESH_AFTER_CLUSTER_MS) * MS,
        std::sync::atomic::Ordering::SeqCst,
    );
    rec.failovers.push(f);
}
