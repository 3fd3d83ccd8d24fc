"""Canonical form of a MATH answer, for maj@k clustering and as the input of equivalence.

What it does: ``canonical_answer`` rewrites an answer with string rules only (``math_rewrite``): wrappers, units,
degrees, percent, money, thousands separators, ``\\frac``/``\\sqrt`` shorthands, equation
left-hand sides and spacing are removed or normalised, under the grader's ``MathConventions``
(a percent as its number or its fraction, read here; a decimal comma); the answer is parsed into a structure
(``parse_structure``: matrix, union, set, one-variable inequality as an interval (also with a numeric
coefficient), tuple / interval, named
values, list, atom; ``\\pm`` items become their two solutions) and rendered back (``render_structure``);
atoms are normalised by ``canon_atom`` (exact numbers via ``math_numeric``, multiple-choice
letters, base-n numerals, text). ``canonical_answer`` is idempotent.

What it does not do: no sympy and no comparison: two equivalent answers usually, not always,
share a canonical string (``math_equiv`` decides). It does not read the problem.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any

from bonbench.plugins.graders.math_conventions import DEFAULT_CONVENTIONS, MathConventions
from bonbench.plugins.graders.math_numeric import approx_interval, parse_number, render_number
from bonbench.plugins.graders.math_rewrite import (
    collapse_control_spaces,
    drop_units,
    fix_shorthands,
    is_text_answer,
    matlab_spaces,
    pre_normalise,
    space_separated_digits,
    text_groups,
)

BASE_RE = re.compile(r"([0-9A-Z]+)_\{?\(?(\d{1,2})\)?\}?")
_MC_RE = re.compile(r"\(?([A-E])\)?")
_LHS_RE = re.compile(
    r"(?:[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+|[a-zA-Z]\([a-z]\)|\((?:[a-zA-Z](?:_\{?\w+\}?)?,)+[a-zA-Z](?:_\{?\w+\}?)?\))"
)


def canonical_answer(ans: str, conventions: MathConventions = DEFAULT_CONVENTIONS) -> str:
    """A normal form of ``ans`` for clustering (maj@k) and as the input of ``is_equiv``, under the
    given ``conventions`` (a percent as its number or its fraction, a decimal comma). Idempotent for
    each conventions value; canonical forms made under different conventions are not comparable."""
    fraction_percent = conventions.percent == "fraction"
    s = pre_normalise(str(ans), keep_percent=fraction_percent, decimal_comma=conventions.decimal_comma)
    if fraction_percent and "%" in s:
        s = _PERCENT_RE.sub(_percent_value, s)
    groups = text_groups(s)
    if len(groups) == 1 and groups[0][0] == 0 and groups[0][1] == len(s):
        s = groups[0][2].strip().rstrip(".").strip()  # the whole answer is \text{...}
    if is_text_answer(s):
        words = _SPACES_RE.sub(" ", s).strip().rstrip(".").lower()
        if len(words) != 1:
            return words
    if _REL_RE.search(s):
        # "x < -1 or x > 2" is a union of intervals (before "\text{ or }" becomes a list comma)
        s = _OR_RE.sub(r"\\cup ", s)
    s = drop_units(s)
    s = fix_shorthands(s)
    m = _THOUSANDS_RE.fullmatch(s.strip()) if "," in s else None
    if m:
        if m.group(2) or ",0" in m.group(1):
            # "1,000", "2,500.5": a group with a leading zero or a decimal part is not a list item,
            # so the commas are thousands separators
            s = s.replace(",", "")
        else:
            # "7,251", "70,110": either the number 7251 or the list 7, 251 (see _readings); "{,}"
            # marks it so that parse_structure can tell it from a list, whose canonical form has ", "
            return m.group(1).replace(",", "{,}")
    s = matlab_spaces(s)
    s = space_separated_digits(s)
    s = collapse_control_spaces(s)
    node = parse_structure(s)
    if node[0] == "atom" and len(_expand_pm([node[1]])) == 2:
        # a whole answer "\pm\sqrt{2}" is the list of its two solutions
        node = ("list", [parse_structure(v) for v in _expand_pm([node[1]])])
    out = render_structure(node)
    if conventions.decimal_comma:
        # every comma left between digits separates items: a space keeps it so when read again
        out = _DIGIT_COMMA_RE.sub(", ", out)
    return out


_SPACES_RE = re.compile(r"\s+")
_OR_RE = re.compile(r"\\text\{\s*or\s*\}|\s+or\s+|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_THOUSANDS_RE = re.compile(r"\+?(-?\d{1,3}(?:,\d{3})+)(\.\d+)?")
_DIGIT_COMMA_RE = re.compile(r"(?<=\d),(?=\d)")

# the percent as a fraction (MathConventions.percent == "fraction"): a number literal before \% (a
# comma that is not a thousands mark separates: "1,5\%" is 1 and 5\%, as it reads again)
_PERCENT_RE = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)\s*\\%")


def _percent_value(m: re.Match[str]) -> str:
    """``33.33\\%`` -> ``0.3333``: the decimal point moved two places, so a rounded percent stays a
    rounded decimal with the same interval scaled; where the moved decimal would read with another
    precision (``7.2\\%`` -> ``0.072`` looks rounded, 7.2 does not) the exact fraction instead."""
    lit = m.group(1).replace(",", "")  # 1,000\% is 10
    num = parse_number(lit if not lit.endswith(".") else lit[:-1])
    if num is None:
        return m.group()
    whole, _, frac = lit.partition(".")
    digits = (whole + frac).lstrip("0") or "0"
    places = len(frac) + 2
    moved = "0." + digits.rjust(places, "0") if len(digits) <= places else digits[:-places] + "." + digits[-places:]
    got, want = parse_number(moved), approx_interval(num)
    scaled = (want[0] / 100, want[1] / 100) if want is not None else None
    if got is not None and approx_interval(got) == scaled:
        return moved
    return render_number(num[0] / 100, 0)


# structure: ("atom", s) | ("list", [..]) | ("set", [..]) | ("seq", open, close, [..]) |
#            ("union", [..]) | ("matrix", [[..], ..]) | ("named", [(name, node), ..]) |
#            ("ambig", "7{,}251")  -- a number with thousands separators or a bare list
_AMBIG_RE = re.compile(r"-?\d{1,3}(?:\{,\}\d{3})+")
# a matrix environment, or an array (any column spec) inside brackets: \left[\begin{array}{cc}..\right]
_MATRIX_RE = re.compile(
    r"([(\[]?)\\begin\{(array|smallmatrix|[pbvBV]?matrix)\}(?:(?<=array\})\{(?:[^{}]|\{[^{}]*\})*\})?(.*)"
    r"\\end\{\2\}([)\]]?)",
    flags=re.DOTALL,
)
_OPEN = {"(": ")", "[": "]", "{": "}"}


def _split_top(s: str, sep: str) -> list[str]:
    if sep not in s:
        return [s]
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            cur.append(s[i : i + 2])
            i += 2
            continue
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if depth == 0 and s.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _wraps_whole(s: str) -> bool:
    """True when the bracket opening at s[0] closes at s[-1] (any bracket kind: intervals mix them)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


