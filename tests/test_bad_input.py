"""Bad input through the real CLI (issue 24, section 4): each case exits 1 with exactly one stderr line
``error: ...`` naming the fix, no traceback, and every file already on disk byte-for-byte as it was.

How the disk is broken (documented in docs/bad-input.md):

* read-only output folders: as root, ``chmod`` does not stop writes, so the command runs in a
  private mount namespace (``unshare -m``) where the folder is bind-mounted read-only (EROFS, what a
  read-only volume gives); as any other user the folder tree is ``chmod a-w`` (EACCES) instead;
* a full disk: the output folder is a small tmpfs (the previous report + 64 KiB) mounted in such a namespace and filled with a
  file of zeros before the command runs (real ENOSPC from the kernel).

Cases needing a mount are skipped where ``unshare`` is refused; the in-process tests in
``tests/test_outputs.py`` cover the same writers by monkeypatching and always run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.cli import main

REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0
RO_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'


@lru_cache(maxsize=1)
def _can_unshare() -> bool:
    probe = ["unshare", "-m"] if ROOT else ["unshare", "-r", "-m"]
    try:
        return subprocess.run([*probe, "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt || mount -t tmpfs -o size=4k "
                               "tmpfs /tmp"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _unshare() -> list[str]:
    return ["unshare", "-m"] if ROOT else ["unshare", "-r", "-m"]


def _bonbench(*args: str, cwd: Path) -> list[str]:
    return [sys.executable, "-m", "bonbench", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_cli(*args: str, cwd: Path, read_only: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``bonbench ARGS`` in a subprocess; ``read_only``: that folder cannot be written (see the module docstring)."""
    cmd = _bonbench(*args, cwd=cwd)
    if read_only is not None and (ROOT or not os.access(read_only, os.W_OK)):
        if not _can_unshare():
            pytest.skip("running as root without mount namespaces: cannot make a folder read-only")
        cmd = [*_unshare(), "sh", "-c", RO_MOUNT, str(read_only), *cmd]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())
    if read_only is not None:  # an ordinary user: chmod is enough
        modes = {p: p.stat().st_mode for p in [read_only, *read_only.rglob("*")]}
        for p in modes:
            p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
        try:
            return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())
        finally:
            for p, m in modes.items():
                p.chmod(stat.S_IMODE(m))
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())


def one_error_line(proc: Any) -> str:
    """The single stderr line of a failed command (exit 1, no traceback)."""
    err = proc.err if hasattr(proc, "err") else proc.stderr  # capsys result or CompletedProcess
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path (hidden temp files included)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results tree with two scored synthetic runs (different models)."""
    root = tmp_path_factory.mktemp("tree") / "results"
    for model in ("org/a", "org/b"):
        write_synthetic_run(root, np.array([0.2, 0.7, 0.5]), n=4, task="t", model=model, n_boot=10,
                            metrics=("pass@1", "bon@2"))
    return root


@pytest.fixture(scope="module")
def math_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A scored MATH-500 run of 3 real problems (samples imported, graded by the real grader)."""
    base = tmp_path_factory.mktemp("math")
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:3]]
    samples = base / "samples.jsonl"
    samples.write_text("".join(json.dumps({"problem_id": r["unique_id"], "sample_idx": j,
                                           "completion": f"The answer is \\boxed{{{r['answer'] if j else 0}}}"}) + "\n"
                               for r in rows for j in range(2)))
    assert main(["score", "--task", "math500", "--samples", str(samples), "--data-dir", str(data_dir),
                 "--out", str(base / "results"), "--n-boot", "10"]) == 0
    return next((base / "results" / "runs" / "math500").glob("*/*"))


# ------------------------------------------------------------------------ read-only and full disks


def test_score_into_a_read_only_out(tmp_path: Path, data_dir: Path, math_run: Path) -> None:
    out = tmp_path / "ro"
    out.mkdir()
    (out / "keep.json").write_text('{"kept": true}\n')
    before = snapshot(out)
    samples = math_run.parents[3].parent / "samples.jsonl"
    proc = run_cli("score", "--task", "math500", "--samples", str(samples), "--data-dir", str(data_dir), "--out",
                   str(out), "--n-boot", "10", cwd=tmp_path, read_only=out)
    line = one_error_line(proc)
    assert proc.returncode == 1 and line.startswith(f"error: cannot write {out}") and "writable" in line
    assert snapshot(out) == before


