"""The request API: every kind × patience × auto-extension × cancel combination (scaled down)."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta

import pytest
from redis_nodes import assert_on_nodes, resp, values

import redquorum
from redquorum import AutoExtend, Cancel, Request

KINDS = ["plain", "fenced", "reentrant", "many"]
PATIENCE = ["once", "retries", "wait"]
TTL_S = 1.5  # auto-extension needs ttl > ttl/3 + node timeout (300 ms here)


def request_for(kind: str, resource: str, patience: str, auto: bool, cancel: Cancel | None,
                owner: str) -> Request:
    extra: dict[str, object] = {
        "once": {"retries": 0},
        "retries": {"retries": 100, "retry_delay": 0.02, "retry_jitter": 0.01},
        "wait": {"wait_timeout": 10},
    }[patience]
    kind_args: dict[str, object] = {
        "plain": {},
        "fenced": {"fenced": True},
        "reentrant": {"reentrant": owner},
        "many": {},
    }[kind]
    if kind == "many":
        return Request(resources=[resource + ":2", resource + ":1"], ttl=TTL_S,
                       auto_extend=auto, cancel=cancel, **extra)  # type: ignore[arg-type]
    return Request(resource, ttl=TTL_S, auto_extend=auto, cancel=cancel, **kind_args,
                   **extra)  # type: ignore[arg-type]


def keys_of(kind: str, resource: str) -> list[str]:
    return [resource + ":1", resource + ":2"] if kind == "many" else [resource]


def test_kind_patience_auto_extend_cancel_matrix(nodes, make_client, resource):
    rl = make_client(node_timeout=0.3)
    auto_locks: list[tuple[str, redquorum.Lock]] = []
    for index, (kind, patience, auto, cancelled) in enumerate(
        itertools.product(KINDS, PATIENCE, [False, True], [False, True])
    ):
        name = f"{resource}:{index}"
        case = (kind, patience, auto, cancelled)
        keys = keys_of(kind, name)
        # Another owner holds (one of) the keys first, with a plain lock: it excludes every kind.
        holder = rl.try_lock(keys[-1], ttl=30)
        cancel = Cancel() if cancelled else None
        request = request_for(kind, name, patience, auto, cancel, owner=rl.new_owner())
        if patience == "once":
            error = redquorum.NotAcquired
            if cancel is not None:
                cancel.cancel()  # fired before the call: cancelled at once
                error = redquorum.Cancelled
            with pytest.raises(error):
                rl.acquire(request)
            holder.release()
            if cancel is not None:
                for key in keys:  # the cancelled call took nothing
                    assert_on_nodes(nodes, key, None)
                continue
            lock = rl.acquire(request)
        elif cancel is not None:
            # retries: acquired in the main thread (helper thread, linked cancel handle);
            # wait: in another thread (the handle goes straight into the C request).
            threading.Timer(0.15, cancel.cancel).start()
            start = time.monotonic()
            if patience == "retries":
                with pytest.raises(redquorum.Cancelled):
                    rl.acquire(request)
            else:
                errors: list[BaseException] = []

                def attempt() -> None:
                    try:
                        rl.acquire(request)
                    except BaseException as exc:
                        errors.append(exc)

                worker = threading.Thread(target=attempt)
                worker.start()
                worker.join()
                assert len(errors) == 1 and isinstance(errors[0], redquorum.Cancelled), case
            assert time.monotonic() - start < 2.0, case
            assert cancel.cancelled
            # Nothing of the cancelled acquisition is left: only the holder's key.
            for key in keys:
                assert_on_nodes(nodes, key, holder.token if key == keys[-1] else None)
            holder.release()
            continue
        else:
            threading.Timer(0.1, holder.release).start()
            lock = rl.acquire(request)
        assert lock.held, case
        assert lock.resources == sorted(keys), case
        assert (lock.fence is not None) == (kind == "fenced"), case
        assert (lock.hold_count == 1) == (kind == "reentrant"), case
        if auto:
            auto_locks.append((kind, lock))
        else:
            lock.release()
            for key in keys:
                assert_on_nodes(nodes, key, None)
    # Auto-extended locks outlive their TTL (all checked together to keep the test short).
    time.sleep(TTL_S + 0.3)
    for kind, lock in auto_locks:
        assert lock.held and not lock.lost, kind
        assert lock.validity > 0.5, (kind, lock.validity)
    for _, lock in auto_locks:
        lock.release()
    assert len(auto_locks) == len(KINDS) * len(PATIENCE)


def test_reentrant_wait_and_fenced_wait_auto_extend(nodes, make_client, resource):
    rl = make_client()
    owner = rl.new_owner()
    outer = rl.acquire(Request(resource, ttl=10, reentrant=owner))
    # The same owner gets in at once, even with a wait; another owner waits and is woken.
    inner = rl.acquire(Request(resource, ttl=10, reentrant=owner, wait_timeout=5))
    assert inner.hold_count == 2
    threading.Timer(0.1, lambda: (inner.release(), outer.release())).start()
    other = rl.acquire(Request(resource, ttl=10, reentrant=rl.new_owner(), wait_timeout=5))
    assert other.hold_count == 1
    threading.Timer(0.1, other.release).start()
    fenced = rl.acquire(
        Request(resource, ttl=10, fenced=True, wait_timeout=5, auto_extend=AutoExtend(0.5))
    )
    assert fenced.fence is not None and fenced.held
    fenced.release()
    assert_on_nodes(nodes, resource, None)


def test_a_request_is_reusable_and_shared_between_threads(make_client, resource):
    rl = make_client()
    request = Request(resource, ttl=10, wait_timeout=10, fenced=True)
    fences: list[int] = []

    def work() -> None:
        for _ in range(5):
            with rl.acquire(request) as lock:
                assert lock.fence is not None
                fences.append(lock.fence)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fences) == 15 and fences == sorted(set(fences))


def test_one_cancel_ends_several_acquisitions(nodes, make_client, resource):
    rl = make_client()
    holder = rl.try_lock(resource, ttl=30)
    cancel = Cancel()
    request = Request(resource, ttl=30, wait_timeout=30, cancel=cancel)
    outcomes: list[BaseException] = []

    def attempt() -> None:
        try:
            rl.acquire(request)
        except BaseException as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(3)]
    for t in threads:
        t.start()
    threading.Timer(0.2, cancel.cancel).start()
    with pytest.raises(redquorum.Cancelled) as info:
        rl.acquire(request)  # the main thread too (a per-call handle linked to this one)
    assert info.value.status == redquorum.Status.CANCELLED
    for t in threads:
        t.join()
    assert len(outcomes) == 3 and all(isinstance(e, redquorum.Cancelled) for e in outcomes)
    assert_on_nodes(nodes, resource, holder.token)
    holder.release()
    # A fired handle stays fired: the next acquisition with it is cancelled at once.
    with pytest.raises(redquorum.Cancelled):
        rl.acquire(request)
    assert rl.acquire(request.replace(cancel=None, retries=0)).held


def test_request_validation():
    with pytest.raises(TypeError, match="resource"):
        Request(ttl=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="not both"):
        Request("a", ttl=1, resources=["b"])
    with pytest.raises(ValueError, match="empty"):
        Request("", ttl=1)
    with pytest.raises(ValueError, match="twice"):
        Request(resources=["a", "a"], ttl=1)
    with pytest.raises(ValueError, match="at least one"):
        Request(resources=[], ttl=1)
    with pytest.raises(ValueError, match="at most 64"):
        Request(resources=[str(i) for i in range(65)], ttl=1)
    with pytest.raises(ValueError, match="one resource"):
        Request(resources=["a", "b"], ttl=1, fenced=True)
    with pytest.raises(ValueError, match="not both"):
        Request("a", ttl=1, fenced=True, reentrant="me")
    with pytest.raises(ValueError, match="exclude"):
        Request("a", ttl=1, retries=3, wait_timeout=1)
    with pytest.raises(ValueError, match="together"):
        Request("a", ttl=1, retry_delay=0.1)
    with pytest.raises(ValueError, match="1024"):
        Request("a", ttl=1, reentrant="x" * 1025)
    with pytest.raises(TypeError, match="auto_extend"):
        Request("a", ttl=1, auto_extend="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Cancel"):
        Request("a", ttl=1, cancel=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fraction"):
        AutoExtend(1.0)
    with pytest.raises(TypeError, match="ttl"):
        Request("a")
    with pytest.raises(TypeError):
        Request("a", 1)  # type: ignore[misc]  # the TTL is a keyword
    request = Request("a", ttl=timedelta(seconds=2), wait_timeout=1.5, auto_extend=True)
    assert (request.ttl, request.wait_timeout) == (2.0, 1.5)
    assert request.auto_extend == AutoExtend()
    assert request.replace(ttl=3).ttl == 3.0
    assert request.replace(resources=["x", "y"]).resources == ["x", "y"]


def queued(nodes, resource: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether any node holds the cross-process waiting queue of ``resource``."""
    return any(
        resource in key
        for node in nodes
        for key in resp(node.port, "KEYS", "redlock:queue:*")
    )


