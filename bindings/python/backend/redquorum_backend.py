"""The PEP 517 build backend of redquorum: builds libredlock with cargo and wraps it in a wheel.

The package is pure Python over ctypes; the only native part is ``libredlock``, a plain C-ABI
cdylib that every Python version loads the same way. So the wheel is ``py3-none-<platform>``:
one wheel per platform, not per Python version. Neither maturin (its modes are pyo3, pyo3-ffi,
cffi, uniffi and bin; cffi would add a runtime dependency and a generated module the binding
does not use) nor setuptools-rust (``Binding.NoBinding`` names the file with a CPython ABI
suffix, tags ``cpXY-cpXY``, leaves manylinux to a separate ``auditwheel repair`` and cannot put
the crate, two directories up, into an sdist) fits that without working against it, and a wheel
is a zip file with three metadata files. This backend needs nothing but the standard library
(and ``tomli`` before Python 3.11), so ``pip install --no-index ./bindings/python`` works
offline once cargo has the crate's dependencies.

Where the crate comes from:

* in a checkout, ``../..`` (the repository root, a Cargo workspace), built into its ``target/``
  (or ``$CARGO_TARGET_DIR``), so a wheel build after ``cargo build --release`` only relinks;
* in an sdist, ``rust/`` inside it: :func:`build_sdist` packs the workspace's tracked sources
  there (the core crate, the C ABI crate ``ffi/`` and every other member the workspace's
  ``Cargo.toml`` names, since cargo loads them all), with ``Cargo.lock``, and the wheel is built
  ``--locked`` from them. Building from an sdist therefore needs a Rust toolchain and the
  crates in ``Cargo.lock`` (from the registry or cargo's cache).

The library is the workspace's ``redquorum-ffi`` package (``cargo build -p redquorum-ffi``), whose
lib is named ``redlock``: the file is ``libredlock.so``. The package's version must equal the
workspace's (``[workspace.package]``).

Linux platform tag: the library's ``DT_NEEDED`` entries and ``GLIBC_*`` symbol versions are read
from its ELF file; when it needs only the libraries every manylinux system has, the wheel is
tagged ``manylinux_2_<N>_<arch>`` for the newest glibc symbol version it uses (PEP 600).
Otherwise it stays ``linux_<arch>`` with a warning (``auditwheel repair`` can graft the rest).
The package's tests check the tag against ``auditwheel show``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - get_requires_for_build_* asks for tomli there
    import tomli as tomllib

PROJECT = Path(__file__).resolve().parent.parent
PACKAGE = "redquorum"
SDIST_CRATE = "rust"
CRATE_NAME = "redquorum"
# The workspace package whose cdylib is libredlock.
LIBRARY_PACKAGE = "redquorum-ffi"
GENERATOR = "redquorum_backend"
# Top-level entries of the core crate an sdist carries (its manifest names the test and example
# files it declares, which cargo wants to see); the workspace's members (the C ABI crate among
# them) are added from its Cargo.toml, as cargo loads every member to build any of them.
CRATE_ENTRIES = ("Cargo.toml", "Cargo.lock", "README.md", "src", "include", "tests", "examples")
SKIPPED_PARTS = {"target", "__pycache__", ".git"}
# What every manylinux system provides (PEP 600 leaves the list to auditwheel's policies; these
# are the C runtime and compiler support libraries all of them allow).
MANYLINUX_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "libgcc_s.so.1", "libstdc++.so.6",
}


# ---------------------------------------------------------------------------------------------
# PEP 517 hooks


def _need_tomli() -> list[str]:
    return [] if sys.version_info >= (3, 11) else ["tomli>=1.1"]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return _need_tomli()


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return _need_tomli()


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    metadata = _Metadata.load()
    dist_info = Path(metadata_directory) / metadata.dist_info
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(metadata.text(), encoding="utf-8")
    return metadata.dist_info


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    metadata = _Metadata.load()
    crate, packed = _crate()
    crate_version = _crate_version(crate)
    if crate_version != metadata.version:
        raise _BuildError(
            f"{PACKAGE}/_version.py says {metadata.version} but the workspace at {crate} is "
            f"{crate_version}: the package checks that they match at import, so bump both"
        )
    with tempfile.TemporaryDirectory(prefix="redquorum-wheel-") as scratch:
        library = _build_library(crate, locked=packed, scratch=Path(scratch))
        tag = f"py3-none-{_platform_tag(library)}"
        name = f"{metadata.file_stem}-{tag}.whl"
        wheel = _Wheel(Path(wheel_directory) / name)
        for source, arcname in _package_files():
            wheel.add_file(source, arcname)
        wheel.add_file(library, f"{PACKAGE}/{library.name}", executable=True)
        dist_info = metadata.dist_info
        for source, arcname in metadata.license_files:
            wheel.add_file(source, f"{dist_info}/licenses/{arcname}")
        wheel.add_bytes(f"{dist_info}/METADATA", metadata.text().encode("utf-8"))
        wheel_file = (
            f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: false\nTag: {tag}\n"
        )
        wheel.add_bytes(f"{dist_info}/WHEEL", wheel_file.encode("ascii"))
        wheel.close(f"{dist_info}/RECORD")
    return name


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    metadata = _Metadata.load()
    crate, _ = _crate()
    stem = metadata.file_stem
    name = f"{stem}.tar.gz"
    files: list[tuple[Path, str]] = [
        (PROJECT / "pyproject.toml", "pyproject.toml"),
        (PROJECT / "README.md", "README.md"),
        (Path(__file__), f"backend/{Path(__file__).name}"),
        *metadata.license_files,
    ]
    files += _package_files()
    files += [(path, f"tests/{path.name}") for path in sorted((PROJECT / "tests").glob("*.py"))]
    files += [(path, f"{SDIST_CRATE}/{rel}") for path, rel in _crate_files(crate)]
    epoch = _timestamp()
    with tarfile.open(Path(sdist_directory) / name, "w:gz", format=tarfile.PAX_FORMAT) as tar:

        def add(data: bytes, arcname: str, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(f"{stem}/{arcname}")
            info.size, info.mtime, info.mode = len(data), epoch, mode
            tar.addfile(info, io.BytesIO(data))

        add(metadata.text().encode("utf-8"), "PKG-INFO")
        for path, arcname in files:
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            add(path.read_bytes(), arcname, mode)
    return name


# ---------------------------------------------------------------------------------------------
# Metadata (core metadata 2.4 from pyproject.toml's [project])


class _BuildError(Exception):
    pass


class _Metadata:
    # Keys of [project] this backend turns into core metadata; any other key is an error rather
    # than metadata silently left out of the wheel.
    HANDLED = {"name", "dynamic", "description", "readme", "requires-python", "license",
               "license-files", "classifiers", "optional-dependencies", "dependencies", "urls"}

    def __init__(self, project: dict[str, Any], version: str) -> None:
        unknown = set(project) - self.HANDLED
        if unknown:
            raise _BuildError(f"{GENERATOR} does not handle [project] keys {sorted(unknown)}")
        if project.get("dynamic") != ["version"]:
            raise _BuildError('pyproject.toml must say dynamic = ["version"]')
        self.project = project
        self.name: str = project["name"]
        self.version = version
        normalized = re.sub(r"[-_.]+", "_", self.name).lower()
        self.file_stem = f"{normalized}-{version}"
        self.dist_info = f"{self.file_stem}.dist-info"
        self.license_files = _license_files(project.get("license-files", []))
        if isinstance(project.get("license"), str) and any(
            c.startswith("License ::") for c in project.get("classifiers", [])
        ):
            raise _BuildError("with an SPDX license expression, drop the License :: classifiers "
                              "(PEP 639)")

    @classmethod
    def load(cls) -> _Metadata:
        with open(PROJECT / "pyproject.toml", "rb") as file:
            project = tomllib.load(file)["project"]
        return cls(project, _package_version())

    def text(self) -> str:
        project = self.project
        lines = ["Metadata-Version: 2.4", f"Name: {self.name}", f"Version: {self.version}"]
        if "description" in project:
            lines.append(f"Summary: {project['description']}")
        declared = project.get("license")
        if isinstance(declared, str):
            lines.append(f"License-Expression: {declared}")
        elif declared is not None:
            lines.append(f"License: {declared['text']}")
        lines += [f"License-File: {arcname}" for _, arcname in self.license_files]
        lines += [f"Project-URL: {label}, {url}" for label, url in project.get("urls", {}).items()]
        if "requires-python" in project:
            lines.append(f"Requires-Python: {project['requires-python']}")
        lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
        lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
        for extra, requirements in project.get("optional-dependencies", {}).items():
            lines.append(f"Provides-Extra: {extra}")
            lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
        body = ""
        if "readme" in project:
            lines.append("Description-Content-Type: text/markdown")
            body = (PROJECT / project["readme"]).read_text(encoding="utf-8")
        return "\n".join(lines) + "\n\n" + body


def _license_files(patterns: list[str]) -> list[tuple[Path, str]]:
    """The files of ``license-files`` (PEP 639: globs relative to the project, each matching at
    least one file), as (source, path in the sdist and under ``.dist-info/licenses/``)."""
    found: dict[str, Path] = {}
    for pattern in patterns:
        if pattern.startswith("/") or "\\" in pattern or ".." in pattern.split("/"):
            raise _BuildError(f"license-files: {pattern!r} must be a relative path without '..'")
        matched = sorted(path for path in PROJECT.glob(pattern) if path.is_file())
        if not matched:
            raise _BuildError(f"license-files: {pattern!r} matches no file in {PROJECT}")
        for path in matched:
            found.setdefault(path.relative_to(PROJECT).as_posix(), path)
    return [(path, arcname) for arcname, path in found.items()]


def _package_version() -> str:
    text = (PROJECT / PACKAGE / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    if not match:
        raise _BuildError(f'{PACKAGE}/_version.py must hold a line __version__ = "X.Y.Z"')
    return match.group(1)


def _package_files() -> list[tuple[Path, str]]:
    """The package's own files; never a library copied into the source directory by hand."""
    directory = PROJECT / PACKAGE
    files = sorted(directory.glob("*.py")) + [directory / "py.typed"]
    return [(path, f"{PACKAGE}/{path.name}") for path in files]


