//! A worker's link to a cluster: one connection per master, and the slot map that routes each
//! command of a batch to the master of its keys' slot (every script declares its keys, all in
//! one slot: `wire::slot`). A batch is one pipeline per master, all of them written before any
//! reply is read, so the masters work in parallel. A `MOVED` reply (a failover, a resharding)
//! reads the slot map again, connects and probes the new masters and resends what moved once,
//! while its caller still waits; an `ASK` reply (a slot being migrated) resends the command to
//! the node named, after `ASKING`, with the script's source (that node may not have our
//! scripts); a `NOSCRIPT` reply loads the scripts on that master and resends once, with the
//! source. A master that cannot be reached makes the whole node unavailable until the cluster
//! has failed over (its slots' keys would be missing from the node's answers otherwise), and
//! the worker reconnects as for any node. A master whose connection has been idle long enough
//! to have been failed over meanwhile is confirmed with another node of the cluster before a
//! batch goes to it ([`idle`]), and a map with a hole (slots no master serves, read while the
//! cluster held a master failed) is read again before a batch goes to the hole ([`holes`]).
//!
//! # Clocks
//!
//! The clock guard's samples belong to servers: the probe at connect reads every master's
//! `TIME`, and a batch that takes or extends locks carries `TIME` to every master it writes to
//! (a re-run after a `MOVED` too), and to the first master of the list (by address), whose
//! clock is the node's on the board the other nodes' cross-checks read. Each master's clock has
//! its own detector (its keys expire on that clock), and a forward jump of any of them, or a
//! first reading ahead of the other nodes' at the next acquire, quarantines the node
//! (`rules::clock`, `Guard::sample_master`). A change of the list keeps the samples of the
//! masters still in it and forgets the others' (a new master's clock does not pass for a
//! jump), and the node's own when the first master changed. A command an `ASK` sends on (a
//! slot being migrated) carries `TIME` to that node too, listed master or not. Not sampled: a
//! master whose ACL denies `TIME` (warned of once).
//!
//! # `min_replicas`
//!
//! `WAIT` counts the replicas that have the writes of *the connection it runs on*, so a cluster
//! node's `WAIT` lane is a link of its own: after a batch's writes it sends `WAIT k` to each
//! master that carried one of them, and a vote counts only if its own master's `WAIT` reached
//! `k`. An `ASK` to a node the link has no connection to gets its `WAIT` on the connection
//! opened for it. Every master must have `k` connected replicas (each probe's `INFO
//! replication`, re-read every second while one is short), or the lane refuses its batches
//! unsent, naming the master. The lane follows failovers as the first link does.
//!
//! May use: its parent (`Cluster`, [`Map`]), `probe`, `wire`, `rules::clock`, `urls`.

mod holes;
mod idle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::map::{Map, NO_MASTER, SLOTS};
use super::{Cluster, Timeouts};
use crate::rules::clock::{Readings, TIME_COMMAND, TimeReading};
use crate::topology::probe::{self, Probe};
use crate::topology::urls::address;
use crate::wire::{self, Command, Script};

