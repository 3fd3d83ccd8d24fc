"""A tiny base policy for search runs: a random 2-layer Qwen2 causal LM with a byte-level BPE
tokenizer (``prm_models.byte_level``), so that real MATH prompts fit and any text decodes.

Random weights would write a blank line (the MATH step delimiter) about once in 400 tokens, and a
search of such a model would never take a second step. So one hidden dimension is made a constant
(every token's embedding holds 8 in it and no layer writes to it) and the output rows of the newline tokens and of EOS read
it: the model writes short paragraphs and sometimes ends, whatever the prompt."""

from __future__ import annotations

from pathlib import Path

from prm_models import SIZE, byte_level

# Qwen2.5-Instruct's ChatML (its default system message included; tools left out)
CHATML = ("{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}"
          "{%- endif %}{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}")


def build_policy(folder: Path, seed: int = 0, newline: float = 0.8, end: float = 0.65, chat: bool = False) -> Path:
    """The policy's folder: no chat template (a base model, plain-text prompts), or with ``chat`` an
    instruct model's ChatML template and its special tokens (Qwen2.5-Instruct's format)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] if chat else ["<|endoftext|>"]
    tok = byte_level(specials, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    if chat:
        tok.chat_template = CHATML
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), **dict(SIZE, max_position_embeddings=4096),
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 8.0
        for layer in model.model.layers:  # no layer writes to that dimension: it stays 8 to the last norm
            layer.self_attn.o_proj.weight[0] = 0.0
            layer.mlp.down_proj.weight[0] = 0.0
        model.model.norm.weight[0] = 25.0  # the other dimensions grow through the layers: about 10 after the norm
        model.lm_head.weight[:, 0] = 0.0  # only the tokens below read the constant
        newlines = {i for text in ("\n", "\n\n") for i in tok(text, add_special_tokens=False)["input_ids"]}
        for token, weight in [*((i, newline) for i in newlines), (tok.eos_token_id, end)]:
            model.lm_head.weight[token] = 0.0
            model.lm_head.weight[token, 0] = weight
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
