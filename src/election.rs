//! Leader election: campaign, observe, resign, with a term that fences.
//!
//! The recipe, in the manner of etcd's `concurrency.Election` and client-go's `leaderelection`,
//! built once on the lock kinds: a leadership is a fenced, auto-extended lock on the key
//! `redlock:election:<name>` (the kind in `kinds/leader.rs`), whose write-back also records
//! who leads (a hash with no TTL beside it), unconfirmed. Once the campaign has decided that it
//! leads, it confirms the record, which announces the takeover on the lock's release channel.
//! The term is the lock's fencing token.
//!
//! # Safety
//! **At most one leader with validity left at any instant.** A leadership is a Redlock lock
//! and [`Leadership::is_leader`] and [`Leadership::validity`] are the lock's validity: a
//! candidate is granted the leadership only by `SET NX` on a quorum, and a leader's validity
//! ends before its keys can expire on a quorum (TTL minus the time its acquisition or last
//! extension took minus the drift allowance). So the lock's assumptions carry over unchanged:
//! clocks that run at about the same rate (the drift factor), nodes that lose their data stay
//! out of quorums for longer than the TTL (a delayed restart, or `restart_grace`), and our own
//! host is not suspended, or the clock guard sees it (then the leadership is reported lost).
//!
//! **Terms strictly increase from leader to leader**, and a resigned or lost leader's term is
//! never handed out again: the term is the fencing token of `kinds/fenced.rs`, whose argument
//! (and assumptions: client clocks within ε of true time, a restart delay or grace above
//! `2 (ε + τ + ν)`, nothing else writing the counter) holds as written, because the leader's
//! write-back runs the fenced write-back's checks before anything else and only adds writes to
//! a key the argument does not read (the record; the confirmation and the extensions write
//! nothing else either).
//!
//! A leader whose process is stopped (SIGSTOP, a long GC) learns nothing until it resumes; then
//! its validity is found gone (the monotonic clock moved on, or the clock guard saw the
//! suspension), and work it still does under the old term is refused by a store that checks
//! terms, as a fenced lock's is.
//!
//! # What readers are told
//! [`Redlock::leader`] reads every node (up to `node_timeout`), and [`Observer`] and
//! [`Election::on_new_leader`] report what such reads find. Each node tells the token its lock
//! key holds and its record: the token, identity and term written by that token's write-back,
//! and whether the record is confirmed. A read says:
//!
//! 1. **This leader**, when a quorum of nodes hold one token's lock key (with a TTL left) and
//!    a confirmed record of that token.
//! 2. **Nobody**, when no token can be held on a quorum: for every token, the nodes whose lock
//!    key holds it, plus the nodes that did not answer, plus the nodes in this client's
//!    [`restart_grace`](crate::Builder::restart_grace), are fewer than a quorum. (And at least
//!    a quorum answered.)
//! 3. **Cannot tell** otherwise: [`Error::NoQuorum`] with [`Operation::Read`]; `redlock leader`
//!    exits 69 and the C, Python and Go forms report their no-quorum error. Observers report
//!    nothing then and read again.
//!
//! **Never a candidate whose campaign failed.** A record is confirmed only by a command that
//! carries its token: the campaign's confirmation (`CONFIRM_LEADER`), sent once the lock has
//! been granted (the acquire's and the write-back's quorums and the validity check passed, our
//! host was not suspended): nothing after that fails, and the campaign returns the leadership
//! whatever the confirmation's replies say; or an extension of the leadership it returned
//! (`EXTEND_LEADER`). A campaign that fails never sends either, and the record its
//! write-back left on nodes its undo did not reach stays unconfirmed until a later term's
//! write-back replaces it; the write-back of a new token always writes its record unconfirmed.
//! So reading 1 names only a leadership a campaign returned. Its term is the term that campaign
//! returned (its write-back wrote it), and it may be reported a little after the leader's
//! validity ended, until its keys expire on a quorum, as for any lock.
//!
//! **Never "nobody" while a leader has validity left** through the read. Such a leader's lock
//! key is live on a quorum of nodes (its validity ends before its keys can expire on a quorum),
//! except on nodes that lost their data since: after a delayed restart they are still down
//! (silent), and with `restart_grace` set in the reader (as the lock's assumptions ask of every
//! client) they are in its grace. Either way they count toward the leader's token in reading 2,
//! so it is not reading 2. One fault falls outside: a node whose wall clock jumped forward expires keys early, and a reader
//! samples no clocks (the other clients' clock quarantine keeps the leader exclusive); such a
//! read may say nobody while the leader has validity left.
//!
//! **What this costs.** Reads cannot tell, and `leader` fails with `NoQuorum`, while a node of a
//! leader that holds a bare quorum hangs or is cut off from the reader, or restarted within the
//! reader's grace; between a campaign's write-back and its confirmation (one round trip); and
//! while a failed campaign's lock is live on a quorum (its TTL at most). A confirmation lost on
//! some nodes makes the read under-report (cannot tell, never a wrong name) until the leader's
//! next extension confirms the record there, a third of the TTL later. A node the write-back
//! did not reach holds the leader's lock key without its record: it counts toward "cannot
//! tell", never toward the leader.
//!
//! # What is best effort
//! [`Leader::transitions`] counts terms begun (counted on a node when its record is first
//! confirmed there), kept per node in the record with the fence counter's durability: a node restarted without persistence starts counting again, and the
//! count reported is the largest among the nodes that answered. `since` is the node's clock when
//! the term was written there. Neither affects exclusion.
//!
//! # Identities
//! An identity names a candidate for observers (1 to [`MAX_IDENTITY`] bytes of UTF-8). Two
//! live candidates with one identity are the caller's mistake but not a safety problem: each
//! campaign has its own random token, so they still exclude each other; observers just cannot
//! tell which of the two leads.
//!
//! # Extensions
//! A leadership is extended for as long as it is held, every third of the TTL: the client's
//! [`max_extensions`](crate::Builder::max_extensions) does not apply to it (a leadership must
//! not end silently after a count of extensions).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam_channel::Receiver;

