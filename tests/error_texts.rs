//! The texts of the common errors, as a user reads them: what failed, where, and what to do, in
//! plain words. The bindings show the same texts (they come from here).

mod support;

use std::time::Duration;

use redquorum::Redlock;
use support::{Cluster, eventually};

fn text<T: std::fmt::Debug>(r: redquorum::Result<T>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn invalid_arguments_say_the_range_in_words() {
    let cluster = Cluster::start(1);
    let rl = cluster.client();
    let ttl_range = "ttl must be at least 3 ms (with drift_factor 0.01) and at most 10 years";
    for (ttl, got) in [
        (Duration::ZERO, "got 0 ms: below the minimum"),
        (Duration::from_millis(2), "got 2 ms: below the minimum"),
        (
            Duration::from_secs(11 * 365 * 24 * 3600),
            "got 346896000000 ms",
        ),
    ] {
        let t = text(rl.try_lock("r", ttl));
        assert!(t.starts_with("invalid argument: "), "{t}");
        assert!(t.contains(ttl_range) && t.contains(got), "{t}");
    }
    // The minimum follows the drift factor.
    let loose = cluster.builder().drift_factor(0.5).build().unwrap();
    let t = text(loose.try_lock("r", Duration::from_millis(4)));
    assert!(t.contains("at least 5 ms (with drift_factor 0.5)"), "{t}");
    for (url, why) in [
        ("redis://host:notaport", "invalid port number"),
        (
            "localhost:6379",
            "it does not start with redis:// or rediss://",
        ),
        ("redis://:secret@", "no host"),
    ] {
        let t = text(Redlock::builder().node(url).build());
        assert!(t.contains(&format!("not a usable Redis URL: {why}")), "{t}");
        assert!(
            !t.contains("secret") && !t.contains("InvalidClientConfig"),
            "{t}"
        );
    }
}

#[test]
fn quorum_errors_give_the_tally_with_the_nodes_named() {
    let mut cluster = Cluster::start(3);
    let rl = cluster.client();
    let names: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let held = rl.lock("t", Duration::from_secs(10)).unwrap();
    // A lock call returns on a quorum: every node refuses another owner only once the holder's
    // SET has landed there too.
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .nodes
            .iter()
            .all(|n| n.get("t").as_deref() == Some(held.token()))),
        "the holder's key reached every node"
    );
    let other = cluster.client();
    let t = text(other.try_lock("t", Duration::from_secs(10)));
    assert!(
        t.starts_with(
            "lock \"t\" not acquired after 1 attempt(s), held by another owner; the last \
                       attempt: 0 granted, "
        ),
        "{t}"
    );
    assert!(
        t.contains("of 3 nodes (quorum 2) [") && t.contains("refused: "),
        "{t}"
    );
    // Each node is named once, in one of the four parts.
    for name in &names {
        assert_eq!(t.matches(name.as_str()).count(), 1, "{name} in {t}");
    }
    held.release().unwrap();
    cluster.nodes[1].kill();
    cluster.nodes[2].kill();
    let t = text(other.try_lock("t", Duration::from_secs(10)));
    assert!(
        t.starts_with("acquire of \"t\" failed after 1 attempt(s): "),
        "{t}"
    );
    assert!(
        t.contains("failed, ") && t.contains("of 3 nodes (quorum 2)"),
        "{t}"
    );
    assert!(
        t.contains(&format!("failed: {} (unavailable", names[1])),
        "{t}"
    );
    assert!(
        t.ends_with("; check that a majority of the Redis nodes is up and reachable"),
        "{t}"
    );
}
