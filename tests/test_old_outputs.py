"""What bonbench 0.1 wrote still loads after the move into layers (issue 25: nothing breaks).

``tests/data/v0_1_run`` is a run directory written by the flat-layout code (commit e25e05d):
``bonbench run --task math --limit 6 --n 4 --backend scripted --samples FILE --metric pass@2
--metric bon@4 --metric maj@2 --verifier logprob`` on six real MATH test problems with scripted
completions. Re-scoring it with this code must reuse every stored sample and score and give the very
same metrics (its grades, made by math grader version 3, are regraded by the current version, to the
same verdicts), and the committed learned verifier (``results/verifiers``, written by the same code)
must still be found and read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bonbench.plugins.graders.math import MathGrader

HERE = Path(__file__).parent
OLD_RUN = HERE / "data" / "v0_1_run"
DATA = HERE.parents[1] / "shared" / "data"


def _bonbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bonbench", *args], capture_output=True, text=True, timeout=600)


def test_an_old_run_rescores_to_the_same_metrics_reusing_every_row(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "math" / "samples.jsonl" / "da0723612035"
    shutil.copytree(OLD_RUN, run)
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*.jsonl")}
    old = json.loads((run / "metrics.json").read_text())["metrics"]
    out = _bonbench("score", str(run), "--data-dir", str(DATA))
    assert out.returncode == 0, out.stderr
    new = json.loads((run / "metrics.json").read_text())["metrics"]
    assert set(new) == set(old)
    for name, entry in old.items():
        assert new[name]["value"] == entry["value"], name
        assert new[name]["ci95"] == entry["ci95"], name
    # samples and scores were reused, not rewritten; the grades of an older grader version were
    # regraded (a grader version is bumped exactly when verdicts may change), to the same verdicts
    after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*.jsonl")}
    grades = Path("grades/math.jsonl")
    assert {k: v for k, v in after.items() if k != grades} == {k: v for k, v in before.items() if k != grades}

    def verdicts(blob: bytes) -> dict[tuple[str, int], tuple[int, bool]]:
        rows = [json.loads(line) for line in blob.decode().splitlines() if line.strip()]
        latest = {}
        for r in rows:  # the regraded rows are appended; the newest version of each key counts
            key = (r["problem_id"], r["sample_idx"])
            if key not in latest or r["grader_version"] >= latest[key][0]:
                latest[key] = (r["grader_version"], r["correct"])
        return latest

    old_v, new_v = verdicts(before[grades]), verdicts(after[grades])
    assert {v for v, _ in old_v.values()} == {3} and {v for v, _ in new_v.values()} == {MathGrader.version}
    assert {k: c for k, (_, c) in new_v.items()} == {k: c for k, (_, c) in old_v.items()}
    report = _bonbench("report", str(run))
    assert report.returncode == 0 and "bon@4" in report.stdout, report.stderr


def test_the_committed_learned_verifier_is_still_read() -> None:
    folder = HERE.parent / "results" / "verifiers" / "math-gemma-3-270m-head"
    doc = json.loads((folder / "bonbench_verifier.json").read_text())
    code = ("from pathlib import Path; from bonbench.plugins.verifiers.folder import find_verifier\n"
            f"print(find_verifier(Path({str(folder.parents[1])!r}), 'math500', {doc['policy']['fingerprint']!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # found as the default for a task of its family (math500 is in the math family)
    assert out.returncode == 0 and out.stdout.strip() == str(folder), out.stderr
