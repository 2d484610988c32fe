"""The clock guard and server probe settings, and the node status fields they fill (issue 18)."""

from __future__ import annotations

import pytest
from redis_nodes import PATIENT

import redquorum

TEN_YEARS = 315_360_000  # seconds


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("clock_guard", 1, TypeError),
        ("clock_guard", "yes", TypeError),
        ("strict_servers", 0, TypeError),
        ("clock_jump_threshold", -0.001, ValueError),
        ("clock_jump_threshold", TEN_YEARS + 0.001, ValueError),
        ("clock_jump_threshold", 2**64, ValueError),
        ("clock_jump_threshold", float("nan"), ValueError),
        ("clock_jump_threshold", True, TypeError),
        ("clock_quarantine", 0, ValueError),
        ("clock_quarantine", 0.0004, ValueError),  # rounds to 0 ms
        ("clock_quarantine", -5, ValueError),
        ("clock_quarantine", TEN_YEARS + 1, ValueError),
        ("clock_quarantine", "60", TypeError),
    ],
    ids=repr,
)
def test_bad_guard_options(urls, name, value, error):
    with pytest.raises(error, match=name):
        redquorum.Redlock(urls, **{name: value})


def test_threshold_with_the_guard_off_is_refused(urls):
    with pytest.raises(ValueError, match="clock_guard=False"):
        redquorum.Redlock(urls, clock_guard=False, clock_jump_threshold=0.1)


def test_guard_settings_are_accepted_and_lock(urls):
    for options in (
        {"clock_guard": False, "clock_quarantine": 0.001},
        {"clock_guard": True, "clock_jump_threshold": 0, "clock_quarantine": 120},
        {"clock_jump_threshold": TEN_YEARS, "strict_servers": True},
    ):
        with redquorum.Redlock(urls, node_timeout=PATIENT, **options) as client:
            with client.lock("py:guard-settings", ttl=10) as lock:
                assert lock.held, options


def test_node_status_reports_the_guards(urls):
    with redquorum.Redlock(urls, node_timeout=PATIENT, strict_servers=True) as client:
        # An acquire samples each node's TIME (calls return on a quorum).
        with client.lock("py:guard-status", ttl=10):
            pass
        statuses = client.node_status()
    assert len(statuses) == len(urls)
    for status in statuses:
        assert status.server_version and status.server_version[0].isdigit()
        assert status.server_name in ("redis", "valkey")
        assert status.persistence is not None and "AOF" in status.persistence
        assert status.warnings == ()
        assert status.quarantine_remaining == 0
        assert status.quarantine_reason is None
    offsets = [s.clock_offset for s in statuses if s.clock_offset is not None]
    assert len(offsets) >= len(urls) // 2 + 1
    # Same host: the nodes' clocks are ours, within a generous bound.
    assert all(abs(offset) < 5 for offset in offsets)


def test_guard_off_has_no_clock_offset(urls):
    with redquorum.Redlock(urls, node_timeout=PATIENT, clock_guard=False) as client:
        with client.lock("py:guard-off", ttl=10):
            pass
        assert all(s.clock_offset is None for s in client.node_status())
