"""Near misses of MATH gold answers, for the false-positive hunt (tests/test_math_false_positives.py).

What it does: ``near_misses`` makes deterministic small edits of a gold answer (a sign flipped, an
operator swapped, a digit changed, dropped, doubled or appended, a variable renamed, an item
multiplied by pi or x, pi / a square root / parentheses dropped, AM and PM or odd and even swapped,
a term added or dropped, a bracket flipped, an element dropped, repeated or swapped, a fraction or
an exponent changed, a function swapped, a relation changed, a letter choice changed, a decimal
point moved).

What it does not do: it does not decide whether an edit changes the value (many do not: the sign of
0, a term that is 0, two items of an unordered list swapped): ``near_miss_oracle`` decides that.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable, Iterator

_ITEM_START = re.compile(r"(?:^|(?<=[,(\[={&])|(?<=\\\{))\s*")
_BINOP = re.compile(r"(?<=[\w})\]!])\s*([+-])\s*(?=[\w\\({.])")
_FRAC = re.compile(r"\\[dt]?frac\s*(?=\{)")
_FUNC_SWAP = {"\\sin": "\\cos", "\\cos": "\\sin", "\\tan": "\\cot", "\\cot": "\\tan", "\\sec": "\\csc", "\\csc": "\\sec"}
_REL_SWAP = {"<": "\\le", ">": "\\ge", "\\le": "<", "\\ge": ">", "\\leq": ">", "\\geq": "<", "\\lt": "\\gt", "\\gt": "\\lt"}


def _group_end(s: str, i: int) -> int:
    """Index after the balanced {...} group opening at s[i] (len(s) when it never closes)."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{" and s[j - 1 : j] != "\\":
            depth += 1
        elif s[j] == "}" and s[j - 1 : j] != "\\":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def _depths(s: str) -> list[int]:
    """Bracket depth ((, [, {, \\{) before each character."""
    out, depth = [], 0
    for ch in s:
        if ch in ")]}":
            depth -= 1
        out.append(depth)
        if ch in "([{":
            depth += 1
    return out


def _items(s: str) -> tuple[int, int, list[tuple[int, int]]] | None:
    """Spans of the comma-separated items of the outermost list: inside a wrapping bracket pair or
    at the top level; None when there is no comma."""
    body_lo, body_hi = 0, len(s)
    m = re.fullmatch(r"(\\\{|[(\[])(.*)(\\\}|[)\]])", s, flags=re.DOTALL)
    if m and min(_depths(s)[len(m.group(1)) : len(s) - len(m.group(3))] or [0]) >= 1:
        body_lo, body_hi = len(m.group(1)), len(s) - len(m.group(3))
    depth = _depths(s)
    base = depth[body_lo] if body_lo < len(s) else 0
    cuts = [i for i in range(body_lo, body_hi) if s[i] == "," and depth[i] == base and s[i - 1 : i] not in "{\\"]
    if not cuts:
        return None
    bounds = [body_lo, *[c + 1 for c in cuts]]
    ends = [*cuts, body_hi]
    return body_lo, body_hi, list(zip(bounds, ends, strict=True))


def _sign_flips(s: str, rng: random.Random) -> Iterator[str]:
    starts = sorted({m.end() for m in _ITEM_START.finditer(s)})
    for i in rng.sample(starts, min(2, len(starts))):
        yield s[:i] + s[i + 1 :] if s[i : i + 1] == "-" else s[:i] + "-" + s[i:]


def _op_swaps(s: str, rng: random.Random) -> Iterator[str]:
    ops = [m.start(1) for m in _BINOP.finditer(s)]
    for i in rng.sample(ops, min(2, len(ops))):
        yield s[:i] + ("-" if s[i] == "+" else "+") + s[i + 1 :]
    for m in re.finditer(r"\\cdot|\\times", s):
        yield s[: m.start()] + "/" + s[m.end() :]
        break


def _digit_changes(s: str, rng: random.Random) -> Iterator[str]:
    digits = [i for i, ch in enumerate(s) if ch.isdigit()]
    for i in rng.sample(digits, min(2, len(digits))):
        yield s[:i] + rng.choice([d for d in "0123456789" if d != s[i]]) + s[i + 1 :]


def _digit_edits(s: str, rng: random.Random) -> Iterator[str]:
    digits = [i for i, ch in enumerate(s) if ch.isdigit()]
    if digits:
        i = rng.choice(digits)
        yield s[:i] + s[i + 1 :]  # dropped
        yield s[:i] + s[i] + s[i:]  # doubled
        yield s[: digits[-1] + 1] + "0" + s[digits[-1] + 1 :]  # a zero appended


