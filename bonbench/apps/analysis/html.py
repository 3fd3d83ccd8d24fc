"""``report.html`` for one or more runs, and for temperature sweeps among them.

``write_report(run_dirs, out_dir)`` writes into ``out_dir``:

* ``report.html`` — self-contained (PNGs embedded as base64): per run its settings, metrics with
  95% CIs, coverage-law fits of each k-curve with an extrapolation check, the choice between the
  pure law and the law with a linear trend (``laws``), and the k-curve figure; per sweep (runs of
  one task and model at two or more temperatures) the per-temperature fits and family choice, the
  law's parameters as functions of T, the optimal temperature per N (measured, fitted, continuous)
  with the fitted T*(N) curve (``temperature``), and the co-scaling heat map of per-problem
  (T*, N*) (docs/scaling.md);
* per reward-judged task and KL reference, the reward-vs-KL plane (policies and their best-of-k
  selections, with the Pareto front), and per reward-judged run its measured winrate@k and
  kl_bon@k beside N/(N+1) and log N - (N-1)/N (``frontier``);
* per ``bonbench train`` checkpoint folder given, its training curves (``log.jsonl``: reward, KL,
  entropy, gradient norm and variance, speed), and per task with two or more runs their k-curves on
  shared axes (both from ``sections``);
* the same PNGs as files, and ``report.json`` with every fit and table in machine-readable form.

Also home of the two small HTML helpers the leaderboard uses. Fitting is ``fits``' job, drawing
``plots``'; this module only arranges them.
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.metrics.estimators import metric_sort_key
from bonbench.metrics.info import footnotes, metric_info

CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
td.up { background: #e6f4e6; } td.down { background: #fbe7e7; }
img { max-width: 100%; } .note { color: #555; font-size: 0.9em; }
section { margin-bottom: 2.5em; border-top: 1px solid #ddd; }
"""


