"""A won campaign: :class:`Leadership`, over a C ``redlock_leadership``."""

from __future__ import annotations

import ctypes
import os
import weakref
from ctypes import byref
from types import TracebackType
from typing import Any, Callable

from . import _bindings as c
from . import _blocking
from ._convert import check_process, required_text
from ._errors import Status, check
from ._ffi import lib
from ._lock import leave_block
from ._managed import Managed

__all__ = ["Leadership"]


class Leadership(Managed):
    """This process's leadership of an election, from :meth:`Election.campaign` or
    :meth:`Redlock.campaign`: a fenced lock on the election's key, extended on the client's
    extender thread for as long as it is held.

    Use it as a context manager (resigned on exit, also when the body raises; leaving the block
    after the leadership was lost raises :class:`LockLost`, as a lock's block does) or call
    :meth:`resign`. Pass :attr:`term` with every write to a store that refuses writes with a
    lower term than it has seen, and stop when :attr:`is_leader` turns false or
    :meth:`on_lost` fires. If it is garbage-collected or closed while still held, it is
    resigned then, without waiting for the nodes.
    """

    _what = "leadership"

    def __init__(self, pointer: Any, keep: tuple[object, ...] = ()) -> None:
        """Internal: wraps a C leadership handle. ``keep``: the C callbacks it may still call
        (the election's stopped-leading callback), kept alive as long as it is."""
        super().__init__(pointer)
        self._pid = os.getpid()
        self._keep = keep
        self._callbacks: list[Any] = []
        self._resigned = False
        self._term = int(lib.redlock_leadership_term(pointer))
        self._name = required_text(lib.redlock_leadership_name(pointer))
        self._identity = required_text(lib.redlock_leadership_identity(pointer))

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_leadership_free(pointer)

    @property
    def term(self) -> int:
        """The term: greater than every earlier leader's in the election, never handed out
        again (the fencing token of the lock underneath). Stays readable after resigning."""
        return self._term

    @property
    def name(self) -> str:
        """The election's name."""
        return self._name

    @property
    def identity(self) -> str:
        """This leader's identity."""
        return self._identity

    @property
    def resigned(self) -> bool:
        """True once :meth:`resign` succeeded or found the leadership already lost (or it was
        closed)."""
        return self._resigned or self.closed

    def _flag(self, function: Callable[[Any], bool]) -> bool:
        pointer = self._borrow_if_open()
        if pointer is None:
            return False
        try:
            return bool(function(pointer))
        finally:
            self._give_back()

    @property
    def is_leader(self) -> bool:
        """True while this process leads: not resigned, not lost, validity left. Cheap: poll it
        during long work."""
        return self._flag(lib.redlock_leadership_is_leader)

    @property
    def is_lost(self) -> bool:
        """True once the leadership was found lost (an extension found it no longer ours on a
        quorum, or it ran out of validity); a resigned leadership is not lost."""
        return self._flag(lib.redlock_leadership_is_lost)

    @property
    def validity(self) -> float:
        """Seconds left before another candidate could be granted the leadership; 0.0 once
        resigned or lost."""
        pointer = self._borrow_if_open()
        if pointer is None:
            return 0.0
        try:
            return int(lib.redlock_leadership_validity_ms(pointer)) / 1000
        finally:
            self._give_back()

    def on_lost(self, callback: Callable[[Leadership], object]) -> None:
        """Call ``callback(leadership)`` once if the leadership is found lost; at once if it
        already was.

        As :meth:`Lock.on_lost`: it runs on the client's extender thread, which serves every
        auto-extended lock and leadership of the client, so keep it short (set an event, cancel
        a task); it may call :meth:`resign`. An exception it raises goes to
        :func:`sys.unraisablehook`. Resigning does not call it. Several callbacks may be
        registered; each runs at most once.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        check_process(self._pid, "leadership")
        # A weak reference: the thunk must not keep the Leadership (whose __del__ frees the C
        # handle) alive.
        this = weakref.ref(self)

        def thunk(_user: int | None, _name: bytes | None) -> None:
            leadership = this()
            if leadership is not None:
                callback(leadership)

        c_callback = c.redlock_lost_callback(thunk)
        self._callbacks.append(c_callback)  # for as long as the C leadership lives
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = lib.redlock_leadership_on_lost(pointer, c_callback, None, byref(err))
        finally:
            self._give_back()
        check(status, err)

    def resign(self) -> None:
        """End the leadership on every node at once: waiting candidates are woken, and the
        election's stopped-leading callback runs (on this thread) if it has not yet.
        Idempotent.

        Raises :class:`LockLost` if it was no longer ours (it expired or was found lost: work
        done under its term may have overlapped the next leader's), :class:`NoQuorum` if too
        few nodes answered (the keys expire with the TTL). Ctrl-C interrupts the wait at once;
        the resignation itself still completes in the background.
        """
        if self.resigned:
            return
        check_process(self._pid, "leadership")
        _blocking.run(lambda _cancel: self._resign_now(), cancellable=False)

    def _resign_now(self) -> None:
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = lib.redlock_leadership_resign(pointer, byref(err))
        finally:
            self._give_back()
        if status in (Status.OK, Status.LOST):
            self._resigned = True
        check(status, err)

    def _discard(self) -> None:
        """Free the C leadership of a campaign nobody will see (its caller was interrupted in
        the instant it won): it is resigned without waiting for the nodes."""
        Managed.close(self)

    def __enter__(self) -> Leadership:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        leave_block(f"the leadership of election {self._name!r}", self.is_lost, self.resign, exc)

    def __repr__(self) -> str:
        return (
            f"<redquorum.Leadership name={self._name!r} identity={self._identity!r} "
            f"term={self._term} resigned={self.resigned}>"
        )

    def __del__(self) -> None:
        Managed.close(self)
