"""The shorthands of :class:`Redlock` and :class:`~redquorum.aio.AsyncRedlock`, written once.

Each shorthand builds the one :class:`Request` its arguments describe and hands it to the
client's ``_acquire_new``, which acquires it (the synchronous client returns the
:class:`~redquorum.Lock`; the asyncio one an awaitable) and frees the request afterwards. The
shared keywords of :meth:`~Shorthands.lock` and its read, write and semaphore twins are
declared once, as :class:`~redquorum._request.LockKeywords`.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Generic, TypeVar

from ._convert import Seconds
from ._request import LockKeywords, Request, shorthand

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Shorthands"]

T = TypeVar("T")


class Shorthands(Generic[T]):
    """Shorthands for the acquisition of one :class:`Request` each; ``T`` is what a client's
    acquisition returns (a :class:`~redquorum.Lock`, or for asyncio an awaitable of one)."""

    def _acquire_new(self, request: Request) -> T:
        """Acquires a request made for this one call, and frees it."""
        raise NotImplementedError

    def lock(self, resource: str, *, ttl: Seconds, **keywords: Unpack[LockKeywords]) -> T:
        """Acquire ``resource`` for ``ttl`` seconds, retrying per the options.

        A shorthand for :meth:`acquire` with a :class:`Request` of a plain lock.

        Every argument but the resource (and a semaphore's permits) is a keyword. Every duration takes seconds: an int, a float or a
        :class:`datetime.timedelta`.

        ``auto_extend=True`` keeps the lock alive while it is held: the library's extender
        thread (one per client) extends it every ``extend_fraction`` (default 1/3) of the TTL.
        :attr:`Lock.held` and :attr:`Lock.lost` say whether it still is; leaving a ``with``
        block whose lock was lost meanwhile raises :class:`LockLost`. Extension stops when the
        lock is released or garbage-collected, or ``max_hold`` after acquisition.

        ``wait_timeout`` waits up to that long for a busy resource instead of ``retry_count``
        attempts, woken by the release notifications the nodes publish
        (``notifications=False`` polls at ``retry_delay`` instead), queued in arrival order
        with the waiters of every process (``fair=False``: one waiter per client tries on each
        release instead). ``cancel``: a :class:`Cancel` that ends the acquisition early.

        Blocks (without holding the GIL) until acquired or out of retries: about
        ``retry_count * (retry_delay + retry_jitter)`` plus the node timeouts at most;
        Ctrl-C interrupts it at once (see :meth:`acquire`). Raises :class:`NotAcquired` if
        another owner holds it, :class:`NoQuorum` if too few nodes answered,
        :class:`Cancelled` if ``cancel`` fired, ``ValueError``/``TypeError`` for bad arguments
        or a closed client. On :class:`~redquorum.aio.AsyncRedlock`: ``await`` it, or use it
        in ``async with``.
        """
        return self._acquire_new(shorthand("lock", resource, ttl, keywords))

    def try_lock(self, resource: str, *, ttl: Seconds) -> T:
        """Like :meth:`lock`, but a single attempt without retries."""
        return self._acquire_new(Request(resource, ttl=ttl, retries=0))

    def lock_fenced(self, resource: str, *, ttl: Seconds) -> T:
        """Like :meth:`lock`, with a fencing token in :attr:`Lock.fence`.

        The token is kept as a quorum register in ``redlock:fence:{resource}`` on each node
        (no TTL); acquiring costs one more round to the nodes than a plain lock. A fenced lock
        is a plain lock on ``resource``: the two exclude each other.
        """
        return self._acquire_new(Request(resource, ttl=ttl, fenced=True))

    def read_lock(self, resource: str, *, ttl: Seconds, **keywords: Unpack[LockKeywords]) -> T:
        """The read side of a read-write lock on ``resource``; keywords as for :meth:`lock`.

        Any number of readers hold the resource at once while no writer does; a writer is a
        :meth:`write_lock` and also any plain or fenced lock of the resource (of any Redlock
        client). Each reader has its own expiry; extension and release touch only it. Waiting
        readers all wake when a writer releases. Writers can starve under a steady stream of
        overlapping readers. A thread holding the write lock of ``resource`` gets ``ValueError``
        instead of waiting for itself (asyncio tasks are not checked). No fencing token.
        """
        return self._acquire_new(shorthand("read_lock", resource, ttl, keywords, read=True))

    def write_lock(self, resource: str, *, ttl: Seconds, **keywords: Unpack[LockKeywords]) -> T:
        """The write side of a read-write lock on ``resource``; keywords as for :meth:`lock`.

        Excludes readers and other writers. On the nodes it is exactly a plain lock; it adds a
        check that the calling thread holds no read or write lock of ``resource`` itself (there
        is no upgrade from read to write): ``ValueError`` instead of waiting for itself. On
        :class:`~redquorum.aio.AsyncRedlock` tasks are not checked: a task holding the read
        lock that awaits the write lock waits (until the read lock is released or expires).
        """
        return self._acquire_new(shorthand("write_lock", resource, ttl, keywords, write=True))

    def semaphore(
        self,
        resource: str,
        permits: int,
        *,
        ttl: Seconds,
        **keywords: Unpack[LockKeywords],
    ) -> T:
        """One of ``permits`` permits (1 to 1024) of a counting semaphore on ``resource``: at
        most ``permits`` holders at once. Keywords as for :meth:`lock`.

        Each permit is a slot, an ordinary Redlock mutex on its own key
        (``redlock:sem:{resource}:<i>``); :attr:`Lock.permit` says which. Every caller of one
        semaphore must pass the same ``permits``: the nodes store it, and another number raises
        ``ValueError`` (it can change once every permit is released and its TTL has run out).
        A waiter wakes when any slot is released. No fencing token.
        """
        return self._acquire_new(
            shorthand("semaphore", resource, ttl, keywords, permits=permits)
        )

    @staticmethod
    def new_owner() -> str:
        """A fresh random owner name for ``Request(..., reentrant=owner)`` (40 hex digits, like a
        token)."""
        return secrets.token_hex(20)
