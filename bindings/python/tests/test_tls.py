"""TLS (``rediss://``) with ``tls_ca_file``, against a redis-server on a TLS port with a test CA
made by the ``openssl`` CLI. Skipped, saying why, without openssl or a TLS-capable redis-server.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _redis_binary
from redis_nodes import PATIENT, RedisNode, free_port

import redquorum

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


def _make_pki(directory: Path) -> None:
    (directory / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    _openssl(
        directory,
        "req",
        "-x509",
        *EC,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=redlock test CA",
    )
    _openssl(
        directory,
        "req",
        *EC,
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    )
    _openssl(
        directory,
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    )


class TlsNode:
    def __init__(self, node: RedisNode, tls_port: int) -> None:
        self.node = node
        self.tls_port = tls_port
        self.url = f"rediss://127.0.0.1:{tls_port}"


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsNode, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not found: cannot make test certificates")
    directory = tmp_path_factory.mktemp("redlock-tls")
    _make_pki(directory)
    node = None
    for _ in range(3):  # the free TLS port can be taken before redis binds it
        tls_port = free_port()
        args = (
            "--tls-port",
            str(tls_port),
            "--tls-cert-file",
            str(directory / "server.crt"),
            "--tls-key-file",
            str(directory / "server.key"),
            "--tls-ca-cert-file",
            str(directory / "ca.crt"),
            "--tls-auth-clients",
            "no",
        )
        try:
            node = RedisNode(_redis_binary(), directory, args)
            break
        except RuntimeError as exc:
            reason = str(exc)
    if node is None:
        pytest.skip(f"redis-server does not serve TLS here: {reason}")
    try:
        yield TlsNode(node, tls_port), directory / "ca.crt"
    finally:
        node.kill()


def test_lock_extend_release_over_tls_with_the_ca_file(tls_node):
    node, ca = tls_node
    with redquorum.Redlock([node.url], tls_ca_file=ca, node_timeout=PATIENT) as rl:
        with rl.lock("py:tls", ttl=10) as lock:
            assert node.node.command("GET", "py:tls") == lock.token
            lock.extend(ttl=30)
            assert node.node.command("PTTL", "py:tls") > 20_000
        assert node.node.command("GET", "py:tls") is None


def test_without_the_ca_the_certificate_is_refused_naming_the_node(tls_node):
    node, _ = tls_node
    with redquorum.Redlock([node.url], node_timeout=PATIENT) as rl:
        with pytest.raises(redquorum.NoQuorum) as refused:
            rl.try_lock("py:tls:untrusted", ttl=10)
    message = str(refused.value)
    assert f"127.0.0.1:{node.tls_port}" in message
    assert "certificate" in message and "tls_ca_file" in message


def test_bad_tls_arguments(tls_node, tmp_path):
    node, ca = tls_node
    with pytest.raises(TypeError):
        redquorum.Redlock([node.url], tls_ca_file=42)
    with pytest.raises(ValueError, match="missing-ca.pem"):
        redquorum.Redlock([node.url], tls_ca_file=tmp_path / "missing-ca.pem")
    with pytest.raises(ValueError, match="together"):
        redquorum.Redlock([node.url], tls_ca_file=ca, tls_client_cert_file=ca)
    with pytest.raises(ValueError, match="rediss://"):
        redquorum.Redlock([f"redis://127.0.0.1:{node.node.port}"], tls_ca_file=ca)


def test_insecure_is_never_silent(tls_node, caplog):
    """``#insecure`` accepts any certificate: the node's status says so, and so does a warning
    record of the ``redquorum`` logger."""
    node, _ = tls_node
    caplog.set_level(logging.WARNING, logger="redquorum")
    url = node.url + "/#insecure"
    with redquorum.Redlock([url], log_events=True, node_timeout=PATIENT) as rl:
        with rl.lock("py:tls:insecure", ttl=10):
            pass
        warnings = rl.node_status()[0].warnings
        assert any("#insecure" in w for w in warnings), warnings
        deadline = time.monotonic() + 10
        while not any("#insecure" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.02)
    warned = [r for r in caplog.records if "#insecure" in r.getMessage()]
    assert warned[0].levelno == logging.WARNING
    assert warned[0].redlock_event == "server_warning"
