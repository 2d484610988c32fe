//! The Rust examples of README.md and docs/, run against local nodes.
//!
//! Each ```rust block of those pages is part of a function of this file (whitespace aside, and
//! in the README with the nodes it names replaced by the test's own), which
//! `every_rust_block_of_the_docs_is_in_this_file` checks; the other tests run the functions.
//! So an example that stops compiling breaks the build, and an example changed on its page
//! alone fails here.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use redquorum::{Error, Redlock};
use support::{Cluster, assert_no_worker_panicked, eventually, watch_workers};

/// The nodes the README's examples name (its "Three local nodes"); the test passes its own.
const README_NODES: &str =
    r#"["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"]"#;

/// README.md, "Rust".
fn readme(nodes: [&str; 3]) -> Result<(), Error> {
    use std::time::Duration;

    let rl = redquorum::Redlock::builder().nodes(nodes).build()?;
    let lock = rl.lock("orders:42", Duration::from_secs(10))?; // NotAcquired, NoQuorum, ... on failure
    println!("ours for {:?} more", lock.validity()); // finish the work within the validity
    lock.release()?; // dropping it releases too
    Ok(())
}

/// docs/guide.md, "Plain locks".
fn guide_plain(rl: &Redlock, ttl: Duration) -> Result<(), Error> {
    let lock = rl.lock("orders:42", ttl)?; // retries; rl.try_lock makes one attempt
    // ... work that must not overlap another holder's, finished within lock.validity() ...
    lock.extend(ttl)?; // Err(Error::Lost) if it expired
    lock.release()?; // dropping it releases too
    Ok(())
}

/// docs/guide.md, "Kinds of lock".
fn guide_kinds(rl: &Redlock, ttl: Duration) -> Result<(), Error> {
    use redquorum::LockRequest;

    let fenced = rl.lock_fenced("orders:42", ttl)?; // fenced.fence(): Some(token), strictly increasing
    let token = fenced.fence().expect("a fenced lock has a token"); // from holder to holder: send it
    assert!(token > 0); // with each write, and have the storage reject tokens below its highest
    let owner = redquorum::Redlock::new_owner()?; // any string naming the holder, not a thread
    let hold = LockRequest::new("orders:43", ttl).reentrant(&owner); // the hash {owner: count, ...}
    let outer = rl.acquire(&hold)?;
    let inner = rl.acquire(&hold)?;
    assert_eq!(inner.hold_count(), Some(2));
    let both = rl.acquire(&LockRequest::many(["orders:1", "orders:2"], ttl))?; // all or none
    let reader = rl.read_lock("report", ttl)?; // many readers or one
    let writer = rl.write_lock("other", ttl)?; // writer (= a plain lock)
    let permit = rl.semaphore("pool", 3, ttl)?; // 1 of 3
    assert!(permit.permit().is_some()); // the slot held
    for lock in [fenced, inner, outer, both, reader, writer, permit] {
        lock.release()?;
    }
    Ok(())
}

/// docs/guide.md, "One request for every combination".
fn guide_request(rl: &Redlock, ttl: Duration) -> Result<(), Error> {
    use redquorum::{AutoExtend, Cancel, Error, LockRequest};

    let cancel = Cancel::new(); // clone it to another thread, or fire it from a signal handler:
    let request = LockRequest::new("orders:42", ttl) // cancel() is async-signal-safe
        .fenced()
        .wait(Duration::from_secs(30))
        .auto_extend(AutoExtend::new()) // every ttl/3 while held; .max_hold(d), .fraction(f)
        .cancel(&cancel);
    match rl.acquire(&request) {
        Ok(lock) => lock.release()?,       // lock.fence(), lock.lost(), ...
        Err(Error::Cancelled { .. }) => {} // nothing of it is left on the nodes
        Err(e) => return Err(e),
    }
    let fence = rl.with_request(&request, |lock| lock.fence())?; // auto-extended, released after
    assert!(fence.is_some());
    Ok(())
}

/// docs/guide.md, "Locks that live as long as the work".
fn guide_auto_extend(rl: &Redlock) -> Result<(), Error> {
    use redquorum::{AutoExtend, LockRequest};
    // Extended by the client's extender thread every ttl/3 while held; waits up to 30 s if busy.
    let request = LockRequest::new("orders:42", Duration::from_secs(10))
        .auto_extend(AutoExtend::new())
        .wait(Duration::from_secs(30));
    let lock = rl.acquire(&request)?;
    assert!(lock.is_held()); // false once an extension found it lost
    let lost = lock.lost(); // a crossbeam Receiver: disconnects when the lock ends
    lock.release()?;
    assert!(lost.recv().is_err());
    let n = rl.with_lock("orders:42", Duration::from_secs(10), |_lock| 42)?; // Err(Lost) if lost meanwhile
    assert_eq!(n, 42);
    Ok(())
}

