"""The names of the former ``bonbench.run.runner`` module, kept for one release.

Runs as library calls now live in the ``bonbench.run`` modules:

    from bonbench.run.request import RunRequest
    from bonbench.run.plan import plan
    from bonbench.run.execute import execute
    result = execute(plan(RunRequest(task="math", metrics=("bon@16",), limit=10)))
    result.docs[0]["metrics"]["bon@16"]["value"]

``request`` holds the records, ``resolve`` builds tasks, verifiers, samplers and configs, ``rules``
checks metrics, ``plan`` / ``reopen`` resolve runs, ``execute`` runs them and ``merge`` combines
shards. This module defines nothing; it re-exports those names.
"""

from __future__ import annotations

from bonbench.pipeline.imported import check_complete, imported_record, imported_settings, run_command
from bonbench.pipeline.progress import Progress
from bonbench.run.execute import execute
from bonbench.run.merge import merge
from bonbench.run.plan import IMPORT_DEFAULT_METRICS, plan
from bonbench.run.reopen import reopen
from bonbench.run.request import MergeResult, Plan, RunRequest, RunResult
from bonbench.run.resolve import ENV_EXEC_CACHE, build_verifier, check_verifier, load_task, model_path
from bonbench.run.rules import (
    check_greedy,
    default_verifier,
    greedy_defaults,
    is_greedy,
    metric_specs,
    resolve_n,
    split_special,
    votes_on_answers,
    winrate_ks,
)
from bonbench.run.verifier_choice import choose_verifier, verifier_line, verifier_roots

__all__ = [
    "ENV_EXEC_CACHE", "IMPORT_DEFAULT_METRICS", "MergeResult", "Plan", "Progress", "RunRequest", "RunResult",
    "build_verifier", "check_complete", "check_greedy", "check_verifier", "choose_verifier", "default_verifier",
    "execute", "greedy_defaults", "imported_record", "imported_settings", "is_greedy", "load_task", "merge",
    "metric_specs", "model_path", "plan", "reopen", "resolve_n", "run_command", "split_special", "verifier_line",
    "verifier_roots", "votes_on_answers", "winrate_ks",
]
