"""The trainer on a tiny random Gemma 3: the loss gradient is exactly -(1/P) sum w grad log pi,
a run writes a loadable checkpoint with its manifest, SIGKILL + resume gives the weights of an
uninterrupted run, and bad input is one line. Real objectives come from the registry; the
loop treats them all alike."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import Trainer, train
from bonbench.apps.trainer.setup import prepare_training
from bonbench.core.errors import BonbenchError
from bonbench.core.models import resolve_model

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("trainer") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def test_loss_gradient_is_minus_weighted_score(tiny: str, tmp_path: Path) -> None:
    """The summed surrogate's gradient equals -(1/P) sum_i w_i grad log pi(y_i | x), computed here one
    token at a time with its own forward passes (no padding, no batching)."""
    trainer = Trainer(prepare_training(_cfg(tiny, tmp_path, micro_batch=3, temperature=0.8)))
    pol = trainer.policy
    pairs = [([1, 3, 4, 10], [3, 4]), ([1, 5], [6, 3, 3, 7]), ([1, 4, 4, 4, 5], []), ([1, 6], [9])]
    weights = np.array([0.5, -1.25, 2.0, 0.75])
    groups = [[0, 1], [2, 3]]
    stats = trainer._optimise_grads(pairs, weights, groups)
    got = [p.grad.clone() for p in pol.trainable()]
    for p in pol.trainable():
        p.grad = None
    total = torch.zeros((), dtype=torch.float64)
    for (prompt, comp), w in zip(pairs, weights, strict=True):
        for t in range(len(comp)):
            ids = torch.tensor([prompt + comp[:t]])
            logits = pol.lm(input_ids=ids).logits[0, -1].double() / 0.8
            total = total + w * torch.log_softmax(logits, -1)[comp[t]]
    (-total / len(groups)).backward()
    want = [p.grad for p in pol.trainable()]
    assert stats["grad_norm"] > 0
    for a, b in zip(got, want, strict=True):
        assert torch.allclose(a.double(), b.double(), atol=1e-6, rtol=1e-5)


def test_kl_and_entropy_terms_have_their_exact_gradients(tiny: str, tmp_path: Path) -> None:
    """beta (1/R) sum_t KL(pi || base) - c (1/R) sum_t H(pi): against a per-token reference
    computed one prefix at a time, with the LoRA weights moved off zero so the KL is not flat."""
    beta, c = 0.3, 0.2
    trainer = Trainer(prepare_training(_cfg(tiny, tmp_path, micro_batch=2, kl_coef=beta, entropy_coef=c)))
    pol = trainer.policy
    torch.manual_seed(5)
    with torch.no_grad():
        for p in pol.trainable():
            p.add_(0.3 * torch.randn_like(p))
    pairs = [([1, 3, 4], [3, 4, 5]), ([1, 5], [6]), ([1, 4, 4], [7, 7])]
    weights = np.zeros(3)  # only the KL and entropy terms
    trainer._optimise_grads(pairs, weights, [[0, 1, 2]])
    got = [p.grad.clone() for p in pol.trainable()]
    for p in pol.trainable():
        p.grad = None
    total = torch.zeros((), dtype=torch.float64)
    for prompt, comp in pairs:
        for t in range(len(comp)):
            ids = torch.tensor([prompt + comp[:t]])
            lp = torch.log_softmax(pol.lm(input_ids=ids).logits[0, -1].double(), -1)
            with torch.no_grad(), pol.lm.disable_adapter():
                ref = torch.log_softmax(pol.lm(input_ids=ids).logits[0, -1].double(), -1)
            total = total + beta * (lp.exp() * (lp - ref)).sum() + c * (lp.exp() * lp).sum()
    (total / len(pairs)).backward()
    for a, b in zip(got, [p.grad for p in pol.trainable()], strict=True):
        assert torch.allclose(a.double(), b.double(), atol=1e-6, rtol=1e-5)


def test_a_run_writes_a_loadable_checkpoint(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = train(_cfg(tiny, tmp_path, kl_coef=0.1, log_grad_var=True))
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    assert manifest["steps"] == 3 and manifest["objective"] == "test_rloo" and len(manifest["log"]) == 3
    assert manifest["base"]["fingerprint"] == resolve_model(tiny).fingerprint and manifest["task"]["split"] == "train"
    assert manifest["config"]["kl_coef"] == 0.1 and manifest["adapter"]["kind"] == "lora"
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 1, 2]
    assert all({"reward", "kl_ref", "entropy", "grad_norm", "grad_var", "tokens_per_s", "seconds"} <= set(r) for r in log)
    rollouts = [json.loads(line) for line in (folder / "rollouts.jsonl").read_text().splitlines()]
    keys = [(r["step"], r["problem_id"], r["sample_idx"]) for r in rollouts]
    assert len(keys) == len(set(keys)) == 3 * 2 * 4
    resolved = resolve_model(str(folder))
    assert not resolved.is_chat and resolved.fingerprint != resolve_model(tiny).fingerprint
    assert resolved.fingerprint.endswith(manifest["weights_sha256"][:16])
    # the checkpoint evaluates like any model
    assert main(["run", "--task", "tiny_train", "--model", str(folder), "--backend", "hf", "--metric", "pass@1,2",
                 "--dtype", "float32", "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    run_cfg = json.loads((run_dir / "config.json").read_text())
    assert run_cfg["config"]["model"] == str(folder)
    # the run records what its checkpoint was trained with (reports group checkpoints by method)
    assert run_cfg["model_training"] == {"name": folder.name, "objective": "test_rloo", "objective_options": {},
                                         "training_hash": manifest["training_hash"], "base": manifest["base"]["name"]}
    # bonbench plot draws the training curves of a checkpoint folder
    assert main(["plot", str(folder), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [r["step"] for r in report["training"]["logs"]["t"]] == [0, 1, 2]
    assert (tmp_path / "report" / "training_curves.png").stat().st_size > 0
    # the weights moved: the merged checkpoint differs from the base
    from safetensors.torch import load_file

    trained = load_file(str(folder / "model.safetensors"))
    base = load_file(str(Path(tiny) / "model.safetensors"))
    assert any(not torch.equal(trained[k].float(), base[k].float()) for k in base)


def _state(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "training_state" / "weights.pt", weights_only=True)


def test_sigkill_then_resume_equals_an_uninterrupted_run(tiny: str, tmp_path: Path) -> None:
    args = ["train", "--task", "tiny_train", "--objective", "test_rloo", "--model", tiny, "--steps", "5",
            "--prompts-per-step", "2", "--group", "4", "--save-every", "1", "--dtype", "float32", "--lr", "0.05",
            "--warmup", "2", "--kl-coef", "0.05", "--kl-anchor", "ema", "--name", "run"]
    cmd = [sys.executable, str(HERE / "run_train_cli.py"), "--"]
    whole = subprocess.run(cmd + args + ["--out", str(tmp_path / "whole")], capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed_out = tmp_path / "killed"
    log = killed_out / "checkpoints" / "run" / "log.jsonl"
    proc = subprocess.Popen(cmd + args + ["--out", str(killed_out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    folder = killed_out / "checkpoints" / "run"
    assert 1 <= int(json.loads((folder / "training_state" / "state.json").read_text())["step"]) < 5
    assert not (folder / "bonbench_manifest.json").exists()
    with pytest.raises(BonbenchError, match="has no bonbench_manifest.json"):
        resolve_model(str(folder))
    resumed = subprocess.run(cmd + args + ["--out", str(killed_out)], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = _state(tmp_path / "whole" / "checkpoints" / "run"), _state(folder)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("args, message", [
    (["--objective", "nope"], "unknown objective 'nope'"),
    (["--objective", "test_needs_k", "--verifier", "oracle", "--group", "4"], "at least 6 samples"),
    (["--objective", "test_needs_k", "--group", "8"], "needs a verifier"),
    (["--objective", "test_rloo", "--k", "4"], "has no --k"),
    (["--objective", "test_rloo", "--task", "tiny_notrain"], "has no train split"),
    (["--objective", "test_rloo", "--lora-rank", "0"], "--lora-rank"),
])
def test_bad_input_is_one_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                               message: str) -> None:
    base = ["train", "--task", "tiny_train", "--name", "x", "--model", tiny, "--out", str(tmp_path), "--steps", "1"]
    # later flags win in argparse: the case's own --task / --objective replace the defaults
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_resume_with_other_settings_is_refused(tiny: str, tmp_path: Path) -> None:
    train(_cfg(tiny, tmp_path, steps=1))
    with pytest.raises(BonbenchError, match=r"other settings \(lr\)"):
        train(_cfg(tiny, tmp_path, steps=2, lr=1e-3))
    folder = train(_cfg(tiny, tmp_path, steps=2))  # more steps: resumes
    assert json.loads((folder / "bonbench_manifest.json").read_text())["steps"] == 2


@pytest.mark.slow
def test_real_lora_step_on_gemma_writes_a_checkpoint_bonbench_runs(data_dir: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """CI's real training step: LoRA on the embedded Gemma 3 270M, IMDB rewards from the offline
    classifier, two steps with a tiny batch; the checkpoint then runs through `bonbench run`."""
    args = ["train", "--task", "imdb", "--objective", "passk", "--k", "2", "--group", "2", "--prompts-per-step", "1",
            "--steps", "2", "--max-tokens", "8", "--lora-rank", "4", "--lr", "1e-3", "--warmup", "0", "--kl-coef", "0.05",
            "--name", "ci-smoke", "--data-dir", str(data_dir), "--out", str(tmp_path)]
    assert main(args) == 0
    folder = Path(capsys.readouterr().out.strip().splitlines()[-1])
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    assert manifest["base"]["name"] == "gemma-3-270m" and manifest["steps"] == 2 and manifest["adapter"]["rank"] == 4
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert len(log) == 2 and all(np.isfinite(r["grad_norm"]) and 0 <= r["reward"] <= 1 for r in log)
    assert main(["run", "--task", "imdb", "--model", str(folder), "--backend", "hf", "--limit", "2", "--n", "2",
                 "--metric", "mean,max@2", "--max-tokens", "8", "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((run_dir / "metrics.json").read_text())["metrics"]["mean"]["n_problems"] == 2


@pytest.mark.parametrize("objective, extra", [
    ("sft", {}), ("star", {}), ("bon_sft", {"objective_options": {"N": 2}}), ("bon_rl_s", {"objective_options": {"N": 2}}),
    ("bon_rl_v", {"objective_options": {"N": 2}, "verifier": "logprob"}), ("bon_rlb", {"objective_options": {"N": 2}}),
    ("bon_rlb_p", {"objective_options": {"N": 2}}), ("vbon", {"objective_options": {"N": 2}, "ref_samples": 3}),
    ("vbon_l", {"objective_options": {"N": 2}, "ref_samples": 3}), ("bonbon", {"objective_options": {"N": 2}}),
    ("kl_rl", {}), ("majk", {"objective_options": {"k": 2}}), ("softmaxk", {"objective_options": {"k": 2}}),
    ("mean", {"objective_options": {"normalise": "grpo", "baseline": "mean"}}),
])
def test_every_objective_trains_a_step_with_what_it_needs(tiny: str, tmp_path: Path, objective: str,
                                                          extra: dict[str, Any]) -> None:
    """The loop gives each objective its needs (expert rows, verifier scores, log-probabilities,
    reference rewards, answers) and takes a finite step."""
    folder = train(_cfg(tiny, tmp_path, objective=objective, steps=1, **extra))
    (row,) = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert np.isfinite(row["grad_norm"]) and np.isfinite(row["weight_abs_mean"])
    rollouts = [json.loads(line) for line in (folder / "rollouts.jsonl").read_text().splitlines()]
    experts = [r for r in rollouts if r["expert"]]
    needs_expert = objective in ("sft", "bon_sft")
    assert len(experts) == (2 if needs_expert else 0)  # one demonstration per prompt
    if objective == "sft":
        assert all(r["weight"] == 1.0 for r in experts) and all(r["weight"] == 0.0 for r in rollouts if not r["expert"])
    if "ref_samples" in extra:
        refs = [json.loads(line) for line in (folder / "ref_samples.jsonl").read_text().splitlines()]
        assert len({(r["problem_id"], r["sample_idx"]) for r in refs}) == len(refs) == 2 * 3


def test_checkpoint_folders_are_named_by_their_folder() -> None:
    from bonbench.core.config import model_slug

    assert model_slug("results/checkpoints/math-passk4") == "math-passk4"
    assert model_slug("/abs/results/checkpoints/math-passk4/") == "math-passk4"
    assert model_slug("google/gemma-3-270m") == "google--gemma-3-270m"  # hub ids keep their org


def _trainable(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.policy.trainable()]


@pytest.mark.parametrize("skip", [False, True])
def test_a_step_without_gradient_moves_adamw_unless_skipped(tiny: str, tmp_path: Path, skip: bool) -> None:
    """After one informative step, a step whose weights are all 0 has an exactly zero gradient; AdamW
    still moves every weight on its momentum (and its weight decay), which --skip-zero-grad stops:
    the weights and the optimiser's moments stay as they were, while the schedule advances."""
    trainer = Trainer(prepare_training(_cfg(tiny, tmp_path, skip_zero_grad=skip, weight_decay=0.01, warmup=3)))
    pairs = [([1, 3, 4], [3, 4]), ([1, 5], [6, 3]), ([1, 4], [5]), ([1, 6], [9, 2])]
    groups = [[0, 1], [2, 3]]
    first = trainer._optimise(pairs, np.array([1.0, -1.0, 0.5, -0.5]), groups, kl_coef=0.0)
    assert first["grad_norm"] > 0 and first.get("skipped", 0) == 0
    before = _trainable(trainer)
    moments = [trainer.optimizer.state[p]["exp_avg"].clone() for p in trainer.policy.trainable()]
    flat = trainer._optimise(pairs, np.zeros(4), groups, kl_coef=0.0)
    assert flat["grad_norm"] == 0.0
    after = _trainable(trainer)
    moved = any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert moved is not skip
    assert ("skipped" in flat) is skip and flat.get("skipped", 0) == int(skip)
    kept = all(torch.equal(m, trainer.optimizer.state[p]["exp_avg"])
               for m, p in zip(moments, trainer.policy.trainable(), strict=True))
    assert kept is skip
    assert trainer.scheduler.last_epoch == 2  # both steps used their warm-up slot
    # a KL term gives the same flat batch a gradient: the step is taken
    kl = trainer._optimise(pairs, np.zeros(4), groups, kl_coef=0.5)
    assert kl["grad_norm"] > 0 and kl.get("skipped", 0) == 0
    assert any(not torch.equal(a, b) for a, b in zip(after, _trainable(trainer), strict=True))


