"""Redlock distributed locks over N independent Redis masters (Python binding of libredlock).

::

    import redlock

    with redlock.Redlock(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
                          "redis://127.0.0.1:7002"]) as rl:
        with rl.lock("orders:42", ttl_ms=10_000) as lock:  # NotAcquired / NoQuorum on failure
            ...                                               # lock.validity_ms ms are ours
            lock.extend(10_000)

The work is done by the Rust library ``libredlock`` through its C ABI, so Python, Rust, C and Go
programs contend on the same keys with the same bytes. The library is found through the
``REDLOCK_LIBRARY`` environment variable, then beside this package, then in the repository's
``target/release`` and ``target/debug``. Calls that wait on the network release the GIL.
"""

from __future__ import annotations

from ._client import Lock, NodeStatus, Redlock, default_options
from ._errors import ExtensionLimit, LockLost, NoQuorum, NotAcquired, RedlockError, Status
from ._ffi import lib as _lib

__version__ = "0.1.0"

__all__ = [
    "Redlock",
    "Lock",
    "NodeStatus",
    "RedlockError",
    "NotAcquired",
    "NoQuorum",
    "LockLost",
    "ExtensionLimit",
    "Status",
    "default_options",
    "library_version",
]


def library_version() -> str:
    """The version of the loaded libredlock (``REDLOCK_VERSION``)."""
    version: bytes = _lib.redlock_version()
    return version.decode("ascii")
