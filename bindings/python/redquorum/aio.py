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

Each asyncio class shares its base with its synchronous twin (:class:`AsyncLock` and
:class:`~redquorum.Lock` share ``LockBase``, and so on), which holds everything that does not
wait on the nodes: the twins differ only in the calls that wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from types import TracebackType
from typing import Any, Callable, NoReturn, Protocol, TypeVar

from ._blocking import Call
from ._cancel import Cancel, CancelHandle, link, unlink
from ._client import ClientBase, Redlock, check_request
from ._convert import Seconds, check_process, ttl_millis
from ._election import ElectionBase, campaign_wait
from ._held import Held, lost_in_block, note_release_failure
from ._inspect import ForcedRelease, Inspection
from ._leader import Leader
from ._leadership import LeadershipBase
from ._lock import LockBase
from ._observer import ENDED, ObserverBase
from ._request import Request

__all__ = ["AsyncRedlock", "AsyncLock", "AsyncElection", "AsyncLeadership", "AsyncObserver"]

T = TypeVar("T")
A = TypeVar("A")


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


def _checked(callback: T) -> T:
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    return callback


class _Closeable(Protocol):
    def close(self) -> None: ...


class _AsyncClosing:
    """``async with`` closes it on exit (a mixin of classes that have ``close()``)."""

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(
        self: _Closeable,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _AsyncHeld(Held):
    """What :class:`AsyncLock` and :class:`AsyncLeadership` add to their bases: the release
    (resignation) awaited, also by ``async with``, and ``on_lost`` callbacks run in the loop."""

    async def _end_awaited(self) -> None:
        """The release (resignation) on a thread of its own; it runs to completion even if the
        task is cancelled meanwhile (the cancellation is raised afterwards)."""
        if self._is_ended():
            return
        check_process(self._pid, self._what)
        await _run(lambda _cancel: self._end_now(), cancellable=False, complete=True)

    def _when_lost_in_loop(self, callback: Callable[..., object]) -> None:
        self._when_lost(_in_loop(_checked(callback)))

    def __enter__(self) -> NoReturn:
        raise TypeError(
            f"an asyncio {self._what} ends with 'async with', not 'with', which would block the "
            "event loop"
        )

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await _leave_block(self._block(), self._is_lost(), self._end_awaited, exc)


class AsyncLock(_AsyncHeld, LockBase):
    """One acquisition, from :class:`AsyncRedlock`: a :class:`~redquorum.Lock` whose waiting
    calls are awaited.

    ``async with`` releases it on exit (also when the task is cancelled: the release completes
    first). Everything else, its properties first, is the :class:`~redquorum.Lock`'s.
    """

    def on_lost(self, callback: Callable[[AsyncLock], object]) -> None:
        """Call ``callback(lock)`` once, in the running event loop, if the lock is found lost
        (e.g. set an :class:`asyncio.Event` or cancel a task); soon, if it already was."""
        self._when_lost_in_loop(callback)

    async def extend(self, *, ttl: Seconds) -> None:
        """:meth:`Lock.extend <redquorum.Lock.extend>` without blocking the loop. Cancelling
        the task stops the wait; the extension itself still completes on its thread."""
        millis = ttl_millis(ttl)
        check_process(self._pid, self._what)
        await _run(lambda _cancel: self._extend_now(millis), cancellable=False)

    async def release(self) -> None:
        """:meth:`Lock.release <redquorum.Lock.release>` without blocking the loop; runs to
        completion even if the task is cancelled meanwhile (the cancellation is raised
        afterwards)."""
        await self._end_awaited()


class AsyncLeadership(_AsyncHeld, LeadershipBase):
    """A won campaign, from :class:`AsyncElection` or :meth:`AsyncRedlock.campaign`: a
    :class:`~redquorum.Leadership` whose waiting calls are awaited.

    ``async with`` resigns it on exit (also when the task is cancelled: the resignation
    completes first); leaving the block after the leadership was lost raises
    :class:`~redquorum.LockLost`.
    """

    def on_lost(self, callback: Callable[[AsyncLeadership], object]) -> None:
        """Call ``callback(leadership)`` once, in the running event loop, if the leadership is
        found lost; soon, if it already was."""
        self._when_lost_in_loop(callback)

    async def resign(self) -> None:
        """:meth:`~redquorum.Leadership.resign` without blocking the loop; runs to completion
        even if the task is cancelled meanwhile (the cancellation is raised afterwards)."""
        await self._end_awaited()


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


class AsyncObserver(_AsyncClosing, ObserverBase):
    """An election's leader changes for ``async for``, from :meth:`AsyncRedlock.observe` or
    :meth:`AsyncElection.observe`: each a :class:`~redquorum.Leader`, or ``None`` while
    nobody leads (see :class:`~redquorum.Observer`).

    Each wait runs on a thread of its own. Iteration ends when the observer's ``cancel`` fires
    or it is closed (:meth:`close`, ``async with``); cancelling the task that waits ends the
    observer too.
    """

    def __aiter__(self) -> AsyncObserver:
        return self

    async def __anext__(self) -> Leader | None:
        if self._ended:
            raise StopAsyncIteration
        try:
            change = await _run(lambda _cancel: self._next_now(), cancellable=False)
        except BaseException:
            self._end()  # the wait still on its thread ends with it
            raise
        if change is ENDED:
            self._ended = True
            raise StopAsyncIteration
        return change  # type: ignore[no-any-return]


class AsyncElection(_AsyncClosing, ElectionBase):
    """A candidate in a leader election, from :meth:`AsyncRedlock.election`: an
    :class:`~redquorum.Election` whose waiting calls are awaited and whose callbacks run in the
    event loop. Close it with :meth:`close` or ``async with``."""

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
        if self.closed:
            raise ValueError("this election is closed")
        check_process(self._pid, self._what)
        return await _run(
            lambda own: self._campaign_now(own, wait_ms, AsyncLeadership),
            cancellable=True,
            user_cancel=cancel,
            dispose=AsyncLeadership._discard,
        )

    async def leader(self) -> Leader | None:
        """:meth:`~redquorum.Election.leader` on a thread of its own."""
        return await _run(lambda _cancel: self._leader_now(), cancellable=False)

    def observe(
        self,
        *,
        cancel: Cancel | None = None,
        poll: Seconds | None = None,
    ) -> AsyncObserver:
        """This election's leader changes, for ``async for``."""
        return self._observer(AsyncObserver, cancel, poll)

    def on_started_leading(self, callback: Callable[[int], object]) -> None:
        """:meth:`~redquorum.Election.on_started_leading`, run in the running event loop (before
        the campaign that won returns)."""
        self._set_started_leading(_in_loop(_checked(callback)))

    def on_stopped_leading(self, callback: Callable[[int], object]) -> None:
        """:meth:`~redquorum.Election.on_stopped_leading`, run in the running event loop."""
        self._set_stopped_leading(_in_loop(_checked(callback)))

    def on_new_leader(self, callback: Callable[[Leader | None], object]) -> None:
        """:meth:`~redquorum.Election.on_new_leader`, run in the running event loop."""
        self._set_new_leader(_in_loop(_checked(callback)))


class AsyncRedlock(_AsyncClosing, ClientBase["_Scoped[AsyncLock]"]):
    """A Redlock client for asyncio: the options, the shorthands and everything that does not
    wait are those of :class:`~redquorum.Redlock` (or wrap one with :meth:`from_client`); every
    call that waits on the nodes is awaited.

    The shorthands (:meth:`lock`, :meth:`read_lock`, :meth:`lock_fenced`, ...) return a
    coroutine: ``await`` it for an :class:`AsyncLock`, hand it to :func:`asyncio.create_task`,
    a :class:`asyncio.TaskGroup` or :func:`asyncio.gather`, or use it in ``async with``
    (released on exit); the read-write lock's self-wait check does not apply to tasks. Close
    the client with :meth:`close` or ``async with``. Safe to use from several event loops and
    threads at once, like :class:`~redquorum.Redlock`.
    """

    _sync: Redlock | None = None

    @classmethod
    def from_client(cls, client: Redlock) -> AsyncRedlock:
        """An asyncio client over the C client of ``client`` (shared: closing either closes
        both)."""
        if not isinstance(client, Redlock):
            raise TypeError(f"client must be a redquorum.Redlock, not {type(client).__name__}")
        self = cls._over(client._core)
        self._sync = client
        return self

    @property
    def sync(self) -> Redlock:
        """A :class:`~redquorum.Redlock` over the same C client (shared: closing either closes
        both), for code that blocks."""
        if self._sync is None:
            self._sync = Redlock._over(self._core)
        return self._sync

    async def acquire(self, request: Request) -> AsyncLock:
        """:meth:`Redlock.acquire` without blocking the loop; cancelling the task cancels the
        acquisition (and releases a lock obtained in the same instant)."""
        if not isinstance(request, Request):
            raise TypeError(f"request must be a redquorum.Request, not {type(request).__name__}")
        check_request(request)
        if self.closed:
            raise ValueError("this Redlock client is closed")
        # No caller named: the core takes the helper thread, one per call, so tasks are not
        # checked for waiting on their own read-write locks (a task is not a thread).
        return await _run(
            lambda cancel: self._acquire_now(request, cancel, None, AsyncLock),
            cancellable=True,
            user_cancel=request.cancel,
            dispose=AsyncLock._discard,
        )

    def _acquire_new(self, request: Request) -> _Scoped[AsyncLock]:
        return _Scoped(lambda: self._acquire_owned(request))

    async def _acquire_owned(self, request: Request) -> AsyncLock:
        with request:
            return await self.acquire(request)

    async def inspect(self, resource: str) -> Inspection:
        """:meth:`Redlock.inspect` on a thread of its own (it waits up to ``node_timeout``)."""
        return await _run(lambda _cancel: self._inspect_now(resource), cancellable=False)

    async def force_release(self, resource: str, token: str | None = None) -> ForcedRelease:
        """:meth:`Redlock.force_release` on a thread of its own; it runs to completion even if
        the task is cancelled meanwhile (the cancellation is re-raised afterwards)."""
        return await _run(
            lambda _cancel: self._force_release_now(resource, token),
            cancellable=False,
            complete=True,
        )

    def election(self, name: str, identity: str, *, ttl: Seconds) -> AsyncElection:
        """:meth:`Redlock.election`, for asyncio (nothing is sent yet)."""
        return self._election(AsyncElection, name, identity, ttl)

    def campaign(
        self,
        name: str,
        identity: str,
        *,
        ttl: Seconds,
        cancel: Cancel | None = None,
        timeout: Seconds | None = None,
    ) -> _Scoped[AsyncLeadership]:
        """:meth:`Redlock.campaign` for asyncio: a coroutine, to ``await`` for an
        :class:`AsyncLeadership` or hand to a task, or to use in ``async with`` (resigned on
        exit; :class:`~redquorum.LockLost` on leaving a block whose leadership was lost).
        Cancelling the task cancels the campaign."""
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
        return await _run(lambda _cancel: self._leader_now(name), cancellable=False)

    def observe(
        self,
        name: str,
        *,
        cancel: Cancel | None = None,
        poll: Seconds | None = None,
    ) -> AsyncObserver:
        """:meth:`Redlock.observe` for ``async for``: each wait for a change runs on a thread of
        its own; cancelling the waiting task ends the observer."""
        return self._observer(AsyncObserver, name, cancel, poll)
