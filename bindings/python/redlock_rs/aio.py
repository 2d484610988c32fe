"""asyncio facade: :class:`AsyncRedlock` and :class:`AsyncLock`.

::

    from redlock_rs.aio import AsyncRedlock

    async with AsyncRedlock(nodes) as rl:
        async with rl.lock("orders:42", ttl=10, wait_timeout=30) as lock:
            ...
            await lock.extend(ttl=10)
        lock = await rl.acquire(redlock_rs.Request("orders:43", ttl=10, fenced=True))
        await lock.release()

The Rust core has no async runtime, so every call that waits on the nodes (acquire, extend,
release) runs on a thread of its own (not the loop's default executor, whose few threads 50
waiters would fill, queueing the holders' releases behind them) and the event loop is never
blocked. Cancelling the task (``task.cancel()``, ``asyncio.wait_for`` and ``asyncio.timeout``
expiring) cancels a pending acquisition through its ``redlock_cancel`` handle; a lock obtained
in the same instant is released. A release (also the one in ``__aexit__``) runs to completion
even when the task is cancelled meanwhile, and the cancellation is re-raised afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable
from types import TracebackType
from typing import Any, Callable, TypeVar

from ._blocking import Call
from ._cancel import Cancel, CancelHandle, link, unlink
from ._client import Redlock
from ._convert import Seconds, ttl_millis
from ._errors import LockLost, Status
from ._inspect import ForcedRelease, Inspection
from ._lock import Lock
from ._node import NodeStatus
from ._request import Request
from ._shorthands import Shorthands

__all__ = ["AsyncRedlock", "AsyncLock"]

T = TypeVar("T")


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
    def validity_ms(self) -> int:
        return self._lock.validity_ms

    @property
    def validity(self) -> float:
        return self._lock.validity

    def on_lost(self, callback: Callable[[AsyncLock], object]) -> None:
        """Call ``callback(lock)`` once, in the running event loop, if the lock is found lost
        (e.g. set an :class:`asyncio.Event` or cancel a task); soon, if it already was."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        loop = asyncio.get_running_loop()

        def deliver(_lock: Lock) -> None:  # on the extender thread (or here, if already lost)
            try:
                loop.call_soon_threadsafe(callback, self)
            except RuntimeError:  # the loop is closed
                pass

        self._lock.on_lost(deliver)

    async def extend(self, ttl_ms: int | None = None, *, ttl: Seconds | None = None) -> None:
        """:meth:`Lock.extend` without blocking the loop. Cancelling the task stops the wait;
        the extension itself still completes on its thread."""
        millis = ttl_millis(ttl_ms, ttl)
        await _run(lambda _cancel: self._lock._extend_now(millis), cancellable=False)

    async def release(self) -> None:
        """:meth:`Lock.release` without blocking the loop; runs to completion even if the task
        is cancelled meanwhile (the cancellation is raised afterwards)."""
        if self._lock.released:
            return
        await _run(lambda _cancel: self._lock._release_now(), cancellable=False, complete=True)

    async def __aenter__(self) -> AsyncLock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            lost = self.lost
            await self.release()
            if lost:
                raise LockLost(
                    f"lock {self.resource!r} was lost while the block ran: the work may have "
                    "overlapped another owner's",
                    Status.LOST,
                )
            return
        try:
            await self.release()
        except Exception as release_error:  # never mask the body's own exception
            if hasattr(exc, "add_note"):
                exc.add_note(f"redlock: releasing {self.resource!r} failed too: {release_error}")

    def __repr__(self) -> str:
        return f"<redlock_rs.aio.AsyncLock resource={self.resource!r} released={self.released}>"


class _Acquiring:
    """What :meth:`AsyncRedlock.lock` and friends return: ``await`` it for an
    :class:`AsyncLock`, or use it in ``async with`` (released on exit). It owns the request
    made for it and frees it once the acquisition has ended."""

    def __init__(self, client: AsyncRedlock, request: Request) -> None:
        self._client = client
        self._request = request
        self._lock: AsyncLock | None = None

    async def _acquire(self) -> AsyncLock:
        with self._request:
            return await self._client.acquire(self._request)

    def __await__(self) -> Generator[Any, None, AsyncLock]:
        return self._acquire().__await__()

    async def __aenter__(self) -> AsyncLock:
        self._lock = await self._acquire()
        return self._lock

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            await lock.__aexit__(exc_type, exc, traceback)


class AsyncRedlock(Shorthands[_Acquiring]):
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
            raise TypeError(f"client must be a redlock_rs.Redlock, not {type(client).__name__}")
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

    async def acquire(self, request: Request) -> AsyncLock:
        """:meth:`Redlock.acquire` without blocking the loop; cancelling the task cancels the
        acquisition (and releases a lock obtained in the same instant)."""
        if not isinstance(request, Request):
            raise TypeError(f"request must be a redlock_rs.Request, not {type(request).__name__}")
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

    def _acquire_new(self, request: Request) -> _Acquiring:
        return _Acquiring(self, request)

    async def inspect(self, resource: str) -> Inspection:
        """:meth:`Redlock.inspect` on a thread of its own (it waits up to ``node_timeout_ms``)."""
        return await _run(lambda _cancel: self._client.inspect(resource), cancellable=False)

    async def force_release(self, resource: str, token: str | None = None) -> ForcedRelease:
        """:meth:`Redlock.force_release` on a thread of its own; it runs to completion even if
        the task is cancelled meanwhile (the cancellation is re-raised afterwards)."""
        return await _run(
            lambda _cancel: self._client.force_release(resource, token),
            cancellable=False,
            complete=True,
        )

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
        return f"<redlock_rs.aio.AsyncRedlock over {self._client!r}>"
