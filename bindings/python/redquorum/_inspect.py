"""The operator's tools: :meth:`Redlock.inspect` and :meth:`Redlock.force_release` results.

Plain frozen dataclasses read once from the C snapshots (``redlock_inspection``,
``redlock_forced_release``), which are freed before the call returns.
"""

from __future__ import annotations

import enum
from ctypes import byref, c_uint64
from dataclasses import dataclass
from typing import Any

from . import _bindings as c
from ._convert import required_text, text
from ._errors import RedlockError, Status, check
from ._ffi import lib

__all__ = [
    "KeyKind",
    "NodeInspection",
    "Inspection",
    "ReleaseOutcome",
    "NodeRelease",
    "ForcedRelease",
]


class KeyKind(enum.Enum):
    """What a node's lock key holds. Later versions add kinds (for new kinds of lock); a kind
    this binding does not know reads as :attr:`OTHER`."""

    UNKNOWN = "unknown"
    """The node did not answer (see :attr:`NodeInspection.error`)."""
    ABSENT = "absent"
    """No key: the resource is free on this node."""
    TOKEN = "token"
    """A string: the token of a plain, fenced or multi-resource lock."""
    OWNERS = "owners"
    """A hash of a reentrant lock: owners and their hold counts."""
    OTHER = "other"
    """A key of a type no lock uses (``list``, ``set``, …): it blocks the resource all the
    same. :attr:`NodeInspection.key_type` names the Redis type."""


_KINDS = {
    c.REDLOCK_KEY_UNKNOWN: KeyKind.UNKNOWN,
    c.REDLOCK_KEY_ABSENT: KeyKind.ABSENT,
    c.REDLOCK_KEY_TOKEN: KeyKind.TOKEN,
    c.REDLOCK_KEY_OWNERS: KeyKind.OWNERS,
    c.REDLOCK_KEY_OTHER: KeyKind.OTHER,
}


@dataclass(frozen=True)
class NodeInspection:
    """One node's view of a resource, in :attr:`Inspection.nodes`."""

    node: str
    """``host:port`` of the node, never with credentials."""
    error: str | None
    """Why the node could not tell (down, timed out, an error reply such as ``NOPERM``);
    ``None`` when it answered."""
    kind: KeyKind
    """What the lock key holds; :attr:`KeyKind.UNKNOWN` when the node did not answer."""
    key_type: str | None
    """The key's Redis type (``"none"``, ``"string"``, ``"hash"``, ``"list"``, …); ``None``
    when the node did not answer."""
    token: str | None
    """The token, for :attr:`KeyKind.TOKEN`; ``None`` for every other kind."""
    owners: dict[str, int]
    """Reentrant owners and their hold counts, for :attr:`KeyKind.OWNERS`; empty otherwise."""
    ttl: float | None
    """The key's remaining time to live, in seconds; ``None`` when it is absent, never expires
    (see :attr:`persistent`) or the node did not answer."""
    persistent: bool
    """The key exists but has no TTL: nothing frees it but a deletion (Redlock never sets such
    a key; another program did)."""
    fence: int | None
    """The resource's fence counter (``redlock:fence:{resource}``) on this node, if any."""

    @property
    def answered(self) -> bool:
        """Whether the node answered (:attr:`error` is ``None``)."""
        return self.error is None

    @property
    def live(self) -> bool:
        """Whether the node holds a key for the resource that has not expired."""
        present = self.kind not in (KeyKind.UNKNOWN, KeyKind.ABSENT)
        return present and (self.persistent or self.ttl is not None)


@dataclass(frozen=True)
class Inspection:
    """What :meth:`Redlock.inspect` found: every node's view of a resource, and the sum."""

    resource: str
    nodes: list[NodeInspection]
    """One entry per node, in the client's node order."""
    quorum: int
    """Nodes needed for a quorum (N/2 + 1)."""
    held: bool
    """Whether a quorum of nodes hold a live key for the resource: no one can acquire it now."""
    holder: str | None
    """The token (plain, fenced) or owner (reentrant) found on a quorum of nodes; ``None``
    when no single value is."""
    fence: int | None
    """The largest fence counter among the nodes that answered, if any has one."""


class ReleaseOutcome(enum.Enum):
    """What :meth:`Redlock.force_release` did on one node."""

    DELETED = "deleted"
    """The key was deleted and its release announced to waiters."""
    ABSENT = "absent"
    """There was no key."""
    HELD_BY_OTHER = "held_by_other"
    """The key holds another token than the one given, so it was kept."""
    ERROR = "error"
    """The node could not tell (see :attr:`NodeRelease.error`)."""


_OUTCOMES = {
    c.REDLOCK_RELEASE_ERROR: ReleaseOutcome.ERROR,
    c.REDLOCK_RELEASE_DELETED: ReleaseOutcome.DELETED,
    c.REDLOCK_RELEASE_ABSENT: ReleaseOutcome.ABSENT,
    c.REDLOCK_RELEASE_HELD_BY_OTHER: ReleaseOutcome.HELD_BY_OTHER,
}


