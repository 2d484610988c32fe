//! Watching the sentinels while connected: which master they name now, for the node's worker
//! and its release subscriber.
//!
//! A connection to a master can outlive its being the master (see the parent module, "A change of
//! master is a restart"). A worker that went on voting from it would make the node answer twice:
//! from the old master to this client, from the new one to every client that resolved the master
//! since. So each Sentinel node has a watch, one thread beside its worker (and its `WAIT` lane):
//! every [`WATCH_INTERVAL`] it asks every sentinel of the URL `SENTINEL get-master-addr-by-name`
//! and `SENTINEL MASTER` (for its `config-epoch`), on one connection per sentinel kept from round
//! to round, the questions written to all of them before any reply is read, each bounded by the
//! client's connect and I/O timeouts. It publishes the answer of the newest configuration: the
//! highest `config-epoch`, the epoch of the failover that made that master (Sentinel's own rule:
//! the higher epoch wins), an answer without one counting as the oldest.
//!
//! **Any sentinel, not a majority.** A client that resolves the master takes the first sentinel
//! that answers with a master that says it is one (every Sentinel client does), so as soon as one
//! sentinel names the new master some client may vote from it: waiting for a majority would let
//! the old master's votes count meanwhile. The epoch keeps a sentinel that has not switched yet
//! from pulling the worker back to the old master. Without epochs (an ACL that denies `SENTINEL
//! MASTER`) a change that any sentinel reports is followed; sentinels that disagree for good then
//! make the worker reconnect at each round, each time a failover (with `restart_grace`, the node
//! stays out of acquire quorums: the safe side).
//!
//! **The worker** compares the watch's generation with the last one it looked at before each
//! batch (one atomic load while nothing changes; an idle worker looks once per interval). When
//! the watch names another master from a newer configuration (or one it cannot order), it drops
//! its connection before the batch goes out, asks the naming sentinel first and reconnects: a
//! change of master (`NodeStatus::failovers`, the restart grace from that moment, the
//! clock guard's sample reset). A resolution that reaches a master of an older configuration
//! than the watch's (a sentinel that has not switched, with the new master out of our reach) is
//! refused: the node is down rather than voting from the old master.
//!
//! **The bound.** A round takes one round trip when the sentinels answer; at most the I/O timeout
//! when one hangs, plus the connect timeout for each connection it must reopen. Let `D` be
//! [`WATCH_INTERVAL`] plus two rounds (a round under way when a sentinel switches may have asked it
//! already; the next starts within an interval after it and takes one more round). No batch goes to
//! the old master later than `D` after the first sentinel we can reach named the new master: with
//! answering sentinels a little over 1 s (`tests/sentinel.rs` measures it, with the old master left
//! writable: about 0.4 s, the interval's phase being random). A watch that hears no sentinel keeps
//! the connection as it is: a sentinel outage does not take the node down, and a client cut off
//! from every sentinel that has switched is the parent module's partition case. At rest the watch
//! costs each sentinel two commands a second per client node, and the worker nothing measurable.
//!
//! May use: its parent (`Sentinel`, its connections), [`answer`](super::answer), `urls`, `sync`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::Sentinel;
use super::answer::{Answer, Reply};
use crate::sync::relock;
use crate::topology::urls;

/// How long the watch of a Sentinel node waits between two rounds of questions to the sentinels
/// (see the module's doc).
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The master the sentinels name, as the watch last heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// `host:port`.
    pub master: String,
    /// The naming sentinel's `config-epoch` for it.
    pub epoch: Option<u64>,
    /// Which sentinel (its index in the URL) named it: asked first at the next connect.
    pub sentinel: usize,
}

/// How the master the watch heard named compares with the one a connection reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The same address.
    Same,
    /// Another address, from a newer configuration (a higher `config-epoch`): a failover.
    Newer,
    /// Another address, from an older configuration: a sentinel that has not switched yet.
    Older,
    /// Another address, and no epochs to tell which configuration is newer (a sentinel whose
    /// ACL denies `SENTINEL MASTER`, or two answers of one epoch).
    Unordered,
}

impl Named {
    /// How this compares with a connection's master (`host:port`) and the epoch it was named
    /// with.
    pub(crate) fn verdict(&self, master: &str, epoch: Option<u64>) -> Verdict {
        match (self.epoch, epoch) {
            _ if self.master == master => Verdict::Same,
            (Some(named), Some(ours)) if named > ours => Verdict::Newer,
            (Some(named), Some(ours)) if named < ours => Verdict::Older,
            _ => Verdict::Unordered,
        }
    }
}

