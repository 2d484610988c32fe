"""The cancel handle (:class:`Cancel`) and the per-call handles of ``_blocking`` and ``aio``.

A C ``redlock_cancel`` is an argument of each acquisition (``redlock_request_acquire``), not
part of the request: one request serves acquisitions with different handles, or none.
"""

from __future__ import annotations

from ctypes import byref
from typing import Any

from . import _bindings as c
from . import _ffi
from ._errors import check
from ._ffi import lib

__all__ = ["Cancel"]


class CancelHandle:
    """A C ``redlock_cancel`` without a finaliser: the per-call handles of ``_blocking`` and
    ``aio``, freed explicitly with :meth:`_free`. A ``__del__`` would run in whatever thread
    drops the last reference, and a signal handler that raises while it runs in the main thread
    has its exception printed and dropped ("Exception ignored in ...") instead of raised.
    """

    def __init__(self) -> None:
        out = c.redlock_cancel_p()
        err = c.redlock_error_p()
        check(lib.redlock_cancel_new(byref(out), byref(err)), err)
        self._handle: Any = out
        # Per-call handles of acquisitions that run on a helper thread (signals, asyncio): they
        # carry their own handle, fired by this one too. A set mutated only by single C-level
        # operations (add, discard, list(...)), so no lock is needed, not even in a signal
        # handler that interrupts one of them.
        self._children: set[CancelHandle] = set()

    @property
    def pointer(self) -> Any:
        """The C handle, for the acquisition that uses it; NULL once freed."""
        return self._handle

    def cancel(self) -> None:
        """Fire the handle. Idempotent; never blocks."""
        _ffi.gil_lib.redlock_cancel_trigger(self._handle)
        for child in list(self._children):
            child.cancel()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return bool(_ffi.gil_lib.redlock_cancel_is_triggered(self._handle))

    def _link(self, child: CancelHandle) -> None:
        # Add first, then look: a cancel() in between fires the child either way.
        self._children.add(child)
        if self.cancelled:
            child.cancel()

    def _unlink(self, child: CancelHandle) -> None:
        self._children.discard(child)

    def _free(self) -> None:
        # Once nothing uses the handle any more. Firing a freed handle does nothing; a thread
        # firing it meanwhile holds the GIL through the C call (see _ffi.gil_lib), and the
        # reference is cleared before the handle is freed.
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            lib.redlock_cancel_free(handle)


class Cancel(CancelHandle):
    """A cancel handle: :meth:`cancel` ends every pending acquisition given it (as
    ``Request(..., cancel=handle)`` or a shorthand's ``cancel=handle``).

    A cancelled acquisition raises :class:`~redquorum.Cancelled` at once, after undoing what it
    had taken on the nodes; one that already got its lock is not affected (release that as
    usual). A handle fires once and for good: use a new one for the next acquisitions.
    :meth:`cancel` may be called from any thread and from a signal handler.
    """

    def __repr__(self) -> str:
        return f"<redquorum.Cancel cancelled={self.cancelled}>"

    def __del__(self) -> None:
        self._free()


def link(user_cancel: Cancel | None, own: CancelHandle | None) -> None:
    """Makes ``user_cancel`` fire ``own`` too (undo with :func:`unlink`)."""
    if user_cancel is not None and own is not None:
        user_cancel._link(own)


def unlink(user_cancel: Cancel | None, own: CancelHandle | None) -> None:
    if user_cancel is not None and own is not None:
        user_cancel._unlink(own)
