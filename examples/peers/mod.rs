//! The peers the benches measure redquorum beside: node-redlock v5 (with ioredis) and redsync
//! v4.18 (with go-redis v9), each a small program of its own built or installed on first use in
//! a scratch directory, and skipped with a message where `node`, `npm` or `go` is missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const NODE_SCRIPT: &str = r#"
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const urls = process.argv[2].split(",");
const seconds = Number(process.argv[3]);
const clients = urls.map((u) => new Redis(u));
const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
(async () => {
  for (let i = 0; i < 200; i++) await (await redlock.acquire(["bench-node"], 10000)).release();
  const lat = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const t = process.hrtime.bigint();
    const lock = await redlock.acquire(["bench-node"], 10000);
    await lock.release();
    lat.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  lat.sort((a, b) => a - b);
  if (process.env.BENCH_SAMPLES) require("fs").writeFileSync(process.env.BENCH_SAMPLES, lat.join("\n"));
  console.log(JSON.stringify({ config: "node-redlock", nodes: urls.length, threads: 1,
    cycles: lat.length, cycles_per_s: Math.round(lat.length / seconds),
    p50_us: lat[Math.floor(lat.length / 2)], p99_us: lat[Math.floor(lat.length * 0.99)] }));
  clients.forEach((c) => c.disconnect());
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// redsync (Go) on the nodes at `urls`: one mutex per cycle, one try, default options or
/// `WithFailFast(true)` (return once a quorum answered). The program's source, built on first use
/// into a scratch directory with redsync v4.18.1 and go-redis v9.
const GO_REDSYNC: &str = r#"package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func main() {
	urls := strings.Split(os.Args[1], ",")
	seconds, _ := strconv.ParseFloat(os.Args[2], 64)
	failFast := len(os.Args) > 3 && os.Args[3] == "failfast"
	var pools []redis.Pool
	for _, u := range urls {
		opt, err := goredislib.ParseURL(u)
		if err != nil {
			panic(err)
		}
		pools = append(pools, goredis.NewPool(goredislib.NewClient(opt)))
	}
	rs := redsync.New(pools...)
	opts := []redsync.Option{redsync.WithTries(1), redsync.WithExpiry(10 * time.Second)}
	if failFast {
		opts = append(opts, redsync.WithFailFast(true))
	}
	cycle := func() {
		m := rs.NewMutex("bench-redsync", opts...)
		if err := m.Lock(); err != nil {
			panic(err)
		}
		if ok, err := m.Unlock(); !ok || err != nil {
			panic(fmt.Sprint("unlock ", ok, err))
		}
	}
	for i := 0; i < 50; i++ {
		cycle()
	}
	var lat []float64
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		t := time.Now()
		cycle()
		lat = append(lat, float64(time.Since(t).Microseconds()))
	}
	sort.Float64s(lat)
	if path := os.Getenv("BENCH_SAMPLES"); path != "" {
		var b strings.Builder
		for _, v := range lat {
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
			b.WriteByte('\n')
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			panic(err)
		}
	}
	name := "redsync"
	if failFast {
		name = "redsync-failfast"
	}
	out, _ := json.Marshal(map[string]any{"config": name, "nodes": len(urls), "threads": 1, "cycles": len(lat),
		"cycles_per_s": int(float64(len(lat)) / seconds), "p50_us": lat[len(lat)/2], "p99_us": lat[len(lat)*99/100]})
	fmt.Println(string(out))
}
"#;

