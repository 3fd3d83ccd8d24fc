"""String rewrites of a MATH answer before it is parsed: ``\\text``-like wrappers, units, degree,
percent and money signs, ellipses, ``\\frac``/``\\sqrt`` shorthands, spaces between digits, control
spaces and MATLAB-style matrices.

``math_canonical`` applies these in order (``pre_normalise`` first) and then parses the result into a
structure. A rule here may only delete what cannot be mathematics: unit text after a value at the
end of an item, never an upright letter (``\\mathrm{e}``), a name in the middle of an expression
or an ellipsis. What this module does not do: no parsing into structures, no number reading beyond
what a rule needs to recognise a unit, no sympy and no comparison; a percent under the "fraction"
convention is left as ``\\%`` for ``math_canonical`` to read.
"""

from __future__ import annotations

import re

from bonbench.plugins.graders.math_extract import boxed_contents, braced_group

# font and text wrappers whose content is kept as written (\mathbb is not one: \mathbb{R} is a set)
_TEXT_CMDS = re.compile(
    r"\\(?:mbox|textrm|textbf|textit|textnormal|textsf|texttt|textsl|textup|emph|mathrm|mathbf|mathit|mathsf"
    r"|mathtt|mathnormal|mathcal|mathscr|mathfrak|boldsymbol|bm|text)\s*\{"
)
# \operatorname{...} names an operator: never unit text (unwrapped after units are dropped)
_OPERATORNAME = re.compile(r"\\operatorname\*?\s*\{")
_UNIT_TEXT = re.compile(r"^[A-Za-z][A-Za-z\s.'\-]*$")  # a line break inside a unit ("square\nunits") is a space
# upright e, i, d are Euler's number, the imaginary unit and a differential: never a unit
_MATH_LETTERS = frozenset("eid")
# a one-letter unit ends its item: nothing but "^2"/"^3" and a separator follow
_UNIT_BEFORE = re.compile(r"[\w})\]!'.]")
_UNIT_AFTER = re.compile(r"(\s*\^\s*\{?[23]\}?)?\s*(?:$|[,;)\]&]|\\\\|\\\}|\\text\{)")
# a function name written upright is that function: \operatorname{sin} is \sin; \mathrm{sin} and
# \text{sin} only when an argument follows ("5\text{ min}" and "5\mathrm{sec}" are units)
_FUNC_NAMES = (
    "arcsin|arccos|arctan|sinh|cosh|tanh|coth|sin|cos|tan|cot|sec|csc|log|ln|lg|exp|gcd|det|deg|dim|max|min"
    "|sup|inf|lim|ker|arg"
)
_FUNC_NAME = re.compile(
    rf"\\operatorname\*?\s*\{{\s*({_FUNC_NAMES})\s*\}}|\\(?:mathrm|textrm|text)\s*\{{({_FUNC_NAMES})\}}(?=\s*[(\\{{\w^])"
)
_ELLIPSIS = re.compile(r"\.(?:\s*\.){2,}|…|\\(?:ldots|cdots|dots[cbmio]?)(?![a-zA-Z])")
_PERCENT_WORD = re.compile(
    r"\\(?:text|mbox|mathrm|textrm)\s*\{\s*(?:percent|per\s?cent)\s*\}|(?<=[\d\s}])(?:percent|per\s?cent)\b",
    re.IGNORECASE,
)
_THOUSANDS_BANG = re.compile(r"(?<![\d,!])\d{1,3}(?:,\\!\s*\d{3})+(?![\d,])")
# bare trailing unit words after a value and a space: words of 3+ letters, or a known short one ("xy" is a product)
_SHORT_UNITS = frozenset("of in to sq cu cm mm km ft yd mi kg mg gm lb oz hr ml am pm".split())
_UNIT_POWER = re.compile(r"\^\{?[23]\}?$")
_WHOLE_BOX = re.compile(r"\$*\s*\\(?:boxed|fbox)\s*\{.*\}\s*\$*\.?", re.DOTALL)
_BANG_SEP = re.compile(r",\\!\s*")
_DOLLARS = re.compile(r"^\$+|\$+$")
_DELIMS = re.compile(r"^\\\(|\\\)$|^\\\[|\\\]$")
_SIZES = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])\.?")
_DTFRAC = re.compile(r"\\[dt]frac(?![a-zA-Z])")
_THIN_THOUSANDS = re.compile(r"(\d)\\,(?=\d{3})")
_SPACE_CMDS = re.compile(r"(?<!\\)\\[,;:]|\\quad|\\qquad|~|(?<!\\)\\ ")
_MATHBB = re.compile(r"\\mathbb\s*([A-Z])")
_DIGIT = re.compile(r"\d")
_DIGIT_OR_COMMAND = re.compile(r"[\d\\]")
_POWER_AFTER = re.compile(r"\s*\^\s*\{?[23]\}?")
_AND_OR = re.compile(r"(?<=[\d})])\s+(?:and|or)\s+(?=[\d\-\\(])|,\s*(?:and|or)\s+")
_DIGITS_SPACED = re.compile(r"\d\s+\d")
_FRAC_DIGITS = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_DIGIT_BRACE = re.compile(r"\\frac\s*(\d)\s*\{")
_FRAC_BRACE_DIGIT = re.compile(r"\\frac\s*(\{[^{}]*\})\s*(\d)")
_FRAC_BRACE_LETTER = re.compile(r"\\frac\s*(\{[^{}]*\})\s*([a-zA-Z])(?![a-zA-Z])")
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d+|[a-zA-Z](?![a-zA-Z]))")
_SQRT_INDEX_SHORT = re.compile(r"\\sqrt\s*\[([^\[\]{}]*)\]\s*(\d+|[a-zA-Z](?![a-zA-Z]))")
_SPACE = re.compile(r"\s")
_SPACES = re.compile(r"\s+")
_CONTROL_SPACE = re.compile(r"(\\[a-zA-Z]+\s+(?=[a-zA-Z]))")
_TEXT_ANSWER = re.compile(r"[A-Za-z][A-Za-z .,'\-]*")
_TWO_LETTERS = re.compile(r"[A-Za-z]{2,}")
_TEXT_OPEN = re.compile(r"\\text\{")
# "4 4/9" is a mixed number; "1 000 000" a thousands grouping; any other space between digits stays
_MIXED_SPACE = re.compile(r"(?<![\d.}/_^])(\d+)\s+(\d+)/(\d+)(?![\d./])")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:[ ]\d{3})+(?:\.\d+)?(?![\d.]|\s+\d)")
# spacing between two numbers; one level of disjoint alternatives, so no backtracking blow-up
_SPACING = r"(?:\s|~|\\[,: ]|\\q?quad(?![a-zA-Z]))*"
_APART = re.compile(r"(?<=\d)" + _SPACING + r"\\;(?:\s|~|\\[,;: ]|\\q?quad(?![a-zA-Z]))*(?=\d)")
# a bare \circ is a degree sign only right after a number: "f \circ g" is a composition
_DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|(?<=\d)\s*\\circ(?![a-zA-Z])|\\degree(?![a-zA-Z])|°")
_PERCENT = re.compile(r"\\%|%")
_MONEY = re.compile(r"\\\$|\$")
# the sign followed by a number: it leaves "\;" (apart) instead of nothing
_BEFORE_NUMBER = {p: re.compile(p.pattern + r"(?=" + _SPACING + r"\d)") for p in (_DEGREE, _PERCENT, _MONEY)}
_DIGIT_SPACE = re.compile(r"(?<![_^]\d)(?<=\d)\s+(?=\d)")  # "\\log_2 8" is log 8 to base 2
# "1:03 PM", "4:30\\text{ p.m.}": a time of day, not a number with a unit: it becomes its 24-hour
# form "13:03" (so 1:03 AM is not 1:03 PM)
_TIME_OF_DAY = re.compile(
    r"(\d{1,2}):(\d\d)\s*(?:\\text\{\s*([AaPp])\.?\s*[Mm]\.?\s*\}|([AaPp])\.?\s*[Mm]\.?(?![A-Za-z]))"
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
    out: list[tuple[int, int, str]] = []
    if "\\text{" not in s:
        return out
    for m in _TEXT_OPEN.finditer(s):
        got = braced_group(s, m.end() - 1)
        if got is not None:
            out.append((m.start(), got[1], got[0]))
    return out


def _is_unit_group(s: str, start: int, end: int, content: str) -> bool:
    """Whether the ``\\text{content}`` at s[start:end] is a unit: unit-like words right after a value
    (``5\\text{ cm}^2``, ``3\\text{ m}, 4\\text{ m}``), never inside an expression (``\\frac{1}{\\text{e}}``)
    nor a name applied to an argument (``2\\mathrm{Re}(z)``). A single letter only when spaced from
    its value, at the end of its item, and never e, i or d (``2\\mathrm{i}`` is 2i)."""
    c = content.strip()
    before = s[:start].rstrip()
    if not _UNIT_TEXT.match(c) or not before or not _UNIT_BEFORE.match(before[-1]):
        return False
    if len(c) == 1:
        spaced = content[:1].isspace() or s[start - 1 : start].isspace()
        return spaced and c not in _MATH_LETTERS and bool(_UNIT_AFTER.match(s, end))
    return not re.match(r"\s*[({]", s[end:])


def _24_hour(m: re.Match[str]) -> str:
    pm = (m.group(3) or m.group(4)).lower() == "p"
    return f"{int(m.group(1)) % 12 + (12 if pm else 0)}:{m.group(2)}"


def drop_units(s: str) -> str:
    """Remove unit words (\\text{ cm}, trailing "inches") when something else remains."""
    s = _TIME_OF_DAY.sub(_24_hour, s)
    for start, end, content in reversed(text_groups(s)):
        c = content.strip()
        rest = (s[:start] + s[end:]).strip()
        if c.lower() in ("and", "or") and rest:
            s = s[:start] + "," + s[end:]
        elif rest and _DIGIT_OR_COMMAND.search(rest) and _is_unit_group(s, start, end, content):
            tail = _POWER_AFTER.match(s, end)  # \text{ cm}^2
            s = s[:start] + s[tail.end() if tail else end :]
    if "\\" in s:
        s = unwrap_command(unwrap_command(s, _TEXT_OPEN), _OPERATORNAME)
    # bare trailing unit words after a value: "5 inches", "12 sq units"
    cut = _trailing_words_start(s) if _DIGIT.search(s) else None
    if cut is not None and _words_are_units(s[:cut], s[cut:]):
        s = s[:cut]
    if "and" in s or "or" in s:
        s = _AND_OR.sub(",", s)
    return s.strip()


def _trailing_words_start(s: str) -> int | None:
    """Where a run of trailing words starts ("5 sq. units^2": before " sq"): words of 3+ letters or
    known abbreviations, each with an optional period, the first after a space that follows a
    value character (a letter, digit, "}", ")", "]"). Scanned backwards in Python, in linear time:
    a regex anchored at the end would be retried from every position, and a degenerate completion
    ("value of value of ... =") once backtracked for hours."""
    power = _UNIT_POWER.search(s)
    body = s[: power.start()] if power else s
    j, cut = len(body.rstrip()), None
    while j:
        e = j - 1 if body[j - 1] == "." else j
        k = e
        while k and body[k - 1].isascii() and body[k - 1].isalpha():
            k -= 1
        word = body[k:e]
        if not word or not (len(word) >= 3 or word.lower() in _SHORT_UNITS):
            break
        j = k
        while j and body[j - 1].isspace():
            j -= 1
        if j < k and j and (body[j - 1].isalnum() or body[j - 1] in "_})]"):
            cut = j
    return cut


def _words_are_units(value: str, words: str) -> bool:
    """Whether trailing words are units. Not after a command other than \\pi (``\\triangle ABC``: its
    argument), not an upper-case name (``ABC``) unless a known abbreviation (``PM``); after a value
    with a variable in it ("x^2+2 xyz") only words of 4+ letters or known abbreviations: a 3-letter
    word there may be a product of variables."""
    ends = re.search(r"\\[a-zA-Z]+\s*$", value)
    if ends and ends.group().strip() != "\\pi":
        return False
    found = re.findall(r"[a-zA-Z]+", words.split("^")[0])
    if any(w.isupper() and len(w) > 1 and w.lower() not in _SHORT_UNITS for w in found):
        return False
    if not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+(?:\{[a-zA-Z*]+\})?", "", value)):
        return True
    return all(len(w) >= 4 or w.lower() in _SHORT_UNITS for w in found)


def space_separated_digits(s: str) -> str:
    """Spaces between digits, before spaces are dropped: ``4 4/9`` is the mixed number 40/9,
    ``1 000 000`` a thousands grouping (all groups after the first exactly three digits), and any
    other space between two digits is kept as ``\\;`` (``2 3`` is neither 23 nor the list 2, 3: it
    matches only itself; ``math_equiv`` compares such an atom as written)."""
    if "\x01" in s:
        s = s.replace("\x01", "\\;")
    if not _DIGITS_SPACED.search(s):
        return s
    s = _MIXED_SPACE.sub(r"\1\\frac{\2}{\3}", s)
    s = _SPACE_THOUSANDS.sub(lambda m: m.group().replace(" ", ""), s)
    return _DIGIT_SPACE.sub(r"\\;", s)


def fix_shorthands(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\sqrt2 -> \\sqrt{2}, \\sqrt[3]8 -> \\sqrt[3]{8} (before spaces are dropped)."""
    if "\\frac" in s:
        s = _FRAC_DIGITS.sub(r"\\frac{\1}{\2}", s)
        s = _FRAC_DIGIT_BRACE.sub(r"\\frac{\1}{", s)
        s = _FRAC_BRACE_DIGIT.sub(r"\\frac\1{\2}", s)
        s = _FRAC_BRACE_LETTER.sub(r"\\frac\1{\2}", s)
    if "\\sqrt" in s:
        s = _SQRT_SHORT.sub(r"\\sqrt{\1}", s)
        # \sqrt[3]8 -> \sqrt[3]{8}: the same shorthand with an index
        s = _SQRT_INDEX_SHORT.sub(r"\\sqrt[\1]{\2}", s)
    return s


def collapse_control_spaces(s: str) -> str:
    # "\pi r" must stay "\pi r" (not "\pir"); every other space is insignificant in LaTeX math
    if not _SPACE.search(s):
        return s
    parts = _CONTROL_SPACE.split(s)
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 1:
            out.append(p.rstrip() + "\x00")
        else:
            out.append(_SPACES.sub("", p))
    return "".join(out).replace("\x00", " ")


def pre_normalise(s: str, keep_percent: bool = False, decimal_comma: bool = False) -> str:
    """The first rewrites: a whole-answer box, delimiters, spacing commands, ellipses (one token,
    ``\\ldots``), thousands marks, degrees, percent (dropped, or kept as ``\\%`` with
    ``keep_percent``), money and the wrappers (``\\mathrm``... become ``\\text``; an upright function
    name becomes its command). ``decimal_comma``: a comma between digits is a decimal mark and a
    semicolon separates list items. Each rule runs only when its trigger character is present."""
    s = s.strip()
    if "box" in s:
        boxed = boxed_contents(s)
        if boxed and _WHOLE_BOX.fullmatch(s):
            s = boxed[-1]
    if "\\!" in s:
        # "25,\\!000" (MATH's thousands notation, also "1,\\! 000") is never a list, unlike a bare
        # "7,251"; a run with a group that is not 3 digits ("41,\\!22,\\!93,\\!024") is left alone
        s = _THOUSANDS_BANG.sub(lambda m: _BANG_SEP.sub("", m.group()), s).replace("\\!", "")
    if "$" in s:
        s = _DOLLARS.sub("", s.strip())
    if "\\" in s:
        s = _DELIMS.sub("", s.replace("\\displaystyle", "").strip())
    if "." in s or "\\" in s or "…" in s:
        # an ellipsis is content ("1, 2, 3, ..." is not "1, 2, 3"): one token, before a final period goes
        s = _ELLIPSIS.sub(r"\\ldots ", s)
    s = s.strip().rstrip(".;").strip()
    if "\\" in s:
        s = _DTFRAC.sub(r"\\frac", _SIZES.sub("", s))
    if decimal_comma:
        s = _decimal_commas(s)
    s = s.replace("{,}", ",")
    # degrees, percent, money: dropped (see docs/math-grading.md for the convention); a sign dropped
    # before a number leaves "\;", so "45^\circ\;135^\circ" is not read as 45135
    if "circ" in s or "degree" in s or "°" in s:
        s = _drop_sign(_DEGREE, s)
    if "cent" in s or "CENT" in s or "Cent" in s:
        s = _PERCENT_WORD.sub(r"\\%", s)
    if "%" in s:
        s = _PERCENT.sub(r"\\%", s) if keep_percent else _drop_sign(_PERCENT, s)
    if "$" in s:
        s = _drop_sign(_MONEY, s)
    if "\\" in s:
        s = _THIN_THOUSANDS.sub(r"\1", s)  # 1\,000
        # "2\;3" (a canonical form: digits kept apart) stays apart when read again; \x01 until spaces go
        s = _APART.sub("\x01", s)
    if "\\" in s or "~" in s:
        s = _SPACE_CMDS.sub(" ", s)
    if "\\" in s:
        s = _FUNC_NAME.sub(lambda m: "\\" + (m.group(1) or m.group(2)) + " ", s)
        s = _MATHBB.sub(r"\\mathbb{\1}", s)
        s = _OPERATORNAME.sub(r"\\operatorname{", _TEXT_CMDS.sub(r"\\text{", s))
    return s.strip()


def _drop_sign(sign: re.Pattern[str], s: str) -> str:
    if not sign.search(s):
        return s
    return sign.sub("", _BEFORE_NUMBER[sign].sub(r"\\;", s))


def _decimal_commas(s: str) -> str:
    """The decimal-comma convention: "3,5" and "3{,}5" are 3.5; a semicolon outside square brackets
    (where it separates matrix rows) becomes the list comma, followed by a space."""
    s = re.sub(r"(?<=\d)(?:\{,\}|,)(?=\d)", ".", s)
    if ";" not in s:
        return s
    out, square = [], 0
    for i, ch in enumerate(s):
        square += (ch == "[") - (ch == "]")
        # "\;" is a space, not a separator
        out.append(", " if ch == ";" and square <= 0 and s[i - 1 : i] != "\\" else ch)
    return "".join(out)


def is_text_answer(s: str) -> bool:
    return "," not in s and bool(_TEXT_ANSWER.fullmatch(s)) and bool(_TWO_LETTERS.search(s))


def matlab_spaces(s: str) -> str:
    """"[1 2; 3 4]" -> "[1,2;3,4]" (before spaces are dropped); only plain numeric entries."""
    m = re.fullmatch(r"\[([^\[\],]*;[^\[\],]*)\]", s.strip())
    if not m:
        return s
    rows = [r.split() for r in m.group(1).split(";") if r.strip()]
    if not all(re.fullmatch(r"[+-]?\d+(?:\.\d+)?(?:/\d+)?", t) for r in rows for t in r):
        return s
    return "[" + ";".join(",".join(r) for r in rows) + "]"
