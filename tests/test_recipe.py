"""``bonbench recipe`` on synthetic run directories written with the project's store
(``bonbench.apps.analysis.synthetic``): the chosen point against brute force (every strategy's
accuracy by enumeration of k-subsets, its cost from the row counts by hand), the paired difference
to the runner-up, FLOPs, difficulty bins, the files, and every bad input as one ``error:`` line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.model_params import known_params, parse_params, safetensors_params
from bonbench.apps.analysis.recipe import RULES, build_recipe, difficulty_bins
from bonbench.apps.analysis.recipe_write import frontier
from bonbench.apps.analysis.synthetic import VERIFIER, write_synthetic_run
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from bonbench.metrics.estimators import ProblemOutcome
from tests.test_ragged_n import brute, s_bom, s_bon, s_maj, s_pass

P, PROMPT, VTOK = 12, 50, 30
IDS = [f"q{i:02d}" for i in range(P)]
RUNS = {  # model -> (success probabilities, generated tokens per sample, n, temperature)
    "small": (np.linspace(0.05, 0.6, P), 100, 4, 0.7),
    "big": (np.linspace(0.2, 0.95, P), 400, 4, 1.0),
}


def write_runs(root: Path, prompt_tokens: int | None = PROMPT, task: str = "synthetic") -> dict[str, Path]:
    return {model: write_synthetic_run(root, p, n=n, task=task, model=model, temperature=t, problem_ids=IDS,
                                       seed=len(model), n_tokens=gen, prompt_tokens=prompt_tokens,
                                       verifier_tokens=VTOK, answers=True, n_boot=20)
            for model, (p, gen, n, t) in RUNS.items()}


def outcomes_of(run: Path) -> list[ProblemOutcome]:
    """Each problem's outcome read straight from the rows (no bonbench reader)."""
    grades = [json.loads(line) for line in (run / "grades" / "synthetic.jsonl").read_text().splitlines()]
    scores = {(r["problem_id"], r["sample_idx"]): r["score"]
              for r in map(json.loads, (run / "scores" / f"{VERIFIER}.jsonl").read_text().splitlines())}
    out = []
    for pid in IDS:
        rows = sorted((g for g in grades if g["problem_id"] == pid), key=lambda g: g["sample_idx"])
        out.append(ProblemOutcome(pid, tuple(float(g["correct"]) for g in rows),
                                  tuple("right" if g["correct"] else g["answer"] for g in rows),
                                  tuple(scores[(pid, g["sample_idx"])] for g in rows)))
    return out


def brute_strategies(runs: dict[str, Path]) -> list[tuple[float, float, str, int, str, np.ndarray]]:
    """(cost, accuracy, model, N, rule, per-problem values) of every deployable strategy, by hand."""
    out = []
    for model, run in runs.items():
        _, gen, n, _ = RUNS[model]
        outcomes = outcomes_of(run)
        single = np.array([np.mean(o.correct) for o in outcomes])
        out.append((PROMPT + gen, float(single.mean()), model, 1, "single", single))
        for N in (2, 4):
            for rule, subset, verifier_cost in (("maj", s_maj, 0), ("bon", s_bon, VTOK), ("bom", s_bom, VTOK)):
                values = np.array([brute(o, N, subset) for o in outcomes])
                out.append((PROMPT + N * gen + N * verifier_cost, float(values.mean()), model, N, rule, values))
    return out


@pytest.fixture(autouse=True)
def recipe_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test keeps its recipe tables in its own folder, never the user's cache."""
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "recipe"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_runs(tmp_path_factory.mktemp("recipe") / "results")


