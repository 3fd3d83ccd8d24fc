"""Read finished run directories (and sweeps of them) for analysis.

A run directory (docs/architecture.md) holds ``config.json``, ``metrics.json``, ``curves.json`` and
the row files ``samples.jsonl``, ``grades/<grader>.jsonl``, ``scores/<verifier>.jsonl``. ``load_run``
reads the JSON files into a ``RunData``; only ``config.json`` and ``metrics.json`` are required,
``curves.json`` and the row files are optional and read on demand. ``expand_run_dirs`` turns
command-line paths (run dirs, sweep dirs, results trees) into run dirs; it finds the scored runs of
a tree with ``bonbench.core.store.find_run_dirs``, the rule the CLI uses too. What the row files
give per problem (curves, outcomes) is ``bonbench.apps.analysis.run_rows``.

This module never writes anything and never recomputes what ``metrics.json`` and ``curves.json``
hold: they are taken as the pipeline wrote them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.core.config import model_slug
from bonbench.core.errors import BonbenchError
from bonbench.core.models import training_summary
from bonbench.core.store import RunStore, find_run_dirs, is_run_dir, read_run_json

SWEEP_FILE = "sweep.json"
# The settings that change what a metric measures; two runs that agree on all of them are
# comparable checkpoints (the leaderboard pairs on them). n and seed are not here: n only changes
# the estimate's precision and the seed only its noise.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "prompt_style", "prompt_id", "task_version",
                 "task_hash_args", "stop")


@dataclass(frozen=True)
class Metric:
    """One dataset-level metric as metrics.json stores it."""

    value: float
    ci95: tuple[float, float]
    n_problems: int
    # what else metrics.json says of it: verifier, reference (kl, kl_bon@k), against (winrate), analytic
    notes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Curve:
    """One k-curve from curves.json (``lo``/``hi`` may be NaN where no band was computed)."""

    k: np.ndarray
    value: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class RunData:
    """Everything analysis reads from one run directory's JSON files."""

    path: Path
    config: Mapping[str, Any]
    hash: str
    metrics: Mapping[str, Metric]
    per_problem: Mapping[str, Mapping[str, float]]
    curves: Mapping[str, Curve]
    provenance: Mapping[str, Any] = field(default_factory=dict)
    bonbench_version: str = ""
    dataset_fingerprint: str = ""
    # metrics.json top-level facts besides metrics/per_problem (grader, verifier, n, problem_set ...)
    meta: Mapping[str, Any] = field(default_factory=dict)
    # config.json's ``verifiers``: every verifier the run was scored with (pipeline.record_verifier)
    scored_with: tuple[str, ...] = ()
    # config.json's ``model_training`` (models.training_summary): what a checkpoint was trained with
    training: Mapping[str, Any] | None = None

    @property
    def task(self) -> str:
        return str(self.config.get("task", self.path.parent.parent.name))

    @property
    def model(self) -> str:
        return str(self.config.get("model", self.path.parent.name))

    @property
    def model_slug(self) -> str:
        return model_slug(self.model)

    @property
    def temperature(self) -> float:
        value = self.config.get("temperature", math.nan)  # None: an imported run whose file did not say
        return math.nan if value is None else float(value)

    @property
    def top_p(self) -> float:
        value = self.config.get("top_p", 1.0)
        return math.nan if value is None else float(value)

    @property
    def n(self) -> int:
        return int(self.config.get("n", 0))

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    def sampling_settings(self) -> dict[str, Any]:
        """The settings that define what the metrics measure (``SAMPLING_KEYS``), JSON-normalised."""
        return {k: json.loads(json.dumps(self.config.get(k), default=str)) for k in SAMPLING_KEYS}

    @property
    def created(self) -> datetime:
        """When the metrics were written: provenance ``timestamp`` if parseable, else metrics.json mtime."""
        stamp = self.provenance.get("timestamp") or self.provenance.get("created")
        if isinstance(stamp, str):
            try:
                parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                return parsed if parsed.tzinfo else parsed.astimezone()
            except ValueError:
                pass
        return datetime.fromtimestamp((self.path / "metrics.json").stat().st_mtime).astimezone()

    def label(self) -> str:
        return f"{self.task} / {self.model_slug} / T={self.temperature:g} ({self.hash})"

    def store(self) -> RunStore:
        return RunStore(self.path)

    def graders(self) -> list[str]:
        return sorted(p.stem for p in (self.path / "grades").glob("*.jsonl"))

    def verifiers(self) -> list[str]:
        return sorted(p.stem for p in (self.path / "scores").glob("*.jsonl"))


