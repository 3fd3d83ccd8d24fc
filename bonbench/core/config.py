"""``RunConfig``: the fully resolved settings of one run, which of them are hashed, and the run id.

Hash only what changes model outputs (inspect's task identifier): task name, version and
output-changing args; prompt renderer id and style; model id and its fingerprint; backend and dtype;
temperature, top-p, max tokens, stop strings, seed. Left out: n, limit and problem filters
(one pool of samples grows and is shared), graders, verifiers and metrics (one pool serves all),
batch sizes, parallelism, output root. The scheme version is recorded in ``config.json``.

A search run (``strategy`` set: ``bonbench run --strategy beam -S width=4``) hashes one more entry,
``search``: the strategy, its options (every option, defaults included, so ``-S width=4`` and no
``-S`` at the default name one run), the step delimiter and n, which for a search is the budget
that decides every candidate, not a count of independent draws that grows. ``seeds`` (repetitions
of the search under derived seeds) is not hashed: repetition r is the same search whatever their
number, so more seeds add repetitions to the same run as a larger n adds samples to a sampling run.
A run without a strategy hashes exactly what it did before (its run id is unchanged).

An adaptive run (``bonbench run --adaptive pilot=4,budget=8``) hashes ``adaptive``: its pilot,
budget and floor (the largest k requested), the id of its problem selection (``--limit`` and the
-T filters) and n (the cap per problem): each problem's sample count is decided from the other
problems' pilots, so all of these decide which samples exist. A half-width target
(``--adaptive pilot=4,halfwidth=0.01``) hashes the half-width and its metric in place of the budget,
and not ``fallback`` (whether an out-of-reach target stops the run or spends the cap: the samples
drawn are the same either way, or the run stops). Other runs' ids are unchanged.

This module does not touch the disk or load anything.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

HASH_SCHEME = 1

# Fields of RunConfig that go into the run id. Everything else is recorded but not hashed.
HASHED_FIELDS = (
    "task",
    "task_version",
    "task_hash_args",
    "prompt_id",
    "prompt_style",
    "model",
    "model_fingerprint",
    "backend",
    "dtype",
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
)


@dataclass(frozen=True)
class RunConfig:
    task: str
    model: str
    backend: str
    n: int
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    stop: tuple[str, ...] = ()
    prompt_style: str = "base"
    prompt_id: str = ""
    dtype: str = "bfloat16"
    task_version: int = 1
    task_args: Mapping[str, Any] = field(default_factory=dict)
    task_hash_args: Mapping[str, Any] = field(default_factory=dict)
    model_fingerprint: str = ""
    metrics: tuple[str, ...] = ()
    verifier: str | None = None
    limit: int | None = None
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    strategy: str | None = None  # a search run's strategy (None: independent sampling)
    strategy_options: Mapping[str, Any] = field(default_factory=dict)  # all its options, defaults included
    step_delimiter: str = ""  # where a search's steps end (the task's)
    seeds: int = 1  # repetitions of the search per problem, under seeds derived from ``seed``
    # an adaptive run's design (``bonbench run --adaptive``): pilot, budget, floor, problem set; n is the cap per problem
    adaptive: Mapping[str, Any] = field(default_factory=dict)

    def hashed(self) -> dict[str, Any]:
        d = asdict(self)
        out = {k: d[k] for k in HASHED_FIELDS}
        if self.strategy is not None:  # module docstring: only search runs hash it, so other run ids stay
            out["search"] = {"strategy": self.strategy, "options": dict(sorted(self.strategy_options.items())),
                             "delimiter": self.step_delimiter, "n": self.n}
        if self.adaptive:  # it decides which samples exist, n being the cap: only adaptive runs hash it
            # ``fallback`` (a half-width target's: spend the cap when it is out of reach, else stop) is
            # not hashed: with or without it a run draws the same samples, or stops before round two
            out["adaptive"] = {**{k: v for k, v in sorted(self.adaptive.items()) if k != "fallback"}, "n": self.n}
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def saved_settings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``RunConfig`` in a saved config.json ``config`` (keys of other versions dropped),
    with JSON lists back as tuples; ``stop`` None (an imported run's unknown stop strings) stays None."""
    known = {f.name for f in fields(RunConfig)}
    out = {k: v for k, v in doc.items() if k in known}
    if "stop" in out:
        out["stop"] = tuple(out["stop"]) if out["stop"] is not None else None
    if "metrics" in out:
        out["metrics"] = tuple(out["metrics"])
    return out


def config_hash(cfg: RunConfig) -> str:
    """First 12 hex chars of sha256 over the sorted-key compact JSON of the hashed fields."""
    payload = json.dumps({"scheme": HASH_SCHEME, **cfg.hashed()}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def model_slug(model: str) -> str:
    """A filesystem-safe name for a model id or path (``google/gemma-3-270m`` -> ``google--gemma-3-270m``)."""
    text = model.rstrip("/")
    if "/" in text and (text.startswith(("/", ".", "~")) or text.count("/") > 1):
        # a local folder (a hub id has exactly one slash): its name, not the whole path, so that
        # results/checkpoints/math-passk4 is "math-passk4" on the leaderboard
        text = text.rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "--", text).strip("-") or "model"


def policy_name(model: str, temperature: float | None, top_p: float | None) -> str:
    """The name of the policy that drew a run's samples, as a KL reference: the model, with its
    sampling settings where they change the distribution (T = 1 and top-p = 1 are the model itself);
    an imported run whose file did not give them (None) says they are unknown."""
    if temperature is None or top_p is None:
        return f"{model} (sampling settings unknown)"
    if float(temperature) == 1.0 and float(top_p) == 1.0:
        return model
    return f"{model} (T={float(temperature):g}, top_p={float(top_p):g})"


def strategy_label(config: Mapping[str, Any]) -> str:
    """How a stored run (config.json's ``config``) came by its samples, in one column: a search's strategy
    with every option (``beam(agg=last, lookahead=0, max_iterations=40, width=4)``), ``greedy`` (T = 0),
    ``adaptive sampling`` (``--adaptive``), else ``sampling`` (n independent draws)."""
    strategy = config.get("strategy")
    if strategy:
        options = ", ".join(f"{k}={v}" for k, v in sorted(dict(config.get("strategy_options") or {}).items()))
        return f"{strategy}({options})"
    if config.get("adaptive"):
        return "adaptive sampling"
    temperature = config.get("temperature", 1.0)
    return "greedy" if temperature is not None and float(temperature) == 0 else "sampling"
