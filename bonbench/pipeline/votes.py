"""The answer classes that vote-counting metrics (maj@k, wmaj@k, bom@k) count, from a problem's grades.

A class is the grader's, not a string's: two samples vote together when the grader holds their
answers equivalent. The grader gives each sample a canonical answer (``Grade.answer``: the math
grader writes ``0.5``, ``1/2`` and ``\\frac12`` as one form), and it judges every answer against
the problem's gold; so every answer it grades right is equivalent to the gold, hence to each other,
even when their canonical forms differ (``\\frac{\\sqrt2}{2}`` and ``\\frac{1}{\\sqrt2}``, ``x(x+2)``
and ``x^2+2x``). ``vote_answers`` therefore puts all right answers of a problem in one class, named
by the first of them in sample order; every other sample keeps its canonical answer (``None``
abstains).

What it does not do: merge two wrong answers whose canonical forms differ but that are equivalent
to each other. Proving that needs the grader's symbolic comparison for every pair of distinct wrong
answers, which this stage does not run; numbers, fractions and decimals already share one canonical
form, so the split is left to symbolic forms of one wrong value. It reads no files.
"""

from __future__ import annotations

from collections.abc import Sequence

from bonbench.core.records import Grade


def vote_answers(grades: Sequence[Grade]) -> tuple[str | None, ...]:
    """The class each of one problem's samples votes for, in the order of ``grades``.

    A sample graded right votes for the problem's one right class (the first right answer, in the
    order given); others vote for their canonical ``answer``; ``None`` abstains. A right sample
    without an answer (a grader that gives none) abstains too.
    """
    right = next((g.answer for g in grades if g.correct is True and g.answer is not None), None)
    return tuple(right if g.correct is True and g.answer is not None else g.answer for g in grades)
