"""Cheap numeric evaluation of single math atoms, used to settle comparisons before sympy.

What it does: ``NumEval`` is a complex-valued evaluator of a small LaTeX subset at three fixed test
points. It proves two atoms different (``surely_different``), lets only expressions that equal a
constant at every point reach sympy (``constant_at_points``), reads a constant expression's value
(``const_value``, compared with a rounded decimal by ``math_numeric.float_in``) and tells whether
an expression has a free variable (``has_free_variable``).

What it does not do: floats never prove two expressions *equal* (``math_equiv``'s exact comparison
does); no sympy or math-verify; no structure (lists, sets, intervals): it sees single atoms.
"""

from __future__ import annotations

import cmath
import math
import re
from fractions import Fraction

from bonbench.plugins.graders.math_numeric import parse_number


def const_value(atom: str) -> complex | None:
    """The value of a number or of a constant expression the cheap evaluator reads, else None."""
    num = parse_number(atom)
    if num is not None:
        return complex(num[0])
    if has_free_variable(atom):
        return None
    try:
        v = NumEval(atom, 0).value()
    except (NoEval, ArithmeticError, ValueError, OverflowError):
        return None
    return v if cmath.isfinite(v) else None


def constant_at_points(expr: str, value: Fraction) -> bool:
    """Whether an expression in variables evaluates to ``value`` at every test point (so that only
    an identity such as \\sec^2 x - \\tan^2 x = 1 can make them equal; sympy then decides)."""
    c = complex(value)
    try:
        for point in range(len(_POINT_SEEDS)):
            a = NumEval(expr, point).value()
            if not cmath.isfinite(a) or abs(a - c) > 1e-9 * max(1.0, abs(a), abs(c)):
                return False
    except (NoEval, ArithmeticError, ValueError, OverflowError):
        return False
    return True


def has_free_variable(expr: str) -> bool:
    """A letter outside any \\command, other than i (imaginary unit) and e, in an expression."""
    bare = re.sub(r"\\[a-zA-Z]+", "", expr)
    if "=" in bare or "<" in bare or ">" in bare:
        return False  # relations are left to math-verify
    return bool(re.search(r"[a-df-hj-zA-Z]", bare))


class NoEval(Exception):
    """The atom is outside the small LaTeX subset that NumEval understands."""


_FUNCS = {
    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan,
    "sec": lambda z: 1 / cmath.cos(z), "csc": lambda z: 1 / cmath.sin(z), "cot": lambda z: cmath.cos(z) / cmath.sin(z),
    "arcsin": cmath.asin, "arccos": cmath.acos, "arctan": cmath.atan,
    "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh,
    "ln": cmath.log, "log": cmath.log, "exp": cmath.exp,
}  # fmt: skip
_EVAL_POINTS: tuple[dict[str, complex], ...] = ({}, {}, {})  # filled lazily: one value per variable name per point
_POINT_SEEDS = (0.5772156649, 1.3247179572, -0.7390851332)


class NumEval:
    """Complex-valued evaluation of a LaTeX arithmetic subset, used only to prove two atoms
    unequal cheaply (numbers, + - * /, \\frac, \\sqrt, ^, \\pi, i, e, variables, implicit
    products, parentheses, \\sin \\cos \\tan \\ln \\log \\exp). Anything else raises NoEval."""

    def __init__(self, s: str, point: int) -> None:
        self.s, self.i, self.point = s, 0, point

    def value(self) -> complex:
        v = self.expr()
        if self.i != len(self.s):
            raise NoEval
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
                raise NoEval  # huge powers: leave them to sympy (under the grader's timeout)
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
                raise NoEval
            if p.imag or p.real != int(p.real) or p.real < 1:
                raise NoEval  # \sin^{-1} means arcsin
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
            raise NoEval
        self.i += 1
        v = self.expr()
        if self.peek() != "}":
            raise NoEval
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
                raise NoEval
            self.i += 1
            return v
        if c == "\\":
            m = re.compile(r"\\([a-zA-Z]+)").match(s, i)
            if not m:
                raise NoEval
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
                        raise NoEval
                    n = NumEval(s[self.i + 1 : end], self.point).value()
                    self.i = end + 1
                    return self.group() ** (1 / n)
                return cmath.sqrt(self.group())
            if name == "pi":
                return complex(math.pi)
            if name in _FUNCS:
                return self.function(name)
            raise NoEval
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
        raise NoEval


def surely_different(pred: str, gold: str) -> bool:
    """True when both atoms evaluate and differ clearly at every test point (so sympy would agree)."""
    try:
        for point in range(len(_POINT_SEEDS)):
            a = NumEval(pred, point).value()
            b = NumEval(gold, point).value()
            if not (cmath.isfinite(a) and cmath.isfinite(b)):
                return False
            if abs(a - b) <= 1e-3 * max(1.0, abs(a), abs(b)):
                return False
        return True
    except (NoEval, ArithmeticError, ValueError, OverflowError):
        return False
