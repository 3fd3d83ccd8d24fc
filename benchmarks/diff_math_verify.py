"""Differential run: bonbench's MathGrader against math-verify on stored completions.

For every (completion, gold answer) pair of the sources given, two verdicts:

* bonbench's: the source's task grader (``MathGrader``, in batch, with the task's conventions;
  the default ones for samples files and references);
* math-verify's: ``verify(parse(gold), parse(completion))`` with math-verify's default extraction
  config on the whole completion (its own extraction) and its default ``verify`` settings (strict,
  6-digit float rounding). The gold is wrapped as ``\\boxed{gold}``, as MATH's solutions write it:
  against the 12,500 MATH reference solutions it gives the same verdicts as ``$gold$`` except on one
  gold, a matrix written across lines (``\\n\\begin{pmatrix}...``), which ``$...$`` does not parse. Each
  pair runs in a worker process with math-verify's own timeouts (``--timeout`` s for each parse and
  the verify); a pair still unanswered after three times that plus 5 s (a computation stuck in C)
  kills the worker, is recorded as math-verify ``False`` with error "timeout", and a fresh worker
  takes the next pair.

Sources (any mix, at least one):

* run directories (``RUN_DIR ...``): samples.jsonl read by key through ``RunStore``, golds from the
  run's task rebuilt from its config.json (task name and task arguments), graded by that task's grader;
* samples files of other harnesses (``--samples FILE``, with ``--task``, default ``math500``): read by
  ``bonbench.pipeline.readers.read_samples``, the reader of ``bonbench score --samples`` (lm-eval
  ``samples_*.jsonl``, ``{"unique_id", "response"}`` rows, bonbench rows);
* the MATH reference solutions (``--references test,train``: the ``solution`` of every row of
  ``math/{split}.jsonl`` under ``--data-dir``, a human-written completion graded against its own
  ``answer``), sample_idx 0.

Output: ``--out`` (JSONL, sorted by source, problem id, sample index) holds every pair whose verdicts
differ: source, problem_id, sample_idx, gold, bonbench's extracted answer and canonical answer,
math-verify's extracted answer (the text it matched), both verdicts, errors, and the label when the
labels file has one. Printed: the counts per source (pairs, agree, bonbench-only-correct,
math-verify-only-correct), the disagreements per class of the labels file (``--labels``, keyed by
source, problem id and sample index; a label holds only while bonbench's verdict is the one it was
given for), the disagreements that have no label and the labels that no longer match any;
``--markdown`` also prints the tables of docs/math-grading.md ("Against math-verify"). Usage::

    python benchmarks/diff_math_verify.py [RUN_DIR ...] [--samples FILE [--task math500]]
        [--references test,train] [--data-dir ../shared/data] [--out math_verify_diff.jsonl]
        [--labels benchmarks/data/math_verify_diff_labels.jsonl] [--timeout 5] [--markdown]

Deterministic (sorted output; no sampling), not resumable. It does not decide who is right: the
labels file does, written by reading each disagreement. It copies no completion or problem text
into the repository (the ``--out`` file holds golds; keep it out of the repository).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bonbench.api.task import Grader, Task, get_task
from bonbench.core.data import read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample
from bonbench.core.store import RunStore
from bonbench.pipeline.readers import read_samples
from bonbench.plugins.graders.math_extract import extract_answer

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "benchmarks" / "data" / "math_verify_diff_labels.jsonl"
CLASSES = ("bonbench right", "math-verify right", "convention")
SHORT = 80  # longest answer kept in the labels file and the docs table


@dataclass(frozen=True)
class Source:
    """The pairs of one source: its problems (golds), its samples and the grader that grades them."""

    name: str
    problems: dict[str, Problem]
    samples: tuple[Sample, ...]
    grader: Grader


@dataclass(frozen=True)
class Verdicts:
    """Both verdicts on one pair."""

    source: str
    problem_id: str
    sample_idx: int
    gold: str
    bonbench: bool
    bonbench_answer: str | None  # extract_answer's text
    bonbench_canonical: str | None  # Grade.answer
    bonbench_error: str | None
    math_verify: bool
    math_verify_answer: str | None
    math_verify_error: str | None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.source, self.problem_id, self.sample_idx)


def wrap_gold(gold: str) -> str:
    """The gold as math-verify is given it (module docstring: why a box)."""
    return "\\boxed{" + gold + "}"


def _mv_worker(conn: Connection, timeout: int) -> None:
    """Worker process: (gold, completion) in, (verdict, extracted answer, error) out."""
    from math_verify import parse, verify

    while True:
        item = conn.recv()
        if item is None:
            return
        gold, completion = item
        try:
            g = parse(wrap_gold(gold), parsing_timeout=timeout)
            p = parse(completion, parsing_timeout=timeout)
            shown = str(p[-1]) if p else None  # parse returns [sympy value, matched text]
            ok = bool(g) and bool(p) and bool(verify(g, p, timeout_seconds=timeout))
            conn.send((ok, shown, None if g else "gold not parsed"))
        except Exception as exc:  # noqa: BLE001  a math-verify failure is a verdict of this run, not a crash
            conn.send((False, None, f"{type(exc).__name__}: {str(exc)[:200]}"))


class MathVerify:
    """math-verify in one worker process, killed and replaced when a pair outlives its hard limit."""

    def __init__(self, timeout: int, grace: float = 5.0, startup: float = 60.0,
                 target: Callable[[Connection, int], None] | None = None) -> None:
        self.timeout = timeout
        self.grace = grace  # beyond math-verify's own timeouts (two parses and a verify)
        self.startup = startup  # the first pair of a worker also pays its start and the sympy import
        self.target = target or _mv_worker
        self.ctx = mp.get_context("spawn")
        self.proc: Any = None
        self.conn: Connection | None = None

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=self.target, args=(child, self.timeout), daemon=True)
        self.proc.start()
        child.close()

    def judge(self, gold: str, completion: str) -> tuple[bool, str | None, str | None]:
        limit = self.grace + 3 * self.timeout
        if self.conn is None:
            self._start()
            limit += self.startup
        assert self.conn is not None
        self.conn.send((gold, completion))
        if self.conn.poll(limit):
            try:
                verdict, shown, err = self.conn.recv()
                return bool(verdict), shown, err
            except EOFError:
                pass
        self.close(kill=True)
        return False, None, "timeout"

    def close(self, kill: bool = False) -> None:
        if self.conn is not None:
            if not kill:
                self.conn.send(None)
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            if kill:
                self.proc.kill()
            self.proc.join(10)
            self.proc = None


def _math_task(name: str, task_name: str, task_args: dict[str, Any], data_dir: Path | None) -> Task:
    """Task ``task_name`` (its data under ``data_dir``), which must be graded by the math grader."""
    task = get_task(task_name, **task_args, **({"data_dir": str(data_dir)} if data_dir else {}))
    if task.grader.name != "math":
        raise BonbenchError(f"{name}: task {task_name!r} is graded by {task.grader.name!r}, not the math grader; "
                            "give runs and samples of math tasks")
    return task


def run_source(run_dir: Path, data_dir: Path | None) -> Source:
    """A bonbench run directory: its samples by key, golds from its task rebuilt from config.json."""
    store = RunStore(run_dir)
    cfg = store.read_config().get("config", {})
    name = "run:" + "/".join(run_dir.resolve().parts[-3:])  # task/model/hash: the same on every machine
    task = _math_task(name, cfg["task"], dict(cfg.get("task_args", {})), data_dir)
    problems = {p.id: p for p in task.problems}
    rows = store.samples.read()
    unknown = sorted({pid for pid, _ in rows if pid not in problems})
    if unknown:
        raise BonbenchError(f"{run_dir}: {len(unknown)} problem id(s) of samples.jsonl are not in task "
                            f"{cfg['task']!r} (e.g. {unknown[0]!r}); pass --data-dir of the mirror the run used")
    return Source(name, problems, tuple(rows[k] for k in sorted(rows)), task.grader)


def samples_source(path: Path, task_name: str, data_dir: Path | None) -> Source:
    """A samples file of another harness, read as ``bonbench score --samples`` reads it."""
    name = f"samples:{path.name}"
    task = _math_task(name, task_name, {}, data_dir)
    imported = read_samples(path, task.name, task.problems)
    samples = sorted(imported.samples, key=lambda s: s.key)
    return Source(name, {p.id: p for p in task.problems}, tuple(samples), task.grader)


def reference_source(split: str, data_dir: Path | None) -> Source:
    """MATH's reference solutions of ``split``, each a completion graded against its own answer."""
    if data_dir is None:
        raise BonbenchError("--references reads math/{split}.jsonl of the data mirror; pass --data-dir "
                            "(or set BONBENCH_DATA_DIR)")
    name = f"math-{split}-solutions"
    task = _math_task(name, "math", {"split": split}, data_dir)
    problems = {p.id: p for p in task.problems}
    solutions = {str(r["unique_id"]): str(r["solution"]) for r in read_jsonl(data_dir / "math" / f"{split}.jsonl")}
    samples = tuple(Sample(pid, 0, solutions[pid], len(solutions[pid].split()), "stop") for pid in sorted(problems))
    return Source(name, problems, samples, task.grader)


