"""``bonbench view`` (issue 32): the run viewer's figures, pages, safety and command line.

Runs are written here row by row in the store's format (``records.to_row`` through
``JsonlTable.append``) or by ``synthetic.write_synthetic_run``; pages are fetched through
Starlette's TestClient, and the command line is run as the user runs it."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.cli import main
from bonbench.apps.viewer import problems, site, tables
from bonbench.apps.viewer.command import selected
from bonbench.apps.viewer.problems import dataset_metrics, metric_values, problem_table
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.server import app
from bonbench.apps.viewer.site import Site
from bonbench.apps.viewer.viewer_flags import ViewRequest
from bonbench.core.records import Grade, Sample, Score
from bonbench.core.row_index import RowIndex
from bonbench.core.store import RunStore, atomic_write_json

EVIL = ['<script>alert(1)</script>', '</script><script>alert(2)</script>', '</textarea><img src=x onerror=alert(3)>',
        '<a href="javascript:alert(4)">x</a>', '" onmouseover="alert(5)', "{{ 7*7 }}"]


def write_run(root: Path, *, task: str = "toy", model: str = "org/model", answers: dict[str, list[str | None]],
              right: dict[str, list[bool]], scores: dict[str, list[float]], completions: dict[str, list[str]] | None = None,
              scored: bool = True) -> Path:
    """A run directory with the given answers, verdicts and verifier scores (problem -> per sample)."""
    store = RunStore(root / "runs" / task / model.replace("/", "--") / "abc123")
    store.write_config({"config": {"task": task, "model": model, "n": len(next(iter(answers.values()))),
                                   "temperature": 1.0, "verifier": "v"}, "hash": "abc123", "verifiers": ["v"]})
    texts = completions or {pid: [f"answer {a}" for a in ans] for pid, ans in answers.items()}
    store.samples.append(Sample(pid, i, texts[pid][i], 10 + i, "stop", -1.5 * (i + 1))
                         for pid in answers for i in range(len(answers[pid])))
    store.grades("g").append(Grade(pid, i, "g", 2, right[pid][i], answer=a) for pid in answers
                             for i, a in enumerate(answers[pid]))
    store.scores("v").append(Score(pid, i, "v", s, steps=(0.9, s)) for pid in scores for i, s in enumerate(scores[pid]))
    if scored:
        ids = list(answers)
        atomic_write_json(store.metrics_path, {
            "metrics": {"pass@1": {"value": 0.5, "ci95": [0.25, 0.75], "n_problems": len(ids)},
                        "bon@2": {"value": 0.5, "ci95": [0.1, 0.9], "n_problems": len(ids), "verifier": "v",
                                  "verifier_version": 1, "verifier_fingerprint": ""}},
            "per_problem": {"pass@1": {pid: float(np.mean(right[pid])) for pid in ids},
                            "bon@2": {pid: 0.25 for pid in ids}},
            "grader": "g", "verifier": "v", "n": 3, "n_problems": len(ids),
            "grading": {"grader": "g", "grader_version": 2, "grading_id": ""}})
    return store.root


def toy(root: Path, **kw: object) -> Path:
    return write_run(root, answers={"p/1": ["7", "8", "7"], "p/2": ["3", "3", None]},
                     right={"p/1": [True, False, True], "p/2": [False, False, False]},
                     scores={"p/1": [0.1, 0.9, 0.2], "p/2": [0.5, 0.4, 0.3]}, **kw)  # type: ignore[arg-type] the tests pass keyword options loosely


class Markup(HTMLParser):
    """The elements and attributes a browser would build from a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    """Only the viewer's own markup: one script (table.js), no event handler, no javascript: link, no
    element that model text could have opened."""
    tags = Markup(html).tags
    assert sum(tag == "script" for tag, _ in tags) <= 1
    assert not {tag for tag, _ in tags} & {"img", "textarea", "iframe", "object", "embed", "form", "foreignobject"}
    assert all("data-curves" in attrs for tag, attrs in tags if tag == "svg")  # the k-curves' alone
    for tag, attrs in tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert not any((v or "").strip().lower().startswith("javascript:") for v in attrs.values()), (tag, attrs)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The viewer keeps its indexes and tables under $BONBENCH_CACHE: a folder of each test's own."""
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def client(*roots: Path, **kw: object) -> TestClient:
    """The app `bonbench view ROOTS` serves (its runs and checkpoints, as the command finds them)."""
    runs, checkpoints = selected(ViewRequest(paths=roots))
    site = Site(runs, TaskTexts(None), checkpoints=checkpoints, **kw)  # type: ignore[arg-type] the tests pass keyword options loosely
    return TestClient(app(site), base_url="http://127.0.0.1:7580")


