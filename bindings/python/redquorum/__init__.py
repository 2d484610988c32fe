"""Redlock distributed locks over N independent Redis masters (Python binding of libredlock).

::

    import redquorum

    with redquorum.Redlock(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
                             "redis://127.0.0.1:7002"]) as rl:
        with rl.lock("orders:42", ttl=10.0) as lock:  # NotAcquired / NoQuorum on failure
            ...                                          # lock.validity seconds are ours
            lock.extend(ttl=10.0)

The work is done by the Rust library ``libredlock`` through its C ABI, so Python, Rust, C and Go
programs contend on the same keys with the same bytes. The wheel carries its own copy of the
library; the ``REDLOCK_LIBRARY`` environment variable (a file path) overrides it, and a source
checkout without one uses the repository's ``target/release``. The library's version must equal
the package's. Calls that wait on the network release the GIL.
"""

from __future__ import annotations

from ._cancel import Cancel
from ._client import Redlock
from ._convert import Seconds
from ._election import Election
from ._errors import (
    Cancelled,
    ExtensionLimit,
    LockLost,
    NoQuorum,
    NotAcquired,
    RedlockError,
    Status,
)
from ._ffi import lib as _lib
from ._inspect import (
    ForcedRelease,
    Inspection,
    KeyKind,
    NodeInspection,
    NodeRelease,
    ReleaseOutcome,
)
from ._leader import Leader
from ._leadership import Leadership
from ._lock import Lock
from ._node import NodeStatus
from ._observer import Observer
from ._options import default_options
from ._request import AutoExtend, Request
from ._stats import Stats
from ._version import __version__

__all__ = [
    "Redlock",
    "Lock",
    "Request",
    "AutoExtend",
    "Cancel",
    "Election",
    "Leadership",
    "Leader",
    "Observer",
    "NodeStatus",
    "Stats",
    "Inspection",
    "NodeInspection",
    "KeyKind",
    "ForcedRelease",
    "NodeRelease",
    "ReleaseOutcome",
    "Seconds",
    "RedlockError",
    "NotAcquired",
    "NoQuorum",
    "LockLost",
    "ExtensionLimit",
    "Cancelled",
    "Status",
    "default_options",
    "library_version",
    "__version__",
]


def library_version() -> str:
    """The version of the loaded libredlock (``REDLOCK_VERSION``)."""
    version: bytes = _lib.redlock_version()
    return version.decode("ascii")
