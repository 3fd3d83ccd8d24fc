"""Resuming by default and what `bonbench train` tells its user, on a tiny random Gemma 3.

A real `bonbench train` subprocess is SIGKILLed at different steps with the default save schedule
and the same command run again: the final weights equal an uninterrupted run's, the resumed run
says where it resumes, a finished run says it is complete; the training state's file operations
(a kill between its two renames, torn log lines, truncated state files) keep what was written;
progress lines where stderr is not a terminal; warnings for runs that cannot learn.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train
from bonbench.apps.trainer.watch import SaveSchedule, SignalWatch, StepLines, TrainingWarning, warmup_warning
from bonbench.core.errors import BonbenchError

HERE = Path(__file__).parent
CLI = [sys.executable, str(HERE / "run_train_cli.py"), "--"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("resume") / "model").path


def _args(tiny: str, out: Path, *extra: str, steps: int = 4, name: str = "run") -> list[str]:
    # no --save-every: the default schedule is what is tested
    return ["train", "--task", "tiny_train", "--objective", "test_rloo", "--model", tiny, "--steps", str(steps),
            "--prompts-per-step", "2", "--group", "4", "--dtype", "float32", "--lr", "0.05", "--warmup", "0",
            "--kl-coef", "0.05", "--kl-anchor", "ema", "--name", name, "--out", str(out), *extra]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "training_state" / "weights.pt", weights_only=True)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _kill_at(cmd: list[str], log: Path, rows: int) -> None:
    """Start ``cmd`` and SIGKILL it as soon as ``log`` holds ``rows`` rows."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= rows:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_sigkill_at_any_step_resumes_by_default(tiny: str, tmp_path: Path) -> None:
    whole = subprocess.run(CLI + _args(tiny, tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert "resuming" not in whole.stderr
    want = _weights(tmp_path / "whole" / "checkpoints" / "run")
    resumes = 0
    for rows in (1, 2, 3):
        out = tmp_path / f"killed{rows}"
        folder = out / "checkpoints" / "run"
        cmd = CLI + _args(tiny, out)
        _kill_at(cmd, folder / "log.jsonl", rows)
        saved = CheckpointDir(folder).saved_step()
        # saved after every step: a kill loses at most the step it hit (and the log row of the step being saved)
        assert saved >= rows - 1
        logged = [r["step"] for r in _rows(folder / "log.jsonl")]
        assert logged[:saved] == list(range(saved))
        resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        lines = [line for line in resumed.stderr.splitlines() if "resuming" in line]
        if saved:
            assert len(lines) == 1 and lines[0].startswith(f"resuming at step {saved} of 4"), resumed.stderr
        else:  # killed before the first save ended: a fresh start, nothing to say
            assert lines == []
        resumes += bool(saved)
        got = _weights(folder)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
        # the log was never cut below the saved step, and ends with every step once
        assert [r["step"] for r in _rows(folder / "log.jsonl")] == [0, 1, 2, 3]
        assert resumed.stdout.strip().splitlines()[-1] == str(folder)
    assert resumes >= 2  # kills after 2 and 3 logged steps always find a saved state
    # the same command once more: one line, exit 0, nothing trained or rewritten
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    notes = [line for line in again.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith("already complete:"), again.stderr
    assert again.stdout.strip() == str(folder)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    # fewer steps than the folder holds: one line, nothing changed
    fewer = subprocess.run(CLI + _args(tiny, out, steps=3), capture_output=True, text=True, timeout=600)
    assert fewer.returncode == 1 and fewer.stderr.strip().splitlines() == [
        "error: checkpoint 'run' has trained 4 steps, more than --steps 3; pass --steps 4 or more to continue it, "
        "or use another --name"]
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_progress_lines_where_stderr_is_not_a_terminal(tiny: str, tmp_path: Path) -> None:
    """A pipe is not a terminal: plain lines with the step, reward, KL and time, the last step's
    among them, and no progress bar or transformers loading bars."""
    res = subprocess.run(CLI + _args(tiny, tmp_path, steps=2), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.splitlines()[0] == "training 'run' from step 0 of 2, 2 prompts x 4 samples per step"
    steps = [line for line in res.stderr.splitlines() if line.startswith("training: ")]
    assert steps[0].startswith("training: 1/2 steps (50.0%) ") and steps[-1].startswith("training: 2/2 steps (100.0%) ")
    assert " ETA " in steps[0] and " done in " in steps[-1]
    assert all("  reward " in line and "  kl_ref " in line and (" s/step " in line or "/s " in line) for line in steps)
    assert "\r" not in res.stderr and "Loading weights" not in res.stderr and "━" not in res.stderr
    assert res.stdout.splitlines() == [str(tmp_path / "checkpoints" / "run")]  # stdout: the folder alone


def test_progress_lines_one_per_step_when_slow_and_throttled_when_fast() -> None:
    now = [0.0]
    lines: list[str] = []
    progress = StepLines(lines.append, title="from {done} of {total}", interval=10.0, clock=lambda: now[0])
    row = {"reward": 0.5, "kl_ref": 0.25, "seconds": 12.0}
    progress(0, 10, {})
    assert lines == ["from 0 of 10"]
    lines.clear()
    for done in range(1, 4):  # slow steps (12 s): a line each
        now[0] += 12.0
        progress(done, 10, row)
    assert [line.split(" (")[0] for line in lines] == ["training: 1/10 steps", "training: 2/10 steps", "training: 3/10 steps"]
    assert lines[1] == "training: 2/10 steps (20.0%) 12.0 s/step ETA 1m36s  reward 0.500  kl_ref 0.250"
    for done in range(4, 11):  # fast steps (3 s): at most one line per 10 s, and the last step's
        now[0] += 3.0
        progress(done, 10, {**row, "seconds": 3.0})
    assert [line.split(" (")[0] for line in lines[3:]] == ["training: 7/10 steps", "training: 10/10 steps"]
    assert lines[-1] == "training: 10/10 steps (100.0%) 5.7 s/step done in 57s  reward 0.500  kl_ref 0.250"


def test_save_schedule_bounds_the_lost_work_and_the_cost() -> None:
    now = [0.0]
    sched = SaveSchedule(None, clock=lambda: now[0])
    sched.start()
    now[0] = 1.0
    assert sched.due(1, 100)  # nothing saved yet: save after the first step
    sched.saved(2.0)  # a save that took 2 s: the next one after 10 x 2 s of training
    now[0] += 19.0
    assert not sched.due(2, 100)
    now[0] += 1.0
    assert sched.due(3, 100)
    sched.saved(0.01)
    now[0] += 0.5
    assert sched.due(4, 100)  # cheap saves: every step
    every = SaveSchedule(3, clock=lambda: now[0])
    every.start()
    assert [d for d in range(1, 8) if every.due(d, 7)] == [3, 6, 7]  # and always the last step


def test_signal_watch_warns_once_per_stretch_and_for_a_flat_run() -> None:
    flat = lambda s: {"step": s, "weight_abs_mean": 0.0}
    live = lambda s: {"step": s, "weight_abs_mean": 0.1}
    watch = SignalWatch(stretch=3)
    got = [watch.update(r) for r in [live(0), flat(1), flat(2), live(3), flat(4), flat(5), flat(6), flat(7)]]
    assert [i for i, m in enumerate(got) if m] == [6] and "steps 4-6" in str(got[6])
    assert watch.finish() is None  # the run had a signal, and the stretch was reported
    short = SignalWatch(stretch=10)
    assert all(short.update(flat(s)) is None for s in range(3))
    assert "any of the 3 steps" in str(short.finish())
    # a resumed run counts the steps it logged before: 2 logged + 1 new reaches a stretch of 3
    resumed = SignalWatch(stretch=3, history=[flat(0), flat(1)])
    assert "steps 0-2" in str(resumed.update(flat(2)))


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2, group=4,
                out=str(out), dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def test_warnings_for_runs_that_cannot_learn(tiny: str, tmp_path: Path) -> None:
    assert warmup_warning(_cfg(tiny, tmp_path, warmup=10, lr=1e-4)) == (
        "--warmup 10 is not shorter than --steps 3: every step is warm-up, at learning rates 1e-05..3e-05 instead of "
        "--lr 0.0001; use a smaller --warmup (e.g. --warmup 0)")
    assert warmup_warning(_cfg(tiny, tmp_path, warmup=2)) is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(_cfg(tiny, tmp_path, objective="test_flat", warmup=5, name="flat"))
        train(_cfg(tiny, tmp_path, name="live"))
    said = [str(w.message) for w in caught if issubclass(w.category, TrainingWarning)]
    assert len(said) == 2 and said[0].startswith("--warmup 5 is not shorter than --steps 3")
    assert said[1].startswith("no prompt group carried a learning signal in any of the 3 steps")


def test_logged_kl_is_never_negative_and_moves_with_the_policy(tiny: str, tmp_path: Path) -> None:
    folder = train(_cfg(tiny, tmp_path, steps=4, lr=0.2))
    kl = [r["kl_ref"] for r in _rows(folder / "log.jsonl")]
    assert kl[0] == pytest.approx(0.0, abs=1e-9)  # step 0 samples from the base itself (LoRA B = 0)
    assert all(v > 0 for v in kl[1:])


def test_sampled_kl_is_unbiased_and_non_negative_by_enumeration() -> None:
    """Over every sequence of a 2-token autoregressive model with 3 symbols: E_pi[sum_t k3_t] equals
    KL(pi || ref) exactly, every k3 sum is >= 0, and the plain log-ratio (k1) is negative on some."""
    from bonbench.apps.trainer.rollout import sampled_kl

    rng = np.random.default_rng(0)
    v = 3

    def table() -> tuple[np.ndarray, np.ndarray]:
        first = rng.dirichlet(np.ones(v))
        second = rng.dirichlet(np.ones(v), size=v)  # p(y2 | y1)
        return first, second

    (p1, p2), (q1, q2) = table(), table()
    kl_exact = sum(p1[a] * p2[a, b] * (np.log(p1[a] * p2[a, b]) - np.log(q1[a] * q2[a, b])) for a in range(v) for b in range(v))
    mean_k3 = mean_k1 = 0.0
    k1_values = []
    for a in range(v):
        for b in range(v):
            prob = p1[a] * p2[a, b]
            pol, ref = np.log([p1[a], p2[a, b]]), np.log([q1[a], q2[a, b]])
            k3 = sampled_kl(pol, ref)
            assert k3 >= 0
            mean_k3 += prob * k3
            k1_values.append(float(np.sum(pol - ref)))
            mean_k1 += prob * k1_values[-1]
    assert mean_k3 == pytest.approx(kl_exact, abs=1e-12) and mean_k1 == pytest.approx(kl_exact, abs=1e-12)
    assert min(k1_values) < 0


# ---------------------------------------------------------------- the state's files


def _state(ck: CheckpointDir, step: int) -> None:
    w = {"a": torch.full((3,), float(step))}
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ck.save_state(step, w, opt, sched, None)


def test_a_kill_between_the_two_renames_keeps_the_previous_state(tmp_path: Path) -> None:
    ck = CheckpointDir(tmp_path / "c")
    ck.root.mkdir()
    _state(ck, 1)
    _state(ck, 2)
    os.replace(ck.state_dir, ck.old_state_dir)  # where a kill inside save_state leaves it
    (ck.root / "training_state.tmp").mkdir()  # and a half-written next state
    assert ck.saved_step() == 2 and ck.check_state() == 2
    assert torch.equal(ck.load_state()["weights"]["a"], torch.full((3,), 2.0))
    assert ck.state_dir.is_dir() and not ck.old_state_dir.exists()
    _state(ck, 3)
    assert ck.saved_step() == 3 and not (ck.root / "training_state.tmp").exists()


def test_a_full_disk_while_saving_is_one_line_and_keeps_the_previous_state(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from bonbench.apps.trainer import checkpoint

    ck = CheckpointDir(tmp_path / "c")
    ck.root.mkdir()
    _state(ck, 1)
    real = checkpoint._save

    def full(obj: Any, path: Path) -> None:
        if path.name == "optimizer.pt":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(obj, path)

    monkeypatch.setattr(checkpoint, "_save", full)
    with pytest.raises(BonbenchError, match="no space left") as got:
        _state(ck, 2)
    assert len(str(got.value).splitlines()) == 1
    assert ck.saved_step() == 1 and torch.equal(ck.load_state()["weights"]["a"], torch.full((3,), 1.0))
    assert sorted(p.name for p in ck.root.iterdir()) == ["training_state"]  # no half-written folder left


def test_rows_are_cut_back_to_the_saved_step_only_and_torn_lines_repaired(tmp_path: Path) -> None:
    ck = CheckpointDir(tmp_path)
    ck.append_rows(ck.log_path, [{"step": s, "reward": 0.5} for s in range(4)])
    with ck.log_path.open("a") as fh:
        fh.write('{"step": 4, "rew')  # killed mid-line
    assert [r["step"] for r in ck.read_rows(ck.log_path)] == [0, 1, 2, 3]
    ck.append_rows(ck.ref_samples_path, [{"problem_id": "p", "sample_idx": 0, "reward": 1.0}])
    with ck.ref_samples_path.open("a") as fh:
        fh.write('{"problem_id": "p", "sam')
    ck.append_rows(ck.ref_samples_path, [{"problem_id": "p", "sample_idx": 1, "reward": 0.0}])
    assert [r["sample_idx"] for r in ck.read_rows(ck.ref_samples_path)] == [0, 1]  # the new row is not glued on
    assert ck.truncate_after(3) == 1
    assert [r["step"] for r in ck.read_rows(ck.log_path)] == [0, 1, 2]
    assert ck.truncate_after(3) == 0 and ck.log_path.read_text().endswith("\n")


@pytest.mark.parametrize("victim", ["weights.pt", "optimizer.pt", "rng.pt"])
def test_a_truncated_state_file_is_one_line_and_changes_nothing(tiny: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str], victim: str) -> None:
    args = _args(tiny, tmp_path, steps=2)
    assert main(args) == 0
    folder = tmp_path / "checkpoints" / "run"
    path = folder / "training_state" / victim
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(_args(tiny, tmp_path, steps=3)) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path} is truncated or corrupt") and len(err.strip().splitlines()) == 1
    assert f"delete {folder / 'training_state'}" in err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    # the loader says the same, should the file break after the check
    with pytest.raises(BonbenchError, match="truncated or corrupt"):
        CheckpointDir(folder).load_state()


def test_a_truncated_model_file_is_one_line_naming_it(tiny: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size - 100])
    assert main(_args(str(model), tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {weights} is truncated") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # checked before anything was written


def test_settings_of_a_run_that_saved_nothing_are_replaced(tiny: str, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A run stopped before its first save (no state, no export) is no reason to refuse new settings."""
    ck = CheckpointDir(tmp_path / "checkpoints" / "t")
    ck.root.mkdir(parents=True)
    (ck.root / "train_config.json").write_text(json.dumps(_cfg(tiny, tmp_path, lr=1e-3).to_json()))
    ck.append_rows(ck.log_path, [{"step": 0, "reward": 0.0}])
    with caplog.at_level(logging.INFO, logger="bonbench.apps.trainer"):
        train(_cfg(tiny, tmp_path, steps=1))
    assert caplog.messages == ["starting 't' over with the new settings: its folder held no saved training state"]
    assert json.loads((ck.root / "train_config.json").read_text())["lr"] == 5e-2
    with pytest.raises(BonbenchError, match=r"other settings \(lr\)"):  # now it has a state: refused
        train(_cfg(tiny, tmp_path, steps=2, lr=1e-3))


def _read_only_prefix(out: Path) -> list[str]:
    """A command prefix under which ``out`` is read-only: a read-only bind mount in a private mount
    namespace (root, which file modes do not stop), else the folder's write bits are removed."""
    if os.geteuid() != 0:
        for p in [out, *out.rglob("*")]:
            if p.is_dir():
                p.chmod(0o555)
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("running as root without mount namespaces: cannot make a folder read-only")
    return ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(out)]


def test_a_read_only_out_is_one_line_and_keeps_what_is_there(tiny: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(CLI + _args(tiny, out, steps=1, name="done"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    prefix = _read_only_prefix(out)
    try:
        for name, steps in (("fresh", 1), ("done", 2)):  # a new checkpoint, and one that would train on
            res = subprocess.run(prefix + CLI + _args(tiny, out, steps=steps, name=name), capture_output=True,
                                 text=True, timeout=600)
            assert res.returncode == 1, res.stderr[-2000:]
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: cannot write the checkpoint folder"), res.stderr
            assert f"--out (now {str(out)!r})" in lines[0]
    finally:
        for p in [out, *out.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
