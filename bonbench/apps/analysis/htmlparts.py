"""The small HTML pieces every analysis page shares: the page frame, tables, embedded images, number
formats, and report.json's conversion of numpy values.

What it does: ``page`` (a standalone page with the shared CSS), ``table_html``, ``img_tag`` (a PNG
embedded as base64, so pages are self-contained), ``fmt_value`` / ``metric_cell`` (numbers and CIs,
a dash where there is none), ``powers_of_two`` (the k columns of tables) and ``jsonable``.

What it does not do: decide what a page shows (``html``, ``sections``, ``sweep``, ``fitreport``,
``leaderboard`` do) or write files. It imports no other analysis module, so every page module can
import it without forming a cycle.
"""

from __future__ import annotations

import base64
import html as html_lib
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
td.up { background: #e6f4e6; } td.down { background: #fbe7e7; }
img { max-width: 100%; } .note { color: #555; font-size: 0.9em; }
section { margin-bottom: 2.5em; border-top: 1px solid #ddd; }
"""


def page(title: str, body: str) -> str:
    """A standalone HTML page around ``body``."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html_lib.escape(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")


def table_html(header: Sequence[str], rows: Sequence[Sequence[Any]], raw: bool = False) -> str:
    """An HTML table. Cells are escaped text, or with ``raw=True`` ``(html, css_class)`` pairs."""
    out = ["<table><thead><tr>" + "".join(f"<th>{html_lib.escape(str(h))}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for cell in row:
            if raw:
                content, cls = cell
                cells.append(f"<td class=\"{cls}\">{content}</td>" if cls else f"<td>{content}</td>")
            else:
                cells.append(f"<td>{html_lib.escape(str(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def img_tag(path: Path, alt: str) -> str:
    """The PNG at ``path`` as an ``<img>`` with its bytes inline (base64), so the page needs no other file."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<p><img alt=\"{html_lib.escape(alt)}\" src=\"data:image/png;base64,{data}\"></p>"


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
