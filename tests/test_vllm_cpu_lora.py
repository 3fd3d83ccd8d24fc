"""``vllm_cpu_lora``'s kernels give what vLLM's CPU torch ops give (one matrix product per adapter slot
instead of one gathered matrix per token), for one slot and for mixed slots including -1, shrink and
expand, slices, padding and ``add_inputs``; ``install`` points vLLM's CPU punica wrapper at them."""

from __future__ import annotations

import pytest
import torch

from bonbench.plugins.samplers import vllm_cpu_lora

torch_ops = pytest.importorskip("vllm.lora.ops.torch_ops")


def _case(tokens: int, slots: list[int], out: int, inp: int, four_d: bool) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(tokens * 31 + out)
    shape = (3, 1, out, inp) if four_d else (3, out, inp)
    weights = torch.randn(shape, generator=g).to(torch.bfloat16)
    x = torch.randn(tokens, inp, generator=g).to(torch.bfloat16)
    indices = torch.tensor([slots[t % len(slots)] for t in range(tokens)])
    return x, weights, indices


@pytest.mark.parametrize("slots", [[0], [1, 0, -1], [2, 2, 0]])
@pytest.mark.parametrize("four_d", [True, False])
def test_shrink_matches_vllm(slots: list[int], four_d: bool) -> None:
    x, w, idx = _case(7, slots, 4, 24, four_d)
    want, got = torch.zeros(7, 4), torch.zeros(7, 4)
    torch_ops.bgmv_shrink(x, w, want, idx, 0.5)
    vllm_cpu_lora.bgmv_shrink(x, w, got, idx, 0.5)
    torch.testing.assert_close(got, want)
    seq_lens, seq_slots = torch.tensor([3, 4]), torch.tensor([slots[0], slots[-1]])
    want.zero_(), got.zero_()
    torch_ops.sgmv_shrink(x, w, want, None, seq_lens, seq_slots, 2, 4, 7, 2.0)
    vllm_cpu_lora.sgmv_shrink(x, w, got, None, seq_lens, seq_slots, 2, 4, 7, 2.0)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("slots", [[0], [1, 0, -1]])
@pytest.mark.parametrize("add_inputs", [True, False])
@pytest.mark.parametrize("padded", [0, 3])  # the model's output wider than the adapter's
def test_expand_matches_vllm(slots: list[int], add_inputs: bool, padded: int) -> None:
    x, w, idx = _case(6, slots, 10, 4, True)
    base = torch.randn(6, 12 + padded).to(torch.bfloat16)  # room for the slice at 2
    want, got = base.clone(), base.clone()
    torch_ops.bgmv_expand(x, w, want, idx, add_inputs)
    vllm_cpu_lora.bgmv_expand(x, w, got, idx, add_inputs)
    torch.testing.assert_close(got, want)
    want, got = base.clone(), base.clone()
    torch_ops.bgmv_expand_slice(x, w, want, idx, 2, 10, add_inputs)
    vllm_cpu_lora.bgmv_expand_slice(x, w, got, idx, 2, 10, add_inputs)
    torch.testing.assert_close(got, want)
    seq_lens, seq_slots = torch.tensor([2, 4]), torch.tensor([slots[-1], slots[0]])
    want, got = base.clone(), base.clone()
    torch_ops.sgmv_expand(x, w, want, None, seq_lens, seq_slots, 2, 4, 6, add_inputs)
    vllm_cpu_lora.sgmv_expand(x, w, got, None, seq_lens, seq_slots, 2, 4, 6, add_inputs)
    torch.testing.assert_close(got, want)
    want, got = base.clone(), base.clone()
    torch_ops.sgmv_expand_slice(x, w, want, None, seq_lens, seq_slots, 2, 4, 6, 1, 10, add_inputs)
    vllm_cpu_lora.sgmv_expand_slice(x, w, got, None, seq_lens, seq_slots, 2, 4, 6, 1, 10, add_inputs)
    torch.testing.assert_close(got, want)


def test_one_broadcast_row_expands_as_vllm_does() -> None:
    x, w, idx = _case(1, [0], 5, 4, True)
    want, got = torch.zeros(3, 5), torch.zeros(3, 5)
    torch_ops.bgmv_expand(x, w, want, idx, True)
    vllm_cpu_lora.bgmv_expand(x, w, got, idx, True)
    torch.testing.assert_close(got, want)


def test_install_points_the_cpu_wrapper_at_these_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.lora.punica_wrapper import punica_cpu

    # vLLM's own ops first (an earlier real LoRA engine in this process may have installed ours), and
    # restored after the test
    for name in vllm_cpu_lora.KERNELS:
        monkeypatch.setattr(punica_cpu, name, getattr(torch_ops, name))
    assert punica_cpu.bgmv_shrink is torch_ops.bgmv_shrink
    assert vllm_cpu_lora.install()
    assert all(getattr(punica_cpu, name) is fn for name, fn in vllm_cpu_lora.KERNELS.items())


@pytest.mark.parametrize(("engine_args", "cuda", "installed"), [({"enable_lora": True}, False, True),
                                                                 ({}, False, False),
                                                                 ({"enable_lora": True}, True, False)])
def test_a_lora_engine_on_cpu_gets_these_kernels(monkeypatch: pytest.MonkeyPatch, engine_args: dict[str, bool],
                                                 cuda: bool, installed: bool) -> None:
    from types import SimpleNamespace

    from bonbench.core.models import ResolvedModel
    from bonbench.plugins.samplers import vllm as vllm_sampler

    calls: list[bool] = []
    monkeypatch.setattr(vllm_cpu_lora, "install", lambda: calls.append(True) or True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    engine = SimpleNamespace(get_tokenizer=lambda: None)
    monkeypatch.setattr(vllm_sampler, "import_vllm", lambda: SimpleNamespace(LLM=lambda **kw: engine))
    vllm_sampler.VLLMSampler(ResolvedModel("m", "/m", False, "f"), seed=0, **engine_args)
    assert calls == ([True] if installed else [])
