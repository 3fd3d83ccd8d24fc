"""Tests of the math grader's extraction step (bonbench.plugins.graders.math_extract): several final
boxes read as one list answer, the value of a "Final Answer:" sentence, an explicit final-answer
phrase after an intermediate box, gold targets written as several boxes (the ``gold_boxes``
convention, through ``is_equiv`` and ``MathGrader``), and linear time on degenerate text. The
labelled end-to-end cases (categories multiple_boxes, final_answer_phrase) are in
tests/data/math_cases.jsonl."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from bonbench.core.records import Problem, Sample
from bonbench.plugins.graders import math as gm
from bonbench.plugins.graders.math import MathGrader
from bonbench.plugins.graders.math_conventions import MathConventions
from bonbench.plugins.graders.math_equiv import is_equiv
from bonbench.plugins.graders.math_extract import boxed_contents, extract_answer, gold_answers


@pytest.mark.parametrize(
    "text, expected",
    [
        # several boxes that belong together: one list answer
        ("The solutions are $\\boxed{-3}$ and $\\boxed{5}$.", "-3, 5"),
        ("$y=\\boxed{-3}$ or $y=\\boxed{5}$", "-3, 5"),
        ("\\[\\boxed{4}\\] \\[\\boxed{9}\\]", "4, 9"),
        ("\\boxed{1}, \\boxed{8}", "1, 8"),
        ("\\boxed{6}\\text{ and }\\boxed{7}", "6, 7"),
        ("$\\boxed{2}\\quad\\boxed{11}$", "2, 11"),
        ("\\boxed{2};\\ \\boxed{11}", "2, 11"),
        ("\\begin{aligned} p &= \\boxed{4} \\\\ q &= \\boxed{0} \\end{aligned}", "p=4, q=0"),
        ("$m = \\boxed{3}$, $n = \\boxed{8}$", "m=3, n=8"),
        ("So $\\boxed{(1,2)}$ and $\\boxed{(3,4)}$.", "(1,2), (3,4)"),
        # the hedge is a list too: it answers neither value alone
        ("It is $\\boxed{6}$ or $\\boxed{9}$.", "6, 9"),
        # repeats of one answer are one answer
        ("Thus $\\boxed{15}$.\n\n**Final Answer**\n\\[\\boxed{15}\\]", "15"),
        ("\\boxed{15} \\boxed{ 15 }", "15"),
        ("$\\boxed{-1}$ and $\\boxed{4}$, that is $\\boxed{-1}$, $\\boxed{4}$", "-1, 4"),
        # a box followed by prose starts no group: the last box alone
        ("First $\\boxed{3}$ is too big; after the correction we get $\\boxed{2}$.", "2"),
        ("Case 1 gives $x=\\boxed{5}$. In case 2, $x = \\boxed{7}$.", "7"),
        ("\\boxed{a} then \\boxed{b}", "b"),
        # a box nested in a box: the inner one
        ("\\boxed{\\boxed{5}}", "5"),
        # "Final Answer:" with a sentence: its value
        ("Final Answer: The total is 12 apples.", "12 apples"),
        ("Final Answer: The final answer is 5. I hope it is correct.", "5"),
        ("Final answer: the area is $3\\sqrt2$.", "3\\sqrt2"),
        ("Final answer: the perimeter equals 20.", "20"),
        ("Final answer: the roots are $-1$ and $6$.", "-1, 6"),
        ("**Final Answer:** 42", "42"),
        ("Final Answer: $f(2)$ equals $7$.", "7"),
        ("Final answer: $5$ is the answer.", "5"),
        ("The final answer is $5$, which is the number of apples.", "5"),
        # ... while a text answer, a letter and a value with a unit are kept
        ("Final Answer: Monday", "Monday"),
        ("Final answer: (C)", "(C)"),
        ("Final Answer: 5 cm", "5 cm"),
        ("Final Answer: Yes, it is", "Yes, it is"),
        # an explicit final-answer phrase after an intermediate box wins ...
        ("Case 1: $\\boxed{3}$. Final Answer: The final answer is $7$. I hope it is correct.", "7"),
        ("So $\\boxed{3}$ for part (a).\n\nThe final answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("Hence \\boxed{4}.\n\n**Final Answer:** 9", "9"),
        ("Hence \\boxed{4}.\nAnswer: $9$", "9"),
        # ... but a phrase before the box, or later prose, does not replace a good box
        ("The final answer is $\\boxed{5}$. I hope it is correct.", "5"),
        ("The final answer is $\\boxed{5}$. I think the answer is right.", "5"),
        ("\\boxed{5}, so the answer is correct.", "5"),
        ("So $\\boxed{5}$. Indeed, the answer is $2+3$.", "5"),
        ("So $\\boxed{44}$.\n\nWe may check our answer: $17\\cdot 44 = 748$.", "44"),
        ("\\boxed{5}. The final answer is 6 because 2+3=5.", "5"),
        ("\\boxed{5}. The final answer is correct.", "5"),
        # without a box, prose after a phrase is skipped for the earlier value
        ("Final Answer: 5. I think the answer is right.", "5"),
        ("The answer is $-2$ and $1$.", "-2, 1"),
        ("The answer is $4$ and $\\$10$ is the cost.", "4"),
        ("the answer is correct", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "completion, gold, verdict",
    [
        ("The solutions are $\\boxed{-3}$ and $\\boxed{5}$.", "5, -3", True),
        ("The solutions are $\\boxed{-3}$ and $\\boxed{5}$.", "5", False),
        ("It is $\\boxed{6}$ or $\\boxed{9}$.", "9", False),  # the hedge: once a false positive
        ("It is $\\boxed{6}$ or $\\boxed{9}$.", "6", False),
        ("$y=\\boxed{-3}$ or $y=\\boxed{5}$", "y=-3, y=5", True),
        ("$m = \\boxed{3}$, $n = \\boxed{8}$", "(3,8)", True),
        ("$m = \\boxed{3}$, $n = \\boxed{8}$", "(8,3)", False),
        ("$n = \\boxed{8}$, $m = \\boxed{3}$", "m=3, n=8", True),
        ("Thus $\\boxed{15}$.\n\n**Final Answer**\n\\[\\boxed{15}\\]", "15", True),
        ("Case 1: $\\boxed{3}$. Final Answer: The final answer is $7$. I hope it is correct.", "3", False),
        ("Final Answer: The total is 12 apples.", "12", True),
        ("Final Answer: The total is 12 apples.", "13", False),
        ("Final answer: the area is $3\\sqrt2$.", "\\sqrt{18}", True),
        ("Final answer: the area is $3\\sqrt2$.", "2\\sqrt3", False),
        ("Final Answer: Monday", "\\text{Monday}", True),
        ("Final answer: (C)", "C", True),
        ("Final answer: (C)", "D", False),
        ("Final Answer: 5 cm", "5", True),
        # a function's left-hand side joins boxes as a variable's does
        ("so $g(x)=\\boxed{2x+1}$ or $g(x)=\\boxed{-2x-1}$.", "-2x-1, 2x+1", True),
        ("so $g(x)=\\boxed{2x+1}$ or $g(x)=\\boxed{-2x-1}$.", "-2x-1", False),
        # forms of one value boxed together answer it; a hedge between values does not
        ("We obtain $\\boxed{x+11}$ or $\\boxed{11+x}$.", "11+x", True),
        ("We obtain $\\boxed{x+11}$ or $\\boxed{11+x}$.", "x+12", False),
        ("so $d = \\boxed{15\\frac{39}{40}}$, or $\\boxed{\\frac{639}{40}}$ inches.", "\\frac{639}{40}", True),
        ("so $d = \\boxed{15\\frac{39}{40}}$, or $\\boxed{\\frac{641}{40}}$ inches.", "\\frac{639}{40}", False),
    ],
)
def test_extracted_answers_grade_both_ways(completion: str, gold: str, verdict: bool) -> None:
    pred = extract_answer(completion)
    assert pred is not None and is_equiv(pred, gold) is verdict


@pytest.mark.parametrize(
    "target, all_reading, any_reading",
    [
        ("\\boxed{2}, \\boxed{3}", ["2, 3"], ["2", "3"]),
        ("$\\boxed{1}$ or $\\boxed{-1}$", ["1, -1"], ["1", "-1"]),
        ("$x=\\boxed{1}$ or $x=\\boxed{-1}$", ["1, -1"], ["1", "-1"]),
        ("\\boxed{4} and \\boxed{4}", ["4"], ["4"]),
        # not several boxes: the target as written
        ("5", ["5"], ["5"]),
        ("\\boxed{5}", ["\\boxed{5}"], ["\\boxed{5}"]),
        ("\\boxed{2} if $n$ is even, \\boxed{3} otherwise", ["\\boxed{2} if $n$ is even, \\boxed{3} otherwise"],
         ["\\boxed{2} if $n$ is even, \\boxed{3} otherwise"]),
    ],
)
def test_gold_answers_read_several_boxes(target: str, all_reading: list[str], any_reading: list[str]) -> None:
    assert gold_answers(target) == gold_answers(target, "all") == all_reading
    assert gold_answers(target, "any") == any_reading


def test_boxed_contents_keeps_every_box_in_order() -> None:
    # the canonical form's unwrapping relies on this list (nested boxes included)
    assert boxed_contents("\\boxed{1} and \\fbox{2} then \\boxed 3$") == ["1", "2", "3"]
    assert boxed_contents("\\boxed{\\boxed{5}}") == ["\\boxed{5}", "5"]
    assert boxed_contents("\\boxed{\\{1\\}} \\boxed{unclosed") == ["\\{1\\}"]


def test_degenerate_text_extracts_in_linear_time() -> None:
    """Unclosed or deeply nested boxes, endless box lists and repeated phrases: scanning each box to
    the end of the text, or each phrase's rest, would be quadratic. Run in a child with a deadline,
    so that a regression fails instead of hanging the suite; the code takes well under a second."""
    code = ("from bonbench.plugins.graders.math_extract import extract_answer\n"
            "print(extract_answer('\\\\boxed{' * 50000))\n"
            "print(extract_answer('\\\\boxed{' * 20000 + '7' + '}' * 20000))\n"
            "print(extract_answer('\\\\boxed{1}, ' * 20000))\n"
            "print(extract_answer('Final answer: ' * 20000 + ' is' * 20000))\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr[-500:]
    assert got.stdout.splitlines()[:3] == ["None", "7", "1"]


# ---------------------------------------------------------------- gold_boxes through is_equiv and MathGrader

ALL, ANY = MathConventions(), MathConventions(gold_boxes="any")


@pytest.mark.parametrize(
    "pred, gold, under_all, under_any",
    [
        ("2, 3", "\\boxed{2}, \\boxed{3}", True, False),
        ("3, 2", "$\\boxed{2}$ and $\\boxed{3}$", True, False),
        ("3", "\\boxed{2}, \\boxed{3}", False, True),
        ("2", "$\\boxed{2}$ or $\\boxed{3}$", False, True),
        ("4", "$\\boxed{2}$ or $\\boxed{3}$", False, False),
        ("2, 4", "$\\boxed{2}$ or $\\boxed{3}$", False, False),
        ("-1", "$x=\\boxed{1}$ or $x=\\boxed{-1}$", False, True),
        ("\\frac{\\sqrt2}{2}", "$\\boxed{\\frac{1}{\\sqrt2}}$ or $\\boxed{0.7}$", False, True),  # sympy on one form
        ("5", "5", True, True),  # a gold without boxes reads the same under both
    ],
)
def test_gold_boxes_convention(pred: str, gold: str, under_all: bool, under_any: bool) -> None:
    assert is_equiv(pred, gold) is is_equiv(pred, gold, ALL) is under_all
    assert is_equiv(pred, gold, ANY) is under_any


def test_grader_reads_several_gold_boxes_per_convention(monkeypatch: pytest.MonkeyPatch) -> None:
    problems = {
        "roots": Problem(id="roots", input="q", target="$x=\\boxed{2}$ or $x=\\boxed{-3}$"),
        "forms": Problem(id="forms", input="q", target="$\\boxed{\\frac{1}{\\sqrt2}}$ or $\\boxed{0.8}$"),
    }
    sent: list[list[tuple[int, str, str]]] = []
    real = gm._run_pool

    def spy(items: list[tuple[int, str, str]], *args: Any, **kw: Any) -> Any:
        sent.append(list(items))
        return real(items, *args, **kw)

    monkeypatch.setattr(gm, "_run_pool", spy)
    completions = [("roots", "So $\\boxed{-3}$ and $\\boxed{2}$."), ("roots", "So $\\boxed{-3}$."),
                   ("roots", "So $\\boxed{4}$."), ("forms", "It is $\\boxed{\\frac{\\sqrt{2}}{2}}$."),
                   ("forms", "It is $\\boxed{\\frac{1}{2}}$.")]
    samples = [Sample(problem_id=pid, sample_idx=i, completion=c, n_tokens=3, finish_reason="stop")
               for i, (pid, c) in enumerate(completions)]
    under_all = MathGrader(workers=1).grade(problems, samples)
    under_any = MathGrader(workers=1, conventions=ANY).grade(problems, samples)
    assert [g.correct for g in under_all] == [True, False, False, False, False]
    # "any": one root, or one form of the value (the sympy comparison runs on a worker), answers
    assert [g.correct for g in under_any] == [False, True, False, True, False]
    # under "any" only the form 0.8 is ruled out in-process; the other goes to a worker
    assert [item[1:] for item in sent[-1]] == [("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}")]
    assert all(g.error is None for g in under_all + under_any)
    # the batch path agrees with is_equiv under each convention
    for conv, grades in ((ALL, under_all), (ANY, under_any)):
        for s, g in zip(samples, grades, strict=True):
            pred = extract_answer(s.completion)
            assert is_equiv(pred or "", problems[s.problem_id].target, conv) is g.correct
