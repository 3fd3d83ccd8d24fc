"""Tests of the math grader's version-4 canonical-form and equivalence rules (issue 37): upright
letters and names are mathematics, not units; an ellipsis is content; spaces between digits;
``,\\!`` thousands with a space; ``\\sqrt[n]x``; font wrappers and ``\\mathbb``; "and" in a list;
inequalities with a coefficient; array matrices; and the percent / decimal-comma conventions.
Every rule is tested both ways: the right answer accepted and near misses refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bonbench.plugins.graders.math_canonical import canonical_answer
from bonbench.plugins.graders.math_conventions import DEFAULT_CONVENTIONS, MathConventions
from bonbench.plugins.graders.math_equiv import equiv_canonical, is_equiv
from bonbench.plugins.graders.math_extract import boxed_contents

FRACTION = MathConventions(percent="fraction")
COMMA = MathConventions(decimal_comma=True)
ALL_CONVENTIONS = [DEFAULT_CONVENTIONS, FRACTION, COMMA, MathConventions(percent="fraction", decimal_comma=True)]


def _both_ways(pred: str, gold: str, verdict: bool, conventions: MathConventions = DEFAULT_CONVENTIONS) -> None:
    assert is_equiv(pred, gold, conventions) is verdict, (pred, gold)
    # grading the canonical forms gives the same verdict (MathGrader compares canonical forms)
    cp, cg = canonical_answer(pred, conventions), canonical_answer(gold, conventions)
    assert canonical_answer(cp, conventions) == cp and canonical_answer(cg, conventions) == cg
    assert is_equiv(cp, cg, conventions) is verdict, (cp, cg)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        # the false positive: \mathrm{e} was dropped as unit text, so the sign was all that was left
        ("1+\\frac{1}{\\mathrm{e}}", "1-\\frac{1}{\\mathrm{e}}", False),
        ("1+\\frac{1}{\\mathrm{e}}", "1+\\frac{1}{e}", True),
        ("\\frac{\\pi}{\\mathrm{e}}", "\\frac{\\pi}{2}", False),
        ("2\\mathrm{i}", "2i", True),
        ("2\\mathrm{i}", "2", False),
        ("3 \\mathrm{e}", "3", False),
        ("\\mathrm{e}^{2}", "e^2", True),
        ("\\frac{\\mathrm{d}y}{\\mathrm{d}x}", "\\frac{dy}{dx}", True),
        ("\\frac{\\text{e}}{4}", "\\frac{1}{4}", False),
        # upright names: kept as the name, or as the function's command
        ("\\operatorname{lcm}(4,6)", "\\mathrm{lcm}(4,6)", True),
        ("\\operatorname{arcsinh}(1)", "\\operatorname{arcsinh}(3)", False),
        ("\\mathrm{Re}(z)", "\\mathrm{Im}(z)", False),
        ("\\operatorname{sin} 2x", "\\sin 2x", True),
        ("\\operatorname{sin} 2x", "\\cos 2x", False),
        # units after a value, at the end of an item, still go
        ("5\\mathrm{~cm}", "5", True),
        ("5 \\mathrm{cm}^2", "5", True),
        ("7\\text{ cm}", "7", True),
        ("7\\text{ cm}", "8", False),
        ("6\\,\\mathrm{m}", "6", True),
        ("3\\text{ cm}, 4\\text{ cm}", "4, 3", True),
        ("12\\text{ min}", "12", True),
        # bare trailing words are units only after a value without variables, and not a short product
        ("x^2+2xy", "x^2+2", False),
        ("2\\pi rh", "2\\pi", False),
        ("\\frac{1}{2}bh", "\\frac{1}{2}", False),
        ("\\frac{1}{2} at^2", "\\frac{1}{2}", False),
        ("9 ab", "9", False),
        ("9 inches", "9", True),
        ("5\\pi square units", "5\\pi", True),
        ("\\frac{1}{7}\\triangle ABC", "\\frac{1}{7}\\triangle XYZ", False),
        ("2x cm", "2x", True),
        ("1+2i cm", "1+2i", True),
        ("x^2 + y abc", "x^2 + y", False),
        ("5 ABC", "5", False),
        ("7\\text{ dollars}x", "7", False),
        ("7\\text{ dollars}x", "7x", True),
        ("2\\mathrm{Re}(z)", "2", False),
        ("4 PM", "4", True),
        # a bare \circ is a degree sign only after a number; otherwise it composes
        ("f \\circ g", "fg", False),
        ("f \\circ g", "f\\circ g", True),
        ("30\\circ", "30", True),
    ],
)
def test_upright_letters_are_math_units_are_not(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("1, 2, 3, ...", "1, 2, 3", False),
        ("1, 2, 3, \\ldots", "1,2,3,...", True),
        ("1, 2, 3, \\cdots", "1, 2, 3, \\dots", True),
        ("2, 4, 8, …", "2, 4, 8, \\ldots", True),
        ("2, 4, 8, \\ldots.", "2, 4, 8, \\ldots", True),
        # a sequence with an ellipsis is ordered, unlike a bare list of solutions
        ("3, 2, 1, \\ldots", "1, 2, 3, \\ldots", False),
        ("1, 2, 3, \\ldots", "1, 2, \\ldots", False),
        ("1+2+\\cdots+n", "1+2+\\ldots+n", True),
        ("1+2+\\cdots+n", "n+3", False),
    ],
)
def test_an_ellipsis_is_content(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("4 4/9", "\\frac{40}{9}", True),
        ("4 4/9", "\\frac{44}{9}", False),
        ("4\\ 4/9", "\\frac{40}{9}", True),
        ("7\n1/2", "7.5", True),
        ("7\n1/2", "\\frac{71}{2}", False),
        ("4 \\frac{4}{9}", "\\frac{40}{9}", True),
        ("-2 1/3", "-\\frac{7}{3}", True),
        ("1 000 000", "1000000", True),
        ("12 345", "12345", True),
        ("1 000 000", "1000", False),
        ("2 3", "23", False),
        ("2 3", "2, 3", False),
        ("2 3", "2 3", True),
        ("2\\;3", "2 3", True),
        ("45^\\circ\\;135^\\circ", "45135", False),
        ("12 34", "1234", False),
        ("\\log_2 8", "3", True),
    ],
)
def test_spaces_between_digits(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("1,\\! 000", "1000", True),
        ("10,\\! 000", "10000", True),
        ("10,\\! 000", "10, 0", False),
        ("11,\\! 111,\\! 111,\\! 100", "11111111100", True),
        ("2,\\! 500", "25", False),
    ],
)
def test_thousands_bang_followed_by_a_space(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("\\sqrt[3]8", "2", True),
        ("\\sqrt[3] 8", "\\sqrt[3]{8}", True),
        ("\\sqrt[3]8", "\\sqrt{8}", False),
        ("\\sqrt[3]8", "3", False),
        ("\\sqrt[4]x", "\\sqrt[4]{x}", True),
        ("\\sqrt[4]x", "\\sqrt[3]{x}", False),
    ],
)
def test_indexed_root_shorthand(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        # letters in a font are the letters; \mathbb names a set and keeps its wrapper
        ("\\mathcal{B}", "B", True),
        ("\\mathcal{B}", "C", False),
        ("\\boldsymbol{v}", "v", True),
        ("\\bm{\\alpha}", "\\alpha", True),
        ("\\mathfrak{g}", "h", False),
        ("\\mathbb{Z}", "Z", False),
        ("\\mathbb Z", "\\mathbb{Z}", True),
        ("\\mathbb{R}", "(-\\infty,\\infty)", True),
        ("x \\in \\mathbb{R}", "(-\\infty, \\infty)", True),
        ("\\mathbb{R}", "[0,\\infty)", False),
        ("\\mathbb{R}", "R", False),
    ],
)
def test_font_wrappers_and_number_sets(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("1, 2, and 3", "3, 2, 1", True),
        ("1, 2 and 3", "1,2,3", True),
        ("-2 \\text{ and } 3", "3, -2", True),
        ("6, 8\\text{, and }10", "6,8,10", True),
        ("1, 2, and 3", "1, 2", False),
        ("1, 2, and 3", "1, 2, 4", False),
    ],
)
def test_and_separates_list_items(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("-x > -1", "x < 1", True),
        ("-x > -1", "x > 1", False),
        ("-x > -1", "x \\le 1", False),
        ("2x \\le 6", "x \\le 3", True),
        ("2x \\le 6", "x \\le 6", False),
        ("-3x \\ge 6", "x \\le -2", True),
        ("-3x \\ge 6", "x \\ge -2", False),
        ("2 < 2x \\le 8", "(1, 4]", True),
        ("-4 < -x < 2", "(-2, 4)", True),
        ("-4 < -x < 2", "(-4, 2)", False),
        ("\\frac{1}{2}x > 3", "(6, \\infty)", True),
        ("-x < \\sqrt{2}", "x > -\\sqrt{2}", True),
        ("-x < \\sqrt{2}", "x < -\\sqrt{2}", False),
        ("3x < 1", "x < \\frac{1}{3}", True),
    ],
)
def test_inequality_with_a_coefficient(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


def test_inequality_coefficient_needs_a_single_variable_term() -> None:
    # a second variable or a sum on the bound is not rearranged: it stays a relation, not an interval
    assert canonical_answer("-x < 1-\\sqrt{2}") == "-x<1-\\sqrt{2}"
    assert canonical_answer("2x < 3y") == "2x<3y"
    assert canonical_answer("x > 2y") == "(2y,\\infty)"


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
        ("\\left(\\begin{array}{c|c}1&2\\\\3&4\\end{array}\\right)", "[1,2;3,4]", True),
        ("\\begin{array}{cc}1&2\\\\3&4\\end{array}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", True),
        ("\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]", "\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", False),
        ("\\left[\\begin{array}{ccc}1&2&0\\\\3&4&0\\end{array}\\right]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", False),
        ("\\left[\\begin{array}{c}1\\\\2\\end{array}\\right]", "(1,2)", True),
        ("\\left[\\begin{array}{c}1\\\\2\\end{array}\\right]", "(2,1)", False),
        ("\\left[\\begin{matrix}5&6\\end{matrix}\\right]", "\\begin{pmatrix}5&6\\end{pmatrix}", True),
    ],
)
def test_array_matrices(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict, conventions",
    [
        # percent="number" (default): the sign is a unit
        ("10\\%", "10", True, DEFAULT_CONVENTIONS),
        ("10\\%", "\\frac{1}{10}", False, DEFAULT_CONVENTIONS),
        # percent="fraction": 10% is 1/10 on both sides, and no longer 10
        ("10\\%", "\\frac{1}{10}", True, FRACTION),
        ("10\\%", "0.1", True, FRACTION),
        ("10\\%", "10", False, FRACTION),
        ("10 percent", "0.1", True, FRACTION),
        ("10\\text{ percent}", "10\\%", True, FRACTION),
        ("12.5\\%", "\\frac{1}{8}", True, FRACTION),
        ("7.2\\%", "0.072", True, FRACTION),
        ("7.2\\%", "0.72", False, FRACTION),
        ("-5\\%", "-\\frac{1}{20}", True, FRACTION),
        ("5\\%, 20\\%", "\\frac{1}{5}, 0.05", True, FRACTION),
        ("1,000\\%", "10", True, FRACTION),
        # a rounded percent keeps its interval, scaled: 33.33% stands for [0.33325, 0.33335]
        ("\\frac{1}{3}", "33.33\\%", True, FRACTION),
        ("0.3334", "33.33\\%", False, FRACTION),
        # decimal_comma=True: a comma between digits is a decimal mark; a list needs a space or ";"
        ("3,5", "3.5", True, COMMA),
        ("3{,}5", "\\frac{7}{2}", True, COMMA),
        ("3,5", "3, 5", False, COMMA),
        ("3;5", "5, 3", True, COMMA),
        ("(1,5; 2,5)", "(1.5, 2.5)", True, COMMA),
        ("\\{1, 2\\}", "\\{2, 1\\}", True, COMMA),
        ("7,251", "7251", False, COMMA),
        ("2 3", "23", False, COMMA),
        ("10\\;\\text{cm}", "10", True, COMMA),
        ("25,\\!000", "25000", True, COMMA),
        # default: the comma separates items or thousands
        ("3,5", "3.5", False, DEFAULT_CONVENTIONS),
        ("3,5", "5, 3", True, DEFAULT_CONVENTIONS),
    ],
)
def test_conventions(pred: str, gold: str, verdict: bool, conventions: MathConventions) -> None:
    _both_ways(pred, gold, verdict, conventions)


def test_canonical_forms_depend_on_the_conventions() -> None:
    assert canonical_answer("10\\%") == "10"
    assert canonical_answer("10\\%", FRACTION) == "\\frac{1}{10}"
    assert canonical_answer("33.33\\%", FRACTION) == "0.3333"
    assert canonical_answer("\\frac{1}{3}\\%", FRACTION) == "\\frac{1}{3}\\%"  # not a literal: kept as written
    assert canonical_answer("3,5", COMMA) == "\\frac{7}{2}"
    # a list rendered under the decimal comma keeps a space after each comma, so it reads back as a list
    assert canonical_answer("(1; 2)", COMMA) == "(1, 2)"
    assert canonical_answer("(1; 2)") == "1;2"  # by default a semicolon is no separator


def test_v4_rules_are_decided_in_process() -> None:
    # none of these needs sympy: MathGrader settles them without a worker
    for pred, gold, verdict in [
        ("1+\\frac{1}{\\mathrm{e}}", "1-\\frac{1}{\\mathrm{e}}", False),
        ("1, 2, 3, ...", "1, 2, 3", False),
        ("4 4/9", "\\frac{40}{9}", True),
        ("2 3", "23", False),
        ("1,\\! 000", "1000", True),
        ("-x > -1", "x < 1", True),
        ("1+2+\\cdots+n", "n+3", False),
    ]:
        assert equiv_canonical(canonical_answer(pred), canonical_answer(gold), fast_only=True) is verdict, pred


@pytest.mark.parametrize("conventions", ALL_CONVENTIONS, ids=lambda c: f"{c.percent}-{c.decimal_comma}")
def test_gold_canonical_idempotent_under_each_convention(data_dir: Path, conventions: MathConventions) -> None:
    rows = [json.loads(line) for line in (data_dir / "math" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    bad = []
    for r in rows:
        once = canonical_answer(r["answer"], conventions)
        if canonical_answer(once, conventions) != once:
            bad.append((r["answer"], once))
    assert bad == []


@pytest.mark.parametrize("conventions", [FRACTION, COMMA], ids=["percent-fraction", "decimal-comma"])
def test_gold_self_agreement_under_each_option(data_dir: Path, conventions: MathConventions) -> None:
    # a solution's boxed answer and the gold answer are written alike: every option must read them alike
    # (the default conventions: test_math_grader.py::test_gold_self_agreement). The dataset's answer is the
    # solution's last box, also where the solution ends with several (read as a list by extract_answer)
    rows = [json.loads(line) for line in (data_dir / "math" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    bad = [r["unique_id"] for r in rows if not is_equiv(boxed_contents(r["solution"])[-1], r["answer"], conventions)]
    assert bad == []


def test_conventions_keyword_defaults_to_bonbench() -> None:
    assert canonical_answer("10\\%") == canonical_answer("10\\%", conventions=DEFAULT_CONVENTIONS)
    assert is_equiv("10\\%", "10") and not is_equiv("10\\%", "10", conventions=FRACTION)


def test_new_rules_canonicalise_degenerate_answers_in_linear_time() -> None:
    """Long runs of what the version-4 rules look for (trailing words ending in a non-word, spaces
    between digits, kept-apart marks, ellipses, unit groups) in a child with a deadline: a rule that
    retries from every position (quadratic) or backtracks (exponential) fails here instead of
    hanging the suite; the code takes well under a second for all of them."""
    import subprocess
    import sys

    code = (
        "from bonbench.plugins.graders.math_canonical import canonical_answer\n"
        "from bonbench.plugins.graders.math_conventions import MathConventions\n"
        "both = MathConventions(percent='fraction', decimal_comma=True)\n"
        "for x in ['2 ' + 'abc ' * 20000 + '=', '2 ' + 'abc ' * 20000, '1\\\\;' + ' ' * 20000 + 'x',\n"
        "          '1 ' * 20000 + 'x', '. ' * 20000 + 'x', '5' + '\\\\text{ cm}' * 5000 + '(',\n"
        "          '1 000' * 5000 + '.', '1' * 20000 + '\\\\%']:\n"
        "    canonical_answer(x)\n"
        "    canonical_answer(x, both)\n"
        "print(canonical_answer('2 ' + 'abc ' * 20000))\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr[-500:]
    assert got.stdout.strip() == "2"  # the words after the number are dropped as units


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("90\\text{square\nunits}", "90\\text{ square\nunits}", True),  # a line break inside unit text is a space
        ("90\\text{square\nunits}", "91", False),
        ("4:40\\text{p.m.}", "\\text{4:30 p.m.}", False),  # version 3 dropped "p.m." and then the digits' difference
        ("4:30\\text{p.m.}", "\\text{4:30 p.m.}", True),
    ],
)
def test_unit_text_across_lines_and_times(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)


@pytest.mark.parametrize(
    "pred, gold, verdict",
    [
        ("\\angle CBA", "\\angle ABC", True),  # the same angle read from the other side
        ("\\angle ACB", "\\angle ABC", False),  # another vertex (math-verify: a commutative product)
        ("\\angle{ABC}", "\\angle ABC", True),
        ("\\varnothing", "\\emptyset", True),
        ("\\{\\}", "\\emptyset", True),
        ("\\{0\\}", "\\emptyset", False),
        ("0", "\\emptyset", False),
    ],
)
def test_angles_by_vertex_and_one_empty_set(pred: str, gold: str, verdict: bool) -> None:
    _both_ways(pred, gold, verdict)
