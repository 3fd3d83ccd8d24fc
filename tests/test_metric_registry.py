"""The metric registry (``bonbench.api.metric``) and its dataset entry points
(``bonbench.api.metric.values``): the name grammar and its one-line errors, the built-in records,
display order and readings of stored names, the run's rules read from the records, and throw-away
metric kinds registered in-process (a ``^`` kind, a kind with a parameter, a Monte Carlo kind, one
whose function refuses its input) computed exactly against enumeration of every k-subset."""

from __future__ import annotations

import math
import random
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

from bonbench.api.metric.grammar import MetricSpec, metric_names, metric_sort_key, parse_metric, parse_metrics, spec_of
from bonbench.api.metric.inputs import curve_keys, run_inputs
from bonbench.api.metric.kind import METRICS, MetricKind, Param, format_param, metric_kind, register_metric
from bonbench.api.metric.readings import curve_color, curve_label, footnotes, metric_info
from bonbench.api.metric.values import compute_curves, compute_metrics, curve_values
from bonbench.core import models
from bonbench.core.errors import BonbenchError
from bonbench.metrics.estimators import ProblemOutcome, bon_at_k, maj_at_k, pass_at_k
from bonbench.metrics.info import LOWER
from bonbench.metrics.montecarlo import SampledCurve
from bonbench.plugins.metrics.stored import CLOSED_FORM_FOOTNOTE, KL_FOOTNOTE
from bonbench.plugins.samplers import select
from bonbench.run import plan as run_plan
from bonbench.run.execute import execute
from bonbench.run.request import RunRequest
from bonbench.run.rules import metric_specs

F = Fraction


# ---------------------------------------------------------------------------------------------
# throw-away kinds


