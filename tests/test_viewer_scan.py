"""The viewer's fast reading of row files (``bonbench.core.row_scan``, ``RowIndex``) and a big run's first open.

Every row file here mixes rows in the store's layout (read by the regexes) with rows the regexes
must leave to ``json`` (keys in another order, escapes in ids, NaN scores, blank and broken lines),
and the problems table computed from the index's columns is checked against the rows parsed one by
one (``problem_detail``), in blocks of every size."""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bonbench.apps.cli import main
from bonbench.apps.viewer import command
from bonbench.apps.viewer import site as site_module
from bonbench.apps.viewer.problems import ProblemRow, problem_detail, problem_table, sources
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site
from bonbench.core import row_index, row_scan
from bonbench.core.records import Grade, Sample, Score, to_row
from bonbench.core.row_index import RowIndex
from bonbench.core.row_scan import Codes, read_block
from bonbench.core.store import RunStore, atomic_write_json


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def line(row: dict[str, Any], *, reverse: bool = False, ascii_only: bool = False) -> str:
    """A row as the store writes it, or with its keys in reverse order (the regexes cannot read it)."""
    if reverse:
        row = dict(reversed(list(row.items())))
    return json.dumps(row, ensure_ascii=ascii_only) + "\n"


TRICKY = ['he said "n_tokens": 5, "finish_reason": "stop"}\n{"schema": 1, "problem_id": "x", "sample_idx": 9, ',
          "ünïcødé ∑ 🙂 and a backslash \\ and \\\" quote", '"problem_id": "p/1", "sample_idx": 0', ""]


def mixed_run(root: Path) -> Path:
    """A run whose every file mixes the store's layout with rows only json can read."""
    run = root / "runs" / "toy" / "m" / "h1"
    (run / "grades").mkdir(parents=True)
    (run / "scores").mkdir()
    pids = ["p/1", 'p/"2"', "é/3", "p/4"]
    samples, grades, scores = [], [], []
    for k, pid in enumerate(pids):
        for i in range(4):
            odd = (i + k) % 3 == 0  # every third row in another key order
            s = to_row(Sample(pid, i, TRICKY[(i + k) % len(TRICKY)], 10 * k + i, "stop", -0.5 * i))
            samples.append(line(s, reverse=odd, ascii_only=i == 2))
            right = (i + k) % 2 == 0
            answer = ["7", "ß", 'a "quoted" answer', None][(i * k) % 4]
            g = to_row(Grade(pid, i, "g", 2, None if pid == "p/4" else right, score=0.25 * i if pid == "p/4" else None,
                             answer=answer, detail={"correct": not right, "grading_id": "nested"}, grading_id="gid"))
            grades.append(line(g, reverse=odd))
            old = to_row(Grade(pid, i, "g", 1, not right, answer="old"))  # an older grader version: filtered out
            grades.append(line({k2: v for k2, v in old.items() if k2 != "grading_id"}))
            score = [0.5, float("nan"), float("-inf"), 0.5][(i + k) % 4]
            sc = to_row(Score(pid, i, "v", score, steps=(0.1, 0.2)))
            scores.append(line({k2: v for k2, v in sc.items() if k2 not in ("verifier_version", "verifier_fingerprint")}
                               if i % 2 else sc, reverse=i == 3))
            scores.append(line(to_row(Score(pid, i, "v", 99.0, verifier_version=7))))  # another version: filtered out
    samples.insert(5, "\n")  # a blank line
    samples.insert(9, "not json at all\n")
    samples.append(line(to_row(Sample("p/1", 0, "a duplicate: the first row wins", 999, "stop"))))
    (run / "samples.jsonl").write_text("".join(samples), encoding="utf-8")
    (run / "grades" / "g.jsonl").write_text("".join(grades), encoding="utf-8")
    (run / "scores" / "v.jsonl").write_text("".join(scores), encoding="utf-8")
    atomic_write_json(run / "config.json", {"config": {"task": "toy", "model": "m", "n": 4, "verifier": "v"}})
    atomic_write_json(run / "metrics.json", {
        "metrics": {"bon@2": {"value": 0.5, "ci95": [0, 1], "n_problems": 4, "verifier": "v", "verifier_version": 1,
                              "verifier_fingerprint": ""}},
        "grader": "g", "verifier": "v", "grading": {"grader": "g", "grader_version": 2, "grading_id": "gid"}})
    return run


