"""Real faults: crashed (SIGKILL) and hung (SIGSTOP) nodes."""

from __future__ import annotations

import time

import pytest
from redis_nodes import assert_on_nodes, values

import redquorum

# Crashed nodes fail at once; hung ones cost node_timeout, kept short but not razor thin.
FAST = dict(retry_count=1, retry_delay=0.01, retry_jitter=0.005, node_timeout=0.2)


def test_no_quorum_with_a_majority_crashed(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.kill()
    with pytest.raises(redquorum.NoQuorum) as refused:
        rl.lock(resource, ttl=10)
    assert refused.value.status == redquorum.Status.NO_QUORUM
    assert str(refused.value)
    with pytest.raises(redquorum.NoQuorum):
        rl.try_lock(resource, ttl=10)
    # the nodes that were up do not keep a half-acquired lock
    assert_on_nodes(nodes[3:], resource, None)


def test_no_quorum_with_a_majority_hung(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.stop()
    with pytest.raises(redquorum.NoQuorum):
        rl.try_lock(resource, ttl=10)


def test_a_minority_down_does_not_matter(nodes, make_client, resource):
    # A patient node timeout: every call needs all three healthy nodes to answer in time.
    rl = make_client(retry_count=1, retry_delay=0.01, retry_jitter=0.005)
    nodes[0].kill()
    nodes[1].stop()
    with rl.lock(resource, ttl=10) as lock:
        assert 0 < lock.validity <= 10
        assert_on_nodes(nodes[2:], resource, lock.token)
        lock.extend(ttl=20)
    assert_on_nodes(nodes[2:], resource, None)
    # What failed is counted per node: the crashed and the hung one, not the others.
    deadline = time.monotonic() + 10
    while min(s.errors for s in rl.node_status()[:2]) == 0:
        assert time.monotonic() < deadline, rl.node_status()
        time.sleep(0.05)
    assert [s.errors for s in rl.node_status()[2:]] == [0] * (len(nodes) - 2)
    assert "redlock_node_errors_total{node=" in rl.stats().prometheus


def test_client_recovers_after_nodes_restart(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.kill()
    with pytest.raises(redquorum.NoQuorum):
        rl.try_lock(resource, ttl=10)
    for node in nodes[:3]:
        node.start()
    # The same client reconnects on its own (with a capped backoff, so allow a generous while).
    deadline = time.monotonic() + 15
    while True:
        try:
            lock = rl.try_lock(resource, ttl=10)
            break
        except redquorum.NoQuorum:
            assert time.monotonic() < deadline, "the client never reconnected"
            time.sleep(0.05)
    assert values(nodes, resource).count(lock.token) >= 3  # a quorum, maybe not all nodes yet
    lock.release()


def test_node_status_sees_a_restart(nodes, make_client, resource):
    rl = make_client(**FAST)
    before = rl.node_status()
    assert [s.address for s in before] == [n.url.removeprefix("redis://") for n in nodes]
    assert all(s.connected and s.restarts == 0 and len(s.run_id or "") == 40 for s in before)
    assert all(s.uptime is not None and s.grace_remaining == 0 for s in before)
    nodes[0].kill()
    nodes[0].start()
    deadline = time.monotonic() + 10
    while rl.node_status()[0].restarts == 0:
        assert time.monotonic() < deadline, rl.node_status()[0]
        try:  # a call makes the worker reconnect, and so notice the new run_id
            rl.try_lock(resource, ttl=1).release()
        except redquorum.RedlockError:
            time.sleep(0.05)
    after = rl.node_status()[0]
    assert after.run_id != before[0].run_id
    assert [s.restarts for s in rl.node_status()[1:]] == [0] * (len(nodes) - 1)


def test_restart_grace_keeps_young_nodes_out(nodes, make_client, resource):
    # Every node of the test session started less than an hour ago, so with an hour's grace
    # none counts toward an acquire: the lock is refused, says why, and nothing stays locked.
    guarded = make_client(**FAST, restart_grace=3600)
    assert all(0 < s.grace_remaining <= 3600 for s in guarded.node_status())
    with pytest.raises(redquorum.NoQuorum, match="restart_grace"):
        guarded.try_lock(resource, ttl=10)
    # The refused attempt's SETs are undone in the background: soon no node holds the key,
    # and another client gets the lock.
    assert_on_nodes(nodes, resource, None)
    with make_client().lock(resource, ttl=10) as lock:
        assert lock.validity > 0
