"""The handlers of ``bonbench train-verifier`` and ``bonbench eval-verifier``: a request from the
flags, one library call, a summary and the output paths printed.

Importing this module loads torch (verifier training) and the analysis libraries, so
``bonbench.apps.cli`` imports it only when one of these commands runs. The flags are
``bonbench.apps.cli.verifiers``'s; no training or evaluation logic lives here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bonbench.apps.analysis import verifier_eval as ev
from bonbench.apps.cli.common import Progress, file_in
from bonbench.apps.cli.verifiers import EvalVerifierRequest
from bonbench.apps.verifier_training.request import TrainVerifierRequest
from bonbench.apps.verifier_training.train import train_verifier
from bonbench.core import outputs, settings
from bonbench.core.errors import BonbenchError
from bonbench.plugins.verifiers.manifest import read_verifier_manifest


def cmd_train_verifier(args: argparse.Namespace) -> int:
    req = settings.from_args(TrainVerifierRequest, args)
    with Progress() as progress:
        folder = train_verifier(req, progress)
    doc = read_verifier_manifest(folder)
    held = doc["metrics"]["heldout"]
    auroc = held.get("auroc")
    print(f"{doc['data']['n_samples']} samples ({doc['data']['n_correct']} correct) of {doc['data']['n_problems']} problems; "
          f"held-out AUROC {'n/a' if auroc is None else f'{auroc:.4f}'} on {held['n_problems']} problems")
    print(folder)
    return 0


def cmd_eval_verifier(args: argparse.Namespace) -> int:
    req = settings.from_args(EvalVerifierRequest, args)
    # output paths checked before the (long) evaluation: a read-only folder fails now, not after it
    json_target = file_in(req.json_out, "eval-verifier.json") if req.json_out else None
    plot_target = file_in(req.plot, "eval-verifier.png") if req.plot else None
    for target in (json_target, plot_target):
        if target is not None:
            outputs.check_writable(target)
    with Progress() as progress:
        result = ev.evaluate(list(req.run_dirs), list(req.verifiers), data_dir=req.data_dir, n_boot=req.n_boot,
                             seed=req.seed, progress=progress)
    if req.k is not None and not 1 <= req.k <= result.n:
        raise BonbenchError(f"--k must be between 1 and n={result.n}")
    for line in ev.summary_lines(result, req.k):
        print(line)
    if json_target is not None:
        print(outputs.write_text(json_target, json.dumps(result.to_json(), indent=1)))
    if plot_target is not None:
        try:  # drawn in a temp folder, then written over the target atomically: an older figure stays whole on failure
            with tempfile.TemporaryDirectory(prefix="bonbench-eval-verifier.") as tmp:
                png = ev.plot(result, Path(tmp) / plot_target.name, title=req.title)
                print(outputs.write_bytes(plot_target, png.read_bytes()))
        except OSError as exc:
            raise outputs.write_error(plot_target, exc) from None
    return 0