impl Cluster {
    /// Discovers the cluster and connects to every master.
    pub(crate) fn link(
        self: &Arc<Self>,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<ClusterLink> {
        let timeouts = Timeouts {
            connect: connect_timeout,
            io: io_timeout,
        };
        let map = self.discover(&[], timeouts)?;
        let source = map.source.clone();
        let mut link = ClusterLink {
            cluster: Arc::clone(self),
            timeouts,
            owner: Vec::new(),
            masters: Vec::new(),
            refreshed: None,
            replicas: Vec::new(),
            idle_after: None,
            holes: holes::Holes::default(),
        };
        link.adopt(map, None)?;
        // A master back from a stop still names itself before it learns of its demotion: its
        // own word is confirmed by another node before a batch goes to it.
        if let Some((host, port)) = source
            && let Some(m) = link.position(&host, port)
        {
            link.masters[m].confirmed = None;
        }
        Ok(link)
    }
}

/// One master and the worker's connection to it.
struct Master {
    host: String,
    port: u16,
    conn: redis::Connection,
    /// When a batch's replies last came from it, or another node last confirmed it as the
    /// master of its slots (see `idle`); a `PING` does not count.
    /// `None`: only its own word names it the master (it gave the slot map the link was made
    /// from), which the first batch to it confirms with another node.
    confirmed: Option<Instant>,
    /// Which of the scripts its last probe asked about it has (see `probe`), until the
    /// connect loads the others (`load_scripts`).
    present: Option<Vec<bool>>,
}

impl Master {
    fn address(&self) -> String {
        address(&self.host, self.port)
    }
}

/// One command of a batch: what to send, for which key and token, and until when its caller
/// waits for it (none: always worth sending).
pub(crate) struct Routed<'a> {
    pub command: &'a Command,
    pub key: &'a str,
    pub token: &'a str,
    pub deadline: Option<Instant>,
}

impl Routed<'_> {
    fn slot(&self) -> usize {
        usize::from(wire::slot(self.command.first_key(self.key)))
    }
}

/// A worker's connections to a cluster's masters, and the slot map that routes its commands.
pub(crate) struct ClusterLink {
    cluster: Arc<Cluster>,
    timeouts: Timeouts,
    owner: Vec<u16>,
    /// Sorted by address; the first one's clock is the node's clock.
    masters: Vec<Master>,
    /// A `MOVED` changed the masters: the new ones' merged probe, for the worker to observe.
    refreshed: Option<Probe>,
    /// Each master's connected replicas (`INFO replication`), as its last probe read them.
    replicas: Vec<(String, Option<u64>)>,
    /// `T`: a master not confirmed for this long is confirmed by another node before a batch
    /// goes to it (the smallest of the masters' [`idle::threshold`]s); `None` until the first
    /// master is connected.
    idle_after: Option<Duration>,
    /// When a batch for a slot no master serves may have the slot map read again (see
    /// `holes`).
    holes: holes::Holes,
}