/// The demo's workload through `--faults`: `WORKERS` goroutines take turns on one mutex (51
/// tries, 5 ms ± 5 ms apart, TTL 2 s, `WithFailFast`), holding it 200 µs. Each line on stdin gets
/// the counts so far, "ACQUIRED GAVE_UP"; the end of stdin ends the program. go-redis's
/// timeouts are `TIMEOUT_MS` and its command retries off, so that a node answering nothing costs
/// a vote one timeout, as redquorum's `node_timeout` does.
const GO_REDSYNC_FAULTS: &str = r#"package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func main() {
	urls := strings.Split(os.Args[1], ",")
	workers, _ := strconv.Atoi(os.Args[2])
	timeoutMs, _ := strconv.Atoi(os.Args[3])
	timeout := time.Duration(timeoutMs) * time.Millisecond
	var pools []redis.Pool
	for _, u := range urls {
		opt, err := goredislib.ParseURL(u)
		if err != nil {
			panic(err)
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.MaxRetries = timeout, timeout, timeout, -1
		pools = append(pools, goredis.NewPool(goredislib.NewClient(opt)))
	}
	rs := redsync.New(pools...)
	delay := func(int) time.Duration { return time.Duration(rand.Int63n(int64(10 * time.Millisecond))) }
	opts := []redsync.Option{redsync.WithExpiry(2 * time.Second), redsync.WithTries(51),
		redsync.WithRetryDelayFunc(delay), redsync.WithFailFast(true)}
	var acquired, gaveUp atomic.Uint64
	for i := 0; i < workers; i++ {
		go func() {
			for {
				m := rs.NewMutex("bench-faults-redsync", opts...)
				if err := m.Lock(); err != nil {
					gaveUp.Add(1)
					continue
				}
				time.Sleep(200 * time.Microsecond)
				acquired.Add(1)
				m.Unlock()
			}
		}()
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Printf("%d %d\n", acquired.Load(), gaveUp.Load())
	}
}
"#;

/// The demo's workload through `--faults` in node-redlock v5: `WORKERS` async loops take turns
/// on one resource (`retryCount` 50, 5 ms ± 5 ms apart, TTL 2 s), holding it 200 µs (node's
/// timers round that up to 1 ms). ioredis's `commandTimeout` is `TIMEOUT_MS`. The same stdin
/// protocol as the Go program's.
const NODE_FAULTS: &str = r#"
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const urls = process.argv[2].split(",");
const workers = Number(process.argv[3]);
const commandTimeout = Number(process.argv[4]);
const clients = urls.map((u) => {
  const c = new Redis(u, { commandTimeout });
  c.on("error", () => {});
  return c;
});
const redlock = new Redlock(clients, { retryCount: 50, retryDelay: 5, retryJitter: 5, driftFactor: 0.01 });
redlock.on("error", () => {});
let acquired = 0, gaveUp = 0;
async function worker() {
  for (;;) {
    let lock;
    try {
      lock = await redlock.acquire(["bench-faults-node"], 2000);
    } catch (e) {
      gaveUp++;
      continue;
    }
    await new Promise((r) => setTimeout(r, 0.2));
    acquired++;
    try { await lock.release(); } catch (e) {}
  }
}
for (let i = 0; i < workers; i++) worker();
require("readline").createInterface({ input: process.stdin })
  .on("line", () => process.stdout.write(`${acquired} ${gaveUp}\n`))
  .on("close", () => process.exit(0));
"#;

/// The Go program `source` built (on first use, and again when its source changed) in a
/// scratch directory named after `name`, with redsync v4.18.1 and go-redis v9; `None` (with a
/// message) when `go` is not here or the modules cannot be fetched.
fn go_program(name: &str, source: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("redlock-bench-{name}"));
    let binary = dir.join(name);
    let current = std::fs::read_to_string(dir.join("main.go")).is_ok_and(|s| s == source);
    if !binary.exists() || !current {
        let _ = std::fs::create_dir_all(&dir);
        std::fs::write(dir.join("main.go"), source).ok()?;
        std::fs::write(dir.join("go.mod"), format!("module {name}\n\ngo 1.21\n")).ok()?;
        let go = |args: &[&str]| {
            Command::new("go")
                .args(args)
                .current_dir(&dir)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !go(&[
            "get",
            "github.com/go-redsync/redsync/v4@v4.18.1",
            "github.com/redis/go-redis/v9",
        ]) || !go(&["build", "-o", name, "."])
        {
            eprintln!(
                "redsync: skipped (go is not on PATH, or fetching or building redsync failed)"
            );
            return None;
        }
    }
    Some(binary)
}

