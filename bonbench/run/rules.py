"""The rules that turn requested metrics into the metrics a run computes, checked before anything
is sampled: the metrics every run computes and their companions, what a task refuses because it
lacks what a metric reads (the metric kinds' records, ``bonbench.api.metric``), the metrics that
compare with something outside the run (``kl``, ``winrate@k``), greedy decoding, and the one rule
every path shares: a metric's k must not exceed the samples a problem has (``check_k_fits``).

Greedy decoding (``--temperature 0``) draws one sample per problem: every backend decodes the argmax
token, so further samples would repeat it and pass@k / maj@k / bon@k for k > 1 would equal k = 1.
``check_greedy`` refuses n > 1 and metrics with k > 1 with a one-line error; ``greedy_defaults``
keeps the k = 1 metrics of a task's defaults.

Every function here checks values and raises ``BonbenchError`` naming the fix; none loads a model
(``ref_model`` resolves one) or touches a run directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bonbench.api.metric.grammar import MetricSpec, parse_metrics
from bonbench.api.metric.inputs import always_metrics, applies, companions, missing_inputs, refusal, run_inputs, task_inputs
from bonbench.api.task import Task
from bonbench.core import models
from bonbench.core.errors import BonbenchError
from bonbench.run.verifier_choice import choose_verifier


def metric_specs(requested: Sequence[str], default: Sequence[str], judged_by: str = "correctness",
                 votes: bool = True) -> tuple[MetricSpec, ...]:
    """The requested metrics (or ``default``) plus the metrics every run computes and their
    companions, each where the task can compute it (the kinds' records say what they read:
    ``bonbench.api.metric``). With the built-in kinds: pass@1 on a task judged by correctness, mean on
    one judged by a reward model, and beside each bon@k the oracle ceiling (pass@k, or max@k on
    rewards) and the verifier-free baseline (maj@k) at the same k, all from the same samples at no
    sampling cost.

    A requested metric that reads what the task lacks is refused in one line naming what it can
    compute: pass@k and maj@k on a reward-judged task (pass@k on rewards is the expected maximum, so
    it is called max@k rather than aliased: a "pass" rate of 0.73 for a reward would read as a success
    rate), max@k on 0/1 grades (it is pass@k there), maj@k where the grader extracts no answers
    (``votes=False``: code graders; every sample would abstain and maj@k read 0 beside pass@k = 1).
    Such a metric in ``default`` (stored by an earlier version) is dropped instead.
    """
    inputs = run_inputs(judged_by, answers=votes)
    specs = parse_metrics(list(requested) or list(default))
    lacking: dict[str, list[str]] = {}
    for s in specs:
        missing = missing_inputs(s.kind, inputs)
        if missing:
            lacking.setdefault(missing[0], []).append(s.name)
    if lacking and requested:
        first = next(iter(lacking))
        raise refusal(lacking[first], first, inputs)
    specs = [s for s in specs if applies(s.kind, inputs)]
    extra = always_metrics(inputs) + [c for s in specs for c in companions(s, inputs)]
    return tuple(dict.fromkeys([*specs, *extra]))


def task_metric_specs(task: Task, requested: Sequence[str], default: Sequence[str]) -> tuple[MetricSpec, ...]:
    """``metric_specs`` with the task's judge and whether its grader extracts answers to vote on."""
    return metric_specs(requested, default, task.judged_by, "answers" in task_inputs(task))


def _is_special(token: str) -> bool:
    t = token.strip().lower()
    return t in ("kl", "winrate") or (t.startswith("winrate@") and t[8:].isdigit() and int(t[8:]) >= 1)


def split_special(requested: Sequence[str]) -> tuple[tuple[str, ...], set[str]]:
    """``requested`` without the metrics that compare with something outside the run (``kl`` to a
    reference policy, ``winrate`` / ``winrate@k`` against references), and those, normalised."""
    rest: list[str] = []
    special: set[str] = set()
    for text in requested:
        tokens = [t for t in str(text).split(",") if t.strip()]
        special |= {t.strip().lower() for t in tokens if _is_special(t)}
        kept = [t for t in tokens if not _is_special(t)]
        if kept:
            rest.append(",".join(kept))
    return tuple(rest), special


def winrate_ks(special: set[str]) -> tuple[int, ...]:
    """The k of every requested win rate (``winrate`` is k = 1)."""
    return tuple(sorted({1 if s == "winrate" else int(s[8:]) for s in special if s.startswith("winrate")}))


def check_winrate(task: Task, special: set[str], ref_run: Path | None) -> tuple[int, ...]:
    """The win rates asked for, refused where they mean nothing (a task not judged by rewards, no
    references to win against, a ``--ref-run`` that is not a run directory)."""
    ks = winrate_ks(special)
    if not ks:
        if ref_run is not None:
            raise BonbenchError("--ref-run is the comparison of winrate: add --metric winrate (or winrate@k)")
        return ks
    if task.judged_by != "reward":
        raise BonbenchError(f"winrate compares rewards, and task {task.name!r} is not judged by a reward model; "
                            "compare checkpoints with `bonbench leaderboard` instead")
    if ref_run is None and not all(p.target for p in task.problems):
        raise BonbenchError(f"task {task.name!r} has no reference answers to win against; give --ref-run RUN_DIR "
                            "(the reference policy's run of the same task)")
    if ref_run is not None and not (Path(ref_run) / "config.json").exists():
        raise BonbenchError(f"--ref-run {str(ref_run)!r} is not a run directory; pass the directory `bonbench run` printed")
    return ks


