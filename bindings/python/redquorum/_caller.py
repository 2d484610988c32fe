"""Who an acquisition is for, as the core's read-write self-wait check tells callers apart.

The core refuses a read-write acquisition that would wait for its own caller (holding a read or
write lock of a resource and asking for its write lock, or holding the write lock and asking for
a read lock) with ``ValueError``. It keys that on the caller the binding names in
``redlock_request_acquire``, not on the OS thread, because the main thread's blocking calls run
on a helper thread each (``_blocking``). So each Python thread, the main thread included, is a
caller of its own, under a name that is never given twice in a process: a thread's
``get_ident()`` is reused once it has ended, and a later thread must not inherit the read locks
an earlier one handed on to others and never released itself.
"""

from __future__ import annotations

import itertools
import os
import threading

_numbers = itertools.count(1)
_threads = threading.local()


def thread() -> bytes:
    """The calling Python thread's name as a caller."""
    try:
        name: bytes = _threads.name
    except AttributeError:
        name = _threads.name = f"python-thread-{next(_numbers)}".encode("ascii")
    return name


def _forget_after_fork() -> None:
    # The child's one thread is not the parent's: locks the parent's thread holds must not
    # refuse the child's acquisitions (the child's copy of the core still counts them as held).
    global _threads
    _threads = threading.local()


os.register_at_fork(after_in_child=_forget_after_fork)
