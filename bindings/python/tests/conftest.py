"""Fixtures: real redis-server nodes, started here on free ports and always killed.

The binary is ``$REDLOCK_REDIS_SERVER`` or ``redis-server`` on PATH; never a pre-running server.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
from redis_nodes import PATIENT, RedisNode

import redquorum

NODE_COUNT = 5

# A test command started as a background job of a non-interactive shell inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests would wait
# for ever for a signal that never arrives. They test the binding under Python's own handler,
# which the child processes they start inherit as the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _redis_binary() -> str:
    binary = os.environ.get("REDLOCK_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        pytest.exit("redis-server not found: install it or set REDLOCK_REDIS_SERVER", returncode=2)
    return binary


@pytest.fixture(scope="session")
def cluster() -> Iterator[list[RedisNode]]:
    directory = Path(tempfile.mkdtemp(prefix="redlock-py-"))
    nodes: list[RedisNode] = []

    def cleanup() -> None:
        for node in nodes:
            node.kill()
            node.release_port()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(cleanup)  # also on KeyboardInterrupt or an error outside the fixture
    try:
        binary = _redis_binary()
        for _ in range(NODE_COUNT):
            nodes.append(RedisNode(binary, directory))
        yield nodes
    finally:
        cleanup()
        atexit.unregister(cleanup)


@pytest.fixture
def nodes(cluster: list[RedisNode]) -> Iterator[list[RedisNode]]:
    """All nodes, healthy; whatever a test hangs or kills is revived after it."""
    yield cluster
    for node in cluster:
        if node.stopped:
            node.cont()
        if not node.alive:
            node.start()


@pytest.fixture
def urls(nodes: list[RedisNode]) -> list[str]:
    return [node.url for node in nodes]


@pytest.fixture
def resource(request: pytest.FixtureRequest) -> str:
    """A resource name no other test uses."""
    return f"test:{request.node.name}:{uuid.uuid4().hex}"


@pytest.fixture
def make_client(urls: list[str]) -> Iterator[Callable[..., redquorum.Redlock]]:
    """Builds clients on all nodes (or the given ``nodes``) and closes them after the test.

    ``node_timeout`` defaults to :data:`PATIENT` here, and ``retry_count`` to 3, so that a
    refused ``lock()`` ends within about a second.
    """
    clients: list[redquorum.Redlock] = []

    def make(nodes: list[str] | None = None, **options) -> redquorum.Redlock:
        options.setdefault("node_timeout", PATIENT)
        options.setdefault("retry_count", 3)
        client = redquorum.Redlock(urls if nodes is None else nodes, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
