"""Synthetic run directories with known ground truth, for tests and for trying the analysis tools.

``write_synthetic_run`` draws per-sample correctness from given per-problem success probabilities,
adds a noisy verifier score, and writes a run directory in the pipeline's layout (config.json,
samples/grades/scores rows, metrics.json with per-problem values, curves.json with bootstrap bands).
``per_problem_pass`` gives the per-problem pass@k of a fresh draw without touching the disk, for
Monte Carlo checks of the gate's false-alarm rate.

It does not sample a model and is not used by the evaluation pipeline; metrics and curves come from
the metric registry as the pipeline computes them (``bonbench.api.metric.values``,
``bonbench.pipeline.scoring.metric_json``), so only the data is synthetic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from bonbench.api.metric.grammar import parse_metrics
from bonbench.api.metric.inputs import curve_keys, run_inputs
from bonbench.api.metric.values import compute_curves, compute_metrics
from bonbench.core.config import RunConfig, config_hash, model_slug
from bonbench.core.records import SCHEMA_VERSION
from bonbench.core.store import Extent, RunStore, atomic_write_json
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.pass_bon import pass_curve
from bonbench.pipeline.run_columns import RunColumns, write_columns
from bonbench.pipeline.scoring import metric_json

GRADER = "synthetic"
VERIFIER = "synthetic"


@lru_cache(maxsize=32)
def _pass_table(n: int, k: int) -> np.ndarray:
    # Row c of the input has c correct samples, so entry c is pass@k for a problem with c of n correct,
    # computed by the pipeline's own estimator.
    return pass_curve((np.arange(n)[None, :] < np.arange(n + 1)[:, None]).astype(float), [k])[:, 0]


def per_problem_pass(p: np.ndarray, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Unbiased per-problem pass@k from ``n`` fresh Bernoulli(p_i) samples per problem."""
    # pass@k depends only on the number of correct samples, so draw c ~ Binomial(n, p_i) and look it up.
    return _pass_table(n, k)[rng.binomial(n, np.asarray(p, dtype=float))]


