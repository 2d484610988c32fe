//! `Redlock::inspect` on the readers of a read-write lock and the slots of a semaphore.

mod support;

use std::time::Duration;

use redquorum::{Inspection, KeyState, LockRequest};
use support::Cluster;

const TTL: Duration = Duration::from_secs(20);

fn quorum(c: &Cluster) -> usize {
    c.nodes.len() / 2 + 1
}

/// Nodes whose readers are exactly `tokens` (in any order), each with time left in (0, TTL].
fn nodes_with_readers(i: &Inspection, tokens: &[&str]) -> usize {
    i.nodes
        .iter()
        .filter_map(|n| n.state.as_ref().ok())
        .filter(|s| match &s.key {
            KeyState::Readers(r) => {
                let mut seen: Vec<&str> = r.iter().map(|(t, _)| t.as_str()).collect();
                seen.sort_unstable();
                let mut want = tokens.to_vec();
                want.sort_unstable();
                seen == want
                    && r.iter()
                        .all(|(_, left)| *left > Duration::ZERO && *left <= TTL)
            }
            _ => false,
        })
        .count()
}

#[test]
fn inspect_lists_the_readers_with_their_time_left() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let read = LockRequest::new("rw", TTL).read();
    let a = rl.acquire(&read).unwrap();
    let b = rl
        .acquire(&LockRequest::new("rw", Duration::from_secs(5)).read())
        .unwrap();
    let seen = rl.inspect("rw").unwrap();
    assert!(seen.held, "readers hold the resource");
    assert_eq!(seen.holder, None, "no single holder");
    assert!(nodes_with_readers(&seen, &[a.token(), b.token()]) >= quorum(&cluster));
    // The shorter reader has less time left, and comes first.
    for s in seen.nodes.iter().filter_map(|n| n.state.as_ref().ok()) {
        if let KeyState::Readers(r) = &s.key
            && r.len() == 2
        {
            assert_eq!(r[0].0, b.token());
            assert!(r[0].1 <= Duration::from_secs(5) && r[0].1 < r[1].1);
        }
    }
    b.release().unwrap();
    let seen = rl.inspect("rw").unwrap();
    assert!(nodes_with_readers(&seen, &[a.token()]) >= quorum(&cluster));
    // Read-only: inspecting changed nothing, a writer is still refused.
    assert!(
        rl.acquire(&LockRequest::new("rw", TTL).write().once())
            .is_err()
    );
    a.release().unwrap();
    assert!(!rl.inspect("rw").unwrap().held);
}

#[test]
fn inspect_of_a_slot_key_shows_its_holder() {
    let cluster = Cluster::start(3);
    let rl = cluster.client();
    let permit = rl
        .acquire(&LockRequest::new("pool", TTL).semaphore(2))
        .unwrap();
    let slot = permit.permit().unwrap();
    let seen = rl.inspect(&format!("redlock:sem:{{pool}}:{slot}")).unwrap();
    assert!(seen.held);
    assert_eq!(seen.holder.as_deref(), Some(permit.token()));
    let other = rl
        .inspect(&format!("redlock:sem:{{pool}}:{}", 1 - slot))
        .unwrap();
    assert!(!other.held);
    permit.release().unwrap();
}
