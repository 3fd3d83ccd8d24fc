"""The runner's sampler seam (``run.plan.plan(req, sampler=...)``): a sampler object handed to the
runner (the trainer's live policy) makes the same run as one built by name, in the same run
directory format, re-scorable with `bonbench score` and readable by `bonbench report`; the run id
hashes the object's model and fingerprint, so two steps of a live policy never share a folder."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.apps.cli import main
from bonbench.core import models
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Sample
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run import plan as run_plan
from bonbench.run.execute import execute
from bonbench.run.request import RunRequest


@pytest.fixture
def toy_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy model behind every backend built by name: no real model is loaded."""
    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))


class Given(ScriptedSampler):
    """The toy model as an object in memory, counting what the runner asks of it."""

    def __init__(self, fingerprint: str = "toy") -> None:
        super().__init__(toy_plugin.toy_answer, model="toy-model", fingerprint=fingerprint)
        self.drawn = 0
        self.closed = False

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        for chunk in super().generate(requests, params):
            self.drawn += len(chunk)
            yield chunk

    def close(self) -> None:
        self.closed = True


def _request(out: Path) -> RunRequest:
    return RunRequest(task="toy", metrics=("pass@1,4", "bon@4"), verifier="oracle", backend="hf", out=out)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


def test_a_given_sampler_makes_the_run_built_by_name(tmp_path: Path, toy_engine: None,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    by_name = execute(run_plan.plan(_request(tmp_path / "a")))
    given = Given()
    handed = execute(run_plan.plan(_request(tmp_path / "b"), sampler=given))
    a, b = by_name.runs[0].store.root, handed.runs[0].store.root
    assert given.drawn == 12 * 4 and not given.closed  # it sampled every key, and its owner closes it
    assert a.relative_to(tmp_path / "a") == b.relative_to(tmp_path / "b")  # the same run id
    assert _files(a) == _files(b)  # samples, grades and scores, row for row
    config_a, config_b = (json.loads((root / "config.json").read_text()) for root in (a, b))
    assert config_a["config"] == config_b["config"]
    assert by_name.docs[0]["metrics"] == handed.docs[0]["metrics"]
    # a normal run: re-scored without sampling, and reported
    assert main(["score", str(b), "--metric", "maj@2"]) == 0
    assert "maj@2" in json.loads((b / "metrics.json").read_text())["metrics"]
    capsys.readouterr()
    assert main(["report", str(b)]) == 0
    assert "pass@4" in capsys.readouterr().out
    assert given.drawn == 12 * 4


def test_the_run_id_names_the_weights_the_given_sampler_draws_from(tmp_path: Path, toy_engine: None) -> None:
    roots = {fp: run_plan.plan(_request(tmp_path), sampler=Given(fp)).runs[0].store.root
             for fp in ("ckpt-a:step-2", "ckpt-a:step-4")}
    assert len(set(roots.values())) == 2  # two steps of one live policy: two run directories
    assert run_plan.plan(_request(tmp_path), sampler=Given("ckpt-a:step-2")).runs[0].store.root == roots["ckpt-a:step-2"]


@pytest.mark.parametrize("change, match", [
    ({"model": "other"}, "given sampler samples 'toy-model'"),
    ({"ray": "local"}, "drop --ray"),
    ({"metrics": ("pass@1", "kl")}, "kl loads the policy's weights by name"),
    ({"backend": "scripted"}, "either samples or a sampler"),
])
def test_what_a_given_sampler_refuses(tmp_path: Path, toy_engine: None, change: dict[str, Any], match: str) -> None:
    req = dataclasses.replace(_request(tmp_path), **change)
    with pytest.raises(BonbenchError, match=match):
        run_plan.plan(req, sampler=Given())
    assert not (tmp_path / "runs").exists()
