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
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, Mapping

from ._version import __version__

# redlock_status: the numbers are part of the ABI and are never reused.
OK = 0
NOT_ACQUIRED = 1
NO_QUORUM = 2
LOST = 3
INVALID_ARGUMENT = 4
EXTENSION_LIMIT = 5
PANIC = 6
IO = 7
CANCELLED = 8

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


# redlock_lost_callback: (user, resource); runs on the extender thread (ctypes takes the GIL).
LostCallback = CFUNCTYPE(None, c_void_p, c_char_p)

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


def _source_checkout(package: Path) -> Path | None:
    """The repository root when this package is ``bindings/python/redlock_rs`` of a checkout."""
    root = package.parent.parent.parent
    if (package.parent / "pyproject.toml").is_file() and (root / "Cargo.toml").is_file():
        return root
    return None


def candidate_paths() -> list[tuple[str, Path]]:
    """Where the library is looked for after ``REDLOCK_LIBRARY``, in order, each with why.

    An installed package carries its own copy; only a source checkout (the tests run from one)
    falls back to the repository's release build, never to whatever else lies around.
    """
    name = _library_file_name()
    here = Path(__file__).resolve().parent
    candidates = [("inside the package", here / name)]
    root = _source_checkout(here)
    if root is not None:
        candidates.append(("source checkout's release build", root / "target" / "release" / name))
    return candidates


def _load() -> ctypes.CDLL:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        # An explicit choice that fails is an error: silently loading some other build instead
        # would hide exactly the mismatch the variable was set to avoid.
        try:
            return ctypes.CDLL(explicit)
        except OSError as exc:
            raise OSError(f"cannot load libredlock from {ENV_VAR}={explicit!r}: {exc}") from exc
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
        "cannot find libredlock; {} is not set and these paths were tried:\n{}\n"
        "reinstall redlock-rs (pip builds the library with cargo and bundles it), run "
        "`cargo build --release` in a source checkout, or set {} to the library's path".format(
            ENV_VAR, "\n".join(tried), ENV_VAR
        )
    )


def _check_version(lib: ctypes.CDLL) -> None:
    """Refuse a library of another version: the struct layouts and symbols are per version."""
    try:
        function = lib.redlock_version
    except AttributeError:
        raise OSError(f"{lib._name} does not export redlock_version: it is not libredlock") from None
    function.argtypes = []
    function.restype = c_char_p
    raw = function()
    found = raw.decode("ascii", "replace") if isinstance(raw, bytes) else repr(raw)
    if found != __version__:
        raise OSError(
            f"{lib._name} is libredlock {found}, but redlock_rs {__version__} needs libredlock "
            f"{__version__}: reinstall redlock-rs, rebuild the checkout with `cargo build "
            f"--release`, or point {ENV_VAR} at a matching build"
        )


def _bind(lib: ctypes.CDLL, signatures: Mapping[str, tuple[Any, Any]]) -> None:
    """Declares each function's argument and result types; a library that lacks any of them is
    refused by name (it is another version than this binding)."""
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
        "redlock_lock_on_lost": ([LockPtr, LostCallback, c_void_p, POINTER(ErrorPtr)], Status),
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
    _bind(lib, signatures)


# --- The acquisition request and the cancel handle (redlock_request_*, redlock_cancel_*). ---
# Kept apart from the client options above: both evolve independently.


class Cancel(Structure):
    """Opaque ``redlock_cancel``."""


class Request(Structure):
    """Opaque ``redlock_request``."""


CancelPtr = POINTER(Cancel)
RequestPtr = POINTER(Request)


