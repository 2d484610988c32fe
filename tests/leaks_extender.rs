//! The extender, subscriber and event dispatcher threads end with the client, or with what
//! outlives it. A test binary of its own, so no other test's threads or sockets are counted.

mod support;

use std::time::Duration;

use redquorum::{AutoExtend, LockRequest};

#[test]
fn extender_subscriber_and_dispatcher_threads_end_with_the_client() {
    let cluster = support::Cluster::start(3);
    let threads = support::entries("/proc/self/task");
    let fds = support::entries("/proc/self/fd");
    // Auto-extension needs `ttl / 3 + node_timeout < ttl`; with the test client's patient node
    // timeout, a TTL that a stalled extension or two cannot outrun.
    let ttl = Duration::from_secs(2);
    for round in 0..4 {
        let rl = cluster.client();
        let auto: Vec<_> = (0..10)
            .map(|i| {
                rl.acquire(
                    &LockRequest::new(format!("x-{round}-{i}"), ttl).auto_extend(AutoExtend::new()),
                )
                .unwrap()
            })
            .collect();
        // A waiter starts the subscriber threads.
        let busy = rl.lock("x-busy", Duration::from_secs(10)).unwrap();
        assert!(
            rl.acquire(&LockRequest::new("x-busy", ttl).wait(Duration::from_millis(100)))
                .is_err()
        );
        std::thread::sleep(ttl);
        assert!(auto.iter().all(|l| l.is_held()));
        drop(busy);
        drop(auto);
        drop(rl);
        assert_back_to(threads, "/proc/self/task", format_args!("round {round}"));
        assert_back_to(fds, "/proc/self/fd", format_args!("round {round}"));
    }
    an_observer_outliving_its_client_takes_the_subscriber_thread_with_it(threads, fds);
    listeners_come_and_go_without_leaving_threads(&cluster, threads);
}

/// The event dispatcher's thread stops with the client's last listener.
fn listeners_come_and_go_without_leaving_threads(cluster: &support::Cluster, threads: usize) {
    let rl = cluster.client();
    let ttl = Duration::from_secs(5);
    for _ in 0..50 {
        let a = rl.on_event(|_| {}).unwrap();
        let b = rl.on_event(|_| {}).unwrap();
        rl.lock("come-and-go", ttl).unwrap().release().unwrap();
        // The thread names itself once it runs.
        assert!(
            support::eventually(Duration::from_secs(3), dispatching),
            "a listener runs the dispatcher"
        );
        drop(a);
        drop(b);
        assert!(
            support::eventually(Duration::from_secs(3), || !dispatching()),
            "the dispatcher stops with its last listener"
        );
    }
    drop(rl);
    assert_back_to(threads, "/proc/self/task", format_args!("listener rounds"));
}

/// An election observer outlives its client: its subscription is the last holder of the
/// client's notifier, and dropping it ends the subscriber thread, here with the node gone, when
/// nothing else would wake that thread. (Before, 3 rounds in 20 left it asleep for good when
/// the process ran on one core.)
fn an_observer_outliving_its_client_takes_the_subscriber_thread_with_it(
    threads: usize,
    fds: usize,
) {
    let mut node = support::RedisNode::start();
    for round in 0..20 {
        let rl = support::builder(&[node.url()]).build().unwrap();
        let mut observer = rl.observe("leak-observer", None).unwrap();
        drop(rl);
        assert!(matches!(observer.next(), Some(None)), "round {round}");
        node.kill();
        std::thread::sleep(Duration::from_millis(100));
        drop(observer);
        node.restart();
        assert_back_to(
            threads,
            "/proc/self/task",
            format_args!("observer round {round}"),
        );
    }
    drop(node);
    assert_back_to(fds, "/proc/self/fd", format_args!("observer rounds"));
}

/// Whether the event dispatcher's thread runs.
fn dispatching() -> bool {
    support::thread_names()
        .iter()
        .any(|name| name == "redlock-events")
}

/// Asserts that `dir` (`/proc/self/task` or `/proc/self/fd`) is back to `count` entries within
/// 3 s: a joined thread's entry can outlive the join by a moment on a loaded machine.
#[track_caller]
fn assert_back_to(count: usize, dir: &str, what: std::fmt::Arguments) {
    assert!(
        support::eventually(Duration::from_secs(3), || support::entries(dir) == count),
        "{what}: {} leaked ({} entries, {count} before)",
        if dir.ends_with("fd") {
            "connections"
        } else {
            "threads"
        },
        support::entries(dir)
    );
}
