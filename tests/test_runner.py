"""The run as a library call (bonbench.run.runner), versioned verifier scores, real-valued rewards
through the estimators and verifier entry points (the import graph: tests/test_layers.py)."""

from __future__ import annotations

import ast
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

from bonbench.api.task import Task, register_task
from bonbench.api.verifier import VERIFIER_GROUP, get_verifier, register_verifier, verifier_names
from bonbench.core import models
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.plugins.samplers import select
from bonbench.run import plan as run_plan
from bonbench.run.execute import execute
from bonbench.run.reopen import reopen
from bonbench.run.request import RunRequest
from bonbench.run.rules import metric_specs

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy model behind every backend: no real model is loaded."""
    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))


def test_a_run_end_to_end_from_python(tmp_path: Path, toy_engine: None) -> None:
    req = RunRequest(task="toy", metrics=("pass@1,4", "bon@4"), verifier="oracle", backend="hf", out=tmp_path)
    plan = run_plan.plan(req)
    run = plan.runs[0]
    assert not run.store.root.exists()  # planning writes nothing
    assert [s.name for s in plan.specs] == ["pass@1", "pass@4", "bon@4", "maj@4"] and run.cfg.n == 4
    result = execute(plan)
    doc = result.docs[0]
    assert doc["metrics"]["bon@4"]["value"] == pytest.approx(doc["metrics"]["pass@4"]["value"])  # oracle
    assert json.loads(run.store.config_path.read_text())["verifiers"] == ["oracle"]
    # reopen: re-score the same directory without sampling, with another metric
    before = run.store.samples.path.read_bytes()
    again = execute(reopen(run.store.root, metrics=("maj@2",)))
    assert again.runs[0].store.root == run.store.root and run.store.samples.path.read_bytes() == before
    assert {"pass@1", "pass@4", "bon@4", "maj@4", "maj@2"} <= set(again.docs[0]["metrics"])
    # a sweep: one run per temperature, a sweep record
    sweep = execute(run_plan.plan(RunRequest(task="toy", metrics=("pass@2",), backend="hf", out=tmp_path,
                                             temperatures=(0.5, 1.0))))
    assert len(sweep.runs) == 2 and sweep.sweep_path is not None and sweep.sweep_path.exists()


class CountingVerifier:
    """Scores = -sample_idx; counts how many samples it was asked to score."""

    name = "counting"
    fingerprint = "weights-a"
    uses_grades = False

    def __init__(self, version: int = 1) -> None:
        self.version = version
        self.calls = 0

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        self.calls += len(samples)
        return [Score(s.problem_id, s.sample_idx, self.name, -float(s.sample_idx) * self.version) for s in samples]


def test_scores_are_reused_only_for_the_same_verifier_version_and_fingerprint(tmp_path: Path, toy_engine: None) -> None:
    from bonbench.pipeline import scoring
    from bonbench.pipeline import stages as pipeline

    plan = run_plan.plan(RunRequest(task="toy", metrics=("bon@2",), verifier="oracle", backend="hf", out=tmp_path))
    execute(plan)
    run = plan.runs[0]
    samples = pipeline.load_samples(run)
    grades = pipeline.grade(run, samples)
    v1 = CountingVerifier(version=1)
    pipeline.verify(run, v1, samples, grades)
    assert v1.calls == len(samples)
    again = CountingVerifier(version=1)
    pipeline.verify(run, again, samples, grades)
    assert again.calls == 0  # same name, version and fingerprint: reused
    v2 = CountingVerifier(version=2)
    scores = pipeline.verify(run, v2, samples, grades)
    assert v2.calls == len(samples) and all(sc.verifier_version == 2 for sc in scores.values())
    retrained = CountingVerifier(version=2)
    retrained.fingerprint = "weights-b"
    pipeline.verify(run, retrained, samples, grades)
    assert retrained.calls == len(samples)
    rows = run.store.scores("counting").path.read_text().splitlines()
    assert len(rows) == 3 * len(samples)  # old rows stay in the file, unused
    # bon@k scored by another version is dropped from metrics.json, not merged
    doc = scoring.score(run, metric_specs(["bon@1"], ()), grades, scores, "counting", scorer=(2, "weights-a"))
    assert doc["metrics"]["bon@1"]["verifier_version"] == 2 and "bon@2" not in doc["metrics"]


def test_oracle_scores_follow_the_grading(tmp_path: Path, toy_engine: None) -> None:
    """oracle scores are a function of the grades: a new grader version re-scores them."""
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import scorer_id
    from bonbench.plugins.verifiers.builtin import OracleVerifier

    plan = run_plan.plan(RunRequest(task="toy", metrics=("bon@2",), verifier="oracle", backend="hf", out=tmp_path))
    execute(plan)
    run = plan.runs[0]
    v, fp = scorer_id(run, OracleVerifier())
    assert fp == "|exact:1:"

    class Stricter(toy_plugin.ExactGrader):
        version = 2

        def grade(self, problems, samples):
            return [Grade(g.problem_id, g.sample_idx, self.name, self.version, correct=False, answer=g.answer)
                    for g in super().grade(problems, samples)]

    import dataclasses

    strict = dataclasses.replace(run, task=dataclasses.replace(run.task, grader=Stricter()))
    samples = pipeline.load_samples(strict)
    scores = pipeline.verify(strict, OracleVerifier(), samples, pipeline.grade(strict, samples))
    assert all(sc.score == 0.0 for sc in scores.values())  # not the stale 1.0s of the first grading


# ------------------------------------------------------------------------------------ rewards


class LengthReward:
    """A reward-model-like grader: a real-valued reward per sample (some negative), no verdict."""

    name = "length_reward"
    version = 1

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        return [Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None,
                      score=((3 * s.sample_idx + len(s.completion)) % 7) / 7.0 - 0.5, answer=None) for s in samples]


@register_task("toy_reward")
def toy_reward_task(data_dir: str | None = None) -> Task:
    base = toy_plugin.toy_task(size=6)
    return Task(name="toy_reward", version=1, problems=base.problems, render=base.render, grader=LengthReward(),
                prompt_id="toy-v1", default_metrics=("mean",), max_tokens=8, judged_by="reward")


def _brute_bon(scores: Sequence[float], rewards: Sequence[float], k: int) -> Fraction:
    """Expected reward of the top-scored sample of a uniformly random k-subset, ties split evenly."""
    total = Fraction(0)
    subsets = list(itertools.combinations(range(len(scores)), k))
    for sub in subsets:
        best = max(scores[i] for i in sub)
        tied = [i for i in sub if scores[i] == best]
        total += sum(Fraction(rewards[i]) for i in tied) / len(tied)
    return total / len(subsets)


def test_real_valued_rewards_reach_the_estimators_exactly(tmp_path: Path, toy_engine: None) -> None:
    plan = run_plan.plan(RunRequest(task="toy_reward", metrics=("mean", "bon@3"), verifier="logprob", n=6,
                                    backend="hf", out=tmp_path))
    doc = execute(plan).docs[0]
    run = plan.runs[0]
    grades = run.store.grades("length_reward").read()
    scores = run.store.scores("logprob").read()
    samples = run.store.samples.read()
    per_problem_mean, per_problem_bon = [], []
    for p in run.problems:
        rewards = [grades[(p.id, i)].score for i in range(6)]
        logprobs = [samples[(p.id, i)].mean_logprob for i in range(6)]
        assert [scores[(p.id, i)].score for i in range(6)] == logprobs
        per_problem_mean.append(sum(Fraction(r) for r in rewards) / 6)
        per_problem_bon.append(_brute_bon(logprobs, rewards, 3))
    assert doc["metrics"]["mean"]["value"] == pytest.approx(float(sum(per_problem_mean) / len(per_problem_mean)), abs=1e-12)
    assert doc["metrics"]["bon@3"]["value"] == pytest.approx(float(sum(per_problem_bon) / len(per_problem_bon)), abs=1e-12)
    assert any(r < 0 for r in (g.score for g in grades.values()))  # real values, not 0/1


def test_a_reward_task_refuses_grades_without_a_reward(tmp_path: Path, toy_engine: None) -> None:
    from bonbench.core.errors import BonbenchError
    from bonbench.pipeline.scoring import outcomes

    plan = run_plan.plan(RunRequest(task="toy_reward", metrics=("mean",), n=2, backend="hf", out=tmp_path))
    execute(plan)
    run = plan.runs[0]
    grades = dict(run.store.grades("length_reward").read())
    key = next(iter(grades))
    grades[key] = Grade(key[0], key[1], "length_reward", 1, correct=None, score=None, error="model crashed")
    with pytest.raises(BonbenchError, match="have no reward .*model crashed"):
        outcomes(run, grades, None)


# ------------------------------------------------------------------------- registry and imports


def test_verifiers_come_from_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from bonbench.api import verifier as api_verifier
    from bonbench.core import registry as core_registry

    ep = EntryPoint(name="counting", value="test_runner:CountingVerifier", group=VERIFIER_GROUP)
    broken = EntryPoint(name="broken_rm", value="no_such_module_xyz:Thing", group=VERIFIER_GROUP)
    real = list(core_registry.entry_points(group=VERIFIER_GROUP))
    monkeypatch.setattr(core_registry, "entry_points",
                        lambda group: real + [ep, broken] if group == VERIFIER_GROUP else [])
    monkeypatch.setattr(api_verifier.VERIFIERS, "_entries", {})
    monkeypatch.setattr(api_verifier.VERIFIERS, "_schemes", {})
    monkeypatch.setattr(api_verifier.VERIFIERS, "_read", False)
    assert verifier_names() == ["broken_rm", "counting", "logprob", "oracle"]
    assert isinstance(get_verifier("counting"), CountingVerifier)
    assert get_verifier("oracle").name == "oracle"
    from bonbench.core.errors import BonbenchError

    with pytest.raises(BonbenchError, match="verifier 'broken_rm' .* failed to load"):
        get_verifier("broken_rm")

    @register_verifier("inline")
    def _inline() -> CountingVerifier:
        return CountingVerifier()

    assert get_verifier("inline").name == "counting"


def test_reward_tasks_report_max_at_k_and_refuse_pass_and_maj(tmp_path: Path, toy_engine: None) -> None:
    from bonbench.core.errors import BonbenchError

    plan = run_plan.plan(RunRequest(task="toy_reward", metrics=("bon@3",), n=5, backend="hf", out=tmp_path))
    assert [s.name for s in plan.specs] == ["bon@3", "mean", "max@3"]  # reward companions, not pass/maj
    doc = execute(plan).docs[0]
    grades = plan.runs[0].store.grades("length_reward").read()
    expected = []
    for p in plan.runs[0].problems:
        rewards = [Fraction(grades[(p.id, i)].score) for i in range(5)]
        subsets = list(itertools.combinations(rewards, 3))
        expected.append(sum(max(s) for s in subsets) / len(subsets))
    assert doc["metrics"]["max@3"]["value"] == pytest.approx(float(sum(expected) / len(expected)), abs=1e-12)
    curves = json.loads(plan.runs[0].store.curves_path.read_text())
    assert set(curves) == {"max", "bon"} and curves["max"]["value"][2] == pytest.approx(doc["metrics"]["max@3"]["value"])
    for bad, word in (("pass@2", "max@k"), ("maj@2", "nothing to pass or vote on")):
        with pytest.raises(BonbenchError, match=word):
            run_plan.plan(RunRequest(task="toy_reward", metrics=(bad,), backend="hf", out=tmp_path))


def test_backends_have_typed_options_and_one_builder(tmp_path: Path) -> None:
    from bonbench.api.sampler import SampleRequest, SamplingParams
    from bonbench.core.errors import BonbenchError
    from bonbench.core.records import Prompt

    assert (select.backend_options("vllm", max_model_len=2048, dtype="float16")
            == select.VLLMOptions(dtype="float16", max_model_len=2048))
    assert select.backend_options("hf", batch_size=None) == select.HFSamplerOptions()  # None = not given
    with pytest.raises(BonbenchError, match=r"the vllm backend does not take batch_size \(--batch-size\); its options are"):
        select.backend_options("vllm", batch_size=8)
    with pytest.raises(BonbenchError, match="does not take max_model_len"):
        select.backend_options("hf", max_model_len=512)
    # the run plan checks them before any model is resolved or loaded
    with pytest.raises(BonbenchError, match="the hf backend does not take tensor_parallel_size"):
        run_plan.plan(RunRequest(task="toy", backend="hf", engine_args={"tensor_parallel_size": 2}, out=tmp_path))
    sampler = select.get_sampler("scripted", "replay", seed=0, samples=[Sample("p", 0, "42", 1, "stop")])
    out = [s for g in sampler.generate([SampleRequest(Prompt("p", text="q"), (0,))], SamplingParams()) for s in g]
    assert [s.completion for s in out] == ["42"] and sampler.model == "replay"
    with pytest.raises(BonbenchError, match="replays samples"):
        select.get_sampler("scripted", None, seed=0)


def test_the_pipeline_never_imports_the_trainer() -> None:
    """The trainer sits beside the pipeline: only the trainer itself and the CLI front (which
    registers `bonbench train` and lists objectives) may import bonbench.apps.trainer, lazily or not."""
    allowed = ("bonbench/apps/trainer/", "bonbench/apps/cli/")
    offenders = []
    for f in sorted((REPO / "bonbench").rglob("*.py")):
        rel = f.relative_to(REPO).as_posix()
        if rel.startswith(allowed):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{rel}: {n}" for n in names if n.startswith("bonbench.apps.trainer")]
    for root in (REPO / "tasks", REPO / "sandbox"):
        for f in root.rglob("*.py"):
            if "bonbench.apps.trainer" in f.read_text():
                offenders.append(str(f.relative_to(REPO)))
    assert not offenders, offenders


# ------------------------------------------------------------- reopened runs, verifier choice


def test_score_of_a_run_with_a_torn_last_line_names_the_run_command(tmp_path: Path, toy_engine: None) -> None:
    """``score RUN`` never samples: a sample lost to a torn last line (a writer killed mid-line, the
    store's resume rule drops it) is one error naming the ``bonbench run`` that resumes, not the
    engine's own complaint (it used to build a sampler and ask for --endpoint, a flag score lacks)."""
    from bonbench.core.errors import BonbenchError

    plan = run_plan.plan(RunRequest(task="toy", metrics=("pass@1,2",), backend="hf",
                                    out=tmp_path, temperatures=(0.5,)))
    execute(plan)
    path = plan.runs[0].store.samples.path
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the last row cut mid-line
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(select, "get_sampler", lambda *a, **k: calls.append("sampler") or toy_plugin.SlowScripted(0.0))
        with pytest.warns(UserWarning), pytest.raises(BonbenchError) as err:
            execute(reopen(plan.runs[0].store.root))
    msg = str(err.value)
    assert calls == [] and "\n" not in msg and "--endpoint" not in msg
    assert "1 sample(s) of 1 problem(s) are missing (samples.jsonl ends in a torn line" in msg
    cmd = msg.split("`")[3]
    assert cmd.startswith("bonbench run --task toy --model toy-model --backend hf --n 2") and "--temperature 0.5" in cmd
    # the command it names resumes the same run directory and then the score works
    from bonbench.apps.cli import build_parser
    from bonbench.core import settings

    args = build_parser().parse_args(cmd.split()[1:])
    req = settings.from_args(RunRequest, args)
    assert (req.task, req.model, req.backend, req.n, req.temperatures) == ("toy", "toy-model", "hf", 2, (0.5,))
    again = run_plan.plan(RunRequest(task="toy", metrics=("pass@1,2",), backend="hf", out=Path(args.out),
                                     temperatures=(0.5,), n=2, max_tokens=args.max_tokens, prompt_style=args.prompt_style))
    assert again.runs[0].store.root == plan.runs[0].store.root
    with pytest.warns(UserWarning):
        execute(again)
    assert execute(reopen(plan.runs[0].store.root)).docs[0]["n"] == 2


def test_reopen_refuses_n_below_one(tmp_path: Path, toy_engine: None) -> None:
    from bonbench.core.errors import BonbenchError

    plan = run_plan.plan(RunRequest(task="toy", metrics=("pass@2",), backend="hf", out=tmp_path))
    execute(plan)
    with pytest.raises(BonbenchError, match=r"^--n must be >= 1 \(got -3\)$"):
        reopen(plan.runs[0].store.root, n=-3)


def test_every_bon_run_says_which_verifier_and_why(tmp_path: Path, toy_engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from bonbench.plugins.verifiers import folder as verifier_folder

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "elsewhere"
    plan = run_plan.plan(RunRequest(task="toy", metrics=("bon@2",), backend="hf", out=out))
    assert plan.verifier == "logprob"
    note = plan.verifier_note or ""
    assert note.startswith("verifier: logprob (no learned verifier for toy / toy-model under elsewhere/verifiers")
    assert note.endswith("; pass --verifier learned:PATH)") and str(REPO / "results" / "verifiers") in note
    assert run_plan.plan(RunRequest(task="toy", metrics=("pass@2",), backend="hf", out=out)).verifier_note is None
    assert run_plan.plan(RunRequest(task="toy", metrics=("bon@2",), verifier="oracle", backend="hf",
                                    out=out)).verifier_note == "verifier: oracle (--verifier)"
    # a learned verifier in the default results root (the committed one) is found with --out elsewhere
    committed = tmp_path / "results" / "verifiers" / "toy-toy-model-head"
    committed.mkdir(parents=True)
    looked: list[Path] = []

    def find(root: Path, task: str, fingerprint: str) -> Path | None:
        looked.append(Path(root).resolve())
        return committed if Path(root).resolve() == (tmp_path / "results").resolve() else None

    monkeypatch.setattr(verifier_folder, "find_verifier", find)
    monkeypatch.setattr(run_plan, "check_verifier", lambda *a, **k: None)  # the fake folder has no model to check
    plan = run_plan.plan(RunRequest(task="toy", metrics=("bon@2",), backend="hf", out=out))
    assert plan.verifier == f"learned:{committed.resolve()}"
    assert plan.verifier_note == ("verifier: learned:results/verifiers/toy-toy-model-head (newest learned verifier for "
                                  "toy / toy-model under results/verifiers)")
    assert looked[:2] == [out.resolve(), (tmp_path / "results").resolve()]  # <out> first, then results/


def test_the_cli_prints_the_verifier_line(tmp_path: Path, toy_engine: None, capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.cli import main

    assert main(["run", "--task", "toy", "--metric", "bon@2", "--backend", "hf", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "verifier: logprob (no learned verifier for toy / toy-model under " in err
