"""The ``math`` and ``math500`` tasks: Hendrycks MATH (12.5k competition problems) and MATH-500.

Problems: id = ``unique_id`` (e.g. ``test/algebra/1.json``, the original file path, shared with
MATH-500 and PRM800K); input = ``problem``; target = the gold answer (the ``answer`` field, else the
last ``\\boxed{}`` of ``solution``, the rule the ``answer`` field follows); meta = ``level`` (int
1-5, None when the dataset says "Level ?"), ``subject`` (the display name, e.g. "Counting & Probability").

Sources: with a data dir (``--data-dir`` / ``BONBENCH_DATA_DIR``), ``math/{split}.jsonl`` and
``math500/test.jsonl``; without one, the hub: ``EleutherAI/hendrycks_math`` (7 subject configs,
concatenated in a fixed order) and ``HuggingFaceH4/MATH-500``. Hub MATH rows have no
``unique_id``: their id is ``{split}/{subject folder}/h{sha256(problem)[:12]}.json``, stable across
downloads but not equal to the original numeric file name (which the hub does not keep), so hub
and local runs of ``math`` do not share problem ids; MATH-500 has its ids in both sources.

Filters ``level`` and ``subject`` select problems without changing any problem's prompt, so they
stay out of ``hash_args`` (runs share samples); ``fewshot`` changes the base prompt and is hashed.
The grader's conventions ``percent``, ``decimal_comma`` and ``gold_boxes`` change verdicts only:
they go into ``grade_args`` (a run regraded under others keeps both sets of grades).

This module loads problems; prompts and the Task's assembly are the math family's
(``bonbench_tasks.common``), grading ``bonbench.plugins.graders.math.MathGrader``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bonbench.api.task import Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem
from bonbench.plugins.graders.math_conventions import MathConventions
from bonbench.plugins.graders.math_extract import boxed_contents, extract_answer
from bonbench_tasks.common import MATH_SUBJECTS, check_fewshot, level_int, math_conventions, math_style_task, subject_folder

VERSION = 1
HUB_MATH = "EleutherAI/hendrycks_math"
HUB_MATH500 = "HuggingFaceH4/MATH-500"
SUBSETS = ("full", "math500")
SPLITS = ("train", "test")
__all__ = ["math500_task", "math_task", "to_problem"]


def to_problem(row: dict[str, Any], split: str = "test") -> Problem:
    """A Problem from a MATH / MATH-500 row (local mirror or hub)."""
    subject = row.get("type") or row.get("subject") or ""
    uid = row.get("unique_id")
    if not uid:
        digest = hashlib.sha256(row["problem"].encode("utf-8")).hexdigest()[:12]
        uid = f"{split}/{subject_folder(subject)}/h{digest}.json"
    answer = row.get("answer")
    if not answer:
        # the dataset's own rule (the local mirror's ``answer`` field): the last box of the worked
        # solution, even where it ends with several ("$\boxed{x+11}$ or $\boxed{11+x}$"), so that
        # hub and local runs grade against the same gold
        boxes = [b.strip() for b in boxed_contents(row.get("solution", "")) if b.strip()]
        answer = boxes[-1] if boxes else extract_answer(row.get("solution", "")) or ""
    meta: dict[str, Any] = {"level": level_int(row.get("level")), "subject": subject}
    if split == "train" and row.get("solution"):
        meta["solution"] = row["solution"]  # the worked solution: expert rows of the trainer's SFT-style objectives
    return Problem(id=uid, input=row["problem"], target=answer, meta=meta)


def _load_rows(root: Path | None, split: str, subset: str) -> tuple[list[dict[str, Any]], str]:
    if root is not None:
        rel = "math500/test.jsonl" if subset == "math500" else f"math/{split}.jsonl"
        path = local_file(root, rel, "MATH-500" if subset == "math500" else f"MATH {split} split")
        return list(read_jsonl(path)), file_fingerprint(path)
    if subset == "math500":
        return load_hub(HUB_MATH500, "test")
    rows: list[dict[str, Any]] = []
    prints = []
    for config in MATH_SUBJECTS:  # fixed order, so the concatenation is reproducible
        part, fp = load_hub(HUB_MATH, split, config)
        rows.extend(part)
        prints.append(fp)
    return rows, "sha256:" + hashlib.sha256("|".join(prints).encode()).hexdigest()[:16]


def _select(problems: Iterable[Problem], level: int | None, subject: str | None) -> tuple[Problem, ...]:
    out = tuple(problems)
    if level is not None:
        if not 1 <= int(level) <= 5:
            raise BonbenchError(f"level must be 1-5, got {level!r}; pass -T level=N with N in 1..5")
        out = tuple(p for p in out if p.meta.get("level") == int(level))
    if subject is not None:
        want = subject.strip().lower()
        valid = sorted({str(p.meta.get("subject")) for p in out} | set(MATH_SUBJECTS.values()))
        match = {v for v in valid if want in (v.lower(), subject_folder(v))}
        if not match:
            raise BonbenchError(f"unknown subject {subject!r}; choose one of: {', '.join(valid)} "
                                "(folder names such as number_theory work too)")
        out = tuple(p for p in out if p.meta.get("subject") in match)
    return out


def _build(name: str, data_dir: str | None, split: str, subset: str, level: int | None, subject: str | None,
           fewshot: int, conventions: MathConventions) -> Task:
    if subset not in SUBSETS:
        raise BonbenchError(f"unknown subset {subset!r}; choose one of: {', '.join(SUBSETS)}")
    if split not in SPLITS:
        raise BonbenchError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    if subset == "math500" and split != "test":
        raise BonbenchError("MATH-500 has only a test split; drop -T split or use -T split=test")
    check_fewshot(fewshot)
    rows, fingerprint = _load_rows(resolve_data_dir(data_dir), split, subset)
    problems = _select((to_problem(r, split) for r in rows), level, subject)
    if not problems:
        raise BonbenchError(f"no {name} problems match level={level!r} subject={subject!r}; loosen the filters")
    return math_style_task(name, VERSION, problems, fingerprint, int(fewshot),
                           "MATH-500 (PRM800K test split)" if subset == "math500" else f"Hendrycks MATH ({split})",
                           conventions=conventions)


@register_task("math", family="math")
def math_task(data_dir: str | None = None, split: str = "test", subset: str = "full", level: int | None = None,
              subject: str | None = None, fewshot: int = 4, percent: str = "number", decimal_comma: bool = False,
              gold_boxes: str = "all") -> Task:
    """Hendrycks MATH; ``subset=math500`` gives MATH-500; ``level`` (1-5) and ``subject`` filter;
    ``percent``, ``decimal_comma`` and ``gold_boxes`` are the grader's conventions (docs/math-grading.md)."""
    name = "math500" if subset == "math500" else "math"
    conventions = math_conventions(name, percent, decimal_comma, gold_boxes)
    return _build(name, data_dir, split, subset, level, subject, fewshot, conventions)


@register_task("math500", family="math")
def math500_task(data_dir: str | None = None, level: int | None = None, subject: str | None = None,
                 fewshot: int = 4, percent: str = "number", decimal_comma: bool = False, gold_boxes: str = "all") -> Task:
    """MATH-500, the 500-problem test subset of PRM800K (Lightman et al. 2023); the grader's
    conventions as in ``math``."""
    conventions = math_conventions("math500", percent, decimal_comma, gold_boxes)
    return _build("math500", data_dir, "test", "math500", level, subject, fewshot, conventions)
