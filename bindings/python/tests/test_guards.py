"""The clock guard and server probe settings, and the node status fields they fill (issue 18)."""

from __future__ import annotations

import pytest
from redis_nodes import PATIENT_MS

import redquorum

TEN_YEARS_MS = 315_360_000_000


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("clock_guard", 1, TypeError),
        ("clock_guard", "yes", TypeError),
        ("strict_servers", 0, TypeError),
        ("clock_jump_threshold_ms", -1, ValueError),
        ("clock_jump_threshold_ms", TEN_YEARS_MS + 1, ValueError),
        ("clock_jump_threshold_ms", 2**64, ValueError),
        ("clock_jump_threshold_ms", 1.5, TypeError),
        ("clock_jump_threshold_ms", True, TypeError),
        ("clock_quarantine_ms", 0, ValueError),
        ("clock_quarantine_ms", -5, ValueError),
        ("clock_quarantine_ms", TEN_YEARS_MS + 1, ValueError),
        ("clock_quarantine_ms", "60000", TypeError),
    ],
    ids=repr,
)
def test_bad_guard_options(urls, name, value, error):
    with pytest.raises(error, match=name):
        redquorum.Redlock(urls, **{name: value})


def test_threshold_with_the_guard_off_is_refused(urls):
    with pytest.raises(ValueError, match="clock_guard=False"):
        redquorum.Redlock(urls, clock_guard=False, clock_jump_threshold_ms=100)


def test_guard_settings_are_accepted_and_lock(urls):
    for options in (
        {"clock_guard": False, "clock_quarantine_ms": 1},
        {"clock_guard": True, "clock_jump_threshold_ms": 0, "clock_quarantine_ms": 120_000},
        {"clock_jump_threshold_ms": TEN_YEARS_MS, "strict_servers": True},
    ):
        with redquorum.Redlock(urls, node_timeout_ms=PATIENT_MS, **options) as client:
            with client.lock("py:guard-settings", 10_000) as lock:
                assert lock.held, options


def test_node_status_reports_the_guards(urls):
    with redquorum.Redlock(urls, node_timeout_ms=PATIENT_MS, strict_servers=True) as client:
        # An acquire samples each node's TIME (calls return on a quorum).
        with client.lock("py:guard-status", 10_000):
            pass
        statuses = client.node_status()
    assert len(statuses) == len(urls)
    for status in statuses:
        assert status.server_version and status.server_version[0].isdigit()
        assert status.server_name in ("redis", "valkey")
        assert status.persistence is not None and "AOF" in status.persistence
        assert status.warnings == ()
        assert status.quarantine_remaining_ms == 0
        assert status.quarantine_reason is None
    offsets = [s.clock_offset_ms for s in statuses if s.clock_offset_ms is not None]
    assert len(offsets) >= len(urls) // 2 + 1
    # Same host: the nodes' clocks are ours, within a generous bound.
    assert all(abs(offset) < 5000 for offset in offsets)


def test_guard_off_has_no_clock_offset(urls):
    with redquorum.Redlock(urls, node_timeout_ms=PATIENT_MS, clock_guard=False) as client:
        with client.lock("py:guard-off", 10_000):
            pass
        assert all(s.clock_offset_ms is None for s in client.node_status())
