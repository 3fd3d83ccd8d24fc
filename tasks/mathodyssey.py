"""The ``mathodyssey`` task: MathOdyssey (Fang et al. 2024), 387 problems, graded by the MATH rule grader.

MathOdyssey mixes high-school competition problems, high-school math (mostly multiple choice) and
college math (linear algebra, calculus, ODEs, probability, statistics). Its gold answers were
typed inside a LaTeX document and carry layout debris (``16\\\\`` + ``\\noindent``, stray ``$``,
trailing periods, ``\\text{}``, units). :func:`clean_answer` removes that debris with explicit,
ordered rules (listed in its docstring and in docs/heldout-math.md) and never changes a value.

Grading: the original benchmark used an LLM judge. This task is deterministic: the ``math`` task's
grader compares the model's final answer with the cleaned gold answer. :func:`abstains` marks gold
answers that the rule grader cannot check (empty answers, proofs or prose, answers the grader cannot
parse or that are not equivalent to themselves after a round trip through ``\\boxed{}``); those
problems are reported (count and ids, in the task description and as the ``gold_abstained``
metric) and left out of the problem set unless ``-T include_abstained=true``. Answers that are
merely hard (matrices, intervals, symbolic expressions, yes/no) are kept.

Problems: id = the dataset's ``problem_id`` (``Problem_1`` .. ``Problem_387``); input = the question
without its trailing ``\\end{problem}`` / ``\\noindent``; target = the cleaned answer; meta holds
``level``, ``subject`` (the dataset's ``label``), ``raw_answer`` and ``abstained``. Filters:
``-T level=`` (``high school competition`` / ``hs-competition``, ``high school math`` / ``hs-math``,
``college math`` / ``university``; comma lists allowed) and ``-T subject=`` (the ``label``,
case- and space-insensitive, comma lists allowed).

Prompts are the math family's (``bonbench_tasks.common``: the ``math`` task's few-shot exemplars and chat prompt).

Breakdowns: ``level`` (the dataset's level string, e.g. ``college math``) and ``subject`` (its
``label``), so every requested metric is also reported per level and per subject, e.g.
``pass@1[level=college math]``, ``maj@4[subject=Linear Algebra and Abstract Algebra]``. With a
``-T level=`` / ``-T subject=`` filter only the selected groups appear.

This module does not sample, grade or compute metrics itself: the pipeline scores the breakdowns,
and ``gold_abstained`` is a report of the loader's abstentions, not a metric of the grades.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.task import Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem
from bonbench.plugins.graders.math_canonical import canonical_answer
from bonbench.plugins.graders.math_equiv import is_equiv
from bonbench.plugins.graders.math_extract import extract_answer
from bonbench_tasks.common import check_fewshot, math_conventions, math_style_task

TASK_NAME = "mathodyssey"
VERSION = 1
HUB_ID = "MathOdyssey/MathOdyssey"
LOCAL_FILE = "mathodyssey/test.jsonl"
N_PROBLEMS = 387

# The dataset's level strings (as stored, not as the paper or MANIFEST name them) and accepted aliases.
LEVELS: dict[str, tuple[str, ...]] = {
    "high school competition": ("hs-competition", "hs competition", "competition", "olympiad",
                                "high-school-competition", "high school competition"),
    "high school math": ("hs-math", "hs math", "high school", "high school mathematics",
                         "high school mathematics questions", "high-school-math", "high school math"),
    "college math": ("university", "university-level", "university level", "college", "college-math",
                     "college math"),
}


# ----------------------------------------------------------------------------------------------
# answer cleaning

_TRAILING_DEBRIS = re.compile(r"(?:\s|\\noindent\b|\\\\|\\newline\b|\\par\b|\\medskip\b|\\smallskip\b|\\bigskip\b)+$")
_ANSWER_PREFIX = re.compile(r"^\s*(?:\\textbf\{|\\textit\{)?\s*(?:final\s+)?answer\s*[:.]\s*\}?\s*", re.IGNORECASE)
_DISPLAY_WRAPPERS = ((r"\[", r"\]"), (r"\(", r"\)"), ("$$", "$$"))
_SPACING = re.compile(r"\\(?:quad|qquad|,|;|!|:|enspace|thinspace)(?![a-zA-Z])")
_TEXT_CMD = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox)\s*\{([^{}]*)\}")
_PART_LABEL = re.compile(r"(?:^|(?<=[,;]))\s*\(?([a-h])\s*[.)]\s+", re.IGNORECASE)
_NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_NUMBER_UNIT = re.compile(rf"^({_NUMBER})\s*([A-Za-z]{{2,}}(?:\s+[A-Za-z]+)*)$")
_MONEY = re.compile(r"\\\$\s*")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_WORD = re.compile(r"(?<![\\a-zA-Z])[A-Za-z]{3,}(?![a-zA-Z])")
_OK_WORDS = {"yes", "no", "true", "false", "none", "and", "or", "infty", "frac", "sqrt", "cup", "cap",
             "pmatrix", "begin", "end", "left", "right", "cdot", "times", "ln", "log", "sin", "cos",
             "tan", "pi", "theta", "alpha", "beta", "gamma", "lambda", "sigma", "mu"}


def _strip_math_delimiters(s: str) -> str:
    """Drop ``$``/``$$``/``\\[ \\]``/``\\( \\)`` around the whole answer and stray unmatched ``$``."""
    for left, right in _DISPLAY_WRAPPERS:
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            s = s[len(left):len(s) - len(right)].strip()
    # ``$a$`` segments joined by words ("$a$ or $b$") are handled by the caller; here only a lone
    # dollar pair or an unmatched dollar (Problem_104: ``\frac{\sqrt{30}}{12} $``) remains. An
    # escaped ``\$`` is a currency sign, not a delimiter.
    dollars = _UNESCAPED_DOLLAR.findall(s)
    if len(dollars) == 2 and s.startswith("$") and s.endswith("$") and not s.endswith("\\$"):
        return s[1:-1].strip()
    if len(dollars) == 1:
        return _UNESCAPED_DOLLAR.sub("", s).strip()
    return s


def _math_segments(s: str) -> list[str] | None:
    """``$a$ <word> $b$ ...`` -> [a, word, b, ...] when the answer is dollar segments joined by words."""
    parts = _UNESCAPED_DOLLAR.split(s)
    if len(parts) < 5 or len(parts) % 2 == 0:
        return None
    if parts[0].strip() or parts[-1].strip():
        return None
    return [p.strip() for p in parts[1:-1]]


def clean_answer(raw: str) -> str:
    """Remove LaTeX layout debris from a MathOdyssey gold answer; values are never changed.

    Rules, applied in order:

    1. Trailing layout commands and whitespace: any run of ``\\\\``, ``\\noindent``, ``\\newline``,
       ``\\par``, ``\\medskip`` (etc.), spaces, tabs and newlines at the end.
    2. An ``Answer:`` / ``Final answer:`` prefix.
    3. Trailing sentence punctuation: a final ``.`` (``$-1.$``, ``10.``, ``No.``), also when it sits
       outside the math delimiters (``$3$.``), then rule 1 again.
    4. Dollar segments joined by words: ``$a$ or $b$`` (equivalent forms offered as alternatives)
       keeps ``a``; ``$a$ and $b$`` (several requested values) becomes ``a, b``.
    5. Currency signs ``\\$`` (before or inside the delimiters), then math delimiters
       around the whole answer: ``$...$``, ``$$...$$``, ``\\[...\\]``, ``\\(...\\)``; a single
       unmatched ``$`` is dropped (an escaped ``\\$`` is never a delimiter).
    6. Spacing commands (``\\quad``, ``\\qquad``, ``\\,``, ``\\;``, ``\\!``, ``\\:``) become a space;
       ``\\text{...}``-style wrappers are replaced by their content; newlines and runs of spaces
       collapse to one space.
    7. Part labels of multi-part answers: ``a. 3, b. 4`` -> ``(3, 4)`` (an ordered tuple).
    8. A unit word after a number (``4ft``, ``13.45 years``, ``5 Robins``) is dropped; a single
       letter (``2e`` is 2e) or a math word (``2 pi``) after a number is kept.
    9. Rules 3 and 1 once more, since removing wrappers can expose a final period.
    """
    s = raw.replace("\r", "")
    s = _TRAILING_DEBRIS.sub("", s)
    s = _ANSWER_PREFIX.sub("", s)
    s = _strip_final_period(s)
    segments = _math_segments(s)
    if segments is not None and len(segments) >= 3:
        values, joins = segments[0::2], {w.lower().strip(" ,") for w in segments[1::2]}
        if joins == {"or"}:
            s = values[0]
        elif joins <= {"and", ""}:
            s = ", ".join(values)
    s = _MONEY.sub("", _strip_math_delimiters(_MONEY.sub("", s)))
    s = _SPACING.sub(" ", s)
    while _TEXT_CMD.search(s):
        s = _TEXT_CMD.sub(lambda m: m.group(1), s)
    s = re.sub(r"\s+", " ", s).strip()
    labels = _PART_LABEL.findall(s)
    if len(labels) >= 2 and [c.lower() for c in labels] == [chr(ord("a") + i) for i in range(len(labels))]:
        parts = [p.strip().rstrip(",;").strip() for p in _PART_LABEL.split(s)[2::2]]
        s = "(" + ", ".join(parts) + ")"
    m = _NUMBER_UNIT.match(_strip_final_period(s))
    if m and not set(m.group(2).lower().split()) & _OK_WORDS:
        s = m.group(1)
    s = _strip_final_period(_TRAILING_DEBRIS.sub("", s))
    return s.strip()


def _strip_final_period(s: str) -> str:
    """Drop one sentence-final period, inside or just outside closing ``$``; keep ``...``."""
    s = s.rstrip()
    if s.endswith("$."):
        return s[:-1].rstrip()
    if s.endswith(".$"):
        return (s[:-2].rstrip() + "$") if not s.endswith("..$") else s
    if s.endswith(".") and not s.endswith(".."):
        return s[:-1].rstrip()
    return s


def clean_question(raw: str) -> str:
    """The question without the trailing ``\\end{problem}`` and ``\\noindent`` of the LaTeX source."""
    s = raw.replace("\r", "")
    s = re.sub(r"(?:\s|\\noindent\b)+$", "", s)
    s = re.sub(r"\\end\{problem\}\s*$", "", s)
    s = re.sub(r"\\begin\{problem\}\s*", "", s)
    return s.strip()


# ----------------------------------------------------------------------------------------------
# abstention: gold answers the rule grader cannot check

# More than this many plain words (3+ letters, not LaTeX commands or math words) means prose or a
# proof, which a final-answer comparison cannot judge.
MAX_PLAIN_WORDS = 2


def abstention_reason(gold: str) -> str | None:
    """Why the rule grader cannot check gold answer ``gold`` (raw or cleaned), or None if it can.

    Reasons: ``empty`` (nothing left after cleaning); ``prose`` (more than ``MAX_PLAIN_WORDS`` plain
    words: a proof, an explanation or a multi-part sentence); ``unparsable`` (the grader extracts no
    answer from ``\\boxed{gold}`` or cannot canonicalise it); ``not self-equivalent`` (the gold,
    boxed and re-extracted, is not equivalent to itself); ``grader error: ...`` (it raised).
    """
    cleaned = clean_answer(gold)
    if not cleaned:
        return "empty"
    words = [w for w in _WORD.findall(cleaned) if w.lower() not in _OK_WORDS]
    if len(words) > MAX_PLAIN_WORDS:
        return "prose"
    try:
        extracted = extract_answer("The final answer is $\\boxed{" + cleaned + "}$.")
        if extracted is None or not canonical_answer(extracted):
            return "unparsable"
        if not is_equiv(extracted, cleaned):
            return "not self-equivalent"
    except Exception as exc:  # noqa: BLE001  the grader must never take the loader down; the answer is uncheckable
        return f"grader error: {type(exc).__name__}"
    return None


def abstains(gold: str) -> bool:
    """Whether the rule grader abstains on gold answer ``gold`` (see :func:`abstention_reason`)."""
    return abstention_reason(gold) is not None


# ----------------------------------------------------------------------------------------------
# loading

_WRAPPED_KEY = re.compile(r"^Problem_\d+$")


def _flatten(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One dataset row -> the flattened form; accepts the flattened mirror (``problem_id`` +
    fields) and the upstream one-key form ``{"Problem_N": {...}}``, also as loaded from the hub,
    where the other rows' keys are present with None values."""
    if "question" in row and row.get("question") is not None:
        flat = dict(row)
        flat.setdefault("problem_id", f"Problem_{index + 1}")
        if not flat.get("problem_id"):
            flat["problem_id"] = f"Problem_{index + 1}"
        return flat
    wrapped = [(k, v) for k, v in row.items() if _WRAPPED_KEY.match(str(k)) and isinstance(v, Mapping)]
    if len(wrapped) != 1:
        raise BonbenchError(
            f"mathodyssey row {index + 1} has neither the flattened fields (question, answer, label, level) "
            f"nor one 'Problem_N' object (keys: {', '.join(sorted(map(str, row))[:6])}); the source schema changed"
        )
    key, value = wrapped[0]
    return {"problem_id": key, **dict(value)}


