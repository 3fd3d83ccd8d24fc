"""A tiny local LLM judge for the tests, the GPU check and the benchmarks: a 2-layer Llama whose
word-level tokenizer has Yes / No variants, and ``reference_p_yes``, the judge's score written from its
definition (one text at a time, no bonbench code)."""

from __future__ import annotations

import math
from pathlib import Path

WORDS = ("Yes", "yes", "YES", "No", "no", "Maybe", "What", "is", "2", "+", "4", "5", "=", "Answer:", "GOOD:", "Problem:",
         "solution", "correct?", "the", "a", "of", "and", "step", "by")


def build_tiny_judge(folder: Path) -> Path:
    """A 2-layer Llama with a word-level tokenizer that has Yes/No variants (28-word vocab)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    vocab = {w: i for i, w in enumerate([*specials, *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, initializer_range=0.5,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(folder)
    return folder


def reference_p_yes(folder: Path, text: str, top: int, floor: float) -> float:
    """The definition, one text at a time: softmax of the next-token logits, the ``top`` most likely
    tokens, P(Yes variants) / P(Yes or No variants) among them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        probs = torch.softmax(model(**tok(text, return_tensors="pt")).logits[0, -1].double(), dim=-1)
    best = torch.argsort(probs, descending=True)[:top].tolist()
    words = {i: str(tok.decode([i])).strip().lower() for i in best}
    yes = math.fsum(float(probs[i]) for i in best if words[i] == "yes")
    no = math.fsum(float(probs[i]) for i in best if words[i] == "no")
    return yes / (yes + no) if yes else floor
