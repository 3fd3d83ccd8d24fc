"""Prompt builders that know no benchmark: few-shot text for base models, chat messages for
instruct models.

``fewshot_text`` writes each (question, answer) exemplar as ``<question prefix><question>`` and
``<answer prefix><answer>``, then the target question with an open answer prefix, so that the
model's continuation is the answer. What a benchmark asks, its exemplars and its stop strings are
the tasks' (``bonbench_tasks.common`` holds those the tasks share).

This module builds strings only: it does not tokenize, apply chat templates or call a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["chat_messages", "fewshot_text"]


def fewshot_text(
    examples: Sequence[tuple[str, str]],
    problem: str,
    *,
    question_prefix: str = "Problem:\n",
    answer_prefix: str = "Solution:\n",
    separator: str = "\n\n",
    instruction: str = "",
) -> str:
    """``instruction``, then each (question, answer) exemplar, then ``problem`` with an open answer.

    The result ends with ``answer_prefix`` so that the model's continuation is the answer.
    """
    blocks = [instruction.strip()] if instruction.strip() else []
    for question, answer in examples:
        blocks.append(f"{question_prefix}{question.strip()}{separator}{answer_prefix}{answer.strip()}")
    blocks.append(f"{question_prefix}{problem.strip()}{separator}{answer_prefix}".rstrip(" "))
    return separator.join(blocks)


def chat_messages(system: str | None, user: str) -> tuple[Mapping[str, str], ...]:
    """Chat messages: an optional system message, then one user message."""
    msgs: list[Mapping[str, str]] = []
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": user})
    return tuple(msgs)
