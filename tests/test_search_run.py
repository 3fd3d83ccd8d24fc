"""Search runs are runs (issue 34, point 3): ``bonbench run --strategy`` on real MATH problems with a
tiny base policy (``search_models``) and a tiny Math-Shepherd PRM (``prm_models``), its candidates
stored as samples with their tree beside them, its run id, its refusals, and a search killed
mid-way that resumes to the bytes of an uninterrupted one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prm_models import build_math_shepherd
from search_models import build_policy

from bonbench.apps.cli import main

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("search-run")
    return {"policy": build_policy(root / "policy"),
            "prm": build_math_shepherd(root / "math-shepherd-mistral-7b-prm")}


def run_args(models: dict[str, Path], data_dir: Path, out: Path, *extra: str, strategy: str = "beam",
             n: int = 4) -> list[str]:
    return ["run", "--task", "math", "-T", "fewshot=0", "--limit", "2", "--n", str(n), "--strategy", strategy,
            "--verifier", f"prm:{models['prm']}", "--backend", "hf", "--model", str(models["policy"]),
            "--max-tokens", "16", "--dtype", "float32", "--data-dir", str(data_dir), "--out", str(out),
            "--n-boot", "20", *extra]


def run_dir(out: Path) -> Path:
    (cfg,) = out.glob("runs/math/*/*/config.json")
    return cfg.parent


def rows(path: Path) -> list[dict]:  # type: ignore[type-arg]  # JSON rows
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_error(code: int, err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code != 0 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("strategy", ["beam", "dvts", "particle_filtering"])
def test_a_search_run_stores_its_candidates_tree_and_ledger(strategy: str, models: dict[str, Path], data_dir: Path,
                                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = run_args(models, data_dir, out, "-S", "max_iterations=3", *(["-S", "width=2"] if strategy != "particle_filtering"
                                                                      else []), strategy=strategy)
    assert main(args) == 0
    root = run_dir(out)
    config = json.loads((root / "config.json").read_text())
    search = config["hashed"]["search"]
    assert search["strategy"] == strategy and search["n"] == 4 and search["delimiter"] == "\n\n"
    assert search["options"]["max_iterations"] == 3
    samples = rows(root / "samples.jsonl")
    assert sorted((s["problem_id"], s["sample_idx"]) for s in samples) == sorted(
        (pid, j) for pid in {s["problem_id"] for s in samples} for j in range(4)) and len(samples) == 8
    trees = {(t["problem_id"], t["sample_idx"]): t for t in rows(root / "search" / "trees.jsonl")}
    for s in samples:
        tree = trees[(s["problem_id"], 0)]
        (cand,) = [c for c in tree["candidates"] if c["sample_idx"] == s["sample_idx"]]
        assert s["completion"] == "\n\n".join(cand["steps"]) and len(cand["step_scores"]) == len(cand["steps"])
        node, path = cand["leaf"], []  # the candidate's steps are the path of kept nodes from the root to its leaf
        while node is not None:
            assert tree["nodes"][node]["kept"]
            path.append(tree["nodes"][node]["step"])
            node = tree["nodes"][node]["parent"]
        assert [p for p in reversed(path) if p.strip()] == cand["steps"]
    ledger = rows(root / "search" / "ledger.jsonl")
    assert len(ledger) == 2 and all(r["cost"]["generated_tokens"] > 0 and r["cost"]["verifier_calls"] > 0 for r in ledger)
    metrics = json.loads((root / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"pass@4", "bon@4", "maj@4", "wmaj@4"}  # k = n only; no pass@1
    assert metrics["search"]["strategy"] == strategy and json.loads((root / "curves.json").read_text()) == {}
    # the selection read the PRM's scores of the candidates' steps (the verify stage scored the stored samples)
    scores = rows(next((root / "scores").glob("prm-*.jsonl")))
    assert len(scores) == 8 and all(r["steps"] is not None for r in scores)
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    shown = capsys.readouterr().out
    assert "wmaj@4" in shown and f"search {strategy}(" in shown and "verifier: search" in shown
    # rescoring keeps the budget and the refusals
    rescore = ["score", str(root), "--data-dir", str(data_dir)]
    assert "assume(s) exchangeable draws" in one_error(main([*rescore, "--metric", "pass@1"]), capsys.readouterr().err)
    assert "this search run's budget" in one_error(main([*rescore, "--n", "8"]), capsys.readouterr().err)


def test_the_strategy_and_its_options_name_the_run(models: dict[str, Path], data_dir: Path, tmp_path: Path) -> None:
    from bonbench.run.plan import plan
    from bonbench.run.request import RunRequest

    def run_id(**kw: object) -> str:
        base = dict(task="math", task_args={"fewshot": "0"}, limit=2, n=4, strategy="beam", verifier=f"prm:{models['prm']}",
                    backend="hf", model=str(models["policy"]), dtype="float32", data_dir=str(data_dir), out=tmp_path)
        return plan(RunRequest(**{**base, **kw})).runs[0].run_hash  # type: ignore[arg-type]  # test values

    beam = run_id()
    assert run_id(strategy_args={"width": "4"}) == beam  # the default written out is the same search
    assert run_id(strategy_args={"width": "2"}) != beam  # two widths never share a folder
    assert run_id(n=8) != beam  # n is the budget
    assert run_id(strategy="dvts") != beam
    assert run_id(seeds=3) == beam  # more seeds add repetitions to the same run
    sampling = run_id(strategy=None)
    assert run_id(strategy="best_of_n") not in (sampling, beam)  # best_of_n is a search run, not plain sampling


REFUSED = [
    (["--strategy", "nope"], "unknown strategy"),
    (["--strategy", "beam", "-S", "width=3"], "needs n a multiple of its width 3"),
    (["--strategy", "beam", "-S", "nope=1"], "no option 'nope'"),
    (["--strategy", "beam", "--metric", "bon@2"], "assume(s) exchangeable draws"),
    (["--strategy", "beam", "--verifier", "oracle"], "cannot score partial solutions"),
    (["--strategy", "beam", "--task", "mbpp"], "has no step structure"),
    (["--strategy", "beam", "--temperature", "0"], "sample with --temperature > 0"),
    (["-S", "width=2"], "add --strategy NAME"),
    (["--strategy", "beam", "--no-verifier"], "add --verifier prm:SOURCE"),
]


@pytest.mark.parametrize(("extra", "says"), REFUSED)
def test_bad_search_requests_fail_before_sampling(extra: list[str], says: str, models: dict[str, Path], data_dir: Path,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = run_args(models, data_dir, tmp_path / "out")
    args = args[:args.index("--strategy")] + args[args.index("--strategy") + 2:]  # the case gives its own
    args = [a for a in args if a not in ("-T", "fewshot=0")] if "mbpp" in extra else args
    if "--verifier" in extra or "--no-verifier" in extra:
        i = args.index("--verifier")
        args = args[:i] + args[i + 2:]
        extra = [e for e in extra if e != "--no-verifier"]
    line = one_error(main([*args, *extra]), capsys.readouterr().err)
    assert says in line, line
    assert not list((tmp_path / "out").glob("runs/**/samples.jsonl"))


def test_a_backend_without_a_step_sampler_is_one_line(models: dict[str, Path], data_dir: Path, tmp_path: Path) -> None:
    from bonbench.api.sampler import SamplingParams
    from bonbench.plugins.samplers.scripted import ScriptedSampler
    from bonbench.plugins.samplers.steps import step_sampler

    with pytest.raises(ValueError, match="backend .scripted. has no step sampler.*--backend hf, vllm or openai"):
        step_sampler(ScriptedSampler([]), SamplingParams(), "\n\n")


def test_best_of_n_keeps_every_k(models: dict[str, Path], data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "--metric", "pass@1,bon@2", strategy="best_of_n")) == 0
    metrics = json.loads((run_dir(out) / "metrics.json").read_text())
    assert {"pass@1", "bon@2", "maj@2", "pass@2"} <= set(metrics["metrics"])


KILLER = textwrap.dedent("""
    import os, signal, sys
    from bonbench.core import store
    from bonbench.apps.cli import main

    calls = 0
    append = store.JsonlTable.append

    def killing_append(self, records):
        global calls
        got = append(self, records)
        if self.path.parent.name == "progress":
            calls += 1
            if calls == int(os.environ["KILL_AFTER"]):
                os.kill(os.getpid(), signal.SIGKILL)  # as a killed job dies: no cleanup, no flush
        return got

    store.JsonlTable.append = killing_append
    sys.exit(main(sys.argv[1:]))
