"""Auto-extended locks, the lost signal, and waiting on release notifications (scaled down)."""

from __future__ import annotations

import threading
import time

import pytest
from redis_nodes import assert_on_nodes

import redquorum

# An auto-extended lock is lost when extensions (every TTL/3, each waiting up to the node
# timeout) fail until its validity runs out: a TTL of 1.5 s takes two stalls of 300 ms in a row
# on a majority, which a busy 2-core machine can cause at 100 ms but hardly at 300 ms.
TTL = 1.5  # seconds
FAST = {"node_timeout": 0.3, "retry_delay": 0.02, "retry_jitter": 0.01}


def _holding(nodes, key: str, token: str) -> list:
    """The nodes that hold ``token`` under ``key`` once the lock call's SETs have landed.

    A lock call returns on a quorum; a slow node applies its SET a moment later, or never
    when its worker dropped the request at the call's deadline.
    """
    deadline = time.monotonic() + 1
    while True:
        holding = [node for node in nodes if node.command("GET", key) == token]
        if len(holding) == len(nodes) or time.monotonic() > deadline:
            return holding
        time.sleep(0.01)


def test_auto_extended_lock_outlives_its_ttl(nodes, make_client, resource):
    rl = make_client(**FAST)
    other = make_client()  # patient: its refusals must come back as refusals
    with rl.lock(resource, ttl=TTL, auto_extend=True) as lock:
        deadline = time.monotonic() + 3 * TTL
        while time.monotonic() < deadline:
            assert lock.held
            with pytest.raises(redquorum.NotAcquired):
                other.try_lock(resource, ttl=TTL)
            time.sleep(0.1)
        assert not lock.lost
    assert not lock.held
    other.try_lock(resource, ttl=TTL).release()


def test_with_block_raises_lock_lost_when_the_keys_vanish(nodes, make_client, resource):
    rl = make_client(**FAST)
    with pytest.raises(redquorum.LockLost):
        with rl.lock(resource, ttl=TTL, auto_extend=True) as lock:
            untouched = _holding(nodes[3:], resource, lock.token)
            # A lock call returns on a quorum: a slow node may apply its SET a moment after a
            # DEL sent at once, so each key is deleted once it is there.
            for node in nodes[:3]:
                deadline = time.monotonic() + 1
                while node.command("DEL", resource) == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
            deadline = time.monotonic() + 5
            while lock.held and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lock.lost
            assert not lock.held
            assert lock.validity == 0.0
            # A failed extension never deletes keys: the nodes not touched that had ours keep it.
            assert [node.command("GET", resource) for node in untouched] == [lock.token] * len(
                untouched
            )


def test_extension_stops_after_release_and_garbage_collection(nodes, make_client, resource):
    rl = make_client(**FAST)
    lock = rl.lock(resource, ttl=TTL, auto_extend=True)
    lock.release()
    del lock
    other = rl.lock(resource + ":gc", ttl=TTL, auto_extend=True)
    del other  # dropped unreleased: released and no longer extended
    time.sleep(2 * TTL)
    for key in (resource, resource + ":gc"):
        assert all(node.command("GET", key) is None for node in nodes)


def test_max_hold_ends_in_a_lost_lock(nodes, make_client, resource):
    rl = make_client(**FAST)
    lock = rl.lock(resource, ttl=TTL, auto_extend=True, max_hold=TTL)
    deadline = time.monotonic() + 10
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.lost and not lock.held
    # Lost is flagged when the validity runs out, a little before the keys expire: until they
    # have, a release could still delete them.
    assert_on_nodes(nodes, resource, None)
    with pytest.raises(redquorum.LockLost):
        lock.release()


def test_waiters_get_the_lock_after_release(nodes, make_client, resource):
    # A slow fallback: only the release notification wakes the waiters promptly.
    rl = make_client(retry_delay=3)
    holder = rl.lock(resource, ttl=10)
    got: list[float] = []

    def wait() -> None:
        with rl.lock(resource, ttl=10, wait_timeout=30):
            got.append(time.monotonic())

    threads = [threading.Thread(target=wait) for _ in range(3)]
    for t in threads:
        t.start()
    # Release once the waiters listen on every node (one subscription per node for the
    # client): a release before that would leave them to their fallback wait. The channel
    # shares the resource's hash slot: redlock:released:{<resource>}:<resource>.
    channel = f"redlock:released:{{{resource}}}:{resource}"
    deadline = time.monotonic() + 5
    while not all(node.command("PUBSUB", "NUMSUB", channel)[1] == 1 for node in nodes):
        assert time.monotonic() < deadline, "the waiters never subscribed"
        time.sleep(0.01)
    time.sleep(0.2)
    released = time.monotonic()
    holder.release()
    for t in threads:
        t.join()
    assert len(got) == 3
    # The first waiter in: well before the fallback's 1.5 s minimum.
    assert min(got) - released < 1.4
    # No subscription is left behind.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if all(node.command("PUBSUB", "NUMSUB", channel)[1] == 0 for node in nodes):
            break
        time.sleep(0.05)
    assert all(node.command("PUBSUB", "NUMSUB", channel)[1] == 0 for node in nodes)


def test_a_waiter_gives_up_at_its_deadline(nodes, make_client, resource):
    rl = make_client(retry_delay=0.02, retry_jitter=0.01)
    holder = rl.lock(resource, ttl=10)
    start = time.monotonic()
    with pytest.raises(redquorum.NotAcquired):
        rl.lock(resource, ttl=10, wait_timeout=0.3)
    assert time.monotonic() - start >= 0.3
    holder.release()


def test_bad_options_are_rejected(make_client, resource):
    rl = make_client(**FAST)
    with pytest.raises(ValueError):
        rl.lock(resource, ttl=TTL, auto_extend=True, extend_fraction=1.0)
    with pytest.raises(ValueError):
        rl.lock(resource, ttl=TTL, auto_extend=True, extend_fraction=0)
    with pytest.raises(ValueError):
        rl.lock(resource, ttl=TTL, wait_timeout=-0.001)
    with pytest.raises(TypeError):
        rl.lock(resource, ttl=TTL, auto_extend="yes")
    with pytest.raises(ValueError):
        rl.lock(resource, ttl=0.1, auto_extend=True)  # too short to extend in time
