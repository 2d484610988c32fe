//! The Sentinel configuration's lock node: a Sentinel group (one master, two replicas, three
//! sentinels), its faults as the driver carries them out, and the rules about them: (sn) each
//! fault ran its course, and the group's part of (p). The module docs of `main.rs` ("The
//! Sentinel configuration") give the argument.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::checker::{Logs, Verdict, ms};
use crate::relay::CutMode;
use crate::schedule::{Action, Class, Lab, Outage, Record, quick_phase, quick_window};
use crate::support::{DATA_ARGS, RedisNode, SentinelGroup, SentinelProcess};
use crate::{CLIENTS, Flags, MS, PHASE_MS, Rng, TTL_MAX_MS, cluster_node, now_ns};

/// How long after the first sentinel it can reach switched a client may still send a vote to
/// an old master that takes writes: the watch's `D` (1 s plus two rounds of questions, each
/// bounded by `node_timeout` here), with a margin. The clients of the quick phases set
/// `restart_grace` to the largest TTL plus this (A8).
pub const SENTINEL_D_MS: u64 = 1_500;

/// The faults of the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupAction {
    /// SIGKILL of the master: the sentinels promote a replica (after `down-after-milliseconds`
    /// and their election), then the old master restarts empty as a replica of the master the
    /// sentinels name (as an orchestrator that asks them at start does).
    Kill,
    /// `SENTINEL FAILOVER` of a live master, asked of one sentinel (the failover's leader): the
    /// old master takes writes until the sentinels demote it, seconds after the switch.
    Failover,
    /// SIGKILL of a replica; it restarts empty, a replica of the master, after `down_ms`.
    Replica,
}

/// A client process cut off from some sentinels (bit `i`: sentinel `i`) through its relays,
/// from just before the fault until the sentinels have switched: never from the failover's
/// leader while the old master is alive (A8's budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentinelCut {
    pub client: usize,
    pub sentinels: u8,
    pub mode: CutMode,
}

/// A client process cut off from the old master through its relay to that data node, from just
/// before a master's kill or failover until every sentinel has switched: within A8's budget,
/// since it only lowers what the client reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasterCut {
    pub client: usize,
    pub mode: CutMode,
}

/// One fault of the group, as planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupStep {
    pub action: GroupAction,
    /// Which sentinel leads a `SENTINEL FAILOVER`; which replica a `Replica` fault kills.
    pub pick: usize,
    pub cut: Option<SentinelCut>,
    /// With every kill or failover of the master.
    pub master_cut: Option<MasterCut>,
    /// The killed master comes back no sooner than this after the kill; a lost replica is
    /// down this long.
    pub down_ms: u64,
    /// Broken on purpose (`--fresh-grace-ms`): a client cut off from these standalone nodes
    /// (bits) until the switch is over, so that its locks rest on the old master.
    pub split: Option<(usize, u8)>,
}

/// A fault of the group, as the driver saw it.
#[derive(Debug, Clone)]
pub struct GroupFault {
    pub step: GroupStep,
    /// Ports of the master before the fault, and of the node faulted (the master, or a
    /// replica).
    pub master: u16,
    pub victim: u16,
    /// The signal or the `SENTINEL FAILOVER`.
    pub start: u64,
    /// When a sentinel first named another master, and when every sentinel named it, a
    /// master (its port).
    pub first_switch: Option<u64>,
    pub switched: Option<(u64, u16)>,
    /// When the killed node was restarted.
    pub back: Option<u64>,
    /// When the old master (or the lost replica) was first seen a replica of the master with
    /// its link up.
    pub demoted: Option<u64>,
    /// When the group was whole again (see [`Group::whole`]).
    pub healthy: Option<u64>,
    /// When the client's relay to the old master was cut, and when it was healed.
    pub master_cut: Option<(u64, Option<u64>)>,
}

impl GroupFault {
    /// Whether its cut of a client from the old master ran its course: made before the fault,
    /// healed once every sentinel had switched.
    pub fn master_cut_done(&self) -> bool {
        matches!(
            (self.master_cut, self.switched),
            (Some((cut, Some(healed))), Some((switched, _))) if cut <= self.start && healed >= switched
        )
    }
}

/// The group: its data nodes (the master first at the start) and sentinels.
pub struct Group {
    pub nodes: Vec<RedisNode>,
    pub sentinels: Vec<SentinelProcess>,
}

/// `INFO replication` of the server on `port`, on a new connection with short timeouts (a dead
/// server must not hold the driver up).
fn replication(port: u16) -> String {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
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

impl Group {
    pub fn start() -> Group {
        let master = RedisNode::start_with(&DATA_ARGS);
        let port = master.port.to_string();
        let mut nodes = vec![master];
        for _ in 0..2 {
            let mut args = DATA_ARGS.to_vec();
            args.extend(["--replicaof", "127.0.0.1", &port]);
            nodes.push(RedisNode::start_with(&args));
        }
        // A starved server or sentinel looks dead to the sentinels: see `support::favour`.
        nodes.iter_mut().for_each(RedisNode::favour);
        let sentinels = (0..3)
            .map(|_| SentinelProcess::start(nodes[0].port))
            .collect();
        let group = Group { nodes, sentinels };
        assert!(
            crate::support::eventually(Duration::from_secs(30), || group.whole()),
            "the Sentinel group was not whole within 30 s of its start"
        );
        group
    }

    /// The `redis+sentinel://` URL naming the sentinels at `addrs` (`host:port`; a client
    /// process's relays, or the sentinels themselves).
    pub fn url(addrs: &[String]) -> String {
        let mut url = format!("redis+sentinel://{}/{}", addrs[0], SentinelGroup::NAME);
        for (i, a) in addrs.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("sentinel={a}"));
        }
        url
    }

    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect()
    }

    /// The data node every sentinel names as the master, if they agree.
    pub fn master(&self) -> Option<usize> {
        let port = agreed(&self.ports().1)?;
        self.nodes.iter().position(|n| n.port == port)
    }

    /// The ports of the data nodes and of the sentinels.
    fn ports(&self) -> (Vec<u16>, Vec<u16>) {
        (
            self.nodes.iter().map(|n| n.port).collect(),
            self.sentinels.iter().map(|s| s.port).collect(),
        )
    }

    pub fn whole(&self) -> bool {
        let (data, sentinels) = self.ports();
        whole(&data, &sentinels)
    }
}

/// A question to the sentinel on `port`, on a new connection with short timeouts.
fn ask<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Option<T> {
    ask_within(
        port,
        cmd,
        Duration::from_millis(200),
        Duration::from_millis(500),
    )
    .ok()
}

