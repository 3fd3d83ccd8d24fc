"""The held-out evaluation with ``--rollout-backend vllm`` samples through the rollout engine with the
live LoRA adapter, every key its own request seeded by ``sample_seed``.

Fast (a scripted engine in place of ``VLLMSampler``, on a tiny random Gemma 3): ``seed_each_sample``
turns each key into its own n=1 request with the key's seed, and is refused on a CPU engine with
chunked prefill; each evaluation is a normal run of backend ``vllm`` (chunked prefill off, the
engine's dtype) drawn through a fresh adapter version with per-key seeds, its fingerprint names the
step and the adapter's bytes, and a run with evaluation ends at the weights of the same run without
it. Slow (a real vllm-cpu engine on the embedded Gemma 3 270M): the same, with the real engine."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.api.objective import Objective, register_objective
from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.apps.trainer import vllm_rollout
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train
from bonbench.apps.trainer.setup import eval_request
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt, Sample
from bonbench.plugins.samplers.vllm import VLLMSampler


def _cfg(model: str | None, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=model, steps=3, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False, log_kl=False,
                rollout_backend="vllm", lora_rank=4)
    base.update(kw)
    return TrainConfig(**base)


# ---------------------------------------------------------------- VLLMSampler.seed_each_sample


def _fake_vllm_sampler(chunked: bool) -> tuple[VLLMSampler, list[Any]]:
    """A ``VLLMSampler`` over a scripted ``vllm.LLM``: every enqueued request finishes at the next step."""
    enqueued: list[Any] = []
    waiting: list[tuple[str, Any]] = []

    def enqueue(prompts: Sequence[Any], params: Sequence[Any], lora_request: Any, use_tqdm: bool) -> list[str]:
        ids = [str(len(enqueued) + i) for i in range(len(params))]
        enqueued.extend(params)
        waiting.extend(zip(ids, params, strict=True))
        return ids

    def step() -> list[Any]:
        done = [SimpleNamespace(request_id=i, finished=True, prompt_token_ids=[1, 2],
                                outputs=[SimpleNamespace(index=j, text=f"s{p.seed}", token_ids=[5], finish_reason="length",
                                                         cumulative_logprob=-1.0) for j in range(p.n)])
                for i, p in waiting]
        waiting.clear()
        return done

    config = SimpleNamespace(scheduler_config=SimpleNamespace(enable_chunked_prefill=chunked))
    engine = SimpleNamespace(step=step, has_unfinished_requests=lambda: bool(waiting), vllm_config=config,
                             abort_request=lambda *a, **k: None)
    sampler = object.__new__(VLLMSampler)
    sampler.seed, sampler.chunk_samples, sampler.lora_request, sampler.seed_each_sample = 7, 512, None, True
    sampler.llm = SimpleNamespace(enqueue=enqueue, llm_engine=engine)
    sampler.tokenizer = None
    sampler._vllm = SimpleNamespace(SamplingParams=lambda **kw: SimpleNamespace(**kw))
    return sampler, enqueued


def test_seed_each_sample_is_one_request_per_key_with_its_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    sampler, enqueued = _fake_vllm_sampler(chunked=False)
    requests = [SampleRequest(Prompt("p", text="x"), (0, 1, 2)), SampleRequest(Prompt("q", text="y"), (3, 5))]
    got = [s for chunk in sampler.generate(requests, SamplingParams(seed=7)) for s in chunk]
    keys = [("p", 0), ("p", 1), ("p", 2), ("q", 3), ("q", 5)]
    assert [p.n for p in enqueued] == [1] * 5
    assert [p.seed for p in enqueued] == [sample_seed(7, pid, i) for pid, i in keys]
    assert {(s.problem_id, s.sample_idx): s.completion for s in got} == {k: f"s{sample_seed(7, *k)}" for k in keys}
    sampler.seed_each_sample = False  # the default: one request per problem, drawn from the engine's stream
    enqueued.clear()
    list(sampler.generate(requests, SamplingParams(seed=7)))
    assert [(p.n, p.seed) for p in enqueued] == [(3, None), (2, None)]


def test_seeded_requests_on_a_cpu_engine_with_chunked_prefill_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    sampler, enqueued = _fake_vllm_sampler(chunked=True)
    with pytest.raises(BonbenchError, match="enable_chunked_prefill=False") as info:
        list(sampler.generate([SampleRequest(Prompt("p", text="x"), (0,))], SamplingParams(seed=7)))
    assert "\n" not in str(info.value) and not enqueued


# ---------------------------------------------------------------- the evaluation through the rollout engine


class _ScriptedEngine:
    """``VLLMSampler``'s part the trainer uses: unseeded requests draw from the engine's one stream,
    seeded ones (``seed_each_sample``) from their key's seed only, as vLLM does."""

    built: list[_ScriptedEngine] = []

    def __init__(self, model: Any, *, seed: int, **engine_args: Any) -> None:
        self.seed, self.engine_args, self.stream = seed, engine_args, random.Random(seed)
        self.lora_request: Any = None
        self.seed_each_sample = False
        self.calls: list[tuple[Any, bool, list[tuple[str, int]]]] = []
        _ScriptedEngine.built.append(self)

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        assert params.seed == self.seed
        keys = [(r.problem_id, i) for r in requests for i in r.sample_indices]
        self.calls.append((self.lora_request, self.seed_each_sample, keys))
        draw = ((lambda k: random.Random(sample_seed(self.seed, *k)).random()) if self.seed_each_sample
                else (lambda k: self.stream.random()))
        yield [Sample(pid, i, "a" if draw((pid, i)) < 0.5 else "b", 1, "length") for pid, i in keys]

    def close(self) -> None:
        return None