/// What a node's watch thread tells its workers (see `node/follow.rs`, `Follow::switched`).
#[derive(Default)]
pub(crate) struct Watch {
    /// Bumped each time `named` changes: a worker compares it with the last one it looked at,
    /// so that a batch costs one atomic load while nothing changes.
    generation: AtomicU64,
    named: Mutex<Option<Named>>,
}

impl Watch {
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn named(&self) -> Option<Named> {
        relock(&self.named).clone()
    }

    /// Whether the watch has heard the sentinels name another master than `reached` (a
    /// connection's master, `host:port`, and the `config-epoch` it was named with) from a newer
    /// configuration, or from one it cannot order: then that connection must not vote any
    /// more, and this returns what the watch names, with `reached`. `seen` is the generation
    /// the caller last looked at: while it is current this costs one atomic load, and news that
    /// switches nothing (or finds no connection's master to compare) brings it up to date; a
    /// switch leaves it for the reconnect to bring up to date.
    pub(crate) fn switched<'a>(
        &self,
        seen: &mut u64,
        reached: Option<&'a (String, Option<u64>)>,
    ) -> Option<(Named, &'a (String, Option<u64>))> {
        let generation = self.generation();
        if generation == *seen {
            return None;
        }
        let (Some(named), Some(reached)) = (self.named(), reached) else {
            *seen = generation;
            return None;
        };
        let (master, epoch) = reached;
        if matches!(
            named.verdict(master, *epoch),
            Verdict::Same | Verdict::Older
        ) {
            *seen = generation;
            return None;
        }
        Some((named, reached))
    }

    fn publish(&self, named: Named) {
        let mut current = relock(&self.named);
        let changed = current
            .as_ref()
            .is_none_or(|c| c.master != named.master || c.epoch != named.epoch);
        *current = Some(named);
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// Which of one round's answers (sentinel index, answer) the watch publishes: one from the
/// newest configuration (the highest `config-epoch`; an answer without one counts as oldest),
/// and among those, one that differs from what was published before, so that with no epochs
/// to go by, a change any sentinel reports is followed.
fn newest(answers: &[(usize, Answer)], previous: Option<&Named>) -> Option<Named> {
    let top = answers.iter().map(|(_, a)| a.epoch).max()?;
    let mut candidates = answers.iter().filter(|(_, a)| a.epoch == top);
    let differs = |(_, a): &&(usize, Answer)| {
        previous.is_none_or(|p| p.master != urls::address(&a.at.0, a.at.1))
    };
    let (index, answer) = candidates
        .clone()
        .find(differs)
        .or_else(|| candidates.next())?;
    Some(Named {
        master: urls::address(&answer.at.0, answer.at.1),
        epoch: answer.epoch,
        sentinel: *index,
    })
}

impl Sentinel {
    /// Asks `index` first at the next resolution: it named a newer master.
    pub(crate) fn prefer(&self, index: usize) {
        self.preferred.store(index, Ordering::Relaxed);
    }

    /// Starts the node's watch thread: every [`WATCH_INTERVAL`] it asks every sentinel which
    /// master it names and publishes the newest answer on the returned [`Watch`]. It stops when
    /// `stop`'s sender is dropped, and drops `exited` then.
    pub(crate) fn watch(
        self: &Arc<Self>,
        node: usize,
        connect_timeout: Duration,
        io_timeout: Duration,
        stop: Receiver<()>,
        exited: Sender<()>,
    ) -> std::io::Result<(Arc<Watch>, JoinHandle<()>)> {
        let watch = Arc::new(Watch::default());
        let sentinel = Arc::clone(self);
        let published = Arc::clone(&watch);
        let handle = std::thread::Builder::new()
            .name(format!("redlock-node-{node}-sentinels"))
            .stack_size(256 * 1024)
            .spawn(move || {
                let _exited = exited;
                let mut conns: Vec<Option<redis::Connection>> =
                    sentinel.sentinels.iter().map(|_| None).collect();
                while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(WATCH_INTERVAL) {
                    let answers: Vec<(usize, Answer)> = sentinel
                        .round(&mut conns, connect_timeout, io_timeout)
                        .into_iter()
                        .enumerate()
                        .filter_map(|(index, reply)| Some((index, reply.ok()?.0?)))
                        .collect();
                    if let Some(named) = newest(&answers, published.named().as_ref()) {
                        published.publish(named);
                    }
                }
            })?;
        Ok((watch, handle))
    }

    /// One round of questions: `SENTINEL get-master-addr-by-name` and `SENTINEL MASTER` to every
    /// sentinel on a connection kept from round to round (reopened when it failed), written to
    /// all of them before any reply is read, so that a round takes one round trip when they
    /// answer, and at most the I/O timeout (plus the connect timeout per connection reopened)
    /// when one hangs. Per sentinel, in the URL's order: its answer (none when it knows no such
    /// master) and whether it answered `SENTINEL MASTER`, or why it gave nothing.
    fn round(
        &self,
        conns: &mut [Option<redis::Connection>],
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> Vec<Reply> {
        let query = self.question().get_packed_pipeline();
        let mut opened: Vec<redis::RedisResult<()>> = Vec::with_capacity(conns.len());
        for (index, slot) in conns.iter_mut().enumerate() {
            if slot.is_none() {
                let (host, port) = &self.sentinels[index];
                match self.reach.open(
                    host,
                    *port,
                    &self.sentinel_redis,
                    connect_timeout,
                    io_timeout,
                ) {
                    Ok(conn) => *slot = Some(conn),
                    Err(e) => {
                        opened.push(Err(e));
                        continue;
                    }
                }
            }
            let sent = match slot {
                Some(conn) => conn.send_packed_command(&query),
                None => Ok(()),
            };
            if sent.is_err() {
                *slot = None;
            }
            opened.push(sent);
        }
        conns
            .iter_mut()
            .zip(opened)
            .map(|(slot, opened)| {
                opened?;
                let Some(conn) = slot else {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "no connection",
                    )));
                };
                self.read_answer(conn).inspect_err(|_| {
                    // Out of step or gone: reopened at the next round.
                    *slot = None;
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::sentinel::answer::tests::answer;

    #[test]
    fn the_watch_follows_the_newest_configuration() {
        let named = |port: u16, epoch: Option<u64>, sentinel: usize| Named {
            master: format!("10.0.0.1:{port}"),
            epoch,
            sentinel,
        };
        // A sentinel that has switched wins over one that has not, whatever the order.
        let round = [
            (0, answer(1, Some(3))),
            (1, answer(2, Some(4))),
            (2, answer(1, Some(3))),
        ];
        assert_eq!(newest(&round, None), Some(named(2, Some(4), 1)));
        // An answer without an epoch counts as oldest.
        let round = [(0, answer(2, None)), (1, answer(1, Some(0)))];
        assert_eq!(newest(&round, None), Some(named(1, Some(0), 1)));
        // No epochs to go by: a change any sentinel reports is followed.
        let round = [(0, answer(1, None)), (1, answer(2, None))];
        let previous = named(1, None, 0);
        assert_eq!(newest(&round, Some(&previous)), Some(named(2, None, 1)));
        assert_eq!(newest(&[], Some(&previous)), None);

        let n = named(2, Some(4), 1);
        assert_eq!(n.verdict("10.0.0.1:2", Some(3)), Verdict::Same);
        assert_eq!(n.verdict("10.0.0.1:1", Some(3)), Verdict::Newer);
        assert_eq!(n.verdict("10.0.0.1:1", Some(5)), Verdict::Older);
        assert_eq!(n.verdict("10.0.0.1:1", Some(4)), Verdict::Unordered);
        assert_eq!(n.verdict("10.0.0.1:1", None), Verdict::Unordered);
    }

    #[test]
    fn the_watch_bumps_its_generation_only_on_a_change() {
        let watch = Watch::default();
        let named = |port: u16, sentinel: usize| Named {
            master: format!("h:{port}"),
            epoch: Some(1),
            sentinel,
        };
        watch.publish(named(1, 0));
        assert_eq!(watch.generation(), 1);
        watch.publish(named(1, 2));
        assert_eq!(watch.generation(), 1, "another sentinel saying the same");
        watch.publish(named(2, 2));
        assert_eq!(watch.generation(), 2);
        assert_eq!(watch.named(), Some(named(2, 2)));
    }

    #[test]
    fn a_switch_is_another_master_named_from_a_configuration_not_older_than_the_connections() {
        let watch = Watch::default();
        let named = |port: u16, epoch: Option<u64>| Named {
            master: format!("h:{port}"),
            epoch,
            sentinel: 1,
        };
        let reached = ("h:1".to_owned(), Some(3));
        let mut seen = watch.generation();
        assert!(watch.switched(&mut seen, Some(&reached)).is_none());
        // The connection's master, then one of an older configuration: news taken in.
        for news in [named(1, Some(3)), named(2, Some(2))] {
            watch.publish(news);
            assert!(watch.switched(&mut seen, Some(&reached)).is_none());
            assert_eq!(seen, watch.generation());
        }
        // A newer configuration, or one that cannot be ordered: a switch, left unseen.
        for news in [named(2, Some(4)), named(3, None)] {
            watch.publish(news.clone());
            let switch = watch.switched(&mut seen, Some(&reached));
            assert_eq!(switch, Some((news, &reached)));
            assert_ne!(seen, watch.generation());
        }
        // No connection's master to compare with: taken in.
        assert!(watch.switched(&mut seen, None).is_none());
        assert_eq!(seen, watch.generation());
    }
}
