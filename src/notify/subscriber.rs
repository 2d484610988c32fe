//! One node's [`Subscriber`] thread: its connection, the channels subscribed on it (and those
//! that linger after their last waiter left), its reconnects with backoff, and, for a Sentinel
//! node, dropping a connection to a master the sentinels no longer name. It reads what the node
//! publishes and tells the registry ([`registry`](super::registry)); the waiters' side reaches
//! it only through [`SubscriptionChange`]s.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::notify::queue::queue_news;
use crate::notify::registry::Registry;
use crate::topology::{Verdict, Watch};
use crate::wire::{channel, released_key};

/// How long a subscriber reads before it looks at new (un)subscriptions.
pub(super) const READ_SLICE: Duration = Duration::from_millis(20);
/// How long a subscription stays on a connection after the client's last waiter on its resource
/// left: a client whose waiters come back within it (a worker that locks the same resource in a
/// loop) sends no `UNSUBSCRIBE` and `SUBSCRIBE` to every node in between, and its next waiter
/// listens at once.
pub(super) const LINGER: Duration = Duration::from_secs(1);
/// How long a node may stay silent while waiters listen before its subscriber probes it (a
/// `SUBSCRIBE` of a channel it is on): silence from a hung node reads as from an idle one, and
/// a waiter trusting its release notification would sleep until the holder's keys expire.
/// Unanswered within the I/O timeout, the node counts as failing (waiters stop trusting it)
/// until it answers.
pub(super) const PROBE_AFTER: Duration = Duration::from_millis(500);

/// What a waiter asks of every node's subscriber: to subscribe its resource's channel (the
/// first waiter there) or to unsubscribe it (the last one left).
pub(super) enum SubscriptionChange {
    Subscribe(Arc<str>),
    Unsubscribe(Arc<str>),
}

/// One node's subscriptions, as the thread reading them keeps them (a [`Subscriber`], or the
/// [`poller`](super::poller) for each of its nodes), and what it tells the registry of them.
#[derive(Default)]
pub(super) struct Subscriptions {
    /// Resources subscribed (or to subscribe once connected).
    pub(super) wanted: HashSet<Arc<str>>,
    /// Resources whose subscription is active on the current connection.
    pub(super) active: HashSet<Arc<str>>,
    /// Resources no waiter wants any more, still subscribed on the current connection until
    /// then (see [`LINGER`]).
    pub(super) lingering: HashMap<Arc<str>, Instant>,
}

impl Subscriptions {
    /// Nothing wanted, nothing lingering: the connection may sit idle.
    pub(super) fn is_empty(&self) -> bool {
        self.wanted.is_empty() && self.lingering.is_empty()
    }

    /// A change while the node is not connected: the next connection subscribes what is wanted.
    pub(super) fn apply_offline(&mut self, change: SubscriptionChange) {
        match change {
            SubscriptionChange::Subscribe(res) => self.wanted.insert(res),
            SubscriptionChange::Unsubscribe(res) => self.wanted.remove(&res),
        };
    }

    /// The node confirmed `res`'s subscription on the current connection.
    pub(super) fn activate(&mut self, res: &Arc<str>, registry: &Registry, index: usize) {
        if self.active.insert(Arc::clone(res)) {
            registry.subscribed(index, res);
        }
    }

    /// The last waiter on `res` left: its subscription lingers.
    pub(super) fn leave(&mut self, res: Arc<str>, registry: &Registry, index: usize) {
        self.wanted.remove(&res);
        if self.active.remove(&res) {
            registry.unsubscribed(index, &res);
        }
        self.lingering.insert(res, Instant::now() + LINGER);
    }

    /// The lingering resources whose time is up at `now`, no longer lingering: to unsubscribe.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Arc<str>> {
        let due: Vec<Arc<str>> = self
            .lingering
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(res, _)| Arc::clone(res))
            .collect();
        for res in &due {
            self.lingering.remove(res);
        }
        due
    }

    /// The connection is gone: until resubscribed, releases on the node go unheard.
    pub(super) fn drop_active(&mut self, registry: &Registry, index: usize) {
        for res in std::mem::take(&mut self.active) {
            registry.unsubscribed(index, &res);
        }
    }

    /// A channel to probe the node with: one a waiter wants and the node confirmed.
    pub(super) fn probe(&self) -> Option<&Arc<str>> {
        self.wanted.iter().find(|res| self.active.contains(*res))
    }
}