@pytest.fixture()
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[_ScriptedEngine]:
    _ScriptedEngine.built = []
    monkeypatch.setattr(vllm_rollout, "VLLMSampler", _ScriptedEngine)
    monkeypatch.setattr(vllm_rollout, "lora_request",
                        lambda folder, version: SimpleNamespace(lora_name=f"live-{version}", lora_int_id=version,
                                                                lora_path=str(folder)))
    return _ScriptedEngine.built


def test_the_evaluation_samples_the_rollout_engine_with_the_live_adapter(tmp_path: Path,
                                                                          scripted: list[_ScriptedEngine]) -> None:
    tiny = build_tiny_model(tmp_path / "model").path
    plain = train(_cfg(tiny, tmp_path / "plain"))
    watched = train(_cfg(tiny, tmp_path / "watched", eval_task="tiny_train", eval_every=1, eval_n=3,
                         eval_metrics=("pass@1,2",)))
    a, b = (torch.load(f / "training_state" / "weights.pt", weights_only=True) for f in (plain, watched))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # evaluation moved nothing
    bare, engine = scripted
    assert engine.engine_args["enable_chunked_prefill"] is False and bare.engine_args == engine.engine_args
    # the rollouts as without evaluation, each with the adapter exported just before; an evaluation
    # (seeded, 3 problems x 3 keys) before each step's rollouts and after the last step
    assert [k for _, seeded, k in engine.calls if not seeded] == [k for _, _, k in bare.calls]
    seeded = [c for c in engine.calls if c[1]]
    assert [c[1] for c in engine.calls] == [True, False, True, False, True, False, True]
    assert all(sorted(k) == sorted((f"test/{p}", i) for p in range(3) for i in range(3)) for _, _, k in seeded)
    versions = [c[0].lora_int_id for c in engine.calls]
    assert versions == sorted(set(versions))  # a new adapter version for every call
    runs = {p.parent.parent.name: p.parent for p in (watched / "evals" / "runs" / "tiny_train").glob("*/*/metrics.json")}
    assert sorted(runs) == ["t-step0", "t-step1", "t-step2", "t-step3"]
    fingerprints = set()
    for run in runs.values():
        config = json.loads((run / "config.json").read_text())["config"]
        assert config["backend"] == "vllm" and config["dtype"] == "float32"
        assert config["engine_args"]["enable_chunked_prefill"] is False and config["engine_args"]["enable_prefix_caching"]
        fingerprints.add(config["model_fingerprint"])
        rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
        assert sorted((r["problem_id"], r["sample_idx"]) for r in rows) == sorted(k for k in seeded[0][2])
    assert len(fingerprints) == 4
    # step 0's samples: each key's seed alone decides (common random numbers across steps)
    step0 = [json.loads(line) for line in (runs["t-step0"] / "samples.jsonl").read_text().splitlines()]
    assert all(r["completion"] == ("a" if random.Random(sample_seed(0, r["problem_id"], r["sample_idx"])).random() < 0.5
                                   else "b") for r in step0)