def _variable_edits(s: str, rng: random.Random) -> Iterator[str]:
    lone = [m.start() for m in re.finditer(r"(?<![\\a-zA-Z])[a-z](?![a-zA-Z])", s)]
    fresh = [v for v in "pqrstuvw" if v not in s]
    if lone and fresh:
        i = rng.choice(lone)
        yield s[:i] + fresh[0] + s[i + 1 :]  # a variable renamed
    got = _items(s)
    lo, hi = rng.choice(got[2] if got else [(0, len(s))])
    unit = re.search(r"\s*\\(?:text|mbox)\s*\{", s[lo:hi])
    end = lo + unit.start() if unit else hi  # the value's end, before a unit word
    for factor in ("\\pi", "x"):
        yield s[:end].rstrip() + factor + s[end:]  # an item multiplied by a constant or a variable


def _constant_drops(s: str, rng: random.Random) -> Iterator[str]:
    for m in re.finditer(r"\\pi(?![a-zA-Z])|(?<![\\a-zA-Z])i(?![a-zA-Z])", s):
        rest = s[: m.start()] + s[m.end() :]
        yield rest if re.search(r"[\dA-Za-z]", rest) else s[: m.start()] + "1" + s[m.end() :]
        break
    for m in re.finditer(r"\\sqrt\s*(?=\{)|\\pm\s*|(?<=[\d}])!", s):
        yield s[: m.start()] + s[m.end() :]  # a square root, a \pm or a factorial dropped
    # a pair of parentheses inside an expression dropped: 2(x+1) -> 2x+1
    for m in re.finditer(r"(?<=[\w}])\(", s):
        depth = 0
        for j in range(m.start(), len(s)):
            depth += 1 if s[j] == "(" else -1 if s[j] == ")" else 0
            if depth == 0:
                yield s[: m.start()] + s[m.start() + 1 : j] + s[j + 1 :]
                break
        break


_WORD_SWAP = {"AM": "PM", "PM": "AM", "odd": "even", "even": "odd", "neither": "even", "yes": "no", "no": "yes"}


def _word_edits(s: str, rng: random.Random) -> Iterator[str]:
    for m in re.finditer(r"\b(?:AM|PM|odd|even|neither|yes|no)\b", s):
        yield s[: m.start()] + _WORD_SWAP[m.group()] + s[m.end() :]
        break


def _upright(s: str, rng: random.Random) -> Iterator[str]:
    """The constants e and i written upright (\\mathrm{e}), then edited: a rewrite must not hide an edit."""
    styled = re.sub(r"(?<![\\a-zA-Z])([ei])(?![a-zA-Z])", r"\\mathrm{\1}", s)
    if styled != s:
        yield styled  # the same value: the oracle says so
        for edit in (_sign_flips, _op_swaps, _digit_changes):
            yield from edit(styled, rng)


def _ellipses(s: str, rng: random.Random) -> Iterator[str]:
    got = _items(s)
    if got:  # a finite list made an infinite sequence
        yield s[: got[1]].rstrip() + ", \\ldots" + s[got[1] :]


def _dots(s: str, rng: random.Random) -> Iterator[str]:
    got = _items(s)
    if got:  # the same, written with three full stops
        yield s[: got[1]].rstrip() + ", ..." + s[got[1] :]


def _term_adds(s: str, rng: random.Random) -> Iterator[str]:
    got = _items(s)
    spans = got[2] if got else [(0, len(s))]
    lo, hi = rng.choice(spans)
    yield s[:hi].rstrip() + "+1" + s[hi:]
    yield s[:hi].rstrip() + "+10^{-25}" + s[hi:]  # tiny against the value, never zero


def _term_drops(s: str, rng: random.Random) -> Iterator[str]:
    got = _items(s)
    spans = got[2] if got else [(0, len(s))]
    lo, hi = rng.choice(spans)
    depth = _depths(s)
    ops = [m.start(1) for m in _BINOP.finditer(s, lo, hi) if depth[m.start(1)] == depth[lo]]
    if not ops:
        return
    cuts = [lo, *ops, hi]
    k = rng.randrange(len(cuts) - 1)
    yield (s[: cuts[k]] + s[cuts[k + 1] :]).replace("(+", "(").lstrip("+")


def _bracket_flips(s: str, rng: random.Random) -> Iterator[str]:
    flip = {"(": "[", "[": "(", ")": "]", "]": ")"}
    spots = [0, len(s) - 1] + [m.start() - 1 for m in re.finditer(r"\\cup", s)] + [m.end() for m in re.finditer(r"\\cup\s*", s)]
    spots = [i for i in spots if 0 <= i < len(s) and s[i] in flip and not s[max(0, i - 1) : i + 1].startswith("\\")]
    for i in rng.sample(spots, min(2, len(spots))):
        yield s[:i] + flip[s[i]] + s[i + 1 :]


