"""Sharded runs before `bonbench merge` in the viewer (issue 32).

A run made by `bonbench run --shard i/2` (tests/test_shard.py's toy task on a tiny local model) holds only
``shards/<i>-of-2/`` until it is merged, so it is no run yet: the runs page lists it with each
shard's slice, its samples so far and its own metrics, and the merge command; after `bonbench
merge` it shows as a run like any other."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_shard import run_shards

from bonbench.apps.cli import main
from bonbench.apps.viewer import command
from bonbench.apps.viewer.command import selected
from bonbench.apps.viewer.shards import find_sharded
from bonbench.apps.viewer.site import Site
from bonbench.apps.viewer.viewer_flags import ViewRequest


def test_a_sharded_run_is_listed_with_the_merge_command_until_merged(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    run_dir = run_shards(tmp_path / "results", 2, only=(1,))
    assert (run_dir / "shards" / "1-of-2" / "problems.json").is_file()  # the shard's own lines (docs/scale-out.md)
    built: list[Site] = []
    monkeypatch.setattr(command, "serve", lambda site, sock: built.append(site))
    capsys.readouterr()
    assert main(["view", str(tmp_path / "results"), "--port", "0"]) == 0  # no run yet, yet not "no runs"
    assert "1 sharded run(s) not merged yet" in capsys.readouterr().out
    page = built[0].render("index.html") or ""
    assert "Sharded runs not merged yet" in page and f"bonbench merge {run_dir}" in page and "1 of 2 shards" in page
    assert '<tr data-shard="1/2"><td>1/2</td><td>6</td>' in page  # 11 problems: 6 in shard 1, 5 in shard 2
    run_shards(tmp_path / "results", 2, only=(2,))
    page = Site([], built[0].texts, sharded=find_sharded([tmp_path / "results"])).render("index.html") or ""
    assert "2 of 2 shards" in page and '<tr data-shard="2/2"><td>2/2</td><td>5</td>' in page
    assert "pass@1 " in page and "maj@4 " in page  # each shard's own metrics
    assert main(["merge", str(run_dir)]) == 0
    assert (run_dir / "problems.json").is_file()  # written by the merge's scoring
    runs, _ = selected(ViewRequest(paths=(tmp_path / "results",)))
    assert [r.path for r in runs] == [run_dir] and not find_sharded([tmp_path / "results"])
