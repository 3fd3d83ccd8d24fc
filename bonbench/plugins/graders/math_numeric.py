"""Numbers and cheap numeric evaluation for the math grader.

What it does:

* ``_parse_number`` reads a number literal exactly (integer, decimal, ``\\frac{p}{q}``, ``p/q``,
  mixed number, repeating decimal ``0.\\overline{6}``, scientific notation ``2.5e-4`` /
  ``2.5\\times10^{-4}``) with the count of decimal places it is written with;
  ``_render_number`` writes its canonical form.
* The precision model: which decimals stand for rounded reals (``_is_long``, ``_looks_rounded``),
  the interval each stands for (``_approx_interval``: set by its last written digit, so relative
  to its value, never an absolute tolerance) and the number-vs-number verdict ``_num_equiv``.
* ``_NumEval``: a complex-valued evaluator of a small LaTeX subset at three fixed test points.
  It proves two atoms different (``_surely_different``), lets only expressions that equal a
  constant at every point reach sympy (``_constant_at_points``), and evaluates a constant
  expression against a rounded decimal (``_const_value``, ``_float_in``).

What it does not do: no sympy or math-verify, no structure (lists, sets, intervals): it sees
single atoms. Floats never prove two expressions *equal*; that is ``math_equiv``'s exact
comparison.
"""

from __future__ import annotations

import cmath
import functools
import math
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
def _parse_number(s: str) -> tuple[Fraction, int] | None:
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


def _is_long(val: Fraction, places: int) -> bool:
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
        and not _is_long(val, places)
        and _sig_digits(val, places) >= 2
        and (places >= _LONG_DECIMAL or val.denominator > 10 ** (places - 1))
    )


def _approx_interval(num: tuple[Fraction, int]) -> tuple[Fraction, Fraction] | None:
    """The reals a decimal written as a rounded value stands for; None for an exact number.

    Its tolerance is a unit in its last written digit, so it is relative to the value and set by
    the precision it is written with (never an absolute tolerance: 0.000002 is not 0.000001).
    A short rounded decimal (65.192) stands for [x - u/2, x + u/2]; a long one (``_is_long``)
    may also be truncated, so it reaches one unit further from zero: [x - u/2, x + u)
    for x >= 0, mirrored for x < 0."""
    val, places = num
    unit = Fraction(1, 10**places)
    if _is_long(val, places):
        return (val - unit / 2, val + unit) if val >= 0 else (val - unit, val + unit / 2)
    if _looks_rounded(val, places):
        return val - unit / 2, val + unit / 2
    return None


def _render_number(val: Fraction, places: int) -> str:
    if _approx_interval((val, places)) is not None:
        # kept as a decimal: the written precision is what a rounded gold is compared at
        sign = "-" if val < 0 else ""
        whole, frac = divmod(abs(val), 1)
        digits = str(int(frac * 10**places)).rjust(places, "0")
        return f"{sign}{int(whole)}.{digits}"
    if val.denominator == 1:
        return str(val.numerator)
    sign = "-" if val < 0 else ""
    return f"{sign}\\frac{{{abs(val.numerator)}}}{{{val.denominator}}}"


def _num_equiv(pred: tuple[Fraction, int], gold: tuple[Fraction, int]) -> bool:
    """Two numbers: equal values; else a gold written as a rounded decimal contains the predicted
    value (only the gold side is rounded: a less precise answer does not match it); else a long
    predicted decimal (0.333333) contains an exact gold (1/3)."""
    if pred[0] == gold[0]:
        return True
    interval = _approx_interval(gold)
    if interval is not None:
        return interval[0] <= pred[0] <= interval[1]
    if _is_long(*pred):
        interval = _approx_interval(pred)
        return interval is not None and interval[0] <= gold[0] <= interval[1]
    return False


def _const_value(atom: str) -> complex | None:
    """The value of a number or of a constant expression the cheap evaluator reads, else None."""
    num = _parse_number(atom)
    if num is not None:
        return complex(num[0])
    if _has_free_variable(atom):
        return None
    try:
        v = _NumEval(atom, 0).value()
    except (_NoEval, ArithmeticError, ValueError, OverflowError):
        return None
    return v if cmath.isfinite(v) else None


