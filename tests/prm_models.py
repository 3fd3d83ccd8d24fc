"""Tiny process reward models in each public family's format, and reference scorers from the model cards.

Each builder saves a randomly initialised model and a trained-here tokenizer with the family's real
special tokens, separators and chat template: Qwen2.5-Math-PRM (a Qwen2 two-class token classifier,
ChatML, ``<extra_0>``), Math-Shepherd (a Mistral causal LM, a SentencePiece-style tokenizer with
``ки``, ``+``, ``-``), RLHFlow (a Llama causal LM, the Llama-3 chat template), Skywork-o1-PRM (a
Qwen2 causal LM with ``v_head.summary`` in its safetensors) and a TRL ``PRMTrainer`` token
classifier (Llama). ``build_qwen_prm`` saves Qwen2.5-Math-PRM in its own format (architecture
``Qwen2ForProcessRewardModel``, its modelling code beside the weights, a two-layer score head), the
one vLLM serves natively; ``VLLM_SIZE`` gives the models vLLM runs a head size its CPU kernels take.
Each reference scorer follows its model card and runs one forward per step prefix (the definition);
the fast scorer must equal it. Used by tests/test_prm.py, tests/test_prm_vllm.py and benchmarks/bench_prm.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CORPUS = [
    "Step 1: we add 3 + 4 = 7 ки", "Step 2: then 7 - 2 = 5 ки", "the answer is \\boxed{5} ки",
    "Let x be the number of apples. Then 2x + 3 = 11, so x = 4.", "We compute the sum of the roots: 1 + 2 + 3 = 6.",
    "+ - + - ки ки", "Therefore the final answer is 12.", "What is 3 + 4 minus 2?", "Find x if 2x + 3 = 11.",
]
QWEN_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                   "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
                   "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
SIZE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=2048, initializer_range=0.5)
# head size 32: vLLM's CPU attention takes 32, 64, 80, ... (not SIZE's 8), for the models vLLM runs in the tests
VLLM_SIZE = dict(SIZE, hidden_size=64, num_attention_heads=2, num_key_value_heads=1)
QWEN_PRM_CODE = '''"""Qwen2ForProcessRewardModel as Qwen2.5-Math-PRM ships it: Qwen2, score = Linear(h, h), ReLU, Linear(h, 2)."""
from torch import nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(),
                                   nn.Linear(config.hidden_size, self.num_labels))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)[0]
        return TokenClassifierOutput(logits=self.score(hidden))
'''


def byte_level(specials: Sequence[str], **named: str) -> Any:
    """A byte-level BPE tokenizer (Qwen2 / Llama-3 style) trained on ``CORPUS`` with ``specials``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=list(specials),
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, **named)


def sentencepiece_like() -> Any:
    """A Metaspace BPE tokenizer that adds ``<s>`` (Mistral / Llama-2 style), newlines apart."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("\n", "isolated"),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    tok.train_from_iterator(CORPUS + ["\n"], trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def _save(model: Any, tokenizer: Any, folder: Path) -> Path:
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_qwen(folder: Path, seed: int = 0, size: dict[str, Any] = SIZE) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForTokenClassification

    tok = byte_level(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"], eos_token="<|im_end|>",
                     pad_token="<|endoftext|>")
    tok.chat_template = QWEN_TEMPLATE
    torch.manual_seed(seed)
    model = Qwen2ForTokenClassification(Qwen2Config(vocab_size=len(tok), num_labels=2, **size))
    return _save(model, tok, folder)


def build_qwen_prm(folder: Path, seed: int = 0, size: dict[str, Any] = VLLM_SIZE) -> Path:
    """Qwen2.5-Math-PRM's own format: architecture ``Qwen2ForProcessRewardModel``, its modelling code
    beside the weights (``auto_map``, so transformers needs trust_remote_code), a two-layer score head."""
    import importlib.util

    import torch
    from transformers import Qwen2Config

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modeling_qwen2_rm.py").write_text(QWEN_PRM_CODE)
    spec = importlib.util.spec_from_file_location(f"tiny_qwen2_rm_{seed}", folder / "modeling_qwen2_rm.py")
    assert spec is not None and spec.loader is not None
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    tok = byte_level(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"], eos_token="<|im_end|>",
                     pad_token="<|endoftext|>")
    tok.chat_template = QWEN_TEMPLATE
    config = Qwen2Config(vocab_size=len(tok), num_labels=2, **size)
    config.architectures = ["Qwen2ForProcessRewardModel"]
    config.auto_map = {"AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"}
    torch.manual_seed(seed)
    _save(code.Qwen2ForProcessRewardModel(config), tok, folder)
    (folder / "modeling_qwen2_rm.py").write_text(QWEN_PRM_CODE)  # save_pretrained may have copied its own
    return folder


def build_math_shepherd(folder: Path, seed: int = 0, size: dict[str, Any] = SIZE) -> Path:
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    tok = sentencepiece_like()
    torch.manual_seed(seed)
    return _save(MistralForCausalLM(MistralConfig(vocab_size=len(tok), **size)), tok, folder)


def build_rlhflow(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_level(["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"],
                     bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")  # no pad token, as Llama 3 ships
    tok.chat_template = LLAMA3_TEMPLATE
    torch.manual_seed(seed)
    return _save(LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), **SIZE)), tok, folder)


def build_skywork(folder: Path, seed: int = 0) -> Path:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = byte_level(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos_token="<|endoftext|>",
                     eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(seed)
    _save(Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), **SIZE)), tok, folder)
    weights = load_file(folder / "model.safetensors")
    weights["v_head.summary.weight"] = torch.randn(1, SIZE["hidden_size"]) * 0.3
    weights["v_head.summary.bias"] = torch.randn(1) * 0.3
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def build_trl(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForTokenClassification

    tok = byte_level(["<|begin_of_text|>", "<|eot_id|>"], bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                     pad_token="<|eot_id|>")
    torch.manual_seed(seed)
    return _save(LlamaForTokenClassification(LlamaConfig(vocab_size=len(tok), num_labels=2, **SIZE)), tok, folder)


# ------------------------------------------------------------------ references: one forward per step prefix


def _last(values: Any) -> float:
    return float(values.reshape(-1)[-1])


def ref_qwen(folder: Path, question: str, steps: Sequence[str]) -> list[float]:
    """Qwen2.5-Math-PRM's card: system + query + the steps joined and ended by <extra_0>, softmax, class 1
    (a folder with its own modelling code is loaded as the card does, with ``AutoModel``)."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    if (folder / "modeling_qwen2_rm.py").exists():  # the card's own way: AutoModel with the checkpoint's code
        from transformers import AutoModel

        model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    else:
        model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    out = []
    for k in range(1, len(steps) + 1):
        messages = [{"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": "<extra_0>".join(steps[:k]) + "<extra_0>"}]
        ids = torch.tensor([tok.encode(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False))])
        with torch.no_grad():
            probs = torch.softmax(model(input_ids=ids)[0], dim=-1)
        out.append(_last(probs[0][ids[0] == tok.encode("<extra_0>")[0]][:, 1]))
    return out