def reference(run_dir: Path, pid: str) -> dict[str, Any]:
    """A problem's figures from its rows parsed one by one (the problem page's path)."""
    run = find_runs([run_dir])[0]
    views = problem_detail(sources(run), pid)
    graded = [v for v in views if v.grade is not None]
    values = [v.grade.value() for v in graded if v.grade is not None]
    votes = Counter(v.vote for v in graded if v.vote is not None)
    tokens = [v.n_tokens for v in views if v.n_tokens is not None]
    pick = next((v for v in views if v.picked), None)
    return {"n_samples": len(views), "n_graded": len(graded), "values": values,
            "n_right": sum(v.grade.correct is True for v in graded if v.grade is not None),
            "pick": None if pick is None else pick.sample_idx,
            "pick_score": math.nan if pick is None or pick.score is None else pick.score.score,
            "share": max(votes.values()) / len(graded) if votes else 0.0,
            "top": {a for a, c in votes.items() if c == max(votes.values())},
            "mean_tokens": sum(tokens) / len(tokens) if tokens else math.nan}


def same(row: ProblemRow, ref: dict[str, Any]) -> None:
    values = ref["values"]
    assert (row.n_samples, row.n_graded, row.n_right, row.pick) == (ref["n_samples"], ref["n_graded"], ref["n_right"],
                                                                    ref["pick"]), row.problem_id
    assert row.pass_rate == pytest.approx(sum(values) / len(values)) and row.best == max(values)
    assert row.pick_score == pytest.approx(ref["pick_score"], nan_ok=True)
    assert row.majority_share == pytest.approx(ref["share"]) and (row.majority in ref["top"] or not ref["top"])
    assert row.mean_tokens == pytest.approx(ref["mean_tokens"], nan_ok=True)


