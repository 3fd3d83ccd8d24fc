"""``bonbench view`` in a real browser (issue 32, points 7 and 9): Debian's chromium, headless, driven
by selenium through Debian's chromedriver (no browser or driver is downloaded at run time).

A run of MATH made by the pipeline (``bonbench run`` with the scripted backend replaying a samples
file, the real MATH grader, the logprob verifier) holds hostile samples. The browser opens the
server's runs page, clicks into the run and into a problem, checks what it shows against the run
directory and the dataset, checks that no hostile sample ran anything, and keeps a screenshot; then
it opens the ``--static`` bundle from ``file://`` and does the same without a server.

Skipped, saying why, where chromium, chromedriver or selenium is missing (``scripts/install.sh``
installs them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.task import get_task
from bonbench.apps.cli import main

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (scripts/install.sh installs it)")
if CHROMIUM is None or DRIVER is None:
    pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/install.sh installs them)",
                allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402 only once the skips above have passed
from selenium.webdriver.common.by import By  # noqa: E402 only once the skips above have passed
from selenium.webdriver.support.ui import Select  # noqa: E402 only once the skips above have passed

PROBLEMS = ("test/algebra/1.json", "test/algebra/2.json")
# Each payload, were it markup, would set window.pwned or open an alert.
HOSTILE = ['<script>window.pwned = 1</script>', '</script><script>window.pwned = 2</script>',
           '</textarea><img src=x onerror="window.pwned = 3">', '<a id="jsl" href="javascript:window.pwned = 4">click</a>']


def _math_run(root: Path, data_dir: Path, name: str, answers: dict[str, list[str]]) -> Path:
    """A MATH run of these answers made by `bonbench run` (scripted backend, MATH grader, logprob verifier)."""
    rows = []
    for pid, boxed in answers.items():
        for i, answer in enumerate(boxed):
            text = f"{HOSTILE[i]} So the answer is $\\boxed{{{answer}}}$."
            rows.append({"problem_id": pid, "sample_idx": i, "completion": text, "n_tokens": 10 + i,
                         "finish_reason": "stop", "logprob": -1.0 - (i + 3 * (pid == PROBLEMS[1]) * (i == 2))})
    samples = root / name
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["run", "--task", "math", "--backend", "scripted", "--samples", str(samples), "--verifier", "logprob",
                 "--metric", "pass@2", "--metric", "maj@4", "--metric", "bon@4", "--n-boot", "50",
                 "--data-dir", str(data_dir), "--out", str(root / "results")]) == 0
    (found,) = [p.parent for p in (root / "results").rglob("metrics.json") if p.parent.parent.name == name]
    return found


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The base run; a second run of the task (problem 2 no longer solved) sits beside it, for the comparison."""
    root = tmp_path_factory.mktemp("browser")
    first = _math_run(root, data_dir, "base.jsonl", {PROBLEMS[0]: ["2", "2", "3", "2"],
                                                      PROBLEMS[1]: ["\\frac{1}{2}", "0.5", "1", "2"]})
    _math_run(root, data_dir, "tuned.jsonl", {PROBLEMS[0]: ["2", "2", "3", "2"], PROBLEMS[1]: ["1", "3", "1", "2"]})
    return first


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_nothing_ran(driver: Any) -> None:
    assert driver.execute_script("return window.pwned === undefined")
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 reading the alert's text is what raises
    assert not driver.find_elements(By.CSS_SELECTOR, "img, textarea, #jsl")


def _check_problem(driver: Any, run_dir: Path, data_dir: Path) -> None:
    """The problem page shows the run directory's samples, grades and pick, and the dataset's prompt."""
    pid = driver.find_element(By.TAG_NAME, "h1").text
    assert pid in {r["problem_id"] for r in _rows(run_dir / "samples.jsonl")}
    samples = {r["sample_idx"]: r for r in _rows(run_dir / "samples.jsonl") if r["problem_id"] == pid}
    grades = {r["sample_idx"]: r for r in _rows(run_dir / "grades" / "math.jsonl") if r["problem_id"] == pid}
    scores = {r["sample_idx"]: r["score"] for r in _rows(run_dir / "scores" / "logprob.jsonl") if r["problem_id"] == pid}
    shown = driver.find_elements(By.CSS_SELECTOR, "details[data-sample]")
    assert [int(d.get_attribute("data-sample")) for d in shown] == sorted(samples)
    for d in shown:
        i = int(d.get_attribute("data-sample"))
        if d.get_attribute("open") is None:
            d.find_element(By.TAG_NAME, "summary").click()
        assert d.find_element(By.CSS_SELECTOR, "pre[data-completion]").text == samples[i]["completion"].strip()
        assert d.find_element(By.CSS_SELECTOR, "code[data-answer]").text == (grades[i]["answer"] or "—")
        assert ("right" if grades[i]["correct"] else "wrong") in d.find_element(By.TAG_NAME, "summary").text
    pick = max(scores, key=lambda i: (scores[i], -i))
    picked = driver.find_elements(By.CSS_SELECTOR, "details.pick")
    assert [int(d.get_attribute("data-sample")) for d in picked] == [pick]
    problem = next(p for p in get_task("math", data_dir=str(data_dir)).problems if p.id == pid)
    prompt = driver.find_element(By.CSS_SELECTOR, "pre[data-prompt]").text
    assert problem.input.split("\n")[0] in prompt  # the prompt the run's task renders, statement included
    assert driver.find_element(By.CSS_SELECTOR, "pre[data-gold]").text == problem.target


