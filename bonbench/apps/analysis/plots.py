"""PNG figures: k-curves with bootstrap bands and fitted laws, temperature sweeps, co-scaling heat map,
best-of-N references and the reward-vs-KL plane.

Every function draws one figure with matplotlib's object API on the Agg canvas (no pyplot global
state, no display needed), writes it to ``out`` and returns the path. Inputs are already-computed
curves and fits; nothing here reads run directories or fits anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless CI machines have no display; must precede any backend use

import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bonbench.apps.analysis.fits import CoScaling, OptimalTemperature  # noqa: E402
from bonbench.apps.analysis.frontier import BonCurve, BonReferenceRow, PlanePoint  # noqa: E402
from bonbench.apps.analysis.laws import ScalingFit, describe  # noqa: E402
from bonbench.apps.analysis.rundir import Curve  # noqa: E402
from bonbench.apps.analysis.temperature import ContinuousOptimum, TStarFit  # noqa: E402

COLORS = {"pass": "#1f77b4", "bon": "#d62728", "maj": "#2ca02c", "max": "#9467bd"}
DPI = 110


def _save(fig: Figure, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, format="png", dpi=DPI)
    return out


def _plain_log_axis(ax: Any, values: Sequence[float], base: int = 2) -> None:
    """Log x axis whose ticks read as plain numbers (1, 2, 4, 8, ...), never ``2×10^0``.

    Major ticks at the powers of ``base`` spanning ``values`` (every other one beyond 12 ticks);
    minor ticks unlabelled, since matplotlib labels them in scientific form on short ranges."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

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


def _fit_k(k_max: float) -> np.ndarray:
    return np.geomspace(1, max(k_max, 1.0), 200)


def plot_k_curves(curves: Mapping[str, Curve], out: Path, *, title: str = "",
                  fits: Mapping[str, ScalingFit | None] | None = None, ylim: tuple[float, float] | None = (0, 1.02)) -> Path:
    """pass@k / bon@k / maj@k against k (log x) with their 95% bands; each curve's fitted law dashed.
    Curves without a colour of their own (several verifiers' bon@k) take distinct ones from a
    palette; ``ylim`` None fits the axis to the bands (small values stay readable)."""
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    spare = iter(c for c in matplotlib.colormaps["tab10"].colors if matplotlib.colors.to_hex(c) not in COLORS.values())
    for kind, c in curves.items():
        color = COLORS.get(kind) or next(spare, None)
        ok = np.isfinite(c.value)
        ax.plot(c.k[ok], c.value[ok], color=color, lw=1.8, label=f"{kind}@k")
        band = ok & np.isfinite(c.lo) & np.isfinite(c.hi)
        if band.any():
            ax.fill_between(c.k[band], c.lo[band], c.hi[band], color=color, alpha=0.2, lw=0)
        fit = (fits or {}).get(kind)
        if fit is not None:
            kk = _fit_k(float(c.k.max()))
            ax.plot(kk, fit.predict(kk), color=color, ls="--", lw=1,
                    label=f"fit {describe(fit)}, R²={fit.r2:.3f}")
    _plain_log_axis(ax, [float(k) for c in curves.values() for k in c.k])
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("value")
    if ylim is not None:
        ax.set_ylim(*ylim)
    else:
        top = max((float(np.nanmax(np.r_[c.value, c.hi])) for c in curves.values() if np.isfinite(c.value).any()), default=1.0)
        ax.set_ylim(0, min(1.02, max(top * 1.15, 0.02)))
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, out)


