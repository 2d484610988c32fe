"""The package as a user installs it: a platform wheel with its own libredlock, in a fresh
virtualenv outside the checkout, imported from elsewhere with no REDLOCK_* variables.

The wheel is built once per session (cargo only relinks after the suite's release build) and
installed with ``--no-index``: the backend needs nothing from PyPI on Python 3.11+.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
import zipfile
from pathlib import Path

import pytest
from redis_nodes import PACKAGE_DIR

import redquorum

pytestmark = pytest.mark.packaging

BUILD_TIMEOUT_S = 600  # a cold cargo build on a busy 2-core machine


def _clean_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("REDLOCK_", "PYTHON", "VIRTUAL_ENV", "PIP_"))
    }


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(out),
         str(PACKAGE_DIR)],
        env=_clean_env(),
        timeout=BUILD_TIMEOUT_S,
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def venv_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(venv)], env=_clean_env(), timeout=120)
    python = venv / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
        env=_clean_env(),
        timeout=120,
    )
    return python


def test_the_wheel_is_a_py3_none_platform_wheel_with_its_library(wheel: Path) -> None:
    name, version, python_tag, abi, platform = wheel.name[: -len(".whl")].split("-")
    assert (name, version) == ("redquorum", redquorum.__version__)
    assert (python_tag, abi) == ("py3", "none")
    if sys.platform.startswith("linux"):
        assert re.fullmatch(r"manylinux_2_\d+_" + re.escape(os.uname().machine), platform)
    dist_info = f"redquorum-{version}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = archive.read(f"{dist_info}/WHEEL").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        licenses = {
            name: archive.read(f"{dist_info}/licenses/{name}")
            for name in ("LICENSE-MIT", "LICENSE-APACHE")
        }
    assert "redquorum/libredlock.so" in names or sys.platform != "linux"
    assert "redquorum/py.typed" in names
    assert [n for n in names if "libredlock" in n or n.endswith(".dll")] == [
        "redquorum/libredlock.so"
    ]
    assert f"Tag: py3-none-{platform}" in wheel_file
    assert "Root-Is-Purelib: false" in wheel_file
    # PEP 639: the crate's dual license, its texts in the wheel, and where the project lives.
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: MIT OR Apache-2.0" in headers
    assert {"License-File: LICENSE-MIT", "License-File: LICENSE-APACHE"} <= set(headers)
    root = PACKAGE_DIR.parents[1]
    for name, text in licenses.items():
        assert text == (root / name).read_bytes(), name
    urls = {line.split(": ", 1)[1].split(", ")[0] for line in headers
            if line.startswith("Project-URL: ")}
    assert urls == {"Homepage", "Documentation", "Repository", "Changelog"}


def test_twine_accepts_the_wheel_and_the_sdist(wheel: Path, sdist: Path) -> None:
    # What PyPI checks on upload: the metadata and the README rendering as its long description.
    try:
        import twine  # noqa: F401
    except ImportError:
        pytest.skip("twine is not installed (scripts/test installs it)")
    _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
         timeout=120)


def test_auditwheel_agrees_with_the_platform_tag(wheel: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("manylinux is Linux only")
    try:
        import auditwheel  # noqa: F401
    except ImportError:
        pytest.skip("auditwheel is not installed (scripts/test installs it)")
    shown = _run([sys.executable, "-m", "auditwheel", "show", str(wheel)], timeout=120).stdout
    platform = wheel.name[: -len(".whl")].split("-")[-1]
    # auditwheel names the most compatible tag the wheel's library allows: ours must be it.
    assert re.search(r'consistent with\s+the following platform tag:\s+"' + platform + '"', shown), (
        shown
    )


def test_installed_in_a_fresh_venv_it_locks_a_real_node_from_anywhere(
    venv_python: Path, urls: list[str], nodes: list, tmp_path: Path
) -> None:
    resource = f"test:packaging:{uuid.uuid4().hex}"
    script = f"""
import json, sys
import redquorum
with redquorum.Redlock({urls!r}, node_timeout=1) as rl:
    lock = rl.lock({resource!r}, ttl=30)
    print(json.dumps({{"module": redquorum.__file__, "library": redquorum._ffi.lib._name,
                      "version": redquorum.library_version(), "token": lock.token}}), flush=True)
    sys.stdin.readline()
    lock.release()
