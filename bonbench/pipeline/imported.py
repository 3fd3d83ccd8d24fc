"""Imported and reopened runs: what an imported run's config records, and what a reopened run
lacks.

``imported_settings`` turns the generation arguments a samples file carries (lm-eval rows) into the
sampling settings of the run's config, and marks what the file does not say as None (unknown),
never bonbench's defaults. ``imported_record`` is config.json's ``imported`` entry.
``check_complete`` refuses to score a reopened run (``bonbench score RUN``, which never samples)
whose samples are missing, with the command that draws them (``run_command``).

This module writes nothing and loads no model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.pipeline import adaptive
from bonbench.pipeline import stages as pipeline
from bonbench.pipeline.prepared import PreparedRun
from bonbench.pipeline.readers import ImportedSamples


def imported_settings(generation: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sampling settings of an imported run's config: what the file says (lm-eval's generation
    arguments: ``temperature``, ``do_sample`` false = greedy, ``top_p``, ``max_gen_toks``, ``until``),
    None for everything it does not say (dtype, prompt style: never in the file). Never bonbench's
    defaults: those would claim the samples were drawn at T = 1 with 512 tokens."""
    gen = dict(generation or {})
    temperature = gen.get("temperature")
    if gen.get("do_sample") is False:
        temperature = 0.0  # lm-eval's greedy decoding, whatever temperature says
    until = gen.get("until")
    if isinstance(until, str):
        until = [until]

    def number(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    max_tokens = gen.get("max_gen_toks", gen.get("max_new_tokens", gen.get("max_tokens")))
    return {"temperature": number(temperature), "top_p": number(gen.get("top_p")),
            "max_tokens": int(n) if (n := number(max_tokens)) is not None else None,
            "stop": tuple(str(u) for u in until) if isinstance(until, list) else None,
            "dtype": None, "prompt_style": None}


def imported_record(imported: ImportedSamples) -> dict[str, Any]:
    """config.json's ``imported``: where the samples came from and what the file says about them."""
    doc: dict[str, Any] = {"path": str(imported.path.resolve()), "format": imported.format,
                           "fingerprint": imported.fingerprint, "counts": imported.counts(),
                           "generation": dict(imported.generation) if imported.generation is not None else None,
                           "settings": ("from the file's generation arguments; what they leave out is null (unknown)"
                                        if imported.generation is not None else
                                        "unknown: imported (the file does not say how its samples were made)")}
    if imported.filters:
        doc["lm_eval_filters"] = list(imported.filters)
        doc["lm_eval_filter_copies_dropped"] = imported.copies
    return doc


def check_complete(run: PreparedRun) -> None:
    """A reopened run must have its samples (``bonbench score`` never samples): else one line naming
    the command that draws them. A torn last line of samples.jsonl (a writer killed mid-line) is not
    a sample (the store's rule): it is said, and the same ``bonbench run`` resumes from it."""
    path = run.store.samples.path
    torn = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    why = " (samples.jsonl ends in a torn line, written by a run killed mid-write, which is not a sample)" if torn else ""
    if run.cfg.backend == "scripted":
        recorded = (run.store.read_config().get("imported") or {}).get("counts") or {}
        have: dict[str, int] = {}
        for pid, _ in run.store.samples.read():
            have[pid] = have.get(pid, 0) + 1
        short = [pid for pid, c in recorded.items() if have.get(pid, 0) < min(int(c), run.cfg.n)]
        if short:
            src = (run.store.read_config().get("imported") or {}).get("path", "FILE")
            raise BonbenchError(f"{run.store.root}: {len(short)} problem(s) lack samples their file had (e.g. {short[0]!r})"
                                f"{why}; import the file again: `bonbench score --task {run.cfg.task} --samples {src} "
                                f"--model {run.cfg.model}`")
        return
    if run.cfg.adaptive and not adaptive.path(run).exists():
        raise BonbenchError(f"{run.store.root}: this adaptive run's pilot round has not finished{why}; `bonbench score` does "
                            f"not sample: `{run_command(run)}` resumes it, then score again")
    # an adaptive run's problems each have the n its decision gave them
    missing = pipeline.missing_requests(run, run.cfg.prompt_style, n_of=adaptive.n_of(run) if run.cfg.adaptive else None)
    if missing:
        count = sum(len(r.sample_indices) for r in missing)
        raise BonbenchError(f"{run.store.root}: {count} sample(s) of {len(missing)} problem(s) are missing{why}; `bonbench "
                            f"score` does not sample: `{run_command(run)}` draws them (it resumes, keeping every stored "
                            "sample), then score again")


def run_command(run: PreparedRun) -> str:
    """The ``bonbench run`` command line that resumes ``run`` (same hashed settings, same run dir)."""
    cfg = run.cfg
    parts = ["bonbench run", f"--task {cfg.task}", f"--model {cfg.model}", f"--backend {cfg.backend}", f"--n {cfg.n}"]
    parts += [f"-T {k}={v}" for k, v in dict(cfg.task_args or {}).items()]
    if cfg.metrics:
        parts.append(f"--metric {','.join(cfg.metrics)}")
    parts += [f"--temperature {cfg.temperature:g}", f"--top-p {cfg.top_p:g}", f"--max-tokens {cfg.max_tokens}",
              f"--seed {cfg.seed}", f"--prompt-style {cfg.prompt_style}"]
    if cfg.limit is not None:
        parts.append(f"--limit {cfg.limit}")
    if cfg.adaptive:
        fallback = ",fallback=stop" if cfg.adaptive.get("fallback") == "stop" else ""
        sure = f",confidence={cfg.adaptive['confidence']:g}" if "confidence" in cfg.adaptive else ""
        aim = (f"budget={cfg.adaptive['budget']}" if "budget" in cfg.adaptive
               else f"halfwidth={cfg.adaptive['halfwidth']:g}{sure}{fallback}")
        parts.append(f"--adaptive pilot={cfg.adaptive['pilot']},{aim}")
    if cfg.dtype and cfg.dtype != "bfloat16":
        parts.append(f"--dtype {cfg.dtype}")
    parts += [f"--endpoint {e}" for e in (cfg.engine_args or {}).get("endpoints", ())]
    parts.append(f"--out {run.store.results_root}")
    return " ".join(parts)
