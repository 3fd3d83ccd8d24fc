"""HTML tables and JSON for the scaling-law families, their per-curve choice, the parameter trends
in temperature and the fitted T*(N), as ``report.html`` / ``report.json`` show them.

What it does not do: fit or draw. Only formatting (the markup is ``templates/family_selection.html.j2``
and ``sweep_fit.html.j2``): the numbers come from ``laws`` and ``temperature``; ``html`` and ``sweep``
place the pieces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from markupsafe import Markup

from bonbench.apps.analysis.htmlparts import Table, fmt_value, render
from bonbench.apps.analysis.laws import FORMULAS, FamilySelection, describe
from bonbench.apps.analysis.temperature import SweepFit, TStarFit


def selection_rows(label: str, sel: FamilySelection | None, error: str = "") -> list[tuple]:
    """One row per family: fit, R², held-out errors and whether it was chosen."""
    if sel is None:
        return [(label, "—", f"no family fits: {error[:80]}", "—", "—", "—", "")]
    rows = []
    for fam, fit in sel.fits.items():
        ho = sel.held_out[fam]
        rows.append((label, fam, describe(fit) if fit is not None else f"no fit: {sel.fit_errors.get(fam, '')[:60]}",
                     fmt_value(fit.r2) if fit is not None else "—", fmt_value(ho.mean_abs_error), fmt_value(ho.max_abs_error),
                     "chosen" if fam == sel.chosen else ""))
    return rows


def selection_table(rows: Sequence[tuple], first: str, holdout_fraction: float) -> Markup:
    """The per-family rows of ``selection_rows`` as a table, after a note on how the family is chosen."""
    return render("family_selection.html.j2", holdout_fraction=holdout_fraction, formulas=FORMULAS, selection=Table(
        [first, "family", "fit", "R²", "held-out mean |err|", "held-out max |err|", "choice"], rows))


def t_star_text(fit: TStarFit) -> str:
    """The fitted T*(N) in the paper's form, and in the form that was fitted when they differ."""
    a, b, g, d = fit.paper_form()
    if not fit.offset:
        return f"T*(N) = {a:.4g}·N^{b:.4g} + {g:.4g}·N"
    fitted = f"{fit.alpha:.4g}·(N^{fit.beta:.4g} − 1)/{fit.beta:.4g} + {fit.gamma:.4g}·N + {fit.delta:.4g}"
    if not math.isfinite(a):
        return f"T*(N) = {fit.alpha:.4g}·ln N + {fit.gamma:.4g}·N + {fit.delta:.4g} (the β → 0 limit)"
    return f"T*(N) = {a:.4g}·N^{b:.4g} + {g:.4g}·N + {d:.4g}  (fitted as {fitted})"


def sweep_fit_html(sf: SweepFit, holdout_fraction: float) -> Markup:
    """Family choice per temperature, parameter trends in T and the fitted T*(N)."""
    rows: list[tuple] = []
    for t, sel in sf.selections.items():
        rows += selection_rows(f"T={t:g}", sel, sf.selection_errors.get(t, ""))
    trend_rows: list[tuple[Any, ...]] = []
    for fam, trends in sf.trends.items():
        for p in trends.values():
            trend_rows.append((fam, p.param, p.transform, p.degree, ", ".join(f"{c:.4g}" for c in p.coef), fmt_value(p.r2),
                               ", ".join(f"{t:g}: {v:.4g}" for t, v in zip(p.temperatures, p.values, strict=True))))
    for fam, err in sf.trend_errors.items():
        trend_rows.append((fam, "—", "—", "—", err[:100], "—", "—"))
    t_star = sf.t_star
    return render("sweep_fit.html.j2", selection=selection_table(rows, "T", holdout_fraction), trends=Table(
        ["family", "parameter", "trended as", "degree", "coefficients", "R²", "values by T"], trend_rows),
        family=sf.family, t_star=t_star, t_star_error=sf.t_star_error,
        t_star_text=None if t_star is None else t_star_text(t_star),
        t_star_r2=None if t_star is None else fmt_value(t_star.r2),
        t_star_residual=None if t_star is None else fmt_value(t_star.max_abs_residual))


def sweep_fit_json(sf: SweepFit) -> dict[str, Any]:
    t_star: dict[str, Any] | None = None
    if sf.t_star is not None:
        a, b, g, d = sf.t_star.paper_form()
        t_star = {**asdict(sf.t_star), "paper_form": {"alpha": a, "beta": b, "gamma": g, "delta": d},
                  "text": t_star_text(sf.t_star)}
    return {"selections": {str(t): (s.to_json() if s is not None else {"error": sf.selection_errors.get(t)})
                           for t, s in sf.selections.items()},
            "family": sf.family,
            "trends": {fam: {p: asdict(tr) for p, tr in trends.items()} for fam, trends in sf.trends.items()},
            "trend_errors": dict(sf.trend_errors),
            "continuous_optimum": [asdict(o) for o in sf.optima],
            "t_star_fit": t_star, "t_star_error": sf.t_star_error or None}
