"""Telemetry against real nodes: events become records of the ``redquorum`` logger (on the
client's dispatcher thread, with their fields in ``extra``), the listener exists only when a
record would reach a handler, ``Redlock.stats()`` counts what was done, and the Prometheus
collector's output parses with prometheus_client's own parser."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Iterator

import pytest

import redquorum
from redquorum.aio import AsyncRedlock


class Records(logging.Handler):
    """Keeps every record it is handed, with the thread that handled it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.threads: list[int] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            self.records.append(record)
            self.threads.append(threading.get_ident())

    def of(self, event: str, resource: str | None = None) -> list[logging.LogRecord]:
        with self._lock:
            return [
                r
                for r in self.records
                if r.redlock_event == event and (resource is None or r.redlock_resource == resource)
            ]

    def wait_for(self, event: str, resource: str | None = None) -> logging.LogRecord:
        deadline = time.monotonic() + 10
        while not self.of(event, resource):
            assert time.monotonic() < deadline, f"no {event} record for {resource}"
            time.sleep(0.02)
        return self.of(event, resource)[0]


@pytest.fixture
def records() -> Iterator[Records]:
    logger = logging.getLogger("redquorum")
    handler = Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_logger_is_silent_until_configured():
    logger = logging.getLogger("redquorum")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)


def test_acquire_and_release_become_info_records(make_client, resource, records):
    rl = make_client()
    with rl.lock(resource, ttl=10) as lock:
        lock.extend(ttl=10)

    acquired = records.wait_for("acquired", resource)
    released = records.wait_for("released", resource)
    extended = records.wait_for("extended", resource)
    assert acquired.levelno == released.levelno == extended.levelno == logging.INFO
    assert acquired.name == "redquorum"
    assert acquired.redlock_lock_kind == "plain"
    assert acquired.redlock_node is None and acquired.redlock_reason is None
    assert isinstance(acquired.redlock_duration, float) and acquired.redlock_duration >= 0
    assert extended.redlock_duration is None
    assert resource in acquired.getMessage()
    assert abs(acquired.created - time.time()) < 60  # the event's time
    with records._lock:
        order = [r.redlock_event for r in records.records if r.redlock_resource == resource]
        threads = set(records.threads)
    assert order == ["acquired", "extended", "released"]
    assert threading.get_ident() not in threads  # the dispatcher's thread, never the caller's


def test_a_lost_lock_is_a_warning(nodes, make_client, resource, records):
    rl = make_client()
    lock = rl.lock(resource, ttl=3, auto_extend=True)
    for node in nodes:
        node.command("DEL", resource)
    lost = records.wait_for("lost", resource)
    assert lost.levelno == logging.WARNING
    assert lost.redlock_reason == "refused"
    assert lost.redlock_duration is not None
    assert lock.lost
    stats = rl.stats()
    assert stats.lost == {"refused": 1, "expired": 0, "suspended": 0}
    assert stats.locks_held == 0


def test_a_handler_may_call_into_the_library(make_client, resource, records):
    rl = make_client()
    seen: list[redquorum.Stats] = []

    class Reading(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(rl.stats())

    reading = Reading()
    logging.getLogger("redquorum").addHandler(reading)
    try:
        rl.lock(resource, ttl=10).release()
        records.wait_for("released", resource)
    finally:
        logging.getLogger("redquorum").removeHandler(reading)
    assert seen and seen[0].acquisitions["acquired"] == 1


def test_the_listener_exists_only_when_records_would_be_handled(make_client, records):
    assert make_client()._core._listener is not None  # the fixture's handler
    assert make_client(log_events=False)._core._listener is None
    logging.getLogger("redquorum").setLevel(logging.WARNING)
    assert make_client()._core._listener is None
    assert make_client(log_events=True)._core._listener is not None


def test_without_handlers_no_listener(make_client):
    assert make_client()._core._listener is None  # only the NullHandler: nothing would be emitted


def test_stats_count_the_operations_made(make_client, resource):
    rl = make_client(retry_count=1, retry_delay=0.01, retry_jitter=0.005)
    assert rl.stats().acquisitions["acquired"] == 0
    held = [rl.lock(f"{resource}:{i}", ttl=10) for i in range(3)]
    with pytest.raises(redquorum.NotAcquired):
        rl.try_lock(f"{resource}:0", ttl=10)
    held[1].extend(ttl=10)
    stats = rl.stats()
    assert isinstance(stats, redquorum.Stats)
    assert stats.acquisitions == {
        "acquired": 3,
        "refused": 1,
        "no_quorum": 0,
        "cancelled": 0,
        "error": 0,
    }
    assert stats.locks_held == 3
    assert stats.extensions == 1 and stats.extensions_failed == 0
    assert stats.waiters == 0 and stats.events_dropped == 0
    assert 'redlock_acquisitions_total{outcome="acquired",kind="plain"} 3\n' in stats.prometheus
    assert resource not in stats.prometheus  # resource names are never labels
    for lock in held:
        lock.release()
    assert rl.stats().locks_held == 0
    assert AsyncRedlock.from_client(rl).stats().acquisitions["acquired"] == 3
    rl.close()
    with pytest.raises(ValueError):
        rl.stats()


def test_the_prometheus_collector_parses(make_client, resource):
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from redquorum.prometheus import RedlockCollector

    rl = make_client()
    rl.lock(resource, ttl=10).release()
    registry = CollectorRegistry()
    registry.register(RedlockCollector(rl))
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    acquired = [
        s.value
        for s in families["redlock_acquisitions"].samples
        if s.labels == {"outcome": "acquired", "kind": "plain"}
    ]
    assert acquired == [1.0]
    assert families["redlock_acquire_duration_seconds"].type == "histogram"
    up = [s.value for s in families["redlock_node_up"].samples]
    assert len(up) == len(rl.node_status())
    rl.close()
    assert generate_latest(registry) == b""  # a closed client has no metrics
    with pytest.raises(TypeError):
        RedlockCollector("not a client")  # type: ignore[arg-type]


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_listeners_leave_no_threads_or_handles(urls, resource, records):
    from redquorum import _events

    # The library's process-wide threads (the cancel relay), and a client of the last lock
    # kept until the next one comes, are there before counting: only what listeners add counts.
    warm_up = redquorum.Redlock(urls, node_timeout=1, log_events=False)
    warm_up.lock(resource, ttl=10).release()
    warm_up.close()
    del warm_up
    gc.collect()
    start_threads, start_fds = _native_threads(), len(os.listdir("/proc/self/fd"))
    for i in range(100):
        rl = redquorum.Redlock(urls, node_timeout=1, log_events=True)
        rl.lock(f"{resource}:{i % 5}", ttl=10).release()
        if i % 2:
            rl.close()  # the others go by being dropped
        del rl
    deadline = time.monotonic() + 10
    while True:
        gc.collect()
        threads, fds = _native_threads(), len(os.listdir("/proc/self/fd"))
        if (threads <= start_threads and fds <= start_fds) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert threads <= start_threads, f"{threads - start_threads} threads leaked"
    assert fds <= start_fds, f"{fds - start_fds} descriptors leaked"
    assert not list(_events._open)
    assert records.of("released")  # (a client closed at once may not have logged its last)
