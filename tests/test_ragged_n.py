"""Per-problem n (issue 35, point 2): every registered estimator with k on problems whose sample
counts differ, against explicit enumeration of each problem's own k-subsets; the bootstrap CI is
the one of those per-problem values (and covers the truth about 95% of the time); a k above some
problem's n is one line naming that problem; curves stop at the smallest n; the store hands a
sampled run's per-problem targets to the metrics."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bonbench.api.metric.values import compute_curves, compute_metrics
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt, Sample
from bonbench.core.store import RunStore
from bonbench.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.stages import load_samples, missing_requests

Subset = Callable[[list[int], ProblemOutcome], float]
NS = (3, 4, 6, 7, 5, 3, 8)  # every problem its own n


def _class_value(o: ProblemOutcome, a: object) -> float:
    """v_a: the mean grade of class a's members in the whole problem (maj@k's value of a class)."""
    members = [z for z, b in zip(o.correct, o.answers, strict=True) if b == a]
    return float(np.mean(members))


def _top(o: ProblemOutcome, pool: Sequence[int]) -> list[int]:
    assert o.scores is not None
    best = max(o.scores[i] for i in pool)
    return [i for i in pool if o.scores[i] == best]


def s_pass(s: list[int], o: ProblemOutcome) -> float:
    return max(o.correct[i] for i in s)


def s_bon(s: list[int], o: ProblemOutcome) -> float:
    return float(np.mean([o.correct[i] for i in _top(o, s)]))


def s_maj(s: list[int], o: ProblemOutcome) -> float:
    votes = Counter(o.answers[i] for i in s if o.answers[i] is not None)
    if not votes:
        return 0.0
    best = max(votes.values())
    return float(np.mean([_class_value(o, a) for a, c in votes.items() if c == best]))


def s_wmaj(s: list[int], o: ProblemOutcome) -> float:
    assert o.scores is not None
    weight: dict[object, float] = {}
    for i in s:
        if o.answers[i] is not None:
            weight[o.answers[i]] = weight.get(o.answers[i], 0.0) + o.scores[i]
    if not weight:
        return 0.0
    best = max(weight.values())
    return float(np.mean([_class_value(o, a) for a, w in weight.items() if w >= best * (1 - 1e-9)]))


def s_bom(s: list[int], o: ProblemOutcome, share: float = 0.5) -> float:
    voters = [i for i in s if o.answers[i] is not None]
    votes = Counter(o.answers[i] for i in voters)
    eligible = [i for i in voters if votes[o.answers[i]] >= max(1, math.ceil(share * len(voters) - 1e-9))]
    return float(np.mean([o.correct[i] for i in _top(o, eligible)])) if eligible else 0.0


def s_pass_hat(s: list[int], o: ProblemOutcome) -> float:
    return float(all(o.correct[i] == 1.0 for i in s))


def s_gpass(s: list[int], o: ProblemOutcome, tau: float = 0.5) -> float:
    return float(sum(o.correct[i] for i in s) >= max(1, math.ceil(tau * len(s) - 1e-9)))


def s_mgpass(s: list[int], o: ProblemOutcome) -> float:
    # 2 * the length of {tau in (1/2, 1]: ceil(tau k) <= x}, x right of k
    return 2 * max(0.0, min(1.0, sum(o.correct[i] for i in s) / len(s)) - 0.5)


BRUTE: dict[str, tuple[str, Subset]] = {
    "pass": ("pass@{k}", s_pass), "bon": ("bon@{k}", s_bon), "maj": ("maj@{k}", s_maj),
    "wmaj": ("wmaj@{k}", s_wmaj), "bom": ("bom@{k}:0.5", s_bom), "pass^": ("pass^{k}", s_pass_hat),
    "gpass": ("gpass@{k}:0.5", s_gpass), "mgpass": ("mgpass@{k}", s_mgpass),
}


def brute(o: ProblemOutcome, k: int, subset: Subset) -> float:
    """The definition: the procedure's value averaged over every k-subset of the problem's own n."""
    values = [subset(list(s), o) for s in combinations(range(len(o.correct)), k)]
    return float(np.mean(values))


def ragged(seed: int, ns: Sequence[int] = NS, scores: bool = True) -> list[ProblemOutcome]:
    """Problems with their own n: answers from a few classes (class "r" right), abstentions, tied scores."""
    rng = random.Random(seed)
    out = []
    for p, n in enumerate(ns):
        answers = [rng.choice(["r", "a", "b", None]) for _ in range(n)]
        correct = tuple(1.0 if a == "r" else 0.0 for a in answers)
        sc = tuple(float(rng.choice([0.1, 0.4, 0.4, 0.9])) for _ in range(n)) if scores else None
        out.append(ProblemOutcome(f"p{p}", correct, tuple(answers), sc))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", sorted(BRUTE))
def test_every_estimator_on_ragged_n_is_each_problems_own_subset_average(kind: str, seed: int) -> None:
    outcomes = ragged(seed)
    pattern, subset = BRUTE[kind]
    for k in (1, 2, min(NS)):
        name = pattern.format(k=k)
        values, per_problem = compute_metrics(outcomes, [name], n_boot=200, seed=seed)
        expected = np.array([brute(o, k, subset) for o in outcomes])
        got = np.array([per_problem[name][o.problem_id] for o in outcomes])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=name)
        assert values[name].value == pytest.approx(expected.mean(), abs=1e-12)
        # the CI is the problem bootstrap of those per-problem values, whatever each problem's n
        lo, hi = bootstrap_ci(expected, n_boot=200, seed=seed)
        assert values[name].ci95 == pytest.approx((lo, hi), abs=1e-12)


def test_max_and_mean_on_ragged_rewards() -> None:
    rng = random.Random(5)
    outcomes = [ProblemOutcome(f"p{i}", tuple(round(rng.random(), 3) for _ in range(n)), (None,) * n)
                for i, n in enumerate(NS)]
    values, per = compute_metrics(outcomes, ["max@2", "mean"], n_boot=100)
    assert [per["max@2"][o.problem_id] for o in outcomes] == pytest.approx([brute(o, 2, s_pass) for o in outcomes])
    assert values["mean"].value == pytest.approx(np.mean([np.mean(o.correct) for o in outcomes]))


def test_equal_n_is_the_special_case_of_per_problem_n() -> None:
    """Scoring problems one at a time (each its own n) gives the values of scoring them together."""
    outcomes = ragged(3)
    names = ["pass@2", "bon@3", "maj@2", "pass^2", "bom@3:0.5"]
    _, together = compute_metrics(outcomes, names, n_boot=50)
    for o in outcomes:
        _, alone = compute_metrics([o], names, n_boot=50)
        for name in names:
            assert alone[name][o.problem_id] == pytest.approx(together[name][o.problem_id], abs=1e-12)


def test_k_above_a_problems_n_is_one_line_naming_it() -> None:
    outcomes = ragged(0)
    with pytest.raises(BonbenchError) as err:
        compute_metrics(outcomes, ["pass@4"])
    message = str(err.value)
    assert "\n" not in message and "'p0'" in message and "n = 3" in message and "pass@4" in message


def test_curves_stop_at_the_smallest_n_so_every_point_averages_the_same_problems() -> None:
    outcomes = ragged(1)
    curves = compute_curves(outcomes, ["pass", "maj"], n_boot=50)
    assert curves["pass"]["k"] == [1, 2, 3]
    for k in (1, 2, 3):
        assert curves["pass"]["value"][k - 1] == pytest.approx(np.mean([brute(o, k, s_pass) for o in outcomes]))


def test_paired_difference_on_ragged_n_pairs_by_problem() -> None:
    a, b = ragged(0), ragged(0, ns=tuple(n + 2 for n in NS))  # the same problems, more samples in b
    _, pa = compute_metrics(a, ["pass@2"], n_boot=50)
    _, pb = compute_metrics(b, ["pass@2"], n_boot=50)
    ids = [o.problem_id for o in a]
    x, y = np.array([pa["pass@2"][i] for i in ids]), np.array([pb["pass@2"][i] for i in ids])
    diff, lo, hi, _ = paired_bootstrap_diff(x, y, n_boot=200)
    assert diff == pytest.approx(float((x - y).mean())) and lo <= diff <= hi


def test_bootstrap_ci_covers_the_truth_with_ragged_n() -> None:
    """Problems drawn from a population, each with its own n in 2..12: the 95% CI of pass@2 covers the
    population's pass@2 in about 95% of 300 datasets (binomial SE 1.3%: the band is 3.5 SEs wide)."""
    rng = np.random.default_rng(7)
    alpha, beta = 0.6, 0.9  # per-problem success probabilities ~ Beta(alpha, beta)
    p_grid = np.linspace(0.0005, 0.9995, 2000)
    dens = p_grid ** (alpha - 1) * (1 - p_grid) ** (beta - 1)
    truth = float(np.sum((1 - (1 - p_grid) ** 2) * dens) / np.sum(dens))
    covered = 0
    for rep in range(300):
        ps = rng.beta(alpha, beta, size=60)
        ns = rng.integers(2, 13, size=60)
        outcomes = [ProblemOutcome(f"p{i}", tuple(float(x) for x in rng.random(int(n)) < p), (None,) * int(n))
                    for i, (p, n) in enumerate(zip(ps, ns, strict=True))]
        lo, hi = compute_metrics(outcomes, ["pass@2"], n_boot=400, seed=rep)[0]["pass@2"].ci95
        covered += lo <= truth <= hi
    assert 0.905 <= covered / 300 <= 0.985


