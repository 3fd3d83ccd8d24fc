"""Greedy decoding (``--temperature 0``) end to end: one sample per problem (n forced to 1, k > 1 and
--n > 1 refused), recorded in the run id and config.json, identical samples across runs and seeds
on the hf backend (and equal to transformers' own ``generate(do_sample=False)``), the temperature
the scripted, openai and vLLM backends receive. Tiny random Gemma 3 models built here; nothing
downloaded. The vLLM check imports vllm (tens of seconds), so it is slow."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_sampler_hf import build_tiny_model

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.api.task import Task, register_task
from bonbench.apps.cli import main
from bonbench.core.config import config_hash
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest

WORDS = ["abc", "dd e", "cab a", "e:P", "b b"]


class _StartsWithA:
    name = "starts_with_a"
    version = 1

    def grade(self, problems: Any, samples: Sequence[Sample]) -> list[Grade]:
        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=s.completion.startswith("a"),
                      answer=s.completion[:1] or None) for s in samples]


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=problem.input + ":")


@register_task("tiny_greedy")
def tiny_greedy_task(data_dir: str | None = None) -> Task:
    problems = tuple(Problem(id=f"g/{i}", input=word, target="a") for i, word in enumerate(WORDS))
    # defaults with k > 1, as the math tasks have (pass@1, maj@4, pass@4)
    return Task(name="tiny_greedy", version=1, problems=problems, render=_render, grader=_StartsWithA(),
                prompt_id="tiny-greedy-v1", default_metrics=("pass@1", "maj@4", "pass@4"), max_tokens=8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("greedy")).path


def _req(tiny: str, out: Path, **kw: Any) -> RunRequest:
    return RunRequest(**{"task": "tiny_greedy", "model": tiny, "backend": "hf", "temperatures": (0.0,),
                         "dtype": "float32", "out": out, "n_boot": 50, **kw})


# ------------------------------------------------------------------------------- planning rules


def test_temperature_0_forces_one_sample_and_the_k1_defaults(tiny: str, tmp_path: Path) -> None:
    p = plan(_req(tiny, tmp_path))
    run = p.runs[0]
    assert run.cfg.n == 1 and run.cfg.temperature == 0.0
    assert [s.name for s in p.specs] == ["pass@1"], "maj@4 / pass@4 dropped from the defaults"
    assert run.cfg.hashed()["temperature"] == 0.0
    sampled = plan(_req(tiny, tmp_path, temperatures=(1.0,)))
    assert sampled.runs[0].cfg.n == 4 and sampled.runs[0].run_hash != run.run_hash
    # 0, 0.0 and -0.0 are one setting, one run id
    assert plan(_req(tiny, tmp_path, temperatures=(-0.0,))).runs[0].run_hash == run.run_hash == config_hash(run.cfg)
    # k = 1 metrics of every kind are fine (bon@1 brings pass@1 and maj@1)
    ok = plan(_req(tiny, tmp_path, metrics=("maj@1", "bon@1", "mean"), verifier="oracle"))
    assert ok.runs[0].cfg.n == 1 and {s.name for s in ok.specs} == {"maj@1", "bon@1", "mean", "pass@1"}


@pytest.mark.parametrize("kw,match", [
    ({"metrics": ("pass@1,4",)}, r"greedy decoding, one sample per problem, so pass@4 would equal k=1"),
    ({"metrics": ("maj@8",), "n": 8}, r"so maj@8 would equal k=1"),
    ({"n": 4}, r"drop --n 4 \(n is 1\)"),
    ({"temperatures": (0.0, 0.7), "metrics": ("pass@4",)}, r"run --temperature 0 on its own"),
    ({"metrics": ("pass@1", "kl"), "ref_model": "x"}, r"kl needs a sampling temperature > 0"),
])
def test_temperature_0_refuses_more_than_one_sample(tiny: str, tmp_path: Path, kw: dict, match: str) -> None:
    with pytest.raises(BonbenchError, match=match):
        plan(_req(tiny, tmp_path, **kw))


def test_cli_temperature_0_with_n_is_a_one_line_error_and_dry_run_records_it(tiny: str, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--task", "tiny_greedy", "--model", tiny, "--backend", "hf", "--dtype", "float32",
            "--out", str(tmp_path), "--temperature", "0"]
    assert main([*base, "--n", "4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --temperature 0 is greedy decoding") and err.count("\n") == 1
    assert main([*base, "--dry-run"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out[:out.rindex("}") + 1])
    assert doc["config"]["n"] == 1 and doc["config"]["temperature"] == 0.0 and doc["hashed"]["temperature"] == 0.0
    assert doc["config"]["metrics"] == ["pass@1"]


# ------------------------------------------------------------------------------- hf: identical samples


def _samples(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda r: (r["problem_id"], r["sample_idx"]))


def test_hf_greedy_runs_are_identical_and_match_generate_without_sampling(tiny: str, tmp_path: Path) -> None:
    """Two runs (different results roots, different seeds) give the same samples, one per problem,
    each the completion transformers' ``generate(do_sample=False)`` produces."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    first = execute(plan(_req(tiny, tmp_path / "a", seed=0))).runs[0]
    second = execute(plan(_req(tiny, tmp_path / "b", seed=1))).runs[0]
    a, b = _samples(first.store.root), _samples(second.store.root)
    assert [(r["problem_id"], r["sample_idx"]) for r in a] == [(f"g/{i}", 0) for i in range(len(WORDS))]
    assert [(r["completion"], r["n_tokens"], r["finish_reason"]) for r in a] == \
        [(r["completion"], r["n_tokens"], r["finish_reason"]) for r in b]
    assert [r["logprob"] for r in a] == pytest.approx([r["logprob"] for r in b], abs=1e-5)
    config = json.loads((first.store.root / "config.json").read_text())
    assert config["config"]["temperature"] == 0.0 and config["config"]["n"] == 1 and config["hashed"]["temperature"] == 0.0
    metrics = json.loads((first.store.root / "metrics.json").read_text())
    assert metrics["n"] == 1 and set(metrics["metrics"]) == {"pass@1"}

    tok = AutoTokenizer.from_pretrained(tiny)
    lm = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    for row, word in zip(a, WORDS, strict=True):
        ids = tok(word + ":", return_tensors="pt")
        with torch.no_grad():
            out = lm.generate(**ids, do_sample=False, max_new_tokens=8, pad_token_id=tok.pad_token_id)
        assert row["completion"] == tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True), word