def test_skip_zero_grad_from_the_command_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--skip-zero-grad` reaches the config (and the training hash: it changes what is trained) and
    each step's log says whether its update was skipped."""
    args = ["train", "--task", "tiny_train", "--objective", "test_flat", "--model", tiny, "--steps", "2",
            "--prompts-per-step", "2", "--group", "2", "--dtype", "float32", "--warmup", "0", "--out", str(tmp_path)]
    assert main(args + ["--name", "skip", "--skip-zero-grad"]) == 0
    folder = Path(capsys.readouterr().out.strip().splitlines()[-1])
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    assert manifest["config"]["skip_zero_grad"] is True
    assert [r["skipped"] for r in manifest["log"]] == [1, 1] and all(r["grad_norm"] == 0.0 for r in manifest["log"])
    assert main(args + ["--name", "plain"]) == 0
    plain = json.loads((Path(capsys.readouterr().out.strip().splitlines()[-1]) / "bonbench_manifest.json").read_text())
    assert all("skipped" not in r for r in plain["log"])
    # the default stays out of the hash (checkpoints written before the setting resume); on, it is in it
    from bonbench.apps.trainer.config import training_doc

    older = {k: v for k, v in plain["config"].items() if k != "skip_zero_grad"}
    assert training_doc(older) == training_doc(plain["config"])
    assert _cfg(tiny, tmp_path, skip_zero_grad=True).training_hash() != _cfg(tiny, tmp_path).training_hash()
