"""One description of a process reward model (``PRMFamily``), the public families, and step aggregations.

A PRM family says how a completion becomes steps, how the model's input marks each step's end,
which position and head is read there, and how the logits become the probability that the step is
right. The presets follow each model card:

- ``qwen`` (Qwen2.5-Math-PRM-7B/72B): chat template with the card's system prompt; the steps in the
  assistant turn, each followed by the ``<extra_0>`` separator; a two-class head read at every
  separator, softmax, class 1.
- ``math-shepherd`` (peiyi9979/math-shepherd-mistral-7b-prm): ``"{question} {steps}"``, each step
  followed by the tag ``" ки"``; the LM head's logits of ``+`` and ``-`` at the tag, softmax, ``+``.
- ``rlhflow`` (RLHFlow/Llama3.1-8B-PRM-{Mistral,Deepseek}-Data): one user turn per step (the first
  carries the question), each answered ``+``; the LM head at the token before each ``+`` reply,
  softmax over ``+``/``-``, ``+``.
- ``skywork`` (Skywork/Skywork-o1-Open-PRM-Qwen-2.5-{1.5B,7B}): ``bos + question + "\\n"``, then each
  step tokenised alone and followed by the ``"\\n"`` token; a one-output value head, sigmoid, read
  at each step's last token.
- ``trl`` (a token classifier trained with TRL's ``PRMTrainer``): ``bos + prompt``, then each step
  tokenised alone and followed by the step separator (``"\\n"``); two classes, softmax, class 1, read
  at each step's last token.

Steps: the completion is cut on the family's ``split`` text; pieces are stripped and empty ones
dropped, and a step's own copies of the marker text are removed (they would read as extra steps).
A completion with no step scores ``bonbench.api.steps.EMPTY_SCORE`` (0.0, the floor of a probability: an empty answer
loses to any scored one) with no forward pass.

This module imports neither torch nor transformers; ``encode`` and ``hf`` use the record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from bonbench.core.errors import BonbenchError

Marker = Literal["separator", "tag", "turn", "pieces"]
Head = Literal["classes", "lm_tokens", "value"]
Squash = Literal["softmax", "sigmoid"]
Loader = Literal["token_classifier", "causal_lm", "backbone"]
FamilyName = Literal["qwen", "math-shepherd", "rlhflow", "skywork", "trl"]

QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class PRMFamily:
    """How one family of PRMs reads a completion (module docstring for the presets).

    ``marker``: ``separator`` (a special token after each step, found by id), ``tag`` (a text tag
    after each step, found by the id of its last token), ``turn`` (one chat turn per step, read one
    token before each reply) or ``pieces`` (each step tokenised alone, ``mark`` appended, read at
    the piece's last token). ``head``: ``classes`` (a token classifier's logits), ``lm_tokens``
    (the LM head's logits of ``tokens``) or ``value`` (a one-output value head). ``index``: the class
    (or token) that means "right"; ``offset``: read at the marker (0) or the token before it (-1).
    """

    name: str
    about: str
    marker: Marker
    mark: str
    head: Head
    loader: Loader
    split: str = "\n\n"
    squash: Squash = "softmax"
    index: int = 1
    offset: int = 0
    tokens: tuple[str, ...] = ()
    chat: bool = False
    system: str | None = None
    prompt_sep: str = ""  # text between the question and the first step (not chat families)
    step_join: str = ""  # text after a step's marker, before the next step (``tag``)
    bos: bool = False  # prepend the tokenizer's BOS id (``pieces``)
    remote_code: bool = False  # the real checkpoints ship their own modelling code

    def steps(self, completion: str) -> list[str]:
        """The completion's steps (module docstring)."""
        return [step for step in map(self.clean, completion.split(self.split)) if step]

    def clean(self, step: str) -> str:
        """One step as the model reads it: stripped, its own copies of the marker text removed."""
        if self.marker in ("separator", "tag") and self.mark.strip():
            step = step.replace(self.mark.strip(), "")
        return step.strip()


FAMILIES: dict[str, PRMFamily] = {f.name: f for f in (
    PRMFamily("qwen", "Qwen2.5-Math-PRM: <extra_0> after each step in the assistant turn, two-class head",
              marker="separator", mark="<extra_0>", head="classes", loader="token_classifier", chat=True,
              system=QWEN_SYSTEM, remote_code=True),
    PRMFamily("math-shepherd", "Math-Shepherd: the tag ' ки' after each step, P(+) against P(-) from the LM head",
              marker="tag", mark=" ки", head="lm_tokens", loader="causal_lm", tokens=("+", "-"), index=0,
              prompt_sep=" ", step_join="\n"),
    PRMFamily("rlhflow", "RLHFlow Llama PRMs: one user turn per step answered '+', P(+) against P(-)",
              marker="turn", mark="+", head="lm_tokens", loader="causal_lm", tokens=("+", "-"), index=0,
              offset=-1, chat=True),
    PRMFamily("skywork", "Skywork-o1-Open-PRM: a value head, sigmoid at the last token of each line",
              marker="pieces", mark="\n", head="value", loader="backbone", split="\n", squash="sigmoid", index=0,
              prompt_sep="\n", bos=True),
    PRMFamily("trl", "a token classifier trained with TRL's PRMTrainer: two classes at each step's separator",
              marker="pieces", mark="\n", head="classes", loader="token_classifier", bos=True),
)}


def detect_family(source: str, config: Any) -> PRMFamily:
    """The family of the PRM at ``source`` from its config (architecture, labels) and name, or a
    one-line error asking for ``?family=``."""
    archs = [str(a) for a in (getattr(config, "architectures", None) or [])]
    name = source.lower()
    if any("ProcessRewardModel" in a for a in archs):
        return FAMILIES["qwen"]
    if "math-shepherd" in name or "math_shepherd" in name:
        return FAMILIES["math-shepherd"]
    if "rlhflow" in name or re.search(r"llama3\.1-8b-prm", name):
        return FAMILIES["rlhflow"]
    if "skywork" in name and "prm" in name:
        return FAMILIES["skywork"]
    if any(a.endswith("ForTokenClassification") for a in archs) and int(getattr(config, "num_labels", 0)) == 2:
        return FAMILIES["trl"]
    raise BonbenchError(f"cannot tell which process reward model family {source!r} is (architectures: "
                        f"{', '.join(archs) or 'none'}; no step marker known for it): pass "
                        f"?family={'|'.join(FAMILIES)}, e.g. prm:{source}?family=trl")