# ---- reading by key --------------------------------------------------------------------------------

def test_the_row_index_reads_one_problem_and_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    tricky = 'text with "problem_id": "p/9" and \\"problem_id\\": \\"p/8\\" inside'
    rows = [{"schema": 1, "problem_id": pid, "sample_idx": i, "completion": tricky} for pid in ("p/1", "p/2", "é/3")
            for i in range(3)]
    rows.append({"schema": 1, "problem_id": "p/1", "sample_idx": 0, "completion": "a duplicate: the first row wins"})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    index = RowIndex(path).refresh()
    assert list(index.problems) == ["p/1", "p/2", "é/3"]
    assert [r["sample_idx"] for r in index.rows("p/2")] == [0, 1, 2]
    assert index.keyed("p/1")[0]["completion"] == tricky and list(index.problems["p/1"].idx) == [0, 1, 2, 0]
    with open(path, "ab") as fh:  # a writer appends one row and is half-way through the next
        fh.write(json.dumps({"schema": 1, "problem_id": "p/4", "sample_idx": 0}).encode() + b"\n")
        fh.write(b'{"schema": 1, "problem_id": "p/5", "samp')
    with pytest.warns(UserWarning, match="the last line is torn"):
        index.refresh()
    assert list(index.problems)[-1] == "p/4" and index.torn and index.changed == {"p/4"}
    with open(path, "ab") as fh:
        fh.write(b'le_idx": 0}\n')
    assert list(index.refresh().problems)[-1] == "p/5" and not index.torn and index.changed == {"p/5"}
    path.write_text(json.dumps(rows[0]) + "\n")  # replaced by a shorter file: indexed again
    assert list(index.refresh().problems) == ["p/1"]


def test_the_problem_table_reads_votes_picks_and_metrics(tmp_path: Path) -> None:
    toy(tmp_path / "r")
    run = find_runs([tmp_path / "r"])[0]
    p1, p2 = problem_table(run)
    assert dataset_metrics(run) == ["pass@1", "bon@2"]
    assert (p1.problem_id, p1.n_samples, p1.n_right) == ("p/1", 3, 2) and p1.pass_rate == pytest.approx(2 / 3)
    assert (p1.majority, p1.majority_right, p1.pick, p1.pick_right) == ("7", True, 1, False)  # 0.9 picks the wrong 8
    assert p1.flags == ("solved", "verifier_wrong") and p1.mean_tokens == 11
    assert (p2.majority, p2.majority_right, p2.pick) == ("3", False, 0) and p2.majority_share == pytest.approx(2 / 3)
    assert p2.flags == ("unsolved",)  # wrong, but no right sample existed: not a verifier or vote failure
    (values,) = metric_values(run, ["pass@1", "bon@2", "maj@9"], ["p/1"])
    assert values[:2] == [pytest.approx(2 / 3), 0.25] and math.isnan(values[2])


