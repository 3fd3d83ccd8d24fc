"""The answer classes that vote-counting metrics (maj@k, wmaj@k, bom@k) count, from a problem's grades.

A class is the grader's, not a string's: two samples vote together when the grader holds their
answers equivalent. The grader gives each sample a canonical answer (``Grade.answer``: the math
grader writes ``0.5``, ``1/2`` and ``\\frac12`` as one form), and it judges every answer against
the problem's gold, so every answer it grades right is equivalent to the gold, hence to each other,
even when their canonical forms differ (``\\frac{\\sqrt2}{2}`` and ``\\frac{1}{\\sqrt2}``).
``vote_answers`` puts all right answers of a problem in one class, named by the first of them in
sample order. The other answers are merged where the grader says they are equal to each other: a
grader may offer ``answer_classes(groups)`` (one group of distinct canonical answers per problem ->
per group, the index of each answer's class; ``MathGrader`` has it: ``2\\sqrt{2}`` and
``\\sqrt{8}``); ``vote_classes`` asks it once for every problem. A grader without it leaves them
to their canonical forms. ``None`` abstains.

What it does not do: grade, or read files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bonbench.core.records import Grade


def vote_answers(grades: Sequence[Grade], merged: Mapping[str, str] | None = None) -> tuple[str | None, ...]:
    """The class each of one problem's samples votes for, in the order of ``grades``.

    A sample graded right votes for the problem's one right class (the first right answer, in the
    order given); another votes for its canonical ``answer``, or the answer ``merged`` maps it to
    (its class's first answer); ``None`` abstains. A right sample without an answer abstains too.
    """
    right = next((g.answer for g in grades if g.correct is True and g.answer is not None), None)
    merged = merged or {}
    return tuple(right if g.correct is True and g.answer is not None
                 else (None if g.answer is None else merged.get(g.answer, g.answer)) for g in grades)


def vote_classes(grader: Any, grades_by_problem: Mapping[str, Sequence[Grade]]) -> dict[str, tuple[str | None, ...]]:
    """``vote_answers`` of every problem, with the answers the grader holds equal merged (one call
    of its ``answer_classes`` for all problems, when it has one)."""
    groups: dict[str, list[str]] = {}
    for pid, grades in grades_by_problem.items():
        groups[pid] = list(dict.fromkeys(g.answer for g in grades if g.answer is not None and g.correct is not True))
    merged: dict[str, dict[str, str]] = {pid: {} for pid in grades_by_problem}
    classes_of = getattr(grader, "answer_classes", None)
    wanted = [pid for pid, group in groups.items() if len(group) > 1]
    if callable(classes_of) and wanted:
        for pid, reps in zip(wanted, classes_of([groups[pid] for pid in wanted]), strict=True):
            merged[pid] = {a: groups[pid][r] for a, r in zip(groups[pid], reps, strict=True) if groups[pid][r] != a}
    return {pid: vote_answers(grades, merged[pid]) for pid, grades in grades_by_problem.items()}
