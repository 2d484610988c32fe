//! Leader election against real redis-server nodes: campaign, resign, observe, terms that
//! grow, leadership lost when the nodes stop answering, and cancellation. The election across
//! processes (SIGKILL and SIGSTOP of the leader, 1,000 campaign/resign cycles) is in
//! `tests/election_processes.rs`.
//!
//! What a reader is told when the nodes cannot tell (a campaign cut off after its write-back, a
//! leader's node hung or restarted, a confirmation lost) is tested through relays between a
//! candidate and some nodes, cut at a chosen command (`tests/chaos/relay.rs`).

mod support;

#[allow(dead_code)]
#[path = "chaos/relay.rs"]
mod relay;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redquorum::{Cancel, Error, Leader, NodeProblem, Redlock};
use relay::{CutMode, Relay};

type Seen = Arc<Mutex<Vec<(Option<Leader>, Instant)>>>;
/// An observer's changes, as they come.
type Changes = Arc<Mutex<Vec<Option<Leader>>>>;
use support::{Cluster, eventually};

const TTL: Duration = Duration::from_secs(3);

#[test]
fn a_candidate_leads_resigns_and_the_next_one_takes_over_with_a_higher_term() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    assert_eq!(
        rl.leader("jobs").unwrap(),
        None,
        "nobody leads a new election"
    );

    let a = rl.election("jobs", "host-a", TTL).unwrap();
    let first = a.campaign(None).unwrap();
    assert!(first.is_leader());
    assert!(first.validity() > Duration::ZERO && first.validity() <= TTL);
    let seen = rl.leader("jobs").unwrap().expect("a leader");
    assert_eq!(seen.identity, "host-a");
    assert_eq!(seen.term, first.term());
    assert_eq!(seen.transitions, 1);
    assert!(seen.ttl > Duration::ZERO && seen.ttl <= TTL);
    assert!(seen.age() < Duration::from_secs(5), "{seen:?}");

    // B waits; A's resignation wakes it.
    let other = cluster.client();
    let waiter = std::thread::spawn(move || {
        let b = other.election("jobs", "host-b", TTL).unwrap();
        let l = b.campaign(None).unwrap();
        let term = l.term();
        let at = Instant::now();
        l.resign().unwrap();
        (term, at)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "B leads while A does");
    let resigned = Instant::now();
    first.resign().unwrap();
    assert!(!first.is_leader());
    let (term_b, took_over) = waiter.join().unwrap();
    assert!(
        term_b > first.term(),
        "term {term_b} after {}",
        first.term()
    );
    // Woken by the release, not by A's TTL running out.
    assert!(
        took_over - resigned < TTL / 2,
        "B took over {:?} after the resignation",
        took_over - resigned
    );
    assert_eq!(rl.leader("jobs").unwrap(), None);
    // Resigning twice does nothing.
    first.resign().unwrap();
}

#[test]
fn a_leadership_is_extended_past_its_ttl_and_past_max_extensions() {
    let cluster = Cluster::start(3);
    let rl = cluster
        .builder()
        .node_timeout(Duration::from_millis(300))
        .max_extensions(1)
        .build()
        .unwrap();
    // Extended every 500 ms: a stall of the machine shorter than a second costs nothing.
    let election = rl
        .election("extended", "a", Duration::from_millis(1500))
        .unwrap();
    let leadership = election.campaign(None).unwrap();
    std::thread::sleep(Duration::from_millis(4000));
    assert!(
        leadership.is_leader(),
        "extended while held, whatever max_extensions says"
    );
    assert!(!leadership.is_lost());
    let seen = rl.leader("extended").unwrap().expect("still leading");
    assert_eq!(seen.term, leadership.term());
    leadership.resign().unwrap();
}

#[test]
fn bad_names_and_identities_are_refused_before_anything_is_sent() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let before = cluster.commands_processed();
    let invalid = |r: Result<redquorum::Election, Error>, what: &str| match r {
        Err(Error::InvalidArgument { message }) => {
            assert!(message.contains(what), "{message}")
        }
        other => panic!("expected InvalidArgument about {what}, got {other:?}"),
    };
    invalid(rl.election("", "a", TTL), "name is empty");
    invalid(rl.election("x", "", TTL), "identity is empty");
    invalid(rl.election("x", &"i".repeat(257), TTL), "257 bytes");
    invalid(rl.election(&"n".repeat(1025), "a", TTL), "1025 bytes");
    invalid(rl.election("x", "a", Duration::ZERO), "ttl");
    invalid(
        rl.election("x", "a", Duration::from_millis(100)),
        "too short",
    );
    assert!(matches!(rl.leader(""), Err(Error::InvalidArgument { .. })));
    // Only the INFO reads of commands_processed itself.
    assert!(cluster.commands_processed() - before <= 2);
}

