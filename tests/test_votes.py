"""Vote classes are the grader's: every answer graded right votes for one class, whatever its canonical form."""

from __future__ import annotations

from bonbench.core.records import Grade
from bonbench.metrics.maj import maj_at_k
from bonbench.pipeline.votes import vote_answers


def _g(i: int, correct: bool | None, answer: str | None) -> Grade:
    return Grade("p", i, "math", 4, correct, answer=answer)


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


def test_wrong_and_undecided_answers_keep_their_form() -> None:
    grades = [_g(0, False, "x+1"), _g(1, None, "x+2"), _g(2, False, "x+1"), _g(3, True, None)]
    assert vote_answers(grades) == ("x+1", "x+2", "x+1", None)
    assert vote_answers([]) == ()