# ---------------------------------------------------------------------------------------------
# The crate and cargo


def _crate() -> tuple[Path, bool]:
    """The crate's directory, and whether it is the copy packed into an sdist."""
    packed = PROJECT / SDIST_CRATE
    if (packed / "Cargo.toml").is_file():
        return packed, True
    tree = PROJECT.parent.parent
    if (tree / "Cargo.toml").is_file() and (PROJECT / PACKAGE).is_dir():
        return tree, False
    raise _BuildError(
        f"cannot find the {CRATE_NAME} crate: neither {packed} (an sdist) nor {tree} (a checkout, "
        "where bindings/python lives) has a Cargo.toml"
    )


def _crate_version(crate: Path) -> str:
    """The crate's version: its own, or the workspace's that it inherits."""
    with open(crate / "Cargo.toml", "rb") as file:
        manifest = tomllib.load(file)
    package = manifest["package"]
    if package.get("name") != CRATE_NAME:
        raise _BuildError(f"{crate / 'Cargo.toml'} is not the {CRATE_NAME} crate")
    version = package["version"]
    if isinstance(version, dict) and version.get("workspace"):
        version = manifest.get("workspace", {}).get("package", {}).get("version")
    if not isinstance(version, str):
        raise _BuildError(f"{crate / 'Cargo.toml'} states no version for {CRATE_NAME}")
    return version