def subscribed(nodes, resource: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether a waiter listens for the releases of ``resource`` on any node."""
    return any(
        resource in channel
        for node in nodes
        for channel in resp(node.port, "PUBSUB", "CHANNELS", "*")
    )


def eventually(predicate, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("fair", [None, False, True])
def test_fair_and_unfair_waiters_get_the_lock(nodes, make_client, resource, fair):
    """A waiter in the cross-process queue (the default, or fair=True) and one out of it
    (fair=False) both get the lock when the holder lets go; only the first is in the queue."""
    holder = make_client().try_lock(resource, ttl=30)
    rl = make_client()
    keywords = {} if fair is None else {"fair": fair}
    request = Request(resource, ttl=10, wait_timeout=30, **keywords)  # type: ignore[arg-type]
    got: list[redquorum.Lock] = []
    waiter = threading.Thread(target=lambda: got.append(rl.acquire(request)))
    waiter.start()
    try:
        if fair is False:
            assert eventually(lambda: subscribed(nodes, resource))
            time.sleep(0.3)  # a queued waiter would have joined by now
            assert not queued(nodes, resource)
        else:
            assert eventually(lambda: queued(nodes, resource))
    finally:
        holder.release()
        waiter.join(30)
    assert len(got) == 1 and got[0].held
    got[0].release()
    assert_on_nodes(nodes, resource, None)
    # The shorthands forward it as they do notifications=.
    with rl.lock(resource, ttl=10, wait_timeout=5, **keywords) as lock:  # type: ignore[arg-type]
        assert lock.held


def test_fair_is_a_bool_like_the_other_flags(make_client, resource):
    for name in ("fenced", "read", "write", "notifications", "fair"):
        for bad in (1, "yes", None):
            with pytest.raises(TypeError, match=f"{name} must be a bool"):
                Request("r", ttl=1, **{name: bad})  # type: ignore[arg-type]
    rl = make_client()
    with pytest.raises(TypeError, match="fair must be a bool"):
        rl.lock(resource, ttl=1, fair=1)  # type: ignore[typeddict-item]
    unfair = Request("r", ttl=1, wait_timeout=1, fair=False)
    assert "fair=False" in repr(unfair) and "fair" not in repr(Request("r", ttl=1))
    assert "fair=False" in repr(unfair.replace(ttl=2))
    assert "fair" not in repr(unfair.replace(fair=True))


def test_acquire_rejects_what_is_not_a_request(make_client):
    rl = make_client()
    with pytest.raises(TypeError, match="Request"):
        rl.acquire("orders:1")  # type: ignore[arg-type]


def test_too_short_a_ttl_to_auto_extend_is_a_value_error(make_client, resource):
    rl = make_client(node_timeout=1)
    with pytest.raises(ValueError):
        rl.acquire(Request(resource, ttl=0.5, auto_extend=True))


def test_lock_shorthand_takes_a_cancel(make_client, resource):
    rl = make_client()
    holder = rl.try_lock(resource, ttl=30)
    cancel = Cancel()
    threading.Timer(0.1, cancel.cancel).start()
    with pytest.raises(redquorum.Cancelled):
        rl.lock(resource, ttl=30, wait_timeout=30, cancel=cancel)
    holder.release()


def test_a_reused_request_costs_one_c_call_and_a_shorthand_three(make_client, resource,
                                                                  monkeypatch):
    """The request is built once: acquiring it again is ``redlock_request_acquire`` alone; a
    shorthand builds, acquires and frees one request. (The main thread adds the per-call cancel
    handle that lets signals interrupt it: counted in the thread that is not the main one.)"""
    import redquorum._bindings
    import redquorum._ffi

    rl = make_client()
    request = Request(resource, ttl=10, retries=0)
    calls: list[str] = []
    counted = threading.local()

    def counting(name: str, function):  # type: ignore[no-untyped-def]
        def call(*args):  # type: ignore[no-untyped-def]
            if getattr(counted, "on", False):
                calls.append(name)
            return function(*args)

        return call

    for name in redquorum._bindings.FUNCTIONS:
        monkeypatch.setattr(
            redquorum._ffi.lib, name, counting(name, getattr(redquorum._ffi.lib, name))
        )

    def measure(action) -> list[str]:  # type: ignore[no-untyped-def]
        calls.clear()
        counted.on = True
        try:
            action()
        finally:
            counted.on = False
        return list(calls)

    seen: dict[str, list[str]] = {}

    def work() -> None:
        for _ in range(2):
            lock = None

            def acquire() -> None:
                nonlocal lock
                lock = rl.acquire(request)

            seen["acquire"] = measure(acquire)
            assert lock is not None
            seen["release"] = measure(lock.release)
        held: list[redquorum.Lock] = []
        seen["shorthand"] = measure(lambda: held.append(rl.lock(resource, ttl=10)))
        held[0].release()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(30)
    assert seen["acquire"] == ["redlock_request_acquire"]
    assert seen["release"] == ["redlock_lock_release"]
    assert seen["shorthand"] == [
        "redlock_request_new",
        "redlock_request_acquire",
        "redlock_request_free",
    ]


def test_request_lock_and_client_free_their_c_handles_once(make_client, resource):
    import copy
    import pickle

    rl = make_client()
    request = Request(resource, ttl=10, retries=0, fenced=True)
    # Immutable: a copy is the request itself; a pickle rebuilds one with a C request of its own.
    assert copy.copy(request) is request and copy.deepcopy(request) is request
    clone = pickle.loads(pickle.dumps(request))
    assert clone is not request and repr(clone) == repr(request)
    with rl.acquire(clone) as lock:
        assert lock.fence is not None
    with request:
        rl.acquire(request).release()
    assert request.closed
    with pytest.raises(ValueError, match="request is closed"):
        rl.acquire(request)
    # A Lock and a client own a handle each: copying them would free it twice.
    lock = rl.acquire(clone)
    for owner in (lock, rl):
        with pytest.raises(TypeError, match="cannot be copied"):
            copy.copy(owner)
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(owner)
    # close() frees the C lock, releasing it without waiting for the nodes; what it told
    # stays readable, and its calls are refused.
    token, fence = lock.token, lock.fence
    lock.close()
    assert lock.released and not lock.held and lock.validity == 0.0
    assert (lock.token, lock.fence) == (token, fence)
    with pytest.raises(ValueError, match="lock is closed"):
        lock.extend(ttl=10)
    deadline = time.monotonic() + 5
    while True:  # the release reaches the nodes in the background
        try:
            rl.acquire(clone).release()
            break
        except redquorum.NotAcquired:
            assert time.monotonic() < deadline
            time.sleep(0.02)
