"""A process reward model as the partial-solution scorer of a search (``PRMVerifier.score_steps``), on tiny local PRMs."""

from __future__ import annotations

from pathlib import Path

import pytest
from prm_models import FAMILY_MODELS
from search_scripts import TreeSampler

from bonbench.api.search.contract import PartialScorer, make_strategy
from bonbench.api.search.records import SearchProblem
from bonbench.api.verifier import get_verifier
from bonbench.core.records import Problem, Sample

QUESTION = "Find x if 2x + 3 = 11."
STEPS = ["Step 1: 2x + 3 = 11", "Step 2: 2x = 8", "Step 3: x = 4", "The answer is \\boxed{4}"]
FAMILIES = ["math-shepherd", "trl", "qwen"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm-search")
    return {family: FAMILY_MODELS[family][1](root / FAMILY_MODELS[family][0]) for family in FAMILIES}


def verifier_of(family: str, folder: Path):  # type: ignore[no-untyped-def]  # a PRMVerifier, built by name as users do
    return get_verifier(f"prm:{folder}" + ("?family=qwen" if family == "qwen" else ""))


@pytest.mark.parametrize("family", FAMILIES)
def test_partial_solutions_score_as_the_prefix_of_the_whole(models: dict[str, Path], family: str) -> None:
    verifier = verifier_of(family, models[family])
    assert isinstance(verifier, PartialScorer)
    got = verifier.score_steps([QUESTION] * 5, [STEPS[:k] for k in range(5)])
    assert got[0].scores == () and got[0].calls == 0 and got[0].tokens == 0
    whole = got[-1].scores
    for k in range(1, 5):
        assert len(got[k].scores) == k and got[k].calls == 1 and got[k].tokens > 0
        # a causal PRM reads step i the same whatever follows it: the search may score prefixes
        assert max(abs(a - b) for a, b in zip(got[k].scores, whole[:k], strict=True)) < 1e-5
    # and the whole solution's steps are the verifier's stored steps of the same text
    row = verifier.score({"p": Problem("p", QUESTION, "")}, [Sample("p", 0, "\n\n".join(STEPS), 1, "stop")], {})[0]
    assert row.steps is not None and max(abs(a - b) for a, b in zip(row.steps, whole, strict=True)) < 1e-5


def test_a_beam_search_guided_by_a_tiny_prm(models: dict[str, Path]) -> None:
    verifier = verifier_of("math-shepherd", models["math-shepherd"])
    problem = SearchProblem("p", QUESTION, QUESTION)
    got = make_strategy("beam", width=2, agg="min").search(problem, TreeSampler([4, 2, 2]), verifier, n=4, seed=0)
    again = verifier.score_steps([QUESTION] * 4, [c.steps for c in got.candidates])
    for c, s in zip(got.candidates, again, strict=True):
        assert c.step_scores == pytest.approx(s.scores, abs=1e-5) and c.value == pytest.approx(min(s.scores), abs=1e-5)
    assert got.cost.verifier_calls == got.cost.scored and got.cost.verifier_tokens > 0
    assert sorted((c.value for c in got.candidates), reverse=True) == [c.value for c in got.candidates]