/// A command to the sentinel on `port`, on a new connection made within `connect` and answered
/// within `read`, with the server's error when it refuses.
fn ask_within<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
    connect: Duration,
    read: Duration,
) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut conn = client.get_connection_with_timeout(connect)?;
    conn.set_read_timeout(Some(read))?;
    cmd.query(&mut conn)
}

/// Field `name` of a `SENTINEL MASTER` or `SENTINEL REPLICAS` record (name, value, name, ...).
fn field<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields
        .chunks(2)
        .find(|p| p[0] == name)
        .and_then(|p| p.get(1))
        .map(String::as_str)
}

/// The master's port as the sentinel on `port` names it.
fn named(port: u16) -> Option<u16> {
    master_named_by(port).ok().flatten()
}

/// What the sentinel on `port` names as the master, or why it did not answer.
fn master_named_by(port: u16) -> Result<Option<u16>, String> {
    ask_within::<Option<(String, u16)>>(
        port,
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(SentinelGroup::NAME),
        Duration::from_millis(200),
        Duration::from_millis(500),
    )
    .map(|a| a.map(|a| a.1))
    .map_err(|e| e.to_string())
}

/// The master every sentinel names, if they agree.
fn agreed(sentinels: &[u16]) -> Option<u16> {
    agreement(sentinels).ok()
}

/// The master every sentinel names, or what each answered when they do not agree (a sentinel
/// that did not answer in time, a starved one, is told from one that names another master).
fn agreement(sentinels: &[u16]) -> Result<u16, String> {
    let answers: Vec<Result<Option<u16>, String>> =
        sentinels.iter().map(|&s| master_named_by(s)).collect();
    if let Ok(Some(first)) = answers[0]
        && answers.iter().all(|a| *a == Ok(Some(first)))
    {
        return Ok(first);
    }
    let said: Vec<String> = sentinels
        .iter()
        .zip(&answers)
        .map(|(s, a)| match a {
            Ok(Some(port)) => format!("{s} names {port}"),
            Ok(None) => format!("{s} names none"),
            Err(e) => format!("{s} did not answer ({e})"),
        })
        .collect();
    Err(format!(
        "the sentinels do not agree on a master ({})",
        said.join(", ")
    ))
}

/// Whether the group is whole: every sentinel names the same master, with no failover under
/// way and it not down (`flags` just `master`); that master says so, with both replicas
/// connected; each replica replicates it with its link up.
fn whole(data: &[u16], sentinels: &[u16]) -> bool {
    let Some(master) = agreed(sentinels) else {
        return false;
    };
    let flags = |s: u16| {
        let fields: Vec<String> = ask(
            s,
            redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(SentinelGroup::NAME),
        )?;
        field(&fields, "flags").map(str::to_owned)
    };
    sentinels
        .iter()
        .all(|&s| flags(s).as_deref() == Some("master"))
        && {
            let r = replication(master);
            r.contains("role:master") && r.contains("connected_slaves:2\r")
        }
        && data
            .iter()
            .filter(|&&p| p != master)
            .all(|&p| replica_of(p, master))
}

/// Whether the server on `port` is a replica of `master` with its link up.
fn replica_of(port: u16, master: u16) -> bool {
    let r = replication(port);
    r.contains("role:slave")
        && r.contains(&format!("master_port:{master}\r"))
        && r.contains("master_link_status:up")
}

/// One event a sentinel published (`PSUBSCRIBE *` on it): when the driver read it, the
/// sentinel's port, the channel (`+switch-master`, `+sdown`, ...) and the payload.
#[derive(Debug, Clone)]
pub struct SentinelEvent {
    pub at: u64,
    pub sentinel: u16,
    pub channel: String,
    pub payload: String,
}

impl SentinelEvent {
    /// For a `+switch-master`, the ports of the old and the new master.
    pub fn switch(&self) -> Option<(u16, u16)> {
        if self.channel != "+switch-master" {
            return None;
        }
        // `<name> <old ip> <old port> <new ip> <new port>`
        let words: Vec<&str> = self.payload.split(' ').collect();
        Some((words.get(2)?.parse().ok()?, words.get(4)?.parse().ok()?))
    }
}

/// Every event of every sentinel, read from the group's start to the end of the run: rule (sn)
/// finds in them a switch of master that no fault of the plan caused (the sentinels acting on
/// their own), and a failed run keeps them (`sentinel-events.log`).
pub struct Watch {
    stop: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<SentinelEvent>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// Subscribed to every sentinel of `group` when it returns.
    pub fn start(group: &Group) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready) = crossbeam_channel::unbounded();
        let threads = group
            .sentinels
            .iter()
            .map(|s| {
                let (port, stop, events, ready) = (
                    s.port,
                    Arc::clone(&stop),
                    Arc::clone(&events),
                    ready_tx.clone(),
                );
                std::thread::spawn(move || watch(port, &stop, &events, &ready))
            })
            .collect();
        for _ in &group.sentinels {
            ready
                .recv_timeout(Duration::from_secs(10))
                .expect("subscribe to a sentinel's events within 10 s");
        }
        Watch {
            stop,
            events,
            threads,
        }
    }

    /// Stops reading and gives what was read, in the order read.
    pub fn finish(self) -> Vec<SentinelEvent> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let mut events = std::mem::take(&mut *self.events.lock().expect("sentinel events"));
        events.sort_by_key(|e| e.at);
        events
    }
}

/// Reads the events of the sentinel on `port` until `stop`, connecting again after a broken
/// connection (a hung sentinel only times reads out).
fn watch(
    port: u16,
    stop: &AtomicBool,
    events: &Mutex<Vec<SentinelEvent>>,
    ready: &crossbeam_channel::Sender<()>,
) {
    let mut told = false;
    while !stop.load(Ordering::Relaxed) {
        let conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)));
        let Ok(mut conn) = conn else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let mut pubsub = conn.as_pubsub();
        if pubsub
            .set_read_timeout(Some(Duration::from_millis(500)))
            .is_err()
            || pubsub.psubscribe("*").is_err()
            || pubsub
                .set_read_timeout(Some(Duration::from_millis(100)))
                .is_err()
        {
            continue;
        }
        if !std::mem::replace(&mut told, true) {
            let _ = ready.send(());
        }
        while !stop.load(Ordering::Relaxed) {
            match pubsub.get_message() {
                Ok(m) => events.lock().expect("sentinel events").push(SentinelEvent {
                    at: now_ns(),
                    sentinel: port,
                    channel: m.get_channel_name().to_owned(),
                    payload: m.get_payload().unwrap_or_default(),
                }),
                Err(e) if e.is_timeout() => {}
                Err(_) => break,
            }
        }
    }
}

