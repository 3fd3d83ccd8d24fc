"""Bad ``prm:`` and ``judge:`` verifiers on ``bonbench run`` fail before any sampling, in one line,
and leave a stored run as it was; a Qwen PRM in its remote-code format loads only with
``trust_remote_code=true``, and then scores as its model card says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_models import JudgeServer, build_tiny_judge
from prm_models import SIZE, build_qwen_prm, build_trl, ref_qwen

from bonbench.api.verifier import get_verifier
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError

QUESTION = "Find x if 2x + 3 = 11."
STEPS = ["Step 1: 2x + 3 = 11", "Step 2: 2x = 8", "Step 3: x = 4", "The answer is \\boxed{4}"]


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:  # the policy's endpoint: it answers every completion request
        yield s


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prmcli")
    mystery = build_trl(root / "mystery")  # a causal LM's config: no family, no step marker known
    config = json.loads((mystery / "config.json").read_text())
    config["architectures"] = ["LlamaForCausalLM"]
    (mystery / "config.json").write_text(json.dumps(config))
    return {"mystery": mystery, "trl": build_trl(root / "trl-prm-tiny"), "judge": build_tiny_judge(root / "judge"),
            "remote": build_qwen_prm(root / "Qwen2.5-Math-PRM-tiny", size=SIZE)}


def _run(server: JudgeServer, out: Path, data_dir: Path, verifier: str) -> list[str]:
    return ["run", "--task", "math", "--limit", "1", "--n", "2", "--metric", "pass@1,bon@2", "--backend", "openai",
            "--endpoint", server.url, "--model", "judge-model", "--verifier", verifier, "--data-dir", str(data_dir),
            "--out", str(out), "--n-boot", "10"]


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _one_error(code: int, err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


BAD = [
    ("prm:{mystery}", "cannot tell which process reward model family"),
    ("prm:{trl}?agg=nope", "option agg takes one of 'min', 'prod', 'last', 'mean', got 'nope'"),
    ("prm:{trl}?nope=1", "has no option 'nope'"),
    ("prm:{trl}?family=qwen", "has no '<extra_0>' token"),  # the tokenizer lacks the separator
    ("prm:{remote}", "add ?trust_remote_code=true"),
    ("judge:{judge}?top=99", "top must be 1..20"),
    ("judge:{judge}?nope=1", "has no option 'nope'"),
]


@pytest.mark.parametrize(("spec", "says"), BAD)
def test_a_bad_verifier_fails_before_sampling_and_keeps_what_is_stored(spec: str, says: str, server: JudgeServer,
                                                                       models: dict[str, Path], data_dir: Path,
                                                                       tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec.format(**{k: str(v) for k, v in models.items()})
    fresh = tmp_path / "fresh"
    requests = len(server.bodies)
    line = _one_error(main(_run(server, fresh, data_dir, spec)), capsys.readouterr().err)
    assert says in line, line
    assert len(server.bodies) == requests and not list(fresh.glob("runs/**/samples.jsonl"))  # nothing sampled
    # a stored run of the same settings: the bad verifier changes none of its files
    kept = tmp_path / "kept"
    assert main(_run(server, kept, data_dir, "oracle")) == 0
    before, requests = _files(kept), len(server.bodies)
    assert any(name.endswith("samples.jsonl") for name in before)
    capsys.readouterr()
    assert says in _one_error(main(_run(server, kept, data_dir, spec)), capsys.readouterr().err)
    assert _files(kept) == before and len(server.bodies) == requests


def test_a_remote_code_qwen_prm_loads_only_when_trusted_and_scores_as_its_card(models: dict[str, Path]) -> None:
    folder = models["remote"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForProcessRewardModel"] and (folder / "modeling_qwen2_rm.py").is_file()
    with pytest.raises(BonbenchError, match=r"runs its own modelling code: add \?trust_remote_code=true") as info:
        get_verifier(f"prm:{folder}")
    assert "\n" not in str(info.value)
    verifier = get_verifier(f"prm:{folder}?trust_remote_code=true")
    assert verifier.family.name == "qwen"  # recognised from the architecture, no ?family= needed
    ((values, tokens),) = verifier.load().step_scores([QUESTION], [STEPS])
    want = ref_qwen(folder, QUESTION, STEPS)
    assert tokens > 0 and len(values) == len(STEPS) and max(abs(a - b) for a, b in zip(values, want, strict=True)) < 1e-5
    assert len({round(v, 3) for v in values}) > 1  # the tiny model is not constant