#[test]
fn observers_see_each_change_woken_by_takeovers_releases_and_expiry() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let cancel = Cancel::new();
    let seen: Seen = Arc::default();
    let observer = {
        let seen = Arc::clone(&seen);
        let mut changes = rl
            .observe("obs", Some(&cancel))
            .unwrap()
            .poll(Duration::from_secs(30));
        std::thread::spawn(move || {
            for change in &mut changes {
                seen.lock().unwrap().push((change, Instant::now()));
            }
        })
    };
    assert!(eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        == 1));
    assert_eq!(seen.lock().unwrap()[0].0, None);

    let candidate = cluster.client();
    let election = candidate
        .election("obs", "one", Duration::from_secs(2))
        .unwrap();
    let leadership = election.campaign(None).unwrap();
    let elected = Instant::now();
    // With a 30 s poll, only the takeover's announcement can wake the observer this soon.
    assert!(eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        == 2));
    {
        let seen = seen.lock().unwrap();
        let (leader, at) = &seen[1];
        let leader = leader.as_ref().expect("a leader");
        assert_eq!(leader.identity, "one");
        assert_eq!(leader.term, leadership.term());
        assert!(
            *at - elected < Duration::from_secs(1),
            "{:?}",
            *at - elected
        );
    }
    leadership.resign().unwrap();
    assert!(eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        == 3));
    assert_eq!(seen.lock().unwrap()[2].0, None);

    // A leader that vanishes without resigning: its keys expire and nobody announces it; the
    // observer reads again when the leader's TTL runs out.
    let leadership = election.campaign(None).unwrap();
    assert!(eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        == 4));
    std::mem::forget(leadership);
    drop(election);
    drop(candidate);
    // The client's extender still runs for the forgotten lock; a client of its own would
    // stop with it. Kill the extensions by taking the keys away instead.
    for node in &cluster.nodes {
        node.del("redlock:election:obs");
    }
    assert!(eventually(Duration::from_secs(6), || seen
        .lock()
        .unwrap()
        .len()
        == 5));
    assert_eq!(seen.lock().unwrap()[4].0, None);

    cancel.cancel();
    observer.join().unwrap();
}

/// A state the nodes cannot tell may end with nothing announced: here a lock key that two
/// nodes hold unconfirmed (a campaign between its acquire and its confirmation, or one whose
/// keys were taken away) and that expires. The observer reads again as a lock retries, so it
/// reports nobody soon after the expiry, not a 30 s poll later.
#[test]
fn an_observer_that_cannot_tell_reads_again_soon_not_a_poll_later() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let key = "redlock:election:untold";
    for node in &cluster.nodes[..2] {
        node.set(key, "a-token-nobody-confirmed", 3_000);
    }
    assert!(
        matches!(rl.leader("untold"), Err(Error::NoQuorum { .. })),
        "two nodes holding an unconfirmed token: the nodes cannot tell"
    );
    let cancel = Cancel::new();
    let seen: Seen = Arc::default();
    let started = Instant::now();
    let observer = {
        let seen = Arc::clone(&seen);
        let mut changes = rl
            .observe("untold", Some(&cancel))
            .unwrap()
            .poll(Duration::from_secs(30));
        std::thread::spawn(move || {
            for change in &mut changes {
                seen.lock().unwrap().push((change, Instant::now()));
            }
        })
    };
    assert!(
        eventually(Duration::from_secs(15), || !seen.lock().unwrap().is_empty()),
        "no state reported {:?} after the observer started (the keys expire at 3 s, the poll is 30 s)",
        started.elapsed()
    );
    assert_eq!(seen.lock().unwrap()[0].0, None);
    assert_eq!(cluster.holding(key, "a-token-nobody-confirmed"), 0);
    cancel.cancel();
    observer.join().unwrap();
}

