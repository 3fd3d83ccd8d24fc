"""The compute-optimal recipe (``bonbench recipe``): for each budget per problem, the best deployable
strategy among stored runs, with its CI and the paired difference to the runner-up.

A *strategy* is one run (model or checkpoint, temperature, ``--max-tokens``) with a sample count N
and a rule: best-of-N under each verifier the run was scored with (``bon``), majority (``maj``),
weighted majority (``wmaj``) and Best-of-Majority (``bom``) under each verifier. Its accuracy is the
exact estimator of the rule at k = N on the run's own samples (each problem's own n; N goes up to
the smallest n, docs/metrics.md), and its cost per problem comes from the run's compute ledger
(``bonbench.pipeline.ledger``), scaled to N samples:

    cost_i(N) = prompt_i + N * generated_i + N * verifier_i   (verifier_i = 0 for maj)

``prompt_i`` is the prompt's tokens read once (the mean of the samples' ``prompt_tokens``: the
samplers prefill a problem's prompt once and share it across its samples: hf repeats the KV cache,
vLLM caches the prefix), or N times for a run of the ``openai`` backend, which sends one request per
sample (``PROMPT_PER_SAMPLE``), ``generated_i`` the problem's mean generated tokens per sample as measured,
``verifier_i`` the verifier's mean tokens per scored sample as measured. ``--cost flops`` turns
tokens into 2 x parameters x tokens, the policy's for the first two terms and the verifier's for the
last; a parameter count is ``--params``' or counted from the weights where they are on this machine
(``model_params.known_params``). The dataset cost is the mean over problems. pass@N (the oracle's
bound: some sample is right) is shown, never chosen; the ``oracle`` verifier is left out.

A search run (``bonbench run --strategy``) is one strategy at exactly its N per selection rule
(``bon``, ``wmaj``, ``maj`` on its final candidates), costed from its search's ledger; an adaptive
run (``--adaptive``) gives the fixed-N strategies of its settings, estimated without bias under its
designs (``recipe_designs``). Both compete with every other strategy on the same problems.

What it does not do: sample or score, read rows (``recipe_table``: each run's per-problem values
and token counts, kept between calls; ``recipe_designs`` for search and adaptive runs), fit curves,
or write files (``recipe_write``); ``recipe_workers`` computes the tables not kept yet on every CPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.model_params import known_params
from bonbench.apps.analysis.recipe_designs import is_search, search_label
from bonbench.apps.analysis.recipe_table import RunTable, TableSpec
from bonbench.apps.analysis.recipe_workers import keep_tables, table_of
from bonbench.apps.analysis.rundir import RunData, expand_run_dirs, load_run
from bonbench.core.errors import BonbenchError
from bonbench.metrics.bootstrap import bootstrap_ci

# backends that send one request per sample, so a served model reads (and an API bills) the prompt N times
PROMPT_PER_SAMPLE = ("openai",)
# the deployable rules, simplest first: of equally accurate, equally costly strategies the simpler is chosen
RULES = ("single", "maj", "bon", "wmaj", "bom")
BINS = 5  # difficulty bins, as Snell et al.


@dataclass(frozen=True)
class Strategy:
    """One deployable (or oracle) strategy and its dataset values over the recipe's problems."""

    run: str
    model: str
    temperature: float
    max_tokens: int | None
    n: int  # the run's n (config.json; N stops at its problems' smallest n)
    N: int
    rule: str  # single (N = 1: one sample, no rule), bon, maj, wmaj, bom; or pass (the oracle's bound)
    verifier: str | None
    cost: float  # mean per problem, in the recipe's unit
    value: float
    ci95: tuple[float, float] | None  # the chosen ones' (best, runner-up, oracle bound); None in the full list
    search: str | None = None  # a search run's strategy and options (``recipe_designs.search_label``)

    @property
    def oracle(self) -> bool:
        return self.rule == "pass"

    @property
    def name(self) -> str:
        if self.rule == "single":
            return "1 sample"
        rule = f"{self.rule}@{self.N}" + (f" [{self.verifier}]" if self.verifier else "")
        return rule if self.search is None else f"{self.search} {rule}"

    @property
    def setting(self) -> str:
        """The run's deployable settings: model, temperature, generation length."""
        length = "" if self.max_tokens is None else f" len={self.max_tokens}"
        return f"{self.model} T={self.temperature:g}{length}"

    @property
    def label(self) -> str:
        return f"{self.setting} {self.name}"


