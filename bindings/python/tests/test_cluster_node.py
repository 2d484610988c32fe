"""A Redis Cluster as one node (``redis+cluster://``) through the Python binding: the URL goes
through the core's builder like any other, so one lock on a single-master cluster is what is
checked here (3-master clusters and failovers are tested in the Rust suite, tests/cluster.rs)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _redis_binary
from redis_nodes import PATIENT, RedisNode, free_port, resp

import redquorum


@pytest.fixture
def cluster_node() -> Iterator[RedisNode]:
    directory = Path(tempfile.mkdtemp(prefix="redlock-py-cluster-"))
    node = RedisNode(
        _redis_binary(),
        directory,
        ("--cluster-enabled", "yes", "--cluster-port", str(free_port())),
    )
    try:
        assert resp(node.port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383") == "OK"
        deadline = time.monotonic() + 10
        while "cluster_state:ok" not in resp(node.port, "CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                pytest.fail("the cluster did not become ready within 10 s")
            time.sleep(0.05)
        yield node
    finally:
        node.kill()
        shutil.rmtree(directory, ignore_errors=True)


def test_locks_through_a_cluster_url(cluster_node: RedisNode) -> None:
    url = f"redis+cluster://127.0.0.1:{cluster_node.port}"
    with redquorum.Redlock([url], node_timeout=PATIENT) as client:
        status = client.node_status()[0]
        assert status.address == f"cluster:127.0.0.1:{cluster_node.port}"
        assert status.connected
        assert status.master == f"127.0.0.1:{cluster_node.port}"
        lock = client.try_lock("py:cluster", ttl=5)
        assert resp(cluster_node.port, "GET", "py:cluster") == lock.token
        lock.release()
        assert resp(cluster_node.port, "GET", "py:cluster") is None
        with pytest.raises(ValueError, match="hash slot"):
            client.acquire(redquorum.Request(resources=["py:a", "py:b"], ttl=5))


def test_min_replicas_on_a_cluster_node_names_the_master_without_replicas(
    cluster_node: RedisNode,
) -> None:
    url = f"redis+cluster://127.0.0.1:{cluster_node.port}"
    with redquorum.Redlock([url], retry_count=0, min_replicas=1) as client:
        master = f"master 127.0.0.1:{cluster_node.port}"
        assert any(master in w and "min_replicas 1" in w for w in client.node_status()[0].warnings)
        with pytest.raises(redquorum.NoQuorum, match=f"{master} of the cluster has 0 replicas"):
            client.try_lock("py:cluster-acked", ttl=5)
    assert resp(cluster_node.port, "GET", "py:cluster-acked") is None


def test_a_bad_cluster_url_is_a_value_error_naming_the_problem() -> None:
    with pytest.raises(ValueError, match="only database 0") as info:
        redquorum.Redlock(["redis+cluster://:s3cret@127.0.0.1:1/3"])
    assert "s3cret" not in str(info.value)