def plot_k_curve_comparison(runs: Mapping[str, Mapping[str, Curve]], out: Path, *, title: str = "",
                            kinds: Sequence[str] = ("pass", "bon", "maj", "max")) -> Path:
    """Several runs' k-curves on shared axes, one panel per curve kind (pass@k, bon@k, ...) that at
    least two runs have, one colour and marker per run (the first is drawn as the reference: the
    base model in a leaderboard), each with its 95% band."""
    from matplotlib.lines import Line2D

    shown = [k for k in kinds if sum(k in c for c in runs.values()) >= 2] or \
        [k for k in kinds if any(k in c for c in runs.values())][:1]
    if not shown:
        raise ValueError("no run has a k-curve to compare")
    fig = Figure(figsize=(4.2 * len(shown) + 0.6, 3.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(shown)))
    cmap = matplotlib.colormaps["tab10"]
    markers = "osD^vP*X"
    for ax, kind in zip(axes, shown):
        ks: list[float] = []
        top = 0.0
        for i, (label, curves) in enumerate(runs.items()):
            c = curves.get(kind)
            if c is None:
                continue
            ok = np.isfinite(c.value)
            color = cmap(i % 10)
            # markers at the powers of two only: dense k grids would otherwise bury the lines
            mark = [j for j, k in enumerate(c.k[ok]) if k >= 1 and float(k).is_integer() and int(k) & (int(k) - 1) == 0]
            ax.plot(c.k[ok], c.value[ok], color=color, lw=2.0 if i == 0 else 1.5, marker=markers[i % len(markers)], ms=4,
                    markevery=mark)
            band = ok & np.isfinite(c.lo) & np.isfinite(c.hi)
            if band.any():
                ax.fill_between(c.k[band], c.lo[band], c.hi[band], color=color, alpha=0.15, lw=0)
            ks += [float(k) for k in c.k[ok]]
            top = max(top, float(np.nanmax(np.r_[c.value[ok], c.hi[band]]))) if ok.any() else top
        _plain_log_axis(ax, ks)
        ax.set_xlabel("k (samples)")
        ax.set_ylabel(f"{kind}@k")
        if top <= 1.0:  # rates and rewards in [0, 1]; other rewards keep matplotlib's limits
            ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=cmap(i % 10), marker=markers[i % len(markers)], lw=1.5, ms=4) for i in range(len(runs))]
    fig.legend(handles, list(runs), loc="outside lower center", ncols=min(len(runs), 3), fontsize=7, frameon=False)
    fig.suptitle(title + " (bands: 95% bootstrap CI over problems)", fontsize=9)
    return _save(fig, out)


