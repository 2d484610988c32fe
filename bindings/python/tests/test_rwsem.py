"""Read-write locks and counting semaphores through the Python binding (issue 17)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable

import pytest

import redquorum
from redquorum import Request
from redquorum.aio import AsyncRedlock


def on_a_thread(function: Callable[[], object]) -> object:
    """Runs ``function`` on another thread; returns its result or the exception it raised."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(function())
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return result[0]


def once(resource: str, **kind: object) -> Request:
    return Request(resource, ttl=10, retries=0, **kind)  # type: ignore[arg-type]


def acquire_and_release(rl: redquorum.Redlock, request: Request) -> object:
    def go() -> str:
        with rl.acquire(request):
            return "acquired"

    return on_a_thread(go)


def quorum_of(nodes, predicate) -> bool:  # type: ignore[no-untyped-def]
    return sum(1 for node in nodes if predicate(node)) >= len(nodes) // 2 + 1


def test_readers_share_and_exclude_writers_and_plain_locks(nodes, make_client, resource):
    rl = make_client()
    with rl.read_lock(resource, ttl=10) as first, rl.read_lock(resource, ttl=10) as second:
        assert first.held and second.held and first.token != second.token
        assert first.fence is None and first.permit is None
        # The readers are a sorted set at the resource's own key, on a quorum at least.
        assert quorum_of(
            nodes,
            lambda n: n.command("TYPE", resource) == "zset"
            and n.command("ZSCORE", resource, first.token) is not None,
        )
        assert acquire_and_release(rl, once(resource, read=True)) == "acquired"
        assert isinstance(acquire_and_release(rl, once(resource, write=True)), redquorum.NotAcquired)
        assert isinstance(acquire_and_release(rl, once(resource)), redquorum.NotAcquired)
        with pytest.raises(redquorum.NotAcquired):
            rl.try_lock(resource, ttl=10)
        # The main thread holds a read lock: its write request is refused, not left waiting.
        with pytest.raises(ValueError, match="holds a read lock"):
            rl.write_lock(resource, ttl=10, wait_timeout=30)
        first.release()
        assert isinstance(acquire_and_release(rl, once(resource, write=True)), redquorum.NotAcquired)
    # Both readers gone: a writer gets in and excludes readers and writers.
    with rl.write_lock(resource, ttl=10) as writer:
        assert writer.fence is None and writer.permit is None
        assert isinstance(acquire_and_release(rl, once(resource, read=True)), redquorum.NotAcquired)
        assert isinstance(acquire_and_release(rl, once(resource, write=True)), redquorum.NotAcquired)
        with pytest.raises(ValueError, match="holds a write lock"):
            rl.read_lock(resource, ttl=10)
    # A plain holder excludes readers.
    with rl.lock(resource, ttl=10):
        assert isinstance(acquire_and_release(rl, once(resource, read=True)), redquorum.NotAcquired)
    assert acquire_and_release(rl, once(resource, read=True)) == "acquired"


def test_the_self_wait_check_holds_on_other_threads_too(make_client, resource):
    rl = make_client()

    def go() -> object:
        with rl.read_lock(resource, ttl=10):
            try:
                rl.write_lock(resource, ttl=10, wait_timeout=30)
            except ValueError as exc:
                return exc
            return "acquired"

    result = on_a_thread(go)
    assert isinstance(result, ValueError) and "read lock" in str(result)