@functools.lru_cache(maxsize=100_000)
def parse_structure(s: str) -> tuple[Any, ...]:
    """Structure of a canonical-form string (cached: gold answers are parsed once per sample)."""
    s = _strip_lhs(s.strip())
    if _AMBIG_RE.fullmatch(s):
        return ("ambig", s)
    m = _MATRIX_RE.fullmatch(s)
    if m and (m.group(1) + m.group(4)) in ("", "()", "[]") and "\\end{" not in m.group(3):
        rows = [r for r in m.group(3).split("\\\\") if r.strip()]
        return ("matrix", [[canon_atom(c) for c in r.split("&")] for r in rows])
    if s == "\\mathbb{R}":
        return ("seq", "(", ")", [("atom", "-\\infty"), ("atom", "\\infty")])  # the whole real line
    if len(s) >= 2 and s[0] == "[" and s[-1] == "]" and _wraps_whole(s):
        # MATLAB-style "[a,b;c,d]": rows separated by ";" (intervals and sequences have none)
        rows = _split_top(s[1:-1], ";")
        if len(rows) > 1:
            rows = [r for r in rows if r.strip()]
            cells = [_split_top(r, ",") for r in rows]
            if all(c.strip() for r in cells for c in r):
                return ("matrix", [[canon_atom(c) for c in r] for r in cells])
    if len(_split_top(s, "\\cup")) > 1:
        return ("union", [parse_structure(p) for p in _split_top(s, "\\cup")])
    if s.startswith("\\{") and s.endswith("\\}") and len(_split_top(s[2:-2], "\\}")) == 1:
        return ("set", [parse_structure(p) for p in _expand_pm(_split_top(s[2:-2], ",")) if p.strip()])
    parts = _split_top(s, ",")
    if len(parts) > 1:
        items = _expand_pm([p for p in parts if p.strip()])
        named = _named_items(items)
        if named is not None:
            return ("named", named)
        return ("list", [parse_structure(p) for p in items])
    interval = _inequality_interval(s)
    if interval is not None:
        return interval
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _wraps_whole(s):
        inner = _split_top(s[1:-1], ",")
        if len(inner) > 1:
            return ("seq", s[0], s[-1], [parse_structure(p) for p in inner])
        if s[0] == "(" and s[-1] == ")":
            return parse_structure(s[1:-1])  # redundant parentheses around a single item
    if len(s) >= 2 and s[0] == "{" and s[-1] == "}" and _wraps_whole(s):
        return parse_structure(s[1:-1])
    return ("atom", canon_atom(s))


