"""Blocking C calls that Ctrl-C, a raising signal handler or asyncio cancellation can interrupt.

Python runs signal handlers in the main thread only, between bytecodes; a thread inside a
foreign call sees none of them until the call returns. So in the main thread a blocking call
(acquire, release, extend) runs on a helper thread of its own while the main thread waits in
short slices that signals interrupt. When the wait ends in an exception (``KeyboardInterrupt``,
whatever a handler raised), an acquisition is cancelled through a per-call ``redlock_cancel``
and waited for; a lock it nevertheless obtained in that instant is freed (which releases it)
before the exception propagates. A release or extend cannot be cancelled: it runs to its end on
its thread, bounded by the node timeout, and the exception propagates at once.

A handler may raise between any two bytecodes of the main thread, so the main thread never runs
Python-level synchronisation here: ``threading.Event.wait``, ``Thread.start`` and
``Thread.join`` are Python code around a ``Condition``, and a handler that raises inside them
can leave the Condition's lock held (the helper thread then hangs in ``Event.set``) or release it
twice (``RuntimeError: release unlocked lock``). Measured before this design: 5 of 24 runs of 200
SIGALRM rounds hung or crashed that way. Instead the main thread only blocks in single C calls
(``lock.acquire(timeout)`` of a raw lock, ``SimpleQueue.put``), which a handler interrupts
cleanly, and a daemon spawner thread, which signals never interrupt, starts the helper threads.
The per-call cancel handle has no finaliser (one running in the main thread would print and drop
a handler's exception): it is freed explicitly once the call has ended; a handler raising in
the few bytecodes before the call is handed over leaks it (a few dozen bytes) instead.

Which side disposes of a result nobody will use is decided under a mutex, so exactly one does:
the waiter, if the call had finished when the waiter gave up; the helper thread otherwise.
Other threads call directly: they never receive signals.
"""

from __future__ import annotations

import _thread
import os
import queue
import threading
from typing import Any, Callable, Generic, Optional, TypeVar

from ._request import Cancel, _CancelHandle

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
        # A raw C lock: ``with`` on it runs no Python code between acquiring and entering.
        self._mutex = threading.Lock()
        self._finished = False
        self._abandoned = False
        self._value: Optional[T] = None
        self._error: BaseException | None = None
        # Held until the call has ended; waiting for it is one C call.
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._leftover: _CancelHandle | None = None

    def start(self) -> None:
        """Hands the call to the spawner thread, which starts the call's own thread."""
        _spawn_queue.put(self)

    def _start_thread(self) -> None:
        # On the spawner thread. Not a daemon: an interpreter that exits lets a release in
        # flight reach the nodes.
        try:
            threading.Thread(target=self._run, name="redlock-call", daemon=False).start()
        except BaseException as exc:  # e.g. "can't start new thread": the waiter gets it
            self._finish(None, exc)

    def _run(self) -> None:
        value: Optional[T] = None
        error: BaseException | None = None
        try:
            value = self._function()
        except BaseException as exc:  # handed to the waiter, raised there
            error = exc
        self._finish(value, error)

    def _finish(self, value: Optional[T], error: BaseException | None) -> None:
        with self._mutex:
            self._value, self._error = value, error
            self._finished = True
            abandoned = self._abandoned
            leftover, self._leftover = self._leftover, None
        if leftover is not None:
            leftover._free()
        if abandoned:
            self._discard()
        self._done.release()
        if self._notify is not None:
            self._notify()

    @property
    def finished(self) -> bool:
        """True once the call has ended (its result is set)."""
        return self._finished

    def wait(self, timeout: float) -> bool:
        """True once the call has ended, False after ``timeout`` seconds. One C call, which a
        signal handler interrupts cleanly; True is returned once (the waiter takes the lock)."""
        return self._done.acquire(True, timeout)

    def free_when_finished(self, handle: _CancelHandle) -> None:
        """Frees ``handle``, which the call may still use, once the call has ended."""
        with self._mutex:
            if not self._finished:
                self._leftover = handle
                return
        handle._free()

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
        """The call's value, or its exception raised; only once it has ended."""
        error, self._error = self._error, None
        if error is not None:
            raise error
        value, self._value = self._value, None
        return value  # type: ignore[return-value]


def _spawn(calls: queue.SimpleQueue[Call[Any]]) -> None:
    """The spawner: a daemon thread that starts the helper threads, so that the main thread
    never runs ``Thread.start`` (Python code that a raising handler can break, see above)."""
    while True:
        calls.get()._start_thread()


def _start_spawner() -> queue.SimpleQueue[Call[Any]]:
    calls: queue.SimpleQueue[Call[Any]] = queue.SimpleQueue()
    threading.Thread(target=_spawn, args=(calls,), name="redlock-spawn", daemon=True).start()
    return calls


# The calls waiting for their thread. Putting one is a single C call.
_spawn_queue = _start_spawner()


def _after_fork_in_child() -> None:
    # The parent's spawner thread does not exist in a child process.
    global _spawn_queue
    _spawn_queue = _start_spawner()


os.register_at_fork(after_in_child=_after_fork_in_child)


def link(user_cancel: Cancel | None, own: _CancelHandle | None) -> Callable[[], None]:
    """Makes ``user_cancel`` fire ``own`` too; returns the undo."""
    if user_cancel is None or own is None:
        return lambda: None
    user_cancel._link(own)
    return lambda: user_cancel._unlink(own)


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def run(
    function: Callable[[_CancelHandle | None], T],
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
    own = _CancelHandle() if cancellable else None
    unlink = link(user_cancel, own)
    call: Call[T] = Call(lambda: function(own if cancellable else user_cancel), dispose)
    submitted = False
    try:
        _spawn_queue.put(call)  # not call.start(): a handler may raise as a function begins
        submitted = True
        while not call.wait(SLICE_S):
            pass
    except BaseException:
        call.abandon()
        if own is not None:
            own.cancel()
            # A cancelled acquisition ends at once, having undone what it took; waiting for it
            # means nothing of it is pending once the exception propagates. (Interrupted between
            # submitting and noting it, the call still ends cancelled, and disposes, on its own.)
            if submitted and not call.finished:
                while not call.wait(SLICE_S):
                    pass
        raise
    finally:
        unlink()
        if own is not None:
            # Explicitly, not in a __del__ at some later bytecode of this thread, where a
            # signal handler's exception would be printed and dropped instead of raised.
            call.free_when_finished(own)
    return call.result()
