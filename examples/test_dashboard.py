"""examples/dashboard.py on a small synthetic timeline: what a reader of the picture relies on.

Run by scripts/test (`python3 -m pytest examples/test_dashboard.py`); starts no demo and no server.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("dashboard", HERE / "dashboard.py")
assert _spec and _spec.loader
dashboard = importlib.util.module_from_spec(_spec)
sys.modules["dashboard"] = dashboard  # dataclasses look their module up there
_spec.loader.exec_module(dashboard)

SVG = "{http://www.w3.org/2000/svg}"
A, B, C = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"
HANG = (2.0, 4.0)  # B hung
CRASH = (5.0, 7.0)  # C down


def synthetic_timeline() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"t": 0.0, "type": "run", "nodes": [A, B, C], "workers": 2, "seconds": 10}
    ]
    for i in range(1000):  # an attempt every 10 ms: fast, but slow while B hangs
        t = i * 0.01
        slow = HANG[0] <= t < HANG[1]
        lines.append(
            {
                "t": t,
                "type": "acquire",
                "outcome": "acquired",
                "latency_ms": (40.0 if i % 2 else 60.0) if slow else 0.2 + (i % 7) * 0.01,
            }
        )
    lines.append({"t": 2.5, "type": "acquire", "outcome": "refused", "latency_ms": 400.0})
    lines += [
        {"t": HANG[0], "type": "fault", "node": B, "action": "hang"},
        {"t": HANG[1], "type": "fault", "node": B, "action": "resume"},
        {"t": CRASH[0], "type": "fault", "node": C, "action": "crash"},
        {"t": CRASH[1], "type": "fault", "node": C, "action": "restart"},
        {
            "t": 2.3,
            "type": "event",
            "kind": "node_disconnected",
            "node": B,
            "reason": 'Resource temporarily unavailable "os error 11" <&>',
        },
        {"t": 4.1, "type": "event", "kind": "node_connected", "node": B, "reason": None},
        {"t": 5.02, "type": "event", "kind": "node_disconnected", "node": C, "reason": "refused"},
        {"t": 7.3, "type": "event", "kind": "node_connected", "node": C, "reason": None},
        {"t": 7.3, "type": "event", "kind": "node_restarted", "node": C, "reason": "run id"},
    ]
    return lines


def render(tmp_path: pathlib.Path, lines: list[dict[str, Any]]) -> ET.Element:
    timeline = tmp_path / "timeline.jsonl"
    timeline.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.svg"
    assert dashboard.main(["dashboard.py", str(timeline), str(out)]) == 0
    return ET.parse(out).getroot()  # parses as XML, or the test fails here


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in e.get("class", "").split()]


def time_axis(root: ET.Element) -> tuple[float, float]:
    """(x at t = 0, pixels per second), read from the labelled ticks, which must agree."""
    ticks = []
    for g in by_class(root, "g", "x-tick"):
        line = g.find(SVG + "line")
        assert line is not None
        ticks.append((float(g.get("data-t", "nan")), float(line.get("x1", "nan"))))
    assert len(ticks) >= 3
    (t0, x0), (t1, x1) = ticks[0], ticks[-1]
    scale = (x1 - x0) / (t1 - t0)
    for t, x in ticks:
        assert x == pytest.approx(x0 + (t - t0) * scale, abs=0.2)
    labels = [t.text for g in by_class(root, "g", "x-tick") for t in g.iter(SVG + "text")]
    assert "0" in labels and "10" in labels
    return x0 - t0 * scale, scale


def test_one_lane_per_node_named_by_its_address(tmp_path: pathlib.Path) -> None:
    root = render(tmp_path, synthetic_timeline())
    lanes = {g.get("data-node"): g for g in by_class(root, "g", "lane")}
    assert list(lanes) == [A, B, C]
    for node, lane in lanes.items():
        assert node in [t.text for t in lane.iter(SVG + "text")]


def test_fault_intervals_sit_where_the_time_axis_puts_them(tmp_path: pathlib.Path) -> None:
    root = render(tmp_path, synthetic_timeline())
    x_at_0, per_second = time_axis(root)
    lanes = {g.get("data-node"): g for g in by_class(root, "g", "lane")}
    assert by_class(lanes[A], "rect", "fault") == []
    for node, kind, (start, end) in ((B, "hung", HANG), (C, "down", CRASH)):
        (rect,) = by_class(lanes[node], "rect", "fault")
        assert kind in rect.get("class", "").split()
        x, width = float(rect.get("x", "nan")), float(rect.get("width", "nan"))
        assert x == pytest.approx(x_at_0 + start * per_second, abs=0.2)
        assert x + width == pytest.approx(x_at_0 + end * per_second, abs=0.2)
    # The client's events are marked in their lanes: B disconnected and connected, C also
    # restarted.
    assert len(list(lanes[B].iter(SVG + "polygon"))) == 2
    assert len(list(lanes[C].iter(SVG + "polygon"))) == 3


def test_percentile_lines_show_the_slow_interval(tmp_path: pathlib.Path) -> None:
    root = render(tmp_path, synthetic_timeline())
    x_at_0, per_second = time_axis(root)

    def points(cls: str) -> list[tuple[float, float]]:
        (line,) = by_class(root, "polyline", cls)  # one unbroken line: every bucket has data
        return [
            (float(p.split(",")[0]), float(p.split(",")[1])) for p in line.get("points", "").split()
        ]

    for cls in ("p50", "p99"):
        pts = points(cls)
        assert len(pts) == 40  # 250 ms buckets over 10 s
        inside = [y for x, y in pts if HANG[0] < (x - x_at_0) / per_second < HANG[1]]
        outside = [
            y for x, y in pts if not HANG[0] - 0.5 < (x - x_at_0) / per_second < HANG[1] + 0.5
        ]
        # Higher latency is drawn higher up (smaller y): the hang stands out on both lines.
        assert inside and outside and max(inside) < min(outside)
    # p99 is never below p50.
    for (_, y50), (_, y99) in zip(points("p50"), points("p99")):
        assert y99 <= y50 + 0.01
    assert len(by_class(root, "path", "failed")) == 1


def test_a_fault_still_open_at_the_end_runs_to_the_end(tmp_path: pathlib.Path) -> None:
    lines = [line for line in synthetic_timeline() if line.get("action") != "restart"]
    root = render(tmp_path, lines)
    x_at_0, per_second = time_axis(root)
    (lane,) = [g for g in by_class(root, "g", "lane") if g.get("data-node") == C]
    (rect,) = by_class(lane, "rect", "fault")
    end = float(rect.get("x", "nan")) + float(rect.get("width", "nan"))
    assert end == pytest.approx(x_at_0 + 10 * per_second, abs=0.2)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        ("", "no acquisition attempts"),
        ('{"t": 1, "type": "acquire"\n', "not a timeline line"),
        ('{"t": NaN, "type": "acquire", "outcome": "acquired", "latency_ms": 1}\n', "finite"),
    ],
)
def test_bad_input_is_an_error_message_not_a_traceback(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    timeline = tmp_path / "timeline.jsonl"
    if content is not None:
        timeline.write_text(content)
    out = tmp_path / "out.svg"
    assert dashboard.main(["dashboard.py", str(timeline), str(out)]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert dashboard.main(["dashboard.py"]) == 2


def test_percentile_matches_the_demo_summary() -> None:
    # The demo's nearest rank: index round((n - 1) * p).
    values = [float(v) for v in range(1, 102)]
    assert dashboard.percentile(values, 0.5) == 51.0
    assert dashboard.percentile(values, 0.99) == 100.0
    assert math.isclose(dashboard.percentile([3.0], 0.99), 3.0)
