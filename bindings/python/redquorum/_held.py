"""What a lock and a leadership share: :class:`Held`, a C handle that is ours until it is
released (a leadership: resigned) and that the library may find lost, and how a ``with`` block
over one ends."""

from __future__ import annotations

import os
import weakref
from ctypes import byref
from types import TracebackType
from typing import Any, Callable, ClassVar, NamedTuple, TypeVar

from . import _bindings as c
from . import _blocking
from ._convert import check_process
from ._errors import LockLost, Status, check
from ._managed import Managed

__all__ = ["Calls", "Held", "leave_block", "lost_in_block", "note_release_failure"]

H = TypeVar("H", bound="Held")


class Calls(NamedTuple):
    """The C functions of one kind of held handle (``redlock_lock_*``,
    ``redlock_leadership_*``), by name, looked up in ``lib`` at each call."""

    lib: Any
    is_held: str
    is_lost: str
    validity_ms: str
    on_lost: str
    end: str
    """The release (a leadership's resignation)."""
    free: str

    def __call__(self, function: str, *args: Any) -> Any:
        """Calls the C function this names ``function`` (a field's name)."""
        return getattr(self.lib, getattr(self, function))(*args)


def lost_in_block(what: str) -> LockLost:
    """What leaving a ``with`` block raises when ``what`` (a lock, a leadership) was lost while
    the block ran: its critical section was not protected."""
    return LockLost(
        f"{what} was lost while the block ran: the work may have overlapped another owner's",
        Status.LOST,
    )


def note_release_failure(exc: BaseException, what: str, error: Exception) -> None:
    """Adds to the body's own exception that releasing ``what`` failed too (never masks it)."""
    if hasattr(exc, "add_note"):
        exc.add_note(f"redlock: releasing {what} failed too: {error}")


def leave_block(
    what: str, lost: bool, release: Callable[[], None], exc: BaseException | None
) -> None:
    """How a ``with`` block over ``what`` ends: ``release()``, then :func:`lost_in_block` if it
    was ``lost`` (read before the release) and the body raised nothing; a failed release after
    a body that raised becomes a note on the body's exception."""
    if exc is None:
        release()
        if lost:
            raise lost_in_block(what)
        return
    try:
        release()
    except Exception as release_error:
        note_release_failure(exc, what, release_error)


class Held(Managed):
    """A C handle held until it ends (:meth:`_end`) that the library may find lost: the base of
    locks and leaderships, synchronous and asyncio. Subclasses name their C functions
    (:attr:`_calls`) and what a ``with`` block over them is called (:meth:`_block`)."""

    _calls: ClassVar[Calls]

    def __init__(self, pointer: Any) -> None:
        super().__init__(pointer)
        self._pid = os.getpid()
        # The C lost callbacks registered, kept for as long as the C handle lives: the
        # extender thread may call them any time.
        self._callbacks: list[Any] = []
        self._ended = False

    def _delete(self, pointer: Any) -> None:
        # Through the class, not the module's globals, which may be gone at interpreter exit.
        type(self)._calls("free", pointer)

    def _block(self) -> str:
        """How messages about a ``with`` block over it name it."""
        raise NotImplementedError

    def _flag(self, function: str) -> bool:
        pointer = self._borrow_if_open()
        if pointer is None:
            return False
        try:
            return bool(self._calls(function, pointer))
        finally:
            self._give_back()

    def _is_held(self) -> bool:
        return self._flag("is_held")

    def _is_lost(self) -> bool:
        return self._flag("is_lost")

    def _is_ended(self) -> bool:
        """Whether it ended (released, resigned, found lost then) or was closed."""
        return self._ended or self.closed

    @property
    def validity(self) -> float:
        """Seconds left during which it is ours for certain (no other holder or leader can be
        granted it); 0.0 once released, resigned or lost."""
        pointer = self._borrow_if_open()
        if pointer is None:
            return 0.0
        try:
            return int(self._calls("validity_ms", pointer)) / 1000
        finally:
            self._give_back()

    def _when_lost(self: H, deliver: Callable[[H], object]) -> None:
        """Calls ``deliver(self)`` once if it is found lost, on the client's extender thread;
        at once, on this thread, if it already was. It holds no reference to ``self``."""
        if not callable(deliver):
            raise TypeError(f"callback must be callable, not {type(deliver).__name__}")
        check_process(self._pid, self._what)
        # A weak reference: the C side keeps the thunk, the thunk must not keep the object
        # alive (its __del__ frees the C handle, after which the callback can no longer run).
        this = weakref.ref(self)

        def thunk(_user: int | None, _name: bytes | None) -> None:
            held = this()
            if held is not None:
                deliver(held)

        c_callback = c.redlock_lost_callback(thunk)
        self._callbacks.append(c_callback)
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = self._calls("on_lost", pointer, c_callback, None, byref(err))
        finally:
            self._give_back()
        check(status, err)

    def _end_now(self) -> None:
        """The release (resignation): one C call, blocking until a quorum answered."""
        # No Python mutex around the call: C serialises calls on one handle, and a waiter that
        # a signal interrupted must not leave a mutex held by the helper thread behind.
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = self._calls("end", pointer, byref(err))
        finally:
            self._give_back()
        if status in (Status.OK, Status.LOST):
            self._ended = True
        check(status, err)

    def _end(self) -> None:
        """:meth:`_end_now`, unless it already ended; in the main thread Ctrl-C interrupts the
        wait, and the call completes in the background."""
        if self._is_ended():
            return
        check_process(self._pid, self._what)
        _blocking.run(lambda _cancel: self._end_now(), cancellable=False)

    def _discard(self) -> None:
        """Frees the C handle of an acquisition (a campaign) nobody will see, its caller
        interrupted in the instant it succeeded: it ends without waiting for the nodes."""
        Managed.close(self)

    def __enter__(self: H) -> H:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        leave_block(self._block(), self._is_lost(), self._end, exc)

    def __del__(self) -> None:
        Managed.close(self)