use crate::cancel::Cancel;
use crate::client::Redlock;
use crate::client::lock::Lock;
use crate::client::request::{AutoExtend, LockRequest};
use crate::config::MAX_TTL;
use crate::error::{Error, Result};
use crate::kinds::leader::{self, Leader as LeaderKind, election_key};
use crate::notify::{Subscription, Wake};
use crate::rules::quorum::retry_delay;

mod read;

use read::read_leader;

/// Longest identity, in bytes.
pub const MAX_IDENTITY: usize = 256;

/// Longest election name, in bytes.
pub const MAX_ELECTION_NAME: usize = 1024;

/// How often an observer reads the leader when no notification comes, by default.
pub const DEFAULT_OBSERVE_POLL: Duration = Duration::from_secs(1);

type StartedCallback = Box<dyn Fn(&Leadership) + Send + Sync>;
type StoppedCallback = Box<dyn Fn(u64) + Send + Sync>;
type NewLeaderCallback = Box<dyn Fn(Option<&Leader>) + Send + Sync>;

#[derive(Default)]
struct Callbacks {
    started: Option<StartedCallback>,
    stopped: Option<Arc<StoppedCallback>>,
}

/// One candidate in the election `name`, made by [`Redlock::election`].
///
/// ```no_run
/// # use std::time::Duration;
/// # let rl = redquorum::Redlock::builder().node("redis://127.0.0.1:7000").build()?;
/// let election = rl.election("scheduler", "host-a", Duration::from_secs(10))?;
/// let leadership = election.campaign(None)?; // blocks until this process leads
/// println!("leading in term {}", leadership.term());
/// // ... work, passing leadership.term() to the store; stop when leadership.lost() fires ...
/// leadership.resign()?;
/// # Ok::<(), redquorum::Error>(())
/// ```
pub struct Election {
    client: Redlock,
    name: Arc<str>,
    key: Arc<str>,
    identity: Arc<str>,
    ttl: Duration,
    callbacks: Callbacks,
    /// The thread that calls `on_new_leader`, and what stops it.
    watcher: Option<(Cancel, JoinHandle<()>)>,
}

/// Who leads an election, as a quorum of its nodes tells.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The leader's identity.
    pub identity: String,
    /// Its term: the fencing token of its leadership.
    pub term: u64,
    /// When its term began (the clock of the nodes that recorded it).
    pub since: SystemTime,
    /// Terms begun in this election so far, this one included (best effort: see the module
    /// docs).
    pub transitions: u64,
    /// How long until the leadership expires on a quorum of nodes, unless it is extended.
    pub ttl: Duration,
}

impl Leader {
    /// How long it has led, by our clock; zero when the nodes' clock is ahead of ours.
    pub fn age(&self) -> Duration {
        SystemTime::now()
            .duration_since(self.since)
            .unwrap_or_default()
    }
}

