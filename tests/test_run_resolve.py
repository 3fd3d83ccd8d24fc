"""One path to a task, a grader and a verifier (issue 25): ``bonbench run``, ``score``, the trainer and
verifier training build their tasks through ``bonbench.run.resolve``, so every grader caches executions
under ``--out``, honours ``--unsafe-no-sandbox`` and with ``--ray`` runs code tests as Ray tasks; the
grader's one-grade-per-sample contract, the "k fits the samples" rule and a saved config's fields are
each checked in one place."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import trainer_plugin  # noqa: F401  (registers the test_rloo objective)

from bonbench.api.metric.grammar import parse_metrics
from bonbench.api.task import GraderOptions, Task, register_task
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.setup import load_train_task
from bonbench.apps.verifier_training.training_data import assemble
from bonbench.core import provenance
from bonbench.core.config import RunConfig, saved_settings
from bonbench.core.errors import BonbenchError
from bonbench.core.ray_cluster import ray_options
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.pipeline import stages
from bonbench.pipeline.prepared import prepare
from bonbench.plugins.graders.ray_sandbox import RaySandbox
from bonbench.run import rules
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.reopen import reopen
from bonbench.run.request import RunRequest
from bonbench.run.resolve import load_task

BUILT: list[GraderOptions] = []  # every GraderOptions a probe grader was configured with, in order


class OptionsGrader:
    """Grades "a..." correct; remembers the options the harness configured it with. ``drop``: returns
    no grade for the last sample of each call (a grader bug)."""

    name = "options"
    version = 1

    def __init__(self, options: GraderOptions | None = None, drop: bool = False) -> None:
        self.options, self.drop = options, drop

    def with_options(self, options: GraderOptions) -> OptionsGrader:
        BUILT.append(options)
        return OptionsGrader(options, self.drop)

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        kept = samples[:-1] if self.drop else samples
        return [Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=s.completion.startswith("a"),
                      answer=s.completion[:1])
                for s in kept]


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=problem.input)


@register_task("resolve_probe", family="math")
def resolve_probe(data_dir: str | None = None, split: str = "test", drop: bool = False) -> Task:
    problems = tuple(Problem(id=f"{split}/{i}", input=f"q{i}", target="a") for i in range(4))
    return Task(name="resolve_probe", version=1, problems=problems, render=_render, grader=OptionsGrader(drop=drop),
                prompt_id="probe-v1", max_tokens=4)


@pytest.fixture(autouse=True)
def _no_env_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BONBENCH_EXEC_CACHE", raising=False)  # an explicit cache would win over --out's
    BUILT.clear()


def _samples_file(path: Path, split: str = "test", n: int = 2) -> Path:
    rows = [{"problem_id": f"{split}/{i}", "sample_idx": j, "completion": "a" if (i + j) % 2 else "b"}
            for i in range(4) for j in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_trainer_grades_with_the_options_of_bonbench_run(tmp_path: Path) -> None:
    out = tmp_path / "results"
    cfg = TrainConfig(task="resolve_probe", objective="test_rloo", name="t", out=str(out), unsafe_no_sandbox=True,
                      ray="127.0.0.1:6379")
    trained = load_train_task(cfg).grader.options
    assert [p.id for p in load_train_task(cfg).problems][0] == "train/0"  # the train split
    ran = load_task("resolve_probe", {"split": "train"}, data_dir=None, out=out, unsafe=True,
                    ray=ray_options("127.0.0.1:6379")).grader.options
    assert trained.exec_cache == ran.exec_cache == out / "cache" / "exec"
    assert trained.unsafe is ran.unsafe is True
    assert isinstance(trained.executor, RaySandbox) and trained.executor.options.address == "127.0.0.1:6379"
    assert trained.executor == ran.executor
    # without the flags: the local sandbox, still cached beside the results
    plain = load_train_task(TrainConfig(task="resolve_probe", objective="test_rloo", name="t", out=str(out))).grader.options
    assert (plain.exec_cache, plain.unsafe, plain.executor) == (out / "cache" / "exec", False, None)


def test_the_exec_cache_variable_wins_over_out_and_the_grader_reads_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from bonbench.plugins.graders.code_cases import ENV_EXEC_CACHE, default_cache_dir
    from bonbench.run.resolve import grader_options

    assert grader_options({}, tmp_path).exec_cache == tmp_path / "cache" / "exec"
    monkeypatch.setenv(ENV_EXEC_CACHE, str(tmp_path / "mine"))
    assert grader_options({}, tmp_path).exec_cache is None  # the grader keeps its own default: the variable's
    assert default_cache_dir() == tmp_path / "mine"


def test_grader_flags_do_not_change_what_is_trained(tmp_path: Path) -> None:
    """--unsafe-no-sandbox and --ray change where code runs, not its verdicts: a run resumes across them."""
    base = dict(task="resolve_probe", objective="test_rloo", name="t", out=str(tmp_path))
    plain = TrainConfig(**base)
    flagged = TrainConfig(**base, unsafe_no_sandbox=True, ray="auto")
    assert plain.training_hash() == flagged.training_hash()
    assert flagged.differences(plain.to_json()) == []


def test_bad_ray_address_in_training_is_one_line_before_anything_loads(tmp_path: Path) -> None:
    cfg = TrainConfig(task="resolve_probe", objective="test_rloo", name="t", out=str(tmp_path), ray="no-port-here")
    with pytest.raises(BonbenchError, match="no-port-here"):
        load_train_task(cfg)


def test_run_score_and_verifier_training_configure_the_grader_alike(tmp_path: Path) -> None:
    out = tmp_path / "results"
    samples = _samples_file(tmp_path / "samples.jsonl", split="train")
    req = RunRequest(task="resolve_probe", task_args={"split": "train"}, samples=samples, out=out, unsafe_no_sandbox=True)
    run_dir = execute(plan(req)).runs[0].store.root
    assert BUILT[-1] == GraderOptions(exec_cache=out / "cache" / "exec", unsafe=True)
    reopen(run_dir, unsafe_no_sandbox=True)
    assert BUILT[-1] == GraderOptions(exec_cache=out / "cache" / "exec", unsafe=True)
    BUILT.clear()
    data = assemble([run_dir])  # verifier training reopens the run's task the same way
    assert BUILT == [GraderOptions(exec_cache=out / "cache" / "exec", unsafe=False)]
    assert data.family == "math" and len(data.rows) == 8 and sum(r.label for r in data.rows) == 4


def test_a_grader_that_drops_a_sample_is_one_line_naming_the_bug(tmp_path: Path) -> None:
    task = load_task("resolve_probe", {"drop": "true"}, data_dir=None, out=tmp_path)
    problems = {p.id: p for p in task.problems}
    samples = [Sample("test/0", 0, "a", 1, "stop"), Sample("test/0", 1, "b", 1, "stop")]
    with pytest.raises(BonbenchError, match=r"grader 'options' returned 1 grades for 2 samples, none for "
                                            r"\('test/0', 1\); this is a grader bug"):
        stages.graded(task.grader, problems, samples)
    # the pipeline's grade stage goes through the same check (and stores nothing of the bad chunk)
    run = prepare(task, RunConfig(task="resolve_probe", model="m", backend="scripted", n=2), tmp_path)
    with pytest.raises(BonbenchError, match="this is a grader bug"):
        stages.grade(run, {s.key: s for s in samples})
    assert not run.store.grades("options").read()


@pytest.mark.parametrize(("metrics", "available", "wins", "error"), [
    (("pass@4",), 4, (), None),
    (("pass@4", "maj@8"), 4, (), "maj@8 need(s) k <= 4"),
    (("pass@1",), 2, (3,), "winrate@3 need(s) k <= 2"),
    (("bon@2", "pass@5"), 1, (), "bon@2, pass@5 need(s) k <= 1"),
])
def test_k_fits_the_samples_is_one_rule(metrics: tuple[str, ...], available: int, wins: tuple[int, ...],
                                        error: str | None) -> None:
    specs = parse_metrics(list(metrics))
    if error is None:
        rules.check_k_fits(specs, available, "; why", wins)
        assert rules.over_k(specs, available, wins) == []
        return
    with pytest.raises(BonbenchError) as exc:
        rules.check_k_fits(specs, available, "; why", wins)
    assert str(exc.value) == f"{error}; why"
    # resolve_n (sampled runs), greedy runs and imported runs refuse the same metrics
    assert rules.over_k(specs, available, wins) == error.split(" need(s)")[0].split(", ")
    with pytest.raises(BonbenchError, match=r"need\(s\) k <= "):
        rules.resolve_n(specs, available, wins)


def test_resolve_n_defaults_to_the_largest_k_and_checks_win_rates() -> None:
    assert rules.resolve_n(parse_metrics(["pass@1", "bon@4"]), None) == 4
    with pytest.raises(BonbenchError, match=r"^winrate@8 need\(s\) k <= 4, but n is 4; raise --n to 8 or lower k$"):
        rules.resolve_n(parse_metrics(["bon@4"]), None, (8,))
    with pytest.raises(BonbenchError, match=r"^--n must be >= 1 \(got 0\)$"):
        rules.resolve_n(parse_metrics(["pass@1"]), 0)


def test_a_saved_config_rebuilds_the_same_run_config() -> None:
    cfg = RunConfig(task="t", model="m", backend="hf", n=4, stop=("\n\n",), metrics=("pass@1", "pass@4"), task_args={"a": 1})
    doc = json.loads(json.dumps({**cfg.to_json(), "from_a_later_version": True}))  # lists, an unknown key
    assert RunConfig(**saved_settings(doc)) == cfg
    unknown_stop = json.loads(json.dumps({**cfg.to_json(), "stop": None}))  # an imported run's
    assert saved_settings(unknown_stop)["stop"] is None


def test_provenance_names_this_checkout() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
    assert provenance.git_sha() == (head.stdout.strip() or None)
    found = provenance.versions()
    assert found["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(found) <= {"python", *provenance.RECORDED_PACKAGES} and "numpy" in found


def test_reopened_imported_run_checks_k_against_its_fewest_samples(tmp_path: Path) -> None:
    samples = _samples_file(tmp_path / "samples.jsonl", n=2)
    run_dir = execute(plan(RunRequest(task="resolve_probe", samples=samples, out=tmp_path / "r"))).runs[0].store.root
    with pytest.raises(BonbenchError, match=r"^pass@4 need\(s\) k <= 2, the fewest samples a problem of this imported "
                                            r"run has; drop those metrics$"):
        reopen(run_dir, metrics=("pass@4",))


def test_running_without_kl_does_not_import_torch() -> None:
    """Planning and executing a run import torch only when something loads a model (a sampler or
    the KL scorers), so a dry run, an imported or served run pays nothing for it."""
    code = "import sys, bonbench.run.plan, bonbench.run.execute, bonbench.run.merge; print('torch' in sys.modules)"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "False"
