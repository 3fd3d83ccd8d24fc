"""``steps.step_sampler``: each backend's sampler object gets its step sampler; any other backend is
one error naming the ones that support steps (vLLM's: tests/test_search_vllm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sampler_hf import build_tiny_model
from test_search_openai import StepServer

from bonbench.api.sampler import SamplingParams
from bonbench.core.served import OpenAIOptions, served_model
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_steps import HFStepSampler
from bonbench.plugins.samplers.openai_backend import OpenAISampler
from bonbench.plugins.samplers.openai_steps import OpenAIStepSampler
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.plugins.samplers.steps import step_sampler

PARAMS = SamplingParams(temperature=0.7, max_tokens=9)


def test_each_backend_gets_its_step_sampler(tmp_path: Path) -> None:
    hf = HFSampler(build_tiny_model(tmp_path / "tiny"), seed=0, dtype="float32", batch_size=4, device="cpu")
    got = step_sampler(hf, PARAMS, "\n")
    assert isinstance(got, HFStepSampler) and (got.sampler, got.params, got.delimiter) == (hf, PARAMS, "\n")
    with StepServer() as server:
        opts = OpenAIOptions(endpoints=(server.url,), api_key="test", retry_wait=0.01, request_timeout=5.0)
        served = OpenAISampler(served_model("served-model", opts), seed=0, options=opts)
        got_openai = step_sampler(served, PARAMS, "\n\n")
        assert len(server.bodies) == 1, "building it probed the server"
    assert isinstance(got_openai, OpenAIStepSampler) and got_openai.sampler is served


def test_a_backend_without_steps_is_one_line_naming_those_with() -> None:
    with pytest.raises(ValueError, match=r"^backend .scripted. has no step sampler.*: use --backend hf, vllm or openai$"):
        step_sampler(ScriptedSampler(lambda pid, i: "x"), PARAMS, "\n\n")


def test_cut_at_task_stop_counts_the_delimiter_the_prefix_ended_with() -> None:
    from bonbench.api.search.records import Continuation, Prefix, cut_at_task_stop

    stops, delim = ("\n\nProblem:",), "\n\n"
    got = cut_at_task_stop(Prefix("Q", ("a",), seed=0), Continuation("Problem: x", "step", 3, 9, 4), stops, delim)
    assert (got.text, got.finish, got.tokens, got.prompt_tokens, got.cached_tokens) == ("", "end", 3, 9, 4)
    first = Continuation("Problem: x", "step", 3)  # no step yet: no delimiter before it, so no stop
    assert cut_at_task_stop(Prefix("Q", (), seed=0), first, stops, delim) is first
    inside = cut_at_task_stop(Prefix("Q", (), seed=0), Continuation("b\n\nProblem: y", "end", 5), stops, delim)
    assert (inside.text, inside.finish) == ("b", "end")
