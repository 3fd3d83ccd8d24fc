"""Canonical form of a MATH answer, for maj@k clustering and as the input of equivalence.

What it does: ``canonical_answer`` rewrites an answer with string rules only: wrappers, units,
degrees, percent, money, thousands separators, ``\\frac``/``\\sqrt`` shorthands, equation
left-hand sides and spacing are removed or normalised; the answer is parsed into a structure
(``parse_structure``: matrix, union, set, one-variable inequality as an interval, tuple / interval, named
values, list, atom; ``\\pm`` items become their two solutions) and rendered back (``render_structure``);
atoms are normalised by ``canon_atom`` (exact numbers via ``math_numeric``, multiple-choice
letters, base-n numerals, text). ``canonical_answer`` is idempotent.

What it does not do: no sympy and no comparison: two equivalent answers usually, not always,
share a canonical string (``math_equiv`` decides). It does not read the problem.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from bonbench.plugins.graders.math_extract import braced_group, boxed_contents
from bonbench.plugins.graders.math_numeric import parse_number, render_number


_TEXT_CMDS = re.compile(r"\\(?:mbox|textrm|textbf|textit|textnormal|mathrm|mathbf|mathit|mathsf|operatorname|text)\s*\{")
_UNIT_TEXT = re.compile(r"^[A-Za-z][A-Za-z .'\-]*$")
BASE_RE = re.compile(r"([0-9A-Z]+)_\{?\(?(\d{1,2})\)?\}?")
_MC_RE = re.compile(r"\(?([A-E])\)?")
_LHS_RE = re.compile(
    r"(?:[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+|[a-zA-Z]\([a-z]\)|\((?:[a-zA-Z](?:_\{?\w+\}?)?,)+[a-zA-Z](?:_\{?\w+\}?)?\))"
)


def _unwrap_command(s: str, cmd_re: re.Pattern[str], keep: bool = True) -> str:
    """Replace ``\\cmd{X}`` by ``X`` (keep) for every match, honouring nested braces."""
    out = []
    i = 0
    while True:
        m = cmd_re.search(s, i)
        if m is None:
            out.append(s[i:])
            return "".join(out)
        got = braced_group(s, m.end() - 1)
        if got is None:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i : m.start()])
        if keep:
            out.append(got[0])
        i = got[1]


def _text_groups(s: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each \\text{...} group."""
    out = []
    for m in re.finditer(r"\\text\{", s):
        got = braced_group(s, m.end() - 1)
        if got is not None:
            out.append((m.start(), got[1], got[0]))
    return out


def _drop_units(s: str) -> str:
    """Remove unit words (\\text{ cm}, trailing "inches") when something else remains."""
    groups = _text_groups(s)
    for start, end, content in reversed(groups):
        c = content.strip()
        rest = (s[:start] + s[end:]).strip()
        if c.lower() in ("and", "or") and rest:
            s = s[:start] + "," + s[end:]
        elif _UNIT_TEXT.match(c) and rest and re.search(r"[\d\\]", rest):
            tail = re.match(r"\s*\^\s*\{?[23]\}?", s[end:])  # \text{ cm}^2
            s = s[:start] + s[end + (tail.end() if tail else 0) :]
    s = _unwrap_command(s, re.compile(r"\\text\{"))
    # bare trailing unit words after a number or a closed group: "5 inches", "12 sq units"
    # each word ends at \b: without it "valuevalue" splits into pieces in exponentially many ways, and a
    # degenerate completion ("value of value of ... =") backtracked for hours before the $ failed
    s = re.sub(r"(?<=[\d})\s])\s*(?:[a-zA-Z]{2,}\b\.?\s*)+(?:\^\{?[23]\}?)?$", "", s) if re.search(r"\d", s) else s
    s = re.sub(r"(?<=[\d})])\s+(?:and|or)\s+(?=[\d\-\\(])", ",", s)
    return s.strip()


