"""Number literals and the precision model for the math grader.

What it does:

* ``parse_number`` reads a number literal exactly (integer, decimal, ``\\frac{p}{q}``, ``p/q``,
  mixed number, repeating decimal ``0.\\overline{6}``, scientific notation ``2.5e-4`` /
  ``2.5\\times10^{-4}``) with the count of decimal places it is written with;
  ``render_number`` writes its canonical form.
* The precision model: which decimals stand for rounded reals (``is_long``, ``_looks_rounded``),
  the interval each stands for (``approx_interval``: set by its last written digit, so relative
  to its value, never an absolute tolerance), the number-vs-number verdict ``num_equiv`` and
  whether a float value lies in such an interval (``float_in``).

What it does not do: no expression evaluation (``math_numeval``), no sympy or math-verify, no
structure (lists, sets, intervals): it sees single atoms. Floats never prove two expressions
*equal*; that is ``math_equiv``'s exact comparison.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

_NUM_INT = re.compile(r"[+-]?\d+")
_NUM_DEC = re.compile(r"[+-]?(\d+\.\d*|\.\d+)")
_NUM_SLASH = re.compile(r"([+-]?)(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)")
_NUM_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d+(?:\.\d+)?)\}\{([+-]?\d+(?:\.\d+)?)\}")
_NUM_MIXED = re.compile(r"([+-]?)(\d+)\\frac\{(\d+)\}\{(\d+)\}")

# a decimal with at least this many places and significant digits is a rounded real, not a rational
_LONG_DECIMAL = 6

# 0.\overline{6}, 1.2\overline{34} (also \overline6): a repeating decimal, an exact rational
_NUM_REPEAT = re.compile(r"([+-]?)(\d*)\.(\d*)\\overline(?:\{(\d+)\}|(\d))")

# 2.5e-4, 1E6, 2.5\times10^{-4}, 3\cdot10^8: scientific notation, an exact decimal
_NUM_SCI = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+)|(?:\\times|\\cdot)10\^(?:\{([+-]?\d+)\}|(\d)))"
)
_MAX_EXP = 100


@functools.lru_cache(maxsize=100_000)
def parse_number(s: str) -> tuple[Fraction, int] | None:
    """An exact number and its count of decimal places (0 for integers, fractions, repeating
    decimals; for scientific notation the places of its plain decimal form: 2.5e-4 has 5).
    Cached: the equivalence rules ask for the same atoms many times (the result is immutable)."""
    try:
        if _NUM_INT.fullmatch(s):
            return Fraction(int(s)), 0
        if _NUM_DEC.fullmatch(s):
            places = len(s.split(".")[1].rstrip("0"))
            return Fraction(s if not s.endswith(".") else s[:-1]), places
        m = _NUM_FRAC.fullmatch(s) or _NUM_SLASH.fullmatch(s)
        if m:
            den = Fraction(m.group(3))
            if den == 0:
                return None
            val = Fraction(m.group(2)) / den
            return (-val if m.group(1) == "-" else val), 0
        m = _NUM_MIXED.fullmatch(s)
        if m and int(m.group(4)) != 0:
            val = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
            return (-val if m.group(1) == "-" else val), 0
        m = _NUM_REPEAT.fullmatch(s)
        if m:
            # 1.2\overline{34} = 1 + (2 + 34/99) / 10: exact, so it compares as a fraction
            whole, fixed, period = m.group(2) or "0", m.group(3), m.group(4) or m.group(5)
            val = int(whole) + (int(fixed or "0") + Fraction(int(period), 10 ** len(period) - 1)) / 10 ** len(fixed)
            return (-val if m.group(1) == "-" else val), 0
        m = _NUM_SCI.fullmatch(s)
        if m:
            mantissa, exp = m.group(2), int(m.group(3) or m.group(4) or m.group(5))
            if abs(exp) > _MAX_EXP:
                return None  # left to the symbolic comparison, which has a timeout
            mant_places = len(mantissa.split(".")[1].rstrip("0")) if "." in mantissa else 0
            val = Fraction(mantissa if not mantissa.endswith(".") else mantissa[:-1]) * Fraction(10) ** exp
            return (-val if m.group(1) == "-" else val), max(0, mant_places - exp)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _sig_digits(val: Fraction, places: int) -> int:
    """Significant digits of ``val`` written with ``places`` decimal places (0.0000672: 3)."""
    scaled = abs(val) * 10**places
    return len(str(int(scaled))) if scaled >= 1 else 0


def is_long(val: Fraction, places: int) -> bool:
    """A decimal with >= 6 places and >= 6 significant digits stands for a rounded or truncated
    real (0.333333). Places alone would make 0.0000001 "long" and put it within a unit of 0;
    significant digits alone would make a money value such as 9681.72 "long" and let the
    truncation allowance accept 9681.73."""
    return places >= _LONG_DECIMAL and _sig_digits(val, places) >= _LONG_DECIMAL


def _looks_rounded(val: Fraction, places: int) -> bool:
    """A decimal that is not long, with 2+ places and 2+ significant digits, whose value is not a
    simple fraction: 65.192 (= 8149/125) and 0.36 (= 9/25) look rounded, 0.25 (= 1/4) and 0.375
    (= 3/8) look exact (denominator <= 10^(places-1)). A decimal with >= 6 places but few
    significant digits (0.000992) is a rounded value at its own precision. One significant digit
    (0.01, 0.000001) is taken as exact: half a unit of its last digit would be half its value."""
    return (
        places >= 2
        and not is_long(val, places)
        and _sig_digits(val, places) >= 2
        and (places >= _LONG_DECIMAL or val.denominator > 10 ** (places - 1))
    )


def approx_interval(num: tuple[Fraction, int]) -> tuple[Fraction, Fraction] | None:
    """The reals a decimal written as a rounded value stands for; None for an exact number.

    Its tolerance is a unit in its last written digit, so it is relative to the value and set by
    the precision it is written with (never an absolute tolerance: 0.000002 is not 0.000001).
    A short rounded decimal (65.192) stands for [x - u/2, x + u/2]; a long one (``is_long``)
    may also be truncated, so it reaches one unit further from zero: [x - u/2, x + u)
    for x >= 0, mirrored for x < 0."""
    val, places = num
    unit = Fraction(1, 10**places)
    if is_long(val, places):
        return (val - unit / 2, val + unit) if val >= 0 else (val - unit, val + unit / 2)
    if _looks_rounded(val, places):
        return val - unit / 2, val + unit / 2
    return None


def render_number(val: Fraction, places: int) -> str:
    """Canonical text of a parsed number: a long (rounded) decimal keeps its written places, an
    integer is its digits, any other rational ``\\frac{p}{q}`` in lowest terms."""
    if approx_interval((val, places)) is not None:
        # kept as a decimal: the written precision is what a rounded gold is compared at
        sign = "-" if val < 0 else ""
        whole, frac = divmod(abs(val), 1)
        digits = str(int(frac * 10**places)).rjust(places, "0")
        return f"{sign}{int(whole)}.{digits}"
    if val.denominator == 1:
        return str(val.numerator)
    sign = "-" if val < 0 else ""
    return f"{sign}\\frac{{{abs(val.numerator)}}}{{{val.denominator}}}"


def num_equiv(pred: tuple[Fraction, int], gold: tuple[Fraction, int]) -> bool:
    """Two numbers: equal values; else a gold written as a rounded decimal contains the predicted
    value (only the gold side is rounded: a less precise answer does not match it); else a long
    predicted decimal (0.333333) contains an exact gold (1/3)."""
    if pred[0] == gold[0]:
        return True
    interval = approx_interval(gold)
    if interval is not None:
        return interval[0] <= pred[0] <= interval[1]
    if is_long(*pred):
        interval = approx_interval(pred)
        return interval is not None and interval[0] <= gold[0] <= interval[1]
    return False


def float_in(v: complex, interval: tuple[Fraction, Fraction]) -> bool | None:
    """Whether a float value lies in a decimal's interval; None when floats cannot tell (an
    interval narrower than ~1e-12 of the value, i.e. a decimal with more than ~12 digits)."""
    lo, hi = float(interval[0]), float(interval[1])
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi)):
        return None
    if abs(v.imag) > 1e-12 * max(1.0, abs(v.real)):
        return False
    slack = (hi - lo) * 1e-9  # float rounding of the evaluation, far below the interval's width
    return lo - slack <= v.real <= hi + slack