def _declare_requests(lib: ctypes.CDLL) -> None:
    err = POINTER(ErrorPtr)
    signatures = {
        "redlock_cancel_new": ([POINTER(CancelPtr), err], Status),
        "redlock_cancel_trigger": ([CancelPtr], None),
        "redlock_cancel_is_triggered": ([CancelPtr], c_bool),
        "redlock_cancel_free": ([CancelPtr], None),
        "redlock_request_new": ([c_char_p, c_uint64, POINTER(RequestPtr), err], Status),
        "redlock_request_new_many": (
            [POINTER(c_char_p), c_size_t, c_uint64, POINTER(RequestPtr), err],
            Status,
        ),
        "redlock_request_set_fenced": ([RequestPtr, err], Status),
        "redlock_request_set_reentrant": ([RequestPtr, c_char_p, err], Status),
        "redlock_request_set_retries": ([RequestPtr, c_uint32, err], Status),
        "redlock_request_set_retry_delay": ([RequestPtr, c_uint64, c_uint64, err], Status),
        "redlock_request_set_wait": ([RequestPtr, c_uint64, err], Status),
        "redlock_request_set_notifications": ([RequestPtr, c_bool, err], Status),
        "redlock_request_set_auto_extend": (
            [RequestPtr, c_double, c_uint64, c_uint32, err],
            Status,
        ),
        "redlock_request_set_cancel": ([RequestPtr, CancelPtr, err], Status),
        "redlock_request_free": ([RequestPtr], None),
        "redlock_client_acquire": (
            [ClientPtr, RequestPtr, POINTER(LockPtr), err],
            Status,
        ),
    }
    _bind(lib, signatures)


# --- Inspection and forced release (redlock_client_inspect, redlock_client_force_release). ---
# The operator's tools; results are opaque snapshots read by node index.

# redlock_key_kind: later versions append kinds; an unknown number reads as "other".
KEY_UNKNOWN = 0
KEY_ABSENT = 1
KEY_TOKEN = 2
KEY_OWNERS = 3
KEY_OTHER = 4

# redlock_release_outcome
RELEASE_ERROR = 0
RELEASE_DELETED = 1
RELEASE_ABSENT = 2
RELEASE_HELD_BY_OTHER = 3


class Inspection(Structure):
    """Opaque ``redlock_inspection``."""


class ForcedRelease(Structure):
    """Opaque ``redlock_forced_release``."""


InspectionPtr = POINTER(Inspection)
ForcedReleasePtr = POINTER(ForcedRelease)


def _declare_inspection(lib: ctypes.CDLL) -> None:
    err = POINTER(ErrorPtr)
    u64 = POINTER(c_uint64)
    signatures = {
        "redlock_client_inspect": ([ClientPtr, c_char_p, POINTER(InspectionPtr), err], Status),
        "redlock_inspection_free": ([InspectionPtr], None),
        "redlock_inspection_resource": ([InspectionPtr], c_char_p),
        "redlock_inspection_held": ([InspectionPtr], c_bool),
        "redlock_inspection_holder": ([InspectionPtr], c_char_p),
        "redlock_inspection_fence": ([InspectionPtr, u64], c_bool),
        "redlock_inspection_quorum": ([InspectionPtr], c_size_t),
        "redlock_inspection_node_count": ([InspectionPtr], c_size_t),
        "redlock_inspection_node_address": ([InspectionPtr, c_size_t], c_char_p),
        "redlock_inspection_node_error": ([InspectionPtr, c_size_t], c_char_p),
        "redlock_inspection_node_key_kind": ([InspectionPtr, c_size_t], c_int),
        "redlock_inspection_node_key_type": ([InspectionPtr, c_size_t], c_char_p),
        "redlock_inspection_node_token": ([InspectionPtr, c_size_t], c_char_p),
        "redlock_inspection_node_owner_count": ([InspectionPtr, c_size_t], c_size_t),
        "redlock_inspection_node_owner": ([InspectionPtr, c_size_t, c_size_t, u64], c_char_p),
        "redlock_inspection_node_ttl_ms": ([InspectionPtr, c_size_t, u64], c_bool),
        "redlock_inspection_node_persistent": ([InspectionPtr, c_size_t], c_bool),
        "redlock_inspection_node_fence": ([InspectionPtr, c_size_t, u64], c_bool),
        "redlock_client_force_release": (
            [ClientPtr, c_char_p, c_char_p, POINTER(ForcedReleasePtr), err],
            Status,
        ),
        "redlock_forced_release_free": ([ForcedReleasePtr], None),
        "redlock_forced_release_resource": ([ForcedReleasePtr], c_char_p),
        "redlock_forced_release_token": ([ForcedReleasePtr], c_char_p),
        "redlock_forced_release_confirmed": ([ForcedReleasePtr], c_size_t),
        "redlock_forced_release_on_quorum": ([ForcedReleasePtr], c_bool),
        "redlock_forced_release_quorum": ([ForcedReleasePtr], c_size_t),
        "redlock_forced_release_node_count": ([ForcedReleasePtr], c_size_t),
        "redlock_forced_release_node_address": ([ForcedReleasePtr, c_size_t], c_char_p),
        "redlock_forced_release_node_outcome": ([ForcedReleasePtr, c_size_t], c_int),
        "redlock_forced_release_node_error": ([ForcedReleasePtr, c_size_t], c_char_p),
    }
    _bind(lib, signatures)


