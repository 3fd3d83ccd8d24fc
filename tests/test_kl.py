"""KL to a reference policy (--ref-model): a model against itself gives 0, another model gives the
directly computed mean log-ratio, the policy is scored at its sampling temperature, and bad
references are one-line errors. Tiny random Gemma 3 models built here; nothing downloaded."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from test_sampler_hf import SPECIALS, build_tiny_model

from bonbench.api.task import Task, register_task
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest


class _Exact:
    name = "exact_tiny"
    version = 1

    def grade(self, problems, samples):
        from bonbench.core.records import Grade

        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=s.completion.startswith("a")) for s in samples]


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=problem.input + ":")


@register_task("tiny_kl")
def tiny_kl_task(data_dir: str | None = None) -> Task:
    problems = tuple(Problem(id=f"t/{i}", input=word, target="a") for i, word in enumerate(["abc", "dd e", "cab a"]))
    return Task(name="tiny_kl", version=1, problems=problems, render=_render, grader=_Exact(), prompt_id="tiny-v1",
                max_tokens=8)


COMPLETIONS = ["ab", "e dc", "", "aaaa", "P:b"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("kl")
    out = {"a": build_tiny_model(root / "a", seed=0).path, "b": build_tiny_model(root / "b", seed=1).path}
    # same weights as "a", but a tokenizer with the characters in another order: another family
    from tokenizers import Tokenizer, decoders, processors
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    other = root / "other"
    build_tiny_model(other, seed=0)
    chars = list(":Pedcba \n")
    vocab = {t: i for i, t in enumerate(SPECIALS + chars)}
    tok = Tokenizer(tmodels.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>").save_pretrained(other)
    out["other"] = str(other)
    return out


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    script = {f"t/{i}": COMPLETIONS for i in range(3)}
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: ScriptedSampler(script))


def _direct_logprob(folder: str, prompt: str, completion: str, temperature: float) -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    p = tok(prompt)["input_ids"]
    c = tok(completion, add_special_tokens=False)["input_ids"]
    total = 0.0
    with torch.no_grad():
        for t in range(len(c)):  # one forward per token: independent of the batched code path
            logits = lm(input_ids=torch.tensor([p + c[:t]])).logits[0, -1].double()
            total += float(torch.log_softmax(logits / temperature, dim=-1)[c[t]])
    return total


def _run(tmp_path: Path, policy: str, ref: str, temperature: float = 1.0) -> dict[str, Any]:
    req = RunRequest(task="tiny_kl", model=policy, backend="hf", n=5, metrics=("pass@1", "kl"), ref_model=ref,
                     temperatures=(temperature,), dtype="float32", out=tmp_path)
    return execute(plan(req)).docs[0]


def test_a_model_against_itself_has_zero_kl(tmp_path: Path, models: dict[str, str], scripted: None) -> None:
    doc = _run(tmp_path, models["a"], models["a"])
    assert doc["metrics"]["kl"]["value"] == 0.0 and doc["metrics"]["kl"]["ci95"] == [0.0, 0.0]
    assert set(doc["per_problem"]["kl"].values()) == {0.0}


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_kl_equals_the_direct_mean_log_ratio(tmp_path: Path, models: dict[str, str], scripted: None,
                                             temperature: float) -> None:
    doc = _run(tmp_path, models["a"], models["b"], temperature)
    per_problem = []
    for word in ["abc", "dd e", "cab a"]:
        ratios = [_direct_logprob(models["a"], word + ":", c, temperature) - _direct_logprob(models["b"], word + ":", c, 1.0)
                  for c in COMPLETIONS]
        per_problem.append(sum(ratios) / len(ratios))
    assert doc["metrics"]["kl"]["value"] == pytest.approx(sum(per_problem) / 3, abs=1e-5)
    # the metric says which way is better and what it estimates (tables quote it: it can be negative)
    assert doc["metrics"]["kl"]["direction"] == "lower" and "can be estimated below 0" in doc["metrics"]["kl"]["estimator"]
    run_dir = next((tmp_path / "runs" / "tiny_kl").glob("*/*"))
    stored = {p.name for p in (run_dir / "scores").glob("lp-*.jsonl")}
    assert len(stored) == 2  # both log-probabilities are kept, keyed, for re-scoring
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(models["a"])
    words = dict(zip([f"t/{i}" for i in range(3)], ["abc", "dd e", "cab a"], strict=True))
    for path in (run_dir / "scores").glob("lp-*.jsonl"):  # the cost of each: prompt + completion tokens, one forward
        for row in map(json.loads, path.read_text().splitlines()):
            read = tok(words[row["problem_id"]] + ":")["input_ids"] + tok(COMPLETIONS[row["sample_idx"]],
                                                                          add_special_tokens=False)["input_ids"]
            assert row["calls"] == 1 and row["tokens"] == len(read), row
    before = {p: p.read_bytes() for p in (run_dir / "scores").glob("lp-*.jsonl")}
    _run(tmp_path, models["a"], models["b"], temperature)
    assert {p: p.read_bytes() for p in (run_dir / "scores").glob("lp-*.jsonl")} == before  # reused, not recomputed


def test_bad_references_are_one_line_errors(tmp_path: Path, models: dict[str, str], scripted: None) -> None:
    with pytest.raises(BonbenchError, match="another tokenizer"):
        _run(tmp_path, models["a"], models["other"])
    with pytest.raises(BonbenchError, match="kl needs a reference policy: add --ref-model"):
        plan(RunRequest(task="tiny_kl", model=models["a"], backend="hf", metrics=("kl",), out=tmp_path))
    with pytest.raises(BonbenchError, match="top-p 1 only"):
        plan(RunRequest(task="tiny_kl", model=models["a"], backend="hf", ref_model=models["a"],
                        top_ps=(0.9,), out=tmp_path))
