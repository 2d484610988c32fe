//! The [`Poller`]: one thread that reads the release subscriptions of every node it can reach
//! on a socket of its own, a standalone node over plain TCP or a Unix socket, waiting in one
//! `poll(2)` on all of them. Every node publishes each release to every subscribed client, so
//! with a thread per node a release wakes N threads in each client, all at once on the host's
//! cores; this thread wakes once for what the nodes sent meanwhile (docs/performance.md,
//! "Waiters across processes"). TLS, Sentinel and Cluster nodes keep a
//! [`Subscriber`](super::subscriber) thread each, on redis-rs's connection, whose socket
//! redis-rs does not lend.
//!
//! Per node it keeps what a `Subscriber` keeps, and tells the registry the same things at the
//! same moments: a subscription counts once the node confirmed it, a connection that breaks or
//! cannot be made is a lapse, and a node silent for [`PROBE_AFTER`] while waiters listen is
//! probed with a `SUBSCRIBE` of a channel it is on, whose answer late by the I/O timeout makes
//! it failing until it answers. The node answers its commands in order, so each confirmation
//! is matched with the command that asked for it ([`Asked`]).
//!
//! Nothing here blocks on a node: connects (and the `AUTH` of a URL with credentials) run on
//! a short-lived thread per attempt, which hands the socket over, and writes that do not fit
//! in the socket's buffer wait for it to drain. Waiters' (un)subscriptions and the client's
//! end reach the thread through its [`Waker`].

#![allow(unsafe_code)] // `poll(2)`, the one call std lacks.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use redis::ConnectionAddr;

use crate::notify::registry::Registry;
use crate::notify::subscriber::{
    PROBE_AFTER, READ_SLICE, SubscriptionChange, Subscriptions, heard,
};
use crate::topology::Target;
use crate::wire::{BACKOFF_MIN, channel, next_backoff};

const CONNECT_STACK: usize = 64 * 1024;
/// The longest line of a reply (a type and a length) a node may send.
const LINE_MAX: usize = 64 * 1024;
/// How long a connection must have worked for its loss to be no failed connect (see
/// [`Poller::broken`]).
const STABLE: Duration = Duration::from_secs(1);
/// How many reads of a node's socket (of `chunk`'s 16 KiB) one wake-up makes at most.
const READS_PER_WAKE: usize = 4;

/// How the poller reaches one node: its address, and the credentials of its URL.
pub(super) struct Reach {
    addr: Addr,
    username: Option<String>,
    password: Option<String>,
}

enum Addr {
    Tcp(String, u16),
    Unix(PathBuf),
}

impl Reach {
    /// The poller's way to `target`, if it has one: a standalone node over plain TCP or a Unix
    /// socket.
    pub(super) fn of(target: &Target) -> Option<Reach> {
        let Target::Standalone(client) = target else {
            return None;
        };
        let info = client.get_connection_info();
        let addr = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Addr::Tcp(host.clone(), *port),
            ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
            _ => return None,
        };
        let settings = info.redis_settings();
        Some(Reach {
            addr,
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
        })
    }

    /// A new connection, authenticated if the URL has credentials, ready to subscribe on; its
    /// socket is non-blocking.
    fn connect(&self, connect_timeout: Duration, io_timeout: Duration) -> io::Result<Stream> {
        let mut stream = match &self.addr {
            Addr::Tcp(host, port) => {
                let mut last = None;
                let mut found = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, connect_timeout) {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let tcp = found.ok_or_else(|| {
                    last.unwrap_or_else(|| io::Error::other("the host name has no address"))
                })?;
                tcp.set_nodelay(true)?;
                Stream::Tcp(tcp)
            }
            Addr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        };
        if let Some(password) = &self.password {
            stream.set_timeouts(Some(io_timeout))?;
            let mut auth = Vec::new();
            let mut args = vec!["AUTH"];
            args.extend(self.username.as_deref());
            args.push(password);
            encode(&mut auth, &args);
            stream.write_all(&auth)?;
            let reply = read_line(&mut stream)?;
            match reply.first() {
                Some(b'+') => {}
                Some(b'-') => {
                    // The server's words (`WRONGPASS …`), which never quote the password.
                    let words = String::from_utf8_lossy(&reply[1..]).into_owned();
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, words));
                }
                _ => return Err(not_redis()),
            }
            stream.set_timeouts(None)?;
        }
        stream.set_nonblocking()?;
        Ok(stream)
    }
}

