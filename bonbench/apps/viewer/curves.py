"""A run's k-curves (pass / bon / maj / wmaj / ... with their CI bands) as the numbers of an inline SVG.

``curve_plot`` reads curves.json as the pipeline wrote it (every k = 1..n, bootstrap bands) and
places each curve in a fixed frame: k on a log2 axis, the value on a linear one (0 to 1 for
correctness; the curves' own range for rewards). It returns coordinates and labels only; the
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
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def _finite(values: Any) -> list[float]:
    return [float(v) for v in values or [] if v is not None and math.isfinite(float(v))]


def _curves(raw: Mapping[str, Any]) -> dict[str, dict[str, list[float | None]]]:
    out = {}
    for key, c in raw.items():
        if isinstance(c, Mapping) and isinstance(c.get("k"), list) and isinstance(c.get("value"), list):
            n = len(c["k"])
            if n and len(c["value"]) == n:
                out[key] = {name: list(c.get(name) or [None] * n)[:n] for name in ("k", "value", "lo", "hi")}
    return out


def curve_plot(raw: Mapping[str, Any]) -> Plot | None:
    """The plot of curves.json ``raw``, or None when it holds no curve."""
    curves = _curves(raw)
    if not curves:
        return None
    ks = [k for c in curves.values() for k in _finite(c["k"]) if k >= 1]
    values = [v for c in curves.values() for name in ("value", "lo", "hi") for v in _finite(c[name])]
    if not ks or not values:
        return None
    k_max = max(ks)
    lo, hi = (0.0, 1.0) if min(values) >= 0 and max(values) <= 1 else (min(values), max(values))
    hi = hi if hi > lo else lo + 1.0
    span_x = max(math.log2(k_max), 1.0)

    def x(k: float) -> float:
        return LEFT + (WIDTH - RIGHT - LEFT) * math.log2(k) / span_x

    def y(v: float) -> float:
        return TOP + (HEIGHT - BOTTOM - TOP) * (1 - (v - lo) / (hi - lo))

    lines = []
    for i, key in enumerate(sorted(curves, key=curve_sort_key)):
        c = curves[key]
        pts = [(x(float(k)), y(float(v))) for k, v in zip(c["k"], c["value"], strict=True)
               if k is not None and v is not None and float(k) >= 1 and math.isfinite(float(v))]
        band = [(x(float(k)), y(float(h))) for k, h in zip(c["k"], c["hi"], strict=True)
                if k is not None and h is not None and float(k) >= 1 and math.isfinite(float(h))]
        band += [(x(float(k)), y(float(v))) for k, v in reversed(list(zip(c["k"], c["lo"], strict=True)))
                 if k is not None and v is not None and float(k) >= 1 and math.isfinite(float(v))]
        color = curve_color(key) or ""
        lines.append(Line(curve_label(key), color if _HEX.fullmatch(color) else "#777777",
                          " ".join(f"{a:.1f},{b:.1f}" for a, b in pts), " ".join(f"{a:.1f},{b:.1f}" for a, b in band),
                          TOP + 14 + 16 * i))
    x_ticks, k = [], 1
    while k <= k_max:
        x_ticks.append((x(k), str(k)))
        k *= 2
    y_ticks = [(y(lo + (hi - lo) * f), f"{lo + (hi - lo) * f:.2f}") for f in (0, 0.25, 0.5, 0.75, 1)]
    return Plot(lines, x_ticks, y_ticks)