impl Redlock {
    /// A candidate named `identity` in the election `name`, whose leaderships last `ttl` and
    /// are extended while held. Nothing is sent yet; [`Election::campaign`] runs.
    ///
    /// [`Error::InvalidArgument`] for an empty name or one over [`MAX_ELECTION_NAME`] bytes,
    /// an empty identity or one over [`MAX_IDENTITY`] bytes, or a TTL the client cannot use
    /// (zero, over 10 years, too short to leave validity or to be extended in time).
    pub fn election(&self, name: &str, identity: &str, ttl: Duration) -> Result<Election> {
        check_name(name)?;
        if identity.is_empty() {
            return Err(Error::invalid(
                "identity is empty: name the candidate (a host name, a pod name)",
            ));
        }
        if identity.len() > MAX_IDENTITY {
            return Err(Error::invalid(format!(
                "identity is {} bytes long; at most {MAX_IDENTITY} are allowed",
                identity.len()
            )));
        }
        let config = self.settings();
        let ttl_ms = config.ttl_ms(ttl)?;
        let every = ttl.mul_f64(crate::client::request::DEFAULT_EXTEND_FRACTION);
        if every.is_zero() || every + config.node_timeout >= ttl {
            return Err(Error::invalid(format!(
                "ttl of {ttl:?} is too short for a leadership: it is extended every third of \
                 it, and an extension ({:?} at most) must fit in that",
                config.node_timeout
            )));
        }
        Ok(Election {
            client: self.clone(),
            name: name.into(),
            key: election_key(name).into(),
            identity: identity.into(),
            ttl: Duration::from_millis(ttl_ms),
            callbacks: Callbacks::default(),
            watcher: None,
        })
    }

    /// Who leads the election `name` now, from any process, candidate or not: only a leader
    /// whose campaign returned its leadership, and `None` only when no leadership can be held
    /// on a quorum of nodes (see "What readers are told" in the module docs).
    /// [`Error::NoQuorum`] when the nodes cannot tell: too few answered, a node of a leader
    /// that holds a bare quorum hangs or restarted within `restart_grace`, a new leader is
    /// being confirmed, or a failed campaign's lock is live on a quorum (until its TTL).
    pub fn leader(&self, name: &str) -> Result<Option<Leader>> {
        check_name(name)?;
        read_leader(self, &election_key(name).into())
    }

    /// Follows the election `name`: an iterator of its leader changes (see [`Observer`]).
    pub fn observe(&self, name: &str, cancel: Option<&Cancel>) -> Result<Observer> {
        check_name(name)?;
        Ok(Observer::new(
            self.clone(),
            election_key(name).into(),
            cancel,
        ))
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("election name is empty"));
    }
    if name.len() > MAX_ELECTION_NAME {
        return Err(Error::invalid(format!(
            "election name is {} bytes long; at most {MAX_ELECTION_NAME} are allowed",
            name.len()
        )));
    }
    Ok(())
}

impl Election {
    /// Blocks until this candidate leads, woken by releases and takeovers, or until `cancel`
    /// fires ([`Error::Cancelled`], with nothing left on any node). The leadership is extended
    /// while it is held.
    pub fn campaign(&self, cancel: Option<&Cancel>) -> Result<Leadership> {
        self.campaign_for(MAX_TTL, cancel)
    }

    /// [`campaign`](Election::campaign), giving up after `wait` with [`Error::NotAcquired`]
    /// (another candidate leads) or [`Error::NoQuorum`]. `Duration::ZERO`: one attempt.
    pub fn campaign_for(&self, wait: Duration, cancel: Option<&Cancel>) -> Result<Leadership> {
        let mut request = LockRequest::new(&*self.key, self.ttl)
            .auto_extend(AutoExtend::new().max_extensions(u32::MAX));
        request.kind = Ok(Arc::new(LeaderKind::new(
            Arc::clone(&self.key),
            Arc::clone(&self.identity),
        )));
        request = if wait.is_zero() {
            request.once()
        } else {
            request.wait(wait)
        };
        if let Some(c) = cancel {
            request = request.cancel(c);
        }
        let lock = self.client.acquire(&request).map_err(|e| self.renamed(e))?;
        // Decided: this candidate leads, and the campaign returns its leadership whatever the
        // confirmation's replies say (see "What readers are told"). Waiting for a quorum of
        // them (at most `node_timeout`) lets a read made after we return name us.
        let token: Arc<str> = lock.token().into();
        let _ = self
            .client
            .engine()
            .quorum_call(&leader::confirm(&self.key), &self.key, &token);
        let term = lock.fence().unwrap_or(0);
        let leadership = Leadership {
            lock,
            name: Arc::clone(&self.name),
            identity: Arc::clone(&self.identity),
            term,
            stopped: Arc::new(AtomicBool::new(false)),
            on_stopped: self.callbacks.stopped.clone(),
        };
        if let Some(cb) = &leadership.on_stopped {
            let cb = Arc::clone(cb);
            let stopped = Arc::clone(&leadership.stopped);
            leadership.lock.on_lost(move |_| {
                if !stopped.swap(true, Ordering::SeqCst) {
                    cb(term);
                }
            });
        }
        if let Some(cb) = &self.callbacks.started {
            cb(&leadership);
        }
        Ok(leadership)
    }

