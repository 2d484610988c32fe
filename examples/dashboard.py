#!/usr/bin/env python3
"""Draws the demo's timeline as one SVG picture.

    cargo run --release --example demo -- --timeline run.jsonl
    python3 examples/dashboard.py run.jsonl dashboard.svg

(scripts/dashboard does both.) The picture has four panels on one time axis but the last:
acquire latency over time (each attempt a faint dot, the p50 and p99 of each 250 ms bucket as
lines, log scale), acquisitions per second, one lane per node with the intervals the demo hung
or crashed it and the client's node events, and a histogram of the whole run's latencies.

Python 3 standard library only. The timeline is JSON lines, as examples/demo.rs writes them.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

BUCKET = 0.25  # seconds per bucket of the percentile lines and the throughput bars
WIDTH = 900
LEFT, RIGHT = 120, 24  # margins of the time panels; the left one holds the node addresses
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"

P50_COLOUR, P99_COLOUR = "#1f5fa8", "#c8322a"
FAILED_COLOUR = "#e07b00"
FAULT_STYLE = {  # interval kind -> (fill, label)
    "hung": ("#f4b400", "hung (SIGSTOP)"),
    "down": ("#d93025", "down (SIGKILL)"),
}
EVENT_STYLE = {  # node event -> (marker, colour, legend)
    "node_disconnected": ("down", "#a50e0e", "disconnected"),
    "node_connected": ("up", "#188038", "connected"),
    "node_restarted": ("diamond", "#1f5fa8", "restart seen"),
    "node_quarantined": ("square", "#7b1fa2", "quarantined"),
}


class TimelineError(Exception):
    """The timeline cannot be drawn; the message says why."""


@dataclass
class Attempt:
    t: float
    outcome: str
    latency_ms: float


@dataclass
class Timeline:
    attempts: list[Attempt] = field(default_factory=list)
    faults: list[tuple[float, str, str]] = field(default_factory=list)  # t, node, action
    events: list[tuple[float, str, str, str]] = field(default_factory=list)  # t, kind, node, reason
    nodes: list[str] = field(default_factory=list)
    workers: int | None = None
    seconds: float | None = None

    @property
    def end(self) -> float:
        """The length of the run: as configured, or else the last thing seen."""
        if self.seconds and self.seconds > 0:
            return self.seconds
        seen = [a.t + a.latency_ms / 1000 for a in self.attempts]
        seen += [f[0] for f in self.faults] + [e[0] for e in self.events]
        return max(seen + [BUCKET])


def finite(value: object) -> float:
    """A number of the timeline; raises ValueError for anything else (NaN and infinities too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


def read_timeline(path: str) -> Timeline:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise TimelineError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise TimelineError(f"cannot read {path}: not text ({e.reason})") from None
    tl = Timeline()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            kind, t = r["type"], finite(r["t"])
            if kind == "acquire":
                tl.attempts.append(Attempt(t, str(r["outcome"]), finite(r["latency_ms"])))
            elif kind == "fault":
                tl.faults.append((t, str(r["node"]), str(r["action"])))
            elif kind == "event":
                tl.events.append((t, str(r["kind"]), str(r["node"]), str(r.get("reason") or "")))
            elif kind == "run":
                tl.nodes = [str(n) for n in r.get("nodes", [])]
                tl.workers = r.get("workers")
                tl.seconds = finite(r["seconds"]) if r.get("seconds") else None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            excerpt = line.strip()[:80]
            raise TimelineError(f"{path}:{number}: not a timeline line ({e}): {excerpt}") from None
    if not tl.attempts:
        raise TimelineError(f"{path}: no acquisition attempts (is it a demo --timeline file?)")
    for _, node, _ in tl.faults:
        if node not in tl.nodes:
            tl.nodes.append(node)
    for _, _, node, _ in tl.events:
        if node not in tl.nodes:
            tl.nodes.append(node)
    return tl


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest rank, as the demo's summary computes it."""
    return sorted_values[int(math.floor((len(sorted_values) - 1) * p + 0.5))]


def fault_intervals(tl: Timeline) -> list[tuple[str, str, float, float]]:
    """(node, "hung" | "down", start, end) from the fault lines; an interval still open at the
    end of the run ends there."""
    opening = {"hang": ("hung", "resume"), "crash": ("down", "restart")}
    open_since: dict[tuple[str, str], float] = {}
    out = []
    for t, node, action in sorted(tl.faults):
        if action in opening:
            open_since.setdefault((node, action), t)
        for start_action, (what, end_action) in opening.items():
            if action == end_action and (node, start_action) in open_since:
                out.append((node, what, open_since.pop((node, start_action)), t))
    for (node, action), start in open_since.items():
        out.append((node, opening[action][0], start, tl.end))
    return sorted(out, key=lambda i: i[2])


def nice_step(span: float, most: int) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving at most `most` steps over span."""
    raw = span / max(most, 1)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def fmt_number(v: float) -> str:
    return f"{v:g}" if v < 1e5 else f"{v:.0f}"


class Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(
        self, x: float, y: float, s: str, size: int = 12, anchor: str = "start", extra: str = ""
    ) -> None:
        self.add(
            f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}'"
            f" {extra}>{escape(s)}</text>"
        )

    def frame(self, x: float, y: float, w: float, h: float) -> None:
        """A panel's outline."""
        self.add(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' fill='none' stroke='#999'/>")

    def line(self, x1: float, y1: float, x2: float, y2: float, style: str) -> None:
        self.add(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' {style}/>")


def marker(svg: Svg, shape: str, x: float, y: float, colour: str, title: str = "") -> None:
    s = 5.0
    points = {
        "down": [(x - s, y - s), (x + s, y - s), (x, y + s)],
        "up": [(x - s, y + s), (x + s, y + s), (x, y - s)],
        "diamond": [(x, y - s), (x + s, y), (x, y + s), (x - s, y)],
        "square": [(x - s, y - s), (x + s, y - s), (x + s, y + s), (x - s, y + s)],
    }[shape]
    tip = f"<title>{escape(title)}</title>" if title else ""
    pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    svg.add(
        f"<polygon points='{pts}' fill='{colour}' stroke='white' stroke-width='0.8'>{tip}</polygon>"
    )


class Picture:
    """The SVG of one timeline, panel by panel, top to bottom."""

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.svg = Svg()
        self.end = tl.end
        self.plot_w = WIDTH - LEFT - RIGHT
        self.acquired = sorted(a.latency_ms for a in tl.attempts if a.outcome == "acquired")
        self.failed = [a for a in tl.attempts if a.outcome != "acquired"]
        self.intervals = fault_intervals(tl)
        self.n_buckets = int(math.ceil(self.end / BUCKET))
        # The latency scale, shared by panel (a) and the histogram: whole decades, two at least.
        all_ms = [a.latency_ms for a in tl.attempts if a.latency_ms > 0]
        self.lo = 10 ** math.floor(math.log10(min(all_ms))) if all_ms else 0.01
        hi = 10 ** math.ceil(math.log10(max(all_ms))) if all_ms else 1000
        self.hi = max(hi, self.lo * 100)
        # Panel tops and heights.
        self.lat_top, self.lat_h = 92, 220
        self.thr_top, self.thr_h = self.lat_top + self.lat_h + 44, 80
        self.lanes_top, self.lane_h = self.thr_top + self.thr_h + 30, 24
        self.lanes_h = self.lane_h * max(len(tl.nodes), 1)
        self.hist_top, self.hist_h, self.hist_w = self.lanes_top + self.lanes_h + 100, 130, 500
        self.height = self.hist_top + self.hist_h + 50

    def x_of(self, t: float) -> float:
        """Time (seconds since the start) to x, for the three time panels."""
        return LEFT + max(0.0, min(t, self.end)) / self.end * self.plot_w

    def log_fraction(self, ms: float) -> float:
        """Where ms sits between lo (0) and hi (1) on the log latency scale."""
        ms = min(max(ms, self.lo), self.hi)
        return (math.log10(ms) - math.log10(self.lo)) / math.log10(self.hi / self.lo)

    def y_lat(self, ms: float) -> float:
        return self.lat_top + self.lat_h - self.log_fraction(ms) * self.lat_h

    def x_hist(self, ms: float) -> float:
        return LEFT + self.log_fraction(ms) * self.hist_w

    def heading(self, y: float, s: str) -> None:
        self.svg.text(LEFT, y, s, size=13, extra="font-weight='bold'")

    def render(self) -> str:
        self.title()
        self.time_axis()
        self.latency()
        self.throughput()
        self.lanes()
        self.histogram()
        head = (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{self.height}'"
            f" viewBox='0 0 {WIDTH} {self.height}' {FONT}>\n"
            f"<rect width='{WIDTH}' height='{self.height}' fill='white'/>\n"
        )
        return head + "\n".join(self.svg.parts) + "\n</svg>\n"

    def title(self) -> None:
        """The title, and the figures the demo's summary prints."""
        tl, svg, acquired = self.tl, self.svg, self.acquired
        title = "redlock demo: contention on one resource"
        if tl.faults:
            title += " while nodes hang and crash"
        svg.text(LEFT, 26, title, size=16, extra="font-weight='bold'")
        workers = f"{tl.workers} workers, " if tl.workers else ""
        summary = f"{workers}{len(tl.nodes)} nodes, {self.end:.0f} s: {len(acquired)} acquisitions"
        if acquired:
            summary += (
                f", latency p50 {percentile(acquired, 0.5):.2f} ms,"
                f" p99 {percentile(acquired, 0.99):.2f} ms"
            )
        outcomes = sorted({a.outcome for a in self.failed})
        if outcomes:
            summary += "; gave up: " + ", ".join(
                f"{o.replace('_', ' ')} {sum(1 for a in self.failed if a.outcome == o)}"
                for o in outcomes
            )
        svg.text(LEFT, 46, summary, size=12, extra="fill='#444'")

    def time_axis(self) -> None:
        """Ticks and grid lines through the three time panels, and the faults as faint bands
        through the latency and throughput panels, so that spikes and dips line up with them."""
        svg = self.svg
        step = nice_step(self.end, 12)
        for i in range(int(self.end / step + 1e-9) + 1):
            t = i * step
            x = self.x_of(t)
            svg.add(f"<g class='x-tick' data-t='{t:g}'>")
            for top, panel_h in (
                (self.lat_top, self.lat_h),
                (self.thr_top, self.thr_h),
                (self.lanes_top, self.lanes_h),
            ):
                svg.line(x, top, x, top + panel_h, "stroke='#e6e6e6'")
            for label_y in (self.lat_top + self.lat_h + 15, self.lanes_top + self.lanes_h + 15):
                svg.text(x, label_y, f"{t:g}", size=11, anchor="middle")
            svg.add("</g>")
        for label_y in (self.lat_top + self.lat_h + 31, self.lanes_top + self.lanes_h + 31):
            svg.text(
                LEFT + self.plot_w / 2,
                label_y,
                "seconds since the start",
                size=11,
                anchor="middle",
                extra="fill='#444'",
            )
        for _, what, start, stop in self.intervals:
            fill = FAULT_STYLE[what][0]
            for top, panel_h in ((self.lat_top, self.lat_h), (self.thr_top, self.thr_h)):
                svg.add(
                    f"<rect class='fault-band' x='{self.x_of(start):.1f}' y='{top}'"
                    f" width='{self.x_of(stop) - self.x_of(start):.1f}' height='{panel_h}'"
                    f" fill='{fill}' fill-opacity='0.10'/>"
                )

    def latency(self) -> None:
        """(a) Each attempt's latency at the time it began, and p50 and p99 per bucket."""
        svg, plot_w, lo, hi = self.svg, self.plot_w, self.lo, self.hi
        self.heading(self.lat_top - 10, "acquire latency (ms, log scale)")
        decade = lo
        while decade <= hi * 1.001:
            y = self.y_lat(decade)
            svg.line(LEFT, y, LEFT + plot_w, y, "stroke='#dddddd'")
            svg.text(LEFT - 6, y + 4, fmt_number(decade), size=11, anchor="end")
            for m in (2, 5):
                if decade * m < hi:
                    y = self.y_lat(decade * m)
                    svg.line(LEFT, y, LEFT + plot_w, y, "stroke='#f0f0f0'")
            decade *= 10
        svg.frame(LEFT, self.lat_top, plot_w, self.lat_h)

        # Dots: one per occupied pixel, so that 10,000 attempts stay a small file.
        seen: set[tuple[int, int]] = set()
        dots = []
        for a in self.tl.attempts:
            if a.outcome == "acquired":
                cell = (round(self.x_of(a.t)), round(self.y_lat(a.latency_ms)))
                if cell not in seen:
                    seen.add(cell)
                    dots.append(f"M{cell[0]},{cell[1]}h0.01")
        svg.add(
            f"<path class='dots' d='{''.join(dots)}' stroke='#777' stroke-opacity='0.35'"
            " stroke-width='2.2' stroke-linecap='round' fill='none'/>"
        )
        for a in self.failed:
            x, y = self.x_of(a.t), self.y_lat(a.latency_ms)
            svg.add(
                f"<path class='failed' d='M{x - 3:.1f},{y - 3:.1f}l6,6m0,-6l-6,6'"
                f" stroke='{FAILED_COLOUR}' stroke-width='1.6'>"
                f"<title>{escape(a.outcome)} after {a.latency_ms:.1f} ms</title></path>"
            )

        # Percentile lines per bucket (acquired attempts, by when they began); gaps where none.
        buckets: dict[int, list[float]] = {}
        for a in self.tl.attempts:
            if a.outcome == "acquired":
                buckets.setdefault(int(max(a.t, 0) / BUCKET), []).append(a.latency_ms)
        for name, p, colour in (("p99", 0.99, P99_COLOUR), ("p50", 0.5, P50_COLOUR)):
            runs: list[list[str]] = [[]]
            for b in range(self.n_buckets):
                values = sorted(buckets.get(b, []))
                if not values:
                    if runs[-1]:
                        runs.append([])
                    continue
                x = self.x_of(min((b + 0.5) * BUCKET, self.end))
                runs[-1].append(f"{x:.1f},{self.y_lat(percentile(values, p)):.1f}")
            for run in runs:
                if run:
                    svg.add(
                        f"<polyline class='{name}' points='{' '.join(run)}' fill='none'"
                        f" stroke='{colour}' stroke-width='2' stroke-linejoin='round'/>"
                    )

        # The legend, above the panel on the right.
        lx, ly = LEFT + plot_w - 400, self.lat_top - 14
        svg.line(lx, ly, lx + 18, ly, f"stroke='{P50_COLOUR}' stroke-width='2'")
        svg.text(lx + 22, ly + 4, f"p50 per {BUCKET * 1000:.0f} ms", size=11)
        svg.line(lx + 120, ly, lx + 138, ly, f"stroke='{P99_COLOUR}' stroke-width='2'")
        svg.text(lx + 142, ly + 4, "p99", size=11)
        svg.add(f"<circle cx='{lx + 182}' cy='{ly}' r='2.5' fill='#777' fill-opacity='0.6'/>")
        svg.text(lx + 188, ly + 4, "an acquisition", size=11)
        svg.add(
            f"<path d='M{lx + 282},{ly - 3}l6,6m0,-6l-6,6' stroke='{FAILED_COLOUR}'"
            " stroke-width='1.6'/>"
        )
        svg.text(lx + 293, ly + 4, "gave up (failed)", size=11)

    def throughput(self) -> None:
        """(b) Acquisitions per second, by when they completed."""
        svg, top, h, end = self.svg, self.thr_top, self.thr_h, self.end
        per_bucket = [0] * self.n_buckets
        for a in self.tl.attempts:
            if a.outcome == "acquired":
                b = int(max(a.t + a.latency_ms / 1000, 0) / BUCKET)
                if b < self.n_buckets:
                    per_bucket[b] += 1
        # A last bucket cut short by the end of the run counts over its own length.
        rates = [n / (min((b + 1) * BUCKET, end) - b * BUCKET) for b, n in enumerate(per_bucket)]
        top_rate = max(rates + [1.0])
        rate_step = nice_step(top_rate, 3)
        rate_max = math.ceil(top_rate / rate_step) * rate_step
        self.heading(top - 10, "acquisitions per second")
        r = 0.0
        while r <= rate_max + 1e-9:
            y = top + h - r / rate_max * h
            svg.line(LEFT, y, LEFT + self.plot_w, y, "stroke='#e6e6e6'")
            svg.text(LEFT - 6, y + 4, fmt_number(r), size=11, anchor="end")
            r += rate_step
        for b, rate in enumerate(rates):
            bar_h = rate / rate_max * h
            x0, x1 = self.x_of(b * BUCKET), self.x_of((b + 1) * BUCKET)  # the last may be short
            svg.add(
                f"<rect class='rate' x='{x0 + 0.5:.1f}' y='{top + h - bar_h:.1f}'"
                f" width='{max(x1 - x0 - 1, 0.5):.1f}' height='{bar_h:.1f}' fill='#5b8fd0'/>"
            )
        svg.frame(LEFT, top, self.plot_w, h)

    def lanes(self) -> None:
        """(c) One lane per node: the fault intervals and the client's node events."""
        svg, lane_h = self.svg, self.lane_h
        self.heading(
            self.lanes_top - 10, "nodes: faults the demo injected, and what the client saw"
        )
        for i, node in enumerate(self.tl.nodes):
            top = self.lanes_top + i * lane_h
            mid = top + lane_h / 2
            svg.add(f"<g class='lane' data-node={quoteattr(node)}>")
            if i % 2 == 0:
                svg.add(
                    f"<rect x='{LEFT}' y='{top}' width='{self.plot_w}' height='{lane_h}'"
                    " fill='#f7f7f7'/>"
                )
            svg.text(LEFT - 6, mid + 4, node, size=11, anchor="end", extra="class='lane-label'")
            for owner, what, start, stop in self.intervals:
                if owner != node:
                    continue
                fill, label = FAULT_STYLE[what]
                x0, x1 = self.x_of(start), self.x_of(stop)
                svg.add(
                    f"<rect class='fault {what}' data-start='{start:.3f}' data-end='{stop:.3f}'"
                    f" x='{x0:.1f}' y='{top + 3}' width='{x1 - x0:.1f}' height='{lane_h - 6}'"
                    f" fill='{fill}' fill-opacity='0.55' rx='3'>"
                    f"<title>{escape(label)} {start:.2f}s to {stop:.2f}s</title></rect>"
                )
                if x1 - x0 > 90:
                    text = f"{label}  {start:.1f}–{stop:.1f} s"
                    svg.text((x0 + x1) / 2, mid + 4, text, size=10, anchor="middle")
            last_x = -100.0
            for t, kind, owner, reason in sorted(self.tl.events):
                if owner == node and kind in EVENT_STYLE and 0 <= t <= self.end:
                    shape, colour, legend = EVENT_STYLE[kind]
                    tip = f"{legend} at {t:.2f}s" + (f": {reason}" if reason else "")
                    # Events of one poll (connected and restart seen) side by side, not on top.
                    x = max(self.x_of(t), last_x + 11)
                    marker(svg, shape, x, mid, colour, tip)
                    last_x = x
            svg.add("</g>")
        svg.frame(LEFT, self.lanes_top, self.plot_w, self.lanes_h)
        if not self.tl.nodes:
            text = "no node list, faults or node events in the timeline"
            svg.text(LEFT + 8, self.lanes_top + 16, text, size=11)

        # The legend, under the axis labels.
        lx, ly = LEFT, self.lanes_top + self.lanes_h + 50
        for fill, label in FAULT_STYLE.values():
            svg.add(
                f"<rect x='{lx}' y='{ly - 6}' width='16' height='12' fill='{fill}'"
                " fill-opacity='0.55' rx='2'/>"
            )
            svg.text(lx + 21, ly + 4, label, size=11)
            lx += 125
        for shape, colour, legend in EVENT_STYLE.values():
            marker(svg, shape, lx + 6, ly, colour)
            svg.text(lx + 15, ly + 4, legend, size=11)
            lx += 24 + 7 * len(legend)

    def histogram(self) -> None:
        """(d) The whole run's acquire latencies, 4 log-spaced bins per decade; to its right,
        the key of its percentile lines and the faults as the demo printed them."""
        svg, lo, acquired = self.svg, self.lo, self.acquired
        top, h, bottom = self.hist_top, self.hist_h, self.hist_top + self.hist_h
        self.heading(top - 10, "acquire latency, whole run (acquisitions per bin)")
        per_decade = 4
        n_bins = int(round(math.log10(self.hi / lo) * per_decade))
        counts = [0] * n_bins
        for ms in acquired:
            b = int(self.log_fraction(ms) * n_bins)
            counts[min(b, n_bins - 1)] += 1
        top_count = max(counts + [1])
        for b, n in enumerate(counts):
            if n == 0:
                continue
            x0 = self.x_hist(lo * 10 ** (b / per_decade))
            x1 = self.x_hist(lo * 10 ** ((b + 1) / per_decade))
            # Square-root height, so that the tail's few hundred stay visible next to the bulk;
            # 14 px kept for the tallest bar's count.
            bar_h = max(math.sqrt(n / top_count) * (h - 14), 1.0)
            svg.add(
                f"<rect class='bin' x='{x0 + 0.5:.1f}' y='{bottom - bar_h:.1f}'"
                f" width='{x1 - x0 - 1:.1f}' height='{bar_h:.1f}' fill='#8c8c8c'>"
                f"<title>{n}</title></rect>"
            )
            halo = "fill='#444' stroke='white' stroke-width='3' paint-order='stroke'"
            svg.text((x0 + x1) / 2, bottom - bar_h - 3, str(n), size=9, anchor="middle", extra=halo)
        for p, colour in ((0.5, P50_COLOUR), (0.99, P99_COLOUR)) if acquired else ():
            x = self.x_hist(percentile(acquired, p))
            svg.line(x, top, x, bottom, f"stroke='{colour}' stroke-dasharray='4,3'")
        decade = lo
        while decade <= self.hi * 1.001:
            x = self.x_hist(decade)
            svg.line(x, bottom, x, bottom + 4, "stroke='#999'")
            svg.text(x, bottom + 16, fmt_number(decade), size=11, anchor="middle")
            decade *= 10
        svg.line(LEFT, bottom, LEFT + self.hist_w, bottom, "stroke='#999'")
        svg.text(
            LEFT + self.hist_w / 2,
            bottom + 32,
            "ms (log scale); bar height: square root of the count",
            size=11,
            anchor="middle",
            extra="fill='#444'",
        )

        fx, fy = LEFT + self.hist_w + 40, top - 10
        for i, (p, colour) in enumerate(((0.5, P50_COLOUR), (0.99, P99_COLOUR))):
            if acquired:
                y = fy + 4 + i * 16
                dashed = f"stroke='{colour}' stroke-width='1.5' stroke-dasharray='4,3'"
                svg.line(fx, y - 4, fx + 18, y - 4, dashed)
                text = f"p{p * 100:g} {percentile(acquired, p):.2f} ms"
                svg.text(fx + 24, y, text, size=11, extra=f"fill='{colour}'")
        fy += 50
        svg.text(fx, fy, "faults injected", size=13, extra="font-weight='bold'")
        mono = "font-family='DejaVu Sans Mono, monospace' xml:space='preserve'"
        for i, (t, node, action) in enumerate(sorted(self.tl.faults)[:6]):
            svg.text(fx, fy + 20 + i * 16, f"{t:4.1f} s  {action:<8}{node}", size=11, extra=mono)
        if not self.tl.faults:
            svg.text(fx, fy + 20, "none (the demo injects none", size=11)
            svg.text(fx, fy + 36, "into REDLOCK_NODES)", size=11)


def render(tl: Timeline) -> str:
    return Picture(tl).render()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} TIMELINE OUT.svg", file=sys.stderr)
        return 2
    try:
        picture = render(read_timeline(argv[1]))
    except TimelineError as e:
        print(f"dashboard: {e}", file=sys.stderr)
        return 1
    try:
        with open(argv[2], "w", encoding="utf-8") as f:
            f.write(picture)
    except OSError as e:
        print(f"dashboard: cannot write {argv[2]}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
