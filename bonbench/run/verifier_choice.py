"""Which verifier a run's score-reading metrics (bon@k, ...) use, and the one line that tells the user why.

``choose_verifier``: the verifier the user named (``--verifier``, or the one a reopened run was
scored with); else, when some metric reads verifier scores (its kind's record says so), the newest
learned verifier of the task's family trained on this model's samples in the first of ``verifier_roots(out)`` that holds one; else
``logprob``. The roots are ``<out>/verifiers``, then ``results/verifiers`` of the current directory
(the default results root) and the bonbench checkout's committed ``results/verifiers``, so a run
with ``--out`` elsewhere still finds the committed verifier of its task and model. ``verifier_line``
is what every run that scores bon@k prints on stderr, e.g.
``verifier: logprob (no learned verifier for math / gemma-3-270m under /tmp/x/verifiers; pass
--verifier learned:PATH)``.

This module reads verifier manifests only (``verifier_folder.find_verifier``); it loads no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.metric.inputs import reads_scores
from bonbench.api.task import task_family
from bonbench.plugins.verifiers import folder as verifier_folder
from bonbench.plugins.verifiers.manifest import PREFIX, VERIFIERS_DIR

LOGPROB = "logprob"  # the verifier chosen when nothing better is known: the policy's own log-probabilities
# the bonbench checkout (bonbench/run/verifier_choice.py -> the repository root)
CHECKOUT = Path(__file__).resolve().parents[2]


def verifier_roots(out: Path) -> tuple[Path, ...]:
    """Where a default learned verifier is looked for, in order: ``<out>/verifiers``, then the
    default results root's ``results/verifiers`` (of the current directory), then the bonbench
    checkout's committed ``results/verifiers``. A run with ``--out`` elsewhere therefore still finds
    the committed verifier of its task and model (the first root holding one wins)."""
    candidates = [Path(out) / VERIFIERS_DIR, Path("results") / VERIFIERS_DIR,
                  CHECKOUT / "results" / VERIFIERS_DIR]
    roots = [candidates[0]]  # named even when absent: it is where `train-verifier --out` would put one
    for c in candidates[1:]:
        if c.is_dir() and all(c.resolve() != r.resolve() for r in roots):
            roots.append(c)
    return tuple(roots)


def _shown(path: Path) -> str:
    """A path as the user reads it: relative to the current directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def choose_verifier(specs: Sequence[MetricSpec], requested: str | None, *, task: str | None = None,
                    model_fingerprint: str | None = None, out: Path | None = None, model: str | None = None,
                    requested_by: str = "--verifier") -> tuple[str | None, str | None]:
    """The verifier the metrics use and why (one line for the user; None when no metric reads scores).

    The requested one; else, when some metric reads scores, the newest learned verifier of the task's
    family trained on this model's samples in the first of ``verifier_roots(out)`` holding one
    (``verifier_folder.find_verifier``), else ``logprob``."""
    if requested:
        if requested.startswith("learned:") and len(requested) > len("learned:"):
            # recorded in config.json: absolute, so that a later `bonbench score` from elsewhere finds it
            return "learned:" + str(Path(requested[len("learned:"):]).expanduser().resolve()), f"{requested_by}"
        return requested, f"{requested_by}"
    if not reads_scores(specs):
        return None, None
    if not (task and model_fingerprint and out is not None):
        return LOGPROB, "no policy model to match a learned verifier to; pass --verifier learned:PATH to use one"
    what = f"{task_family(task)} / {model or model_fingerprint}"
    roots = verifier_roots(out)
    for root in roots:
        found = verifier_folder.find_verifier(root.parent, task, model_fingerprint)
        if found is not None:
            return PREFIX + str(found.resolve()), f"newest learned verifier for {what} under {_shown(root)}"
    where = ", ".join(_shown(r) for r in roots)
    return LOGPROB, f"no learned verifier for {what} under {where}; pass --verifier learned:PATH"


def verifier_line(name: str | None, why: str | None) -> str | None:
    """``verifier: learned:results/verifiers/x (why)``: the line every run prints when bon@k is scored."""
    if name is None:
        return None
    shown = "learned:" + _shown(Path(name[len("learned:"):])) if name.startswith("learned:") else name
    return f"verifier: {shown} ({why})"
