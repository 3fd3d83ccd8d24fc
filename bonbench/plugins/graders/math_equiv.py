"""Equivalence of two MATH answers, on their canonical forms.

What it does: ``is_equiv`` canonicalises both answers under the grader's ``MathConventions`` (a
gold written as several boxes read as ``gold_answers`` says: their list, or alternatives) and
compares them: structures (lists, sets,
tuples, intervals, unions, matrices, named values, ambiguous thousands) by our own rules, atoms
first by cheap rules (``_atom_fast``: strings, exact numbers and the precision model, kinds,
free variables, the numeric evaluator; an atom with an ellipsis or with digits kept apart by a space
matches only its own writing; a list with an ellipsis is compared in order), then by
``math_symbolic.symbolic_verdict`` (constants exactly in sympy, the rest with math-verify, its
signal timeouts disabled so that it runs in threads and worker processes). ``equiv_canonical(..., fast_only=True)``
raises ``NeedsSympy`` instead of calling sympy: ``MathGrader`` settles the rest in workers.

What it does not do: no timeout (``MathGrader`` bounds untrusted comparisons); it does not read
the problem, so question-dependent conventions are fixed rules (docs/math-grading.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bonbench.plugins.graders.math_canonical import BASE_RE, canon_atom, canonical_answer, parse_structure, render_structure
from bonbench.plugins.graders.math_conventions import DEFAULT_CONVENTIONS, MathConventions
from bonbench.plugins.graders.math_extract import gold_answers
from bonbench.plugins.graders.math_numeric import approx_interval, float_in, is_long, num_equiv, parse_number
from bonbench.plugins.graders.math_numeval import const_value, constant_at_points, has_free_variable, surely_different
from bonbench.plugins.graders.math_symbolic import symbolic_verdict


class NeedsSympy(Exception):
    """Raised in fast-only mode when an atom comparison needs math-verify."""


def _kind(atom: str) -> str:
    if parse_number(atom) is not None:
        return "num"
    if atom in ("\\infty", "-\\infty"):
        return "inf"
    if re.fullmatch(r"[A-E]", atom):
        return "mc"
    if BASE_RE.fullmatch(atom) and re.search(r"\d", atom.split("_")[0]):
        return "base"
    if re.fullmatch(r"[a-z][a-z .'\-]*", atom) and re.search(r"[a-z]{2,}", atom):
        return "text"
    return "expr"


_OPAQUE_RE = re.compile(r"\\ldots|\d\\;\d")
# an angle named by three points: the vertex is the middle one, so \angle ABC is \angle CBA, never
# \angle ACB (math-verify reads the letters as a commutative product)
_ANGLE_RE = re.compile(r"\\angle\s*\{?([A-Z])([A-Z])([A-Z])\}?")


def _atom_fast(pred: str, gold: str) -> bool | None:
    if pred == gold:
        return True
    if "\\angle" in pred and "\\angle" in gold:
        ap, ag = _ANGLE_RE.fullmatch(pred), _ANGLE_RE.fullmatch(gold)
        if ap and ag:
            return ap.groups() in (ag.groups(), ag.groups()[::-1])
    if _OPAQUE_RE.search(pred) or _OPAQUE_RE.search(gold):
        # an ellipsis ("1+2+\\ldots+n") or digits kept apart by a space ("2\\;3") have no value to
        # compare (sympy would read 2\\;3 as 23): only the same writing matches
        return False
    kp, kg = _kind(pred), _kind(gold)
    # the ignores below: _kind says "num" only for what parse_number parses (never None there)
    if kp == "num" and kg == "num":
        return num_equiv(parse_number(pred), parse_number(gold))  # type: ignore[arg-type]  # see above
    if "base" in (kp, kg):
        # the problem states the base, so "1011" answers "1011_2"; a decimal conversion does not
        dp, dg = pred.split("_")[0], gold.split("_")[0]
        other = kg if kp == "base" else kp
        return other in ("num", "base") and dp == dg and (kp != "base" or kg != "base" or pred == gold)
    if kp in ("text", "mc", "inf") or kg in ("text", "mc", "inf"):
        return False
    if kp == "num" and has_free_variable(gold):
        # strict mode (variables matter): an expression in x equals a constant only by an identity
        return None if constant_at_points(gold, parse_number(pred)[0]) else False  # type: ignore[index]  # see above
    if kg == "num" and has_free_variable(pred):
        return None if constant_at_points(pred, parse_number(gold)[0]) else False  # type: ignore[index]  # see above
    if kg == "num":
        interval = approx_interval(parse_number(gold))  # type: ignore[arg-type]  # see above
        v = const_value(pred) if interval is not None else None
        if v is not None:
            got = float_in(v, interval)  # type: ignore[arg-type]  # v is None unless interval is not
            if got is not None:
                return got  # rounded-gold rule: \sqrt{4250} answers 65.192
    if kp == "num" and is_long(*parse_number(pred)):  # type: ignore[misc]  # see above
        interval = approx_interval(parse_number(pred))  # type: ignore[arg-type]  # see above
        v = const_value(gold)
        if v is not None and interval is not None:
            got = float_in(v, interval)
            if got is not None:
                return got  # 0.785398 answers \frac{\pi}{4}
    if surely_different(pred, gold):
        return False
    return None


def _atom_equiv(pred: str, gold: str, fast_only: bool) -> bool:
    fast = _atom_fast(pred, gold)
    if fast is not None:
        return fast
    if fast_only:
        raise NeedsSympy
    return symbolic_verdict(pred, gold)


def _match_unordered(ps: list[Any], gs: list[Any], fast_only: bool) -> bool:
    if len(ps) != len(gs):
        return False
    # identical renders pair off first, so the (rarely needed) sympy comparisons see fewer candidates
    left_p: list[Any] = []
    remaining = list(gs)
    rendered = [render_structure(g) for g in remaining]
    for p in ps:
        r = render_structure(p)
        if r in rendered:
            j = rendered.index(r)
            del remaining[j], rendered[j]
        else:
            left_p.append(p)
    for p in left_p:
        for j, g in enumerate(remaining):
            if _node_equiv(p, g, fast_only):
                del remaining[j]
                break
        else:
            return False
    return not remaining


def _column(node: tuple[Any, ...]) -> list[str] | None:
    if node[0] == "matrix" and all(len(r) == 1 for r in node[1]):
        return [r[0] for r in node[1]]
    return None


def _readings(node: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The ways a node can be read: "7{,}251" is the number 7251 or the bare list 7, 251."""
    if node[0] != "ambig":
        return [node]
    groups = node[1].split("{,}")
    return [("atom", canon_atom("".join(groups))), ("list", [("atom", canon_atom(x)) for x in groups])]