def _float_in(v: complex, interval: tuple[Fraction, Fraction]) -> bool | None:
    """Whether a float value lies in a decimal's interval; None when floats cannot tell (an
    interval narrower than ~1e-12 of the value, i.e. a decimal with more than ~12 digits)."""
    lo, hi = float(interval[0]), float(interval[1])
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi)):
        return None
    if abs(v.imag) > 1e-12 * max(1.0, abs(v.real)):
        return False
    slack = (hi - lo) * 1e-9  # float rounding of the evaluation, far below the interval's width
    return lo - slack <= v.real <= hi + slack


def _constant_at_points(expr: str, value: Fraction) -> bool:
    """Whether an expression in variables evaluates to ``value`` at every test point (so that only
    an identity such as \\sec^2 x - \\tan^2 x = 1 can make them equal; sympy then decides)."""
    c = complex(value)
    try:
        for point in range(len(_POINT_SEEDS)):
            a = _NumEval(expr, point).value()
            if not cmath.isfinite(a) or abs(a - c) > 1e-9 * max(1.0, abs(a), abs(c)):
                return False
    except (_NoEval, ArithmeticError, ValueError, OverflowError):
        return False
    return True


def _has_free_variable(expr: str) -> bool:
    """A letter outside any \\command, other than i (imaginary unit) and e, in an expression."""
    bare = re.sub(r"\\[a-zA-Z]+", "", expr)
    if "=" in bare or "<" in bare or ">" in bare:
        return False  # relations are left to math-verify
    return bool(re.search(r"[a-df-hj-zA-Z]", bare))


class _NoEval(Exception):
    """The atom is outside the small LaTeX subset that _NumEval understands."""


_FUNCS = {
    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan,
    "sec": lambda z: 1 / cmath.cos(z), "csc": lambda z: 1 / cmath.sin(z), "cot": lambda z: cmath.cos(z) / cmath.sin(z),
    "arcsin": cmath.asin, "arccos": cmath.acos, "arctan": cmath.atan,
    "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh,
    "ln": cmath.log, "log": cmath.log, "exp": cmath.exp,
}  # fmt: skip
_EVAL_POINTS = ({}, {}, {})  # filled lazily: one value per variable name per point
_POINT_SEEDS = (0.5772156649, 1.3247179572, -0.7390851332)


