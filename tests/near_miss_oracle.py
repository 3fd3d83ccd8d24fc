"""The oracle of the false-positive hunt: whether an answer differs in value from a gold answer,
decided without bonbench's grader.

What it does: ``differs`` reads both answers with its own structure reader (tuples and intervals
ordered, sets and bare lists as multisets, unions, matrices, equations, one-variable inequalities as
sympy sets) and atoms with sympy (through latex2sympy2_extended), evaluated at fixed rational points
at 30 digits and compared with a relative tolerance (never an absolute one). The grader's documented
conventions that change the question ("10\\%" is 10, units and degrees are dropped, a bare list is
unordered, the name of a variable on the left of "=" is not compared, a decimal stands for its last
written digit) are followed, so that a convention is never reported as a bug.

What it does not do: it does not grade and never guesses: it answers None whenever it cannot tell
(a parse or evaluation failure, two values closer than a unit of a decimal's last digit, an exact
zero against a tiny value), and the hunt counts those.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import sympy
from latex2sympy2_extended import latex2sympy  # type: ignore[import-untyped]  # no stubs, no py.typed

_UNIT_GROUP = re.compile(r"\\text\{\s*[A-Za-z][A-Za-z .']*\}(?:\^\{?[23]\}?)?")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_REL = re.compile(r"<|>|\\(?:leq?|geq?|lt|gt|neq?)(?![a-zA-Z])")
_SIMPLE_LHS = re.compile(r"[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+|[a-zA-Z]\([a-z]\)")
_DECIMAL = re.compile(r"-?\d*\.(\d+)")
_REL_TOL = 1e-9


def clean(s: str) -> str:
    """The answer with MATH's presentation dropped: $, \\left, \\!, \\dfrac, degrees, percent and
    money signs, thousands separators, unit words after a value, text wrappers."""
    s = s.strip().strip("$").strip()
    s = re.sub(r"\\(?:left|right)(?![a-zA-Z])\.?", "", s)
    s = re.sub(r"(?<=\d),\\!(?=\d{3})", "", s).replace("\\!", "").replace("\\displaystyle", "")
    s = re.sub(r"\\[dt]frac(?![a-zA-Z])", r"\\frac", s).replace("{,}", ",")
    # LaTeX's one-token arguments, which latex2sympy does not read: \frac15, \sqrt2, \frac{\sqrt3}2
    s = re.sub(r"\\sqrt\s*(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)(?=\s*\{)", r"\\frac{\1}", s)
    s = re.sub(r"(\\frac\s*\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})\s*(\d)", r"\1{\2}", s)
    s = re.sub(r"(?<=\d)\\,(?=\d{3})", "", s)
    s = re.sub(r"(?<!\\)\\[,;: ]|\\quad|~", " ", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree", "", s)
    s = s.replace("\\%", "").replace("\\$", "")
    s = re.sub(r"\\(?:mbox|textbf|textrm|textit)\{", r"\\text{", s)
    s = re.sub(r"\\mathrm\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\operatorname\{([a-z]+)\}", r"\\\1", s)
    s = re.sub(r",?\s*\\text\{\s*(?:and|or)\s*\}", ",", s)
    if re.search(r"\d", _UNIT_GROUP.sub("", s)):
        s = _UNIT_GROUP.sub("", s)
    s = re.sub(r"(?<!\.)\.$", "", s.strip())  # a full stop, not an ellipsis
    s = re.sub(r"^[a-zA-Z]\s*\\in(?![a-zA-Z])", "", s).strip()
    m = re.fullmatch(r"\\text\{([^{}]*)\}", s)
    return m.group(1).strip() if m else s


def _split(s: str, sep: str) -> list[str]:
    depth, cur, out, i = 0, 0, [], 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if s[i] in "([{":
            depth += 1
        elif s[i] in ")]}":
            depth -= 1
        if depth == 0 and s.startswith(sep, i):
            out.append(s[cur:i])
            i += len(sep)
            cur = i
            continue
        i += 1
    return [*out, s[cur:]]


def _wrapped(s: str, lo: int, hi: int) -> bool:
    """Whether the bracket ending at s[lo-1] closes at s[len(s)-hi] (not earlier)."""
    inner = s[lo : len(s) - hi]
    depth = 0
    for ch in inner:
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if depth < 0:
            return False
    return depth == 0


def node(s: str) -> tuple[Any, ...] | None:
    """The oracle's reading of an answer: ("multiset", items) for sets and bare lists, ("seq",
    open, close, items) for tuples and intervals, ("union", items), ("matrix", rows), ("ambig",
    number, list) for a bare "7,251", or an atom; None when it cannot read it."""
    s = clean(s)
    if not s:
        return None
    tail = re.search(r",\s*(?:\\[lc]?dots|\.\.\.)$", s)
    if tail:  # an infinite sequence: only ever equal to another one with the same first terms
        head = node(s[: tail.start()])
        return ("infinite", head) if head else None
    if len(_split(s, "\\cup")) > 1:
        parts = [node(p) for p in _split(s, "\\cup")]
        return ("union", parts) if None not in parts else None
    m = re.fullmatch(r"\\begin\{[pb]matrix\}(.*)\\end\{[pb]matrix\}", s, flags=re.DOTALL)
    if m:
        cells = [[_atom(c) for c in r.split("&")] for r in m.group(1).split("\\\\") if r.strip()]
        return ("matrix", cells)
    if s.startswith("\\{") and s.endswith("\\}") and _wrapped(s, 2, 2):
        members = [node(p) for p in _split(s[2:-2], ",")]
        return ("multiset", members) if None not in members else None
    if _THOUSANDS.fullmatch(s):
        number = _atom(s.replace(",", ""))
        if "." in s or ",0" in s:
            return number
        return ("ambig", number, ("multiset", [_atom(p) for p in s.split(",")]))
    items = _split(s, ",")
    if len(items) > 1:
        parts = [node(p) for p in items]
        return ("multiset", parts) if None not in parts else None
    if s[0] in "([" and s[-1] in ")]" and _wrapped(s, 1, 1):
        inner = _split(s[1:-1], ",")
        if len(inner) > 1:
            parts = [node(p) for p in inner]
            return ("seq", s[0], s[-1], parts) if None not in parts else None
        if s[0] == "(" and s[-1] == ")":
            return node(s[1:-1])
    return _atom(s)


def _sympy(s: str) -> Any:
    try:
        expr = latex2sympy(s)
    except Exception:  # noqa: BLE001  the parser raises many kinds; unreadable is "undecided"
        return None
    if isinstance(expr, sympy.Basic):
        return expr.subs(sympy.Symbol("i"), sympy.I)
    return None


def _atom(s: str) -> tuple[Any, ...] | None:
    s = s.strip()
    if not s:
        return None
    if re.fullmatch(r"\(?[A-E]\)?", s) or re.fullmatch(r"[A-Za-z]{2,}(?:[ '\-][A-Za-z]+)*", s):
        return ("text", re.sub(r"[()\s]+", " ", s).strip().lower())
    if _REL.search(s):
        rel = _sympy(s)
        if isinstance(rel, sympy.core.relational.Relational) and len(rel.free_symbols) == 1:
            try:
                return ("set", rel.as_set())
            except Exception:  # noqa: BLE001  sympy cannot solve it: undecided
                return None
        return None
    sides = _split(s, "=")
    if len(sides) == 2:
        rhs = _atom(sides[1])
        return ("eq", re.sub(r"\s+", "", sides[0]), _sympy(sides[0]), rhs) if rhs else None
    if len(re.findall(r"\\(?:pm|mp)(?![a-zA-Z])", s)) == 1:
        plus, minus = (re.sub(r"\\(?:pm|mp)(?![a-zA-Z])", op, s) for op in ("+", "-"))
        return ("multiset", [_atom(plus), _atom(minus)])
    m = re.fullmatch(r"([0-9A-Z]+)_\{?(\d+)\}?", s)
    if m:
        return ("base", m.group(1).lstrip("0"), int(m.group(2)))
    if "\\overline" in s or "_" in s:
        return None
    expr = _sympy(s)
    if not isinstance(expr, sympy.Expr):
        return None
    dec = _DECIMAL.fullmatch(s)
    return ("expr", expr, len(dec.group(1)) if dec else None)


def _point(name: str, k: int) -> sympy.Rational:
    return sympy.Rational(500 + (zlib.crc32(name.encode()) + 7919 * k) % 2000, 1000)


def _values(expr: Any, syms: list[Any], k: int) -> complex:
    return complex(sympy.N(expr.subs({x: _point(str(x), k) for x in syms}), 30))


def _constant_difference(d: Any) -> bool | None:
    """Two constants differ when their difference is an exact nonzero rational (2^{100}+1 and
    2^{100}: no tolerance) or evaluates to nonzero at full precision (evalf raises its working
    precision until the value has 30 correct digits; an exact zero never gets there)."""
    if d.is_Rational:
        return bool(d != 0)
    try:
        v = sympy.N(d, 30)
    except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
        return None
    parts = [part for part in v.as_real_imag() if part != 0]
    if parts and all(getattr(part, "is_Float", False) and part._prec >= 90 for part in parts):
        return True
    return None


def _expr_differs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool | None:
    ea, eb = a[1], b[1]
    if ea.has(sympy.oo, -sympy.oo, sympy.zoo) or eb.has(sympy.oo, -sympy.oo, sympy.zoo):
        return None if ea.free_symbols or eb.free_symbols else bool(ea != eb)
    # a decimal stands for its last written digit: closer than one unit of it is not decided
    unit = max([10.0 ** -p for p in (a[2], b[2]) if p is not None] or [0.0])
    syms = sorted(ea.free_symbols | eb.free_symbols, key=str)
    if not syms and unit == 0.0:
        exact = _constant_difference(ea - eb)
        if exact is not None:
            return exact
    verdicts = []
    for k in range(3 if syms else 1):
        try:
            va, vb = _values(ea, syms, k), _values(eb, syms, k)
        except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
            return None
        scale = max(abs(va), abs(vb))
        if va == vb:
            verdicts.append(False)
        elif scale != scale or scale == float("inf") or (min(abs(va), abs(vb)) == 0 and scale < 1e-20):
            return None  # an exact zero against a tiny value may be a cancellation left by evalf
        elif abs(va - vb) > max(_REL_TOL * scale, unit * (1 - 1e-6)):
            verdicts.append(True)
        elif abs(va - vb) > _REL_TOL * scale:
            return None
        else:
            verdicts.append(False)
    return any(verdicts)


def _eq_differs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool | None:
    if a[0] == "eq" and b[0] == "eq":
        if a[1] == b[1] or (_SIMPLE_LHS.fullmatch(a[1]) and _SIMPLE_LHS.fullmatch(b[1]) and a[1] != b[1]):
            return differs_nodes(a[3], b[3]) if a[1] == b[1] else None
        return None
    eq, other = (a, b) if a[0] == "eq" else (b, a)
    return differs_nodes(eq[3], other) if _SIMPLE_LHS.fullmatch(eq[1]) else None


def _multiset_differs(xs: list[Any], ys: list[Any]) -> bool | None:
    if len(xs) != len(ys):
        return True
    table = [[differs_nodes(x, y) for y in ys] for x in xs]
    # decided equal pairs first: a perfect matching on them means the multisets are equal
    if _matching(table, {False}):
        return False
    return None if _matching(table, {False, None}) else True


def _matching(table: list[list[bool | None]], ok: set[bool | None]) -> bool:
    match: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j, v in enumerate(table[i]):
            if v in ok and j not in seen:
                seen.add(j)
                if j not in match or augment(match[j], seen):
                    match[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(table)))


def _ordered_differs(xs: list[Any], ys: list[Any]) -> bool | None:
    if len(xs) != len(ys):
        return True
    got = [differs_nodes(x, y) for x, y in zip(xs, ys, strict=True)]
    return True if True in got else None if None in got else False


def differs_nodes(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool | None:
    """Whether two oracle readings differ in value: True, False, or None (undecided)."""
    if a is None or b is None:
        return None
    for x, y in ((a, b), (b, a)):
        if x[0] == "ambig":
            got = [differs_nodes(r, y) for r in x[1:]]
            return False if False in got else None if None in got else True
    if "infinite" in (a[0], b[0]):
        return differs_nodes(a[1], b[1]) if a[0] == b[0] else True
    if "eq" in (a[0], b[0]):
        return _eq_differs(a, b)
    kinds = {a[0], b[0]}
    if a[0] == b[0] == "expr":
        return _expr_differs(a, b)
    if a[0] == b[0] and a[0] in ("text", "base"):
        return bool(a[1:] != b[1:])
    if a[0] == b[0] == "set":
        empty = a[1].symmetric_difference(b[1]).is_empty
        return None if empty is None else not empty
    if a[0] == b[0] in ("multiset", "union"):
        return _multiset_differs(a[1], b[1])
    if a[0] == b[0] == "seq":
        return True if a[1:3] != b[1:3] else _ordered_differs(a[3], b[3])
    if a[0] == b[0] == "matrix":
        if [len(r) for r in a[1]] != [len(r) for r in b[1]]:
            return True
        return _ordered_differs([x for r in a[1] for x in r], [x for r in b[1] for x in r])
    if "multiset" in kinds and kinds & {"expr", "text", "base"}:
        ms, other = (a, b) if a[0] == "multiset" else (b, a)
        return differs_nodes(ms[1][0], other) if len(ms[1]) == 1 else True
    if "seq" in kinds and kinds & {"expr", "text", "base"}:
        return True  # a tuple or interval is never one number
    return None


def differs(answer: str, gold: str) -> bool | None:
    """Whether ``answer`` has a different value from ``gold`` (None: the oracle cannot tell)."""
    return differs_nodes(node(answer), node(gold))