def test_leaderboard_into_a_read_only_out(tmp_path: Path, tree: Path) -> None:
    out = tmp_path / "board"
    assert main(["leaderboard", str(tree), "--out", str(out), "--n-boot", "10"]) == 0
    before = snapshot(out)
    assert {"leaderboard.md", "leaderboard.html", "leaderboard.json"} <= set(before)
    proc = run_cli("leaderboard", str(tree), "--out", str(out), "--n-boot", "10", cwd=tmp_path, read_only=out)
    assert proc.returncode == 1 and one_error_line(proc).startswith(f"error: cannot write {out}")
    assert snapshot(out) == before


def test_eval_verifier_json_into_a_read_only_folder(tmp_path: Path, math_run: Path, data_dir: Path) -> None:
    out = tmp_path / "ev"
    out.mkdir()
    (out / "result.json").write_text('{"old": 1}\n')
    before = snapshot(out)
    proc = run_cli("eval-verifier", str(math_run), "--verifier", "oracle", "--n-boot", "10", "--data-dir", str(data_dir),
                   "--json", str(out / "result.json"), cwd=tmp_path, read_only=out)
    assert proc.returncode == 1 and one_error_line(proc).startswith(f"error: cannot write {out / 'result.json'}")
    assert snapshot(out) == before


