"""The ``tldr`` task: Reddit TL;DR summarization (Stiennon et al.; the second task of Amini et al.,
"Variational Best-of-N Alignment"), judged by a reward model.

Problems: id = ``tldr/<source_row>`` (hub rows: ``tldr/<split>/<index>``); input = the prompt
``SUBREDDIT: r/...\\n\\nTITLE: ...\\n\\nPOST: ...\\n\\nTL;DR:`` (the ``trl-lib/tldr`` format);
target = the human reference summary; meta = ``subreddit``, ``title``, ``policy_sample`` (the
OpenAI 1.3B PPO policy's summary, when the source has it). Base models continue the prompt and stop
at a newline; chat models are asked for a one-sentence summary.

Source: ``tldr/oai_ppo1.3b_samples.jsonl`` under the data dir (1,945 posts), else the hub
``trl-lib/tldr`` (fields ``prompt``, ``completion``), split ``-T split`` (default ``test``).

Grading: ``bonbench.plugins.rewards.base.RewardGrader`` on ``-T reward_model`` (default ``tldr-proxy-eval``, the
offline evaluation proxy: see docs/rewards.md for what it measures; a real reward model such as a
Pythia TL;DR RM is ``hf:<hub id or folder>``). Keep it different from any reward a policy was
trained on (``tldr-proxy-train`` is the training proxy). This module does not score anything itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bonbench.api.reward import get_reward_model
from bonbench.api.task import PromptStyle, Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.rewards.base import RewardGrader

TASK_NAME = "tldr"
VERSION = 1
PROMPT_ID = "tldr-v1"
HUB_ID = "trl-lib/tldr"
LOCAL_FILE = "tldr/oai_ppo1.3b_samples.jsonl"
STOP = ("\n",)
CHAT_INSTRUCTION = "Summarize this Reddit post in one sentence.\n\n{prompt}"


def to_problem(row: dict[str, Any], fallback_id: str) -> Problem:
    """A Problem from a local row (``source_row``, ``summary``) or a hub row (``prompt``, ``completion``)."""
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.rstrip().endswith("TL;DR:"):
        raise BonbenchError(f"TL;DR row {fallback_id} has no prompt ending in 'TL;DR:'; check the data dir's {LOCAL_FILE}")
    reference = row.get("summary") or (row.get("completion") or "").strip()
    pid = f"{TASK_NAME}/{row['source_row']}" if "source_row" in row else f"{TASK_NAME}/{fallback_id}"
    meta = {k: row[k] for k in ("subreddit", "title", "policy_sample") if row.get(k) is not None}
    return Problem(id=pid, input=prompt.rstrip(), target=str(reference), meta=meta)


def _rows(root: Path | None, split: str) -> tuple[list[dict[str, Any]], str]:
    if root is not None:
        path = local_file(root, LOCAL_FILE, "TL;DR posts")
        return list(read_jsonl(path)), file_fingerprint(path)
    return load_hub(HUB_ID, split)


def render(problem: Problem, style: PromptStyle) -> Prompt:
    if style == "base":
        return Prompt(problem_id=problem.id, text=problem.input, stop=STOP)
    return Prompt(problem_id=problem.id, messages=({"role": "user", "content": CHAT_INSTRUCTION.format(prompt=problem.input)},),
                  stop=STOP)


@register_task(TASK_NAME)
def tldr_task(data_dir: Path | None = None, split: str = "test", max_new_tokens: int = 48,
              reward_model: str = "tldr-proxy-eval") -> Task:
    """Reddit TL;DR; ``-T max_new_tokens`` (summary length), ``reward_model`` (a spec), ``split`` (hub only)."""
    if int(max_new_tokens) < 1:
        raise BonbenchError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
    root = resolve_data_dir(data_dir)
    rows, fingerprint = _rows(root, split)
    problems = tuple(to_problem(r, f"{split}/{i}") for i, r in enumerate(rows))
    grader = RewardGrader(get_reward_model(reward_model, data_dir=root))
    return Task(name=TASK_NAME, version=VERSION, problems=problems, render=render, grader=grader, prompt_id=PROMPT_ID,
                default_metrics=("mean",), max_tokens=int(max_new_tokens), grade_args=grader.grade_args(),
                fingerprint=fingerprint, judged_by="reward",
                description=f"Reddit TL;DR summarization, reward: {reward_model}")
