"""PRMs on vLLM's pooling runner (``prm:...?backend=vllm``): the same per-step scores, tokens and calls
as transformers on the families vLLM serves, a one-line refusal naming backend=hf on the others."""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path

import pytest
from prm_models import (
    VLLM_SIZE,
    build_math_shepherd,
    build_qwen,
    build_qwen_prm,
    build_rlhflow,
    build_skywork,
    build_trl,
    ref_qwen,
)

from bonbench.api.steps import aggregate
from bonbench.api.verifier import get_verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample
from bonbench.plugins.rewards.prm import pooling
from bonbench.plugins.rewards.prm.encode import StepEncoder
from bonbench.plugins.rewards.prm.family import FAMILIES
from bonbench.plugins.rewards.prm.pooling import VllmStepScorer, serves

QUESTION = "Find x if 2x + 3 = 11."
COMPLETIONS = [
    "Step 1: 2x + 3 = 11\n\nStep 2: 2x = 8\n\nStep 3: x = 4\n\nStep 4: check 2*4 + 3 = 11\n\nThe answer is \\boxed{4}",
    "We compute 3 + 4 = 7.\n\nThen 7 - 2 = 5.",
    "",  # no step: no request, the floor, as on transformers
    "the answer is \\boxed{5}",
    "Let x be the number.\n\n\n\nThen 2x + 3 = 11, so x = 4.\n\nThe final answer is 12.\n\n+ - ки\n\nDone.\n\nSo 6.",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm-vllm")
    return {"qwen": build_qwen_prm(root / "Qwen2.5-Math-PRM-tiny"),
            "qwen-token-classifier": build_qwen(root / "qwen-token-classifier", size=VLLM_SIZE),
            "math-shepherd": build_math_shepherd(root / "math-shepherd-mistral-7b-prm", size=VLLM_SIZE),
            "rlhflow": build_rlhflow(root / "Llama3.1-8B-PRM-Deepseek-Data"),
            "skywork": build_skywork(root / "Skywork-o1-Open-PRM-Qwen-2.5-1.5B"),
            "trl": build_trl(root / "trl-prm-tiny")}


def _spec(model: str, folder: Path, extra: str) -> str:
    # the qwen model runs its own code on transformers; vLLM has its own Qwen2ForProcessRewardModel
    trust = "trust_remote_code=true&" if model == "qwen" and "backend=hf" in extra else ""
    family = "family=qwen&" if model == "qwen-token-classifier" else ""  # a plain token classifier: named
    return f"prm:{folder}?{trust}{family}{extra}"


def test_transformers_reads_qwen_prm_in_its_own_format_only_when_trusted(models: dict[str, Path]) -> None:
    """The real checkpoint's layout (remote code, two-layer head): recognised, refused without trust, equal to the card."""
    with pytest.raises(BonbenchError, match="runs its own modelling code: add \\?trust_remote_code=true") as info:
        get_verifier(f"prm:{models['qwen']}")
    assert "\n" not in str(info.value)
    verifier = get_verifier(_spec("qwen", models["qwen"], "backend=hf"))
    assert verifier.family.name == "qwen"  # from the architecture, no ?family=
    steps = verifier.family.steps(COMPLETIONS[0])
    (values, _), = verifier.load().step_scores([QUESTION], [steps])
    want = ref_qwen(models["qwen"], QUESTION, steps)
    assert max(abs(a - b) for a, b in zip(values, want, strict=True)) < 1e-5 and len(values) >= 5


@pytest.mark.parametrize("family", ["qwen", "math-shepherd",  # vLLM's own PRM class; an LM head made a classifier
                                    pytest.param("qwen-token-classifier", marks=pytest.mark.slow)])  # converted by vLLM
def test_vllm_backend_gives_the_transformers_scores(models: dict[str, Path], family: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm")
    from transformers import AutoTokenizer

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # two tiny engines in one process: 1 GiB of KV cache each
    problems = {"p": Problem("p", QUESTION, "")}
    samples = [Sample("p", i, c, 1, "stop") for i, c in enumerate(COMPLETIONS)]
    longest = get_verifier(_spec(family, models[family], "backend=vllm")).family
    encoder = StepEncoder(longest, AutoTokenizer.from_pretrained(models[family]), "tiny")
    fit = f"max_length={len(encoder.encode(QUESTION, longest.steps(COMPLETIONS[0])).ids) - 3}"  # the longest loses 3+
    hf = get_verifier(_spec(family, models[family], f"backend=hf&batch_size=2&{fit}"))
    fast = get_verifier(_spec(family, models[family], f"backend=vllm&batch_size=3&{fit}"))
    want, got = hf.score(problems, samples, {}), fast.score(problems, samples, {})
    try:
        assert fast.engine.encode_calls == 1 and fast.engine.requests == 4  # one request per sample with steps
        assert got[0].tokens is not None and fast.max_length is not None and got[0].tokens <= fast.max_length
        engine = fast.engine.llm.llm_engine  # batch_size and max_length reach vLLM's scheduler and model config
        assert engine.vllm_config.scheduler_config.max_num_seqs == 3 and engine.model_config.max_model_len == fast.max_length
        for a, b in zip(want, got, strict=True):
            assert a.steps is not None and b.steps is not None and len(a.steps) == len(b.steps)
            assert max((abs(u - v) for u, v in zip(a.steps, b.steps, strict=True)), default=0.0) < 1e-3, (a, b)
            assert (a.tokens, a.calls, a.aggregation) == (b.tokens, b.calls, b.aggregation)
        assert len(set(round(v, 3) for v in got[0].steps or ())) > 1  # the tiny model is not constant
        assert hf.fingerprint != fast.fingerprint and hf.name == fast.name  # the backend is in the fingerprint only
        mean = get_verifier(_spec(family, models[family], f"backend=vllm&{fit}&agg=mean"))
        stored = replace(got[0], verifier_fingerprint=fast.fingerprint, verifier_version=fast.version)  # as verify stores it
        again = mean.rederive(stored)  # another aggregation of the vLLM rows: no model
        assert again is not None and again.score == pytest.approx(aggregate(got[0].steps or (), "mean"))
        assert mean.engine is None
    finally:
        del fast.engine
        gc.collect()


def test_only_the_step_marker_families_run_on_vllm(models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    assert {name for name, f in FAMILIES.items() if serves(f)} == {"qwen", "math-shepherd"}
    for family in ("rlhflow", "skywork", "trl"):
        with pytest.raises(BonbenchError, match=f"\\({family} family\\) cannot run on vLLM's pooling runner.*"
                                                "use backend=hf$") as info:
            get_verifier(f"prm:{models[family]}?backend=vllm")
        assert "\n" not in str(info.value)
    cases = [
        (f"prm:{models['trl']}?backend=nope", "option backend takes one of 'hf', 'vllm', got 'nope'"),
        (f"prm:{models['trl']}?gpu_memory_utilization=0.5", "gpu_memory_utilization is for backend=vllm"),
        (f"prm:{models['math-shepherd']}?backend=vllm&device=cuda", "vLLM picks its device"),
        (f"prm:{models['math-shepherd']}?backend=vllm&gpu_memory_utilization=1.5", "=1.5 is not in \\(0, 1\\]"),
    ]
    for spec, message in cases:
        with pytest.raises(BonbenchError, match=message) as info:
            get_verifier(spec)
        assert "\n" not in str(info.value)
    monkeypatch.setattr(pooling, "installed", lambda: False)  # a machine without vllm
    with pytest.raises(BonbenchError, match="backend=vllm needs vllm: pip install 'bonbench\\[gpu\\]'"):
        get_verifier(f"prm:{models['math-shepherd']}?backend=vllm")


def test_a_step_count_vllm_does_not_match_is_one_line(models: dict[str, Path]) -> None:
    import torch

    scorer = object.__new__(VllmStepScorer)  # the reading alone, without an engine
    scorer.family, scorer.source = FAMILIES["qwen"], "tiny"
    assert scorer.step_probabilities(torch.tensor([[0.0, 0.0], [0.0, 2.0]]), 2) == pytest.approx((0.5, 0.8808), abs=1e-4)
    with pytest.raises(BonbenchError, match="vLLM returned 1 step scores .* has 2 step markers: use backend=hf"):
        scorer.step_probabilities(torch.tensor([[0.0, 1.0]]), 2)


def test_run_refuses_an_unservable_backend_before_sampling(models: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import toy_plugin  # noqa: F401  registers the toy task

    from bonbench.apps.cli import main

    out, replay = tmp_path / "results", tmp_path / "replay.jsonl"
    replay.write_text("".join(f'{{"problem_id": "toy/{i}", "sample_idx": {j}, "completion": " answer: {i}"}}\n'
                              for i in range(12) for j in range(2)))
    code = main(["run", "--task", "toy", "--backend", "scripted", "--samples", str(replay), "--n", "2", "--metric",
                 "bon@2", "--verifier", f"prm:{models['skywork']}?backend=vllm", "--out", str(out)])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code != 0 and len(errors) == 1 and errors[0].startswith("error:") and "use backend=hf" in errors[0]
    assert not list(out.rglob("*.jsonl"))  # nothing was sampled


def test_an_older_vllm_is_one_line_naming_the_upgrade(models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm")
    import types

    import vllm.config

    def no_runner(**kwargs: object) -> None:
        raise TypeError("__init__() got an unexpected keyword argument 'runner'")

    old = types.SimpleNamespace(PoolingParams=lambda **kwargs: None, LLM=no_runner)
    monkeypatch.setattr(pooling, "import_vllm", lambda: old)
    verifier = get_verifier(f"prm:{models['math-shepherd']}?backend=vllm")
    with pytest.raises(BonbenchError, match="cannot build a step-pooling engine .* pip install -U vllm, or use backend=hf"):
        verifier.load()
    monkeypatch.setattr(vllm.config, "PoolerConfig", no_runner)
    with pytest.raises(BonbenchError, match="has no token_classify step pooling .* pip install -U vllm, or use backend=hf"):
        verifier.load()