def _all_right(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    """pass^k-like: all k of a random k-subset right, C(c, k) / C(n, k)."""
    assert k is not None
    n, c = len(o.correct), int(sum(o.correct))
    return math.comb(c, k) / math.comb(n, k)


def _at_least(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    """G-Pass-like: at least ceil(tau k) of a random k-subset right (hypergeometric tail)."""
    assert k is not None and param is not None
    n, c = len(o.correct), int(sum(o.correct))
    need = max(1, math.ceil(param * k))
    return sum(math.comb(c, j) * math.comb(n - c, k - j) for j in range(need, k + 1)) / math.comb(n, k)


def _sampled_pass(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> SampledCurve:
    """pass@k averaged over 200 random k-subsets per problem (a Monte Carlo kind)."""
    rng = np.random.default_rng(seed)
    draws = 200
    values = np.full((len(outcomes), len(ks)), np.nan)
    var = np.zeros_like(values)
    for p, o in enumerate(outcomes):
        z = np.asarray(o.correct)
        for j, k in enumerate(ks):
            if k > z.size:
                continue
            hits = np.array([z[rng.choice(z.size, k, replace=False)].max() for _ in range(draws)])
            values[p, j], var[p, j] = hits.mean(), hits.var(ddof=1) / draws
    return SampledCurve(values, var, draws, sampled=~np.isnan(values))


def _exact_at_1(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> SampledCurve:
    """_sampled_pass, with the values at k = 1 computed exactly (the mean) and marked so."""
    got = _sampled_pass(outcomes, ks, param, seed)
    values, var, sampled = got.values.copy(), got.mc_var.copy(), np.ones_like(got.values, dtype=bool)
    for j, k in enumerate(ks):
        if k == 1:
            values[:, j] = [float(np.mean(o.correct)) for o in outcomes]
            var[:, j], sampled[:, j] = 0.0, False
    return SampledCurve(values, var, got.draws, sampled)


def _nonneg(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert o.scores is not None and k is not None
    if min(o.scores) < 0:
        raise ValueError("verifier scores must be >= 0 (they weigh votes); use a verifier with non-negative scores")
    return bon_at_k(o.scores, o.correct, k)


ALLOF = MetricKind("allof^", "all k right", reads=frozenset({"grades"}), per_problem=_all_right, order=15, color="#123456")
ATLEAST = MetricKind("atleast", "at least a share tau right", reads=frozenset({"grades"}), per_problem=_at_least,
                     param=Param("tau", 0.0, 1.0, example=0.5), order=16)
SHARE = MetricKind("share", "an optional parameter", reads=frozenset({"grades"}), per_problem=_at_least,
                   param=Param("s", 0.0, 1.0, example=0.5, required=False, default=0.5), order=17)
MCPASS = MetricKind("mcpass", "pass@k by Monte Carlo", reads=frozenset({"grades"}), curve=_sampled_pass,
                    estimate="monte_carlo", order=18)
NONNEG = MetricKind("nonneg", "bon@k refusing negative scores", reads=frozenset({"grades", "scores"}), per_problem=_nonneg,
                    companions=("allof^", "pass"), order=19)


@pytest.fixture
def kinds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The throw-away kinds registered for one test (the registry restored after it)."""
    METRICS.names()  # read the installed entry points first: the copy below keeps them
    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))
    for record in (ALLOF, ATLEAST, SHARE, MCPASS, NONNEG):
        register_metric(record)
    yield


def _outcomes(with_scores: bool = True, n: int = 8, problems: int = 30, seed: int = 9) -> list[ProblemOutcome]:
    rng = np.random.default_rng(seed)
    out = []
    for p in range(problems):
        correct = tuple(float(x) for x in (rng.random(n) < rng.random()))
        answers = tuple(("ok" if c else f"w{rng.integers(3)}") if rng.random() > 0.1 else None for c in correct)
        scores = tuple(float(x) for x in rng.integers(0, 3, n)) if with_scores else None
        out.append(ProblemOutcome(f"p{p}", correct, answers, scores))
    return out


# ---------------------------------------------------------------------------------------------
# the name grammar


def test_old_spellings_parse_as_before() -> None:
    specs = parse_metrics(["pass@1,4,16", "bon@32", "maj@8", "mean", "pass@4", " MAJ@8 ", "pass@2,bon@2", "max@3"])
    assert [s.name for s in specs] == ["pass@1", "pass@4", "pass@16", "bon@32", "maj@8", "mean", "pass@2", "bon@2", "max@3"]
    assert specs[0] == MetricSpec("pass", 1) and specs[5] == MetricSpec("mean", None)
    assert parse_metrics("pass@1,4") == parse_metrics(["pass@1", "pass@4"])


@pytest.mark.parametrize("bad,fix", [
    ("bon@0", "bon@0: k must be >= 1, e.g. bon@4"), ("mean@3", "mean@3: mean takes no k; use mean"),
    ("mean,4", "mean,4: mean takes no k; use mean"), ("pass", "pass: pass needs k: pass@k with k >= 1, e.g. pass@4"),
    ("pass@4:0.5", "pass@4:0.5: pass takes no parameter; use pass@4"),
    ("kl_bon@4", "kl_bon@4 is not computed from a run's grades: a reward-judged run writes kl_bon@k beside every max@k"),
])
def test_a_bad_name_is_one_line_naming_the_fix(bad: str, fix: str) -> None:
    with pytest.raises(BonbenchError) as err:
        parse_metrics([bad])
    assert str(err.value).startswith(fix) and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["foo@3", "pass@x", "pass@", "pass@1,x", "4", "", "pass@-2", "pass@@2", "pass^x", "pass^"])
def test_an_unknown_name_lists_the_accepted_forms(bad: str) -> None:
    with pytest.raises(BonbenchError) as err:
        parse_metrics([bad])
    msg = str(err.value)
    forms = "pass@k, pass^k, gpass@k:tau, mgpass@k, bon@k, maj@k, wmaj@k, bom@k:share, mean or max@k"
    assert "\n" not in msg and forms in msg and "bonbench list metrics" in msg


def test_a_kind_with_a_parameter_and_a_caret_kind(kinds: None) -> None:
    assert parse_metric("allof^4") == MetricSpec("allof^", 4) and MetricSpec("allof^", 4).name == "allof^4"
    # one canonical spelling per parameter value: stored names are stable
    assert {parse_metric(t).name for t in ("atleast@8:0.75", "atleast@8:0.750", "atleast@8:.75", "ATLEAST@8:7.5e-1")} == {
        "atleast@8:0.75"}
    assert parse_metric("atleast@2:1").name == "atleast@2:1" and parse_metric("atleast@2:0.0").name == "atleast@2:0"
    # a bare k repeats the kind and its parameter; duplicates are dropped
    assert [s.name for s in parse_metrics(["atleast@2:0.5,4,2", "allof^2,3", "atleast@4:0.50"])] == [
        "atleast@2:0.5", "atleast@4:0.5", "allof^2", "allof^3"]
    # an optional parameter that spells its default is the name without it
    assert parse_metric("share@4:0.5").name == "share@4" and parse_metric("share@4:0.25").name == "share@4:0.25"
    assert spec_of("atleast@8:0.75[level=3]") == MetricSpec("atleast", 8, 0.75) and spec_of("static_accuracy") is None
    assert [format_param(x) for x in (0.75, 1.0, 0.0, 1e-5, 1 / 3)] == ["0.75", "1", "0", "1e-05", "0.3333333333333333"]


@pytest.mark.parametrize("bad,want", [
    ("atleast@4", "atleast@4 needs its parameter: atleast@k:tau with tau in [0, 1], e.g. atleast@4:0.5"),
    ("atleast@4:1.5", "atleast@4:1.5: tau must be a number in [0, 1], e.g. atleast@4:0.5"),
    ("atleast@4:-0.1", "atleast@4:-0.1: tau must be a number in [0, 1], e.g. atleast@4:0.5"),
    ("atleast@4:nan", "atleast@4:nan: tau must be a number in [0, 1], e.g. atleast@4:0.5"),
    ("atleast@4:abc", "atleast@4:abc: tau must be a number in [0, 1], e.g. atleast@4:0.5"),
    ("allof@4", "unknown metric 'allof@4'"), ("allof^", "unknown metric 'allof^'"),
])
def test_parameter_errors_name_the_fix(kinds: None, bad: str, want: str) -> None:
    with pytest.raises(BonbenchError) as err:
        parse_metrics([bad])
    assert str(err.value).startswith(want), str(err.value)


def test_analysis_names_pass_stored_kinds_and_task_metrics(kinds: None) -> None:
    assert metric_names(["winrate,4"]) == ["winrate", "winrate@4"]  # a bare kind that takes k: winrate is k = 1
    assert metric_names(["pass@1,4", "kl_bon@4", "static_accuracy,winrate@16,2", "winrate", "pass@1[level=a, b]",
                         "atleast@4:.50,8"]) == ["pass@1", "pass@4", "kl_bon@4", "static_accuracy", "winrate@16",
                                                 "winrate@2", "winrate", "pass@1[level=a, b]", "atleast@4:0.5",
                                                 "atleast@8:0.5"]
    for bad in ("pass@x", "foo@4", "atleast@4"):
        with pytest.raises(BonbenchError):
            metric_names([bad])


# ---------------------------------------------------------------------------------------------
# reading stored names: order, direction, closed form, footnotes, curves


def test_display_order_is_the_records_order(kinds: None) -> None:
    expected = ["pass@1", "pass@1[level=a]", "pass@1[level=b]", "pass@1[subject=a]", "pass@2", "pass@10",
                "allof^2", "atleast@2:0.25", "atleast@2:0.5", "atleast@4:0", "bon@1", "maj@4", "maj@4[Oct-2023]",
                "mean", "mean[level=a]", "max@2", "functional_accuracy", "gold_abstained", "kl", "kl_bon@4", "pass",
                "reasoning_gap", "winrate", "winrate@4"]
    shuffled = expected[::-1]
    random.Random(0).shuffle(shuffled)
    # allof^ / atleast (order 15, 16) sit between pass (10) and bon (20)
    assert sorted(shuffled, key=metric_sort_key) == expected


def test_readings_of_stored_metrics_come_from_the_records() -> None:
    assert metric_info("kl").direction == LOWER and metric_info("kl_bon@4").direction == LOWER
    assert metric_info("pass@1[level=3]").direction == "higher" and metric_info("winrate@4").direction == "higher"
    assert metric_info("winrate").direction == "higher" and metric_info("max@4").gateable
    assert metric_info("reasoning_gap").direction == LOWER and metric_info("gold_abstained").direction is None
    assert metric_info("kl_bon@4", {}, {"a": 0.6, "b": 0.6}).closed_form  # a file from before the flag
    assert not metric_info("kl_bon@4", {"closed_form": False}, {"a": 0.6, "b": 0.6}).closed_form
    assert footnotes(["pass@1", "kl_bon@2", "kl"]) == [KL_FOOTNOTE, CLOSED_FORM_FOOTNOTE] and footnotes(["pass@1"]) == []


@pytest.mark.parametrize("fields,word", [
    ({"kind": "Pass"}, "lower-case"), ({"reads": frozenset({"grade"})}, "reads unknown inputs ['grade']"),
    ({"always_on": ("answers",)}, "always_on"), ({"direction": "up"}, "direction"),
    ({"takes_k": False, "curve": lambda *a: None}, "a curve is a function of k"),
    ({"per_problem": None}, "computes nothing"),
])
def test_a_record_a_plugin_got_wrong_names_the_field(fields: dict, word: str) -> None:
    with pytest.raises(ValueError, match=re.escape(word)):
        MetricKind(**{"kind": "x", "summary": "s", "per_problem": _all_right, **fields})
    with pytest.raises(ValueError, match="example outside"):
        Param("t", 0.0, 1.0, example=2.0)


def test_an_ungateable_kind_is_never_gateable(monkeypatch: pytest.MonkeyPatch) -> None:
    METRICS.names()
    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))
    register_metric(MetricKind("report", "a count", per_problem=_all_right, gateable=False))
    assert metric_info("report@2").direction == "higher" and not metric_info("report@2").gateable


def test_curve_keys_labels_and_colors(kinds: None) -> None:
    binary, reward, code = run_inputs("correctness"), run_inputs("reward"), run_inputs("correctness", answers=False)
    assert curve_keys((), binary) == ["pass", "bon", "maj"]
    assert curve_keys((), run_inputs("correctness", scores=False)) == ["pass", "maj"]
    assert curve_keys((), reward) == ["bon", "max"] and curve_keys((), code) == ["pass", "bon"]
    # a requested kind with a curve gets one (its parameter in the key); mean has no curve
    assert curve_keys(parse_metrics(["atleast@4:0.75", "allof^2", "mean", "pass@1"]), binary) == [
        "pass", "bon", "maj", "allof^", "atleast:0.75"]
    assert curve_label("atleast:0.75") == "atleast@k:0.75" and curve_label("allof^", "N") == "allof^N"
    assert curve_label("pass") == "pass@k" and curve_label("bon learned:x") == "bon learned:x"
    assert curve_color("allof^") == "#123456" and curve_color("max") == metric_kind("max").color


# ---------------------------------------------------------------------------------------------
# computing values


def test_compute_metrics_values_and_per_problem() -> None:
    outs = _outcomes()
    values, per_problem = compute_metrics(outs, parse_metrics(["pass@1,4", "bon@4", "maj@8", "mean"]), n_boot=200)
    assert list(values) == ["pass@1", "pass@4", "bon@4", "maj@8", "mean"]
    for name, mv in values.items():
        assert mv.name == name and mv.n_problems == 30 and mv.ci95[0] <= mv.value <= mv.ci95[1]
        assert mv.mc_se is None and mv.mc_draws is None  # exact
        assert list(per_problem[name]) == [o.problem_id for o in outs]
        assert mv.value == pytest.approx(np.mean(list(per_problem[name].values())))
    o = outs[3]
    assert per_problem["pass@4"]["p3"] == pytest.approx(pass_at_k(o.correct, 4))
    assert per_problem["bon@4"]["p3"] == pytest.approx(bon_at_k(o.scores, o.correct, 4))
    assert per_problem["maj@8"]["p3"] == pytest.approx(maj_at_k(o.answers, o.correct, 8))
    assert values["mean"].value == pytest.approx(values["pass@1"].value)
    # strings are accepted too and give the same numbers
    alone = compute_metrics(outs, ["pass@4"], n_boot=200)[0]["pass@4"]
    assert alone.value == values["pass@4"].value
    assert alone.ci95 == pytest.approx(values["pass@4"].ci95, rel=1e-12)


def test_compute_metrics_errors() -> None:
    with pytest.raises(BonbenchError, match=r"^bon@4 reads verifier scores, but 30 of 30 problems have none .*--verifier"):
        compute_metrics(_outcomes(with_scores=False), parse_metrics(["bon@4"]))
    with pytest.raises(BonbenchError, match=r"pass@16.*k = 16.*n = 8.*--n 16"):
        compute_metrics(_outcomes(), parse_metrics(["pass@16"]))
    with pytest.raises(BonbenchError, match="unknown metric"):
        compute_metrics(_outcomes(), ["foo@3"])
    with pytest.raises(BonbenchError, match="no problems"):
        compute_metrics([], parse_metrics(["pass@1"]))
    with pytest.raises(BonbenchError, match="winrate is not computed from a run's grades"):
        compute_metrics(_outcomes(), [MetricSpec("winrate")])


def test_compute_curves() -> None:
    outs = _outcomes()
    curves = compute_curves(outs, n_boot=200)
    assert list(curves) == ["pass", "bon", "maj"]
    for c in curves.values():
        assert c["k"] == list(range(1, 9)) and len(c["value"]) == len(c["lo"]) == len(c["hi"]) == 8
        assert all(lo <= v <= hi for v, lo, hi in zip(c["value"], c["lo"], c["hi"], strict=True))
        assert "mc_se" not in c
    values, _ = compute_metrics(outs, parse_metrics(["maj@5", "bon@3"]), n_boot=200)
    assert curves["maj"]["value"][4] == pytest.approx(values["maj@5"].value)
    assert curves["bon"]["value"][2] == pytest.approx(values["bon@3"].value)
    assert set(compute_curves(_outcomes(with_scores=False), n_boot=200)) == {"pass", "maj"}
    with pytest.raises(BonbenchError, match="no metric kind has a curve 'mean'"):
        compute_curves(outs, ["mean"])


def brute(correct: Sequence[float], k: int, rule: Callable[[list[float]], float]) -> Fraction:
    """The mean of ``rule`` over every k-subset, in exact rationals."""
    subsets = list(combinations(range(len(correct)), k))
    return sum((F(rule([correct[i] for i in s])) for s in subsets), F(0)) / len(subsets)


def _cases() -> list[tuple[float, ...]]:
    """0/1 vectors with n = 1..7, all-right and all-wrong among them."""
    rng = random.Random(3)
    out = [(1.0,), (0.0,), (1.0,) * 5, (0.0,) * 5]
    out += [tuple(float(rng.random() < rng.random()) for _ in range(rng.randint(1, 7))) for _ in range(60)]
    return out


def test_throwaway_kinds_are_exact_against_every_k_subset(kinds: None) -> None:
    cases = _cases()
    outs = [ProblemOutcome(f"q{i}", c, (None,) * len(c)) for i, c in enumerate(cases)]
    ks = list(range(1, 8))
    all_of = curve_values(outs, "allof^", ks)
    at_least = curve_values(outs, "atleast:0.75", ks)
    for p, c in enumerate(cases):
        for j, k in enumerate(ks):
            if k > len(c):  # the per-problem fallback leaves NaN where n < k, never a value
                assert math.isnan(all_of[p, j]) and math.isnan(at_least[p, j])
                continue
            assert abs(all_of[p, j] - float(brute(c, k, min))) < 1e-12
            want = brute(c, k, lambda sub, k=k: sum(sub) >= max(1, math.ceil(0.75 * k)))
            assert abs(at_least[p, j] - float(want)) < 1e-12


def test_one_metric_per_call_with_its_parameter(kinds: None) -> None:
    outs = _outcomes()
    values, per = compute_metrics(outs, ["atleast@4:0.5", "atleast@4:1", "allof^4", "share@4"], n_boot=100)
    assert per["atleast@4:1"] == pytest.approx(per["allof^4"], abs=1e-12)  # tau = 1: all k right
    assert per["share@4"] == pytest.approx(per["atleast@4:0.5"], abs=1e-12)  # the optional parameter's default


def test_a_monte_carlo_kind_says_so_with_its_standard_error(kinds: None) -> None:
    outs = _outcomes(problems=40)
    values, per = compute_metrics(outs, ["mcpass@3", "pass@3"], n_boot=200, seed=4)
    mc, exact = values["mcpass@3"], values["pass@3"]
    assert mc.mc_draws == 200 and mc.mc_se is not None and 0 < mc.mc_se < 0.02
    assert abs(mc.value - exact.value) < 4 * mc.mc_se  # unbiased: within 4 Monte Carlo standard errors
    assert compute_metrics(outs, ["mcpass@3"], n_boot=200, seed=4)[0]["mcpass@3"] == mc  # seeded: reproducible
    curves = compute_curves(outs, ["pass", "mcpass"], n_boot=100, seed=4)
    assert curves["mcpass"]["mc_draws"] == 200 and len(curves["mcpass"]["mc_se"]) == 8 and "mc_se" not in curves["pass"]
    assert curves["mcpass"]["mc_se"][-1] == 0.0  # k = n: every draw is the whole set (sampled, all draws agree)
    # a curve that marks its exact cells: those ks carry no Monte Carlo fields
    exact_k1 = MetricKind("half", "mcpass, exact at k = 1", reads=frozenset({"grades"}), curve=_exact_at_1, order=20)
    METRICS.add("half", exact_k1)
    values, _ = compute_metrics(outs, ["half@1", "half@3"], n_boot=50, seed=4)
    assert values["half@1"].mc_se is None and values["half@1"].mc_draws is None and values["half@3"].mc_draws == 200
    assert compute_curves(outs, ["half"], n_boot=50, seed=4)["half"]["mc_se"][0] is None


def test_a_value_error_of_a_metric_is_one_line_naming_it(kinds: None) -> None:
    outs = _outcomes()
    bad = [ProblemOutcome(o.problem_id, o.correct, o.answers, tuple(s - 1 for s in o.scores or ())) for o in outs]
    assert compute_metrics(outs, ["nonneg@2"], n_boot=50)[0]["nonneg@2"].value == pytest.approx(
        compute_metrics(outs, ["bon@2"], n_boot=50)[0]["bon@2"].value)
    with pytest.raises(BonbenchError) as err:
        compute_metrics(bad, ["nonneg@2"], n_boot=50)
    assert str(err.value) == "nonneg@2: verifier scores must be >= 0 (they weigh votes); use a verifier with non-negative scores"


# ---------------------------------------------------------------------------------------------
# the run's rules, read from the records


def test_companions_and_always_metrics_come_from_the_records(kinds: None) -> None:
    assert [s.name for s in metric_specs(["bon@4"], ())] == ["bon@4", "pass@1", "pass@4", "maj@4"]
    assert [s.name for s in metric_specs(["bon@3"], (), "reward")] == ["bon@3", "mean", "max@3"]
    assert [s.name for s in metric_specs(["bon@2"], (), votes=False)] == ["bon@2", "pass@1", "pass@2"]
    assert [s.name for s in metric_specs([], ("pass@1", "maj@4"), votes=False)] == ["pass@1"]  # a default is dropped
    # a plugin's companions: allof^k and pass@k beside nonneg@k
    assert [s.name for s in metric_specs(["nonneg@3"], ())] == ["nonneg@3", "pass@1", "allof^3", "pass@3"]


@pytest.mark.parametrize("requested,judged_by,votes,want", [
    (["pass@2"], "reward", True, "pass@2 read(s) 0/1 verdicts, but this task is judged by a reward model, so there is "
                                 "nothing to pass or vote on; use bon@k, mean or max@k"),
    (["maj@2", "mean"], "reward", True, "maj@2 read(s) 0/1 verdicts, but this task is judged by a reward model"),
    (["max@4"], "correctness", True, "max@4 read(s) real-valued rewards, but this task is judged by correctness, so its "
                                     "outcomes are 0/1 grades, not rewards; use pass@k, pass^k, gpass@k:tau, "
                                     "mgpass@k, bon@k, maj@k, wmaj@k, bom@k:share or mean"),
    (["maj@2"], "correctness", False, "maj@2 read(s) the grader's answer classes, but this task has a grader that "
                                      "extracts no answers (it runs programs), so there is nothing to vote on; use "
                                      "pass@k, pass^k, gpass@k:tau, mgpass@k, bon@k or mean"),
])
def test_a_metric_the_task_cannot_compute_is_refused(requested: list[str], judged_by: str, votes: bool, want: str) -> None:
    with pytest.raises(BonbenchError) as err:
        metric_specs(requested, (), judged_by, votes)
    assert str(err.value).startswith(want), str(err.value)


# ---------------------------------------------------------------------------------------------
# the pipeline hands a kind what it reads


def _mean_logprob(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert o.logprobs is not None
    return float(np.mean(o.logprobs))


def test_a_kind_that_reads_logprobs_gets_them_and_others_do_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted toy model gives every completion log-probability -(its word count) = -2."""
    METRICS.names()
    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))
    register_metric(MetricKind("meanlp", "mean log-probability", reads=frozenset({"logprobs"}), takes_k=False,
                               per_problem=_mean_logprob))
    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))
    doc = execute(run_plan.plan(RunRequest(task="toy", metrics=("pass@1", "meanlp"), n=3, backend="hf",
                                           out=tmp_path))).docs[0]
    assert doc["metrics"]["meanlp"]["value"] == -2.0 and doc["metrics"]["pass@1"]["value"] > 0
    outs = [ProblemOutcome("p", (1.0, 0.0), ("a", "b"))]
    with pytest.raises(BonbenchError, match=r"^meanlp reads log-probabilities, but 1 of 1 problems have none .*--backend"):
        compute_metrics(outs, ["meanlp"])


def test_metrics_take_the_exact_values_of_the_curves_computed_beside_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compute_metrics(curves=curve_matrices(...))`` (what ``pipeline.scoring.score`` does): the same
    values, CIs and per-problem values as computing each metric again (to the last bit but one: a
    curve's matmul over every k may round differently from one over the ks asked), and an exact
    kind (maj@k) is computed once; a Monte Carlo k (wmaj@12 of n = 24) is computed for the ks asked,
    as before, so its value and Monte Carlo SE are those of the metric alone."""
    from bonbench.api.metric.values import curve_matrices
    from bonbench.metrics.maj import maj_curve
    from bonbench.plugins.metrics import exact

    calls: list[list[int]] = []

    def counted(answers: Any, correct: Any, ks: Any) -> Any:
        calls.append(list(ks))
        return maj_curve(answers, correct, ks)

    monkeypatch.setattr(exact, "maj_curve", counted)
    outs = _outcomes(n=24, problems=20)
    specs = ["pass@1", "pass@4", "bon@4", "maj@4", "maj@24", "wmaj@2", "wmaj@12", "bom@4:0.5", "mean"]
    curves = curve_matrices(outs, ["pass", "bon", "maj", "wmaj", "bom:0.5"], seed=3)
    assert curves["wmaj"].exact_at(12) is None and curves["wmaj"].exact_at(2) is not None  # sampled at 12 only
    assert calls == [list(range(1, 25))]
    taken = compute_metrics(outs, specs, n_boot=200, seed=3, curves=curves)
    assert calls == [list(range(1, 25))]  # maj@4 and maj@24 are the curve's columns
    again = compute_metrics(outs, specs, n_boot=200, seed=3)
    assert calls[1:] == [[4, 24]] and list(taken[0]) == list(again[0]) == specs
    for name in specs:
        a, b = taken[0][name], again[0][name]
        assert (a.value, *a.ci95) == pytest.approx((b.value, *b.ci95), rel=1e-14, abs=1e-15), name
        assert (a.n_problems, a.n_samples, a.mc_se, a.mc_draws) == (b.n_problems, b.n_samples, b.mc_se, b.mc_draws)
        assert taken[1][name] == pytest.approx(again[1][name], rel=1e-14, abs=1e-15), name
    assert taken[0]["wmaj@12"] == again[0]["wmaj@12"] and taken[0]["wmaj@12"].mc_se is not None
    assert taken[0]["maj@4"].mc_se is None
    # the metrics are the curves' own values at their ks
    assert [taken[1]["bon@4"][o.problem_id] for o in outs] == curves["bon"].values[:, 3].tolist()