def load_rows(data_dir: str | Path | None) -> tuple[list[dict[str, Any]], str]:
    """Flattened rows and a fingerprint: the local mirror when a data dir is set, else the hub."""
    root = resolve_data_dir(data_dir)
    if root is not None:
        path = local_file(root, LOCAL_FILE, "mathodyssey")
        raw, fingerprint = list(read_jsonl(path)), file_fingerprint(path)
    else:
        raw, fingerprint = load_hub(HUB_ID, "test")
    rows = [_flatten(r, i) for i, r in enumerate(raw)]
    missing = [f for f in ("question", "answer", "label", "level") if any(f not in r for r in rows)]
    if missing:
        raise BonbenchError(f"mathodyssey rows lack field(s) {', '.join(missing)}; the source schema changed")
    seen: set[str] = set()
    for r in rows:
        if r["problem_id"] in seen:
            raise BonbenchError(f"mathodyssey: problem_id {r['problem_id']!r} appears twice; the source file is corrupt")
        seen.add(r["problem_id"])
    return rows, fingerprint


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", str(text).strip().lower())


def parse_levels(level: str | None) -> tuple[str, ...] | None:
    """``-T level=hs-math,university`` -> the dataset's level strings; None keeps every level."""
    if level is None or not str(level).strip():
        return None
    lookup = {_norm(alias): name for name, aliases in LEVELS.items() for alias in (name, *aliases)}
    chosen: list[str] = []
    for item in str(level).split(","):
        if not item.strip():
            continue
        name = lookup.get(_norm(item))
        if name is None:
            choices = "; ".join(f"{name} ({', '.join(a for a in aliases if a != name)})" for name, aliases in LEVELS.items())
            raise BonbenchError(f"mathodyssey: unknown -T level={item.strip()!r}; choose from {choices}")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen) or None