@dataclass(frozen=True)
class Choice:
    """The best deployable strategy at one budget on one group of problems (``all`` or a difficulty
    bin), the runner-up and the paired difference best - runner-up ``(diff, lo, hi)``; the oracle's
    bound is the best pass@N within the budget."""

    budget: float
    group: str
    n_problems: int
    best: Strategy
    runner_up: Strategy | None
    diff: tuple[float, float, float] | None
    oracle_bound: Strategy | None


@dataclass(frozen=True)
class Recipe:
    task: str
    unit: str  # "tokens" or "flops" per problem
    problems: tuple[str, ...]
    strategies: tuple[Strategy, ...]  # over every problem
    choices: tuple[Choice, ...]
    base_run: str | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Candidate:
    """A strategy's per-problem values and costs (the recipe's problem order), before grouping."""

    run: RunData
    rule: str
    verifier: str | None
    N: int
    values: np.ndarray
    fixed: np.ndarray  # per problem: what does not grow with N (the prompt, read once; a search's own costs)
    step: np.ndarray  # per problem: what each further sample costs (its tokens, the verifier's)
    prompt: np.ndarray  # per problem: one sample's prompt, in the recipe's unit
    per_token: float  # what one policy token costs in the recipe's unit (1, or 2 x the policy's parameters)

    @property
    def name(self) -> str:
        rule = "1 sample" if self.rule == "single" else f"{self.rule}@{self.N}"
        return rule if not is_search(self.run) else f"{search_label(self.run)} {rule}"

    @property
    def costs(self) -> np.ndarray:
        return self.fixed + self.N * self.step

    def strategy(self, idx: np.ndarray, ci95: tuple[float, float] | None = None) -> Strategy:
        """The strategy's record on problems ``idx``, with its bootstrap CI ``ci95`` where given (only
        the strategies a choice names get one: ``_choices``)."""
        v = self.values[idx]
        max_tokens = self.run.config.get("max_tokens")
        return Strategy(str(self.run.path), self.run.model, self.run.temperature,
                        None if max_tokens is None else int(max_tokens), self.run.n, self.N, self.rule, self.verifier,
                        float(self.costs[idx].mean()), float(v.mean()), ci95,
                        search_label(self.run) if is_search(self.run) else None)


def _runs(results: Sequence[Path], task: str | None, notes: list[str]) -> tuple[str, list[RunData]]:
    runs = [load_run(p) for p in expand_run_dirs(results)]
    tasks = sorted({r.task for r in runs})
    if task is None and len(tasks) > 1:
        raise BonbenchError(f"the runs are of several tasks ({', '.join(tasks)}); choose one with --task")
    chosen = task or tasks[0]
    runs = [r for r in runs if r.task == chosen]
    if not runs:
        raise BonbenchError(f"no scored run of task {chosen!r} (have: {', '.join(tasks)}); pass --task with one of them")
    return chosen, runs


def _params_of(name: str, params: Mapping[str, float], what: str, roots: Sequence[Path]) -> float:
    """``--params`` first, else the files (``known_params``), else one line naming the flag to add."""
    if name in params:
        return params[name]
    found = known_params(name, roots)
    if found is None:
        raise BonbenchError(f"--cost flops needs the parameter count of {what} {name!r} (its weights are not here to "
                            f"count); pass --params {name}=COUNT")
    return found


