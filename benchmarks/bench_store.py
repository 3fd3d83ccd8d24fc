"""How fast the single writer of a run directory is, against the rate samples arrive.

Every backend (in-process, ``--backend openai`` with many endpoints, ``--ray`` actors) funnels its
samples through one driver that appends them to ``samples.jsonl`` (one write + flush per row, one
fsync per chunk) and, on resume, reads the file back into a dict keyed by (problem_id, sample_idx).
This script measures both with rows shaped like the embedded model's MATH samples (completion text
of a given length) and prints:

* append: rows/s and MB/s for chunks of ``--chunk`` rows (the pipeline appends what one batch of
  the sampler returned: 64 by default);
* read: rows/s of ``JsonlTable.read`` (what a resume and every grading/scoring stage pay once);
* bytes per row, so that ``problems x samples`` gives the store's size;
* the writer's ceiling in generated tokens/s (append rows/s x tokens per row): an engine fleet
  producing more than that would wait on the driver.

Usage: ``python benchmarks/bench_store.py [--rows 100000 --chunk 64 --chars 600 --tokens 150]``.
It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import string
import tempfile
import time
from pathlib import Path

from bonbench.core.records import Sample
from bonbench.core.store import JsonlTable


def _rows(n: int, chars: int, seed: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " \\{}$+-=()\n"
    text = "".join(rng.choice(alphabet) for _ in range(chars * 4))
    return [Sample(f"test/algebra/{i // 32}.json", i % 32, text[(i * 7) % chars:(i * 7) % chars + chars], 150, "stop",
                   -rng.random() * 100) for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--chars", type=int, default=600, help="completion length in characters (MATH main job: ~590)")
    ap.add_argument("--tokens", type=int, default=150, help="tokens per completion, for the tokens/s ceiling")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary folder; try the shared filesystem)")
    args = ap.parse_args()

    rows = _rows(args.rows, args.chars)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        table = JsonlTable(Path(tmp) / "samples.jsonl", Sample)
        t0 = time.perf_counter()
        for i in range(0, len(rows), args.chunk):
            table.append(rows[i:i + args.chunk])
        t_append = time.perf_counter() - t0
        size = table.path.stat().st_size
        t0 = time.perf_counter()
        back = table.read()
        t_read = time.perf_counter() - t0
    assert len(back) == len(rows)  # every key once: the benchmark measured what it meant to
    per_row = size / len(rows)
    append_rate = len(rows) / t_append
    print(f"{len(rows)} rows of {args.chars} characters, chunks of {args.chunk}; {per_row:.0f} bytes per row on disk")
    print(f"append: {append_rate:,.0f} rows/s ({size / t_append / 1e6:.1f} MB/s), {t_append:.2f} s")
    print(f"read:   {len(rows) / t_read:,.0f} rows/s, {t_read:.2f} s")
    print(f"single-writer ceiling at {args.tokens} tokens per sample: {append_rate * args.tokens:,.0f} generated tokens/s")
    print(f"store size, samples only: {per_row * 5000 * 256 / 1e9:.2f} GB for 5,000 problems x 256 samples")


if __name__ == "__main__":
    main()
