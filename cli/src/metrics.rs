//! `--metrics-addr`: the client's counters in the Prometheus text format (`GET /metrics`) and
//! as JSON (`GET /stats.json`), served over HTTP while `run` or `elect` runs its command; and
//! `redlock stats`, which reads the JSON of such a process.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redquorum::{BUCKETS, Histogram, Redlock, Stats};
use serde_json::{Value as Json, json};

use crate::exit::{EXIT_SOFTWARE, EXIT_UNAVAILABLE, Failure};

/// Where to listen, or whom to ask: `PORT` (on localhost), `HOST:PORT` or `[V6]:PORT`.
pub fn address(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("empty: give PORT or HOST:PORT".into());
    }
    if text.parse::<u16>().is_ok() {
        return Ok(format!("127.0.0.1:{text}"));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(text.into()),
        _ => Err("give PORT (on localhost) or HOST:PORT".into()),
    }
}

/// Connections served at once; more are closed unanswered until one ends.
const MAX_CONNECTIONS: usize = 16;
/// The longest request (request line and headers) read: a longer one gets 431.
const MAX_REQUEST: usize = 8 << 10;
/// A whole request must arrive within this, and the whole answer be taken within it again.
const DEADLINE: Duration = Duration::from_secs(2);
/// After an error answer, what the client still sends is read for this long, up to
/// [`LINGER_BYTES`], before closing, so that the close does not reset the connection before
/// the client reads the answer.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 64 << 10;

/// Binds `addr` and serves `GET /metrics` for as long as the process runs: an accepting thread,
/// and a thread per connection, at most [`MAX_CONNECTIONS`] at once, each bounded by
/// [`DEADLINE`] and [`MAX_REQUEST`], so that no client holds up another or grows the process.
pub fn serve(addr: &str, client: &Redlock) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        Failure::new(
            EXIT_SOFTWARE,
            format!("cannot serve metrics on {addr}: {e}"),
        )
    })?;
    let bound = listener.local_addr().ok();
    let shown = bound.map_or_else(|| addr.to_owned(), |a| a.to_string());
    let client = client.clone();
    std::thread::Builder::new()
        .name("redlock-metrics".into())
        .spawn(move || accept(listener, client))
        .map_err(|e| Failure::new(EXIT_SOFTWARE, format!("cannot start a thread: {e}")))?;
    errln!("redlock: serving metrics on http://{shown}/metrics");
    if bound.is_some_and(|a| !a.ip().is_loopback()) {
        errln!(
            "redlock: warning: the metrics endpoint is reachable beyond this host, without \
             authentication: whoever reaches http://{shown}/ reads the counters and the nodes' \
             addresses; give --metrics-addr PORT (localhost only) unless a firewall guards the port"
        );
    }
    Ok(())
}

/// A connection's place among the [`MAX_CONNECTIONS`], given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn accept(listener: TcpListener, client: Redlock) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // Out of file descriptors, say: wait for some to be closed.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if active.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let slot = Slot(active.clone());
        let client = client.clone();
        // A failed spawn drops the closure, and with it the connection and its slot.
        let _ = std::thread::Builder::new()
            .name("redlock-metrics-conn".into())
            .spawn(move || {
                let _slot = slot;
                let _ = answer(stream, &client);
            });
    }
}

/// Why a request was not read.
enum Unread {
    TooLarge,
    TimedOut,
    Io,
}

/// The request line and headers, read until the blank line that ends them.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<String, Unread> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let ends =
            |h: &[u8]| h.windows(4).any(|w| w == b"\r\n\r\n") || h.windows(2).any(|w| w == b"\n\n");
        if ends(&head) {
            return Ok(String::from_utf8_lossy(&head).into_owned());
        }
        if head.len() >= MAX_REQUEST {
            return Err(Unread::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(Unread::TimedOut);
        }
        let room = (MAX_REQUEST - head.len()).min(buf.len());
        match stream.read(&mut buf[..room]) {
            Ok(0) => return Err(Unread::Io),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Unread::TimedOut);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(Unread::Io),
        }
    }
}

