"""A :mod:`prometheus_client` collector of a client's metrics; needs ``prometheus_client``,
which redquorum does not depend on (``pip install prometheus-client``)::

    from prometheus_client import REGISTRY, start_http_server
    from redquorum.prometheus import RedlockCollector

    REGISTRY.register(RedlockCollector(rl))
    start_http_server(9100)

Each scrape takes one :meth:`Redlock.stats` snapshot (atomic reads, no network) and hands its
metrics over as they are: ``redlock_acquire_duration_seconds``, ``redlock_acquisitions_total``,
``redlock_lost_total``, ``redlock_node_up``, ... (docs/observability.md lists them). Without
``prometheus_client``, :attr:`Stats.prometheus` is the same text to serve by other means.
"""

from __future__ import annotations

from collections.abc import Iterator

try:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "redquorum.prometheus needs prometheus_client (pip install prometheus-client); "
        "Redlock.stats().prometheus has the same metrics as text without it"
    ) from exc

from ._client import Redlock
from .aio import AsyncRedlock

__all__ = ["RedlockCollector"]


class RedlockCollector(Collector):
    """The metrics of one client, read at each scrape; a closed client has none. Register one
    collector per client: two clients' metrics have the same names."""

    def __init__(self, client: Redlock | AsyncRedlock) -> None:
        if isinstance(client, AsyncRedlock):
            client = client.sync
        if not isinstance(client, Redlock):
            raise TypeError(f"client must be a redquorum.Redlock, not {type(client).__name__}")
        self._client = client

    def collect(self) -> Iterator[Metric]:
        if self._client.closed:
            return
        try:
            text = self._client.stats().prometheus
        except ValueError:  # closed meanwhile
            return
        yield from text_string_to_metric_families(text)
