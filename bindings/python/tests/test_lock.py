"""What a user relies on from one client: acquire, inspect, extend, release, contention."""

from __future__ import annotations

import os
import select
import signal
import threading
import time

import pytest
from redis_nodes import PATIENT, assert_on_nodes, values

import redquorum


def test_round_trip(nodes, make_client, resource):
    rl = make_client()
    lock = rl.try_lock(resource, ttl=10)
    assert lock.resource == resource
    assert isinstance(lock.token, str) and lock.token
    assert not lock.released
    # The same plain key and value on every node, so other Redlock clients contend correctly.
    assert_on_nodes(nodes, resource, lock.token)
    first_validity = lock.validity
    assert 0 < first_validity <= 10

    lock.extend(ttl=60)
    assert 10 < lock.validity <= 60
    # extend() returns once a quorum has answered
    assert sum(node.command("PTTL", resource) > 10_000 for node in nodes) >= 3

    lock.release()
    assert lock.released
    assert lock.validity == 0.0
    assert_on_nodes(nodes, resource, None)
    lock.release()  # idempotent
    with pytest.raises(redquorum.LockLost) as lost:
        lock.extend(ttl=10)
    assert lost.value.status == redquorum.Status.LOST
    assert str(lost.value)


def test_tokens_are_unique_per_acquisition(make_client, resource):
    rl = make_client()
    tokens = set()
    for _ in range(20):
        with rl.try_lock(resource, ttl=10) as lock:
            tokens.add(lock.token)
    assert len(tokens) == 20


def test_lock_is_released_when_the_body_raises(nodes, make_client, resource):
    rl = make_client()
    with pytest.raises(RuntimeError, match="boom"):
        with rl.lock(resource, ttl=10) as lock:
            assert_on_nodes(nodes, resource, lock.token)
            raise RuntimeError("boom")
    assert lock.released
    assert_on_nodes(nodes, resource, None)
    # and the resource is free for the next owner at once, not after the TTL
    rl.try_lock(resource, ttl=10).release()


def test_lock_is_released_on_normal_exit(nodes, make_client, resource):
    rl = make_client()
    with rl.lock(resource, ttl=10) as lock:
        pass
    assert lock.released
    assert_on_nodes(nodes, resource, None)


def test_exit_reports_a_lock_lost_during_the_body(nodes, make_client, resource):
    rl = make_client()
    with pytest.raises(redquorum.LockLost):
        with rl.lock(resource, ttl=10):
            for node in nodes:  # as if the TTL ran out and someone else took the key
                node.command("SET", resource, "someone-else")
    assert_on_nodes(nodes, resource, "someone-else")  # never deletes theirs


def test_exit_does_not_mask_the_body_exception(nodes, make_client, resource):
    rl = make_client()
    with pytest.raises(KeyError):
        with rl.lock(resource, ttl=10):
            for node in nodes:
                node.command("DEL", resource)
            raise KeyError("from the body")


def test_not_acquired_while_held(nodes, make_client, resource):
    holder = make_client().try_lock(resource, ttl=10)
    # Every node has the holder's key before the other client tries: otherwise the other's SET
    # could beat the holder's in-flight one on a slow node, which would then refuse the holder's.
    assert_on_nodes(nodes, resource, holder.token)
    other = make_client(retry_count=1, retry_delay=0.01, retry_jitter=0.005)

    with pytest.raises(redquorum.NotAcquired) as refused:
        other.try_lock(resource, ttl=10)
    assert refused.value.status == redquorum.Status.NOT_ACQUIRED
    assert isinstance(refused.value, redquorum.RedlockError)
    assert str(refused.value)
    with pytest.raises(redquorum.NotAcquired):
        other.lock(resource, ttl=10)
    # the failed attempts left the holder's key alone
    assert_on_nodes(nodes, resource, holder.token)

    holder.release()
    other.try_lock(resource, ttl=10).release()


def test_not_acquired_while_a_foreign_client_holds_the_key(nodes, make_client, resource):
    for node in nodes:
        node.command("SET", resource, "another-redlock-implementation", "PX", 10_000)
    with pytest.raises(redquorum.NotAcquired):
        make_client().try_lock(resource, ttl=10)
    assert_on_nodes(nodes, resource, "another-redlock-implementation")


def test_a_single_node_works_too(nodes, make_client, resource):
    rl = make_client([nodes[0].url])
    with rl.lock(resource, ttl=10) as lock:
        assert nodes[0].command("GET", resource) == lock.token
    assert nodes[0].command("GET", resource) is None


def test_lock_retries_until_the_holder_releases(make_client, resource):
    holder = make_client().try_lock(resource, ttl=0.3)  # expires on its own
    rl = make_client(retry_count=30, retry_delay=0.05, retry_jitter=0.01)
    lock = rl.lock(resource, ttl=10)
    assert lock.token != holder.token
    lock.release()


