"""Scaling-law fits over k-curves: the coverage law, its temperature family, and co-scaling of (T, N).

* ``fit_power_law``: coverage as an exponentiated power law, ``c(k) = exp(a k^b)`` (math-reference
  §1.4; Brown et al. 2024): OLS on ``log(-log c) = log(-a) + b log k`` for the start, refined with
  ``scipy.optimize.curve_fit`` on about 40 log-spaced k.
* ``extrapolation_check``: fit on ``k <= fit_fraction * k_max`` and report the error on the rest.
* ``fit_temperatures`` / ``optimal_temperature``: ``pass@N(T) = exp(a(T) N^b(T))`` per temperature
  (math-reference §2.7) and the best temperature per budget N, measured and from the fits.
* ``coscaling``: per-problem (T*, N*) frequencies, the co-scaling figure of Chow et al. 2024; the
  definition is in docs/scaling.md and on the function.

Everything here works on plain arrays (k, value). It reads and writes no file and draws nothing
(numpy and scipy, no matplotlib): reading run directories is ``rundir``'s job and drawing is
``plots``'. Nor does it estimate the k-curves it fits: callers pass them (``rundir`` reads or
rebuilds them from a run, with ``bonbench.metrics``' estimators). The law with a linear trend and
the choice between families are in ``laws``; parameter trends in temperature and the fitted
``T*(N)`` in ``temperature``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from bonbench.core.errors import BonbenchError


class FitError(BonbenchError):
    """The data cannot support a fit (too few k with 0 < c < 1); the message says what was found."""


@dataclass(frozen=True)
class PowerLawFit:
    """``c(k) = exp(a k^b)`` fitted on ``n_points`` values of k in ``[k_min, k_max]``.

    ``r2`` is the coefficient of determination on the c scale over the fit points; ``a_ols``/``b_ols``
    are the linearised start values; ``refined`` is False when curve_fit failed and the OLS values
    are reported instead.
    """

    a: float
    b: float
    r2: float
    n_points: int
    k_min: float
    k_max: float
    a_ols: float
    b_ols: float
    refined: bool
    family: ClassVar[str] = "exp_power"  # its name among the families of ``laws``

    def predict(self, k: np.ndarray | Sequence[float] | float) -> np.ndarray:
        return _law(np.asarray(k, dtype=float), self.a, self.b)

    def params(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b}


@dataclass(frozen=True)
class Extrapolation:
    """A fit on small k judged on the held-out large k."""

    fit: PowerLawFit
    k_cut: float
    k_held: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray

    @property
    def abs_error(self) -> np.ndarray:
        return np.abs(self.predicted - self.observed)

    @property
    def max_abs_error(self) -> float:
        return float(self.abs_error.max()) if len(self.k_held) else math.nan

    @property
    def mean_abs_error(self) -> float:
        return float(self.abs_error.mean()) if len(self.k_held) else math.nan

    @property
    def error_at_max_k(self) -> float:
        """Signed error (predicted - observed) at the largest held-out k."""
        return float(self.predicted[-1] - self.observed[-1]) if len(self.k_held) else math.nan


@dataclass(frozen=True)
class OptimalTemperature:
    """Best temperature for budget N: measured (argmax of the curves at k = N; NaN beyond every
    run's n) and from the per-temperature fits (which extrapolate past n)."""

    N: int
    t_measured: float
    value_measured: float
    t_fitted: float
    value_fitted: float


@dataclass(frozen=True)
class CoScaling:
    """Per-problem (T*, N*) frequencies.

    ``freq[i, j]`` is the fraction of counted problems whose (T*, N*) is
    ``(temperatures[i], Ns[j])``; a problem tied between several temperatures at its N* gives each
    an equal share, so every column sums to the fraction of problems with that N*. Problems never
    solved at any (T, N) are not counted (``n_unsolved``), nor problems missing from some
    temperature's run (``n_missing``).
    """

    temperatures: tuple[float, ...]
    Ns: tuple[int, ...]
    freq: np.ndarray
    n_counted: int
    n_unsolved: int
    n_missing: int
    tol: float

    def t_star_marginal(self) -> np.ndarray:
        """Fraction of problems per T* (summed over N*)."""
        return self.freq.sum(axis=1)

    def n_star_marginal(self) -> np.ndarray:
        """Fraction of problems per N* (summed over T*)."""
        return self.freq.sum(axis=0)

    def mean_t_star_by_n(self) -> np.ndarray:
        """Mean T* among problems with each N* (NaN where no problem has that N*)."""
        col = self.freq.sum(axis=0)
        t = np.asarray(self.temperatures)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(col > 0, (self.freq * t).sum(axis=0) / col, math.nan)


def _law(k: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.exp(a * np.power(k, b))


def log_spaced_ks(k_max: int, n_points: int = 40, k_min: int = 1) -> np.ndarray:
    """Up to ``n_points`` distinct integers spread evenly on a log scale over ``[k_min, k_max]``."""
    if k_max < k_min:
        return np.array([], dtype=int)
    grid = np.unique(np.round(np.geomspace(k_min, k_max, n_points)).astype(int))
    return grid[(grid >= k_min) & (grid <= k_max)]


def log_subsample(k: np.ndarray, n_points: int | None) -> np.ndarray:
    """Indices of k nearest to a log-spaced grid, so dense small-k data does not dominate the fit."""
    if n_points is None or len(k) <= n_points:
        return np.arange(len(k))
    grid = np.geomspace(k.min(), k.max(), n_points)
    logk = np.log(k)
    idx = {int(np.argmin(np.abs(logk - math.log(g)))) for g in grid}
    return np.array(sorted(idx))


def fit_power_law(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray, *,
                  n_points: int | None = 40) -> PowerLawFit:
    """Fit ``c(k) = exp(a k^b)`` to a coverage (or pass@N / bon@N) curve.

    Points with NaN or c outside (0, 1) are dropped: the linearisation needs ``0 < c < 1`` and a
    curve at exactly 1 carries no information about the rate. When more than ``n_points`` usable
    points remain, those nearest to ``n_points`` log-spaced k are used (Brown et al. fit 40).
    Raises ``FitError`` with fewer than 3 usable points.
    """
    k_arr = np.asarray(k, dtype=float)
    c_arr = np.asarray(c, dtype=float)
    if k_arr.shape != c_arr.shape:
        raise ValueError(f"k and c differ in shape: {k_arr.shape} vs {c_arr.shape}")
    ok = np.isfinite(k_arr) & np.isfinite(c_arr) & (k_arr > 0) & (c_arr > 0) & (c_arr < 1)
    k_arr, c_arr = k_arr[ok], c_arr[ok]
    order = np.argsort(k_arr)
    k_arr, c_arr = k_arr[order], c_arr[order]
    if len(k_arr) < 3:
        raise FitError(f"power-law fit needs at least 3 values of k with 0 < c < 1, got {len(k_arr)} "
                       "(all problems solved or none solved); use more problems or a harder task")
    sel = log_subsample(k_arr, n_points)
    k_fit, c_fit = k_arr[sel], c_arr[sel]
    b_ols, intercept = np.polyfit(np.log(k_fit), np.log(-np.log(c_fit)), 1)
    a_ols = -math.exp(intercept)
    a, b, refined = a_ols, float(b_ols), False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            popt, _ = curve_fit(_law, k_fit, c_fit, p0=(a_ols, b_ols), maxfev=20000)
        if np.all(np.isfinite(popt)):
            a, b, refined = float(popt[0]), float(popt[1]), True
    except (RuntimeError, ValueError):
        pass  # curve_fit did not converge; the OLS start is still a valid (if cruder) fit
    pred = _law(k_fit, a, b)
    ss_tot = float(np.sum((c_fit - c_fit.mean()) ** 2))
    r2 = 1.0 - float(np.sum((c_fit - pred) ** 2)) / ss_tot if ss_tot > 0 else math.nan
    return PowerLawFit(a=a, b=b, r2=r2, n_points=len(k_fit), k_min=float(k_fit[0]), k_max=float(k_fit[-1]),
                       a_ols=float(a_ols), b_ols=float(b_ols), refined=refined)


def extrapolation_check(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray, *,
                        fit_fraction: float = 0.25, n_points: int | None = 40) -> Extrapolation:
    """Fit on ``k <= fit_fraction * max(k)`` and compare with the observed curve at the larger k.

    The held-out k are the log-spaced subset (``n_points``) of the larger k, so the report is not
    dominated by the many nearly equal values near k = n.
    """
    k_arr = np.asarray(k, dtype=float)
    c_arr = np.asarray(c, dtype=float)
    finite = np.isfinite(c_arr)
    k_arr, c_arr = k_arr[finite], c_arr[finite]
    if len(k_arr) == 0:
        raise FitError("extrapolation check needs a curve with finite values")
    k_cut = fit_fraction * float(k_arr.max())
    low = k_arr <= k_cut
    fit = fit_power_law(k_arr[low], c_arr[low], n_points=n_points)
    k_hi, c_hi = k_arr[~low], c_arr[~low]
    sel = log_subsample(k_hi, n_points) if len(k_hi) else np.arange(0)
    k_held, observed = k_hi[sel], c_hi[sel]
    return Extrapolation(fit=fit, k_cut=k_cut, k_held=k_held, observed=observed, predicted=fit.predict(k_held))


def fit_temperatures(curves: Mapping[float, tuple[np.ndarray, np.ndarray]], *,
                     n_points: int | None = 40) -> dict[float, PowerLawFit | None]:
    """``pass@N(T) = exp(a(T) N^b(T))``: one fit per temperature; None where a curve cannot be fitted."""
    out: dict[float, PowerLawFit | None] = {}
    for t in sorted(curves):
        k, v = curves[t]
        try:
            out[t] = fit_power_law(k, v, n_points=n_points)
        except FitError:
            out[t] = None
    return out


def _argmax_t(temps: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    # Lowest temperature wins ties: with equal value the less random policy is the safer choice.
    best_t, best_v = math.nan, -math.inf
    for t, v in zip(temps, values, strict=True):
        if np.isfinite(v) and v > best_v:
            best_t, best_v = t, v
    return (best_t, best_v) if np.isfinite(best_v) else (math.nan, math.nan)


class Predicts(Protocol):
    """A fitted law of k: a single fit, or a family selection that predicts with its chosen fit."""

    def predict(self, k: np.ndarray | Sequence[float] | float) -> np.ndarray: ...


def optimal_temperature(curves: Mapping[float, tuple[np.ndarray, np.ndarray]], Ns: Sequence[int],
                        fits: Mapping[float, Predicts | None] | None = None) -> list[OptimalTemperature]:
    """For each budget N, the temperature maximising the measured curve at k = N and the fitted law.

    ``curves[T] = (k, value)`` for pass@k or bon@k at temperature T. Ties go to the lower temperature.
    Measured values are NaN where N exceeds a run's n; fitted values extrapolate (that is what the law
    is for) and are NaN only when no temperature has a fit.
    """
    temps = sorted(curves)
    rows: list[OptimalTemperature] = []
    for N in Ns:
        measured = []
        for t in temps:
            k, v = (np.asarray(x, dtype=float) for x in curves[t])
            hit = np.nonzero(k == N)[0]
            measured.append(float(v[hit[0]]) if len(hit) else math.nan)
        t_m, v_m = _argmax_t(temps, measured)
        t_f, v_f = math.nan, math.nan
        if fits is not None:
            fitted = [float(f.predict(N)) if (f := fits.get(t)) is not None else math.nan for t in temps]
            t_f, v_f = _argmax_t(temps, fitted)
        rows.append(OptimalTemperature(N=int(N), t_measured=t_m, value_measured=v_m, t_fitted=t_f, value_fitted=v_f))
    return rows


def coscaling(values: Mapping[float, Mapping[str, np.ndarray]], Ns: Sequence[int], *,
              tol: float = 0.01) -> CoScaling:
    """Per-problem (T*, N*) frequencies over a temperature x budget grid.

    ``values[T][problem_id]`` is the problem's estimate (pass@N or bon@N) at each N of ``Ns``. For a
    problem x with ``v(x, T, N)``:

    * ``v*(x) = max over (T, N) of v(x, T, N)``; problems with ``v* = 0`` are unsolved and not counted;
    * ``N*(x)`` is the smallest N with ``max_T v(x, T, N) >= v*(x) - tol``;
    * ``T*(x)`` is the set of temperatures with ``v(x, T, N*) >= v*(x) - tol``; each gets weight
      ``1 / |T*(x)|``.

    ``tol`` (absolute) keeps N* meaningful for pass@N, which only reaches its maximum (1) at
    ``N > n - c``; with ``tol = 0`` and bon@N, N* is where the best-of-N value peaks exactly.
    """
    if tol < 0:
        raise ValueError("tol must be >= 0")
    temps = sorted(values)
    if not temps:
        raise FitError("co-scaling needs at least one temperature")
    all_ids = set().union(*(set(values[t]) for t in temps))
    common = set.intersection(*(set(values[t]) for t in temps))
    counts = np.zeros((len(temps), len(Ns)))
    n_unsolved = 0
    for pid in sorted(common):
        v = np.array([np.asarray(values[t][pid], dtype=float) for t in temps])
        if v.shape[1] != len(Ns):
            raise ValueError(f"problem {pid}: {v.shape[1]} values for {len(Ns)} budgets")
        if not np.any(np.isfinite(v)):
            n_unsolved += 1
            continue
        v_star = float(np.nanmax(v))
        if v_star <= 0:
            n_unsolved += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (N beyond n) are expected
            col_best = np.nanmax(np.where(np.isfinite(v), v, -np.inf), axis=0)
        j = int(np.nonzero(col_best >= v_star - tol)[0][0])
        winners = np.nonzero(np.nan_to_num(v[:, j], nan=-np.inf) >= v_star - tol)[0]
        counts[winners, j] += 1.0 / len(winners)
    n_counted = len(common) - n_unsolved
    freq = counts / n_counted if n_counted else counts
    return CoScaling(temperatures=tuple(float(t) for t in temps), Ns=tuple(int(n) for n in Ns), freq=freq,
                     n_counted=n_counted, n_unsolved=n_unsolved, n_missing=len(all_ids) - len(common), tol=tol)
