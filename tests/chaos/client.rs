//! Child mode: one client process. Its threads contend for the resources through the public
//! API, do a non-atomic read-modify-write of the resource's counter inside each lock, and log
//! every call and every hold for the checker; probe threads log when the process, or one of
//! the cores it runs on, did not get to run, and when a change of its memory map waited in the
//! kernel while neither the probe nor the process ran.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use redquorum::{Cancel, Error, Lock, LockRequest, Redlock};

use crate::checker::{lock_bound_ms, wait_bound_ms};
use crate::election::ELECTION_THREADS;
use crate::fenced::FENCED_THREADS;
use crate::keys::{KeyKind, Probe};
use crate::kinds::{RW_THREADS, SEM_THREADS};
use crate::schedule::quick_phase;
use crate::{
    CLOCK_QUARANTINE, Flags, MIN_VALIDITY_TO_WRITE, MS, NODE_TIMEOUT, RESOURCES, RETRY_COUNT,
    RETRY_DELAY, RETRY_JITTER, Rng, THREADS, TTL_MAX_MS, TTL_MIN_MS, WAIT_MS, counter_key, now_ns,
    resource,
};

pub struct ChildArgs {
    pub id: usize,
    /// The relays of this client process, one per lock node: what its Redlock clients use.
    pub relays: Vec<String>,
    /// The lock nodes themselves, for the key probe.
    pub nodes: Vec<String>,
    pub data: String,
    pub chaos_start_ns: u64,
    /// The planned end: the earliest the driver's `END` may set (see [`END_NS`]).
    pub end_ns: u64,
    pub seed: u64,
    pub log: PathBuf,
    pub flags: Flags,
    /// The ports of the cluster's processes or of the Sentinel group's data nodes, each with the
    /// port of this client process's relay to it (`Builder::address_map_for_tests`).
    pub address_map: Vec<(u16, u16)>,
}

/// The two Redlock clients of a process: one with `restart_grace` for quick-restart phases, one
/// without for the others (see the module docs of `main.rs`). Each call uses the one of the
/// phase it starts in.
pub struct Clients {
    pub grace: Redlock,
    pub plain: Redlock,
    pub seed: u64,
    pub chaos_start_ns: u64,
}

impl Clients {
    /// The client for a call starting now, and its name in the log (`g`: with grace, `n`: none).
    pub fn now(&self) -> (Redlock, &'static str) {
        let offset_ms = (now_ns() as i64 - self.chaos_start_ns as i64).div_euclid(MS as i64);
        if quick_phase(self.seed, offset_ms) {
            (self.grace.clone(), "g")
        } else {
            (self.plain.clone(), "n")
        }
    }

    fn both(&self) -> [(&Redlock, &'static str); 2] {
        [(&self.grace, "g"), (&self.plain, "n")]
    }
}

pub fn outcome<T>(result: &redquorum::Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(Error::NotAcquired { .. }) => "not_acquired",
        Err(Error::NoQuorum { .. }) => "no_quorum",
        Err(Error::Lost { .. }) => "lost",
        Err(Error::ExtensionLimit { .. }) => "extension_limit",
        Err(Error::InvalidArgument { .. }) => "invalid_argument",
        Err(Error::Cancelled { .. }) => "cancelled",
        Err(_) => "other",
    }
}

/// Which call a thread is in, and since when (0: none), for the hang watchdog.
#[derive(Default)]
pub struct Busy {
    pub since_ns: AtomicU64,
    pub op: AtomicU64,
    pub resource: Mutex<String>,
    /// The thread, for the slow-call snapshot's reading of its `schedstat` around `gdb`.
    pub tid: std::sync::atomic::AtomicI32,
    /// `gdb`'s span (from, to) and how long this thread waited for a core within it (ns): a
    /// stop of the process that rules (c) and (g) count as such, so that wait is not counted
    /// again as the thread's.
    pub gdb: Mutex<Option<(u64, u64, u64)>>,
}

pub const OPS: [&str; 7] = [
    "lock", "try_lock", "extend", "release", "wait", "overask", "leader",
];

/// When a cancellable wait is cancelled: before the call (it must fail at once), at a random
/// moment during it (often within its first attempt), or around a release of its resource by
/// another thread of the process (the instant it may be granted the lock: the race that leaves
/// keys stuck when a cancel skips the undo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelMode {
    Before,
    During,
    Release,
    /// Not cancelled: the wait ends by itself (it must not return `Cancelled`).
    Never,
}

impl CancelMode {
    pub fn name(self) -> &'static str {
        match self {
            CancelMode::Before => "before",
            CancelMode::During => "during",
            CancelMode::Release => "release",
            CancelMode::Never => "never",
        }
    }
}

/// When a wait's cancel fired, and how long the waiting thread had waited for a core by then
/// (its `schedstat`, read by the thread that fires), so that rule (g) counts that thread's
/// starvation after the cancel, and only that.
struct FireMark {
    at_ns: AtomicU64,
    waited_ns: AtomicU64,
    scheduled: AtomicU64,
    /// The waiting thread.
    tid: libc::pid_t,
}