def plot_temperature_curves(curves: Mapping[float, Curve], fits: Mapping[float, ScalingFit | None], out: Path, *,
                            kind: str = "pass", title: str = "", extrapolate_to: float | None = None) -> Path:
    """One curve per temperature (log x) with its fitted law, extended to ``extrapolate_to``."""
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["viridis"]
    temps = sorted(curves)
    for i, t in enumerate(temps):
        color = cmap(i / max(len(temps) - 1, 1))
        c = curves[t]
        ok = np.isfinite(c.value)
        ax.plot(c.k[ok], c.value[ok], color=color, lw=1.6, label=f"T={t:g}")
        band = ok & np.isfinite(c.lo) & np.isfinite(c.hi)
        if band.any():
            ax.fill_between(c.k[band], c.lo[band], c.hi[band], color=color, alpha=0.15, lw=0)
        fit = fits.get(t)
        if fit is not None:
            kk = _fit_k(max(float(c.k.max()), extrapolate_to or 0.0))
            ax.plot(kk, fit.predict(kk), color=color, ls="--", lw=1)
    _plain_log_axis(ax, [float(k) for c in curves.values() for k in c.k] + ([extrapolate_to] if extrapolate_to else []))
    ax.set_xlabel("N (samples)")
    ax.set_ylabel(f"{kind}@N")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title(title + " (dashed: each temperature's fitted law)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, out)


def plot_optimal_temperature(rows: Sequence[OptimalTemperature], out: Path, *, title: str = "",
                             continuous: Sequence[ContinuousOptimum] = (), t_star_fit: TStarFit | None = None) -> Path:
    """T*(N) against N (log x): measured argmax, fitted-law argmax, the continuous optimum of the
    trended law (hollow where it sits at an end of the temperature range) and the fitted T*(N)."""
    fig = Figure(figsize=(5.6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    N = np.array([r.N for r in rows], dtype=float)
    tm = np.array([r.t_measured for r in rows], dtype=float)
    tf = np.array([r.t_fitted for r in rows], dtype=float)
    if np.isfinite(tm).any():
        ax.plot(N[np.isfinite(tm)], tm[np.isfinite(tm)], "o-", label="measured")
    if np.isfinite(tf).any():
        ax.plot(N[np.isfinite(tf)], tf[np.isfinite(tf)], "s--", label="fitted law")
    inner = [o for o in continuous if np.isfinite(o.t_star) and not o.at_boundary]
    edge = [o for o in continuous if np.isfinite(o.t_star) and o.at_boundary]
    if inner:
        ax.plot([o.N for o in inner], [o.t_star for o in inner], ".", color="#d62728", label="continuous (trended law)")
    if edge:
        ax.plot([o.N for o in edge], [o.t_star for o in edge], "o", mfc="none", color="#d62728", ms=4,
                label="continuous, at range end")
    if t_star_fit is not None:
        nn = np.geomspace(max(t_star_fit.N_min, 1.0), max(t_star_fit.N_max, 2.0), 200)
        ax.plot(nn, t_star_fit.predict(nn), color="black", lw=1, label=f"T*(N) fit, R²={t_star_fit.r2:.3f}")
    _plain_log_axis(ax, list(N) + [o.N for o in continuous]
                    + ([t_star_fit.N_min, t_star_fit.N_max] if t_star_fit is not None else []))
    ax.set_xlabel("N (samples)")
    ax.set_ylabel("optimal temperature T*")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, out)


def plot_coscaling(cs: CoScaling, out: Path, *, title: str = "") -> Path:
    """Heat map of per-problem (T*, N*) frequencies, each cell annotated with its percentage."""
    fig = Figure(figsize=(max(4.5, 1.8 + 0.7 * len(cs.Ns)), max(3.0, 1.8 + 0.5 * len(cs.temperatures))),
                 layout="constrained")
    ax = fig.add_subplot()
    im = ax.imshow(cs.freq, origin="lower", aspect="auto", cmap="magma_r", vmin=0,
                   vmax=max(float(cs.freq.max()), 1e-9))
    ax.set_xticks(range(len(cs.Ns)), [str(n) for n in cs.Ns])
    ax.set_yticks(range(len(cs.temperatures)), [f"{t:g}" for t in cs.temperatures])
    ax.set_xlabel("N* (smallest budget reaching the best value)")
    ax.set_ylabel("T*")
    top = float(cs.freq.max()) if cs.freq.size else 0.0
    for i in range(cs.freq.shape[0]):
        for j in range(cs.freq.shape[1]):
            v = cs.freq[i, j]
            if v > 0:
                ax.text(j, i, f"{100 * v:.0f}%", ha="center", va="center", fontsize=7,
                        color="white" if v > 0.6 * top else "black")
    fig.colorbar(im, ax=ax, label="fraction of problems")
    ax.set_title(f"{title}\n{cs.n_counted} problems, tol={cs.tol:g}; {cs.n_unsolved} never solved (excluded)"
                 if title else f"{cs.n_counted} problems, tol={cs.tol:g}", fontsize=8)
    return _save(fig, out)


def _yerr(value: float, ci: tuple[float, float]) -> list[list[float]]:
    lo, hi = ci
    return [[max(value - lo, 0.0) if np.isfinite(lo) else 0.0], [max(hi - value, 0.0) if np.isfinite(hi) else 0.0]]


def plot_bon_references(rows: Sequence[BonReferenceRow], out: Path, *, title: str = "") -> Path:
    """Two panels against k: measured winrate@k next to k/(k+1), and measured kl_bon@k next to
    log k - (k-1)/k; each measured point with its 95% CI."""
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    win_ax, kl_ax = fig.subplots(1, 2)
    k_max = max((r.k for r in rows), default=1)
    kk = np.arange(1, max(k_max, 2) + 1)
    win_ax.plot(kk, kk / (kk + 1), color="gray", ls="--", lw=1, label="N/(N+1)")
    kl_ax.plot(kk, np.log(kk) - (kk - 1) / kk, color="gray", ls="--", lw=1, label="log N − (N−1)/N")
    for ax, attr, color, label in ((win_ax, "winrate", COLORS["bon"], "measured winrate@k"),
                                   (kl_ax, "kl_bon", COLORS["max"], "measured kl_bon@k")):
        pts = [(r.k, getattr(r, attr)) for r in rows if getattr(r, attr) is not None]
        for i, (k, m) in enumerate(pts):
            ax.errorbar([k], [m.value], yerr=_yerr(m.value, m.ci95), fmt="o", color=color, capsize=3,
                        label=label if i == 0 else None)
        _plain_log_axis(ax, [float(k) for k in kk])
        ax.set_xlabel("N (samples)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    against = next((r.against for r in rows if r.winrate is not None), "")
    win_ax.set_ylabel(f"win rate of best-of-N vs {against}" if against else "win rate of best-of-N")
    kl_ax.set_ylabel("KL(best-of-N ‖ reference)")
    fig.suptitle(title, fontsize=9)
    return _save(fig, out)


def plot_reward_kl(points: Sequence[PlanePoint], front: Sequence[PlanePoint], out: Path, *, title: str = "",
                   reference: str = "", bon: BonCurve | None = None) -> Path:
    """Every point with its CIs on both axes (circles: policies, triangles: best-of-k), labelled; the
    Pareto front (lower KL, higher reward) as a dashed line; the reference's analytic best-of-N curve
    (KL log N - (N-1)/N, reward max@N, its CI band) as a dotted line. When points come from
    fine-tuned checkpoints, one colour per training method (grey for other models) and each method's
    policies at several settings joined by KL into its curve; otherwise one colour per run."""
    fig = Figure(figsize=(6.8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    if bon is not None and len(bon.n):
        ax.plot(bon.kl, bon.reward, color="grey", ls=":", lw=1.2, marker=".", ms=3,
                label=f"best-of-N of the reference, N = 1..{int(bon.n[-1])} (analytic KL)")
        if np.isfinite(bon.lo).all() and np.isfinite(bon.hi).all():
            ax.fill_between(bon.kl, bon.lo, bon.hi, color="grey", alpha=0.12, lw=0)
    cmap = matplotlib.colormaps["tab10"]
    methods = [m for m in dict.fromkeys(p.method for p in points) if m]
    runs = list(dict.fromkeys(p.run for p in points))

    def color(p: PlanePoint) -> Any:
        if methods:
            return cmap(methods.index(p.method) % 10) if p.method else "dimgrey"
        return cmap(runs.index(p.run) % 10)

    for method in methods:
        curve = sorted((p for p in points if p.method == method and p.k is None), key=lambda p: p.kl)
        ax.plot([p.kl for p in curve], [p.reward for p in curve], color=cmap(methods.index(method) % 10),
                lw=1.0, alpha=0.8, label=f"{method} ({len(curve)} checkpoint{'s' if len(curve) != 1 else ''})")
    for p in points:
        c = color(p)
        ax.errorbar([p.kl], [p.reward], xerr=_yerr(p.kl, p.kl_ci), yerr=_yerr(p.reward, p.reward_ci),
                    fmt="o" if p.k is None else "^", color=c, ms=5, capsize=2, lw=0.8)
    if front:
        ax.plot([p.kl for p in front], [p.reward for p in front], color="black", ls="--", lw=1, label="Pareto front")
    if front or bon is not None or methods:
        ax.legend(fontsize=7, loc="lower right")
    kls = [p.kl for p in points] + ([float(np.max(bon.kl))] if bon is not None and len(bon.n) else [])
    if kls and max(kls) > 10:
        # policies without a KL term run to tens of nats while best-of-N lives below log N: linear
        # up to 1 nat and logarithmic beyond keeps both readable
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel((f"KL to {reference}" if reference else "KL to the reference policy")
                  + (" (symlog: linear below 1)" if ax.get_xscale() == "symlog" else ""))
    ax.set_ylabel("reward (mean; best-of-k: max@k)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=9)
    if ax.get_xscale() == "symlog":
        _plain_symlog_axis(ax, max(kls))
    bars = [((p.kl_ci[0] if np.isfinite(p.kl_ci[0]) else p.kl, p.kl_ci[1] if np.isfinite(p.kl_ci[1]) else p.kl),
             (p.reward_ci[0] if np.isfinite(p.reward_ci[0]) else p.reward,
              p.reward_ci[1] if np.isfinite(p.reward_ci[1]) else p.reward)) for p in points]
    place_labels(fig, ax, [(p.kl, p.reward, p.label, color(p)) for p in points], bars=bars)
    return _save(fig, out)


def _plain_symlog_axis(ax: Any, top: float) -> None:
    """Ticks 0, 0.5, 1, 2, 5, 10, 20, 50, ... up to ``top`` as plain numbers on a symlog axis."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

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
    from matplotlib.transforms import Bbox

    FigureCanvasAgg(fig)
    fig.canvas.draw()  # lay out the figure so that text extents and data-to-pixel transforms are final
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pix = [ax.transData.transform((x, y)) for x, y, _, _ in items]
    dots = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in pix]
    obstacles = []
    for (x, y, _, _), ((x0, x1), (y0, y1)) in zip(items, bars):
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


TRAINING_PANELS = (("reward", "reward (policy samples)"), ("kl_ref", "KL to the base (per sequence)"),
                   ("entropy", "entropy (per token)"), ("grad_norm", "gradient norm (before clipping)"),
                   ("grad_var", "per-prompt gradient variance"), ("tokens_per_s", "tokens / s"))


def plot_training_curves(logs: Mapping[str, Sequence[Mapping[str, float]]], out: Path, *, title: str = "") -> Path:
    """``training_figure`` written to ``out``."""
    return _save(training_figure(logs, title=title), out)


def training_figure(logs: Mapping[str, Sequence[Mapping[str, float]]], *, title: str = "") -> Figure:
    """One panel per logged quantity against the step, one line per checkpoint with a marker on every
    logged step; with 20 steps or more, a dashed moving average over a tenth of the steps as well.
    Integer step ticks; one legend for all panels, below them. Panels no log has are left out."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    panels = [(key, label) for key, label in TRAINING_PANELS if any(key in row for rows in logs.values() for row in rows)]
    cols = 2
    rows_n = max(1, (len(panels) + cols - 1) // cols)
    fig = Figure(figsize=(9.0, 2.6 * rows_n + 0.6), layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    cmap = matplotlib.colormaps["tab10"]
    markers = "osD^vP*X"
    drawn: dict[str, tuple[Any, str]] = {}
    for ax, (key, label) in zip(axes, panels):
        for i, (name, rows) in enumerate(logs.items()):
            pts = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None and np.isfinite(r[key])]
            if not pts:
                continue
            x, y = (np.array(v, dtype=float) for v in zip(*pts))
            color, marker = cmap(i % 10), markers[i % len(markers)]
            ax.plot(x, y, color=color, lw=1.4, marker=marker, ms=3.5)
            drawn[name] = (color, marker)
            if len(y) >= 20:
                w = max(3, len(y) // 10)
                ax.plot(x[w - 1:], np.convolve(y, np.ones(w) / w, mode="valid"), color=color, lw=1.0, ls="--", alpha=0.8)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if drawn:
        handles = [Line2D([], [], color=c, marker=m, lw=1.4, ms=4) for c, m in drawn.values()]
        fig.legend(handles, list(drawn), loc="outside lower center", ncols=min(len(drawn), 4), fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=9)
    return fig
