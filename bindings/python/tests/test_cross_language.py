"""One implementation, one wire format: a lock held from Python, Go or Rust excludes the others.

The Go side is ``cross_language/go/main.go`` and the Rust side ``cross_language/lock.rs``, beside this file;
both take ``try|hold RESOURCE URL...``: ``try`` exits 3 with NOT_ACQUIRED when the resource is
held elsewhere, ``hold`` prints ``HELD <token>`` and releases when its stdin closes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import redquorum

ROOT = Path(__file__).resolve().parents[3]
NOT_ACQUIRED = 3


def _build(cmd: list[str], cwd: Path, artefact: Path) -> Path:
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=600)
    assert artefact.exists(), f"{' '.join(cmd)} did not produce {artefact}"
    return artefact


@pytest.fixture(scope="module")
def go_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    out = tmp_path_factory.mktemp("go") / "lock"
    # redlock_inrepo: link the checkout's target/release, not an installed libredlock.
    cmd = ["go", "build", "-tags", "redlock_inrepo", "-o", str(out), "."]
    return _build(cmd, Path(__file__).parent / "cross_language/go", out)


@pytest.fixture(scope="module")
def rust_cli() -> Path:
    cargo = os.environ.get("CARGO", "cargo")
    out = ROOT / "target/release/examples/cross_language_lock"
    return _build([cargo, "build", "--release", "--example", "cross_language_lock"], ROOT, out)


Prober = Callable[[str], int]


@pytest.fixture
def probes(go_cli: Path, rust_cli: Path, urls: list[str]) -> dict[str, Prober]:
    """Single lock attempts from each language; each returns the process's exit code."""

    def cli(binary: Path) -> Prober:
        def attempt(resource: str) -> int:
            done = subprocess.run(
                [str(binary), "try", resource, *urls], capture_output=True, text=True, timeout=60
            )
            assert done.returncode in (0, NOT_ACQUIRED), done.stderr
            return done.returncode

        return attempt

    def python(resource: str) -> int:
        with redquorum.Redlock(urls, retry_count=0, node_timeout=1) as rl:
            try:
                rl.try_lock(resource, ttl=30).release()
                return 0
            except redquorum.NotAcquired:
                return NOT_ACQUIRED

    return {"go": cli(go_cli), "rust": cli(rust_cli), "python": python}


@pytest.fixture
def holders(go_cli: Path, rust_cli: Path, urls: list[str]) -> Iterator[dict[str, Callable]]:
    """Starts a process holding a resource; closing its stdin makes it release."""
    started: list[subprocess.Popen[str]] = []

    def cli(binary: Path) -> Callable[[str], subprocess.Popen[str]]:
        def hold(resource: str) -> subprocess.Popen[str]:
            proc = subprocess.Popen(
                [str(binary), "hold", resource, *urls],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            started.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("HELD "), line
            return proc

        return hold

    yield {"go": cli(go_cli), "rust": cli(rust_cli)}
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_python_holder_excludes_go_and_rust(probes: dict[str, Prober], urls, resource) -> None:
    with redquorum.Redlock(urls, node_timeout=1) as rl:
        lock = rl.try_lock(resource, ttl=30)
        assert probes["go"](resource) == NOT_ACQUIRED
        assert probes["rust"](resource) == NOT_ACQUIRED
        lock.release()
    # Released from Python: the others get it.
    assert probes["go"](resource) == 0
    assert probes["rust"](resource) == 0


@pytest.mark.parametrize("language", ["go", "rust"])
def test_other_holders_exclude_python_and_each_other(
    language: str, holders, probes: dict[str, Prober], resource: str
) -> None:
    proc = holders[language](resource)
    others = [name for name in probes if name != language]
    for other in others:
        assert probes[other](resource) == NOT_ACQUIRED, f"{other} got a lock {language} holds"
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0, f"{language} holder failed to release"
    for other in others:
        assert probes[other](resource) == 0, f"{other} could not lock after {language} released"
