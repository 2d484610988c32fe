//! `redlock elect` and `redlock leader`, the built binary against real redis-server nodes.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{Cluster, eventually, wait_timeout};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// Records its term's start, a beat every 20 ms, and (on SIGTERM or SIGINT) its stop, each
/// with the wall clock in ns, to the file it is given.
const RECORDER: &str = r#"
import os, signal, sys, time
f = open(sys.argv[1], "a", buffering=1)
term, who = os.environ["REDLOCK_TERM"], os.environ["REDLOCK_IDENTITY"]
def stop(*_):
    f.write(f"{term} {who} stop {time.time_ns()}\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
f.write(f"{term} {who} start {time.time_ns()}\n")
while True:
    f.write(f"{term} {who} beat {time.time_ns()}\n")
    time.sleep(0.02)
"#;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-elect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn redlock(cluster: &Cluster, sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg(sub)
        .args(["--node-timeout", "500ms"])
        .args(args)
        .env("REDLOCK_NODES", cluster.urls().join(","))
        .stdin(Stdio::null());
    c
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Per term: who ran, and the first and last time recorded (ns), and whether it recorded a stop.
#[derive(Debug)]
struct Span {
    who: String,
    first: u128,
    last: u128,
    stopped: bool,
}

fn spans(dir: &Path) -> BTreeMap<u64, Span> {
    let mut out: BTreeMap<u64, Span> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        for line in text.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let [term, who, what, at] = parts[..] else {
                continue;
            };
            let (term, at): (u64, u128) = (term.parse().unwrap(), at.parse().unwrap());
            let span = out.entry(term).or_insert(Span {
                who: who.to_owned(),
                first: at,
                last: at,
                stopped: false,
            });
            assert_eq!(span.who, who, "one term, one leader");
            span.first = span.first.min(at);
            span.last = span.last.max(at);
            span.stopped |= what == "stop";
        }
    }
    out
}

fn leader_of(cluster: &Cluster, name: &str) -> Option<(String, u64)> {
    let o = redlock(cluster, "leader", &["--json", name])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    let l = v.get("leader")?;
    Some((l["identity"].as_str()?.to_owned(), l["term"].as_u64()?))
}

