"""Run ``bonbench train`` (tiny trainer plugin registered) whose held-out evaluations sample in chunks of 2 rows, and,
with ``KILL_EVAL_STEP=K KILL_AFTER=N`` in the environment, dies like a SIGKILL (``os._exit``, no clean-up) as soon as
the evaluation of step K has appended N samples to its samples.jsonl (used by tests/test_trainer_eval_resume.py).

Usage: python tests/run_train_eval_kill.py -- <bonbench train args>
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)

from bonbench.apps import cli
from bonbench.core import store
from bonbench.plugins.samplers.hf import HFSampler

KILLED = 137  # what a SIGKILLed process's exit status reads as in a shell

_from_loaded = HFSampler.from_loaded.__func__  # type: ignore[attr-defined]  # a classmethod's function
_append = store.JsonlTable.append


def from_loaded(cls: type, *args: Any, **kw: Any) -> HFSampler:
    if "-step" in str(kw.get("name", "")):  # an evaluation's sampler: several chunks, so a kill falls between two
        kw = {**kw, "batch_size": 2}
    return _from_loaded(cls, *args, **kw)


def append(self: Any, records: Any) -> int:
    written = _append(self, records)
    step, after = os.environ.get("KILL_EVAL_STEP"), os.environ.get("KILL_AFTER")
    path = str(self.path)
    if step and after and f"-step{step}/" in path and path.endswith("samples.jsonl"):
        if len(Path(path).read_text().splitlines()) >= int(after):
            os._exit(KILLED)
    return written


HFSampler.from_loaded = classmethod(from_loaded)  # type: ignore[method-assign,assignment]  # the test's chunking
store.JsonlTable.append = append  # type: ignore[method-assign]  # the test's kill

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(cli.main(args[args.index("--") + 1:] if "--" in args else args))
