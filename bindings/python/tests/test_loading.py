"""Finding libredlock: REDLOCK_LIBRARY, then inside the package, then (checkout only) target/release;
and refusing a library whose version is not the package's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from redis_nodes import PACKAGE_DIR

import redquorum
import redquorum._ffi

SHOW_LIBRARY = "import redquorum._ffi as f; print(f.lib._name)"


def _import(package_parent: Path, library: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("REDLOCK_")}
    env["PYTHONPATH"] = str(package_parent)
    if library is not None:
        env["REDLOCK_LIBRARY"] = library
    return subprocess.run(
        [sys.executable, "-c", SHOW_LIBRARY],
        env=env,
        cwd=package_parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _copy_package(tmp_path: Path) -> Path:
    """The package's sources alone, as if installed without a library: no checkout around."""
    shutil.copytree(
        PACKAGE_DIR / "redquorum",
        tmp_path / "redquorum",
        ignore=shutil.ignore_patterns("__pycache__", "libredlock.*", "redlock.dll"),
    )
    return tmp_path / "redquorum"


def test_without_a_library_the_error_lists_every_path_tried(tmp_path):
    _copy_package(tmp_path)
    result = _import(tmp_path, None)
    assert result.returncode != 0
    assert "OSError" in result.stderr
    assert str(tmp_path / "redquorum" / "libredlock.so") in result.stderr
    assert "REDLOCK_LIBRARY" in result.stderr
    # Outside a checkout there is no fallback to some target/ directory.
    assert "target" not in result.stderr.split("these paths were tried:")[1].split("reinstall")[0]


def test_the_library_inside_the_package_is_used(tmp_path):
    package = _copy_package(tmp_path)
    shutil.copyfile(redquorum._ffi.lib._name, package / "libredlock.so")
    result = _import(tmp_path, None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(package / "libredlock.so")


def test_a_bad_redlock_library_is_an_error_not_a_fallback(tmp_path):
    missing = str(tmp_path / "nowhere" / "libredlock.so")
    result = _import(PACKAGE_DIR, missing)
    assert result.returncode != 0
    assert missing in result.stderr and "REDLOCK_LIBRARY" in result.stderr


def test_redlock_library_is_used_first(tmp_path):
    copy = tmp_path / "libredlock-copy.so"
    shutil.copyfile(redquorum._ffi.lib._name, copy)
    result = _import(PACKAGE_DIR, str(copy))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(copy)


def test_a_source_checkout_uses_the_repository_release_build():
    root = PACKAGE_DIR.parents[1]
    assert (root / "Cargo.toml").is_file()
    result = _import(PACKAGE_DIR, None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(root / "target" / "release" / "libredlock.so")


def test_a_library_of_another_version_is_refused(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler to make a library of another version")
    source = tmp_path / "other.c"
    source.write_text('const char *redlock_version(void) { return "0.0.0-other"; }\n')
    other = tmp_path / "libredlock-other.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(other), str(source)], check=True)
    result = _import(PACKAGE_DIR, str(other))
    assert result.returncode != 0
    assert "OSError" in result.stderr
    assert "0.0.0-other" in result.stderr and redquorum.__version__ in result.stderr
    assert "REDLOCK_LIBRARY" in result.stderr


def test_versions_agree_everywhere():
    """The build refuses a package/crate version mismatch; the import, a library mismatch."""
    cargo_toml = (PACKAGE_DIR.parents[1] / "Cargo.toml").read_text()
    crate_version = cargo_toml.split("\nversion = \"", 1)[1].split('"', 1)[0]
    assert redquorum.__version__ == crate_version == redquorum.library_version()
