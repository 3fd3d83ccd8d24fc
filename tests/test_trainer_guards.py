"""``--stop-if RULE`` (``apps/trainer/guards.py``) on a tiny random Gemma 3: a rule on a logged quantity stops the
run after the first step where it holds (bound chosen from an unguarded run's log), a held-out rule at the evaluation
whose paired CI against step 0 lies below 0 (grades scripted per step), reward_up_eval_down only when the training
reward also rose; each stop is one line and the manifest's "stopped"; rules that never hold change nothing
(torch.equal); a rule that does not parse, or reads what the run does not have, is one `error:` line before training."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model
from trainer_scripted_eval import SCRIPT, TRAIN_SOLVED, AtStep

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.guards import parse_rule
from bonbench.apps.trainer.loop import train

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("guards") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=4, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "training_state" / "weights.pt", weights_only=True)


def _same_steps(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    timing = {"seconds", "sample_s", "tokens_per_s"}
    return [{k: v for k, v in r.items() if k not in timing} for r in a] == [
        {k: v for k, v in r.items() if k not in timing} for r in b]


def test_the_grammar() -> None:
    assert parse_rule("entropy < 0.5").name == "entropy" and parse_rule("entropy<0.5").bound == 0.5
    kl = parse_rule("kl>30")
    assert (kl.kind, kl.name, kl.op, kl.bound) == ("log", "kl_ref", ">", 30.0)
    assert (parse_rule("eval:pass@1<step0").kind, parse_rule("eval:PASS@1<step0").name) == ("eval", "pass@1")
    assert parse_rule("reward_up_eval_down:maj@4").name == "maj@4"


def test_a_log_rule_stops_after_the_first_step_it_holds_and_no_rule_changes_nothing(
        tiny: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plain = train(_cfg(tiny, tmp_path / "plain"))
    log = _rows(plain / "log.jsonl")
    kl = [r["kl_ref"] for r in log]
    # the latest step whose KL exceeds every earlier one: a bound between them first holds there
    s = max(i for i in range(1, len(kl) - 1) if kl[i] > max(kl[:i]))
    bound = (kl[s] + max(kl[:s])) / 2
    rule = f"kl>{bound!r}"
    with caplog.at_level(logging.INFO, logger="bonbench.apps.trainer"):
        stopped = train(_cfg(tiny, tmp_path / "stopped", stop_if=("entropy<0", rule)))
    assert [r["step"] for r in _rows(stopped / "log.jsonl")] == list(range(s + 1))
    assert _same_steps(_rows(stopped / "log.jsonl"), log[:s + 1])
    manifest = json.loads((stopped / "bonbench_manifest.json").read_text())
    assert manifest["steps"] == s + 1 and manifest["stopped"]["rule"] == rule and manifest["stopped"]["step"] == s + 1
    reason = manifest["stopped"]["reason"]
    assert reason.startswith(f"--stop-if {rule}: kl_ref ") and reason.endswith(f"at step {s}")
    assert f"stopping after step {s + 1} of 4: {reason}" in caplog.messages
    # rules that never hold: the run of no rules, to the bit
    never = train(_cfg(tiny, tmp_path / "never", stop_if=("entropy<0", "kl>1e9")))
    a, b = _weights(plain), _weights(never)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _same_steps(_rows(never / "log.jsonl"), log)
    for folder in (plain, never):
        manifest = json.loads((folder / "bonbench_manifest.json").read_text())
        assert manifest["steps"] == 4 and "stopped" not in manifest and "keep_best" not in manifest


def test_a_held_out_metric_significantly_below_step_0_stops_at_that_evaluation(tiny: str, tmp_path: Path) -> None:
    SCRIPT.clear()
    SCRIPT.update({0: [1] * 8, 1: [1] * 7 + [0], 2: [1] + [0] * 7, 3: [0] * 8, 4: [0] * 8})
    folder = train(_cfg(tiny, tmp_path / "a", eval_task="scripted_eval", eval_every=1, eval_metrics=("pass@1",),
                        eval_n=1, stop_if=("eval:pass@1<step0",)), callbacks=[AtStep()])
    evals = _rows(folder / "evals.jsonl")
    assert [e["step"] for e in evals] == [0, 1, 2]  # step 1's -0.125 is noise (its interval reaches 0)
    assert evals[1]["vs_step0"]["pass@1"]["hi"] >= 0 > evals[2]["vs_step0"]["pass@1"]["hi"]
    stopped = json.loads((folder / "bonbench_manifest.json").read_text())["stopped"]
    assert stopped["step"] == 2 and stopped["rule"] == "eval:pass@1<step0"
    assert "pass@1 -0.875 [" in stopped["reason"] and stopped["reason"].endswith("vs step 0 at the evaluation of step 2")


@pytest.mark.filterwarnings("ignore:no prompt group carried a learning signal")  # scripted rewards: flat groups
@pytest.mark.parametrize("rewards, stops", [({0: False, 1: True}, True), ({}, False)])
def test_reward_up_eval_down_needs_both(tiny: str, tmp_path: Path, rewards: dict[int, bool], stops: bool) -> None:
    SCRIPT.clear()
    SCRIPT.update({0: [1] * 8, 2: [0] * 8, 4: [0] * 8})
    TRAIN_SOLVED.clear()
    TRAIN_SOLVED.update(rewards)
    folder = train(_cfg(tiny, tmp_path / "a", task="scripted_train", eval_task="scripted_eval", eval_every=2,
                        eval_metrics=("pass@1",), eval_n=1, stop_if=("reward_up_eval_down:pass@1",)),
                   callbacks=[AtStep()])
    log = _rows(folder / "log.jsonl")
    assert [r["reward"] for r in log[:2]] == [0.0, 1.0 if stops else 0.0]
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    if stops:
        assert manifest["steps"] == 2 and len(log) == 2
        assert manifest["stopped"]["reason"].startswith(
            "--stop-if reward_up_eval_down:pass@1: training reward 0.500 over steps 0..1 vs 0.000 at step 0 while pass@1 -1.000")
    else:
        assert manifest["steps"] == 4 and "stopped" not in manifest


@pytest.mark.parametrize("args, message", [
    (["--stop-if", "entropy<<1"], "--stop-if 'entropy<<1' does not parse; write QUANTITY<NUMBER"),
    (["--stop-if", "entropi<1"], "--stop-if 'entropi<1' does not parse"),
    (["--stop-if", "kl>big"], "--stop-if 'kl>big' does not parse"),
    (["--stop-if", "eval:pass@1<step0"], "--stop-if eval:pass@1<step0: it reads the held-out evaluation: add --eval-task"),
    (["--eval-task", "tiny_train", "--eval-metric", "pass@1", "--stop-if", "reward_up_eval_down:pass@2"],
     "--stop-if reward_up_eval_down:pass@2: the evaluation computes pass@1; name one of those"),
    (["--stop-if", "kl>3", "--no-log-kl"], "--no-log-kl turns off"),
    (["--eval-task", "tiny_train", "--eval-every", "0"], "--eval-every"),
])
def test_bad_rules_are_one_line_before_training(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                args: list[str], message: str) -> None:
    base = ["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
            "--out", str(tmp_path), "--steps", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoints").exists()


def test_an_eval_task_of_another_family_than_the_verifier_is_one_line(tiny: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the committed verifier folder, learned on math problems
    monkeypatch.setenv("BONBENCH_DATA_DIR", str(REPO.parent / "shared" / "data"))
    code = main(["train", "--task", "math", "--objective", "test_rloo", "--name", "x", "--model", tiny, "--out",
                 str(tmp_path), "--steps", "1", "--verifier", "learned:results/verifiers/math-gemma-3-270m-head",
                 "--eval-task", "tiny_train"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: --eval-task tiny_train: verifier 'math-gemma-3-270m-head' learned math problems, not task "
                          "'tiny_train'")
    assert not (tmp_path / "checkpoints").exists()
