"""A client's events as :mod:`logging` records of the ``redquorum`` logger, through a C
``redlock_event_listener``.

The library calls the listener on a dispatcher thread of the client's own (never on the thread
that locked, never on the extender), so the handlers run there, one record at a time, in the
order the events happened; a handler too slow for the rate of events costs dropped events
(:attr:`Stats.events_dropped`), never a stalled lock.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import weakref
from ctypes import byref, c_uint64
from typing import Any

from . import _bindings as c
from ._errors import check
from ._ffi import lib
from ._managed import Managed

__all__ = ["logger", "EventListener", "would_log", "WARNING_EVENTS"]

logger = logging.getLogger("redquorum")
"""The package's logger; silent (a :class:`logging.NullHandler`) until the application
configures logging."""
logger.addHandler(logging.NullHandler())

WARNING_EVENTS = frozenset(
    {"lost", "node_disconnected", "node_restarted", "node_quarantined", "server_warning"}
)
"""Events logged at ``WARNING``; the others (acquired, refused, released, ...) at ``INFO``."""

# Listeners still open: closed at interpreter exit, before the dispatcher threads could call
# into a Python that is going away.
_open: weakref.WeakSet[EventListener] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for listener in list(_open):
        listener.close()


def would_log() -> bool:
    """Whether a ``redquorum`` record at ``INFO`` would reach a handler other than a
    :class:`logging.NullHandler` now: the level lets it through and some handler up the
    hierarchy (as far as propagation goes) is a real one."""
    if not logger.isEnabledFor(logging.INFO):
        return False
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _log(event: Any) -> None:
    """Turns one C event into a record of :data:`logger` (on the dispatcher thread)."""
    name = _text(lib.redlock_event_name(event)) or "unknown"
    level = logging.WARNING if name in WARNING_EVENTS else logging.INFO
    if not logger.isEnabledFor(level):
        return
    millis = c_uint64()
    duration = millis.value / 1000 if lib.redlock_event_duration_ms(event, byref(millis)) else None
    resource = _text(lib.redlock_event_resource(event))
    lock_kind = _text(lib.redlock_event_lock_kind(event))
    node = _text(lib.redlock_event_node(event))
    reason = _text(lib.redlock_event_reason(event))
    about = f"{resource!r} ({lock_kind})" if resource is not None else f"node {node}"
    message = f"redlock: {name} {about}"
    if duration is not None:
        message += f" after {duration:.3f} s"
    if reason is not None:
        message += f": {reason}"
    record = logger.makeRecord(
        logger.name,
        level,
        "(redlock)",
        0,
        message,
        (),
        None,
        extra={
            "redlock_event": name,
            "redlock_resource": resource,
            "redlock_lock_kind": lock_kind,
            "redlock_node": node,
            "redlock_reason": reason,
            "redlock_duration": duration,
        },
    )
    # The event's own time, not the dispatcher's.
    created = lib.redlock_event_unix_ms(event) / 1000
    record.created = created
    record.msecs = (created - int(created)) * 1000
    logger.handle(record)


def _deliver(_user: int | None, event: Any) -> None:
    try:
        _log(event)
    except Exception:  # a handler's or formatter's bug must not end up in ctypes' stderr dump
        logging.getLogger("redquorum.events").exception("logging a redlock event failed")


# One C function for every listener: it holds no client, so a listener keeps nothing alive.
_CALLBACK = c.redlock_event_callback(_deliver)


class EventListener(Managed):
    """The ``redquorum`` logger's listener on one client; closing it removes it (waiting for a
    record being handled on the dispatcher thread, unless closed from that very handler)."""

    _what = "event listener"

    def __init__(self, client: Any) -> None:
        super().__init__()
        out = c.redlock_event_listener_p()
        err = c.redlock_error_p()
        check(lib.redlock_client_on_event(client, _CALLBACK, None, byref(out), byref(err)), err)
        self._ptr = out
        _open.add(self)

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_event_listener_free(pointer)