#[test]
fn the_client_go_callbacks_run_once_each() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let started = Arc::new(AtomicU64::new(0));
    let stopped = Arc::new(AtomicU64::new(0));
    let leaders: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let election = {
        let (started, stopped, leaders) = (started.clone(), stopped.clone(), leaders.clone());
        rl.election("cb", "me", TTL)
            .unwrap()
            .on_started_leading(move |l| started.store(l.term(), Ordering::SeqCst))
            .on_stopped_leading(move |term| stopped.store(term, Ordering::SeqCst))
            .on_new_leader(move |l| leaders.lock().unwrap().push(l.map(|l| l.identity.clone())))
            .unwrap()
    };
    assert!(eventually(Duration::from_secs(5), || leaders
        .lock()
        .unwrap()
        .len()
        == 1));
    let l = election.campaign(None).unwrap();
    assert_eq!(started.load(Ordering::SeqCst), l.term());
    assert_eq!(stopped.load(Ordering::SeqCst), 0);
    assert!(eventually(Duration::from_secs(5), || leaders
        .lock()
        .unwrap()
        .len()
        == 2));
    let term = l.term();
    l.resign().unwrap();
    drop(l);
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        term,
        "stopped once, with the term"
    );
    assert!(eventually(Duration::from_secs(5), || leaders
        .lock()
        .unwrap()
        .len()
        == 3));
    assert_eq!(
        *leaders.lock().unwrap(),
        vec![None, Some("me".to_owned()), None]
    );
    drop(election);
}

#[test]
fn a_leader_cut_off_from_its_nodes_loses_leadership_before_anyone_else_gets_it() {
    let cluster = Cluster::start(3);
    let leader_client = cluster
        .builder()
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let ttl = Duration::from_millis(1500);
    let a = leader_client.election("cut", "a", ttl).unwrap();
    let leadership = a.campaign(None).unwrap();
    let lost_at = Arc::new(Mutex::new(None));
    {
        let lost_at = Arc::clone(&lost_at);
        leadership.on_lost(move || *lost_at.lock().unwrap() = Some(Instant::now()));
    }
    let stopped = Instant::now();
    cluster.nodes[0].hang();
    cluster.nodes[1].hang();
    assert!(eventually(Duration::from_secs(5), || leadership.is_lost()));
    assert!(!leadership.is_leader());
    cluster.nodes[0].resume();
    cluster.nodes[1].resume();
    // Another candidate gets in only after the leader's validity ran out.
    let b = cluster
        .builder()
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap()
        .election("cut", "b", ttl)
        .unwrap();
    let next = b.campaign(None).unwrap();
    let granted = Instant::now();
    let lost = lost_at.lock().unwrap().expect("on_lost ran");
    assert!(lost <= granted, "the old leader learned of its loss first");
    assert!(lost - stopped < ttl + Duration::from_millis(500));
    assert!(next.term() > leadership.term());
    // Once the old leader's client reaches every node again (its connections to the hung ones
    // timed out and are made anew), its resignation finds the key another's on all of them:
    // lost, never released. Before that, too few nodes answer it, and NoQuorum is the answer.
    assert!(eventually(Duration::from_secs(10), || {
        leader_client.node_status().iter().all(|s| s.connected)
    }));
    let resigned = leadership.resign();
    assert!(matches!(resigned, Err(Error::Lost { .. })), "{resigned:?}");
}

#[test]
fn a_cancelled_campaign_leaves_nothing_behind() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let holder = rl
        .election("cancel", "holder", TTL)
        .unwrap()
        .campaign(None)
        .unwrap();
    let other = cluster.client();
    let cancel = Cancel::new();
    let waiting = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            other
                .election("cancel", "waiter", TTL)
                .unwrap()
                .campaign(Some(&cancel))
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    cancel.cancel();
    match waiting.join().unwrap() {
        Err(Error::Cancelled { resource }) => assert_eq!(resource, "election cancel"),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert_eq!(rl.leader("cancel").unwrap().unwrap().identity, "holder");
    holder.resign().unwrap();
    // A one-attempt campaign against a leader is refused, naming the election.
    let _again = rl
        .election("cancel", "holder", TTL)
        .unwrap()
        .campaign(None)
        .unwrap();
    match cluster
        .client()
        .election("cancel", "late", TTL)
        .unwrap()
        .campaign_for(Duration::ZERO, None)
    {
        Err(Error::NotAcquired { resource, .. }) => assert_eq!(resource, "election cancel"),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
}

/// What every command that writes an election's record names: the record's key.
const RECORD: &str = "redlock:leader:";

/// A client of `cluster` that reaches the nodes in `through` over relays (returned in that
/// order) and the others directly, waiting `node_timeout` for any node, and connected to all.
fn relayed_client(
    cluster: &Cluster,
    through: &[usize],
    node_timeout: Duration,
) -> (Redlock, Vec<Relay>) {
    let mut relays = Vec::new();
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            if through.contains(&i) {
                relays.push(Relay::start(node.port));
                relays.last().unwrap().url()
            } else {
                node.url()
            }
        })
        .collect();
    let rl = support::builder(&urls)
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    // Connected to every node (a read waits for each), so that a campaign's first command
    // does not wait for a connection and miss its deadline there.
    rl.leader("warm-up").expect("every node answers");
    (rl, relays)
}

