"""Scaling-law families beside ``exp(a k^b)``, and the choice between them per curve by held-out error.

Chow et al. 2024 fit "a power law plus a linear trend term" and use it for pass@N, BoN and majority
voting alike: a pure ``exp(a N^b)`` with ``a, b < 0`` only rises, so it cannot show bon@N falling
as N grows under a weak verifier (math-reference §2.7 and its findings). The reference did not
recover their exact parameterisation, so the family is a choice (docs/scaling.md):

* ``exp_power`` — ``c(k) = exp(a k^b)``, the coverage law of §1.4 (``fits.fit_power_law``);
* ``exp_power_linear`` (the default trend family) — ``c(k) = exp(a k^b + g k)`` with
  ``a <= 0, b <= 0, g <= 0``: the §1.4 law with the linear trend inside the log. It reduces to
  ``exp_power`` at ``g = 0``, never leaves ``(0, 1]``, and rises then falls when ``g < 0``;
* ``power_linear`` — ``c(k) = a k^b + g k + d`` with ``b <= 0``: the trend on the value scale
  (four parameters; not bounded to ``[0, 1]``), for comparison.

``fit_law`` fits one family with ``scipy.optimize.curve_fit`` from several starts and raises
``FitError`` when none converges or the result is not finite. ``select_family`` fits every family
on the whole curve and on its small-k part, measures each on the held-out large k, and picks the
lower held-out error. Nothing here reads run directories or draws.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from bonbench.apps.analysis.fits import FitError, fit_power_law, log_subsample

EXP_POWER, EXP_POWER_LINEAR, POWER_LINEAR = "exp_power", "exp_power_linear", "power_linear"
FAMILIES = (EXP_POWER, EXP_POWER_LINEAR, POWER_LINEAR)
# The paper's pair: the coverage law and the same law with a linear trend. Order matters: on an
# exact tie of held-out error the earlier (simpler) family is chosen.
DEFAULT_FAMILIES = (EXP_POWER, EXP_POWER_LINEAR)
# A family listed later (more parameters) must beat an earlier one's held-out error by more than this
# fraction to be chosen: on a curve that follows the simpler law, noise alone decides which of two
# near-equal errors is lower, and the extra parameter should not win on noise.
SIMPLER_MARGIN = 0.05
PARAMS = {EXP_POWER: ("a", "b"), EXP_POWER_LINEAR: ("a", "b", "g"), POWER_LINEAR: ("a", "b", "g", "d")}
FORMULAS = {EXP_POWER: "exp(a·k^b)", EXP_POWER_LINEAR: "exp(a·k^b + g·k)", POWER_LINEAR: "a·k^b + g·k + d"}


class ScalingFit(Protocol):
    """What every family's fit offers: its name, parameters, R² and a prediction."""

    # read-only: the fits are frozen dataclasses (family a class variable of some)
    @property
    def family(self) -> str: ...

    @property
    def r2(self) -> float: ...

    @property
    def n_points(self) -> int: ...

    @property
    def k_min(self) -> float: ...

    @property
    def k_max(self) -> float: ...

    def predict(self, k: np.ndarray | Sequence[float] | float) -> np.ndarray: ...

    def params(self) -> dict[str, float]: ...


def _exp_power_linear(k: np.ndarray, a: float, b: float, g: float) -> np.ndarray:
    return np.exp(a * np.power(k, b) + g * k)


def _power_linear(k: np.ndarray, a: float, b: float, g: float, d: float) -> np.ndarray:
    return a * np.power(k, b) + g * k + d


