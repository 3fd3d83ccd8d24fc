"""Chow et al.'s training machinery in the trainer (math-reference §2.8): the learned value head, batch
advantage normalisation, KL annealing, STaR's rationalisation. Pure parts (the schedule, the hash,
the normalisation) need no model; the rest runs on the tiny random Gemma 3 of test_sampler_hf."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import Trainer, train
from bonbench.apps.trainer.rollout import failed_prompts, hinted, normalise_advantages
from bonbench.apps.trainer.setup import prepare_training
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample
from bonbench.plugins.samplers.scripted import ScriptedSampler


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("chow") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="rl_s", name="t", model=tiny, steps=2, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False, log_kl=False)
    base.update(kw)
    return TrainConfig(**base)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- KL annealing (no model)


def test_kl_schedule_values() -> None:
    cfg = TrainConfig(task="x", objective="rl_s", name="n", kl_coef=0.2, kl_schedule="linear", kl_coef_end=0.0,
                      kl_anneal_steps=100, kl_anneal_delay=10)
    got = [cfg.kl_at(s) for s in (0, 9, 10, 35, 60, 110, 500)]
    assert got == pytest.approx([0.2, 0.2, 0.2, 0.15, 0.1, 0.0, 0.0], abs=1e-15)
    up = TrainConfig(task="x", objective="rl_s", name="n", kl_coef=0.0, kl_schedule="linear", kl_coef_end=0.1,
                     kl_anneal_steps=4, kl_anneal_delay=0)
    assert [up.kl_at(s) for s in range(6)] == pytest.approx([0.0, 0.025, 0.05, 0.075, 0.1, 0.1])
    assert up.kl_active and not TrainConfig(task="x", objective="rl_s", name="n").kl_active
    const = TrainConfig(task="x", objective="rl_s", name="n", kl_coef=0.3, kl_coef_end=0.0)
    assert {const.kl_at(s) for s in range(0, 5000, 250)} == {0.3}  # constant ignores the annealing settings
    with pytest.raises(BonbenchError, match="--kl-coef-end"):
        TrainConfig(task="x", objective="rl_s", name="n", kl_schedule="linear")


def test_kl_schedule_is_in_the_hash_only_when_it_changes_outputs() -> None:
    base = dict(task="x", objective="rl_s", name="n", kl_coef=0.1)
    plain = TrainConfig(**base)
    # a config recorded before these settings existed: the same hash, and it resumes
    old = {k: v for k, v in plain.to_json().items() if k not in ("kl_schedule", "kl_coef_end", "kl_anneal_steps",
                                                                 "kl_anneal_delay", "value_lr", "adv_norm", "rationalize",
                                                                 "rollout_backend")}
    assert plain.differences(old) == []
    # under a constant KL the annealing settings change nothing, so they stay out
    inert = TrainConfig(**base, kl_anneal_steps=7, kl_anneal_delay=3, kl_coef_end=0.5)
    assert inert.training_hash() == plain.training_hash() and inert.differences(plain.to_json()) == []
    lin = TrainConfig(**base, kl_schedule="linear", kl_coef_end=0.0)
    assert lin.training_hash() != plain.training_hash()
    assert lin.differences(old) == ["kl_schedule", "kl_coef_end"]  # the annealing length and delay at their defaults
    other = TrainConfig(**base, kl_schedule="linear", kl_coef_end=0.0, kl_anneal_steps=7)
    assert other.training_hash() != lin.training_hash() and other.differences(lin.to_json()) == ["kl_anneal_steps"]
    # bookkeeping never enters
    assert TrainConfig(**base, steps=9, save_every=3).training_hash() == plain.training_hash()


# ---------------------------------------------------------------- advantage normalisation (no model)


def test_batch_normalisation_of_advantages() -> None:
    w = np.array([0.5, -0.25, 0.0, 0.2, 0.1, 1.0])  # rows 0-1: a group of 2; rows 2-4: of 3; row 5: a demonstration
    policy = np.array([True, True, True, True, True, False])
    G = np.array([2.0, 2.0, 3.0, 3.0, 3.0, 3.0])
    a = w[:5] * G[:5]
    got = normalise_advantages(w, policy, G, "batch")
    assert np.allclose(got[:5] * G[:5], (a - a.mean()) / a.std(), atol=1e-15) and got[5] == 1.0
    got = normalise_advantages(w, policy, G, "std")
    assert np.allclose(got[:5] * G[:5], a / a.std(), atol=1e-15) and np.all(np.sign(got) == np.sign(w))
    assert normalise_advantages(w, policy, G, "none") is w
    flat = normalise_advantages(np.full(3, 0.25), np.ones(3, bool), np.full(3, 4.0), "batch")
    assert np.all(flat == 0.0)


# ---------------------------------------------------------------- the value head (tiny model)


def _value_of_every_prompt(trainer: Trainer) -> np.ndarray:
    pol = trainer.policy
    ids = [pol.encode(trainer.task.render(p, trainer.style), "")[0] for p in trainer.task.problems]
    assert trainer.value is not None
    return trainer.value.predict(pol.prompt_features(ids))


def test_value_head_learns_known_success_rates(tiny: str, tmp_path: Path) -> None:
    """The head on the tiny model's features of the 8 tiny-task prompts, trained as the loop trains it
    (one AdamW step per round on each group's mean 0/1 reward, 32 Bernoulli draws per prompt at a known
    rate), ends near each prompt's rate. tiny_rates' grader draws the same way in the loop; here the
    draws are direct, so the test takes seconds, not one policy step per round."""
    trainer = Trainer(prepare_training(_cfg(tiny, tmp_path, task="tiny_rates", objective_options={"baseline": "value"},
                                   value_lr=0.005)))
    assert trainer.value is not None
    pol = trainer.policy
    features = pol.prompt_features([pol.encode(trainer.task.render(p, trainer.style), "")[0] for p in trainer.task.problems])
    assert features.shape == (8, pol.hidden_size)
    rates = np.array(trainer_plugin.RATES)
    assert np.all(trainer.value.predict(features) == 0.0)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        trainer.value.update(features, (rng.random((8, 32)) < rates[:, None]).mean(1).tolist())
    err = np.abs(trainer.value.predict(features) - rates)
    assert err.max() < 0.05, err


def test_loop_uses_the_value_read_before_the_step(tiny: str, tmp_path: Path) -> None:
    """rl_s --baseline value through the loop: each prompt's weights are (R_i - V(x)) / G with one V per
    prompt, V = 0 at the first step (the head starts at 0), and the logged value is their mean."""
    folder = train(_cfg(tiny, tmp_path, objective_options={"baseline": "value"}, value_lr=0.1))
    log = _rows(folder / "log.jsonl")
    assert all({"value", "value_loss", "value_target"} <= set(r) for r in log) and log[0]["value"] == 0.0
    rollouts = _rows(folder / "rollouts.jsonl")
    for step in (0, 1):
        implied = {}
        for r in (r for r in rollouts if r["step"] == step):
            implied.setdefault(r["problem_id"], set()).add(round(r["reward"] - 4 * r["weight"], 6))
        assert all(len(v) == 1 for v in implied.values())  # one V per prompt, whatever the sample
        assert np.mean([v.pop() for v in implied.values()]) == pytest.approx(log[step]["value"], abs=1e-6)
    assert log[1]["value"] != 0.0  # the head learnt from step 0


def test_resume_restores_the_value_head_and_its_optimizer_exactly(tiny: str, tmp_path: Path) -> None:
    """Two steps at once, or one step then a resumed second: the same value head, the same AdamW state,
    the same policy weights (bon_rlb with p from the value, whose weights depend on the head)."""
    kw = dict(objective="bon_rlb", objective_options={"N": 2, "p_source": "value"}, value_lr=0.1, steps=2)
    whole = train(_cfg(tiny, tmp_path / "whole", **kw))
    train(_cfg(tiny, tmp_path / "split", **{**kw, "steps": 1}))
    split = train(_cfg(tiny, tmp_path / "split", **kw))
    a = torch.load(whole / "training_state" / "optimizer.pt", weights_only=False)["value"]
    b = torch.load(split / "training_state" / "optimizer.pt", weights_only=False)["value"]
    for k in a["head"]:
        assert torch.equal(a["head"][k], b["head"][k])
    assert a["optimizer"]["state"][0]["step"] == 2 and any(a["head"]["bias"] != 0)
    for (ka, sa), (kb, sb) in zip(a["optimizer"]["state"].items(), b["optimizer"]["state"].items(), strict=True):
        assert ka == kb and all(torch.equal(sa[n], sb[n]) for n in sa)
    wa = torch.load(whole / "training_state" / "weights.pt", weights_only=True)
    wb = torch.load(split / "training_state" / "weights.pt", weights_only=True)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    la, lb = _rows(whole / "log.jsonl"), _rows(split / "log.jsonl")
    assert [r["value"] for r in la] == [r["value"] for r in lb] and la[0]["value"] == 0.0


def test_kl_coefficient_is_logged_per_step_and_adv_norm_trains(tiny: str, tmp_path: Path) -> None:
    folder = train(_cfg(tiny, tmp_path, steps=3, kl_coef=0.2, kl_schedule="linear", kl_coef_end=0.0, kl_anneal_steps=2,
                        kl_anneal_delay=1, kl_anchor="ema", adv_norm="batch"))
    log = _rows(folder / "log.jsonl")
    assert [r["kl_coef"] for r in log] == pytest.approx([0.2, 0.2, 0.1])
    assert all("kl_anchor" in r for r in log)
    rollouts = [r for r in _rows(folder / "rollouts.jsonl") if r["step"] == 0]
    adv = np.array([r["weight"] * 4 for r in rollouts])
    if adv.std() > 0:  # whitened over the step's 8 samples
        assert abs(adv.mean()) < 1e-6 and adv.std() == pytest.approx(1.0, abs=1e-6)


# ---------------------------------------------------------------- STaR rationalisation


def test_rationalisation_trains_on_hinted_successes_without_the_hint(tiny: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted policy that fails every plain prompt and answers "a" when the prompt carries the hint:
    every prompt is rationalised, the correct rationalisations are trained on (weight 1/G) with the plain
    prompt, and they are stored as keyed rollout rows marked rationale."""
    trainer = Trainer(prepare_training(_cfg(tiny, tmp_path, objective="star", rationalize=True, steps=1)))
    seen: list[str] = []

    def complete(pid: str, idx: int) -> str:
        # indices 0..3 are the policy's samples, 4..7 the hinted re-samples (two of them right)
        return "a b" if idx >= 4 and idx % 2 == 0 else "b a"

    monkeypatch.setattr(trainer.policy, "sampler", lambda seed, batch_size=64, reference=False: _RecordingSampler(complete, seen))
    captured: dict[str, Any] = {}
    optimise = trainer._optimise

    def spy(pairs, weights, groups, kl_coef, totals=None):
        captured.update(pairs=pairs, weights=weights)
        return optimise(pairs, weights, groups, kl_coef, totals)

    monkeypatch.setattr(trainer, "_optimise", spy)
    trainer.train()
    folder = tmp_path / "checkpoints" / "t"
    (log,) = _rows(folder / "log.jsonl")
    assert log["rationalized"] == 2 and log["rationales"] == 4  # 2 prompts, 2 of 4 hinted samples right
    rows = _rows(folder / "rollouts.jsonl")
    rats = [r for r in rows if r.get("rationale")]
    assert len(rats) == 4 and all(r["expert"] and r["reward"] == 1.0 and r["weight"] == 0.25 for r in rats)
    assert {r["sample_idx"] for r in rats} == {4, 6}  # after the policy's indices 0..3: keys stay unique
    assert all(r["weight"] == 0.0 for r in rows if not r.get("rationale"))
    # the first call asked for the plain prompts, the second for the hinted ones
    assert len(seen) == 4 and not any("Hint" in t for t in seen[:2])
    assert all("(Hint: the final answer is a.)" in t for t in seen[2:])
    # trained with the plain prompt: the rationale's pair starts with the same prompt ids as a plain sample's
    pol = trainer.policy
    for r in rats:
        prob = next(p for p in trainer.task.problems if p.id == r["problem_id"])
        want = pol.encode(trainer.task.render(prob, trainer.style), r["completion"])
        assert want in captured["pairs"]
        assert pol.encode(trainer.task.render(hinted(prob), trainer.style), r["completion"]) not in captured["pairs"]


