"""What the ``kl`` number is and how tables show it: the mean log-ratio over the policy's samples is
unbiased for KL >= 0 yet often negative when the KL is small (measured here on an exact toy), every
table that shows it says so, and closed-form kl_bon@k is recognised even in files without the flag."""

from __future__ import annotations

import math

import numpy as np

from bonbench.api.metric.readings import footnotes, metric_info
from bonbench.metrics.info import LOWER
from bonbench.plugins.metrics.stored import CLOSED_FORM_FOOTNOTE, KL_FOOTNOTE


def test_the_mean_log_ratio_is_unbiased_and_often_negative_near_zero_kl() -> None:
    """pi = (0.5, 0.5) against pi_ref = (0.55, 0.45): KL = 0.00503 nats. The per-sample log-ratio
    log pi(y) - log pi_ref(y) is -0.0953 or +0.1054; averaged over 16 samples of pi (one problem's
    n) the estimate is negative in about 40% of draws, while its mean over 20,000 draws equals the
    exact KL within 4 standard errors."""
    pi, ref = np.array([0.5, 0.5]), np.array([0.55, 0.45])
    kl = float(np.sum(pi * np.log(pi / ref)))
    assert math.isclose(kl, 0.0050252, rel_tol=1e-4)
    rng = np.random.default_rng(0)
    draws = rng.choice(2, p=pi, size=(20_000, 16))
    estimates = np.log(pi / ref)[draws].mean(axis=1)
    se = estimates.std(ddof=1) / math.sqrt(len(estimates))
    assert abs(estimates.mean() - kl) < 4 * se
    assert 0.3 < float(np.mean(estimates < 0)) < 0.5


def test_metric_directions_and_closed_forms() -> None:
    assert metric_info("kl").direction == LOWER and metric_info("kl_bon@4").direction == LOWER
    assert metric_info("pass@1[level=3]").direction == "higher" and metric_info("winrate@4").direction == "higher"
    assert metric_info("reasoning_gap").direction == LOWER and metric_info("gold_abstained").direction is None
    assert metric_info("my_task_score").direction is None and not metric_info("my_task_score").gateable
    assert metric_info("my_task_score", {"direction": "higher"}).gateable
    # files written before the flag: equal per-problem values are the closed form, a spread is not
    assert metric_info("kl_bon@4", {"reference": "m"}, {"a": 0.636, "b": 0.636}).closed_form
    assert not metric_info("kl_bon@4", {"reference": "m"}, {"a": 0.636, "b": 0.41}).closed_form
    assert not metric_info("kl_bon@4", {"closed_form": False}, {"a": 0.6, "b": 0.6}).closed_form
    assert footnotes(["pass@1"]) == [] and footnotes(["kl", "kl_bon@2"]) == [KL_FOOTNOTE, CLOSED_FORM_FOOTNOTE]


def test_the_html_report_explains_a_negative_kl(tmp_path) -> None:
    import json

    from bonbench.apps.analysis.html import write_report
    from bonbench.apps.analysis.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path, np.full(10, 0.5), n=2, n_boot=20)
    doc = json.loads((run / "metrics.json").read_text())
    doc["metrics"]["kl"] = {"value": -0.0014, "ci95": [-0.0128, 0.0078], "n_problems": 10}
    (run / "metrics.json").write_text(json.dumps(doc))
    html = write_report([run], tmp_path / "report").read_text()
    assert "-0.0014" in html and "can fall below 0" in html


def test_the_terminal_table_explains_kl_and_closed_forms() -> None:
    import io

    from rich.console import Console

    from bonbench.pipeline.report import print_metrics

    def table(metrics: dict) -> str:
        buffer = io.StringIO()
        print_metrics({"task": "imdb", "model": "m", "n": 4, "metrics": metrics}, Console(file=buffer, width=400))
        return buffer.getvalue()

    kl = {"value": -0.0014, "ci95": [-0.0128, 0.0078], "n_problems": 8}
    assert KL_FOOTNOTE[:40] in table({"kl": kl})
    closed = table({"kl_bon@4": {"value": 0.63, "ci95": [0.63, 0.63], "n_problems": 8, "closed_form": True}})
    assert CLOSED_FORM_FOOTNOTE[:40] in closed and "closed form" in closed and "[0.6300, 0.6300]" not in closed
    assert KL_FOOTNOTE[:40] not in table({"mean": {"value": 0.5, "ci95": [0.4, 0.6], "n_problems": 8}})