@dataclass(frozen=True)
class NodeRelease:
    """One node's part of a :class:`ForcedRelease`."""

    node: str
    """``host:port`` of the node, never with credentials."""
    outcome: ReleaseOutcome
    error: str | None
    """Why the node could not tell, for :attr:`ReleaseOutcome.ERROR`; ``None`` otherwise."""


@dataclass(frozen=True)
class ForcedRelease:
    """What :meth:`Redlock.force_release` did, node by node."""

    resource: str
    token: str | None
    """The token the release was limited to, if one was given."""
    nodes: list[NodeRelease]
    """One entry per node, in the client's node order."""
    quorum: int
    """Nodes needed for a quorum (N/2 + 1)."""
    confirmed: int
    """Nodes that confirmed the key is gone (deleted, or absent already)."""
    on_quorum: bool
    """Whether a quorum confirmed the key is gone: nobody holds the lock until a new
    acquisition. False when too few nodes could tell, or when another token holds it."""


def _optional_number(function: Any, *args: Any) -> int | None:
    value = c_uint64()
    return int(value.value) if function(*args, byref(value)) else None


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def inspect(handle: Any, resource: bytes) -> Inspection:
    """Runs ``redlock_client_inspect`` and reads the snapshot (freed before returning)."""
    raw = c.redlock_inspection_p()
    err = c.redlock_error_p()
    check(lib.redlock_client_inspect(handle, resource, byref(raw), byref(err)), err)
    if not raw:
        raise RedlockError("redlock_client_inspect returned OK without a result", Status.PANIC)
    try:
        nodes = []
        for i in range(lib.redlock_inspection_node_count(raw)):
            owners: dict[str, int] = {}
            for j in range(lib.redlock_inspection_node_owner_count(raw, i)):
                holds = c_uint64()
                name = required_text(lib.redlock_inspection_node_owner(raw, i, j, byref(holds)))
                owners[name] = int(holds.value)
            nodes.append(
                NodeInspection(
                    node=required_text(lib.redlock_inspection_node_address(raw, i)),
                    error=text(lib.redlock_inspection_node_error(raw, i)),
                    kind=_KINDS.get(lib.redlock_inspection_node_key_kind(raw, i), KeyKind.OTHER),
                    key_type=text(lib.redlock_inspection_node_key_type(raw, i)),
                    token=text(lib.redlock_inspection_node_token(raw, i)),
                    owners=owners,
                    ttl=_seconds(_optional_number(lib.redlock_inspection_node_ttl_ms, raw, i)),
                    persistent=bool(lib.redlock_inspection_node_persistent(raw, i)),
                    fence=_optional_number(lib.redlock_inspection_node_fence, raw, i),
                )
            )
        return Inspection(
            resource=required_text(lib.redlock_inspection_resource(raw)),
            nodes=nodes,
            quorum=int(lib.redlock_inspection_quorum(raw)),
            held=bool(lib.redlock_inspection_held(raw)),
            holder=text(lib.redlock_inspection_holder(raw)),
            fence=_optional_number(lib.redlock_inspection_fence, raw),
        )
    finally:
        lib.redlock_inspection_free(raw)


def force_release(handle: Any, resource: bytes, token: bytes | None) -> ForcedRelease:
    """Runs ``redlock_client_force_release`` and reads the report (freed before returning)."""
    raw = c.redlock_forced_release_p()
    err = c.redlock_error_p()
    check(lib.redlock_client_force_release(handle, resource, token, byref(raw), byref(err)), err)
    if not raw:
        raise RedlockError(
            "redlock_client_force_release returned OK without a result", Status.PANIC
        )
    try:
        nodes = []
        for i in range(lib.redlock_forced_release_node_count(raw)):
            number = lib.redlock_forced_release_node_outcome(raw, i)
            outcome = _OUTCOMES.get(number, ReleaseOutcome.ERROR)
            error = text(lib.redlock_forced_release_node_error(raw, i))
            if outcome is ReleaseOutcome.ERROR and error is None:
                error = f"outcome {number} unknown to this binding"
            nodes.append(
                NodeRelease(
                    node=required_text(lib.redlock_forced_release_node_address(raw, i)),
                    outcome=outcome,
                    error=error,
                )
            )
        return ForcedRelease(
            resource=required_text(lib.redlock_forced_release_resource(raw)),
            token=text(lib.redlock_forced_release_token(raw)),
            nodes=nodes,
            quorum=int(lib.redlock_forced_release_quorum(raw)),
            confirmed=int(lib.redlock_forced_release_confirmed(raw)),
            on_quorum=bool(lib.redlock_forced_release_on_quorum(raw)),
        )
    finally:
        lib.redlock_forced_release_free(raw)
