"""The ``prm:`` verifier scheme: a process reward model's per-step scores, aggregated, as bon@k scores.

``--verifier prm:SOURCE?agg=min&family=qwen&batch_size=8&trust_remote_code=true``: SOURCE is a
local folder or a hub id; the options are ``PRMOptions``' fields, coerced by the registry's one
coercion (a wrong value is one line naming the option and its choices). Building the verifier
reads the config and the tokenizer, never the weights: the family is recognised (or ``?family=``
given), its separator or tag is checked in the tokenizer, and an unknown option, aggregation or
family fails then, before any sampling. The model loads when the first sample is scored.

Every row stores the per-step scores (``Score.steps``), the aggregation that made ``Score.score``
of them (``Score.aggregation``), the tokens the PRM read and its forward passes (``tokens``,
``calls``: 1 per scored sample, 0 for a completion with no step). The verifier's name leaves the
aggregation out, and its fingerprint puts it in: a run with another ``agg`` finds the rows of the
same model under another fingerprint and re-aggregates their steps without loading the model
(``rederive``, called by the verify stage). Aggregations: ``bonbench.api.steps.AGGREGATIONS``.

The engine is chosen by ``backend``: ``hf`` (transformers, ``hf``) or ``vllm`` (vLLM's pooling runner,
``pooling``; the qwen and math-shepherd families only, refused for the others when the verifier is
built). Both read the same tokens (``encode``) and give the same ``step_scores``, so ``Score.steps``,
``tokens`` and ``calls`` mean the same on either; the backend is part of the fingerprint. So is
``max_length`` (default: the PRM's positions; more is refused): a longer input loses the start of its
question, never a step (``encode``).

``score_steps`` makes the verifier a partial-solution scorer for search strategies
(``bonbench.api.search.contract.PartialScorer``): lists of steps scored as given, no answer needed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from bonbench.api.search.records import StepScores
from bonbench.api.steps import Aggregation, aggregate
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.core.registry import coerce_kwargs
from bonbench.core.torch_device import resolve_device
from bonbench.plugins.rewards.base import reward_prompt
from bonbench.plugins.rewards.hf import resolve_source
from bonbench.plugins.rewards.prm.encode import StepEncoder
from bonbench.plugins.rewards.prm.family import FAMILIES, FamilyName, PRMFamily, detect_family
from bonbench.plugins.rewards.prm.hf import HFStepScorer, needs_remote_code
from bonbench.plugins.rewards.prm.pooling import VllmStepScorer, check_served

VERSION = 1
BACKENDS: dict[str, Any] = {"hf": HFStepScorer, "vllm": VllmStepScorer}


@dataclass(frozen=True)
class PRMOptions:
    """The ``?key=value`` options of a ``prm:`` verifier."""

    agg: Aggregation = "min"
    family: FamilyName | None = None
    batch_size: int | None = None
    trust_remote_code: bool = False
    backend: Literal["hf", "vllm"] = "hf"
    device: str = "auto"
    dtype: str = "auto"
    gpu_memory_utilization: float | None = None  # backend=vllm: its share of the GPU (default 0.3)
    max_length: int | None = None  # the most tokens read per sample (default: the PRM's positions)


def parse_prm(spec: str) -> tuple[str, PRMOptions]:
    """(source, options) of ``SOURCE?key=value&...``, or a one-line error."""
    source, _, query = spec.strip().partition("?")
    if not source:
        raise BonbenchError("--verifier prm: needs a folder or hub id, e.g. prm:Qwen/Qwen2.5-Math-PRM-7B?agg=min")
    given: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise BonbenchError(f"PRM option {part!r} in {spec!r} is not KEY=VALUE (e.g. prm:{source}?agg=min)")
        given[key.strip()] = value.strip()
    owner = f"PRM verifier {source!r}"
    return source, PRMOptions(**coerce_kwargs(PRMOptions, given, owner=owner, noun="option"))


class PRMVerifier:
    """A process reward model as a bon@k verifier (module docstring)."""

    uses_grades = False
    version = VERSION

    def __init__(self, source: str, options: PRMOptions = PRMOptions()) -> None:
        from transformers import AutoConfig, AutoTokenizer

        self.source, self.options = source, options
        self.path, weights = resolve_source(source)
        trust = options.trust_remote_code
        try:
            config = AutoConfig.from_pretrained(self.path, trust_remote_code=trust)
            tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=trust)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise BonbenchError(f"could not read the config and tokenizer of PRM {source!r} ({first}); "
                                "pass a folder saved with save_pretrained (model and tokenizer)") from None
        self.family: PRMFamily = FAMILIES[options.family] if options.family else detect_family(source, config)
        StepEncoder(self.family, tokenizer, source)  # the separator, tag or reply tokens exist: checked now
        self._check_backend(config)
        self.max_length = self._max_length(config)
        self.device, self.dtype = resolve_device(options.device, options.dtype, "PRM option")
        slug = re.sub(r"[^A-Za-z0-9._]+", "-", Path(source.rstrip("/")).name).strip("-.")[:50] or "x"
        self.name = f"prm-{slug}-{hashlib.sha256(source.encode()).hexdigest()[:6]}"
        recipe = {"weights": weights, "family": asdict(self.family), "dtype": self.dtype, "backend": options.backend,
                  "max_length": self.max_length}
        self.steps_fingerprint = "sha256:" + hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
        self.fingerprint = self.fingerprint_for(options.agg)
        self.engine: Any = None

    def _check_backend(self, config: Any) -> None:
        """The backend can run this PRM as given (module docstring), or a one-line error."""
        o, source = self.options, self.source
        if o.backend == "vllm":
            check_served(self.family, source)  # vLLM runs its own implementation: no remote code needed
            if o.device != "auto":
                raise BonbenchError(f"PRM option device={o.device} is for backend=hf; vLLM picks its device "
                                    "(set CUDA_VISIBLE_DEVICES instead)")
            if o.gpu_memory_utilization is not None and not 0 < o.gpu_memory_utilization <= 1:
                raise BonbenchError(f"PRM option gpu_memory_utilization={o.gpu_memory_utilization} is not in (0, 1]: "
                                    "pass the share of the GPU vLLM may take, e.g. 0.3")
            return
        if o.gpu_memory_utilization is not None:
            raise BonbenchError("PRM option gpu_memory_utilization is for backend=vllm: drop it or add backend=vllm")
        if self.family.loader == "token_classifier" and needs_remote_code(config) and not o.trust_remote_code:
            raise BonbenchError(f"PRM {source!r} runs its own modelling code: add ?trust_remote_code=true "
                                "if you trust the model's source (or use backend=vllm, which has its own)")

    def _max_length(self, config: Any) -> int | None:
        """The most tokens read per sample: ``max_length``, at most the PRM's positions (their number by default)."""
        positions = getattr(config, "max_position_embeddings", None)
        asked = self.options.max_length
        if asked is not None and (asked < 1 or positions and asked > positions):
            raise BonbenchError(f"PRM option max_length={asked} is not between 1 and the {positions} positions PRM "
                                f"{self.source!r} was built for: pass a smaller max_length or leave it out")
        return asked or (int(positions) if positions else None)

    def fingerprint_for(self, agg: str) -> str:
        """The fingerprint of this model's rows aggregated with ``agg``."""
        return f"{self.steps_fingerprint}|agg={agg}"

    def rederive(self, row: Score) -> Score | None:
        """A stored row of this model under another aggregation, re-aggregated (no model); else None."""
        if row.steps is None or row.aggregation is None or row.verifier_version != self.version:
            return None
        if row.verifier_fingerprint != self.fingerprint_for(row.aggregation):
            return None
        return replace(row, score=aggregate(row.steps, self.options.agg), aggregation=self.options.agg)

    def load(self) -> Any:
        """The engine (the model loads now, once)."""
        if self.engine is None:
            o = self.options
            extra = {"gpu_memory_utilization": o.gpu_memory_utilization} if o.backend == "vllm" else {}
            self.engine = BACKENDS[o.backend](self.path, self.source, self.family, device=self.device, dtype=self.dtype,
                                              batch_size=o.batch_size, trust_remote_code=o.trust_remote_code,
                                              max_length=self.max_length, **extra)
        return self.engine

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        steps = [self.family.steps(s.completion) for s in samples]
        questions = [reward_prompt(problems[s.problem_id]) for s in samples]
        results = self.load().step_scores(questions, steps) if any(steps) else [((), 0)] * len(samples)
        agg = self.options.agg
        return [Score(s.problem_id, s.sample_idx, self.name, aggregate(values, agg), steps=values, aggregation=agg,
                      tokens=tokens, calls=1 if values else 0)
                for s, (values, tokens) in zip(samples, results, strict=True)]


    def reused_row(self, sample: Sample, steps: Sequence[str], scores: Sequence[float]) -> Score | str:
        """``score``'s row of a search candidate from the step scores ``score_steps`` gave for exactly
        ``steps`` (``api.verifier.ReusesStepScores``): the same question and the same cleaned steps
        are the same model input, so the values are those a second pass would give (up to the
        batch's floating-point effects). When the family's split of the sample's text gives other
        steps (a step holding the split, ``"\n"`` for skywork and trl, or a blank step), the reason."""
        cleaned = [self.family.clean(s) for s in steps]
        if self.family.steps(sample.completion) != cleaned:
            return (f"the {self.family.name} family cuts the candidate's text on {self.family.split!r} into other "
                    "steps than the search scored")
        agg = self.options.agg
        return Score(sample.problem_id, sample.sample_idx, self.name, aggregate(tuple(scores), agg),
                     steps=tuple(float(v) for v in scores), aggregation=agg, tokens=0, calls=0)

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]:
        """Every step's score of partial solutions, for a search (``api.search.contract.PartialScorer``).

        Each list is read as given, one score per step (each step cleaned as ``family.clean`` does),
        whether or not it reaches an answer; ``questions[i]`` is the problem text (``reward_prompt``).
        A list with no step reads nothing and costs no call.
        """
        lists = [[self.family.clean(s) for s in ss] for ss in steps]
        results = self.load().step_scores(questions, lists) if any(lists) else [((), 0)] * len(lists)
        return [StepScores(values, tokens, 1 if values else 0) for values, tokens in results]


def prm_verifier(spec: str) -> PRMVerifier:
    """prm:<folder or hub id>?agg=...  a process reward model; e.g. prm:peiyi9979/math-shepherd-mistral-7b-prm?agg=min

    Families: qwen, math-shepherd, rlhflow, skywork, trl (recognised from the config and name, or
    ``?family=``); the Qwen PRMs run their own code (``&trust_remote_code=true``); docs/verifiers.md
    gives each public model's command.
    """
    source, options = parse_prm(spec)
    return PRMVerifier(source, options)