def test_a_tied_vote_is_neither_right_nor_wrong_when_it_holds_the_right_class(tmp_path: Path) -> None:
    write_run(tmp_path, answers={"t/1": ["7", "8", "9"], "t/2": ["8", "8", "9", "9", "7"][:3]},
              right={"t/1": [True, False, False], "t/2": [False, False, False]}, scores={})
    store = RunStore(next(tmp_path.rglob("config.json")).parent)
    store.samples.append([Sample("t/3", i, "x", 1, "stop") for i in range(5)])
    store.grades("g").append([Grade("t/3", i, "g", 2, a == "7", answer=a) for i, a in enumerate("88997")])
    rows = {r.problem_id: r for r in problem_table(find_runs([tmp_path])[0])}
    assert (rows["t/1"].majority_ties, rows["t/1"].majority_right) == (3, None)  # 7 (right), 8, 9: one vote each
    assert "majority_wrong" not in rows["t/1"].flags
    assert (rows["t/3"].majority, rows["t/3"].majority_ties, rows["t/3"].majority_right) == ("8", 2, False)
    assert rows["t/3"].flags == ("solved", "majority_wrong")  # 8 and 9 tie above the right 7


def test_the_table_matches_a_synthetic_run_and_its_metrics(tmp_path: Path) -> None:
    d = write_synthetic_run(tmp_path, np.linspace(0, 1, 12), n=8, metrics=("pass@1", "pass@4", "bon@4"), n_boot=10)
    doc = json.loads((d / "metrics.json").read_text())
    grades = [json.loads(line) for line in (d / "grades" / "synthetic.jsonl").read_text().splitlines()]
    run = find_runs([tmp_path])[0]
    rows = problem_table(run)
    assert dataset_metrics(run) == ["pass@1", "pass@4", "bon@4"] and len(rows) == 12
    for row in rows:
        mine = [g["correct"] for g in grades if g["problem_id"] == row.problem_id]
        assert row.pass_rate == pytest.approx(np.mean(mine)) == pytest.approx(doc["per_problem"]["pass@1"][row.problem_id])
        assert metric_values(run, ["bon@4"], [row.problem_id]) == [[doc["per_problem"]["bon@4"][row.problem_id]]]
    page = client(tmp_path).get(f"/runs/{run.id}/index.html").text
    labels = re.findall(r"<text [^>]*data-curve-label>([^<]*)</text>", page)
    assert labels == ["pass@k", "bon@k", "maj@k"]  # curves.json's curves, in the registry's order and names
    lines = re.findall(r'<polyline points="([^"]*)"', page)
    assert [len(points.split()) for points in lines] == [8] * 3  # every k = 1..n
    x_of = [float(p.split(",")[0]) for p in lines[0].split()]
    assert x_of == sorted(x_of) and x_of[1] - x_of[0] == pytest.approx(x_of[3] - x_of[1], abs=0.2)  # k on a log2 axis