def test_the_chosen_point_is_the_brute_force_best_within_the_budget(runs: dict[str, Path]) -> None:
    every = brute_strategies(runs)
    budgets = [200.0, 600.0, 1000.0, 1700.0]
    recipe = build_recipe([runs["small"].parents[2]], budgets, n_boot=200)
    assert recipe.problems == tuple(IDS)
    for budget, choice in zip(budgets, recipe.choices, strict=True):
        fits = sorted((s for s in every if s[0] <= budget), key=lambda s: (-s[1], s[0]))
        by_key = {s[2:5]: s for s in fits}
        assert choice.group == "all" and choice.budget == budget
        # the best accuracy within the budget, the cheapest of equals (bon and bom may tie exactly)
        best = by_key[(choice.best.model, choice.best.N, choice.best.rule)]
        assert best[1] == pytest.approx(fits[0][1], abs=1e-12)
        assert best[0] == min(s[0] for s in fits if abs(s[1] - fits[0][1]) < 1e-12)
        tied = [s for s in fits if abs(s[1] - best[1]) < 1e-12 and s[0] == best[0] and s[3] == best[3]]
        assert best[4] == min((s[4] for s in tied), key=RULES.index)  # of exact equals, the simplest rule
        assert choice.best.value == pytest.approx(best[1], abs=1e-12) and choice.best.cost == pytest.approx(best[0])
        assert choice.best.cost <= budget
        assert choice.best.ci95 == pytest.approx(bootstrap_ci(best[5], n_boot=200, seed=0), abs=1e-12)
        if len(fits) == 1:  # nothing else fits: no runner-up, no difference
            assert choice.runner_up is None and choice.diff is None
            continue
        assert choice.runner_up is not None and choice.runner_up.value == pytest.approx(fits[1][1], abs=1e-12)
        runner = by_key[(choice.runner_up.model, choice.runner_up.N, choice.runner_up.rule)]
        # every interval of the budgets' choices is bootstrapped in one resampling: each as it would be alone
        assert choice.runner_up.ci95 == pytest.approx(bootstrap_ci(runner[5], n_boot=200, seed=0), abs=1e-12)
        assert choice.diff is not None
        d, lo, hi, _ = paired_bootstrap_diff(best[5], runner[5], n_boot=200)
        assert choice.diff == pytest.approx((d, lo, hi), abs=1e-12)
        # the oracle's bound is pass@N within the budget, never the choice
        assert choice.oracle_bound is not None and choice.oracle_bound.rule == "pass"
        assert choice.oracle_bound.ci95 is not None and choice.oracle_bound.ci95[0] <= choice.oracle_bound.value
        assert choice.oracle_bound.value >= choice.best.value - 1e-12
    bound = recipe.choices[-1].oracle_bound
    assert bound is not None and bound.value == pytest.approx(
        max(np.mean([brute(o, N, s_pass) for o in outcomes_of(runs[m])])
            for m in RUNS for N in (1, 2, 4) if PROMPT + N * RUNS[m][1] <= 1700))
    # negative verifier scores: wmaj (weights must be >= 0) is left out with a note, not an error
    assert any("wmaj" in note for note in recipe.notes)
    assert not any(s.rule == "wmaj" for s in recipe.strategies)


def test_frontier_is_the_upper_envelope(runs: dict[str, Path]) -> None:
    recipe = build_recipe([runs["small"].parents[2]], [600.0], n_boot=50)
    front = frontier(recipe.strategies)
    for s in recipe.strategies:
        if not s.oracle:
            assert any(f.cost <= s.cost + 1e-9 and f.value >= s.value - 1e-12 for f in front)
    assert [f.cost for f in front] == sorted(f.cost for f in front)


def test_flops_are_two_params_per_token_verifier_included(runs: dict[str, Path]) -> None:
    root = runs["small"].parents[2]
    with pytest.raises(BonbenchError, match="parameter count of model 'big'.*--params big=COUNT"):
        build_recipe([root], [1e12], cost="flops", params={"small": 1e8})
    params = {"small": 1e8, "big": 1e9, VERIFIER: 5e8}
    recipe = build_recipe([root], [1e12], cost="flops", params=params, n_boot=20)
    for s in recipe.strategies:
        gen = RUNS[s.model][1]
        verifier = 2 * 5e8 * s.N * VTOK if s.rule in ("bon", "bom", "wmaj") else 0.0
        assert s.cost == pytest.approx(2 * params[s.model] * (PROMPT + s.N * gen) + verifier)


