"""Extraction of the final answer from a MATH-style completion (part of the math grader).

What it does: ``extract_answer`` returns the answer a completion ends with:

* the last group of complete ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces, escaped braces
  ignored; ``\\boxed 5``; the inner one of nested boxes) that belong together: boxes separated
  only by whitespace, punctuation, math delimiters, "and" / "or", ``\\quad``, ``\\text{ and }``
  or a variable's ``x =`` are one list answer, ``"-2, 1"``; a value boxed more than once counts
  once; boxes each named by a different variable (``x=\\boxed{1}, y=\\boxed{2}``) keep their
  names. A box followed by prose starts no group with the next one, so an intermediate box is
  never joined;
* unless an explicit final-answer phrase with a value comes after that group ("The final answer
  is $X$", "Final Answer: X", "Answer: X"; not "the answer is", which prose uses): then its value;
* with no box, the last "final answer is" / "the answer is" / "answer:" phrase whose value is not
  prose ("the answer is correct" is skipped): its ``$...$`` (several joined the way boxes are),
  else up to the end of the sentence, "I hope it is correct" dropped and a sentence cut to what
  follows its last "is" / "are" / "equals" ("The total is 12 apples" -> "12 apples").

``gold_answers`` reads a gold target written as several boxes under the ``gold_boxes``
convention (``all``: the joined list, ``any``: each box an alternative). ``braced_group`` and
``boxed_contents`` are shared with the canonical form, which unwraps a whole-answer box the same way.

What it does not do: it does not normalise the answer (``math_canonical``) or compare it
(``math_equiv``); a truncated box is skipped, not repaired; it never raises on odd text.
"""

from __future__ import annotations

