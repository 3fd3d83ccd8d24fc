"""Data-parallel training on a tiny random Gemma 3: two gloo processes under torchrun on the same
global batch log the one-process run's loss, rewards and metrics and end at its weights (float
tolerance); rank 0 alone writes; SIGKILL of the whole job + restart ends at the uninterrupted
job's weights; a batch that does not divide over the processes is a one-line error."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import shard
from bonbench.apps.trainer.loop import train

HERE = Path(__file__).parent
STEPS = 4
# what the one-process run and the two-process job share: 4 prompts of 4 samples per step (2 per rank),
# an EMA anchor (broadcast, summed KL), per-prompt gradient variance and two PPO passes (clip statistics)
SETTINGS: dict[str, Any] = dict(task="tiny_train", objective="test_rloo", name="run", steps=STEPS, prompts_per_step=4,
                                group=4, save_every=1, dtype="float32", lr=5e-2, warmup=2, kl_coef=0.05, kl_anchor="ema",
                                log_grad_var=True, ppo_epochs=2)
FLAGS = ["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "run", "--steps", str(STEPS),
         "--prompts-per-step", "4", "--group", "4", "--save-every", "1", "--dtype", "float32", "--lr", "0.05",
         "--warmup", "2", "--kl-coef", "0.05", "--kl-anchor", "ema", "--log-grad-var", "--ppo-epochs", "2"]
METRICS = ("loss", "reward", "reward_std", "solved_groups", "weight_abs_mean", "kl_ref", "kl_anchor", "entropy",
           "grad_norm", "grad_var", "clip_frac", "lr")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # field 4 of /proc/PID/stat is the parent pid (after the parenthesised command name)
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _kill_job(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL torchrun and its workers (they run in sessions of their own, so one killpg is not enough)."""
    workers = _children(proc.pid)
    for pid in workers + [proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in workers):
        assert time.monotonic() < deadline, "workers outlived SIGKILL"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/status").read_text().split("State:")[1].splitlines()[0]).lower()
    except (OSError, IndexError):
        return "zombie"


def _torchrun(model: str, out: Path, flags: list[str] = FLAGS) -> subprocess.Popen[bytes]:
    """Two CPU ranks on 127.0.0.1 (the tiny plugin is registered by the runner script, so the script
    stands in for `-m bonbench`)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), str(HERE / "run_train_cli.py"), *flags, "--model", model, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _finish(proc: subprocess.Popen[bytes], timeout: float = 600) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_job(proc)
        raise
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode(), err.decode()


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "training_state" / "weights.pt", weights_only=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny model, its one-process run (in this process) and the uninterrupted two-process job."""
    root = tmp_path_factory.mktemp("ddp")
    model = build_tiny_model(root / "model").path
    job = _torchrun(model, root / "two")
    one = train(TrainConfig(**SETTINGS, model=model, out=str(root / "one"), progress=False))
    stdout, _ = _finish(job)
    return {"model": model, "root": root, "one": one, "two": root / "two" / "checkpoints" / "run", "stdout": stdout}


def test_two_gloo_processes_match_one_process(runs: dict[str, Any]) -> None:
    one, two = runs["one"], runs["two"]
    log1, log2 = _rows(one / "log.jsonl"), _rows(two / "log.jsonl")
    # rank 0 alone writes: every step once, every rollout once
    assert [r["step"] for r in log2] == list(range(STEPS)) and {r["world_size"] for r in log2} == {2}
    for a, b in zip(log1, log2, strict=True):
        assert a["tokens"] == b["tokens"]
        for key in METRICS:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (a["step"], key)
    assert any(r["clip_frac"] > 0 for r in log1) and all(r["grad_var"] > 0 for r in log1)  # the compared terms are live
    r1 = {(r["step"], r["problem_id"], r["sample_idx"]): r for r in _rows(one / "rollouts.jsonl")}
    r2 = {(r["step"], r["problem_id"], r["sample_idx"]): r for r in _rows(two / "rollouts.jsonl")}
    assert len(r2) == len(_rows(two / "rollouts.jsonl")) == STEPS * 4 * 4 and r1.keys() == r2.keys()
    # rollouts do not depend on the rank that drew them: the same completions, the same weights
    assert all(r1[k]["completion"] == r2[k]["completion"] and r1[k]["weight"] == pytest.approx(r2[k]["weight"], abs=1e-9)
               for k in r1)
    w1, w2 = _weights(one), _weights(two)
    assert w1.keys() == w2.keys() and any(w1[k].abs().max() > 0.05 for k in w1)  # trained off the LoRA init
    for k in w1:
        assert torch.allclose(w1[k], w2[k], rtol=1e-4, atol=1e-5), k
    manifest = json.loads((two / "bonbench_manifest.json").read_text())
    assert manifest["steps"] == STEPS and len(manifest["log"]) == STEPS
    assert runs["stdout"].strip().splitlines()[-1] == str(two) and runs["stdout"].count(str(two)) == 1