fn not_redis() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the node's reply is not Redis's",
    )
}

/// One line of a reply, without its CRLF, read a byte at a time (the handshake's one reply).
fn read_line(stream: &mut Stream) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0u8];
    while !line.ends_with(b"\r\n") {
        if line.len() > LINE_MAX || stream.read(&mut byte)? == 0 {
            return Err(not_redis());
        }
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
            Stream::Unix(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(true),
            Stream::Unix(s) => s.set_nonblocking(true),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A command in RESP.
fn encode(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// What a subscribed connection receives: a push or a command's answer (an array), or an error.
#[derive(Debug, PartialEq)]
enum Frame {
    Array(Vec<Vec<u8>>),
    Error(String),
}

/// The first whole frame in `buf` and its length, `Ok(None)` if it is not all there yet, or
/// `Err` if `buf` does not hold what a subscribed Redis connection sends.
fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, ()> {
    fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, ()> {
        let rest = &buf[at.min(buf.len())..];
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(end) => Ok(Some((&rest[..end], at + end + 2))),
            None if rest.len() > LINE_MAX => Err(()),
            None => Ok(None),
        }
    }
    fn number(digits: &[u8]) -> Result<i64, ()> {
        std::str::from_utf8(digits)
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or(())
    }
    let Some((head, mut at)) = line(buf, 0)? else {
        return Ok(None);
    };
    match head.first() {
        Some(b'-') => {
            let words = String::from_utf8_lossy(&head[1..]).into_owned();
            return Ok(Some((Frame::Error(words), at)));
        }
        Some(b'*') => {}
        _ => return Err(()),
    }
    let n = usize::try_from(number(&head[1..])?).map_err(|_| ())?;
    if n > 16 {
        return Err(());
    }
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        let Some((item, next)) = line(buf, at)? else {
            return Ok(None);
        };
        match item.first() {
            Some(b'$') => {
                let len = usize::try_from(number(&item[1..])?).map_err(|_| ())?;
                if len > 512 * 1024 * 1024 {
                    return Err(());
                }
                if buf.len() < next + len + 2 {
                    return Ok(None);
                }
                if &buf[next + len..next + len + 2] != b"\r\n" {
                    return Err(());
                }
                items.push(buf[next..next + len].to_vec());
                at = next + len + 2;
            }
            Some(b':') => {
                number(&item[1..])?;
                items.push(item[1..].to_vec());
                at = next;
            }
            _ => return Err(()),
        }
    }
    Ok(Some((Frame::Array(items), at)))
}

/// Wakes the poller: a waiter's (un)subscription was sent, or the client ends.
pub(super) struct Waker(UnixStream);

impl Waker {
    pub(super) fn wake(&self) {
        // Full (`WouldBlock`): a wake-up is already pending, and stands for this one too.
        let _ = (&self.0).write(b"w");
    }
}

/// What a command on the connection asked, in the order the node answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    Subscribe,
    Unsubscribe,
    /// A `SUBSCRIBE` of a channel already on: the node answers, so it is not hung.
    Probe,
}

struct Question {
    resource: Arc<str>,
    asked: Asked,
    at: Instant,
}

/// A live connection to one node.
struct Session {
    stream: Stream,
    input: Vec<u8>,
    output: Vec<u8>,
    questions: VecDeque<Question>,
    /// When the connection was made.
    since: Instant,
    /// When the node last sent anything, or was last probed.
    heard_at: Instant,
    /// When the node last sent anything.
    answered_at: Instant,
    /// The subscriptions made on connecting that are not confirmed yet: until then the node
    /// is failing, as a `Subscriber`'s is until its session starts.
    unconfirmed: usize,
    /// Whether the probe in `questions` went unanswered for the I/O timeout.
    probe_late: bool,
}

impl Session {
    /// Whether `q` went unanswered for `io_timeout`: counted from when it was sent, or from the
    /// node's last answer if that came later (a long pipeline, such as the resubscription of
    /// thousands of channels, is answered bit by bit).
    fn late(&self, q: &Question, now: Instant, io_timeout: Duration) -> bool {
        now.saturating_duration_since(q.at.max(self.answered_at)) >= io_timeout
    }
}

enum Link {
    /// Not connected; the next connect may start at the instant given.
    Down(Instant),
    /// A connect thread is at work.
    Connecting(Receiver<io::Result<Stream>>),
    Up(Box<Session>),
}

