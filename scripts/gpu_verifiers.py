"""The verifier steps of ``scripts/gpu_check.sh``: process reward models, a chat-templated reward
model and a local LLM judge on the GPU, each against its definition (or the same code) on the CPU.

Subcommands (``python scripts/gpu_verifiers.py CMD FIGURES [--device cuda|cpu]``):

* ``prm``: for every PRM family, a tiny model in its format (``tests/prm_models.py``: random weights,
  the family's tokenizer marks and head). bonbench's per-step scores of four completions on the device,
  in float32 and bfloat16, at batch size 1 and 8, against the family's reference (the model card's
  definition, one forward per step prefix, float32 on the CPU). Recorded per family: the largest
  difference to the reference in each dtype, the largest difference between the two batch sizes,
  and the forward passes of the batched run.
* ``judge``: the tiny judge of ``tests/judge_models.py`` (a Llama whose vocabulary has Yes / No
  variants) scores five answers on the device in float32 and bfloat16, at batch size 1 and 4, against
  ``reference_p_yes`` (the definition, on the CPU).
* ``orm``: a tiny Skywork-Reward-V2-style Llama-3 reward model (``tests/orm_models.py``: chat template
  with BOS, pad = EOS) read through its chat template (``rm:hf:``, ``input=chat``) on the device in
  float32 and bfloat16 at batch size 1 and 8, against the same code on the CPU in float32.
* ``judge-speed MODEL``: a local judge on MODEL (``gpu_check.py lm``'s random-weight policy, the
  real architecture and tokenizer) reads 64 verdicts on the device in bfloat16: samples per second.

Each figure goes to the FIGURES file through ``gpu_check.record``. The script asserts nothing: the
figures are read by a person (docs/gpu.md); the CPU tests assert the same properties at 1e-5 / 1e-4.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from gpu_check import record  # noqa: E402 scripts/ and tests/ are put on the path just above
from judge_models import build_tiny_judge, reference_p_yes  # noqa: E402 after the path is set above
from orm_models import build_llama3_rm  # noqa: E402 after the path is set above
from prm_models import FAMILY_MODELS  # noqa: E402 after the path is set above

from bonbench.api.reward import get_reward_model  # noqa: E402 after the path is set above
from bonbench.api.verifier import get_verifier  # noqa: E402 after the path is set above
from bonbench.core.records import Problem, Sample  # noqa: E402 after the path is set above
from bonbench.plugins.rewards.prm.verifier import PRMVerifier  # noqa: E402 after the path is set above
from bonbench.plugins.verifiers.judge import JudgeVerifier  # noqa: E402 after the path is set above

QUESTION = "Find x if 2x + 3 = 11."
COMPLETIONS = [
    "Step 1: 2x + 3 = 11\n\nStep 2: 2x = 8\n\nStep 3: x = 4\n\nStep 4: check 2*4 + 3 = 11\n\nThe answer is \\boxed{4}",
    "We compute 3 + 4 = 7.\n\nThen 7 - 2 = 5.",
    "the answer is \\boxed{5}",
    "Let x be the number.\n\nThen 2x + 3 = 11, so x = 4.\n\nThe final answer is 12.\n\nDone.\n\nSo 6.",
]


def _worst(a: list[tuple[float, ...]], b: list[tuple[float, ...]]) -> float:
    return max(abs(x - y) for u, v in zip(a, b, strict=True) for x, y in zip(u, v, strict=True))


def prm(figures: Path, device: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="gpu-prm-"))
    problems = {"p": Problem("p", QUESTION, "")}
    samples = [Sample("p", i, c, 1, "stop") for i, c in enumerate(COMPLETIONS)]
    for family, (name, build, reference) in FAMILY_MODELS.items():
        folder = build(root / name)
        named = "family=qwen&" if family == "qwen" else ""  # the tiny qwen is a native token classifier
        steps = None
        for dtype in ("float32", "bfloat16"):
            got = {}
            for batch in (1, 8):
                verifier = get_verifier(f"prm:{folder}?{named}device={device}&dtype={dtype}&batch_size={batch}")
                assert isinstance(verifier, PRMVerifier)
                t0 = time.perf_counter()
                rows = verifier.score(problems, samples, {})
                seconds = time.perf_counter() - t0
                got[batch] = [tuple(r.steps or ()) for r in rows]
                if batch == 8:
                    record(figures, f"prm.{family}.{dtype}.forwards", verifier.engine.forwards)
                    record(figures, f"prm.{family}.{dtype}.samples_per_s", round(len(samples) / seconds, 2))
            if steps is None:
                steps = [tuple(reference(folder, QUESTION, list(verifier.family.steps(c)))) for c in COMPLETIONS]
            record(figures, f"prm.{family}.{dtype}.max_diff_vs_reference", _worst(got[8], steps))
            record(figures, f"prm.{family}.{dtype}.max_diff_batch_1_vs_8", _worst(got[1], got[8]))


def judge(figures: Path, device: str) -> None:
    folder = build_tiny_judge(Path(tempfile.mkdtemp(prefix="gpu-judge-")))
    problems = {"p": Problem("p", "What is 2 + 2?", "4")}
    samples = [Sample("p", i, text, 3, "stop") for i, text in enumerate(
        ["2 + 2 = 4", "GOOD: 4", "2 + 2 = 5 and the step by step", "Maybe 5", "a"])]
    built = get_verifier(f"judge:{folder}?device=cpu")
    assert isinstance(built, JudgeVerifier)
    want = [reference_p_yes(folder, built.prompt.verdict("What is 2 + 2?", s.completion), 20, 0.0) for s in samples]
    for dtype in ("float32", "bfloat16"):
        got = {b: [r.score for r in get_verifier(f"judge:{folder}?device={device}&dtype={dtype}&batch_size={b}")
                   .score(problems, samples, {})] for b in (1, 4)}
        record(figures, f"judge.{dtype}.max_diff_vs_reference", max(abs(a - b) for a, b in zip(got[4], want, strict=True)))
        record(figures, f"judge.{dtype}.max_diff_batch_1_vs_4", max(abs(a - b) for a, b in zip(got[1], got[4], strict=True)))


def orm(figures: Path, device: str) -> None:
    folder = build_llama3_rm(Path(tempfile.mkdtemp(prefix="gpu-orm-")) / "skywork-reward-tiny")
    questions = [QUESTION] * len(COMPLETIONS) + ["What is 2 + 2?"] * 4
    answers = [*COMPLETIONS, "4", "It is 4.", "2 + 2 = 5", "The answer is $\\boxed{4}$ since 2 + 2 = 4."]
    want = get_reward_model(f"hf:{folder}?input=chat&device=cpu&dtype=float32&batch_size=8").score(questions, answers)
    for dtype in ("float32", "bfloat16"):
        got = {b: get_reward_model(f"hf:{folder}?input=chat&device={device}&dtype={dtype}&batch_size={b}")
               .score(questions, answers) for b in (1, 8)}
        record(figures, f"orm.{dtype}.max_diff_vs_cpu_float32", max(abs(a - b) for a, b in zip(got[8], want, strict=True)))
        record(figures, f"orm.{dtype}.max_diff_batch_1_vs_8", max(abs(a - b) for a, b in zip(got[1], got[8], strict=True)))


def judge_speed(figures: Path, device: str, model: str) -> None:
    problems = {"p": Problem("p", "What is 12 * 13? Give the answer as a number.", "156")}
    samples = [Sample("p", i, f"12 * 13 = {150 + i}. The answer is $\\boxed{{{150 + i}}}$.", 16, "stop")
               for i in range(64)]
    verifier = get_verifier(f"judge:{model}?device={device}&dtype=bfloat16&batch_size=16")
    verifier.score(problems, samples[:16], {})  # loads the model; warm-up
    t0 = time.perf_counter()
    rows = verifier.score(problems, samples, {})
    seconds = time.perf_counter() - t0
    record(figures, "judge.speed.samples_per_s", round(len(rows) / seconds, 1))
    record(figures, "judge.speed.tokens_read_per_sample", round(sum(r.tokens or 0 for r in rows) / len(rows), 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["prm", "judge", "orm", "judge-speed"])
    ap.add_argument("figures", type=Path)
    ap.add_argument("model", nargs="?", help="judge-speed: the model folder")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    if args.cmd == "prm":
        prm(args.figures, args.device)
    elif args.cmd == "judge":
        judge(args.figures, args.device)
    elif args.cmd == "orm":
        orm(args.figures, args.device)
    else:
        if not args.model:
            ap.error("judge-speed needs MODEL (a model folder)")
        judge_speed(args.figures, args.device, args.model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
