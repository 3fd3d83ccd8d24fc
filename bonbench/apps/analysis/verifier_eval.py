"""``bonbench eval-verifier``: how well verifiers pick samples, on held-out runs.

For the problems of one or more scored runs (their samples pooled by key; a problem must not be in
two of them), and each verifier given (``logprob``, ``oracle``, ``learned:PATH``, ``rm:...``):

* AUROC of its scores against the grader's verdicts over every sample (scikit-learn), and the
  mean within-problem AUROC over problems that have both correct and wrong samples (what bon@k
  depends on: it only compares samples of one problem);
* the bon@k curve for k = 1..n with 95% bootstrap bands (every default curve that reads verifier
  scores, one per verifier), next to the default curves without scores, pass@k (= oracle bon@k)
  and maj@k (``bonbench.api.metric.values.compute_curves``);
* the paired bootstrap of bon@k(A) - bon@k(B) over problems for the first verifier against each
  other one, at every k (``bonbench.metrics.bootstrap.paired_bootstrap_diff``).

Scores are computed through ``bonbench.pipeline.stages.verify``, so they are stored in each run's ``scores/`` and
reused. Nothing here samples or trains; the figure is ``analysis.plots.plot_k_curves``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.api.metric.readings import curve_label
from bonbench.api.metric.values import compute_curves, curve_values, default_curve_keys
from bonbench.apps.analysis.plots import plot_k_curves
from bonbench.apps.analysis.rundir import Curve
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Score
from bonbench.metrics.bootstrap import paired_bootstrap_diff
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline import stages
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.pipeline.votes import vote_classes
from bonbench.plugins.verifiers.manifest import display_name
from bonbench.run.reopen import reopen
from bonbench.run.resolve import check_verifier, model_path

Key = tuple[str, int]


@dataclass(frozen=True)
class VerifierEval:
    """Everything ``evaluate`` measured (``to_json`` for the file ``eval-verifier`` writes)."""

    runs: tuple[str, ...]
    n_problems: int
    n: int
    verifiers: tuple[str, ...]
    auroc: dict[str, float | None]
    auroc_within: dict[str, float | None]
    curves: dict[str, dict[str, list]]  # the default curves ("pass", "maj"), and "bon:<verifier>" per verifier
    paired: dict[str, dict[str, list]] = field(default_factory=dict)  # "<A> - <B>": {"k","diff","lo","hi","p"}
    paired_kind: str = ""  # the curve the pairs compare: the first default curve that reads scores (bon)

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


@dataclass(frozen=True)
class _Pooled:
    """The runs' grades, the answer classes they vote for (per problem, in sample order) and each
    verifier's scores, pooled by key, and the problems in run order."""

    grades: dict[Key, Grade]
    votes: dict[str, tuple[str | None, ...]]
    scores: dict[str, dict[Key, Score]]
    order: tuple[str, ...]
    n: int

    def outcomes(self, spec: str | None) -> list[ProblemOutcome]:
        keys_of: dict[str, list[Key]] = {}
        for key in sorted(self.grades):
            keys_of.setdefault(key[0], []).append(key)
        return [ProblemOutcome(pid, tuple(1.0 if self.grades[k].correct else 0.0 for k in keys_of[pid]),
                               self.votes[pid],
                               None if spec is None else tuple(self.scores[spec][k].score for k in keys_of[pid]))
                for pid in self.order]


def _pool(run_dirs: Sequence[Path], verifiers: Sequence[str], data_dir: str | None, progress: Progress) -> _Pooled:
    """Grade every run (``bonbench.run.reopen``: the task and grader of ``bonbench score``) and score
    it with every verifier, each checked against the run's task and policy as ``bonbench run`` does."""
    grades: dict[Key, Grade] = {}
    votes: dict[str, tuple[str | None, ...]] = {}
    scores: dict[str, dict[Key, Score]] = {v: {} for v in verifiers}
    order: list[str] = []
    ns = set()
    for d in run_dirs:
        run = reopen(Path(d), data_dir=data_dir).runs[0]
        clash = {q.id for q in run.problems} & set(order)
        if clash:
            raise BonbenchError(f"problem {sorted(clash)[0]!r} is in two of the runs; evaluate runs of disjoint problems")
        samples = stages.load_samples(run)
        g = stages.grade(run, samples, progress)
        grades.update(g)
        of_problem: dict[str, list[Grade]] = {q.id: [] for q in run.problems}
        for key in sorted(g):
            of_problem.setdefault(key[0], []).append(g[key])
        votes.update(vote_classes(run.task.grader, of_problem))
        folder = model_path(run.store.read_config()["config"])  # the run's model folder, for the family check
        for spec in verifiers:
            v = check_verifier(spec, data_dir, task=run.task.name, model_path=folder)
            assert v is not None
            scores[spec].update(stages.verify(run, v, samples, g, progress, stage=f"verify {spec}"))
        order += [q.id for q in run.problems]
        ns.add(run.cfg.n)
    return _Pooled(grades, votes, scores, tuple(order), min(ns))