def test_the_core_tells_python_threads_apart_the_main_thread_included(make_client, resource):
    # The check is the core's, keyed on the caller the binding names: the main thread's calls
    # run on a helper thread each, yet the main thread is one caller throughout.
    rl = make_client()
    itself = r'caller "python-thread-\d+" holds a {} lock'
    with rl.read_lock(resource, ttl=10):
        with pytest.raises(ValueError, match=itself.format("read")):
            rl.write_lock(resource, ttl=10, wait_timeout=30)
        with pytest.raises(ValueError, match=itself.format("read")):
            rl.acquire(Request(resource, ttl=10, write=True, retries=0))
        # Another thread is another caller: it waits for the main thread's reader and gives
        # up, rather than being told it waits for itself.
        other = on_a_thread(lambda: rl.write_lock(resource, ttl=10, wait_timeout=0.3))
        assert isinstance(other, redquorum.NotAcquired), other
    with rl.write_lock(resource, ttl=10):
        with pytest.raises(ValueError, match=itself.format("write")):
            rl.read_lock(resource, ttl=10, wait_timeout=30)
        other = on_a_thread(lambda: rl.read_lock(resource, ttl=10, wait_timeout=0.3))
        assert isinstance(other, redquorum.NotAcquired), other

    # The same on a thread that is not the main one; the main thread is another caller to it.
    holding, done = threading.Event(), threading.Event()

    def writer_then_reader() -> object:
        with rl.write_lock(resource, ttl=10):
            try:
                rl.read_lock(resource, ttl=10, wait_timeout=30)
                return "acquired"
            except ValueError as exc:
                return exc
            finally:
                holding.set()
                done.wait(30)

    thread_result: list[object] = []
    worker = threading.Thread(target=lambda: thread_result.append(writer_then_reader()))
    worker.start()
    assert holding.wait(30)
    try:
        with pytest.raises(redquorum.NotAcquired):
            rl.read_lock(resource, ttl=10, wait_timeout=0.3)
    finally:
        done.set()
        worker.join(30)
    (refused,) = thread_result
    assert isinstance(refused, ValueError) and re.search(itself.format("write"), str(refused))


def test_two_python_threads_are_two_callers_even_one_after_the_other(make_client, resource):
    rl = make_client()
    handed_over: list[redquorum.Lock] = []
    # The first thread takes a read lock, hands it on and ends; a thread started later (which
    # may get the same get_ident()) is another caller: it waits for that reader like anyone.
    on_a_thread(lambda: handed_over.append(rl.read_lock(resource, ttl=10)))
    later = on_a_thread(lambda: rl.write_lock(resource, ttl=10, wait_timeout=0.3))
    assert isinstance(later, redquorum.NotAcquired), later
    handed_over[0].release()
    assert acquire_and_release(rl, once(resource, write=True)) == "acquired"
    # Two threads at once, each with a read lock: neither is refused the other's.
    readers = [rl.read_lock(resource, ttl=10)]
    assert acquire_and_release(rl, once(resource, read=True)) == "acquired"
    readers[0].release()