class _RecordingSampler(ScriptedSampler):
    """A scripted sampler that records the prompt texts it was asked for."""

    def __init__(self, script: Any, seen: list[str]) -> None:
        super().__init__(script)
        self.seen = seen

    def generate(self, requests, params):
        self.seen.extend(r.prompt.text for r in requests)
        return super().generate(requests, params)

    def close(self) -> None:
        pass


def test_failed_prompts_are_those_without_a_correct_policy_sample() -> None:
    probs = [Problem("p/0", "x", "a"), Problem("p/1", "y", "a")]
    samples = [Sample("p/0", 0, "b", 1, "stop"), Sample("p/0", 1, "a", 1, "stop"), Sample("p/1", 0, "b", 1, "stop"),
               Sample("p/1", 1, "a", 1, "stop")]  # p/1's correct row is a demonstration (index >= per)
    grades = {s.key: Grade(s.problem_id, s.sample_idx, "g", 1, correct=s.completion == "a") for s in samples}
    assert [p.id for p in failed_prompts(probs, samples, {"p/0": 2, "p/1": 1}, grades)] == ["p/1"]
    assert hinted(probs[0]).input == "x\n\n(Hint: the final answer is a.)" and hinted(probs[0]).id == "p/0"


@pytest.mark.parametrize("args, message", [
    (["--objective", "rl_s", "--rationalize"], "use it with --objective star"),
    (["--objective", "star", "--rationalize", "--task", "tiny_nogold"], "has no gold answers"),
    (["--objective", "rl_s", "--kl-schedule", "linear"], "--kl-coef-end"),
    (["--objective", "test_rloo", "--baseline", "value"], "has no --baseline"),
    (["--objective", "rl_s", "--baseline", "critic"], "unknown baseline 'critic'"),
    (["--objective", "bon_rl_s", "--p-source", "value"], "has no --p-source"),
])
def test_bad_input_is_one_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                               message: str) -> None:
    base = ["train", "--task", "tiny_train", "--name", "x", "--model", tiny, "--out", str(tmp_path), "--steps", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
