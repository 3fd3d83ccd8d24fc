"""Process reward models (``prm:``): each family against its model card, one forward, batches, stored steps, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from prm_models import FAMILY_MODELS, build_trl

from bonbench.api.steps import EMPTY_SCORE, aggregate
from bonbench.api.task import Task
from bonbench.api.verifier import get_verifier
from bonbench.core.config import RunConfig
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.pipeline import stages as pipeline
from bonbench.pipeline.prepared import open_run, prepare
from bonbench.plugins.rewards.prm import verifier as prm

QUESTION = "Find x if 2x + 3 = 11."
COMPLETIONS = [
    "Step 1: 2x + 3 = 11\n\nStep 2: 2x = 8\n\nStep 3: x = 4\n\nStep 4: check 2*4 + 3 = 11\n\nThe answer is \\boxed{4}",
    "We compute 3 + 4 = 7.\n\nThen 7 - 2 = 5.",
    "the answer is \\boxed{5}",
    "Let x be the number.\n\n\n\nThen 2x + 3 = 11, so x = 4.\n\nThe final answer is 12.\n\n+ - ки\n\nDone.\n\nSo 6.",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm")
    return {family: build(root / name) for family, (name, build, _) in FAMILY_MODELS.items()}


def _spec(family: str, folder: Path, extra: str = "") -> str:
    # qwen's tiny model is a native token classifier (the real one runs remote code): name its family
    return f"prm:{folder}?" + ("family=qwen&" if family == "qwen" else "") + extra


@pytest.mark.parametrize("family", list(FAMILY_MODELS))
def test_each_family_equals_its_model_card_reference(models: dict[str, Path], family: str) -> None:
    verifier = get_verifier(_spec(family, models[family]))
    assert verifier.family.name == family  # recognised from the name and config (qwen: given)
    reference = FAMILY_MODELS[family][2]
    steps = [verifier.family.steps(c) for c in COMPLETIONS]
    got = verifier.load().step_scores([QUESTION] * len(steps), steps)
    assert [len(s) for s in steps][0] >= 5
    for s, (values, tokens) in zip(steps, got, strict=True):
        want = reference(models[family], QUESTION, s)
        assert len(values) == len(s) and tokens > 0
        assert max(abs(a - b) for a, b in zip(values, want, strict=True)) < 1e-5, (family, values, want)
        assert len(set(round(v, 3) for v in values)) > 1 or len(values) == 1  # the tiny model is not constant


@pytest.mark.parametrize("family", ["qwen", "math-shepherd", "rlhflow"])
def test_one_forward_per_batch_and_batch_sizes_agree(models: dict[str, Path], family: str) -> None:
    one, many = (get_verifier(_spec(family, models[family], f"batch_size={b}")) for b in (1, 8))
    problems = {"p": Problem("p", QUESTION, "")}
    samples = [Sample("p", i, c, 1, "stop") for i, c in enumerate(COMPLETIONS)]
    a, b = one.score(problems, samples, {}), many.score(problems, samples, {})
    assert many.engine.forwards == 1 and one.engine.forwards == len(samples)  # every step of a sample: one forward
    assert all(r.calls == 1 and r.tokens and r.aggregation == "min" for r in b)
    for x, y in zip(a, b, strict=True):
        assert x.steps is not None and y.steps is not None and len(x.steps) == len(y.steps)
        assert max(abs(u - v) for u, v in zip(x.steps, y.steps, strict=True)) < 1e-4
        assert y.score == min(y.steps)


def test_a_new_aggregation_rescores_stored_steps_without_the_model(models: dict[str, Path], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    problems = (Problem("q/0", QUESTION, ""), Problem("q/1", "What is 3 + 4 minus 2?", ""))
    task = Task(name="ptoy", version=1, problems=problems, render=lambda p, style: Prompt(p.id, text=p.input),
                grader=_NoGrader(), prompt_id="ptoy-v1", default_metrics=("pass@1",))
    run = prepare(task, RunConfig(task="ptoy", model="scripted", backend="scripted", n=2, metrics=("bon@2",)), tmp_path)
    open_run(run)
    samples = {(p.id, j): Sample(p.id, j, COMPLETIONS[(i + j) % 4], 1, "stop") for i, p in enumerate(problems) for j in range(2)}
    folder = models["math-shepherd"]
    first = pipeline.verify(run, get_verifier(f"prm:{folder}?agg=min"), samples, {})

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setitem(prm.BACKENDS, "hf", no_model)
    for agg in ("mean", "prod", "last", "min"):
        verifier = get_verifier(f"prm:{folder}?agg={agg}")
        again = pipeline.verify(run, verifier, samples, {})
        for key, row in again.items():
            assert row.steps == first[key].steps and row.aggregation == agg
            assert row.score == pytest.approx(aggregate(first[key].steps or (), agg))
            assert row.verifier_fingerprint == verifier.fingerprint and row.calls == 1
    assert len({get_verifier(f"prm:{folder}?agg={a}").fingerprint for a in ("min", "mean")}) == 2
    assert get_verifier(f"prm:{folder}?agg=mean").name == get_verifier(f"prm:{folder}?agg=min").name


def test_a_completion_without_steps_scores_the_floor_without_a_forward(models: dict[str, Path]) -> None:
    verifier = get_verifier(f"prm:{models['trl']}?agg=prod")
    rows = verifier.score({"p": Problem("p", QUESTION, "")}, [Sample("p", 0, "", 1, "stop"),
                                                              Sample("p", 1, " \n\n \n", 1, "stop")], {})
    assert [(r.score, r.steps, r.calls, r.tokens) for r in rows] == [(EMPTY_SCORE, (), 0, 0)] * 2
    assert verifier.engine is None  # nothing to read: the model was not even loaded


def test_bad_input_is_one_line_naming_the_fix(models: dict[str, Path], tmp_path: Path) -> None:
    import json

    mystery = build_trl(tmp_path / "mystery")
    config = json.loads((mystery / "config.json").read_text())
    config["architectures"] = ["LlamaForCausalLM"]
    (mystery / "config.json").write_text(json.dumps(config))
    cases = [
        (f"prm:{mystery}", "cannot tell which process reward model family .* pass \\?family="),
        (f"prm:{models['trl']}?family=qwen", "has no '<extra_0>' token .* pass \\?family="),
        (f"prm:{models['trl']}?family=math-shepherd", "no token for the step tag 'ки'"),
        (f"prm:{models['trl']}?family=rlhflow", "has no chat template"),
        (f"prm:{models['trl']}?agg=max", "option agg takes one of 'min', 'prod', 'last', 'mean', got 'max'"),
        (f"prm:{models['trl']}?family=shepherd", "option family takes one of 'qwen', 'math-shepherd'"),
        (f"prm:{models['trl']}?aggregate=min", "has no option 'aggregate'; its options are: agg, family"),
        (f"prm:{tmp_path / 'absent'}", "not found"),
        ("prm:", "needs a folder or hub id"),
    ]
    for spec, message in cases:
        with pytest.raises(BonbenchError, match=message) as info:
            get_verifier(spec)
        assert "\n" not in str(info.value)
    with pytest.raises(BonbenchError, match="unknown step aggregation 'max': use agg=min|prod|last|mean"):
        aggregate([0.5], "max")


class _NoGrader:
    name, version = "none", 1

    def grade(self, problems: object, samples: list[Sample]) -> list[Grade]:
        return [Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None) for s in samples]


def test_list_verifiers_shows_one_prm_example(capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.cli import main

    assert main(["list", "verifiers"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("prm:")]
    assert len(lines) == 1 and "?agg=" in lines[0] and "process reward model" in lines[0]
