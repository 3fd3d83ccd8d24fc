"""The temperature-sweep section of ``report.html``: runs of one task and model at two or more
temperatures.

What it does: picks each temperature's ``pass`` or ``bon`` curve (the latest run per temperature;
for bon, the named verifier's), fits each curve (``fits.fit_temperatures``), chooses the law family
and trends its parameters in T (``temperature.analyse_sweep``, shown by ``fitreport``), tabulates the
optimal temperature per budget N (measured, fitted and continuous, with the fitted T*(N) curve) and
draws the per-problem co-scaling map of (T*, N*) (docs/scaling.md). Returns the section's HTML and
the JSON ``report.json`` keeps for it.

What it does not do: fit anything itself (``fits``, ``laws``, ``temperature``), draw (``plots``) or
read run directories beyond the curves ``rundir`` gives it.
"""

from __future__ import annotations

import html as html_lib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from bonbench.apps.analysis.fitreport import sweep_fit_html, sweep_fit_json
from bonbench.apps.analysis.fits import coscaling, fit_temperatures, log_spaced_ks, optimal_temperature
from bonbench.apps.analysis.htmlparts import fmt_value, img_tag, powers_of_two, table_html
from bonbench.apps.analysis.plots import plot_coscaling, plot_optimal_temperature, plot_temperature_curves
from bonbench.apps.analysis.rundir import kind_curve, per_problem_curves
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
        out.notes.append(f"the runs' bon@N curves use different verifiers ({', '.join(used)}); pass --verifier to compare "
                         "like with like")
    return out


def _optimum_html(sc: SweepCurves, sf: SweepFit, Ns: list[int], kind: str, n_max: int, title: str, out_png: Path,
                  info: dict[str, Any]) -> list[str]:
    """The optimal temperature per budget N: measured, fitted, continuous and the T*(N) curve."""
    curves = sc.curves
    chosen = {t: s for t, s in sf.selections.items() if s is not None}
    opt = optimal_temperature({t: (c.k, c.value) for t, c in curves.items()}, Ns, chosen)
    cont = {o.N: o for o in sf.optima}
    parts = [f"<h3>Optimal temperature per budget N</h3><p class=\"note\">Measured: argmax over the temperatures "
             f"run of {kind}@N (only N ≤ n); fitted: the same argmax of each temperature's chosen law, extrapolated "
             f"past n = {n_max}; continuous: argmax over T in [{min(curves):g}, {max(curves):g}] of the "
             f"{sf.family or '—'} law with its parameters trended in T (an optimum at an end of that range is "
             "marked and left out of the T*(N) fit); T*(N) curve: the fit above. Ties go to the lower T.</p>"]
    parts.append(table_html(["N", "T* measured", f"{kind}@N at T*", "T* fitted", "fitted value", "T* continuous",
                             "T*(N) curve"],
                            [(o.N, fmt_value(o.t_measured, 2), fmt_value(o.value_measured), fmt_value(o.t_fitted, 2),
                              fmt_value(o.value_fitted),
                              (fmt_value(cont[o.N].t_star, 3) + (" (edge)" if cont[o.N].at_boundary else ""))
                              if o.N in cont else "—",
                              fmt_value(float(sf.t_star.predict(o.N)), 3) if sf.t_star is not None else "—")
                             for o in opt]))
    parts.append(img_tag(plot_optimal_temperature(opt, out_png, title=title, continuous=sf.optima, t_star_fit=sf.t_star),
                         "T*(N)"))
    info["optimal_temperature"] = [asdict(o) for o in opt]
    return parts


