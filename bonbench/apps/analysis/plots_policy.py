"""Figures about policies: best-of-N against its analytic references, the reward-vs-KL plane,
training curves and the held-out evaluations made during training.

Every function draws one figure with matplotlib's object API on the Agg canvas (no pyplot global
state, no display needed), writes it to ``out`` and returns the path (``training_figure`` returns
the ``Figure``, as does ``evaluation_figure``). Inputs are already-computed rows, points and logs; nothing here reads run
directories or fits anything (``frontier`` computes the points, ``sections`` reads the logs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from bonbench.api.metric.kind import metric_kind
from bonbench.apps.analysis.frontier import BonCurve, BonReferenceRow, PlanePoint
from bonbench.apps.analysis.plotkit import place_labels, plain_log_axis, plain_symlog_axis, save_figure, yerr


def plot_bon_references(rows: Sequence[BonReferenceRow], out: Path, *, title: str = "") -> Path:
    """Two panels against k: measured winrate@k next to k/(k+1), and measured kl_bon@k next to
    log k - (k-1)/k; each measured point with its 95% CI."""
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    win_ax, kl_ax = fig.subplots(1, 2)
    k_max = max((r.k for r in rows), default=1)
    kk = np.arange(1, max(k_max, 2) + 1)
    win_ax.plot(kk, kk / (kk + 1), color="gray", ls="--", lw=1, label="N/(N+1)")
    kl_ax.plot(kk, np.log(kk) - (kk - 1) / kk, color="gray", ls="--", lw=1, label="log N − (N−1)/N")
    # each measured metric in its kind's colour (the metric records', ``bonbench.plugins.metrics.stored``)
    for ax, attr, label in ((win_ax, "winrate", "measured winrate@k"), (kl_ax, "kl_bon", "measured kl_bon@k")):
        color = metric_kind(attr).color
        pts = [(r.k, getattr(r, attr)) for r in rows if getattr(r, attr) is not None]
        for i, (k, m) in enumerate(pts):
            ax.errorbar([k], [m.value], yerr=yerr(m.value, m.ci95), fmt="o", color=color, capsize=3,
                        label=label if i == 0 else None)
        plain_log_axis(ax, [float(k) for k in kk])
        ax.set_xlabel("N (samples)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    against = next((r.against for r in rows if r.winrate is not None), "")
    win_ax.set_ylabel(f"win rate of best-of-N vs {against}" if against else "win rate of best-of-N")
    kl_ax.set_ylabel("KL(best-of-N ‖ reference)")
    fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)


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
        ax.errorbar([p.kl], [p.reward], xerr=yerr(p.kl, p.kl_ci), yerr=yerr(p.reward, p.reward_ci),
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
        plain_symlog_axis(ax, max(kls))
    bars = [((p.kl_ci[0] if np.isfinite(p.kl_ci[0]) else p.kl, p.kl_ci[1] if np.isfinite(p.kl_ci[1]) else p.kl),
             (p.reward_ci[0] if np.isfinite(p.reward_ci[0]) else p.reward,
              p.reward_ci[1] if np.isfinite(p.reward_ci[1]) else p.reward)) for p in points]
    place_labels(fig, ax, [(p.kl, p.reward, p.label, color(p)) for p in points], bars=bars)
    return save_figure(fig, out)



TRAINING_PANELS = (("reward", "reward (policy samples)"), ("kl_ref", "KL to the base (per sequence)"),
                   ("entropy", "entropy (per token)"), ("grad_norm", "gradient norm (before clipping)"),
                   ("grad_var", "per-prompt gradient variance"), ("tokens_per_s", "tokens / s"))


def plot_training_curves(logs: Mapping[str, Sequence[Mapping[str, float]]], out: Path, *, title: str = "") -> Path:
    """``training_figure`` written to ``out``."""
    return save_figure(training_figure(logs, title=title), out)


def training_figure(logs: Mapping[str, Sequence[Mapping[str, float]]], *, title: str = "") -> Figure:
    """One panel per logged quantity against the step, one line per checkpoint with a marker on every
    logged step; with 20 steps or more, a dashed moving average over a tenth of the steps as well.
    Integer step ticks; one legend for all panels, below them. Panels no log has are left out."""
    panels = [(key, label) for key, label in TRAINING_PANELS if any(key in row for rows in logs.values() for row in rows)]
    cols = 2
    rows_n = max(1, (len(panels) + cols - 1) // cols)
    fig = Figure(figsize=(9.0, 2.6 * rows_n + 0.6), layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    cmap = matplotlib.colormaps["tab10"]
    markers = "osD^vP*X"
    drawn: dict[str, tuple[Any, str]] = {}
    for ax, (key, label) in zip(axes, panels, strict=False):
        for i, (name, rows) in enumerate(logs.items()):
            pts = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None and np.isfinite(r[key])]
            if not pts:
                continue
            x, y = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
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


EVAL_BESIDE = (("reward", "training reward"), ("kl_ref", "KL to the base (per sequence)"),
               ("entropy", "entropy (per token)"))


def plot_evaluation_curves(evals: Mapping[str, Sequence[Mapping[str, Any]]], logs: Mapping[str, Sequence[Mapping[str, Any]]],
                           kept: Mapping[str, Mapping[str, Any]], out: Path, *, title: str = "") -> Path:
    """``evaluation_figure`` written to ``out``."""
    return save_figure(evaluation_figure(evals, logs, kept, title=title), out)


def evaluation_figure(evals: Mapping[str, Sequence[Mapping[str, Any]]], logs: Mapping[str, Sequence[Mapping[str, Any]]],
                      kept: Mapping[str, Mapping[str, Any]], *, title: str = "") -> Figure:
    """Held-out evaluations during training (``evals.jsonl`` rows per checkpoint): one panel per metric
    against the evaluated step, the run's 95% interval as a band, the kept step (``kept``: a
    checkpoint's manifest ``keep_best``) ringed on its metric's panel; beside them the training reward,
    KL and entropy of the log rows (the row of step s was sampled from the weights evaluated at step s)."""
    metrics = sorted({name for rows in evals.values() for r in rows for name in r["metrics"]})
    beside = [(key, label) for key, label in EVAL_BESIDE if any(key in row for rows in logs.values() for row in rows)]
    panels = [(name, f"{name} (held out, 95% CI)") for name in metrics] + beside
    cols = 2
    rows_n = max(1, (len(panels) + cols - 1) // cols)
    fig = Figure(figsize=(9.0, 2.6 * rows_n + 0.6), layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    cmap = matplotlib.colormaps["tab10"]
    for ax, (key, label) in zip(axes, panels, strict=False):
        for i, name in enumerate(evals):
            color = cmap(i % 10)
            if key in metrics:
                pts = sorted((int(r["step"]), r["metrics"][key]) for r in evals[name] if key in r["metrics"])
                if not pts:
                    continue
                x = np.array([s for s, _ in pts], dtype=float)
                ax.plot(x, [m["value"] for _, m in pts], color=color, lw=1.4, marker="o", ms=3.5, label=name, gid="value")
                # a metric without an interval (a closed form such as IMDB's kl_bon@4: ci95 [null, null]) has no band
                lo, hi = (np.array([np.nan if (m.get("ci95") or (None, None))[end] is None else m["ci95"][end]
                                    for _, m in pts], dtype=float) for end in (0, 1))
                if np.isfinite(lo).any() and np.isfinite(hi).any():
                    ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0, gid="ci95")
                mark = kept.get(name)
                at = {s: m["value"] for s, m in pts}
                if mark and mark.get("metric") == key and int(mark["step"]) in at:
                    ax.plot([mark["step"]], [at[int(mark["step"])]], ls="none", marker="o", ms=11, mfc="none", mew=1.6,
                            color=color, gid="kept")
                    ax.annotate(f"kept: step {mark['step']}", (mark["step"], at[int(mark["step"])]), fontsize=7,
                                xytext=(6, 6), textcoords="offset points", color=color)
            else:
                pts_log = [(r["step"], r[key]) for r in logs.get(name, ()) if r.get(key) is not None]
                if pts_log:
                    ax.plot(*zip(*pts_log, strict=True), color=color, lw=1.2, label=name, gid="log")
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if len(evals) > 1:
        handles = [Line2D([], [], color=cmap(i % 10), lw=1.4) for i in range(len(evals))]
        fig.legend(handles, list(evals), loc="outside lower center", ncols=min(len(evals), 4), fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=9)
    return fig
