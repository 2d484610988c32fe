"""Durations in seconds (int, float, timedelta), as keywords only; new_owner(); on_lost()."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import threading
import time
from datetime import timedelta

import pytest
from redis_nodes import assert_on_nodes, values

import redquorum
from redquorum.aio import AsyncRedlock

FAST = {"node_timeout": 0.3, "retry_delay": 0.02, "retry_jitter": 0.01}


def _pttls(nodes, key: str) -> list[int]:
    return [ttl for ttl in (node.command("PTTL", key) for node in nodes) if ttl > 0]


def _quorum(nodes) -> int:
    return len(nodes) // 2 + 1


@pytest.mark.parametrize("ttl", [10, 10.0, timedelta(seconds=10)], ids=repr)
def test_ttl_in_seconds_sets_that_ttl_on_a_quorum(nodes, make_client, resource, ttl):
    rl = make_client()
    with rl.lock(resource, ttl=ttl) as lock:
        assert 8.0 < lock.validity <= 10.0
        pttls = _pttls(nodes, resource)
        assert len(pttls) >= _quorum(nodes)
        assert all(8_000 < pttl <= 10_000 for pttl in pttls)
        lock.extend(ttl=timedelta(seconds=30))
        pttls = _pttls(nodes, resource)
        assert len([p for p in pttls if 28_000 < p <= 30_000]) >= _quorum(nodes)
        lock.extend(ttl=20.5)
        assert 19.0 < lock.validity <= 20.5
    assert lock.validity == 0.0


def test_every_acquire_takes_seconds(make_client, resource):
    rl = make_client()
    owner = redquorum.Redlock.new_owner()
    for call in (
        lambda: rl.try_lock(resource, ttl=5),
        lambda: rl.lock_fenced(resource, ttl=5.0),
        lambda: rl.lock(resource, ttl=5, auto_extend=True, max_hold=timedelta(minutes=1)),
    ):
        lock = call()
        assert 3.0 < lock.validity <= 5.0
        lock.release()


def _calls_with_a_positional_count(rl, resource: str, owner: str) -> dict[str, object]:
    """Each acquiring call of ``rl``, given 5000 where its TTL once went as milliseconds."""
    return {
        "lock": lambda: rl.lock(resource, 5000),
        "try_lock": lambda: rl.try_lock(resource, 5000),
        "lock_fenced": lambda: rl.lock_fenced(resource, 5000),
        "read_lock": lambda: rl.read_lock(resource, 5000),
        "write_lock": lambda: rl.write_lock(resource, 5000),
        "semaphore": lambda: rl.semaphore(resource, 2, 5000),
        "Request": lambda: redquorum.Request(resource, 5000),
        "election": lambda: rl.election(resource, owner, 5000),
        "campaign": lambda: rl.campaign(resource, owner, 5000),
    }


def test_no_count_of_milliseconds_is_read_as_seconds(nodes, make_client, resource):
    # A TTL is a keyword in seconds: 5000 where milliseconds once went is a TypeError, not a
    # lock of 5000 s, and the removed *_ms keywords are unknown.
    rl = make_client()
    owner = rl.new_owner()
    for name, call in _calls_with_a_positional_count(rl, resource, owner).items():
        with pytest.raises(TypeError, match="positional"):
            call()  # type: ignore[operator]
        assert all(value is None for value in values(nodes, resource)), name
    with rl.try_lock(resource, ttl=10) as lock:
        with pytest.raises(TypeError, match="positional"):
            lock.extend(5000)  # type: ignore[misc]
        assert 8 < lock.validity <= 10
    for keywords in (
        {"ttl": 5, "ttl_ms": 5000},
        {"ttl": 5, "wait_timeout_ms": 1000},
        {"ttl": 5, "auto_extend": True, "max_hold_ms": 60_000},
    ):
        with pytest.raises(TypeError, match="_ms"):
            rl.lock(resource, **keywords)
    with pytest.raises(TypeError, match="_ms"):
        redquorum.Request(resource, ttl=5, retry_delay_ms=10, retry_jitter_ms=10)
    with pytest.raises(TypeError, match="_ms"):
        redquorum.AutoExtend(max_hold_ms=1000)
    # The release returned on a quorum: the last nodes' deletes may still be on their way.
    assert_on_nodes(nodes, resource, None)


def test_no_count_of_milliseconds_is_read_as_seconds_in_asyncio(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1.0) as rl:
            owner = rl.new_owner()
            for name, call in _calls_with_a_positional_count(rl, resource, owner).items():
                with pytest.raises(TypeError, match="positional"):
                    await call()  # type: ignore[operator]
                assert all(value is None for value in values(nodes, resource)), name
            async with rl.try_lock(resource, ttl=10) as lock:
                with pytest.raises(TypeError, match="positional"):
                    await lock.extend(5000)  # type: ignore[misc]

    asyncio.run(main())


def test_extend_without_a_ttl_is_refused(make_client, resource):
    with make_client().try_lock(resource, ttl=10) as lock:
        with pytest.raises(TypeError, match="ttl"):
            lock.extend()  # type: ignore[call-arg]


def test_no_ttl_at_all_is_a_type_error(make_client, resource):
    rl = make_client()
    for call in (rl.lock, rl.try_lock, rl.lock_fenced):
        with pytest.raises(TypeError, match="ttl"):
            call(resource)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "ttl, error",
    [
        (0, ValueError),
        (0.0004, ValueError),  # rounds to 0 ms
        (-1.0, ValueError),
        (timedelta(0), ValueError),
        (timedelta(seconds=-1), ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (11 * 365 * 86_400, ValueError),  # over the 10-year cap
        (True, TypeError),
        ("10", TypeError),
        (b"10", TypeError),
    ],
    ids=repr,
)
def test_bad_seconds(make_client, resource, ttl, error):
    with pytest.raises(error, match="ttl"):
        make_client().try_lock(resource, ttl=ttl)


def test_wait_timeout_in_seconds_waits_then_gives_up_or_gets_it(make_client, resource):
    holder, waiter = make_client(**FAST), make_client(**FAST)
    lock = holder.lock(resource, ttl=30)
    started = time.monotonic()
    with pytest.raises(redquorum.NotAcquired):
        waiter.lock(resource, ttl=10, wait_timeout=0.3)
    assert time.monotonic() - started >= 0.25
    releaser = threading.Timer(0.2, lock.release)
    releaser.start()
    try:
        with waiter.lock(resource, ttl=10, wait_timeout=timedelta(seconds=20)) as got:
            assert got.held
    finally:
        releaser.join()


def test_new_owner_is_random_hex_and_works_as_a_reentrant_owner(make_client, resource):
    owners = {redquorum.Redlock.new_owner() for _ in range(100)}
    assert len(owners) == 100
    assert all(re.fullmatch(r"[0-9a-f]{40}", owner) for owner in owners)
    rl = make_client()
    owner = rl.new_owner()
    with rl.acquire(redquorum.Request(resource, ttl=10, reentrant=owner)) as outer:
        with rl.acquire(redquorum.Request(resource, ttl=10, reentrant=owner)) as inner:
            assert (outer.hold_count, inner.hold_count) == (1, 2)
        with pytest.raises(redquorum.NotAcquired):
            rl.acquire(redquorum.Request(resource, ttl=10, reentrant=rl.new_owner(), retries=0))


def _delete_everywhere(nodes, key: str) -> None:
    # The acquire returned on a quorum; a slow node may apply its SET a moment later.
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        for node in nodes:
            node.command("DEL", key)
        time.sleep(0.05)


def test_on_lost_runs_on_the_extender_when_the_keys_vanish(nodes, make_client, resource):
    rl = make_client(**FAST)
    called = threading.Event()
    seen: list[tuple[redquorum.Lock, int]] = []

    def lost(lock: redquorum.Lock) -> None:
        seen.append((lock, threading.get_ident()))
        with contextlib.suppress(redquorum.LockLost):  # the keys are gone: it is lost
            lock.release()  # allowed from the callback
        called.set()

    lock = rl.lock(resource, ttl=1.5, auto_extend=True)
    lock.on_lost(lost)
    assert not called.is_set()
    _delete_everywhere(nodes, resource)
    assert called.wait(10), "on_lost was not called within 10 s"
    assert len(seen) == 1
    assert seen[0][0] is lock and seen[0][1] != threading.get_ident()
    assert lock.lost and not lock.held and lock.released
    # Registered on a lock that is already lost, it runs at once, on this thread.
    again: list[int] = []
    lock.on_lost(lambda _lock: again.append(threading.get_ident()))
    assert again == [threading.get_ident()]
    time.sleep(0.5)
    assert len(seen) == 1  # each callback runs at most once


def test_on_lost_is_not_called_on_release_and_wants_a_callable(make_client, resource):
    rl = make_client(**FAST)
    called: list[redquorum.Lock] = []
    with rl.lock(resource, ttl=1.5, auto_extend=True) as lock:
        with pytest.raises(TypeError, match="callable"):
            lock.on_lost("not a function")  # type: ignore[arg-type]
        lock.on_lost(called.append)
        time.sleep(1.0)  # a few extensions go by
    time.sleep(0.5)
    assert called == []