impl ClusterLink {
    /// The masters, `host:port,host:port,…` in address order (`NodeStatus::master`).
    pub(crate) fn masters(&self) -> String {
        self.masters
            .iter()
            .map(Master::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What the worker should observe after a batch that followed a `MOVED` to new masters.
    pub(crate) fn take_refreshed(&mut self) -> Option<Probe> {
        self.refreshed.take()
    }

    /// Takes `map` as the slot map: keeps the connections to masters it still names, opens
    /// the others (and loads `scripts` on them, unless they go whole), and drops the rest.
    /// On an error the link serves no slot (the worker drops it anyway).
    fn adopt(&mut self, map: Map, scripts: Option<&[&[&Script]]>) -> redis::RedisResult<()> {
        let mut old: Vec<Master> = std::mem::take(&mut self.masters);
        self.owner = vec![NO_MASTER; SLOTS];
        let mut masters = Vec::with_capacity(map.masters.len());
        for (host, port) in map.masters {
            let kept = old
                .iter()
                .position(|m| m.host == host && m.port == port)
                .map(|i| old.swap_remove(i));
            let master = match kept {
                Some(m) => m,
                None => {
                    let mut conn = self
                        .cluster
                        .open(&host, port, self.timeouts)
                        .map_err(|e| name_master(e, &address(&host, port)))?;
                    if let Some(scripts) = scripts {
                        wire::load_scripts(&mut conn, scripts, None)?;
                    }
                    let t = idle::threshold(&mut conn);
                    self.idle_after = Some(self.idle_after.map_or(t, |old| old.min(t)));
                    Master {
                        host,
                        port,
                        conn,
                        confirmed: Some(Instant::now()),
                        present: None,
                    }
                }
            };
            masters.push(master);
        }
        self.masters = masters;
        self.owner = map.owner;
        Ok(())
    }

    /// Probes every master, as one report: see [`merge`]. Each is asked which of `scripts` it
    /// has, for [`load_scripts`](ClusterLink::load_scripts).
    pub(crate) fn probe(&mut self, scripts: &[&Script]) -> redis::RedisResult<Probe> {
        let mut probes = Vec::with_capacity(self.masters.len());
        for m in &mut self.masters {
            let address = m.address();
            let mut probe =
                probe::run(&mut m.conn, scripts).map_err(|e| name_master(e, &address))?;
            m.present = probe.scripts_present.take();
            probes.push((address, probe));
        }
        self.replicas = probes
            .iter()
            .map(|(address, p)| (address.clone(), p.report.connected_replicas))
            .collect();
        merge(probes).ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Client, "the cluster has no master"))
        })
    }

    /// Loads the scripts each master lacks: by its probe's answer, or asked now.
    pub(crate) fn load_scripts(&mut self, sets: &[&[&Script]]) -> redis::RedisResult<()> {
        for m in &mut self.masters {
            wire::load_scripts(&mut m.conn, sets, m.present.take().as_deref())?;
        }
        Ok(())
    }

    pub(crate) fn ping(&mut self) -> redis::RedisResult<()> {
        for m in &mut self.masters {
            redis::cmd("PING").query::<()>(&mut m.conn)?;
        }
        Ok(())
    }

    /// Each master's connected replicas, as its last probe read them (`INFO replication`).
    pub(crate) fn probed_replicas(&self) -> Vec<(String, Option<u64>)> {
        self.replicas.clone()
    }

    /// Runs `f` on every master's connection, in address order; an error names its master.
    pub(crate) fn on_each<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<Vec<(String, T)>> {
        let mut all = Vec::with_capacity(self.masters.len());
        for m in &mut self.masters {
            let address = m.address();
            let value = f(&mut m.conn).map_err(|e| name_master(e, &address))?;
            all.push((address, value));
        }
        Ok(all)
    }

    /// Runs the batch, one pipeline per master, and returns the replies in the batch's order; with
    /// `time`, the `TIME` readings too (see `round`). Handles `NOSCRIPT`, `MOVED` and `ASK` (see
    /// the module's doc). `scripts` are loaded on masters met on the way, unless `inline`.
    ///
    /// With `wait` (`min_replicas`), once every command has its reply, `WAIT` goes to each
    /// connection that carried one of them (it counts the replicas that have the writes of the
    /// connection it runs on): what it answered comes back per command, for the worker to
    /// count each vote only if its own master's replicas have the write.
    pub(crate) fn execute(
        &mut self,
        batch: &[Routed<'_>],
        inline: bool,
        time: bool,
        scripts: &[&[&Script]],
        wait: Option<WaitFor>,
    ) -> redis::RedisResult<Executed> {
        let all: Vec<usize> = (0..batch.len()).collect();
        let mut values = vec![Value::Nil; batch.len()];
        // Where each command ran last: a master of the link, or (after an `ASK` to a node the
        // link has no connection to) a connection of its own, whose `WAIT` was read there.
        let mut ran_on: Vec<RanOn> = vec![RanOn::Nowhere; batch.len()];
        self.fill_holes(batch, (!inline).then_some(scripts))?;
        self.confirm_idle(batch, (!inline).then_some(scripts))?;
        let clocks = if time {
            Clocks::WrittenAndFirst
        } else {
            Clocks::None
        };
        let mut reading = self.round(batch, &all, inline, clocks, &mut values, &mut ran_on)?;
        self.reload_scripts(batch, scripts, &mut values, &mut ran_on)?;
        if let Some(again) =
            self.follow_moved(batch, inline, time, scripts, &mut values, &mut ran_on)?
        {
            if self.refreshed.is_some() {
                // Read from the old masters, whose clocks the guard no longer follows.
                reading = Readings::default();
            }
            reading.node = again.node.or(reading.node);
            reading.masters.extend(again.masters);
        }
        // ASK: the key's slot is being migrated, and the key is on the node named. Its vote
        // counts, so with `time` that node reads its clock too, listed master or not.
        for i in matching(&values, "ASK") {
            let (value, on, clock) = self.ask(&batch[i], &values[i], wait, time)?;
            values[i] = value;
            ran_on[i] = on;
            reading.masters.extend(clock);
        }
        let acks = match wait {
            Some(wait) => Some(self.wait(wait, ran_on)?),
            None => None,
        };
        Ok((values, reading, acks))
    }

    /// `NOSCRIPT` replies (a master that restarted or flushed its scripts): loads the scripts
    /// on those masters and runs their commands again, with the scripts' source (`EVAL`), which
    /// another flush since the load cannot fail. The same masters as the first round, which
    /// read their clocks then.
    fn reload_scripts(
        &mut self,
        batch: &[Routed<'_>],
        scripts: &[&[&Script]],
        values: &mut [Value],
        ran_on: &mut [RanOn],
    ) -> redis::RedisResult<()> {
        let noscript = matching(values, "NOSCRIPT");
        if noscript.is_empty() {
            return Ok(());
        }
        let mut masters: Vec<u16> = noscript
            .iter()
            .map(|&i| self.owner[batch[i].slot()])
            .collect();
        masters.sort_unstable();
        masters.dedup();
        for m in masters {
            if let Some(master) = self.masters.get_mut(usize::from(m)) {
                wire::load_scripts(&mut master.conn, scripts, None)?;
            }
        }
        self.round(batch, &noscript, true, Clocks::None, values, ran_on)?;
        Ok(())
    }

    /// `MOVED` replies of commands whose callers still wait (the slot has another master now:
    /// a failover, a resharding): reads the slot map again and runs those commands again.
    /// With `time`, each master the re-run reaches reads its clock too (the first master only
    /// if it carries a command): a master that took nothing in the first round has no reading
    /// of this batch yet, and its vote counts only with one. The re-run's readings, if any.
    fn follow_moved(
        &mut self,
        batch: &[Routed<'_>],
        inline: bool,
        time: bool,
        scripts: &[&[&Script]],
        values: &mut [Value],
        ran_on: &mut [RanOn],
    ) -> redis::RedisResult<Option<Readings>> {
        let now = Instant::now();
        let moved: Vec<usize> = matching(values, "MOVED")
            .into_iter()
            .filter(|&i| batch[i].deadline.is_none_or(|d| d > now))
            .collect();
        if moved.is_empty() {
            return Ok(None);
        }
        let redirects: Vec<(usize, (String, u16))> = moved
            .iter()
            .filter_map(|&i| Some((batch[i].slot(), redirect(&values[i])?)))
            .collect();
        self.refresh(&redirects, (!inline).then_some(scripts))?;
        let clocks = if time { Clocks::Written } else { Clocks::None };
        self.round(batch, &moved, inline, clocks, values, ran_on)
            .map(Some)
    }

    /// Sends `WAIT` to every master that carried a command of the batch (all written before
    /// any reply is read), reads each reply until `wait.answer_by`, and gives each command the
    /// answer of the connection it ran on.
    fn wait(&mut self, wait: WaitFor, ran_on: Vec<RanOn>) -> redis::RedisResult<Vec<Waited>> {
        let mut on: Vec<usize> = Vec::new();
        let mut buf = Vec::new();
        wire::write_wait(wait.k, wait.ms, &mut buf);
        for r in &ran_on {
            if let RanOn::Master(host, port) = r
                && let Some(m) = self.position(host, *port)
                && !on.contains(&m)
            {
                self.masters[m].conn.send_packed_command(&buf)?;
                on.push(m);
            }
        }
        let mut answers: Vec<(usize, Waited)> = Vec::with_capacity(on.len());
        for m in on {
            let answer = wait.read(&mut self.masters[m].conn, self.timeouts.io)?;
            answers.push((m, answer));
        }
        Ok(ran_on
            .into_iter()
            .map(|r| match r {
                RanOn::Master(host, port) => {
                    let answer = self
                        .position(&host, port)
                        .and_then(|m| answers.iter().find(|(a, _)| *a == m));
                    match answer {
                        Some((_, answer)) => answer.clone(),
                        // Dropped from the slot map after it took the write: nothing tells
                        // whether its replicas have it.
                        None => Waited::Gone(address(&host, port)),
                    }
                }
                RanOn::Alone(answer) => answer,
                // Not sent (no master serves its slot): its reply is the error, no vote.
                RanOn::Nowhere => Waited::Reply(Value::Int(0)),
            })
            .collect())
    }

    /// The index of the master at `host:port`, if the link has one.
    fn position(&self, host: &str, port: u16) -> Option<usize> {
        self.masters
            .iter()
            .position(|m| m.host == host && m.port == port)
    }

    /// The batch's commands `which`, per master (by index) of their slot. A command whose slot
    /// no master serves gets its reply here: the error.
    fn route(
        &self,
        batch: &[Routed<'_>],
        which: &[usize],
        values: &mut [Value],
        ran_on: &mut [RanOn],
    ) -> Vec<Vec<usize>> {
        let mut per_master: Vec<Vec<usize>> = vec![Vec::new(); self.masters.len()];
        for &i in which {
            match self.owner[batch[i].slot()] {
                NO_MASTER => {
                    values[i] = error_reply(&format!(
                        "CLUSTERDOWN no master serves slot {} (of key {:?}) in the cluster's slot \
                         map (the cluster holds its master failed, or the slot is unassigned)",
                        batch[i].slot(),
                        batch[i].key
                    ))
                }
                m => {
                    let master = &self.masters[usize::from(m)];
                    ran_on[i] = RanOn::Master(master.host.clone(), master.port);
                    per_master[usize::from(m)].push(i)
                }
            }
        }
        per_master
    }

    /// Sends the batch's commands `which` to their masters (all pipelines written before any
    /// reply is read) and puts the replies in `values`. With `clocks`, the pipeline of every
    /// master that carries one of the commands ends with `TIME` (its keys expire on its own
    /// clock), and with `WrittenAndFirst` the first master's too, whose clock is the node's:
    /// their readings come back.
    fn round(
        &mut self,
        batch: &[Routed<'_>],
        which: &[usize],
        inline: bool,
        clocks: Clocks,
        values: &mut [Value],
        ran_on: &mut [RanOn],
    ) -> redis::RedisResult<Readings> {
        let per_master = self.route(batch, which, values, ran_on);
        let with_time = |m: usize, indices: &[usize]| match clocks {
            Clocks::None => false,
            Clocks::Written => !indices.is_empty(),
            Clocks::WrittenAndFirst => m == 0 || !indices.is_empty(),
        };
        let mut buf = Vec::new();
        let mut sent_at = vec![None; per_master.len()];
        let round_sent = Instant::now();
        for (m, indices) in per_master.iter().enumerate() {
            let with_time = with_time(m, indices);
            if indices.is_empty() && !with_time {
                continue;
            }
            buf.clear();
            for &i in indices {
                let r = &batch[i];
                r.command.write_resp(r.key, r.token, inline, &mut buf);
            }
            if with_time {
                buf.extend_from_slice(TIME_COMMAND);
                sent_at[m] = Some(Instant::now());
            }
            let master = &mut self.masters[m];
            master.conn.send_packed_command(&buf)?;
        }
        let mut readings = Readings::default();
        for (m, indices) in per_master.iter().enumerate() {
            let with_time = with_time(m, indices);
            if indices.is_empty() && !with_time {
                continue;
            }
            let master = &mut self.masters[m];
            for &i in indices {
                values[i] = next_reply(&mut master.conn)?;
            }
            if let (true, Some(sent)) = (with_time, sent_at[m]) {
                let reading = TimeReading::new(next_reply(&mut master.conn)?, sent);
                if m == 0 {
                    readings.node = Some(reading);
                } else {
                    readings.masters.push((master.address(), reading));
                }
            }
            // Its replies confirm it, unless it carried only `TIME` (not checked before) or
            // took long enough to have been stopped meanwhile.
            let now = Instant::now();
            if !indices.is_empty()
                && self
                    .idle_after
                    .is_some_and(|t| now.saturating_duration_since(round_sent) < t)
            {
                master.confirmed = Some(now);
            }
        }
        Ok(readings)
    }

    /// Reads the slot map again after `MOVED`s (`redirects`: slot and where to), asking the
    /// nodes they name first (a new master knows it is one before the others hear of it), and
    /// takes each redirect over the map where they disagree; connects to new masters and, when
    /// the masters changed, probes them all for the worker to observe.
    fn refresh(
        &mut self,
        redirects: &[(usize, (String, u16))],
        scripts: Option<&[&[&Script]]>,
    ) -> redis::RedisResult<()> {
        let known = self.addresses();
        let first: Vec<(String, u16)> = redirects
            .iter()
            .map(|(_, at)| at.clone())
            .chain(known.iter().cloned())
            .collect();
        let mut map = self.cluster.discover(&first, self.timeouts)?;
        for (slot, at) in redirects {
            map.assign(*slot, at);
        }
        self.take(map, scripts)
    }

    /// Takes a slot map read again: when its masters differ from the link's, connects to the
    /// new ones and probes them all, for the worker to observe (a change of master: a restart).
    fn take(&mut self, map: Map, scripts: Option<&[&[&Script]]>) -> redis::RedisResult<()> {
        let changed = map.masters != self.addresses();
        self.adopt(map, scripts)?;
        if changed {
            self.refreshed = Some(self.probe(&[])?);
        }
        Ok(())
    }

    /// The masters' addresses, in the link's order.
    fn addresses(&self) -> Vec<(String, u16)> {
        self.masters
            .iter()
            .map(|m| (m.host.clone(), m.port))
            .collect()
    }

    /// Sends a command that answered `ASK slot host:port` to that node, after `ASKING`, with
    /// its script's source (the node may not have our scripts). The node's reply, or the `ASK`
    /// itself when it cannot be read; where it ran; and with `time`, the node's `TIME` reading
    /// (none for the first master, read in the batch's first round already). With `wait`, a
    /// node the link has no connection to gets its `WAIT` on the connection opened for it, read
    /// here.
    fn ask(
        &mut self,
        r: &Routed<'_>,
        ask: &Value,
        wait: Option<WaitFor>,
        time: bool,
    ) -> redis::RedisResult<(Value, RanOn, Option<MasterReading>)> {
        let Some((host, port)) = redirect(ask) else {
            return Ok((ask.clone(), RanOn::Nowhere, None));
        };
        if let Some(i) = self.position(&host, port) {
            let master = &mut self.masters[i];
            let (value, reading) = send_asking(&mut master.conn, r, time && i != 0)?;
            let clock = reading.map(|t| (master.address(), t));
            return Ok((value, RanOn::Master(host, port), clock));
        }
        let mut conn = self
            .cluster
            .open(&host, port, self.timeouts)
            .map_err(|e| name_master(e, &address(&host, port)))?;
        let (value, reading) = send_asking(&mut conn, r, time)?;
        let clock = reading.map(|t| (address(&host, port), t));
        let on = match wait {
            Some(wait) => {
                let mut buf = Vec::new();
                wire::write_wait(wait.k, wait.ms, &mut buf);
                conn.send_packed_command(&buf)?;
                RanOn::Alone(wait.read(&mut conn, self.timeouts.io)?)
            }
            None => RanOn::Nowhere,
        };
        Ok((value, on, clock))
    }
}

/// A master's `TIME` reading, with its address.
type MasterReading = (String, TimeReading);

/// What [`ClusterLink::execute`] returns: the replies in the batch's order, the `TIME`
/// reading, and with a `WAIT`, what it answered for each command.
pub(crate) type Executed = (Vec<Value>, Readings, Option<Vec<Waited>>);

/// The `WAIT k ms` a batch of a `WAIT` lane ends with (`min_replicas`) on each master it wrote
/// to, and until when its replies are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitFor {
    pub k: u32,
    pub ms: u64,
    /// Past this, a master whose `WAIT` has not answered counts as not acknowledged, and
    /// redis-rs skips the late reply when that connection reads its next one.
    pub answer_by: Instant,
    /// When the batch was sent, for how long a late `WAIT` was waited for.
    pub sent: Instant,
}

impl WaitFor {
    /// Reads one `WAIT` reply on `conn` until `answer_by`, then puts the read timeout back.
    fn read(&self, conn: &mut redis::Connection, io: Duration) -> redis::RedisResult<Waited> {
        let left = self
            .answer_by
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        conn.set_read_timeout(Some(left))?;
        let reply = next_reply(conn);
        conn.set_read_timeout(Some(io))?;
        match reply {
            Ok(value) => Ok(Waited::Reply(value)),
            Err(e) if e.is_timeout() => Ok(Waited::Late(self.sent.elapsed())),
            Err(e) => Err(e),
        }
    }
}

/// What the `WAIT` on the connection that carried a command answered.
#[derive(Debug, Clone)]
pub(crate) enum Waited {
    Reply(Value),
    /// No reply by `answer_by`, this long after the batch was sent.
    Late(Duration),
    /// The master (`host:port`) that took the command left the slot map before its `WAIT`.
    Gone(String),
}

/// Where a command of a batch ran last.
#[derive(Debug, Clone)]
enum RanOn {
    /// Not sent: no master serves its slot.
    Nowhere,
    /// On the link's connection to this master.
    Master(String, u16),
    /// On a connection of its own (an `ASK` to a node the link has none to), whose `WAIT`
    /// answered this.
    Alone(Waited),
}

/// `ASKING` and the command, with `time` followed by `TIME`: the command's reply, and the
/// reading.
fn send_asking(
    conn: &mut redis::Connection,
    r: &Routed<'_>,
    time: bool,
) -> redis::RedisResult<(Value, Option<TimeReading>)> {
    let mut buf = Vec::new();
    redis::cmd("ASKING").write_packed_command(&mut buf);
    r.command.write_resp(r.key, r.token, true, &mut buf);
    if time {
        buf.extend_from_slice(TIME_COMMAND);
    }
    let sent = Instant::now();
    conn.send_packed_command(&buf)?;
    let _asking = next_reply(conn)?;
    let value = next_reply(conn)?;
    let reading = match time {
        true => Some(TimeReading::new(next_reply(conn)?, sent)),
        false => None,
    };
    Ok((value, reading))
}

/// An error reply, as a server would send it.
fn error_reply(text: &str) -> Value {
    let line = format!("-{}\r\n", text.replace(['\r', '\n'], " "));
    redis::parse_redis_value(line.as_bytes()).unwrap_or(Value::Nil)
}

/// The next reply on `conn`, skipping RESP3 pushes.
fn next_reply(conn: &mut redis::Connection) -> redis::RedisResult<Value> {
    loop {
        match conn.recv_response()? {
            Value::Push { .. } => {}
            value => return Ok(value),
        }
    }
}

/// The indices of the replies that are server errors with `code`.
fn matching(values: &[Value], code: &str) -> Vec<usize> {
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Value::ServerError(e) if e.code() == code))
        .map(|(i, _)| i)
        .collect()
}

/// The `host:port` of a `MOVED` or `ASK` reply (`slot host:port`).
fn redirect(value: &Value) -> Option<(String, u16)> {
    let Value::ServerError(e) = value else {
        return None;
    };
    let (_, at) = e.details()?.trim().split_once(' ')?;
    let (host, port) = at.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host.to_owned(), port.parse().ok()?))
}

