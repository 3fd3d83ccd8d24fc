"""A third-party package plugs one plugin of every kind in through entry points, and the CLI uses each.

The package is a throw-away distribution written into ``tmp_path`` (a package folder next to a
``*.dist-info/`` with METADATA and entry_points.txt) and put on PYTHONPATH of a ``bonbench``
subprocess: nothing is pip-installed into the shared venv, and bonbench's own code does not know
the package. It registers a task (``toyplug``, family ``toyfam``), a verifier (``toyv``), a verifier
scheme (``match:TEXT``), a reward model (``toy-rm``), a sampler backend (``toy``, with a typed
options record), an objective (``toy_obj``) and two metric kinds (``hit@k:t``, exact, with a
parameter, reading verifier scores; ``coin@k``, a Monte Carlo estimate). Each is used from the
command line: ``list``, ``run --backend toy`` with the verifier, the scheme and ``rm:toy-rm``,
``train --objective toy_obj`` on a tiny random model, the metrics through ``run``, ``score``,
``report``, ``leaderboard``, ``gate`` and ``plot`` (report.html), and the one-line errors of ``-T`` /
``-O`` values of the wrong type and of bad metric names. A search strategy (``first_steps``) runs from
``bonbench run --strategy`` only on a backend with a step sampler (hf; the toy backend has none), so
it is found through ``make_strategy`` in a subprocess, with its option coerced and a wrong value
refused in one line (``tests/test_search_run.py`` runs the built-in strategies from the command line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_sampler_hf import build_tiny_model

PLUGIN = '''
"""toyplug: one bonbench plugin of every kind (a test fixture)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bonbench.api import Objective, Task, register_objective, register_sampler, register_task
from bonbench.api import MetricKind, Param
from bonbench.core.records import Grade, Problem, Prompt, Sample, Score
from bonbench.metrics.estimators import SampledCurve, pass_at_k

WORDS = ["abc", "dd e", "cab a", "e e", "bad", "ce"]


class StartsWithA:
    name = "starts_a"
    version = 1

    def grade(self, problems, samples):
        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=s.completion.startswith("a"),
                      answer=s.completion[:1] or None) for s in samples]


def _render(problem, style):
    return Prompt(problem_id=problem.id, text=problem.input + ":")


@register_task("toyplug", family="toyfam")
def toyplug_task(data_dir: str | None = None, split: str = "test", size: int = 4) -> Task:
    words = WORDS[:size]
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a") for i, w in enumerate(words))
    return Task(name="toyplug", version=1, problems=problems, render=_render, grader=StartsWithA(),
                prompt_id="toyplug-v1", max_tokens=4, default_metrics=("pass@1",))


class ToyVerifier:
    """Scores a sample by how many a's it has."""

    name = "toyv"
    version = 1
    fingerprint = ""
    uses_grades = False

    def score(self, problems, samples, grades):
        return [Score(s.problem_id, s.sample_idx, self.name, float(s.completion.count("a"))) for s in samples]


class MatchVerifier:
    version = 1
    fingerprint = ""
    uses_grades = False

    def __init__(self, text):
        self.text = text
        self.name = "match-" + text

    def score(self, problems, samples, grades):
        return [Score(s.problem_id, s.sample_idx, self.name, float(self.text in s.completion)) for s in samples]


def match_scheme(rest: str) -> MatchVerifier:
    """match:TEXT  1 when the completion contains TEXT (a test scheme)."""
    return MatchVerifier(rest)


class ToyReward:
    version = 1
    fingerprint = "toy"

    def __init__(self, bonus):
        self.bonus = bonus
        self.name = "toy-rm"

    def score(self, prompts, completions):
        return [len(c) + self.bonus for c in completions]


def build_reward(data_dir: str | None = None, bonus: float = 0.0) -> ToyReward:
    """Length of the completion plus a bonus (a test reward model)."""
    return ToyReward(bonus)


@dataclass(frozen=True)
class ToyOptions:
    dtype: str = "float32"
    style: Literal["alternate", "all_a"] = "alternate"


class ToySampler:
    name = "toy"
    is_chat = False

    def __init__(self, model, options):
        self.model = getattr(model, "name", model) or "toy"
        self.fingerprint = "toy"
        self.options = options

    def generate(self, requests, params):
        for req in requests:
            out = []
            for i in req.sample_indices:
                text = "a b" if self.options.style == "all_a" or i % 2 == 0 else "dd"
                out.append(Sample(req.problem_id, i, text, n_tokens=2, finish_reason="stop", logprob=-1.0))
            yield out

    def close(self):
        return None