def _write_rows(path: Path, rows: Iterable[dict], written: dict[Path, Extent]) -> None:
    """Write ``rows`` to ``path`` (a new file), one line each; ``written[path]``: what was written
    (``write_columns`` takes it, as it takes what a store saw)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({"schema": SCHEMA_VERSION, **row}) + "\n")
            count += 1
    written[path] = Extent(path.stat().st_size, count, count)


def write_synthetic_run(results_root: Path, p: Sequence[float] | np.ndarray, *, n: int, task: str = "synthetic",
                        model: str = "synthetic/model", temperature: float = 1.0, top_p: float = 1.0, seed: int = 0,
                        metrics: Sequence[str] = ("pass@1",), problem_ids: Sequence[str] | None = None,
                        verifier_noise: float = 1.0, n_boot: int = 200, timestamp: str | None = None,
                        correct: np.ndarray | None = None, extra_scores: Mapping[str, np.ndarray] | None = None,
                        max_tokens: int = 512, n_tokens: np.ndarray | int = 1, prompt_tokens: int | None = None,
                        verifier_tokens: int | None = None, answers: bool = False, columns: bool = False) -> Path:
    """Write ``results_root/runs/<task>/<model-slug>/<hash>/`` for problems with success rates ``p``.

    ``metrics`` are metric specs (``pass@k``, ``bon@k``, ``maj@k``, ``mean``) computed with
    the metric registry (``bonbench.api.metric.values``) exactly as the pipeline does. The verifier score is ``correct + N(0,
    verifier_noise^2)``, so bon@k lies between pass@1 and pass@k. ``correct`` ([P, n] of 0/1) replaces
    the random draw when a test needs exact control. ``extra_scores`` maps further verifier names to
    [P, n] score arrays, written as ``scores/<name>.jsonl`` beside the default verifier's (metrics
    and curves.json stay computed with the default one). The compute ledger's counts: ``n_tokens``
    generated per sample (an int or [P, n]), ``prompt_tokens`` per sample and ``verifier_tokens`` per
    scored sample (None: not counted, as in imported files); ``answers`` writes each sample's answer
    into its grade row (so maj@k can be rebuilt from the rows); ``columns`` writes ``columns.npz`` as
    a scoring does (``bonbench.pipeline.run_columns``). Returns the run directory.
    """
    p = np.asarray(p, dtype=float)
    P = len(p)
    ids = list(problem_ids) if problem_ids is not None else [f"{task}/{i:04d}" for i in range(P)]
    rng = np.random.default_rng(seed)
    corr = (rng.random((P, n)) < p[:, None]).astype(float) if correct is None else np.asarray(correct, dtype=float)
    scores = corr + verifier_noise * rng.standard_normal((P, n))
    cfg = RunConfig(task=task, model=model, backend="synthetic", n=n, temperature=temperature, top_p=top_p, seed=seed,
                    metrics=tuple(metrics), verifier=VERIFIER, max_tokens=max_tokens)
    gen = np.broadcast_to(np.asarray(n_tokens, dtype=int), (P, n))
    h = config_hash(cfg)
    store = RunStore(RunStore.path_for(results_root, task, model_slug(model), h))
    extra = {name: np.asarray(v, dtype=float) for name, v in (extra_scores or {}).items()}
    for name, v in extra.items():
        if v.shape != (P, n):
            raise ValueError(f"extra_scores[{name!r}] has shape {v.shape}, expected {(P, n)}")
    store.write_config({"config": cfg.to_json(), "hash": h, "bonbench_version": "synthetic",
                        "dataset_fingerprint": f"synthetic-{P}", "verifiers": [VERIFIER, *extra]})
    # Rows in the store's JSONL format (records.to_row), written in one go: going through
    # JsonlTable.append (asdict + flush per row) costs seconds per run, too slow for test fixtures.
    # A correct sample answers "A"; a wrong one one of three wrong answers, so maj@k is defined too.
    wrong = rng.integers(0, 3, size=(P, n))
    counted = {} if prompt_tokens is None else {"prompt_tokens": prompt_tokens}
    written: dict[Path, Extent] = {}
    _write_rows(store.samples.path, ({"problem_id": pid, "sample_idx": j, "completion": "", "n_tokens": int(gen[i, j]),
                                      "finish_reason": "stop", "logprob": None, **counted}
                                     for i, pid in enumerate(ids) for j in range(n)), written)
    _write_rows(store.grades(GRADER).path, ({"problem_id": pid, "sample_idx": j, "grader": GRADER, "grader_version": 1,
                                             "correct": bool(corr[i, j]), "score": None,
                                             "answer": ("A" if corr[i, j] else "BCD"[wrong[i, j]]) if answers else None,
                                             "error": None, "detail": None} for i, pid in enumerate(ids) for j in range(n)),
               written)
    spent = {} if verifier_tokens is None else {"tokens": verifier_tokens, "calls": 1}
    for name, v in {VERIFIER: scores, **extra}.items():
        _write_rows(store.scores(name).path, ({"problem_id": pid, "sample_idx": j, "verifier": name,
                                               "score": float(v[i, j]), **spent}
                                              for i, pid in enumerate(ids) for j in range(n)), written)
    if columns:
        _write_columns(store.root, ids, corr, wrong if answers else None, gen, prompt_tokens,
                       {VERIFIER: scores, **extra}, verifier_tokens,
                       {path.relative_to(store.root).as_posix(): e for path, e in written.items()})
    outcomes = [ProblemOutcome(pid, tuple(corr[i]), tuple("A" if corr[i, j] else "BCD"[wrong[i, j]] for j in range(n)),
                               tuple(scores[i])) for i, pid in enumerate(ids)]
    specs = parse_metrics(list(metrics))
    values, per_problem = compute_metrics(outcomes, specs, n_boot=n_boot, seed=seed)
    metrics_doc = {name: metric_json(m) for name, m in values.items()}
    curves = compute_curves(outcomes, curve_keys(specs, run_inputs("correctness")), n_boot=n_boot, seed=seed)
    store.write_metrics({"metrics": metrics_doc, "per_problem": per_problem, "task": task, "model": model, "n": n,
                         "grader": GRADER, "verifier": VERIFIER, "n_problems": P,
                         "provenance": {"bonbench_version": "synthetic", "config_hash": h,
                                        "timestamp": timestamp or "2025-01-01T00:00:00Z"}})
    store.write_curves(curves)
    return store.root


def _write_columns(root: Path, ids: Sequence[str], corr: np.ndarray, wrong: np.ndarray | None, gen: np.ndarray,
                   prompt_tokens: int | None, scores: Mapping[str, np.ndarray], verifier_tokens: int | None,
                   extents: Mapping[str, Extent]) -> None:
    """``columns.npz`` of the rows just written (a right sample answers "A", a wrong one B, C or D)."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    P, n = corr.shape
    answer = np.full((P, n), -1) if wrong is None else np.where(corr != 0, 0, 1 + wrong)
    tokens = np.full(P * n, np.nan if verifier_tokens is None else float(verifier_tokens))
    cols = RunColumns(tuple(ids[i] for i in order), np.repeat(np.arange(P), n), np.tile(np.arange(n), P),
                      gen[order].ravel().astype(float), np.full(P * n, np.nan if prompt_tokens is None else float(prompt_tokens)),
                      (corr[order] != 0).ravel().astype(np.int8), answer[order].ravel(), ("A", "B", "C", "D"), GRADER, (1, ""),
                      {name: (np.asarray(v, dtype=float)[order].ravel(), tokens) for name, v in scores.items()},
                      {name: (1, "") for name in scores})
    write_columns(root, cols, extents)


def write_sweep_file(sweep_dir: Path, run_dirs: Sequence[Path]) -> Path:
    """A ``sweep.json`` in the pipeline's form listing ``run_dirs`` (temperatures read from their configs)."""
    runs = []
    for d in run_dirs:
        cfg = json.loads((Path(d) / "config.json").read_text())
        c = cfg["config"]
        runs.append({"temperature": c["temperature"], "top_p": c["top_p"], "hash": cfg["hash"],
                     "run_dir": str(Path(d).resolve())})
    first = json.loads((Path(run_dirs[0]) / "config.json").read_text())["config"]
    path = Path(sweep_dir) / "sweep.json"
    atomic_write_json(path, {"task": first["task"], "model": first["model"], "n": first["n"], "runs": runs})
    return path


def power_law_curve(k: np.ndarray, a: float, b: float) -> np.ndarray:
    """Exact ``exp(a k^b)`` (math-reference §1.4), for fitting tests."""
    return np.exp(a * np.power(np.asarray(k, dtype=float), b))
