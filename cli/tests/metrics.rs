//! `--metrics-addr` against clients that misbehave: slow ones, oversized requests, too many
//! connections; and the warning when it binds beyond loopback. (What it serves:
//! `cli/tests/elect.rs::metrics_addr_serves_prometheus_text_while_the_command_runs`.)

#[path = "../../tests/support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{Cluster, eventually};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// A `redlock run --metrics-addr PORT` holding a lock while `sleep 60` runs, once its endpoint
/// shows the lock held; stopped on drop.
struct Serving {
    child: Child,
    port: u16,
}

impl Serving {
    fn start(cluster: &Cluster) -> Serving {
        let port = support::free_port();
        let child = Command::new(BIN)
            .args(["run", "--node-timeout", "500ms", "--metrics-addr"])
            .arg(port.to_string())
            .args(["held", "--", "sleep", "60"])
            .env("REDLOCK_NODES", cluster.urls().join(","))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let serving = Serving { child, port };
        assert!(
            eventually(Duration::from_secs(10), || serving
                .scrape(Duration::from_secs(2))
                .is_ok_and(|(_, body)| body.contains("redlock_locks_held 1"))),
            "the metrics endpoint never showed the lock held"
        );
        serving
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).unwrap()
    }

    /// `GET /metrics`, waiting at most `limit` in all: the status line and the body; an error
    /// of kind `TimedOut` when no complete answer came in time, `UnexpectedEof` when the
    /// connection was closed without one.
    fn scrape(&self, limit: Duration) -> std::io::Result<(String, String)> {
        use std::io::{Error, ErrorKind};
        let deadline = Instant::now() + limit;
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::new(
                    ErrorKind::TimedOut,
                    format!("no complete answer within {limit:?}"),
                ));
            }
            s.set_read_timeout(Some(left))?;
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| Error::new(ErrorKind::UnexpectedEof, format!("answer: {text:?}")))?;
        Ok((
            head.lines().next().unwrap_or("").to_owned(),
            body.to_owned(),
        ))
    }

    /// The resident memory of the `redlock` process, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child; SIGTERM stops its command and releases the lock.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// Sends a request that never ends, one byte every 200 ms, for at most `bytes` bytes; returns
/// how many it sent before the server closed the connection (`None`: it never did).
fn trickle(mut s: TcpStream, bytes: usize) -> Option<usize> {
    let request = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
    for i in 0..bytes {
        let byte = request.get(i).copied().unwrap_or(b'a');
        if s.write_all(&[byte]).is_err() {
            return Some(i);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

#[test]
fn slow_clients_hold_up_no_scrape_and_are_cut_off() {
    let cluster = Cluster::start(1);
    let serving = Serving::start(&cluster);
    // Three clients that would take 20 s each to send 100 bytes of a request that never ends.
    let slow: Vec<_> = (0..3)
        .map(|_| {
            let s = serving.connect();
            std::thread::spawn(move || trickle(s, 100))
        })
        .collect();
    // They are being read from: each has sent a few bytes.
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let (status, body) = serving
            .scrape(Duration::from_secs(5))
            .expect("a scrape beside the slow clients");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        assert!(body.contains("redlock_locks_held 1"), "{body}");
    }
    // Each slow client was cut off once its request took too long, long before it would have
    // sent all of its bytes.
    for t in slow {
        let sent = t.join().unwrap();
        assert!(
            sent.is_some_and(|n| n < 50),
            "a slow client was not cut off: {sent:?}"
        );
    }
}

#[test]
fn an_oversized_request_is_refused_and_the_memory_stays_flat() {
    let cluster = Cluster::start(1);
    let serving = Serving::start(&cluster);
    let before = serving.rss_kib();
    // 64 MiB without a newline.
    let mut s = serving.connect();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0usize;
    let mut error = None;
    while sent < 64 << 20 {
        match s.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let after = serving.rss_kib();
    assert!(
        after < before + 4096,
        "the resident memory of redlock grew from {before} KiB to {after} KiB"
    );
    assert!(
        error.is_some(),
        "the server read all {sent} bytes of a request without a newline"
    );
    // The endpoint still answers.
    let (status, _) = serving.scrape(Duration::from_secs(5)).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}

#[test]
fn request_headers_beyond_the_cap_get_431() {
    let cluster = Cluster::start(1);
    let serving = Serving::start(&cluster);
    let mut s = serving.connect();
    let header = format!("X-Big: {}\r\n", "a".repeat(16 << 10));
    write!(s, "GET /metrics HTTP/1.1\r\n{header}\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "answer to a 16 KiB header: {answer:?}"
    );
}

#[test]
fn connections_beyond_the_cap_are_turned_away_at_once() {
    let cluster = Cluster::start(1);
    let serving = Serving::start(&cluster);
    // Idle connections, each holding a slot until the request deadline closes it.
    let idle: Vec<TcpStream> = (0..16).map(|_| serving.connect()).collect();
    // A 17th is closed unanswered at once: neither served after them nor left waiting.
    match serving.scrape(Duration::from_secs(5)) {
        Err(e) if e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("a 17th connection beside 16 idle ones: {other:?}"),
    }
    drop(idle);
    // Once their slots are free again, scrapes are served.
    assert!(eventually(Duration::from_secs(5), || serving
        .scrape(Duration::from_secs(2))
        .is_ok_and(|(status, _)| status.starts_with("HTTP/1.1 200"))));
}

#[test]
fn binding_beyond_loopback_warns() {
    let cluster = Cluster::start(1);
    for (addr, warns) in [
        (format!("0.0.0.0:{}", support::free_port()), true),
        (support::free_port().to_string(), false),
    ] {
        let o = Command::new(BIN)
            .args(["run", "--node-timeout", "500ms", "--wait", "0"])
            .args(["--metrics-addr", &addr, "r", "--", "true"])
            .env("REDLOCK_NODES", cluster.urls().join(","))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(err.contains("serving metrics"), "{err}");
        assert_eq!(
            err.contains("warning: the metrics endpoint is reachable beyond this host"),
            warns,
            "--metrics-addr {addr}: {err}"
        );
    }
}