@register_sampler("toy", options=ToyOptions)
def toy_sampler(model, *, seed, options, **_):
    return ToySampler(model, options)


@register_objective("toy_obj", paper="test only", summary="scaled leave-one-out REINFORCE (a test objective)")
def toy_objective(scale: float = 1.0) -> Objective:
    def weights(g):
        r = np.asarray(g.rewards, dtype=float)
        return scale * (r - (r.sum() - r) / max(len(r) - 1, 1)) / len(r)

    return Objective("toy_obj", weights, frozenset(), {"scale": scale}, min_group=2)


def _hit(o, k, t):
    """pass@k counting only the samples the verifier scores at least t."""
    return pass_at_k([c if s >= t else 0.0 for c, s in zip(o.correct, o.scores)], k)


def _coin(outcomes, ks, param, seed):
    """pass@k averaged over 64 random k-subsets of each problem: a Monte Carlo estimate."""
    rng, draws = np.random.default_rng(seed), 64
    values = np.full((len(outcomes), len(ks)), np.nan)
    var = np.zeros_like(values)
    for p, o in enumerate(outcomes):
        z = np.asarray(o.correct)
        for j, k in enumerate(ks):
            if k <= z.size:
                hits = np.array([z[rng.choice(z.size, k, replace=False)].max() for _ in range(draws)])
                values[p, j], var[p, j] = hits.mean(), hits.var(ddof=1) / draws
    return SampledCurve(values, var, draws)


@dataclass(frozen=True)
class FirstSteps:
    """first_steps: n first steps, each scored alone (a throw-away search strategy)."""

    bonus: float = 0.0
    name = "first_steps"

    def check(self, n):
        pass

    def options(self):
        return (("bonus", self.bonus),)

    def search(self, problem, sampler, scorer, *, n, seed):
        from bonbench.api.search.records import Candidate, Node, Prefix, SearchCost, SearchResult

        conts = sampler.continue_prefixes([Prefix(problem.prompt, (), seed + i) for i in range(n)])
        scored = scorer.score_steps([problem.question] * n, [[c.text] for c in conts])
        values = [s.scores[0] + self.bonus for s in scored]
        tree = tuple(Node(None, 1, c.text, s.scores[0], v, c.finish, c.tokens, True)
                     for c, s, v in zip(conts, scored, values))
        candidates = tuple(Candidate(i, c.text, (c.text,), s.scores, v, c.finish)
                           for i, (c, s, v) in enumerate(zip(conts, scored, values)))
        return SearchResult(problem.problem_id, self.name, self.options(), n, seed, candidates, tree, SearchCost())


HIT = MetricKind("hit", "pass@k among the samples the verifier scores at least t", reads=frozenset({"grades", "scores"}),
                 per_problem=_hit, param=Param("t", 0.0, 5.0, example=0.5), order=25, color="#8c564b")
COIN = MetricKind("coin", "pass@k from 64 random k-subsets", reads=frozenset({"grades"}), curve=_coin,
                  estimate="monte_carlo", order=26, color="#e377c2")
HAT = MetricKind("hat^", "all k of k samples right", reads=frozenset({"grades"}), order=27,
                 per_problem=lambda o, k, p: math.comb(int(sum(o.correct)), k) / math.comb(len(o.correct), k))