import re

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_BRACE_TOKEN = re.compile(r"\\[\s\S]|[{}]")  # an escape pair (\{ is no brace) or a brace
_BARE_TOKEN_END = re.compile(r"[$\n]")
_PHRASE_RE = re.compile(r"final answer is|the answer is|final answer:|answer:", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")  # a decimal point is followed by a digit: "3.5." keeps 3.5
_HOPE_RE = re.compile(r"\s*I hope it is correct.*$", re.IGNORECASE | re.DOTALL)
# what may stand between two boxes (or two $...$ values) of one answer: matched token by token
# (anchored at a position, never backtracking over the whole gap)
_SEPARATOR_TOKEN = re.compile(
    r"\s+|[,;.&~]|\$+|\\[\[\]()]|\\\\|\\(?:quad|qquad|[,;:! ])(?![a-zA-Z])"
    r"|\\(?:begin|end)\{(?:aligned|align\*?|gathered|gather\*?|eqnarray\*?)\}"
    r"|\\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:and|or|,)?\s*\}"
    r"|(?:and|or)(?![a-zA-Z])",
    re.IGNORECASE,
)
# a variable's (or a function's) left-hand side right before a box: "x =", "x_1 =", "\theta=", "x &=", "g(x) ="
_LHS_TAIL = re.compile(r"((?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?(?:\([a-zA-Z]\))?)\s*&?=\s*\$?\s*$")
_MAX_VALUE = 4000  # what a phrase's value may span: bounds the work per phrase in a degenerate text
_SPACES = re.compile(r"\s+")
_MAX_GAP = 200  # longer gaps are prose; also bounds the separator scan
# a sentence answer is cut to what follows its last copula: "The total is 12 apples"
_COPULA_RE = re.compile(r"\b(?:is|are|was|were|equals|becomes|be)\b(?:\s+equal\s+to\b)?", re.IGNORECASE)
_MATHY = re.compile(r"[\d\\$]")
_COPULA_START = re.compile(r"\s*(?:is|are|was|were|equals|becomes)\b", re.IGNORECASE)
# "the answer is correct", "I think the answer is right": prose, not a value
_PROSE_VALUES = frozenset(
    "correct right wrong incorrect valid invalid consistent reasonable plausible confirmed verified indeed clear "
    "obvious not that this as above below given still likely probably unchanged same different".split()
)
_LABEL_PREFIX = re.compile(r"[ \t*#>_]*")  # markdown before a label at the start of a line: "**Answer:**"
_VALUE_HINT = re.compile(r"\d|\\[a-zA-Z]|^\(?[A-E]\)?$")
_DISQUALIFYING = frozenset("because since which so from by with when if where as".split())


def braced_group(text: str, start: int) -> tuple[str, int] | None:
    """Content of the ``{...}`` group opening at ``text[start]`` and the index after it."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            i += 2  # an escaped brace (\{ \}) does not open or close a group
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
        i += 1
    return None


def _brace_matches(text: str, start: int) -> dict[int, int]:
    """Opening brace index -> index after its closing brace, for every balanced group from
    ``start`` on (one pass over braces and escapes, escaped braces ignored as in ``braced_group``),
    so that many unclosed boxes cost linear time. ``start`` must not follow a backslash."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE_TOKEN.finditer(text, start):
        ch = m.group(0)
        if ch == "{":
            stack.append(m.start())
        elif ch == "}" and stack:
            closes[stack.pop()] = m.end()
    return closes


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every complete box in ``text``, in order."""
    if "box" not in text:  # most answers and many completions: skip the scan
        return []
    out = []
    closes: dict[int, int] | None = None
    scanned = 0
    n = len(text)
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < n and text[j] == " ":
            j += 1
        if j < n and text[j] == "{":
            if closes is None and scanned <= 2 * n:
                got = braced_group(text, j)
                end = got[1] if got is not None else None
                scanned += (end or n) - j
            else:
                # unclosed or deeply nested boxes: scanning each to its end would be quadratic
                closes = closes if closes is not None else _brace_matches(text, j)
                end = closes.get(j)
            if end is not None:
                out.append((m.start(), end, text[j + 1 : end - 1]))
        elif j > m.end():
            # "\boxed 5": the token runs to the closing $ or the end of the line
            token = _BARE_TOKEN_END.split(text[j:], maxsplit=1)[0]
            if token.strip():
                out.append((m.start(), j + len(token), token.strip()))
    return out


def _answer_boxes(text: str) -> list[tuple[int, int, str]]:
    """The non-empty boxes that hold no other box (``\\boxed{\\boxed{5}}`` answers 5)."""
    boxes = _boxes(text)
    return [b for k, b in enumerate(boxes) if b[2].strip() and (k + 1 == len(boxes) or boxes[k + 1][0] >= b[1])]


def boxed_contents(text: str) -> list[str]:
    """The contents of every complete ``\\boxed{...}`` / ``\\fbox{...}`` (and ``\\boxed 5``) in ``text``, in order."""
    return [content for _, _, content in _boxes(text)]


def _separator_only(gap: str, allow_lhs: bool = False) -> bool:
    """Whether ``gap`` holds nothing but separators (and, with ``allow_lhs``, a trailing ``x =``)."""
    if len(gap) > _MAX_GAP:
        return False
    if allow_lhs:
        m = _LHS_TAIL.search(gap)
        if m is not None:
            gap = gap[: m.start()]
    pos = 0
    while pos < len(gap):
        m = _SEPARATOR_TOKEN.match(gap, pos)
        if m is None or m.end() == pos:
            return False
        pos = m.end()
    return True


def _lhs_before(text: str, start: int) -> str | None:
    """The variable assigned right before position ``start`` ("x" in "$x = \\boxed{2}"), if any."""
    m = _LHS_TAIL.search(text[max(0, start - 40) : start])
    return m.group(1) if m else None


def _dedupe(values: list[str]) -> list[str]:
    """The values of a group, a value given more than once counted once (a final answer boxed
    twice is one answer, and MATH lists each solution once); spacing does not make a new value."""
    seen: set[str] = set()
    out = []
    for v in values:
        key = _SPACES.sub("", v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _join(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(_dedupe(values))


def _last_group(text: str, boxes: list[tuple[int, int, str]]) -> tuple[int, list[str]]:
    """Index of the first box of the last group of boxes that belong together, and its values."""
    first = len(boxes) - 1
    if first == 0:
        return 0, [boxes[0][2].strip()]
    while first > 0 and _separator_only(text[boxes[first - 1][1] : boxes[first][0]], allow_lhs=True):
        first -= 1
    group = boxes[first:]
    values = [b[2].strip() for b in group]
    if len(group) > 1:
        names = [_lhs_before(text, b[0]) for b in group]
        if all(names) and len(set(names)) > 1:
            values = [f"{n}={v}" for n, v in zip(names, values, strict=True)]  # named values: "x=1, y=2"
    return first, values


def gold_answers(target: str, gold_boxes: str = "all") -> list[str]:
    """The readings of a gold target: itself, or, when it is written as several boxes (and nothing
    else but separators), ``all``: their joined list; ``any``: each box (alternatives)."""
    boxes = _answer_boxes(target)
    if len(boxes) < 2:
        return [target]
    first, values = _last_group(target, boxes)
    if first != 0 or not _separator_only(target[: boxes[0][0]], allow_lhs=True) or not _separator_only(target[boxes[-1][1] :]):
        return [target]
    if gold_boxes == "any":
        return _dedupe([b[2].strip() for b in boxes])
    return [_join(values)]


def _math_run(rest: str) -> tuple[str, int] | None:
    """The value of math segments at the start of ``rest`` (``$a$``, ``$$a$$``, ``\\(a\\)``,
    ``\\[a\\]``), several joined as a list when only separators stand between them and the
    sentence ends after them; and the index after the value."""
    values: list[str] = []
    pos = 0
    end_first = 0
    while True:
        got = _math_segment(rest, pos)
        if got is None:
            break
        values.append(got[0].strip())
        pos = got[1]
        if len(values) == 1:
            end_first = pos
        nxt = _next_segment_start(rest, pos)
        if nxt is None or not _separator_only(rest[pos:nxt]):
            break
        pos = nxt
    if not values:
        return None
    tail = rest[pos:]
    cut = _SENTENCE_END.search(tail)
    if len(values) > 1 and not (tail[: cut.start()] if cut else tail).strip(" ,;!*"):
        return _join(values), pos
    return values[0], end_first


def _math_segment(text: str, pos: int) -> tuple[str, int] | None:
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(left, pos):
            end = text.find(right, pos + len(left))
            return (text[pos + len(left) : end], end + len(right)) if end > pos else None
    return None


def _next_segment_start(text: str, pos: int) -> int | None:
    starts = [i for i in (text.find("$", pos), text.find("\\(", pos), text.find("\\[", pos)) if i >= 0]
    return min(starts) if starts else None


def _reduce_sentence(ans: str) -> str:
    """A sentence answer cut to its value: what follows the last "is" / "are" / "equals"."""
    copulas = list(_COPULA_RE.finditer(ans))
    if copulas and not ans[copulas[-1].end() :].strip():
        copulas.pop()  # "Yes, it is": nothing follows the last one
    if copulas:
        ans = ans[copulas[-1].end() :].strip()
    got = _math_run(ans) if ans.startswith(("$", "\\(", "\\[")) else None
    if got is not None and not ans[got[1] :].strip(" .,;!"):
        return got[0]
    return ans.replace("$", "") if ans.count("$") % 2 == 0 else ans


def _phrase_value(text: str, m: re.Match[str]) -> tuple[str, bool] | None:
    """The value a phrase introduces and whether it is math-delimited; None when it has none."""
    rest = text[m.end() : m.end() + _MAX_VALUE].lstrip(" :\t*")
    delimited = rest.startswith(("$", "\\(", "\\["))
    if delimited:
        got = _math_run(rest)
        ans = got[0] if got is not None else None
        if got is not None and _COPULA_START.match(rest, got[1]):
            # "Final Answer: $f(2)$ equals $7$": the math names what the value is, the value follows
            cut = _SENTENCE_END.search(rest, got[1])
            value = _reduce_sentence(_HOPE_RE.sub("", rest[: cut.start()] if cut else rest).strip())
            if _MATHY.search(value):  # not "$5$ is the answer"
                ans = value
    else:
        cut = _SENTENCE_END.search(rest)
        ans = _reduce_sentence(_HOPE_RE.sub("", rest[: cut.start()] if cut else rest).strip().strip("*").strip())
    if ans is None:
        return None
    ans = _HOPE_RE.sub("", ans).strip().rstrip(".").strip().strip("*").strip()
    if not ans:
        return None
    words = ans.split()
    if not delimited and words[0].lower().strip(".,") in _PROSE_VALUES:
        return None  # "the answer is correct"
    return ans, delimited


def _is_label(text: str, start: int) -> bool:
    """Whether the phrase at ``start`` begins its line (a label such as "Answer:", not "our answer:")."""
    line_start = text.rfind("\n", 0, start) + 1
    return _LABEL_PREFIX.fullmatch(text, line_start, start) is not None


def _overrides_box(text: str, m: re.Match[str], value: str, delimited: bool) -> bool:
    """Whether a phrase after the last box is an explicit final answer with a value (so it wins)."""
    phrase = m.group(0).lower()
    if phrase == "the answer is" or (phrase == "answer:" and not _is_label(text, m.start())):
        # "so the answer is $x$", "we may check our answer: $17\cdot 44 = 748$": prose, not a final answer
        return False
    if delimited:
        return True
    words = value.split()
    return (len(words) <= 3 and bool(_VALUE_HINT.search(value))
            and not _DISQUALIFYING & {w.lower() for w in words})


def extract_answer(text: str) -> str | None:
    """The final answer in ``text`` (module docstring): the last group of boxes, unless an explicit
    final-answer phrase with a value follows it; else the last phrase with a value."""
    if not text:
        return None
    boxes = _answer_boxes(text)
    after = boxes[-1][1] if boxes else 0
    for m in reversed(list(_PHRASE_RE.finditer(text, after))):
        got = _phrase_value(text, m)
        if got is not None and (not boxes or _overrides_box(text, m, *got)):
            return got[0]
    if boxes:
        return _join(_last_group(text, boxes)[1])
    return None