#[test]
fn three_sidecars_never_overlap_through_a_kill_and_a_sigint_and_terms_increase() {
    let cluster = Cluster::start(3);
    let dir = tmp("sidecars");
    let script = dir.join("rec.py");
    std::fs::write(&script, RECORDER).unwrap();
    let records = dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    let mut children: Vec<(String, Child)> = (0..3)
        .map(|i| {
            let who = format!("c{i}");
            let out = records.join(&who);
            let child = redlock(
                &cluster,
                "elect",
                &[
                    "--ttl",
                    "2s",
                    "--kill-grace",
                    "300ms",
                    "--identity",
                    &who,
                    "jobs",
                    "--",
                    "python3",
                    script.to_str().unwrap(),
                    out.to_str().unwrap(),
                ],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
            (who, child)
        })
        .collect();
    let leading =
        |terms: usize| eventually(Duration::from_secs(20), || spans(&records).len() >= terms);
    assert!(leading(1), "someone leads");
    let (first, _) = leader_of(&cluster, "jobs").expect("redlock leader shows the leader");
    let i = children.iter().position(|(w, _)| *w == first).unwrap();
    // The leader's redlock dies: its command must die with it, and nobody else may lead
    // until the leadership's TTL has run out.
    let (_, mut killed) = children.remove(i);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(leading(2), "a new leader after the TTL");
    let (second, _) = leader_of(&cluster, "jobs").expect("a leader");
    assert_ne!(second, first);
    // SIGINT to the new leader: it stops its command, then resigns; the third takes over at
    // once rather than after a TTL.
    let i = children.iter().position(|(w, _)| *w == second).unwrap();
    let (_, mut interrupted) = children.remove(i);
    signal(&interrupted, libc::SIGINT);
    let status = wait_timeout(&mut interrupted, Duration::from_secs(10)).expect("it exits");
    assert_eq!(status.code(), Some(0));
    assert!(leading(3), "the third leads");
    let (_, mut last) = children.remove(0);
    signal(&last, libc::SIGTERM);
    assert_eq!(
        wait_timeout(&mut last, Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );

    let spans = spans(&records);
    assert_eq!(spans.len(), 3, "{spans:?}");
    let ordered: Vec<(&u64, &Span)> = spans.iter().collect();
    for pair in ordered.windows(2) {
        let ((t1, a), (t2, b)) = (pair[0], pair[1]);
        assert!(
            a.last < b.first,
            "term {t1} ({}) recorded until {} ns, after term {t2} ({}) began at {} ns",
            a.who,
            a.last,
            b.who,
            b.first
        );
    }
    // Ordered by term is ordered by time (checked above), and the stops came from the signals.
    let whos: Vec<&str> = ordered.iter().map(|(_, s)| s.who.as_str()).collect();
    assert_eq!(whos[0], first);
    assert_eq!(whos[1], second);
    assert!(
        !ordered[0].1.stopped,
        "the killed leader's command died by SIGKILL"
    );
    assert!(ordered[1].1.stopped && ordered[2].1.stopped);
    // The resignation handed over quickly: well within the 2 s TTL.
    let handover = Duration::from_nanos((ordered[2].1.first - ordered[1].1.last) as u64);
    assert!(handover < Duration::from_secs(1), "{handover:?}");
    assert_eq!(leader_of(&cluster, "jobs"), None);
}

#[test]
fn once_exits_with_the_commands_code_and_leader_reports_exit_3_when_nobody_leads() {
    let cluster = Cluster::start(3);
    let o = redlock(&cluster, "leader", &["solo"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nobody leads"));

    let o = redlock(
        &cluster,
        "elect",
        &[
            "--once",
            "--identity",
            "me",
            "solo",
            "--",
            "sh",
            "-c",
            "test \"$REDLOCK_IDENTITY\" = me && test \"$REDLOCK_ELECTION\" = solo && \
             test \"$REDLOCK_TERM\" -gt 0 && exit 7",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Resigned once the command exited.
    assert_eq!(leader_of(&cluster, "solo"), None);

    // While a command runs, `redlock leader` shows it.
    let mut child = redlock(
        &cluster,
        "elect",
        &["--once", "--identity", "busy", "solo", "--", "sleep", "30"],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(10), || leader_of(
        &cluster, "solo"
    )
    .is_some()));
    let o = redlock(&cluster, "leader", &["--json", "solo"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["name"], "solo");
    assert_eq!(v["leader"]["identity"], "busy");
    assert!(v["leader"]["transitions"].as_u64().unwrap() >= 2);
    assert!(v["leader"]["ttl_ms"].as_u64().unwrap() <= 15_000);
    signal(&child, libc::SIGTERM);
    // With --once, the command's own status: sleep died of SIGTERM.
    assert_eq!(
        wait_timeout(&mut child, Duration::from_secs(10)).and_then(|s| s.code()),
        Some(128 + libc::SIGTERM)
    );
    assert_eq!(leader_of(&cluster, "solo"), None);
}

#[test]
fn bad_arguments_exit_64() {
    let cluster = Cluster::start(1);
    for args in [
        &["jobs"][..],
        &["--identity", "", "jobs", "--", "true"],
        &["--ttl", "0", "jobs", "--", "true"],
        &["--ttl", "100ms", "jobs", "--", "true"],
        &["", "--", "true"],
        &["--bogus", "jobs", "--", "true"],
    ] {
        let o = redlock(&cluster, "elect", args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let o = redlock(&cluster, "leader", &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(64));
}

/// `GET /metrics` from a running redlock.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The samples of a Prometheus text exposition as `prometheus_client`'s parser reads it (name
/// with labels → value): a text it cannot parse fails.
fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value}")
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client could not parse the exposition (pip install prometheus_client): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn stats_refuses_what_it_cannot_read() {
    let o = Command::new(BIN).arg("stats").output().unwrap();
    assert_eq!(o.status.code(), Some(64));
    let o = Command::new(BIN)
        .args(["stats", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(64));
    // Nothing listens there.
    let port = support::free_port().to_string();
    let o = Command::new(BIN).args(["stats", &port]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(69), "{err}");
    assert!(err.contains("--metrics-addr"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Something that is not a redlock: a redis-server's port answers no HTTP.
    let cluster = Cluster::start(1);
    let port = cluster.urls()[0].rsplit(':').next().unwrap().to_owned();
    let o = Command::new(BIN).args(["stats", &port]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn metrics_addr_serves_prometheus_text_while_the_command_runs() {
    let cluster = Cluster::start(3);
    for (sub, args) in [
        ("run", vec!["held", "--", "sleep", "30"]),
        (
            "elect",
            vec!["--identity", "m", "metered", "--", "sleep", "30"],
        ),
    ] {
        let port = support::free_port();
        let port_text = port.to_string();
        let mut all = vec!["--metrics-addr", port_text.as_str()];
        all.extend(args.iter().copied());
        let mut child = redlock(&cluster, sub, &all)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kind = if sub == "run" { "plain" } else { "leader" };
        let want = format!("redlock_acquisitions_total{{kind=\"{kind}\",outcome=\"acquired\"}}");
        let mut samples = BTreeMap::new();
        assert!(
            eventually(Duration::from_secs(10), || {
                samples = scrape(port)
                    .map(|t| parse_prometheus(&t))
                    .unwrap_or_default();
                samples.get(&want) == Some(&1.0)
            }),
            "{sub}: {samples:?}"
        );
        assert_eq!(samples.get("redlock_locks_held{}"), Some(&1.0), "{sub}");
        let up: f64 = samples
            .iter()
            .filter(|(k, _)| k.starts_with("redlock_node_up{"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(up, 3.0, "{sub}: every node up");

        // `redlock stats` reads the same counters as JSON, and as a summary. The acquisition
        // returned on a quorum: the last node's answer may still be unread, so read until every
        // node has answered once.
        let stats = || {
            let o = Command::new(BIN)
                .args(["stats", "--json", &port_text])
                .output()
                .unwrap();
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
        };
        let mut s = stats();
        assert!(
            eventually(Duration::from_secs(5), || {
                s = stats();
                s["nodes"].as_array().is_some_and(|nodes| {
                    nodes
                        .iter()
                        .all(|n| n["command_duration"]["count"].as_u64() >= Some(1))
                })
            }),
            "{sub}: a node never answered: {s}"
        );
        assert_eq!(s["locks_held"], 1, "{sub}: {s}");
        let acquired: Vec<&serde_json::Value> = s["acquisitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["outcome"] == "acquired" && a["kind"] == kind)
            .collect();
        assert_eq!(acquired.len(), 1, "{sub}: {s}");
        assert_eq!(acquired[0]["count"], 1);
        assert!(acquired[0]["duration"]["p50_seconds"].as_f64().unwrap() > 0.0);
        let nodes = s["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3);
        for (n, url) in nodes.iter().zip(cluster.urls()) {
            assert_eq!(n["node"], url.trim_start_matches("redis://"), "{sub}: {s}");
            assert_eq!(n["up"], true);
            assert_eq!(n["errors"], 0);
            assert!(
                n["command_duration"]["count"].as_u64().unwrap() >= 1,
                "{sub}: {s}"
            );
        }
        let o = Command::new(BIN)
            .args(["stats", &port_text])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0));
        assert!(text.contains("held now 1"), "{text}");
        for url in cluster.urls() {
            assert!(text.contains(url.trim_start_matches("redis://")), "{text}");
        }
        signal(&child, libc::SIGTERM);
        assert!(wait_timeout(&mut child, Duration::from_secs(10)).is_some());
    }
}
