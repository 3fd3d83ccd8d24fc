"""report.html and leaderboard.html come from jinja2 templates with autoescaping (issue 29, point 5):
a model name, task, problem id, verifier, checkpoint setting or note holding ``<script>`` shows as
text, never as markup, in every section the pages have."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.htmlparts import Figure, Styled, Table, environment, page, render
from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.cli import main

EVIL = "<script>alert(1)</script>"


def _no_markup_from_data(html: str) -> None:
    assert not re.search(r"<\s*script", html, re.I), html[html.lower().find("<script") - 200:][:400]
    assert "&lt;script&gt;" in html


def test_every_template_piece_escapes_what_it_is_given() -> None:
    assert environment().autoescape is True
    body = render("leaderboard.html.j2", base=EVIL, board=Table([EVIL], [[EVIL, Styled(f"{EVIL}\nsecond line", "up")]]),
                  notes=[EVIL], figures=[Figure(EVIL, "AAAA")], runs=[EVIL])
    html = page(EVIL, body)
    _no_markup_from_data(html)
    assert html.count("&lt;script&gt;") == 8  # title, base, header, two cells, note, alt text, run line: each escaped
    assert '<td class="up">&lt;script&gt;alert(1)&lt;/script&gt;<br>second line</td>' in html


def test_report_and_leaderboard_escape_model_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    p = rng.beta(0.5, 1.5, 12)
    ids = [f"{EVIL}/{i}" for i in range(12)]
    task = "t<script>"
    for t, seed in ((0.4, 1), (1.0, 2)):  # a sweep: the sweep section
        write_synthetic_run(tmp_path / "r", np.clip(p * (1.2 - t / 2), 0, 1), n=8, task=task, model=f"org/{EVIL}",
                            temperature=t, seed=seed, metrics=("pass@1", "bon@8"), problem_ids=ids, n_boot=20,
                            extra_scores={EVIL.replace("/", "_"): rng.random((12, 8))})
    write_synthetic_run(tmp_path / "r", np.clip(p + 0.1, 0, 1), n=8, task=task, model="org/ckpt", seed=3,  # a comparison
                        metrics=("pass@1",), problem_ids=ids, n_boot=20)
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "train_config.json").write_text(json.dumps({"task": task, "objective": EVIL, "objective_options": {"k": EVIL}}))
    (ck / "log.jsonl").write_text("".join(json.dumps({"step": i, "reward": 0.1 * i, "kl_ref": 0.01}) + "\n" for i in (1, 2)))
    assert main(["plot", str(tmp_path / "r"), str(ck), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    for heading in ("<h2>Training</h2>", "<h2>Temperature sweep: ", "<h2>Comparison: ", "<h3>Metrics</h3>"):
        assert heading in html  # the sections the data reaches are there
    _no_markup_from_data(html)
    verifier = EVIL.replace("/", "_")
    assert main(["plot", str(tmp_path / "r"), "--kind", "bon", "--verifier", verifier, "--out", str(tmp_path / "bon")]) == 0
    html = (tmp_path / "bon" / "report.html").read_text(encoding="utf-8")
    assert "verifier &lt;script&gt;alert(1)&lt;_script&gt;" in html
    _no_markup_from_data(html)
    assert main(["leaderboard", str(tmp_path / "r"), "--base", f"org/{EVIL}", "--out", str(tmp_path / "lb")]) == 0
    capsys.readouterr()
    _no_markup_from_data((tmp_path / "lb" / "leaderboard.html").read_text(encoding="utf-8"))
