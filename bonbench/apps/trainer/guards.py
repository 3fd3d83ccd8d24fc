"""``--stop-if RULE``: end training when a logged quantity says the run went wrong, with a one-line
reason, recorded in the manifest as ``"stopped": {"rule", "step", "reason"}``.

The grammar (``parse_rule``; spaces are ignored, a rule that does not parse is one error before
training starts):

* ``QUANTITY<NUMBER`` / ``QUANTITY>NUMBER``: a column of the step's ``log.jsonl`` row crosses a
  bound (strictly), checked after every step. QUANTITY is one of ``QUANTITIES``; ``kl`` is ``kl_ref``,
  the k3 estimate of KL(policy || base) per completion (``entropy<0.5``, ``kl>30``).
* ``eval:METRIC<step0`` (``>step0``): at an evaluation, METRIC's 95% paired bootstrap interval against
  step 0 (the row's ``vs_step0`` in ``evals.jsonl``) lies entirely below (above) 0: significantly
  worse (better) than the base. METRIC must be one the evaluation computes.
* ``reward_up_eval_down:METRIC``: at an evaluation of step K, METRIC is significantly below step 0
  as above *and* the training reward rose: the mean reward of the ``--eval-every`` steps before K (of
  every step before K without ``--eval-every``) is above step 0's. Reward hacking, or a train split
  the policy learns while the held-out task collapses.

``Guards`` is the training hook that applies them: the first rule that holds stops the run (the loop
then saves and exports the state of that step, as for any hook's stop). This module trains and
evaluates nothing; it reads the rows the loop and the evaluation hook hand it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bonbench.api.metric.grammar import MetricSpec, parse_metric
from bonbench.apps.trainer.hooks import Callback
from bonbench.core.errors import BonbenchError

# the log.jsonl columns a rule may name (every step logs them; kl needs the per-step KL, on by default)
QUANTITIES = {"reward": "reward", "reward_std": "reward_std", "solved_groups": "solved_groups", "entropy": "entropy",
              "loss": "loss", "grad_norm": "grad_norm", "clip_frac": "clip_frac", "kl": "kl_ref", "kl_ref": "kl_ref"}
GRAMMAR = (f"QUANTITY<NUMBER or QUANTITY>NUMBER (QUANTITY one of {', '.join(QUANTITIES)}), eval:METRIC<step0, "
           "eval:METRIC>step0 or reward_up_eval_down:METRIC (e.g. entropy<0.5, kl>30, eval:pass@1<step0)")
_LOG = re.compile(r"^(?P<name>[a-z_]+)(?P<op>[<>])(?P<bound>[^<>]+)$")
_EVAL = re.compile(r"^eval:(?P<metric>[^<>]+)(?P<op>[<>])step0$")
_BOTH = re.compile(r"^reward_up_eval_down:(?P<metric>[^<>]+)$")


@dataclass(frozen=True)
class Rule:
    """One ``--stop-if`` rule: ``text`` as given; ``kind``; ``name`` (a log column, or a canonical
    metric name); ``op`` (``<`` or ``>``); ``bound`` (log rules)."""

    text: str
    kind: Literal["log", "eval", "reward_up_eval_down"]
    name: str
    op: str = "<"
    bound: float = 0.0


def _metric(text: str, metric: str) -> str:
    try:
        return parse_metric(metric).name
    except BonbenchError as exc:
        raise BonbenchError(f"--stop-if {text}: {exc}") from None


def parse_rule(text: str) -> Rule:
    """One rule of the grammar (module docstring), or a one-line error giving the grammar."""
    t = "".join(text.split())
    if m := _BOTH.match(t):
        return Rule(text, "reward_up_eval_down", _metric(text, m["metric"]))
    if m := _EVAL.match(t):
        return Rule(text, "eval", _metric(text, m["metric"]), m["op"])
    if (m := _LOG.match(t)) and m["name"] in QUANTITIES:
        try:
            bound = float(m["bound"])
        except ValueError:
            bound = math.nan
        if math.isfinite(bound):
            return Rule(text, "log", QUANTITIES[m["name"]], m["op"], bound)
    raise BonbenchError(f"--stop-if {text!r} does not parse; write {GRAMMAR}")


def check_rules(texts: Sequence[str], evaluated: Sequence[MetricSpec], log_kl: bool) -> tuple[Rule, ...]:
    """The parsed rules, each one checkable by this run: an evaluation rule names a metric the
    evaluation computes, ``kl`` needs the per-step KL."""
    rules = tuple(parse_rule(t) for t in texts)
    names = [s.name for s in evaluated]
    for r in rules:
        if r.kind != "log" and r.name not in names:
            how = (f"the evaluation computes {', '.join(names)}; name one of those or add --eval-metric {r.name}" if names
                   else f"it reads the held-out evaluation: add --eval-task TASK --eval-metric {r.name}")
            raise BonbenchError(f"--stop-if {r.text}: {how}")
        if r.name == "kl_ref" and not log_kl:
            raise BonbenchError(f"--stop-if {r.text} reads the per-step KL, which --no-log-kl turns off: drop one of them")
    return rules


class Guards(Callback):
    """Applies the rules after each step (``latest``: the evaluation row made after it, if any;
    ``history``: the log rows a resumed run trained before; ``eval_every``: the reward window)."""

    def __init__(self, rules: Sequence[Rule], latest: Callable[[], Mapping[str, Any] | None],
                 history: Sequence[Mapping[str, Any]] = (), eval_every: int | None = None) -> None:
        self.rules, self.latest, self.eval_every = tuple(rules), latest, eval_every
        self.rewards = {int(r["step"]): float(r["reward"]) for r in history}
        self.row: Mapping[str, Any] = {}
        self.done = 0
        self.fired: dict[str, Any] | None = None

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.done, self.row = done, row
        self.rewards[int(row["step"])] = float(row["reward"])

    def should_stop(self) -> str | None:
        if not self.row or self.fired is not None:
            return None
        evaluation = self.latest()
        for rule in self.rules:
            reason = self.check(rule, evaluation)
            if reason:
                self.fired = {"rule": rule.text, "step": self.done, "reason": reason}
                return reason
        return None

    def check(self, rule: Rule, evaluation: Mapping[str, Any] | None) -> str | None:
        """Why ``rule`` holds after this step, or None."""
        if rule.kind == "log":
            value = self.row.get(rule.name)
            if value is None or not (value < rule.bound if rule.op == "<" else value > rule.bound):
                return None
            return f"--stop-if {rule.text}: {rule.name} {value:.4g} {rule.op} {rule.bound:g} at step {self.row['step']}"
        if evaluation is None or rule.name not in evaluation.get("vs_step0", {}):
            return None
        paired = evaluation["vs_step0"][rule.name]
        worse = paired["hi"] < 0 if rule.op == "<" else paired["lo"] > 0
        if not worse:
            return None
        step = int(evaluation["step"])
        shift = (f"{rule.name} {paired['diff']:+.3f} [{paired['lo']:+.3f}, {paired['hi']:+.3f}] vs step 0 at the evaluation "
                 f"of step {step}")
        if rule.kind == "eval":
            return f"--stop-if {rule.text}: {shift}"
        window = [self.rewards[s] for s in range(max(step - (self.eval_every or step), 0), step) if s in self.rewards]
        if 0 not in self.rewards or not window or sum(window) / len(window) <= self.rewards[0]:
            return None
        return (f"--stop-if {rule.text}: training reward {sum(window) / len(window):.3f} over steps "
                f"{step - len(window)}..{step - 1} vs {self.rewards[0]:.3f} at step 0 while {shift}")

    def manifest(self) -> dict[str, Any]:
        return {} if self.fired is None else {"stopped": dict(self.fired)}