def _workspace_entries(crate: Path) -> list[str]:
    """:data:`CRATE_ENTRIES` and the directories of the workspace's members."""
    with open(crate / "Cargo.toml", "rb") as file:
        members = tomllib.load(file).get("workspace", {}).get("members", [])
    if LIBRARY_PACKAGE not in _package_names(crate, members):
        raise _BuildError(f"{crate / 'Cargo.toml'} has no workspace member {LIBRARY_PACKAGE}")
    return [*CRATE_ENTRIES, *members]


def _package_names(crate: Path, members: list[str]) -> set[str]:
    names = set()
    for member in members:
        manifest = crate / member / "Cargo.toml"
        if manifest.is_file():
            with open(manifest, "rb") as file:
                names.add(tomllib.load(file).get("package", {}).get("name"))
    return names


def _crate_files(crate: Path) -> Iterator[tuple[Path, str]]:
    """The workspace's sources for an sdist: what git tracks under :func:`_workspace_entries`,
    else every file there."""
    entries = _workspace_entries(crate)
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", *entries],
            cwd=crate, capture_output=True, check=True,
        ).stdout.decode("utf-8").split("\0")
        names = sorted(name for name in listed if name)
    except (OSError, subprocess.CalledProcessError):
        names = []
    if not names:
        names = sorted(
            path.relative_to(crate).as_posix()
            for entry in entries
            for path in ([crate / entry] if (crate / entry).is_file()
                         else (crate / entry).rglob("*"))
            if path.is_file() and not SKIPPED_PARTS & set(path.relative_to(crate).parts)
        )
    for name in names:
        if (crate / name).is_file():
            yield crate / name, name


def _library_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    if sys.platform == "win32":
        return "redlock.dll"
    return "libredlock.so"


def _build_library(crate: Path, *, locked: bool, scratch: Path) -> Path:
    """Builds libredlock (release) and returns a copy of it in ``scratch``, debug info stripped."""
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        raise _BuildError(
            "building redquorum needs Rust's cargo on PATH (or $CARGO): install a Rust "
            "toolchain, e.g. with rustup, and try again"
        )
    target = Path(os.environ.get("CARGO_TARGET_DIR") or crate / "target")
    command = [cargo, "build", "--release", "--lib", "-p", LIBRARY_PACKAGE, "--manifest-path",
               str(crate / "Cargo.toml"), "--target-dir", str(target)]
    if locked:
        command.append("--locked")
    print("redquorum: " + " ".join(command), file=sys.stderr, flush=True)
    # cargo's progress goes to stderr; stdout would mix with the frontend's protocol.
    result = subprocess.run(command, stdout=sys.stderr)
    if result.returncode != 0:
        raise _BuildError(f"cargo build failed with exit status {result.returncode}")
    built = target / "release" / _library_name()
    if not built.is_file():
        raise _BuildError(f"cargo build succeeded but {built} is missing")
    copy = scratch / built.name
    shutil.copyfile(built, copy)
    strip = shutil.which("strip")
    if strip and sys.platform.startswith("linux"):
        # The release profile keeps line tables for the Rust tests' backtraces; a wheel does not
        # need them (about 24 MB of the 25).
        subprocess.run([strip, "--strip-debug", str(copy)], check=True)
    return copy