def _candidates(run: RunData, table: RunTable, ids: Sequence[str], unit: str, params: Mapping[str, float],
                notes: list[str]) -> list[_Candidate]:
    """Every strategy of one run over problems ``ids`` (which its table must all have)."""
    pos = {pid: i for i, pid in enumerate(table.ids)}
    at = np.array([pos[pid] for pid in ids])
    prompt, gen = table.prompt[at], table.gen[at]
    once = prompt
    # a search's ledger counts the prompt and prefixes it read on every continuation, per search
    if run.config.get("backend") in PROMPT_PER_SAMPLE and not is_search(run):  # each sample re-reads the prompt: it grows with N
        prompt, gen = np.zeros(len(ids)), gen + prompt
    roots = [run.path.parents[3]] if len(run.path.parents) > 3 else []  # results/runs/<task>/<model>/<hash>
    scale_p = 2 * _params_of(run.model, params, "model", roots) if unit == "flops" else 1.0
    prompt_cost = scale_p * once
    fixed = scale_p * prompt
    if table.search_tokens is not None and table.search_scorer is not None:  # every rule pays the search's scorer
        tokens = table.search_tokens[at]
        flops = unit == "flops" and bool(tokens.any())
        fixed = fixed + tokens * (2 * _params_of(table.search_scorer, params, "verifier", roots) if flops else 1.0)
    out: list[_Candidate] = []
    for (rule, verifier), (Ns, mat) in table.values.items():
        per_ver = np.zeros(len(ids))
        if verifier is not None:
            tokens = table.verifier_tokens[verifier][at]
            if np.isnan(tokens).any():
                notes.append(f"{run.path}: verifier {verifier!r} scored no sample of "
                             f"{ids[int(np.flatnonzero(np.isnan(tokens))[0])]!r}; its {rule} strategies left out")
                continue
            # a verifier that reads no tokens (logprob: the sampler's own log-probabilities) costs nothing in any unit
            flops = unit == "flops" and bool(tokens.any())
            per_ver = tokens * (2 * _params_of(verifier, params, "verifier", roots) if flops else 1.0)
        for j, N in enumerate(Ns):
            out.append(_Candidate(run, rule, verifier, N, mat[at, j], fixed, scale_p * gen + per_ver, prompt_cost, scale_p))
    return out


def _base_run(runs: Sequence[RunData], wanted: Path | None) -> RunData:
    """The run whose pass@1 bins problems by difficulty: ``--base-run``, else the sampling run with the
    largest n (the most precise pass@1), ties to the lowest temperature (the model's own distribution
    at its most likely), then the path. A search's candidates are not draws of the model's pass@1."""
    if wanted is not None:
        for r in runs:
            if r.path.resolve() == Path(wanted).resolve():
                if is_search(r):
                    raise BonbenchError(f"--base-run {wanted} is a search run, whose candidates are not draws of the "
                                        "model's pass@1; pass a sampling run")
                return r
        raise BonbenchError(f"--base-run {wanted} is not one of the recipe's runs; pass one of its run directories")
    runs = [r for r in runs if not is_search(r)]
    if not runs:
        raise BonbenchError("--by difficulty bins problems by a sampling run's pass@1, and every run given is a search "
                            "run; add a sampling run of the same problems")
    return min(runs, key=lambda r: (-r.n, r.temperature if math.isfinite(r.temperature) else math.inf, str(r.path)))