/// docs/election.md.
fn election(rl: &Redlock) -> Result<(), Error> {
    let election = rl.election("scheduler", "host-a", Duration::from_secs(10))?;
    let leadership = election.campaign(None)?; // blocks until this process leads (or a Cancel fires)
    let term = leadership.term(); // a fencing token: greater than every earlier leader's; send it with each write
    let _lost = leadership.lost(); // a Receiver that disconnects the moment the leadership is lost or resigned
    let leader = rl.leader("scheduler")?; // from any process: Some(Leader { identity, term, since, transitions, ttl })
    assert_eq!(leader.map(|l| l.term), Some(term));
    leadership.resign()?; // waiting candidates wake at once (a release notification)
    let mut changes = rl.observe("scheduler", None)?; // an iterator: Option<Leader> at each change
    assert!(changes.next().is_some());
    Ok(())
}

/// docs/observability.md.
fn observability(rl: &Redlock) -> Result<(), Error> {
    let stats = rl.stats(); // cheap: atomic reads, no node contact
    let acquired = stats.acquisitions("acquired"); // by outcome and kind, with latency histograms
    print!("{}", stats.prometheus()); // redlock_acquire_duration_seconds{outcome,kind}, redlock_locks_held, ...
    let _listening = rl.on_event(|e| log::info!("{} {:?} {:?}", e.kind, e.resource, e.reason))?;
    assert!(acquired > 0);
    Ok(())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The pages whose Rust blocks must be here: the README and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The ```rust blocks of a Markdown page, each with the line it starts on.
fn rust_blocks(page: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in page.lines().enumerate() {
        match open.as_mut() {
            None if line.trim_end() == "```rust" => open = Some((n + 1, String::new())),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(open.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// Text without any whitespace, so that rustfmt's line breaks and indentation do not count.
fn squeezed(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn every_rust_block_of_the_docs_is_in_this_file() {
    let this = squeezed(include_str!("docs_examples.rs"));
    let mut found = 0;
    for path in pages() {
        let page = std::fs::read_to_string(&path).unwrap();
        for (line, block) in rust_blocks(&page) {
            let block = squeezed(&block).replace(&squeezed(README_NODES), "nodes");
            assert!(
                this.contains(&block),
                "{}:{line}: this Rust block is not part of a function of tests/docs_examples.rs \
                 (copy it there, or change both):\n{}",
                path.display(),
                rust_blocks(&page)
                    .into_iter()
                    .find(|(l, _)| *l == line)
                    .unwrap()
                    .1
            );
            found += 1;
        }
    }
    // The README's, and the guide's, election's and observability page's.
    assert!(found >= 7, "only {found} Rust blocks found in the docs");
}

#[test]
fn the_readme_example_runs() {
    watch_workers();
    let cluster = Cluster::start(3);
    let urls = cluster.urls();
    readme([&urls[0], &urls[1], &urls[2]]).expect("the README's example");
    // The release returns on a quorum, and dropping the client waits for the last node's
    // release only up to one I/O timeout.
    assert!(eventually(Duration::from_secs(5), || {
        cluster.nodes.iter().all(|n| n.get("orders:42").is_none())
    }));
    assert_no_worker_panicked();
}

#[test]
fn the_examples_of_the_docs_run() {
    watch_workers();
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let ttl = Duration::from_secs(10);
    guide_plain(&rl, ttl).expect("guide.md, plain locks");
    guide_kinds(&rl, ttl).expect("guide.md, kinds of lock");
    guide_request(&rl, ttl).expect("guide.md, one request");
    guide_auto_extend(&rl).expect("guide.md, auto-extension");
    election(&rl).expect("election.md");
    observability(&rl).expect("observability.md");
    for resource in [
        "orders:42",
        "orders:43",
        "orders:1",
        "orders:2",
        "other",
        "redlock:election:scheduler",
    ] {
        assert!(
            cluster.nodes.iter().all(|n| n.get(resource).is_none()),
            "{resource} is left on a node"
        );
    }
    assert_no_worker_panicked();
}