def ref_math_shepherd(folder: Path, question: str, steps: Sequence[str]) -> list[float]:
    """Math-Shepherd's card: f"{question} {output}" with ' ки' after each step; softmax over +/- at each tag."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder).eval()
    candidates = tok.encode("+ -")[1:]
    tag = tok.encode("ки")[-1]
    out = []
    for k in range(1, len(steps) + 1):
        output = "\n".join(f"{s} ки" for s in steps[:k])
        ids = torch.tensor([tok.encode(f"{question} {output}")])
        with torch.no_grad():
            scores = model(ids).logits[:, :, candidates].softmax(dim=-1)[:, :, 0]
        out.append(_last(scores[ids == tag]))
    return out


def ref_rlhflow(folder: Path, question: str, steps: Sequence[str]) -> list[float]:
    """RLHFlow's card: a user turn per step answered '+'; logits at position -3 of +/-, softmax, '+'."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder).eval()
    candidates = [tok.encode("+")[-1], tok.encode("-")[-1]]
    conversation: list[dict[str, str]] = []
    out = []
    for k, step in enumerate(steps):
        conversation += [{"content": question + " " + step if k == 0 else step, "role": "user"},
                         {"content": "+", "role": "assistant"}]
        rendered = tok.apply_chat_template(conversation, tokenize=True)
        ids = torch.tensor([rendered["input_ids"] if hasattr(rendered, "keys") else rendered])
        with torch.no_grad():
            logits = model(ids).logits[:, -3, candidates]
        out.append(_last(logits.softmax(dim=-1)[:, 0]))
    return out


def ref_skywork(folder: Path, question: str, steps: Sequence[str]) -> list[float]:
    """Skywork-o1-PRM's prepare_input: bos + problem + "\\n", each step then the step token; sigmoid(v_head)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder).eval()
    weights = load_file(folder / "model.safetensors")
    w, b = weights["v_head.summary.weight"], weights["v_head.summary.bias"]
    step_token = tok.encode("\n")[-1]
    out = []
    for k in range(1, len(steps) + 1):
        ids, flags = tok.encode(tok.bos_token + question + "\n"), []
        flags = [0] * len(ids)
        for step in steps[:k]:
            piece = tok.encode(step) + [step_token]
            ids += piece
            flags += [0] * (len(piece) - 1) + [1]
        with torch.no_grad():
            hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
        rewards = torch.sigmoid(hidden @ w.T + b)[:, 0]
        out.append(_last(rewards[torch.tensor(flags) == 1]))
    return out


def ref_trl(folder: Path, question: str, steps: Sequence[str], separator: str = "\n") -> list[float]:
    """TRL PRMTrainer.tokenize_row: bos + prompt, each step tokenised alone + the separator; label at its end."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForTokenClassification.from_pretrained(folder).eval()
    sep = tok.encode(separator, add_special_tokens=False)
    out = []
    for k in range(1, len(steps) + 1):
        ids = [tok.bos_token_id] + tok(question, add_special_tokens=False)["input_ids"]
        ends = []
        for step in steps[:k]:
            ids += tok(step, add_special_tokens=False)["input_ids"] + sep
            ends.append(len(ids) - 1)
        with torch.no_grad():
            probs = torch.softmax(model(torch.tensor([ids])).logits[0], dim=-1)
        out.append(float(probs[ends[-1], 1]))
    return out


FAMILY_MODELS: dict[str, tuple[str, Callable[[Path], Path], Callable[[Path, str, Sequence[str]], list[float]]]] = {
    "qwen": ("Qwen2.5-Math-PRM-tiny", build_qwen, ref_qwen),
    "math-shepherd": ("math-shepherd-mistral-7b-prm", build_math_shepherd, ref_math_shepherd),
    "rlhflow": ("Llama3.1-8B-PRM-Deepseek-Data", build_rlhflow, ref_rlhflow),
    "skywork": ("Skywork-o1-Open-PRM-Qwen-2.5-1.5B", build_skywork, ref_skywork),
    "trl": ("trl-prm-tiny", build_trl, ref_trl),
}