def test_difficulty_bins_from_the_base_runs_pass1(runs: dict[str, Path]) -> None:
    bins = difficulty_bins({"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.5, "e": 0.0}, ["a", "b", "c", "d", "e"])
    assert bins == {"difficulty 1": [0], "difficulty 2": [2], "difficulty 3": [3], "difficulty 4": [1],
                    "difficulty 5": [4]}
    recipe = build_recipe([runs["small"].parents[2]], [1200.0], by="difficulty", base_run=runs["big"], n_boot=20)
    assert recipe.base_run == str(runs["big"])
    groups = [c.group for c in recipe.choices]
    assert groups[0] == "all" and sorted(groups[1:]) == [f"difficulty {i}" for i in range(1, 6)]
    assert sum(c.n_problems for c in recipe.choices[1:]) == P
    every = brute_strategies(runs)
    pass1 = {o.problem_id: float(np.mean(o.correct)) for o in outcomes_of(runs["big"])}
    for choice in recipe.choices[1:]:
        idx = difficulty_bins(pass1, IDS)[choice.group]
        best = max((s for s in every if s[0] <= 1200), key=lambda s: (s[5][idx].mean(), -s[0]))
        assert choice.best.value == pytest.approx(best[5][idx].mean(), abs=1e-12)


def test_cli_writes_table_json_and_plot(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = runs["small"].parents[2]
    assert main(["recipe", str(root), "--budget", "600,1200", "--n-boot", "50", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "recipe for synthetic: 12 problems" in out and "oracle bound" in out
    doc = json.loads((tmp_path / "r" / "recipe.json").read_text())
    assert [c["budget"] for c in doc["choices"]] == [600.0, 1200.0]
    assert (tmp_path / "r" / "recipe-frontier.png").stat().st_size > 5000
    assert main(["recipe", str(root), "--budget", "600", "--json", "--n-boot", "20", "--out", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["choices"][0]["best"]["rule"] in ("single", "bon", "maj", "bom")  # stdout: JSON alone
    assert str(tmp_path / "s" / "recipe.json") in printed.err


@pytest.mark.parametrize(("budget", "needle"), [
    ("0", "--budget must be positive"), ("-5", "--budget must be positive"), ("30", "below the cheapest run's prompt"),
    ("120", "below the cheapest strategy"), ("1e6", "above the costliest strategy"),
])
def test_bad_budgets_are_one_error_line(runs: dict[str, Path], capsys: pytest.CaptureFixture[str], budget: str,
                                        needle: str) -> None:
    assert main(["recipe", str(runs["small"].parents[2]), f"--budget={budget}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and needle in err
    if "costliest" in needle:  # names the run that would cover it: N from the measured cost per sample
        per_n = 400 + VTOK
        assert f"--n {math.ceil((1e6 - PROMPT) / per_n)}" in err and "bonbench run --task synthetic --model big" in err
    if "cheapest strategy" in needle:  # a length no sample can exceed: prompt + max tokens <= budget
        assert f"--max-tokens {120 - PROMPT}`" in err and "--n 1" in err and "--model small" in err


def test_mixed_tasks_and_missing_token_counts_are_one_error_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    write_runs(root)
    write_runs(root, task="other")
    assert main(["recipe", str(root), "--budget", "600"]) == 1
    err = capsys.readouterr().err.strip()
    assert "several tasks (other, synthetic); choose one with --task" in err and "\n" not in err
    assert main(["recipe", str(root), "--budget", "600", "--task", "other", "--n-boot", "10",
                 "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    bare = tmp_path / "bare"
    write_runs(bare, prompt_tokens=None)
    assert main(["recipe", str(bare), "--budget", "600"]) == 1
    err = capsys.readouterr().err.strip()
    assert "no prompt token counts (prompt_tokens" in err and "\n" not in err


def test_parameter_counts_come_from_the_weights_when_they_are_here(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    model = tmp_path / "tiny-model"
    model.mkdir()
    save_file({"a": np.zeros((3, 4), dtype=np.float32), "b": np.zeros(5, dtype=np.float32)}, str(model / "model.safetensors"))
    save_file({"c": np.zeros((2, 2), dtype=np.float32)}, str(model / "model-2.safetensors"))
    assert safetensors_params(model) == 12 + 5 + 4
    verifier = tmp_path / "results" / "verifiers" / "head"
    verifier.mkdir(parents=True)
    save_file({"w": np.zeros(7, dtype=np.float32)}, str(verifier / "head.safetensors"))
    (verifier / "bonbench_verifier.json").write_text(json.dumps({"base": {"path": str(model), "name": "x"}}))
    assert known_params("learned:head", [tmp_path / "results"]) == 21 + 7  # backbone + head
    assert known_params("learned:nowhere") is None and known_params("no/such/model") is None
    # a run sampled from a model folder: --cost flops counts its weights, --params still wins
    uncounted = tmp_path / "uncounted"
    write_synthetic_run(uncounted, [0.5] * 4, n=2, model=str(model), problem_ids=IDS[:4], n_tokens=10, prompt_tokens=5,
                        verifier_tokens=None, answers=True, n_boot=10)
    with pytest.raises(BonbenchError, match="verifier 'synthetic' recorded no token counts"):
        build_recipe([uncounted], [100.0])
    root = tmp_path / "counted"
    write_synthetic_run(root, [0.5] * 4, n=2, model=str(model), problem_ids=IDS[:4], n_tokens=10, prompt_tokens=5,
                        verifier_tokens=3, answers=True, n_boot=10)
    with pytest.raises(BonbenchError, match="parameter count of verifier 'synthetic'.*--params synthetic=COUNT"):
        build_recipe([root], [2 * 21 * 25], cost="flops")
    free = tmp_path / "free"  # a verifier that reads no tokens (logprob) needs no parameter count
    write_synthetic_run(free, [0.5] * 4, n=2, model=str(model), problem_ids=IDS[:4], n_tokens=10, prompt_tokens=5,
                        verifier_tokens=0, answers=True, n_boot=10)
    assert {s.cost for s in build_recipe([free], [2 * 21 * 25], cost="flops", n_boot=10).strategies
            if s.rule == "bon"} == {2 * 21 * 25}
    recipe = build_recipe([root], [2 * 21 * 25], cost="flops", params={"synthetic": 100.0}, n_boot=10)
    costs = {(s.rule, s.N): s.cost for s in recipe.strategies}
    assert costs[("single", 1)] == 2 * 21 * 15 and costs[("bon", 2)] == 2 * 21 * 25 + 2 * 100 * 2 * 3
    assert parse_params(["m=1e9", "learned:v=2.5e8"]) == {"m": 1e9, "learned:v": 2.5e8}
    for bad in ("m", "=3", "m=0", "m=-1", "m=x", "m=inf"):
        with pytest.raises(BonbenchError, match="expected NAME=COUNT"):
            parse_params([bad])


def test_a_served_run_reads_the_prompt_once_per_sample(tmp_path: Path) -> None:
    """hf and vLLM prefill a problem's prompt once; the openai backend sends one request per sample."""
    runs = write_runs(tmp_path / "results")
    config = runs["small"] / "config.json"
    doc = json.loads(config.read_text())
    doc["config"]["backend"] = "openai"
    config.write_text(json.dumps(doc))
    recipe = build_recipe([tmp_path / "results"], [1000.0], n_boot=10)
    for s in recipe.strategies:
        gen, verifier = RUNS[s.model][1], (VTOK if s.rule in ("bon", "bom", "wmaj") else 0)
        prompt = PROMPT * s.N if s.model == "small" else PROMPT
        assert s.cost == pytest.approx(prompt + s.N * (gen + verifier))


def test_tables_are_kept_until_a_runs_files_change(runs: dict[str, Path], recipe_cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bonbench.apps.analysis import recipe_table
    from bonbench.apps.analysis.recipe_write import recipe_json

    root = runs["small"].parents[2]
    first = recipe_json(build_recipe([root], [600.0, 1000.0], n_boot=50))
    assert len(list(recipe_cache.glob("*.npz"))) == 2
    computed: list[Path] = []
    real = recipe_table.compute_table

    def counting(run: object, share: float) -> recipe_table.RunTable:
        computed.append(run.path)  # type: ignore[attr-defined]  # a RunData
        return real(run, share)  # type: ignore[arg-type]  # a RunData

    monkeypatch.setattr(recipe_table, "compute_table", counting)
    assert recipe_json(build_recipe([root], [600.0, 1000.0], n_boot=50)) == first and computed == []
    # a damaged kept file is computed again, and so is a run whose rows changed
    sorted(recipe_cache.glob("*.npz"))[0].write_bytes(b"not a table")
    build_recipe([root], [600.0], n_boot=10)
    assert len(computed) == 1
    scores = runs["big"] / "scores" / f"{VERIFIER}.jsonl"
    scores.write_text(scores.read_text() + "\n")
    build_recipe([root], [600.0], n_boot=10)
    assert computed[-1] == runs["big"] and len(computed) == 2
    # a cache that cannot be written costs only the speed
    blocker = recipe_cache.parent.parent / "blocked"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("BONBENCH_CACHE", str(blocker))
    with pytest.warns(UserWarning, match="cannot keep the recipe table"):
        assert recipe_json(build_recipe([root], [600.0, 1000.0], n_boot=50))["choices"] == first["choices"]


def test_runs_of_other_problems_are_compared_on_the_shared_ones(runs: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_runs(root)
    write_synthetic_run(root, [0.9] * 8, n=4, model="partial", problem_ids=IDS[:8], n_tokens=100, prompt_tokens=PROMPT,
                        verifier_tokens=VTOK, answers=True, n_boot=10)
    recipe = build_recipe([root], [600.0], n_boot=10)
    assert recipe.problems == tuple(IDS[:8])
    assert sum("4 problems not in every run left out (8 shared)" in n for n in recipe.notes) == 2
    with pytest.raises(BonbenchError, match="--base-run .* is not one of the recipe's runs"):
        build_recipe([root], [600.0], by="difficulty", base_run=tmp_path)
    with pytest.raises(BonbenchError, match="--by takes difficulty"):
        build_recipe([root], [600.0], by="level")


def test_a_run_with_per_problem_n_stops_its_grid_at_the_smallest(tmp_path: Path) -> None:
    """A problem with fewer samples (an imported file, an adaptive run) keeps its own n: N stops at the
    smallest n, and every value is the subset average over each problem's own samples."""
    root = tmp_path / "results"
    run = write_runs(root)["big"]
    for name in ("samples.jsonl", "grades/synthetic.jsonl", f"scores/{VERIFIER}.jsonl"):
        path = run / name
        rows = [line for line in path.read_text().splitlines()
                if not (json.loads(line)["problem_id"] == IDS[0] and json.loads(line)["sample_idx"] == 3)]
        path.write_text("\n".join(rows) + "\n")
    recipe = build_recipe([run], [1300.0], n_boot=10)
    got = {(s.rule, s.N): s for s in recipe.strategies}
    assert sorted(N for rule, N in got if rule == "maj") == [2, 3]  # 3 = the smallest n, then no 4
    outcomes = outcomes_of(run)
    assert len(outcomes[0].correct) == 3 and len(outcomes[1].correct) == 4
    for rule, subset in (("maj", s_maj), ("bon", s_bon), ("bom", s_bom)):
        assert got[(rule, 3)].value == pytest.approx(np.mean([brute(o, 3, subset) for o in outcomes]), abs=1e-12)
    # the cost of N samples uses each problem's own mean tokens per sample (here all 400)
    assert got[("maj", 3)].cost == pytest.approx(PROMPT + 3 * 400)