/// Writes all of `bytes` by `deadline`.
fn write_by(stream: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn reply(stream: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    write_by(stream, text.as_bytes(), Instant::now() + DEADLINE)
}

fn answer(mut stream: TcpStream, client: &Redlock) -> std::io::Result<()> {
    let refused = match read_head(&mut stream, Instant::now() + DEADLINE) {
        Ok(head) => {
            let request = head.lines().next().unwrap_or("");
            let path = request.split(' ').nth(1).unwrap_or("");
            let get = request.starts_with("GET ");
            let (status, kind, body) = match path {
                "/metrics" | "/" if get => (
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    client.stats().prometheus(),
                ),
                "/stats.json" if get => (
                    "200 OK",
                    "application/json",
                    format!("{}\n", stats_json(&client.stats())),
                ),
                _ => (
                    "404 Not Found",
                    "text/plain; charset=utf-8",
                    "not found: GET /metrics or GET /stats.json\n".to_owned(),
                ),
            };
            return reply(&mut stream, status, kind, &body);
        }
        Err(Unread::Io) => return Ok(()),
        Err(Unread::TooLarge) => "431 Request Header Fields Too Large",
        Err(Unread::TimedOut) => "408 Request Timeout",
    };
    let plain = "text/plain; charset=utf-8";
    reply(&mut stream, refused, plain, &format!("{refused}\n"))?;
    stream.shutdown(Shutdown::Write)?;
    let until = Instant::now() + LINGER;
    let mut buf = [0u8; 8192];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

/// A histogram as JSON: its count, sum, the p50 and p99 estimated from the buckets, and the
/// buckets (`le`: upper bound in seconds, `count`: observations in it, not cumulative).
fn histogram_json(h: &Histogram) -> Json {
    let buckets: Vec<Json> = h
        .buckets
        .iter()
        .enumerate()
        .map(|(i, n)| match BUCKETS.get(i) {
            Some(le) => json!({"le": le, "count": n}),
            None => json!({"le": "+Inf", "count": n}),
        })
        .collect();
    json!({
        "count": h.count,
        "sum_seconds": h.sum.as_secs_f64(),
        "p50_seconds": quantile(h, 0.5),
        "p99_seconds": quantile(h, 0.99),
        "buckets": buckets,
    })
}

/// The `q` quantile of a histogram, estimated as Prometheus's `histogram_quantile` does: linear
/// within the bucket it falls in (the last finite bound when in +Inf); `None` when empty.
pub fn quantile(h: &Histogram, q: f64) -> Option<f64> {
    let total: u64 = h.buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in h.buckets.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let Some(&upper) = BUCKETS.get(i) else {
                return BUCKETS.last().copied();
            };
            let lower = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
            return Some(lower + (upper - lower) * ((rank - below as f64) / n as f64).max(0.0));
        }
        below += n;
    }
    BUCKETS.last().copied()
}

/// The snapshot as one JSON object (`redlock stats --help` documents it).
pub fn stats_json(s: &Stats) -> Json {
    let acquisitions: Vec<Json> = s
        .acquisitions
        .iter()
        .map(|a| {
            json!({
                "outcome": a.outcome,
                "kind": a.kind,
                "count": a.duration.count,
                "duration": histogram_json(&a.duration),
            })
        })
        .collect();
    let lost: serde_json::Map<String, Json> = s
        .lost
        .iter()
        .map(|(reason, n)| ((*reason).to_owned(), json!(n)))
        .collect();
    let nodes: Vec<Json> = s
        .nodes
        .iter()
        .map(|n| {
            json!({
                "node": n.address,
                "up": n.connected,
                "connects": n.connects,
                "restarts": n.restarts,
                "quarantined": n.quarantine_remaining.is_some(),
                "errors": n.errors,
                "votes": {
                    "yes": n.votes.yes,
                    "no": n.votes.no,
                    "unavailable": n.votes.unavailable,
                    "timed_out": n.votes.timed_out,
                    "failed": n.votes.failed,
                    "unanswered": n.votes.unanswered,
                },
                "last_error": n.last_error,
                "command_duration": histogram_json(&n.command_duration),
            })
        })
        .collect();
    json!({
        "acquisitions": acquisitions,
        "hold": histogram_json(&s.hold),
        "wait": histogram_json(&s.wait),
        "extensions": {"ok": s.extensions, "failed": s.extensions_failed},
        "lost": lost,
        "locks_held": s.locks_held,
        "waiters": s.waiters,
        "events_dropped": s.events_dropped,
        "nodes": nodes,
    })
}