def page(title: str, body: str) -> str:
    """A standalone HTML page around ``body``."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html_lib.escape(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")


def table_html(header: Sequence[str], rows: Sequence[Sequence[Any]], raw: bool = False) -> str:
    """An HTML table. Cells are escaped text, or with ``raw=True`` ``(html, css_class)`` pairs."""
    out = ["<table><thead><tr>" + "".join(f"<th>{html_lib.escape(str(h))}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for cell in row:
            if raw:
                content, cls = cell
                cells.append(f"<td class=\"{cls}\">{content}</td>" if cls else f"<td>{content}</td>")
            else:
                cells.append(f"<td>{html_lib.escape(str(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def img_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<p><img alt=\"{html_lib.escape(alt)}\" src=\"data:image/png;base64,{data}\"></p>"


def fmt_value(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def powers_of_two(upto: int) -> list[int]:
    out, k = [], 1
    while k <= upto:
        out.append(k)
        k *= 2
    return out


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def _run_section(run: Any, idx: int, out_dir: Path, fit_fraction: float, n_points: int, families: Sequence[str],
                 holdout_fraction: float) -> tuple[str, dict]:
    from bonbench.apps.analysis.fitreport import selection_rows, selection_table
    from bonbench.apps.analysis.fits import FitError, extrapolation_check, fit_power_law
    from bonbench.apps.analysis.laws import select_family
    from bonbench.apps.analysis.plots import plot_k_curves

    cfg = run.config
    settings = [("task", run.task), ("model", run.model), ("backend", cfg.get("backend", "")),
                ("temperature", cfg.get("temperature")), ("top_p", cfg.get("top_p")), ("n", cfg.get("n")),
                ("seed", cfg.get("seed")), ("config hash", run.hash), ("run dir", str(run.path)),
                ("bonbench", run.bonbench_version), ("dataset", run.dataset_fingerprint)]
    parts = [f"<section><h2>{html_lib.escape(run.label())}</h2>", table_html(["setting", "value"], settings)]
    parts.append("<h3>Metrics</h3>")
    parts.append(table_html(["metric", "value", "95% CI", "problems"],
                            [(name, fmt_value(m.value), _ci_text(run, name), m.n_problems)
                             for name, m in sorted(run.metrics.items(), key=lambda kv: metric_sort_key(kv[0]))]))
    parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in footnotes(run.metrics)]
    fits, fit_rows, sel_rows, info = {}, [], [], {"run_dir": str(run.path), "hash": run.hash, "fits": {}}
    for kind, c in run.curves.items():
        try:
            sel = select_family(c.k, c.value, families, holdout_fraction=holdout_fraction, n_points=n_points)
            sel_rows += selection_rows(kind, sel)
            fits[kind] = sel.best  # the figure draws the chosen family
        except FitError as exc:
            sel, fits[kind] = None, None
            sel_rows += selection_rows(kind, None, str(exc))
        try:
            fit = fit_power_law(c.k, c.value, n_points=n_points)
        except FitError as exc:
            fit_rows.append((kind, "—", "—", "—", "—", "—", str(exc)[:60], "", ""))
            if sel is not None:
                info["fits"][kind] = {"selection": sel.to_json()}
            continue
        entry: dict[str, Any] = {"fit": asdict(fit)}
        if sel is not None:
            entry["selection"] = sel.to_json()
        try:
            ex = extrapolation_check(c.k, c.value, fit_fraction=fit_fraction, n_points=n_points)
            ex_cells = (f"k ≤ {ex.k_cut:g}: a={ex.fit.a:.3f}, b={ex.fit.b:.3f}", fmt_value(ex.mean_abs_error), fmt_value(ex.max_abs_error),
                        f"{ex.error_at_max_k:+.4f}" if math.isfinite(ex.error_at_max_k) else "—")
            entry["extrapolation"] = {"k_cut": ex.k_cut, "a": ex.fit.a, "b": ex.fit.b, "mean_abs_error": ex.mean_abs_error,
                                      "max_abs_error": ex.max_abs_error, "error_at_max_k": ex.error_at_max_k}
        except FitError as exc:
            ex_cells = ("not enough small-k points", "—", "—", "—")
            entry["extrapolation"] = {"error": str(exc)}
        fit_rows.append((kind, fmt_value(fit.a), fmt_value(fit.b), fmt_value(fit.r2), fit.n_points, f"{fit.k_min:g}–{fit.k_max:g}", *ex_cells))
        info["fits"][kind] = entry
    if run.curves:
        parts.append("<h3>Scaling fits: log c(k) = a·k<sup>b</sup></h3>")
        parts.append(table_html(["curve", "a", "b", "R²", "points", "k range", f"fit on small k (≤ {fit_fraction:g}·n)",
                                 "mean |err| held-out", "max |err| held-out", "err at k=n"], fit_rows))
        parts.append("<h3>Family per curve: power law vs power law plus linear trend</h3>")
        parts.append(selection_table(sel_rows, "curve", holdout_fraction))
        png = plot_k_curves(run.curves, out_dir / f"run{idx:02d}_{run.hash}_curves.png", title=run.label(), fits=fits)
        parts.append(img_tag(png, f"k-curves of {run.label()}"))
    else:
        parts.append("<p class=\"note\">No curves.json in this run: no k-curves or fits.</p>")
    bon_html, bon_info = _bon_references(run, idx, out_dir)
    if bon_info:
        parts.append(bon_html)
        info["bon_references"] = bon_info
    parts.append("</section>")
    return "\n".join(parts), info


def _ci_text(run: Any, name: str) -> str:
    """The metric's 95% CI, or a dash where it has none: withheld, or closed-form (``metricinfo``)."""
    m = run.metrics[name]
    if metric_info(name, m.notes, run.per_problem.get(name)).closed_form or not all(map(math.isfinite, m.ci95)):
        return "— (closed form)" if metric_info(name, m.notes, run.per_problem.get(name)).closed_form else "—"
    return f"[{fmt_value(m.ci95[0])}, {fmt_value(m.ci95[1])}]"