# ------------------------------------------------------------------------------- what each backend receives


class _Recording(ScriptedSampler):
    """A scripted sampler that records the params and sample indices it was asked for."""

    def __init__(self) -> None:
        super().__init__(lambda pid, idx: f"a{pid[-1]}")
        self.calls: list[tuple[float, tuple[int, ...]]] = []

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        self.calls += [(params.temperature, tuple(r.sample_indices)) for r in requests]
        yield from super().generate(requests, params)


def test_scripted_backend_gets_temperature_0_and_one_index_per_problem(tiny: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    samplers: list[_Recording] = []

    def build(*a: Any, **k: Any) -> _Recording:
        samplers.append(_Recording())
        return samplers[-1]

    monkeypatch.setattr(select, "get_sampler", build)
    dirs = [execute(plan(_req(tiny, tmp_path / name))).runs[0].store.root for name in ("a", "b")]
    assert [c for s in samplers for c in s.calls] == [(0.0, (0,))] * (2 * len(WORDS))
    assert _samples(dirs[0]) == _samples(dirs[1])
    # a rerun samples nothing: the one greedy sample is there
    execute(plan(_req(tiny, tmp_path / "a")))
    assert len(samplers) == 2


def test_openai_backend_sends_temperature_0(tmp_path: Path) -> None:
    from test_sampler_openai import FakeServer

    with FakeServer() as server:
        req = RunRequest(task="tiny_greedy", model="served-model", backend="openai", temperatures=(0,),
                         out=tmp_path, n_boot=50, engine_args={"endpoints": (server.url,), "api_key": "test"})
        first = execute(plan(req)).runs[0]
        bodies = server.generations()
        again = execute(plan(dataclasses.replace(req, out=tmp_path / "b"))).runs[0]
    assert len(bodies) == len(WORDS)
    assert all(b["temperature"] == 0.0 and b["n"] == 1 for b in bodies)
    assert _samples(first.store.root) == _samples(again.store.root)


@pytest.mark.slow
def test_vllm_request_at_temperature_0_is_greedy() -> None:
    """The vLLM request a greedy run sends is vLLM's greedy sampling type (argmax; top-p unused)."""
    from bonbench.core.engines import import_vllm
    from bonbench.plugins.samplers.vllm import VLLMSampler

    vllm = import_vllm()
    sampler = object.__new__(VLLMSampler)  # no engine: only the request-building method is exercised
    sampler._vllm = vllm
    sampler.seed_each_sample = False  # as __init__ sets it: the engine's stream, no per-key seed
    params = sampler.vllm_params(SampleRequest(Prompt("p", text="x"), (0,)), SamplingParams(temperature=0.0, top_p=0.9))
    assert params.n == 1 and params.temperature == 0.0
    assert params.sampling_type == vllm.sampling_params.SamplingType.GREEDY
