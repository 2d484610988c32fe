"""asyncio facade: :class:`AsyncRedlock`, :class:`AsyncLock` and the election's
:class:`AsyncElection`, :class:`AsyncLeadership` and :class:`AsyncObserver`.

::

    from redquorum.aio import AsyncRedlock

    async with AsyncRedlock(nodes) as rl:
        async with rl.lock("orders:42", ttl=10, wait_timeout=30) as lock:
            ...
            await lock.extend(ttl=10)
        lock = await rl.acquire(redquorum.Request("orders:43", ttl=10, fenced=True))
        await lock.release()
        async with rl.campaign("scheduler", "host-a", ttl=10) as leadership:
            ...  # leading in term leadership.term; resigned on exit
        async for leader in rl.observe("scheduler", cancel=stop):
            ...  # a redquorum.Leader, or None while nobody leads

The Rust core has no async runtime, so every call that waits on the nodes (acquire, extend,
release) runs on a thread of its own (not the loop's default executor, whose few threads 50
waiters would fill, queueing the holders' releases behind them) and the event loop is never
blocked. Cancelling the task (``task.cancel()``, ``asyncio.wait_for`` and ``asyncio.timeout``
expiring) cancels a pending acquisition or campaign through its ``redlock_cancel`` handle; a
lock or leadership obtained in the same instant is released. Cancelling a task waiting for an
observer's next change ends the observer. A release or resignation (also the one in
``__aexit__``) runs to completion even when the task is cancelled meanwhile, and the
cancellation is re-raised afterwards. Callbacks (``on_lost``, the election's) run in the event
loop that was running when they were registered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator, Iterable
from types import TracebackType
from typing import Any, Callable, Protocol, TypeVar

from ._blocking import Call
from ._cancel import Cancel, CancelHandle, link, unlink
from ._client import Redlock
from ._convert import Seconds, ttl_millis
from ._election import Election, campaign_wait
from ._held import lost_in_block, note_release_failure
from ._inspect import ForcedRelease, Inspection
from ._leader import Leader
from ._leadership import Leadership
from ._lock import Lock
from ._node import NodeStatus
from ._observer import ENDED, Observer
from ._request import Request
from ._shorthands import Shorthands
from ._stats import Stats

__all__ = ["AsyncRedlock", "AsyncLock", "AsyncElection", "AsyncLeadership", "AsyncObserver"]

T = TypeVar("T")


class _Block(Protocol):
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


S = TypeVar("S", bound=_Block)


async def _run(
    function: Callable[[CancelHandle | None], T],
    *,
    cancellable: bool,
    user_cancel: Cancel | None = None,
    dispose: Callable[[T], None] | None = None,
    complete: bool = False,
) -> T:
    """Runs ``function(cancel)`` on a thread of its own and awaits it without blocking the loop.

    ``cancellable``: ``function`` acquires; it gets a per-call cancel handle (fired by
    ``user_cancel`` too) that fires when the awaiting task is cancelled. ``complete``: the call
    runs to its end even when the task is cancelled meanwhile (the cancellation is re-raised
    then). ``dispose`` frees a result nobody will see.
    """
    loop = asyncio.get_running_loop()
    own = CancelHandle() if cancellable else None
    link(user_cancel, own)
    finished = asyncio.Event()

    def notify() -> None:  # on the call's thread
        try:
            loop.call_soon_threadsafe(finished.set)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    call: Call[T] = Call(lambda: function(own), dispose, notify)
    try:
        call.start()  # no await before it: a task cannot be cancelled in between
        deferred: BaseException | None = None
        while True:
            try:
                await finished.wait()
                break
            except BaseException as exc:  # CancelledError above all
                if complete:
                    deferred = exc  # keep waiting: a release must reach the nodes
                    continue
                call.abandon()
                if own is not None:
                    own.cancel()
                    # A cancelled acquisition ends at once after undoing what it took; waiting
                    # for it means nothing is pending once the cancellation propagates. A second
                    # cancellation stops the wait (the call still cleans up on its own).
                    try:
                        await finished.wait()
                    except BaseException:
                        pass
                raise
        if deferred is not None:
            call.abandon()
            raise deferred
        return call.result()
    finally:
        unlink(user_cancel, own)
        if own is not None:
            call.free_when_finished(own)


async def _leave_block(
    what: str, lost: bool, release: Callable[[], Awaitable[None]], exc: BaseException | None
) -> None:
    """:func:`~redquorum._held.leave_block` for an ``async with`` block."""
    if exc is None:
        await release()
        if lost:
            raise lost_in_block(what)
        return
    try:
        await release()
    except Exception as release_error:
        note_release_failure(exc, what, release_error)


def _in_loop(callback: Callable[..., object]) -> Callable[..., None]:
    """``callback``, called from any thread, run in the event loop running now."""
    loop = asyncio.get_running_loop()

    def deliver(*args: Any) -> None:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    return deliver


class AsyncLock:
    """One acquisition, from :class:`AsyncRedlock`; the awaitable twin of :class:`Lock`.

    ``async with`` releases it on exit (also when the task is cancelled: the release completes
    first). :attr:`sync` is the underlying :class:`Lock`.
    """

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    @property
    def sync(self) -> Lock:
        """The underlying synchronous :class:`Lock` (do not call its blocking methods from a
        coroutine)."""
        return self._lock

    @property
    def resource(self) -> str:
        return self._lock.resource

    @property
    def resources(self) -> list[str]:
        return self._lock.resources

    @property
    def token(self) -> str:
        return self._lock.token

    @property
    def fence(self) -> int | None:
        return self._lock.fence

    @property
    def hold_count(self) -> int | None:
        return self._lock.hold_count

    @property
    def permit(self) -> int | None:
        return self._lock.permit

    @property
    def released(self) -> bool:
        return self._lock.released

    @property
    def held(self) -> bool:
        return self._lock.held

    @property
    def lost(self) -> bool:
        return self._lock.lost

    @property
    def validity(self) -> float:
        return self._lock.validity

    def on_lost(self, callback: Callable[[AsyncLock], object]) -> None:
        """Call ``callback(lock)`` once, in the running event loop, if the lock is found lost
        (e.g. set an :class:`asyncio.Event` or cancel a task); soon, if it already was."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        deliver = _in_loop(callback)
        # On the extender thread (or here, if already lost).
        self._lock.on_lost(lambda _lock: deliver(self))

    async def extend(self, *, ttl: Seconds) -> None:
        """:meth:`Lock.extend` without blocking the loop. Cancelling the task stops the wait;
        the extension itself still completes on its thread."""
        millis = ttl_millis(ttl)
        await _run(lambda _cancel: self._lock._extend_now(millis), cancellable=False)

    async def release(self) -> None:
        """:meth:`Lock.release` without blocking the loop; runs to completion even if the task
        is cancelled meanwhile (the cancellation is raised afterwards)."""
        if self._lock.released:
            return
        await _run(lambda _cancel: self._lock._end_now(), cancellable=False, complete=True)

    async def __aenter__(self) -> AsyncLock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await _leave_block(f"lock {self.resource!r}", self.lost, self.release, exc)

    def __repr__(self) -> str:
        return f"<redquorum.aio.AsyncLock resource={self.resource!r} released={self.released}>"