def test_default_lock_waits_out_a_holder_that_releases_within_seconds(urls, make_client, resource):
    # The default patience, about 10 s (the README), outlasts a 2 s hold.
    holder = make_client().try_lock(resource, ttl=10)
    releaser = threading.Timer(2.0, holder.release)
    releaser.start()
    try:
        # Every retry option the library's default; the node timeout is the suite's, since a
        # loaded machine misses the default 50 ms.
        with redquorum.Redlock(urls, node_timeout=PATIENT) as rl:
            with rl.lock(resource, ttl=10) as lock:
                assert lock.token != holder.token
    finally:
        releaser.join()


def test_retry_options_are_applied(make_client, resource):
    holder = make_client().try_lock(resource, ttl=10)
    rl = make_client(retry_count=2, retry_delay=0.3, retry_jitter=0)
    started = time.monotonic()
    with pytest.raises(redquorum.NotAcquired):
        rl.lock(resource, ttl=10)
    assert time.monotonic() - started >= 0.55  # two waits of 300 ms between three attempts
    holder.release()


def test_drift_factor_is_applied(make_client, resource):
    with make_client(drift_factor=0.5).try_lock(resource, ttl=10) as lock:
        assert 0 < lock.validity <= 5


def test_max_extensions(nodes, make_client, resource):
    rl = make_client(max_extensions=2)
    with rl.try_lock(resource, ttl=10) as lock:
        lock.extend(ttl=10)
        lock.extend(ttl=10)
        with pytest.raises(redquorum.ExtensionLimit) as limit:
            lock.extend(ttl=10)
        assert limit.value.status == redquorum.Status.EXTENSION_LIMIT
        assert lock.validity > 0  # still held
        assert_on_nodes(nodes, resource, lock.token)


def test_dropping_a_held_lock_releases_it(nodes, make_client, resource):
    lock = make_client().try_lock(resource, ttl=60)
    assert_on_nodes(nodes, resource, lock.token)
    del lock
    assert_on_nodes(nodes, resource, None)


def test_locks_outlive_their_closed_client(nodes, urls, resource):
    rl = redquorum.Redlock(urls, node_timeout=PATIENT)
    lock = rl.try_lock(resource, ttl=10)
    rl.close()
    assert rl.closed
    lock.extend(ttl=20)
    assert lock.validity > 10
    lock.release()
    assert_on_nodes(nodes, resource, None)


def test_closed_client(urls, resource):
    with redquorum.Redlock(urls) as rl:
        assert not rl.closed
    assert rl.closed
    rl.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        rl.lock(resource, ttl=10)
    with pytest.raises(ValueError, match="closed"):
        rl.try_lock(resource, ttl=10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_is_told_to_make_its_own_client(make_client, resource):
    rl = make_client()
    lock = rl.try_lock(resource, ttl=10)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what happened through the pipe, never return into pytest
        try:
            outcome = "no error"
            for call in (lambda: rl.try_lock(resource + ":child", ttl=10), lock.release):
                try:
                    call()
                except ValueError as exc:
                    outcome = "ValueError: " + str(exc)
                if "fork" not in outcome:
                    break
            os.write(write_end, outcome.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        outcome = pipe.read()
    os.waitpid(pid, 0)
    assert outcome.startswith("ValueError") and "fork" in outcome, outcome
    assert lock.validity > 0  # the parent's lock is untouched
    lock.release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_can_lock_with_a_client_of_its_own(nodes, urls, make_client, resource):
    # The main thread's blocking calls run on helper threads that a spawner thread starts; the
    # child inherits none of the parent's threads, so it must get a spawner of its own.
    make_client().try_lock(resource + ":parent", ttl=10).release()  # parent's spawner ran
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            outcome = "no outcome"
            try:
                child = redquorum.Redlock(urls, node_timeout=PATIENT)
                lock = child.lock(resource, ttl=10)
                outcome = "locked " + lock.token
                lock.release()
                child.close()
            except BaseException as exc:  # reported to the parent
                outcome = f"{type(exc).__name__}: {exc}"
            os.write(write_end, outcome.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 30)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read_end) as pipe:
        outcome = pipe.read() if ready else "the child hung"
    os.waitpid(pid, 0)
    assert outcome.startswith("locked "), outcome
    # And released it, on a quorum: the release returns once a quorum answered, and the child's
    # os._exit may cut off what was still queued for the last nodes (their keys then expire).
    found = values(nodes, resource)
    assert sum(value is None for value in found) >= len(nodes) // 2 + 1, found


def test_default_options_come_from_the_library():
    assert redquorum.default_options() == {
        "retry_count": 50,
        "retry_delay": 0.2,
        "retry_jitter": 0.1,
        "drift_factor": 0.01,
        "node_timeout": 0.05,
        "max_extensions": None,
        "restart_grace": None,
        "clock_guard": True,
        "clock_jump_threshold": 0.05,
        "clock_quarantine": 60,
        "strict_servers": False,
        "min_replicas": None,
    }


def test_library_version_matches_the_binding():
    assert redquorum.library_version() == redquorum.__version__
