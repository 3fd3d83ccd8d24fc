"""Tiny outcome reward models in the chat formats of the public ones: a Skywork-Reward-V2-style Llama-3 one-head
classifier (its template writes BOS, its tokenizer adds one too, pad = EOS) and a Qwen2 ChatML one (no BOS), with
random weights and tokenizers trained here. Used by tests/test_rewards_chat.py and tests/test_think.py."""

from __future__ import annotations

from pathlib import Path

from prm_models import LLAMA3_TEMPLATE, QWEN_TEMPLATE, SIZE, byte_level

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]


def build_llama3_rm(folder: Path, seed: int = 0, **size: int) -> Path:
    """Skywork-Reward-V2-Llama-3.1 in miniature: a one-head LlamaForSequenceClassification, the Llama-3
    template (it writes BOS), a tokenizer that adds BOS too, and pad = EOS = <|eot_id|> in tokenizer and config."""
    import torch
    from tokenizers import processors
    from transformers import LlamaConfig, LlamaForSequenceClassification

    tok = byte_level(LLAMA3_SPECIALS, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<|eot_id|>")
    bos = tok.convert_tokens_to_ids("<|begin_of_text|>")
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    tok.chat_template = LLAMA3_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), num_labels=1, pad_token_id=tok.pad_token_id, bos_token_id=bos,
                         eos_token_id=tok.eos_token_id, **{**SIZE, **size})
    LlamaForSequenceClassification(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def build_qwen_rm(folder: Path, seed: int = 1, template: str | None = QWEN_TEMPLATE) -> Path:
    """A one-head Qwen2ForSequenceClassification: ChatML, no BOS (or no template at all)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    tok = byte_level(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], eos_token="<|im_end|>", pad_token="<|endoftext|>")
    if template is not None:
        tok.chat_template = template
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), num_labels=1, pad_token_id=tok.pad_token_id, **SIZE)
    Qwen2ForSequenceClassification(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