class _Scoped(Coroutine[Any, Any, S]):
    """What :meth:`AsyncRedlock.lock`, its other shorthands and :meth:`AsyncRedlock.campaign`
    return: a coroutine, so ``await``, :func:`asyncio.create_task`, a
    :class:`asyncio.TaskGroup` and :func:`asyncio.gather` take it, that is also an
    asynchronous context manager over its result (released or resigned on exit).

    ``start`` makes the coroutine that does the work, on first use, so that an object only
    used in ``async with`` or closed unawaited leaves no coroutine that was never awaited.
    """

    def __init__(self, start: Callable[[], Coroutine[Any, Any, S]]) -> None:
        self._start: Callable[[], Coroutine[Any, Any, S]] | None = start
        self._coroutine: Coroutine[Any, Any, S] | None = None
        self._result: S | None = None

    def _running(self) -> Coroutine[Any, Any, S]:
        if self._coroutine is None:
            start, self._start = self._start, None
            if start is None:
                raise RuntimeError("cannot reuse a closed coroutine")
            self._coroutine = start()
        return self._coroutine

    def send(self, value: Any) -> Any:
        return self._running().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        if val is None and tb is None:
            return self._running().throw(typ)
        return self._running().throw(typ, val, tb)

    def close(self) -> None:
        self._start = None
        if self._coroutine is not None:
            self._coroutine.close()

    def __await__(self) -> Generator[Any, None, S]:
        return self._running().__await__()

    async def __aenter__(self) -> S:
        self._result = await self._running()
        return self._result

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        result, self._result = self._result, None
        if result is not None:
            await result.__aexit__(exc_type, exc, traceback)


