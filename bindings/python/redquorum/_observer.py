"""An election's leader changes: :class:`Observer`, over a C ``redlock_observer``, on
:class:`ObserverBase`, which it shares with :class:`~redquorum.aio.AsyncObserver`."""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import byref
from typing import Any

from . import _bindings as c
from . import _blocking
from ._cancel import Cancel, CancelHandle, link, unlink
from ._convert import check_process
from ._errors import Status, check
from ._ffi import lib
from ._leader import Leader, read_leader
from ._managed import Managed, public_name

__all__ = ["ENDED", "Observer", "ObserverBase"]

ENDED: Any = object()
"""What :meth:`ObserverBase._next_now` returns once the observer's cancel handle fired."""


class ObserverBase(Managed):
    """What an observer is, whether it is iterated (:class:`Observer`) or iterated with
    ``async for`` (:class:`~redquorum.aio.AsyncObserver`): everything but the iteration."""

    _what = "observer"

    def __init__(self, client: Managed, name: bytes, cancel: Cancel | None, poll_ms: int) -> None:
        """Internal: use :meth:`Redlock.observe` or :meth:`Election.observe`."""
        super().__init__()
        self._pid = os.getpid()
        self._name = name.decode("utf-8")
        self._user_cancel = cancel
        self._ended = False
        # Serialises the C calls, which allow one thread at a time; taken on the thread that
        # makes the call, never in the main thread's signal-interruptible wait.
        self._serial = threading.Lock()
        # The observer's own handle: fired by `cancel`, by close() and by an interrupted wait.
        self._own = CancelHandle()
        out = c.redlock_observer_p()
        err = c.redlock_error_p()
        pointer = client._borrow()
        try:
            status = lib.redlock_client_observe(
                pointer, name, self._own.pointer, poll_ms, byref(out), byref(err)
            )
        finally:
            client._give_back()
        try:
            check(status, err)
        except BaseException:
            self._own._free()
            raise
        self._ptr = out
        link(cancel, self._own)

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_observer_free(pointer)
        # Nothing uses the handle any more: the C observer kept its own reference to its state.
        self._own._free()

    @property
    def name(self) -> str:
        """The observed election's name."""
        return self._name

    def _next_now(self) -> Any:
        """One ``redlock_observer_next``, blocking: the change, or :data:`ENDED`."""
        with self._serial:
            pointer = self._borrow_if_open()
            if pointer is None:
                return ENDED
            raw = c.redlock_leader_p()
            err = c.redlock_error_p()
            try:
                status = lib.redlock_observer_next(pointer, byref(raw), byref(err))
            finally:
                self._give_back()
            if status == Status.CANCELLED:
                lib.redlock_error_free(err)
                return ENDED
            check(status, err)
            try:
                return read_leader(raw)
            finally:
                lib.redlock_leader_free(raw)

    def _end(self) -> None:
        self._ended = True
        handle = getattr(self, "_own", None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """End the observer (a wait in progress on another thread ends too) and free it once
        no call uses it. Calling it again is a no-op."""
        self._end()
        unlink(getattr(self, "_user_cancel", None), getattr(self, "_own", None))
        super().close()

    def __repr__(self) -> str:
        state = "ended" if self._ended or self.closed else "open"
        return f"<{public_name(type(self))} name={self._name!r} {state}>"


class Observer(ObserverBase):
    """An iterator of an election's leader changes, from :meth:`Redlock.observe` or
    :meth:`Election.observe`: each item is who leads from then on (a :class:`Leader`, or
    ``None`` for nobody).

    The first item is the state when iteration starts; each next one waits until the leader
    differs (another term, or someone instead of nobody and the other way round), woken by the
    takeovers and resignations the nodes announce, and otherwise reading the nodes every
    ``poll`` seconds and when the leader's TTL runs out. It reports states, not every
    transition. While too few nodes answer it keeps waiting.

    Iteration ends (``StopIteration``) once ``cancel`` fires or the observer is closed
    (:meth:`close`, or the end of a ``with`` block), also from a wait on another thread. In the
    main thread Ctrl-C (``KeyboardInterrupt``) and any signal handler that raises interrupt a
    wait at once and end the observer. One thread at a time iterates (others wait their turn).
    """

    def __iter__(self) -> Observer:
        return self

    def __next__(self) -> Leader | None:
        if self._ended:
            raise StopIteration
        check_process(self._pid, "observer")
        try:
            change = _blocking.run(lambda _cancel: self._next_now(), cancellable=False)
        except BaseException:
            # Interrupted (Ctrl-C, a raising handler): the call still waiting on its thread is
            # ended by the cancel, and so is the observer.
            self._end()
            raise
        if change is ENDED:
            self._ended = True
            raise StopIteration
        return change  # type: ignore[no-any-return]
