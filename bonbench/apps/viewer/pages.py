"""The viewer's pages, as HTML strings: the runs, a run with its problems, a problem, two runs side by
side, a checkpoint.

Every page comes from a jinja2 template of ``templates/`` with autoescaping on, so a completion,
answer, problem id, model name or grader message holding ``<script>``, ``</textarea>`` or an
``onerror=`` attribute shows as text; no value reaches a page unescaped, and the one script is
``templates/table.js``, read from the package. Each page also carries a Content-Security-Policy
that lets only that script run (by its hash) and loads nothing from anywhere: a second line of
defence, and why the pages work from ``file://`` (``bonbench view --static``).

Links are relative and the same for the server and the bundle (the addresses: ``site``).

What it does not do: read rows (``problems``), serve (``server``) or write files (``bundle``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.apps.analysis.htmlparts import fmt_value
from bonbench.apps.viewer.checkpoints import CheckpointView, eval_plots, log_plots
from bonbench.apps.viewer.compare import FILTERS, VERDICTS, Flip, MetricDiff, flip_flags
from bonbench.apps.viewer.curves import curve_plot
from bonbench.apps.viewer.problems import FLAGS, REWARD_FLAGS, ProblemRow, SampleView
from bonbench.apps.viewer.prompts import ProblemTexts
from bonbench.apps.viewer.runs import RunView
from bonbench.apps.viewer.shards import ShardedRun

SETTINGS = ("task", "model", "backend", "n", "temperature", "top_p", "max_tokens", "prompt_style", "seed", "task_args",
            "verifier")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates, autoescaped, strict about undefined names."""
    return jinja2.Environment(loader=jinja2.PackageLoader("bonbench.apps.viewer", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=1)
def script() -> str:
    return resources.files("bonbench.apps.viewer").joinpath("templates/table.js").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def csp() -> str:
    """The pages' Content-Security-Policy: nothing loads from anywhere, only ``table.js`` runs."""
    digest = base64.b64encode(hashlib.sha256(script().encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def page(title: str, template: str, depth: int, crumbs: Sequence[tuple[str, str]] = (),
         warnings: Sequence[str] = (), with_script: bool = False, reload: bool = False, **context: Any) -> str:
    """A whole page: ``template`` rendered with ``context`` inside the frame (navigation, warnings);
    ``reload``: the page reloads itself after a second (a table still being read)."""
    env = environment()
    body = Markup(env.get_template(template).render(**context))
    return env.get_template("page.html.j2").render(
        title=title, body=body, csp=csp(), home="../" * depth + "index.html", crumbs=crumbs, warnings=warnings, reload=reload,
        script=Markup(script()) if with_script else "") + "\n"


def _verdict_css(right: bool | None) -> str:
    """The CSS class of a right / wrong verdict; none when there is no verdict."""
    return "" if right is None else ("right" if right else "wrong")


def _num(x: float | None, digits: int = 3) -> str:
    return fmt_value(None if x is None else float(x), digits)


def _setting(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _versions(run: RunView) -> tuple[str, str]:
    doc = run.metrics_file()
    grading = doc.get("grading") or {}
    grader = doc.get("grader") or run.grader() or "—"
    if grading.get("grader_version") is not None:
        grader = f"{grader} v{grading['grader_version']}" + (f" ({grading['grading_id']})" if grading.get("grading_id") else "")
    verifier = run.verifier() or "—"
    for m in (doc.get("metrics") or {}).values():
        if isinstance(m, Mapping) and m.get("verifier") == verifier and "verifier_version" in m:
            fp = str(m.get("verifier_fingerprint") or "")
            verifier = f"{verifier} v{m['verifier_version']}" + (f" ({fp[:12]})" if fp else "")
            break
    return grader, verifier


def _last_row(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_num(v)}" for k, v in row.items() if k != "step" and isinstance(v, (int, float))
                     and not isinstance(v, bool))[:200]


def runs_page(runs: Sequence[RunView], checkpoints: Sequence[tuple[CheckpointView, int]] = (),
              sharded: Sequence[ShardedRun] = ()) -> str:
    rows = []
    for run in runs:
        cfg = run.config()
        doc = run.metrics_file()
        grader, verifier = _versions(run)
        metric_lines = [f"{m.name} {_num(m.value)}" + (f" [{_num(m.lo)}, {_num(m.hi)}]" if math.isfinite(m.lo) else "")
                        for m in run.metric_rows() if "[" not in m.name]
        settings = ", ".join(f"{k}={_setting(cfg[k])}" for k in ("temperature", "top_p", "max_tokens", "prompt_style")
                             if k in cfg)
        rows.append({"task": run.task, "model": run.model, "href": f"runs/{run.id}/index.html", "settings": settings,
                     "n": cfg.get("n", ""), "n_problems": doc.get("n_problems", ""), "metrics": metric_lines,
                     "grader": grader, "verifier": verifier, "state": "scored" if doc else "not scored (being written?)"})
    boxes = []
    for c, n_runs in checkpoints:
        cfg, log = c.train_config(), c.log()
        boxes.append({"name": c.path.name, "href": f"checkpoints/{c.id}/index.html", "task": cfg.get("task", ""),
                      "objective": cfg.get("objective", ""), "steps": len(log), "last": _last_row(log[-1]) if log else "",
                      "runs": n_runs})
    shards = [{"path": str(r.path), "task": r.task, "model": r.model, "n": r.n, "found": len(r.shards), "count": r.count,
               "shards": [{"label": s.label, "problems": "—" if s.problems is None else s.problems,
                           "mb": f"{s.sample_bytes / 1e6:.1f}",
                           "metrics": ", ".join(f"{name} {_num(v)}" for name, v in s.metrics) or "not scored yet"}
                          for s in r.shards]} for r in sharded]
    return page("bonbench runs", "runs.html.j2", 0, runs=rows, tasks=sorted({r["task"] for r in rows}),
                models=sorted({r["model"] for r in rows}), with_script=True, checkpoints=boxes, sharded=shards)


def checkpoint_page(c: CheckpointView, runs: Sequence[RunView], known: Sequence[RunView] = ()) -> str:
    """A checkpoint: its training settings, the runs that evaluated it, the evaluations made during
    training (evals.jsonl, each linked to its run where ``known`` holds it) with the kept step and a
    guard's stop, and its log by step."""
    cfg, log = c.train_config(), c.log()
    keys = ("task", "model", "objective", "objective_options", "steps", "group", "k", "lr", "lora_rank", "seed")
    settings = [(k, _setting(cfg[k])) for k in keys if k in cfg] + [("folder", str(c.path))]
    trained = c.manifest().get("training_hash")
    if trained:
        settings.append(("training hash", str(trained)))
    kept, stopped = c.kept(), c.stopped()
    evals = c.evals()
    return page(f"checkpoint {c.path.name}", "checkpoint.html.j2", 2, name=c.path.name, id=c.id, settings=settings,
                runs=[(f"{r.task} / {r.model} ({r.id})", f"../../runs/{r.id}/index.html") for r in runs],
                path=str(c.path), steps=len(log), plots=log_plots(log),
                eval_plots=eval_plots(evals, float(kept["step"]) if kept else None), evals=_eval_rows(evals, kept, known),
                eval_names=_eval_names(evals),
                kept=", ".join(f"{k} {_setting(kept[k])}" for k in ("metric", "step", "rule") if k in kept),
                stopped=", ".join(f"{k} {_setting(stopped[k])}" for k in ("step", "rule", "reason") if k in stopped))


def _any(x: Any) -> str:
    """A number read from a file as the tables show it; anything else as missing."""
    return _num(float(x)) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _eval_names(evals: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in evals:
        names.update({n: None for n in row["metrics"] if "[" not in n})
    return sorted(names, key=metric_sort_key)


def _eval_rows(evals: Sequence[Mapping[str, Any]], kept: Mapping[str, Any], known: Sequence[RunView]) -> list[dict[str, Any]]:
    """Each evaluated step: its run (linked when the viewer shows it), each metric with its CI and its
    paired difference to step 0."""
    by_path = {r.path.resolve(): r for r in known}
    out = []
    for row in evals:
        run = by_path.get(Path(str(row.get("run", ""))).resolve()) if row.get("run") else None
        cells = []
        for name in _eval_names(evals):
            m = row["metrics"].get(name)
            m = m if isinstance(m, Mapping) else {}
            ci = m.get("ci95")
            lo, hi = ci if isinstance(ci, list) and len(ci) == 2 else (None, None)
            vs_step0 = row.get("vs_step0")
            d = vs_step0.get(name) if isinstance(vs_step0, Mapping) else None
            vs = f"{_any(d.get('diff'))} [{_any(d.get('lo'))}, {_any(d.get('hi'))}]" if isinstance(d, Mapping) else ""
            cells.append({"value": _any(m.get("value")), "ci": f"[{_any(lo)}, {_any(hi)}]", "vs": vs})
        out.append({"step": _setting(row["step"]), "kept": bool(kept) and float(kept["step"]) == float(row["step"]),
                    "href": f"../../runs/{run.id}/index.html" if run is not None else "", "run": str(row.get("run", "")),
                    "cells": cells})
    return out


def _problem_cells(i: int, p: ProblemRow, values: Sequence[float], text: str) -> dict[str, Any]:
    flags = p.flags
    return {"id": p.problem_id, "href": f"problems/{i}.html", "text": text[:300], "flags": " ".join(flags),
            "pass_rate": _num(p.pass_rate), "n_right": p.n_right, "n_graded": p.n_graded, "best": _num(p.best),
            "right_cell": f"{_num(p.best)}" if p.rewards else f"{p.n_right} / {p.n_graded}",
            "metric_values": [_num(v) for v in values],
            "majority": "—" if p.majority is None else p.majority + (f" (tie of {p.majority_ties})"
                                                                    if p.majority_ties > 1 else ""),
            "share": _num(p.majority_share, 2),
            "majority_css": _verdict_css(p.majority_right),
            "pick": "—" if p.pick is None else f"#{p.pick}" + (f" ({_num(p.pick_value)})" if p.rewards else ""),
            "pick_sort": "" if p.pick is None else p.pick,
            "pick_css": _verdict_css(p.pick_right),
            "score": _num(p.pick_score), "tokens": _num(p.mean_tokens, 1)}


def run_page(run: RunView, columns: Sequence[str], problems: Sequence[ProblemRow], values: Sequence[Sequence[float]],
             statements: Mapping[str, str], warnings: Sequence[str], compare: Sequence[tuple[str, str]] = (),
             checkpoint: tuple[str, str] | None = None, reload: bool = False) -> str:
    """A run and its problems table; ``reload``: the table is not whole yet, the page reloads itself."""
    cfg = run.config()
    settings = [(k, _setting(cfg[k])) for k in SETTINGS if k in cfg]
    grader, verifier = _versions(run)
    settings += [("grader", grader), ("verifier (bon@k)", verifier), ("run directory", str(run.path))]
    metrics = [{"name": m.name, "value": _num(m.value, 4),
                "ci": f"[{_num(m.lo, 4)}, {_num(m.hi, 4)}]" if math.isfinite(m.lo) else "—",
                "n_problems": m.n_problems, "verifier": m.verifier or ""} for m in run.metric_rows()]
    rows = [_problem_cells(i, p, v, statements.get(p.problem_id, "")) for i, (p, v) in enumerate(zip(problems, values,
                                                                                                        strict=True))]
    rewards = bool(problems) and all(p.rewards for p in problems)
    return page(f"{run.task} / {run.model}", "run.html.j2", 2, crumbs=[(f"{run.task} / {run.model}", "index.html")],
                warnings=warnings, with_script=True, reload=reload, run=run, settings=settings, metrics=metrics, columns=columns,
                problems=rows, flags=REWARD_FLAGS if rewards else FLAGS, verifier=verifier, rewards=rewards,
                plot=curve_plot(run.curves_file()),
                compare=[(label, "../../" + href) for label, href in compare],
                checkpoint=None if checkpoint is None else (checkpoint[0], "../../" + checkpoint[1]))


def _verdict(s: SampleView) -> tuple[str, str]:
    g = s.grade
    if g is None:
        return "not graded", ""
    if g.correct is None:
        return ("reward " + _num(g.score), "") if g.score is not None else ("undecided", "")
    return ("right", "right") if g.correct else ("wrong", "wrong")


def _sample_cells(s: SampleView) -> dict[str, Any]:
    verdict, css = _verdict(s)
    sc = s.score
    detail = s.grade.detail if s.grade is not None else None
    return {"idx": s.sample_idx, "picked": s.picked, "verdict": verdict, "css": css,
            "answer": "—" if s.grade is None or s.grade.answer is None else s.grade.answer,
            "vote": "abstains" if s.vote is None else s.vote, "score": "—" if sc is None else _num(sc.score, 4),
            "steps": ", ".join(_num(v, 3) for v in sc.steps) if sc is not None and sc.steps else "",
            "aggregation": (sc.aggregation or "") if sc is not None else "",
            # the judge's rationales (judge:...?k=K), each beside the P(Yes) read after it
            "rationales": list(zip(sc.steps or [None] * len(sc.rationales), sc.rationales, strict=False))
            if sc is not None and sc.rationales else [],
            "logprob": _num(s.logprob, 2), "tokens": "—" if s.n_tokens is None else s.n_tokens,
            "finish": s.finish_reason or "—", "error": s.grade.error if s.grade is not None else None,
            "detail": json.dumps(detail, indent=1, ensure_ascii=False, default=str) if detail else "",
            "completion": "(no sample row)" if s.completion is None else s.completion,
            "others": ", ".join(f"{name} {_num(v, 4)}" for name, v in s.other_scores.items())}


def _classes(samples: Sequence[SampleView]) -> list[dict[str, Any]]:
    """The answer classes and their votes, most voted first; none when no sample has an answer."""
    if not any(s.grade is not None and s.grade.answer is not None for s in samples):
        return []
    votes = Counter(s.vote for s in samples if s.grade is not None)
    right = {s.vote for s in samples if s.grade is not None and s.grade.correct is True}
    out = []
    for answer, n in votes.most_common():
        members = [f"#{s.sample_idx}" for s in samples if s.grade is not None and s.vote == answer]
        is_right = answer is not None and answer in right
        out.append({"answer": "(abstains)" if answer is None else answer, "votes": n,
                    "right": "yes" if is_right else ("—" if answer is None else "no"),
                    "css": "right" if is_right else "", "samples": " ".join(members)})
    return out


def _majority_text(row: ProblemRow) -> str:
    if row.majority is None:
        return "—"
    verdict = {True: "right", False: "wrong", None: "the right class among them"}[row.majority_right]
    if row.majority_ties > 1:
        return f"a tie of {row.majority_ties} classes at {_num(row.majority_share, 2)} of the votes each ({verdict}); " \
               f"first: {row.majority}"
    return f"{row.majority} ({_num(row.majority_share, 2)} of the votes; {verdict})"


def _summary(row: ProblemRow) -> list[tuple[str, str]]:
    if row.rewards:
        return [("samples", str(row.n_samples)), ("mean reward", f"{_num(row.pass_rate)} ({row.n_graded} graded)"),
                ("best reward", _num(row.best)),
                ("verifier's pick", "—" if row.pick is None else f"#{row.pick} (score {_num(row.pick_score, 4)}; "
                                                                 f"reward {_num(row.pick_value)})"),
                ("mean length", f"{_num(row.mean_tokens, 1)} tokens")]
    return [("samples", str(row.n_samples)),
            ("pass rate", f"{_num(row.pass_rate)} ({row.n_right} right of {row.n_graded} graded)"),
            ("majority", _majority_text(row)),
            ("verifier's pick", "—" if row.pick is None else
             f"#{row.pick} (score {_num(row.pick_score, 4)}; "
             f"{ {True: 'right', False: 'wrong', None: 'not graded'}[row.pick_right] })"),
            ("mean length", f"{_num(row.mean_tokens, 1)} tokens")]


def problem_page(run: RunView, n: int, row: ProblemRow, metrics: Sequence[tuple[str, float]], samples: Sequence[SampleView],
                 texts: ProblemTexts | None, missing: str, count: int, warnings: Sequence[str]) -> str:
    summary = [("run", f"{run.task} / {run.model} ({run.id})"), *_summary(row)]
    summary += [(name, _num(v, 4)) for name, v in metrics]
    return page(f"{row.problem_id} · {run.task} / {run.model}", "problem.html.j2", 3,
                crumbs=[(f"{run.task} / {run.model}", "../index.html")], warnings=warnings,
                problem_id=row.problem_id, prev=f"{n - 1}.html" if n > 0 else "",
                next=f"{n + 1}.html" if n + 1 < count else "", summary=summary, texts=texts, missing=missing,
                classes=_classes(samples), samples=[_sample_cells(s) for s in samples])



def _verdict_cell(right: bool | None) -> tuple[str, str]:
    return {True: ("right", "right"), False: ("wrong", "wrong"), None: ("—", "")}[right]


def compare_page(a: RunView, b: RunView, diffs: Sequence[MetricDiff], flipped: Sequence[Flip],
                 pairs: Sequence[tuple[ProblemRow, ProblemRow]], n_boot: int, warnings: Sequence[str] = (),
                 reload: bool = False) -> str:
    """Two runs of one task: settings, paired metric differences, flipped problems, every shared problem;
    ``reload``: a run is still being read (the problems are not listed yet), the page reloads itself."""
    ca, cb = a.config(), b.config()
    settings = [(k, _setting(ca.get(k, "—")), _setting(cb.get(k, "—"))) for k in SETTINGS if k in ca or k in cb]
    settings += [("grader", *_versions(a)[:1], *_versions(b)[:1]), ("verifier (bon@k)", _versions(a)[1], _versions(b)[1])]
    rows = [{"name": d.name, "a": _num(d.a, 4), "b": _num(d.b, 4), "diff": _num(d.diff, 4), "n_shared": d.n_shared,
             "ci": f"[{_num(d.lo, 4)}, {_num(d.hi, 4)}]" if math.isfinite(d.lo) else "—",
             "css": {"better": "right", "worse": "wrong"}.get(d.verdict, "")} for d in diffs]
    labels = dict(VERDICTS)
    flips = [{"problem_id": f.problem_id, "href": f"problems/{f.n}.html", "what": f.what, "label": labels[f.what],
              "change": "wrong → right" if f.gained else "right → wrong", "css": "right" if f.gained else "wrong"}
             for f in flipped]
    problems = [{"id": x.problem_id, "href": f"problems/{n}.html", "flags": " ".join(flip_flags(x, y)),
                 "a": _num(x.pass_rate), "b": _num(y.pass_rate), "d": _num(y.pass_rate - x.pass_rate),
                 "verdicts": [_verdict_cell(v) for v in (x.pick_right, y.pick_right, x.majority_right, y.majority_right)]}
                for n, (x, y) in enumerate(pairs)]
    return page(f"{a.task}: {a.model} vs {b.model}", "compare.html.j2", 3, a=a, b=b, settings=settings, diffs=rows,
                flips=flips, shared=len(pairs), n_boot=n_boot, a_href=f"../../../runs/{a.id}/index.html",
                b_href=f"../../../runs/{b.id}/index.html", problems=problems, filters=FILTERS, with_script=True,
                warnings=warnings, reload=reload)


def compare_problem_page(n: int, count: int, sides: Sequence[tuple[RunView, ProblemRow, Sequence[SampleView]]],
                         texts: ProblemTexts | None, missing: str) -> str:
    """One problem of two runs, their samples next to each other."""
    (a, row, _), (b, _, _) = sides
    cells = [{"name": name, "model": run.model, "id": run.id, "summary": _summary(r),
              "samples": [_sample_cells(s) for s in samples]} for name, (run, r, samples) in zip("AB", sides, strict=True)]
    return page(f"{row.problem_id} · {a.model} vs {b.model}", "compare_problem.html.j2", 4,
                crumbs=[(f"{a.task}: {a.id} vs {b.id}", "../index.html")], problem_id=row.problem_id,
                prev=f"{n - 1}.html" if n > 0 else "", next=f"{n + 1}.html" if n + 1 < count else "", texts=texts,
                missing=missing, sides=cells)
