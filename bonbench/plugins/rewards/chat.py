"""What token ids an outcome reward model reads for a (question, answer) pair: its chat template, or plain text.

The ``input`` option of ``hf:`` and ``vllm:`` reward models (``InputMode``):

- ``chat``: the conversation ``[user: question, assistant: answer]`` rendered by the tokenizer's own
  chat template (``apply_chat_template``), then tokenized as the Skywork-Reward-V2 model card does
  (special tokens on). A template that writes BOS itself, tokenized by a tokenizer that adds BOS
  too (Llama 3, Gemma), gives two BOS tokens, a sequence the reward model never saw in training:
  the duplicate is dropped, so the ids are those of ``apply_chat_template(tokenize=True)`` (the
  ArmoRM card). A template without BOS keeps the one its tokenizer adds.
- ``concat``: question + answer as one text (what TRL's sentiment and TL;DR reward scripts feed).
- ``completion``: the answer alone. ``pair``: a tokenizer text pair, for cross-encoders (``hf:`` only).

Unset, ``input`` is ``chat`` when the tokenizer has a chat template and ``concat`` when it has none
(``resolve_input``). Texts longer than ``max_length`` tokens lose their beginning: the answer being
judged is at the end. ``template_hash`` names the template, so that a reward model's fingerprint
changes with it.

This module loads no model and does not batch or pad (the backends do).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

from bonbench.core.errors import BonbenchError

InputMode = Literal["chat", "concat", "completion", "pair"]
INPUT_MODES: tuple[InputMode, ...] = ("chat", "concat", "completion", "pair")


def has_template(tokenizer: Any) -> bool:
    """True if the tokenizer ships a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def template_hash(tokenizer: Any) -> str | None:
    """sha256 of the tokenizer's chat template (a name -> template mapping hashed whole); None without one."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return None
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_input(tokenizer: Any, asked: str | None, source: str, allowed: Sequence[str] = INPUT_MODES) -> InputMode:
    """The input mode a model reads: ``asked``, or chat / concat by whether it has a template (module docstring)."""
    if asked is None:
        return "chat" if has_template(tokenizer) else "concat"
    if asked not in allowed:
        raise BonbenchError(f"reward model option input={asked!r} is not one of {', '.join(allowed)}")
    if asked == "chat" and not has_template(tokenizer):
        raise BonbenchError(f"reward model {source!r} has no chat template, so input=chat cannot render it: "
                            "use input=concat (question + answer as one text) or input=completion")
    return asked  # type: ignore[return-value]  # checked against allowed, a subset of INPUT_MODES


def chat_ids(tokenizer: Any, question: str, answer: str) -> list[int]:
    """The token ids of ``[user: question, assistant: answer]`` under the model's template, one BOS."""
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    ids = list(tokenizer(text)["input_ids"])
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None and len(ids) > 1 and ids[0] == bos and ids[1] == bos:
        ids = ids[1:]  # the template's BOS and the tokenizer's: the model was trained on one
    return ids


def encode(tokenizer: Any, mode: InputMode, prompts: Sequence[str], completions: Sequence[str],
           max_length: int) -> dict[str, list[list[int]]]:
    """Token ids (and the tokenizer's other per-token fields) of every pair, unpadded, left-truncated.

    The tokenizer must have ``truncation_side = "left"`` (the backends set it) for the text modes.
    """
    if mode == "chat":
        ids = [chat_ids(tokenizer, p, c)[-max_length:] for p, c in zip(prompts, completions, strict=True)]
        return {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]}
    if mode == "pair":
        enc = tokenizer(list(prompts), list(completions), truncation="only_first", max_length=max_length)
    else:
        texts = [p + c for p, c in zip(prompts, completions, strict=True)] if mode == "concat" else list(completions)
        enc = tokenizer(texts, truncation=True, max_length=max_length)
    return {k: [list(v) for v in rows] for k, rows in dict(enc).items()}
