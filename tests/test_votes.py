"""Vote classes are the grader's: every answer graded right votes for one class, whatever its
canonical form, and answers the grader holds equal to each other vote together."""

from __future__ import annotations

from bonbench.core.records import Grade
from bonbench.metrics.maj import maj_at_k
from bonbench.pipeline.votes import vote_answers, vote_classes
from bonbench.plugins.graders.math import MathGrader
from bonbench.plugins.graders.math_canonical import canonical_answer
from bonbench.plugins.graders.math_classes import answer_classes, numeric_signature


def _g(i: int, correct: bool | None, answer: str | None, pid: str = "p") -> Grade:
    return Grade(pid, i, "math", 4, correct, answer=answer)


def test_right_answers_of_different_forms_vote_together() -> None:
    grades = [_g(0, True, "\\frac{\\sqrt{2}}{2}"), _g(1, False, "3"), _g(2, True, "\\frac{1}{\\sqrt{2}}"),
              _g(3, False, "3"), _g(4, None, None), _g(5, False, "4")]
    votes = vote_answers(grades)
    assert votes == ("\\frac{\\sqrt{2}}{2}", "3", "\\frac{\\sqrt{2}}{2}", "3", None, "4")
    correct = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    # the two right forms tie with "3" (2 votes each) in the full set: merged, the right class wins
    # half the tie; split by string, "3" alone would win
    assert maj_at_k(votes, correct, 6) == 0.5
    assert maj_at_k([g.answer for g in grades], correct, 6) == 0.0


def test_wrong_and_undecided_answers_keep_their_form_without_a_grader() -> None:
    grades = [_g(0, False, "x+1"), _g(1, None, "x+2"), _g(2, False, "x+1"), _g(3, True, None)]
    assert vote_answers(grades) == ("x+1", "x+2", "x+1", None)
    assert vote_answers([]) == ()
    assert vote_classes(object(), {"p": grades}) == {"p": ("x+1", "x+2", "x+1", None)}


def test_the_math_grader_merges_wrong_answers_equal_to_each_other() -> None:
    forms = ["2\\sqrt2", "\\sqrt8", "3", "x(x+2)", "x^2+2x", "x^2+2", "(1,2)", "\\text{east}", "\\frac{1}{\\sqrt2}",
             "\\frac{\\sqrt2}{2}", "2.8284"]
    group = [canonical_answer(a) for a in forms]
    # 2.8284 is a rounding of 2\sqrt2, not equal to it; x^2+2 is a different polynomial
    assert MathGrader(workers=1).answer_classes([group]) == [[0, 0, 2, 3, 3, 5, 6, 7, 8, 8, 10]]
    grades = [_g(i, False, a, "q") for i, a in enumerate(group[:5])] + [_g(5, True, "4", "q"), _g(6, True, "2^2", "q")]
    votes = vote_classes(MathGrader(workers=1), {"q": grades})["q"]
    assert votes == (group[0], group[0], group[2], group[3], group[3], "4", "4")


def test_only_equal_values_are_compared_and_undecided_pairs_stay_apart() -> None:
    assert numeric_signature("2\\sqrt{2}") == numeric_signature("\\sqrt{8}") != numeric_signature("3")
    assert numeric_signature("(1,2)") is None and numeric_signature("\\text{east}") is None
    asked: list[tuple[int, str, str]] = []

    def undecided(items: list[tuple[int, str, str]]) -> dict[int, bool]:
        asked.extend(items)
        return {i: False for i, _, _ in items}  # a timeout: no verdict

    group = [canonical_answer(a) for a in ["x(x+2)", "x^2+2x", "5", "7"]]
    assert answer_classes([group], undecided) == [[0, 1, 2, 3]]
    assert {(a, b) for _, a, b in asked} == {(group[1], group[0]), (group[0], group[1])}  # both ways, that pair only
