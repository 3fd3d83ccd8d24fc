"""PNG figures of k-curves: with bootstrap bands and fitted laws, several runs on shared axes,
temperature sweeps, the optimal temperature per budget and the co-scaling heat map.

Every function draws one figure with matplotlib's object API on the Agg canvas (no pyplot global
state, no display needed), writes it to ``out`` and returns the path. Inputs are already-computed
curves and fits; nothing here reads run directories or fits anything. The policy figures
(best-of-N references, reward vs KL, training curves) are ``plots_policy``'s and the shared axis
and label machinery ``plotkit``'s; import them from there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bonbench.api.metric.kind import metric_kinds
from bonbench.api.metric.readings import curve_color, curve_label, curve_sort_key
from bonbench.apps.analysis.fits import CoScaling, OptimalTemperature
from bonbench.apps.analysis.laws import ScalingFit, describe
from bonbench.apps.analysis.plotkit import fit_k, plain_log_axis, save_figure
from bonbench.apps.analysis.rundir import Curve
from bonbench.apps.analysis.temperature import ContinuousOptimum, TStarFit


def plot_k_curves(curves: Mapping[str, Curve], out: Path, *, title: str = "",
                  fits: Mapping[str, ScalingFit | None] | None = None, ylim: tuple[float, float] | None = (0, 1.02)) -> Path:
    """Every curve (pass@k, bon@k, maj@k, any kind's) against k (log x) with its 95% band; each curve's
    fitted law dashed. Colours and labels are the metric kinds' (``bonbench.api.metric``); curves
    without a colour of their own (several verifiers' bon@k) take distinct ones from a palette;
    ``ylim`` None fits the axis to the bands (small values stay readable)."""
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    # tab10 is a ListedColormap (a list of colours); the registry's annotation is the base Colormap
    taken = {r.color for r in metric_kinds() if r.color}
    # the kinds take most of tab10: the spares continue into Dark2 and tab20, each colour once
    palette = [matplotlib.colors.to_hex(c) for name in ("tab10", "Dark2", "tab20")
               for c in matplotlib.colormaps[name].colors]  # type: ignore[attr-defined]  # see above
    spare = iter(dict.fromkeys(c for c in palette if c not in taken))
    for kind, c in curves.items():
        color = curve_color(kind) or next(spare, None)
        ok = np.isfinite(c.value)
        ax.plot(c.k[ok], c.value[ok], color=color, lw=1.8, label=curve_label(kind))
        band = ok & np.isfinite(c.lo) & np.isfinite(c.hi)
        if band.any():
            ax.fill_between(c.k[band], c.lo[band], c.hi[band], color=color, alpha=0.2, lw=0)
        fit = (fits or {}).get(kind)
        if fit is not None:
            kk = fit_k(float(c.k.max()))
            ax.plot(kk, fit.predict(kk), color=color, ls="--", lw=1,
                    label=f"fit {describe(fit)}, R²={fit.r2:.3f}")
    plain_log_axis(ax, [float(k) for c in curves.values() for k in c.k])
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
    return save_figure(fig, out)


def plot_k_curve_comparison(runs: Mapping[str, Mapping[str, Curve]], out: Path, *, title: str = "",
                            kinds: Sequence[str] | None = None) -> Path:
    """Several runs' k-curves on shared axes, one panel per curve kind (pass@k, bon@k, ...; default:
    every kind the runs have, in the kinds' display order) that at least two runs have, one colour
    and marker per run (the first is drawn as the reference: the base model in a leaderboard), each
    with its 95% band."""
    if kinds is None:
        kinds = sorted({key for c in runs.values() for key in c}, key=curve_sort_key)
    shown = [k for k in kinds if sum(k in c for c in runs.values()) >= 2] or \
        [k for k in kinds if any(k in c for c in runs.values())][:1]
    if not shown:
        raise ValueError("no run has a k-curve to compare")
    fig = Figure(figsize=(4.2 * len(shown) + 0.6, 3.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(shown)))
    cmap = matplotlib.colormaps["tab10"]
    markers = "osD^vP*X"
    for ax, kind in zip(axes, shown, strict=True):
        ks: list[float] = []
        top = 0.0
        for i, curves in enumerate(runs.values()):
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
        plain_log_axis(ax, ks)
        ax.set_xlabel("k (samples)")
        ax.set_ylabel(curve_label(kind))
        if top <= 1.0:  # rates and rewards in [0, 1]; other rewards keep matplotlib's limits
            ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=cmap(i % 10), marker=markers[i % len(markers)], lw=1.5, ms=4) for i in range(len(runs))]
    fig.legend(handles, list(runs), loc="outside lower center", ncols=min(len(runs), 3), fontsize=7, frameon=False)
    fig.suptitle(title + " (bands: 95% bootstrap CI over problems)", fontsize=9)
    return save_figure(fig, out)


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
            kk = fit_k(max(float(c.k.max()), extrapolate_to or 0.0))
            ax.plot(kk, fit.predict(kk), color=color, ls="--", lw=1)
    plain_log_axis(ax, [float(k) for c in curves.values() for k in c.k] + ([extrapolate_to] if extrapolate_to else []))
    ax.set_xlabel("N (samples)")
    ax.set_ylabel(curve_label(kind, "N"))
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title(title + " (dashed: each temperature's fitted law)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return save_figure(fig, out)


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
    plain_log_axis(ax, list(N) + [o.N for o in continuous]
                    + ([t_star_fit.N_min, t_star_fit.N_max] if t_star_fit is not None else []))
    ax.set_xlabel("N (samples)")
    ax.set_ylabel("optimal temperature T*")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, out)


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
    return save_figure(fig, out)
