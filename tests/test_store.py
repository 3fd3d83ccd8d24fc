"""The run-directory rule: ``store.find_run_dirs`` finds what the CLI's report/list and the analysis
commands read, and skips what merely looks like a run (a model folder's config.json, a sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.rundir import expand_run_dirs
from bonbench.apps.analysis.synthetic import write_sweep_file, write_synthetic_run
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.core.store import find_run_dirs, is_run_dir


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    """A results tree with one scored run, one sampled-but-unscored run, a model folder and a sweep."""
    root = tmp_path / "results"
    scored = write_synthetic_run(root, np.array([0.2, 0.7]), n=2, task="t", model="org/scored", n_boot=10)
    unscored = root / "runs" / "t" / "org--unscored" / "abc123def456"
    unscored.mkdir(parents=True)
    (unscored / "config.json").write_text(json.dumps({"hash": "abc123def456", "config": {"task": "t"}}))
    (unscored / "samples.jsonl").write_text("")
    # an HF checkpoint folder kept under the results tree: a config.json, but not a run
    model_dir = root / "checkpoints" / "step-10"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["Gemma3ForCausalLM"]}))
    write_sweep_file(root / "sweeps" / "t" / "s1", [scored])
    return {"root": root, "scored": scored, "unscored": unscored, "model_dir": model_dir}


def test_find_run_dirs_rule(tree: dict[str, Path]) -> None:
    assert find_run_dirs(tree["root"]) == sorted([tree["scored"], tree["unscored"]])
    assert find_run_dirs(tree["root"], scored=True) == [tree["scored"]]
    # a run directory is its own (only) run; an unscored one is no scored run
    assert find_run_dirs(tree["unscored"]) == [tree["unscored"]]
    assert find_run_dirs(tree["unscored"], scored=True) == []
    assert not is_run_dir(tree["model_dir"]) and is_run_dir(tree["scored"], scored=True)
    with pytest.raises(BonbenchError, match="is not a directory"):
        find_run_dirs(tree["root"] / "nope")


def test_cli_and_analysis_use_the_same_rule(tree: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "runs", "--out", str(tree["root"])]) == 0
    listed = capsys.readouterr().out.splitlines()  # each run directory, then its strategy column
    assert [line.split()[0] for line in listed] == [str(p) for p in sorted([tree["scored"], tree["unscored"]])]
    assert main(["report", str(tree["root"])]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == str(tree["scored"]) and str(tree["unscored"]) not in out
    assert expand_run_dirs([tree["root"]]) == [tree["scored"]]
    assert main(["report", str(tree["unscored"])]) == 1
    assert "no scored run directories" in capsys.readouterr().err


# ------------------------------------------------------------------------ torn and damaged rows (issue 24)


def _samples_table(tmp_path: Path):
    from bonbench.core.records import Sample
    from bonbench.core.store import JsonlTable

    return JsonlTable(tmp_path / "samples.jsonl", Sample), Sample


def _line(pid: str, idx: int) -> bytes:
    return (json.dumps({"problem_id": pid, "sample_idx": idx, "completion": "c", "n_tokens": 1,
                        "finish_reason": "stop"}) + "\n").encode()


def test_torn_last_line_is_dropped_with_a_warning_then_redone(tmp_path: Path) -> None:
    table, Sample = _samples_table(tmp_path)
    table.path.write_bytes(_line("p", 0) + _line("p", 1)[:20])  # killed mid-way through the second row
    with pytest.warns(UserWarning, match=r"samples.jsonl:2: the last line is torn \(an interrupted write\)"):
        assert list(table.read()) == [("p", 0)]
    table.append([Sample("p", 1, "c", 1, "stop")])  # the redo: the torn bytes are cut first
    assert table.path.read_bytes().startswith(_line("p", 0))  # the finished row is untouched
    assert list(table.read()) == [("p", 0), ("p", 1)] and table.path.read_bytes().count(b"\n") == 2


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path: Path) -> None:
    table, Sample = _samples_table(tmp_path)
    table.path.write_bytes(_line("p", 0) + _line("p", 1).rstrip(b"\n"))
    assert list(table.read()) == [("p", 0), ("p", 1)]
    table.append([Sample("p", 2, "c", 1, "stop")])  # the newline is restored, not the row cut
    assert list(table.read()) == [("p", 0), ("p", 1), ("p", 2)]


@pytest.mark.parametrize("bad, what", [(b'{"problem_id": "p", "sam\n', "is not valid JSON"),
                                       (b'{"problem_id": "p\xff", "sample_idx": 1}\n', "is not UTF-8"),
                                       (b"[1, 2]\n", "is not a row")])
def test_a_bad_line_in_the_middle_is_one_line_naming_file_and_line(tmp_path: Path, bad: bytes, what: str) -> None:
    table, _ = _samples_table(tmp_path)
    table.path.write_bytes(_line("p", 0) + bad + _line("p", 2))
    with pytest.raises(BonbenchError, match=rf"samples.jsonl:2: the (row|line) {what}.*; delete that line") as exc:
        table.read()
    assert "\n" not in str(exc.value)


def test_torn_non_utf8_tail_is_an_interrupted_write(tmp_path: Path) -> None:
    table, _ = _samples_table(tmp_path)
    table.path.write_bytes(_line("p", 0) + '{"problem_id": "é'.encode()[:-1])  # cut inside a UTF-8 character
    with pytest.warns(UserWarning, match="torn"):
        assert list(table.read()) == [("p", 0)]


def test_non_utf8_json_files_are_one_line(tmp_path: Path) -> None:
    from bonbench.core.store import read_run_json

    path = tmp_path / "metrics.json"
    path.write_bytes(b'{"metrics": "\xff"}')
    with pytest.raises(BonbenchError, match=r"metrics.json is not UTF-8 text .*restore it"):
        read_run_json(path)


def test_a_store_counts_what_it_read_and_appended(tmp_path: Path) -> None:
    """``RunStore.extents``: each row file's bytes and lines as the store last read and appended it;
    a torn line is not counted and its cut carries on, another writer's rows make the file unseen."""
    from bonbench.core.records import Sample
    from bonbench.core.store import Extent, RunStore

    store = RunStore(tmp_path)
    path = tmp_path / "samples.jsonl"
    path.write_bytes(_line("p", 0) + b"\n" + _line("p", 1)[:20])  # a blank line, then a torn one
    assert store.extents() == {}
    with pytest.warns(UserWarning, match="torn"):
        store.samples.read()
    head = len(_line("p", 0)) + 1
    assert store.extents() == {"samples.jsonl": Extent(head, 2, 1)}
    store.samples.append([Sample("p", 1, "c", 1, "stop")])  # the torn bytes are cut, then the row appended
    assert store.extents() == {"samples.jsonl": Extent(path.stat().st_size, 3, 2)}
    assert list(store.samples.read()) == [("p", 0), ("p", 1)] and store.extents()["samples.jsonl"].size == path.stat().st_size
    with open(path, "ab") as fh:  # another writer
        fh.write(_line("p", 2))
    store.samples.append([Sample("p", 3, "é", 1, "stop")])
    assert "samples.jsonl" not in store.extents()
    store.samples.read()
    assert store.extents() == {"samples.jsonl": Extent(path.stat().st_size, 5, 4)}
    store.samples.append([Sample("p", 4, "é ü", 1, "stop")])  # bytes, not characters, are counted
    assert store.extents() == {"samples.jsonl": Extent(path.stat().st_size, 6, 5)}
    store.grades("g").append([])  # a new file, appended to before any read: counted from its start
    assert store.extents()["grades/g.jsonl"] == Extent(0, 0, 0)
