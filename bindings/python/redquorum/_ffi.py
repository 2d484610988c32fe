"""Loads ``libredlock`` and binds its C ABI (``include/redlock.h``; the contract: docs/c-abi.md).

The declarations are generated from the header into ``_bindings`` (scripts/gen-python-ffi);
this module finds the library, refuses one of another version, and gives every function its
argument and result types. :class:`ctypes.CDLL` releases the GIL for the length of every foreign
call, so a thread blocked in an acquisition never stalls the others.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping
from ctypes import c_char_p
from pathlib import Path
from typing import Any

from . import _bindings
from ._version import __version__

ENV_VAR = "REDLOCK_LIBRARY"


def _library_file_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    if sys.platform == "win32":
        return "redlock.dll"
    return "libredlock.so"


def _source_checkout(package: Path) -> Path | None:
    """The repository root when this package is ``bindings/python/redquorum`` of a checkout."""
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
        "reinstall redquorum (pip builds the library with cargo and bundles it), run "
        "`cargo build --release` in a source checkout, or set {} to the library's path".format(
            ENV_VAR, "\n".join(tried), ENV_VAR
        )
    )


def _check_version(lib: ctypes.CDLL) -> None:
    """Refuse a library of another version: its symbols and their meaning are per version."""
    try:
        function = lib.redlock_version
    except AttributeError:
        raise OSError(
            f"{lib._name} does not export redlock_version: it is not libredlock"
        ) from None
    function.argtypes = []
    function.restype = c_char_p
    raw = function()
    found = raw.decode("ascii", "replace") if isinstance(raw, bytes) else repr(raw)
    if found != __version__:
        raise OSError(
            f"{lib._name} is libredlock {found}, but redquorum {__version__} needs libredlock "
            f"{__version__}: reinstall redquorum, rebuild the checkout with `cargo build "
            f"--release`, or point {ENV_VAR} at a matching build"
        )


def _bind(lib: ctypes.CDLL, signatures: Mapping[str, tuple[list[Any], Any]]) -> None:
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


lib = _load()
_check_version(lib)
_bind(lib, _bindings.FUNCTIONS)

# The two cancel functions that read a handle another thread may free, bound so that they keep
# the GIL (PyDLL) for their few instructions (an atomic load or store and a write to a pipe; they
# never block): the thread that frees a handle clears the Python reference first, under the GIL,
# so it cannot free the handle in the middle of one of these calls (see _cancel.CancelHandle).
gil_lib = ctypes.PyDLL(lib._name, handle=lib._handle)
_bind(
    gil_lib,
    {
        name: _bindings.FUNCTIONS[name]
        for name in ("redlock_cancel_trigger", "redlock_cancel_is_triggered")
    },
)