def _metric_cell(m: Any) -> str:
    if m is None:
        return "—"
    if not all(map(math.isfinite, m.ci95)):
        return fmt_value(m.value)
    return f"{fmt_value(m.value)} [{fmt_value(m.ci95[0])}, {fmt_value(m.ci95[1])}]"


def _bon_references(run: Any, idx: int, out_dir: Path) -> tuple[str, list[dict]]:
    """Measured winrate@k and kl_bon@k beside k/(k+1) and log k - (k-1)/k (reward-judged runs)."""
    from bonbench.apps.analysis.frontier import bon_reference_rows
    from bonbench.apps.analysis.plots import plot_bon_references

    rows = bon_reference_rows(run)
    if not rows:
        return "", []
    against = next((r.against for r in rows if r.against), "")
    kl_ref = next((str(r.kl_bon.notes.get("reference", "")) for r in rows if r.kl_bon is not None), "")
    parts = ["<h3>Best-of-N against the analytic references</h3>",
             "<p class=\"note\">For continuous rewards, the best of N samples of a policy beats a fresh sample of the same "
             "policy with probability N/(N+1), and its KL to that policy is log N − (N−1)/N (smaller under ties). "
             f"Win rates here are against {html_lib.escape(against or '—')}; kl_bon@k is the KL of reward-best-of-k "
             f"selection to {html_lib.escape(kl_ref or '—')} (docs/rewards.md).</p>",
             table_html(["N", "winrate@N [95% CI]", "N/(N+1)", "kl_bon@N [95% CI]", "log N − (N−1)/N"],
                        [(r.k, _metric_cell(r.winrate), fmt_value(r.winrate_analytic), _metric_cell(r.kl_bon), fmt_value(r.kl_analytic))
                         for r in rows])]
    png = plot_bon_references(rows, out_dir / f"run{idx:02d}_{run.hash}_bon_references.png", title=run.label())
    parts.append(img_tag(png, f"best-of-N references of {run.label()}"))
    info = [{"k": r.k, "winrate": None if r.winrate is None else {"value": r.winrate.value, "ci95": r.winrate.ci95},
             "winrate_analytic": r.winrate_analytic, "against": r.against,
             "kl_bon": None if r.kl_bon is None else {"value": r.kl_bon.value, "ci95": r.kl_bon.ci95},
             "kl_analytic": r.kl_analytic} for r in rows]
    return "\n".join(parts), info


def _plane_section(key: tuple[str, str], points: list[Any], idx: int, out_dir: Path, bon: Any = None) -> tuple[str, dict]:
    """One reward-vs-KL plane: every point with both CIs, the Pareto front marked and drawn, and the
    reference's analytic best-of-N curve when its own run has a max@k curve."""
    from bonbench.apps.analysis.frontier import pareto_front
    from bonbench.apps.analysis.plots import plot_reward_kl

    task, reference = key
    front = pareto_front(points)
    on_front = {id(p) for p in front}
    parts = [f"<section><h2>Reward vs KL: {html_lib.escape(task)}, KL to {html_lib.escape(reference)}</h2>",
             "<p class=\"note\">Policies at (kl, mean reward); their best-of-k selections at (kl_bon@k, max@k). "
             "A point is on the Pareto front when no other point has both lower KL and higher reward.</p>",
             table_html(["point", "run", "method", "KL [95% CI]", "reward [95% CI]", "Pareto front"],
                        [(p.label, p.run, p.method, f"{fmt_value(p.kl)} [{fmt_value(p.kl_ci[0])}, {fmt_value(p.kl_ci[1])}]",
                          f"{fmt_value(p.reward)} [{fmt_value(p.reward_ci[0])}, {fmt_value(p.reward_ci[1])}]", "yes" if id(p) in on_front else "")
                         for p in points])]
    parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in footnotes(["kl"])]
    if bon is not None:
        parts.append(f"<p class=\"note\">Dotted: best-of-N of the reference (run {html_lib.escape(bon.run)}), "
                     f"N = 1..{int(bon.n[-1])}, at KL log N - (N-1)/N (exact for continuous rewards) and reward max@N "
                     "(exact estimate from that run's samples), with its 95% band.</p>")
    png = plot_reward_kl(points, front, out_dir / f"plane{idx:02d}_{task}.png", title=f"{task}: reward vs KL",
                         reference=reference, bon=bon)
    parts.append(img_tag(png, f"reward vs KL on {task}"))
    parts.append("</section>")
    info = {"task": task, "reference": reference, "points": [asdict(p) for p in points],
            "pareto_front": [p.label for p in front],
            "bon_curve": None if bon is None else {"run": bon.run, "n": bon.n.tolist(), "kl": bon.kl.tolist(),
                                                   "reward": bon.reward.tolist(), "lo": bon.lo.tolist(), "hi": bon.hi.tolist()}}
    return "\n".join(parts), info


