"""Shared prompt helpers: few-shot text for base models, chat messages for instruct models, and
the MATH exemplars / renderer used by the math-family tasks (math, math500, functional_math,
mathodyssey).

Base models get Minerva-style plain text::

    Problem:
    <problem>

    Solution:
    <worked solution> The answer is $\\boxed{<answer>}$.

repeated for each exemplar, then the target problem and an open "Solution:". A base model that has
answered tends to start a new "Problem:" block, so ``MATH_STOP`` cuts there. Chat models get one
user message asking for step-by-step reasoning and the final answer in ``\\boxed{}``.

This module builds strings only: it does not tokenize, apply chat templates or call a model.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from bonbench.core.records import Problem, Prompt

__all__ = [
    "fewshot_text",
    "chat_messages",
    "MATH_FEWSHOT",
    "MATH_STOP",
    "MATH_CHAT_INSTRUCTION",
    "math_prompt",
]


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


# Our own short exemplars (not copied from Minerva): each shows the format the grader extracts,
# and together they show an integer, a fraction and a radical as final answers.
MATH_FEWSHOT: tuple[tuple[str, str], ...] = (
    (
        "Solve for $x$: $2x - 7 = 11$.",
        "Adding $7$ to both sides gives $2x = 18$, and dividing by $2$ gives $x = 9$. "
        "The answer is $\\boxed{9}$.",
    ),
    (
        "A bag holds $3$ red marbles and $5$ blue marbles. One marble is drawn at random. "
        "What is the probability that it is red? Express your answer as a common fraction.",
        "There are $3 + 5 = 8$ marbles and $3$ of them are red, so the probability is $\\frac{3}{8}$. "
        "The answer is $\\boxed{\\frac{3}{8}}$.",
    ),
    (
        "Simplify $\\sqrt{50}$.",
        "Since $50 = 25 \\cdot 2$ and $25$ is a perfect square, $\\sqrt{50} = \\sqrt{25}\\cdot\\sqrt{2} = 5\\sqrt{2}$. "
        "The answer is $\\boxed{5\\sqrt{2}}$.",
    ),
    (
        "What is the distance between the points $(1, 2)$ and $(4, 6)$?",
        "The distance is $\\sqrt{(4-1)^2 + (6-2)^2} = \\sqrt{9 + 16} = \\sqrt{25} = 5$. "
        "The answer is $\\boxed{5}$.",
    ),
)

# "\n\nProblem:" is where a base model starts inventing the next exemplar; the single-newline form
# catches models that skip the blank line.
MATH_STOP: tuple[str, ...] = ("\n\nProblem:", "\nProblem:")

MATH_CHAT_INSTRUCTION = (
    "Solve the following math problem step by step. "
    "Put your final answer within \\boxed{{}}.\n\n{problem}"
)


def math_prompt(problem: Problem, style: str, fewshot: int = 4) -> Prompt:
    """The MATH prompt for ``problem``: few-shot text (style "base") or a chat message ("chat")."""
    if style == "base":
        if not 0 <= fewshot <= len(MATH_FEWSHOT):
            raise ValueError(f"fewshot must be between 0 and {len(MATH_FEWSHOT)}, got {fewshot}")
        text = fewshot_text(MATH_FEWSHOT[:fewshot], problem.input)
        return Prompt(problem_id=problem.id, text=text, stop=MATH_STOP)
    if style == "chat":
        return Prompt(problem_id=problem.id,
                      messages=chat_messages(None, MATH_CHAT_INSTRUCTION.format(problem=problem.input.strip())))
    raise ValueError(f"unknown prompt style {style!r}; use 'base' or 'chat'")
