"""A scored run's ``problems.json`` (``bonbench.pipeline.problem_summary``) and the viewer's use of it.

The pipeline writes each problem's line when it scores a run; the viewer takes its problems table
from that file while the row files are as they were (same sizes, same grader and verifier), so a
big run's whole table opens at once, and computes the table from the rows otherwise. Both ways
give the same table: the lines are ``summarize``'s either way."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path

import pytest
from test_viewer_scan import big_run

from bonbench.apps.cli import main
from bonbench.apps.viewer import site as site_module
from bonbench.apps.viewer import tables
from bonbench.apps.viewer.capture import caught
from bonbench.apps.viewer.problems import found_sources, problem_row, problem_table, sources, summary_rows
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site
from bonbench.core import row_index
from bonbench.core.records import Sample
from bonbench.core.store import RunStore
from bonbench.pipeline.problem_summary import SUMMARY, summaries, write_summary

PROBLEMS = ("test/algebra/1.json", "test/algebra/2.json")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def math_run(root: Path, data_dir: Path) -> Path:
    """A MATH run made by `bonbench run` (scripted backend, the MATH grader, the logprob verifier)."""
    answers = {PROBLEMS[0]: ["2", "2", "3", "2"], PROBLEMS[1]: ["\\frac{1}{2}", "7", "7", "0.5"]}
    rows = [{"problem_id": pid, "sample_idx": i, "completion": f"So the answer is $\\boxed{{{a}}}$.", "n_tokens": 10 + i,
             "finish_reason": "stop", "logprob": -1.0 - i} for pid, boxed in answers.items() for i, a in enumerate(boxed)]
    samples = root / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["run", "--task", "math", "--backend", "scripted", "--samples", str(samples), "--verifier", "logprob",
                 "--metric", "pass@2", "--metric", "maj@4", "--metric", "bon@4", "--n-boot", "20",
                 "--data-dir", str(data_dir), "--out", str(root / "results")]) == 0
    (found,) = [p.parent for p in (root / "results").rglob("metrics.json")]
    return found


def test_the_pipeline_writes_each_problems_line_and_the_viewer_takes_its_table_from_it(tmp_path: Path,
                                                                                        data_dir: Path) -> None:
    run_dir = math_run(tmp_path, data_dir)
    doc = json.loads((run_dir / SUMMARY).read_text())
    assert [p["problem_id"] for p in doc["problems"]] == list(PROBLEMS)
    assert doc["key"]["grader"] == "math" and doc["key"]["verifiers"] == ["logprob"]
    (run,) = find_runs([tmp_path / "results"], keep=False)
    from_file = summary_rows(run)
    assert from_file is not None
    src = sources(run)
    assert from_file == [problem_row(src, pid) for pid in PROBLEMS]  # the same table as from the rows
    first, second = from_file
    assert (first.n_right, first.majority, first.majority_right, first.pick, first.pick_right) == (3, "2", True, 0, True)
    # 1/2 and 0.5 are right and vote together; the two 7s tie with them, so the majority is a tie holding the right class
    assert (second.n_right, second.majority_ties, second.majority_right, second.mean_tokens) == (2, 2, None, 11.5)
    (fresh,) = find_runs([tmp_path / "results"], keep=False)
    assert Site([fresh], TaskTexts(None)).tables.table(fresh) == from_file
    assert not fresh._indexes  # the table read no row file


def test_rows_appended_after_scoring_make_the_file_stale(tmp_path: Path, data_dir: Path) -> None:
    """A sample appended since the scoring (a run sampled further) changes the samples file's size:
    the viewer computes the table from the rows, and counts the new sample."""
    run_dir = math_run(tmp_path, data_dir)
    RunStore(run_dir).samples.append([Sample(PROBLEMS[1], 4, "more", 31, "stop")])
    (run,) = find_runs([tmp_path / "results"], keep=False)
    assert summary_rows(run) is None
    table = Site([run], TaskTexts(None)).tables.table(run)
    assert table == problem_table(run) and table[1].n_samples == 5 and table[1].mean_tokens == 15.4


def test_a_big_run_with_its_summary_opens_whole_while_its_rows_are_read(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A served run past BIG bytes not indexed yet, with a current problems.json: its first page shows
    every problem at once and does not reload; a problem's page opens at once from its rows found by
    a byte search, the same page as once the rows are read; the viewer writes nothing into the run."""
    run_dir = big_run(tmp_path)
    store = RunStore(run_dir)
    write_summary(store, summaries(store.samples.read(), store.grades("g").read(), store.scores("v").read()), "g", "v")
    before = sorted(p.name for p in run_dir.rglob("*"))
    monkeypatch.setattr(site_module, "BIG", 1000)
    monkeypatch.setattr(site_module, "SLICE", 0.1)
    monkeypatch.setattr(row_index, "_BLOCK", 2000)
    monkeypatch.setattr("bonbench.apps.viewer.runs.MIN_SLICE", 1500)
    slices = threading.Semaphore(0)  # the reading thread takes a slice only when the test lets it
    monkeypatch.setattr(site_module, "pause", slices.acquire)
    served = Site(find_runs([run_dir], keep=False), TaskTexts(None), progressive=True)
    (rid,) = served.runs
    first = served.render(f"runs/{rid}/index.html") or ""
    assert first.count("<tr data-row") == 30 and 'http-equiv="refresh"' not in first
    assert "rows for the problem pages" in first and served.runs[rid].reading is not None
    early = served.render(f"runs/{rid}/problems/29.html") or ""  # its rows found by a byte search, not read yet
    assert "b/29" in early and served.runs[rid].reading is not None and 29 >= len(tables.ready(
        sources(served.runs[rid])))
    for _ in range(100):
        slices.release()
    served._readers[rid].join(30)
    assert served.runs[rid].reading is None
    assert served.render(f"runs/{rid}/problems/29.html") == early  # the same page once the rows are read
    scanned = Site(find_runs([run_dir], keep=False), TaskTexts(None))
    (run,) = scanned.runs.values()
    assert served.tables.table(served.runs[rid]) == problem_table(run)  # the file's table is the rows' table
    assert sorted(p.name for p in run_dir.rglob("*")) == before