"""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    process = subprocess.Popen(
        [str(venv_python), "-c", script],
        cwd=elsewhere,
        env=_clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = process.stdout.readline()
        if not line:
            pytest.fail(f"the installed package failed: {process.communicate(timeout=30)[1]}")
        seen = json.loads(line)
        site = venv_python.parent.parent
        assert Path(seen["module"]).is_relative_to(site)
        assert Path(seen["library"]).is_relative_to(site)
        assert Path(seen["library"]).parent == Path(seen["module"]).parent
        assert not Path(seen["library"]).is_relative_to(PACKAGE_DIR.parents[1])
        assert seen["version"] == redquorum.__version__
        # The call returned on a quorum; a slow node may apply its SET a moment later.
        quorum = len(nodes) // 2 + 1
        holding = [node for node in nodes if node.command("GET", resource) == seen["token"]]
        assert len(holding) >= quorum
        process.stdin.write("\n")
        process.stdin.flush()
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    deadline = time.monotonic() + 2
    while any(node.command("GET", resource) for node in nodes) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(node.command("GET", resource) for node in nodes)


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    hook = "import sys, redquorum_backend as b; print(b.build_sdist(sys.argv[1]))"
    name = _run(
        [sys.executable, "-c", hook, str(out)],
        cwd=PACKAGE_DIR,
        env={**_clean_env(), "PYTHONPATH": str(PACKAGE_DIR / "backend")},
        timeout=60,
    ).stdout.strip()
    assert name == f"redquorum-{redquorum.__version__}.tar.gz"
    return out / name


def _unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
        else:
            archive.extractall(into)  # noqa: S202 - our own archive
    return into / sdist.name[: -len(".tar.gz")]


def test_the_sdist_carries_the_workspace_and_nothing_built(sdist: Path, tmp_path: Path) -> None:
    stem = sdist.name[: -len(".tar.gz")]
    with tarfile.open(sdist) as archive:
        names = {member.name[len(stem) + 1 :] for member in archive.getmembers()}
    for expected in (
        "PKG-INFO",
        "pyproject.toml",
        "backend/redquorum_backend.py",
        "redquorum/__init__.py",
        "redquorum/_version.py",
        "redquorum/py.typed",
        "redquorum/_bindings.py",
        "rust/Cargo.toml",
        "rust/Cargo.lock",
        "rust/src/lib.rs",
        "rust/include/redlock.h",
        "rust/ffi/Cargo.toml",
        "rust/ffi/build.rs",
        "rust/ffi/cbindgen.toml",
        "rust/ffi/src/lib.rs",
        "rust/cli/Cargo.toml",
        "LICENSE-MIT",
        "LICENSE-APACHE",
    ):
        assert expected in names, expected
    assert not [n for n in names if "/target/" in n or n.startswith(("rust/target", "build/"))]
    assert not [n for n in names if n.endswith((".so", ".dylib", ".dll", ".pyc"))]
    # Cargo loads the whole workspace, every member, to build the C ABI's package: it must
    # resolve from the sdist alone, against the Cargo.lock packed with it.
    unpacked = _unpack(sdist, tmp_path)
    metadata = json.loads(
        _run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--offline",
             "--manifest-path", str(unpacked / "rust" / "Cargo.toml")],
            timeout=120,
        ).stdout
    )
    members = {
        package["name"]
        for package in metadata["packages"]
        if package["id"] in metadata["workspace_members"]
    }
    assert {"redquorum", "redquorum-ffi"} <= members, members


def _seed_target(target: Path, release: Path) -> None:
    """Hard-links the compiled dependencies of the checkout's `release` build into a new
    `target`: cargo's fingerprints of registry crates name neither the workspace's path nor the
    target directory, so it reuses them; the workspace's crates, whose path differs, compile
    anew. Fresh only: a `target` that exists has its own dependencies already."""
    if target.exists() or not release.is_dir():
        return
    partial = target.with_name(target.name + ".seeding")
    shutil.rmtree(partial, ignore_errors=True)
    for part in ("deps", "build", ".fingerprint"):
        if (release / part).is_dir():
            shutil.copytree(release / part, partial / "release" / part, symlinks=True,
                            copy_function=os.link)
    partial.rename(target)


def test_a_wheel_built_from_the_sdist_alone_locks_in_a_fresh_venv(
    sdist: Path, urls: list[str], tmp_path: Path
) -> None:
    # Built --locked from the sdist's copy of the workspace, outside the checkout. Its target
    # directory lives on in the checkout's target/, seeded from the checkout's release build,
    # so that only the workspace's own crates compile, not every dependency again.
    unpacked = _unpack(sdist, tmp_path / "unpacked")
    # The sdist dates its files 1980 (reproducible archives): touched, the workspace's crates
    # are older than nothing cargo has built, so it compiles them from these sources.
    for path in (unpacked / "rust").rglob("*"):
        if path.is_file():
            os.utime(path)
    wheels = tmp_path / "wheels"
    target = PACKAGE_DIR.parents[1] / "target" / "sdist"
    _seed_target(target, PACKAGE_DIR.parents[1] / "target" / "release")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(wheels),
         str(unpacked)],
        env={**_clean_env(), "CARGO_TARGET_DIR": str(target)},
        cwd=tmp_path,
        timeout=BUILD_TIMEOUT_S,
    )
    (wheel,) = wheels.glob("*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=_clean_env(), timeout=120)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
         env=_clean_env(), timeout=120)
    script = f"""
import redquorum
with redquorum.Redlock({urls!r}, node_timeout=1) as rl:
    with rl.lock("test:packaging:sdist:{uuid.uuid4().hex}", ttl=10) as lock:
        assert lock.held
print(redquorum.library_version(), redquorum._ffi.lib._name)
"""
    version, library = _run(
        [str(python), "-c", script], env=_clean_env(), cwd=tmp_path, timeout=60
    ).stdout.split()
    assert version == redquorum.__version__
    assert Path(library).is_relative_to(venv)
