"""A client's counters: :class:`Stats`, read from a C ``redlock_stats`` snapshot."""

from __future__ import annotations

from ctypes import byref
from dataclasses import dataclass
from typing import Any

from . import _bindings as c
from ._errors import check
from ._ffi import lib

__all__ = ["Stats", "OUTCOMES", "LOST_REASONS", "read_stats"]

OUTCOMES = ("acquired", "refused", "no_quorum", "cancelled", "error")
"""How acquisitions end, as counted."""

LOST_REASONS = ("refused", "expired", "suspended")
"""Why held locks were lost, as counted."""


@dataclass(frozen=True)
class Stats:
    """A snapshot of a client's counters (:meth:`Redlock.stats`), counted since the client was
    created whether anyone listens to its events or not. Resource names are never part of it.
    """

    acquisitions: dict[str, int]
    """Acquisitions by outcome: ``acquired``, ``refused``, ``no_quorum``, ``cancelled``,
    ``error`` (every kind of lock)."""
    lost: dict[str, int]
    """Held locks found lost, by reason: ``refused``, ``expired``, ``suspended``."""
    locks_held: int
    """Locks held now."""
    waiters: int
    """Acquisitions waiting now for a resource to be released."""
    extensions: int
    """Extensions that succeeded."""
    extensions_failed: int
    """Extensions that failed without losing the lock (retried while validity remained)."""
    events_dropped: int
    """Events dropped because the listeners' queue was full."""
    prometheus: str
    """The snapshot in the Prometheus text format (0.0.4), histograms and per-node metrics
    included: serve it on ``/metrics`` as it is."""


def read_stats(client: Any) -> Stats:
    """Takes a snapshot of the borrowed C client and reads it whole."""
    out = c.redlock_stats_p()
    err = c.redlock_error_p()
    check(lib.redlock_client_stats(client, byref(out), byref(err)), err)
    try:
        text = lib.redlock_stats_prometheus(out)
        return Stats(
            acquisitions={o: lib.redlock_stats_acquisitions(out, o.encode()) for o in OUTCOMES},
            lost={r: lib.redlock_stats_lost(out, r.encode()) for r in LOST_REASONS},
            locks_held=lib.redlock_stats_locks_held(out),
            waiters=lib.redlock_stats_waiters(out),
            extensions=lib.redlock_stats_extensions(out),
            extensions_failed=lib.redlock_stats_extensions_failed(out),
            events_dropped=lib.redlock_stats_events_dropped(out),
            prometheus=text.decode() if text else "",
        )
    finally:
        lib.redlock_stats_free(out)
