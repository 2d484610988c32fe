//! The client facade: the acquisition every kind goes through (`acquisition.rs`), and the
//! shorthands.

mod acquisition;
pub(crate) mod inspect;
pub(crate) mod lock;
pub(crate) mod request;
pub(crate) mod watchdog;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{Builder, Config};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kinds::SCRIPTS;
use crate::notify::Notifier;
use crate::telemetry::NodeStatus;
use inspect::{ForcedRelease, Inspection};
use lock::Lock;
use request::{AutoExtend, LockRequest};

use crate::rules::token::new_token;
use crate::sync::relock;
use crate::telemetry::{Event, NodeReader, Stats, Telemetry};
use crate::wire::Script;
use acquisition::Acquisition;
use watchdog::{Job, Watchdog};

/// What every connection loads: the kinds' scripts and the operator's.
static SCRIPT_SETS: [&[&Script]; 2] = [&SCRIPTS, &crate::client::inspect::SCRIPTS];

/// A listener registered with [`Redlock::on_event`]; dropping it removes the listener (and,
/// with the last one, stops the dispatcher thread).
pub struct EventListener {
    telemetry: Arc<Telemetry>,
    id: u64,
}

impl Drop for EventListener {
    fn drop(&mut self) {
        self.telemetry.remove(self.id);
    }
}

impl fmt::Debug for EventListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventListener")
            .field("id", &self.id)
            .finish()
    }
}

/// A Redlock client over N independent Redis nodes.
///
/// Cheap to clone (clones share the workers) and safe to use from many threads at once: their
/// requests to a node share one connection and are pipelined. The workers stop when the last
/// clone and the last [`Lock`] from it are dropped.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<Engine>,
    /// The extender thread, started with the first auto-extended lock.
    watchdog: Mutex<Option<Watchdog>>,
    /// The subscriber threads, started with the first waiter.
    notifier: Mutex<Option<Arc<Notifier>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Neither the extender nor the subscribers hold a strong reference between two
        // operations, so they are idle and stop at once; the workers stop with the engine.
        let limit = self.engine.config.io_timeout();
        if let Some(w) = relock(&self.watchdog).take() {
            w.stop(limit);
        }
        if let Some(n) = relock(&self.notifier).take()
            && let Some(mut n) = Arc::into_inner(n)
        {
            n.stop(limit);
        }
    }
}

impl Builder {
    /// Validates the configuration and starts the client: one worker per node, all connecting
    /// in parallel. Returns once each has connected or failed to (at most the connect timeout,
    /// 500 ms by default); unreachable nodes do not fail the build, their workers keep trying.
    pub fn build(self) -> Result<Redlock> {
        let (clients, config) = self.finish()?;
        Redlock::start(clients, config)
    }
}

impl Redlock {
    /// Starts configuring a client.
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn start(clients: Vec<crate::topology::Target>, config: Config) -> Result<Redlock> {
        let engine = Engine::start(clients, config, &SCRIPT_SETS)?;
        Ok(Redlock {
            inner: Arc::new(Inner {
                engine: Arc::new(engine),
                watchdog: Mutex::new(None),
                notifier: Mutex::new(None),
            }),
        })
    }

    /// Acquires a lock as `request` describes it: its kind, its patience, auto-extension and
    /// cancellation (see [`LockRequest`]).
    ///
    /// Errors: [`Error::NotAcquired`] (held by another owner through the last attempt),
    /// [`Error::NoQuorum`] (too few nodes answered), [`Error::Cancelled`] (the request's cancel
    /// fired first), [`Error::InvalidArgument`] (a bad part of the request: empty resource or
    /// owner, TTL zero, too small to leave any validity, or over 10 years, an `extend fraction`
    /// outside (0, 1) or a TTL too short to be extended in time). Every failed or cancelled
    /// attempt's undo is sent to every node that may hold its key before this returns. One
    /// exception: a reentrant hold is undone only where it was counted (elsewhere the undo would
    /// take away one of the owner's other holds), so a hold whose answer was lost (a dropped
    /// connection after the node ran it) or came after `node_timeout` stays until its TTL.
    pub fn acquire(&self, request: &LockRequest) -> Result<Lock> {
        Acquisition::plan(self, request, request.cancel.as_ref())?.run()
    }

