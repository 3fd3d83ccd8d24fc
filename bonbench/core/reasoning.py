"""Reasoning models' completions: the trace up to the closing think tag, and the final answer after it.

A reasoning model (DeepSeek-R1, Qwen3, QwQ) writes its reasoning, a closing tag (``</think>`` by
default), then its answer. What a verifier reads of a completion is chosen by ``ThinkMode``:

- ``strip`` (the default): the text after the *last* closing tag, leading whitespace removed. A
  completion with no tag at all is a plain answer and is read whole. A completion whose opening tag
  (``<think>`` for ``</think>``) was never closed stopped while reasoning (out of tokens): it has no
  answer, and the verifier reads the empty text.
- ``require``: like ``strip``, but a completion without the closing tag has no answer (empty text)
  even when it has no opening tag either, for chat templates that open the think block in the
  prompt (Qwen3, DeepSeek-R1), whose truncated completions carry no tag at all.
- ``keep``: the whole completion, trace included.

``reasoning_token_count`` splits a sampled completion's tokens the same way (``strip``'s reading),
for ``Sample.reasoning_tokens``. This module reads text only: no model, no tokenizer of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

ThinkMode = Literal["strip", "require", "keep"]
THINK_MODES: tuple[ThinkMode, ...] = ("strip", "require", "keep")
DEFAULT_TAG = "</think>"


def opening_tag(tag: str) -> str | None:
    """The opening tag of a closing one (``</think>`` -> ``<think>``); None for a tag not of that form."""
    return "<" + tag[2:] if tag.startswith("</") and len(tag) > 3 else None


def answer_start(text: str, tag: str = DEFAULT_TAG, require: bool = False) -> int | None:
    """Where the final answer starts in ``text``: after the last ``tag``; 0 when there is no tag (a
    plain answer; None under ``require``); None when an opening tag was never closed (no answer)."""
    end = text.rfind(tag)
    if end >= 0:
        return end + len(tag)
    opening = opening_tag(tag)
    return None if require or (opening is not None and opening in text) else 0


def final_answer(text: str, mode: ThinkMode = "strip", tag: str = DEFAULT_TAG) -> str:
    """The text a verifier reads of a completion under ``mode`` (module docstring)."""
    if mode == "keep":
        return text
    start = answer_start(text, tag, require=mode == "require")
    return "" if start is None else text[start:].lstrip()


def reasoning_token_count(ids: Sequence[int], text: str, tokenizer: Any, tag: str = DEFAULT_TAG) -> int:
    """How many of a completion's sampled tokens ``ids`` (decoded: ``text``) are reasoning: those up to
    and including the last closing tag; all of them when the tag was opened and never closed; 0 when
    there is no tag.

    Exact when the tag is one token of the vocabulary (Qwen3, DeepSeek-R1: the count is its last
    position + 1); otherwise the trace is tokenized again, which can differ from the sampled ids by a
    token where the tag meets the answer.
    """
    start = answer_start(text, tag)
    if start is None:
        return len(ids)
    if start == 0:
        return 0
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)  # absent from some non-HF tokenizers (mistral_common)
    tag_id = convert(tag) if convert is not None else None
    if isinstance(tag_id, int) and tag_id != getattr(tokenizer, "unk_token_id", None) and tag_id in ids:
        return len(ids) - list(reversed(ids)).index(tag_id)
    return min(len(ids), len(tokenizer(text[:start], add_special_tokens=False)["input_ids"]))


def reasoning_piece_count(pieces: Sequence[str], text: str, tag: str = DEFAULT_TAG) -> int:
    """The same count from the text of each sampled token (an OpenAI-compatible server's logprob tokens,
    whose concatenation is ``text``): the tokens that end at or before the end of the last tag."""
    start = answer_start(text, tag)
    if start is None:
        return len(pieces)
    covered = 0
    for n, piece in enumerate(pieces):
        if covered >= start:
            return n
        covered += len(piece)
    return len(pieces)