def _subject_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(text).strip().lower())


def parse_subjects(subject: str | None, labels: Iterable[str]) -> tuple[str, ...] | None:
    """``-T subject=number theory,calculus`` -> the dataset's labels (case/space-insensitive)."""
    if subject is None or not str(subject).strip():
        return None
    by_key = {_subject_key(lab): lab for lab in labels}
    chosen: list[str] = []
    for item in str(subject).split(","):
        if not item.strip():
            continue
        label = by_key.get(_subject_key(item))
        if label is None:
            raise BonbenchError(f"mathodyssey: unknown -T subject={item.strip()!r}; "
                                f"choose from {', '.join(sorted(by_key.values()))}")
        if label not in chosen:
            chosen.append(label)
    return tuple(chosen) or None


def build_problems(rows: Sequence[Mapping[str, Any]]) -> tuple[Problem, ...]:
    """Every row as a Problem (abstained ones included, marked ``meta["abstained"]``), in file order."""
    out = []
    for r in rows:
        reason = abstention_reason(r["answer"])
        out.append(Problem(
            id=str(r["problem_id"]),
            input=clean_question(r["question"]),
            target=clean_answer(r["answer"]),
            meta={"level": r["level"], "subject": r["label"], "raw_answer": r["answer"],
                  "abstained": reason is not None, "abstention_reason": reason},
        ))
    return tuple(out)