def _declare_rwsem(lib: ctypes.CDLL) -> None:
    """Read-write locks and semaphores (issue 17)."""
    err = POINTER(ErrorPtr)
    signatures = {
        "redlock_request_set_read": ([RequestPtr, err], Status),
        "redlock_request_set_write": ([RequestPtr, err], Status),
        "redlock_request_set_semaphore": ([RequestPtr, c_uint32, err], Status),
        "redlock_lock_permit": ([LockPtr, POINTER(c_uint32), err], Status),
    }
    _bind(lib, signatures)


def _declare_guards(lib: ctypes.CDLL) -> None:
    """The clock guard's and server probe's settings and node status fields (issue 18)."""
    err = POINTER(ErrorPtr)
    status = NodeStatusPtr
    signatures = {
        "redlock_options_set_clock_guard": ([OptionsPtr, c_bool, err], Status),
        "redlock_options_set_clock_jump_threshold_ms": ([OptionsPtr, c_uint64, err], Status),
        "redlock_options_set_clock_quarantine_ms": ([OptionsPtr, c_uint64, err], Status),
        "redlock_options_set_strict_servers": ([OptionsPtr, c_bool, err], Status),
        "redlock_options_clock_guard": ([OptionsPtr], c_bool),
        "redlock_options_clock_jump_threshold_ms": ([OptionsPtr], c_uint64),
        "redlock_options_clock_quarantine_ms": ([OptionsPtr], c_uint64),
        "redlock_options_strict_servers": ([OptionsPtr], c_bool),
        "redlock_node_status_server_version": ([status], c_char_p),
        "redlock_node_status_persistence": ([status], c_char_p),
        "redlock_node_status_warning_count": ([status], c_size_t),
        "redlock_node_status_warning": ([status, c_size_t], c_char_p),
        "redlock_node_status_clock_offset_ms": ([status, POINTER(c_int64)], c_bool),
        "redlock_node_status_quarantine_remaining_ms": ([status], c_uint64),
        "redlock_node_status_quarantine_reason": ([status], c_char_p),
    }
    _bind(lib, signatures)


lib = _load()
_check_version(lib)
_declare(lib)
_declare_requests(lib)
_declare_inspection(lib)
_declare_rwsem(lib)
_declare_guards(lib)

# The two cancel functions that read a handle another thread may free, bound so that they keep
# the GIL (PyDLL) for their few instructions (an atomic load or store and a write to a pipe; they
# never block): the thread that frees a handle clears the Python reference first, under the GIL,
# so it cannot free the handle in the middle of one of these calls (see _request._CancelHandle).
gil_lib = ctypes.PyDLL(lib._name, handle=lib._handle)
_bind(
    gil_lib,
    {
        "redlock_cancel_trigger": ([CancelPtr], None),
        "redlock_cancel_is_triggered": ([CancelPtr], c_bool),
    },
)