def _progress(what: str, done: int, total: int, t0: float) -> None:
    print(f"{what}: {done}/{total} pairs ({100 * done / max(1, total):.1f}%) {time.monotonic() - t0:.0f} s",
          file=sys.stderr, flush=True)


def compare(sources: Sequence[Source], timeout: int = 5, every: int = 1000) -> list[Verdicts]:
    """Both verdicts on every pair of ``sources``, in source order, then by (problem id, sample index)."""
    total = sum(len(s.samples) for s in sources)
    t0 = time.monotonic()
    bon: list[tuple[Source, Sample, Any]] = []
    for src in sources:
        grades = src.grader.grade(src.problems, list(src.samples))
        bon += [(src, s, g) for s, g in zip(src.samples, grades, strict=True)]
        print(f"bonbench: {src.name}: {len(grades)} pairs graded, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    mv = MathVerify(timeout)
    cache: dict[tuple[str, str], tuple[bool, str | None, str | None]] = {}
    out: list[Verdicts] = []
    try:
        for i, (src, s, g) in enumerate(bon, 1):
            gold = src.problems[s.problem_id].target
            if (gold, s.completion) not in cache:
                cache[(gold, s.completion)] = mv.judge(gold, s.completion)
            verdict, shown, err = cache[(gold, s.completion)]
            out.append(Verdicts(src.name, s.problem_id, s.sample_idx, gold, bool(g.correct), extract_answer(s.completion),
                                g.answer, g.error, verdict, shown, err))
            if i % every == 0 or i == total:
                _progress("math-verify", i, total, t0)
    finally:
        mv.close()
    return out


def read_labels(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The labels file: one row per classified disagreement (a missing file is no labels)."""
    if not path.exists():
        return {}
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("class") not in CLASSES or not row.get("reason") or not isinstance(row.get("bonbench"), bool):
            raise BonbenchError(f"{path}:{n}: a label needs 'class' (one of {', '.join(CLASSES)}), a 'reason' and "
                                "'bonbench' (the verdict it was given for); fix that line")
        out[(row["source"], row["problem_id"], int(row["sample_idx"]))] = row
    return out


def short(text: str | None) -> str | None:
    return text if text is None or len(text) <= SHORT else text[: SHORT - 3] + "..."


def label_of(v: Verdicts, labels: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any] | None:
    """The label of a disagreement, when it was given for the same direction (bonbench's verdict)."""
    row = labels.get(v.key)
    return row if row is not None and row["bonbench"] == v.bonbench else None


def disagreement_row(v: Verdicts, labels: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    label = label_of(v, labels)
    return {"source": v.source, "problem_id": v.problem_id, "sample_idx": v.sample_idx, "gold": v.gold,
            "bonbench_answer": v.bonbench_answer, "bonbench_canonical": v.bonbench_canonical,
            "math_verify_answer": v.math_verify_answer, "bonbench": v.bonbench, "math_verify": v.math_verify,
            "bonbench_error": v.bonbench_error, "math_verify_error": v.math_verify_error,
            "class": label["class"] if label else None, "reason": label["reason"] if label else None}


def label_template(v: Verdicts) -> dict[str, Any]:
    """A labels-file row for a disagreement, to fill in ``class`` and ``reason``."""
    return {"source": v.source, "problem_id": v.problem_id, "sample_idx": v.sample_idx, "bonbench": v.bonbench,
            "gold": short(v.gold), "bonbench_answer": short(v.bonbench_answer),
            "math_verify_answer": short(v.math_verify_answer), "class": None, "reason": None}


def counts(verdicts: Sequence[Verdicts]) -> list[tuple[str, int, int, int, int]]:
    """(source, pairs, agree, bonbench-only-correct, math-verify-only-correct) per source, then the total."""
    rows = []
    names = list(dict.fromkeys(v.source for v in verdicts))
    for name in [*names, "total"]:
        vs = [v for v in verdicts if name in ("total", v.source)]
        rows.append((name, len(vs), sum(v.bonbench == v.math_verify for v in vs),
                     sum(v.bonbench and not v.math_verify for v in vs), sum(v.math_verify and not v.bonbench for v in vs)))
    return rows


def _cell(text: str | None) -> str:
    if text is None:
        return "(none)"
    text = short(text.replace("\n", " ")) or ""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def markdown(verdicts: Sequence[Verdicts], labels: dict[tuple[str, str, int], dict[str, Any]]) -> str:
    """The tables of docs/math-grading.md, "Against math-verify"."""
    lines = ["| source | pairs | agree | bonbench only correct | math-verify only correct |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {n} | {p} | {a} | {b} | {m} |" for n, p, a, b, m in counts(verdicts)]
    diff = [v for v in verdicts if v.bonbench != v.math_verify]
    by_class = {c: [v for v in diff if (lab := label_of(v, labels)) and lab["class"] == c] for c in CLASSES}
    lines += ["", "| class | disagreements |", "| --- | --- |"]
    lines += [f"| {c} | {len(vs)} |" for c, vs in by_class.items()]
    lines += [f"| unlabelled | {len(diff) - sum(len(vs) for vs in by_class.values())} |", ""]
    head = ["| source | problem | sample | gold | bonbench's answer | math-verify's answer | correct by | class | reason |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    grouped = len(diff) > 60
    hidden = {v.key for v in by_class["bonbench right"]} if grouped else set()
    shown = [v for v in diff if v.key not in hidden]
    lines += head
    for v in shown:
        lab = label_of(v, labels) or {"class": "unlabelled", "reason": ""}
        lines.append(f"| {v.source} | {v.problem_id} | {v.sample_idx} | {_cell(v.gold)} | {_cell(v.bonbench_answer)} | "
                     f"{_cell(v.math_verify_answer)} | {'bonbench' if v.bonbench else 'math-verify'} | "
                     f"{lab['class']} | {lab['reason']} |")
    if grouped:
        reasons: dict[str, int] = {}
        for v in by_class["bonbench right"]:
            reason = str(label_of(v, labels)["reason"])  # type: ignore[index]  # labelled: by_class holds labelled rows only
            reasons[reason] = reasons.get(reason, 0) + 1
        lines += ["", "| bonbench right: why math-verify is wrong | disagreements |", "| --- | --- |"]
        lines += [f"| {r} | {c} |" for r, c in sorted(reasons.items(), key=lambda rc: (-rc[1], rc[0]))]
    return "\n".join(lines)


def report(verdicts: Sequence[Verdicts], labels: dict[tuple[str, str, int], dict[str, Any]]) -> str:
    """The counts, the disagreements per class, and what the labels file lacks or no longer matches."""
    lines = [f"{'source':<48} {'pairs':>6} {'agree':>6} {'bonbench-only':>14} {'math-verify-only':>17}"]
    lines += [f"{n:<48} {p:>6} {a:>6} {b:>14} {m:>17}" for n, p, a, b, m in counts(verdicts)]
    diff = [v for v in verdicts if v.bonbench != v.math_verify]
    labelled = [label_of(v, labels) for v in diff]
    per_class = {c: sum(1 for lab in labelled if lab and lab["class"] == c) for c in CLASSES}
    lines.append("disagreements by class: " + ", ".join(f"{c} {n}" for c, n in per_class.items())
                 + f", unlabelled {labelled.count(None)}")
    for v, lab in zip(diff, labelled, strict=True):
        if lab is None:
            lines.append("unlabelled: " + json.dumps(label_template(v), ensure_ascii=False))
    live = {v.key for v, lab in zip(diff, labelled, strict=True) if lab is not None}
    ran = {v.source for v in verdicts}  # labels of sources not given this time are not judged
    for key in sorted(k for k in labels if k[0] in ran and k not in live):
        lines.append(f"stale label (no longer this disagreement): {list(key)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="bonbench run directories of math tasks")
    ap.add_argument("--samples", action="append", type=Path, default=[], help="a samples file of another harness")
    ap.add_argument("--task", default="math500", help="the task of the --samples files (default math500)")
    ap.add_argument("--references", default="", help="MATH splits whose reference solutions to add: test, train or test,train")
    ap.add_argument("--data-dir", default=None, help="the data mirror (default $BONBENCH_DATA_DIR)")
    ap.add_argument("--out", type=Path, default=Path("math_verify_diff.jsonl"), help="the disagreements (JSONL)")
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--timeout", type=int, default=5, help="math-verify's timeout per parse and verify, seconds")
    ap.add_argument("--markdown", action="store_true", help="also print the tables of docs/math-grading.md")
    args = ap.parse_args(argv)
    try:
        splits = [s for s in args.references.split(",") if s]
        bad = [s for s in splits if s not in ("test", "train")]
        if bad:
            raise BonbenchError(f"--references {args.references!r}: use test, train or test,train")
        if not (args.runs or args.samples or splits):
            raise BonbenchError("nothing to compare: give run directories, --samples FILE or --references test,train")
        if args.timeout < 1:
            raise BonbenchError("--timeout must be a whole number of seconds >= 1")
        data_dir = resolve_data_dir(args.data_dir)
        labels = read_labels(args.labels)
        sources = [run_source(r, data_dir) for r in args.runs]
        sources += [samples_source(p, args.task, data_dir) for p in args.samples]
        sources += [reference_source(s, data_dir) for s in splits]
    except BonbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdicts = compare(sources, args.timeout)
    rows = [disagreement_row(v, labels) for v in verdicts if v.bonbench != v.math_verify]
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(report(verdicts, labels))
    print(f"disagreements written to {args.out}")
    if args.markdown:
        print(markdown(verdicts, labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