def test_a_sampled_runs_per_problem_targets_reach_the_metrics(tmp_path: Path) -> None:
    problems = [Problem(id="a", input="1+1?", target="2"), Problem(id="b", input="2+2?", target="4")]
    task = SimpleNamespace(render=lambda p, style: Prompt(problem_id=p.id, text=p.input))
    run: Any = SimpleNamespace(problems=problems, task=task, store=RunStore(tmp_path / "run"),
                          cfg=SimpleNamespace(n=4, backend="vllm"))
    targets = {run.problems[0].id: 2, run.problems[1].id: 4}
    requests = missing_requests(run, "chat", n_of=targets)
    assert sorted((r.problem_id, r.sample_indices) for r in requests) == sorted(
        [(run.problems[0].id, (0, 1)), (run.problems[1].id, (0, 1, 2, 3))])
    run.store.samples.append([Sample(problem_id=pid, sample_idx=i, completion="x", n_tokens=1,
                                     finish_reason="stop")
                              for pid, n in targets.items() for i in range(n)])
    got = load_samples(run, n_of=targets)
    assert Counter(pid for pid, _ in got) == Counter(targets)
    with pytest.raises(BonbenchError, match="fewer samples than their own n"):
        load_samples(run, n_of={**targets, run.problems[0].id: 3})
    with pytest.raises(BonbenchError, match="above the run.s n"):
        load_samples(run, n_of={**targets, run.problems[0].id: 5})
