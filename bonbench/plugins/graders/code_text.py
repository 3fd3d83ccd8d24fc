"""Text side of code grading: code extraction from completions and judge-style output comparison.

Pure functions on strings (no execution, no sandbox); the grader and the code tasks import them from here.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from collections.abc import Sequence

FLOAT_TOL = 1e-6

# --------------------------------------------------------------------------- code extraction

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def fenced_blocks(text: str) -> list[str]:
    """Contents of the Markdown code fences in ``text`` (python / py / untagged ones; an unclosed
    final fence runs to the end, as chat models cut off by max_tokens leave it)."""
    out = []
    for lang, body in _FENCE.findall(text):
        if lang.lower() in ("", "python", "py", "python3", "py3"):
            out.append(body)
    return out


def defines(code: str, name: str) -> bool:
    """True if ``code`` defines a top-level function or class ``name`` (by parse, else by regex)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(rf"^(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", code, re.M) is not None
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name for n in tree.body)


def extract_code(completion: str, entry_point: str | None = None) -> str | None:
    """The code of a chat completion: the fenced block defining ``entry_point``, else the longest
    block. None when the completion has no fence (then it is a base-model continuation, used as is)."""
    blocks = fenced_blocks(completion)
    if not blocks:
        return None
    fences = re.findall(r"^[ \t]*```([^\n]*)", completion, re.M)
    head = completion[: completion.find("```")]
    if len(fences) % 2 == 1 and not fences[0].strip() and head.strip() and _parses(head):
        # code, then a lone closing fence: a base-model continuation of a prompt that opened the fence
        return None
    if entry_point:
        for block in blocks:
            if defines(block, entry_point):
                return block
    return max(blocks, key=len)


def _parses(code: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dataset code is full of invalid escape sequences
            ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def truncate_at_stop(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the earliest stop string (for backends that overshoot their stop strings)."""
    cut = len(text)
    for s in stops:
        i = text.find(s)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]


# --------------------------------------------------------------------------- output comparison


def _normalise_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def _as_float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _tokens_match(got: str, want: str, float_tol: bool) -> bool:
    if got == want:
        return True
    if not float_tol:
        return False
    a, b = _as_float(got), _as_float(want)
    if a is None or b is None:
        return False
    # integers must match exactly: tolerance is for real-valued answers only
    if re.fullmatch(r"[+-]?\d+", want) and re.fullmatch(r"[+-]?\d+", got):
        return False
    return abs(a - b) <= FLOAT_TOL or abs(a - b) <= FLOAT_TOL * abs(b)


def outputs_match(got: str, want: str, float_tol: bool = False) -> bool:
    """Judge-style comparison: trailing whitespace per line and trailing blank lines are ignored;
    with ``float_tol`` two whitespace-separated tokens that both parse as finite floats (and are not
    both integers) match within absolute or relative 1e-6."""
    g, w = _normalise_lines(got), _normalise_lines(want)
    if g == w:
        return True
    if not float_tol or len(g) != len(w):
        return False
    for gl, wl in zip(g, w, strict=True):
        gt, wt = gl.split(), wl.split()
        if len(gt) != len(wt) or not all(_tokens_match(a, b, True) for a, b in zip(gt, wt, strict=True)):
            return False
    return True