/// An observer of the election `name` on its own thread, reading the nodes every 50 ms: the
/// changes it yields, as they come.
fn follow(rl: &Redlock, name: &str, cancel: &Cancel) -> (Changes, JoinHandle<()>) {
    let seen: Changes = Arc::default();
    let mut changes = rl
        .observe(name, Some(cancel))
        .unwrap()
        .poll(Duration::from_millis(50));
    let thread = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            for change in &mut changes {
                seen.lock().unwrap().push(change);
            }
        })
    };
    (seen, thread)
}

fn hget(node: &support::RedisNode, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut node.conn())
        .expect("HGET")
}

/// The schedule: the candidate's write-back reaches nodes 1 and 2, and a partition
/// starts right after it, so their replies and the undo are lost. The campaign fails, and the
/// nodes keep its lock and record for the TTL. No reader may name it: `leader` cannot tell
/// (the record may be a leader's whose confirmation is on its way), and the observers and
/// `on_new_leader` report no change.
#[test]
fn a_campaign_cut_off_after_its_write_back_is_never_named_leader() {
    let cluster = Cluster::start(3);
    let key = "redlock:election:jobs";
    let observer = cluster.client();
    let cancel = Cancel::new();
    let (changes, following) = follow(&observer, "jobs", &cancel);
    let called: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let watcher = {
        let called = Arc::clone(&called);
        observer
            .election("jobs", "observer", TTL)
            .unwrap()
            .on_new_leader(move |l| called.lock().unwrap().push(l.map(|l| l.identity.clone())))
            .unwrap()
    };
    assert!(eventually(Duration::from_secs(5), || {
        changes.lock().unwrap().len() == 1 && called.lock().unwrap().len() == 1
    }));

    // Node 0 over a slow link, so that its acquire counts no part in the quorum (nodes 1 and 2)
    // and the term (theirs, the larger counter); nodes 1 and 2 over relays that let the
    // write-back through and then blackhole.
    let (candidate, relays) = relayed_client(&cluster, &[0, 1, 2], Duration::from_millis(300));
    relays[0].delay(Duration::from_millis(50));
    for relay in &relays[1..] {
        relay.cut_on(RECORD, 0, CutMode::Blackhole, true);
    }
    let ttl = Duration::from_secs(2);
    match candidate
        .election("jobs", "phantom", ttl)
        .unwrap()
        .campaign_for(Duration::ZERO, None)
    {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("expected NoQuorum: only node 0 answered the write-back; got {other:?}"),
    }
    // The schedule did what it is about: nodes 1 and 2 took the write-back (lock and record)
    // and the undo reached only node 0.
    let token = cluster.nodes[1]
        .get(key)
        .expect("node 1 keeps the failed campaign's lock");
    assert_eq!(cluster.nodes[2].get(key).as_deref(), Some(&*token));
    let record = format!("{RECORD}{{{key}}}");
    for node in &cluster.nodes[1..] {
        assert_eq!(hget(node, &record, "token").as_deref(), Some(&*token));
        assert_eq!(hget(node, &record, "identity").as_deref(), Some("phantom"));
    }
    assert!(eventually(Duration::from_secs(1), || cluster.nodes[0]
        .get(key)
        .is_none()));

    // Until the keys expire: never the candidate, and never "nobody" while a quorum holds it.
    let mut reads = 0;
    let expired = eventually(ttl * 2, || {
        let read = observer.leader("jobs");
        let held = cluster.nodes[1].get(key).is_some() && cluster.nodes[2].get(key).is_some();
        match read {
            Ok(Some(l)) => panic!("read {l:?}: a candidate whose campaign failed"),
            Ok(None) => assert!(!held, "nobody leads, read while a quorum holds a lock"),
            Err(Error::NoQuorum { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        reads += 1;
        !held
    });
    assert!(expired, "the keys expire with the TTL");
    assert!(reads > 10, "{reads} reads");
    assert_eq!(observer.leader("jobs").unwrap(), None);
    // Both had time to read the nodes many times over.
    assert_eq!(*changes.lock().unwrap(), vec![None]);
    assert_eq!(*called.lock().unwrap(), vec![None]);
    cancel.cancel();
    following.join().unwrap();
    drop(watcher);
}

/// A leader on a bare majority (nodes 0 and 1: node 2 was held by a stray key when it
/// campaigned): while node 1 hangs, the observer hears node 0 name the leader and node 2 name
/// nobody. Either may be right, so the read fails with `NoQuorum` rather than say "nobody".
/// With no lock on any node, the same hang leaves "nobody" sound.
#[test]
fn a_leader_whose_node_hangs_reads_as_unknown_never_as_nobody() {
    let cluster = Cluster::start(3);
    let key = "redlock:election:hang";
    cluster.nodes[2].set(key, "stray", 60_000);
    let candidate = cluster.client();
    let leadership = candidate
        .election("hang", "bare", TTL)
        .unwrap()
        .campaign_for(Duration::ZERO, None)
        .unwrap();
    // The campaign returns on nodes 0 and 1: node 2's refused SET may still be on its way, to
    // land after the DEL below. A read queued behind it on the candidate's worker waits for it.
    let seen = candidate.inspect(key).unwrap();
    assert!(seen.nodes[2].state.is_ok(), "{seen:?}");
    cluster.nodes[2].del(key);
    let observer = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let seen = observer.leader("hang").unwrap().expect("a leader");
    assert_eq!(
        (seen.identity.as_str(), seen.term),
        ("bare", leadership.term())
    );

    cluster.nodes[1].hang();
    let read = observer.leader("hang");
    cluster.nodes[1].resume();
    match read {
        Err(Error::NoQuorum { report, .. }) => assert!(
            report
                .failures
                .iter()
                .any(|f| f.node == format!("127.0.0.1:{}", cluster.nodes[1].port)
                    && f.problem == NodeProblem::TimedOut),
            "{report:?}"
        ),
        other => panic!("expected NoQuorum while the leader's node 1 hangs, got {other:?}"),
    }
    let seen = observer.leader("hang").unwrap().expect("a leader");
    assert_eq!(seen.term, leadership.term());

    leadership.resign().unwrap();
    cluster.nodes[1].hang();
    let read = observer.leader("hang");
    cluster.nodes[1].resume();
    assert_eq!(read.unwrap(), None, "no node holds a lock");
}

/// As above, with node 1 restarted empty instead of hung: a reader with `restart_grace` counts
/// it as one that may have lost the leader's key.
#[test]
fn a_leader_whose_node_restarted_within_restart_grace_reads_as_unknown() {
    let mut cluster = Cluster::start(3);
    let key = "redlock:election:grace";
    cluster.nodes[2].set(key, "stray", 60_000);
    let candidate = cluster.client();
    let leadership = candidate
        .election("grace", "bare", TTL)
        .unwrap()
        .campaign_for(Duration::ZERO, None)
        .unwrap();
    // The campaign returns on nodes 0 and 1: node 2's refused SET may still be on its way, to
    // land after the DEL below. A read queued behind it on the candidate's worker waits for it.
    let seen = candidate.inspect(key).unwrap();
    assert!(seen.nodes[2].state.is_ok(), "{seen:?}");
    cluster.nodes[2].del(key);
    cluster.nodes[1].restart();
    let observer = cluster
        .builder()
        .restart_grace(Duration::from_secs(30))
        .build()
        .unwrap();
    match observer.leader("grace") {
        Err(Error::NoQuorum { report, .. }) => assert!(
            report
                .failures
                .iter()
                .any(|f| f.node == format!("127.0.0.1:{}", cluster.nodes[1].port)
                    && matches!(f.problem, NodeProblem::InGrace { .. })),
            "{report:?}"
        ),
        other => panic!("expected NoQuorum while node 1 is in its grace, got {other:?}"),
    }
    drop(leadership);
}

/// The confirmation of a won campaign is lost on nodes 1 and 2 (dropped with a cut that
/// refuses connections): the campaign returns its leadership all the same, readers cannot tell
/// until the record is confirmed on a quorum, and the leadership's next extension confirms it.
#[test]
fn a_lost_confirmation_reads_as_unknown_until_an_extension_confirms_the_leader() {
    let cluster = Cluster::start(3);
    let (candidate, relays) = relayed_client(&cluster, &[1, 2], Duration::from_millis(300));
    // The write-back is the first command naming the record; the confirmation the second.
    for relay in &relays {
        relay.cut_on(RECORD, 1, CutMode::Refuse, false);
    }
    let election = candidate.election("confirm", "late", TTL).unwrap();
    let leadership = election
        .campaign_for(Duration::ZERO, None)
        .expect("a campaign that won leads, whatever its confirmation's replies");
    let observer = cluster.client();
    match observer.leader("confirm") {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("expected NoQuorum: the leader is confirmed on node 0 only; got {other:?}"),
    }
    for relay in &relays {
        relay.heal();
    }
    assert!(eventually(TTL, || matches!(
        observer.leader("confirm"),
        Ok(Some(l)) if l.identity == "late" && l.term == leadership.term()
    )));
    assert!(leadership.is_leader());
    leadership.resign().unwrap();
}
