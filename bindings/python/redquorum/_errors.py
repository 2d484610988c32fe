"""Status codes and the exceptions they become."""

from __future__ import annotations

import enum
from ctypes import byref
from typing import Any, Callable

from . import _bindings as c
from ._ffi import lib


class Status(enum.IntEnum):
    """``redlock_status``: what a C call reports. The numbers are never reused."""

    OK = c.REDLOCK_OK
    NOT_ACQUIRED = c.REDLOCK_NOT_ACQUIRED
    NO_QUORUM = c.REDLOCK_NO_QUORUM
    LOST = c.REDLOCK_LOST
    INVALID_ARGUMENT = c.REDLOCK_INVALID_ARGUMENT
    EXTENSION_LIMIT = c.REDLOCK_EXTENSION_LIMIT
    PANIC = c.REDLOCK_PANIC
    IO = c.REDLOCK_IO
    CANCELLED = c.REDLOCK_CANCELLED


class RedlockError(Exception):
    """Base class of every failure the library reports (bad arguments excepted: ``ValueError``).

    ``status`` is the C status code (a :class:`Status` when it is a known one) and ``message``
    the library's explanation. A bare ``RedlockError`` (not a subclass) means the operating
    system refused a resource (``Status.IO``: a worker thread, say), a bug in redlock
    (``Status.PANIC``), or a status this binding does not know yet.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = _known(status)


class NotAcquired(RedlockError):
    """The resource is held by another owner (after every retry, for ``lock()``)."""


class NoQuorum(RedlockError):
    """Too few nodes answered in time (down, hung or erroring) to decide either way."""


class LockLost(RedlockError):
    """The lock is no longer ours on a quorum: it expired, was released, or was taken over."""


class ExtensionLimit(RedlockError):
    """``extend()`` was called more often than ``max_extensions``; the lock is still held."""


class Cancelled(RedlockError):
    """The acquisition was cancelled through its :class:`~redquorum.Cancel` handle before it
    got the lock; nothing of it is left on the nodes (a node that was down keeps its key until
    the TTL at most)."""


_EXCEPTIONS: dict[int, type[RedlockError]] = {
    Status.NOT_ACQUIRED: NotAcquired,
    Status.NO_QUORUM: NoQuorum,
    Status.LOST: LockLost,
    Status.EXTENSION_LIMIT: ExtensionLimit,
    Status.CANCELLED: Cancelled,
}


def _known(status: int) -> int:
    try:
        return Status(status)
    except ValueError:
        return status


def status_name(status: int) -> str:
    """The C name of a status code, e.g. ``"REDLOCK_NOT_ACQUIRED"``."""
    name: bytes | None = lib.redlock_status_str(status)
    return name.decode("utf-8", "replace") if name else f"unknown status {status}"


def check(status: int, err: Any) -> None:
    """Raise the exception for a C status, reading and then freeing the C error object."""
    if status == Status.OK:
        return
    try:
        message = lib.redlock_error_message(err) if err else None
    finally:
        lib.redlock_error_free(err)
    text = message.decode("utf-8", "replace") if message else status_name(status)
    if status == Status.INVALID_ARGUMENT:
        raise ValueError(text)
    raise _EXCEPTIONS.get(_known(status), RedlockError)(text, status)


def call(function: Callable[..., int], *args: Any) -> None:
    """Calls a fallible C function, adding its trailing ``err`` out-parameter; raises as
    :func:`check`."""
    err = c.redlock_error_p()
    check(function(*args, byref(err)), err)
