"""Step time of ``bonbench train`` in one process and under torchrun with N data-parallel ranks.

Runs the same training command twice, each into its own fresh output folder: ``python -m bonbench
train ...`` (torch's default threads) and ``torchrun --nproc-per-node N -m bonbench train ...``
(torchrun's default of one thread per rank; ``--one-threads 1`` gives the one-process run one too).
Prints, from each run's ``log.jsonl``, the median over
steps after the first (the first pays for warm-up) of the step's seconds, sampling seconds and
gradient all-reduce seconds, and the largest difference of the logged loss and reward between the
two runs (they train on the same global batch, so it is float noise).

    python benchmarks/bench_train_ddp.py --nproc 2 -- --task imdb --objective passk --k 2 --group 2 \\
        --prompts-per-step 2 --steps 3 --max-tokens 16 --lora-rank 16
    python benchmarks/bench_train_ddp.py --tiny --nproc 2 -- --steps 4 --prompts-per-step 4 --group 4

``--tiny`` trains the tests' 2-layer random Gemma on their tiny task (tests/trainer_plugin.py).
This measures wall-clock on whatever machine runs it; say which when quoting it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    got = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if got.returncode != 0:
        sys.exit(f"failed ({got.returncode}): {' '.join(cmd)}\n{got.stderr[-3000:]}")
    return time.perf_counter() - t0


def _summary(log: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    later = rows[1:] or rows

    def med(key: str) -> float:
        return round(statistics.median(r.get(key, 0.0) for r in later), 3)

    return {"steps": len(rows), "step_s": med("seconds"), "sample_s": med("sample_s"), "allreduce_s": med("allreduce_s"),
            "tokens_per_s": med("tokens_per_s")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny random Gemma and tiny task")
    ap.add_argument("--one-threads", type=int, help="OMP_NUM_THREADS of the one-process run (default: torch's, all cores)")
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then `bonbench train` flags (no --name / --out)")
    args = ap.parse_args()
    flags = [f for f in args.flags if f != "--"]
    work = Path(tempfile.mkdtemp(prefix="bench-ddp-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    entry = ["-m", "bonbench"]
    if args.tiny:
        sys.path.insert(0, str(REPO / "tests"))
        from test_sampler_hf import build_tiny_model

        model = build_tiny_model(work / "model").path
        entry = [str(REPO / "tests" / "run_train_cli.py")]
        flags = ["--task", "tiny_train", "--objective", "test_rloo", "--model", model, "--dtype", "float32",
                 "--lr", "0.05", "--warmup", "0", *flags]
    train = ["train", *flags, "--name", "bench", "--save-every", "1000000"]
    one_env = {**env, **({"OMP_NUM_THREADS": str(args.one_threads)} if args.one_threads else {})}
    one_s = _run([sys.executable, *entry, *train, "--out", str(work / "one")], one_env)
    many_s = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc), "--master-addr",
                   "127.0.0.1", "--master-port", str(_port()), *(["-m", "bonbench"] if not args.tiny else entry), *train,
                   "--out", str(work / "many")], env)
    logs = {k: work / k / "checkpoints" / "bench" / "log.jsonl" for k in ("one", "many")}
    a, b = ([json.loads(line) for line in logs[k].read_text().splitlines()] for k in ("one", "many"))
    diff = {key: max(abs(x[key] - y[key]) for x, y in zip(a, b, strict=True)) for key in ("loss", "reward")}
    print(json.dumps({"processes": 1, "threads": args.one_threads or "default", "wall_s": round(one_s, 1),
                      **_summary(logs["one"])}))
    print(json.dumps({"processes": args.nproc, "wall_s": round(many_s, 1), **_summary(logs["many"])}))
    print(json.dumps({"max_abs_diff": diff, "cpus": os.cpu_count(), "work": str(work)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
