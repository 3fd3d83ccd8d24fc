"""The step sampler over the transformers backend (``HFStepSampler``) on a tiny random Gemma 3 built here."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_scripts import TableScorer, hashed_score
from test_sampler_hf import build_tiny_model

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import make_strategy
from bonbench.api.search.records import Prefix, SearchProblem
from bonbench.core.models import ResolvedModel
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_steps import HFStepSampler

DELIMITER = "\n"  # the tiny vocabulary's one-token line break: steps end often enough to test


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> ResolvedModel:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-steps"))


def step_sampler(model: ResolvedModel, batch_size: int = 64, max_tokens: int = 12) -> HFStepSampler:
    hf = HFSampler(model, seed=0, dtype="float32", batch_size=batch_size, device="cpu")
    return HFStepSampler(hf, SamplingParams(temperature=1.0, max_tokens=max_tokens), DELIMITER)


def test_continuations_stop_at_the_delimiter_and_follow_their_seeds(tiny: ResolvedModel) -> None:
    sampler = step_sampler(tiny)
    prefixes = [Prefix("ab:", ("cd", "e a") if i % 2 else (), seed=100 + i) for i in range(24)]
    got = sampler.continue_prefixes(prefixes)
    finishes = {c.finish for c in got}
    assert "step" in finishes and finishes <= {"step", "end", "length"}
    for c in got:
        assert DELIMITER not in c.text and c.tokens >= 1
    for p, c in zip(prefixes, got, strict=True):
        assert c.prompt_tokens == 1 + len(sampler.text(p))  # <bos> and one token per character
    # a continuation is a function of its prefix and seed, not of its batch or neighbours
    alone = [step_sampler(tiny, batch_size=1).continue_prefixes([p])[0] for p in prefixes[:6]]
    assert alone == got[:6]
    assert len({c.text for c in got}) > 3  # the seeds draw different steps
    # greedy rows are one path whatever their seed; to_end rows never stop at the delimiter
    greedy = sampler.continue_prefixes([Prefix("ab:", (), seed=s, greedy=True) for s in range(4)])
    assert len({c.text for c in greedy}) == 1
    ends = sampler.continue_prefixes([Prefix("ab:", (), seed=s, to_end=True) for s in range(8)])
    assert all(c.finish in ("end", "length") for c in ends)


def test_a_beam_search_over_the_tiny_model(tiny: ResolvedModel) -> None:
    sampler = step_sampler(tiny, max_tokens=8)
    problem = SearchProblem("p", "ab:", "ab:")
    got = make_strategy("beam", width=2, max_iterations=3).search(problem, sampler, TableScorer(
        lambda p: hashed_score(p, "hf")), n=4, seed=0)
    again = make_strategy("beam", width=2, max_iterations=3).search(problem, step_sampler(tiny, max_tokens=8), TableScorer(
        lambda p: hashed_score(p, "hf")), n=4, seed=0)
    assert [c.text for c in got.candidates] == [c.text for c in again.candidates]
    # every candidate ended: at EOS, at max tokens, or with a blank step (the model wrote the delimiter at once)
    assert all(c.finish != "step" or not got.tree[c.leaf].step.strip() for c in got.candidates)
    assert got.cost.generated_tokens == sum(n.tokens for n in got.tree) > 0
    assert got.cost.prompt_tokens > got.cost.continuations  # every continuation re-read its prefix


def test_an_empty_delimiter_is_refused(tiny: ResolvedModel, tmp_path: Path) -> None:
    hf = HFSampler(tiny, seed=0, dtype="float32", batch_size=4, device="cpu")
    with pytest.raises(ValueError, match="non-empty step delimiter"):
        HFStepSampler(hf, SamplingParams(), "")
