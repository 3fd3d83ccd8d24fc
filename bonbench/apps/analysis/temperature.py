"""Temperature as a continuous variable: the law's parameters as functions of T, the optimal
temperature between the temperatures that were run, and the fitted ``T*(N)`` curve (math-reference §2.7).

* ``fit_parameter_trends``: each parameter of one family's per-temperature fits as a polynomial in T
  (``b(T)``, ``log(-a(T))``, ``g(T)``), degree 2 when at least four temperatures leave a residual,
  else 1. Quadratic because with ``log(-a)`` and ``b`` both linear in T, ``log(-a(T) N^b(T))`` is
  linear in T and the best temperature is always an end of the sweep; a quadratic ``log(-a(T))``
  is the simplest form with an interior optimum, ``T* = -(b1 ln N + u1) / (2 u2)``, which depends on
  N only through ln N as §2.7 derives. ``a`` is trended as ``log(-a)`` because ``a < 0`` in the
  exponentiated families and a polynomial in ``a`` itself could cross 0 between temperatures.
* ``continuous_optimal_temperature``: for each budget N, the T in ``[T_min, T_max]`` of the sweep
  maximising the law with trended parameters (grid search refined by a bounded scalar search); no
  extrapolation outside the temperatures that were run, and optima at an end are flagged.
* ``fit_t_star``: ``T*(N) = alpha' N^beta + gamma N + delta'`` (``delta'`` optional), the "power
  law plus a linear term" of Chow et al. in the parameterisation §2.7 suggests, fitted with
  curve_fit to the interior continuous optima (``TStarFit`` says how it is parameterised).
* ``sweep_family``: which family all temperatures of a sweep share for the above (lowest total
  held-out error); ``analyse_sweep`` runs all of it for one sweep's curves.

Fitting each curve is ``laws``' job; this module only combines fits across temperatures.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import polynomial as P
from scipy.optimize import OptimizeWarning, curve_fit, minimize_scalar

from bonbench.apps.analysis.fits import FitError
from bonbench.apps.analysis.laws import (
    EXP_POWER,
    EXP_POWER_LINEAR,
    LAWS,
    PARAMS,
    FamilySelection,
    ScalingFit,
    family_of,
    params_of,
    pick_lowest,
    select_family,
)


@dataclass(frozen=True)
class ParamTrend:
    """One law parameter across temperatures: ``transform(param)(T) = sum coef[i] T^i``.

    ``transform`` is ``"log(-a)"`` or ``"identity"``; ``values`` are the per-temperature fitted
    parameters (untransformed); ``r2`` is on the transformed scale and NaN when the polynomial
    interpolates (no residual degree of freedom).
    """

    param: str
    transform: str
    degree: int
    coef: tuple[float, ...]
    temperatures: tuple[float, ...]
    values: tuple[float, ...]
    r2: float
    max_abs_residual: float

    def transformed(self, t: np.ndarray | float) -> np.ndarray:
        return P.polyval(np.asarray(t, dtype=float), self.coef)

    def __call__(self, t: np.ndarray | float) -> np.ndarray:
        y = self.transformed(t)
        return -np.exp(y) if self.transform == "log(-a)" else y


def _transform(family: str, param: str) -> str:
    return "log(-a)" if param == "a" and family in (EXP_POWER, EXP_POWER_LINEAR) else "identity"


def fit_parameter_trends(fits: Mapping[float, ScalingFit | None], family: str = EXP_POWER, *,
                         degree: int | None = None) -> dict[str, ParamTrend]:
    """Every parameter of ``family`` as a polynomial in T over the temperatures with a fit of that
    family. ``degree`` defaults to 2 with four or more temperatures and 1 otherwise (see the module
    docstring). Raises ``FitError`` with fewer than two temperatures, or when ``a = 0`` at some T."""
    temps = sorted(t for t, f in fits.items() if f is not None and family_of(f) == family)
    if len(temps) < 2:
        raise FitError(f"parameter trends need {family} fits at two or more temperatures, got {len(temps)}")
    deg = (2 if len(temps) >= 4 else 1) if degree is None else degree
    if not 0 <= deg < len(temps):
        raise FitError(f"a degree-{deg} trend needs more than {deg} temperatures, got {len(temps)}")
    t_arr = np.array(temps)
    out: dict[str, ParamTrend] = {}
    for name in PARAMS[family]:
        values = np.array([params_of(fits[t])[name] for t in temps])  # type: ignore[arg-type]  # temps: those with a fit
        transform = _transform(family, name)
        if transform == "log(-a)":
            if np.any(values >= 0):
                bad = temps[int(np.argmax(values >= 0))]
                raise FitError(f"a(T) must be negative for a log trend; a = {values.max():g} at T = {bad:g}")
            y = np.log(-values)
        else:
            y = values
        coef = P.polyfit(t_arr, y, deg)
        resid = y - P.polyval(t_arr, coef)
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        r2 = 1.0 - float(np.sum(resid ** 2)) / ss_tot if ss_tot > 0 and len(temps) > deg + 1 else math.nan
        out[name] = ParamTrend(param=name, transform=transform, degree=deg, coef=tuple(float(c) for c in coef),
                               temperatures=tuple(float(t) for t in temps), values=tuple(float(v) for v in values),
                               r2=r2, max_abs_residual=float(np.abs(resid).max()))
    return out


def law_value(family: str, trends: Mapping[str, ParamTrend], t: np.ndarray | float, N: float) -> np.ndarray:
    """The law of ``family`` at budget N with parameters read off the trends at temperature(s) ``t``."""
    params = [trends[name](t) for name in PARAMS[family]]
    return LAWS[family](np.asarray(float(N)), *params)


@dataclass(frozen=True)
class ContinuousOptimum:
    """The best temperature in ``[T_min, T_max]`` for budget N under the trended law."""

    N: int
    t_star: float
    value: float
    at_boundary: bool


def continuous_optimal_temperature(trends: Mapping[str, ParamTrend], family: str, Ns: Sequence[int], *,
                                   t_range: tuple[float, float] | None = None,
                                   n_grid: int = 401) -> list[ContinuousOptimum]:
    """For each N, ``argmax_T`` of the law with trended parameters over ``t_range`` (default: the
    temperatures the trends were fitted on). A grid of ``n_grid`` temperatures finds the best cell
    (the lowest T on a tie, as in ``fits.optimal_temperature``), then a bounded scalar search refines
    it between the neighbouring grid points. ``at_boundary`` marks optima at an end of the range,
    which are limits of the sweep rather than optima."""
    first = next(iter(trends.values()))
    lo, hi = t_range if t_range is not None else (min(first.temperatures), max(first.temperatures))
    grid = np.linspace(lo, hi, n_grid)
    rows: list[ContinuousOptimum] = []
    for N in Ns:
        with np.errstate(all="ignore"):
            vals = law_value(family, trends, grid, N)
        if not np.any(np.isfinite(vals)):
            rows.append(ContinuousOptimum(int(N), math.nan, math.nan, False))
            continue
        i = int(np.nanargmax(vals))
        t_best, v_best = float(grid[i]), float(vals[i])
        if 0 < i < n_grid - 1:
            res = minimize_scalar(lambda t, N=N: -float(law_value(family, trends, t, N)), bounds=(grid[i - 1], grid[i + 1]),
                                  method="bounded", options={"xatol": 1e-10})
            if res.success and -res.fun >= v_best:
                t_best, v_best = float(res.x), float(-res.fun)
        rows.append(ContinuousOptimum(int(N), t_best, v_best, at_boundary=i in (0, n_grid - 1)))
    return rows


@dataclass(frozen=True)
class TStarFit:
    """``T*(N)`` as a power law plus a linear term, fitted on ``n_points`` budgets in ``[N_min, N_max]``.

    With ``offset`` (the default) the curve is ``alpha (N^beta - 1)/beta + gamma N + delta``: the
    paper's ``alpha' N^beta + gamma N + delta'`` with ``alpha' = alpha/beta`` and
    ``delta' = delta - alpha/beta`` (``paper_form``), written so that ``beta -> 0`` is the limit
    ``alpha ln N`` instead of a ridge of huge, cancelling ``alpha'`` and ``delta'``. Under the
    quadratic trends T* is exactly linear in ln N (module docstring), so that limit is the common
    case, not a corner. Without ``offset`` it is ``alpha N^beta + gamma N`` as written.
    """

    alpha: float
    beta: float
    gamma: float
    delta: float
    offset: bool
    r2: float
    max_abs_residual: float
    n_points: int
    N_min: float
    N_max: float

    def predict(self, N: np.ndarray | Sequence[float] | float) -> np.ndarray:
        n = np.asarray(N, dtype=float)
        if not self.offset:
            return t_star_curve(n, self.alpha, self.beta, self.gamma)
        return self.alpha * _boxcox(n, self.beta) + self.gamma * n + self.delta

    def paper_form(self) -> tuple[float, float, float, float]:
        """``(alpha', beta, gamma, delta')`` of ``alpha' N^beta + gamma N + delta'`` (infinite
        ``alpha'`` and ``delta'`` when ``beta = 0``, the pure ``ln N`` limit)."""
        if not self.offset:
            return self.alpha, self.beta, self.gamma, 0.0
        if self.beta == 0:
            return math.inf, 0.0, self.gamma, -math.inf
        return self.alpha / self.beta, self.beta, self.gamma, self.delta - self.alpha / self.beta


def _boxcox(n: np.ndarray, beta: float) -> np.ndarray:
    # (N^beta - 1)/beta, continuous at beta = 0 where it is ln N; expm1 keeps it exact for tiny beta
    logn = np.log(n)
    return logn if abs(beta) < 1e-12 else np.expm1(beta * logn) / beta


def t_star_curve(N: np.ndarray | Sequence[float] | float, alpha: float, beta: float, gamma: float,
                 delta: float = 0.0) -> np.ndarray:
    """Exact ``alpha N^beta + gamma N + delta`` (the paper's form)."""
    n = np.asarray(N, dtype=float)
    return alpha * np.power(n, beta) + gamma * n + delta


def fit_t_star(N: Sequence[float] | np.ndarray, t_star: Sequence[float] | np.ndarray, *,
               offset: bool = True) -> TStarFit:
    """Fit ``T*(N)`` (``TStarFit``) with curve_fit from several starts, keeping the lowest squared
    error. Needs one more finite point than parameters; raises ``FitError`` otherwise or when no
    start converges."""
    n_arr, t_arr = np.asarray(N, dtype=float), np.asarray(t_star, dtype=float)
    ok = np.isfinite(n_arr) & np.isfinite(t_arr) & (n_arr > 0)
    n_arr, t_arr = n_arr[ok], t_arr[ok]
    n_par = 4 if offset else 3
    if len(n_arr) < n_par + 1:
        raise FitError(f"T*(N) fit needs at least {n_par + 1} budgets with an interior optimum, got {len(n_arr)}; "
                       "widen the temperature range of the sweep")
    scale = float(n_arr.max())  # gamma is fitted as h = gamma * N_max so every parameter is of order one

    def model(n: np.ndarray, alpha: float, beta: float, h: float, delta: float = 0.0) -> np.ndarray:
        if offset:
            return alpha * _boxcox(n, beta) + h * n / scale + delta
        return alpha * np.power(n, beta) + h * n / scale

    t0, t1 = float(t_arr[0]), float(t_arr[-1])
    slope = (t1 - t0) / max(math.log(n_arr[-1] / n_arr[0]), 1e-9)  # T* per unit of ln N, for the starts
    starts = ([(slope, 0.0, 0.0, t0), (slope, 0.5, 0.0, t0), (slope, -0.5, 0.0, t0), (0.0, 0.0, t1 - t0, t0)]
              if offset else [(t0, 0.1, 0.0), (t0, 0.5, t1 - t0), (t1, -0.3, 0.0)])
    lower, upper = [-100.0, -3.0, -100.0, -100.0][:n_par], [100.0, 3.0, 100.0, 100.0][:n_par]
    best: tuple[float, np.ndarray] | None = None
    for start in starts:
        p0 = tuple(float(np.clip(v, lo_, hi_)) for v, lo_, hi_ in zip(start, lower, upper, strict=True))
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", OptimizeWarning)
                popt, _ = curve_fit(model, n_arr, t_arr, p0=p0, bounds=(lower, upper), max_nfev=2000)
        except (RuntimeError, ValueError):
            continue  # this start did not converge; the others may
        pred = model(n_arr, *popt)
        if not (np.all(np.isfinite(popt)) and np.all(np.isfinite(pred))):
            continue
        sse = float(np.sum((t_arr - pred) ** 2))
        if best is None or sse < best[0]:
            best = (sse, popt)
    if best is None:
        raise FitError(f"T*(N) fit did not converge from any start on {len(n_arr)} budgets")
    p = [float(v) for v in best[1]]
    resid = t_arr - model(n_arr, *p)
    ss_tot = float(np.sum((t_arr - t_arr.mean()) ** 2))
    return TStarFit(alpha=p[0], beta=p[1], gamma=p[2] / scale, delta=p[3] if offset else 0.0, offset=offset,
                    r2=1.0 - float(np.sum(resid ** 2)) / ss_tot if ss_tot > 0 else math.nan,
                    max_abs_residual=float(np.abs(resid).max()), n_points=len(n_arr), N_min=float(n_arr.min()),
                    N_max=float(n_arr.max()))


def sweep_family(selections: Mapping[float, FamilySelection | None], families: Sequence[str]) -> str:
    """The family a sweep's trends use: among families that fitted at every temperature with a held-out
    error, the lowest summed held-out error (``pick_lowest``: 5% margin to earlier families); otherwise the first family
    that fitted at every temperature. Raises ``FitError`` when none did."""
    sels = [s for s in selections.values() if s is not None]
    if not sels:
        raise FitError("no temperature of the sweep has a fit")
    everywhere = [f for f in families if all(s.fits.get(f) is not None for s in sels)]
    if not everywhere:
        raise FitError("no fit family fits every temperature of the sweep")
    judged = [f for f in everywhere if all(math.isfinite(s.held_out[f].mean_abs_error) for s in sels)]
    if not judged:
        return everywhere[0]
    return pick_lowest({f: sum(s.held_out[f].mean_abs_error for s in sels) for f in judged})


def fits_of(selections: Mapping[float, FamilySelection | None], family: str) -> dict[float, ScalingFit | None]:
    """Each temperature's whole-curve fit of ``family`` (None where it did not fit)."""
    return {t: (None if s is None else s.fits.get(family)) for t, s in selections.items()}



@dataclass(frozen=True)
class SweepFit:
    """Everything fitted across the temperatures of one sweep.

    ``selections[T]`` is the per-curve family choice (None where no family fits); ``family`` the one
    family the trends and T* use (``sweep_family``); ``trends[f]`` each family's parameter trends,
    with ``trend_errors[f]`` saying why a family has none; ``optima`` the continuous T*(N) on the
    budgets ``Ns``; ``t_star`` the fitted curve, or ``t_star_error`` saying why there is none.
    """

    selections: Mapping[float, FamilySelection | None]
    selection_errors: Mapping[float, str]
    family: str | None
    trends: Mapping[str, Mapping[str, ParamTrend]]
    trend_errors: Mapping[str, str]
    optima: tuple[ContinuousOptimum, ...]
    t_star: TStarFit | None
    t_star_error: str


def analyse_sweep(curves: Mapping[float, tuple[np.ndarray, np.ndarray]], Ns: Sequence[int], *,
                  families: Sequence[str], holdout_fraction: float = 0.5, n_points: int | None = 40,
                  degree: int | None = None, offset: bool = True) -> SweepFit:
    """Choose a family per temperature, trend every family's parameters in T, and from the sweep
    family's trends find the continuous T*(N) on ``Ns`` and fit ``T*(N)`` to its interior optima."""
    selections: dict[float, FamilySelection | None] = {}
    sel_errors: dict[float, str] = {}
    for t in sorted(curves):
        try:
            selections[t] = select_family(*curves[t], families, holdout_fraction=holdout_fraction, n_points=n_points)
        except FitError as exc:
            selections[t], sel_errors[t] = None, str(exc)
    trends: dict[str, Mapping[str, ParamTrend]] = {}
    trend_errors: dict[str, str] = {}
    for fam in families:
        try:
            trends[fam] = fit_parameter_trends(fits_of(selections, fam), fam, degree=degree)
        except FitError as exc:
            trend_errors[fam] = str(exc)
    try:
        family: str | None = sweep_family(selections, families)
    except FitError as exc:
        family, t_star_error = None, str(exc)
    optima: tuple[ContinuousOptimum, ...] = ()
    t_star: TStarFit | None = None
    if family is not None and family not in trends:
        t_star_error = f"no parameter trends for {family}: {trend_errors[family]}"
    elif family is not None:
        optima = tuple(continuous_optimal_temperature(trends[family], family, Ns))
        inner = [o for o in optima if not o.at_boundary and math.isfinite(o.t_star)]
        try:
            t_star, t_star_error = fit_t_star([o.N for o in inner], [o.t_star for o in inner], offset=offset), ""
        except FitError as exc:
            t_star_error = str(exc)
    return SweepFit(selections=selections, selection_errors=sel_errors, family=family, trends=trends,
                    trend_errors=trend_errors, optima=optima, t_star=t_star, t_star_error=t_star_error)