impl FireMark {
    /// A mark for a wait on the calling thread.
    fn new() -> Arc<FireMark> {
        Arc::new(FireMark {
            at_ns: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            scheduled: AtomicU64::new(0),
            // SAFETY: gettid has no preconditions.
            tid: unsafe { libc::gettid() },
        })
    }

    /// Notes the waiting thread's wait for a core so far, then the time, just before the
    /// cancel fires.
    fn fire(&self) {
        let (_, waited, scheduled) = task_schedstat(self.tid);
        self.waited_ns.store(waited, Ordering::SeqCst);
        self.scheduled.store(scheduled, Ordering::SeqCst);
        self.at_ns.store(now_ns(), Ordering::SeqCst);
    }
}

/// A cancel to fire at `at`; `fired` notes when it was (just before firing).
struct Fire {
    at: u64,
    cancel: Cancel,
    fired: Arc<FireMark>,
}

/// A cancellable wait's cancel, armed by [`Worker::arm`].
pub struct Armed {
    id: u64,
    mode: CancelMode,
    pub cancel: Cancel,
    fired: Arc<FireMark>,
}

/// A wait registered to be cancelled around the next release of its resource.
struct Waiter {
    id: u64,
    resource: String,
    cancel: Cancel,
    fired: Arc<FireMark>,
}

/// What the threads of one client process share besides the client.
pub struct Shared {
    canceller: Sender<Fire>,
    waiters: Mutex<Vec<Waiter>>,
    probes: Sender<Probe>,
}

impl Shared {
    /// What the threads of a process share, its canceller running until the last `Shared` is
    /// gone.
    pub fn start(probes: Sender<Probe>) -> (Arc<Shared>, std::thread::JoinHandle<()>) {
        let (fires_tx, fires) = crossbeam_channel::unbounded();
        let canceller = std::thread::spawn(move || canceller(fires));
        let shared = Shared {
            canceller: fires_tx,
            waiters: Mutex::new(Vec::new()),
            probes,
        };
        (Arc::new(shared), canceller)
    }
}

