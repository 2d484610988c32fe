"""A held lock: :class:`Lock`, over a C ``redlock_lock``, on :class:`LockBase`, which it
shares with :class:`~redquorum.aio.AsyncLock`."""

from __future__ import annotations

from ctypes import byref, c_uint32, c_uint64
from typing import Any, Callable, TypeVar

from . import _bindings as c
from . import _blocking
from ._convert import Seconds, check_process, required_text, ttl_millis
from ._errors import Status, check
from ._ffi import lib
from ._held import Calls, Held
from ._managed import public_name

__all__ = ["Lock", "LockBase", "L"]

_UNREAD: Any = object()

L = TypeVar("L", bound="LockBase")


class LockBase(Held):
    """What a lock is, whether its calls block (:class:`Lock`) or are awaited
    (:class:`~redquorum.aio.AsyncLock`): everything that does not wait on the nodes."""

    _what = "lock"
    _calls = Calls(
        lib,
        is_held="redlock_lock_is_held",
        is_lost="redlock_lock_is_lost",
        validity_ms="redlock_lock_validity_ms",
        on_lost="redlock_lock_on_lost",
        end="redlock_lock_release",
        free="redlock_lock_free",
    )

    def __init__(self, pointer: Any, resource: str, resources: list[str]) -> None:
        """Internal: wraps a C lock handle. Obtain locks from :class:`Redlock` instead."""
        super().__init__(pointer)
        # Known from the request; the rest is read from the C lock when first asked for.
        self._resource = resource
        self._resources = resources
        self._token: str | None = None
        self._fence: Any = _UNREAD
        self._hold_count: Any = _UNREAD
        self._permit: Any = _UNREAD

    @property
    def resource(self) -> str:
        """The locked resource name (the Redis key); for a lock of several resources, their
        sorted names joined with ``,``."""
        return self._resource

    @property
    def resources(self) -> list[str]:
        """The locked resources: one, or for a lock of several all of them, sorted."""
        return list(self._resources)

    @property
    def token(self) -> str:
        """The random value stored under the key; unique per acquisition. For a reentrant lock,
        the owner."""
        if self._token is None:
            self._token = required_text(self._read(lib.redlock_lock_token))
        return self._token

    @property
    def fence(self) -> int | None:
        """The fencing token of a fenced lock (``Request(..., fenced=True)``,
        :meth:`Redlock.lock_fenced`); None for other locks.

        Strictly greater than the token of every fenced lock of the same resource whose holder
        came before, also when nodes restart without their data, provided they stay out a
        restart delay or restart grace (see docs/operations.md). Send it with every write to the
        protected resource, which rejects writes with a lower token than it has seen.
        """
        if self._fence is _UNREAD:
            self._fence = self._number(lib.redlock_lock_fence, c_uint64)
        return self._fence  # type: ignore[no-any-return]

    @property
    def hold_count(self) -> int | None:
        """For a reentrant lock: the owner's holds once this one was counted (1 = outermost)."""
        if self._hold_count is _UNREAD:
            self._hold_count = self._number(lib.redlock_lock_hold_count, c_uint64)
        return self._hold_count  # type: ignore[no-any-return]

    @property
    def permit(self) -> int | None:
        """For a semaphore permit (:meth:`Redlock.semaphore`): the slot held, 0 to permits - 1;
        None for other locks."""
        if self._permit is _UNREAD:
            self._permit = self._number(lib.redlock_lock_permit, c_uint32)
        return self._permit  # type: ignore[no-any-return]

    def _read(self, function: Callable[[Any], Any]) -> Any:
        pointer = self._borrow()
        try:
            return function(pointer)
        finally:
            self._give_back()

    def _number(self, function: Callable[..., int], kind: Any) -> int | None:
        """A number locks of one kind carry (fence, hold count, permit); None for the others."""
        value = kind()
        pointer = self._borrow()
        try:
            status = function(pointer, byref(value), None)
        finally:
            self._give_back()
        return int(value.value) if status == Status.OK else None

    @property
    def released(self) -> bool:
        """True once :meth:`release` succeeded or found the lock already lost (or the lock was
        closed)."""
        return self._is_ended()

    @property
    def held(self) -> bool:
        """True while the lock is ours: not released, not lost, validity left.

        For a lock taken with ``auto_extend=True`` the library's extender thread keeps this
        true while the lock is being extended; it turns false as soon as an extension finds the
        lock lost. Cheap: poll it during long work.
        """
        return self._is_held()

    @property
    def lost(self) -> bool:
        """True once the lock was found lost (an extension found it no longer ours on a quorum,
        or an auto-extended lock ran out of validity); a released lock is not lost."""
        return self._is_lost()

    def _extend_now(self, millis: int) -> None:
        # No Python mutex around the call, as for Held._end_now.
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = lib.redlock_lock_extend(pointer, millis, byref(err))
        finally:
            self._give_back()
        check(status, err)

    def close(self) -> None:
        """Free the C lock now, which releases it if it is still held, without waiting for the
        nodes (their keys are deleted moments later, or expire). What the lock told so far
        (its token, fence, hold count, permit) stays readable; its calls raise ``ValueError``."""
        if not self.closed:
            for fact in ("token", "fence", "hold_count", "permit"):
                try:
                    getattr(self, fact)
                except ValueError:  # closed meanwhile by another thread
                    break
        super().close()

    def _block(self) -> str:
        return f"lock {self._resource!r}"

    def __repr__(self) -> str:
        return f"<{public_name(type(self))} resource={self._resource!r} released={self.released}>"


class Lock(LockBase):
    """One acquisition of a resource, from :meth:`Redlock.acquire` or one of its shorthands.

    Use it as a context manager (released on exit, also when the body raises) or call
    :meth:`release`. A Lock may be shared between threads; the library serialises its calls.
    If it is garbage-collected or closed (:meth:`close`) while still held, it is released then,
    without waiting for the nodes; do not rely on that: the resource stays locked until the
    release reaches the nodes, or until the TTL runs out.
    """

    def on_lost(self, callback: Callable[[Lock], object]) -> None:
        """Call ``callback(lock)`` once if the lock is found lost; at once if it already was.

        For an ``auto_extend=True`` lock it runs on the client's extender thread, which serves
        every auto-extended lock of the client: keep it short (set an event, cancel a task). It
        may call :meth:`release`. An exception it raises goes to :func:`sys.unraisablehook`. A
        release does not call it. Several callbacks may be registered; each runs at most once.
        """
        self._when_lost(callback)

    def extend(self, *, ttl: Seconds) -> None:
        """Set the lock's TTL to ``ttl`` seconds from now on a quorum of nodes.

        Raises :class:`LockLost` if the lock is no longer ours (expired or released),
        :class:`ExtensionLimit` once ``max_extensions`` is used up (the lock is still held),
        :class:`NoQuorum` if too few nodes answered, ``ValueError`` for a bad TTL. Ctrl-C
        interrupts the wait at once; the extension itself still completes in the background.
        """
        millis = ttl_millis(ttl)
        check_process(self._pid, "lock")
        _blocking.run(lambda _cancel: self._extend_now(millis), cancellable=False)

    def release(self) -> None:
        """Delete the key on every node where it still holds our token. Idempotent.

        Raises :class:`LockLost` if a quorum no longer held our token (the critical section may
        not have been exclusive), :class:`NoQuorum` if too few nodes answered (call again, or
        let the TTL expire the key). Ctrl-C interrupts the wait at once; the release itself
        still completes in the background (bounded by the node timeout), even if the
        interpreter is exiting.
        """
        self._end()