class _NumEval:
    """Complex-valued evaluation of a LaTeX arithmetic subset, used only to prove two atoms
    unequal cheaply (numbers, + - * /, \\frac, \\sqrt, ^, \\pi, i, e, variables, implicit
    products, parentheses, \\sin \\cos \\tan \\ln \\log \\exp). Anything else raises _NoEval."""

    def __init__(self, s: str, point: int) -> None:
        self.s, self.i, self.point = s, 0, point

    def value(self) -> complex:
        v = self.expr()
        if self.i != len(self.s):
            raise _NoEval
        return v

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def expr(self) -> complex:
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.s[self.i]
            self.i += 1
            w = self.term()
            v = v + w if op == "+" else v - w
        return v

    def term(self) -> complex:
        v = self.unary()
        while True:
            c = self.peek()
            if c == "*" or c == "/":
                self.i += 1
                w = self.unary()
                v = v * w if c == "*" else v / w
            elif self.s.startswith("\\cdot", self.i) or self.s.startswith("\\times", self.i):
                self.i += 5 if self.s.startswith("\\cdot", self.i) else 6
                v = v * self.unary()
            elif c and (c.isalpha() or c in "(\\{" or c.isdigit()):
                v = v * self.power()  # implicit product: 2x, 3\sqrt{2}, (x+1)(x-1)
            else:
                return v

    def unary(self) -> complex:
        if self.peek() == "-":
            self.i += 1
            return -self.unary()
        if self.peek() == "+":
            self.i += 1
            return self.unary()
        return self.power()

    def power(self) -> complex:
        base = self.primary()
        if self.peek() == "^":
            self.i += 1
            if self.peek() == "{":
                exp = self.group()
            elif self.peek().isdigit():
                exp = complex(int(self.s[self.i]))
                self.i += 1
            else:
                exp = self.primary()
            if abs(exp) > 1e3 or abs(base) > 1e12:
                raise _NoEval  # huge powers: leave them to sympy (under the grader's timeout)
            if exp.imag == 0 and exp.real == int(exp.real):
                return base ** int(exp.real)
            return base**exp
        return base

    def function(self, name: str) -> complex:
        """``\\sin x``, ``\\sin(x)^2``, ``\\sec^2 x``, ``\\cos 2\\pi``: the LaTeX reading of a function."""
        power = 1
        if self.peek() == "^":  # \sec^2 x = (\sec x)^2
            self.i += 1
            if self.peek() == "{":
                p = self.group()
            elif self.peek().isdigit():
                p = complex(int(self.s[self.i]))
                self.i += 1
            else:
                raise _NoEval
            if p.imag or p.real != int(p.real) or p.real < 1:
                raise _NoEval  # \sin^{-1} means arcsin
            power = int(p.real)
        if self.peek() in ("(", "{"):
            arg = self.primary()  # \sin(x)^2: the power applies to the value (power() sees it)
        else:
            # an argument without brackets runs over juxtaposed factors (\sin 2x, \cos 2\pi) up to
            # an operator or the next function (\sin x\cos x)
            arg = self.power()
            while True:
                c = self.peek()
                if c.isalnum():
                    arg = arg * self.power()
                    continue
                m = re.compile(r"\\([a-zA-Z]+)").match(self.s, self.i)
                if m and m.group(1) not in _FUNCS and m.group(1) not in ("cdot", "times"):
                    arg = arg * self.power()
                    continue
                break
        return _FUNCS[name](arg) ** power

    def group(self) -> complex:
        if self.peek() != "{":
            raise _NoEval
        self.i += 1
        v = self.expr()
        if self.peek() != "}":
            raise _NoEval
        self.i += 1
        return v

    def primary(self) -> complex:
        s, i = self.s, self.i
        c = self.peek()
        m = re.compile(r"\d+(?:\.\d+)?|\.\d+").match(s, i)
        if m:
            self.i = m.end()
            return complex(float(m.group()))
        if c == "{":
            return self.group()
        if c == "(":
            self.i += 1
            v = self.expr()
            if self.peek() != ")":
                raise _NoEval
            self.i += 1
            return v
        if c == "\\":
            m = re.compile(r"\\([a-zA-Z]+)").match(s, i)
            if not m:
                raise _NoEval
            name = m.group(1)
            self.i = m.end()
            while self.peek() == " ":  # canonical forms keep the space in "\pi r", "\sin x"
                self.i += 1
            if name == "frac":
                num = self.group()
                return num / self.group()
            if name == "sqrt":
                if self.peek() == "[":
                    end = s.find("]", self.i)
                    if end < 0:
                        raise _NoEval
                    n = _NumEval(s[self.i + 1 : end], self.point).value()
                    self.i = end + 1
                    return self.group() ** (1 / n)
                return cmath.sqrt(self.group())
            if name == "pi":
                return complex(math.pi)
            if name in _FUNCS:
                return self.function(name)
            raise _NoEval
        if c.isalpha():
            self.i += 1
            if c == "i":
                return 1j
            if c == "e":
                return complex(math.e)
            values = _EVAL_POINTS[self.point]
            if c not in values:
                values[c] = complex(_POINT_SEEDS[self.point] + 0.1 * (ord(c) % 17), 0.05 * (ord(c) % 5))
            return values[c]
        raise _NoEval


def _surely_different(pred: str, gold: str) -> bool:
    """True when both atoms evaluate and differ clearly at every test point (so sympy would agree)."""
    try:
        for point in range(len(_POINT_SEEDS)):
            a = _NumEval(pred, point).value()
            b = _NumEval(gold, point).value()
            if not (cmath.isfinite(a) and cmath.isfinite(b)):
                return False
            if abs(a - b) <= 1e-3 * max(1.0, abs(a), abs(b)):
                return False
        return True
    except (_NoEval, ArithmeticError, ValueError, OverflowError):
        return False