def _sweep_section(key: tuple[str, str], runs: list[Any], idx: int, out_dir: Path, kind: str, tol: float,
                   n_points: int, families: Sequence[str], holdout_fraction: float,
                   verifier: str | None) -> tuple[str, dict]:
    from bonbench.apps.analysis.fitreport import sweep_fit_html, sweep_fit_json
    from bonbench.apps.analysis.fits import coscaling, fit_temperatures, log_spaced_ks, optimal_temperature
    from bonbench.apps.analysis.plots import plot_coscaling, plot_optimal_temperature, plot_temperature_curves
    from bonbench.apps.analysis.rundir import kind_curve, per_problem_curves
    from bonbench.apps.analysis.temperature import analyse_sweep

    task, model = key
    notes: list[str] = []
    by_t: dict[float, Any] = {}
    curves: dict[float, Any] = {}
    verifiers: dict[float, str] = {}
    for r in sorted(runs, key=lambda r: r.created):
        try:
            curve, vname = kind_curve(r, kind, verifier)
        except BonbenchError as exc:
            if verifier is not None:
                raise  # the user named a verifier: a run without it is an error, not a footnote
            notes.append(f"run {r.hash} (T={r.temperature:g}) left out: {exc}")
            continue
        if curve is None:
            notes.append(f"run {r.hash} (T={r.temperature:g}) has no {kind} curve; left out")
            continue
        if r.temperature in by_t:
            notes.append(f"T={r.temperature:g}: several runs; using the latest ({r.hash}), not {by_t[r.temperature].hash}")
        by_t[r.temperature], curves[r.temperature] = r, curve
        if vname is not None:
            verifiers[r.temperature] = vname
    title = f"{task} / {model}"
    used = sorted(set(verifiers.values()))
    label = f"{kind}@N, verifier {', '.join(used)}" if used else f"{kind}@N"
    parts = [f"<section><h2>Temperature sweep: {html_lib.escape(title)} ({html_lib.escape(label)})</h2>"]
    info: dict[str, Any] = {"task": task, "model": model, "kind": kind, "runs": {str(t): str(r.path) for t, r in by_t.items()},
                            "verifier": {str(t): v for t, v in verifiers.items()} or None}
    if len(used) > 1:
        notes.append(f"the runs' bon@N curves use different verifiers ({', '.join(used)}); pass --verifier to compare "
                     "like with like")
    if len(by_t) < 2:
        parts.append("<p class=\"note\">Fewer than two temperatures with curves; no sweep analysis.</p></section>")
        parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in notes]
        info["notes"] = notes
        return "\n".join(parts), info
    fits = fit_temperatures({t: (c.k, c.value) for t, c in curves.items()}, n_points=n_points)
    n_max = max(r.n for r in by_t.values()) or int(max(c.k.max() for c in curves.values()))
    parts.append(f"<h3>Per-temperature fits: {kind}@N(T) ≈ exp(a(T)·N<sup>b(T)</sup>)</h3>")
    parts.append(table_html(["T", "a(T)", "b(T)", "R²", "points", "run"],
                            [(f"{t:g}", fmt_value(f.a) if f else "—", fmt_value(f.b) if f else "—", fmt_value(f.r2) if f else "no fit",
                              f.n_points if f else 0, by_t[t].hash) for t, f in fits.items()]))
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
    opt = optimal_temperature({t: (c.k, c.value) for t, c in curves.items()}, Ns, chosen)
    cont = {o.N: o for o in sf.optima}
    parts.append(f"<h3>Optimal temperature per budget N</h3><p class=\"note\">Measured: argmax over the temperatures "
                 f"run of {kind}@N (only N ≤ n); fitted: the same argmax of each temperature's chosen law, extrapolated "
                 f"past n = {n_max}; continuous: argmax over T in [{min(curves):g}, {max(curves):g}] of the "
                 f"{sf.family or '—'} law with its parameters trended in T (an optimum at an end of that range is "
                 "marked and left out of the T*(N) fit); T*(N) curve: the fit above. Ties go to the lower T.</p>")
    parts.append(table_html(["N", "T* measured", f"{kind}@N at T*", "T* fitted", "fitted value", "T* continuous",
                             "T*(N) curve"],
                            [(o.N, fmt_value(o.t_measured, 2), fmt_value(o.value_measured), fmt_value(o.t_fitted, 2), fmt_value(o.value_fitted),
                              (fmt_value(cont[o.N].t_star, 3) + (" (edge)" if cont[o.N].at_boundary else "")) if o.N in cont else "—",
                              fmt_value(float(sf.t_star.predict(o.N)), 3) if sf.t_star is not None else "—")
                             for o in opt]))
    parts.append(img_tag(plot_optimal_temperature(opt, out_dir / f"sweep{idx:02d}_tstar.png", title=title,
                                               continuous=sf.optima, t_star_fit=sf.t_star), "T*(N)"))
    info["fits"] = {str(t): (asdict(f) if f else None) for t, f in fits.items()}
    info["optimal_temperature"] = [asdict(o) for o in opt]
    info.update(sweep_fit_json(sf))
    n_min = min(r.n for r in by_t.values())
    Ns_cs = powers_of_two(n_min) + ([n_min] if n_min not in powers_of_two(n_min) else [])
    try:
        values = {t: per_problem_curves(r, kind, Ns_cs, verifier=verifiers.get(t)) for t, r in by_t.items()}
        cs = coscaling(values, Ns_cs, tol=tol)
    except BonbenchError as exc:
        parts.append(f"<p class=\"note\">Co-scaling map skipped: {html_lib.escape(str(exc))}</p>")
    else:
        parts.append("<h3>Co-scaling: per-problem (T*, N*)</h3><p class=\"note\">For each problem, N* is the smallest N "
                     f"whose best {kind}@N over temperatures is within {tol:g} of the problem's best value over all (T, N); "
                     "T* are the temperatures reaching it at N* (ties share the problem). "
                     f"{cs.n_counted} problems counted, {cs.n_unsolved} never solved (excluded), "
                     f"{cs.n_missing} not in every run (excluded). See docs/scaling.md.</p>")
        parts.append(img_tag(plot_coscaling(cs, out_dir / f"sweep{idx:02d}_coscaling.png", title=title), "co-scaling"))
        parts.append(table_html(["T*"] + [f"N*={n}" for n in cs.Ns] + ["all N"],
                                [[f"{t:g}"] + [f"{100 * v:.1f}%" for v in cs.freq[i]] + [f"{100 * cs.freq[i].sum():.1f}%"]
                                 for i, t in enumerate(cs.temperatures)]))
        info["coscaling"] = {"temperatures": cs.temperatures, "Ns": cs.Ns, "freq": cs.freq, "n_counted": cs.n_counted,
                             "n_unsolved": cs.n_unsolved, "n_missing": cs.n_missing, "tol": cs.tol}
    parts += [f"<p class=\"note\">{html_lib.escape(n)}</p>" for n in notes]
    parts.append("</section>")
    info["notes"] = notes
    return "\n".join(parts), info


