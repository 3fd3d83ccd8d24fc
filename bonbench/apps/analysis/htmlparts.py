"""The pieces every analysis page shares: the jinja2 templates that write its markup, tables,
embedded images, number formats, and report.json's conversion of numpy values.

What it does: ``render`` (a template of ``templates/``, shipped as package data, with autoescaping
on: every value a template shows is escaped, so a model name, problem id or answer holding
``<script>`` shows as text), ``page`` (a standalone page with the shared CSS), ``Table`` / ``Styled``
(a table and a cell with a CSS class, drawn by the ``table`` macro of ``templates/macros.html.j2``),
``figure`` (a PNG embedded as base64, so pages are self-contained), ``fmt_value`` / ``metric_cell``
(numbers and CIs, a dash where there is none), ``powers_of_two`` (the k columns of tables) and
``jsonable``.

What it does not do: decide what a page shows (``html``, ``sections``, ``sweep``, ``fitreport``,
``leaderboard`` do, each with its template) or write files. It imports no other analysis module, so
every page module can import it without forming a cycle.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup


@dataclass(frozen=True)
class Styled:
    """A table cell with a CSS class (``up`` / ``down``); newlines in its text become line breaks."""

    text: str
    css: str = ""


@dataclass(frozen=True)
class Table:
    """A table: a header and rows of cells, each a value shown as text or a ``Styled`` cell."""

    header: Sequence[str]
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class Figure:
    """A PNG embedded in the page: its alt text and its bytes as base64."""

    alt: str
    data: str


def figure(path: Path, alt: str) -> Figure:
    """The PNG at ``path`` inline (base64), so the page needs no other file."""
    return Figure(alt, base64.b64encode(Path(path).read_bytes()).decode("ascii"))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates under ``templates/`` (package data), autoescaped, and strict: a name a template
    uses that its caller did not pass is an error, never an empty string."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("bonbench.apps.analysis", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.tests["styled"] = lambda value: isinstance(value, Styled)
    return env


def render(template: str, **context: Any) -> Markup:
    """``template`` rendered with ``context``: markup that another template includes as it is."""
    return Markup(environment().get_template(template).render(**context))


def page(title: str, body: Markup) -> str:
    """A standalone HTML page around ``body``."""
    return render("page.html.j2", title=title, body=body) + "\n"


def fmt_value(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` decimals; a dash for None, NaN or infinity."""
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def powers_of_two(upto: int) -> list[int]:
    """1, 2, 4, ... up to ``upto`` inclusive (empty below 1)."""
    out, k = [], 1
    while k <= upto:
        out.append(k)
        k *= 2
    return out


def jsonable(x: Any) -> Any:
    """``x`` with numpy arrays and scalars made plain JSON values (dict keys strings, NaN/inf None)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x



def metric_cell(m: Any) -> str:
    """A metric's value and its 95% CI in brackets; the value alone where the CI is not finite."""
    if m is None:
        return "—"
    if not all(map(math.isfinite, m.ci95)):
        return fmt_value(m.value)
    return f"{fmt_value(m.value)} [{fmt_value(m.ci95[0])}, {fmt_value(m.ci95[1])}]"
