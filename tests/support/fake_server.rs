//! Fake servers for tests that need a server to say what no real one can be made to say on
//! cue: a listener that holds connections open silently, or speaks just enough RESP for the
//! connection handshake and then misbehaves; a tiny lock node whose `INFO` reports a chosen
//! uptime (a process started at a chosen instant of a wall-clock second); and a port that
//! refuses every connection.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Accepts connections and holds them open, never reading or writing a byte.
    Silent,
    /// Answers the handshake (`CLIENT SETINFO`, `SCRIPT EXISTS`, `SCRIPT LOAD`, `PING`)
    /// properly; to anything else writes `reply`, then closes the connection when `close`.
    Answer { reply: &'static [u8], close: bool },
    /// A standalone master with one keyspace shared by its connections: `SET … NX` takes a
    /// free key, any `EVALSHA` deletes its first key and answers 1 (a release), `TIME` tells
    /// the real time, and `INFO` reports `uptime_in_seconds` as Redis computes it,
    /// `floor(now) − floor(start)`, for a process that started `phase` into a wall-clock second
    /// when this server was made: at 0.95 s, a process 0.1 s old reports 1 s. `INFO` reports
    /// `role` (`master`, or `active-replica` to play a KeyDB active replica).
    Node { phase: Duration, role: &'static str },
}

pub struct FakeServer {
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// Commands that got the misbehaving answer.
    pub misbehaved: Arc<AtomicUsize>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeServer {
    pub fn start(behaviour: Behaviour) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let misbehaved = Arc::new(AtomicUsize::new(0));
        let started = std::time::Instant::now();
        let keys = Arc::new(Mutex::new(HashMap::new()));
        let acceptor = {
            let stop = Arc::clone(&stop);
            let misbehaved = Arc::clone(&misbehaved);
            std::thread::spawn(move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let Ok((stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    stream.set_nonblocking(false).unwrap();
                    match behaviour {
                        Behaviour::Silent => held.push(stream),
                        Behaviour::Answer { reply, close } => {
                            let stop = Arc::clone(&stop);
                            let misbehaved = Arc::clone(&misbehaved);
                            std::thread::spawn(move || {
                                serve(stream, reply, close, &stop, &misbehaved)
                            });
                        }
                        Behaviour::Node { phase, role } => {
                            let stop = Arc::clone(&stop);
                            let node = FakeNode {
                                started,
                                phase,
                                role,
                                keys: Arc::clone(&keys),
                            };
                            std::thread::spawn(move || node.serve(stream, &stop));
                        }
                    }
                }
            })
        };
        FakeServer {
            port,
            stop,
            misbehaved,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    reply: &[u8],
    close: bool,
    stop: &AtomicBool,
    misbehaved: &AtomicUsize,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        while let Some((args, used)) = parse_command(&buf) {
            buf.drain(..used);
            if let Some(answer) = handshake(&args) {
                if stream.write_all(&answer).is_err() {
                    return;
                }
                continue;
            }
            misbehaved.fetch_add(1, Ordering::SeqCst);
            if stream.write_all(reply).is_err() {
                return;
            }
            if close {
                // FIN after the partial reply (not a reset that could discard it), then wait
                // for the client to hang up.
                let _ = stream.shutdown(Shutdown::Write);
                while !stop.load(Ordering::SeqCst) {
                    match stream.read(&mut chunk) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(e) if is_tick(&e) => {}
                        Err(_) => return,
                    }
                }
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_tick(&e) => {}
            Err(_) => return,
        }
    }
}

/// The state behind [`Behaviour::Node`].
struct FakeNode {
    started: std::time::Instant,
    phase: Duration,
    role: &'static str,
    keys: Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>,
}

impl FakeNode {
    fn serve(self, mut stream: TcpStream, stop: &AtomicBool) {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            while let Some((args, used)) = parse_command(&buf) {
                buf.drain(..used);
                let answer = handshake(&args).unwrap_or_else(|| self.answer(&args));
                if stream.write_all(&answer).is_err() {
                    return;
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if is_tick(&e) => {}
                Err(_) => return,
            }
        }
    }

    fn answer(&self, args: &[Vec<u8>]) -> Vec<u8> {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let mut keys = self.keys.lock().unwrap();
        match name.as_str() {
            "INFO" => {
                let age = self.started.elapsed() + self.phase;
                let uptime = age.as_secs(); // floor(start + age) − floor(start), start at `phase`
                let text = format!(
                    "# Server\r\nredis_version:7.0.15\r\nrun_id:fake{:x}\r\n\
                     uptime_in_seconds:{uptime}\r\nrole:{}\r\nconnected_slaves:0\r\n\
                     cluster_enabled:0\r\n",
                    self.phase.as_nanos(),
                    self.role
                );
                format!("${}\r\n{text}\r\n", text.len()).into_bytes()
            }
            "CONFIG" => b"*0\r\n".to_vec(),
            "TIME" => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap();
                let (secs, micros) = (now.as_secs().to_string(), now.subsec_micros().to_string());
                format!(
                    "*2\r\n${}\r\n{secs}\r\n${}\r\n{micros}\r\n",
                    secs.len(),
                    micros.len()
                )
                .into_bytes()
            }
            "SET" => {
                if keys.contains_key(&args[1]) {
                    b"$-1\r\n".to_vec()
                } else {
                    keys.insert(args[1].clone(), args[2].clone());
                    b"+OK\r\n".to_vec()
                }
            }
            "EVALSHA" => {
                keys.remove(&args[3]);
                b":1\r\n".to_vec()
            }
            other => format!("-ERR the fake node does not know {other}\r\n").into_bytes(),
        }
    }
}

fn is_tick(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Proper answers to what redis-rs and the library send when they connect.
fn handshake(args: &[Vec<u8>]) -> Option<Vec<u8>> {
    let name = |i: usize| {
        args.get(i)
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
    };
    match (name(0)?.as_str(), name(1).as_deref()) {
        ("CLIENT", _) => Some(b"+OK\r\n".to_vec()),
        ("PING", _) => Some(b"+PONG\r\n".to_vec()),
        ("SCRIPT", Some("LOAD")) => {
            let source = std::str::from_utf8(args.get(2)?).ok()?;
            let sha = redis::Script::new(source).get_hash().to_owned();
            Some(format!("${}\r\n{sha}\r\n", sha.len()).into_bytes())
        }
        // A server that has none of the scripts yet.
        ("SCRIPT", Some("EXISTS")) => {
            let shas = args.len() - 2;
            Some(format!("*{shas}\r\n{}", ":0\r\n".repeat(shas)).into_bytes())
        }
        _ => None,
    }
}

/// One command (a RESP array of bulk strings) from the front of `buf`, and its length.
fn parse_command(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let (n, mut at) = parse_header(buf, 0, b'*')?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, start) = parse_header(buf, at, b'$')?;
        let end = start + len;
        if buf.len() < end + 2 {
            return None;
        }
        args.push(buf[start..end].to_vec());
        at = end + 2;
    }
    Some((args, at))
}