def test_readers_overlap_writers_never_overlap_anyone(make_client, resource):
    rl = make_client()
    mutex = threading.Lock()
    state = {"readers": 0, "writers": 0, "max_readers": 0, "bad": 0, "done": 0}
    errors: list[BaseException] = []

    def hold(kind: str) -> None:
        try:
            for _ in range(3):
                shorthand = rl.read_lock if kind == "readers" else rl.write_lock
                with shorthand(resource, ttl=10, wait_timeout=60):
                    with mutex:
                        state[kind] += 1
                        if state["writers"] > 1 or (state["writers"] and state["readers"]):
                            state["bad"] += 1
                        state["max_readers"] = max(state["max_readers"], state["readers"])
                    time.sleep(0.05 if kind == "writers" else 0.2)
                    with mutex:
                        state[kind] -= 1
                with mutex:
                    state["done"] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=hold, args=("readers",)) for _ in range(5)]
    threads += [threading.Thread(target=hold, args=("writers",)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert state["done"] == 21
    assert state["bad"] == 0
    assert state["max_readers"] > 1  # readers were observed together


def test_semaphore_admits_permits_holders_and_no_more(nodes, make_client, resource):
    rl = make_client()
    with rl.semaphore(resource, 2, ttl=10) as a, rl.semaphore(resource, 2, ttl=10) as b:
        assert {a.permit, b.permit} == {0, 1}
        assert a.fence is None
        slot = f"redlock:sem:{{{resource}}}:{a.permit}"
        assert quorum_of(nodes, lambda n: n.command("GET", slot) == a.token)
        with pytest.raises(redquorum.NotAcquired):
            rl.acquire(once(resource, permits=2))
        with pytest.raises(ValueError, match="permits"):
            rl.acquire(once(resource, permits=3))
        freed = a.permit
        a.release()
        with rl.acquire(once(resource, permits=2)) as c:
            assert c.permit == freed
        assert a.permit == freed  # readable after release
    plain = rl.try_lock(resource + ":plain", ttl=10)
    assert plain.permit is None
    plain.release()


def test_semaphore_reaches_its_limit_under_load_and_never_passes_it(make_client, resource):
    rl = make_client()
    mutex = threading.Lock()
    state = {"in": 0, "max": 0, "done": 0}
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                with rl.semaphore(resource, 3, ttl=10, wait_timeout=60) as lock:
                    assert lock.permit in (0, 1, 2)
                    with mutex:
                        state["in"] += 1
                        state["max"] = max(state["max"], state["in"])
                    time.sleep(0.1)
                    with mutex:
                        state["in"] -= 1
            with mutex:
                state["done"] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert state["done"] == 7
    assert state["max"] == 3


def test_auto_extended_reader_and_permit_outlive_their_ttl(make_client, resource):
    rl = make_client(node_timeout=0.2)
    with rl.read_lock(resource, ttl=0.9, auto_extend=True) as reader:
        time.sleep(2.5)
        assert reader.held and not reader.lost
        assert isinstance(acquire_and_release(rl, once(resource, write=True)), redquorum.NotAcquired)
    assert acquire_and_release(rl, once(resource, write=True)) == "acquired"
    sem = resource + ":sem"
    with rl.semaphore(sem, 1, ttl=0.9, auto_extend=True) as permit:
        time.sleep(2.5)
        assert permit.held and permit.permit == 0
        assert isinstance(acquire_and_release(rl, once(sem, permits=1)), redquorum.NotAcquired)
    assert acquire_and_release(rl, once(sem, permits=1)) == "acquired"


def test_a_waiting_writer_gets_in_when_the_last_reader_leaves(make_client, resource):
    rl = make_client(retry_delay=5)  # the fallback would be slow: a notification wakes it
    reader = rl.read_lock(resource, ttl=30)
    started = time.monotonic()
    timer = threading.Timer(0.3, reader.release)
    timer.start()
    result = acquire_and_release(rl, Request(resource, ttl=10, write=True, wait_timeout=20))
    timer.join()
    assert result == "acquired"
    assert time.monotonic() - started < 4


def test_request_kinds_exclude_each_other():
    for kinds in (
        {"read": True, "write": True},
        {"read": True, "fenced": True},
        {"write": True, "reentrant": "me"},
        {"permits": 2, "read": True},
        {"permits": 2, "fenced": True},
    ):
        with pytest.raises(ValueError, match="exclude each other"):
            Request("r", ttl=1, **kinds)  # type: ignore[arg-type]
    for kinds in ({"read": True}, {"write": True}, {"permits": 2}):
        with pytest.raises(ValueError, match="one resource"):
            Request(resources=["a", "b"], ttl=1, **kinds)  # type: ignore[arg-type]
    for permits in (0, -1, 1025, 2**40):
        with pytest.raises(ValueError, match="permits"):
            Request("r", ttl=1, permits=permits)
    for bad in (True, 2.0, "2"):
        with pytest.raises(TypeError, match="permits"):
            Request("r", ttl=1, permits=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read"):
        Request("r", ttl=1, read=1)  # type: ignore[arg-type]
    assert Request("r", ttl=1, permits=1024).permits == 1024
    request = Request("r", ttl=1, fenced=True)
    read = request.replace(read=True)
    assert read.read and not read.fenced and not read.write
    assert read.replace(permits=3).permits == 3 and not read.replace(permits=3).read
    assert read.replace(retries=0).read
    assert "read=True" in repr(read) and "permits=3" in repr(read.replace(permits=3))


def test_asyncio_read_write_and_semaphore(urls, resource):
    async def main() -> None:
        rl = AsyncRedlock(urls, node_timeout=1)
        try:
            async with rl.read_lock(resource, ttl=10) as a, rl.read_lock(resource, ttl=10) as b:
                assert a.held and b.held and a.permit is None
                with pytest.raises(redquorum.NotAcquired):
                    await rl.acquire(once(resource, write=True))
            async with rl.write_lock(resource, ttl=10, auto_extend=True) as w:
                assert w.held
                with pytest.raises(redquorum.NotAcquired):
                    await rl.acquire(once(resource, read=True))
            sem = resource + ":sem"
            async with rl.semaphore(sem, 2, ttl=10) as p, rl.semaphore(sem, 2, ttl=10) as q:
                assert {p.permit, q.permit} == {0, 1}
                with pytest.raises(redquorum.NotAcquired):
                    await rl.acquire(once(sem, permits=2))
            held = await rl.semaphore(sem, 2, ttl=10)
            assert held.permit in (0, 1)
            await held.release()
        finally:
            rl.close()

    asyncio.run(main())