    /// Counts a suspension of this host, as the clock guard does when it sees one: every lock
    /// this client holds is then reported lost. Only for tests, which cannot suspend the host
    /// they run on; not part of the API.
    #[doc(hidden)]
    pub fn simulate_host_suspension(&self) {
        self.inner.engine.board.simulate_suspension();
    }

    /// How many of this client's waiters are queued on `resource`, waiting for their turn or at
    /// the front. Only for tests, which wait for a waiter to be queued; not part of the API.
    #[doc(hidden)]
    pub fn queued_waiters(&self, resource: &str) -> usize {
        self.started_notifier().map_or(0, |n| n.queued(resource))
    }

    /// Acquires `resource` for `ttl`, retrying up to `retry_count` times after a random delay:
    /// `acquire(&LockRequest::new(resource, ttl))`.
    pub fn lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl))
    }

    /// Like [`lock`](Redlock::lock), with a single attempt.
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).once())
    }

    /// Runs `f` under an auto-extended lock on `resource` and releases it afterwards (also when
    /// `f` panics: the lock is dropped while unwinding, which releases it and stops extension).
    /// See [`with_request`](Redlock::with_request).
    pub fn with_lock<T>(
        &self,
        resource: &str,
        ttl: Duration,
        f: impl FnOnce(&Lock) -> T,
    ) -> Result<T> {
        self.with_request(&LockRequest::new(resource, ttl), f)
    }

    /// Runs `f` under the lock `request` describes, auto-extended (with the request's settings,
    /// or the defaults if it has none), and releases it afterwards, also when `f` panics.
    ///
    /// `f` gets the lock, to check [`Lock::is_held`] or select on [`Lock::lost`] during long
    /// work. Returns `f`'s value, or [`Error::Lost`] if the lock was lost while `f` ran (the
    /// work may have overlapped another holder's); acquisition errors as for
    /// [`acquire`](Redlock::acquire).
    pub fn with_request<T>(&self, request: &LockRequest, f: impl FnOnce(&Lock) -> T) -> Result<T> {
        let lock = if request.auto_extend.is_some() {
            self.acquire(request)?
        } else {
            self.acquire(&request.clone().auto_extend(AutoExtend::new()))?
        };
        let value = f(&lock);
        if lock.is_lost() {
            return Err(lock.shared().lost_error(None));
        }
        match lock.release() {
            Ok(()) => Ok(value),
            Err(e @ Error::Lost { .. }) => Err(e),
            // Too few nodes answered the release: the keys expire with their TTL, the work
            // itself was done under the lock.
            Err(_) => Ok(value),
        }
    }

    /// Hands `lock` to the extender thread, starting it if this is the first.
    fn watch(
        &self,
        lock: &Lock,
        ttl: Duration,
        every: Duration,
        max_hold: Option<Duration>,
    ) -> Result<()> {
        let mut watchdog = relock(&self.inner.watchdog);
        if watchdog.is_none() {
            *watchdog = Some(Watchdog::spawn(Arc::downgrade(&self.inner.engine)).map_err(
                |source| Error::Io {
                    context: "starting the lock extender thread".into(),
                    source,
                },
            )?);
        }
        if let Some(w) = watchdog.as_ref() {
            w.add(Job {
                lock: Arc::clone(lock.shared()),
                ttl,
                every,
                hold_until: max_hold.and_then(|d| Instant::now().checked_add(d)),
                capped: false,
            });
        }
        Ok(())
    }

    /// A snapshot of this client's counters and latency histograms, and each node's status:
    /// cheap (atomic reads), never waits for the nodes. [`Stats::prometheus`] writes it in the
    /// Prometheus text format. See the `telemetry` module's source documentation for what is
    /// counted and under which names.
    pub fn stats(&self) -> Stats {
        let engine = &self.inner.engine;
        engine.telemetry.stats(engine.node_status())
    }

    /// Calls `listener` with each of this client's events (acquired, refused, lost, a node
    /// disconnected, ...; see [`EventKind`](crate::EventKind)) until the returned handle is dropped. Events are
    /// delivered in order on a dispatcher thread of the client's own, never on the thread that
    /// made them, through a queue of [`EVENT_QUEUE`](crate::EVENT_QUEUE): a slow listener costs
    /// dropped events ([`Stats::events_dropped`]), never a stalled extension. A listener may call
    /// into the library; a panic in it is caught. With no listener, events cost nothing. Once
    /// the returned handle is dropped, its listener is not running and is not called again
    /// (the drop waits for a call in flight), unless it is dropped by a listener itself.
    pub fn on_event(
        &self,
        listener: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<EventListener> {
        let engine = Arc::downgrade(&self.inner.engine);
        let nodes: NodeReader = Box::new(move || engine.upgrade().map(|e| e.node_status()));
        let telemetry = Arc::clone(&self.inner.engine.telemetry);
        let id = telemetry
            .add(Arc::new(listener), nodes)
            .map_err(|source| Error::Io {
                context: "starting the event dispatcher thread".into(),
                source,
            })?;
        Ok(EventListener { telemetry, id })
    }

    /// The engine: the node workers and the client's settings.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }

    /// The subscriber threads, if started.
    fn started_notifier(&self) -> Option<Arc<Notifier>> {
        relock(&self.inner.notifier).as_ref().map(Arc::clone)
    }

    /// The subscriber threads, started on first use.
    pub(crate) fn notifier(&self) -> Result<Arc<Notifier>> {
        let mut notifier = relock(&self.inner.notifier);
        if let Some(n) = notifier.as_ref() {
            return Ok(Arc::clone(n));
        }
        let engine = &self.inner.engine;
        let weak = Arc::downgrade(engine);
        let n = Arc::new(
            Notifier::start(
                &engine.clients,
                engine.watches(),
                engine.config.connect_timeout(),
                engine.config.io_timeout(),
                // A turn message follows a release within a round trip or two; the queue's
                // node is then slower than a node may be.
                2 * engine.config.node_timeout + Duration::from_millis(100),
                Box::new(move |i| weak.upgrade().is_some_and(|e| e.stalled(i))),
            )
            .map_err(|source| Error::Io {
                context: "starting the release-notification threads".into(),
                source,
            })?,
        );
        *notifier = Some(Arc::clone(&n));
        Ok(n)
    }

    /// A fenced lock, retrying like [`lock`](Redlock::lock):
    /// `acquire(&LockRequest::new(resource, ttl).fenced())`. See [`LockRequest::fenced`] and
    /// [`Lock::fence`].
    pub fn lock_fenced(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).fenced())
    }

    /// The read side of a read-write lock on `resource`, retrying like [`lock`](Redlock::lock):
    /// `acquire(&LockRequest::new(resource, ttl).read())`. Any number of readers hold it at
    /// once while no writer does; see [`LockRequest::read`].
    pub fn read_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).read())
    }

    /// The write side of a read-write lock on `resource`, retrying like
    /// [`lock`](Redlock::lock): `acquire(&LockRequest::new(resource, ttl).write())`. Excludes
    /// readers and other writers; see [`LockRequest::write`].
    pub fn write_lock(&self, resource: &str, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).write())
    }

    /// One of `permits` permits of a counting semaphore on `resource`, retrying like
    /// [`lock`](Redlock::lock): `acquire(&LockRequest::new(resource, ttl).semaphore(permits))`.
    /// [`Lock::permit`] says which slot it holds; see [`LockRequest::semaphore`].
    pub fn semaphore(&self, resource: &str, permits: u32, ttl: Duration) -> Result<Lock> {
        self.acquire(&LockRequest::new(resource, ttl).semaphore(permits))
    }

    /// A fresh random owner name for [`LockRequest::reentrant`].
    pub fn new_owner() -> Result<String> {
        new_token().map(|t| t.to_string())
    }

    /// What each node's worker last saw of its node.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        self.inner.engine.node_status()
    }

    /// Reads `resource` on every node: what its key holds (a token, reentrant owners, another
    /// type or nothing), its remaining TTL and the fence counter, plus whether a quorum holds it
    /// and by which token.
    ///
    /// Read-only, and it never fails because of the nodes: a node that is down, times out or
    /// answers with an error (a `NOPERM` for a user without read access to the keys) is
    /// reported in its own entry. Waits for every node up to `node_timeout`. Errors only for an
    /// empty resource name ([`Error::InvalidArgument`]).
    ///
    /// Each node is read at a slightly different moment: a lock being acquired or released
    /// meanwhile may show on some nodes only.
    pub fn inspect(&self, resource: &str) -> Result<Inspection> {
        inspect::inspect(&self.inner.engine, resource)
    }

    /// **An operator's tool**: deletes the lock on `resource` on every node, while the key
    /// still holds `token` (a plain or fenced lock's token, or a reentrant lock's owner) when one
    /// is given, or whatever it holds when `token` is `None`. Each deletion is announced on the
    /// resource's release channel, so waiters try at once.
    ///
    /// The danger: the holder is not told. Its lock is gone while it may still be working, and
    /// the next acquirer overlaps it; its auto-extension finds the lock lost (and reports it
    /// through [`Lock::lost`](crate::Lock::lost) and `on_lost`) at its next extension, not
    /// before. Use it for a lock whose holder is known dead, and pass the token read with
    /// [`inspect`](Redlock::inspect): a holder that took the lock after you looked is then left
    /// alone. The fence counter is never touched, so fencing tokens stay monotonic.
    ///
    /// Reports every node (waiting for each up to `node_timeout`);
    /// [`ForcedRelease::on_quorum`] says whether enough of them confirmed. Errors only for an
    /// empty resource or token ([`Error::InvalidArgument`]).
    pub fn force_release(&self, resource: &str, token: Option<&str>) -> Result<ForcedRelease> {
        inspect::force_release(&self.inner.engine, resource, token)
    }

    /// The settings the client runs with.
    pub fn settings(&self) -> &Config {
        &self.inner.engine.config
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let engine = &self.inner.engine;
        let nodes: Vec<&str> = engine.addresses().collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("config", &engine.config)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redlock_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Redlock>();
        fn send<T: Send>() {}
        send::<Lock>();
    }

    #[test]
    fn builder_rejects_bad_configuration() {
        let bad = [
            Redlock::builder().build(),
            Redlock::builder().node("").build(),
            Redlock::builder().node("not a url").build(),
            Redlock::builder().node("http://127.0.0.1:1").build(),
            Redlock::builder()
                .nodes(["redis://127.0.0.1:1", "redis://127.0.0.1:1/"])
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(1.0)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(-0.1)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .drift_factor(f64::NAN)
                .build(),
            Redlock::builder()
                .node("redis://127.0.0.1:1")
                .node_timeout(Duration::ZERO)
                .build(),
        ];
        for (i, result) in bad.into_iter().enumerate() {
            match result {
                Err(Error::InvalidArgument { message }) => assert!(!message.is_empty(), "case {i}"),
                other => panic!("case {i}: expected InvalidArgument, got {other:?}"),
            }
        }
    }

    /// The first argument of every command a script runs on a key (or publishes on) must be a
    /// declared key: `KEYS[...]`, or a name bound to one (`for _, k in ipairs(KEYS)`,
    /// `local k = KEYS[i]`, a helper's parameter). Proxies and some servers (Dragonfly, managed
    /// services) refuse scripts that touch undeclared keys, and a cluster node can only run a
    /// script whose keys it can see. Returns the offending calls.
    fn undeclared(source: &str) -> Vec<String> {
        const ON_KEYS: &[&str] = &[
            "set",
            "get",
            "del",
            "incr",
            "pexpire",
            "pexpireat",
            "pttl",
            "type",
            "exists",
            "hset",
            "hget",
            "hexists",
            "hincrby",
            "hdel",
            "hlen",
            "hgetall",
            "zadd",
            "zrem",
            "zrange",
            "zcard",
            "zscore",
            "zremrangebyscore",
            "publish",
        ];
        let mut names: Vec<String> = Vec::new();
        for line in source.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("for ")
                && let Some((_, rest)) = rest.split_once(", ")
                && let Some((name, range)) = rest.split_once(" in ")
                && range.starts_with("ipairs(KEYS)")
            {
                names.push(name.trim().to_owned());
            }
            if let Some(rest) = line.strip_prefix("local ")
                && let Some((name, value)) = rest.split_once(" = ")
                && value.starts_with("KEYS[")
            {
                names.push(name.trim().to_owned());
            }
            if let Some(at) = line.find("function ")
                && let Some(open) = line[at..].find('(')
                && let Some(close) = line[at..].find(')')
            {
                let params = &line[at + open + 1..at + close];
                names.extend(params.split(',').map(|p| p.trim().to_owned()));
            }
        }
        let mut bad = Vec::new();
        for call in source.split("redis.").skip(1) {
            let Some(args) = call
                .strip_prefix("call(")
                .or_else(|| call.strip_prefix("pcall("))
            else {
                continue;
            };
            let Some((command, rest)) = args.split_once(',') else {
                continue;
            };
            let command = command.trim().trim_matches('"').to_lowercase();
            if !ON_KEYS.contains(&command.as_str()) {
                continue;
            }
            let first = rest.split([',', ')']).next().unwrap_or_default().trim();
            let declared = (first.starts_with("KEYS[") && first.ends_with(']'))
                || names.iter().any(|n| n == first);
            if !declared {
                bad.push(format!("{command}({first}…)"));
            }
        }
        bad
    }

    #[test]
    fn every_script_declares_every_key_it_touches() {
        let mut checked = 0;
        for set in SCRIPT_SETS {
            for script in set.iter() {
                let bad = undeclared(script.source);
                assert!(bad.is_empty(), "{bad:?} in:\n{}", script.source);
                checked += 1;
            }
        }
        assert!(checked >= 19, "{checked} scripts");
        // The check can fail: a key built inside the script, a channel named in it.
        let built = r#"redis.call("del", "redlock:x:" .. KEYS[1])"#;
        assert_eq!(undeclared(built), ["del(\"redlock:x:\" .. KEYS[1]…)"]);
        let published = r#"redis.call("publish", "redlock:released:" .. KEYS[1], ARGV[2])"#;
        assert_eq!(undeclared(published).len(), 1);
        let fine = "for _, k in ipairs(KEYS) do\n    redis.call(\"del\", k)\nend";
        assert!(undeclared(fine).is_empty());
    }

    #[test]
    fn resource_names_are_capped_in_bytes() {
        const CAP: usize = crate::MAX_RESOURCE_NAME;
        let ttl = Duration::from_secs(10);
        let at_cap = "é".repeat(CAP / 2);
        let over = format!("{at_cap}r");
        assert!(LockRequest::new(&at_cap, ttl).check().is_ok());
        assert!(LockRequest::many([&at_cap, "b"], ttl).check().is_ok());
        let says = |e: Error| {
            let text = e.to_string();
            assert!(
                matches!(e, Error::InvalidArgument { .. })
                    && text.contains(&format!("{} bytes", CAP + 1))
                    && text.contains(&CAP.to_string()),
                "{text}"
            );
        };
        says(LockRequest::new(&over, ttl).check().unwrap_err());
        says(LockRequest::new(&over, ttl).fenced().check().unwrap_err());
        says(LockRequest::many(["b", &over], ttl).check().unwrap_err());
        let rl = Redlock::builder()
            .node("redis://127.0.0.1:1")
            .build()
            .unwrap();
        says(rl.try_lock(&over, ttl).unwrap_err());
        says(rl.inspect(&over).unwrap_err());
        says(rl.force_release(&over, None).unwrap_err());
        // Twenty megabytes: refused, and not quoted.
        let huge = "r".repeat(20 << 20);
        let text = rl.try_lock(&huge, ttl).unwrap_err().to_string();
        assert!(text.len() < 300, "{} bytes of error", text.len());
    }

    #[test]
    fn bad_url_errors_hide_the_password() {
        let err = Redlock::builder()
            .node("redis://u:hunter2@host:notaport")
            .build()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("node 0"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
