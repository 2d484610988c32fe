"""A Sentinel-managed node (``redis+sentinel://``) through the Python binding: the URL goes
through the core's builder like any other, so one lock through a group is what is checked here
(failovers are tested in the Rust suite, tests/sentinel.rs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _redis_binary
from redis_nodes import PATIENT, RedisNode, RespError, _die_with_parent, free_port, resp

import redquorum

NAME = "pymaster"


class Group:
    def __init__(self, master: RedisNode, replica: RedisNode, sentinels: list[int]) -> None:
        self.master = master
        self.replica = replica
        self.sentinels = sentinels

    @property
    def url(self) -> str:
        extra = "&".join(f"sentinel=127.0.0.1:{port}" for port in self.sentinels[1:])
        return f"redis+sentinel://127.0.0.1:{self.sentinels[0]}/{NAME}?{extra}"


@pytest.fixture
def group() -> Iterator[Group]:
    binary = _redis_binary()
    directory = Path(tempfile.mkdtemp(prefix="redlock-py-sentinel-"))
    processes: list[subprocess.Popen] = []
    nodes: list[RedisNode] = []
    try:
        master = RedisNode(binary, directory)
        nodes.append(master)
        replica = RedisNode(binary, directory, ("--replicaof", "127.0.0.1", str(master.port)))
        nodes.append(replica)
        ports = []
        for i in range(3):
            port = free_port()
            conf = directory / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {NAME} 2000\n"
                f"sentinel failover-timeout {NAME} 3000\n"
            )
            with open(directory / f"sentinel-{i}.log", "ab") as log:
                processes.append(
                    subprocess.Popen(
                        [binary, str(conf), "--sentinel"],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                    )
                )
            ports.append(port)
        deadline = time.monotonic() + 10
        while True:
            try:
                if all(
                    resp(port, "SENTINEL", "get-master-addr-by-name", NAME, timeout=0.5)
                    == ["127.0.0.1", str(master.port)]
                    for port in ports
                ):
                    break
            except (OSError, RespError):
                pass
            if time.monotonic() > deadline:
                pytest.fail("the sentinels did not answer within 10 s")
            time.sleep(0.05)
        yield Group(master, replica, ports)
    finally:
        for process in processes:
            process.kill()
            process.wait()
        for node in nodes:
            node.kill()
        shutil.rmtree(directory, ignore_errors=True)


def test_locks_through_a_sentinel_url(group: Group) -> None:
    with redquorum.Redlock([group.url], node_timeout=PATIENT) as client:
        status = client.node_status()[0]
        assert status.address == f"sentinel:{NAME}@127.0.0.1:{group.sentinels[0]}"
        assert status.connected
        assert not any("replica" in w for w in status.warnings), status.warnings
        assert status.master == f"127.0.0.1:{group.master.port}"
        assert (status.failovers, status.errors) == (0, 0)
        lock = client.try_lock("py:sentinel", ttl=5)
        assert resp(group.master.port, "GET", "py:sentinel") == lock.token
        lock.release()
        assert resp(group.master.port, "GET", "py:sentinel") is None


def test_a_bad_sentinel_url_is_a_value_error_naming_the_problem() -> None:
    with pytest.raises(ValueError, match="no master name") as info:
        redquorum.Redlock(["redis+sentinel://:s3cret@127.0.0.1:1"])
    assert "s3cret" not in str(info.value)


def test_min_replicas_waits_for_the_replica(group: Group) -> None:
    deadline = time.monotonic() + 10
    while "master_link_status:up" not in resp(group.replica.port, "INFO", "replication"):
        assert time.monotonic() < deadline, "the replica did not sync within 10 s"
        time.sleep(0.05)
    with redquorum.Redlock([group.url], node_timeout=PATIENT, min_replicas=1) as client:
        assert not any("replica" in w for w in client.node_status()[0].warnings)
        # A loaded machine can hold the replica's acknowledgement past one try's WAIT (half the
        # node timeout): that try fails and undoes its key, and the next one waits again.
        lock = client.lock("py:acked", ttl=5, wait_timeout=10)
        # WAIT returned only once the replica had it: no polling.
        assert resp(group.replica.port, "GET", "py:acked") == lock.token
        lock.release()


def test_min_replicas_on_a_node_without_replicas_fails_saying_so(urls: list[str]) -> None:
    with redquorum.Redlock(urls[:1], retry_count=0, min_replicas=1) as client:
        assert any("min_replicas 1" in w for w in client.node_status()[0].warnings)
        with pytest.raises(redquorum.NoQuorum, match="fewer than min_replicas 1"):
            client.try_lock("py:unacked", ttl=5)


@pytest.mark.parametrize(
    "value, error", [(0, ValueError), (-1, ValueError), (2**32, ValueError), ("1", TypeError)]
)
def test_bad_min_replicas(urls: list[str], value: object, error: type) -> None:
    with pytest.raises(error, match="min_replicas"):
        redquorum.Redlock(urls, min_replicas=value)

