"""The text a step sampler continues for a run's rendered prompt: a base prompt as is, a chat prompt
through the policy's chat template.

search-and-learn runs an instruct policy with its chat template: the prompt is the templated user
turn followed by the generation prompt (the assistant turn opened), and the partial solution, the
steps so far each ended by the delimiter, is appended to it as raw text continuing the assistant
turn. ``prefix_prompt(prompt, tokenizer, model)`` returns that templated text, so every step
sampler (transformers, vLLM, OpenAI-compatible ``/v1/completions``) continues the same string.

The BOS rule: a chat template writes the BOS token itself (Gemma's ``<bos>``, Llama 3's
``<|begin_of_text|>``) and so does a tokenizer that adds special tokens, so the ordinary samplers
tokenize templated text with ``add_special_tokens=False``. A step sampler's prefix is text that its
engine tokenizes with special tokens (transformers here, vLLM's ``LLM.generate``, a server's
``/v1/completions``), so the template's leading BOS text is dropped where the tokenizer adds BOS
itself: the tokens the engine reads are then exactly those of the ordinary chat run's prompt
(``tests/test_search_chat.py``). A tokenizer without BOS (Qwen's) is left alone.

What it does not do: load a tokenizer (the backends own theirs), render the PRM's text (the PRM
family's own format: ``bonbench.plugins.rewards.prm``), or choose the prompt style (the run does).
"""

from __future__ import annotations

from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt


def adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` puts its BOS token in front of text it encodes with special tokens."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    ids = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    return len(ids) == len(plain) + 1 and ids[0] == bos and ids[1:] == plain


def chat_prefix_text(tokenizer: Any, messages: Any, model: str) -> str:
    """``messages`` through ``tokenizer``'s chat template with the generation prompt, its leading BOS
    text dropped where the tokenizer adds BOS itself (module docstring)."""
    if not getattr(tokenizer, "chat_template", None):
        raise BonbenchError(f"model '{model}' has no chat template but the prompt is a chat: pass --prompt-style base")
    text = str(tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False))
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos) and adds_bos(tokenizer):  # the engine's tokenizer writes it again
        text = text[len(bos):]
    return text


def prefix_prompt(prompt: Prompt, tokenizer: Any, model: str) -> str:
    """The text a search continues for ``prompt``: its text, or its messages through the chat template."""
    if prompt.messages is None:
        assert prompt.text is not None, "a Prompt has text or messages"
        return prompt.text
    return chat_prefix_text(tokenizer, prompt.messages, model)