/// Show the counters of a running redlock
///
/// Reads the counters of a 'redlock run' or 'redlock elect' started with --metrics-addr: ADDR
/// is that address (PORT for localhost, or HOST:PORT). Prints acquisitions by outcome and kind
/// with their latency, locks held, waiters, losses, extensions, and each node's request
/// latency and errors. Latency quantiles are estimated from the histograms' buckets, as
/// Prometheus's histogram_quantile does. For Prometheus itself, scrape http://ADDR/metrics.
#[derive(clap::Args, Debug)]
#[command(
    verbatim_doc_comment,
    after_help = "\
Exit codes: 0 success; 64 bad arguments; 69 ADDR cannot be reached or is no redlock."
)]
pub struct StatsArgs {
    /// Print the snapshot as JSON (what GET http://ADDR/stats.json serves)
    ///
    /// {"acquisitions": [{"outcome", "kind", "count", "duration"}], "hold", "wait",
    /// "extensions": {"ok", "failed"}, "lost": {"refused", "expired", "suspended"},
    /// "locks_held", "waiters", "events_dropped", "nodes": [{"node", "up", "connects",
    /// "restarts", "quarantined", "errors", "votes": {"yes", "no", "unavailable", "timed_out",
    /// "failed", "unanswered"}, "last_error", "command_duration"}]}; each duration
    /// is {"count", "sum_seconds", "p50_seconds", "p99_seconds", "buckets": [{"le", "count"}]},
    /// the quantiles null when nothing was observed, the bucket counts not cumulative.
    #[arg(long, verbatim_doc_comment)]
    json: bool,
    /// The --metrics-addr of a running 'redlock run' or 'redlock elect'
    #[arg(value_name = "ADDR", value_parser = address)]
    addr: String,
}

/// `redlock stats`.
pub fn stats(o: StatsArgs) -> Result<u8, Failure> {
    let StatsArgs {
        json: as_json,
        addr,
    } = o;
    let body = fetch(&addr, "/stats.json").map_err(|e| Failure::new(EXIT_UNAVAILABLE, e))?;
    let s: Json = serde_json::from_str(&body).map_err(|e| {
        Failure::new(
            EXIT_UNAVAILABLE,
            format!("{addr} answered GET /stats.json with no redlock stats ({e})"),
        )
    })?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
    } else {
        out!("{}", summary(&addr, &s));
    }
    Ok(0)
}

/// `GET path` on `addr` over plain HTTP/1.1; the body of a 200 answer.
fn fetch(addr: &str, path: &str) -> Result<String, String> {
    let unreachable = |e: &dyn std::fmt::Display| {
        format!(
            "cannot read the stats of {addr}: {e}; is a 'redlock run' or 'redlock elect' with \
             --metrics-addr {addr} running?"
        )
    };
    let target = addr
        .to_socket_addrs()
        .map_err(|e| unreachable(&e))?
        .next()
        .ok_or_else(|| unreachable(&"no address"))?;
    let mut s =
        TcpStream::connect_timeout(&target, Duration::from_secs(2)).map_err(|e| unreachable(&e))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .and_then(|()| s.set_write_timeout(Some(Duration::from_secs(5))))
        .and_then(|()| {
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
        })
        .map_err(|e| unreachable(&e))?;
    let mut answer = Vec::new();
    s.take(64 << 20)
        .read_to_end(&mut answer)
        .map_err(|e| unreachable(&e))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr} did not answer in HTTP"))?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200 ") {
        return Err(format!(
            "{addr} answered GET {path} with '{status}': not a redlock with --metrics-addr?"
        ));
    }
    Ok(body.to_owned())
}