    /// Errors name the election, not its key.
    fn renamed(&self, e: Error) -> Error {
        let name = format!("election {}", self.name);
        match e {
            Error::NotAcquired {
                attempts, report, ..
            } => Error::NotAcquired {
                resource: name,
                attempts,
                report,
            },
            Error::NoQuorum {
                operation,
                attempts,
                report,
                ..
            } => Error::NoQuorum {
                resource: name,
                operation,
                attempts,
                report,
            },
            Error::Cancelled { .. } => Error::Cancelled { resource: name },
            other => other,
        }
    }

    /// Who leads now (see [`Redlock::leader`]).
    pub fn leader(&self) -> Result<Option<Leader>> {
        read_leader(&self.client, &self.key)
    }

    /// Follows this election's leader changes (see [`Observer`]).
    pub fn observe(&self, cancel: Option<&Cancel>) -> Observer {
        Observer::new(self.client.clone(), Arc::clone(&self.key), cancel)
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The TTL of its leaderships.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Calls `f` on the campaigning thread each time this candidate becomes leader, before
    /// [`campaign`](Election::campaign) returns.
    pub fn on_started_leading(mut self, f: impl Fn(&Leadership) + Send + Sync + 'static) -> Self {
        self.callbacks.started = Some(Box::new(f));
        self
    }

    /// Calls `f` with the term once each leadership of this candidate ends: resigned, dropped,
    /// or found lost (then on the client's extender thread: keep it short).
    pub fn on_stopped_leading(mut self, f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.callbacks.stopped = Some(Arc::new(Box::new(f)));
        self
    }

    /// Calls `f` on a thread of its own each time the election's leader changes (`None`: no
    /// one leads), from now until this `Election` is dropped: an [`Observer`] runs it, so `f`
    /// hears only of leaders whose campaign returned, and of nobody only when no leadership can
    /// be held on a quorum. The first call is the state that thread first reads, after this
    /// returns: a leader that campaigned meanwhile can be that first state. To know the state
    /// before a campaign of your own, wait for the first call before campaigning.
    pub fn on_new_leader(
        mut self,
        f: impl Fn(Option<&Leader>) + Send + Sync + 'static,
    ) -> Result<Self> {
        self.stop_watcher();
        let f: NewLeaderCallback = Box::new(f);
        let cancel = Cancel::new();
        let mut observer = self.observe(Some(&cancel));
        let thread = std::thread::Builder::new()
            .name("redlock-election".into())
            .spawn(move || {
                for change in &mut observer {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        f(change.as_ref())
                    }));
                }
            })
            .map_err(|source| Error::Io {
                context: "starting the election's watcher thread".into(),
                source,
            })?;
        self.watcher = Some((cancel, thread));
        Ok(self)
    }

    fn stop_watcher(&mut self) {
        if let Some((cancel, thread)) = self.watcher.take() {
            cancel.cancel();
            let _ = thread.join();
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        self.stop_watcher();
    }
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// This process's leadership, from [`Election::campaign`]. It is extended while held; dropping
/// it resigns (best effort, without waiting for the nodes).
pub struct Leadership {
    lock: Lock,
    name: Arc<str>,
    identity: Arc<str>,
    term: u64,
    stopped: Arc<AtomicBool>,
    on_stopped: Option<Arc<StoppedCallback>>,
}

impl Leadership {
    /// The term: greater than every earlier leader's, never reused. Pass it with every write
    /// to a store that refuses writes with a lower term than it has seen.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This leader's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Time left before another candidate could be granted the leadership; zero once resigned
    /// or lost.
    pub fn validity(&self) -> Duration {
        self.lock.validity()
    }

    /// Whether this process still leads: not resigned, not lost, validity left.
    pub fn is_leader(&self) -> bool {
        self.lock.is_held()
    }

    /// Whether the leadership was found lost (see [`Lock::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.lock.is_lost()
    }

    /// A channel that disconnects when the leadership ends, lost or resigned (see
    /// [`Lock::lost`]).
    pub fn lost(&self) -> Receiver<()> {
        self.lock.lost()
    }

    /// Runs `callback` once if the leadership is found lost (see [`Lock::on_lost`]).
    pub fn on_lost(&self, callback: impl FnOnce() + Send + 'static) {
        self.lock.on_lost(move |_| callback());
    }

    /// Ends the leadership at once: waiting candidates are woken by the release. Ok when a
    /// quorum let it go; [`Error::Lost`] when it was no longer ours (it had expired, or was
    /// found lost); [`Error::NoQuorum`] when too few nodes answered (their keys expire with the
    /// TTL). Resigning again does nothing.
    pub fn resign(&self) -> Result<()> {
        let result = self.lock.release();
        self.stopped();
        result.map_err(|e| match e {
            Error::Lost { report, .. } => Error::Lost {
                resource: format!("election {}", self.name),
                report,
            },
            other => other,
        })
    }

    /// The lock under the leadership.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    fn stopped(&self) {
        if let Some(cb) = &self.on_stopped
            && !self.stopped.swap(true, Ordering::SeqCst)
        {
            cb(self.term);
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stopped();
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("term", &self.term)
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}

/// An iterator of an election's leader changes: each item is who leads from then on (`None`:
/// no one). The first item is the state the first `next` reads; then `next` blocks until the
/// leader changes, woken by the announcements of releases and takeovers, and otherwise reading
/// the nodes every [`poll`](Observer::poll) (1 s by default) and when the leader's TTL runs out
/// (an expiry is announced by no one). Ends (`None`) once its cancel fires.
///
/// A read that cannot tell (see [`Redlock::leader`]) yields nothing: the observer keeps the
/// last state it reported and reads again after the client's `retry_delay ± retry_jitter`
/// (or its poll, if sooner). So it names only leaders whose campaign returned
/// their leadership, and reports `None` only when no leadership can be held on a quorum.
pub struct Observer {
    client: Redlock,
    key: Arc<str>,
    cancel: Option<Cancel>,
    poll: Duration,
    /// The last state reported: the term, or 0 for no leader; `None` before the first.
    last: Option<u64>,
    subscription: Option<Subscription>,
}

impl Observer {
    fn new(client: Redlock, key: Arc<str>, cancel: Option<&Cancel>) -> Observer {
        Observer {
            client,
            key,
            cancel: cancel.cloned(),
            poll: DEFAULT_OBSERVE_POLL,
            last: None,
            subscription: None,
        }
    }

    /// Reads the nodes at least this often (at least 1 ms).
    pub fn poll(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }
}

impl Iterator for Observer {
    type Item = Option<Leader>;

    fn next(&mut self) -> Option<Option<Leader>> {
        loop {
            if self.cancelled() {
                return None;
            }
            if self.subscription.is_none()
                && let Ok(notifier) = self.client.notifier()
            {
                // Subscribed before the read, so that a change after it is heard.
                let config = self.client.settings();
                self.subscription = Some(notifier.subscribe(
                    std::slice::from_ref(&self.key),
                    config.node_timeout,
                    true,
                    false,
                    self.cancel.as_ref(),
                ));
            }
            let mut pause = self.poll;
            match read_leader(&self.client, &self.key) {
                Ok(state) => {
                    let term = state.as_ref().map_or(0, |l| l.term);
                    if let Some(l) = &state {
                        pause = pause.min(l.ttl + Duration::from_millis(1));
                    }
                    if self.last != Some(term) {
                        self.last = Some(term);
                        return Some(state);
                    }
                }
                // The state that could not be told may end unannounced (a key expiring, a
                // node coming back), so read again as a lock retries, not a poll later.
                Err(_) => {
                    let config = self.client.settings();
                    let again =
                        retry_delay(config.retry_delay, config.retry_jitter, rand::random());
                    pause = pause.min(again.max(Duration::from_millis(1)));
                }
            }
            let wake = match &self.subscription {
                Some(sub) => sub.wait(pause, self.cancel.as_ref()),
                None => match &self.cancel {
                    Some(c) => match c.fired().recv_timeout(pause) {
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => Wake::TimedOut,
                        _ => Wake::Cancelled,
                    },
                    None => {
                        std::thread::sleep(pause);
                        Wake::TimedOut
                    }
                },
            };
            if wake == Wake::Cancelled {
                return None;
            }
        }
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("key", &self.key)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}
