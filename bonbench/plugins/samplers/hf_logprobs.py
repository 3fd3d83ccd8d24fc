"""Teacher-forced log-probabilities of stored samples under a model (transformers), for KL to a
reference policy.

``TeacherForcedLogprob`` has the verifier shape (name, version, fingerprint, ``score``), so the
pipeline stores its values in ``scores/<name>.jsonl`` keyed by (problem_id, sample_idx) and reuses
them only for the same model fingerprint. Its value for a sample is

    log p(y | x) = sum_t log softmax(logits_t / T)[y_t]

over the tokens of the completion *text* re-tokenized after the rendered prompt (the same token ids
for every model that shares the tokenizer), at temperature ``T``. The policy is scored at the run's
temperature (the distribution it sampled from) and the reference at 1, so that their difference
averaged over samples estimates KL(policy || reference); a model scored against itself gives 0
exactly. What is left out, on purpose, and the same on both sides: the end of the sample (EOS or a
stop string that was trimmed off the text), and top-p truncation (KL is refused for top-p < 1,
where the sampling policy has zero-probability tokens the reference does not).

This module loads models (and imports torch) lazily, on the first ``score``, so a run that asks
for no KL never pays for torch; it does not sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bonbench.core.config import model_slug
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.records import Grade, Problem, Prompt, Sample, Score

VERSION = 1


class TeacherForcedLogprob:
    """log p(completion | rendered prompt) under ``model`` at ``temperature`` (see the module docstring)."""

    uses_grades = False
    version = VERSION

    def __init__(self, model: ResolvedModel, render: Callable[[Problem], Prompt], *, role: str, temperature: float = 1.0,
                 dtype: str = "float32", device: str | None = None, batch_size: int = 16) -> None:
        if temperature <= 0:
            raise BonbenchError("KL needs a sampling temperature > 0 (greedy decoding has no density to compare)")
        self.resolved = model
        self.render = render
        self.temperature = float(temperature)
        self.dtype = dtype
        self._device = device  # None: cuda when available, chosen when the model loads
        self.batch_size = batch_size
        suffix = "" if self.temperature == 1.0 else f"-t{self.temperature:g}"
        self.name = f"lp-{role}-{model_slug(model.name)}{suffix}"
        self.fingerprint = f"{model.fingerprint}|T={self.temperature:g}|{dtype}"
        self._tokenizer: Any = None
        self._lm: Any = None

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(self.resolved.path, revision=self.resolved.revision)
            except OSError as exc:
                raise BonbenchError(f"cannot load the tokenizer of '{self.resolved.name}': {exc}".splitlines()[0]) from exc
        return self._tokenizer

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self._device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def _model(self) -> Any:
        if self._lm is None:
            import torch
            from transformers import AutoModelForCausalLM

            try:
                self._lm = AutoModelForCausalLM.from_pretrained(self.resolved.path, revision=self.resolved.revision,
                                                                dtype=getattr(torch, self.dtype))
            except OSError as exc:
                raise BonbenchError(f"cannot load model '{self.resolved.name}': {exc}".splitlines()[0]) from exc
            self._lm.to(self.device).eval()
        return self._lm

    def encode(self, prompt: Prompt, completion: str) -> tuple[list[int], list[int]]:
        """(prompt ids, completion ids): see ``encode_pair``."""
        return encode_pair(self.tokenizer, prompt, completion)

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        out: list[Score] = []
        encoded = [self.encode(self.render(problems[s.problem_id]), s.completion) for s in samples]
        order = sorted(range(len(samples)), key=lambda i: len(encoded[i][0]) + len(encoded[i][1]))
        values: dict[int, float] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            for i, v in zip(idx, self._batch([encoded[i] for i in idx]), strict=True):
                values[i] = v
        for i, s in enumerate(samples):
            # cost: the model read the prompt and the completion, in one forward
            out.append(Score(s.problem_id, s.sample_idx, self.name, values[i], tokens=len(encoded[i][0]) + len(encoded[i][1]),
                             calls=1))
        return out

    def _batch(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        import torch  # imported when a KL is scored (see the module docstring)

        lm = self._model()
        seqs = [p + c for p, c in pairs]
        width = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):  # right padding: positions of real tokens are unchanged
            ids[r, :len(s)] = torch.tensor(s)
            mask[r, :len(s)] = 1
        with torch.inference_mode():
            logits = lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
            logp = torch.log_softmax(logits / self.temperature, dim=-1)
            out = []
            for r, (p, c) in enumerate(pairs):
                if not c:
                    out.append(0.0)
                    continue
                # token t of the completion is predicted at position len(p) + t - 1
                pos = torch.arange(len(p) - 1, len(p) + len(c) - 1, device=logp.device)
                tgt = torch.tensor(c, device=logp.device)
                out.append(float(logp[r, pos, tgt].double().sum()))
        return out


def encode_pair(tokenizer: Any, prompt: Prompt, completion: str) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids): the prompt as the samplers encode it (chat prompts through the
    template, which writes BOS itself), the completion's text without special tokens. Shared by KL
    scoring and the trainer, so both score the same token ids."""
    if prompt.messages is None:
        ids = list(tokenizer(prompt.text, add_special_tokens=True)["input_ids"])
    else:
        text = tokenizer.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=False)
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ids, list(tokenizer(completion, add_special_tokens=False)["input_ids"])


def same_tokenizer(a: TeacherForcedLogprob, b: TeacherForcedLogprob) -> bool:
    """True if both models map text to the same token ids (their vocabularies are equal)."""
    return a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