def test_a_comparison_of_big_runs_not_read_yet_reloads_while_their_reading_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison of two big runs not indexed yet reads neither in the request: it shows the
    paired metrics, says how far each reading got and reloads; once both are read it lists the problems."""
    big_run(tmp_path / "a")
    big_run(tmp_path / "b")
    monkeypatch.setattr(site_module, "BIG", 1000)
    monkeypatch.setattr(site_module, "SLICE", 0.1)
    monkeypatch.setattr(row_index, "_BLOCK", 2000)
    monkeypatch.setattr("bonbench.apps.viewer.runs.MIN_SLICE", 1500)
    slices = threading.Semaphore(0)
    monkeypatch.setattr(site_module, "pause", slices.acquire)
    served = Site(find_runs([tmp_path / "a", tmp_path / "b"], keep=False), TaskTexts(None), progressive=True)
    a, b = served.runs
    address = f"compare/{a}/{b}/index.html"
    first = served.render(address) or ""
    assert f"still reading run {a}" in first and f"still reading run {b}" in first and 'http-equiv="refresh"' in first
    assert "Flipped problems (0)" in first and served.runs[a].reading is not None and served.runs[b].reading is not None
    later: list[str | None] = []
    waiting = threading.Thread(target=lambda: later.append(served.render(f"compare/{a}/{b}/problems/0.html")))
    waiting.start()  # a shared problem's page waits for both readings, holding no lock
    waiting.join(0.3)
    assert waiting.is_alive() and served.render(f"runs/{a}/index.html") is not None
    for _ in range(400):
        slices.release()
    for rid in (a, b):
        served._readers[rid].join(30)
    waiting.join(30)
    assert later and later[0] is not None and "b/0" in later[0]
    last = served.render(address) or ""
    assert "still reading" not in last and 'http-equiv="refresh"' not in last
    assert last.count('href="problems/') >= 30  # every shared problem listed


def test_warnings_are_captured_per_thread_without_a_shared_lock() -> None:
    """One thread's capture (a page, or a slice of a reading) does not wait for another's, and each
    gets its own warnings."""
    inside, release = threading.Event(), threading.Event()
    got: dict[str, list[str]] = {}

    def slow() -> None:
        warnings.warn("slow's own", stacklevel=1)
        inside.set()
        release.wait(10)

    worker = threading.Thread(target=lambda: got.setdefault("slow", caught(slow)[1]))
    worker.start()
    assert inside.wait(10)
    _, lines = caught(lambda: warnings.warn("quick's own", stacklevel=1))  # while slow's capture is open
    assert lines == ["quick's own"]
    release.set()
    worker.join(10)
    assert got["slow"] == ["slow's own"]


def test_a_problem_whose_rows_are_not_all_found_waits_for_the_reading(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A row the byte search cannot find (keys in another order: another writer's) leaves the count
    short of the summary's: the page is not drawn from the found rows, it waits for the reading."""
    run_dir = big_run(tmp_path)
    store = RunStore(run_dir)
    last = store.samples.path.read_text().splitlines(keepends=True)
    row = json.loads(last[-1])
    assert row["problem_id"] == "b/29"
    last[-1] = json.dumps(dict(reversed(list(row.items())))) + "\n"  # the last sample of b/29, keys reversed
    store.samples.path.write_text("".join(last))
    write_summary(store, summaries(store.samples.read(), store.grades("g").read(), store.scores("v").read()), "g", "v")
    monkeypatch.setattr(site_module, "BIG", 1000)
    monkeypatch.setattr(site_module, "SLICE", 0.1)
    monkeypatch.setattr(row_index, "_BLOCK", 2000)
    monkeypatch.setattr("bonbench.apps.viewer.runs.MIN_SLICE", 1500)
    slices = threading.Semaphore(0)
    monkeypatch.setattr(site_module, "pause", slices.acquire)
    served = Site(find_runs([run_dir], keep=False), TaskTexts(None), progressive=True)
    (rid,) = served.runs
    assert served.render(f"runs/{rid}/index.html") is not None
    (run,) = served.runs.values()
    summary = served.tables.table(run)
    assert found_sources(run, summary[29]) is None and found_sources(run, summary[28]) is not None
    later: list[str | None] = []
    waiting = threading.Thread(target=lambda: later.append(served.render(f"runs/{rid}/problems/29.html")))
    waiting.start()
    waiting.join(0.3)
    for _ in range(100):
        slices.release()
    served._readers[rid].join(30)
    waiting.join(30)
    assert later and later[0] is not None and later[0].count("data-sample=") == 4  # all four samples, once read