fn ms(v: &Json) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_owned(), |s| format!("{:.2}ms", s * 1000.0))
}

/// The human form of a `/stats.json` snapshot.
fn summary(addr: &str, s: &Json) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let n = |v: &Json| v.as_u64().unwrap_or(0);
    let _ = writeln!(out, "redlock at {addr}");
    let _ = writeln!(
        out,
        "held now {}, waiting {}, extensions {} ({} failed), events dropped {}",
        n(&s["locks_held"]),
        n(&s["waiters"]),
        n(&s["extensions"]["ok"]),
        n(&s["extensions"]["failed"]),
        n(&s["events_dropped"]),
    );
    let lost: Vec<String> = s["lost"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k} {}", n(v))).collect())
        .unwrap_or_default();
    let _ = writeln!(out, "lost: {}", lost.join(", "));
    let _ = writeln!(
        out,
        "\n{:<10} {:<10} {:>9} {:>10} {:>10}",
        "outcome", "kind", "count", "p50", "p99"
    );
    for a in s["acquisitions"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<10} {:<10} {:>9} {:>10} {:>10}",
            a["outcome"].as_str().unwrap_or("?"),
            a["kind"].as_str().unwrap_or("?"),
            n(&a["count"]),
            ms(&a["duration"]["p50_seconds"]),
            ms(&a["duration"]["p99_seconds"]),
        );
    }
    for (name, h) in [("hold", &s["hold"]), ("wait", &s["wait"])] {
        let _ = writeln!(
            out,
            "{:<21} {:>9} {:>10} {:>10}",
            name,
            n(&h["count"]),
            ms(&h["p50_seconds"]),
            ms(&h["p99_seconds"])
        );
    }
    let _ = writeln!(
        out,
        "\n{:<24} {:<4} {:>9} {:>7} {:>10} {:>10}",
        "node", "up", "requests", "errors", "p50", "p99"
    );
    for node in s["nodes"].as_array().into_iter().flatten() {
        let d = &node["command_duration"];
        let _ = writeln!(
            out,
            "{:<24} {:<4} {:>9} {:>7} {:>10} {:>10}",
            node["node"].as_str().unwrap_or("?"),
            if node["up"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            },
            n(&d["count"]),
            n(&node["errors"]),
            ms(&d["p50_seconds"]),
            ms(&d["p99_seconds"]),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_localhost() {
        assert_eq!(address("9464").unwrap(), "127.0.0.1:9464");
        assert_eq!(address("0.0.0.0:9464").unwrap(), "0.0.0.0:9464");
        assert_eq!(address("[::1]:9464").unwrap(), "[::1]:9464");
        assert!(address("").is_err());
        assert!(address("host").is_err());
        assert!(address(":9464").is_err());
        assert!(address("host:99999").is_err());
    }

    #[test]
    fn quantiles_follow_the_buckets() {
        let mut h = Histogram::default();
        assert_eq!(quantile(&h, 0.5), None);
        h.buckets = vec![0; BUCKETS.len() + 1];
        // 10 observations in (1 ms, 2.5 ms], 10 in +Inf.
        let i = BUCKETS.iter().position(|&b| b == 0.0025).unwrap();
        h.buckets[i] = 10;
        h.buckets[BUCKETS.len()] = 10;
        let p25 = quantile(&h, 0.25).unwrap();
        assert!((p25 - 0.00175).abs() < 1e-9, "{p25}");
        assert_eq!(quantile(&h, 0.5), Some(0.0025));
        assert_eq!(quantile(&h, 0.99), Some(10.0));
    }
}
