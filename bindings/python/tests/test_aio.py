"""The asyncio facade with real nodes: contention, loop responsiveness, cancellation."""

from __future__ import annotations

import asyncio
import inspect
import random
import sys
import threading
import time

import pytest
from redis_nodes import assert_on_nodes, values

import redquorum
from redquorum import Election, Leadership, Lock, Observer, Redlock, Request
from redquorum.aio import (
    AsyncElection,
    AsyncLeadership,
    AsyncLock,
    AsyncObserver,
    AsyncRedlock,
)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def ticker(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


def test_fifty_tasks_exclude_each_other_and_the_loop_stays_responsive(urls, resource):
    tasks, rounds = 50, 3
    state = {"counter": 0, "inside": 0, "most_inside": 0}
    gaps: list[float] = []

    async def worker(rl: AsyncRedlock) -> None:
        for _ in range(rounds):
            async with rl.lock(resource, ttl=10, wait_timeout=120) as lock:
                assert isinstance(lock, AsyncLock) and lock.held
                state["inside"] += 1
                state["most_inside"] = max(state["most_inside"], state["inside"])
                value = state["counter"]
                await asyncio.sleep(0.002)  # other tasks run here: only the lock protects us
                state["counter"] = value + 1
                state["inside"] -= 1

    async def main() -> float:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            stop = asyncio.Event()
            tick = asyncio.ensure_future(ticker(stop, gaps))
            start = time.monotonic()
            await asyncio.gather(*(worker(rl) for _ in range(tasks)))
            elapsed = time.monotonic() - start
            stop.set()
            await tick
            return elapsed

    elapsed = run(main())
    print(f"{tasks * rounds} critical sections in {elapsed:.2f} s; max tick gap "
          f"{max(gaps) * 1000:.1f} ms over {len(gaps)} ticks")
    assert state["counter"] == tasks * rounds
    assert state["most_inside"] == 1
    # A call that blocked the loop would hold it until the holder's key expires (10 s), since
    # the holder's release runs on the same loop; a busy machine stalls a process for far less.
    assert max(gaps) < 2, f"event loop blocked for {max(gaps):.3f} s"


def test_cancelling_a_waiting_task_leaves_no_key(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            holder = await rl.lock(resource, ttl=30)
            baseline = threading.active_count()
            task = asyncio.ensure_future(
                rl.acquire(Request(resource, ttl=30, wait_timeout=30, auto_extend=True))
            )
            await asyncio.sleep(0.3)
            start = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - start < 1.5
            # Its thread is gone (it may still be leaving as the task's result comes in).
            deadline = time.monotonic() + 2
            while threading.active_count() > baseline and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert threading.active_count() <= baseline
            assert_on_nodes(nodes, resource, holder.token)
            await holder.release()
            assert_on_nodes(nodes, resource, None)

    run(main())


def test_wait_for_timeout_cancels_the_acquisition(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            holder = await rl.lock_fenced(resource, ttl=30)
            start = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(rl.lock_fenced(resource, ttl=30), 0.3)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(rl.lock(resource, ttl=30, wait_timeout=30), 0.3)
            assert time.monotonic() - start < 0.6 + 2.0
            assert_on_nodes(nodes, resource, holder.token)
            await holder.release()
            assert_on_nodes(nodes, resource, None)

    run(main())


def test_cancellation_racing_a_release_leaves_no_key(nodes, urls):
    # Cancel the waiting task at random offsets around the holder's release: the acquisition is
    # cancelled, or the lock it got in that instant is released; never an orphan (with
    # auto-extension it would live for ever). Keys must be gone long before the 10 s TTL.
    rng = random.Random(14)
    stages = {"cancelled": 0, "got_lock": 0}

    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            for index in range(60):
                resource = f"aio-race:{index}:{rng.random()}"
                holder = await rl.try_lock(resource, ttl=10)
                got: list[AsyncLock] = []

                async def waiter() -> None:
                    async with rl.lock(resource, ttl=10, wait_timeout=5, auto_extend=True) as lock:
                        got.append(lock)
                        await asyncio.sleep(5)

                task = asyncio.ensure_future(waiter())
                release_in = 0.03 + rng.uniform(0, 0.02)
                loop = asyncio.get_running_loop()
                loop.call_later(release_in, lambda h=holder: asyncio.ensure_future(h.release()))
                await asyncio.sleep(max(0.0, release_in + rng.uniform(-0.03, 0.03)))
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                stages["got_lock" if got else "cancelled"] += 1
                await holder.release()
                deadline = time.monotonic() + 2.0
                while any(v is not None for v in values(nodes, resource)):
                    assert time.monotonic() < deadline, (index, values(nodes, resource))
                    await asyncio.sleep(0.01)

    run(main())
    print(stages)
    assert stages["cancelled"] >= 6 and stages["got_lock"] >= 6, stages


def test_release_in_aexit_completes_when_the_task_is_cancelled(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            entered = asyncio.Event()

            async def body() -> None:
                async with rl.lock(resource, ttl=30, auto_extend=True):
                    entered.set()
                    await asyncio.sleep(60)

            task = asyncio.ensure_future(body())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The release returned before the task ended: a quorum is free right away.
            assert sum(v is None for v in values(nodes, resource)) >= 3
            assert_on_nodes(nodes, resource, None)

    run(main())


def test_async_lock_extend_release_and_kinds(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            lock = await rl.acquire(Request(resource, ttl=5, fenced=True, retries=2))
            assert lock.fence is not None and lock.fence >= 1
            await lock.extend(ttl=20)
            assert lock.validity > 10
            with pytest.raises(redquorum.NotAcquired):
                await rl.try_lock(resource, ttl=5)
            await lock.release()
            assert lock.released and not lock.held
            owner = rl.new_owner()
            hold = Request(resource, ttl=5, reentrant=owner)
            async with await rl.acquire(hold) as outer:
                async with await rl.acquire(hold.replace(retries=0)) as inner:
                    assert (outer.hold_count, inner.hold_count) == (1, 2)
            names = [resource + ":b", resource + ":a"]
            async with await rl.acquire(Request(resources=names, ttl=5)) as many:
                assert many.resources == sorted(names)
            cancel = redquorum.Cancel()
            cancel.cancel()
            with pytest.raises(redquorum.Cancelled):
                await rl.acquire(Request(resource, ttl=5, wait_timeout=5, cancel=cancel))
        assert_on_nodes(nodes, resource, None)

    run(main())


def test_on_lost_runs_in_the_loop(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=0.3) as rl:
            lock = await rl.lock(resource, ttl=2, auto_extend=True)
            lost = asyncio.Event()
            seen: list[object] = []

            def on_lost(which: AsyncLock) -> None:
                seen.append((which, threading.current_thread() is threading.main_thread()))
                lost.set()

            lock.on_lost(on_lost)
            for node in nodes:
                node.command("DEL", resource)  # someone else's admin wiped the key
            await asyncio.wait_for(lost.wait(), 5)
            assert seen == [(lock, True)]
            assert lock.lost
            with pytest.raises(redquorum.LockLost):
                await lock.release()

    run(main())


def test_a_lock_got_in_the_instant_of_cancellation_is_released(nodes, urls, resource):
    # Deterministic form of the race: the acquisition finishes on its thread while the loop is
    # busy, and the task is cancelled before it could see the lock. Nobody will ever hold that
    # AsyncLock, so the facade must release it (auto-extended, it would otherwise live on).
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            task = asyncio.ensure_future(
                rl.acquire(Request(resource, ttl=10, auto_extend=True))
            )
            await asyncio.sleep(0)  # the task starts its thread
            deadline = time.monotonic() + 5
            while sum(v is not None for v in values(nodes, resource)) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.005)  # blocks the loop on purpose: the task cannot resume
            time.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 2.0
            while any(v is not None for v in values(nodes, resource)):
                assert time.monotonic() < deadline, values(nodes, resource)
                await asyncio.sleep(0.01)

    run(main())


def test_every_acquiring_call_is_a_coroutine_for_each_way_of_running_it(nodes, urls, resource):
    # What lock() and the other shorthands return runs as a coroutine wherever asyncio takes
    # one: create_task, a TaskGroup (3.11+), gather, await, and also async with.
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            acquiring = rl.lock(resource, ttl=10, wait_timeout=30)
            assert asyncio.iscoroutine(acquiring)
            task = asyncio.create_task(acquiring)
            lock = await task
            assert isinstance(lock, AsyncLock) and lock.held
            assert_on_nodes(nodes, resource, lock.token)
            await lock.release()

            if sys.version_info >= (3, 11):
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(rl.lock(f"{resource}:{i}", ttl=10)) for i in range(3)
                    ]
                for i, done in enumerate(tasks):
                    assert_on_nodes(nodes, f"{resource}:{i}", done.result().token)
                    await done.result().release()

            locks = await asyncio.gather(
                rl.lock_fenced(resource, ttl=10),
                rl.semaphore(resource + ":sem", 2, ttl=10),
                rl.read_lock(resource + ":rw", ttl=10),
            )
            assert locks[0].fence is not None and locks[1].permit is not None
            for lock in locks:
                await lock.release()

            async with rl.try_lock(resource, ttl=10) as lock:
                assert_on_nodes(nodes, resource, lock.token)
            assert_on_nodes(nodes, resource, None)

            # A coroutine created and closed unawaited acquires nothing.
            rl.lock(resource, ttl=10).close()
            assert_on_nodes(nodes, resource, None)

    run(main())


def test_a_campaign_is_a_coroutine_for_create_task(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            campaigning = rl.campaign(resource, "host-a", ttl=10)
            assert asyncio.iscoroutine(campaigning)
            leadership = await asyncio.create_task(campaigning)
            assert leadership.is_leader
            await leadership.resign()
            leaderships = await asyncio.gather(rl.campaign(resource, "host-b", ttl=10))
            assert leaderships[0].is_leader
            await leaderships[0].resign()

    run(main())


WAITING = {
    "acquire", "campaign", "extend", "force_release", "inspect", "leader", "release", "resign"
}


@pytest.mark.parametrize(
    "sync, asynchronous",
    [
        (Redlock, AsyncRedlock),
        (Lock, AsyncLock),
        (Election, AsyncElection),
        (Leadership, AsyncLeadership),
        (Observer, AsyncObserver),
    ],
    ids=lambda cls: cls.__name__,
)
def test_each_asyncio_class_has_the_names_of_its_twin(sync, asynchronous):
    # Every public name of a synchronous class is on its asyncio twin, of the same kind (a
    # property stays a property); those that wait on the nodes are coroutine functions there.
    names = {name for name in dir(sync) if not name.startswith("_")}
    assert names - set(dir(asynchronous)) == set()
    for name in sorted(names):
        ours = inspect.getattr_static(sync, name)
        theirs = inspect.getattr_static(asynchronous, name)
        assert isinstance(ours, property) == isinstance(theirs, property), name
        if name in WAITING:
            # AsyncRedlock.campaign returns a coroutine of its own, which async with also takes
            # (test_a_campaign_is_a_coroutine_for_create_task).
            scoped = (asynchronous, name) == (AsyncRedlock, "campaign")
            assert scoped or inspect.iscoroutinefunction(theirs), name
            assert not inspect.iscoroutinefunction(ours), name


def test_an_async_lock_reads_as_a_lock_and_refuses_a_plain_with(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1.0) as rl:
            lock = await rl.lock_fenced(resource, ttl=10)
            assert (lock.resource, lock.resources, lock.permit) == (resource, [resource], None)
            assert lock.fence is not None and lock.held and not lock.lost
            assert 8 < lock.validity <= 10
            assert repr(lock) == f"<redquorum.aio.AsyncLock resource={resource!r} released=False>"
            with pytest.raises(TypeError, match="async with"):
                with lock:  # type: ignore[attr-defined]
                    pass
            assert_on_nodes(nodes, resource, lock.token)
            lock.close()  # released without waiting, as a Lock's close() is
            assert lock.released and lock.fence is not None
            deadline = time.monotonic() + 2
            while any(v is not None for v in values(nodes, resource)):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)

    run(main())


def test_an_async_client_and_its_sync_twin_share_one_c_client(urls, resource):
    rl = Redlock(urls, node_timeout=1.0)
    arl = AsyncRedlock.from_client(rl)
    assert arl.sync is rl
    assert repr(arl) == f"<redquorum.aio.AsyncRedlock open nodes={len(urls)}>"

    async def main() -> None:
        lock = await arl.try_lock(resource, ttl=10)
        with pytest.raises(redquorum.NotAcquired):
            rl.try_lock(resource, ttl=10)  # the same lock, seen through the other client
        await lock.release()

    run(main())
    own = AsyncRedlock(urls, node_timeout=1.0)
    assert isinstance(own.sync, Redlock) and own.sync is own.sync
    own.sync.close()
    assert own.closed
    arl.close()
    assert rl.closed
