"""Shared figure machinery of the analysis plots: the headless canvas, saving, readable log axes and
label placement.

What it does: ``save_figure`` (draws a ``Figure`` on the Agg canvas and writes a PNG), ``plain_log_axis``
/ ``plain_symlog_axis`` (ticks that read 1, 2, 4, ... and 0, 0.5, 1, 2, 5, ..., never ``2×10^0``),
``place_labels`` (point labels that avoid each other, the points, error bars and the legend),
``fit_k`` (the k grid a fitted law is drawn on) and ``yerr`` (an error bar from a CI). The colours of
the curve kinds are their metric records' (``bonbench.api.metric.readings.curve_color``).

What it does not do: draw any particular figure (``plots``, ``plots_policy``), read run
directories or fit anything. matplotlib is imported here at module level: importing this module
(or any plotting module) costs matplotlib's import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless CI machines have no display; must precede any backend use

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
from matplotlib.transforms import Bbox

DPI = 110


def save_figure(fig: Figure, out: Path) -> Path:
    """Draw ``fig`` on the Agg canvas and write it to ``out`` as a PNG (parent folders made); returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, format="png", dpi=DPI)
    return out


def plain_log_axis(ax: Any, values: Sequence[float], base: int = 2) -> None:
    """Log x axis whose ticks read as plain numbers (1, 2, 4, 8, ...), never ``2×10^0``.

    Major ticks at the powers of ``base`` spanning ``values`` (every other one beyond 12 ticks);
    minor ticks unlabelled, since matplotlib labels them in scientific form on short ranges."""
    finite = [float(v) for v in values if np.isfinite(v) and v > 0]
    lo, hi = (min(finite), max(finite)) if finite else (1.0, float(base))
    e_lo, e_hi = int(np.floor(np.log(lo) / np.log(base) + 1e-9)), int(np.ceil(np.log(hi) / np.log(base) - 1e-9))
    exps = list(range(e_lo, max(e_hi, e_lo + 1) + 1))
    step = max(1, -(-len(exps) // 12))
    ticks = [float(base) ** e for e in exps[::step]]
    ax.set_xscale("log", base=base)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def fit_k(k_max: float) -> np.ndarray:
    """200 log-spaced k from 1 to ``k_max``: where a fitted law is drawn."""
    return np.geomspace(1, max(k_max, 1.0), 200)



def yerr(value: float, ci: tuple[float, float]) -> list[list[float]]:
    """matplotlib's ``yerr``/``xerr`` for one point from its CI (an infinite bound draws no bar)."""
    lo, hi = ci
    return [[max(value - lo, 0.0) if np.isfinite(lo) else 0.0], [max(hi - value, 0.0) if np.isfinite(hi) else 0.0]]



def plain_symlog_axis(ax: Any, top: float) -> None:
    """Ticks 0, 0.5, 1, 2, 5, 10, 20, 50, ... up to ``top`` as plain numbers on a symlog axis."""
    ticks, decade = [0.0, 0.5], 1.0
    while decade <= max(top, 1.0) * 1.01:
        ticks += [m * decade for m in (1, 2, 5) if m * decade <= max(top, 1.0) * 1.5]
        decade *= 10
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _candidates(radius: float) -> list[tuple[float, float, str, str]]:
    r, h = radius, 0.6 * radius
    return [(r, h, "left", "bottom"), (r, -h, "left", "top"), (-r, h, "right", "bottom"), (-r, -h, "right", "top"),
            (0.0, r, "center", "bottom"), (0.0, -r, "center", "top"), (r, 0.0, "left", "center"),
            (-r, 0.0, "right", "center")]


def _overlap(a: Any, b: Any) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def place_labels(fig: Figure, ax: Any, items: Sequence[tuple[float, float, str, Any]], fontsize: float = 6,
                 bars: Sequence[tuple[tuple[float, float], tuple[float, float]]] = ()) -> list[Any]:
    """Label every point (x, y, text, colour) where its text overlaps no other label, no point, no
    error bar (``bars``: each point's (x interval, y interval)) and no legend, and stays inside the
    axes: positions around the point are tried at growing distances (a thin leader line joins a
    label placed away from its point); where none is free, the least overlapping one is used.
    Greedy, in the order given; returns the annotations."""
    canvas = FigureCanvasAgg(fig)  # becomes fig.canvas
    canvas.draw()  # lay out the figure so that text extents and data-to-pixel transforms are final
    renderer = canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pix = [ax.transData.transform((x, y)) for x, y, _, _ in items]
    dots = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in pix]
    obstacles = []
    for (x, y, _, _), ((x0, x1), (y0, y1)) in zip(items, bars, strict=False):
        (a0, b0), (a1, b1) = ax.transData.transform((x0, y)), ax.transData.transform((x1, y))
        obstacles.append(Bbox.from_extents(min(a0, a1), b0 - 1.5, max(a0, a1), b0 + 1.5))
        (a0, b0), (a1, b1) = ax.transData.transform((x, y0)), ax.transData.transform((x, y1))
        obstacles.append(Bbox.from_extents(a0 - 1.5, min(b0, b1), a0 + 1.5, max(b0, b1)))
    legend = ax.get_legend()
    if legend is not None:
        obstacles.append(legend.get_window_extent(renderer))
    placed: list[Any] = []
    out = []
    for i, (x, y, text, colour) in enumerate(items):
        best = None
        for radius in (4.0, 12.0, 22.0, 34.0):
            for dx, dy, ha, va in _candidates(radius):
                ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va,
                                  fontsize=fontsize, color=colour)
                box = ann.get_window_extent(renderer)
                cost = (sum(_overlap(box, b) for b in placed) + sum(_overlap(box, d) for j, d in enumerate(dots) if j != i)
                        + 0.5 * sum(_overlap(box, b) for b in obstacles))
                inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
                cost += 0.0 if inside else box.width * box.height
                if best is None or cost < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (cost, ann, box, radius)
                else:
                    ann.remove()
                if best[0] == 0.0:
                    break
            if best is not None and best[0] == 0.0:
                break
        assert best is not None
        _, ann, box, radius = best
        if radius > 4.0:
            ann.arrow_patch = None
            ann.remove()
            ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=ann.xyann, ha=ann.get_ha(),
                              va=ann.get_va(), fontsize=fontsize, color=colour,
                              arrowprops={"arrowstyle": "-", "lw": 0.4, "color": colour, "shrinkA": 0, "shrinkB": 2})
        ann.set_in_layout(False)
        placed.append(box)
        out.append(ann)
    return out