/// `<prefix><number>\r\n` at `at`: the number and where the line ends.
fn parse_header(buf: &[u8], at: usize, prefix: u8) -> Option<(usize, usize)> {
    let rest = buf.get(at..)?;
    if rest.is_empty() {
        return None;
    }
    assert_eq!(rest[0], prefix, "unexpected RESP from the client");
    let line = rest.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&rest[1..line]).ok()?.parse().ok()?;
    Some((number, at + line + 2))
}

/// A port nothing listens on, for as long as it lives: its socket stays bound without
/// listening, so connecting is refused, and without `SO_REUSEADDR`, so no other process (a
/// redis-server another test starts on a "free" port, say) can take the port meanwhile.
pub struct DeadPort {
    fd: libc::c_int,
    pub port: u16,
}

impl DeadPort {
    pub fn bind() -> DeadPort {
        // SAFETY: plain socket calls on a socket we own, with a correctly sized address.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let at = &mut addr as *mut libc::sockaddr_in as *mut libc::sockaddr;
            assert_eq!(
                libc::bind(fd, at, len),
                0,
                "bind: {}",
                std::io::Error::last_os_error()
            );
            assert_eq!(
                libc::getsockname(fd, at, &mut len),
                0,
                "getsockname: {}",
                std::io::Error::last_os_error()
            );
            DeadPort {
                fd,
                port: u16::from_be(addr.sin_port),
            }
        }
    }
}

impl Drop for DeadPort {
    fn drop(&mut self) {
        // SAFETY: closing the socket this guard owns, once.
        unsafe {
            libc::close(self.fd);
        }
    }
}
