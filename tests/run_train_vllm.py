"""Run ``bonbench train`` (tiny trainer plugin registered) with a small real vLLM rollout engine: eager, a
1024-token context, and at most 2 samples in the engine at once, so a held-out evaluation writes its rows over several
engine rounds and a kill can fall between two (used by tests/test_trainer_vllm_eval_kill.py), and an objective whose
update depends on every sample drawn (``test_every_sample``).

Usage: python tests/run_train_vllm.py -- <bonbench train args>
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np
import trainer_plugin  # noqa: F401  (registers tiny_train)

from bonbench.api.objective import Objective, register_objective
from bonbench.apps import cli
from bonbench.apps.trainer import vllm_rollout
from bonbench.apps.trainer.config import TrainConfig

_engine_args = vllm_rollout.engine_args


def engine_args(cfg: TrainConfig) -> dict[str, Any]:
    # eager and short: start-up time and memory on a shared machine; 2 samples at a time: several rounds
    return {**_engine_args(cfg), "enforce_eager": True, "max_model_len": 1024, "chunk_samples": 2}


@register_objective("test_every_sample", paper="test only", summary="weight 1/G on every sample (test objective)")
def _test_every_sample() -> Objective:
    # every sample moves the weights, whatever it scores: the update depends on what the rollouts drew
    return Objective("test_every_sample", lambda g: np.full(len(g.rewards), 1.0 / len(g.rewards)), frozenset(), {})


vllm_rollout.engine_args = engine_args  # the small engine above

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(cli.main(args[args.index("--") + 1:] if "--" in args else args))
