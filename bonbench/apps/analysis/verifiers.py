"""``bonbench eval-verifier``: how well verifiers pick samples, on held-out runs.

For the problems of one or more scored runs (their samples pooled by key; a problem must not be in
two of them), and each verifier given (``logprob``, ``oracle``, ``learned:PATH``, ``rm:...``):

* AUROC of its scores against the grader's verdicts over every sample (scikit-learn), and the
  mean within-problem AUROC over problems that have both correct and wrong samples (what bon@k
  depends on: it only compares samples of one problem);
* the bon@k curve for k = 1..n with 95% bootstrap bands, next to pass@k (= oracle bon@k) and
  maj@k (``estimators.compute_curves``);
* the paired bootstrap of bon@k(A) - bon@k(B) over problems for the first verifier against each
  other one, at every k (``estimators.paired_bootstrap_diff``).

Scores are computed through ``pipeline.verify``, so they are stored in each run's ``scores/`` and
reused. Nothing here samples or trains; the figure is ``analysis.plots.plot_k_curves``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bonbench.pipeline import stages as pipeline
from bonbench.core.errors import BonbenchError
from bonbench.metrics.estimators import ProblemOutcome, compute_curves, paired_bootstrap_diff
from bonbench.core.records import Grade, Score

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class VerifierEval:
    """Everything ``evaluate`` measured (``to_json`` for the file ``eval-verifier`` writes)."""

    runs: tuple[str, ...]
    n_problems: int
    n: int
    verifiers: tuple[str, ...]
    auroc: dict[str, float | None]
    auroc_within: dict[str, float | None]
    curves: dict[str, dict[str, list]]  # "pass", "maj", "bon:<verifier>"
    paired: dict[str, dict[str, list]] = field(default_factory=dict)  # "<A> - <B>": {"k","diff","lo","hi","p"}

    def to_json(self) -> dict[str, Any]:
        return {"runs": list(self.runs), "n_problems": self.n_problems, "n": self.n, "verifiers": list(self.verifiers),
                "auroc": self.auroc, "auroc_within_problem": self.auroc_within, "curves": self.curves,
                "paired_bon_diff": self.paired}


def _auroc(labels: Sequence[float], scores: Sequence[float]) -> float | None:
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels) > 0.5
    if y.size == 0 or y.all() or not y.any():
        return None
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64)))


def evaluate(run_dirs: Sequence[Path], verifiers: Sequence[str], *, data_dir: str | None = None, n_boot: int = 1000,
             seed: int = 0, progress: Progress | None = None) -> VerifierEval:
    """Score ``run_dirs``' samples with every verifier and compare them (see the module docstring)."""
    from bonbench.api.task import get_verifier
    from bonbench.run.runner import reopen

    progress = progress or (lambda stage, advance, total: None)
    if not verifiers:
        raise BonbenchError("give at least one --verifier to evaluate (e.g. --verifier learned:PATH --verifier logprob)")
    grades: dict[tuple[str, int], Grade] = {}
    scores: dict[str, dict[tuple[str, int], Score]] = {v: {} for v in verifiers}
    order: list[str] = []
    ns = set()
    for d in run_dirs:
        p = reopen(Path(d), data_dir=data_dir)
        run = p.runs[0]
        clash = {q.id for q in run.problems} & set(order)
        if clash:
            raise BonbenchError(f"problem {sorted(clash)[0]!r} is in two of the runs; evaluate runs of disjoint problems")
        samples = pipeline.load_samples(run)
        g = pipeline.grade(run, samples, progress)
        grades.update(g)
        for spec in verifiers:
            v = get_verifier(spec, **({"data_dir": data_dir} if spec.startswith("rm:") else {}))
            if hasattr(v, "check_policy"):
                from bonbench.run.runner import _model_path  # the run's model folder, for the family check

                v.check_policy(None, run.task.name)
                path = _model_path(run.store.read_config()["config"])
                if path is not None:
                    from bonbench.plugins.verifiers.folder import model_type

                    v.check_policy(model_type(path))
            scores[spec].update(pipeline.verify(run, v, samples, g, progress, stage=f"verify {spec}"))
        order += [q.id for q in run.problems]
        ns.add(run.cfg.n)
    keys_of: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(grades):
        keys_of.setdefault(key[0], []).append(key)

    def outcomes(spec: str | None) -> list[ProblemOutcome]:
        return [ProblemOutcome(pid, tuple(1.0 if grades[k].correct else 0.0 for k in keys_of[pid]),
                               tuple(grades[k].answer for k in keys_of[pid]),
                               None if spec is None else tuple(scores[spec][k].score for k in keys_of[pid]))
                for pid in order]

    base = outcomes(None)
    curves = compute_curves(base, kinds=("pass", "maj"), n_boot=n_boot, seed=seed)
    per_problem: dict[str, np.ndarray] = {}
    auroc, within = {}, {}
    for spec in verifiers:
        outs = outcomes(spec)
        curves[f"bon:{spec}"] = compute_curves(outs, kinds=("bon",), n_boot=n_boot, seed=seed)["bon"]
        from bonbench.metrics.estimators import bon_curve

        ks = curves["pass"]["k"]
        per_problem[spec] = bon_curve([o.scores for o in outs], [o.correct for o in outs], ks)  # type: ignore[misc]
        auroc[spec] = _auroc([c for o in outs for c in o.correct], [s for o in outs for s in o.scores or ()])
        each = [_auroc(o.correct, o.scores or ()) for o in outs]
        known = [a for a in each if a is not None]
        within[spec] = float(np.mean(known)) if known else None
    paired: dict[str, dict[str, list]] = {}
    first = verifiers[0]
    for other in verifiers[1:]:
        rows = [paired_bootstrap_diff(per_problem[first][:, j], per_problem[other][:, j], n_boot=n_boot, seed=seed)
                for j in range(len(curves["pass"]["k"]))]
        paired[f"{first} - {other}"] = {"k": list(curves["pass"]["k"]), "diff": [r[0] for r in rows],
                                        "lo": [r[1] for r in rows], "hi": [r[2] for r in rows], "p": [r[3] for r in rows]}
    return VerifierEval(runs=tuple(str(Path(d).resolve()) for d in run_dirs), n_problems=len(order), n=min(ns),
                        verifiers=tuple(verifiers), auroc=auroc, auroc_within=within, curves=curves, paired=paired)


