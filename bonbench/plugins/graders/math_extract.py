"""Extraction of the final answer from a MATH-style completion (part of the math grader).

What it does: ``extract_answer`` returns the text of the last complete ``\\boxed{...}`` /
``\\fbox{...}`` (balanced braces, escaped braces ignored), of ``\\boxed 5``, or else of the last
"final answer is" / "the answer is" / "answer:" phrase (its ``$...$``, else up to the end of the
sentence, "I hope it is correct" dropped). ``braced_group`` and ``boxed_contents`` are shared with
the canonical form, which unwraps a whole-answer box the same way.

What it does not do: it does not normalise the answer (``math_canonical``) or compare it
(``math_equiv``); a truncated box is skipped, not repaired; it never raises on odd text.
"""

from __future__ import annotations

import re

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_FINAL_RE = re.compile(r"(?:final answer is|the answer is|final answer:|answer:)", re.IGNORECASE)


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


def boxed_contents(text: str) -> list[str]:
    """The contents of every complete ``\\boxed{...}`` / ``\\fbox{...}`` (and ``\\boxed 5``) in ``text``, in order."""
    out = []
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            got = braced_group(text, j)
            if got is not None:
                out.append(got[0])
        elif j > m.end():
            # "\boxed 5": the token runs to the closing $ or the end of the line
            token = re.split(r"[$\n]", text[j:], maxsplit=1)[0].strip()
            if token:
                out.append(token)
    return out


def extract_answer(text: str) -> str | None:
    """The final answer in ``text``: last complete \\boxed/\\fbox, else a "final answer is" phrase."""
    if not text:
        return None
    boxed = [b.strip() for b in boxed_contents(text) if b.strip()]
    if boxed:
        return boxed[-1]
    matches = list(_FINAL_RE.finditer(text))
    for m in reversed(matches):
        rest = text[m.end() :].lstrip(" :\t")
        ans: str | None = None
        if rest.startswith("$$"):
            end = rest.find("$$", 2)
            ans = rest[2:end] if end > 0 else None
        elif rest.startswith("$"):
            end = rest.find("$", 1)
            ans = rest[1:end] if end > 0 else None
        elif rest.startswith("\\(") or rest.startswith("\\["):
            close = "\\)" if rest.startswith("\\(") else "\\]"
            end = rest.find(close, 2)
            ans = rest[2:end] if end > 0 else None
        else:
            # up to the end of the sentence: a period followed by space/end, or a line break;
            # a decimal point is followed by a digit, so "3.5." keeps 3.5
            cut = re.search(r"\.(?=\s|$)|\n", rest)
            ans = rest[: cut.start()] if cut else rest
        if ans is not None:
            ans = re.sub(r"\s*I hope it is correct.*$", "", ans, flags=re.IGNORECASE | re.DOTALL).strip()
            ans = ans.strip().rstrip(".").strip()
            if ans:
                return ans
    return None