def level_of(problem: Problem) -> str:
    """The problem's group in the ``level`` breakdown: the dataset's level string."""
    return str(problem.meta["level"])


def subject_of(problem: Problem) -> str:
    """The problem's group in the ``subject`` breakdown: the dataset's ``label``."""
    return str(problem.meta["subject"])


def _id_order(pid: str) -> tuple[int, str]:
    tail = pid.rsplit("_", 1)[-1]
    return (int(tail), pid) if tail.isdigit() else (1 << 30, pid)


class AbstentionReport:
    """The task's ``extra_metrics``: reports the gold answers the rule grader abstains on.

    Returns ``{"gold_abstained": {"value": count, "ci95": [count, count], "n_problems": rows
    selected by the filters, "problem_ids": [...], "reasons": {id: reason}, "excluded": bool}}``
    whatever grades it is given, so that every metrics.json says how many problems were left out
    (or kept ungradable, with ``include_abstained``).
    """

    def __init__(self, abstained: Mapping[str, str], n_selected: int, excluded: bool) -> None:
        self.abstained = dict(sorted(abstained.items(), key=lambda kv: _id_order(kv[0])))
        self.n_selected = n_selected
        self.excluded = excluded

    def __call__(self, grades_by_problem: Mapping[str, Sequence[Grade]], **_: Any) -> dict[str, dict[str, Any]]:
        # the report does not depend on grades or on extra keywords a pipeline may pass
        count = float(len(self.abstained))
        return {"gold_abstained": {"value": count, "ci95": [count, count], "n_problems": self.n_selected,
                                   "problem_ids": list(self.abstained), "reasons": dict(self.abstained),
                                   "excluded": self.excluded}}