def _compare(driver: Any, run_dir: Path) -> None:
    """From the base run's page to the comparison, to the flipped problem, both runs' samples side by side."""
    driver.find_element(By.LINK_TEXT, "math / base.jsonl").click()
    driver.find_element(By.PARTIAL_LINK_TEXT, "tuned.jsonl").click()
    flips = driver.find_elements(By.CSS_SELECTOR, "tr[data-flip='solved']")
    assert [f.text for f in flips] == [f"{PROBLEMS[1]} some sample right right → wrong"]
    tuned = next(p for p in run_dir.parents[1].glob("tuned.jsonl/*") if (p / "samples.jsonl").is_file())
    a, b = (json.loads((r / "metrics.json").read_text())["metrics"]["pass@2"]["value"] for r in (run_dir, tuned))
    diff = driver.find_element(By.CSS_SELECTOR, "tr[data-diff='pass@2']").text
    assert diff.startswith(f"pass@2 {a:.4f} {b:.4f} {b - a:.4f} [") and b < a  # the runs' own pass@2, paired
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-flag]")).select_by_value("flipped")
    shown = [r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-row]")
             if r.is_displayed()]
    assert shown == [PROBLEMS[1]]
    flips[0].find_element(By.TAG_NAME, "a").click()
    for side, run in (("A", run_dir), ("B", tuned)):
        texts = [e.text for e in driver.find_elements(
            By.CSS_SELECTOR, f"[data-side='{side}'] pre[data-completion]") if e.text]
        wanted = [r["completion"].strip() for r in _rows(run / "samples.jsonl") if r["problem_id"] == PROBLEMS[1]]
        assert texts == wanted[:len(texts)] and texts  # the picked (open) sample at least, each run's own
    _assert_nothing_ran(driver)
    assert driver.save_screenshot(str(run_dir.parents[4] / "compare.png"))


def test_a_browser_clicks_through_a_served_run(run_dir: Path, data_dir: Path, browser: Any, tmp_path: Path) -> None:
    driver = browser
    results = run_dir.parents[3]  # both runs
    proc = subprocess.Popen([sys.executable, "-m", "bonbench", "view", str(results), "--port", "0", "--data-dir",
                             str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "BONBENCH_CACHE": str(tmp_path / "cache")})
    try:
        assert proc.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert url
        driver.get(url.group(0))
        driver.find_element(By.LINK_TEXT, "math").click()
        count = driver.find_element(By.CSS_SELECTOR, "[data-count]")
        assert count.text == "rows 1–2 of 2"  # table.js ran (the CSP let it) and counted the rows
        flag = Select(driver.find_element(By.CSS_SELECTOR, "select[data-flag]"))
        flag.select_by_value("unsolved")  # both problems have a right sample
        assert count.text == "no rows match" and not any(r.is_displayed() for r in driver.find_elements(
            By.CSS_SELECTOR, "tr[data-row]"))
        flag.select_by_value("solved")
        assert count.text == "rows 1–2 of 2"
        search = driver.find_element(By.CSS_SELECTOR, "input[data-search]")
        search.send_keys("algebra/2")
        visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-row]") if r.is_displayed()]
        assert [r.get_attribute("data-id") for r in visible] == [PROBLEMS[1]] and count.text == "rows 1–1 of 1 (of 2)"
        visible[0].find_element(By.TAG_NAME, "a").click()
        _check_problem(driver, run_dir, data_dir)
        _assert_nothing_ran(driver)
        shot = tmp_path / "problem.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        _compare(driver, run_dir)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_static_bundle_works_from_file_urls(run_dir: Path, data_dir: Path, browser: Any, tmp_path: Path) -> None:
    driver = browser
    out = tmp_path / "bundle"
    assert main(["view", str(run_dir), "--static", str(out), "--data-dir", str(data_dir), "--no-cache"]) == 0
    driver.get((out / "index.html").as_uri())
    driver.find_element(By.LINK_TEXT, "math").click()
    header = driver.find_element(By.CSS_SELECTOR, "th[data-sort='id']")
    header.click()
    header.click()  # sorted by id, descending
    first = next(r for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-row]") if r.is_displayed())
    assert first.get_attribute("data-id") == PROBLEMS[1]
    first.find_element(By.TAG_NAME, "a").click()
    _check_problem(driver, run_dir, data_dir)
    _assert_nothing_ran(driver)
    assert driver.save_screenshot(str(tmp_path / "bundle.png"))


@pytest.mark.slow
def test_a_run_of_the_embedded_model_in_the_browser(data_dir: Path, browser: Any, tmp_path: Path) -> None:
    """The embedded model (Gemma 3 270M, the hf backend: ~2 minutes on 2 CPU cores) samples 2 MATH
    problems 4 times; the browser opens the run's second problem and checks it against the run."""
    driver = browser
    assert main(["run", "--task", "math", "--limit", "2", "--n", "4", "--backend", "hf", "--max-tokens", "96",
                 "--metric", "pass@4", "--metric", "maj@4", "--metric", "bon@4", "--verifier", "logprob",
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]) == 0
    (run,) = [p.parent for p in (tmp_path / "results").rglob("metrics.json")]
    out = tmp_path / "bundle"
    # --no-cache: $BONBENCH_CACHE holds the converted model here, and the viewer keeps nothing of this run
    assert main(["view", str(tmp_path / "results"), "--static", str(out), "--data-dir", str(data_dir), "--no-cache"]) == 0
    driver.get((out / "index.html").as_uri())
    driver.find_element(By.LINK_TEXT, "math").click()
    rows = [r for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-row]") if r.is_displayed()]
    assert len(rows) == 2
    rows[1].find_element(By.TAG_NAME, "a").click()
    _check_problem(driver, run, data_dir)
    assert driver.save_screenshot(str(tmp_path / "embedded.png"))