@pytest.mark.parametrize("block", [1 << 23, 97, 4096])
def test_the_table_from_the_index_matches_the_rows_parsed_one_by_one(tmp_path: Path, block: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields in another order, escaped quotes and unicode in ids, completions and answers, NaN and
    -Infinity scores, nested keys named like top-level ones, regrades and rescoring, duplicates, a
    blank and a broken line: the index's columns give the table the parsed rows give, in blocks of
    any size (97 bytes: every row is longer than a block)."""
    monkeypatch.setattr(row_index, "_BLOCK", block)
    run_dir = mixed_run(tmp_path)
    rows = {r.problem_id: r for r in problem_table(find_runs([run_dir])[0])}
    assert list(rows) == ["p/1", 'p/"2"', "é/3", "p/4"]
    for pid, row in rows.items():
        same(row, reference(run_dir, pid))
    assert rows["p/4"].rewards and rows["p/4"].pass_rate == pytest.approx((0 + 0.25 + 0.5 + 0.75) / 4)
    assert rows["p/1"].mean_tokens == pytest.approx((0 + 1 + 2 + 3) / 4)  # the duplicate's 999 is not the first row
    index = RowIndex(run_dir / "samples.jsonl", kind="samples").refresh()
    assert index.bad == 1 and [r["sample_idx"] for r in index.rows('p/"2"')] == [0, 1, 2, 3]
    assert index.keyed("p/1")[3]["completion"] == TRICKY[3]


def test_the_regexes_read_what_json_reads(tmp_path: Path) -> None:
    """A block in the store's layout, read by the regexes, gives what the same rows with their keys
    reversed give through json, field by field."""
    rows = [to_row(Grade(f"q/{k}", i, "g", 3, [True, False, None][i % 3], score=[None, 1e-5, -2.5][i % 3],
                         answer=["x", None, "ü\"\\"][i % 3], error="e" if i else None, grading_id=["", "a\"b"][i % 2]))
            for k in range(3) for i in range(5)]
    store_layout = "".join(line(r) for r in rows).encode("utf-8")
    reversed_keys = "".join(line(r, reverse=True) for r in rows).encode("utf-8")
    got = []
    for data in (store_layout, reversed_keys):
        answers, tags = Codes(), Codes()
        block = read_block(data, 100, "grades", answers, tags)
        got.append(([(p, a, b) for p, a, b in block.runs], list(block.offsets), list(block.idx),
                    [answers.values[c] if c >= 0 else None for c in block.columns["answer"]],
                    [tags.values[c] for c in block.columns["tag"]], list(block.columns["correct"]),
                    [None if math.isnan(x) else x for x in block.columns["score"]]))
    assert got[0][2:] == got[1][2:]
    assert got[0][0] == got[1][0] == [("q/0", 0, 5), ("q/1", 5, 10), ("q/2", 10, 15)]
    assert got[0][3][:3] == ["x", None, 'ü"\\'] and got[0][4][:2] == [(3, ""), (3, 'a"b')]


def test_a_row_appended_during_the_scan_waits_for_the_next_refresh(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(line(to_row(Sample("p/1", i, "x" * 50, 3, "stop"))) for i in range(6)), encoding="utf-8")
    monkeypatch.setattr(row_index, "_BLOCK", 150)
    real = row_scan.read_block
    appended: list[bool] = []

    def appending(*args: Any, **kw: Any) -> Any:
        if not appended:  # a writer appends a row, and half of the next, while the scan is running
            appended.append(True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line(to_row(Sample("p/2", 0, "new", 4, "stop"))) + '{"schema": 1, "probl')
        return real(*args, **kw)

    monkeypatch.setattr("bonbench.core.row_index.read_block", appending)
    index = RowIndex(path, kind="samples").refresh()
    assert list(index.problems) == ["p/1"] and len(index.problems["p/1"].idx) == 6 and not index.torn
    with pytest.warns(UserWarning, match="the last line is torn"):
        index.refresh()
    assert list(index.problems) == ["p/1", "p/2"] and index.changed == {"p/2"} and index.torn
    assert list(index.problems["p/2"].numbers) == [4.0]
    with open(path, "a", encoding="utf-8") as fh:  # the torn row ends; blanks after the last newline are no row
        fh.write('em_id": "p/3", "sample_idx": 0}\n   ')
    half = RowIndex(path, kind="samples").refresh(upto=700)
    assert not half.whole and list(half.problems) == ["p/1"] and 0 < half.indexed <= 700
    assert half.refresh(upto=10**9).whole and list(half.problems) == ["p/1", "p/2", "p/3"] and not half.torn


def big_run(root: Path, problems: int = 30) -> Path:
    store = RunStore(root / "runs" / "toy" / "m" / "big")
    store.write_config({"config": {"task": "toy", "model": "m", "n": 4, "verifier": "v"}})
    store.samples.append(Sample(f"b/{k}", i, "y" * 200, i, "stop") for k in range(problems) for i in range(4))
    store.grades("g").append(Grade(f"b/{k}", i, "g", 1, (k + i) % 3 == 0, answer=str(i % 2)) for k in range(problems)
                             for i in range(4))
    store.scores("v").append(Score(f"b/{k}", i, "v", float((k * i) % 5)) for k in range(problems) for i in range(4))
    return store.root


def test_a_big_run_opens_with_the_problems_read_so_far_and_fills_in(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A served run past BIG bytes not indexed yet: its page starts a reading thread and shows the
    problems read so far (each one whole), says how far the reading got and reloads; a problem shown
    opens while the reading goes on; the table ends whole, equal to the table read in one go."""
    run_dir = big_run(tmp_path)
    monkeypatch.setattr(site_module, "BIG", 1000)
    monkeypatch.setattr(site_module, "READ_SECONDS", 0.0)
    monkeypatch.setattr(site_module, "SLICE", 0.1)
    monkeypatch.setattr(row_index, "_BLOCK", 2000)
    monkeypatch.setattr("bonbench.apps.viewer.runs.MIN_SLICE", 1500)
    slices = threading.Semaphore(0)  # the test lets the reading thread take one slice at a time
    monkeypatch.setattr(site_module, "pause", slices.acquire)
    served = Site(find_runs([run_dir], keep=False), TaskTexts(None), progressive=True)
    (rid,) = served.runs
    address = f"runs/{rid}/index.html"
    first = served.render(address) or ""
    assert "still reading this run" in first and 'http-equiv="refresh"' in first and "<tr data-row" not in first
    for _ in range(3):
        slices.release()
    counts = [0]
    for _ in range(200):
        page = served.render(address) or ""
        counts.append(page.count("<tr data-row"))
        if counts[-1]:
            break
        threading.Event().wait(0.01)
    shown = counts[-1]
    assert 0 < shown < 30 and "still reading this run" in page
    assert served.render(f"runs/{rid}/problems/{shown - 1}.html") is not None  # a problem shown opens at once
    assert served.runs[rid].reading is not None  # ... without reading on
    later: list[str | None] = []
    waiting = threading.Thread(target=lambda: later.append(served.render(f"runs/{rid}/problems/29.html")))
    waiting.start()  # a problem not shown yet waits for the reading thread, holding no lock
    waiting.join(0.3)
    assert waiting.is_alive() and served.render(f"runs/{rid}/problems/0.html") is not None
    for _ in range(100):
        slices.release()
    served._readers[rid].join(30)
    waiting.join(30)
    assert later and later[0] is not None and "b/29" in later[0]
    last = served.render(address) or ""
    assert last.count("<tr data-row") == 30 and "still reading" not in last and 'http-equiv="refresh"' not in last
    whole = Site(find_runs([run_dir], keep=False), TaskTexts(None))
    assert whole.tables.table(whole.runs[rid]) == served.tables.table(served.runs[rid])
    again = Site(find_runs([run_dir], keep=False), TaskTexts(None), progressive=True)
    again.runs[rid].start_reading()
    assert again.render(f"runs/{rid}/problems/29.html") is not None  # not shown yet: read to the end first
    assert again.runs[rid].reading is None


def test_one_runs_page_does_not_wait_for_another_runs_reading(tmp_path: Path) -> None:
    big_run(tmp_path / "a")
    big_run(tmp_path / "b")
    served = Site(find_runs([tmp_path / "a", tmp_path / "b"], keep=False), TaskTexts(None), progressive=True)
    a, b = served.runs
    done: list[str | None] = []
    with served.locks[a]:  # run a's first reading holds its lock
        worker = threading.Thread(target=lambda: done.append(served.render(f"runs/{b}/index.html")))
        worker.start()
        worker.join(timeout=30)
        assert done and done[0] is not None  # run b's page came while a's lock was held
        blocked = threading.Thread(target=lambda: done.append(served.render(f"runs/{a}/index.html")))
        blocked.start()
        blocked.join(timeout=0.5)
        assert blocked.is_alive()  # a's own pages wait
    blocked.join(timeout=30)
    assert len(done) == 2 and done[1] is not None


def test_the_served_viewer_reads_a_big_run_slice_by_slice_and_the_bundle_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bonbench view` serves a progressive site; `--static` writes every run's whole table."""
    big_run(tmp_path)
    monkeypatch.setattr(site_module, "BIG", 1000)
    built: list[Site] = []
    monkeypatch.setattr(command, "serve", lambda site, sock: built.append(site))
    assert main(["view", str(tmp_path), "--port", "0"]) == 0
    assert built and built[0].progressive
    assert main(["view", str(tmp_path), "--static", str(tmp_path / "out")]) == 0
    (page,) = (tmp_path / "out" / "runs").glob("*/index.html")
    text = page.read_text(encoding="utf-8")
    assert text.count("<tr data-row") == 30 and "still reading" not in text and 'http-equiv="refresh"' not in text


def test_a_field_the_regexes_might_miss_is_read_by_json(tmp_path: Path) -> None:
    """Rows whose head is in the store's layout but whose optional fields are elsewhere or spelt
    otherwise (a grading_id before a space or a carriage return, a verifier_version after the steps),
    and a broken line whose number the regex would take: each reads as json reads it."""
    grade = to_row(Grade("g/1", 0, "g", 2, True, answer="4", grading_id="gid"))
    text = json.dumps(grade)
    grades = (text[:-1] + " }\n" + text.replace('"sample_idx": 0', '"sample_idx": 1')[:-1] + "}\r\n"
              + text.replace('"sample_idx": 0', '"sample_idx": 2') + "\n").encode()
    block = read_block(grades, 0, "grades", Codes(), tags := Codes())
    assert [tags.values[c] for c in block.columns["tag"]] == [(2, "gid")] * 3 and list(block.idx) == [0, 1, 2]
    score = {"schema": 1, "problem_id": "s/1", "sample_idx": 0, "verifier": "v", "score": 0.5, "steps": None,
             "verifier_version": 3, "verifier_fingerprint": "fp"}
    broken = '{"schema": 1, "problem_id": "s/1", "sample_idx": 1, "verifier": "v", "score": 1-2}\n'
    block = read_block((json.dumps(score) + "\n" + broken).encode(), 0, "scores", Codes(), tags := Codes())
    assert [tags.values[c] for c in block.columns["tag"]] == [(3, "fp")] and block.bad == 1


def test_rows_the_store_writes_are_read_by_the_regexes_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the pipeline writes (every field of today's records: prompt and reasoning tokens, a
    grader's error, detail and grading id, a PRM's steps, a judge's rationales and a verifier's version and fingerprint)
    never needs json: the fast path is the path real runs take."""
    store = RunStore(tmp_path / "run")
    store.samples.append([Sample("m/1", i, "Let $x=\\frac{1}{2}$.\n\"Quoted\" \\boxed{é}", 7, "length", -3.5, 12, 4)
                          for i in range(3)])
    store.grades("math").append([Grade("m/1", i, "math", 4, i == 1, answer="\\frac{1}{2}", error="timeout" if i else None,
                                       detail={"sandbox": {"stdout": "ok\n", "correct": True}}, grading_id="g1")
                                 for i in range(3)])
    store.scores("prm").append([Score("m/1", i, "prm", 0.25 * i, 2, "fp", steps=(0.1, 0.9), aggregation="min",
                                      tokens=33, calls=1, rationales=('a judge\'s "why"\n}', "2")) for i in range(3)])
    monkeypatch.setattr(row_scan, "_mixed", lambda *a: pytest.fail("a store row went to json"))
    samples = RowIndex(store.root / "samples.jsonl", kind="samples").refresh()
    grades = RowIndex(store.root / "grades" / "math.jsonl", kind="grades").refresh()
    scores = RowIndex(store.root / "scores" / "prm.jsonl", kind="scores").refresh()
    assert list(samples.problems["m/1"].numbers) == [7.0] * 3
    assert list(samples.problems["m/1"].columns["prompt_tokens"]) == [12.0] * 3
    assert list(scores.problems["m/1"].columns["tokens"]) == [33.0] * 3
    rows = grades.problems["m/1"]
    assert list(rows.columns["correct"]) == [0, 1, 0] and {grades.tags.values[t] for t in rows.columns["tag"]} == {(4, "g1")}
    assert grades.answers.values == ["\\frac{1}{2}"]
    assert list(scores.problems["m/1"].columns["score"]) == [0.0, 0.25, 0.5] and scores.tags.values == [(2, "fp")]


@pytest.mark.parametrize("block", [64, 1000, 8 << 20])
def test_one_problems_rows_are_found_by_their_head_alone(tmp_path: Path, block: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``RowIndex.of_problem`` finds exactly the rows whose line starts as the store writes one of that
    problem (in blocks of any size, a completion quoting a row head included), and no other."""
    run = mixed_run(tmp_path)
    monkeypatch.setattr(row_index, "_BLOCK", block)
    for name in ("samples.jsonl", "grades/g.jsonl", "scores/v.jsonl"):
        path = run / name
        whole = RowIndex(path).refresh()
        data = path.read_bytes()
        for pid in whole.problems:
            head = b', "problem_id": ' + json.dumps(pid, ensure_ascii=False).encode() + b', "sample_idx": '
            expected = [o for o in whole.problems[pid].offsets
                        if data.startswith(b'{"schema": ', o) and data.find(head, o, data.find(b"\n", o)) > o]
            found = RowIndex.of_problem(path, pid)
            got = list(found.problems[pid].offsets) if pid in found.problems else []
            assert got == expected and 0 < len(got) < len(whole.problems[pid].offsets) + 1, (name, pid)
            assert list(found.problems[pid].idx) == [json.loads(data[o:data.find(b"\n", o)])["sample_idx"] for o in got]


def test_token_counts_read_as_json_reads_them(tmp_path: Path) -> None:
    """samples' prompt_tokens and scores' tokens (what the compute recipe costs): in the store's
    layout by the regexes, absent or null as NaN, and elsewhere in a row (another key order, a key
    inside a nested object, a judge's rationales after them) as json reads them, block or line."""
    sample = to_row(Sample("a", 0, "x", 5, "stop", None, 40))
    lines = [sample, {k: v for k, v in sample.items() if k != "prompt_tokens"},
             {**sample, "sample_idx": 2, "prompt_tokens": None},
             {"schema": 1, "problem_id": "a", "sample_idx": 3, "prompt_tokens": 9, "completion": "", "n_tokens": 6,
              "finish_reason": "stop", "logprob": None}]
    for rows, want in ((lines, [40.0, math.nan, math.nan, 9.0]), ([lines[0], lines[2]], [40.0, math.nan])):
        block = read_block("".join(json.dumps(r) + "\n" for r in rows).encode(), 0, "samples", Codes(), Codes())
        assert np.array_equal(list(block.columns["prompt_tokens"]), want, equal_nan=True)
    score = to_row(Score("a", 0, "v", 0.5, 2, "fp", tokens=33, calls=1))
    lines = [score, to_row(Score("a", 1, "v", 0.5, tokens=7, calls=1, rationales=("why, \"tokens\": 1}", "b"))),
             {k: v for k, v in score.items() if k not in ("tokens", "calls")},
             {**score, "sample_idx": 3, "detail": {"tokens": 99, "calls": 1}},
             {**score, "sample_idx": 4, "tokens": 11, "calls": None, "note": "after"}]
    block = read_block("".join(json.dumps(r) + "\n" for r in lines).encode(), 0, "scores", Codes(), Codes())
    assert np.array_equal(list(block.columns["tokens"]), [33.0, 7.0, math.nan, 33.0, 11.0], equal_nan=True)
    block = read_block("".join(json.dumps(r) + "\n" for r in lines[:2]).encode(), 0, "scores", Codes(), Codes())
    assert list(block.columns["tokens"]) == [33.0, 7.0]