def test_sigkill_of_the_job_then_resume_equals_the_uninterrupted_job(runs: dict[str, Any]) -> None:
    out = runs["root"] / "killed"
    folder = out / "checkpoints" / "run"
    job = _torchrun(runs["model"], out)
    deadline = time.monotonic() + 300
    while job.poll() is None and time.monotonic() < deadline:
        if (folder / "log.jsonl").exists() and len((folder / "log.jsonl").read_text().splitlines()) >= 2:
            break
        time.sleep(0.01)
    assert job.poll() is None, "the job ended before it could be killed"
    _kill_job(job)
    assert 1 <= int(json.loads((folder / "training_state" / "state.json").read_text())["step"]) < STEPS
    assert not (folder / "bonbench_manifest.json").exists()
    _finish(_torchrun(runs["model"], out))
    a, b = _weights(runs["two"]), _weights(folder)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in _rows(folder / "log.jsonl")] == list(range(STEPS))
    keys = [(r["step"], r["problem_id"], r["sample_idx"]) for r in _rows(folder / "rollouts.jsonl")]
    assert len(keys) == len(set(keys)) == STEPS * 4 * 4


# Chow et al.'s machinery under two ranks: the learned value head (its gradient summed over ranks),
# advantages whitened over the global batch, an annealed KL coefficient
CHOW: dict[str, Any] = dict(task="tiny_train", objective="rl_s", objective_options={"baseline": "value"}, name="chow",
                            steps=3, prompts_per_step=4, group=4, save_every=1, dtype="float32", lr=5e-2, warmup=0,
                            value_lr=0.1, adv_norm="batch", kl_coef=0.05, kl_schedule="linear", kl_coef_end=0.0,
                            kl_anneal_steps=2, kl_anneal_delay=0)
CHOW_FLAGS = ["train", "--task", "tiny_train", "--objective", "rl_s", "--baseline", "value", "--name", "chow", "--steps", "3",
              "--prompts-per-step", "4", "--group", "4", "--save-every", "1", "--dtype", "float32", "--lr", "0.05",
              "--warmup", "0", "--value-lr", "0.1", "--adv-norm", "batch", "--kl-coef", "0.05", "--kl-schedule", "linear",
              "--kl-coef-end", "0.0", "--kl-anneal-steps", "2", "--kl-anneal-delay", "0"]


def test_value_head_adv_norm_and_kl_schedule_under_two_processes(runs: dict[str, Any]) -> None:
    model, root = runs["model"], runs["root"]
    job = _torchrun(model, root / "chow2", CHOW_FLAGS)
    one = train(TrainConfig(**CHOW, model=model, out=str(root / "chow1"), progress=False))
    _finish(job)
    two = root / "chow2" / "checkpoints" / "chow"
    log1, log2 = _rows(one / "log.jsonl"), _rows(two / "log.jsonl")
    assert [r["kl_coef"] for r in log2] == pytest.approx([0.05, 0.025, 0.0]) and {r["world_size"] for r in log2} == {2}
    for a, b in zip(log1, log2, strict=True):
        for key in ("loss", "reward", "weight_abs_mean", "kl_coef", "value", "value_target", "value_loss", "grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (a["step"], key)
    assert log2[1]["value"] != 0.0  # the head learnt from step 0, the same on both ranks
    r1 = {(r["step"], r["problem_id"], r["sample_idx"]): r["weight"] for r in _rows(one / "rollouts.jsonl")}
    r2 = {(r["step"], r["problem_id"], r["sample_idx"]): r["weight"] for r in _rows(two / "rollouts.jsonl")}
    assert r1.keys() == r2.keys() and all(r2[k] == pytest.approx(r1[k], abs=1e-6) for k in r1)  # global whitening
    w1, w2 = _weights(one), _weights(two)
    assert all(torch.allclose(w1[k], w2[k], rtol=1e-4, atol=1e-5) for k in w1)
    v1, v2 = (torch.load(f / "training_state" / "optimizer.pt", weights_only=False)["value"]["head"] for f in (one, two))
    assert all(torch.allclose(v1[k], v2[k], rtol=1e-4, atol=1e-6) for k in v1)


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_batch_that_does_not_divide_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, rank: str) -> None:
    """Checked before the process group starts (no peer needed): rank 0 prints it, the others exit quietly."""
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", rank)
    code = main(["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--prompts-per-step", "4",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    if rank == "0":
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
        assert "--prompts-per-step 4 does not divide over 3 processes" in err and "multiple of 3" in err
    else:
        assert err == ""
    assert not (tmp_path / "checkpoints").exists()


def test_groups_split_contiguously_and_whole() -> None:
    items = list("abcdefg")
    parts = [shard(items, r, 3) for r in range(3)]
    assert sum(parts, []) == items and sorted(len(p) for p in parts) == [2, 2, 3]
    assert [shard(items[:1], r, 2) for r in range(2)] in ([["a"], []], [[], ["a"]])


def test_python_m_bonbench_is_the_cli() -> None:
    """`torchrun -m bonbench` needs `python -m bonbench`."""
    got = subprocess.run([sys.executable, "-m", "bonbench", "list", "objectives"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])})
    assert got.returncode == 0 and "passk" in got.stdout