class AsyncLeadership:
    """A won campaign, from :class:`AsyncElection` or :meth:`AsyncRedlock.campaign`; the
    awaitable twin of :class:`~redquorum.Leadership`.

    ``async with`` resigns it on exit (also when the task is cancelled: the resignation
    completes first); leaving the block after the leadership was lost raises
    :class:`~redquorum.LockLost`. :attr:`sync` is the underlying
    :class:`~redquorum.Leadership`.
    """

    def __init__(self, leadership: Leadership) -> None:
        self._leadership = leadership

    @property
    def sync(self) -> Leadership:
        """The underlying :class:`~redquorum.Leadership` (do not call its blocking methods from
        a coroutine)."""
        return self._leadership

    @property
    def term(self) -> int:
        return self._leadership.term

    @property
    def name(self) -> str:
        return self._leadership.name

    @property
    def identity(self) -> str:
        return self._leadership.identity

    @property
    def resigned(self) -> bool:
        return self._leadership.resigned

    @property
    def is_leader(self) -> bool:
        return self._leadership.is_leader

    @property
    def is_lost(self) -> bool:
        return self._leadership.is_lost

    @property
    def validity(self) -> float:
        return self._leadership.validity

    def on_lost(self, callback: Callable[[AsyncLeadership], object]) -> None:
        """Call ``callback(leadership)`` once, in the running event loop, if the leadership is
        found lost; soon, if it already was."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        deliver = _in_loop(callback)
        self._leadership.on_lost(lambda _leadership: deliver(self))

    async def resign(self) -> None:
        """:meth:`~redquorum.Leadership.resign` without blocking the loop; runs to completion
        even if the task is cancelled meanwhile (the cancellation is raised afterwards)."""
        if self._leadership.resigned:
            return
        await _run(
            lambda _cancel: self._leadership._end_now(), cancellable=False, complete=True
        )

    async def __aenter__(self) -> AsyncLeadership:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        what = f"the leadership of election {self.name!r}"
        await _leave_block(what, self.is_lost, self.resign, exc)

    def __repr__(self) -> str:
        return (
            f"<redquorum.aio.AsyncLeadership name={self.name!r} term={self.term} "
            f"resigned={self.resigned}>"
        )


class AsyncObserver:
    """An election's leader changes for ``async for``, from :meth:`AsyncRedlock.observe` or
    :meth:`AsyncElection.observe`: each a :class:`~redquorum.Leader`, or ``None`` while
    nobody leads (see :class:`~redquorum.Observer`).

    Each wait runs on a thread of its own. Iteration ends when the observer's ``cancel`` fires
    or it is closed (:meth:`close`, ``async with``); cancelling the task that waits ends the
    observer too.
    """

    def __init__(self, observer: Observer) -> None:
        self._observer = observer

    @property
    def sync(self) -> Observer:
        """The underlying :class:`~redquorum.Observer`."""
        return self._observer

    @property
    def name(self) -> str:
        return self._observer.name

    def __aiter__(self) -> AsyncObserver:
        return self

    async def __anext__(self) -> Leader | None:
        observer = self._observer
        if observer._ended:
            raise StopAsyncIteration
        try:
            change = await _run(lambda _cancel: observer._next_now(), cancellable=False)
        except BaseException:
            observer._end()  # the wait still on its thread ends with it
            raise
        if change is ENDED:
            observer._ended = True
            raise StopAsyncIteration
        return change  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the observer (see :meth:`~redquorum.Observer.close`)."""
        self._observer.close()

    async def __aenter__(self) -> AsyncObserver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redquorum.aio.AsyncObserver over {self._observer!r}>"