def ref_model(name: str | None, special: set[str], top_ps: Sequence[float]) -> models.ResolvedModel | None:
    """The reference policy of ``kl`` (resolved, not loaded); None when no KL is asked for."""
    if name is None:
        if "kl" in special:
            raise BonbenchError("kl needs a reference policy: add --ref-model MODEL (e.g. --ref-model gemma-3-270m)")
        return None
    if any(p < 1.0 for p in top_ps):
        raise BonbenchError("kl is defined for --top-p 1 only (top-p sampling gives tokens zero probability); drop --top-p")
    return models.resolve_model(name)


def check_n(n: int | None) -> None:
    """``--n``, when given, is at least 1."""
    if n is not None and n < 1:
        raise BonbenchError(f"--n must be >= 1 (got {n})")


def over_k(specs: Sequence[MetricSpec], available: int, wins: Sequence[int] = ()) -> list[str]:
    """The metrics (and ``winrate@k`` of ``wins``) whose k exceeds ``available`` samples per problem."""
    return [s.name for s in specs if s.k is not None and s.k > available] + [f"winrate@{k}" for k in wins if k > available]


def check_k_fits(specs: Sequence[MetricSpec], available: int, why: str, wins: Sequence[int] = ()) -> None:
    """A metric's k must not exceed the samples a problem has: ``why`` says where ``available``
    comes from and what to do (it follows "X need(s) k <= available")."""
    too_big = over_k(specs, available, wins)
    if too_big:
        raise BonbenchError(f"{', '.join(too_big)} need(s) k <= {available}{why}")


def resolve_n(specs: Sequence[MetricSpec], n: int | None, wins: Sequence[int] = ()) -> int:
    """``n`` checked against the metrics' k (default: the largest k of ``specs``)."""
    check_n(n)
    ks = [s.k for s in specs if s.k is not None] + list(wins)
    n_run = max((s.k for s in specs if s.k is not None), default=1) if n is None else n
    check_k_fits(specs, n_run, f", but n is {n_run}; raise --n to {max(ks, default=1)} or lower k", wins)
    return n_run


def is_greedy(temperature: float) -> bool:
    """Temperature 0 (or below): every backend decodes the most likely token."""
    return float(temperature) <= 0.0


def greedy_defaults(default: Sequence[str], judged_by: str = "correctness") -> tuple[str, ...]:
    """The task's default metrics that mean something with one sample per problem (k = 1, mean)."""
    kept = tuple(s.name for s in parse_metrics(list(default)) if s.k is None or s.k == 1) if default else ()
    return kept or tuple(s.name for s in always_metrics(run_inputs(judged_by)))


def check_greedy(specs: Sequence[MetricSpec], n: int | None, special: set[str], sweep: bool = False) -> None:
    """Greedy decoding gives one sample per problem: refuse what needs more (k > 1, --n > 1) or a
    sampling density (kl), naming the fix. Lm-eval users know temperature 0 as "one answer per
    question", so more samples are an error rather than n identical copies."""
    where = " (a sweep's runs share n: run --temperature 0 on its own)" if sweep else ""
    too_big = over_k(specs, 1, winrate_ks(special))
    if too_big:
        raise BonbenchError(f"--temperature 0 is greedy decoding, one sample per problem, so {', '.join(too_big)} would equal "
                            f"k=1; ask for k=1 metrics (pass@1) or sample with --temperature > 0{where}")
    if n is not None and n > 1:
        raise BonbenchError(f"--temperature 0 is greedy decoding: every sample would repeat the first; drop --n {n} "
                            f"(n is 1) or sample with --temperature > 0{where}")
    if "kl" in special:
        raise BonbenchError("kl needs a sampling temperature > 0 (greedy decoding has no density to compare); "
                            "drop --metric kl or sample with --temperature > 0")


def default_verifier(specs: Sequence[MetricSpec], requested: str | None, *, task: str | None = None,
                     model_fingerprint: str | None = None, out: Path | None = None) -> str | None:
    """The verifier of ``choose_verifier``, without the reason."""
    return choose_verifier(specs, requested, task=task, model_fingerprint=model_fingerprint, out=out)[0]


def search_n(specs_requested: Sequence[str], n: int | None) -> int:
    """A search's budget: ``--n``, else the largest k requested; one of them must be given."""
    check_n(n)
    if n is not None:
        return n
    ks = [s.k for s in parse_metrics(list(specs_requested)) if s.k is not None] if specs_requested else []
    if not ks:
        raise BonbenchError("--strategy needs its budget: add --n N (the N final candidates of each search)")
    return max(ks)


def search_metric_specs(task: Task, requested: Sequence[str], n: int, *, strategy: str,
                        exchangeable: bool) -> tuple[MetricSpec, ...]:
    """The metrics of a search run of budget ``n`` (default: bon@n, maj@n, wmaj@n, with their
    companions). A strategy's n candidates are one draw of a search, not n exchangeable draws, so
    pass@k / bon@k / maj@k for k < n would read subsets the search never produced: requested, they
    are one line naming the fix; computed by default (pass@1, companions), they are left out. A
    strategy whose candidates are independent draws (``exchangeable``: best_of_n) keeps every k."""
    default = (f"bon@{n}", f"maj@{n}", f"wmaj@{n}")
    specs = task_metric_specs(task, requested, default)
    check_k_fits(specs, n, f", but a search returns n={n} candidates; lower k or raise --n")
    if exchangeable:
        return specs
    below = [s.name for s in parse_metrics(list(requested)) if s.k is not None and s.k < n] if requested else []
    if below:
        raise BonbenchError(f"{', '.join(below)} assume(s) exchangeable draws, and the {n} candidates of a {strategy} "
                            f"search are not: ask for k = {n} (pass@{n}, bon@{n}, maj@{n}, wmaj@{n}), or use "
                            "--strategy best_of_n for k < n")
    return tuple(s for s in specs if s.k is None or s.k == n)
