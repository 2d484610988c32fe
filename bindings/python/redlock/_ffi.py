"""Loads ``libredlock`` and declares the C ABI of ``include/redlock.h`` (see docs/c-abi.md).

Everything here mirrors the header one to one; the Pythonic layer lives in ``_client.py``.
The library is loaded with :class:`ctypes.CDLL`, which releases the GIL for the length of every
foreign call, so a thread blocked in ``redlock_client_lock`` never stalls the others.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_size_t,
    c_uint32,
    c_uint64,
)
from pathlib import Path

# redlock_status: the numbers are part of the ABI and are never reused.
OK = 0
NOT_ACQUIRED = 1
NO_QUORUM = 2
LOST = 3
INVALID_ARGUMENT = 4
EXTENSION_LIMIT = 5
PANIC = 6
IO = 7

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
# The TTL range is part of the contract in docs/c-abi.md (3 ms ..= 10 years). The lower end also
# depends on drift, so only the upper end is checked here; C reports the rest.
MAX_TTL_MS = 315_360_000_000


class Options(Structure):
    """Opaque ``redlock_options`` (client settings, built with setters)."""


class LockOptions(Structure):
    """Opaque ``redlock_lock_options``."""


class NodeStatus(Structure):
    """Opaque ``redlock_node_status`` (a snapshot read with accessors)."""


class Client(Structure):
    """Opaque ``redlock_client``."""


class Lock(Structure):
    """Opaque ``redlock_lock``."""


class Error(Structure):
    """Opaque ``redlock_error``."""


OptionsPtr = POINTER(Options)
LockOptionsPtr = POINTER(LockOptions)
NodeStatusPtr = POINTER(NodeStatus)
ClientPtr = POINTER(Client)
LockPtr = POINTER(Lock)
ErrorPtr = POINTER(Error)
Status = c_int

ENV_VAR = "REDLOCK_LIBRARY"


def _library_file_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    if sys.platform == "win32":
        return "redlock.dll"
    return "libredlock.so"


def _repository_root(start: Path) -> Path | None:
    for directory in start.parents:
        if (directory / "Cargo.toml").is_file():
            return directory
    return None


def candidate_paths() -> list[tuple[str, Path]]:
    """Where the library is looked for, in order, each with the reason it is a candidate."""
    name = _library_file_name()
    here = Path(__file__).resolve().parent
    candidates = [("beside the package", here / name)]
    root = _repository_root(here)
    if root is not None:
        candidates.append(("repository release build", root / "target" / "release" / name))
        candidates.append(("repository debug build", root / "target" / "debug" / name))
    return candidates


def _load() -> ctypes.CDLL:
    hint = f"run `cargo build --release` in the repository, or set {ENV_VAR} to the library's path"
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        # An explicit choice that fails is an error: silently loading some other build instead
        # would hide exactly the mismatch the variable was set to avoid.
        try:
            return ctypes.CDLL(explicit)
        except OSError as exc:
            raise OSError(
                f"cannot load libredlock from {ENV_VAR}={explicit!r}: {exc}; {hint}"
            ) from exc
    tried = []
    for reason, path in candidate_paths():
        if not path.is_file():
            tried.append(f"  {path} ({reason}): not found")
            continue
        try:
            return ctypes.CDLL(str(path))
        except OSError as exc:
            tried.append(f"  {path} ({reason}): {exc}")
    raise OSError(
        "cannot find libredlock; {} is not set and these paths were tried:\n{}\n{}".format(
            ENV_VAR, "\n".join(tried), hint
        )
    )


def _declare(lib: ctypes.CDLL) -> None:
    signatures = {
        "redlock_options_new": ([POINTER(OptionsPtr), POINTER(ErrorPtr)], Status),
        "redlock_options_free": ([OptionsPtr], None),
        "redlock_options_set_retry_count": ([OptionsPtr, c_uint32, POINTER(ErrorPtr)], Status),
        "redlock_options_set_retry_delay_ms": ([OptionsPtr, c_uint64, POINTER(ErrorPtr)], Status),
        "redlock_options_set_retry_jitter_ms": ([OptionsPtr, c_uint64, POINTER(ErrorPtr)], Status),
        "redlock_options_set_drift_factor": ([OptionsPtr, c_double, POINTER(ErrorPtr)], Status),
        "redlock_options_set_node_timeout_ms": ([OptionsPtr, c_uint64, POINTER(ErrorPtr)], Status),
        "redlock_options_set_max_extensions": ([OptionsPtr, c_uint32, POINTER(ErrorPtr)], Status),
        "redlock_options_set_restart_grace_ms": (
            [OptionsPtr, c_uint64, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_options_set_tls_ca_file": ([OptionsPtr, c_char_p, POINTER(ErrorPtr)], Status),
        "redlock_options_set_tls_client_cert_file": (
            [OptionsPtr, c_char_p, c_char_p, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_options_retry_count": ([OptionsPtr], c_uint32),
        "redlock_options_retry_delay_ms": ([OptionsPtr], c_uint64),
        "redlock_options_retry_jitter_ms": ([OptionsPtr], c_uint64),
        "redlock_options_drift_factor": ([OptionsPtr], c_double),
        "redlock_options_node_timeout_ms": ([OptionsPtr], c_uint64),
        "redlock_options_max_extensions": ([OptionsPtr], c_uint32),
        "redlock_options_restart_grace_ms": ([OptionsPtr], c_uint64),
        "redlock_client_new": (
            [POINTER(c_char_p), c_size_t, OptionsPtr, POINTER(ClientPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_free": ([ClientPtr], None),
        "redlock_client_node_count": ([ClientPtr], c_size_t),
        "redlock_client_node_status": (
            [ClientPtr, c_size_t, POINTER(NodeStatusPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_node_status_free": ([NodeStatusPtr], None),
        "redlock_node_status_address": ([NodeStatusPtr], c_char_p),
        "redlock_node_status_connected": ([NodeStatusPtr], c_bool),
        "redlock_node_status_connects": ([NodeStatusPtr], c_uint64),
        "redlock_node_status_restarts": ([NodeStatusPtr], c_uint64),
        "redlock_node_status_uptime_ms": ([NodeStatusPtr], c_uint64),
        "redlock_node_status_grace_remaining_ms": ([NodeStatusPtr], c_uint64),
        "redlock_node_status_run_id": ([NodeStatusPtr], c_char_p),
        "redlock_client_lock": (
            [ClientPtr, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_try_lock": (
            [ClientPtr, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_lock_fenced": (
            [ClientPtr, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_try_lock_fenced": (
            [ClientPtr, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_lock_reentrant": (
            [ClientPtr, c_char_p, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_try_lock_reentrant": (
            [ClientPtr, c_char_p, c_char_p, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_lock_many": (
            [ClientPtr, POINTER(c_char_p), c_size_t, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_try_lock_many": (
            [ClientPtr, POINTER(c_char_p), c_size_t, c_uint64, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_fence": ([LockPtr, POINTER(c_uint64), POINTER(ErrorPtr)], Status),
        "redlock_lock_hold_count": ([LockPtr, POINTER(c_uint64), POINTER(ErrorPtr)], Status),
        "redlock_lock_options_new": ([POINTER(LockOptionsPtr), POINTER(ErrorPtr)], Status),
        "redlock_lock_options_free": ([LockOptionsPtr], None),
        "redlock_lock_options_set_auto_extend": (
            [LockOptionsPtr, c_bool, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_options_set_extend_fraction": (
            [LockOptionsPtr, c_double, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_options_set_max_hold_ms": (
            [LockOptionsPtr, c_uint64, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_options_set_wait_timeout_ms": (
            [LockOptionsPtr, c_uint64, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_options_set_notifications": (
            [LockOptionsPtr, c_bool, POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_client_lock_with": (
            [ClientPtr, c_char_p, c_uint64, LockOptionsPtr, POINTER(LockPtr), POINTER(ErrorPtr)],
            Status,
        ),
        "redlock_lock_is_held": ([LockPtr], c_bool),
        "redlock_lock_is_lost": ([LockPtr], c_bool),
        "redlock_lock_extend": ([LockPtr, c_uint64, POINTER(ErrorPtr)], Status),
        "redlock_lock_release": ([LockPtr, POINTER(ErrorPtr)], Status),
        "redlock_lock_validity_ms": ([LockPtr], c_uint64),
        "redlock_lock_resource": ([LockPtr], c_char_p),
        "redlock_lock_token": ([LockPtr], c_char_p),
        "redlock_lock_free": ([LockPtr], None),
        "redlock_error_status": ([ErrorPtr], Status),
        "redlock_error_message": ([ErrorPtr], c_char_p),
        "redlock_error_free": ([ErrorPtr], None),
        "redlock_status_str": ([c_int], c_char_p),
        "redlock_version": ([], c_char_p),
    }
    missing = []
    for name, (argtypes, restype) in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        function.argtypes = argtypes
        function.restype = restype
    if missing:
        raise OSError(
            "{} does not export {}; it is older or newer than this binding".format(
                lib._name, ", ".join(missing)
            )
        )


lib = _load()
_declare(lib)