def _exp_power(k: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.exp(a * np.power(k, b))


LAWS: Mapping[str, Callable[..., np.ndarray]] = {EXP_POWER: _exp_power, EXP_POWER_LINEAR: _exp_power_linear,
                                                 POWER_LINEAR: _power_linear}


@dataclass(frozen=True)
class TrendFit:
    """A power law plus a linear trend (``family`` ``exp_power_linear`` or ``power_linear``) fitted on
    ``n_points`` values of k in ``[k_min, k_max]``; ``values`` in the order of ``PARAMS[family]``
    (``d`` is absent for ``exp_power_linear``). ``r2`` is on the c scale over the fit points."""

    family: str
    values: tuple[float, ...]
    r2: float
    n_points: int
    k_min: float
    k_max: float

    def params(self) -> dict[str, float]:
        return dict(zip(PARAMS[self.family], self.values, strict=True))

    def predict(self, k: np.ndarray | Sequence[float] | float) -> np.ndarray:
        return LAWS[self.family](np.asarray(k, dtype=float), *self.values)


def params_of(fit: ScalingFit) -> dict[str, float]:
    """Parameters of any family's fit by name."""
    return fit.params()


def family_of(fit: ScalingFit) -> str:
    return fit.family


def describe(fit: ScalingFit) -> str:
    """``exp(-1.20·k^-0.30 - 0.0010·k)``-style label for legends and tables."""
    p = params_of(fit)
    if family_of(fit) == EXP_POWER:
        return f"exp({p['a']:.2f}·k^{p['b']:.2f})"
    if family_of(fit) == EXP_POWER_LINEAR:
        return f"exp({p['a']:.2f}·k^{p['b']:.2f} {p['g']:+.2g}·k)"
    return f"{p['a']:.2f}·k^{p['b']:.2f} {p['g']:+.2g}·k {p['d']:+.2f}"


def _usable(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points every family is fitted on: finite, k > 0, 0 < c < 1, sorted by k. The same filter as
    ``fit_power_law``, so the families' R² and held-out errors compare like with like."""
    k_arr, c_arr = np.asarray(k, dtype=float), np.asarray(c, dtype=float)
    if k_arr.shape != c_arr.shape:
        raise ValueError(f"k and c differ in shape: {k_arr.shape} vs {c_arr.shape}")
    ok = np.isfinite(k_arr) & np.isfinite(c_arr) & (k_arr > 0) & (c_arr > 0) & (c_arr < 1)
    order = np.argsort(k_arr[ok])
    return k_arr[ok][order], c_arr[ok][order]


def _r2(c: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(np.sum((c - c.mean()) ** 2))
    return 1.0 - float(np.sum((c - pred) ** 2)) / ss_tot if ss_tot > 0 else math.nan


def _starts(family: str, k: np.ndarray, c: np.ndarray) -> list[tuple[float, ...]]:
    """Start points (with the trend in units of the largest k, ``h = g·scale``): the pure power law's
    own fit with no trend, then a few trends of growing strength, so that a curve that turns down
    is reachable without a lucky start."""
    try:
        base = fit_power_law(k, c, n_points=None)
        a0, b0 = min(base.a, -1e-6), min(base.b, 0.0)
    except FitError:
        a0, b0 = -1.0, -0.5
    a0, b0 = max(a0, -100.0), max(b0, -5.0)  # inside the bounds below
    if family == EXP_POWER_LINEAR:
        return [(a0, b0, 0.0), (a0, b0, -0.1), (a0, b0, -1.0), (-1.0, -0.5, -0.5), (-0.5, -1.0, -0.1)]
    d0 = float(c[-1])
    return [(float(c[0]) - d0, -0.5, 0.0, d0), (float(c[0]) - d0, -1.0, -0.1 * d0, d0),
            (-0.5, -0.3, 0.0, 1.0), (-1.0, -1.0, -0.2, 1.0)]


# Bounds in the scaled parameters (a, b, h[, d]). exp_power_linear: a, b <= 0 as in §1.4, and g <= 0
# keeps c <= 1 at every k (a rising trend inside the log would cross 1); |a|, |h| <= 100 and b >= -5
# only rule out numerically absurd values (exp(-100) is 0 to double precision).
_BOUNDS = {EXP_POWER_LINEAR: ([-100.0, -5.0, -100.0], [0.0, 0.0, 0.0]),
           POWER_LINEAR: ([-10.0, -5.0, -10.0, -10.0], [10.0, 0.0, 10.0, 10.0])}


def _fit_trend(family: str, k: np.ndarray, c: np.ndarray) -> TrendFit:
    n_par = len(PARAMS[family])
    if len(k) < n_par + 1:
        raise FitError(f"{family} fit needs at least {n_par + 1} values of k with 0 < c < 1, got {len(k)}; "
                       "use a larger n or more problems")
    scale = float(k[-1])  # fit g·k as h·(k/k_max) so all parameters are of order one for curve_fit
    law = LAWS[family]

    def scaled(x: np.ndarray, *p: float) -> np.ndarray:
        q = list(p)
        q[2] = p[2] / scale
        return law(x, *q)

    best: tuple[float, np.ndarray] | None = None
    for p0 in _starts(family, k, c):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", OptimizeWarning)
                popt, _ = curve_fit(scaled, k, c, p0=p0, bounds=_BOUNDS[family], maxfev=20000)
        except (RuntimeError, ValueError):
            continue  # this start did not converge; the others may
        pred = scaled(k, *popt)
        if not (np.all(np.isfinite(popt)) and np.all(np.isfinite(pred))):
            continue
        sse = float(np.sum((c - pred) ** 2))
        if best is None or sse < best[0]:
            best = (sse, popt)
    if best is None:
        raise FitError(f"{family} fit did not converge from any start on {len(k)} points "
                       f"(k {k[0]:g}–{k[-1]:g}); the curve does not have this shape")
    values = [float(v) for v in best[1]]
    values[2] /= scale
    fit = TrendFit(family=family, values=tuple(values), r2=math.nan, n_points=len(k), k_min=float(k[0]),
                   k_max=float(k[-1]))
    pred = fit.predict(k)
    if family == POWER_LINEAR and (pred.min() < -0.05 or pred.max() > 1.05):
        # a value-scale law that leaves [0, 1] inside its own fit range is not a curve of a rate
        raise FitError(f"{family} fit leaves [0, 1] on its own points (range {pred.min():.3f}–{pred.max():.3f})")
    return TrendFit(family=family, values=fit.values, r2=_r2(c, pred), n_points=len(k), k_min=fit.k_min,
                    k_max=fit.k_max)


def fit_law(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray, family: str = EXP_POWER_LINEAR, *,
            n_points: int | None = 40) -> ScalingFit:
    """Fit one family (``FAMILIES``) to a k-curve on the points with ``0 < c < 1``, the ``n_points``
    nearest to a log-spaced grid when there are more. Raises ``FitError`` when it cannot."""
    if family not in FAMILIES:
        raise FitError(f"unknown fit family {family!r}; choose from {', '.join(FAMILIES)}")
    if family == EXP_POWER:
        return fit_power_law(k, c, n_points=n_points)
    k_arr, c_arr = _usable(k, c)
    sel = log_subsample(k_arr, n_points) if len(k_arr) else np.arange(0)
    return _fit_trend(family, k_arr[sel], c_arr[sel])


@dataclass(frozen=True)
class HeldOut:
    """One family fitted on ``k <= k_cut`` and judged on the held-out larger k (log-spaced subset).

    ``mean_abs_error``/``max_abs_error`` are NaN and ``error`` says why when the small-k fit failed.
    """

    family: str
    k_cut: float
    n_held: int
    mean_abs_error: float
    max_abs_error: float
    fit: ScalingFit | None
    error: str = ""


def held_out_error(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray, family: str, *,
                   holdout_fraction: float = 0.5, n_points: int | None = 40) -> HeldOut:
    """Fit ``family`` on ``k <= holdout_fraction * max(k)`` and measure |predicted - observed| on the
    rest (every finite observed value there, c = 0 or 1 included: it is what the law must predict)."""
    if not 0 < holdout_fraction < 1:
        raise FitError(f"holdout fraction must be in (0, 1), got {holdout_fraction}")
    k_arr, c_arr = np.asarray(k, dtype=float), np.asarray(c, dtype=float)
    ok = np.isfinite(k_arr) & np.isfinite(c_arr)
    k_arr, c_arr = k_arr[ok], c_arr[ok]
    if not len(k_arr):
        raise FitError("held-out check needs a curve with finite values")
    k_cut = holdout_fraction * float(k_arr.max())
    low = k_arr <= k_cut
    k_hi, c_hi = k_arr[~low], c_arr[~low]
    sel = log_subsample(k_hi, n_points) if len(k_hi) else np.arange(0)
    try:
        fit = fit_law(k_arr[low], c_arr[low], family, n_points=n_points)
    except FitError as exc:
        return HeldOut(family, k_cut, len(sel), math.nan, math.nan, None, str(exc))
    err = np.abs(fit.predict(k_hi[sel]) - c_hi[sel])
    if not len(err):
        return HeldOut(family, k_cut, 0, math.nan, math.nan, fit, "no k above the cut")
    return HeldOut(family, k_cut, len(err), float(err.mean()), float(err.max()), fit)


@dataclass(frozen=True)
class FamilySelection:
    """Every family's fit of one curve (whole range) and held-out check; ``chosen`` is the family with
    the lowest held-out mean absolute error (``reason`` says when another rule decided)."""

    fits: Mapping[str, ScalingFit | None]
    fit_errors: Mapping[str, str]
    held_out: Mapping[str, HeldOut]
    chosen: str
    reason: str
    holdout_fraction: float

    @property
    def best(self) -> ScalingFit:
        fit = self.fits[self.chosen]
        assert fit is not None  # select_family only chooses a family that fitted
        return fit

    def predict(self, k: np.ndarray | Sequence[float] | float) -> np.ndarray:
        return self.best.predict(k)

    def to_json(self) -> dict:
        fams = {}
        for fam in self.fits:
            fit, ho = self.fits[fam], self.held_out[fam]
            fams[fam] = {"formula": FORMULAS[fam], "params": None if fit is None else params_of(fit),
                         "r2": None if fit is None else fit.r2, "n_points": None if fit is None else fit.n_points,
                         "fit_error": self.fit_errors.get(fam) or None,
                         "held_out": {"k_cut": ho.k_cut, "n_held": ho.n_held, "mean_abs_error": ho.mean_abs_error,
                                      "max_abs_error": ho.max_abs_error, "error": ho.error or None}}
        return {"chosen": self.chosen, "reason": self.reason, "holdout_fraction": self.holdout_fraction,
                "families": fams}


def pick_lowest(errors: Mapping[str, float], margin: float = SIMPLER_MARGIN) -> str:
    """The first key (in insertion order, simplest first) whose error is within a relative ``margin`` of
    the lowest. With ``margin = 0`` it is the plain argmin, ties to the earlier key; a trend family
    whose ``g`` sits at its bound 0 is the pure law, and then only round-off separates the errors."""
    low = min(errors.values())
    return next(f for f, e in errors.items() if e <= low * (1 + margin) + 1e-12)


def select_family(k: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray,
                  families: Sequence[str] = DEFAULT_FAMILIES, *, holdout_fraction: float = 0.5,
                  n_points: int | None = 40) -> FamilySelection:
    """Fit each of ``families`` to the whole curve and to its small-k part; choose by held-out error.

    The rule: among families whose whole-curve fit succeeded and whose held-out error is defined, the
    lowest mean absolute held-out error wins, except that the earliest family in ``families`` (list
    simpler families first) whose error is within ``SIMPLER_MARGIN`` (5%) of the lowest is preferred
    (``pick_lowest``). When no family has
    a held-out error (too few points below the cut), the first family that fits is chosen and
    ``reason`` says so. Raises ``FitError``
    when no family fits the whole curve.
    """
    if not families:
        raise FitError("no fit families given")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise FitError(f"unknown fit family {unknown[0]!r}; choose from {', '.join(FAMILIES)}")
    fits: dict[str, ScalingFit | None] = {}
    errors: dict[str, str] = {}
    held: dict[str, HeldOut] = {}
    for fam in families:
        try:
            fits[fam] = fit_law(k, c, fam, n_points=n_points)
        except FitError as exc:
            fits[fam], errors[fam] = None, str(exc)
        held[fam] = held_out_error(k, c, fam, holdout_fraction=holdout_fraction, n_points=n_points)
    fitted = [f for f in families if fits[f] is not None]
    if not fitted:
        raise FitError(f"no family fits this curve: {'; '.join(f'{f}: {errors[f]}' for f in families)}")
    judged = [f for f in fitted if math.isfinite(held[f].mean_abs_error)]
    if judged:
        chosen = pick_lowest({f: held[f].mean_abs_error for f in judged})
        reason = "lowest held-out error (5% margin to simpler families)" if len(judged) > 1 else \
            "only family with a held-out error"
    else:
        chosen, reason = fitted[0], "no held-out error (too few points below the cut): first family that fits"
    return FamilySelection(fits=fits, fit_errors=errors, held_out=held, chosen=chosen, reason=reason,
                           holdout_fraction=holdout_fraction)


def exp_power_linear_curve(k: np.ndarray | Sequence[float], a: float, b: float, g: float) -> np.ndarray:
    """Exact ``exp(a k^b + g k)``, for tests and synthetic examples."""
    return _exp_power_linear(np.asarray(k, dtype=float), a, b, g)


def power_linear_curve(k: np.ndarray | Sequence[float], a: float, b: float, g: float, d: float) -> np.ndarray:
    """Exact ``a k^b + g k + d``, for tests and synthetic examples."""
    return _power_linear(np.asarray(k, dtype=float), a, b, g, d)