# ---------------------------------------------------------------------------------------------
# Platform tag


def _platform_tag(library: Path) -> str:
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    if not platform.startswith("linux_"):
        return platform  # macosx_11_0_arm64, win_amd64, ...
    arch = platform[len("linux_"):]
    try:
        needed, versions = _elf_dependencies(library.read_bytes())
    except ValueError as exc:
        print(f"redquorum: cannot read {library}: {exc}; tagging {platform}", file=sys.stderr)
        return platform
    foreign = sorted(
        name for name in needed
        if name not in MANYLINUX_LIBRARIES and not name.startswith("ld-linux")
    )
    glibc = [tuple(int(part) for part in v[len("GLIBC_"):].split(".")[:2])
             for v in versions if re.fullmatch(r"GLIBC_\d+\.\d+(\.\d+)?", v)]
    if foreign or not glibc:
        why = f"it needs {', '.join(foreign)}" if foreign else "it uses no glibc symbol versions"
        print(f"redquorum: not a manylinux library ({why}); tagging {platform}; "
              "`auditwheel repair` the wheel before publishing it", file=sys.stderr)
        return platform
    major, minor = max(glibc)
    return f"manylinux_{major}_{minor}_{arch}"


def _elf_dependencies(data: bytes) -> tuple[set[str], set[str]]:
    """``DT_NEEDED`` libraries and the symbol versions needed from them (``.gnu.version_r``)."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    wide = {1: False, 2: True}.get(data[4])
    order = {1: "<", 2: ">"}.get(data[5])
    if wide is None or order is None:
        raise ValueError("unknown ELF class or byte order")

    def read(fmt: str, offset: int) -> tuple[int, ...]:
        return struct.unpack_from(order + fmt, data, offset)

    if wide:
        shoff, = read("Q", 0x28)
        shentsize, shnum = read("HH", 0x3A)
        section_fmt, dyn_fmt = "IIQQQQIIQQ", "qQ"
    else:
        shoff, = read("I", 0x20)
        shentsize, shnum = read("HH", 0x2E)
        section_fmt, dyn_fmt = "IIIIIIIIII", "iI"
    sections = [read(section_fmt, shoff + i * shentsize) for i in range(shnum)]

    def string(section: int, offset: int) -> str:
        start = sections[section][4] + offset
        return data[start:data.index(b"\0", start)].decode("utf-8", "replace")

    needed: set[str] = set()
    versions: set[str] = set()
    dyn_size = struct.calcsize(order + dyn_fmt)
    for _name, kind, _flags, _addr, offset, size, link, info, _align, _entsize in sections:
        if kind == 6:  # SHT_DYNAMIC
            for at in range(offset, offset + size, dyn_size):
                tag, value = read(dyn_fmt, at)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    needed.add(string(link, value))
        elif kind == 0x6FFFFFFE:  # SHT_GNU_verneed: Elf*_Verneed, then Elf*_Vernaux entries
            at = offset
            for _ in range(info):
                _version, count, _file, aux, next_need = read("HHIII", at)
                at_aux = at + aux
                for _ in range(count):
                    _hash, _flags2, _other, name, next_aux = read("IHHII", at_aux)
                    versions.add(string(link, name))
                    at_aux += next_aux
                at += next_need
    return needed, versions


# ---------------------------------------------------------------------------------------------
# Writing a wheel


def _timestamp() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01: zip's epoch


class _Wheel:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records: list[str] = []
        self.date = time.gmtime(max(_timestamp(), 315532800))[:6]

    def add_file(self, source: Path, arcname: str, executable: bool = False) -> None:
        self.add_bytes(arcname, source.read_bytes(), 0o755 if executable else 0o644)

    def add_bytes(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(arcname, date_time=self.date)
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        self.records.append(f"{arcname},sha256={digest.decode('ascii')},{len(data)}")

    def close(self, record: str) -> None:
        text = "\n".join(self.records + [f"{record},,"]) + "\n"
        info = zipfile.ZipInfo(record, date_time=self.date)
        info.external_attr = (0o100000 | 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, text.encode("utf-8"))
        self.zip.close()