class AsyncElection:
    """A candidate in a leader election, from :meth:`AsyncRedlock.election`; the awaitable twin
    of :class:`~redquorum.Election`. Close it with :meth:`close` or ``async with``."""

    def __init__(self, election: Election) -> None:
        self._election = election

    @property
    def sync(self) -> Election:
        """The underlying :class:`~redquorum.Election`."""
        return self._election

    @property
    def name(self) -> str:
        return self._election.name

    @property
    def identity(self) -> str:
        return self._election.identity

    @property
    def ttl(self) -> float:
        return self._election.ttl

    async def campaign(
        self,
        cancel: Cancel | None = None,
        *,
        timeout: Seconds | None = None,
    ) -> AsyncLeadership:
        """:meth:`~redquorum.Election.campaign` without blocking the loop; cancelling the task
        cancels the campaign (and resigns a leadership won in the same instant)."""
        return await self._campaign(cancel, campaign_wait(cancel, timeout))

    async def _campaign(self, cancel: Cancel | None, wait_ms: int | None) -> AsyncLeadership:
        election = self._election
        if election.closed:
            raise ValueError("this election is closed")
        leadership = await _run(
            lambda own: election._campaign_now(own, wait_ms),
            cancellable=True,
            user_cancel=cancel,
            dispose=Leadership._discard,
        )
        return AsyncLeadership(leadership)

    async def leader(self) -> Leader | None:
        """:meth:`~redquorum.Election.leader` on a thread of its own."""
        return await _run(lambda _cancel: self._election.leader(), cancellable=False)

    def observe(
        self,
        *,
        cancel: Cancel | None = None,
        poll: Seconds | None = None,
    ) -> AsyncObserver:
        """This election's leader changes, for ``async for``."""
        return AsyncObserver(self._election.observe(cancel=cancel, poll=poll))

    def on_started_leading(self, callback: Callable[[int], object]) -> None:
        """:meth:`~redquorum.Election.on_started_leading`, run in the running event loop (before
        the campaign that won returns)."""
        self._election.on_started_leading(_in_loop(_checked(callback)))

    def on_stopped_leading(self, callback: Callable[[int], object]) -> None:
        """:meth:`~redquorum.Election.on_stopped_leading`, run in the running event loop."""
        self._election.on_stopped_leading(_in_loop(_checked(callback)))

    def on_new_leader(self, callback: Callable[[Leader | None], object]) -> None:
        """:meth:`~redquorum.Election.on_new_leader`, run in the running event loop."""
        self._election.on_new_leader(_in_loop(_checked(callback)))

    def close(self) -> None:
        """Close the election (see :meth:`~redquorum.Election.close`)."""
        self._election.close()

    async def __aenter__(self) -> AsyncElection:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redquorum.aio.AsyncElection over {self._election!r}>"


def _checked(callback: T) -> T:
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    return callback


