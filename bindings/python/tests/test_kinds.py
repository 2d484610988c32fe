"""Fenced, reentrant and multi-resource locks through the Python binding."""

from __future__ import annotations

import threading
import uuid

import pytest
from redis_nodes import RespError, assert_on_nodes

import redquorum


def test_fenced_tokens_strictly_increase(nodes, make_client, resource):
    rl = make_client()
    tokens = []
    for _ in range(4):
        with rl.lock_fenced(resource, ttl=10) as lock:
            assert isinstance(lock.fence, int)
            assert lock.hold_count is None
            assert_on_nodes(nodes, resource, lock.token)  # a plain lock's key and value
            tokens.append(lock.fence)
    assert tokens == sorted(set(tokens)) and tokens[0] >= 1
    counter = f"redlock:fence:{{{resource}}}"
    assert sum(int(node.command("GET", counter) or 0) == tokens[-1] for node in nodes) >= 3
    assert all(node.command("PTTL", counter) in (-1, -2) for node in nodes)  # never expires
    plain = rl.try_lock(resource, ttl=10)
    assert plain.fence is None
    with pytest.raises(redquorum.NotAcquired):
        rl.acquire(redquorum.Request(resource, ttl=10, fenced=True, retries=0))
    plain.release()
    once = redquorum.Request(resource, ttl=10, fenced=True, retries=0)
    assert rl.acquire(once).fence > tokens[-1]


def test_fenced_tokens_increase_across_threads(make_client, resource):
    rl = make_client(retry_count=500, retry_delay=0.002, retry_jitter=0.002)
    seen: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                with rl.lock_fenced(resource, ttl=10) as lock:
                    seen.append(lock.fence)  # in holder order: the lock excludes the others
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(seen) == 40
    assert all(a < b for a, b in zip(seen, seen[1:])), seen


def _holds(node, resource, owner):
    """``owner``'s hold count on ``node``; None when the key is not a hash: a refused plain
    attempt's SET can sit there until its undo arrives, since calls return on a quorum."""
    try:
        return node.command("HGET", resource, owner)
    except RespError as e:
        if str(e).startswith("WRONGTYPE"):
            return None
        raise


def test_reentrant_holds_nest_and_block_other_owners(nodes, make_client, resource):
    rl = make_client()
    alice = uuid.uuid4().hex
    with rl.acquire(redquorum.Request(resource, ttl=10, reentrant=alice)) as outer:
        assert outer.hold_count == 1 and outer.token == alice and outer.fence is None
        with rl.acquire(redquorum.Request(resource, ttl=10, reentrant=alice, retries=0)) as inner:
            assert inner.hold_count == 2
            assert sum(_holds(node, resource, alice) == "2" for node in nodes) >= 3
            with pytest.raises(redquorum.NotAcquired):
                rl.acquire(redquorum.Request(resource, ttl=10, reentrant="bob", retries=0))
            with pytest.raises(redquorum.NotAcquired):
                rl.try_lock(resource, ttl=10)
        assert sum(_holds(node, resource, alice) == "1" for node in nodes) >= 3
        with pytest.raises(redquorum.NotAcquired):
            rl.acquire(redquorum.Request(resource, ttl=10, reentrant="bob", retries=0))
    bob = rl.acquire(redquorum.Request(resource, ttl=10, reentrant="bob", retries=0))
    assert bob.hold_count == 1
    bob.release()


def test_reentrant_owner_arguments(make_client, resource):
    rl = make_client()
    for owner in ["", "a\0b", "x" * 1025]:
        with pytest.raises(ValueError):
            rl.acquire(redquorum.Request(resource, ttl=10, reentrant=owner, retries=0))
    with pytest.raises(TypeError):
        rl.acquire(redquorum.Request(resource, ttl=10, reentrant=42, retries=0))


def test_lock_many_is_all_or_nothing(nodes, make_client, resource):
    rl = make_client()
    a, b, c = (f"{resource}:{k}" for k in "abc")
    with rl.acquire(redquorum.Request(resources=[c, a], ttl=10)) as lock:
        assert lock.resources == [a, c]
        assert lock.resource == f"{a},{c}"
        assert_on_nodes(nodes, a, lock.token)
        assert_on_nodes(nodes, c, lock.token)
        with pytest.raises(redquorum.NotAcquired):
            rl.acquire(redquorum.Request(resources=[b, c], ttl=10, retries=0))
        assert_on_nodes(nodes, b, None)  # the refused attempt left nothing behind
        lock.extend(ttl=20)
    assert_on_nodes(nodes, a, None)
    assert_on_nodes(nodes, c, None)
    rl.acquire(redquorum.Request(resources=[b, c], ttl=10, retries=0)).release()


def test_lock_many_arguments(make_client, resource):
    rl = make_client()
    for bad in [[], [resource, resource], [resource, ""], [f"{resource}{i}" for i in range(65)]]:
        with pytest.raises(ValueError):
            rl.acquire(redquorum.Request(resources=bad, ttl=10, retries=0))
    for bad in [resource, None, [resource, 3]]:
        with pytest.raises(TypeError):
            rl.acquire(redquorum.Request(resources=bad, ttl=10, retries=0))
    with pytest.raises(ValueError):
        rl.acquire(redquorum.Request(resources=[resource], ttl=0, retries=0))