def _fix_shorthands(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\sqrt2 -> \\sqrt{2} (before spaces are dropped)."""
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*([a-zA-Z])(?![a-zA-Z])", r"\\frac\1{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+|[a-zA-Z](?![a-zA-Z]))", r"\\sqrt{\1}", s)
    return s


def _collapse_control_spaces(s: str) -> str:
    # "\pi r" must stay "\pi r" (not "\pir"); every other space is insignificant in LaTeX math
    parts = re.split(r"(\\[a-zA-Z]+\s+(?=[a-zA-Z]))", s)
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 1:
            out.append(p.rstrip() + "\x00")
        else:
            out.append(re.sub(r"\s+", "", p))
    return "".join(out).replace("\x00", " ")


def _pre_normalise(s: str) -> str:
    s = s.strip()
    boxed = boxed_contents(s)
    if boxed and re.fullmatch(r"\$*\s*\\(?:boxed|fbox)\s*\{.*\}\s*\$*\.?", s, flags=re.DOTALL):
        s = boxed[-1]
    # "25,\\!000" (MATH's thousands notation) is never a list, unlike a bare "7,251"; a run with a
    # group that is not 3 digits ("41,\\!22,\\!93,\\!024") is left alone
    s = re.sub(
        r"(?<![\d,!])\d{1,3}(?:,\\!\d{3})+(?![\d,])", lambda m: m.group().replace(",\\!", ""), s
    )
    s = s.replace("\\displaystyle", "").replace("\\!", "")
    s = re.sub(r"^\$+|\$+$", "", s.strip())
    s = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", s.strip())
    s = s.strip().rstrip(".;").strip()
    s = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])\.?", "", s)
    s = re.sub(r"\\[dt]frac(?![a-zA-Z])", r"\\frac", s)
    s = s.replace("{,}", ",")
    s = re.sub(r"(\d)\\,(?=\d{3})", r"\1", s)  # 1\,000
    s = re.sub(r"(?<!\\)\\[,;:]|\\quad|\\qquad|~|(?<!\\)\\ ", " ", s)
    # degrees, percent, money: dropped (see docs/math-grading.md for the convention)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree|°", "", s)
    s = re.sub(r"\\%|%", "", s)
    s = re.sub(r"\\\$|\$", "", s)
    s = _TEXT_CMDS.sub(r"\\text{", s)
    return s.strip()


def _is_text_answer(s: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z .,'\-]*", s)) and bool(re.search(r"[A-Za-z]{2,}", s)) and "," not in s


def canonical_answer(ans: str) -> str:
    """A normal form of ``ans`` for clustering (maj@k) and as the input of ``is_equiv``."""
    s = _pre_normalise(str(ans))
    groups = _text_groups(s)
    if len(groups) == 1 and groups[0][0] == 0 and groups[0][1] == len(s):
        s = groups[0][2].strip().rstrip(".").strip()  # the whole answer is \text{...}
    if _is_text_answer(s):
        words = re.sub(r"\s+", " ", s).strip().rstrip(".").lower()
        if not re.fullmatch(r"[a-z]", words):
            return words
    if _REL_RE.search(s):
        # "x < -1 or x > 2" is a union of intervals (before "\text{ or }" becomes a list comma)
        s = re.sub(r"\\text\{\s*or\s*\}|\s+or\s+|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])", r"\\cup ", s)
    s = _drop_units(s)
    s = _fix_shorthands(s)
    m = re.fullmatch(r"\+?(-?\d{1,3}(?:,\d{3})+)(\.\d+)?", s.strip())
    if m:
        if m.group(2) or ",0" in m.group(1):
            # "1,000", "2,500.5": a group with a leading zero or a decimal part is not a list item,
            # so the commas are thousands separators
            s = s.replace(",", "")
        else:
            # "7,251", "70,110": either the number 7251 or the list 7, 251 (see _readings); "{,}"
            # marks it so that parse_structure can tell it from a list, whose canonical form has ", "
            return m.group(1).replace(",", "{,}")
    s = _matlab_spaces(s)
    s = _collapse_control_spaces(s)
    node = parse_structure(s)
    if node[0] == "atom" and len(_expand_pm([node[1]])) == 2:
        # a whole answer "\pm\sqrt{2}" is the list of its two solutions
        node = ("list", [parse_structure(v) for v in _expand_pm([node[1]])])
    return render_structure(node)


def _matlab_spaces(s: str) -> str:
    """"[1 2; 3 4]" -> "[1,2;3,4]" (before spaces are dropped); only plain numeric entries."""
    m = re.fullmatch(r"\[([^\[\],]*;[^\[\],]*)\]", s.strip())
    if not m:
        return s
    rows = [r.split() for r in m.group(1).split(";") if r.strip()]
    if not all(re.fullmatch(r"[+-]?\d+(?:\.\d+)?(?:/\d+)?", t) for r in rows for t in r):
        return s
    return "[" + ";".join(",".join(r) for r in rows) + "]"


# structure: ("atom", s) | ("list", [..]) | ("set", [..]) | ("seq", open, close, [..]) |
#            ("union", [..]) | ("matrix", [[..], ..]) | ("named", [(name, node), ..]) |
#            ("ambig", "7{,}251")  -- a number with thousands separators or a bare list
_AMBIG_RE = re.compile(r"-?\d{1,3}(?:\{,\}\d{3})+")
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
    m = re.fullmatch(r"\\begin\{[pbvBV]?matrix\}(.*)\\end\{[pbvBV]?matrix\}", s, flags=re.DOTALL)
    if m:
        rows = [r for r in m.group(1).split("\\\\") if r.strip()]
        return ("matrix", [[canon_atom(c) for c in r.split("&")] for r in rows])
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


def _inequality_interval(s: str) -> tuple[Any, ...] | None:
    """``a < x \\le b``, ``x \\ge a``, ``a < x``, ``b > x > a`` as an interval node; None otherwise
    (two variables, a relation chain that changes direction, a bound that is a variable)."""
    ops = _REL_RE.findall(s)
    if not 1 <= len(ops) <= 2:
        return None
    terms = [t.strip() for t in _REL_RE.split(s)]
    if any(not t for t in terms):
        return None
    less = [op in ("<", "<=", "≤") or op.startswith(("\\l")) for op in ops]
    strict = [op in ("<", ">", "\\lt", "\\gt") for op in ops]
    is_var = [bool(_INEQ_VAR_RE.fullmatch(t)) for t in terms]
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
    num = parse_number(s)
    if num is not None:
        return render_number(*num)
    m = _MC_RE.fullmatch(s)
    if m:
        return m.group(1)
    m = BASE_RE.fullmatch(s)
    if m and re.search(r"\d", m.group(1)) and 2 <= int(m.group(2)) <= 36:
        return f"{m.group(1)}_{int(m.group(2))}"
    if _is_text_answer(s):
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