def _named_equiv(p: tuple[Any, ...], g: tuple[Any, ...], fast_only: bool) -> bool:
    """Named values: by name when both sides name the same variables, else the values in order."""
    if p[0] == "named" and g[0] == "named":
        pn, gn = dict(p[1]), dict(g[1])
        if set(pn) == set(gn):
            return all(_node_equiv(pn[k], gn[k], fast_only) for k in gn)
        return _ordered([v for _, v in p[1]], [v for _, v in g[1]], fast_only)
    named, other = (p, g) if p[0] == "named" else (g, p)
    values = [v for _, v in named[1]]
    if other[0] == "list" or (other[0] == "seq" and other[1] == "(" and other[2] == ")"):
        items = other[1] if other[0] == "list" else other[3]
        return _ordered(values, items, fast_only) if named is p else _ordered(items, values, fast_only)
    if other[0] == "set":
        items = list(other[1])
        return _match_unordered(values, items, fast_only) if named is p else _match_unordered(items, values, fast_only)
    return False


def _node_equiv(p: tuple[Any, ...], g: tuple[Any, ...], fast_only: bool) -> bool:
    kp, kg = p[0], g[0]
    if kp == "ambig" or kg == "ambig":
        # equivalent under some reading of each side: "7,251" answers 7251 and "251, 7" (a bare
        # list is unordered), so the thousands rule never contradicts the bare-list rule
        needs_sympy = False
        for a in _readings(p):
            for b in _readings(g):
                try:
                    if _node_equiv(a, b, fast_only):
                        return True
                except NeedsSympy:
                    needs_sympy = True
        if needs_sympy:
            raise NeedsSympy
        return False
    if kp == "named" or kg == "named":
        return _named_equiv(p, g, fast_only)
    if kp == "atom" and kg == "atom":
        return _atom_equiv(p[1], g[1], fast_only)
    if kp == "list" and kg == "list" and (_has_ellipsis(p) or _has_ellipsis(g)):
        return _ordered(p[1], g[1], fast_only)  # "1, 2, 4, \\ldots" is a sequence: its order is its meaning
    if kp in ("list", "set") and kg in ("list", "set"):
        return _match_unordered(list(p[1]), list(g[1]), fast_only)
    if kp == "set" and kg == "atom" and len(p[1]) == 1:
        return _node_equiv(p[1][0], g, fast_only)
    if kg == "set" and kp == "atom" and len(g[1]) == 1:
        return _node_equiv(p, g[1][0], fast_only)
    if kp == "seq" and kg == "seq":
        return p[1] == g[1] and p[2] == g[2] and _ordered(p[3], g[3], fast_only)
    # a bare list answers a tuple in the same order ("3, -1" for "(3,-1)")
    if kp == "list" and kg == "seq" and g[1] == "(" and g[2] == ")":
        return _ordered(p[1], g[3], fast_only)
    if kg == "list" and kp == "seq" and p[1] == "(" and p[2] == ")":
        return _ordered(p[3], g[1], fast_only)
    if kp == "union" and kg == "union":
        return _match_unordered(list(p[1]), list(g[1]), fast_only)
    if kp == "matrix" and kg == "matrix":
        if len(p[1]) != len(g[1]) or any(len(a) != len(b) for a, b in zip(p[1], g[1], strict=True)):
            return False
        return all(_atom_equiv(a, b, fast_only) for ra, rb in zip(p[1], g[1], strict=True) for a, b in zip(ra, rb, strict=True))
    # a column vector written as a tuple
    for mat, tup in ((p, g), (g, p)):
        col = _column(mat)
        if col is not None and tup[0] == "seq" and tup[1] == "(" and tup[2] == ")" and len(tup[3]) == len(col):
            pairs = zip(col, tup[3], strict=True) if mat is p else zip(tup[3], col, strict=True)
            return all(
                _node_equiv(("atom", a) if isinstance(a, str) else a, ("atom", b) if isinstance(b, str) else b, fast_only)
                for a, b in pairs
            )
    for lst, one in ((p, g), (g, p)):
        if lst[0] == "list" and one[0] in ("atom", "seq", "matrix") and not _has_ellipsis(lst):
            # forms of one value given together ("$\\boxed{x+11}$ or $\\boxed{11+x}$"): right when every
            # form is; a hedge between different values ("3 or 2") is not, whichever the gold is
            return all(_node_equiv(item, one, fast_only) if lst is p else _node_equiv(one, item, fast_only)
                       for item in lst[1])
    return False


