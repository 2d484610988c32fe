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
cleanly, and a spawner thread, which signals never interrupt, starts the helper threads.
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
from typing import Any, Callable, Generic, TypeVar

from ._cancel import Cancel, CancelHandle, link, unlink

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
        self._function: Callable[[], T] | None = function
        self._dispose = dispose
        self._notify = notify
        # A raw C lock: ``with`` on it runs no Python code between acquiring and entering.
        self._mutex = threading.Lock()
        self._finished = False
        self._abandoned = False
        self._value: T | None = None
        self._error: BaseException | None = None
        # Held until the call has ended, and until its thread runs: waiting for either is one
        # C call.
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._running = _thread.allocate_lock()
        self._running.acquire()
        self._leftover: CancelHandle | None = None

    def start(self) -> None:
        """Hands the call to the spawner thread, which starts the call's own thread."""
        _spawner().put(self)

    def _start_thread(self) -> None:
        # On the spawner thread. Not a daemon: an interpreter that exits lets a release in
        # flight reach the nodes.
        try:
            threading.Thread(target=self._run, name="redlock-call", daemon=False).start()
        except BaseException as exc:  # e.g. "can't start new thread": the waiter gets it
            self._running.release()
            self._finish(None, exc)

    def _run(self) -> None:
        self._running.release()
        value: T | None = None
        error: BaseException | None = None
        function, self._function = self._function, None
        assert function is not None  # a call runs once
        try:
            value = function()
        except BaseException as exc:  # handed to the waiter, raised there
            error = exc
        # The closure holds what the call used (a lock, a request, the client): it must not
        # outlive the call, or a closed client's threads and connections stay until the next.
        del function
        self._finish(value, error)

    def _finish(self, value: T | None, error: BaseException | None) -> None:
        with self._mutex:
            self._value, self._error = value, error
            self._finished = True
            abandoned = self._abandoned
            leftover, self._leftover = self._leftover, None
        try:
            if leftover is not None:
                leftover._free()
            if abandoned:
                self._discard()
        finally:
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

    def wait_running(self) -> None:
        """Until the call's thread runs (a non-daemon thread, which interpreter exit waits for);
        in slices, so that signals stay prompt."""
        while not self._running.acquire(True, SLICE_S):
            pass
        self._running.release()

    def free_when_finished(self, handle: CancelHandle) -> None:
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
    """The spawner: starts the helper threads, so that the main thread never runs
    ``Thread.start`` (Python code that a raising handler can break, see above)."""
    while True:
        call = calls.get()
        try:
            call._start_thread()
        except BaseException:  # _start_thread hands errors to the waiter; keep serving anyway
            pass
        # Not kept while waiting for the next: it holds what its call uses (see Call._run).
        del call


# The calls waiting for their thread, and the spawner serving them: started by one C call
# (_thread.start_new_thread, not threading.Thread.start), at import and again on first use in a
# forked child, which does not inherit the parent's threads.
_spawn_queue: queue.SimpleQueue[Call[Any]] | None = None
_spawn_lock = _thread.allocate_lock()


def _spawner() -> queue.SimpleQueue[Call[Any]]:
    global _spawn_queue
    calls = _spawn_queue
    if calls is not None:
        return calls
    with _spawn_lock:
        if _spawn_queue is None:
            calls = queue.SimpleQueue()
            _thread.start_new_thread(_spawn, (calls,))
            _spawn_queue = calls
        return _spawn_queue


def _forget_spawner() -> None:
    global _spawn_queue
    _spawn_queue = None


_spawner()
os.register_at_fork(after_in_child=_forget_spawner)


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def run(
    function: Callable[[CancelHandle | None], T],
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
    own = CancelHandle() if cancellable else None
    call: Call[T] = Call(lambda: function(own if cancellable else user_cancel), dispose)
    submitted = False
    value: T | None = None
    try:
        link(user_cancel, own)
        # Not call.start(): a handler may raise as a Python function begins.
        (_spawn_queue or _spawner()).put(call)
        submitted = True
        while not call.wait(SLICE_S):
            pass
        unlink(user_cancel, own)
        if own is not None:
            call.free_when_finished(own)
        value = call.result()
        return value
    except BaseException:
        if own is not None:
            own.cancel()
        call.abandon()
        unlink(user_cancel, own)
        if submitted:
            if own is not None and not call.finished:
                # A cancelled acquisition ends at once, having undone what it took; waiting
                # for it means nothing of it is pending once the exception propagates.
                while not call.wait(SLICE_S):
                    pass
            else:
                # A release or extend runs to its end; once its (non-daemon) thread runs, an
                # interpreter exiting on this exception waits for it.
                call.wait_running()
        if own is not None:
            call.free_when_finished(own)
        if value is not None and dispose is not None:
            dispose(value)  # taken from the call, not handed on: nobody will see it
        raise