def _coscaling_html(sc: SweepCurves, kind: str, tol: float, title: str, out_png: Path, info: dict[str, Any]) -> list[str]:
    """The per-problem co-scaling map of (T*, N*), or a note saying why it was skipped."""
    n_min = min(r.n for r in sc.runs.values())
    Ns_cs = powers_of_two(n_min) + ([n_min] if n_min not in powers_of_two(n_min) else [])
    try:
        values = {t: per_problem_curves(r, kind, Ns_cs, verifier=sc.verifiers.get(t)) for t, r in sc.runs.items()}
        cs = coscaling(values, Ns_cs, tol=tol)
    except BonbenchError as exc:
        return [f"<p class=\"note\">Co-scaling map skipped: {html_lib.escape(str(exc))}</p>"]
    info["coscaling"] = {"temperatures": cs.temperatures, "Ns": cs.Ns, "freq": cs.freq, "n_counted": cs.n_counted,
                         "n_unsolved": cs.n_unsolved, "n_missing": cs.n_missing, "tol": cs.tol}
    return ["<h3>Co-scaling: per-problem (T*, N*)</h3><p class=\"note\">For each problem, N* is the smallest N "
            f"whose best {kind}@N over temperatures is within {tol:g} of the problem's best value over all (T, N); "
            "T* are the temperatures reaching it at N* (ties share the problem). "
            f"{cs.n_counted} problems counted, {cs.n_unsolved} never solved (excluded), "
            f"{cs.n_missing} not in every run (excluded). See docs/scaling.md.</p>",
            img_tag(plot_coscaling(cs, out_png, title=title), "co-scaling"),
            table_html(["T*"] + [f"N*={n}" for n in cs.Ns] + ["all N"],
                       [[f"{t:g}"] + [f"{100 * v:.1f}%" for v in cs.freq[i]] + [f"{100 * cs.freq[i].sum():.1f}%"]
                        for i, t in enumerate(cs.temperatures)])]


def sweep_section(key: tuple[str, str], runs: list[Any], idx: int, out_dir: Path, kind: str, tol: float,
                  n_points: int, families: Sequence[str], holdout_fraction: float,
                  verifier: str | None) -> tuple[str, dict]:
    """The section of one (task, model) sweep and its report.json entry."""
    task, model = key
    sc = sweep_curves(runs, kind, verifier)
    curves, title = sc.curves, f"{task} / {model}"
    used = sorted(set(sc.verifiers.values()))
    label = f"{kind}@N, verifier {', '.join(used)}" if used else f"{kind}@N"
    parts = [f"<section><h2>Temperature sweep: {html_lib.escape(title)} ({html_lib.escape(label)})</h2>"]
    info: dict[str, Any] = {"task": task, "model": model, "kind": kind, "runs": {str(t): str(r.path) for t, r in sc.runs.items()},
                            "verifier": {str(t): v for t, v in sc.verifiers.items()} or None}
    if len(sc.runs) < 2:
        parts.append("<p class=\"note\">Fewer than two temperatures with curves; no sweep analysis.</p></section>")
        parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in sc.notes]
        info["notes"] = sc.notes
        return "\n".join(parts), info
    fits = fit_temperatures({t: (c.k, c.value) for t, c in curves.items()}, n_points=n_points)
    n_max = max(r.n for r in sc.runs.values()) or int(max(c.k.max() for c in curves.values()))
    parts.append(f"<h3>Per-temperature fits: {kind}@N(T) ≈ exp(a(T)·N<sup>b(T)</sup>)</h3>")
    parts.append(table_html(["T", "a(T)", "b(T)", "R²", "points", "run"],
                            [(f"{t:g}", fmt_value(f.a) if f else "—", fmt_value(f.b) if f else "—",
                              fmt_value(f.r2) if f else "no fit",
                              f.n_points if f else 0, sc.runs[t].hash) for t, f in fits.items()]))
    info["fits"] = {str(t): (asdict(f) if f else None) for t, f in fits.items()}
    Ns = powers_of_two(4 * n_max)
    # the continuous T* is found on a log-spaced grid (what T*(N) is fitted to) plus the table's powers of two
    Ns_fit = sorted(set(int(n) for n in log_spaced_ks(4 * n_max, 40)) | set(Ns))
    sf = analyse_sweep({t: (c.k, c.value) for t, c in curves.items()}, Ns_fit, families=families,
                       holdout_fraction=holdout_fraction, n_points=n_points)
    parts.append(sweep_fit_html(sf, holdout_fraction))
    chosen = {t: s for t, s in sf.selections.items() if s is not None}
    png = plot_temperature_curves(curves, {t: s.best for t, s in chosen.items()}, out_dir / f"sweep{idx:02d}_curves.png",
                                  kind=kind, title=title, extrapolate_to=4 * n_max)
    parts.append(img_tag(png, f"{kind}@N by temperature"))
    parts += _optimum_html(sc, sf, Ns, kind, n_max, title, out_dir / f"sweep{idx:02d}_tstar.png", info)
    info.update(sweep_fit_json(sf))
    parts += _coscaling_html(sc, kind, tol, title, out_dir / f"sweep{idx:02d}_coscaling.png", info)
    parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in sc.notes]
    parts.append("</section>")
    info["notes"] = sc.notes
    return "\n".join(parts), info
