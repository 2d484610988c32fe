"""Real redis-server processes for the tests, and a tiny RESP client to look at their keys."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

STARTUP_TIMEOUT_S = 10.0


# The library's 50 ms default per-node timeout is meant for a quiet network; the test machine
# may be busy (2 cores shared with other builds), so tests that are not about timeouts wait
# longer rather than flake.
PATIENT = 1.0  # seconds


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RespError(Exception):
    """An error reply from Redis."""


def _encode(args: tuple) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_reply(stream):
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed by redis")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RespError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        length = int(body)
        if length < 0:
            return None
        data = stream.read(length + 2)
        return data[:-2].decode()
    if kind == b"*":
        length = int(body)
        return None if length < 0 else [_read_reply(stream) for _ in range(length)]
    raise ConnectionError(f"unexpected RESP reply {line!r}")


def resp(port: int, *args, timeout: float = 2.0):
    """Send one command to 127.0.0.1:port and return the decoded reply (a tiny RESP client)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(_encode(args))
        with sock.makefile("rb") as stream:
            return _read_reply(stream)


def _die_with_parent() -> None:
    # Linux: the kernel kills the server if pytest itself is killed before it can clean up.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class RedisNode:
    """One redis-server process that a test can hang (SIGSTOP), crash (SIGKILL) and start again
    on the same port."""

    def __init__(self, binary: str, directory: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = binary
        self.directory = directory
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None
        self._reserved: socket.socket | None = None
        self.port = 0
        for attempt in range(5):  # another process may grab a free port before redis binds it
            self.port = free_port()
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == 4:
                    raise

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / f"redis-{self.port}.log"

    def start(self) -> None:
        self.release_port()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.directory),
                    *self.extra_args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        self.stopped = False
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    "redis-server on port {} exited: {}".format(
                        self.port, self.log_path.read_text(errors="replace")[-2000:]
                    )
                )
            try:
                # Ours, not another process's server that took the port first (its own
                # redis-server then exits on the bind, and the loop above says so).
                info = resp(self.port, "INFO", "server", timeout=0.5)
                if f"process_id:{self.process.pid}\r" in info:
                    return
            except (OSError, RespError):
                pass
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Hang the node: it keeps its sockets but answers nothing."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        self.stopped = True

    def cont(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)
        self.stopped = False

    def kill(self) -> None:
        """Crash the node (SIGKILL); its data is gone, as nothing is persisted. Its port
        refuses connections until :meth:`start`."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
            self._reserve_port()
        self.stopped = False

    def _reserve_port(self) -> None:
        """Bind the dead node's port without listening: a connection to it is refused, as to
        any dead server, and no other test's node starts on it (tests of several suites run at
        once, each taking free ports from ``bind(0)``, which skips a bound port). With
        ``SO_REUSEADDR``, as redis-server binds, so that connections left in ``TIME_WAIT`` do
        not stop it."""
        self.release_port()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.port))
        except OSError:
            sock.close()
            return
        self._reserved = sock

    def release_port(self) -> None:
        """Let the port of a killed node go (see :meth:`_reserve_port`)."""
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None

    def command(self, *args):
        return resp(self.port, *args)


def value(node: RedisNode, key: str) -> str | None:
    """The string at ``key`` (None where it does not exist); ``<hash>``, ``<zset>``... for a key
    of another type, such as a reentrant lock's hash that a node has not deleted yet."""
    try:
        return node.command("GET", key)
    except RespError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        return f"<{node.command('TYPE', key)}>"


def values(nodes: list[RedisNode], key: str) -> list[str | None]:
    """The value of ``key`` on every node (see :func:`value`)."""
    return [value(node, key) for node in nodes]


def assert_on_nodes(nodes: list[RedisNode], key: str, expected: str | None) -> None:
    """Assert that every node holds ``expected`` under ``key`` (None: no such key).

    Calls return as soon as a quorum has answered, and failed attempts and dropped locks
    release in the background, so the last nodes may lag a little: allow them a few seconds.
    """
    deadline = time.monotonic() + 5.0
    while True:
        found = values(nodes, key)
        if all(value == expected for value in found):
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"expected {expected!r} under {key!r} on every node, found {found}"
            )
        time.sleep(0.005)


PACKAGE_DIR = Path(__file__).resolve().parents[1]
