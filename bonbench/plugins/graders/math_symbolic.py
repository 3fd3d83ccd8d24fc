"""The symbolic side of math equivalence: what sympy and math-verify decide (part of the math grader).

What it does: ``symbolic_verdict`` settles two canonical atoms that ``math_equiv``'s cheap rules left
open. Two constants are compared exactly (``constant_verdict``: written decimals made rationals,
30-digit evaluation, a relative tolerance only where evalf cannot reach full precision, the
rounded-gold interval rule); anything else (variables, relations) goes to math-verify, after an
exact evaluation at three rational points that can only prove the two different
(``_differ_at_points``), because math-verify compares numerically with a tolerance.

What it does not do: no cheap rules and no structures (``math_equiv``); no timeout (``MathGrader``
runs these in worker processes with its own); sympy and math-verify are imported on first use.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

from bonbench.plugins.graders.math_numeric import approx_interval, is_long, parse_number

# math-verify warns once that its timeouts are off; we enforce timeouts ourselves (MathGrader).
logging.getLogger("math_verify").setLevel(logging.ERROR)

_MV_CACHE: dict[str, Any] = {}


def _mv_parse(atom: str) -> Any:
    from math_verify import parse  # imported lazily: sympy costs ~1 s and most answers never need it

    got = _MV_CACHE.get(atom)
    if got is None:
        got = parse("$" + atom + "$", parsing_timeout=None)
        if len(_MV_CACHE) > 50_000:
            _MV_CACHE.clear()
        _MV_CACHE[atom] = got
    return got


def _sympy_expr(parsed: Any) -> Any:
    """The first sympy expression (a value, not a relation, set or matrix) math-verify parsed."""
    import sympy

    for item in parsed or ():
        if isinstance(item, sympy.Expr):
            return item
    return None


def _sympy_in(v: Any, interval: tuple[Fraction, Fraction]) -> bool:
    import sympy

    re_part, im_part = v.as_real_imag()
    if abs(im_part) > abs(re_part) * sympy.Rational(1, 10**20):
        return False
    lo = sympy.Rational(interval[0].numerator, interval[0].denominator)
    hi = sympy.Rational(interval[1].numerator, interval[1].denominator)
    return bool(lo <= re_part) and bool(re_part <= hi)


# bits of a 30-digit evalf result (~100): a value that has them is known to all 30 digits
_FULL_PREC = 90


def _evalf_zero(v: Any) -> bool:
    """Whether an evalf result is zero: exactly, or a float with no significant bit left (evalf
    keeps raising its working precision until a nonzero value has its requested relative
    accuracy, so 1/100! - 1/99! comes back to full precision while sin(pi/7) - cos(5pi/14), an
    exact zero, comes back as "0.e-166" with one bit of precision)."""
    if v == 0:
        return True
    return bool(getattr(v, "is_Float", False) and v._prec < 10)


def constant_verdict(pred: str, gold: str) -> bool | None:
    """Exact comparison of two constant atoms (no free variable) that the cheap rules left open.

    math-verify compares numbers after rounding to 6 places or with ``evalf(chop=True)``, which
    calls any two tiny values equal (1/100! and 1/99!). Here decimals written in the atoms become
    exact rationals, both sides are evaluated to 30 significant digits, and they are equal only
    when their difference evaluates to zero (``_evalf_zero``) or to less than 1e-20 of their size
    (a relative tolerance, never an absolute one). A gold written as a rounded
    decimal, or a long predicted decimal, is compared with the interval rule of ``num_equiv``.
    None when either side is not a constant sympy value (variables, relations, sets): math-verify
    decides those."""
    import sympy

    p, g = _sympy_expr(_mv_parse(pred)), _sympy_expr(_mv_parse(gold))
    if p is None or g is None or p.free_symbols or g.free_symbols:
        return None
    try:
        # a decimal inside an expression (0.5\pi) is the rational it is written as
        p = p.xreplace({f: sympy.Rational(str(f)) for f in p.atoms(sympy.Float)})
        g = g.xreplace({f: sympy.Rational(str(f)) for f in g.atoms(sympy.Float)})
        vp, vg = sympy.N(p, 30), sympy.N(g, 30)
        if not (vp.is_number and vg.is_number and vp.is_finite and vg.is_finite):
            return None
        gnum, pnum = parse_number(gold), parse_number(pred)
        interval = approx_interval(gnum) if gnum is not None else None
        if interval is not None:
            return _sympy_in(vp, interval)
        if pnum is not None and is_long(*pnum):
            interval = approx_interval(pnum)
            return interval is not None and _sympy_in(vg, interval)
        diff = sympy.N(p - g, 30)
        if all(_evalf_zero(part) for part in diff.as_real_imag()):
            return True
        if all(_evalf_zero(part) or getattr(part, "_prec", 0) >= _FULL_PREC for part in diff.as_real_imag()):
            # evalf reached full precision on a nonzero difference, so it is real however small
            # against the values' size: 2^{100}+1 is not 2^{100} (the tolerance below once said so)
            return False
        scale = max(abs(vp), abs(vg))
        return bool(abs(diff) <= scale * sympy.Rational(1, 10**20))
    except (TypeError, ValueError, ArithmeticError, AttributeError):
        return None


def _exact_values(parsed: Any) -> tuple[Any, bool] | None:
    """The sympy value math-verify parsed (an equation as lhs - rhs, flagged), with written decimals
    made the rationals they are and ``i`` the imaginary unit; None for anything else."""
    import sympy

    for item in parsed or ():
        if isinstance(item, sympy.Eq | sympy.Expr):
            is_eq = isinstance(item, sympy.Eq)
            e = item.lhs - item.rhs if is_eq else item
            e = e.xreplace({f: sympy.Rational(str(f)) for f in e.atoms(sympy.Float)})
            return e.subs(sympy.Symbol("i"), sympy.I), is_eq
    return None


def _full_nonzero(v: Any) -> bool:
    return not all(_evalf_zero(part) or getattr(part, "_prec", 0) < _FULL_PREC for part in v.as_real_imag())


def _differ_at_points(pred: str, gold: str) -> bool:
    """Whether two expressions in variables (or two equations, up to a constant factor) differ at
    one of three fixed rational points by a value evalf knows to full precision. math-verify
    compares them numerically with a tolerance, so x-3z=10^{-25} was x-3z=0 and a complex number
    plus 10^{-25} was the number; this finds such differences before it is asked."""
    import sympy

    vp, vg = _exact_values(_mv_parse(pred)), _exact_values(_mv_parse(gold))
    if vp is None or vg is None or vp[1] != vg[1]:
        return False
    (dp, is_eq), (dg, _) = vp, vg
    syms = sorted(dp.free_symbols | dg.free_symbols, key=str)
    points = [{x: sympy.Rational(3 + 2 * j + 5 * k, 7 + 2 * k) for j, x in enumerate(syms)} for k in range(3)]
    try:
        at = [(dp.subs(pt), dg.subs(pt)) for pt in points]
        if is_eq:
            # equations are equal up to a factor c: p(x_k) g(x_0) = p(x_0) g(x_k) at every point
            return any(_full_nonzero(sympy.N(a * at[0][1] - at[0][0] * b, 30)) for a, b in at[1:])
        return any(_full_nonzero(sympy.N(a - b, 30)) for a, b in at)
    except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
        return False


def symbolic_verdict(pred: str, gold: str) -> bool:
    """The verdict on two atoms that the cheap rules left open: constants exactly
    (``constant_verdict``), anything else with math-verify (strict, timeouts disabled: the caller
    bounds it), after an exact check at three points that can only prove them different."""
    from math_verify import verify  # imported lazily: sympy costs ~1 s and most answers never need it

    exact = constant_verdict(pred, gold)
    if exact is not None:
        return exact
    p, g = _mv_parse(pred), _mv_parse(gold)
    if not p or not g or _differ_at_points(pred, gold):
        return False
    return bool(verify(g, p, timeout_seconds=None, strict=True))
