"""Blocking C calls that Ctrl-C, a raising signal handler or asyncio cancellation can interrupt.

Python runs signal handlers in the main thread only, between bytecodes; a thread inside a
foreign call sees none of them until the call returns. So in the main thread a blocking call
(acquire, release, extend) runs on a helper thread of its own while the main thread waits in
short slices that signals interrupt. When the wait ends in an exception (``KeyboardInterrupt``,
whatever a handler raised), an acquisition is cancelled through a per-call ``redlock_cancel``
and joined; a lock it nevertheless obtained in that instant is freed (which releases it) before
the exception propagates. A release or extend cannot be cancelled: it runs to its end on its
thread, bounded by the node timeout, and the exception propagates at once.

Which side disposes of a result nobody will use is decided under a mutex, so exactly one does:
the waiter, if the call had finished when the waiter gave up; the helper thread otherwise.
Other threads call directly: they never receive signals.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Optional, TypeVar

from ._request import Cancel

T = TypeVar("T")

# How long the main thread sleeps between looks at pending signals. A signal delivered to
# another thread (the kernel picks any) only sets Python's flag; the main thread runs the handler
# when its wait returns, so this bounds the latency of Ctrl-C.
SLICE_S = 0.02


class Call(Generic[T]):
    """One blocking call on a thread of its own, and who disposes of its result."""

    def __init__(
        self,
        function: Callable[[], T],
        dispose: Callable[[T], None] | None = None,
        notify: Callable[[], None] | None = None,
    ) -> None:
        self._function = function
        self._dispose = dispose
        self._notify = notify
        self._mutex = threading.Lock()
        self._finished = False
        self._abandoned = False
        self._value: Optional[T] = None
        self._error: BaseException | None = None
        self.done = threading.Event()
        # Not a daemon: an interpreter that exits lets a release in flight reach the nodes.
        self.thread = threading.Thread(target=self._run, name="redlock-call", daemon=False)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        value: Optional[T] = None
        error: BaseException | None = None
        try:
            value = self._function()
        except BaseException as exc:  # handed to the waiter, raised there
            error = exc
        with self._mutex:
            self._value, self._error = value, error
            self._finished = True
            abandoned = self._abandoned
        if abandoned:
            self._discard()
        self.done.set()
        if self._notify is not None:
            self._notify()

    def abandon(self) -> None:
        """The waiter gives up: whatever the call yields is disposed of, now or when it ends."""
        with self._mutex:
            self._abandoned = True
            finished = self._finished
        if finished:
            self._discard()

    def _discard(self) -> None:
        value, self._value, self._error = self._value, None, None
        if value is not None and self._dispose is not None:
            self._dispose(value)

    def result(self) -> T:
        """The call's value, or its exception raised; only once :attr:`done` is set."""
        error, self._error = self._error, None
        if error is not None:
            raise error
        value, self._value = self._value, None
        return value  # type: ignore[return-value]


def link(user_cancel: Cancel | None, own: Cancel | None) -> Callable[[], None]:
    """Makes ``user_cancel`` fire ``own`` too; returns the undo."""
    if user_cancel is None or own is None:
        return lambda: None
    user_cancel._link(own)
    return lambda: user_cancel._unlink(own)


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def run(
    function: Callable[[Cancel | None], T],
    *,
    cancellable: bool,
    user_cancel: Cancel | None = None,
    dispose: Callable[[T], None] | None = None,
) -> T:
    """Runs ``function(cancel)`` so that signals interrupt it (see the module docs).

    ``cancellable``: ``function`` acquires and honours ``cancel``, which is then a per-call
    handle (fired by ``user_cancel`` too) on the main thread, ``user_cancel`` elsewhere.
    ``dispose`` frees a result the caller will never see.
    """
    if not in_main_thread():
        return function(user_cancel)
    own = Cancel() if cancellable else None
    unlink = link(user_cancel, own)
    try:
        call: Call[T] = Call(lambda: function(own if cancellable else user_cancel), dispose)
        try:
            # Inside the try: a handler may run (and raise) while start() waits for the thread.
            call.start()
            while not call.done.wait(SLICE_S):
                pass
        except BaseException:
            call.abandon()
            if own is not None:
                own.cancel()
                # A cancelled acquisition ends at once, having undone what it took; joining it
                # means nothing of it is pending once the exception propagates.
                if call.thread.ident is not None:
                    call.thread.join()
            raise
        return call.result()
    finally:
        unlink()
