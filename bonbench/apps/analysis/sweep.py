"""The temperature-sweep section of ``report.html``: runs of one task and model at two or more
temperatures.

What it does: picks each temperature's ``pass`` or ``bon`` curve (the latest run per temperature;
for bon, the named verifier's), fits each curve (``fits.fit_temperatures``), chooses the law family
and trends its parameters in T (``temperature.analyse_sweep``, shown by ``fitreport``), tabulates the
optimal temperature per budget N (measured, fitted and continuous, with the fitted T*(N) curve) and
draws the per-problem co-scaling map of (T*, N*) (docs/scaling.md). Returns the section's HTML
(``templates/sweep.html.j2``) and the JSON ``report.json`` keeps for it.

What it does not do: fit anything itself (``fits``, ``laws``, ``temperature``), draw (``plots``) or
read run directories beyond the curves ``rundir`` gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bonbench.api.metric.readings import curve_label
from bonbench.apps.analysis.fitreport import sweep_fit_html, sweep_fit_json
from bonbench.apps.analysis.fits import coscaling, fit_temperatures, log_spaced_ks, optimal_temperature
from bonbench.apps.analysis.htmlparts import Table, figure, fmt_value, powers_of_two, render
from bonbench.apps.analysis.plots import plot_coscaling, plot_optimal_temperature, plot_temperature_curves
from bonbench.apps.analysis.run_rows import kind_curve, per_problem_curves
from bonbench.apps.analysis.temperature import SweepFit, analyse_sweep
from bonbench.core.errors import BonbenchError


@dataclass(frozen=True)
class SweepCurves:
    """The curve each temperature contributes (latest run wins), the verifier behind each bon curve,
    and notes on the runs left out."""

    runs: dict[float, Any] = field(default_factory=dict)
    curves: dict[float, Any] = field(default_factory=dict)
    verifiers: dict[float, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def sweep_curves(runs: Sequence[Any], kind: str, verifier: str | None) -> SweepCurves:
    """Each temperature's ``kind`` curve. A run without it is left out with a note, except that a
    run lacking the verifier the user named is an error (``BonbenchError``)."""
    out = SweepCurves()
    for r in sorted(runs, key=lambda r: r.created):
        try:
            curve, vname = kind_curve(r, kind, verifier)
        except BonbenchError as exc:
            if verifier is not None:
                raise  # the user named a verifier: a run without it is an error, not a footnote
            out.notes.append(f"run {r.hash} (T={r.temperature:g}) left out: {exc}")
            continue
        if curve is None:
            out.notes.append(f"run {r.hash} (T={r.temperature:g}) has no {kind} curve; left out")
            continue
        if r.temperature in out.runs:
            out.notes.append(f"T={r.temperature:g}: several runs; using the latest ({r.hash}), "
                             f"not {out.runs[r.temperature].hash}")
        out.runs[r.temperature], out.curves[r.temperature] = r, curve
        if vname is not None:
            out.verifiers[r.temperature] = vname
    used = sorted(set(out.verifiers.values()))
    if len(used) > 1:
        out.notes.append(f"the runs' {curve_label(kind, 'N')} curves use different verifiers ({', '.join(used)}); "
                         "pass --verifier to compare like with like")
    return out


def _optimum(sc: SweepCurves, sf: SweepFit, Ns: list[int], kind: str, title: str, out_png: Path,
             info: dict[str, Any]) -> dict[str, Any]:
    """The optimal temperature per budget N: measured, fitted, continuous and the T*(N) curve."""
    curves = sc.curves
    chosen = {t: s for t, s in sf.selections.items() if s is not None}
    opt = optimal_temperature({t: (c.k, c.value) for t, c in curves.items()}, Ns, chosen)
    cont = {o.N: o for o in sf.optima}
    info["optimal_temperature"] = [asdict(o) for o in opt]
    rows = [(o.N, fmt_value(o.t_measured, 2), fmt_value(o.value_measured), fmt_value(o.t_fitted, 2), fmt_value(o.value_fitted),
             (fmt_value(cont[o.N].t_star, 3) + (" (edge)" if cont[o.N].at_boundary else "")) if o.N in cont else "—",
             fmt_value(float(sf.t_star.predict(o.N)), 3) if sf.t_star is not None else "—") for o in opt]
    png = plot_optimal_temperature(opt, out_png, title=title, continuous=sf.optima, t_star_fit=sf.t_star)
    return {"t_range": (f"{min(curves):g}", f"{max(curves):g}"), "optimum_fig": figure(png, "T*(N)"),
            "optimum": Table(["N", "T* measured", f"{curve_label(kind, 'N')} at T*", "T* fitted", "fitted value", "T* continuous",
                              "T*(N) curve"], rows)}


def _coscaling(sc: SweepCurves, kind: str, tol: float, title: str, out_png: Path, info: dict[str, Any]) -> dict[str, Any]:
    """The per-problem co-scaling map of (T*, N*), or why it was skipped."""
    n_min = min(r.n for r in sc.runs.values())
    Ns_cs = powers_of_two(n_min) + ([n_min] if n_min not in powers_of_two(n_min) else [])
    try:
        values = {t: per_problem_curves(r, kind, Ns_cs, verifier=sc.verifiers.get(t)) for t, r in sc.runs.items()}
        cs = coscaling(values, Ns_cs, tol=tol)
    except BonbenchError as exc:
        return {"coscaling": None, "coscaling_error": str(exc)}
    info["coscaling"] = {"temperatures": cs.temperatures, "Ns": cs.Ns, "freq": cs.freq, "n_counted": cs.n_counted,
                         "n_unsolved": cs.n_unsolved, "n_missing": cs.n_missing, "tol": cs.tol}
    png = plot_coscaling(cs, out_png, title=title)
    return {"tol": f"{tol:g}", "coscaling_counts": cs, "coscaling_fig": figure(png, "co-scaling"),
            "coscaling": Table(["T*"] + [f"N*={n}" for n in cs.Ns] + ["all N"],
                               [[f"{t:g}"] + [f"{100 * v:.1f}%" for v in cs.freq[i]] + [f"{100 * cs.freq[i].sum():.1f}%"]
                                for i, t in enumerate(cs.temperatures)])}


def sweep_section(key: tuple[str, str], runs: list[Any], idx: int, out_dir: Path, kind: str, tol: float,
                  n_points: int, families: Sequence[str], holdout_fraction: float,
                  verifier: str | None) -> tuple[Markup, dict]:
    """The section of one (task, model) sweep (``templates/sweep.html.j2``) and its report.json entry."""
    task, model = key
    sc = sweep_curves(runs, kind, verifier)
    curves, title = sc.curves, f"{task} / {model}"
    used = sorted(set(sc.verifiers.values()))
    label = f"{curve_label(kind, 'N')}, verifier {', '.join(used)}" if used else curve_label(kind, "N")
    info: dict[str, Any] = {"task": task, "model": model, "kind": kind, "runs": {str(t): str(r.path) for t, r in sc.runs.items()},
                            "verifier": {str(t): v for t, v in sc.verifiers.items()} or None}
    context: dict[str, Any] = {"title": title, "label": label, "kind": kind, "kind_n": curve_label(kind, "N"),
                               "sweep_notes": sc.notes, "fits": None}
    if len(sc.runs) < 2:
        info["notes"] = sc.notes
        return render("sweep.html.j2", **context), info
    fits = fit_temperatures({t: (c.k, c.value) for t, c in curves.items()}, n_points=n_points)
    n_max = max(r.n for r in sc.runs.values()) or int(max(c.k.max() for c in curves.values()))
    context["fits"] = Table(["T", "a(T)", "b(T)", "R²", "points", "run"],
                            [(f"{t:g}", fmt_value(f.a) if f else "—", fmt_value(f.b) if f else "—",
                              fmt_value(f.r2) if f else "no fit", f.n_points if f else 0, sc.runs[t].hash)
                             for t, f in fits.items()])
    info["fits"] = {str(t): (asdict(f) if f else None) for t, f in fits.items()}
    Ns = powers_of_two(4 * n_max)
    # the continuous T* is found on a log-spaced grid (what T*(N) is fitted to) plus the table's powers of two
    Ns_fit = sorted(set(int(n) for n in log_spaced_ks(4 * n_max, 40)) | set(Ns))
    sf = analyse_sweep({t: (c.k, c.value) for t, c in curves.items()}, Ns_fit, families=families,
                       holdout_fraction=holdout_fraction, n_points=n_points)
    chosen = {t: s for t, s in sf.selections.items() if s is not None}
    png = plot_temperature_curves(curves, {t: s.best for t, s in chosen.items()}, out_dir / f"sweep{idx:02d}_curves.png",
                                  kind=kind, title=title, extrapolate_to=4 * n_max)
    context.update(sweep_fit=sweep_fit_html(sf, holdout_fraction), curves=figure(png, f"{curve_label(kind, 'N')} by temperature"),
                   n_max=n_max, family=sf.family)
    context.update(_optimum(sc, sf, Ns, kind, title, out_dir / f"sweep{idx:02d}_tstar.png", info))
    info.update(sweep_fit_json(sf))
    context.update(_coscaling(sc, kind, tol, title, out_dir / f"sweep{idx:02d}_coscaling.png", info))
    info["notes"] = sc.notes
    return render("sweep.html.j2", **context), info
