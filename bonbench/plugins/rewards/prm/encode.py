"""A (question, steps) pair -> the token ids a PRM reads and the positions where its step scores are.

``StepEncoder`` builds the input exactly as the family's model card does (``family`` docstring)
and finds one read position per step, so that one forward pass gives every step's score. Building
it checks the tokenizer (the separator or tag is one token, the ``+``/``-`` tokens exist, a chat
family has a chat template) and fails with one line naming the fix. It needs a tokenizer only: no
torch, no model.

Longer than ``max_length`` (the PRM's positions unless the user asks for fewer): the start of the
question is cut, token by token, and the input rebuilt from the rest, so the template and every
step marker stay; ``Encoded.cut`` says how many question tokens went. Steps that do not fit even
with no question left are never dropped: that is one error line naming ``max_length``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.prm.family import PRMFamily


@dataclass(frozen=True)
class Encoded:
    """One sample's model input and the positions read for its steps (one per step, in order)."""

    ids: tuple[int, ...]
    positions: tuple[int, ...]
    cut: int = 0  # tokens cut from the start of the question to fit max_length (module docstring)


class StepEncoder:
    """Encodes samples for ``family`` with ``tokenizer`` (module docstring)."""

    def __init__(self, family: PRMFamily, tokenizer: Any, source: str, max_length: int | None = None) -> None:
        self.family, self.tokenizer, self.source, self.max_length = family, tokenizer, source, max_length
        self.mark_id: int | None = None
        self.mark_ids: list[int] = []
        self.class_ids: list[int] = []
        fix = f"pass ?family= with the right family, or use the tokenizer saved with the model {source!r}"
        if family.marker == "separator":
            self.mark_id = self._single_token(family.mark, fix)
        elif family.marker == "tag":
            ids = tokenizer.encode(family.mark.strip(), add_special_tokens=False)
            if not ids or family.mark.strip() not in tokenizer.convert_ids_to_tokens(ids[-1]):
                raise BonbenchError(f"the tokenizer of PRM {source!r} has no token for the step tag "
                                    f"{family.mark.strip()!r}: {fix}")
            self.mark_id = ids[-1]
        elif family.marker == "pieces":
            self.mark_ids = tokenizer.encode(family.mark, add_special_tokens=False)
            if not self.mark_ids:
                raise BonbenchError(f"the tokenizer of PRM {source!r} encodes the step separator {family.mark!r} "
                                    f"as no token: {fix}")
        for text in family.tokens:
            ids = tokenizer.encode(text, add_special_tokens=False)
            if not ids or text not in tokenizer.convert_ids_to_tokens(ids[-1]):
                raise BonbenchError(f"the tokenizer of PRM {source!r} has no {text!r} token, which the {family.name} "
                                    f"family reads the step score from: {fix}")
            self.class_ids.append(ids[-1])
        if len(set(self.class_ids)) != len(self.class_ids):
            raise BonbenchError(f"the tokenizer of PRM {source!r} maps {', '.join(family.tokens)} to one token: {fix}")
        if family.chat and not getattr(tokenizer, "chat_template", None):
            raise BonbenchError(f"the tokenizer of PRM {source!r} has no chat template, which the {family.name} family "
                                f"reads its input with: {fix}")

    def _single_token(self, text: str, fix: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise BonbenchError(f"the tokenizer of PRM {self.source!r} has no {text!r} token (it splits it into "
                                f"{len(ids)}), the step separator of the {self.family.name} family: {fix}")
        return int(ids[0])

    def encode(self, question: str, steps: Sequence[str]) -> Encoded:
        """The model input for ``steps`` of an answer to ``question`` (no steps: no tokens), the question's
        start cut to fit ``max_length`` (module docstring)."""
        encoded = self._encode(question, steps)
        if self.max_length is None or len(encoded.ids) <= self.max_length:
            return encoded
        words = self.tokenizer.encode(question, add_special_tokens=False)
        cut = 0
        while cut < len(words):  # re-tokenising the rest may merge differently: measure again each time
            cut = min(len(words), cut + len(encoded.ids) - self.max_length)
            encoded = self._encode(self.tokenizer.decode(words[cut:]), steps)
            if len(encoded.ids) <= self.max_length:
                return Encoded(encoded.ids, encoded.positions, cut)
        raise BonbenchError(f"PRM {self.source!r} cannot read a completion's {len(steps)} steps in max_length="
                            f"{self.max_length} tokens even with no question ({len(encoded.ids)} tokens): cap the "
                            "policy's --max-tokens, or pass ?max_length= up to the positions the PRM was trained on")

    def _encode(self, question: str, steps: Sequence[str]) -> Encoded:
        if not steps:
            return Encoded((), ())
        f = self.family
        if f.marker == "pieces":
            return self._pieces(question, steps)
        if f.marker == "turn":
            return self._turns(question, steps)
        body = f.step_join.join(s + f.mark for s in steps)
        if f.chat:
            messages = ([{"role": "system", "content": f.system}] if f.system is not None else []) + [
                {"role": "user", "content": question}, {"role": "assistant", "content": body}]
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        else:
            text = question + f.prompt_sep + body
        ids = self.tokenizer.encode(text)
        positions = [i + f.offset for i, t in enumerate(ids) if t == self.mark_id]
        return self._checked(ids, positions, steps)

    def _pieces(self, question: str, steps: Sequence[str]) -> Encoded:
        bos = self.tokenizer.bos_token_id
        ids = ([bos] if self.family.bos and bos is not None else [])
        ids += self.tokenizer.encode(question + self.family.prompt_sep, add_special_tokens=False)
        positions = []
        for step in steps:
            ids += self.tokenizer.encode(step, add_special_tokens=False) + self.mark_ids
            positions.append(len(ids) - 1)
        return self._checked(ids, positions, steps)

    def _turns(self, question: str, steps: Sequence[str]) -> Encoded:
        reply = self.family.mark
        conversation: list[dict[str, str]] = []
        replies, prefixes = [], []  # where each reply starts in the rendering of the turns up to it
        for k, step in enumerate(steps):
            conversation += [{"role": "user", "content": f"{question} {step}" if k == 0 else step},
                             {"role": "assistant", "content": reply}]
            prefixes.append(self.tokenizer.apply_chat_template(conversation, tokenize=False))
            replies.append(prefixes[-1].rindex(reply))
        text = prefixes[-1]
        if not all(text.startswith(p) for p in prefixes):  # the template must only append turns
            raise BonbenchError(f"the chat template of PRM {self.source!r} renders earlier turns differently as the "
                                "conversation grows, so one forward cannot score every turn: pass ?family=")
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = {start: i for i, (start, end) in enumerate(enc["offset_mapping"]) if end > start}
        if any(c not in starts for c in replies):
            raise BonbenchError(f"the tokenizer of PRM {self.source!r} does not keep the reply {reply!r} as a token of "
                                "its own in the chat template: pass ?family= with the right family")
        return self._checked(enc["input_ids"], [starts[c] + self.family.offset for c in replies], steps)

    def _checked(self, ids: Sequence[int], positions: Sequence[int], steps: Sequence[str]) -> Encoded:
        if len(positions) != len(steps):
            raise BonbenchError(f"PRM {self.source!r} ({self.family.name} family) found {len(positions)} step markers "
                                f"for {len(steps)} steps: its tokenizer merges the marker {self.family.mark!r} with "
                                "the text around it; pass ?family= with the right family")
        return Encoded(tuple(int(t) for t in ids), tuple(positions))