_PM_RE = re.compile(r"\\(?:pm|mp)(?![a-zA-Z])")


def _expand_pm(items: list[str]) -> list[str]:
    """Each item with one \\pm (or \\mp) becomes its two solutions: "1\\pm\\sqrt{5}" ->
    "1+\\sqrt{5}", "1-\\sqrt{5}" (a list of solutions is unordered, so \\mp reads the same).
    An item with several signs is left alone: whether they vary together is not written."""
    out = []
    for item in items:
        if len(_PM_RE.findall(item)) == 1:
            out += [_PM_RE.sub("+", item), _PM_RE.sub("-", item)]
        else:
            out.append(item)
    return out


# one-variable inequalities, read as intervals: -1 < x \le 4 is (-1,4], x \ge 0 is [0,\infty)
_REL_RE = re.compile(r"<=|>=|≤|≥|<|>|\\(?:leqslant|geqslant|leq|geq|le|ge|lt|gt)(?![a-zA-Z])")
_INEQ_VAR_RE = re.compile(r"[a-zA-Z](?:_\{?\w+\}?)?|\\(?!infty\b|pi\b)[a-zA-Z]+")


_COEF_VAR_RE = re.compile(r"([+-]?)(\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\})?(" + _INEQ_VAR_RE.pattern + ")")


def _inequality_interval(s: str) -> tuple[Any, ...] | None:
    """``a < x \\le b``, ``x \\ge a``, ``a < x``, ``b > x > a`` as an interval node, also with a numeric
    coefficient on the variable (``-x > -1``, ``2 < 2x \\le 6``: the bounds divided by it, the
    direction flipped when it is negative); None otherwise (two variables, a relation chain that
    changes direction, a bound that is a variable, a coefficient on a bound that is not a number)."""
    ops = _REL_RE.findall(s)
    if not 1 <= len(ops) <= 2:
        return None
    terms = [t.strip() for t in _REL_RE.split(s)]
    if any(not t for t in terms):
        return None
    less = [op in ("<", "<=", "≤") or op.startswith("\\l") for op in ops]
    strict = [op in ("<", ">", "\\lt", "\\gt") for op in ops]
    is_var = [bool(_INEQ_VAR_RE.fullmatch(t)) for t in terms]
    if not any(is_var):
        # "-x", "2x", "\frac{1}{2}x": the variable's term with a coefficient, when no term is a bare variable
        scaled = _divide_bounds(terms)
        if scaled is None:
            return None
        terms, negative = scaled
        is_var = [bool(_INEQ_VAR_RE.fullmatch(t)) for t in terms]
        less = [x != negative for x in less]
    if len(ops) == 2:
        if not is_var[1] or is_var[0] or is_var[2] or less[0] != less[1]:
            return None
        # written low to high (a < x < b) or high to low (b > x > a)
        (lo, lo_strict), (hi, hi_strict) = ((terms[0], strict[0]), (terms[2], strict[1]))
        if not less[0]:
            (lo, lo_strict), (hi, hi_strict) = (hi, hi_strict), (lo, lo_strict)
    elif is_var[0] != is_var[1]:
        bound = terms[1] if is_var[0] else terms[0]
        # "x < b" and "b > x" bound x from above
        upper = less[0] == is_var[0]
        if upper:
            lo, lo_strict, hi, hi_strict = "-\\infty", True, bound, strict[0]
        else:
            lo, lo_strict, hi, hi_strict = bound, strict[0], "\\infty", True
    else:
        return None
    bounds = [("atom", canon_atom(lo)), ("atom", canon_atom(hi))]
    return ("seq", "(" if lo_strict else "[", ")" if hi_strict else "]", bounds)


def _divide_bounds(terms: list[str]) -> tuple[list[str], bool] | None:
    """Terms of ``c x`` relations divided by c: the variable's term becomes the variable, every other
    term (a number; any term when c = -1) the bound over c. None when no single term has that form."""
    found = [(i, m) for i, t in enumerate(terms) if (m := _COEF_VAR_RE.fullmatch(t)) and (m.group(1) or m.group(2))]
    if len(found) != 1:
        return None
    i, m = found[0]
    coef = parse_number(m.group(2)) if m.group(2) else (Fraction(1), 0)
    if coef is None or coef[0] == 0:
        return None
    c = -coef[0] if m.group(1) == "-" else coef[0]
    out = []
    for j, t in enumerate(terms):
        if j == i:
            out.append(m.group(3))
            continue
        num = parse_number(canon_atom(t))
        if num is not None:
            out.append(render_number(num[0] / c, num[1] if abs(c) == 1 else 0))
        elif c == -1 and _one_term(t):
            out.append(t[1:] if t.startswith("-") else "-" + t.lstrip("+"))
        else:
            return None
    return out, c < 0


