"""A step sampler over the transformers backend: continue a search's prefixes to the next step delimiter.

``HFStepSampler`` wraps an ``HFSampler`` (its model, batching and per-row random streams) as a
``bonbench.api.search.contract.StepSampler``. A prefix's text is the prompt followed by the steps
so far, each ended by the delimiter; the continuation stops at the next delimiter (finish
``"step"``, the delimiter cut off), at EOS (``"end"``) or at max tokens (``"length"``); a ``to_end``
prefix runs with no stop string but the task's, a ``greedy`` one at temperature 0. Row i is drawn
from its prefix's seed, so a continuation does not depend on its batch.

The task's stop strings (``params.stop``: a few-shot base prompt's ``"\n\nProblem:"``) end the
solution: a continuation is cut where one begins, counting the delimiter the prefix already ends
with (the delimiter stops a step before ``"Problem:"`` is generated, so the next step would begin
with it), and its finish is ``"end"``. Without this a base model's search would go on into the next
few-shot problem, and its last ``\boxed{}`` would be that problem's.

Chat prompts (``--prompt-style chat``): ``prompt_text`` renders the messages through the model's
chat template with the assistant turn opened (``step_prompts``), and the steps continue it as raw
text; the tokens read are those of the ordinary chat run's prompt followed by the steps.

What it does not do: reuse a prefix's KV cache between calls: every continuation prefills its whole text again, which
``Continuation.prompt_tokens`` counts (the recomputation vLLM's prefix caching would save).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.records import Continuation, Finish, Prefix, cut_at_task_stop
from bonbench.core.records import Prompt
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.step_prompts import prefix_prompt


class HFStepSampler:
    """The step sampler over ``sampler`` with ``params`` (temperature, top_p, max_tokens per step) (module docstring)."""

    def __init__(self, sampler: HFSampler, params: SamplingParams, delimiter: str = "\n\n") -> None:
        if not delimiter:
            raise ValueError("a step sampler needs a non-empty step delimiter")
        self.sampler, self.params, self.delimiter = sampler, params, delimiter

    def prompt_text(self, prompt: Prompt) -> str:
        """A base prompt's text, or a chat prompt through the model's chat template (module docstring)."""
        return prefix_prompt(prompt, self.sampler.tokenizer, self.sampler.model)

    def text(self, prefix: Prefix) -> str:
        """What the model continues: the prompt and the steps so far, each ended by the delimiter."""
        return prefix.prompt + "".join(step + self.delimiter for step in prefix.steps)

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        out: list[Continuation | None] = [None] * len(prefixes)
        for to_end in (False, True):
            for greedy in (False, True):
                group = [i for i, p in enumerate(prefixes) if p.to_end == to_end and p.greedy == greedy]
                if not group:
                    continue
                params = replace(self.params, stop=self.params.stop if to_end else (self.delimiter,),
                                 temperature=0.0 if greedy else self.params.temperature)
                got = self.sampler.continue_texts([self.text(prefixes[i]) for i in group],
                                                  [prefixes[i].seed for i in group], params)
                for i, (sample, at_stop) in zip(group, got, strict=True):
                    finish: Finish = ("step" if at_stop and not to_end else
                                      "length" if sample.finish_reason == "length" else "end")
                    got_one = Continuation(sample.completion, finish, sample.n_tokens, sample.prompt_tokens or 0)
                    out[i] = cut_at_task_stop(prefixes[i], got_one, self.params.stop, self.delimiter)
        assert all(c is not None for c in out), "every prefix is in one group"
        return [c for c in out if c is not None]