def _array(values: Iterable[Any]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def _parse_curves(raw: Mapping[str, Any], path: Path) -> dict[str, Curve]:
    out: dict[str, Curve] = {}
    for kind, c in raw.items():
        if not isinstance(c, Mapping) or "k" not in c or "value" not in c:
            continue  # tolerate extra bookkeeping keys next to the curves
        k = np.asarray(c["k"], dtype=float)
        value = _array(c["value"])
        if len(k) != len(value):
            raise BonbenchError(f"{path}: curve {kind!r} has {len(k)} k values but {len(value)} values; rerun scoring")
        nan = np.full(len(k), math.nan)
        lo = _array(c["lo"]) if c.get("lo") is not None else nan
        hi = _array(c["hi"]) if c.get("hi") is not None else nan
        out[kind] = Curve(k=k, value=value, lo=lo, hi=hi)
    return out


def load_run(path: Path | str) -> RunData:
    """Load one run directory; raises BonbenchError naming the fix if it is not a scored run."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise BonbenchError(f"{path} is not a run directory (no config.json); pass results/runs/<task>/<model>/<hash>")
    if not (path / "metrics.json").is_file():
        raise BonbenchError(f"{path} has no metrics.json; finish the run first (`bonbench run ...` scores it)")
    cfg_file = read_run_json(path / "config.json")
    met_file = read_run_json(path / "metrics.json")
    for name, doc in (("config.json", cfg_file), ("metrics.json", met_file)):
        if not isinstance(doc, Mapping):
            raise BonbenchError(f"{path / name} is not a bonbench {name} (a JSON object); restore it or rerun the run")
    try:
        return _run_data(path, cfg_file, met_file)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # hand-edited or foreign files: one line naming the run, not a traceback from deep in the parsing
        raise BonbenchError(f"{path}: config.json / metrics.json / curves.json do not have bonbench's layout "
                            f"({type(exc).__name__}: {str(exc)[:80]}); rescore the run with `bonbench score {path}`") from None


def _run_data(path: Path, cfg_file: Mapping[str, Any], met_file: Mapping[str, Any]) -> RunData:
    config = cfg_file.get("config", cfg_file)
    metrics: dict[str, Metric] = {}
    for name, m in met_file.get("metrics", {}).items():
        ci = m.get("ci95") or [math.nan, math.nan]
        lo, hi = (math.nan if x is None else float(x) for x in ci)
        notes = {key: v for key, v in m.items() if key not in ("value", "ci95", "n_problems")}
        # a null value is one the task withholds (it says why under "withheld"): NaN, like an undefined one
        value = math.nan if m.get("value") is None else float(m["value"])
        metrics[name] = Metric(value, (lo, hi), int(m.get("n_problems", 0)), notes)
    per_problem = {name: {str(pid): float(v) for pid, v in vals.items() if v is not None}
                   for name, vals in met_file.get("per_problem", {}).items()}
    curves_path = path / "curves.json"
    curves = _parse_curves(read_run_json(curves_path), curves_path) if curves_path.is_file() else {}
    return RunData(
        path=path,
        config=config,
        hash=str(cfg_file.get("hash", path.name)),
        metrics=metrics,
        per_problem=per_problem,
        curves=curves,
        provenance=met_file.get("provenance", {}) or {},
        bonbench_version=str(cfg_file.get("bonbench_version", "")),
        dataset_fingerprint=str(cfg_file.get("dataset_fingerprint", "")),
        meta={k: v for k, v in met_file.items() if k not in ("metrics", "per_problem", "provenance")},
        scored_with=tuple(str(v) for v in cfg_file.get("verifiers", []) or []),
        # runs written before config.json recorded it: the checkpoint's manifest, while it is there
        training=cfg_file.get("model_training") or training_summary(config.get("model")),
    )


def read_sweep(path: Path | str) -> list[Path]:
    """Run directories listed in a sweep directory's ``sweep.json`` (or the file itself).

    Expected form: ``{"runs": [{"run_dir": "...", "temperature": 0.4, ...}, ...]}``; a bare list of
    paths or of such objects is accepted too. Relative paths are resolved against the sweep file's
    folder first, then against the current directory.
    """
    path = Path(path)
    file = path / SWEEP_FILE if path.is_dir() else path
    raw = read_run_json(file)
    entries = raw.get("runs", []) if isinstance(raw, Mapping) else raw
    if not isinstance(entries, list) or not entries:
        raise BonbenchError(f"{file} lists no runs; expected {{\"runs\": [{{\"run_dir\": ...}}, ...]}}")
    out: list[Path] = []
    for entry in entries:
        rel = entry if isinstance(entry, str) else (entry.get("run_dir") or entry.get("path")
                                                    if isinstance(entry, Mapping) else None)
        if not rel:
            raise BonbenchError(f"{file}: entry {entry!r:.80} has no run_dir")
        cand = Path(rel)
        if not cand.is_absolute():
            local = file.parent / cand
            cand = local if local.exists() else cand
        out.append(cand)
    return out


def expand_run_dirs(paths: Sequence[Path | str]) -> list[Path]:
    """Run dirs named by ``paths``: a run dir itself, the runs of a sweep (sweep.json), or every run
    under a results tree. Order is preserved and duplicates dropped."""
    out: list[Path] = []
    for p in map(Path, paths):
        if is_run_dir(p, scored=True):
            found = [p]
        elif (p / SWEEP_FILE).is_file() or (p.is_file() and p.name.endswith(".json")):
            found = read_sweep(p)
        elif p.is_dir():
            found = find_run_dirs(p, scored=True)
        else:
            raise BonbenchError(f"{p} does not exist; pass run directories, a sweep directory or a results tree")
        if not found:
            raise BonbenchError(f"no scored runs under {p}; run `bonbench run ...` first")
        for f in found:
            if f.resolve() not in {o.resolve() for o in out}:
                out.append(f)
    return out