@register_task(TASK_NAME, family="math")
def mathodyssey_task(data_dir: str | None = None, level: str | None = None, subject: str | None = None,
                     include_abstained: bool = False, fewshot: int = 4, percent: str = "number",
                     decimal_comma: bool = False, gold_boxes: str = "all") -> Task:
    """MathOdyssey graded by the MATH rule grader; ``level`` / ``subject`` filter (comma lists),
    ``include_abstained`` keeps problems whose gold answer the grader cannot check; ``percent``,
    ``decimal_comma`` and ``gold_boxes`` are the grader's conventions (as in the math task)."""
    conventions = math_conventions(TASK_NAME, percent, decimal_comma, gold_boxes)
    check_fewshot(fewshot)
    rows, fingerprint = load_rows(data_dir)
    levels = parse_levels(level)
    subjects = parse_subjects(subject, {r["label"] for r in rows})
    selected = [r for r in rows if (levels is None or r["level"] in levels) and (subjects is None or r["label"] in subjects)]
    problems = build_problems(selected)
    abstained = {p.id: str(p.meta["abstention_reason"]) for p in problems if p.meta["abstained"]}
    if not include_abstained:
        problems = tuple(p for p in problems if not p.meta["abstained"])
    if not problems:
        raise BonbenchError(f"no mathodyssey problems match level={level!r} subject={subject!r}; loosen the filters")
    fate = "kept (include_abstained=true; they cannot be graded correct reliably)" if include_abstained else "excluded"
    note = (f"{len(abstained)} of {len(selected)} selected gold answers cannot be checked by the rule grader, {fate}"
            + (f": {', '.join(f'{pid} ({why})' for pid, why in abstained.items())}" if abstained else ""))
    return math_style_task(
        TASK_NAME, VERSION, problems, fingerprint, int(fewshot),
        f"MathOdyssey (Fang et al. 2024), deterministic rule grading (the paper used an LLM judge); {note}",
        max_tokens=1024,  # college-level solutions run longer than MATH's
        breakdowns={"level": level_of, "subject": subject_of},
        extra_metrics=AbstentionReport(abstained, len(selected), excluded=not include_abstained),
        conventions=conventions,
    )
