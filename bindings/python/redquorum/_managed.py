"""The base of every wrapper that owns a C handle (after wasmtime-py's ``Managed``).

A :class:`Managed` object owns one pointer and frees it exactly once: at :meth:`~Managed.close`,
at the end of a ``with`` block, or, as a backstop, when it is garbage-collected. C calls borrow
the pointer (:meth:`~Managed._borrow`, :meth:`~Managed._give_back`) for their duration, so a
``close()`` from another thread while a call is running (an acquisition on a helper thread, a
release) frees the handle only once that call has returned, instead of under it.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, ClassVar, TypeVar

__all__ = ["Managed", "public_name"]

Self = TypeVar("Self", bound="Managed")


def public_name(cls: type) -> str:
    """``cls`` named as users import it (``redquorum.Lock``, ``redquorum.aio.AsyncLock``), for
    a ``repr``."""
    module, _, last = cls.__module__.rpartition(".")
    return f"{module if last.startswith('_') else cls.__module__}.{cls.__qualname__}"


class Managed:
    """Owns one C handle (``_ptr``); subclasses say how it is freed (:meth:`_delete`)."""

    _what: ClassVar[str] = "handle"
    """How messages name the object: "this {_what} is closed"."""

    def __init__(self, pointer: Any = None) -> None:
        self._ptr: Any = pointer
        # A raw C lock: ``with`` on it runs no Python code between acquiring and entering, so a
        # signal handler cannot leave it held.
        self._mutex = threading.Lock()
        self._borrowed = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _delete(self, pointer: Any) -> None:
        """Frees the C handle (the type's ``redlock_*_free``). Implementations take the
        library as a default argument: a finaliser may run at interpreter exit, once the
        module's globals are gone."""
        raise NotImplementedError

    def _borrow(self) -> Any:
        """The pointer, for one C call; :meth:`_give_back` after it. ``ValueError`` once closed."""
        with self._mutex:
            if self._closed:
                raise ValueError(f"this {self._what} is closed")
            self._borrowed += 1
            return self._ptr

    def _borrow_if_open(self) -> Any:
        """As :meth:`_borrow`, but ``None`` once closed (for reads that have an answer then)."""
        with self._mutex:
            if self._closed:
                return None
            self._borrowed += 1
            return self._ptr

    def _give_back(self) -> None:
        with self._mutex:
            self._borrowed -= 1
            pointer = self._take_if_unused()
        if pointer:
            self._delete(pointer)

    def _take_if_unused(self) -> Any:
        if not self._closed or self._borrowed:
            return None
        pointer, self._ptr = self._ptr, None
        return pointer

    def close(self) -> None:
        """Frees the C handle (once the calls using it have returned). Calling it again is a
        no-op."""
        mutex = getattr(self, "_mutex", None)
        if mutex is None:  # __init__ did not get that far
            return
        with mutex:
            self._closed = True
            pointer = self._take_if_unused()
        if pointer:
            self._delete(pointer)

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    # A copy would own the same pointer, and free it a second time.
    def __copy__(self) -> Managed:
        raise TypeError(f"a {self._what} owns a C handle and cannot be copied")

    def __deepcopy__(self, memo: dict[int, object]) -> Managed:
        raise TypeError(f"a {self._what} owns a C handle and cannot be copied")

    def __reduce__(self) -> str | tuple[Any, ...]:
        raise TypeError(f"a {self._what} owns a C handle and cannot be pickled")