def test_a_second_start_reads_the_kept_index_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table and the indexes are kept outside the run: the next start computes nothing, and rows
    appended since are indexed and only their problem is recomputed."""
    run = toy(tmp_path / "r")
    before = sorted(p.name for p in run.rglob("*"))
    first = client(tmp_path / "r").get("/runs/abc123/index.html").text
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing written into the run
    assert len(list((tmp_path / "cache" / "viewer").rglob("*.index"))) == 3
    computed: list[str] = []
    real_row = problems.problem_row
    monkeypatch.setattr(tables, "problem_row", lambda src, pid: computed.append(pid) or real_row(src, pid))
    assert client(tmp_path / "r").get("/runs/abc123/index.html").text == first and computed == []
    monkeypatch.setattr("bonbench.core.row_index.RowIndex._scan", lambda *a: pytest.fail("indexed again"))
    assert client(tmp_path / "r").get("/runs/abc123/index.html").status_code == 200
    monkeypatch.undo()
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tables, "problem_row", lambda src, pid: computed.append(pid) or real_row(src, pid))
    c = client(tmp_path / "r")
    c.get("/runs/abc123/index.html")
    RunStore(run).samples.append([Sample("p/3", 0, "new", 5, "stop")])
    RunStore(run).grades("g").append([Grade("p/3", 0, "g", 2, True, answer="1")])
    computed.clear()
    page = c.get("/runs/abc123/index.html").text
    assert computed == ["p/3"] and page.count("<tr data-row") == 3


# ---- pages -----------------------------------------------------------------------------------------

def test_the_pages_show_runs_problems_and_every_sample(tmp_path: Path) -> None:
    toy(tmp_path)
    c = client(tmp_path)
    home = c.get("/")
    assert home.status_code == 200 and "toy" in home.text and "pass@1 0.500 [0.250, 0.750]" in home.text
    assert "g v2" in home.text and "v v1" in home.text  # grader and verifier versions
    (href,) = re.findall(r'href="(runs/[^"]+)"', home.text)
    run = c.get("/" + href)
    assert run.status_code == 200 and run.text.count("<tr data-row") == 2
    assert 'data-flags="solved verifier_wrong"' in run.text
    page = c.get("/" + href.replace("index.html", "problems/0.html"))
    assert page.status_code == 200
    samples = re.findall(r'<details class="sample( pick)?" id="s(\d)"', page.text)
    assert samples == [("", "0"), (" pick", "1"), ("", "2")]  # every sample, the pick marked
    assert "per-step scores" in page.text and "0.900, 0.900" in page.text  # Score.steps of the pick
    assert "answer 8" in page.text and "-3.00" in page.text  # a completion and its log-probability
    assert c.get("/" + href.replace("index.html", "problems/2.html")).status_code == 404


def test_hostile_text_is_shown_as_text(tmp_path: Path) -> None:
    n = len(EVIL)
    write_run(tmp_path, task=EVIL[0], model="org/" + EVIL[2], answers={EVIL[1]: list(EVIL)},
              right={EVIL[1]: [True] + [False] * (n - 1)}, scores={EVIL[1]: [float(i) for i in range(n)]},
              completions={EVIL[1]: [e * 2 for e in EVIL]})
    (run,) = tmp_path.rglob("metrics.json")
    (run.parent / "curves.json").write_text(json.dumps({EVIL[0]: {"k": [1, 2], "value": [0.1, 0.2], "lo": [0, 0],
                                                                  "hi": [0.3, 0.4]}}))
    c = client(tmp_path)
    pages = [c.get("/")]
    (href,) = set(re.findall(r'href="(runs/[^"]+)"', pages[0].text))
    pages += [c.get("/" + href), c.get("/" + href.replace("index.html", "problems/0.html"))]
    for page in pages:
        assert page.status_code == 200
        assert_inert(page.text)
    assert "&lt;/textarea&gt;&lt;img src=x onerror=alert(3)&gt;" in pages[2].text and "{{ 7*7 }}" in pages[2].text
    assert "data-curves" in pages[1].text and "&lt;script&gt;alert(1)&lt;/script&gt;</text>" in pages[1].text


@pytest.mark.parametrize("address", ["/..%2f..%2fetc/passwd", "/runs/..%2f..%2fetc/passwd", "/runs/%2e%2e/%2e%2e/etc/passwd",
                                     "//etc/passwd", "/%2fetc%2fpasswd", "/runs/abc123/../../../../etc/passwd",
                                     "/runs/abc123/problems/-1.html", "/runs/abc123/problems/00.html",
                                     "/runs/abc123/problems/0.html%00", "/runs/abc123/config.json", "/runs/abc123/samples.jsonl",
                                     "/runs/abc123/problems/0.html/..", "/%252e%252e/etc/passwd"])
def test_no_address_reaches_a_file(tmp_path: Path, address: str) -> None:
    toy(tmp_path)
    response = client(tmp_path).get(address)
    assert response.status_code == 404 and "root:" not in response.text


def test_only_get_and_head_are_answered(tmp_path: Path) -> None:
    toy(tmp_path)
    c = client(tmp_path)
    assert c.head("/").status_code == 200 and c.head("/").text == ""
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        response = c.request(method, "/runs/abc123/index.html")
        assert response.status_code == 405 and "GET" in response.headers["allow"]
    assert c.get("/", headers={"host": "attacker.example"}).status_code == 400  # DNS rebinding
    headers = c.get("/").headers
    assert "default-src 'none'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"


def test_a_file_linked_outside_the_folder_is_not_read(tmp_path: Path) -> None:
    run = toy(tmp_path / "given")
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"problem_id": "p/1", "sample_idx": 0, "completion": "TOP SECRET"}) + "\n")
    (run / "samples.jsonl").unlink()
    (run / "samples.jsonl").symlink_to(secret)
    c = client(tmp_path / "given")
    page = c.get("/runs/abc123/problems/0.html")
    assert page.status_code == 200 and "TOP SECRET" not in page.text and "links outside" in page.text


def test_a_run_being_written_shows_as_far_as_it_goes(tmp_path: Path) -> None:
    run = toy(tmp_path, scored=False)
    with open(run / "samples.jsonl", "ab") as fh:
        fh.write(b'{"schema": 1, "problem_id": "p/3", "sample_idx": 0, "completion": "half')
    c = client(tmp_path)
    assert "not scored" in c.get("/").text
    page = c.get("/runs/abc123/index.html")
    assert page.text.count("<tr data-row") == 2 and "the last line is torn" in page.text
    with open(run / "samples.jsonl", "ab") as fh:
        fh.write(b' done", "n_tokens": 3, "finish_reason": "stop", "logprob": null}\n')
    page = c.get("/runs/abc123/index.html")
    assert page.text.count("<tr data-row") == 3 and "torn" not in page.text


def test_two_runs_side_by_side(tmp_path: Path) -> None:
    """Paired differences equal the leaderboard's paired bootstrap on metrics.json's per-problem values,
    the flipped problems are the ones whose verdict changed, and a problem opens with both runs' samples."""
    from bonbench.metrics.bootstrap import paired_bootstrap_diff

    base = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]])
    tuned = np.array([[1, 1, 0, 0], [0, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])  # problem 1 gained, problem 3 lost
    runs = [write_synthetic_run(tmp_path, [0.5] * 4, n=4, temperature=t, correct=c, verifier_noise=0.0, n_boot=20,
                                metrics=("pass@1", "pass@4", "bon@4")) for t, c in ((0.5, base), (1.0, tuned))]
    write_synthetic_run(tmp_path, [0.5] * 4, n=4, task="other", n_boot=20)  # another task: not paired
    c = client(tmp_path)
    ids = [r.name for r in runs]
    run_page = c.get(f"/runs/{ids[0]}/index.html").text
    (link,) = re.findall(r'href="\.\./\.\./(compare/[^"]+)"', run_page)
    assert link == f"compare/{ids[0]}/{ids[1]}/index.html"
    page = c.get("/" + link).text
    docs = [json.loads((r / "metrics.json").read_text())["per_problem"]["pass@1"] for r in runs]
    pids = list(docs[0])
    diff, lo, hi, _ = paired_bootstrap_diff(np.array([docs[1][p] for p in pids]), np.array([docs[0][p] for p in pids]),
                                            n_boot=site.N_BOOT, seed=0)
    assert f'<tr data-diff="pass@1"><td class="l">pass@1</td><td>0.3750</td><td>0.4375</td><td class="">{diff:.4f}</td>' \
           f"<td>[{lo:.4f}, {hi:.4f}]</td><td>4</td></tr>" in page
    flipped = re.findall(r'<tr data-flip="(\w+)"><td class="l"><a href="problems/(\d)\.html">([^<]+)</a>'
                         r".*?(wrong → right|right → wrong)", page)
    assert sorted(flipped) == [("pick", "1", pids[1], "wrong → right"), ("pick", "3", pids[3], "right → wrong"),
                               ("solved", "1", pids[1], "wrong → right"), ("solved", "3", pids[3], "right → wrong")]
    shown = re.findall(r'<tr data-row data-id="([^"]+)" data-flags="([^"]*)"', page)
    assert shown == [(pids[0], ""), (pids[1], "flipped solved_flipped pick_flipped gained"), (pids[2], ""),
                     (pids[3], "flipped solved_flipped pick_flipped lost")]  # the table's "flipped" filter
    side = c.get(f"/compare/{ids[0]}/{ids[1]}/problems/1.html").text
    assert side.count('data-side="A"') == side.count('data-side="B"') == 1 and side.count('<details class="sample') == 8
    assert 'id="A-0"' in side and 'id="B-0"' in side
    other = next(r for r in find_runs([tmp_path]) if r.task == "other").id
    for bad in (f"compare/{ids[0]}/{ids[0]}/index.html", f"compare/{ids[0]}/{other}/index.html",
                f"compare/{ids[0]}/{ids[1]}/problems/4.html", f"compare/{ids[0]}/../{ids[1]}/index.html"):
        assert c.get("/" + bad).status_code == 404, bad


def test_a_reward_judged_run_shows_rewards_and_every_score(tmp_path: Path) -> None:
    """Grades that are rewards (no verdict): mean and best reward, the pick's reward and the filter it
    fails; every other scores file (the log-probabilities KL reads) beside each sample."""
    store = RunStore(tmp_path / "runs" / "imdb" / "m" / "h1")
    store.write_config({"config": {"task": "imdb", "model": "m", "n": 3, "verifier": "v"}, "hash": "h1"})
    rewards = {"a": [0.9, 0.2, 0.4], "b": [0.1, 0.8, 0.6]}
    store.samples.append(Sample(pid, i, f"review {pid}{i}", 5, "length") for pid in rewards for i in range(3))
    store.grades("sentiment").append(Grade(pid, i, "sentiment", 1, None, score=r) for pid, rs in rewards.items()
                                     for i, r in enumerate(rs))
    store.scores("v").append(Score(pid, i, "v", s) for pid, ss in {"a": [1, 2, 3], "b": [1, 3, 2]}.items()
                             for i, s in enumerate(ss))
    store.scores("lp-ref").append(Score(pid, i, "lp-ref", -3.0 - i) for pid in rewards for i in range(3))
    c = client(tmp_path)
    page = c.get("/runs/h1/index.html").text
    assert '<th data-sort="pass">mean reward</th>' in page and '<option value="pick_below_mean">' in page
    assert re.findall(r'data-id="(\w)" data-text="" data-flags="([^"]*)"', page) == [("a", "pick_below_mean"), ("b", "")]
    problem = c.get("/runs/h1/problems/0.html").text
    assert "reward 0.900" in problem and "#2 (score 3.0000; reward 0.400)" in problem
    assert "other scores: lp-ref -3.0000" in problem and "other scores: lp-ref -5.0000" in problem


def test_a_checkpoint_shows_its_training_log_and_the_runs_that_evaluated_it(tmp_path: Path) -> None:
    ckpt = tmp_path / "results" / "checkpoints" / "math-passk<script>"
    ckpt.mkdir(parents=True)
    (ckpt / "train_config.json").write_text(json.dumps({"task": "synthetic", "objective": "passk", "steps": 3}))
    (ckpt / "bonbench_manifest.json").write_text(json.dumps({"training_hash": "t123"}))
    rows = [{"step": i, "reward": 0.1 * i, "kl_ref": 0.01 * i, "entropy": 1.0 - 0.1 * i, "loss": -i, EVIL[0]: i}
            for i in (1, 2, 3)]
    (ckpt / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "rew')  # still training
    by_path = write_synthetic_run(tmp_path / "results", [0.5, 0.5], n=2, model=str(ckpt), n_boot=5)
    moved = write_synthetic_run(tmp_path / "results", [0.5, 0.5], n=2, model="elsewhere/ckpt", n_boot=5)
    doc = json.loads((moved / "config.json").read_text())
    (moved / "config.json").write_text(json.dumps({**doc, "model_training": {"training_hash": "t123"}}))
    write_synthetic_run(tmp_path / "results", [0.5, 0.5], n=2, model="unrelated/model", n_boot=5)
    c = client(tmp_path / "results")
    home = c.get("/").text
    assert "<h2>Checkpoints</h2>" in home and "math-passk&lt;script&gt;" in home and "<td>2</td></tr>" in home
    (href,) = re.findall(r'href="(checkpoints/[^"]+)"', home)
    page = c.get("/" + href).text
    logged = re.findall(r'<h3 data-log="([^"]+)">', page)
    assert logged == ["reward", "kl_ref", "entropy", "loss", "&lt;script&gt;alert(1)&lt;/script&gt;"]
    assert "3 steps logged" in page  # the torn last line of a checkpoint still training is left out
    assert [len(p.split()) for p in re.findall(r'<polyline points="([^"]*)"', page)] == [3] * 5  # each by step
    assert sorted(re.findall(r'href="\.\./\.\./runs/([^/]+)/index.html" data-evaluation', page)) == sorted(
        [by_path.name, moved.name])
    assert_inert(page)
    assert f'href="../../{href}"' in c.get(f"/runs/{by_path.name}/index.html").text  # the run links back


# ---- the command line ------------------------------------------------------------------------------

def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no runs under") and err.count("\n") == 1
    toy(tmp_path / "r")
    assert main(["view", str(tmp_path / "r"), "--host", "0.0.0.0"]) == 1
    assert "SSH tunnel" in capsys.readouterr().err
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        assert main(["view", str(tmp_path / "r"), "--port", str(busy.getsockname()[1])]) == 1
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert err.startswith("error: port ") and "--port" in err and err.count("\n") == 1


def test_the_server_prints_its_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    import httpx

    toy(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "bonbench", "view", str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        assert "toy" in httpx.get(url.group(0)).text
        assert httpx.post(url.group(0)).status_code == 405
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "viewer stopped" in err and "Traceback" not in err


def test_the_static_bundle_opens_without_a_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toy(tmp_path / "r")
    out = tmp_path / "bundle"
    assert main(["view", str(tmp_path / "r"), "--static", str(out)]) == 0
    assert "4 pages" in capsys.readouterr().out
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["index.html", "runs/abc123/index.html", "runs/abc123/problems/0.html", "runs/abc123/problems/1.html"]
    for f in files:
        html = (out / f).read_text()
        assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing from the network
        for link in re.findall(r'href="([^"#]+)"', html):
            assert (out / f).parent.joinpath(link).resolve().is_file(), (f, link)  # every link opens from file://
    assert main(["view", str(tmp_path / "r"), "--static", str(tmp_path / "small"), "--limit", "1"]) == 0
    assert not (tmp_path / "small" / "runs" / "abc123" / "problems" / "1.html").exists()
    assert main(["view", str(tmp_path / "r"), "--static", str(tmp_path / "big"), "--max-mb", "0.001"]) == 1
    err = capsys.readouterr().err
    assert "--limit" in err and err.count("\n") == 1 and not list((tmp_path / "big").glob("*.html"))


def test_view_filters_runs_by_task_and_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toy(tmp_path)
    write_synthetic_run(tmp_path, [0.5, 0.5], n=2, n_boot=5)
    assert main(["view", str(tmp_path), "--task", "synthetic", "--static", str(tmp_path / "b"), "--no-cache"]) == 0
    assert not (tmp_path / "cache").exists()  # --no-cache: nothing kept
    home = (tmp_path / "b" / "index.html").read_text()
    assert "synthetic" in home and ">toy<" not in home
    assert main(["view", str(tmp_path), "--model", "nobody", "--static", str(tmp_path / "c")]) == 1
    assert "no run matches" in capsys.readouterr().err