/// How long the driver waits for each stage of a group fault before it records the stage as
/// not reached (rule (sn)): the sentinels demote a live old master about 9 s after the switch.
const STAGE_NS: u64 = 25_000 * MS;

/// Polls `f` every `every_ms` until it holds (then when) or `STAGE_NS` passed: every 10 ms for
/// the switch, which rule (p) times; every 100 ms for the tail, which only has to end (each
/// poll opens connections to every process of the group: a small machine notices).
fn when(every_ms: u64, mut f: impl FnMut() -> bool) -> Option<u64> {
    let give_up = now_ns() + STAGE_NS;
    loop {
        if f() {
            return Some(now_ns());
        }
        if now_ns() > give_up {
            return None;
        }
        std::thread::sleep(Duration::from_millis(every_ms));
    }
}

/// Whether every sentinel's view of the replicas of `master` is current: both replicas known,
/// each a replica (flags and the role it last reported) of `master` with its link up. A
/// sentinel that still remembers a replica as the master it was (it reads a server's `INFO`
/// every `info-period`: 10 s by default, 1 s for the test sentinels) takes that replica's promotion by another sentinel's failover for a master
/// that must be turned back, and does so at once (`+convert-to-slave`): the promotion never
/// completes and the failover aborts (`-failover-abort-slave-timeout`). Err says what is not
/// current.
fn views_current(sentinels: &[u16], master: u16) -> Result<(), String> {
    for &s in sentinels {
        let replicas: Vec<Vec<String>> = ask(
            s,
            redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(SentinelGroup::NAME),
        )
        .ok_or_else(|| format!("sentinel {s} did not answer SENTINEL REPLICAS"))?;
        if replicas.len() != 2 {
            return Err(format!("sentinel {s} knows {} replicas", replicas.len()));
        }
        for fields in &replicas {
            let field = |name: &str| field(fields, name).unwrap_or("?");
            let replica = |v: &str| v == "slave" || v == "replica";
            if !replica(field("flags"))
                || !replica(field("role-reported"))
                || field("master-link-status") != "ok"
                || field("master-port") != master.to_string()
            {
                return Err(format!(
                    "sentinel {s} sees {} as flags {}, role {}, link {}, master port {}",
                    field("port"),
                    field("flags"),
                    field("role-reported"),
                    field("master-link-status"),
                    field("master-port")
                ));
            }
        }
    }
    Ok(())
}

