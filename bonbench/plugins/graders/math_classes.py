"""Answer classes among one problem's answers: which canonical answers the grader holds equal.

Vote-counting metrics (maj@k, wmaj@k, bom@k) count classes, not strings. The grader already writes
equal numbers one way (``0.5``, ``1/2``, ``\\frac12``), and every answer it grades right is
equivalent to the gold; this module finds the rest: wrong answers that are equal to each other in
another form (``2\\sqrt{2}`` and ``\\sqrt{8}``, ``x(x+2)`` and ``x^2+2x``).

How: an answer that is one atom the cheap evaluator reads gets a numeric signature (its values at
the evaluator's three test points, rounded); only answers with the same signature can be equal,
so only they are compared, each with its bucket's classes found so far. A comparison is the
grader's own equivalence, both ways (``equiv_canonical``: its exact rules, then sympy); numbers
never prove two answers equal. Comparisons that need sympy are handed to ``settle``, which
``MathGrader`` runs on its worker pool with its per-comparison timeout; an undecided comparison
keeps the two answers apart.

What it does not do: compare structures (lists, intervals, sets: their canonical forms already
order and normalise them) or answers the evaluator cannot read (text, relations): those vote by
their canonical form. It grades nothing and reads no problem.
"""

from __future__ import annotations

import cmath
from collections.abc import Callable, Sequence

from bonbench.plugins.graders.math_canonical import parse_structure
from bonbench.plugins.graders.math_equiv import NeedsSympy, equiv_canonical
from bonbench.plugins.graders.math_numeval import NoEval, NumEval

# (id, a, b) -> whether a is equivalent to b under the grader's full comparison (sympy included)
Settle = Callable[[list[tuple[int, str, str]]], dict[int, bool]]
_DIGITS = 6  # signature rounding: equal values agree far beyond it; the comparison, not this, decides
_POINTS = 3


def numeric_signature(canon: str) -> tuple[complex, ...] | None:
    """The rounded values of a one-atom answer at the evaluator's test points, or None when it is a
    structure or an atom the evaluator cannot read."""
    try:
        if parse_structure(canon)[0] != "atom":
            return None
        values = [NumEval(canon, point).value() for point in range(_POINTS)]
    except (NoEval, ArithmeticError, ValueError, OverflowError, RecursionError, IndexError):
        return None
    if not all(cmath.isfinite(v) for v in values):
        return None
    return tuple(complex(_round(v.real), _round(v.imag)) for v in values)


def _round(x: float) -> float:
    return float(f"{x:.{_DIGITS}g}") if x else 0.0


def _fast_equal(a: str, b: str) -> bool | None:
    """a ≡ b both ways by the grader's cheap rules; None when sympy must decide."""
    try:
        return equiv_canonical(a, b, fast_only=True) and equiv_canonical(b, a, fast_only=True)
    except NeedsSympy:
        return None
    except Exception:  # noqa: BLE001  an answer the rules cannot read is its own class
        return False


def answer_classes(groups: Sequence[Sequence[str]], settle: Settle) -> list[list[int]]:
    """For each group (one problem's distinct canonical answers), the index within the group of each
    answer's class: the first answer of the class, so an answer alone in its class maps to itself."""
    rep = [list(range(len(g))) for g in groups]
    pending: list[tuple[int, int, int]] = []  # (group, member, class representative) for sympy
    signatures: dict[str, tuple[complex, ...] | None] = {}
    for gi, group in enumerate(groups):
        buckets: dict[tuple[complex, ...], list[int]] = {}
        for i, canon in enumerate(group):
            if canon not in signatures:
                signatures[canon] = numeric_signature(canon)
            sig = signatures[canon]
            if sig is None:
                continue
            classes = buckets.setdefault(sig, [])
            for r in classes:
                verdict = _fast_equal(canon, group[r])
                if verdict:
                    rep[gi][i] = r
                    break
                if verdict is None:
                    pending.append((gi, i, r))
            else:
                classes.append(i)
    if pending:
        items = [(2 * j + d, *((groups[gi][i], groups[gi][r]) if d == 0 else (groups[gi][r], groups[gi][i])))
                 for j, (gi, i, r) in enumerate(pending) for d in (0, 1)]
        verdicts = settle(items)
        for j, (gi, i, r) in enumerate(pending):
            if rep[gi][i] == i and verdicts.get(2 * j) and verdicts.get(2 * j + 1):
                rep[gi][i] = rep[gi][r]
    for reps in rep:  # a member joined a class whose representative later joined another
        for i in range(len(reps)):
            while reps[reps[i]] != reps[i]:
                reps[i] = reps[reps[i]]
    return rep