def _has_ellipsis(node: tuple[Any, ...]) -> bool:
    """A list with an ellipsis item ("1, 2, 4, \\ldots") is a sequence, not a set of solutions."""
    return any(item == ("atom", "\\ldots") for item in node[1])


def _ordered(ps: Sequence[Any], gs: Sequence[Any], fast_only: bool) -> bool:
    return len(ps) == len(gs) and all(_node_equiv(a, b, fast_only) for a, b in zip(ps, gs, strict=True))


def equiv_canonical(cp: str, cg: str, fast_only: bool = False) -> bool:
    """Equivalence of two canonical forms. ``fast_only``: raise ``NeedsSympy`` where an atom
    comparison needs sympy/math-verify (``MathGrader`` settles those in its workers)."""
    if cp == cg:
        return True
    return _node_equiv(parse_structure(cp), parse_structure(cg), fast_only)


def is_equiv(pred: str, gold: str, conventions: MathConventions = DEFAULT_CONVENTIONS) -> bool:
    """Whether answer ``pred`` is equivalent to gold answer ``gold`` under ``conventions`` (no
    timeout: see MathGrader). A gold written as several boxes is their list (``gold_boxes="all"``)
    or alternatives, any one of which ``pred`` may equal (``"any"``)."""
    if pred is None or gold is None:
        return False
    cp = canonical_answer(pred, conventions)
    if not cp:
        return False
    for g in gold_answers(gold, conventions.gold_boxes):
        cg = canonical_answer(g, conventions)
        if cg and equiv_canonical(cp, cg):
            return True
    return False