/// Fires scheduled cancels on time, until every sender is gone.
fn canceller(fires: Receiver<Fire>) {
    let mut pending: Vec<Fire> = Vec::new();
    loop {
        let next = pending.iter().map(|f| f.at).min();
        let wait = next.map_or(Duration::from_millis(50), |at| {
            Duration::from_nanos(at.saturating_sub(now_ns()))
        });
        match fires.recv_timeout(wait) {
            Ok(f) => pending.push(f),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = now_ns();
        pending.retain(|f| {
            if f.at > now {
                return true;
            }
            f.fired.fire();
            f.cancel.cancel();
            false
        });
    }
}

/// How long the calling thread has run and waited for a core, in ns, and how often it was
/// scheduled in (`schedstat`).
fn thread_schedstat() -> (u64, u64, u64) {
    crate::schedstat_of(Path::new("/proc/thread-self/schedstat"))
}

/// The `schedstat` of this process's thread `tid`.
fn task_schedstat(tid: impl std::fmt::Display) -> (u64, u64, u64) {
    crate::schedstat_of(Path::new(&format!("/proc/self/task/{tid}/schedstat")))
}

pub struct Worker {
    pub client: usize,
    pub thread: usize,
    pub clients: Arc<Clients>,
    /// Which of `clients` the last [`rl`](Worker::rl) gave: logged with each call.
    pub variant: &'static str,
    pub data: redis::Connection,
    pub rng: Rng,
    pub busy: Arc<Busy>,
    pub shared: Arc<Shared>,
    pub log: Vec<String>,
    pub flags: Flags,
    /// Cancellable waits made so far (their owners and tokens are unique).
    pub waits: u64,
    /// Cancels armed so far.
    pub armed: u64,
    /// The thread's wait for a core (ns, `schedstat`) when its last call returned.
    pub waited_at_end: u64,
}

impl Worker {
    /// The Redlock client for an acquisition starting now.
    pub fn rl(&mut self) -> Redlock {
        let (rl, variant) = self.clients.now();
        self.variant = variant;
        rl
    }

    pub fn call<T>(
        &mut self,
        op: usize,
        res: &str,
        f: impl FnOnce() -> redquorum::Result<T>,
    ) -> (u64, u64, redquorum::Result<T>) {
        let start = now_ns();
        let (ran0, waited0, scheduled0) = thread_schedstat();
        // SAFETY: gettid has no preconditions.
        self.busy
            .tid
            .store(unsafe { libc::gettid() }, Ordering::Relaxed);
        self.busy.op.store(op as u64, Ordering::Relaxed);
        res.clone_into(&mut self.busy.resource.lock().unwrap());
        self.busy.since_ns.store(start, Ordering::Relaxed);
        let result = f();
        let (ran1, waited1, scheduled1) = thread_schedstat();
        let end = now_ns();
        self.busy.since_ns.store(0, Ordering::Relaxed);
        self.waited_at_end = waited1;
        let mut waited = waited1.saturating_sub(waited0);
        // gdb's stop counts as a stop of the process: not as this thread's wait too.
        if let Some((from, to, in_gdb)) = *self.busy.gdb.lock().unwrap()
            && from < end
            && to > start
        {
            waited = waited.saturating_sub(in_gdb);
        }
        self.log.push(format!(
            "C {} {} {} {res} {start} {end} {} {} {} {waited} {}",
            self.client,
            self.thread,
            OPS[op],
            outcome(&result),
            self.variant,
            ran1.saturating_sub(ran0),
            scheduled1.saturating_sub(scheduled0)
        ));
        (start, end, result)
    }

    fn run(self) -> Vec<String> {
        match self.thread {
            t if t < THREADS => self.run_mutex(),
            t if t < THREADS + RW_THREADS => self.run_rw(),
            t if t < THREADS + RW_THREADS + SEM_THREADS => self.run_sem(),
            t if t < THREADS + RW_THREADS + SEM_THREADS + FENCED_THREADS => self.run_fenced(),
            _ => self.run_election(),
        }
    }

    fn run_mutex(mut self) -> Vec<String> {
        while now_ns() < end_ns() {
            let res = resource(self.rng.below(RESOURCES as u64) as usize);
            let ttl = Duration::from_millis(self.rng.range(TTL_MIN_MS, TTL_MAX_MS));
            let rl = self.rl();
            let pick = self.rng.below(100);
            if pick < 25 {
                self.wait(&res, ttl);
            } else {
                let (call_start, _, result) = if pick < 75 {
                    self.call(0, &res, || rl.lock(&res, ttl))
                } else {
                    self.call(1, &res, || rl.try_lock(&res, ttl))
                };
                if let Ok(lock) = result {
                    self.hold(lock, &res, ttl, call_start, KeyKind::Plain);
                }
            }
            std::thread::sleep(Duration::from_micros(self.rng.range(0, 3_000)));
        }
        self.log
    }

    /// A reentrant wait whose owner (its token) is unique to this call, with a cancel fired as
    /// `armed` says; logged as an `A` line. A call that gives no lock is probed for keys left.
    fn wait(&mut self, res: &str, ttl: Duration) {
        self.waits += 1;
        let owner = format!("w{}.{}.{}", self.client, self.thread, self.waits);
        let armed = self.arm(res);
        let request = LockRequest::new(res, ttl)
            .reentrant(&owner)
            .wait(Duration::from_millis(WAIT_MS))
            .cancel(&armed.cancel);
        let rl = self.rl();
        let (start, end, result) = self.call(4, res, || rl.acquire(&request));
        self.disarm(&armed, res, &owner, (start, end), outcome(&result));
        match result {
            Ok(lock) => self.hold(lock, res, ttl, start, KeyKind::Reentrant),
            Err(e) => self.probe(
                KeyKind::Reentrant,
                res,
                &owner,
                (start, end),
                format!("wait:{}", outcome::<()>(&Err(e))),
            ),
        }
    }

    /// A token for a cancellable wait that is not reentrant ([`LockRequest::token_for_tests`]),
    /// unique to the call, so that its keys can be looked for even when it gives no lock.
    pub fn wait_token(&mut self) -> String {
        self.waits += 1;
        format!("t{}.{}.{}", self.client, self.thread, self.waits)
    }

    /// A cancel for a wait on `res`, to fire before the call (fired here), at a random moment
    /// during it, or around a release of `res` by another thread of the process.
    pub fn arm(&mut self, res: &str) -> Armed {
        self.arm_as(res, true)
    }

    /// [`arm`](Worker::arm); without `release` (for a resource that no other thread of the
    /// process releases), a wait that would have been cancelled around a release is not
    /// cancelled at all: it ends by itself.
    pub fn arm_as(&mut self, res: &str, release: bool) -> Armed {
        let cancel = Cancel::new();
        let fired = FireMark::new();
        let mode = match self.rng.below(10) {
            0 => CancelMode::Before,
            1..=4 => CancelMode::During,
            _ if !release => CancelMode::Never,
            _ => CancelMode::Release,
        };
        self.armed += 1;
        let id = (self.client * 1_000 + self.thread) as u64 * 1_000_000_000 + self.armed;
        match mode {
            CancelMode::Before => {
                fired.fire();
                cancel.cancel();
            }
            CancelMode::During => {
                // Half within the first attempt or two, half anywhere in the wait.
                let offset_us = if self.rng.chance(0.5) {
                    self.rng.range(0, 2_000)
                } else {
                    self.rng.range(0, WAIT_MS * 1_000)
                };
                let fire = Fire {
                    at: now_ns() + offset_us * 1_000,
                    cancel: cancel.clone(),
                    fired: Arc::clone(&fired),
                };
                self.shared.canceller.send(fire).expect("canceller");
            }
            CancelMode::Never => {}
            CancelMode::Release => self.shared.waiters.lock().unwrap().push(Waiter {
                id,
                resource: res.to_owned(),
                cancel: cancel.clone(),
                fired: Arc::clone(&fired),
            }),
        }
        Armed {
            id,
            mode,
            cancel,
            fired,
        }
    }

    /// After the wait returned: no release may cancel it any more; its `A` line.
    pub fn disarm(
        &mut self,
        armed: &Armed,
        res: &str,
        token: &str,
        span: (u64, u64),
        outcome: &str,
    ) {
        self.shared
            .waiters
            .lock()
            .unwrap()
            .retain(|w| w.id != armed.id);
        // How long this thread waited for a core from its cancel's firing to the call's return
        // (a wait already under way at the firing counts whole: an upper bound), and how often
        // it was scheduled in meanwhile (counted to the end of this line's making).
        let fired = armed.fired.at_ns.load(Ordering::SeqCst);
        let (waited, scheduled) = match fired {
            0 => (0, 0),
            _ => (
                self.waited_at_end
                    .saturating_sub(armed.fired.waited_ns.load(Ordering::SeqCst)),
                thread_schedstat()
                    .2
                    .saturating_sub(armed.fired.scheduled.load(Ordering::SeqCst)),
            ),
        };
        self.log.push(format!(
            "A {} {} {res} {token} {} {fired} {} {} {outcome} {waited} {scheduled}",
            self.client,
            self.thread,
            armed.mode.name(),
            span.0,
            span.1,
        ));
    }

    pub fn probe(&self, kind: KeyKind, res: &str, token: &str, span: (u64, u64), call: String) {
        let probe = Probe {
            kind,
            resource: res.to_owned(),
            token: token.to_owned(),
            start: span.0,
            end: span.1,
            call,
        };
        self.shared.probes.send(probe).expect("key probe");
    }

    /// Before releasing `res`: sometimes cancel a wait for it in this process, at a random
    /// moment around the release (from before it takes effect to after the waiter woke).
    pub fn cancel_a_waiter(&mut self, res: &str) {
        if !self.rng.chance(0.7) {
            return;
        }
        let waiter = {
            let mut waiters = self.shared.waiters.lock().unwrap();
            let at = waiters.iter().position(|w| w.resource == res);
            at.map(|i| waiters.swap_remove(i))
        };
        if let Some(w) = waiter {
            let fire = Fire {
                at: now_ns() + self.rng.range(0, 2_000) * 1_000,
                cancel: w.cancel,
                fired: w.fired,
            };
            self.shared.canceller.send(fire).expect("canceller");
        }
    }

    /// The critical section: a non-atomic increment of the resource's counter.
    pub fn hold(&mut self, lock: Lock, res: &str, ttl: Duration, call_start: u64, kind: KeyKind) {
        // The clock first, then validity: the deadline logged is never later than the lock's, so
        // a stall in between shortens the window checked instead of making a false overlap (or
        // hiding a write made after validity).
        let acquired = now_ns();
        let validity = lock.validity();
        let mut deadline = acquired + validity.as_nanos() as u64;
        let key = counter_key(res);
        let seen: Option<u64> = redis::cmd("GET")
            .arg(&key)
            .query(&mut self.data)
            .expect("GET on the data node");
        // Broken on purpose (`--eager-restarts`), the read-modify-write may last most of the
        // validity, so that a second holder that a restarted node lets in meets it: a lost
        // update ((b), (pc)).
        let gap_us = if self.flags.eager {
            let left = lock.validity().saturating_sub(MIN_VALIDITY_TO_WRITE);
            (left.as_micros() as u64).max(3_000)
        } else {
            3_000
        };
        std::thread::sleep(Duration::from_micros(self.rng.range(0, gap_us)));
        if self.rng.chance(0.1) {
            let _ = self.call(2, res, || lock.extend(ttl));
            // A lock that ran out (its process stopped past its validity, say) has no validity
            // left, and `now` is past its real deadline: only a positive validity moves it.
            let before = now_ns();
            let validity = lock.validity();
            if !validity.is_zero() {
                deadline = before + validity.as_nanos() as u64;
            }
        }
        let mut wrote = String::from("-");
        let mut set_done = 0;
        // The thread's wait for a core from the check (the library's part of it excluded) to
        // the SET's return, and how often it was scheduled in meanwhile: what rule (b) counts
        // of a late write besides its process's stalls.
        let (mut waited, mut scheduled) = (0, 0);
        let checked = now_ns();
        if lock.validity() >= MIN_VALIDITY_TO_WRITE {
            let (_, waited0, scheduled0) = thread_schedstat();
            self.about_to_write("plain");
            let value = seen.unwrap_or(0) + 1;
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg(value)
                .query(&mut self.data)
                .expect("SET on the data node");
            set_done = now_ns();
            wrote = value.to_string();
            let (_, waited1, scheduled1) = thread_schedstat();
            (waited, scheduled) = (
                waited1.saturating_sub(waited0),
                scheduled1.saturating_sub(scheduled0),
            );
        }
        std::thread::sleep(Duration::from_micros(self.rng.range(0, 1_000)));
        let token = lock.token().to_owned();
        let (end, how) = if self.rng.chance(0.03) {
            // A holder that vanishes without releasing: the lock must free itself at its TTL.
            std::mem::forget(lock);
            (deadline, "abandoned")
        } else {
            self.cancel_a_waiter(res);
            let (start, end, result) = self.call(3, res, || lock.release());
            // Whatever the release said, no node may keep the key past node_timeout.
            let call = format!("release:{}", outcome(&result));
            self.probe(kind, res, &token, (call_start, end), call);
            (start, "released")
        };
        self.log.push(format!(
            "H {} {} {res} {token} {call_start} {acquired} {deadline} {end} {how} {wrote} {set_done} {checked} {waited} {scheduled}",
            self.client, self.thread
        ));
    }

    /// Now and then, between the validity check and the write: say so to the driver, which may
    /// be waiting to stop this process right there (the pause of Kleppmann's example), and give
    /// it time to.
    pub fn about_to_write(&mut self, kind: &str) {
        if self.rng.chance(0.1) {
            println!("W {} {kind} {}", self.client, now_ns());
            std::thread::sleep(WRITE_WINDOW);
        }
    }
}

/// How long a holder waits after saying it is about to write: the driver's SIGSTOP lands in it.
const WRITE_WINDOW: Duration = Duration::from_millis(20);

/// A client of `nodes`; with `grace`, one that keeps restarted nodes out for that long. The
/// clock guard's quarantine outlasts the largest TTL, so that a node whose clock jumped counts
/// again soon after every key the jump shortened reached its original expiry.
pub fn build_client(
    nodes: &[String],
    grace: Option<Duration>,
    flags: &Flags,
    address_map: &[(u16, u16)],
) -> Redlock {
    builder(nodes, grace, flags, address_map)
        .build()
        .expect("build client")
}

/// What each thread of this process is doing, at once (a slow call may still be where it is
/// slow): one line per thread with its id, name, scheduler state, the CPU it last ran on, the
/// kernel function it sleeps in, its system call's number (`running` when not in one), the
/// first functions of its kernel stack (readable by root), and over the next 300 ms how long
/// it ran and how long it waited for a core (`/proc/self/task/*/schedstat`, in ms): a thread
/// starved by the scheduler waits, one in a busy loop runs, one blocked does neither. Then the
/// machine's other tasks that were running, runnable or blocked (`R` or `D`) at the start of
/// those 300 ms, with their CPU and kernel stack: what held the cores or a lock. Then each
/// thread's stack, where `gdb` is installed (it stops the threads one by one for a second or
/// so, and the span it returns is logged as a stall of the process).
fn threads_snapshot(busy: &[Arc<Busy>]) -> (String, (u64, u64)) {
    fn tasks(dir: &str) -> Vec<(String, std::path::PathBuf)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|t| (t.file_name().to_string_lossy().into_owned(), t.path()))
                    .collect()
            })
            .unwrap_or_default();
        all.sort();
        all
    }
    fn schedstat(dir: &Path) -> (u64, u64) {
        let (ran, waited, _) = crate::schedstat_of(&dir.join("schedstat"));
        (ran, waited)
    }
    /// A task's line: name, state, last CPU, wait channel, system call, kernel stack.
    fn describe(tid: &str, dir: &Path) -> (String, String) {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let stat = read("stat");
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let state = fields.first().copied().unwrap_or("?").to_string();
        // Field 39 of `stat`, the 37th after the name.
        let cpu = fields.get(36).copied().unwrap_or("?");
        // The kernel's side of the stack (readable by root): which lock or wait a thread
        // blocked in the kernel is in.
        let kernel: Vec<String> = read("stack")
            .lines()
            .take(6)
            .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_owned())
            .collect();
        let line = format!(
            "  {tid} {} {state} cpu{cpu} {} {} [{}]",
            read("comm").trim(),
            read("wchan").trim(),
            read("syscall").split_whitespace().next().unwrap_or("?"),
            kernel.join(" < ")
        );
        (line, state)
    }
    let from = now_ns();
    let before: Vec<_> = tasks("/proc/self/task")
        .into_iter()
        .map(|(tid, dir)| {
            let (line, _) = describe(&tid, &dir);
            (line, schedstat(&dir), dir)
        })
        .collect();
    let own = std::process::id().to_string();
    let mut others = Vec::new();
    for (pid, dir) in tasks("/proc") {
        if pid == own || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        for (tid, task) in tasks(&dir.join("task").to_string_lossy()) {
            let (line, state) = describe(&tid, &task);
            if state == "R" || state == "D" {
                others.push(line);
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let window_ms = (now_ns() - from) / MS;
    let lines: Vec<String> = before
        .into_iter()
        .map(|(line, (run0, wait0), dir)| {
            let (run1, wait1) = schedstat(&dir);
            format!(
                "{line} ran {} waited {}",
                run1.saturating_sub(run0) / 1_000_000,
                wait1.saturating_sub(wait0) / 1_000_000
            )
        })
        .collect();
    let waited_by = |b: &Busy| task_schedstat(b.tid.load(Ordering::Relaxed)).1;
    let waited_before: Vec<u64> = busy.iter().map(|b| waited_by(b)).collect();
    let gdb_from = now_ns();
    let stacks = std::process::Command::new("timeout")
        .args([
            "10",
            "gdb",
            "-p",
            &own,
            "-batch",
            "-ex",
            "thread apply all bt 30",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("(no stacks: gdb: {e})"));
    let gdb_span = (gdb_from, now_ns());
    for (b, before) in busy.iter().zip(waited_before) {
        let in_gdb = waited_by(b).saturating_sub(before);
        *b.gdb.lock().unwrap() = Some((gdb_span.0, gdb_span.1, in_gdb));
    }
    (
        format!(
            "(over {window_ms} ms)\n{}\n the machine's other running, runnable or blocked \
             tasks:\n{}\n{stacks}",
            lines.join("\n"),
            others.join("\n")
        ),
        gdb_span,
    )
}

/// The builder [`build_client`] builds.
pub fn builder(
    nodes: &[String],
    grace: Option<Duration>,
    flags: &Flags,
    address_map: &[(u16, u16)],
) -> redquorum::Builder {
    let builder = Redlock::builder()
        .nodes(nodes)
        .address_map_for_tests(
            address_map
                .iter()
                .map(|&(node, relay)| (("127.0.0.1", node), ("127.0.0.1", relay))),
        )
        .node_timeout(NODE_TIMEOUT)
        .retry_count(RETRY_COUNT)
        .retry_delay(RETRY_DELAY)
        .retry_jitter(RETRY_JITTER)
        .clock_quarantine(CLOCK_QUARANTINE)
        .clock_guard(!flags.no_clock_guard);
    // With `--min-replicas` the client without grace sets `min_replicas` to the replicas of
    // every master (one): a cluster failover loses none of its votes (A9, A10).
    match grace {
        Some(grace) => builder.restart_grace(grace),
        None if crate::replicated() => builder.min_replicas(1),
        None => builder,
    }
}

/// When the client threads stop starting calls: none until the driver, its schedule run, says
/// on stdin (`END ns`), at the planned end or later when the schedule ran late (failovers and
/// restarts wait on the servers, which a loaded machine slows), so that the clients still run
/// after the last fault healed (rule (d)).
static END_NS: AtomicU64 = AtomicU64::new(u64::MAX);

/// When the driver's `END` line was read (`u64::MAX` before): the threads cannot stop before it,
/// so the watchdog's time for them to finish counts from it as well as from the end itself.
static TOLD_NS: AtomicU64 = AtomicU64::new(u64::MAX);

pub fn end_ns() -> u64 {
    END_NS.load(Ordering::Relaxed)
}

/// Reads the driver's lines on stdin: `END ns` sets the end (never before `planned`); the end
/// of stdin (the driver counted the connections) is sent on `closed`.
fn read_driver(planned: u64, closed: crossbeam_channel::Sender<()>) {
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
        if let Some(ns) = line
            .trim()
            .strip_prefix("END ")
            .and_then(|v| v.parse::<u64>().ok())
        {
            END_NS.store(ns.max(planned), Ordering::Relaxed);
            TOLD_NS.store(now_ns(), Ordering::Relaxed);
        }
        line.clear();
    }
    let _ = closed.send(());
}

pub fn child(args: ChildArgs) {
    args.flags.apply();
    let (closed_tx, stdin_closed) = crossbeam_channel::bounded(1);
    let planned = args.end_ns;
    std::thread::spawn(move || read_driver(planned, closed_tx));
    let clients = Arc::new(Clients {
        grace: build_client(
            &args.relays,
            Some(Duration::from_millis(args.flags.grace_ms)),
            &args.flags,
            &args.address_map,
        ),
        plain: build_client(&args.relays, None, &args.flags, &args.address_map),
        seed: args.seed,
        chaos_start_ns: args.chaos_start_ns,
    });
    let data_client = redis::Client::open(args.data.as_str()).expect("data url");
    let threads = THREADS + RW_THREADS + SEM_THREADS + FENCED_THREADS + ELECTION_THREADS;
    let busy: Vec<Arc<Busy>> = (0..threads).map(|_| Arc::default()).collect();
    let (fires_tx, fires) = crossbeam_channel::unbounded();
    let canceller = std::thread::spawn(move || canceller(fires));
    let (probes_tx, probes) = crossbeam_channel::unbounded();
    let key_probe = {
        let (id, urls) = (args.id, args.nodes.clone());
        std::thread::spawn(move || crate::keys::run(id, urls, probes))
    };
    let shared = Arc::new(Shared {
        canceller: fires_tx,
        waiters: Mutex::new(Vec::new()),
        probes: probes_tx,
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let data = data_client
                .get_connection_with_timeout(Duration::from_secs(5))
                .expect("connect to the data node");
            // No socket timeouts: after a pause (SIGSTOP, SIGCONT) Linux fails a blocked read
            // or write on a socket with SO_RCVTIMEO/SO_SNDTIMEO set with EINTR, and the data
            // node is never faulted. A data call that hangs is caught by the watchdog below.
            data.set_read_timeout(None).unwrap();
            data.set_write_timeout(None).unwrap();
            let worker = Worker {
                client: args.id,
                thread: t,
                clients: Arc::clone(&clients),
                variant: "-",
                data,
                rng: Rng::new(
                    args.seed
                        ^ ((args.id * threads + t + 1) as u64).wrapping_mul(0xA24B_AED4_963E_E407),
                ),
                busy: Arc::clone(&busy[t]),
                shared: Arc::clone(&shared),
                log: Vec::new(),
                waits: 0,
                armed: 0,
                waited_at_end: 0,
                flags: args.flags,
            };
            std::thread::Builder::new()
                .name(format!("chaos-{t}"))
                .spawn(move || worker.run())
                .expect("spawn a client thread")
        })
        .collect();

    // The stall probes: when the machine does not run this process, or one core of it, or
    // holds the process's memory map, for a while, calls take longer by as much; the checker
    // adds these stalls to each call's bound.
    let probe_end = Arc::new(AtomicU64::new(0));
    let probe = {
        let probe_end = Arc::clone(&probe_end);
        std::thread::spawn(move || crate::stall_probe(&probe_end, true))
    };

    // The watchdog: every call is bounded, so every thread ends soon after the end, or after it
    // was told the end when that came later (the driver's schedule ran late and the end it sends
    // has passed).
    let give_up = || {
        let end = end_ns().max(TOLD_NS.load(Ordering::Relaxed));
        end.saturating_add((lock_bound_ms().max(wait_bound_ms()) + 10_000) * MS)
    };
    // A call past its bound by rule (c)'s margin gets, once per process, a snapshot of what
    // each thread of the process waits on (to stderr, kept in the run's output): whether rule
    // (c)'s slow calls sat in the library (callers in a futex wait, the node workers in socket
    // reads) or in the kernel. The time this loop woke late (the process stopped by the
    // driver, or not run) is left out of each call's length, as the checker adds it to the
    // bound.
    let mut snapshot_taken = false;
    let mut gdb_stopped = None;
    let mut woke = now_ns();
    let mut late_ns = 0;
    // Per thread: the call it is in (its start) and `late_ns` when this loop first saw it.
    let mut seen: Vec<(u64, u64)> = vec![(0, 0); busy.len()];
    while !handles.iter().all(|h| h.is_finished()) {
        let now = now_ns();
        late_ns += (now - woke).saturating_sub(100 * MS);
        woke = now;
        let slow = !snapshot_taken
            && busy.iter().zip(&mut seen).any(|(b, seen)| {
                let since = b.since_ns.load(Ordering::Relaxed);
                if since != seen.0 {
                    *seen = (since, late_ns);
                }
                let bound = crate::checker::call_bound_ms(
                    OPS[b.op.load(Ordering::Relaxed) as usize],
                    &b.resource.lock().unwrap(),
                );
                since != 0 && now.saturating_sub(since + late_ns - seen.1) > bound * MS
            });
        if slow {
            snapshot_taken = true;
            let (snapshot, gdb_span) = threads_snapshot(&busy);
            // gdb stops the process's threads one by one while it reads them: the callers may
            // run while a node worker is stopped, which the stall probe does not see. A stall
            // of the whole process for the checker.
            gdb_stopped = Some(gdb_span);
            eprintln!(
                "chaos client {} at {:.3}s: a call is past rule (c)'s bound; the process's \
                 threads (tid name state cpu wchan syscall [kernel stack], then ms run and \
                 waited for a core over the window):\n{}",
                args.id,
                (now as f64 - args.chaos_start_ns as f64) / 1e9,
                snapshot
            );
        }
        if now_ns() > give_up() {
            for (t, b) in busy.iter().enumerate() {
                let since = b.since_ns.load(Ordering::Relaxed);
                if since != 0 {
                    eprintln!(
                        "chaos client {}: HUNG: thread {t} in {} for {} ms",
                        args.id,
                        OPS[b.op.load(Ordering::Relaxed) as usize],
                        (now_ns() - since) / MS
                    );
                }
            }
            eprintln!("chaos client {}: threads did not finish", args.id);
            std::process::exit(3);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut log: Vec<String> = Vec::new();
    for h in handles {
        log.extend(h.join().expect("client thread panicked"));
    }
    // The last sender goes: the canceller ends, the key probe once its last probe is done (and
    // closes its connections before the parent counts them).
    drop(shared);
    canceller.join().expect("canceller panicked");
    log.extend(key_probe.join().expect("key probe panicked"));

    // Every worker reconnects once it has work: give both clients some until all are connected.
    let final_res = format!("chaos:final:{}", args.id);
    let ttl = Duration::from_millis(TTL_MAX_MS);
    let status_deadline = now_ns() + 10_000 * MS;
    let mut acquired = [false; 2];
    loop {
        for (i, (rl, variant)) in clients.both().into_iter().enumerate() {
            let start = now_ns();
            let result = rl.try_lock(&final_res, ttl);
            let end = now_ns();
            log.push(format!(
                "C {} final try_lock {final_res} {start} {end} {} {variant}",
                args.id,
                outcome(&result)
            ));
            if let Ok(lock) = result {
                acquired[i] = true;
                let start = now_ns();
                let result = lock.release();
                log.push(format!(
                    "C {} final release {final_res} {start} {} {} {variant}",
                    args.id,
                    now_ns(),
                    outcome(&result)
                ));
            }
        }
        let connected = clients
            .both()
            .iter()
            .map(|(rl, _)| rl.node_status().iter().filter(|s| s.connected).count())
            .min()
            .unwrap_or(0);
        let all = acquired.iter().all(|&a| a);
        if (connected == crate::nodes() && all) || now_ns() > status_deadline {
            let status: Vec<String> = clients
                .both()
                .iter()
                .flat_map(|(rl, variant)| {
                    rl.node_status()
                        .iter()
                        .map(|s| {
                            // A cluster's masters as the link last read them, `+`-joined.
                            let masters = s.master.as_deref().unwrap_or("-").replace(',', "+");
                            format!(
                                "{variant}:{}:{}:{}:{masters}",
                                s.address, s.connected, s.connects
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            log.push(format!(
                "S {} {connected} {} {}",
                args.id,
                u8::from(all),
                status.join(",")
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    probe_end.store(1, Ordering::Relaxed);
    let crate::Stalls {
        all: mut stalls,
        one_core,
        map,
    } = probe.join().expect("stall probe panicked");
    if let Some((from, to)) = gdb_stopped {
        log.push(format!("G {} {from} {to}", args.id));
    }
    if let Some((mut from, mut to)) = gdb_stopped {
        // The probe saw the part of gdb's stop that stopped it: merged, so counted once.
        stalls.retain(|&(f, t)| {
            let apart = t < from || f > to;
            if !apart {
                (from, to) = (from.min(f), to.max(t));
            }
            apart
        });
        stalls.push((from, to));
        stalls.sort_unstable();
    }
    log.extend(
        stalls
            .iter()
            .map(|(from, to)| format!("L {} {from} {to}", args.id)),
    );
    // Within gdb's span the process was stopped anyway: counted as such, not as a core's.
    log.extend(
        one_core
            .iter()
            .filter(|&&(_, from, to)| gdb_stopped.is_none_or(|(f, t)| to < f || from > t))
            .map(|(core, from, to)| format!("LC {} {core} {from} {to}", args.id)),
    );
    log.extend(
        map.iter()
            .filter(|&&(from, to)| gdb_stopped.is_none_or(|(f, t)| to < f || from > t))
            .map(|(from, to)| format!("LM {} {from} {to}", args.id)),
    );

    let mut file = std::io::BufWriter::new(std::fs::File::create(&args.log).expect("log file"));
    for line in &log {
        writeln!(file, "{line}").expect("write log");
    }
    file.flush().expect("write log");
    drop(file);
    println!("READY");
    std::io::stdout().flush().unwrap();
    // Stay connected until the parent has counted the connections on the nodes (stdin closes).
    let _ = stdin_closed.recv();
    drop(clients);
}

pub fn parse_child(args: &[String]) -> ChildArgs {
    let list = |s: &str| s.split(',').map(str::to_owned).collect();
    ChildArgs {
        id: args[0].parse().expect("child id"),
        relays: list(&args[1]),
        nodes: list(&args[2]),
        data: args[3].clone(),
        chaos_start_ns: args[4].parse().expect("chaos start"),
        end_ns: args[5].parse().expect("end time"),
        seed: args[6].parse().expect("seed"),
        log: Path::new(&args[7]).to_path_buf(),
        flags: Flags::parse(&args[8]),
        address_map: args[9]
            .split(';')
            .filter_map(|pair| {
                let (node, relay) = pair.split_once('=')?;
                Some((node.parse().ok()?, relay.parse().ok()?))
            })
            .collect(),
    }
}
