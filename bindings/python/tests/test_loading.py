"""Finding libredlock: REDLOCK_LIBRARY, then beside the package, then the repository's target/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from redis_nodes import PACKAGE_DIR

import redlock
import redlock._ffi


def _import_redlock(package_parent: Path, library: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "REDLOCK_LIBRARY"}
    env["PYTHONPATH"] = str(package_parent)
    if library is not None:
        env["REDLOCK_LIBRARY"] = library
    return subprocess.run(
        [sys.executable, "-c", "import redlock; print(redlock._ffi.lib._name)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_a_library_the_error_lists_every_path_tried(tmp_path):
    shutil.copytree(PACKAGE_DIR / "redlock", tmp_path / "redlock")  # no Cargo.toml above it
    result = _import_redlock(tmp_path, None)
    assert result.returncode != 0
    assert "OSError" in result.stderr
    assert str(tmp_path / "redlock" / "libredlock.so") in result.stderr
    assert "cargo build --release" in result.stderr
    assert "REDLOCK_LIBRARY" in result.stderr


def test_a_bad_redlock_library_is_an_error_not_a_fallback(tmp_path):
    missing = str(tmp_path / "nowhere" / "libredlock.so")
    result = _import_redlock(PACKAGE_DIR, missing)
    assert result.returncode != 0
    assert missing in result.stderr and "REDLOCK_LIBRARY" in result.stderr


def test_redlock_library_is_used_first(tmp_path):
    copy = tmp_path / "libredlock-copy.so"
    shutil.copyfile(redlock._ffi.lib._name, copy)
    result = _import_redlock(PACKAGE_DIR, str(copy))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(copy)


def test_the_repository_build_is_found_by_walking_up():
    if os.environ.get("REDLOCK_LIBRARY"):
        pytest.skip("REDLOCK_LIBRARY chose the library, so the walk up was not needed")
    root = PACKAGE_DIR.parents[1]
    assert (root / "Cargo.toml").is_file()
    assert Path(redlock._ffi.lib._name).parent in (root / "target/release", root / "target/debug")