def difficulty_bins(pass1: Mapping[str, float], ids: Sequence[str], bins: int = BINS) -> dict[str, list[int]]:
    """Problem positions per bin: ``difficulty 1`` (easiest: highest pass@1) to ``difficulty BINS``,
    equal counts by rank of pass@1 (ties by problem id, so every problem is in one bin)."""
    order = sorted(range(len(ids)), key=lambda i: (-pass1[ids[i]], ids[i]))
    out: dict[str, list[int]] = {}
    for rank, i in enumerate(order):
        out.setdefault(f"difficulty {rank * bins // len(ids) + 1}", []).append(i)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _coverage_error(budget: float, deployable: Sequence[_Candidate], task: str, unit: str) -> BonbenchError | None:
    """None when ``budget`` lies within the deployable strategies' costs, else the line naming the
    `bonbench run` that would cover it."""
    costs = [c.costs.mean() for c in deployable]
    lo, hi = min(costs), max(costs)
    tol = 1e-9 * max(1.0, hi)
    if lo - tol <= budget <= hi + tol:
        return None
    if budget < lo:
        cheap = deployable[int(np.argmin(costs))]
        r, prompt = cheap.run, float(cheap.prompt.mean())
        if is_search(r):  # a search's prompt is read on every continuation: one sample is the cheaper run
            return BonbenchError(f"budget {budget:g} {unit} per problem is below the cheapest strategy "
                                 f"({cheap.name} of {r.model}: {lo:.4g}); cover it with one sample a problem: "
                                 f"`bonbench run --task {task} --model {r.model} --temperature {r.temperature:g} --n 1`")
        if budget - prompt < cheap.per_token:
            return BonbenchError(f"budget {budget:g} {unit} per problem is below the cheapest run's prompt alone "
                                 f"({prompt:.4g}, {r.model}); no run with these prompts covers it: raise --budget")
        # no sample generates more than --max-tokens, so one sample of this length costs the budget at most
        shorter = int((budget - prompt) // cheap.per_token)
        return BonbenchError(f"budget {budget:g} {unit} per problem is below the cheapest strategy "
                             f"({cheap.name} of {r.model}: {lo:.4g}); cover it with shorter generations: "
                             f"`bonbench run --task {task} --model {r.model} --temperature {r.temperature:g} --n 1 "
                             f"--max-tokens {shorter}`")
    # the strategy best at the top of what the runs cover; its cost is linear in N
    tops = [c for c in deployable if c.N == max(d.N for d in deployable if d.run is c.run)]
    top = max(tops, key=lambda c: float(c.values.mean()))
    need = max(top.N + 1, math.ceil((budget - float(top.fixed.mean())) / float(top.step.mean())))
    verifier = f" --verifier {top.verifier}" if top.verifier else ""
    r = top.run
    if is_search(r):  # a search's own cost grows about in proportion to its N; doubling keeps n a multiple of its width
        need = top.N * 2 ** math.ceil(math.log2(budget / float(top.costs.mean())))
        options = r.config.get("strategy_options") or {}
        flags = "".join(f" -S {k}={options[k]}" for k in sorted(options))
        verifier = f" --verifier {r.config.get('verifier')}" if r.config.get("verifier") else ""
        return BonbenchError(f"budget {budget:g} {unit} per problem is above the costliest strategy the runs cover "
                             f"({hi:.4g}); cover it with a larger search: `bonbench run --task {task} --model {r.model} "
                             f"--temperature {r.temperature:g} --max-tokens {r.config.get('max_tokens')} --strategy "
                             f"{r.config['strategy']}{flags} --n {need}{verifier}`")
    return BonbenchError(f"budget {budget:g} {unit} per problem is above the costliest strategy the runs cover "
                         f"({hi:.4g}); cover it with more samples: `bonbench run --task {task} --model {r.model} "
                         f"--temperature {r.temperature:g} --max-tokens {r.config.get('max_tokens')} --n {need}{verifier}`")


def _choose(budget: float, idx: np.ndarray, cands: Sequence[_Candidate]
            ) -> tuple[_Candidate, _Candidate | None, _Candidate | None] | None:
    """The best deployable strategy within ``budget`` on problems ``idx``, the runner-up and the
    oracle's bound (None when none fits)."""
    tol = 1e-9 * max(1.0, budget)
    fits = [c for c in cands if float(c.costs[idx].mean()) <= budget + tol]
    deploy = sorted((c for c in fits if c.rule != "pass"),
                    key=lambda c: (-float(c.values[idx].mean()), float(c.costs[idx].mean()), c.N, RULES.index(c.rule),
                                   str(c.run.path), c.verifier or ""))
    if not deploy:
        return None
    oracle = max((c for c in fits if c.rule == "pass"), key=lambda c: float(c.values[idx].mean()), default=None)
    return deploy[0], (deploy[1] if len(deploy) > 1 else None), oracle


def _choices(group: str, idx: np.ndarray, budgets: Sequence[float], cands: Sequence[_Candidate], n_boot: int,
             seed: int, notes: list[str], unit: str) -> list[Choice]:
    """The choice at each budget on problems ``idx``, their CIs and paired differences bootstrapped
    together: one resampling of the problems serves every column (``bootstrap_ci`` of a matrix
    bootstraps each column as it would alone, and the paired difference's interval is that of the
    column best - runner-up, pairs with a NaN dropped as ``paired_bootstrap_diff`` drops them)."""
    picked = []
    for b in budgets:
        got = _choose(b, idx, cands)
        if got is None:
            notes.append(f"{group}: no strategy costs {b:g} {unit} or less on these problems")
        else:
            picked.append((b, got))
    columns = [c.values[idx] for _, (best, runner, oracle) in picked for c in (best, runner, oracle) if c is not None]
    columns += [best.values[idx] - runner.values[idx] for _, (best, runner, _) in picked if runner is not None]
    lo, hi = bootstrap_ci(np.column_stack(columns), n_boot=n_boot, seed=seed) if columns else (np.zeros(0), np.zeros(0))
    cis = iter(zip(lo.tolist(), hi.tolist(), strict=True))  # the columns' order: each pick's three, then the differences
    named = [(best.strategy(idx, next(cis)), None if runner is None else runner.strategy(idx, next(cis)),
              None if oracle is None else oracle.strategy(idx, next(cis))) for _, (best, runner, oracle) in picked]
    out = []
    for (b, (best, runner, _)), (best_s, runner_s, oracle_s) in zip(picked, named, strict=True):
        diff = None
        if runner is not None:
            d = best.values[idx] - runner.values[idx]
            d = d[~np.isnan(d)]
            d_lo, d_hi = next(cis)
            diff = (float(d.mean()) if d.size else math.nan, d_lo, d_hi)
        out.append(Choice(b, group, int(idx.size), best_s, runner_s, diff, oracle_s))
    return out


def build_recipe(results: Sequence[Path], budgets: Sequence[float], task: str | None = None, cost: str = "tokens",
                 params: Mapping[str, float] | None = None, by: str | None = None, base_run: Path | None = None,
                 bom_share: float = 0.5, n_boot: int = 1000, seed: int = 0, rules: Sequence[str] = RULES,
                 workers: int = 1) -> Recipe:
    """The recipe of the scored runs under ``results`` for every budget (module docstring), over the
    strategies of ``rules`` (``single`` always: every run has its one-sample strategy); ``workers``
    processes compute the runs' tables not kept yet (``recipe_workers``; 1: this process alone)."""
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise BonbenchError(f"--rules takes {', '.join(RULES[1:])} (comma-separated), not {unknown[0]!r}")
    bad = [b for b in budgets if not b > 0 or not math.isfinite(b)]
    if not budgets or bad:
        raise BonbenchError(f"--budget must be positive {cost} per problem, got {bad[0] if bad else 'none'}; "
                            "e.g. --budget 2000,8000")
    if cost not in ("tokens", "flops"):
        raise BonbenchError(f"--cost must be tokens or flops, not {cost!r}")
    if by not in (None, "difficulty"):
        raise BonbenchError(f"--by takes difficulty, not {by!r}")
    notes: list[str] = []
    chosen, runs = _runs(results, task, notes)
    spec = TableSpec(bom_share, tuple(r for r in RULES if r == "single" or r in rules))
    keep_tables(runs, spec, workers)  # the tables not kept yet, on ``workers`` CPUs at once
    tables = {str(r.path): table_of(r, spec) for r in runs}
    notes += [n for t in tables.values() for n in t.notes]
    grades = {path: set(t.ids) for path, t in tables.items()}
    ids = sorted(set.intersection(*grades.values()))
    if not ids:
        raise BonbenchError(f"the runs of {chosen} share no problem; pass runs of the same problems")
    for path, have in grades.items():
        if len(have) > len(ids):
            notes.append(f"{path}: {len(have) - len(ids)} problems not in every run left out ({len(ids)} shared)")
    cands = [c for r in runs for c in _candidates(r, tables[str(r.path)], ids, cost, params or {}, notes)]
    deployable = [c for c in cands if c.rule != "pass"]
    if not deployable:  # every sampling run has its 1-sample strategy: only search runs can lack one
        raise BonbenchError("no deployable strategy among the runs (search runs with no verifier scores and no answers to "
                            "vote on); score them with `bonbench score RUN_DIR --verifier NAME` or add a sampling run")
    for b in budgets:
        err = _coverage_error(b, deployable, chosen, cost)
        if err is not None:
            raise err
    every = np.arange(len(ids))
    groups: dict[str, np.ndarray] = {"all": every}
    base = None
    if by == "difficulty":
        base = _base_run(runs, base_run)
        table = tables[str(base.path)]
        pass1 = dict(zip(table.ids, table.values[("single", None)][1][:, 0].tolist(), strict=True))
        groups.update({g: np.array(v) for g, v in difficulty_bins(pass1, ids).items()})
    choices = [c for group, idx in groups.items() for c in _choices(group, idx, budgets, cands, n_boot, seed, notes, cost)]
    return Recipe(chosen, cost, tuple(ids), tuple(c.strategy(every) for c in cands), tuple(choices),
                  None if base is None else str(base.path), tuple(notes))
