"""The Python examples of README.md, docs/ and this binding's README run, as printed.

Every ```python block of those pages runs here, on its own, against the test's nodes: the nodes
a block names (the README's three local nodes) are replaced by the test's own, and nothing else
is changed, so an example that stops working fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import signal

import pytest
from redis_nodes import RedisNode, assert_on_nodes

ROOT = Path(__file__).resolve().parents[3]
# The nodes of the README's "Three local nodes".
PRINTED_NODES = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"]


def python_blocks() -> Iterator[tuple[str, str]]:
    """Each ```python block of README.md, docs/*.md and bindings/python/README.md, as
    (page:line, source)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in [*pages, ROOT / "bindings" / "python" / "README.md"]:
        start = 0
        body: list[str] = []
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if not start and line.rstrip() == "```python":
                start, body = n, []
            elif start and line.rstrip() == "```":
                yield f"{page.relative_to(ROOT)}:{start}", "\n".join(body) + "\n"
                start = 0
            elif start:
                body.append(line)


BLOCKS = list(python_blocks())


def test_the_docs_have_python_examples() -> None:
    where = [name for name, _ in BLOCKS]
    assert any(name.startswith("README.md:") for name in where), where
    assert any(name.startswith("bindings/python/README.md:") for name in where), where
    assert len(where) >= 12, where  # the README's, the guide's two, the binding README's nine


@pytest.mark.parametrize("name, source", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_example_runs(name: str, source: str, nodes: list[RedisNode], urls: list[str]) -> None:
    for printed, ours in zip(PRINTED_NODES, urls):
        source = source.replace(printed, ours)
    assert "127.0.0.1:700" not in source, f"{name} names nodes other than the README's three"
    alarm = signal.getsignal(signal.SIGALRM)  # the signals example sets a handler of its own
    try:
        exec(compile(source, name, "exec"), {"__name__": "__docs__"})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, alarm)
    for resource in ("orders:42", "orders:44"):
        assert_on_nodes(nodes[:3], resource, None)