/// A scratch directory with node-redlock v5 and ioredis installed, and `script` written there
/// as `file`; `None` (with a message) when node and npm are not here or the install fails.
fn node_script(file: &str, script: &str) -> Option<PathBuf> {
    let have = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("node") || !have("npm") {
        eprintln!("node-redlock: skipped (node and npm are not both on PATH)");
        return None;
    }
    let dir = std::env::temp_dir().join("redlock-bench-node");
    if !dir.join("node_modules/redlock").exists() || !dir.join("node_modules/ioredis").exists() {
        let _ = std::fs::create_dir_all(&dir);
        let installed = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(["redlock@5.0.0-beta.2", "ioredis@5"])
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            eprintln!("node-redlock: skipped (npm install of redlock@5 and ioredis failed)");
            return None;
        }
    }
    let path = dir.join(file);
    std::fs::write(&path, script).ok()?;
    Some(path)
}

/// The one JSON line a peer's program printed, or `None` (with a message naming `what`).
fn json_line(what: &str, out: std::io::Result<std::process::Output>) -> Option<String> {
    let out = out.ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || line.is_empty() {
        eprintln!(
            "{what}: skipped (it failed: {})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(line)
}

/// redsync's JSON line on the nodes at `urls`, or `None` (with a message) when `go` is not here
/// or the modules cannot be fetched. With `samples`, it also writes its raw samples there (µs,
/// one a line).
pub fn redsync_at(
    urls: &[String],
    length: Duration,
    fail_fast: bool,
    samples: Option<&Path>,
) -> Option<String> {
    let mut cmd = Command::new(go_program("rsbench", GO_REDSYNC)?);
    cmd.arg(urls.join(","))
        .arg(format!("{}", length.as_secs_f64()));
    if fail_fast {
        cmd.arg("failfast");
    }
    if let Some(path) = samples {
        cmd.env("BENCH_SAMPLES", path);
    }
    json_line("redsync", cmd.output())
}

/// node-redlock v5 on the nodes at `urls`: its JSON line (cycles per second, p50 and p99 of the
/// acquire + release cycle in µs), or `None` (with a message) when it cannot run here. With
/// `samples`, it also writes its raw samples there (µs, one a line).
pub fn node_redlock_at(
    urls: &[String],
    length: Duration,
    samples: Option<&Path>,
) -> Option<String> {
    let script = node_script("bench.js", NODE_SCRIPT)?;
    let mut cmd = Command::new("node");
    if let Some(path) = samples {
        cmd.env("BENCH_SAMPLES", path);
    }
    cmd.arg(&script)
        .arg(urls.join(","))
        .arg(format!("{}", length.as_secs_f64()))
        .current_dir(script.parent()?);
    json_line("node-redlock", cmd.output())
}

/// A peer running the demo's workload for `--faults` with `workers` concurrent callers on the
/// nodes at `urls`, each node's commands timing out after `timeout`, or `None` (with a
/// message) when it cannot run here. It answers each line on its stdin with its counts so far,
/// "ACQUIRED GAVE_UP", and ends with its stdin.
pub fn faults_peer(
    peer: Peer,
    urls: &[String],
    workers: usize,
    timeout: Duration,
) -> Option<Child> {
    let mut cmd = match peer {
        Peer::Redsync => Command::new(go_program("rsfaults", GO_REDSYNC_FAULTS)?),
        Peer::NodeRedlock => {
            let script = node_script("faults.js", NODE_FAULTS)?;
            let mut cmd = Command::new("node");
            cmd.arg(&script).current_dir(script.parent()?);
            cmd
        }
    };
    cmd.arg(urls.join(","))
        .arg(workers.to_string())
        .arg(timeout.as_millis().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| eprintln!("{}: skipped ({e})", peer.name()))
        .ok()
}

/// The peers `--faults` runs beside redquorum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Peer {
    NodeRedlock,
    Redsync,
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::NodeRedlock => "node-redlock",
            Peer::Redsync => "redsync-failfast",
        }
    }
}