def run_on_full_disk(tmp_path: Path, previous: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``bonbench ARGS`` (``{disk}`` in an argument names the disk) with the disk a small tmpfs holding a
    copy of ``previous``, filled up with zeros first; returns the command's result and the sha256 of
    every file on the disk afterwards but the filler (the tmpfs is gone once the namespace ends)."""
    if not _can_unshare():
        pytest.skip("no mount namespaces: cannot mount a small tmpfs")
    disk, err = tmp_path / "disk", tmp_path / "err.txt"
    disk.mkdir()
    size_k = 64 + sum(p.stat().st_size // 1024 + 8 for p in previous.rglob("*"))
    script = ('d="$1"; prev="$2"; py="$3"; err="$4"; size="$5"; shift 5; '
              'mount -t tmpfs -o size="$size"k tmpfs "$d" && cp -a "$prev"/. "$d"/ && '
              '(dd if=/dev/zero of="$d/filler" bs=4k 2>/dev/null; true) && '
              '"$py" -m bonbench "$@" 2>"$err"; echo $? >"$err.rc"; '
              '"$py" -c "import json,sys,hashlib,pathlib; d=pathlib.Path(sys.argv[1]); '
              'print(json.dumps({str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() '
              'for p in sorted(d.rglob(\'*\')) if p.is_file() and p.name != \'filler\'}))" "$d" >"$err.sums"')
    argv = [a.replace("{disk}", str(disk)) for a in args]
    subprocess.run([*_unshare(), "sh", "-c", script, "sh", str(disk), str(previous), sys.executable, str(err),
                    str(size_k), *argv], cwd=tmp_path, env=_env(), timeout=300, check=True)
    rc = int(Path(f"{err}.rc").read_text())
    return (subprocess.CompletedProcess(argv, rc, "", err.read_text()), json.loads(Path(f"{err}.sums").read_text()))


def test_plot_onto_a_full_disk_keeps_the_previous_report(tmp_path: Path, tree: Path) -> None:
    previous = tmp_path / "previous"
    assert main(["plot", str(tree), "--out", str(previous)]) == 0
    proc, after = run_on_full_disk(tmp_path, previous, "plot", str(tree), "--out", "{disk}")
    line = one_error_line(proc)
    assert proc.returncode == 1 and line.startswith(f"error: no space left writing {tmp_path / 'disk'}"), line
    assert after == snapshot(previous)  # and no staging folder left behind


def test_score_onto_a_full_disk_keeps_the_runs_there(tmp_path: Path, tree: Path, math_run: Path, data_dir: Path) -> None:
    samples = math_run.parents[3].parent / "samples.jsonl"
    proc, after = run_on_full_disk(tmp_path, tree, "score", "--task", "math500", "--samples", str(samples),
                                   "--data-dir", str(data_dir), "--out", "{disk}", "--n-boot", "10")
    line = one_error_line(proc)
    assert proc.returncode == 1 and line.startswith(f"error: no space left writing {tmp_path / 'disk'}/runs/math500"), line
    assert after == snapshot(tree)


def test_plot_out_naming_an_existing_file_is_refused(tmp_path: Path, tree: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    proc = run_cli("plot", str(tree), "--out", str(target), cwd=tmp_path)
    assert proc.returncode == 1 and "is a file, but a folder is needed" in one_error_line(proc)
    assert target.read_text() == "my notes\n"


def test_plot_refreshes_an_existing_report_folder(tmp_path: Path, tree: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "mine.txt").write_text("kept\n")
    (out / "report.html").write_text("old\n")
    assert main(["plot", str(tree), "--out", str(out)]) == 0
    assert (out / "mine.txt").read_text() == "kept\n" and (out / "report.html").read_text() != "old\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the staging folder is gone


def test_eval_verifier_outputs_naming_a_folder_go_inside_it(tmp_path: Path, math_run: Path, data_dir: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "figs"
    out.mkdir()
    assert main(["eval-verifier", str(math_run), "--verifier", "oracle", "--n-boot", "10", "--data-dir", str(data_dir),
                 "--plot", str(out), "--json", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-2:]
    assert printed == [str(out / "eval-verifier.json"), str(out / "eval-verifier.png")]
    assert (out / "eval-verifier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "eval-verifier.json").read_text())["n_problems"] == 3


# ------------------------------------------------------------------------ damaged files


def _copy_tree(tree: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "results"
    shutil.copytree(tree, root)
    broken, good = sorted(p.parent for p in root.rglob("metrics.json"))
    (broken / "metrics.json").write_bytes(b'{"metrics": {"pass@1": {"value": 0.5\xff\xfe}}}')
    return root, broken, good


def test_report_of_a_non_utf8_metrics_json(tmp_path: Path, tree: Path) -> None:
    root, broken, good = _copy_tree(tree, tmp_path)
    before = snapshot(root)
    proc = run_cli("report", str(broken), cwd=tmp_path)
    line = one_error_line(proc)
    assert proc.returncode == 1 and line.startswith(f"error: {broken / 'metrics.json'} is not UTF-8") and "restore" in line
    # over a tree: the readable run is still shown; the broken one is one error line and the exit code says so
    proc = run_cli("report", str(root), cwd=tmp_path)
    assert proc.returncode == 1 and str(broken / "metrics.json") in one_error_line(proc)
    assert proc.stdout.strip().splitlines()[-1] == str(good) and str(broken) not in proc.stdout
    assert snapshot(root) == before


def test_report_of_a_metrics_json_of_another_shape(tmp_path: Path, tree: Path) -> None:
    root, broken, _ = _copy_tree(tree, tmp_path)
    (broken / "metrics.json").write_text('{"metrics": {"pass@1": {"value": "high"}}}')
    proc = run_cli("report", str(broken), cwd=tmp_path)
    assert proc.returncode == 1 and "is not a bonbench metrics.json" in one_error_line(proc)


def test_plot_of_a_checkpoint_whose_log_is_not_utf8(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "run1"
    ckpt.mkdir(parents=True)
    (ckpt / "train_config.json").write_text(json.dumps({"task": "math", "objective": "grpo"}))
    (ckpt / "log.jsonl").write_bytes(b'{"step": 1, "reward": 0.1}\n{"step": 2, "rew\xe9rd": 0.2}\n{"step": 3}\n')
    before = snapshot(tmp_path)
    proc = run_cli("plot", str(ckpt), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    line = one_error_line(proc)
    assert proc.returncode == 1 and line.startswith(f"error: {ckpt / 'log.jsonl'}:2: the line is not UTF-8"), line
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("rep")} == before


# ------------------------------------------------------------------------ meaningless numbers


@pytest.mark.parametrize("args, message", [
    (["score", "--task", "math500", "--samples", "x.jsonl", "--n-boot", "0"], "--n-boot must be >= 1 (got 0)"),
    (["score", "RUN", "--n", "-3"], "--n must be >= 1 (got -3)"),
    (["score", "RUN", "--limit", "0"], "--limit must be >= 1 (got 0)"),
    (["leaderboard", "RESULTS", "--n-boot", "-5"], "--n-boot must be >= 1 (got -5)"),
    (["leaderboard", "RESULTS", "--seed", "-1"], "--seed must be >= 0 (got -1)"),
    (["merge", "RUN", "--n-boot", "0"], "--n-boot must be >= 1 (got 0)"),
    (["eval-verifier", "RUN", "--verifier", "oracle", "--k", "0"], "--k must be >= 1 (got 0)"),
    (["eval-verifier", "RUN", "--verifier", "oracle", "--n-boot", "0"], "--n-boot must be >= 1 (got 0)"),
    (["run", "--task", "math500", "--n", "0"], "--n must be >= 1 (got 0)"),
    (["run", "--task", "math500", "--max-tokens", "0"], "--max-tokens must be >= 1 (got 0)"),
    (["run", "--task", "math500", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1] (got 1.5)"),
    (["run", "--task", "math500", "--concurrency", "0"], "--concurrency must be >= 1 (got 0)"),
    (["run", "--task", "math500", "--ray-workers", "0"], "--ray-workers must be >= 1 (got 0)"),
    (["plot", "RUN", "--coscaling-tol", "0"], "--coscaling-tol must be > 0 (got 0)"),
    (["plot", "RUN", "--holdout-fraction", "1"], "--holdout-fraction must be in (0, 1) (got 1)"),
])
def test_meaningless_numbers_are_refused_when_parsed(args: list[str], message: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # placeholders name paths that do not exist: the range check comes before anything is read or written
    args = [str(tmp_path / a) if a in ("RUN", "RESULTS") else a for a in args]
    assert main([*args, *(["--out", str(tmp_path / "out")] if args[0] in ("score", "run") else [])]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["score", "--n-boot", "many"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == "error: argument --n-boot: invalid int value: 'many' (see `bonbench score --help`)\n"


@pytest.mark.parametrize("name, content, words", [
    ("metrics.json", "[1, 2]", "metrics.json is not a bonbench metrics.json"),
    ("curves.json", '{"pass": {"k": [1, 2], "value": ["a", 2]}}', "do not have bonbench's layout"),
    ("curves.json", '{"pass": {"k": [1, 2], "value": [0.1, 0.2]', "curves.json is not valid JSON"),
])
def test_plot_of_runs_with_files_of_another_shape(name: str, content: str, words: str, tmp_path: Path, tree: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, broken, _ = _copy_tree(tree, tmp_path)
    shutil.copy(next(p for p in tree.rglob("metrics.json") if p.parent.name == broken.name), broken / "metrics.json")
    (broken / name).write_text(content)
    before = snapshot(root)
    assert main(["plot", str(broken), "--out", str(tmp_path / "rep")]) == 1
    assert words in one_error_line(capsys.readouterr())
    assert snapshot(root) == before


def test_plot_of_a_sweep_file_listing_no_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep.json"
    sweep.write_text('{"runs": [1]}')
    assert main(["plot", str(sweep), "--out", str(tmp_path / "rep")]) == 1
    assert one_error_line(capsys.readouterr()) == f"error: {sweep}: entry 1 has no run_dir"


def test_a_closed_stdout_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    # `bonbench list metrics | head -1`: the reader leaves before bonbench writes; exit as SIGPIPE would
    proc = subprocess.Popen(_bonbench("list", "metrics", cwd=tmp_path), cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


@pytest.mark.parametrize("flag,value", [("--cpu-s", "-2"), ("--timeout", "0"), ("--timeout", "nan"),
                                        ("--memory-mb", "3"), ("--max-output-bytes", "0")])
def test_sandbox_run_refuses_meaningless_limits(tmp_path: Path, flag: str, value: str) -> None:
    program = tmp_path / "prog.py"
    program.write_text("print(1)\n")
    proc = subprocess.run([str(Path(sys.executable).with_name("bonbench")), "sandbox", "run", str(program), flag, value],
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"error: {flag} must be"), proc.stderr
    assert proc.stdout == ""  # nothing ran