def _one_term(t: str) -> bool:
    """No + or - outside brackets after a leading sign: "-\\sqrt{2}" negates by its sign, "1-\\sqrt{2}" not."""
    body = t[1:] if t[:1] in "+-" else t
    return bool(body) and len(_split_top(body, "+")) == 1 and len(_split_top(body, "-")) == 1


def _named_items(items: list[str]) -> list[tuple[str, tuple[Any, ...]]] | None:
    """"\\alpha=1, \\beta=4" -> [("\\alpha", 1), ("\\beta", 4)] when every item assigns a value to
    a different name; None otherwise ("x=2, x=5" is a list of solutions for one variable)."""
    out = []
    for item in items:
        sides = _split_top(item, "=")
        if len(sides) != 2 or not _LHS_RE.fullmatch(sides[0].strip()) or not sides[1].strip():
            return None
        if sides[1].strip()[0] in "<>":
            return None
        name = re.sub(r"_\{(\w)\}", r"_\1", sides[0].strip())  # x_{1} and x_1 are one name
        out.append((name, parse_structure(sides[1])))
    if len({n for n, _ in out}) != len(out):
        return None
    return out


def _strip_lhs(s: str) -> str:
    """"x=5" -> "5", "f(x)=..." -> "...", "(x,y)=(1,2)" -> "(1,2)", "x\\in[1,2]" -> "[1,2]"."""
    for op in ("=", "\\in"):
        parts = _split_top(s, op)
        if len(parts) == 2 and _LHS_RE.fullmatch(parts[0].strip()) and parts[1].strip():
            if op == "=" and parts[1].strip()[0] in "<>":
                continue
            return parts[1].strip()
    return s


def canon_atom(s: str) -> str:
    """Canonical form of one atom: wrappers and a left-hand side dropped, infinities, exact
    numbers (``math_numeric``), multiple-choice letters, base-n numerals and text normalised."""
    s = _strip_lhs(s.strip())
    while (
        len(s) >= 2
        and ((s[0] == "(" and s[-1] == ")") or (s[0] == "{" and s[-1] == "}"))
        and _wraps_whole(s)
        and len(_split_top(s[1:-1], ",")) == 1
    ):
        s = s[1:-1].strip()
    s = re.sub(r"^\+", "", s)
    if s in ("\\infty", "+\\infty", "\\inf", "infty", "oo"):
        return "\\infty"
    if s in ("-\\infty", "-\\inf", "-oo"):
        return "-\\infty"
    if s in ("\\emptyset", "\\varnothing", "\\{\\}"):
        return "\\emptyset"  # one name for the empty set
    num = parse_number(s)
    if num is not None:
        return render_number(*num)
    m = _MC_RE.fullmatch(s)
    if m:
        return m.group(1)
    m = BASE_RE.fullmatch(s)
    if m and re.search(r"\d", m.group(1)) and 2 <= int(m.group(2)) <= 36:
        return f"{m.group(1)}_{int(m.group(2))}"
    if is_text_answer(s):
        return re.sub(r"\s+", " ", s).lower()
    return s


def render_structure(node: tuple[Any, ...]) -> str:
    """The canonical string of a ``parse_structure`` node (sets and unions sorted, lists in order)."""
    kind = node[0]
    if kind == "atom":
        return str(node[1])
    if kind == "list":
        # written order is kept: a bare list answers an ordered tuple in that order
        # ", " keeps "70, 110" a list when the canonical form is canonicalised again (thousands rule)
        return ", ".join(render_structure(n) for n in node[1])
    if kind == "set":
        if not node[1]:
            return "\\emptyset"
        return "\\{" + ",".join(sorted(render_structure(n) for n in node[1])) + "\\}"
    if kind == "seq":
        return node[1] + ",".join(render_structure(n) for n in node[3]) + node[2]
    if kind == "union":
        return "\\cup".join(sorted(render_structure(n) for n in node[1]))
    if kind == "named":
        # written order is kept: against an unnamed tuple or list the values are compared in order
        return ", ".join(f"{name}={render_structure(v)}" for name, v in node[1])
    if kind == "ambig":
        return str(node[1])
    rows = ["&".join(r) for r in node[1]]
    return "\\begin{pmatrix}" + "\\\\".join(rows) + "\\end{pmatrix}"