""")


def counting_journal(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls searches ask the model live (each is appended to its journal)."""
    from bonbench.core.store import JsonlTable

    asked = [0]
    append = JsonlTable.append

    def counted(self, records):  # type: ignore[no-untyped-def]  # JsonlTable.append's signature
        asked[0] += self.path.parent.name == "progress"
        return append(self, records)

    monkeypatch.setattr(JsonlTable, "append", counted)
    return asked


def test_a_killed_search_resumes_to_the_same_bytes(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    args = run_args(models, data_dir, tmp_path / "whole", "-S", "width=2", "-S", "max_iterations=3")
    asked = counting_journal(monkeypatch)
    assert main(args) == 0
    whole, calls = run_dir(tmp_path / "whole"), asked[0]
    assert calls > 4  # several steps per problem: the kill below lands mid-search
    assert not list((whole / "search").glob("progress/*"))  # a finished search keeps no journal
    killed = [a if a != str(tmp_path / "whole") else str(tmp_path / "killed") for a in args]
    env = {**os.environ, "KILL_AFTER": str(calls // 2 + 1), "PYTHONPATH": str(TESTS.parent)}
    proc = subprocess.run([sys.executable, "-c", KILLER, *killed], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]
    resumed = run_dir(tmp_path / "killed")
    (journal,) = (resumed / "search").glob("progress/*.jsonl")  # the search it died in
    assert rows(journal)  # mid-search: some of its calls are recorded
    asked[0] = 0
    assert main(killed) == 0
    assert asked[0] == calls - (calls // 2 + 1)  # every recorded call replayed, none asked again
    for name in ("samples.jsonl", "search/trees.jsonl"):
        assert (resumed / name).read_bytes() == (whole / name).read_bytes(), name
    untimed = [[{k: v for k, v in r["cost"].items() if not k.endswith("_s")} for r in rows(d / "search" / "ledger.jsonl")]
               for d in (resumed, whole)]
    assert untimed[0] == untimed[1]  # the same compute, counted as if it had run in one go
    assert not list((resumed / "search").glob("progress/*"))
    # resuming never grows the budget: the same command again samples nothing
    asked[0] = 0
    assert main(killed) == 0
    assert asked[0] == 0 and (resumed / "samples.jsonl").read_bytes() == (whole / "samples.jsonl").read_bytes()


def test_seeds_repeat_the_search_and_metrics_average_them(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    from bonbench.metrics.bootstrap import bootstrap_ci

    out = tmp_path / "out"
    args = run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2")
    assert main(args) == 0
    root = run_dir(out)
    first = (root / "samples.jsonl").read_bytes()
    assert main([*args, "--seeds", "2"]) == 0  # the same run, its second repetitions added
    assert run_dir(out) == root and (root / "samples.jsonl").read_bytes().startswith(first)
    samples = rows(root / "samples.jsonl")
    pids = sorted({s["problem_id"] for s in samples})
    assert sorted((s["problem_id"], s["sample_idx"]) for s in samples) == [(p, j) for p in pids for j in range(8)]
    trees = rows(root / "search" / "trees.jsonl")
    assert sorted((t["problem_id"], t["sample_idx"]) for t in trees) == [(p, r) for p in pids for r in (0, 4)]
    assert len({t["seed"] for t in trees}) == 2  # repetition 1 searched under another seed
    # verdicts made up, so that the repetitions differ: problem 0 is solved in repetition 0 only,
    # problem 1 in both; the grades are reused by `score` (same grader and settings)
    solved = {(pids[0], 1), (pids[1], 0), (pids[1], 5)}
    grades = rows(root / "grades" / "math.jsonl")
    for g in grades:
        g["correct"] = (g["problem_id"], g["sample_idx"]) in solved
    (root / "grades" / "math.jsonl").write_text("".join(json.dumps(g) + "\n" for g in grades))
    capsys.readouterr()
    assert main(["score", str(root), "--data-dir", str(data_dir), "--n-boot", "50"]) == 0
    assert "mean over the seeds' searches per problem; CI: bootstrap over problems" in capsys.readouterr().out
    metrics = json.loads((root / "metrics.json").read_text())
    assert metrics["per_problem"]["pass@4"] == {pids[0]: 0.5, pids[1]: 1.0}
    assert metrics["metrics"]["pass@4"]["value"] == 0.75
    lo, hi = bootstrap_ci(np.array([0.5, 1.0]), n_boot=50, seed=0)
    assert metrics["metrics"]["pass@4"]["ci95"] == [lo, hi]
    # bon@4 per problem: the mean over repetitions of the verdict of the PRM's pick (ties shared)
    scores = {(r["problem_id"], r["sample_idx"]): r["score"] for r in rows(next((root / "scores").glob("prm-*.jsonl")))}
    for pid in pids:
        picks = []
        for r in (0, 1):
            keys = [(pid, r * 4 + j) for j in range(4)]
            best = max(scores[k] for k in keys)
            top = [k for k in keys if scores[k] == best]
            picks.append(sum(k in solved for k in top) / len(top))
        assert metrics["per_problem"]["bon@4"][pid] == pytest.approx(sum(picks) / 2)
    assert metrics["search"]["seeds"] == 2


def test_plot_puts_searches_and_sampling_on_one_axis(models: dict[str, Path], data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2")) == 0
    sampling = run_args(models, data_dir, out, "--metric", "bon@4")
    i = sampling.index("--strategy")
    assert main(sampling[:i] + sampling[i + 2:]) == 0
    assert main(["plot", str(out), "--out", str(tmp_path / "plot")]) == 0
    (section,) = json.loads((tmp_path / "plot" / "report.json").read_text())["compute"]
    points = {p["strategy"]: p for p in section["points"]}
    assert set(points) == {"beam", "sampling"} and not section["left_out"]
    for strategy, p in points.items():
        from bonbench.pipeline.ledger import compute_ledger

        total = compute_ledger(p["run"]).total()
        spent = total.prompt_tokens + total.generated_tokens + sum(v.tokens for v in total.verifiers)
        assert p["tokens"] == spent / 2 and (strategy == "beam") == (p["curve"] == [])
    assert len(points["sampling"]["curve"]) == 4 and points["sampling"]["curve"][-1][0] == points["sampling"]["tokens"]
    assert (tmp_path / "plot" / "compute00_math.png").is_file()


class ReplySampler:
    """Stands in for an ``HFSampler``: answers each text with the completion scripted for its ending."""

    def __init__(self, replies: dict[str, tuple[str, bool, str]]) -> None:
        self.replies = replies
        self.stops: list[tuple[str, ...]] = []

    def continue_texts(self, texts, seeds, params):  # type: ignore[no-untyped-def]  # HFSampler's signature
        from bonbench.core.records import Sample

        self.stops.append(params.stop)
        out = []
        for t in texts:
            completion, at_stop, reason = next(v for k, v in self.replies.items() if t.endswith(k))
            out.append((Sample("search", 0, completion, 3, reason, prompt_tokens=len(t)), at_stop))
        return out


def test_the_tasks_stop_strings_end_a_searched_solution() -> None:
    from bonbench.api.sampler import SamplingParams
    from bonbench.api.search.records import Prefix
    from bonbench.plugins.samplers.hf_steps import HFStepSampler

    fake = ReplySampler({"Solution:": ("x = 2", True, "stop"),  # a step
                         "x = 2\n\n": ("Problem: what is 3+3?", True, "stop"),  # the next few-shot problem begins
                         "x = 3\n\n": ("so \\boxed{3}\nProblem: next", True, "stop"),  # one ends mid-step
                         "y\n\n": ("the end", True, "stop")})  # to_end: stopped at a task stop string
    sampler = HFStepSampler(fake, SamplingParams(stop=("\n\nProblem:", "\nProblem:")), "\n\n")  # type: ignore[arg-type]  # the stand-in
    got = sampler.continue_prefixes([Prefix("Solution:", (), 0), Prefix("Solution:", ("x = 2",), 1),
                                     Prefix("Solution:", ("x = 3",), 2), Prefix("Solution:", ("y",), 3, to_end=True)])
    assert [(c.text, c.finish) for c in got] == [("x = 2", "step"), ("", "end"), ("so \\boxed{3}", "end"),
                                                 ("the end", "end")]
    assert fake.stops == [("\n\n",), ("\n\nProblem:", "\nProblem:")]  # steps stop at the delimiter, to_end at the task's