/// One node, as the poller sees it.
struct Node {
    index: usize,
    reach: Arc<Reach>,
    changes: Receiver<SubscriptionChange>,
    subs: Subscriptions,
    link: Link,
    backoff: Duration,
}

/// The client's one thread for the nodes of [`Reach::of`].
pub(super) struct Poller {
    nodes: Vec<Node>,
    registry: Arc<Registry>,
    wake: UnixStream,
    waker: Arc<UnixStream>,
    /// Where reads land before they join a session's input.
    chunk: Vec<u8>,
    connect_timeout: Duration,
    io_timeout: Duration,
    exited: Sender<()>,
}

impl Poller {
    /// Starts the thread for `nodes` (each a node's index, its reach and its changes).
    pub(super) fn start(
        nodes: Vec<(usize, Reach, Receiver<SubscriptionChange>)>,
        registry: Arc<Registry>,
        connect_timeout: Duration,
        io_timeout: Duration,
        exited: Sender<()>,
        stack: usize,
    ) -> io::Result<(Waker, JoinHandle<()>)> {
        let (wake, waker) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        waker.set_nonblocking(true)?;
        let now = Instant::now();
        let poller = Poller {
            nodes: nodes
                .into_iter()
                .map(|(index, reach, changes)| Node {
                    index,
                    reach: Arc::new(reach),
                    changes,
                    subs: Subscriptions::default(),
                    link: Link::Down(now),
                    backoff: BACKOFF_MIN,
                })
                .collect(),
            registry,
            wake,
            waker: Arc::new(waker.try_clone()?),
            chunk: vec![0; 16 * 1024],
            connect_timeout,
            io_timeout,
            exited,
        };
        let thread = std::thread::Builder::new()
            .name("redlock-notify".into())
            .stack_size(stack)
            .spawn(move || poller.run())?;
        Ok((Waker(waker), thread))
    }