class AsyncRedlock(Shorthands["_Scoped[AsyncLock]"]):
    """A Redlock client for asyncio: the same options as :class:`Redlock` (or wrap one with
    :meth:`from_client`), every call that waits on the nodes awaitable.

    The shorthands (:meth:`lock`, :meth:`read_lock`, :meth:`lock_fenced`, ...) are those of
    :class:`Redlock`: ``await`` one for an :class:`AsyncLock`, or use it in ``async with``
    (released on exit); the read-write lock's self-wait check does not apply to tasks. Close
    the client with :meth:`close` or ``async with``. Safe to use from several event loops and
    threads at once, like :class:`Redlock`.
    """

    def __init__(self, nodes: Iterable[str], **options: Any) -> None:
        self._client = Redlock(nodes, **options)

    @classmethod
    def from_client(cls, client: Redlock) -> AsyncRedlock:
        """An async facade over an existing :class:`Redlock` (shared, not copied)."""
        if not isinstance(client, Redlock):
            raise TypeError(f"client must be a redquorum.Redlock, not {type(client).__name__}")
        self = cls.__new__(cls)
        self._client = client
        return self

    @property
    def sync(self) -> Redlock:
        """The underlying synchronous :class:`Redlock`."""
        return self._client

    @property
    def closed(self) -> bool:
        return self._client.closed

    def stats(self) -> Stats:
        """:meth:`Redlock.stats`: atomic reads, it never waits, so it is not awaitable."""
        return self._client.stats()

    async def acquire(self, request: Request) -> AsyncLock:
        """:meth:`Redlock.acquire` without blocking the loop; cancelling the task cancels the
        acquisition (and releases a lock obtained in the same instant)."""
        if not isinstance(request, Request):
            raise TypeError(f"request must be a redquorum.Request, not {type(request).__name__}")
        client = self._client
        if client.closed:
            raise ValueError("this Redlock client is closed")
        # No caller named: the core takes the helper thread, one per call, so tasks are not
        # checked for waiting on their own read-write locks (a task is not a thread).
        lock = await _run(
            lambda cancel: client._acquire_now(request, cancel, None),
            cancellable=True,
            user_cancel=request.cancel,
            dispose=Lock._discard,
        )
        return AsyncLock(lock)

    def _acquire_new(self, request: Request) -> _Scoped[AsyncLock]:
        return _Scoped(lambda: self._acquire_owned(request))

    async def _acquire_owned(self, request: Request) -> AsyncLock:
        with request:
            return await self.acquire(request)

    async def inspect(self, resource: str) -> Inspection:
        """:meth:`Redlock.inspect` on a thread of its own (it waits up to ``node_timeout``)."""
        return await _run(lambda _cancel: self._client.inspect(resource), cancellable=False)

    async def force_release(self, resource: str, token: str | None = None) -> ForcedRelease:
        """:meth:`Redlock.force_release` on a thread of its own; it runs to completion even if
        the task is cancelled meanwhile (the cancellation is re-raised afterwards)."""
        return await _run(
            lambda _cancel: self._client.force_release(resource, token),
            cancellable=False,
            complete=True,
        )

    def election(
        self, name: str, identity: str, *, ttl: Seconds
    ) -> AsyncElection:
        """:meth:`Redlock.election`, for asyncio (nothing is sent yet)."""
        return AsyncElection(self._client.election(name, identity, ttl=ttl))

    def campaign(
        self,
        name: str,
        identity: str,
        *,
        ttl: Seconds,
        cancel: Cancel | None = None,
        timeout: Seconds | None = None,
    ) -> _Scoped[AsyncLeadership]:
        """:meth:`Redlock.campaign` for asyncio: ``await`` it for an :class:`AsyncLeadership`,
        or use it in ``async with`` (resigned on exit; :class:`~redquorum.LockLost` on leaving
        a block whose leadership was lost). Cancelling the task cancels the campaign."""
        wait_ms = campaign_wait(cancel, timeout)
        election = self.election(name, identity, ttl=ttl)

        async def campaign() -> AsyncLeadership:
            try:
                return await election._campaign(cancel, wait_ms)
            finally:
                election.close()

        return _Scoped(campaign)

    async def leader(self, name: str) -> Leader | None:
        """:meth:`Redlock.leader` on a thread of its own (it waits up to ``node_timeout``)."""
        client = self._client
        return await _run(lambda _cancel: client.leader(name), cancellable=False)

    def observe(
        self,
        name: str,
        *,
        cancel: Cancel | None = None,
        poll: Seconds | None = None,
    ) -> AsyncObserver:
        """:meth:`Redlock.observe` for ``async for``: each wait for a change runs on a thread of
        its own; cancelling the waiting task ends the observer."""
        return AsyncObserver(self._client.observe(name, cancel=cancel, poll=poll))

    def node_status(self) -> list[NodeStatus]:
        """:meth:`Redlock.node_status` (it reads the worker's state; it does not block)."""
        return self._client.node_status()

    def close(self) -> None:
        """Close the client (see :meth:`Redlock.close`)."""
        self._client.close()

    async def __aenter__(self) -> AsyncRedlock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redquorum.aio.AsyncRedlock over {self._client!r}>"
