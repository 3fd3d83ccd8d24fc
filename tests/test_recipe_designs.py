"""``bonbench recipe`` weighing search runs and adaptive runs (``recipe_designs``): a search as one
strategy at its own N, costed from its ledger and averaged over its seeds, chosen where it is the
best within the budget; an adaptive run's values and costs unbiased under its designs, checked by
exact enumeration of every pilot and second stage (the naive choices beside them are biased, so the
checks can fail), and end to end against a hand computation from the rows."""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from prm_models import build_math_shepherd
from search_models import build_policy

from bonbench.api.search.records import SearchCost
from bonbench.apps.analysis.recipe import build_recipe
from bonbench.apps.analysis.recipe_designs import stage_mean, two_stage_values
from bonbench.apps.analysis.synthetic import VERIFIER, write_synthetic_run
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.metrics.adaptive import TwoStage
from bonbench.metrics.bootstrap import paired_bootstrap_diff
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.search_rows import SearchLedger, ledger_table
from tests.test_ragged_n import brute, s_bom, s_bon, s_maj, s_pass
from tests.test_recipe import IDS, PROMPT, VTOK, brute_strategies, outcomes_of, write_runs
from tests.test_search_run import run_args, run_dir

N, SEEDS = 2, 2
LEDGER = {"prompt_tokens": 120, "generated_tokens": 260, "verifier_tokens": 80}  # one search's, per problem


@pytest.fixture(autouse=True)
def recipe_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def _edit_config(run: Path, **fields: object) -> None:
    doc = json.loads((run / "config.json").read_text())
    doc["config"].update(fields)
    (run / "config.json").write_text(json.dumps(doc))


def write_search(root: Path, p: np.ndarray, model: str = "small") -> Path:
    """A beam search run of ``model`` at n = N, repeated over SEEDS seeds: the candidates of repetition
    r are samples r*N .. r*N+N-1 (as the pipeline stores them), scored by the selecting verifier at
    VTOK tokens each, and one ledger row per search."""
    run = write_synthetic_run(root, p, n=N * SEEDS, model=model, temperature=0.7, problem_ids=IDS, seed=7,
                              n_tokens=LEDGER["generated_tokens"] // N, prompt_tokens=PROMPT, verifier_tokens=VTOK,
                              answers=True, n_boot=10, task="synthetic")
    _edit_config(run, strategy="beam", strategy_options={"width": 2, "agg": "last"}, seeds=SEEDS, n=N,
                 verifier="prm:tiny")
    cost = {**asdict(SearchCost(**LEDGER, verifier_calls=3, wall_s=1.0, model_s=1.0)), "overhead_s": 0.0}
    ledger_table(run).append(SearchLedger(pid, r * N, cost)
                             for pid in IDS for r in range(SEEDS))
    return run


def search_values(run: Path, subset: object) -> np.ndarray:
    """Per problem, the rule at k = N on each search's candidates, averaged over the seeds, by hand."""
    out = []
    for o in outcomes_of(run):
        reps = [ProblemOutcome(o.problem_id, o.correct[r * N:(r + 1) * N], o.answers[r * N:(r + 1) * N],
                               None if o.scores is None else o.scores[r * N:(r + 1) * N]) for r in range(SEEDS)]
        out.append(np.mean([brute(rep, N, subset) for rep in reps]))
    return np.array(out)