    fn run(mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.nodes.len() + 1);
        let mut polled: Vec<usize> = Vec::with_capacity(self.nodes.len());
        loop {
            let now = Instant::now();
            for n in 0..self.nodes.len() {
                if !self.take_changes(n) {
                    return;
                }
                self.step(n, now);
            }
            fds.clear();
            polled.clear();
            fds.push(pollfd(self.wake.as_raw_fd(), false));
            for (n, node) in self.nodes.iter().enumerate() {
                if let Link::Up(s) = &node.link {
                    fds.push(pollfd(s.stream.fd(), !s.output.is_empty()));
                    polled.push(n);
                }
            }
            // With nothing to listen for, sleep until a waiter comes: an idle client costs
            // nothing. Else look at the timers (probes, lingering, late answers, silent
            // queues, reconnects) every slice.
            let busy = self
                .nodes
                .iter()
                .any(|node| !node.subs.is_empty() || matches!(node.link, Link::Connecting(_)));
            let timeout = if busy {
                READ_SLICE.as_millis() as libc::c_int
            } else {
                -1
            };
            // SAFETY: `fds` is a valid array of `fds.len()` initialized pollfd structs.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if ready < 0 {
                // `EINTR` (a signal; a stop and continue): look again.
                continue;
            }
            if fds[0].revents != 0 {
                while matches!((&self.wake).read(&mut self.chunk), Ok(n) if n > 0) {}
            }
            for (k, &n) in polled.iter().enumerate() {
                let revents = fds[k + 1].revents;
                if revents == 0 {
                    continue;
                }
                let ok = (revents & libc::POLLOUT == 0 || self.flush(n))
                    && (revents & !libc::POLLOUT == 0 || self.read(n));
                if !ok {
                    self.broken(n);
                }
            }
            self.registry.check_silence();
        }
    }

    /// Applies node `n`'s changes; false once the client is gone.
    fn take_changes(&mut self, n: usize) -> bool {
        loop {
            let change = match self.nodes[n].changes.try_recv() {
                Ok(change) => change,
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            };
            if matches!(self.nodes[n].link, Link::Up(_)) {
                if !self.apply(n, change) {
                    self.broken(n);
                }
            } else {
                self.nodes[n].subs.apply_offline(change);
            }
        }
    }

    /// Applies one change on a live connection; false if the connection failed.
    fn apply(&mut self, n: usize, change: SubscriptionChange) -> bool {
        let node = &mut self.nodes[n];
        match change {
            SubscriptionChange::Subscribe(res) => {
                let sent = node.subs.lingering.remove(&res).is_some();
                node.subs.wanted.insert(Arc::clone(&res));
                if !sent {
                    return self.ask(n, Asked::Subscribe, res);
                }
                // Still on (its `SUBSCRIBE` may be unanswered yet: then the answer counts it).
                let Link::Up(s) = &node.link else {
                    return true;
                };
                let pending = s
                    .questions
                    .iter()
                    .any(|q| q.asked == Asked::Subscribe && q.resource == res);
                if !pending {
                    node.subs.activate(&res, &self.registry, node.index);
                }
                true
            }
            SubscriptionChange::Unsubscribe(res) => {
                node.subs.leave(res, &self.registry, node.index);
                true
            }
        }
    }

    /// Sends a (un)subscription or probe of `resource` to node `n`; false if that failed.
    fn ask(&mut self, n: usize, asked: Asked, resource: Arc<str>) -> bool {
        let node = &mut self.nodes[n];
        let Link::Up(s) = &mut node.link else {
            return true;
        };
        let verb = match asked {
            Asked::Subscribe | Asked::Probe => "SUBSCRIBE",
            Asked::Unsubscribe => "UNSUBSCRIBE",
        };
        encode(&mut s.output, &[verb, &channel(&resource)]);
        if asked != Asked::Probe && !s.questions.iter().any(|q| q.asked != Asked::Probe) {
            self.registry.waiting_for(node.index, true);
        }
        s.questions.push_back(Question {
            resource,
            asked,
            at: Instant::now(),
        });
        self.flush(n)
    }

    /// Writes what node `n`'s socket takes of its output; false if the connection failed.
    fn flush(&mut self, n: usize) -> bool {
        let Link::Up(s) = &mut self.nodes[n].link else {
            return true;
        };
        while !s.output.is_empty() {
            match s.stream.write(&s.output) {
                Ok(0) => return false,
                Ok(k) => {
                    s.output.drain(..k);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads what node `n` sent and acts on each whole frame; false if the connection failed
    /// or the node sent what no Redis connection sends. At most [`READS_PER_WAKE`] reads: a
    /// node that sends without pause (a flood of messages on a channel) is read again after a
    /// look at the others.
    fn read(&mut self, n: usize) -> bool {
        for _ in 0..READS_PER_WAKE {
            let Link::Up(s) = &mut self.nodes[n].link else {
                return true;
            };
            match s.stream.read(&mut self.chunk) {
                Ok(0) => return false,
                Ok(k) => {
                    s.input.extend_from_slice(&self.chunk[..k]);
                    if !self.take_frames(n) {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Acts on each whole frame in node `n`'s input, leaving the rest; false if one is not
    /// what the connection expects.
    fn take_frames(&mut self, n: usize) -> bool {
        let mut at = 0;
        loop {
            let Link::Up(s) = &mut self.nodes[n].link else {
                return true;
            };
            let frame = match parse(&s.input[at..]) {
                Ok(Some((frame, used))) => {
                    at += used;
                    frame
                }
                Ok(None) => {
                    s.input.drain(..at);
                    return true;
                }
                Err(()) => return false,
            };
            s.heard_at = Instant::now();
            s.answered_at = s.heard_at;
            if !self.on_frame(n, frame) {
                return false;
            }
        }
    }

    /// Acts on one frame from node `n`; false if it is not what the connection expects.
    fn on_frame(&mut self, n: usize, frame: Frame) -> bool {
        let registry = &self.registry;
        let node = &mut self.nodes[n];
        let Link::Up(s) = &mut node.link else {
            return true;
        };
        let Frame::Array(items) = frame else {
            // An error: a (un)subscription refused (an ACL on channels, say). Reconnect, as a
            // `Subscriber` does.
            return false;
        };
        match items.first().map(Vec::as_slice) {
            Some(b"message") if items.len() == 3 => {
                if s.unconfirmed == 0 && registry.failing[node.index].load(Ordering::Relaxed) {
                    registry.set_failing(node.index, false, true);
                }
                let channel = String::from_utf8_lossy(&items[1]);
                let payload = String::from_utf8_lossy(&items[2]).into_owned();
                heard(registry, node.index, &channel, payload);
                true
            }
            Some(verb @ (b"subscribe" | b"unsubscribe")) => {
                let Some(q) = s.questions.pop_front() else {
                    return false;
                };
                if (verb == b"subscribe") != (q.asked != Asked::Unsubscribe) {
                    return false;
                }
                if !s.questions.iter().any(|q| q.asked != Asked::Probe) {
                    registry.waiting_for(node.index, false);
                }
                match q.asked {
                    Asked::Subscribe => {
                        // Unless its last waiter left meanwhile: then it lingers.
                        if node.subs.wanted.contains(&q.resource) {
                            node.subs.activate(&q.resource, registry, node.index);
                        }
                        if s.unconfirmed > 0 {
                            s.unconfirmed -= 1;
                            if s.unconfirmed == 0 {
                                registry.set_failing(node.index, false, true);
                            }
                        }
                    }
                    Asked::Probe => {
                        s.probe_late = false;
                        if s.unconfirmed == 0 {
                            registry.set_failing(node.index, false, true);
                        }
                    }
                    Asked::Unsubscribe => {}
                }
                true
            }
            _ => false,
        }
    }

    /// Node `n`'s timers: its connect, lingering subscriptions, probe and late answers.
    fn step(&mut self, n: usize, now: Instant) {
        let node = &mut self.nodes[n];
        match &node.link {
            Link::Down(at) => {
                if !node.subs.wanted.is_empty() && now >= *at {
                    self.connect(n);
                }
            }
            Link::Connecting(rx) => match rx.try_recv() {
                Err(TryRecvError::Empty) => {}
                Ok(Ok(stream)) => self.connected(n, stream, now),
                Ok(Err(e)) => self.connect_failed(n, &e, now),
                Err(TryRecvError::Disconnected) => {
                    self.connect_failed(n, &io::Error::other("the connect thread ended"), now)
                }
            },
            Link::Up(_) => {
                if !self.step_up(n, now) {
                    self.broken(n);
                }
            }
        }
    }

    /// [`step`](Poller::step) on a live connection; false if it failed.
    fn step_up(&mut self, n: usize, now: Instant) -> bool {
        let io_timeout = self.io_timeout;
        let Link::Up(s) = &self.nodes[n].link else {
            return true;
        };
        // An answer that looks late may be waiting in the socket, unread because this process
        // was stopped (a `poll` cut short by the signal reports nothing ready): read first.
        let looks_late = s
            .questions
            .front()
            .is_some_and(|q| s.late(q, now, io_timeout));
        if looks_late && !self.read(n) {
            return false;
        }
        let node = &mut self.nodes[n];
        let Link::Up(s) = &mut node.link else {
            return true;
        };
        for q in &s.questions {
            if !s.late(q, now, io_timeout) {
                break;
            }
            if q.asked != Asked::Probe {
                return false;
            }
            if !s.probe_late {
                s.probe_late = true;
                // Slow or hung, not gone: no lapse (a slow node keeps its keys).
                self.registry.set_failing(node.index, true, false);
            }
        }
        for res in node.subs.take_due(now) {
            if !self.ask(n, Asked::Unsubscribe, res) {
                return false;
            }
        }
        let node = &mut self.nodes[n];
        let Link::Up(s) = &mut node.link else {
            return true;
        };
        if s.questions.iter().any(|q| q.asked == Asked::Probe)
            || now.saturating_duration_since(s.heard_at) < PROBE_AFTER
        {
            return true;
        }
        match node.subs.probe() {
            Some(res) => {
                let res = Arc::clone(res);
                s.heard_at = now;
                self.ask(n, Asked::Probe, res)
            }
            None => true,
        }
    }

    /// Starts a connect to node `n` on a thread of its own.
    fn connect(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        let (tx, rx) = crossbeam_channel::bounded(1);
        let reach = Arc::clone(&node.reach);
        let waker = Arc::clone(&self.waker);
        let exited = self.exited.clone();
        let (connect_timeout, io_timeout) = (self.connect_timeout, self.io_timeout);
        self.registry.waiting_for(node.index, true);
        let spawned = std::thread::Builder::new()
            .name(format!("redlock-connect-{}", node.index))
            .stack_size(CONNECT_STACK)
            .spawn(move || {
                let _exited = exited;
                let _ = tx.send(reach.connect(connect_timeout, io_timeout));
                let _ = (&*waker).write(b"c");
            });
        match spawned {
            Ok(_) => node.link = Link::Connecting(rx),
            Err(e) => self.connect_failed(n, &e, Instant::now()),
        }
    }

    fn connected(&mut self, n: usize, stream: Stream, now: Instant) {
        let node = &mut self.nodes[n];
        // A new connection has only what it subscribes now.
        node.subs.lingering.clear();
        node.link = Link::Up(Box::new(Session {
            stream,
            input: Vec::new(),
            output: Vec::new(),
            questions: VecDeque::new(),
            since: now,
            heard_at: now,
            answered_at: now,
            unconfirmed: node.subs.wanted.len(),
            probe_late: false,
        }));
        self.registry.waiting_for(node.index, false);
        if node.subs.wanted.is_empty() {
            self.registry.set_failing(node.index, false, true);
            return;
        }
        let wanted: Vec<Arc<str>> = node.subs.wanted.iter().cloned().collect();
        for res in wanted {
            if !self.ask(n, Asked::Subscribe, res) {
                self.broken(n);
                return;
            }
        }
    }

    fn connect_failed(&mut self, n: usize, e: &io::Error, now: Instant) {
        let node = &mut self.nodes[n];
        self.registry.waiting_for(node.index, false);
        self.registry.set_failing(node.index, true, true);
        node.link = Link::Down(now + node.backoff);
        let e = redis::RedisError::from(io::Error::new(e.kind(), e.to_string()));
        node.backoff = next_backoff(node.backoff, &e);
    }

    /// Node `n`'s connection failed: until it is made again and resubscribed, releases on the
    /// node go unheard. One that worked for [`STABLE`] is made again at once (a restarted node
    /// is back as soon as it listens); one that broke sooner, before the node confirmed its
    /// subscriptions or just after, counts as a failed connect: a server that is not Redis, or
    /// that drops every connection it confirms, is not tried in a loop. One that no waiter
    /// listens on (a server closing idle connections) fails nobody: the next waiter connects
    /// again, as with a `Subscriber`, which does not read an idle connection.
    fn broken(&mut self, n: usize) {
        let now = Instant::now();
        let node = &mut self.nodes[n];
        let Link::Up(s) = std::mem::replace(&mut node.link, Link::Down(now)) else {
            return;
        };
        self.registry.waiting_for(node.index, false);
        if !node.subs.wanted.is_empty() {
            self.registry.set_failing(node.index, true, true);
        }
        node.subs.drop_active(&self.registry, node.index);
        // Gone with the connection: nothing is left to unsubscribe.
        node.subs.lingering.clear();
        if s.unconfirmed == 0 && now.saturating_duration_since(s.since) >= STABLE {
            node.backoff = BACKOFF_MIN;
        } else {
            node.link = Link::Down(now + node.backoff);
            node.backoff = (node.backoff * 2).min(Duration::from_secs(1));
        }
    }
}

fn pollfd(fd: RawFd, write: bool) -> libc::pollfd {
    let events = if write {
        libc::POLLIN | libc::POLLOUT
    } else {
        libc::POLLIN
    };
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_whole_or_not_at_all() {
        let msg = b"*3\r\n$7\r\nmessage\r\n$3\r\nabc\r\n$2\r\nxy\r\n";
        let (frame, used) = parse(msg).unwrap().unwrap();
        assert_eq!(used, msg.len());
        assert_eq!(
            frame,
            Frame::Array(vec![b"message".to_vec(), b"abc".to_vec(), b"xy".to_vec()])
        );
        for cut in 0..msg.len() {
            assert_eq!(parse(&msg[..cut]), Ok(None), "cut at {cut}");
        }
        let confirm = b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n";
        assert_eq!(
            parse(confirm).unwrap().unwrap().0,
            Frame::Array(vec![b"subscribe".to_vec(), b"c".to_vec(), b"1".to_vec()])
        );
        assert_eq!(
            parse(b"-NOPERM no\r\n").unwrap().unwrap().0,
            Frame::Error("NOPERM no".into())
        );
    }

    #[test]
    fn what_no_subscribed_redis_connection_sends_is_refused() {
        for bad in [
            &b"HTTP/1.1 400 Bad Request\r\n"[..],
            b"+OK\r\n",
            b"*x\r\n",
            b"*1\r\n$3\r\nabcd\r\n",
            b"*1\r\n+x\r\n",
            b"*99\r\n",
        ] {
            assert_eq!(parse(bad), Err(()), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse(&vec![b'*'; LINE_MAX + 2]), Err(()));
    }
}
