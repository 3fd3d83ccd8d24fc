"""PRM inputs longer than ``max_length``: the question's start is cut, a step never; steps that cannot fit are one error."""

from __future__ import annotations

from pathlib import Path

import pytest
from prm_models import FAMILY_MODELS

from bonbench.api.verifier import get_verifier
from bonbench.core.errors import BonbenchError

QUESTION = "Let x be the number of apples. Find x if 2x + 3 = 11, then compute the sum of the roots."
COMPLETION = "Step 1: 2x + 3 = 11\n\nStep 2: 2x = 8\n\nStep 3: x = 4\n\nThe answer is \\boxed{4}"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm-length")
    return {family: build(root / name) for family, (name, build, _) in FAMILY_MODELS.items()}


def _spec(family: str, folder: Path, extra: str = "") -> str:
    return f"prm:{folder}?" + ("family=qwen&" if family == "qwen" else "") + extra


@pytest.mark.parametrize("family", list(FAMILY_MODELS))
def test_a_long_question_loses_its_start_never_a_step(models: dict[str, Path], family: str) -> None:
    full = get_verifier(_spec(family, models[family]))
    steps = full.family.steps(COMPLETION)
    whole = full.load().encode([QUESTION], [steps])[0]
    assert whole.cut == 0 and full.max_length == 2048  # by default: the tiny model's positions
    short = get_verifier(_spec(family, models[family], f"max_length={len(whole.ids) - 5}"))
    engine = short.load()
    fitted = engine.encode([QUESTION], [steps])[0]
    assert len(fitted.ids) <= len(whole.ids) - 5 and len(fitted.positions) == len(steps) and fitted.cut >= 5
    words = engine.tokenizer.encode(QUESTION, add_special_tokens=False)
    rest = engine.tokenizer.decode(words[fitted.cut:])
    assert QUESTION.endswith(rest.strip()) and len(rest) < len(QUESTION)  # what is left is the question's end
    (values, tokens), = engine.step_scores([QUESTION], [steps])
    want = FAMILY_MODELS[family][2](models[family], rest, steps)  # the model card's scores of the shortened question
    assert tokens == len(fitted.ids) and max(abs(a - b) for a, b in zip(values, want, strict=True)) < 1e-5
    assert short.fingerprint != full.fingerprint  # max_length can change the scores: it is in the fingerprint


def test_steps_that_cannot_fit_are_one_error_naming_max_length(models: dict[str, Path]) -> None:
    verifier = get_verifier(_spec("math-shepherd", models["math-shepherd"], "max_length=12"))
    with pytest.raises(BonbenchError, match="cannot read a completion's 4 steps in max_length=12 tokens even with no "
                                            "question .* cap the policy's --max-tokens") as info:
        verifier.load().step_scores([QUESTION], [verifier.family.steps(COMPLETION)])
    assert "\n" not in str(info.value)
    for bad in ("4096", "0"):
        with pytest.raises(BonbenchError, match=f"max_length={bad} is not between 1 and the 2048 positions") as info:
            get_verifier(_spec("trl", models["trl"], f"max_length={bad}"))
        assert "\n" not in str(info.value)
