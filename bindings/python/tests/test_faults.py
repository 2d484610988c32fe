"""Real faults: crashed (SIGKILL) and hung (SIGSTOP) nodes."""

from __future__ import annotations

import time

import pytest
from redis_nodes import assert_on_nodes, values

import redlock

# Crashed nodes fail at once; hung ones cost node_timeout_ms, kept short but not razor thin.
FAST = dict(retry_count=1, retry_delay_ms=10, retry_jitter_ms=5, node_timeout_ms=200)


def test_no_quorum_with_a_majority_crashed(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.kill()
    with pytest.raises(redlock.NoQuorum) as refused:
        rl.lock(resource, ttl_ms=10_000)
    assert refused.value.status == redlock.Status.NO_QUORUM
    assert str(refused.value)
    with pytest.raises(redlock.NoQuorum):
        rl.try_lock(resource, ttl_ms=10_000)
    # the nodes that were up do not keep a half-acquired lock
    assert_on_nodes(nodes[3:], resource, None)


def test_no_quorum_with_a_majority_hung(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.stop()
    with pytest.raises(redlock.NoQuorum):
        rl.try_lock(resource, ttl_ms=10_000)


def test_a_minority_down_does_not_matter(nodes, make_client, resource):
    rl = make_client(**FAST)
    nodes[0].kill()
    nodes[1].stop()
    with rl.lock(resource, ttl_ms=10_000) as lock:
        assert 0 < lock.validity_ms <= 10_000
        assert_on_nodes(nodes[2:], resource, lock.token)
        lock.extend(20_000)
    assert_on_nodes(nodes[2:], resource, None)


def test_client_recovers_after_nodes_restart(nodes, make_client, resource):
    rl = make_client(**FAST)
    for node in nodes[:3]:
        node.kill()
    with pytest.raises(redlock.NoQuorum):
        rl.try_lock(resource, ttl_ms=10_000)
    for node in nodes[:3]:
        node.start()
    # The same client reconnects on its own (with a capped backoff, so allow a generous while).
    deadline = time.monotonic() + 15
    while True:
        try:
            lock = rl.try_lock(resource, ttl_ms=10_000)
            break
        except redlock.NoQuorum:
            assert time.monotonic() < deadline, "the client never reconnected"
            time.sleep(0.05)
    assert values(nodes, resource).count(lock.token) >= 3  # a quorum, maybe not all nodes yet
    lock.release()
