"""Who leads an election: :class:`Leader`, read once from a C ``redlock_leader`` snapshot."""

from __future__ import annotations

from ctypes import byref
from dataclasses import dataclass
from typing import Any

from . import _bindings as c
from ._convert import required_text
from ._errors import check
from ._ffi import lib
from ._managed import Managed

__all__ = ["Leader", "read_leader", "leader_of"]


@dataclass(frozen=True)
class Leader:
    """Who leads an election, as a quorum of its nodes told at one moment (a snapshot: it does
    not change, and :attr:`ttl` does not count down)."""

    identity: str
    """The leader's identity, as its candidate named itself."""
    term: int
    """The leader's term: the fencing token of its leadership, greater than every earlier
    leader's."""
    since: float
    """When the term began, in seconds since the Unix epoch (as :func:`time.time` counts), by
    the clock of the nodes that recorded it (best effort: it does not affect exclusion)."""
    transitions: int
    """Terms begun in the election so far, this one included (best effort: a node restarted
    without persistence counts again from zero)."""
    ttl: float
    """Seconds until the leadership expires on a quorum of nodes, unless it is extended."""


def read_leader(raw: Any) -> Leader | None:
    """The :class:`Leader` a C ``redlock_leader`` describes (not freed here); None for NULL."""
    if not raw:
        return None
    return Leader(
        identity=required_text(lib.redlock_leader_identity(raw)),
        term=int(lib.redlock_leader_term(raw)),
        since=int(lib.redlock_leader_since_unix_ms(raw)) / 1000,
        transitions=int(lib.redlock_leader_transitions(raw)),
        ttl=int(lib.redlock_leader_ttl_ms(raw)) / 1000,
    )


def leader_of(client: Managed, name: bytes) -> Leader | None:
    """Who leads the election ``name`` now, read on the nodes through the client."""
    raw = c.redlock_leader_p()
    err = c.redlock_error_p()
    pointer = client._borrow()
    try:
        status = lib.redlock_client_leader(pointer, name, byref(raw), byref(err))
    finally:
        client._give_back()
    check(status, err)
    try:
        return read_leader(raw)
    finally:
        lib.redlock_leader_free(raw)
