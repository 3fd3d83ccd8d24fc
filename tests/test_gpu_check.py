"""scripts/gpu_check.py, the Python half of scripts/gpu_check.sh: its tiny models load and encode any
MATH text, and the figures file keeps every figure recorded, numbers as numbers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
assert _spec is not None and _spec.loader is not None
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


def test_tiny_models_load_and_encode_any_text(tmp_path: Path) -> None:
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    text = "Find $\\frac{1}{2} \\cdot x^2$ — é, ∑, 日本\n\\boxed{7}"
    lm = gpu_check.build_lm(tmp_path / "lm", "tiny")
    tok = AutoTokenizer.from_pretrained(lm)
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id and tok.decode(ids, skip_special_tokens=True) == text
    assert AutoModelForCausalLM.from_pretrained(lm).config.vocab_size == len(tok)
    rm = gpu_check.build_rm(tmp_path / "rm")
    assert AutoModelForSequenceClassification.from_pretrained(rm).config.id2label == {0: "NEGATIVE", 1: "POSITIVE"}


def test_figures_file_keeps_every_record(tmp_path: Path) -> None:
    fig = tmp_path / "gpu_figures.json"
    for key, value in (("a", "1"), ("b", "2.5"), ("c", "H100 80GB")):
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "record", str(fig), key, value], check=True)
    assert json.loads(fig.read_text()) == {"a": 1, "b": 2.5, "c": "H100 80GB"}
    assert not (tmp_path / "gpu_figures.json.tmp").exists()


def test_train_figures_read_the_last_logged_step(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    rows = [{"seconds": 9.0, "grad_norm": 0.5}, {"seconds": 5.5047, "grad_norm": 0.0, "loss_scale": 32768.0}]
    (ckpt / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fig = tmp_path / "f.json"
    gpu_check.train_figures(fig, "train_x", ckpt, 30.04)
    got = json.loads(fig.read_text())
    assert got == {"train_x.steps": 2, "train_x.seconds": 5.5047, "train_x.grad_norm": 0.0, "train_x.loss_scale": 32768.0,
                   "train_x.wall_s": 30.0, "train_x.exported": False}


def test_an_unknown_section_is_one_error_line(tmp_path: Path) -> None:
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--only", "run,nope", "--cpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --only nope: the sections are run, train, train-verifier, bench, verifiers (comma-separated)"]


def test_the_verifier_checks_record_their_figures_on_the_cpu(tmp_path: Path) -> None:
    """gpu_verifiers.py's judge and orm steps, on the CPU: float32 equals the definition, batches agree."""
    fig = tmp_path / "gpu_figures.json"
    for step in ("judge", "orm"):
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_verifiers.py"), step, str(fig), "--device", "cpu"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(fig.read_text())
    assert got["judge.float32.max_diff_vs_reference"] < 1e-5 and got["judge.float32.max_diff_batch_1_vs_4"] < 1e-5
    assert got["orm.float32.max_diff_vs_cpu_float32"] == 0.0 and got["orm.float32.max_diff_batch_1_vs_8"] < 1e-4
    assert {"judge.bfloat16.max_diff_vs_reference", "orm.bfloat16.max_diff_batch_1_vs_8"} <= set(got)