def _element_edits(s: str, rng: random.Random) -> Iterator[str]:
    got = _items(s)
    if not got:
        return
    _, _, spans = got
    k = rng.randrange(len(spans))
    lo, hi = spans[k]
    if k + 1 < len(spans):  # drop an item with the comma after it
        yield s[:lo] + s[spans[k + 1][0] :].lstrip()
    else:
        yield s[: spans[k - 1][1]] + s[hi:]
    yield s[:hi] + "," + s[lo:hi] + s[hi:]  # repeated
    if len(spans) >= 2:  # two neighbours swapped (a change of value for ordered tuples only)
        k = rng.randrange(len(spans) - 1)
        (a0, a1), (b0, b1) = spans[k], spans[k + 1]
        yield s[:a0] + s[b0:b1].strip() + "," + s[a0:a1].strip() + s[b1:]


def _frac_edits(s: str, rng: random.Random) -> Iterator[str]:
    fracs = list(_FRAC.finditer(s))
    if not fracs:
        return
    m = rng.choice(fracs)
    n0 = m.end()
    n1 = _group_end(s, n0)
    if n1 >= len(s) or s[n1] != "{":
        return
    d1 = _group_end(s, n1)
    num, den = s[n0 + 1 : n1 - 1], s[n1 + 1 : d1 - 1]
    yield s[:n0] + "{" + den + "}{" + num + "}" + s[d1:]
    yield s[:n0] + "{" + num + "+1}{" + den + "}" + s[d1:]
    yield s[:n0] + "{" + num + "}{" + den + "+1}" + s[d1:]


def _exponent_edits(s: str, rng: random.Random) -> Iterator[str]:
    hats = [i for i, ch in enumerate(s) if ch == "^" and not s.startswith("^\\circ", i) and not s.startswith("^{\\circ", i)]
    if not hats:
        return
    i = rng.choice(hats)
    if s[i + 1 : i + 2] == "{":
        end = _group_end(s, i + 1)
        yield s[: i + 1] + "{" + s[i + 2 : end - 1] + "+1}" + s[end:]
    elif i + 1 < len(s):
        yield s[: i + 1] + "{" + s[i + 1] + "+1}" + s[i + 2 :]


def _function_edits(s: str, rng: random.Random) -> Iterator[str]:
    for m in re.finditer(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])", s):
        yield s[: m.start()] + _FUNC_SWAP[m.group()] + s[m.end() :]
        break
    for m in re.finditer(r"\\sqrt\s*(?=\{)", s):
        yield s[: m.start()] + "\\sqrt[3]" + s[m.end() :]
        break
    for m in re.finditer(r"\\pi(?![a-zA-Z])", s):
        yield s[: m.end()] + "^2" + s[m.end() :]
        break


def _relation_edits(s: str, rng: random.Random) -> Iterator[str]:
    for m in re.finditer(r"\\(?:leq|geq|le|ge|lt|gt)(?![a-zA-Z])|<|>", s):
        yield s[: m.start()] + _REL_SWAP[m.group()] + " " + s[m.end() :]
        break


def _letter_edits(s: str, rng: random.Random) -> Iterator[str]:
    m = re.fullmatch(r"(\\text\{)?(\(?)([A-E])(\)?)(\})?", s.strip())
    if m:
        yield s.replace(m.group(3), "ABCDEA"["ABCDE".index(m.group(3)) + 1], 1)


def _point_shifts(s: str, rng: random.Random) -> Iterator[str]:
    for m in re.finditer(r"(\d)\.(\d)", s):
        yield s[: m.start()] + m.group(1) + m.group(2) + "." + s[m.end() :]
        break


PERTURBATIONS: dict[str, Callable[[str, random.Random], Iterator[str]]] = {
    "sign": _sign_flips,
    "operator": _op_swaps,
    "digit": _digit_changes,
    "digits": _digit_edits,
    "variable": _variable_edits,
    "constant": _constant_drops,
    "word": _word_edits,
    "upright": _upright,
    "ellipsis": _ellipses,
    "dots": _dots,
    "term_added": _term_adds,
    "term_dropped": _term_drops,
    "bracket": _bracket_flips,
    "element": _element_edits,
    "fraction": _frac_edits,
    "exponent": _exponent_edits,
    "function": _function_edits,
    "relation": _relation_edits,
    "letter": _letter_edits,
    "point": _point_shifts,
}


def near_misses(gold_id: str, gold: str, seed: int) -> list[tuple[str, str]]:
    """(perturbation kind, near miss) pairs for one gold, deterministic in (gold_id, seed); each
    near miss once, none equal to the gold string."""
    rng = random.Random(zlib.crc32(f"{seed}:{gold_id}".encode()))
    seen = {gold}
    out = []
    for kind, make in PERTURBATIONS.items():
        for nm in make(gold, rng):
            if nm not in seen and nm.strip():
                seen.add(nm)
                out.append((kind, nm))
    return out