def test_a_search_run_is_one_strategy_at_its_n_costed_from_its_ledger(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = write_runs(root)
    search = write_search(root, np.linspace(0.5, 0.99, len(IDS)))
    recipe = build_recipe([root], [450.0, 600.0], n_boot=200)
    got = [s for s in recipe.strategies if s.run == str(search)]
    # only its own N, and only its selection rules (no 1-sample or Best-of-Majority strategy)
    assert sorted((s.rule, s.N) for s in got) == [("bon", N), ("maj", N), ("pass", N)]
    per_search = sum(LEDGER.values())
    by_rule = {s.rule: s for s in got}
    assert by_rule["maj"].cost == pytest.approx(per_search)
    assert by_rule["bon"].cost == pytest.approx(per_search + N * VTOK)  # + the selecting verifier on N candidates
    assert by_rule["bon"].name == f"beam(agg=last,width=2) bon@{N} [{VERIFIER}]"
    for rule, subset in (("bon", s_bon), ("maj", s_maj), ("pass", s_pass)):
        assert by_rule[rule].value == pytest.approx(search_values(search, subset).mean(), abs=1e-12)
    # the choice at each budget is the brute-force best of the sampling strategies and the search's
    every = [(c, v, f"{m} {rule}@{n_}", vals) for c, v, m, n_, rule, vals in brute_strategies(runs)]
    every += [(by_rule[rule].cost, float(vals.mean()), f"search {rule}", vals)
              for rule, vals in (("bon", search_values(search, s_bon)), ("maj", search_values(search, s_maj)))]
    for choice in recipe.choices:
        fits = sorted((s for s in every if s[0] <= choice.budget), key=lambda s: (-s[1], s[0]))
        assert choice.best.value == pytest.approx(fits[0][1], abs=1e-12)
        assert choice.runner_up is not None and choice.runner_up.value == pytest.approx(fits[1][1], abs=1e-12)
        d, lo, hi, _ = paired_bootstrap_diff(fits[0][3], fits[1][3], n_boot=200)
        assert choice.diff == pytest.approx((d, lo, hi), abs=1e-12)
    # at 600 the search is chosen (small bon@4 at 570 is the best sampling strategy there)
    assert recipe.choices[1].best.run == str(search)
    # at 450 no search fits (its maj costs 460): a sampling strategy
    assert recipe.choices[0].best.run != str(search)
    # the table, recipe.json and the plot carry the search by name
    assert main(["recipe", str(root), "--budget", "600", "--n-boot", "20", "--out", str(tmp_path / "r")]) == 0
    doc = json.loads((tmp_path / "r" / "recipe.json").read_text())
    assert doc["choices"][0]["best"]["search"] == "beam(agg=last,width=2)"
    assert (tmp_path / "r" / "recipe-frontier.png").stat().st_size > 5000
    # FLOPs: the policy's parameters for its prompt and generated tokens, the PRM's for what the search
    # ranked, the selecting verifier's for the final pick
    params = {"small": 1e8, "big": 1e9, VERIFIER: 5e8, "prm:tiny": 7e8}
    flops = build_recipe([root], [1e12], cost="flops", params=params, n_boot=10)
    bon = next(s for s in flops.strategies if s.run == str(search) and s.rule == "bon")
    assert bon.cost == pytest.approx(2 * 1e8 * (120 + 260) + 2 * 7e8 * 80 + 2 * 5e8 * N * VTOK)


def test_search_runs_are_refused_where_their_rows_cannot_say(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    write_runs(root)
    search = write_search(root, np.full(len(IDS), 0.5))
    # a budget above everything names a larger search with the same flags, n doubled
    assert main(["recipe", str(root), "--budget", "5000"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "above the costliest strategy" in err
    with pytest.raises(BonbenchError, match="--base-run .* is a search run"):
        build_recipe([root], [600.0], by="difficulty", base_run=search)
    (search / "search" / "ledger.jsonl").write_text("")
    with pytest.raises(BonbenchError, match="has no row in search/ledger.jsonl"):
        build_recipe([root], [600.0], n_boot=10)
    # a search alone: the above-range line names the search's own command
    alone = tmp_path / "alone"
    only = write_search(alone, np.full(len(IDS), 0.5))
    assert main(["recipe", str(alone), "--budget", "5000"]) == 1
    err = capsys.readouterr().err.strip()
    assert "--strategy beam -S agg=last -S width=2 --n 32 --verifier prm:tiny`" in err  # its maj: 2 * 2^4 >= 5000 / 460
    with pytest.raises(BonbenchError, match="every run given is a search run"):
        build_recipe([alone], [500.0], by="difficulty", n_boot=10)
    assert only.is_dir()


# -- adaptive runs -----------------------------------------------------------------------------------


def _expectation(design: TwoStage, p: float, estimate: object) -> float:
    """E[estimate(pilot bits, second bits)] over every pilot and second stage the design can draw."""
    total = 0.0
    for pilot in itertools.product((0, 1), repeat=design.pilot):
        m = design.second[sum(pilot)]
        for second in itertools.product((0, 1), repeat=m):
            bits = pilot + second
            prob = float(np.prod([p if b else 1 - p for b in bits]))
            total += prob * estimate(bits)  # type: ignore[operator]  # a callable
    return total


def test_adaptive_values_and_costs_are_unbiased_under_the_design() -> None:
    # second stages that depend on the pilot, one below N = 2 (after 1 success): the design supports
    # only N = 1 in two stages, so at N = 2 every outcome uses the pilot alone
    design = TwoStage(2, (3, 1, 2), 0.4)
    for p in (0.15, 0.5, 0.8):
        def values(bits: tuple[int, ...]) -> np.ndarray:
            o = ProblemOutcome("q", tuple(float(b) for b in bits), tuple("A" if b else "B" for b in bits))
            return two_stage_values([o], [design], "pass", (1, 2), seed=0)[0]

        assert _expectation(design, p, lambda b: values(b)[0]) == pytest.approx(p, abs=1e-12)
        assert _expectation(design, p, lambda b: values(b)[1]) == pytest.approx(1 - (1 - p) ** 2, abs=1e-12)
        # a right sample is shorter (10 tokens) than a wrong one (50): the cost per sample under the design
        # is unbiased, the pooled mean over a pilot-dependent n is not
        tokens = 10 * p + 50 * (1 - p)
        assert _expectation(design, p, lambda b: stage_mean(design, [10.0 if x else 50.0 for x in b])) == pytest.approx(
            tokens, abs=1e-12)
        pooled = _expectation(design, p, lambda b: float(np.mean([10.0 if x else 50.0 for x in b])))
        assert abs(pooled - tokens) > 1e-3
    # choosing by the second stage actually drawn (two stages wherever it holds N) would be biased
    p = 0.5

    def pass2(b: tuple[int, ...]) -> float:
        return 1.0 - float(np.mean([not (x or y) for x, y in itertools.combinations(b, 2)]))

    def by_draw(bits: tuple[int, ...]) -> float:
        head, tail = bits[:2], bits[2:]
        return design.estimate(pass2(head), pass2(tail)) if len(tail) >= 2 else pass2(head)

    assert abs(_expectation(design, p, by_draw) - 0.75) > 1e-3


def write_adaptive(root: Path, p: np.ndarray, pilot: int = 2, cap: int = 6) -> tuple[Path, dict[str, TwoStage]]:
    """An adaptive run: a synthetic run of n = cap cut to each problem's n under hand-made designs
    (the weight 1 design of problem 0 leaves its second stage out of every estimate; the odd problems'
    designs support N = 1 only, so their N = 2 values are their pilots')."""
    run = write_synthetic_run(root, p, n=cap, model="adapt", temperature=0.7, problem_ids=IDS, seed=3,
                              n_tokens=np.tile(np.arange(10, 10 + cap), (len(IDS), 1)) * 10, prompt_tokens=PROMPT,
                              verifier_tokens=VTOK, answers=True, n_boot=10)
    _edit_config(run, adaptive={"pilot": pilot, "budget": 4, "floor": 2}, n=cap)
    grades = [json.loads(line) for line in (run / "grades" / "synthetic.jsonl").read_text().splitlines()]
    designs, problems = {}, {}
    for i, pid in enumerate(IDS):
        d = TwoStage(pilot, (0, 0, 0), 1.0) if i == 0 else TwoStage(pilot, (4, 1, 3) if i % 2 else (2, 2, 2), 0.3)
        s1 = sum(g["correct"] for g in grades if g["problem_id"] == pid and g["sample_idx"] < pilot)
        designs[pid] = d
        problems[pid] = {"s1": s1, "n": d.size(s1), "second": list(d.second), "weight": d.weight}
    (run / "adaptive.json").write_text(json.dumps({"pilot": pilot, "budget": 4, "floor": 2, "cap": cap,
                                                   "problems": problems, "spend": {}}))
    for name in ("samples.jsonl", "grades/synthetic.jsonl", f"scores/{VERIFIER}.jsonl"):
        path = run / name
        rows = [line for line in path.read_text().splitlines()
                if json.loads(line)["sample_idx"] < problems[json.loads(line)["problem_id"]]["n"]]
        path.write_text("\n".join(rows) + "\n")
    return run, designs


def test_an_adaptive_run_gives_the_fixed_n_strategies_of_its_settings(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_runs(root)
    run, designs = write_adaptive(root, np.linspace(0.1, 0.9, len(IDS)))
    recipe = build_recipe([root], [600.0], n_boot=10)
    got = {(s.rule, s.N): s for s in recipe.strategies if s.run == str(run)}
    assert sorted(got) == [("bom", 2), ("bon", 2), ("maj", 2), ("pass", 1), ("pass", 2), ("single", 1)]  # up to the pilot
    outcomes = outcomes_of(run)
    for (rule, N), subset in {("single", 1): s_pass, ("pass", 2): s_pass, ("maj", 2): s_maj, ("bon", 2): s_bon,
                             ("bom", 2): s_bom}.items():
        want = []
        for o in outcomes:
            d = designs[o.problem_id]
            head = ProblemOutcome(o.problem_id, o.correct[:2], o.answers[:2], o.scores[:2] if o.scores else None)
            tail = ProblemOutcome(o.problem_id, o.correct[2:], o.answers[2:], o.scores[2:] if o.scores else None)
            supported = d.weight == 1 or N <= min(d.second)
            want.append(d.estimate(brute(head, N, subset), brute(tail, N, subset) if d.weight < 1 else 0.0)
                        if supported else brute(head, N, subset))
        assert got[(rule, N)].value == pytest.approx(np.mean(want), abs=1e-12)
    # the cost per sample under each design: sample j generated 100 + 10 j tokens
    gen = []
    for o in outcomes:
        d, n = designs[o.problem_id], len(o.correct)
        head, tail = np.mean([100 + 10 * j for j in range(2)]), np.mean([100 + 10 * j for j in range(2, n)] or [0])
        gen.append(head if d.weight == 1 else d.estimate(head, tail))
    assert got[("maj", 2)].cost == pytest.approx(PROMPT + 2 * np.mean(gen))
    assert got[("bon", 2)].cost == pytest.approx(PROMPT + 2 * (np.mean(gen) + VTOK))
    assert not any("does not weigh" in n for n in recipe.notes)
    (run / "adaptive.json").unlink()
    with pytest.raises(BonbenchError, match="pilot round has not finished"):
        build_recipe([root], [600.0], n_boot=10)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny base policy and a tiny Math-Shepherd PRM, as ``test_search_run`` builds them."""
    root = tmp_path_factory.mktemp("recipe-search")
    return {"policy": build_policy(root / "policy"), "prm": build_math_shepherd(root / "math-shepherd-mistral-7b-prm")}


def test_a_search_run_made_by_the_pipeline_is_weighed_as_its_metrics_say(models: dict[str, Path], data_dir: Path,
                                                                       tmp_path: Path) -> None:
    """A real beam search over 2 seeds (tiny local policy and PRM, ``test_search_run``) beside a
    sampling run of the same policy: the search's values are its own metrics.json's, its cost its
    ledger's per search plus the selecting PRM's tokens on its N candidates."""
    from bonbench.pipeline.ledger import SEARCH_SCORER, compute_ledger

    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2", "--seeds", "2")) == 0
    searched = run_dir(out)
    sampling = run_args(models, data_dir, out, "--metric", "bon@4")
    i = sampling.index("--strategy")
    assert main(sampling[:i] + sampling[i + 2:]) == 0
    ledger = compute_ledger(searched)
    (prm,) = [v for v in ledger.verifiers if v != SEARCH_SCORER]
    per_search = [(p.prompt_tokens + p.generated_tokens + p.verifier(SEARCH_SCORER).tokens) / 2  # type: ignore[operator, union-attr]  # counted
                  for p in ledger.problems]
    select = [4 * p.verifier(prm).tokens / p.verifier(prm).samples for p in ledger.problems]  # type: ignore[operator, union-attr]  # counted
    recipe = build_recipe([out], [float(np.mean(per_search) + np.mean(select))], n_boot=10, rules=("maj", "bon"))
    got = {s.rule: s for s in recipe.strategies if s.run == str(searched)}
    # maj only where its candidates carry answers (this tiny policy's rarely do)
    assert {"pass", "bon"} <= set(got) <= {"pass", "maj", "bon"} and {s.N for s in got.values()} == {4}
    metrics = json.loads((searched / "metrics.json").read_text())
    for rule in got:
        assert got[rule].value == pytest.approx(np.mean(list(metrics["per_problem"][f"{rule}@4"].values())), abs=1e-12)
    assert got["pass"].cost == pytest.approx(np.mean(per_search))  # what maj would cost: the searches alone
    assert got["bon"].cost == pytest.approx(np.mean(per_search) + np.mean(select))
    assert any(s.run != str(searched) and s.rule == "bon" for s in recipe.strategies)  # the sampling run beside it


def test_an_adaptive_run_made_by_the_pipeline_is_weighed_as_its_metrics_say(data_dir: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A real adaptive run (``test_adaptive_run``'s scripted model on 24 MATH problems, pilot 4, floor
    2): recipe's pass@1, pass@2 and maj@2 per problem are the run's own two-stage estimates, and N = 4
    (the pilot, above what every design supports) is there from the designs that allow it."""
    import adaptive_model

    from tests.test_adaptive_run import run_args as adaptive_args
    from tests.test_adaptive_run import run_dir as adaptive_dir

    for (module, name), value in adaptive_model.patches(data_dir).items():
        monkeypatch.setattr(module, name, value)
    out = tmp_path / "out"
    assert main(adaptive_args(data_dir, out)) == 0
    run = adaptive_dir(out)
    # the scripted sampler counts no prompt: give every sample one, as a model backend would
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    (run / "samples.jsonl").write_text("".join(json.dumps({**s, "prompt_tokens": 100}) + "\n" for s in samples))
    recipe = build_recipe([run], [110.0], n_boot=10, rules=("maj",))
    got = {(s.rule, s.N): s for s in recipe.strategies}
    metrics = json.loads((run / "metrics.json").read_text())
    for key, name in (((("single", 1)), "pass@1"), (("pass", 2), "pass@2"), (("maj", 2), "maj@2")):
        assert got[key].value == pytest.approx(np.mean(list(metrics["per_problem"][name].values())), abs=1e-12)
    assert ("pass", 4) in got and ("maj", 4) in got