def test_the_evaluation_request_names_the_rollout_engine(tmp_path: Path) -> None:
    vllm = eval_request(_cfg(None, tmp_path, eval_task="tiny_train", dtype="bfloat16"), tmp_path)
    assert (vllm.backend, vllm.dtype, dict(vllm.engine_args)) == (
        "vllm", "bfloat16", {"enable_prefix_caching": True, "enable_chunked_prefill": False})
    hf = eval_request(_cfg(None, tmp_path, eval_task="tiny_train", rollout_backend="hf"), tmp_path)
    assert (hf.backend, hf.dtype, dict(hf.engine_args)) == ("hf", "float32", {})


def test_the_evaluation_fingerprint_names_the_adapter_weights(tmp_path: Path, scripted: list[_ScriptedEngine]) -> None:
    from bonbench.apps.trainer.policy import Policy

    tiny = build_tiny_model(tmp_path / "model")
    cfg = _cfg(tiny.path, tmp_path)
    rollouts = vllm_rollout.VLLMRollouts(Policy(tiny, cfg, device="cpu"), cfg, tmp_path)
    first = rollouts.evaluation_sampler("t-step1", "f", is_chat=False)
    again = rollouts.evaluation_sampler("t-step1", "f", is_chat=False)
    assert (first.name, first.model, first.fingerprint) == ("vllm", "t-step1", again.fingerprint)
    assert (first.lora.lora_int_id, again.lora.lora_int_id) == (1, 2)
    with torch.no_grad():
        for p in rollouts.policy.trainable():
            p.add_(0.01)
    assert rollouts.evaluation_sampler("t-step1", "f", is_chat=False).fingerprint != first.fingerprint
    assert rollouts.evaluation_sampler("t-step1", "g", is_chat=False).fingerprint != first.fingerprint


# ---------------------------------------------------------------- a real vllm-cpu engine (CI only)


@register_objective("test_own_samples", paper="test only", summary="weight 1/G on every sample (test objective)")
def _test_own_samples() -> Objective:
    # every sample moves the weights, whatever it scores: the update depends on what the rollouts drew
    return Objective("test_own_samples", lambda g: np.full(len(g.rewards), 1.0 / len(g.rewards)), frozenset(), {})


@pytest.mark.slow
def test_with_a_real_engine_the_evaluation_leaves_training_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two LoRA steps of the embedded Gemma 3 270M with rollouts through a real vllm-cpu engine, with
    and without an evaluation at every step through the same engine: the same final weights, and each
    evaluation a run of backend vllm with every key once."""
    pytest.importorskip("vllm")
    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # the 270M model needs little; shared machines have little
    compiled = vllm_rollout.engine_args
    # eager and short: start-up time and memory on a shared machine
    monkeypatch.setattr(vllm_rollout, "engine_args", lambda cfg: {**compiled(cfg), "enforce_eager": True, "max_model_len": 1024})
    kw: dict[str, Any] = dict(objective="test_own_samples", steps=2, prompts_per_step=1, group=2, max_new_tokens=4,
                              lora_rank=8, lr=1e-2)
    plain = train(_cfg(None, tmp_path / "plain", **kw))
    watched = train(_cfg(None, tmp_path / "watched", eval_task="tiny_train", eval_every=1, eval_n=2,
                         eval_metrics=("pass@1,2",), **kw))
    a, b = (torch.load(f / "training_state" / "weights.pt", weights_only=True) for f in (plain, watched))
    assert any(float(v.abs().sum()) > 0 for k, v in a.items() if "lora_B" in k)  # the rollouts moved the weights
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # evaluation moved nothing
    runs = {p.parent.parent.name: p.parent for p in (watched / "evals" / "runs" / "tiny_train").glob("*/*/metrics.json")}
    assert sorted(runs) == ["t-step0", "t-step1", "t-step2"]
    fingerprints = set()
    for run in runs.values():
        config = json.loads((run / "config.json").read_text())["config"]
        assert config["backend"] == "vllm" and config["engine_args"]["enable_chunked_prefill"] is False
        fingerprints.add(config["model_fingerprint"])
        keys = [(r["problem_id"], r["sample_idx"]) for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())]
        assert sorted(keys) == sorted((f"test/{p}", i) for p in range(3) for i in range(2))
    assert len(fingerprints) == 3
