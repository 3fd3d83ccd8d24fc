"""The power law plus linear trend families, their choice by held-out error, the law's parameters as
functions of temperature, the continuous T* and the fitted T*(N) (math-reference §1.4, §2.7), and
``bonbench plot --kind bon --verifier`` end to end on synthetic sweeps with known ground truth."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.fits import FitError, log_spaced_ks
from bonbench.apps.analysis.laws import (
    DEFAULT_FAMILIES,
    EXP_POWER,
    EXP_POWER_LINEAR,
    FAMILIES,
    POWER_LINEAR,
    exp_power_linear_curve,
    fit_law,
    power_linear_curve,
    select_family,
)
from bonbench.apps.analysis.synthetic import power_law_curve, write_sweep_file, write_synthetic_run
from bonbench.apps.analysis.temperature import (
    analyse_sweep,
    continuous_optimal_temperature,
    fit_parameter_trends,
    fit_t_star,
    fits_of,
    sweep_family,
    t_star_curve,
)

K = np.arange(1, 257)
RISE_FALL = (-1.5, -0.4, -0.002)  # exp(a k^b + g k): peaks at k = 59, then falls (a weak verifier's bon@k)


def test_rise_then_fall_curve_really_rises_and_falls() -> None:
    c = exp_power_linear_curve(K, *RISE_FALL)
    peak = int(np.argmax(c))
    assert 20 < K[peak] < 200 and c[peak] - c[-1] > 0.1 and c[peak] - c[0] > 0.4


@pytest.mark.parametrize("family,params,curve", [
    (EXP_POWER_LINEAR, RISE_FALL, exp_power_linear_curve),
    (EXP_POWER_LINEAR, (-2.0, -0.35, -0.0001), exp_power_linear_curve),
    (POWER_LINEAR, (-0.5, -0.6, -0.0005, 0.8), power_linear_curve),
])
def test_each_trend_family_recovers_its_own_parameters_exactly(family, params, curve) -> None:
    fit = fit_law(K, curve(K, *params), family)
    assert fit.family == family
    np.testing.assert_allclose(list(fit.params().values()), params, rtol=1e-7, atol=1e-10)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    assert fit.n_points <= 40 and fit.k_min == 1 and fit.k_max == 256


def test_exp_power_through_fit_law_is_the_coverage_law() -> None:
    ks = log_spaced_ks(10000, 40)
    fit = fit_law(ks, power_law_curve(ks, -2.0, -0.35), EXP_POWER)
    assert fit.family == EXP_POWER and fit.params() == pytest.approx({"a": -2.0, "b": -0.35}, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trend_family_recovery_from_noisy_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = exp_power_linear_curve(K, *RISE_FALL) * (1 + 0.005 * rng.standard_normal(len(K)))
    p = fit_law(K, c, EXP_POWER_LINEAR).params()
    assert abs(p["a"] - RISE_FALL[0]) < 0.03 and abs(p["b"] - RISE_FALL[1]) < 0.01
    assert abs(p["g"] - RISE_FALL[2]) < 1e-4


def test_selector_picks_the_trend_for_a_curve_that_falls() -> None:
    sel = select_family(K, exp_power_linear_curve(K, *RISE_FALL))
    assert sel.chosen == EXP_POWER_LINEAR and sel.reason.startswith("lowest held-out error")
    assert sel.held_out[EXP_POWER_LINEAR].mean_abs_error < 1e-9
    # exp(a k^b) cannot turn down: fitted on k <= 128 it misses the fall badly
    assert sel.held_out[EXP_POWER].mean_abs_error > 0.1
    assert sel.fits[EXP_POWER].r2 < 0.9 < sel.fits[EXP_POWER_LINEAR].r2
    doc = sel.to_json()
    assert doc["chosen"] == EXP_POWER_LINEAR and set(doc["families"]) == set(DEFAULT_FAMILIES)
    assert doc["families"][EXP_POWER_LINEAR]["params"]["g"] == pytest.approx(RISE_FALL[2], rel=1e-6)


@pytest.mark.parametrize("seed", [None, 0, 1, 2, 3])
def test_selector_keeps_the_pure_law_for_a_coverage_curve(seed: int | None) -> None:
    # exp(a k^b) is the trend family at g = 0: the extra parameter buys nothing (its held-out error is not 5%
    # lower), so the pure law is kept
    c = power_law_curve(K, -1.5, -0.4)
    if seed is not None:
        c = c * (1 + 0.005 * np.random.default_rng(seed).standard_normal(len(K)))
    sel = select_family(K, c)
    assert sel.chosen == EXP_POWER
    g = sel.fits[EXP_POWER_LINEAR].params()["g"]
    assert abs(g) < 1e-9 if seed is None else abs(g) * K.max() < 0.01  # the trend stays negligible


def test_selector_among_three_families_finds_the_value_scale_trend() -> None:
    sel = select_family(K, power_linear_curve(K, -0.5, -0.6, -0.0005, 0.8), FAMILIES)
    assert sel.chosen == POWER_LINEAR
    assert sel.held_out[POWER_LINEAR].mean_abs_error < 1e-9 < sel.held_out[EXP_POWER_LINEAR].mean_abs_error


def test_failures_are_fit_errors_not_curves() -> None:
    with pytest.raises(FitError, match="at least 4"):
        fit_law([1, 2, 4], [0.2, 0.3, 0.35], EXP_POWER_LINEAR)
    with pytest.raises(FitError, match="unknown fit family"):
        fit_law(K, power_law_curve(K, -1.0, -0.5), "cubic")
    with pytest.raises(FitError, match="no family fits"):
        select_family([1, 2, 4, 8], [1.0, 1.0, 1.0, 1.0])
    # too few points below the cut for the 3-parameter family: it is reported, and the choice says why
    sel = select_family([1, 2, 3, 4, 5, 6], power_law_curve(np.arange(1, 7), -1.0, -0.5), holdout_fraction=0.5)
    assert sel.held_out[EXP_POWER_LINEAR].error and np.isnan(sel.held_out[EXP_POWER_LINEAR].mean_abs_error)
    assert sel.chosen == EXP_POWER and sel.reason == "only family with a held-out error"


# A temperature family with a known optimum: log(-a(T)) = U0 + U1 T + U2 T^2, b(T) = B0 + B1 T, so that
# argmax_T a(T) N^b(T) solves U1 + 2 U2 T + B1 ln N = 0: T*(N) = -(B1 ln N + U1) / (2 U2), rising with N.
U, B = (-0.3, -0.42, 1.5), (-0.05, -0.3462)
TEMPS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)


def _ab(t: float) -> tuple[float, float]:
    return -float(np.exp(U[0] + U[1] * t + U[2] * t * t)), B[0] + B[1] * t


def _true_t_star(N: np.ndarray) -> np.ndarray:
    return -(B[1] * np.log(N) + U[1]) / (2 * U[2])


def _sweep_curves(n: int = 64, noise: float = 0.0, seed: int = 0) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    k = np.arange(1, n + 1)
    return {t: (k, power_law_curve(k, *_ab(t)) * (1 + noise * rng.standard_normal(n))) for t in TEMPS}


def test_parameter_trends_recover_a_and_b_of_temperature() -> None:
    curves = _sweep_curves()
    sels = {t: select_family(k, c) for t, (k, c) in curves.items()}
    assert all(s.chosen == EXP_POWER for s in sels.values())
    trends = fit_parameter_trends(fits_of(sels, EXP_POWER), EXP_POWER)
    assert trends["a"].transform == "log(-a)" and trends["a"].degree == 2
    np.testing.assert_allclose(trends["a"].coef, U, atol=1e-7)
    np.testing.assert_allclose(trends["b"].coef, [B[0], B[1], 0.0], atol=1e-7)
    for t in (0.3, 0.7, 1.1):  # between the temperatures run
        assert float(trends["a"](t)) == pytest.approx(_ab(t)[0], rel=1e-6)
        assert float(trends["b"](t)) == pytest.approx(_ab(t)[1], abs=1e-7)
    # with three temperatures the trend is linear (one residual degree of freedom)
    three = fit_parameter_trends({t: sels[t].best for t in (0.2, 0.6, 1.0)}, EXP_POWER)
    assert three["b"].degree == 1 and three["b"].coef == pytest.approx((B[0], B[1]), abs=1e-7)
    with pytest.raises(FitError, match="two or more"):
        fit_parameter_trends({0.2: sels[0.2].best}, EXP_POWER)


def test_parameter_trends_from_noisy_sweeps() -> None:
    curves = _sweep_curves(noise=0.003, seed=5)
    fits = {t: fit_law(k, c, EXP_POWER) for t, (k, c) in curves.items()}
    trends = fit_parameter_trends(fits, EXP_POWER)
    for t in TEMPS:
        assert float(trends["b"](t)) == pytest.approx(_ab(t)[1], abs=0.02)
        assert float(trends["a"](t)) == pytest.approx(_ab(t)[0], rel=0.05)


def test_continuous_optimum_and_t_star_fit_recover_the_known_optimum() -> None:
    curves = _sweep_curves()
    Ns = [int(n) for n in log_spaced_ks(4096, 40)]
    sf = analyse_sweep(curves, Ns, families=DEFAULT_FAMILIES)
    assert sf.family == EXP_POWER
    opt = {o.N: o for o in sf.optima}
    assert opt[1].at_boundary and opt[1].t_star == pytest.approx(min(TEMPS))  # true optimum below the range
    inner = [o for o in sf.optima if not o.at_boundary]
    assert len(inner) >= 30
    np.testing.assert_allclose([o.t_star for o in inner], _true_t_star(np.array([o.N for o in inner])), atol=1e-6)
    # T* linear in ln N is the beta -> 0 limit of the fitted family: alpha = -B1 / (2 U2), delta = -U1 / (2 U2)
    fit = sf.t_star
    assert fit is not None and fit.r2 > 0.999999
    assert fit.alpha == pytest.approx(-B[1] / (2 * U[2]), abs=1e-4) and abs(fit.beta) < 1e-3
    assert fit.delta == pytest.approx(-U[1] / (2 * U[2]), abs=1e-3)
    assert np.max(np.abs(fit.predict(Ns[5:]) - _true_t_star(np.array(Ns[5:])))) < 1e-3
    # the argmax over the temperatures run can only say 0.2, 0.4, ...: the continuous optimum sits between
    direct = continuous_optimal_temperature(sf.trends[EXP_POWER], EXP_POWER, [100])
    assert 0.6 < direct[0].t_star < 0.8 and direct[0].t_star not in TEMPS


@pytest.mark.parametrize("params,offset", [((0.15, 0.3, -1e-4, 0.1), True), ((0.5, -0.5, 2e-4, 0.4), True),
                                           ((0.15, 0.3, -1e-4, 0.0), False)])
def test_t_star_family_recovers_its_own_parameters(params, offset) -> None:
    N = log_spaced_ks(4096, 40)
    fit = fit_t_star(N, t_star_curve(N, *params), offset=offset)
    np.testing.assert_allclose(fit.paper_form(), params, rtol=1e-6, atol=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(FitError, match="at least"):
        few = N[: 4 if offset else 3]  # one point per parameter is not enough
        fit_t_star(few, t_star_curve(few, *params), offset=offset)


def test_sweep_family_follows_the_total_held_out_error() -> None:
    k = np.arange(1, 129)
    curves = {t: (k, exp_power_linear_curve(k, -1.5 - t, -0.4, -0.002 * t)) for t in (0.3, 0.6, 0.9, 1.2)}
    sels = {t: select_family(kk, c) for t, (kk, c) in curves.items()}
    assert {s.chosen for s in sels.values()} == {EXP_POWER_LINEAR}
    assert sweep_family(sels, DEFAULT_FAMILIES) == EXP_POWER_LINEAR
    trends = fit_parameter_trends(fits_of(sels, EXP_POWER_LINEAR), EXP_POWER_LINEAR)
    np.testing.assert_allclose(trends["g"].coef, [0.0, -0.002, 0.0], atol=1e-8)
    np.testing.assert_allclose(trends["b"].coef, [-0.4, 0.0, 0.0], atol=1e-7)


# ---- run directories and `bonbench plot --kind bon --verifier` ------------------------------------

LEARNED = "learned-toy"


def _bon_sweep(root: Path, P: int = 40, n: int = 32) -> list[Path]:
    """Four temperatures; besides the default verifier a weak "learned" one that, now and then, gives a
    wrong sample a score far above the rest, so its bon@N rises and then falls."""
    base = np.random.default_rng(0).beta(0.6, 2.0, size=P)
    runs = []
    for i, t in enumerate((0.2, 0.5, 0.8, 1.1)):
        p = np.clip(base * (0.6 + 0.8 * t) - 0.15 * t * t, 0.01, 0.99)
        rng = np.random.default_rng(10 + i)
        corr = (rng.random((P, n)) < p[:, None]).astype(float)
        trap = (rng.random((P, n)) < 0.03) & (corr == 0)
        learned = 1.5 * corr + rng.standard_normal((P, n)) + 6.0 * trap
        runs.append(write_synthetic_run(root, p, n=n, temperature=t, correct=corr, seed=i, n_boot=50,
                                        metrics=("pass@1", "bon@4"), extra_scores={LEARNED: learned}))
    return runs


def test_kind_curve_rebuilds_bon_for_any_verifier(tmp_path: Path) -> None:
    from bonbench.apps.analysis.run_rows import bon_verifier, kind_curve
    from bonbench.apps.analysis.rundir import load_run
    from bonbench.core.errors import BonbenchError

    run = load_run(_bon_sweep(tmp_path)[0])
    assert bon_verifier(run) == "synthetic"  # the one metrics.json names
    curve, name = kind_curve(run, "bon")
    assert name == "synthetic" and curve is run.curves["bon"]
    # the rebuild from the rows agrees with the pipeline's curves.json to round-off
    rebuilt, _ = kind_curve(replace(run, meta={}, scored_with=("synthetic",)), "bon", n_boot=50)
    np.testing.assert_allclose(rebuilt.value, run.curves["bon"].value, atol=1e-12)
    learned, name = kind_curve(run, "bon", LEARNED, n_boot=50)
    assert name == LEARNED and not np.allclose(learned.value, run.curves["bon"].value)
    assert np.argmax(learned.value) < len(learned.value) - 1  # the weak verifier's bon@N turns down
    with pytest.raises(BonbenchError, match="several verifiers"):
        bon_verifier(replace(run, meta={}))
    with pytest.raises(BonbenchError, match="--verifier"):
        bon_verifier(run, "nope")


def test_plot_bon_with_a_learned_verifier_writes_the_new_fields(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.analysis.analysis_flags import main

    sweep = write_sweep_file(tmp_path / "sweep", _bon_sweep(tmp_path / "results"))
    out = tmp_path / "report"
    assert main(["plot", str(sweep.parent), "--kind", "bon", "--verifier", LEARNED, "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    sw = doc["sweeps"][0]
    assert sw["kind"] == "bon" and set(sw["verifier"].values()) == {LEARNED}
    assert len(sw["selections"]) == 4
    for sel in sw["selections"].values():
        assert set(sel["families"]) == set(DEFAULT_FAMILIES) and sel["chosen"] in DEFAULT_FAMILIES
        for fam in sel["families"].values():
            assert fam["params"] is not None and fam["r2"] is not None and fam["held_out"]["mean_abs_error"] is not None
    # the weak verifier's curves rise and fall: the trend family wins at most temperatures
    assert sum(s["chosen"] == EXP_POWER_LINEAR for s in sw["selections"].values()) >= 3
    assert sw["family"] == EXP_POWER_LINEAR
    assert set(sw["trends"][EXP_POWER_LINEAR]) == {"a", "b", "g"} and sw["trends"][EXP_POWER]["b"]["degree"] == 2
    assert len(sw["continuous_optimum"]) >= 30
    assert (sw["t_star_fit"] is None) != (sw["t_star_error"] is None)
    for run in doc["runs"]:
        assert run["fits"]["pass"]["selection"]["chosen"] in DEFAULT_FAMILIES
    html = (out / "report.html").read_text()
    for needle in ("Family per temperature", "Law parameters as functions of temperature", "T* continuous",
                   "Family per curve", f"verifier {LEARNED}"):
        assert needle in html, needle
    # a verifier the runs lack, or --verifier without --kind bon: one-line errors, exit 1
    capsys.readouterr()
    assert main(["plot", str(sweep.parent), "--kind", "bon", "--verifier", "nope", "--out", str(tmp_path / "r2")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "nope" in err[0]
    assert main(["plot", str(sweep.parent), "--verifier", LEARNED, "--out", str(tmp_path / "r3")]) == 1
    assert "--kind bon" in capsys.readouterr().err
    assert main(["plot", str(sweep.parent), "--fit-families", "exp_power,cubic", "--out", str(tmp_path / "r4")]) == 1
    assert "--fit-families" in capsys.readouterr().err