def is_checkpoint_dir(path: Path) -> bool:
    """A ``bonbench train`` checkpoint folder (finished or not): it has a per-step log and its train config."""
    return (path / "log.jsonl").is_file() and (path / "train_config.json").is_file()


def write_report(run_dirs: Sequence[Path], out_dir: Path, *, kind: str = "pass", coscaling_tol: float = 0.01,
                 fit_fraction: float = 0.25, n_points: int = 40, families: Sequence[str] | None = None,
                 holdout_fraction: float = 0.5, verifier: str | None = None) -> Path:
    """Write report.html (+ PNGs, report.json) for ``run_dirs`` (run dirs, sweep dirs or results trees).

    Runs of one (task, model) at two or more temperatures also get a sweep section built from their
    ``kind`` curves (``"pass"`` or ``"bon"``; for bon, the bon@k of ``verifier``, by default the one
    each run's metrics were computed with). Every curve is fitted with each of ``families``
    (default ``laws.DEFAULT_FAMILIES``) and the family is chosen by the held-out error beyond
    ``holdout_fraction``·k_max. Returns the path of report.html.
    """
    from bonbench.apps.analysis.laws import DEFAULT_FAMILIES, FAMILIES
    from bonbench.apps.analysis.rundir import expand_run_dirs, load_run

    if kind not in ("pass", "bon"):
        raise BonbenchError(f"--kind must be pass or bon, not {kind!r}")
    if verifier is not None and kind != "bon":
        raise BonbenchError("--verifier chooses the bon@N curve; add --kind bon")
    families = tuple(families or DEFAULT_FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or len(set(families)) != len(families):
        raise BonbenchError(f"--fit-families takes distinct names from {', '.join(FAMILIES)} (got {', '.join(families)})")
    if not 0 < holdout_fraction < 1:
        raise BonbenchError(f"--holdout-fraction must be in (0, 1) (got {holdout_fraction})")
    checkpoints = [Path(d) for d in run_dirs if is_checkpoint_dir(Path(d))]
    others = [d for d in run_dirs if not is_checkpoint_dir(Path(d))]
    runs = [load_run(d) for d in expand_run_dirs(others)] if others else []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = ["<h1>bonbench report</h1>", f"<p class=\"note\">{len(runs)} run(s), {len(checkpoints)} checkpoint(s).</p>"]
    doc: dict[str, Any] = {"runs": [], "sweeps": []}
    from bonbench.apps.analysis.sections import comparison_section, training_section

    if checkpoints:
        html_part, info = training_section(checkpoints, out_dir)
        body.append(html_part)
        doc["training"] = info
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in runs:
        groups.setdefault((r.task, r.model_slug), []).append(r)
    sweep_keys = [k for k, rs in groups.items() if len({r.temperature for r in rs}) >= 2]
    for i, key in enumerate(sweep_keys):
        html_part, info = _sweep_section(key, groups[key], i, out_dir, kind, coscaling_tol, n_points, families,
                                         holdout_fraction, verifier)
        body.append(html_part)
        doc["sweeps"].append(info)
    from bonbench.apps.analysis.frontier import bon_curves, plane_points

    doc["planes"] = []
    curves = bon_curves(runs)
    for i, (key, points) in enumerate(plane_points(runs).items()):
        html_part, info = _plane_section(key, points, i, out_dir, curves.get(key))
        body.append(html_part)
        doc["planes"].append(info)
    doc["comparisons"] = []
    for task in dict.fromkeys(r.task for r in runs):
        html_part, info = comparison_section(task, [r for r in runs if r.task == task and r.curves], out_dir)
        if html_part:
            body.append(html_part)
            doc["comparisons"].append(info)
    for i, run in enumerate(runs):
        html_part, info = _run_section(run, i, out_dir, fit_fraction, n_points, families, holdout_fraction)
        body.append(html_part)
        doc["runs"].append(info)
    path = out_dir / "report.html"
    outputs.write_text(path, page("bonbench report", "\n".join(body)))
    outputs.write_text(out_dir / "report.json", json.dumps(_jsonable(doc), indent=2) + "\n")
    return path
