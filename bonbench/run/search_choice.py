"""What a search run (``bonbench run --strategy NAME -S key=value --verifier prm:... --n N``) is
checked for and resolved to before anything is sampled: the strategy with its options bound, the
verifier as the scorer of partial solutions, and the settings of its run id.

Refused, each in one line naming the fix: a strategy with a samples file, Ray (``--shard`` is the way
to spread a search: each shard searches its own problems), greedy decoding or ``kl`` / ``winrate``;
a task without step structure (``Task.step_delimiter``); no verifier, or one that cannot score partial solutions
(``api.search.contract.partial_scorer``); a budget the strategy cannot spend (n not a multiple of
the width). The backend is checked when the sampler is built (``bonbench.run.execute``: the step
sampler factory), before the first continuation. Options are not given without a strategy.

What it does not do: run a search (``bonbench.pipeline.search``) or pick metrics (``rules``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bonbench.api.search.contract import PartialScorer, Strategy, make_strategy, partial_scorer
from bonbench.api.task import Task
from bonbench.api.think import split_think
from bonbench.core.errors import BonbenchError
from bonbench.run import rules
from bonbench.run.request import RunRequest
from bonbench.run.resolve import bare_verifier


@dataclass(frozen=True)
class SearchChoice:
    """A search run's strategy (options bound) and budget n."""

    strategy: Strategy
    n: int

    @property
    def exchangeable(self) -> bool:
        """Whether its n candidates are exchangeable draws (best_of_n's are: pass@k for k < n means something)."""
        return bool(getattr(self.strategy, "exchangeable", False))

    def config_fields(self, task: Task, seeds: int) -> dict[str, Any]:
        """The ``RunConfig`` settings of this search (``core.config``: what its run id hashes)."""
        return {"strategy": self.strategy.name, "strategy_options": dict(self.strategy.options()),
                "step_delimiter": task.step_delimiter, "seeds": seeds}


def choose_search(req: RunRequest, task: Task, requested: tuple[str, ...], special: set[str]) -> SearchChoice | None:
    """The search ``req`` asks for (None: a sampling run), checked (module docstring)."""
    if req.strategy is None:
        if req.strategy_args or req.seeds != 1:
            raise BonbenchError("-S and --seeds set a search: add --strategy NAME (docs/search.md) or drop them")
        return None
    if req.ray is not None:  # docs/search.md, "Shards and Ray": why a search does not run on Ray actors
        raise BonbenchError("--strategy does not run on Ray: split the problems with --shard i/n instead (one process "
                            "per GPU or node, each searching its own problems), then `bonbench merge RUN_DIR`")
    for given, fix in ((bool(special) or req.ref_model is not None, "drop kl, winrate and --ref-model"),
                       (len(req.temperatures) * len(req.top_ps) > 1, "give one --temperature and one --top-p"),
                       (any(rules.is_greedy(t) for t in req.temperatures), "sample with --temperature > 0")):
        if given:
            raise BonbenchError(f"--strategy does not combine with that setting: {fix}")
    if not task.step_delimiter:
        raise BonbenchError(f"task {task.name!r} has no step structure (its solutions are not cut into steps), which "
                            "a search needs: search a task that has one (math, math500, ...) or drop --strategy")
    n = rules.search_n(requested, req.n)
    strategy = make_strategy(req.strategy, **dict(req.strategy_args))
    strategy.check(n)
    return SearchChoice(strategy, n)


def search_scorer(verifier: str | None, data_dir: str | None) -> PartialScorer:
    """The run's verifier as the scorer of partial solutions (built, not loaded), or the one-line error."""
    if verifier is None:
        raise BonbenchError("a search ranks partial solutions with a process reward model: add --verifier prm:SOURCE "
                            "(docs/verifiers.md)")
    base, _ = split_think(verifier)
    return partial_scorer(bare_verifier(base, data_dir), verifier)


def stored_search(cfg_json: Mapping[str, Any], n: int | None) -> SearchChoice | None:
    """The search a stored run's config records (None: a sampling run), for rescoring it
    (``bonbench score RUN_DIR``); its n is its budget, which no rescoring changes."""
    name = cfg_json.get("strategy")
    if name is None:
        return None
    budget = int(cfg_json["n"])
    if n is not None and n != budget:
        raise BonbenchError(f"n={budget} is this search run's budget, not a count of draws: drop --n (a search of "
                            "another budget is another run: `bonbench run --n N`)")
    return SearchChoice(make_strategy(str(name), **dict(cfg_json.get("strategy_options") or {})), budget)