'''

ENTRY_POINTS = """\
[bonbench.tasks]
toyplug = toyplug

[bonbench.verifiers]
toyv = toyplug:ToyVerifier
match: = toyplug:match_scheme

[bonbench.reward_models]
toy-rm = toyplug:build_reward

[bonbench.samplers]
toy = toyplug:toy_sampler

[bonbench.objectives]
toyplug = toyplug

[bonbench.metrics]
hit = toyplug:HIT
coin = toyplug:COIN
hat^ = toyplug:HAT

[bonbench.strategies]
first_steps = toyplug:FirstSteps
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "toyplug.py").write_text(textwrap.dedent(PLUGIN))
    info = root / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny").path


def bonbench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "bonbench", *args], capture_output=True, text=True, env=env, timeout=600)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


def test_list_shows_every_plugin(site: Path) -> None:
    tasks = bonbench(site, "list", "tasks")
    assert tasks.returncode == 0 and "toyplug" in tasks.stdout.split() and "math" in tasks.stdout.split(), tasks.stderr
    verifiers = bonbench(site, "list", "verifiers").stdout.splitlines()
    assert {"toyv", "oracle", "logprob"} <= set(verifiers)
    assert "match:TEXT  1 when the completion contains TEXT (a test scheme)." in verifiers
    assert any(line.startswith("rm:<spec>") for line in verifiers) and any(line.startswith("learned:PATH") for line in verifiers)
    backends = bonbench(site, "list", "backends").stdout.splitlines()
    assert [line.split()[0] for line in backends] == ["hf", "openai", "scripted", "toy", "vllm"]  # by name, like every list
    assert next(line for line in backends if line.startswith("toy ")).endswith("engine settings: dtype, style")
    rms = bonbench(site, "list", "reward-models").stdout
    assert "toy-rm" in rms and "Length of the completion plus a bonus" in rms
    objectives = bonbench(site, "list", "objectives").stdout
    assert "toy_obj" in objectives and "scale=1.0" in objectives
    strategies = bonbench(site, "list", "strategies").stdout.splitlines()  # the plugin's strategy beside the built-ins
    assert [line.split()[0] for line in strategies[:-1]] == ["beam", "best_of_n", "dvts", "first_steps", "particle_filtering"]
    assert next(line for line in strategies if line.startswith("first_steps ")).endswith(
        "n first steps, each scored alone (a throw-away search strategy); options: bonus=0.0 (float)")


SEARCH = """
import json
from bonbench.api import make_strategy, strategy_names
from bonbench.api.search.records import Continuation, SearchProblem, StepScores
from bonbench.core.errors import BonbenchError

class Sampler:
    delimiter = "\\n\\n"
    def continue_prefixes(self, prefixes):
        return [Continuation("step %d" % (p.seed % 3), "end", 2) for p in prefixes]

class Scorer:
    def score_steps(self, questions, steps):
        return [StepScores(tuple(0.1 * int(s[-1][-1]) for _ in s), 1, 1) for s in steps]

got = make_strategy("first_steps", bonus="0.5").search(SearchProblem("p", "Q:", "Q"), Sampler(), Scorer(), n=3, seed=0)
try:
    make_strategy("first_steps", bonus="lots")
except BonbenchError as exc:
    error = str(exc)
print(json.dumps({"names": strategy_names(), "values": [c.value for c in got.candidates], "error": error}))
"""


def test_a_plugin_strategy_searches_with_its_options_coerced(site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SEARCH], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["names"] == ["beam", "best_of_n", "dvts", "first_steps", "particle_filtering"]
    assert out["values"] == pytest.approx([0.5, 0.6, 0.7])
    assert out["error"] == "strategy 'first_steps' option bonus takes float, got 'lots'"


def test_run_with_the_plugin_backend_verifiers_and_reward_model(site: Path, tiny: str, tmp_path: Path) -> None:
    base = ["run", "--task", "toyplug", "--backend", "toy", "--model", tiny, "--n", "4", "--out", str(tmp_path)]
    # samples alternate "a b" (right) and "dd" (wrong): pass@1 = 1/2 on every problem. A verifier that
    # prefers "a b" picks a right sample from a pair unless both are wrong: bon@2 = 1 - C(2,2)/C(4,2);
    # one that prefers "dd" picks a right one only when both are: bon@2 = C(2,2)/C(4,2)
    for verifier, shown, want in (("toyv", "toyv", 5 / 6), ("match:dd", "match-dd", 1 / 6),
                                  ("rm:toy-rm?bonus=0.5", "rm-toy-rm-bonus-0.5", 5 / 6)):
        proc = bonbench(site, *base, "--metric", "pass@1,bon@2", "--verifier", verifier)
        assert proc.returncode == 0, proc.stderr[-3000:]
        run_dir = Path(proc.stdout.strip().splitlines()[-1])
        metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
        assert metrics["pass@1"]["value"] == pytest.approx(0.5)
        assert metrics["bon@2"]["verifier"] == shown and metrics["bon@2"]["value"] == pytest.approx(want), verifier
    config = json.loads((run_dir / "config.json").read_text())["config"]
    assert config["backend"] == "toy" and config["engine_args"] == {"dtype": "bfloat16", "style": "alternate"}
    # -T values of the wrong type, an option the backend does not take: one line each
    assert "task 'toyplug' argument size takes int, got 'many'" in one_error_line(bonbench(site, *base, "-T", "size=many"))
    assert "the toy backend does not take batch_size" in one_error_line(bonbench(site, *base, "--batch-size", "2"))
    assert "unknown verifier 'nope'" in one_error_line(bonbench(site, *base, "--metric", "bon@2", "--verifier", "nope"))


def test_train_with_the_plugin_objective(site: Path, tiny: str, tmp_path: Path) -> None:
    args = ["train", "--task", "toyplug", "--objective", "toy_obj", "--model", tiny, "--steps", "1", "--prompts-per-step", "2",
            "--group", "2", "--dtype", "float32", "--name", "t", "--out", str(tmp_path)]
    proc = bonbench(site, *args, "-O", "scale=0.5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "checkpoints" / "t"
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == [0]
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    assert manifest["objective"] == "toy_obj" and manifest["objective_options"] == {"scale": 0.5}
    assert "objective 'toy_obj' option scale takes float, got 'big'" in one_error_line(
        bonbench(site, *args[:-2], "--out", str(tmp_path / "bad"), "-O", "scale=big"))


def test_a_plugin_metric_through_every_command(site: Path, tiny: str, tmp_path: Path) -> None:
    """hit@k:t reads verifier scores and has a parameter; coin@k is a Monte Carlo estimate. Samples
    alternate "a b" (right, toyv scores it 1) and "dd" (wrong, 0): of n = 4, two are right and scored
    1, so hit@2:0.5 = pass@2 = 1 - C(2,2)/C(4,2) = 5/6, and hit@2:1.5 = 0 (no sample scores 1.5)."""
    listed = bonbench(site, "list", "metrics").stdout.splitlines()
    assert any(line.startswith("hit@k:t ") and "reads grades + scores" in line and "t in [0, 5]" in line for line in listed)
    assert any(line.startswith("coin@k ") and "Monte Carlo" in line for line in listed)
    assert any(line.startswith("hat^k ") for line in listed)  # a kind named with ^ takes k after it
    out = tmp_path / "results"
    base = ["run", "--task", "toyplug", "--backend", "toy", "--model", tiny, "--n", "4", "--out", str(out)]
    proc = bonbench(site, *base, "--metric", "pass@1,hit@2:0.50,1,coin@2,hat^2", "--verifier", "toyv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert "MC SE" in proc.stdout and "hit@2:0.5" in proc.stdout  # the run's table
    doc = json.loads((run_dir / "metrics.json").read_text())
    m = doc["metrics"]
    assert m["hit@2:0.5"]["value"] == pytest.approx(5 / 6) and m["hit@1:0.5"]["value"] == pytest.approx(0.5)
    assert m["hit@2:0.5"]["verifier"] == "toyv" and "estimate" not in m["hit@2:0.5"]  # exact; its verifier stamped
    assert m["hat^2"]["value"] == pytest.approx(1 / 6)  # C(2,2)/C(4,2)
    coin = m["coin@2"]
    assert coin["estimate"] == "monte_carlo" and coin["mc_draws"] == 64 and 0 < coin["mc_se"] < 0.1
    assert abs(coin["value"] - 5 / 6) < 4 * coin["mc_se"]
    assert "verifier" not in coin and doc["per_problem"]["hit@2:0.5"] == {f"test/{i}": pytest.approx(5 / 6) for i in range(4)}
    curves = json.loads((run_dir / "curves.json").read_text())
    assert list(curves) == ["pass", "bon", "maj", "hit:0.5", "coin", "hat^"]
    assert curves["hit:0.5"]["value"][1] == pytest.approx(5 / 6) and curves["coin"]["mc_draws"] == 64
    # score: another parameter, then another verifier: metrics that read the old verifier's scores are dropped
    proc = bonbench(site, "score", str(run_dir), "--metric", "hit@2:1.5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    assert m["hit@2:1.5"]["value"] == 0.0 and m["hit@2:0.5"]["value"] == pytest.approx(5 / 6)
    other = bonbench(site, *base, "--metric", "pass@1", "--verifier", "match:dd")
    assert other.returncode == 0 and Path(other.stdout.strip().splitlines()[-1]) == run_dir, other.stderr[-3000:]
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    assert not {"hit@2:0.5", "hit@2:1.5", "bon@2"} & set(m) and "coin@2" in m and "pass@1" in m
    proc = bonbench(site, *base, "--metric", "hit@2:0.5,coin@2", "--verifier", "toyv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # report, leaderboard, gate and plot read the plugin's records
    report = bonbench(site, "report", str(run_dir))
    assert report.returncode == 0 and "hit@2:0.5" in report.stdout and "MC SE" in report.stdout, report.stderr[-2000:]
    board = bonbench(site, "leaderboard", str(out), "--metric", "hit@2:.5,coin@2", "--out", str(tmp_path / "board"))
    assert board.returncode == 0, board.stderr[-2000:]
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "toyplug hit@2:0.5" in md and "toyplug coin@2" in md and "MC SE" in md
    saved = bonbench(site, "gate", "--save-baseline", "--run", str(run_dir), "--out", str(tmp_path / "b.json"),
                     "--metric", "hit@2:0.5,coin@2")
    assert saved.returncode == 0, saved.stderr[-2000:]
    gate = bonbench(site, "gate", "--baseline", str(tmp_path / "b.json"), "--run", str(run_dir))
    assert gate.returncode == 0 and "hit@2:0.5" in gate.stdout and "coin@2" in gate.stdout, gate.stdout + gate.stderr
    plot = bonbench(site, "plot", str(run_dir), "--out", str(tmp_path / "plot"))
    assert plot.returncode == 0, plot.stderr[-2000:]
    html = (tmp_path / "plot" / "report.html").read_text()
    assert "hit@2:0.5" in html and "MC SE" in html and "coin@2" in html
    # a kind that does not declare scaling_law gets no coverage-law fit; pass@k does
    fitted = json.loads((tmp_path / "plot" / "report.json").read_text())["runs"][0]["fits"]
    assert fitted and set(fitted) <= {"pass", "bon", "maj"}
    assert bonbench(site, "plot", str(run_dir), "--kind", "hit:0.5", "--out", str(tmp_path / "plot2")).returncode == 0


@pytest.mark.parametrize("metric,line", [
    ("hit@2", "error: hit@2 needs its parameter: hit@k:t with t in [0, 5], e.g. hit@2:0.5"),
    ("hit@2:9", "error: hit@2:9: t must be a number in [0, 5], e.g. hit@2:0.5"),
    ("hit@8:0.5", "error: hit@8:0.5 need(s) k <= 4, but n is 4; raise --n to 8 or lower k"),
    ("hits@2", "error: unknown metric 'hits@2'; use pass@k, pass^k, gpass@k:tau, mgpass@k, bon@k, hit@k:t, coin@k, hat^k, "
               "maj@k, wmaj@k, bom@k:share, mean or max@k (k >= 1; "
               "`bonbench list metrics`)"),
])
def test_bad_metric_names_are_one_line(site: Path, tmp_path: Path, metric: str, line: str) -> None:
    proc = bonbench(site, "run", "--task", "toyplug", "--backend", "toy", "--model", "m", "--n", "4", "--metric", metric,
                    "--out", str(tmp_path))
    assert one_error_line(proc) == line
    assert not (tmp_path / "runs").exists()


def test_a_score_reading_metric_without_scores_names_the_fix(site: Path, tmp_path: Path) -> None:
    """Imported samples carry no log-probabilities, so the default verifier (logprob) has nothing to
    score with: one line naming the verifiers that do, before anything is sampled or written."""
    rows = [{"problem_id": f"test/{i}", "sample_idx": j, "completion": "a b" if j % 2 == 0 else "dd"}
            for i in range(4) for j in range(2)]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = bonbench(site, "score", "--task", "toyplug", "--samples", str(path), "--metric", "hit@2:0.5", "--out",
                    str(tmp_path / "results"))
    assert one_error_line(proc) == ("error: hit@2:0.5 read(s) verifier scores, and the default verifier logprob needs the "
                                    "samples' log-probabilities, which samples.jsonl does not have; pass --verifier oracle, "
                                    "a reward model (--verifier rm:SPEC) or another verifier (`bonbench list verifiers`)")
    assert not (tmp_path / "results").exists()  # refused before anything is written
    ok = bonbench(site, "score", "--task", "toyplug", "--samples", str(path), "--metric", "hit@2:0.5", "--verifier",
                  "toyv", "--out", str(tmp_path / "results"))
    assert ok.returncode == 0, ok.stderr[-2000:]