/// Polls `f` every 50 ms until it holds, or until `may_start` no longer does or `STAGE_NS`
/// passed (then `f`'s last complaint).
fn wait_while(
    may_start: &dyn Fn() -> bool,
    f: impl Fn() -> Result<(), String>,
) -> Result<(), String> {
    let give_up = now_ns() + STAGE_NS;
    loop {
        let why = match f() {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if !may_start() || now_ns() > give_up {
            return Err(why);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `SENTINEL FAILOVER` of the live master `old`, asked of sentinel `leader` while `may_start`
/// holds (checked right before each ask; the caller has checked `prepared`), and asked again,
/// within `STAGE_NS`, once every sentinel names `old` and `prepared` holds, if the sentinel
/// refuses (`NOGOODSLAVE`,
/// `INPROG`) or accepts and then aborts (its master record back to `old` with no failover
/// under way, and no sentinel naming another master). `accepted` runs as each ask is accepted
/// or goes unanswered. Ok gives when the ask that the switch followed was made and when a
/// sentinel first named another master (None: not within `STAGE_NS`); Err says why no
/// failover could be made.
fn failover(
    sentinels: &[u16],
    leader: usize,
    old: u16,
    may_start: &dyn Fn() -> bool,
    prepared: &dyn Fn() -> Result<(), String>,
    accepted: &dyn Fn(),
) -> Result<(u64, Option<u64>), String> {
    let other = |s: u16| named(s).filter(|&p| p != old);
    let give_up = now_ns() + STAGE_NS;
    // The last ask that may have been accepted: a switch seen later is its own.
    let mut maybe: Option<u64> = None;
    let mut last = String::new();
    loop {
        if !last.is_empty() {
            // Asked again once every sentinel still names the old master and `prepared`
            // holds.
            let mut why = String::new();
            loop {
                if let Some(at) = maybe
                    && sentinels.iter().any(|&s| other(s).is_some())
                {
                    return Ok((at, Some(now_ns())));
                }
                if !may_start() || now_ns() > give_up {
                    return Err(format!("{last}, then {why} until it could no longer start"));
                }
                let ready = if agreed(sentinels) == Some(old) {
                    prepared()
                } else {
                    Err("the sentinels did not all name the old master".to_owned())
                };
                match ready {
                    Ok(()) => break,
                    Err(e) => why = e,
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // The window checked right before each ask: the caller's wait may have ended late.
        if !may_start() {
            return Err(if last.is_empty() {
                "its window had closed when it could be asked".to_owned()
            } else {
                format!("{last}, and its window closed")
            });
        }
        let at = now_ns();
        let asked: redis::RedisResult<()> = ask_within(
            sentinels[leader],
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(SentinelGroup::NAME),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        match asked {
            // A refusal; an unanswered ask may have been accepted, and is watched as if it
            // was (an ask that was not is seen as aborted at once).
            Err(e) if !(e.is_io_error() || e.is_timeout()) => {
                last = format!("refused by sentinel {}: {e}", sentinels[leader]);
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            _ => {
                maybe = Some(at);
                accepted();
            }
        }
        let mut polls = 0u64;
        let aborted = loop {
            if sentinels.iter().any(|&s| other(s).is_some()) {
                return Ok((at, Some(now_ns())));
            }
            if now_ns() > at + STAGE_NS {
                return Ok((at, None));
            }
            polls += 1;
            if polls.is_multiple_of(10) && aborted(sentinels[leader], old) {
                break now_ns();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        last = format!(
            "accepted by sentinel {} and given up by it within {:.0} ms",
            sentinels[leader],
            (aborted - at) as f64 / 1e6
        );
        println!("SENTINEL FAILOVER {last}: asked again if its window still holds");
    }
}

/// Whether the sentinel on `port` has given up its failover of `old`: its record names `old`
/// with no failover under way.
fn aborted(port: u16, old: u16) -> bool {
    let Some(fields) = ask::<Vec<String>>(
        port,
        redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(SentinelGroup::NAME),
    ) else {
        return false;
    };
    field(&fields, "port") == Some(old.to_string().as_str())
        && field(&fields, "flags").is_some_and(|f| !f.contains("failover_in_progress"))
}

/// The last fault's tail, still under way: the old master's demotion (or the lost replica's
/// resync) and the group whole again, awaited while the other faults go on.
pub type Tail = Option<std::thread::JoinHandle<GroupFault>>;

/// Waits for the last fault's tail and records the fault.
pub fn finish(tail: &mut Tail, rec: &mut Record) {
    if let Some(h) = tail.take() {
        rec.group
            .push(h.join().expect("a Sentinel fault's tail panicked"));
    }
}

/// One fault of the group, once the last fault's tail is over and, while `may_start` holds, the
/// sentinels agree on a master (and for a failover see the replicas as they are): the cut (if
/// any) and the fault; for a master's kill or failover,
/// the switch of every sentinel awaited, then (a failover) `D` more, the cut healed, and the
/// killed master restarted, empty, as a replica of the new one, once every sentinel names it
/// and no sooner than `down_ms`;
/// for a replica, its restart, a replica of the master, after `down_ms`. From then on the node
/// votes as a whole again and the driver goes on, while a thread (`tail`) awaits the old
/// master's demotion (after a failover the sentinels convert it about 9 s after the switch;
/// a killed one comes back a replica and resyncs) or the replica's resync, then the group
/// whole; the next group fault waits for it. Fresh
/// clients are started right after the kill or the `SENTINEL FAILOVER`, and right after the
/// switch (`Lab::fresh`).
pub fn group_fault(
    group: &mut Group,
    step: GroupStep,
    lab: &Lab,
    rec: &mut Record,
    tail: &mut Tail,
    may_start: &dyn Fn() -> bool,
) {
    finish(tail, rec);
    // A master every sentinel names (a starved sentinel can miss a question), and for a
    // failover every sentinel's view of the replicas current (see [`views_current`]), awaited
    // while the fault may still start (a failover: its quick window); a fault that cannot
    // start is said, and left out of the record (rule (cov) reports a run left with none).
    let (data, sentinels) = group.ports();
    let prepared = || {
        let master = agreement(&sentinels)?;
        if step.action == GroupAction::Failover {
            views_current(&sentinels, master)?;
        }
        Ok(())
    };
    if let Err(why) = wait_while(may_start, prepared) {
        println!(
            "group fault not made: {} ({why} before it could no longer start)",
            describe(&step)
        );
        return;
    }
    let Some(m) = group.master() else {
        println!(
            "group fault not made: {} (the sentinels no longer agree on a master)",
            describe(&step)
        );
        return;
    };
    let old = group.nodes[m].port;
    let replicas: Vec<usize> = (0..group.nodes.len()).filter(|&i| i != m).collect();
    let victim = match step.action {
        GroupAction::Replica => replicas[step.pick % replicas.len()],
        _ => m,
    };
    let mut f = GroupFault {
        step,
        master: old,
        victim: group.nodes[victim].port,
        start: now_ns(),
        first_switch: None,
        switched: None,
        back: None,
        demoted: None,
        healthy: None,
        master_cut: None,
    };
    // The cuts of a client from sentinels and of one from the old master (its relay to data
    // node `m`: ports stay with the data nodes whatever their roles), made just before the
    // fault and healed together once every sentinel has switched; the old master's heal is
    // recorded, as the outage of the node for that client (neither counted by (e) nor
    // unexcused by (f): the client reaches the node again through the new master).
    let cut = |on: bool, f: &mut GroupFault, rec: &mut Record| {
        if let Some(c) = step.cut {
            for (i, relay) in lab.sentinel_relays[c.client].iter().enumerate() {
                if c.sentinels & (1 << i) != 0 {
                    if on { relay.cut(c.mode) } else { relay.heal() }
                }
            }
        }
        if let Some(c) = step.master_cut {
            let relay = &lab.group_relays[c.client][m];
            if on {
                relay.cut(c.mode);
                f.master_cut = Some((now_ns(), None));
            } else if let Some((at, None)) = f.master_cut {
                relay.heal();
                let healed = now_ns();
                f.master_cut = Some((at, Some(healed)));
                rec.outages.push(Outage {
                    node: cluster_node(),
                    client: Some(c.client),
                    action: match c.mode {
                        CutMode::Refuse => Action::OldMasterRefuse,
                        CutMode::Blackhole => Action::OldMasterBlackhole,
                    },
                    down_ns: at,
                    up_ns: healed,
                });
            }
        }
    };
    let split_at = now_ns();
    if let Some((client, nodes)) = step.split {
        for (n, relay) in lab.relays[client].iter().enumerate() {
            if nodes & (1 << n) != 0 {
                relay.cut(CutMode::Refuse);
            }
        }
    }
    let heal_split = |rec: &mut Record| {
        if let Some((client, nodes)) = step.split {
            for (n, relay) in lab.relays[client].iter().enumerate() {
                if nodes & (1 << n) != 0 {
                    relay.heal();
                    rec.outages.push(Outage {
                        node: n,
                        client: Some(client),
                        action: Action::Refuse,
                        down_ns: split_at,
                        up_ns: now_ns(),
                    });
                }
            }
        }
    };
    cut(true, &mut f, rec);
    // Broken on purpose (`--stall-sentinels`): two sentinels hung through the fault, so that
    // no failover can run its course.
    let stalled: Vec<usize> = if lab.stall_sentinels && step.action != GroupAction::Replica {
        (1..3).map(|k| (step.pick + k) % 3).collect()
    } else {
        Vec::new()
    };
    for &s in &stalled {
        group.sentinels[s].hang();
    }
    let mut asked_at = None;
    let mut first_switch = None;
    match step.action {
        GroupAction::Kill | GroupAction::Replica => group.nodes[victim].kill(),
        GroupAction::Failover => {
            // Fresh clients right after the command (the failover's own start).
            let fresh = || {
                let _ = lab.fresh.send(());
                let _ = lab.fresh.send(());
            };
            let asked = failover(&sentinels, step.pick % 3, old, may_start, &prepared, &fresh);
            if let Ok((at, first)) = asked {
                (asked_at, first_switch) = (Some(at), first);
            }
            if let Err(why) = &asked {
                println!("group fault not made: {} ({why})", describe(&step));
                cut(false, &mut f, rec);
                heal_split(rec);
                for &s in &stalled {
                    group.sentinels[s].resume();
                }
                return;
            }
        }
    }
    f.start = asked_at.unwrap_or_else(now_ns);
    if asked_at.is_none() {
        let _ = lab.fresh.send(());
        let _ = lab.fresh.send(());
    }
    let mut new = old;
    if step.action == GroupAction::Replica {
        crate::sleep_until(f.start + step.down_ms * MS);
        let port = old.to_string();
        let mut args = DATA_ARGS.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &port]);
        f.back = Some(now_ns());
        group.nodes[victim].restart_with(&args);
        cut(false, &mut f, rec);
        heal_split(rec);
    } else {
        let other = |s: u16| named(s).filter(|&p| p != old);
        f.first_switch = if step.action == GroupAction::Failover {
            first_switch
        } else {
            when(10, || sentinels.iter().any(|&s| other(s).is_some()))
        };
        let switched = f.first_switch.and_then(|_| {
            when(10, || {
                let ports: Vec<Option<u16>> = sentinels.iter().map(|&s| other(s)).collect();
                new = ports[0].unwrap_or(0);
                ports.iter().all(|&p| p.is_some() && p == ports[0])
                    && replication(new).contains("role:master")
            })
        });
        f.switched = switched.map(|t| (t, new));
        if switched.is_none() {
            new = old;
        }
        // The node is down for every client from the kill until the switch; for a failover,
        // the old master answers but its votes may be lost until the switch plus `D`
        // (excused by (f), not counted by (e)).
        let action = if step.action == GroupAction::Kill {
            Action::GroupKill
        } else {
            Action::GroupFailover
        };
        let up = match (switched, step.action) {
            (Some(t), GroupAction::Failover) => t + SENTINEL_D_MS * MS,
            (Some(t), _) => t,
            (None, _) => now_ns(),
        };
        cut(false, &mut f, rec);
        // Fresh clients right after the switch (more when broken on purpose: they are what
        // meets the old master's lost votes).
        for _ in 0..if step.split.is_some() { 5 } else { 1 } {
            let _ = lab.fresh.send(());
        }
        crate::sleep_until(up);
        rec.outages.push(Outage {
            node: cluster_node(),
            client: None,
            action,
            down_ns: f.start,
            up_ns: up,
        });
        heal_split(rec);
        for &s in &stalled {
            group.sentinels[s].resume();
        }
        if step.action == GroupAction::Kill {
            crate::sleep_until(f.start + step.down_ms * MS);
            f.back = Some(now_ns());
            // With no switch (broken on purpose) it is still the master.
            let port = new.to_string();
            let mut args = DATA_ARGS.to_vec();
            if new != old {
                args.extend(["--replicaof", "127.0.0.1", &port]);
            }
            group.nodes[m].restart_with(&args);
        }
    }
    let faulted = f.victim;
    *tail = Some(std::thread::spawn(move || {
        f.demoted = when(100, || replica_of(faulted, new));
        f.healthy = when(100, || whole(&data, &sentinels));
        f
    }));
}

/// A `SENTINEL FAILOVER`'s votes may be lost from the command until every sentinel switched
/// (within this long, measured 0.3-1.5 s) plus `D`: its quick window must hold from the
/// command for this long, the largest TTL and a margin included.
const FAILOVER_SPAN_MS: u64 = 2_500 + SENTINEL_D_MS + TTL_MAX_MS + 500;

/// Whether a group fault of `action` may start at `at_ms`: a failover of a live master only in
/// a quick window that lasts until its votes can no longer be lost (see [`FAILOVER_SPAN_MS`]);
/// a master's kill (its replica is promoted after more than the largest TTL: a delayed
/// restart) and a lost replica anywhere.
pub fn ready(action: GroupAction, seed: u64, at_ms: u64, eager: bool) -> bool {
    action != GroupAction::Failover
        || quick_window(seed, at_ms, eager)
            && (eager || quick_phase(seed, (at_ms + FAILOVER_SPAN_MS) as i64))
}

/// Each phase's combination in the Sentinel configuration: in a quick phase a failover of the
/// live master as soon as its window opens, then a standalone crash if a quick window is left;
/// in a delayed phase a crash, then in turns (the seed choosing the first) a master's kill or a
/// lost replica.
pub fn combos(seed: u64, at_ms: u64) -> Vec<Class> {
    let phase = at_ms / PHASE_MS;
    if quick_phase(seed, at_ms as i64) {
        vec![Class::Crash, Class::Sentinel(GroupAction::Failover)]
    } else if (phase / 2 + seed / 2).is_multiple_of(2) {
        vec![Class::Sentinel(GroupAction::Kill), Class::Crash]
    } else {
        vec![Class::Sentinel(GroupAction::Replica), Class::Crash]
    }
}

/// How long a group fault usually holds the driver up (its tail runs beside the next faults).
pub fn planned_ms(step: &GroupStep) -> u64 {
    match step.action {
        // `down-after-milliseconds`, the sentinels' election and the promotion.
        GroupAction::Kill => step
            .down_ms
            .max(crate::support::SENTINEL_DOWN_AFTER_MS + 1_500),
        GroupAction::Failover => 1_500 + SENTINEL_D_MS,
        GroupAction::Replica => step.down_ms,
    }
}

/// When the last group fault of `faults` has usually ended, its tail included (the driver
/// waits for the tail before the next group fault, and the faults after it would run late):
/// a failover's old master is demoted about 9 s after the switch; a kill's or a lost
/// replica's resync takes a second or so.
pub fn free_at(faults: &[crate::schedule::Fault]) -> u64 {
    faults
        .iter()
        .flat_map(|f| f.steps.iter().map(move |(_, s)| (f.at_ms, s)))
        .filter_map(|(at, s)| match s {
            crate::schedule::Step::Group(g) => Some(
                at + planned_ms(g)
                    + if g.action == GroupAction::Failover {
                        12_000
                    } else {
                        1_500
                    },
            ),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Rule (cov)'s classes of the group that the plan alone decides, each with whether `steps`
/// has it.
pub fn planned_classes(steps: &[GroupStep]) -> Vec<(&'static str, bool)> {
    let any = |f: &dyn Fn(&GroupStep) -> bool| steps.iter().any(f);
    vec![
        (
            "Sentinel master SIGKILLs",
            any(&|s| s.action == GroupAction::Kill),
        ),
        (
            "SENTINEL FAILOVERs",
            any(&|s| s.action == GroupAction::Failover),
        ),
        (
            "Sentinel replicas lost",
            any(&|s| s.action == GroupAction::Replica),
        ),
        (
            "clients cut off from sentinels during a switch",
            any(&|s| s.cut.is_some()),
        ),
        (
            "clients cut off from the old master during a switch",
            any(&|s| s.master_cut.is_some()),
        ),
    ]
}

/// A group fault of `action`, its cut (now and then) and the rest drawn from `rng`.
pub fn plan(action: GroupAction, rng: &mut Rng, flags: &Flags) -> GroupStep {
    let broken_fresh = flags.fresh_grace_ms.is_some();
    let pick = rng.below(3) as usize;
    let cut = (action != GroupAction::Replica && rng.chance(0.7)).then(|| {
        let client = rng.below(CLIENTS as u64) as usize;
        // A failover's leader (`pick`) stays reachable; after a kill, the old master takes no
        // writes, and the client may be cut off from every sentinel.
        let sentinels = loop {
            let mask = rng.range(1, 7) as u8;
            if action == GroupAction::Kill || mask & (1 << pick) == 0 {
                break mask;
            }
        };
        let mode = if rng.chance(0.5) {
            CutMode::Refuse
        } else {
            CutMode::Blackhole
        };
        SentinelCut {
            client,
            sentinels,
            mode,
        }
    });
    let down_ms = match action {
        GroupAction::Kill => rng.range(0, 1_500),
        GroupAction::Replica => rng.range(200, 1_500),
        GroupAction::Failover => 0,
    };
    let split = (broken_fresh && action == GroupAction::Failover).then(|| {
        let client = rng.below(CLIENTS as u64) as usize;
        let a = rng.below(cluster_node() as u64);
        let b = (a + 1 + rng.below(cluster_node() as u64 - 1)) % cluster_node() as u64;
        (client, (1u8 << a) | (1u8 << b))
    });
    // Every kill or failover of the master cuts one client off from it (not the client whose
    // locks rest on the old master when broken on purpose: that one must reach it).
    let master_cut = (action != GroupAction::Replica).then(|| {
        let client = match split {
            Some((c, _)) => (c + 1 + rng.below(CLIENTS as u64 - 1) as usize) % CLIENTS,
            None => rng.below(CLIENTS as u64) as usize,
        };
        MasterCut {
            client,
            mode: if rng.chance(0.5) {
                CutMode::Refuse
            } else {
                CutMode::Blackhole
            },
        }
    });
    GroupStep {
        action,
        pick,
        cut,
        master_cut,
        down_ms,
        split,
    }
}

pub fn describe(s: &GroupStep) -> String {
    let what = match s.action {
        GroupAction::Kill => format!(
            "SIGKILL Sentinel master of n{}, restart once switched (+{} at the earliest)",
            cluster_node(),
            s.down_ms
        ),
        GroupAction::Failover => format!(
            "SENTINEL FAILOVER of n{} via sentinel {}",
            cluster_node(),
            s.pick % 3
        ),
        GroupAction::Replica => format!(
            "SIGKILL replica #{} of n{}, restart after {} ms",
            s.pick % 2,
            cluster_node(),
            s.down_ms
        ),
    };
    let cut = s.cut.map_or(String::new(), |c| {
        format!(
            ", c{} cut from sentinels {:03b} ({})",
            c.client,
            c.sentinels,
            c.mode.name()
        )
    });
    let master_cut = s.master_cut.map_or(String::new(), |c| {
        format!(
            ", c{} cut from the old master ({})",
            c.client,
            c.mode.name()
        )
    });
    let split = s.split.map_or(String::new(), |(c, n)| {
        format!(", c{c} cut from standalone nodes {n:04b}")
    });
    what + &cut + &master_cut + &split
}

/// How far from a planned fault's span a sentinel's `+switch-master` may be read and still be
/// that fault's: the driver takes its times between polls and connections of its own.
const SWITCH_SLACK_NS: u64 = 1_000 * MS;

/// The planned fault of the master that a `+switch-master` from `from` to `to`, read at `at`,
/// belongs to: one of that master, from the kill or the `SENTINEL FAILOVER` until the group was
/// whole again (the failover's leader announces its switch only when its failover ends, a
/// second or so after the others and after its `get-master-addr-by-name` names the new
/// master), to the master every sentinel named.
fn planned_switch(record: &Record, at: u64, from: u16, to: u16) -> Option<&GroupFault> {
    record.group.iter().find(|f| {
        f.step.action != GroupAction::Replica
            && f.master == from
            && f.switched.is_none_or(|(_, new)| new == to)
            && at + SWITCH_SLACK_NS >= f.start
            && at <= f.healthy.unwrap_or(u64::MAX / 2) + SWITCH_SLACK_NS
    })
}

/// Rules (sn) and the group's part of (p), on what the driver recorded.
pub fn check(logs: &Logs, record: &Record, eager: bool, origin: u64, verdict: &mut Verdict) {
    let at = |t: Option<u64>| t.map_or("never".to_owned(), |t| ms(t, origin));
    let drift_ms = TTL_MAX_MS / 100 + 2;
    // (sn) The sentinels switched master only where the plan made them: a failover they start
    // on their own (a master they judged down) is a failover of a live master at any time,
    // which clients without `restart_grace` are not covered through (A8), so every verdict on
    // the group after it would be about the run, not the library.
    for e in &record.sentinel_events {
        let Some((from, to)) = e.switch() else {
            continue;
        };
        if planned_switch(record, e.at, from, to).is_some() {
            continue;
        }
        let before: Vec<String> = record
            .sentinel_events
            .iter()
            .filter(|b| {
                b.at <= e.at
                    && b.at + 5_000 * MS >= e.at
                    && matches!(
                        b.channel.as_str(),
                        "+sdown" | "+odown" | "+try-failover" | "+elected-leader" | "+tilt"
                    )
            })
            .map(|b| {
                format!(
                    "{} {} {} {}",
                    ms(b.at, origin),
                    b.sentinel,
                    b.channel,
                    b.payload
                )
            })
            .collect();
        // Whether the servers were answering: the parent's probe of each (a server the machine
        // did not run, or one blocked in the kernel, answers late; one that answered in time
        // points at the sentinels or their links).
        let late: Vec<String> = logs
            .group_stalls
            .iter()
            .filter(|&&(_, from, to)| to + 5_000 * MS >= e.at && from <= e.at)
            .map(|&(port, from, to)| {
                format!(
                    "{port} from {} for {} ms",
                    ms(from, origin),
                    (to - from) / MS
                )
            })
            .collect();
        verdict.fail(format!(
            "(sn) unplanned Sentinel failover: sentinel {} switched n{}'s master from {from} to \
             {to} at {}, and no fault of the plan made it; the run's verdicts on n{} from then \
             on are not the library's, since a failover of a live master covers only clients \
             with restart_grace (A8). The sentinels' events in the 5 s before it: [{}]; the \
             group's servers' answers over 10 ms late to the parent's PINGs then: [{}]; the \
             sentinels' and servers' logs and events are kept with the client logs",
            e.sentinel,
            cluster_node(),
            ms(e.at, origin),
            cluster_node(),
            before.join("; "),
            late.join("; ")
        ));
    }
    for f in &record.group {
        // (sn) Every fault ran its course: the sentinels switched to a new master (the old
        // one restarted only once they all named it), the old master (or the lost replica)
        // is a replica again, and the group whole.
        let master_fault = f.step.action != GroupAction::Replica;
        let switched_first = f.step.action != GroupAction::Kill
            || matches!((f.switched, f.back), (Some((s, _)), Some(b)) if b >= s);
        if (master_fault && f.switched.is_none())
            || !switched_first
            || f.demoted.is_none()
            || f.healthy.is_none()
            || (f.step.action != GroupAction::Failover && f.back.is_none())
            || (f.step.master_cut.is_some() && !f.master_cut_done())
        {
            let master_cut = match (f.step.master_cut, f.master_cut) {
                (_, Some((cut, healed))) => format!(
                    ", a client cut off from the old master at {} until {}",
                    ms(cut, origin),
                    at(healed)
                ),
                (Some(_), None) => {
                    ", the planned cut of a client from the old master not made".into()
                }
                (None, None) => String::new(),
            };
            verdict.fail(format!(
                "(sn) Sentinel fault {:?} of {} (master {}) at {}: every sentinel named a new \
                 master {}{}, restarted {}, a replica again {}, group whole {}{master_cut}",
                f.step.action,
                f.victim,
                f.master,
                ms(f.start, origin),
                at(f.switched.map(|s| s.0)),
                f.switched.map_or(String::new(), |s| format!(" ({})", s.1)),
                at(f.back),
                at(f.demoted),
                at(f.healthy)
            ));
        }
        if eager {
            continue;
        }
        // (p) A master killed is replaced by a replica promoted only after the largest TTL,
        // so every key it may lack had expired: a delayed restart. A live master failed over
        // takes votes that the switch loses until every sentinel switched plus `D` (the watch
        // of a client connected to it): a quick restart, in a quick phase from the command
        // until the largest TTL after that.
        match (f.step.action, f.switched) {
            (GroupAction::Kill, Some((s, _))) if s < f.start + (TTL_MAX_MS + drift_ms) * MS => {
                verdict.fail(format!(
                    "(p) the Sentinel master {} killed at {} was replaced {:.0} ms later, before \
                     every key the replica may lack had expired",
                    f.master,
                    ms(f.start, origin),
                    (s - f.start) as f64 / 1e6
                ));
            }
            (GroupAction::Failover, switched) => {
                let until = switched.map_or(u64::MAX / 2, |s| s.0)
                    + (SENTINEL_D_MS + TTL_MAX_MS + drift_ms) * MS;
                for c in logs.calls.iter().filter(|c| {
                    c.variant == "n" && c.acquires() && c.start < until && c.end > f.start
                }) {
                    verdict.fail(format!(
                        "(p) client {} without restart grace ran {} {} [{} .. {}] while the \
                         Sentinel master {} failed over at {} could still have lost a vote \
                         (every sentinel switched at {}): the phases failed",
                        c.client,
                        c.op,
                        c.resource,
                        ms(c.start, origin),
                        ms(c.end, origin),
                        f.master,
                        ms(f.start, origin),
                        at(switched.map(|s| s.0))
                    ));
                }
            }
            _ => {}
        }
    }
}

/// Rule (cov)'s classes of the group, each with how many ran their course.
pub fn coverage(record: &Record) -> Vec<(&'static str, usize)> {
    let done = |f: &dyn Fn(&GroupFault) -> bool| {
        record
            .group
            .iter()
            .filter(|g| g.healthy.is_some() && f(g))
            .count()
    };
    vec![
        (
            "Sentinel master SIGKILLs (promoted, restarted, a replica again)",
            done(&|g| g.step.action == GroupAction::Kill),
        ),
        (
            "SENTINEL FAILOVERs of a live master (switched, old master a replica again)",
            done(&|g| g.step.action == GroupAction::Failover),
        ),
        (
            "Sentinel replicas lost (killed, restarted, in sync again)",
            done(&|g| g.step.action == GroupAction::Replica),
        ),
        (
            "clients cut off from sentinels while the group switched",
            done(&|g| g.step.cut.is_some()),
        ),
        (
            "clients cut off from the old master while the group switched (cut before the \
             fault, healed once every sentinel switched)",
            done(&GroupFault::master_cut_done),
        ),
    ]
}

/// The fault table's rows for the group.
pub fn fault_rows(record: &Record) -> Vec<(String, String)> {
    let of = |a: GroupAction| -> Vec<&GroupFault> {
        record.group.iter().filter(|g| g.step.action == a).collect()
    };
    let span = |fs: &[&GroupFault], to: &dyn Fn(&GroupFault) -> Option<u64>| {
        let ms: Vec<u64> = fs
            .iter()
            .filter_map(|f| to(f).map(|t| t.saturating_sub(f.start) / MS))
            .collect();
        format!(
            "{}..{} ms",
            ms.iter().min().unwrap_or(&0),
            ms.iter().max().unwrap_or(&0)
        )
    };
    let master = |a: GroupAction| {
        let fs = of(a);
        format!(
            "{} (every sentinel switched after {}; old master a replica after {}; {} with a client cut off from sentinels, {} from the old master)",
            fs.len(),
            span(&fs, &|f| f.switched.map(|s| s.0)),
            span(&fs, &|f| f.demoted),
            fs.iter().filter(|f| f.step.cut.is_some()).count(),
            fs.iter().filter(|f| f.master_cut.is_some()).count()
        )
    };
    let replicas = of(GroupAction::Replica);
    let master_cuts = |mode: CutMode| {
        let ms: Vec<u64> = record
            .group
            .iter()
            .filter(|g| g.step.master_cut.is_some_and(|c| c.mode == mode))
            .filter_map(|g| match g.master_cut {
                Some((at, Some(healed))) => Some((healed - at) / MS),
                _ => None,
            })
            .collect();
        format!("{} ({} ms in all)", ms.len(), ms.iter().sum::<u64>())
    };
    vec![
        (
            "Sentinel master SIGKILL, promotion, restart (back as a replica)".into(),
            master(GroupAction::Kill),
        ),
        (
            "SENTINEL FAILOVER of a live master".into(),
            master(GroupAction::Failover),
        ),
        (
            "Sentinel replica SIGKILL, restart".into(),
            format!(
                "{} (in sync again after {})",
                replicas.len(),
                span(&replicas, &|f| f.demoted)
            ),
        ),
        (
            "client cut off from the Sentinel group's old master during a switch, refused / blackholed".into(),
            format!(
                "{} / {}",
                master_cuts(CutMode::Refuse),
                master_cuts(CutMode::Blackhole)
            ),
        ),
    ]
}

/// The checker must report made-up (sn) and (p) violations of the group, and (cov) must count
/// only an old master's cut that ran its course.
pub fn checker_catches_made_up_violations() {
    let step = |action| GroupStep {
        action,
        pick: 0,
        cut: None,
        master_cut: (action != GroupAction::Replica).then_some(MasterCut {
            client: 0,
            mode: CutMode::Refuse,
        }),
        down_ms: 0,
        split: None,
    };
    // The cut of a client from the old master, made 1 ms before the fault and healed once
    // every sentinel switched.
    let fault =
        |action, switched: Option<u64>, back: Option<u64>, demoted: Option<u64>| GroupFault {
            step: step(action),
            master: 1,
            victim: 1,
            start: 1_000 * MS,
            first_switch: switched.map(|t| t * MS),
            switched: switched.map(|t| (t * MS, 2)),
            back: back.map(|t| t * MS),
            demoted: demoted.map(|t| t * MS),
            healthy: demoted.map(|t| (t + 100) * MS),
            master_cut: (action != GroupAction::Replica)
                .then(|| (999 * MS, Some(switched.unwrap_or(1_000) * MS))),
        };
    let with_cut = |mut f: GroupFault, cut: Option<(u64, Option<u64>)>| {
        f.master_cut = cut.map(|(at, healed)| (at * MS, healed.map(|t| t * MS)));
        f
    };
    let call = |variant: &str, start: u64| crate::checker::Call {
        client: 0,
        op: "lock".into(),
        resource: "chaos:r0".into(),
        start: start * MS,
        end: (start + 10) * MS,
        outcome: "ok".into(),
        variant: variant.into(),
        ran_ms: None,
        waited_ms: None,
        scheduled: None,
    };
    let run = |group: Vec<GroupFault>, calls: Vec<crate::checker::Call>| {
        let record = Record {
            group,
            ..Record::default()
        };
        let logs = Logs {
            calls,
            ..Logs::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        check(&logs, &record, false, 0, &mut verdict);
        verdict.violations
    };
    let good = || {
        vec![
            fault(GroupAction::Kill, Some(3_000), Some(3_500), Some(12_000)),
            fault(GroupAction::Failover, Some(2_000), None, Some(12_000)),
            fault(GroupAction::Replica, None, Some(1_500), Some(2_000)),
        ]
    };
    let ok = run(good(), vec![call("g", 2_500), call("n", 5_500)]);
    assert!(ok.is_empty(), "false Sentinel violations: {ok:?}");
    let cases: Vec<(&str, Vec<GroupFault>, Vec<crate::checker::Call>, &str)> = vec![
        (
            "a kill that never switched",
            vec![fault(GroupAction::Kill, None, Some(3_500), Some(12_000))],
            vec![],
            "(sn)",
        ),
        (
            "an old master restarted before the sentinels switched",
            vec![fault(
                GroupAction::Kill,
                Some(3_000),
                Some(2_500),
                Some(12_000),
            )],
            vec![],
            "(sn)",
        ),
        (
            "an old master never demoted",
            vec![fault(GroupAction::Failover, Some(2_000), None, None)],
            vec![],
            "(sn)",
        ),
        (
            "a lost replica never in sync again",
            vec![fault(GroupAction::Replica, None, Some(1_500), None)],
            vec![],
            "(sn)",
        ),
        (
            "a replica promoted before the keys it lacks expired",
            vec![fault(
                GroupAction::Kill,
                Some(1_300),
                Some(3_500),
                Some(12_000),
            )],
            vec![],
            "(p)",
        ),
        (
            "a client without grace through a failover's window",
            good(),
            vec![call("n", 4_000)],
            "(p)",
        ),
        (
            "a client's cut from the old master healed before every sentinel switched",
            vec![with_cut(
                fault(GroupAction::Failover, Some(2_000), None, Some(12_000)),
                Some((999, Some(1_900))),
            )],
            vec![],
            "(sn)",
        ),
        (
            "a client's cut from the old master never healed",
            vec![with_cut(
                fault(GroupAction::Kill, Some(3_000), Some(3_500), Some(12_000)),
                Some((999, None)),
            )],
            vec![],
            "(sn)",
        ),
        (
            "a client's cut from the old master made after the fault",
            vec![with_cut(
                fault(GroupAction::Failover, Some(2_000), None, Some(12_000)),
                Some((1_100, Some(2_000))),
            )],
            vec![],
            "(sn)",
        ),
        (
            "a planned cut of a client from the old master not made",
            vec![with_cut(
                fault(GroupAction::Kill, Some(3_000), Some(3_500), Some(12_000)),
                None,
            )],
            vec![],
            "(sn)",
        ),
    ];
    for (what, group, calls, rule) in cases {
        let found = run(group, calls);
        assert!(
            found.iter().any(|v| v.starts_with(rule)),
            "the checker missed a made-up {rule} violation ({what}): {found:?}"
        );
    }
    // The sentinels' `+switch-master` of the planned kill (master 1 to 2) is the plan's until
    // the group is whole; one after that, from another master or to another, is not.
    let switch = |at_ms: u64, from: u16| SentinelEvent {
        at: at_ms * MS,
        sentinel: 7,
        channel: "+switch-master".into(),
        payload: format!("redlockmaster 127.0.0.1 {from} 127.0.0.1 2"),
    };
    let switches = |events: Vec<SentinelEvent>| {
        let record = Record {
            group: vec![fault(
                GroupAction::Kill,
                Some(3_000),
                Some(3_500),
                Some(12_000),
            )],
            sentinel_events: events,
            ..Record::default()
        };
        let mut verdict = Verdict {
            violations: Vec::new(),
        };
        check(&Logs::default(), &record, false, 0, &mut verdict);
        verdict.violations
    };
    let planned = switches(vec![switch(2_950, 1), switch(3_000, 1), switch(4_100, 1)]);
    assert!(planned.is_empty(), "false unplanned failovers: {planned:?}");
    for (what, event) in [
        ("after the group was whole again", switch(13_500, 1)),
        ("from a master no fault touched", switch(2_950, 5)),
        ("to another master than every sentinel named", {
            let mut e = switch(3_000, 1);
            e.payload = "redlockmaster 127.0.0.1 1 127.0.0.1 9".into();
            e
        }),
    ] {
        assert!(
            switches(vec![event])
                .iter()
                .any(|v| v.starts_with("(sn) unplanned")),
            "the checker missed a made-up unplanned Sentinel failover ({what})"
        );
    }
    let cuts_done = |group: Vec<GroupFault>| {
        let record = Record {
            group,
            ..Record::default()
        };
        coverage(&record)
            .into_iter()
            .find(|(what, _)| what.starts_with("clients cut off from the old master"))
            .expect("the class of old masters' cuts")
            .1
    };
    assert_eq!(
        cuts_done(good()),
        2,
        "a kill's and a failover's cut ran their course"
    );
    assert_eq!(
        cuts_done(vec![with_cut(
            fault(GroupAction::Failover, Some(2_000), None, Some(12_000)),
            Some((999, Some(1_900))),
        )]),
        0,
        "(cov) counted a cut of the old master healed before the switch"
    );
}
