"""What a client's worker saw of each node: :class:`NodeStatus`, read from the C
``redlock_node_status`` snapshots (freed before the call returns)."""

from __future__ import annotations

from ctypes import byref, c_int64
from dataclasses import dataclass
from typing import Any

from . import _bindings as c
from ._convert import UINT64_MAX, required_text, text
from ._errors import check
from ._ffi import lib

__all__ = ["NodeStatus", "node_statuses"]


@dataclass(frozen=True)
class NodeStatus:
    """What the client's worker last saw of one node (see :meth:`Redlock.node_status`)."""

    address: str
    """``host:port`` of the node, never with credentials."""
    connected: bool
    connects: int
    """Connections established so far."""
    restarts: int
    """Restarts seen: reconnects that found a different server ``run_id``."""
    run_id: str | None
    """The server's ``run_id``; ``None`` before the first connect or when ``INFO`` is denied."""
    uptime: float | None
    """The server's uptime in seconds (whole seconds when reported, plus the time since);
    ``None`` before the first connect or when ``INFO`` is denied."""
    grace_remaining: float
    """With ``restart_grace``: how many seconds longer the node does not count toward
    acquires."""
    server_version: str | None = None
    """The server's own version at the last connect (``valkey_version`` on Valkey, whose
    ``redis_version`` is the Redis it matches); ``None`` when unknown."""
    server_name: str | None = None
    """Which server it is, by what it says of itself: ``"redis"``, ``"valkey"``, or another
    server's ``server_name``; ``None`` when unknown."""
    persistence: str | None = None
    """The node's persistence as it reported it (e.g. ``"no AOF, no RDB snapshots"``);
    ``None`` when unknown. Without persistence a restart forgets locks: consider
    ``restart_grace``."""
    warnings: tuple[str, ...] = ()
    """What the server probe and the clock guard found worth attention (replicas of a master,
    an evicting ``maxmemory-policy``, a clock that stepped back, a command the ACL denies)."""
    clock_offset: float | None = None
    """The node's clock minus ours at the last ``TIME`` sample, in seconds; ``None`` when the
    guard is off, ``TIME`` is denied or no acquire has sampled it yet."""
    quarantine_remaining: float = 0.0
    """How many seconds longer the node is out of acquire quorums because its clock jumped
    forward."""
    quarantine_reason: str | None = None
    """Why the node is in clock quarantine, while it is."""
    master: str | None = None
    """For a Sentinel-managed node (``redis+sentinel://``): the master (``host:port``) the
    sentinels named at the last connect; for a Redis Cluster (``redis+cluster://``), its masters
    (``host:port,host:port,...``); ``None`` for a standalone node."""
    failovers: int = 0
    """For a Sentinel-managed node or a Redis Cluster: changes of master seen (each starts a
    restart grace when ``restart_grace`` is set)."""
    errors: int = 0
    """Requests that failed on this node: error replies, timeouts, dropped connections, not
    sent while it was down."""


def node_statuses(client: Any) -> list[NodeStatus]:
    """Every node's status, in the client's node order, from the C ``client``."""
    result = []
    for index in range(lib.redlock_client_node_count(client)):
        raw = c.redlock_node_status_p()
        err = c.redlock_error_p()
        check(lib.redlock_client_node_status(client, index, byref(raw), byref(err)), err)
        try:
            result.append(_read(raw))
        finally:
            lib.redlock_node_status_free(raw)
    return result


def _read(raw: Any) -> NodeStatus:
    uptime = lib.redlock_node_status_uptime_ms(raw)
    offset = c_int64()
    offset_known = lib.redlock_node_status_clock_offset_ms(raw, byref(offset))
    return NodeStatus(
        address=required_text(lib.redlock_node_status_address(raw)),
        connected=bool(lib.redlock_node_status_connected(raw)),
        connects=int(lib.redlock_node_status_connects(raw)),
        restarts=int(lib.redlock_node_status_restarts(raw)),
        run_id=text(lib.redlock_node_status_run_id(raw)) or None,
        uptime=None if uptime == UINT64_MAX else int(uptime) / 1000,
        grace_remaining=int(lib.redlock_node_status_grace_remaining_ms(raw)) / 1000,
        server_version=text(lib.redlock_node_status_server_version(raw)),
        server_name=text(lib.redlock_node_status_server_name(raw)),
        persistence=text(lib.redlock_node_status_persistence(raw)),
        warnings=tuple(
            text(lib.redlock_node_status_warning(raw, i)) or ""
            for i in range(lib.redlock_node_status_warning_count(raw))
        ),
        clock_offset=int(offset.value) / 1000 if offset_known else None,
        quarantine_remaining=int(lib.redlock_node_status_quarantine_remaining_ms(raw)) / 1000,
        quarantine_reason=text(lib.redlock_node_status_quarantine_reason(raw)),
        master=text(lib.redlock_node_status_master(raw)),
        failovers=int(lib.redlock_node_status_failovers(raw)),
        errors=int(lib.redlock_node_status_errors(raw)),
    )
