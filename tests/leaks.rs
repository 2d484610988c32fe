//! Workers and connections end with the client. A test binary of its own, so no other test's
//! threads or sockets are counted.

mod support;

use std::time::Duration;

#[test]
fn dropping_the_client_stops_its_threads_and_closes_its_connections() {
    let cluster = support::Cluster::start(5);
    let threads = support::entries("/proc/self/task");
    let fds = support::entries("/proc/self/fd");
    for round in 0..20 {
        let rl = cluster.client();
        let mut locks = Vec::new();
        for i in 0..50 {
            locks.push(
                rl.lock(&format!("leak-{round}-{i}"), Duration::from_secs(10))
                    .unwrap(),
            );
        }
        // A waiter, which starts the client's release subscriptions: one thread reads them
        // for all five nodes.
        let waited = rl.acquire(
            &redquorum::LockRequest::new(format!("leak-{round}-0"), Duration::from_secs(10))
                .wait(Duration::from_millis(50)),
        );
        assert!(
            matches!(waited, Err(redquorum::Error::NotAcquired { .. })),
            "{waited:?}"
        );
        let notify = || -> Vec<String> {
            support::thread_names()
                .into_iter()
                .filter(|name| name.starts_with("redlock-notify"))
                .collect()
        };
        // A thread names itself once it runs, which the waiter does not wait for.
        support::eventually(Duration::from_secs(3), || !notify().is_empty());
        assert_eq!(notify(), ["redlock-notify"], "round {round}");
        // Some released, some dropped, one outliving the client handle.
        let last = locks.pop().unwrap();
        for (i, lock) in locks.into_iter().enumerate() {
            if i % 2 == 0 {
                lock.release().unwrap();
            }
        }
        drop(rl);
        assert!(last.validity() > Duration::ZERO);
        drop(last);
        // Joined on the last drop, which waits up to one I/O timeout (2 × the patient node
        // timeout of the test client) for the workers; one still ending after that is left
        // to end on its own. And a joined thread's /proc entry can outlive the join by a
        // moment (the kernel wakes the joiner early in the thread's exit). So the counts are
        // given a few seconds; a leaked thread or connection never goes.
        let settled = support::eventually(Duration::from_secs(3), || {
            support::entries("/proc/self/task") == threads
                && support::entries("/proc/self/fd") == fds
        });
        assert!(
            settled,
            "round {round}: threads or connections leaked: {} threads ({threads} before), {} \
             fds ({fds} before)",
            support::entries("/proc/self/task"),
            support::entries("/proc/self/fd")
        );
    }
    // And dropped locks were released before the workers stopped.
    let rl = cluster.client();
    for round in 0..20 {
        for i in 0..50 {
            rl.try_lock(&format!("leak-{round}-{i}"), Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("leak-{round}-{i} still held: {e}"))
                .release()
                .unwrap();
        }
    }
}
