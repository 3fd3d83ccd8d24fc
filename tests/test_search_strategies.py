"""The search strategies against small reference implementations, on scripted trees (tests/search_scripts.py).

Each reference below is written from the anchor's description on plain paths (tuples of steps),
without the search tree: beam search and DVTS after search-and-learn, particle filtering after
its_hub. The strategy must return the same candidates, in the same order, with the same values.
Where the optimum is known (a scorer that is the exact value of each prefix), beam search must
find it; DVTS's subtrees must never meet; particle filtering's draws must follow their
probabilities within Monte Carlo error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
from search_scripts import DELIMITER, SeededSampler, TableScorer, TreeSampler, hashed_score

from bonbench.api.sampler import sample_seed
from bonbench.api.search.contract import make_strategy, partial_scorer
from bonbench.api.search.records import Prefix, SearchProblem, SearchResult
from bonbench.api.steps import aggregate
from bonbench.api.verifier import get_verifier
from bonbench.core.errors import BonbenchError
from bonbench.plugins.strategies.particles import resample, resampling_probabilities

PROBLEM = SearchProblem("p1", "Solve it.", "Solve it.")
Path = tuple[str, ...]


def run(name: str, sampler: TreeSampler, scorer: TableScorer, n: int, seed: int = 0, **options: object) -> SearchResult:
    return make_strategy(name, **options).search(PROBLEM, sampler, scorer, n=n, seed=seed)


def paths(result: SearchResult) -> list[Path]:
    return [c.steps for c in result.candidates]


# ---------------------------------------------------------------------- the references


def step(sampler: TreeSampler, path: Path, *, to_end: bool = False, greedy: bool = False) -> tuple[Path, bool]:
    """(the path one continuation extends ``path`` to, whether it ended)."""
    cont = sampler.continue_prefixes([Prefix("p", path, 0, to_end=to_end, greedy=greedy)])[0]
    pieces = [p for p in cont.text.split(DELIMITER) if p] if to_end else [cont.text]
    return path + tuple(p for p in pieces if p), cont.finish != "step"


def valuer(score: Callable[[Path], float], agg: str, sampler: TreeSampler, lookahead: int) -> Callable[[Path, bool], float]:
    def value(path: Path, ended: bool) -> float:
        ahead = path
        for _ in range(0 if ended else lookahead):
            ahead, done = step(sampler, ahead, greedy=True)
            if done:
                break
        return aggregate([score(ahead[:i + 1]) for i in range(len(ahead))], agg)
    return value


def best(values: Sequence[float], k: int) -> list[int]:
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


def ref_beam(sampler: TreeSampler, score: Callable[[Path], float], n: int, width: int, iters: int, agg: str,
             lookahead: int) -> list[tuple[Path, float]]:
    value = valuer(score, agg, sampler, lookahead)
    active: list[Path] = [()] * n
    completed: list[tuple[Path, float]] = []
    for i in range(iters):
        last = i == iters - 1
        grown = [step(sampler, p, to_end=last) for p in active]
        values = [value(p, ended or last) for p, ended in grown]
        completed += [(p, v) for (p, ended), v in zip(grown, values, strict=True) if ended]
        live = [(p, v) for (p, ended), v in zip(grown, values, strict=True) if not ended]
        if not live:
            break
        keep = [live[j][0] for j in best([v for _, v in live], n // width)]
        active = [keep[j % len(keep)] for j in range(n)]
    chosen = [completed[j] for j in best([v for _, v in completed], n)]
    return [chosen[j % len(chosen)] for j in range(n)]


def ref_dvts(sampler: TreeSampler, score: Callable[[Path], float], n: int, width: int, iters: int, agg: str,
             lookahead: int) -> list[tuple[Path, float]]:
    value = valuer(score, agg, sampler, lookahead)
    subtrees = n // width
    current: list[Path] = [()] * subtrees
    done = [False] * subtrees
    kids: list[list[tuple[Path, float, bool]]] = [[] for _ in range(subtrees)]
    for i in range(iters):
        last = i == iters - 1
        grown = {s: [step(sampler, current[s], to_end=last) for _ in range(width)] for s in range(subtrees) if not done[s]}
        if not grown:
            break
        for s, children in grown.items():
            kids[s] = [(p, value(p, ended or last), ended) for p, ended in children]
            j = best([v for _, v, _ in kids[s]], 1)[0]
            current[s], done[s] = kids[s][j][0], kids[s][j][2]
    return [(p, v) for children in kids for p, v, _ in children]


def ref_particles(sampler: TreeSampler, score: Callable[[Path], float], n: int, iters: int, agg: str, temperature: float,
                  seed: int) -> list[Path]:
    import numpy as np

    rng = np.random.default_rng(sample_seed(seed, PROBLEM.problem_id, -1))
    particles: list[tuple[Path, bool]] = [((), False)] * n
    for i in range(iters):
        if all(ended for _, ended in particles):
            break
        last = i == iters - 1
        particles = [(p, True) if ended else step(sampler, p, to_end=last) for p, ended in particles]
        # the weights as its_hub writes them: exp(logit(score) / T), normalised
        odds = [(lambda r: (r / (1 - r)) ** (1 / temperature))(aggregate([score(p[:k + 1]) for k in range(len(p))], agg))
                for p, _ in particles]
        probs = [o / sum(odds) for o in odds]
        particles = [particles[j] for j in rng.choice(n, size=n, replace=True, p=probs)]
    return [p for p, _ in particles]


# ---------------------------------------------------------------------- beam search


@pytest.mark.parametrize(("n", "width", "iters", "agg", "lookahead"), [
    (4, 2, 10, "last", 0), (8, 2, 10, "min", 0), (8, 4, 2, "prod", 0), (6, 3, 10, "mean", 1), (4, 1, 3, "last", 2)])
def test_beam_matches_reference(n: int, width: int, iters: int, agg: str, lookahead: int) -> None:
    branching = [n, 3, 2, 3]
    score = lambda p: hashed_score(p, "beam")
    got = run("beam", TreeSampler(branching), TableScorer(score), n, width=width, max_iterations=iters, agg=agg,
              lookahead=lookahead)
    want = ref_beam(TreeSampler(branching), score, n, width, iters, agg, lookahead)
    assert [(c.steps, c.value) for c in got.candidates] == [(p, pytest.approx(v)) for p, v in want]
    assert all(c.finish == "end" and len(c.steps) == len(branching) for c in got.candidates)


def leaf_quality(path: Path) -> float:
    return hashed_score(path, "leaf")


def exact_value(branching: Sequence[int]) -> Callable[[Path], float]:
    """A perfect PRM: each prefix scores the best leaf below it."""
    def value(path: Path) -> float:
        if len(path) == len(branching):
            return leaf_quality(path)
        return max(value(path + (path[-1] + str(j) if path else str(j),)) for j in range(branching[len(path)]))
    return value


def test_beam_finds_the_optimal_path_that_sampling_misses() -> None:
    branching = [4, 2, 2, 2, 2]
    leaves = [()]
    for b in branching:
        leaves = [p + ((p[-1] if p else "") + str(j),) for p in leaves for j in range(b)]
    optimum = max(leaves, key=leaf_quality)
    got = run("beam", TreeSampler(branching), TableScorer(exact_value(branching)), 4, width=2)
    assert got.candidates[0].steps == optimum
    assert got.candidates[0].value == pytest.approx(leaf_quality(optimum))
    # the same budget spent on independent samples reaches other leaves (the test can tell them apart)
    sampled = run("best_of_n", TreeSampler(branching), TableScorer(exact_value(branching)), 4)
    assert optimum not in paths(sampled)


# ---------------------------------------------------------------------- DVTS


@pytest.mark.parametrize(("n", "width", "iters", "agg", "lookahead"), [
    (4, 2, 10, "last", 0), (8, 4, 10, "min", 0), (6, 2, 2, "prod", 0), (6, 3, 10, "last", 1)])
def test_dvts_matches_reference_and_keeps_subtrees_apart(n: int, width: int, iters: int, agg: str, lookahead: int) -> None:
    branching = [n, width, width, width]
    score = lambda p: hashed_score(p, "dvts")
    got = run("dvts", TreeSampler(branching), TableScorer(score), n, width=width, max_iterations=iters, agg=agg,
              lookahead=lookahead)
    want = ref_dvts(TreeSampler(branching), score, n, width, iters, agg, lookahead)
    assert [(c.steps, c.value) for c in got.candidates] == [(p, pytest.approx(v)) for p, v in want]

    def root_of(node: int) -> int:
        while got.tree[node].parent is not None:
            node = got.tree[node].parent  # type: ignore[assignment]  # the loop's test
        return node

    roots = [root_of(c.leaf) for c in got.candidates]
    groups = [set(roots[s * width:(s + 1) * width]) for s in range(n // width)]
    assert all(len(g) == 1 for g in groups)  # each subtree's candidates share its first step
    assert len(set.union(*groups)) == n // width  # and no two subtrees share one
    first_steps = [i for i, node in enumerate(got.tree) if node.parent is None]
    assert len(first_steps) == n  # each subtree drew its own width first steps; only one of each grew
    assert {root_of(i) for i in range(len(got.tree)) if got.tree[i].depth > 1} == set.union(*groups)


# ---------------------------------------------------------------------- particle filtering


def test_resampling_frequencies_match_their_probabilities() -> None:
    import numpy as np

    values, temperature, draws = [0.2, 0.5, 0.9, 0.6, 0.05], 0.7, 40_000
    odds = [(v / (1 - v)) ** (1 / temperature) for v in values]
    want = [o / sum(odds) for o in odds]
    assert resampling_probabilities(values, temperature) == pytest.approx(want, rel=1e-12)
    counts = Counter(resample(values, temperature, draws, np.random.default_rng(7)))
    freq = [counts[i] / draws for i in range(len(values))]
    # a binomial proportion's standard error; 4.5 SE: each component fails by chance with p < 1e-5
    tol = [4.5 * math.sqrt(p * (1 - p) / draws) for p in want]
    assert all(abs(f - p) <= t for f, p, t in zip(freq, want, tol, strict=True)), (freq, want)
    # the check has the power to see a missing temperature: T = 1 is outside the tolerance
    at_one = resampling_probabilities(values, 1.0)
    assert any(abs(f - p) > t for f, p, t in zip(freq, at_one, tol, strict=True))


def test_particle_filtering_draws_its_candidates_with_those_probabilities() -> None:
    n, seeds, temperature = 8, 400, 1.0
    score = lambda p: hashed_score(p, "pf")
    counts: Counter[Path] = Counter()
    for seed in range(seeds):
        got = run("particle_filtering", TreeSampler([n]), TableScorer(score), n, seed=seed, temperature=temperature)
        counts.update(paths(got))
    children = [(str(j),) for j in range(n)]
    want = resampling_probabilities([score(c) for c in children], temperature)
    draws = n * seeds
    for child, p in zip(children, want, strict=True):
        assert abs(counts[child] / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws), (child, counts[child] / draws, p)


@pytest.mark.parametrize(("n", "iters", "agg", "temperature", "seed"), [
    (8, 10, "last", 1.0, 0), (6, 10, "min", 0.5, 3), (5, 2, "prod", 2.0, 1)])
def test_particle_filtering_matches_reference(n: int, iters: int, agg: str, temperature: float, seed: int) -> None:
    branching = [3, 3, 2, 3]
    score = lambda p: hashed_score(p, "pf-ref")
    got = run("particle_filtering", TreeSampler(branching), TableScorer(score), n, seed=seed, max_iterations=iters,
              agg=agg, temperature=temperature)
    assert paths(got) == ref_particles(TreeSampler(branching), score, n, iters, agg, temperature, seed)
    assert all(c.finish == "end" for c in got.candidates)


def test_particle_temperature_sharpens_and_flattens() -> None:
    values = [0.3, 0.8, 0.6]
    assert resampling_probabilities(values, 1e-3) == pytest.approx([0, 1, 0], abs=1e-9)
    assert resampling_probabilities(values, 1e6) == pytest.approx([1 / 3] * 3, rel=1e-4)
    assert resampling_probabilities([0.0, 1.0], 1.0)[1] == pytest.approx(1.0)  # clipped: finite logits


# ---------------------------------------------------------------------- every strategy


STRATEGIES = [("best_of_n", {}), ("beam", {"width": 2}), ("dvts", {"width": 2}), ("particle_filtering", {})]


@pytest.mark.parametrize(("name", "options"), STRATEGIES)
def test_deterministic_under_a_seed(name: str, options: dict[str, object]) -> None:
    branching, score = [3, 3, 3], lambda p: hashed_score(p, "seed")
    first = run(name, SeededSampler(branching), TableScorer(score), 4, seed=11, **options)
    again = run(name, SeededSampler(branching), TableScorer(score), 4, seed=11, **options)
    other = [run(name, SeededSampler(branching), TableScorer(score), 4, seed=s, **options) for s in (12, 13, 14)]
    assert (first.candidates, first.tree) == (again.candidates, again.tree)
    assert any(o.candidates != first.candidates for o in other)
    assert first.strategy == name and first.n == 4 and first.seed == 11


@pytest.mark.parametrize(("name", "options"), STRATEGIES)
def test_tree_records_and_costs(name: str, options: dict[str, object]) -> None:
    branching = [4, 2, 2]
    sampler, scorer = SeededSampler(branching), TableScorer(lambda p: hashed_score(p, "tree"))
    got = run(name, sampler, scorer, 4, **options)
    assert len(got.candidates) == 4
    for c in got.candidates:
        assert c.text == DELIMITER.join(c.steps)
        assert c.step_scores == tuple(hashed_score(c.steps[:i + 1], "tree") for i in range(len(c.steps)))
        node, walked = c.leaf, []
        while node is not None:
            walked.append(got.tree[node].step)
            assert got.tree[node].kept
            node = got.tree[node].parent
        assert tuple(reversed(walked)) == c.steps
    on_paths = set()
    for c in got.candidates:
        node = c.leaf
        while node is not None:
            on_paths.add(node)
            node = got.tree[node].parent
    assert {i for i, n in enumerate(got.tree) if n.kept} == on_paths
    # the ledger: every token and call the scripted models report, and no step list scored twice
    cost = got.cost
    assert len(scorer.asked) == len(set(scorer.asked)) == cost.scored == cost.verifier_calls
    assert cost.verifier_tokens == sum(len(p) for p in scorer.asked)
    assert cost.sampler_calls == sampler.calls
    assert cost.generated_tokens == sum(n.tokens for n in got.tree)
    assert cost.wall_s >= cost.model_s >= 0 and cost.overhead_s == pytest.approx(cost.wall_s - cost.model_s)


def test_the_score_cache_reuses_prefixes_search_and_learn_would_rescore() -> None:
    # one child per step: every beam copy walks the same path, so only new prefixes reach the scorer
    scorer = TableScorer(lambda p: 0.5)
    got = run("beam", TreeSampler([1, 1, 1]), scorer, 4, width=2)
    assert scorer.asked == [("0",), ("0", "00"), ("0", "00", "000")]
    assert got.cost.cached_scores == 3 * 4 - 3


def test_model_time_is_kept_apart_from_the_strategy_overhead() -> None:
    sampler, scorer = TreeSampler([4, 2, 2], delay_s=0.01), TableScorer(lambda p: 0.5, delay_s=0.01)
    got = run("beam", sampler, scorer, 4, width=2)
    assert got.cost.model_s >= 0.01 * (sampler.calls + scorer.calls)
    assert got.cost.wall_s - got.cost.model_s == pytest.approx(got.cost.overhead_s)


# ---------------------------------------------------------------------- options and bad input


def test_options_are_coerced_and_checked_in_one_line() -> None:
    beam = make_strategy("beam", width="2", lookahead="1", agg="min")
    assert beam.options() == (("agg", "min"), ("lookahead", 1), ("max_iterations", 40), ("width", 2))
    with pytest.raises(BonbenchError, match=r"strategy 'beam' option width takes int, got 'two'"):
        make_strategy("beam", width="two")
    with pytest.raises(BonbenchError, match=r"strategy 'dvts' has no option 'beams'; its options are: width"):
        make_strategy("dvts", beams=4)
    with pytest.raises(BonbenchError, match=r"strategy 'particle_filtering': option temperature=0.0 must be above 0"):
        make_strategy("particle_filtering", temperature="0")
    with pytest.raises(BonbenchError, match=r"unknown strategy 'mcts'; choose one of: beam, best_of_n, dvts"):
        make_strategy("mcts")
    with pytest.raises(BonbenchError, match=r"strategy 'dvts' needs n a multiple of its width 4 \(got n=6\): pass n=4"):
        make_strategy("dvts").check(6)


def test_a_scorer_that_cannot_score_partial_steps_is_one_line() -> None:
    class Final(TableScorer):
        def score_steps(self, questions, steps):  # type: ignore[no-untyped-def]  # a scorer that reads only the end
            return [type(r)(r.scores[-1:], r.tokens, r.calls) for r in super().score_steps(questions, steps)]

    with pytest.raises(BonbenchError, match="returned 1 step scores for 2 steps: it must score every step"):
        run("beam", TreeSampler([2, 2, 2]), Final(lambda p: 0.5), 2, width=1)


def test_a_blank_step_ends_the_solution_and_scores_nothing_new() -> None:
    class Blank(TreeSampler):
        def continue_prefixes(self, prefixes):  # type: ignore[no-untyped-def]  # the second step is blank
            return [type(c)(" " if len(p.steps) == 1 else c.text, c.finish, c.tokens, c.prompt_tokens)
                    for p, c in zip(prefixes, super().continue_prefixes(prefixes), strict=True)]

    scorer = TableScorer(lambda p: hashed_score(p, "blank"))
    got = run("beam", Blank([2, 2, 2]), scorer, 2, width=1)
    assert all(c.finish == "step" and len(c.steps) == 1 for c in got.candidates)
    assert all(got.tree[c.leaf].step == " " and got.tree[c.leaf].score == c.step_scores[-1] for c in got.candidates)
    assert scorer.asked == [("0",), ("1",)]


def test_a_verifier_that_scores_only_whole_solutions_is_refused_in_one_line() -> None:
    scorer = TableScorer(lambda p: 0.5)
    assert partial_scorer(scorer, "table") is scorer
    with pytest.raises(BonbenchError, match=r"^verifier 'oracle' cannot score partial solutions, which a search ranks: "
                                            r"use a process reward model \(--verifier prm:SOURCE"):
        partial_scorer(get_verifier("oracle"), "oracle")
