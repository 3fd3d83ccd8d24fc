"""String rewrites of a MATH answer before it is parsed: ``\\text``-like wrappers, units, degree,
percent and money signs, ``\\frac``/``\\sqrt`` shorthands, control spaces and MATLAB-style matrices.

``math_canonical`` applies these in order (``pre_normalise`` first) and then parses the result into a
structure. What this module does not do: no parsing into structures, no number reading beyond
what a rule needs to recognise a unit, no sympy and no comparison.
"""

from __future__ import annotations

import re

from bonbench.plugins.graders.math_extract import boxed_contents, braced_group

_TEXT_CMDS = re.compile(r"\\(?:mbox|textrm|textbf|textit|textnormal|mathrm|mathbf|mathit|mathsf|operatorname|text)\s*\{")
_UNIT_TEXT = re.compile(r"^[A-Za-z][A-Za-z .'\-]*$")
# "1:03 PM", "4:30\\text{ p.m.}": a time of day, not a number with a unit: it becomes its 24-hour
# form "13:03" (so 1:03 AM is not 1:03 PM)
_TIME_OF_DAY = re.compile(
    r"(\d{1,2}):(\d\d)\s*(?:\\text\{\s*([AaPp])\.?\s*[Mm]\.?\s*\}|([AaPp])\.?\s*[Mm]\.?(?![A-Za-z]))"
)
# bare trailing unit words after a number or a closed group: "5 inches", "12 sq units". A space must
# come first, and a word is 3+ letters, a two-letter unit or "of": "6xy" and "6 xy" are
# products of variables, not units. Each word ends at \b: without it "valuevalue" splits into pieces in
# exponentially many ways, and a degenerate completion ("value of value of ... =") backtracked for
# hours before the $ failed
_BARE_UNITS = re.compile(
    r"(?<=\S)\s+(?:(?:[a-zA-Z]{3,}|cm|mm|km|ft|in|yd|mi|kg|mg|ml|hr|sq|lb|oz|of)\b\.?\s*)+(?:\^\{?[23]\}?)?$"
)


def unwrap_command(s: str, cmd_re: re.Pattern[str], keep: bool = True) -> str:
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


def text_groups(s: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each \\text{...} group."""
    out = []
    for m in re.finditer(r"\\text\{", s):
        got = braced_group(s, m.end() - 1)
        if got is not None:
            out.append((m.start(), got[1], got[0]))
    return out


def _24_hour(m: re.Match[str]) -> str:
    pm = (m.group(3) or m.group(4)).lower() == "p"
    return f"{int(m.group(1)) % 12 + (12 if pm else 0)}:{m.group(2)}"


def drop_units(s: str) -> str:
    """Remove unit words (\\text{ cm}, trailing "inches") when something else remains."""
    s = _TIME_OF_DAY.sub(_24_hour, s)
    groups = text_groups(s)
    for start, end, content in reversed(groups):
        c = content.strip()
        rest = (s[:start] + s[end:]).strip()
        if c.lower() in ("and", "or") and rest:
            s = s[:start] + "," + s[end:]
        elif _UNIT_TEXT.match(c) and rest and re.search(r"[\d\\]", rest):
            tail = re.match(r"\s*\^\s*\{?[23]\}?", s[end:])  # \text{ cm}^2
            s = s[:start] + s[end + (tail.end() if tail else 0) :]
    s = unwrap_command(s, re.compile(r"\\text\{"))
    s = _BARE_UNITS.sub("", s) if re.search(r"\d", s) else s
    s = re.sub(r"(?<=[\d})])\s+(?:and|or)\s+(?=[\d\-\\(])", ",", s)
    return s.strip()


def fix_shorthands(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\sqrt2 -> \\sqrt{2} (before spaces are dropped)."""
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*([a-zA-Z])(?![a-zA-Z])", r"\\frac\1{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+|[a-zA-Z](?![a-zA-Z]))", r"\\sqrt{\1}", s)
    return s


def collapse_control_spaces(s: str) -> str:
    # "\pi r" must stay "\pi r" (not "\pir"); every other space is insignificant in LaTeX math
    parts = re.split(r"(\\[a-zA-Z]+\s+(?=[a-zA-Z]))", s)
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 1:
            out.append(p.rstrip() + "\x00")
        else:
            out.append(re.sub(r"\s+", "", p))
    return "".join(out).replace("\x00", " ")


def pre_normalise(s: str) -> str:
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


def is_text_answer(s: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z .,'\-]*", s)) and bool(re.search(r"[A-Za-z]{2,}", s)) and "," not in s


def matlab_spaces(s: str) -> str:
    """"[1 2; 3 4]" -> "[1,2;3,4]" (before spaces are dropped); only plain numeric entries."""
    m = re.fullmatch(r"\[([^\[\],]*;[^\[\],]*)\]", s.strip())
    if not m:
        return s
    rows = [r.split() for r in m.group(1).split(";") if r.strip()]
    if not all(re.fullmatch(r"[+-]?\d+(?:\.\d+)?(?:/\d+)?", t) for r in rows for t in r):
        return s
    return "[" + ";".join(",".join(r) for r in rows) + "]"