def plot(result: VerifierEval, out: Path, title: str = "") -> Path:
    """bon@k of each verifier next to pass@k and maj@k (``plots.plot_k_curves``)."""
    from bonbench.apps.analysis.plots import plot_k_curves
    from bonbench.apps.analysis.rundir import Curve
    from bonbench.plugins.verifiers.folder import display_name

    # "bon:learned:/a/b/math-x-head" -> "bon learned:math-x-head" (legends stay one line)
    curves = {"bon " + display_name(name[len("bon:"):]) if name.startswith("bon:") else name: Curve(*(np.asarray(c[f], dtype=float) for f in ("k", "value", "lo", "hi")))
              for name, c in result.curves.items()}
    return plot_k_curves(curves, out, title=title, ylim=None)


def summary_lines(result: VerifierEval, k: int | None = None) -> list[str]:
    """A plain-text summary: AUROCs, bon@k at ``k`` (default n) and the paired differences there."""
    k = k or result.n
    j = result.curves["pass"]["k"].index(k)
    lines = [f"{result.n_problems} problems, n={result.n}"]
    for name in ("pass", "maj"):
        c = result.curves[name]
        lines.append(f"{name}@{k:<3} {c['value'][j]:.4f} [{c['lo'][j]:.4f}, {c['hi'][j]:.4f}]")
    for spec in result.verifiers:
        c = result.curves[f"bon:{spec}"]
        a, w = result.auroc[spec], result.auroc_within[spec]
        lines.append(f"bon@{k:<3} {c['value'][j]:.4f} [{c['lo'][j]:.4f}, {c['hi'][j]:.4f}]  AUROC "
                     f"{'n/a' if a is None else f'{a:.4f}'}  within-problem {'n/a' if w is None else f'{w:.4f}'}  {spec}")
    for name, d in result.paired.items():
        lines.append(f"bon@{k} {name}: {d['diff'][j]:+.4f} [{d['lo'][j]:+.4f}, {d['hi'][j]:+.4f}] (paired bootstrap, "
                     f"P(diff <= 0) = {d['p'][j]:.3f})")
    return lines
