"""The ``imdb`` task: positive-sentiment steering on IMDB review openings (the setting of Amini et
al., "Variational Best-of-N Alignment", after Ziegler et al. / TRL's sentiment example).

Problems: the first k words of an IMDB review, k drawn uniformly from [``min_words``, ``max_words``]
(the paper's "2-8 tokens"); the model continues the review and a sentiment reward model scores the
whole text (prompt + continuation). Words are whitespace tokens after the reviews' HTML line breaks
are removed, so every model sees the same prompts (a tokenizer-dependent cut would make prompts
differ by model). Which reviews: the split's rows in id order, shuffled by ``seed``, the first
``n_prompts`` (default: 512 of test for evaluation, 5,000 of train for training, as in the paper);
each review's k comes from (``seed``, its id), so it does not depend on ``n_prompts``.

id = ``imdb/<dataset id>`` (``imdb/test/neg/0_2.txt``; hub rows: ``imdb/<split>/<index>``); input =
the opening words; target = "" (no gold continuation); meta = ``label``, ``rating``, ``words``.
Source: ``imdb/<split>.jsonl.gz`` under the data dir, else the hub ``stanfordnlp/imdb``.

Grading: ``bonbench.plugins.rewards.base.RewardGrader`` on ``-T reward_model`` (default ``imdb-sentiment``, the
offline classifier bonbench trains; ``hf:lvwerra/distilbert-imdb?label=POSITIVE`` is the paper's).
The task is reward-judged: ``mean`` is the mean reward, ``bon@k`` the reward of the verifier's pick.
This module loads and renders; it does not train or score anything itself.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.api.reward import get_reward_model
from bonbench.api.task import PromptStyle, Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.rewards.base import RewardGrader

TASK_NAME = "imdb"
VERSION = 1
PROMPT_ID = "imdb-continue-v1"
HUB_ID = "stanfordnlp/imdb"
SPLITS = ("train", "test")
DEFAULT_PROMPTS = {"test": 512, "train": 5000}
CHAT_INSTRUCTION = "Continue this movie review:\n\n{prefix}"
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def review_words(text: str) -> list[str]:
    """A review's words: HTML line breaks removed, split on whitespace."""
    return _BREAK.sub(" ", text).split()


def prefix_length(review_id: str, seed: int, min_words: int, max_words: int) -> int:
    """k in [min_words, max_words], fixed by (seed, review id): independent of which reviews are drawn."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{review_id}".encode()).digest()[:8], "big")
    return min_words + h % (max_words - min_words + 1)


def _rows(root: Path | None, split: str) -> tuple[list[dict[str, Any]], str]:
    if root is not None:
        path = local_file(root, f"imdb/{split}.jsonl.gz", f"IMDB {split} split")
        return list(read_jsonl(path)), file_fingerprint(path)
    rows, fingerprint = load_hub(HUB_ID, split)
    return [{**r, "id": f"{split}/{i}"} for i, r in enumerate(rows)], fingerprint


def build_problems(rows: list[dict[str, Any]], n_prompts: int, seed: int, min_words: int, max_words: int) -> tuple[Problem, ...]:
    """The first ``n_prompts`` reviews of a ``seed``-shuffle of ``rows`` (sorted by id first), as prompts."""
    ordered = sorted(rows, key=lambda r: str(r["id"]))
    order = np.random.default_rng(seed).permutation(len(ordered))
    out = []
    for i in order:
        row = ordered[int(i)]
        words = review_words(row["text"])
        k = prefix_length(str(row["id"]), seed, min_words, max_words)
        if len(words) <= k:
            continue  # a review no longer than its prompt leaves nothing to continue
        out.append(Problem(id=f"{TASK_NAME}/{row['id']}", input=" ".join(words[:k]), target="",
                           meta={"label": row.get("label"), "rating": row.get("rating"), "words": k}))
        if len(out) == n_prompts:
            break
    return tuple(out)


def render(problem: Problem, style: PromptStyle) -> Prompt:
    """Base models continue the opening itself; chat models are asked to continue it."""
    if style == "base":
        return Prompt(problem_id=problem.id, text=problem.input)
    return Prompt(problem_id=problem.id, messages=({"role": "user", "content": CHAT_INSTRUCTION.format(prefix=problem.input)},))


@register_task(TASK_NAME)
def imdb_task(data_dir: Path | None = None, split: str = "test", n_prompts: int | None = None, seed: int = 0,
              min_words: int = 2, max_words: int = 8, max_new_tokens: int = 48, reward_model: str = "imdb-sentiment") -> Task:
    """IMDB sentiment steering; ``-T n_prompts`` (default 512 test / 5000 train), ``seed``, ``min_words``,
    ``max_words`` (prompt length in words), ``max_new_tokens`` (continuation length), ``reward_model`` (a spec)."""
    if split not in SPLITS:
        raise BonbenchError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    if not 1 <= int(min_words) <= int(max_words):
        raise BonbenchError(f"need 1 <= min_words <= max_words (got {min_words}, {max_words}); fix -T min_words / max_words")
    count = int(n_prompts) if n_prompts is not None else DEFAULT_PROMPTS[split]
    if count < 1:
        raise BonbenchError(f"n_prompts must be >= 1 (got {count})")
    if int(max_new_tokens) < 1:
        raise BonbenchError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
    root = resolve_data_dir(data_dir)
    rows, fingerprint = _rows(root, split)
    problems = build_problems(rows, count, int(seed), int(min_words), int(max_words))
    grader = RewardGrader(get_reward_model(reward_model, data_dir=root))
    return Task(name=TASK_NAME, version=VERSION, problems=problems, render=render, grader=grader, prompt_id=PROMPT_ID,
                default_metrics=("mean",), max_tokens=int(max_new_tokens),
                # a problem's prompt depends on these (its k and which reviews exist); n_prompts only selects
                hash_args={"split": split, "seed": int(seed), "min_words": int(min_words), "max_words": int(max_words)},
                grade_args=grader.grade_args(), fingerprint=fingerprint, judged_by="reward",
                description=f"IMDB positive-sentiment continuation of review openings ({split}), reward: {reward_model}")
