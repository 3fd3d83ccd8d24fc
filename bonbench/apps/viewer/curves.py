"""A run's k-curves (pass / bon / maj / wmaj / ... with their CI bands) as the numbers of an inline SVG.

``curve_plot`` reads curves.json as the pipeline wrote it (every k = 1..n, bootstrap bands) and
places each curve in a fixed frame (``frame``): k on a log2 axis, the value on a linear one (0 to 1
for correctness; the curves' own range for rewards); ``frame`` draws a checkpoint's training log by
step the same way. It returns coordinates and labels only; the
template ``templates/curves.html.j2`` draws them, escaped like every other value, so the page needs
no image file, no script and no plotting library, and opens from ``file://``. Labels and colours
are the metric registry's (``bonbench.api.metric.readings``); a colour that is not a hex code is
replaced by grey.

What it does not do: recompute a curve (curves.json holds them) or fit a scaling law (``bonbench plot``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.api.metric.readings import curve_color, curve_label, curve_sort_key

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 300, 48, 150, 12, 34
_HEX = re.compile(r"#[0-9a-fA-F]{3,8}")


@dataclass(frozen=True)
class Line:
    """One curve: its legend label, colour, the polyline's points and the band's polygon."""

    label: str
    color: str
    points: str
    band: str
    legend_y: float


@dataclass(frozen=True)
class Plot:
    """A frame of curves: its lines and the ticks of both axes (position, text)."""

    lines: Sequence[Line]
    x_ticks: Sequence[tuple[float, str]]
    y_ticks: Sequence[tuple[float, str]]
    x_label: str = "k"
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


@dataclass(frozen=True)
class Series:
    """One line to draw: its points (x, y) and, optionally, its band's (x, lo, hi)."""

    label: str
    color: str
    points: Sequence[tuple[float, float]]
    band: Sequence[tuple[float, float, float]] = ()


def _finite(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))


def frame(series: Sequence[Series], log_x: bool, x_label: str, unit_y: bool) -> Plot | None:
    """``series`` placed in the frame: x on a log2 axis (k) or a linear one (steps); y from 0 to 1
    when ``unit_y`` and every value lies there, else the values' own range. None with no point."""
    xs = [x for s in series for x, _ in s.points if not log_x or x >= 1]
    ys = [y for s in series for _, y in s.points] + [v for s in series for _, lo, hi in s.band for v in (lo, hi)]
    if not xs or not ys:
        return None
    x_lo, x_hi = (0.0, max(math.log2(max(xs)), 1.0)) if log_x else (min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    y_lo, y_hi = (0.0, 1.0) if unit_y and min(ys) >= 0 and max(ys) <= 1 else (min(ys), max(ys))
    y_hi = y_hi if y_hi > y_lo else y_lo + 1.0

    def x(v: float) -> float:
        return LEFT + (WIDTH - RIGHT - LEFT) * ((math.log2(v) if log_x else v) - x_lo) / (x_hi - x_lo)

    def y(v: float) -> float:
        return TOP + (HEIGHT - BOTTOM - TOP) * (1 - (v - y_lo) / (y_hi - y_lo))

    def joined(pts: Any) -> str:
        return " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)

    lines = []
    for i, s in enumerate(series):
        keep = [(a, b) for a, b in s.points if not log_x or a >= 1]
        band = [(a, lo, hi) for a, lo, hi in s.band if not log_x or a >= 1]
        outline = [(x(a), y(hi)) for a, _, hi in band] + [(x(a), y(lo)) for a, lo, _ in reversed(band)]
        color = s.color if _HEX.fullmatch(s.color) else "#777777"
        lines.append(Line(s.label, color, joined((x(a), y(b)) for a, b in keep), joined(outline), TOP + 14 + 16 * i))
    if log_x:
        ticks = [2 ** i for i in range(int(x_hi) + 1)]
    else:
        step = max(1, math.ceil((x_hi - x_lo) / 8))
        ticks = list(range(math.ceil(x_lo), int(x_hi) + 1, step))
    x_ticks = [(x(t), str(t)) for t in ticks]
    y_ticks = [(y(y_lo + (y_hi - y_lo) * f), f"{y_lo + (y_hi - y_lo) * f:.3g}") for f in (0, 0.25, 0.5, 0.75, 1)]
    return Plot(lines, x_ticks, y_ticks, x_label)


def curve_plot(raw: Mapping[str, Any]) -> Plot | None:
    """The k-curves of curves.json ``raw`` (every one it holds, in the registry's order), or None."""
    series = []
    for key in sorted(raw, key=curve_sort_key):
        c = raw[key]
        if not isinstance(c, Mapping) or not isinstance(c.get("k"), list) or not isinstance(c.get("value"), list):
            continue  # bookkeeping beside the curves
        n = len(c["k"])
        lo, hi = (list(c.get(name) or [None] * n) for name in ("lo", "hi"))
        points = [(float(k), float(v)) for k, v in zip(c["k"], c["value"], strict=False) if _finite(k) and _finite(v)]
        band = [(float(k), float(a), float(b)) for k, a, b in zip(c["k"], lo, hi, strict=False)
                if _finite(k) and _finite(a) and _finite(b)]
        series.append(Series(curve_label(key), curve_color(key) or "", points, band))
    return frame(series, log_x=True, x_label="k", unit_y=True)