/// Which masters of a round read their clocks for the guard (`TIME` ending their pipeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clocks {
    None,
    /// Each master that carries a command of the round.
    Written,
    /// Those, and the first master, whose clock is the node's.
    WrittenAndFirst,
}

/// An error of one master, naming it.
fn name_master(e: redis::RedisError, master: &str) -> redis::RedisError {
    if e.is_io_error() || e.is_timeout() {
        // Kept as it is: the worker tells a dropped connection or a timeout by its kind.
        return e;
    }
    redis::RedisError::from((
        e.kind(),
        "a master of the cluster failed",
        format!("{master}: {e}"),
    ))
}

/// Every master's probe as one: the first master's report (its clock, version and persistence), the
/// other masters' clocks (`masters_time`), with the `run_id`s and replication IDs of all masters
/// joined by `,` (any change of one is a change of the node's), the youngest master's uptime,
/// whether any master was promoted since it started, and every master's errors and warnings, each
/// naming its master. Cluster mode and replicas are expected here.
fn merge(probes: Vec<(String, Probe)>) -> Option<Probe> {
    let join = |f: &dyn Fn(&Probe) -> Option<String>| -> Option<String> {
        probes
            .iter()
            .map(|(_, p)| f(p))
            .collect::<Option<Vec<_>>>()
            .map(|all| all.join(","))
    };
    let run_id = join(&|p| p.report.run_id.clone());
    let replid = join(&|p| p.report.replid.clone());
    let uptime = probes
        .iter()
        .map(|(_, p)| p.report.uptime)
        .collect::<Option<Vec<_>>>()
        .and_then(|all| all.into_iter().min());
    let promoted = probes.iter().any(|(_, p)| p.report.promoted);
    let several = probes.len() > 1;
    let mut merged: Option<Probe> = None;
    let mut masters_time = Vec::new();
    for (address, mut p) in probes {
        probe::expect_cluster(&mut p.assessment);
        probe::expect_replicas(&mut p.assessment);
        let name = |w: String| {
            if several {
                format!("master {address}: {w}")
            } else {
                w
            }
        };
        match &mut merged {
            None => {
                p.assessment.errors = p.assessment.errors.into_iter().map(name).collect();
                p.assessment.warnings = p.assessment.warnings.into_iter().map(name).collect();
                merged = Some(p);
            }
            Some(m) => {
                if let Some(time) = p.time.take() {
                    masters_time.push((address.clone(), time));
                }
                m.assessment
                    .errors
                    .extend(p.assessment.errors.into_iter().map(name));
                m.assessment
                    .warnings
                    .extend(p.assessment.warnings.into_iter().map(name));
            }
        }
    }
    let mut merged = merged?;
    merged.report.run_id = run_id;
    merged.report.replid = replid;
    merged.report.uptime = uptime;
    merged.report.promoted = promoted;
    merged.masters_time = masters_time;
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redirections() {
        assert_eq!(
            redirect(&error_reply("MOVED 3999 127.0.0.1:6381")),
            Some(("127.0.0.1".to_owned(), 6381))
        );
        assert_eq!(
            redirect(&error_reply("ASK 1 [::1]:7000")),
            Some(("::1".to_owned(), 7000))
        );
        assert_eq!(redirect(&Value::Nil), None);
        let values = [
            error_reply("MOVED 1 h:1"),
            Value::Okay,
            error_reply("ASK 1 h:1"),
        ];
        assert_eq!(matching(&values, "MOVED"), vec![0]);
        assert_eq!(matching(&values, "ASK"), vec![2]);
    }
}
