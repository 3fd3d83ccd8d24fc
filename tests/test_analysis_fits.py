"""Scaling fits, optimal temperature, co-scaling frequencies, plots and the HTML report, on data with
known ground truth (math-reference §1.4 and §2.7)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.fits import (
    FitError,
    coscaling,
    extrapolation_check,
    fit_power_law,
    fit_temperatures,
    log_spaced_ks,
    optimal_temperature,
)
from bonbench.apps.analysis.synthetic import power_law_curve, write_sweep_file, write_synthetic_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_worked_example_values_and_exact_recovery() -> None:
    # math-reference §1.4 worked example: a = -2, b = -0.35
    k = np.array([1, 10, 100, 1000, 10000])
    c = power_law_curve(k, -2.0, -0.35)
    assert c == pytest.approx([0.1353352832366127, 0.40927532453056753, 0.6709555000958468,
                               0.8367330570416491, 0.9234658729024674], rel=1e-14)
    ks = log_spaced_ks(10000, 40)
    fit = fit_power_law(ks, power_law_curve(ks, -2.0, -0.35))
    assert fit.a == pytest.approx(-2.0, abs=1e-9) and fit.b == pytest.approx(-0.35, abs=1e-9)
    assert fit.a_ols == pytest.approx(-2.0, abs=1e-9) and fit.b_ols == pytest.approx(-0.35, abs=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    assert fit.refined and fit.n_points == len(ks) <= 40


def test_dense_curve_is_subsampled_to_log_spaced_points() -> None:
    k = np.arange(1, 2049)  # curves.json has every k; the fit must not be dominated by large k
    fit = fit_power_law(k, power_law_curve(k, -1.2, -0.3), n_points=40)
    assert fit.n_points <= 40 and fit.k_min == 1 and fit.k_max == 2048
    assert fit.a == pytest.approx(-1.2, abs=1e-9) and fit.b == pytest.approx(-0.3, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_recovery_from_noisy_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ks = log_spaced_ks(10000, 40)
    c = power_law_curve(ks, -2.0, -0.35) * (1 + 0.01 * rng.standard_normal(len(ks)))
    fit = fit_power_law(ks, c)
    assert abs(fit.a + 2.0) < 0.05
    assert abs(fit.b + 0.35) < 0.02
    assert fit.r2 > 0.99


def test_unfittable_curves_raise_fit_error() -> None:
    with pytest.raises(FitError, match="at least 3"):
        fit_power_law([1, 2, 4, 8], [1.0, 1.0, 1.0, 1.0])  # everything solved: no rate to fit
    with pytest.raises(FitError):
        fit_power_law([1, 2], [0.2, 0.3])


def test_extrapolation_check_on_exact_law_and_on_a_bent_curve() -> None:
    k = np.arange(1, 257)
    ex = extrapolation_check(k, power_law_curve(k, -1.5, -0.4))
    assert ex.k_cut == 64
    assert ex.k_held.min() > 64 and ex.k_held.max() == 256
    assert ex.max_abs_error < 1e-8
    # a curve that saturates below 1 (a 30% never-solved tail) bends away from the law at large k:
    # the check must see a clearly larger error than on the exact law
    bent = 0.7 * (1 - 0.9 ** k)
    ex_bent = extrapolation_check(k, bent)
    assert ex_bent.max_abs_error > 0.02
    assert ex_bent.error_at_max_k > 0  # the law heads to 1 and overshoots the plateau


# A temperature family in which low T wins at small N and high T wins at large N (Chow et al. 2024):
# pass@N(T) = exp(a(T) N^b(T)).
FAMILY = {0.2: (-0.8, -0.05), 0.6: (-1.0, -0.12), 1.0: (-1.6, -0.25)}


def _true_t_star(N: int) -> float:
    return max(FAMILY, key=lambda t: FAMILY[t][0] * N ** FAMILY[t][1])


def test_per_temperature_fits_and_optimal_temperature_exact() -> None:
    # n = 16: every measured T* is 0.2; only the fitted laws can see T* move to 0.6 (N = 32) and 1.0
    n = 16
    k = np.arange(1, n + 1)
    curves = {t: (k, power_law_curve(k, a, b)) for t, (a, b) in FAMILY.items()}
    fits = fit_temperatures(curves)
    for t, (a, b) in FAMILY.items():
        assert fits[t].a == pytest.approx(a, abs=1e-8) and fits[t].b == pytest.approx(b, abs=1e-8)
    Ns = [2 ** i for i in range(0, 15)]
    rows = optimal_temperature(curves, Ns, fits)
    truth = [_true_t_star(N) for N in Ns]
    assert [r.t_fitted for r in rows] == truth  # fitted laws extrapolate past n
    assert [r.t_measured for r in rows if r.N <= n] == [t for N, t in zip(Ns, truth, strict=True) if N <= n]
    assert all(np.isnan(r.t_measured) for r in rows if r.N > n)
    assert {r.t_measured for r in rows if r.N <= n} == {0.2}
    assert len(set(truth)) == 3 and truth == sorted(truth)  # the family really has T* rising with N


def test_optimal_temperature_from_noisy_curves() -> None:
    rng = np.random.default_rng(7)
    k = np.arange(1, 129)
    curves = {t: (k, power_law_curve(k, a, b) * (1 + 0.005 * rng.standard_normal(len(k))))
              for t, (a, b) in FAMILY.items()}
    fits = fit_temperatures(curves)
    for t, (a, b) in FAMILY.items():
        assert fits[t].a == pytest.approx(a, abs=0.05) and fits[t].b == pytest.approx(b, abs=0.03)
    Ns = [2 ** i for i in range(0, 13)]
    rows = optimal_temperature(curves, Ns, fits)
    for r in rows:
        vals = sorted(a * r.N ** b for a, b in FAMILY.values())
        if vals[-1] - vals[-2] > 0.05:  # where the true gap is well above the noise
            assert r.t_fitted == _true_t_star(r.N)


def test_coscaling_definition_on_hand_built_values() -> None:
    Ns = [1, 2, 4, 8]
    values = {
        0.2: {"best_low_t_n1": np.array([0.9, 0.9, 0.9, 0.9]),
              "bon_peak": np.array([0.1, 0.2, 0.3, 0.2]),
              "tie": np.array([0.2, 0.8, 0.8, 0.8]),
              "unsolved": np.zeros(4),
              "missing": np.array([1.0, 1.0, 1.0, 1.0])},
        1.0: {"best_low_t_n1": np.array([0.5, 0.7, 0.8, 0.85]),
              "bon_peak": np.array([0.1, 0.4, 0.6, 0.5]),   # peaks at N = 4: larger N is worse
              "tie": np.array([0.3, 0.8, 0.8, 0.8]),
              "unsolved": np.zeros(4)},
    }
    cs = coscaling(values, Ns, tol=0.0)
    assert cs.n_counted == 3 and cs.n_unsolved == 1 and cs.n_missing == 1
    expected = np.zeros((2, 4))
    expected[0, 0] = 1 / 3          # best_low_t_n1 -> (0.2, 1)
    expected[1, 2] = 1 / 3          # bon_peak -> (1.0, 4)
    expected[:, 1] += 1 / 6         # tie: both temperatures at N* = 2, half each
    np.testing.assert_allclose(cs.freq, expected)
    assert cs.freq.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(cs.t_star_marginal(), [0.5, 0.5])
    # a tolerance lets a lower budget count as "best": bon_peak's 0.6 at N=4 is within 0.2 of 0.4 at N=2
    cs_tol = coscaling(values, Ns, tol=0.2)
    assert cs_tol.freq[1, 1] > cs.freq[1, 1]


def _two_temperature_sweep(root: Path, P: int = 40, n: int = 8) -> list[Path]:
    """Half the problems are always solved at T=0.2 and never at T=1.0; the other half never at
    T=0.2 and exactly half the samples at T=1.0."""
    half = P // 2
    low = np.zeros((P, n))
    low[:half] = 1.0
    high = np.zeros((P, n))
    high[half:, : n // 2] = 1.0
    p = np.full(P, 0.5)
    return [write_synthetic_run(root, p, n=n, temperature=0.2, correct=low, n_boot=50, metrics=("pass@1",)),
            write_synthetic_run(root, p, n=n, temperature=1.0, correct=high, n_boot=50, metrics=("pass@1",))]


def test_coscaling_from_run_directories_and_tolerance(tmp_path: Path) -> None:
    from bonbench.apps.analysis.run_rows import per_problem_curves
    from bonbench.apps.analysis.rundir import load_run

    runs = [load_run(d) for d in _two_temperature_sweep(tmp_path)]
    Ns = [1, 2, 4, 8]
    values = {r.temperature: per_problem_curves(r, "pass", Ns) for r in runs}
    cs = coscaling(values, Ns, tol=0.01)
    assert cs.n_counted == 40 and cs.n_unsolved == 0
    # T=0.2 half: pass@1 = 1 already. T=1.0 half (n=8, c=4): pass@4 = 1 - 1/70 = 0.9857 < 0.99 -> N* = 8
    np.testing.assert_allclose(cs.freq, [[0.5, 0, 0, 0], [0, 0, 0, 0.5]])
    cs2 = coscaling(values, Ns, tol=0.02)
    np.testing.assert_allclose(cs2.freq, [[0.5, 0, 0, 0], [0, 0, 0.5, 0]])


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_for_a_sweep_embeds_valid_pngs_and_tables(tmp_path: Path) -> None:
    from bonbench.apps.analysis.analysis_flags import main

    runs = _two_temperature_sweep(tmp_path / "results")
    sweep = write_sweep_file(tmp_path / "sweep", runs)
    out = tmp_path / "report"
    assert main(["plot", str(sweep.parent), "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    for needle in ("Temperature sweep", "Per-temperature fits", "Optimal temperature per budget N",
                   "Co-scaling: per-problem (T*, N*)", "Scaling fits", "pass@1", "40 problems counted"):
        assert needle in html, needle
    assert html.count("data:image/png;base64,") == 5  # sweep curves, T*(N), co-scaling, 2 run k-curves
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 5
    for png in pngs:
        w, h = _png_size(png)
        assert 300 <= w <= 2000 and 200 <= h <= 2000
        assert png.stat().st_size > 5000
    doc = json.loads((out / "report.json").read_text())
    assert doc["sweeps"][0]["coscaling"]["n_counted"] == 40
    assert {r["hash"] for r in doc["runs"]} == {p.name for p in runs}


def test_plot_rejects_a_path_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.analysis.analysis_flags import main

    assert main(["plot", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "does not exist" in err[0]


def test_plot_reads_a_real_pipeline_sweep(tmp_path: Path) -> None:
    # The contract with the pipeline: `bonbench run --temperature a,b` writes run dirs plus sweep.json,
    # and `bonbench plot SWEEP_DIR` turns them into a report (toy plugin, scripted sampler).
    import subprocess
    import sys

    from bonbench.apps.analysis.analysis_flags import main

    here = Path(__file__).parent
    proc = subprocess.run([sys.executable, str(here / "run_toy_cli.py"), "0", "--", "run", "--task", "toy", "--backend",
                           "hf", "--metric", "pass@4", "--n", "8", "--temperature", "0.2,1.0",
                           "--out", str(tmp_path / "results")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sweeps = list((tmp_path / "results").rglob("sweep.json"))
    assert len(sweeps) == 1
    assert main(["plot", str(sweeps[0].parent), "--out", str(tmp_path / "report")]) == 0
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    assert len(doc["runs"]) == 2 and len(doc["sweeps"]) == 1
    sweep = doc["sweeps"][0]
    assert sorted(float(t) for t in sweep["runs"]) == [0.2, 1.0]
    cs = sweep["coscaling"]
    assert cs["n_counted"] + cs["n_unsolved"] > 0 and cs["Ns"] == [1, 2, 4, 8]