def evaluate(run_dirs: Sequence[Path], verifiers: Sequence[str], *, data_dir: str | None = None, n_boot: int = 1000,
             seed: int = 0, progress: Progress = no_progress) -> VerifierEval:
    """Score ``run_dirs``' samples with every verifier and compare them (see the module docstring)."""
    if not verifiers:
        raise BonbenchError("give at least one --verifier to evaluate (e.g. --verifier learned:PATH --verifier logprob)")
    pooled = _pool(run_dirs, verifiers, data_dir, progress)
    unscored = pooled.outcomes(None)
    curves = compute_curves(unscored, default_curve_keys(unscored), n_boot=n_boot, seed=seed)
    ks = list(range(1, min(len(o.correct) for o in unscored) + 1))
    # the default curves that read scores (bon): one per verifier; the first is the one compared in pairs
    selecting = [key for key in default_curve_keys(pooled.outcomes(verifiers[0])) if key not in curves]
    per_problem: dict[str, np.ndarray] = {}
    auroc, within = {}, {}
    for spec in verifiers:
        outs = pooled.outcomes(spec)
        for key in selecting:
            curves[f"{key}:{spec}"] = compute_curves(outs, [key], n_boot=n_boot, seed=seed)[key]
        per_problem[spec] = curve_values(outs, selecting[0], ks, seed=seed)
        auroc[spec] = _auroc([c for o in outs for c in o.correct], [s for o in outs for s in o.scores or ()])
        known = [a for a in (_auroc(o.correct, o.scores or ()) for o in outs) if a is not None]
        within[spec] = float(np.mean(known)) if known else None
    paired: dict[str, dict[str, list]] = {}
    first = verifiers[0]
    for other in verifiers[1:]:
        rows = [paired_bootstrap_diff(per_problem[first][:, j], per_problem[other][:, j], n_boot=n_boot, seed=seed)
                for j in range(len(ks))]
        paired[f"{first} - {other}"] = {"k": list(ks), "diff": [r[0] for r in rows],
                                        "lo": [r[1] for r in rows], "hi": [r[2] for r in rows], "p": [r[3] for r in rows]}
    return VerifierEval(runs=tuple(str(Path(d).resolve()) for d in run_dirs), n_problems=len(pooled.order), n=pooled.n,
                        verifiers=tuple(verifiers), auroc=auroc, auroc_within=within, curves=curves, paired=paired,
                        paired_kind=selecting[0])


def plot(result: VerifierEval, out: Path, title: str = "") -> Path:
    """bon@k of each verifier next to pass@k and maj@k (``plots.plot_k_curves``)."""
    # "bon:learned:/a/b/math-x-head" -> "bon learned:math-x-head" (legends stay one line)
    curves = {_shown(name, result.verifiers): Curve(*(np.asarray(c[f], dtype=float) for f in ("k", "value", "lo", "hi")))
              for name, c in result.curves.items()}
    return plot_k_curves(curves, out, title=title, ylim=None)


def summary_lines(result: VerifierEval, k: int | None = None) -> list[str]:
    """A plain-text summary: AUROCs, bon@k at ``k`` (default n) and the paired differences there."""
    k = k or result.n
    j = next(iter(result.curves.values()))["k"].index(k)
    lines = [f"{result.n_problems} problems, n={result.n}"]
    by_verifier = {f"{key}:{spec}": (key, spec) for key in result.curves for spec in result.verifiers
                   if key.endswith(f":{spec}")}
    for name, c in result.curves.items():
        key, spec = by_verifier.get(name, (name, None))
        label = curve_label(key.split(":", 1)[0] if spec else key, f"{k:<3}")
        line = f"{label} {c['value'][j]:.4f} [{c['lo'][j]:.4f}, {c['hi'][j]:.4f}]"
        if spec is not None:
            a, w = result.auroc[spec], result.auroc_within[spec]
            line += f"  AUROC {'n/a' if a is None else f'{a:.4f}'}  within-problem {'n/a' if w is None else f'{w:.4f}'}  {spec}"
        lines.append(line)
    for name, d in result.paired.items():
        lines.append(f"{curve_label(result.paired_kind, str(k))} {name}: {d['diff'][j]:+.4f} "
                     f"[{d['lo'][j]:+.4f}, {d['hi'][j]:+.4f}] (paired bootstrap, P(diff <= 0) = {d['p'][j]:.3f})")
    return lines


def _shown(name: str, verifiers: Sequence[str]) -> str:
    """A curve's legend key: a verifier's curve as ``bon learned:math-x-head`` (one line)."""
    for spec in verifiers:
        if name.endswith(f":{spec}"):
            return f"{name[:-len(spec) - 1]} {display_name(spec)}"
    return name