/// One node's subscriber thread.
pub(super) struct Subscriber {
    /// The node's index, in the registry's per-node state.
    pub(super) index: usize,
    pub(super) client: crate::topology::Target,
    /// A Sentinel node's watch (the node's, see `node/follow.rs`): a connection to a master the
    /// sentinels no longer name is dropped, as the node's workers drop theirs, or the
    /// releases published on the new master would go unheard. The master of the current
    /// connection (`host:port`, config epoch), and the watch's generation compared with it.
    pub(super) watch: Option<Arc<Watch>>,
    pub(super) master: Option<(String, Option<u64>)>,
    pub(super) watch_seen: u64,
    pub(super) changes: Receiver<SubscriptionChange>,
    pub(super) registry: Arc<Registry>,
    pub(super) subs: Subscriptions,
    pub(super) connect_timeout: Duration,
    pub(super) io_timeout: Duration,
    pub(super) _exited: Sender<()>,
}

/// Why a subscriber session ended.
enum End {
    /// Every sender of changes is gone: the client was dropped.
    Closed,
    /// The connection failed; reconnect.
    Broken,
}

impl Subscriber {
    pub(super) fn run(mut self) {
        let mut backoff = crate::wire::BACKOFF_MIN;
        loop {
            // Nothing to listen for: park until a waiter comes (or the client goes).
            while self.subs.wanted.is_empty() {
                match self.changes.recv() {
                    Ok(r) => self.apply_offline(r),
                    Err(_) => return,
                }
            }
            self.registry.waiting_for(self.index, true);
            let connected = self.connect();
            self.registry.waiting_for(self.index, false);
            match connected {
                Ok(mut conn) => {
                    backoff = crate::wire::BACKOFF_MIN;
                    let end = self.session(&mut conn);
                    self.registry.waiting_for(self.index, false);
                    if let End::Closed = end {
                        return;
                    }
                    self.set_failing(true);
                    // Until resubscribed, releases on this node go unheard.
                    self.subs.drop_active(&self.registry, self.index);
                }
                Err(e) => {
                    self.set_failing(true);
                    // Keep up with (un)subscriptions while the node is down.
                    let until = Instant::now() + backoff;
                    backoff = crate::wire::next_backoff(backoff, &e);
                    loop {
                        match self.changes.recv_deadline(until) {
                            Ok(r) => self.apply_offline(r),
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                }
            }
        }
    }

    /// The connection broke or could not be made (`true`: a lapse, see
    /// [`Registry::set_failing`]), or works.
    fn set_failing(&self, failing: bool) {
        self.registry.set_failing(self.index, failing, true);
    }

    /// (Un)subscribes on the connection, telling the registry it waits for the node meanwhile.
    fn subscribe(&self, pubsub: &mut redis::PubSub<'_>, res: &str, on: bool) -> bool {
        self.registry.waiting_for(self.index, true);
        let ok = if on {
            pubsub.subscribe(channel(res)).is_ok()
        } else {
            pubsub.unsubscribe(channel(res)).is_ok()
        };
        self.registry.waiting_for(self.index, false);
        ok
    }

    fn apply_offline(&mut self, r: SubscriptionChange) {
        self.subs.apply_offline(r);
    }

    /// Applies one change on a live connection; false if the connection failed.
    fn apply(&mut self, pubsub: &mut redis::PubSub<'_>, r: SubscriptionChange) -> bool {
        match r {
            SubscriptionChange::Subscribe(res) => {
                let ok = self.subs.lingering.remove(&res).is_some()
                    || self.subscribe(pubsub, &res, true);
                if ok {
                    self.subs.activate(&res, &self.registry, self.index);
                }
                self.subs.wanted.insert(res);
                ok
            }
            SubscriptionChange::Unsubscribe(res) => {
                self.subs.leave(res, &self.registry, self.index);
                true
            }
        }
    }

    /// Unsubscribes the lingering resources whose time is up; false if the connection failed.
    fn end_lingering(&mut self, pubsub: &mut redis::PubSub<'_>) -> bool {
        for res in self.subs.take_due(Instant::now()) {
            if !self.subscribe(pubsub, &res, false) {
                return false;
            }
        }
        true
    }

    fn connect(&mut self) -> redis::RedisResult<redis::Connection> {
        // A Sentinel node's subscriber resolves the master as its worker does, and like it
        // refuses one older than the master its watch heard of since (a sentinel that has not
        // switched yet was asked first).
        let generation = self.watch.as_ref().map_or(0, |w| w.generation());
        let connected = self.client.connect(self.connect_timeout, self.io_timeout)?;
        if let (Some(watch), Some(reached)) = (&self.watch, &connected.master)
            && let Some(named) = watch.named()
            && named.verdict(reached, connected.epoch) == Verdict::Newer
        {
            self.prefer(named.sentinel);
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the sentinels name a newer master",
            )));
        }
        self.master = connected.master.map(|m| (m, connected.epoch));
        self.watch_seen = generation;
        Ok(connected.conn)
    }

    /// Whether the watch has heard the sentinels name another master than the one this
    /// connection reached (see `node/follow.rs`, `Follow::switched`): then it is dropped, and the
    /// next connect resolves the master again.
    fn master_switched(&mut self) -> bool {
        let Some(watch) = &self.watch else {
            return false;
        };
        let Some((named, _)) = watch.switched(&mut self.watch_seen, self.master.as_ref()) else {
            return false;
        };
        self.prefer(named.sentinel);
        true
    }

    fn prefer(&self, sentinel: usize) {
        if let crate::topology::Target::Sentinel(s) = &self.client {
            s.prefer(sentinel);
        }
    }

    fn session(&mut self, conn: &mut redis::Connection) -> End {
        let mut pubsub = conn.as_pubsub();
        // A new connection has only what it subscribes now.
        self.subs.lingering.clear();
        // Subscription replies must come within the I/O timeout; messages are read in slices.
        if pubsub.set_read_timeout(Some(self.io_timeout)).is_err() {
            return End::Broken;
        }
        for res in self.subs.wanted.clone() {
            if !self.subscribe(&mut pubsub, &res, true) {
                return End::Broken;
            }
            self.subs.activate(&res, &self.registry, self.index);
        }
        self.set_failing(false);
        let mut heard_at = Instant::now();
        loop {
            if self.master_switched() {
                return End::Broken;
            }
            loop {
                let change = match self.changes.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return End::Closed,
                };
                if !self.apply(&mut pubsub, change) {
                    return End::Broken;
                }
            }
            if !self.end_lingering(&mut pubsub) {
                return End::Broken;
            }
            // Lingering subscriptions are read on, so that their messages do not wait in the
            // socket for the next waiter.
            if self.subs.is_empty() {
                // Park on the channel of changes; the idle connection stays for the next waiter.
                match self.changes.recv() {
                    Ok(r) => {
                        if self.master_switched() {
                            self.apply_offline(r);
                            return End::Broken;
                        }
                        if !self.apply(&mut pubsub, r) {
                            return End::Broken;
                        }
                        continue;
                    }
                    Err(_) => return End::Closed,
                }
            }
            let probe = self.subs.probe();
            if let Some(res) = probe.filter(|_| heard_at.elapsed() >= PROBE_AFTER) {
                // A `SUBSCRIBE` of a channel already subscribed changes nothing, and is
                // answered: a probe that needs no permission beyond waiting's, where the ACL
                // may deny `PING`. Messages that come meanwhile are kept for `get_message`; an
                // answer late for an earlier probe answers this one: the node answers again.
                match pubsub.subscribe(channel(res)) {
                    Ok(_) => self.set_failing(false),
                    Err(e) if e.is_timeout() || crate::wire::interrupted(&e) => {
                        self.registry.set_failing(self.index, true, false)
                    }
                    Err(_) => return End::Broken,
                }
                heard_at = Instant::now();
            }
            if pubsub.set_read_timeout(Some(READ_SLICE)).is_err() {
                return End::Broken;
            }
            let message = pubsub.get_message();
            if pubsub.set_read_timeout(Some(self.io_timeout)).is_err() {
                return End::Broken;
            }
            match message {
                Ok(msg) => {
                    heard_at = Instant::now();
                    if self.registry.failing[self.index].load(Ordering::Relaxed) {
                        self.set_failing(false);
                    }
                    let payload: String = msg.get_payload().unwrap_or_default();
                    heard(&self.registry, self.index, msg.get_channel_name(), payload);
                }
                // A read cut short by a signal (`EINTR`: the process was stopped and continued,
                // say) left the connection as it was, as a timeout does: dropping it would lose
                // the releases already on their way (tests/fair.rs, the stopped waiter).
                Err(e) if e.is_timeout() || crate::wire::interrupted(&e) => {}
                Err(_) => return End::Broken,
            }
            self.registry.check_silence();
        }
    }
}

/// The longest message on a release channel that may be ours: a release's nonce or the
/// queue's news is far shorter. A longer one (a third party's) is not kept.
const MESSAGE_MAX: usize = 1024;

/// Node `index` published `payload` on `channel`: a release, or the queue's news.
pub(super) fn heard(registry: &Registry, index: usize, channel: &str, payload: String) {
    registry.heard_from(index);
    if payload.len() > MESSAGE_MAX {
        return;
    }
    if let Some(res) = released_key(channel) {
        match queue_news(&payload) {
            Some(news) => registry.queue(index, res, news),
            None => registry.released(index, res, payload),
        }
    }
}
