"""The ``judge:`` verifier scheme: an LLM asked whether each answer is right, scored by its P(Yes).

``--verifier judge:SOURCE?key=value&...``. SOURCE is a served judge, ``openai:URL[,URL...]`` (any
OpenAI-compatible endpoints; ``model=`` names the served model id; several URLs share the work and
fail over), or a local one run by transformers (a model folder, a hub id, or ``gemma-3-270m``, the
embedded model). The options are ``JudgeOptions``' fields, coerced by annotation; an unknown one is
one line listing them.

For each sample the judge reads the verification prompt (``judge_prompt``: built-in and versioned, or
``prompt=FILE``) filled with the problem and the answer, and the score is P(Yes) renormalised over
the Yes and No variants among the verdict token's ``top`` log-probabilities (at most 20, as OpenAI's
and vLLM's servers allow), or ``floor`` when no Yes variant is among them (such reads are counted on
stderr). With ``k`` > 0 it first samples k rationales (GenRM-CoT, Zhang et al. 2024), reads P(Yes)
after each, and averages: the row's ``steps`` hold the k reads, ``aggregation`` is ``mean`` and
``rationales`` the k rationales as the verdict read them (the run viewer shows them).
``Score.tokens`` are the tokens the judge read and generated for the sample, ``Score.calls`` its
requests (served) or forward passes (local).

Everything that changes a score is in the fingerprint: the judge model's identity, the prompt's text
and version, k, the rationale sampling settings, top, floor and the seed. Building the verifier
checks what it can before any sampling: the options, the prompt file, the local model's folder, and
for a served judge that every endpoint answers, serves the model and returns log-probabilities (one
one-token request). The local model loads when it first scores.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bonbench.core.errors import BonbenchError
from bonbench.core.models import resolve_model
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.core.registry import coerce_kwargs
from bonbench.core.served import DEFAULT_REQUEST_TIMEOUT_S, EndpointDown, OpenAIOptions, base_url, served_model
from bonbench.core.torch_device import DTYPES, resolve_device
from bonbench.plugins.verifiers.judge_engines import LocalJudge, Rationale, Read, ServedJudge, rationale_seed
from bonbench.plugins.verifiers.judge_prompt import JudgePrompt, load_prompt, p_yes

JUDGE_VERSION = 1
MAX_TOP = 20  # OpenAI's API and vLLM's default --max-logprobs
SERVED = "openai:"


@dataclass(frozen=True)
class JudgeOptions:
    """The ``?key=value`` options of ``judge:``. ``model``: the served model id (served judges);
    ``k``: rationales sampled per answer (0: read the verdict at once); ``temperature``,
    ``max_tokens``: how a rationale is sampled; ``top``: top log-probabilities read (1..20);
    ``floor``: the score of a read with no Yes variant among them; ``prompt``: a prompt file;
    ``seed``: the rationales' seed; ``api``: ``completions`` or ``chat`` (served judges);
    ``concurrency``, ``max_attempts``, ``request_timeout``: the served-model client's settings;
    ``batch_size``, ``device``, ``dtype``: the local engine's (``auto``: CUDA in bfloat16 when torch
    sees a GPU, else the CPU in float32)."""

    model: str | None = None
    k: int = 0
    temperature: float = 0.7
    max_tokens: int = 256
    top: int = MAX_TOP
    floor: float = 0.0
    prompt: str | None = None
    seed: int = 0
    api: str = "completions"
    concurrency: int = 8
    max_attempts: int = 5
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    batch_size: int = 8
    device: str = "auto"
    dtype: str = "auto"

    def check(self, spec: str) -> None:
        """One line naming the fix for a value out of range."""
        bad = [(self.k < 0, "k must be 0 or more"), (not 1 <= self.top <= MAX_TOP, f"top must be 1..{MAX_TOP}"),
               (not 0.0 <= self.floor <= 1.0, "floor must be in [0, 1]"),
               (self.api not in ("completions", "chat"), "api must be completions or chat"),
               (self.temperature <= 0.0, "temperature must be above 0 (rationales are sampled)"),
               (min(self.max_tokens, self.concurrency, self.max_attempts, self.batch_size) < 1,
                "max_tokens, concurrency, max_attempts and batch_size must be at least 1"),
               (self.request_timeout <= 0, "request_timeout must be positive"),
               (self.dtype not in ("auto", *DTYPES), f"dtype must be auto, {', '.join(DTYPES)}")]
        for failed, why in bad:
            if failed:
                raise BonbenchError(f"judge {spec!r}: {why}")


def _parse(spec: str) -> tuple[str, JudgeOptions]:
    source, _, query = spec.strip().partition("?")
    given: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise BonbenchError(f"judge option {part!r} in {spec!r} is not KEY=VALUE (e.g. judge:{source}?k=4)")
        if key.strip() in given:
            raise BonbenchError(f"judge option {key.strip()!r} is given twice in {spec!r}")
        given[key.strip()] = value.strip()
    if not source:
        raise BonbenchError("judge: names no model: give judge:<model folder or hub id> or judge:openai:URL?model=ID")
    opts = JudgeOptions(**coerce_kwargs(JudgeOptions, given, owner=f"judge {source!r}", noun="option"))
    opts.check(spec)
    return source, opts


class JudgeVerifier:
    """A verifier that asks an LLM judge whether each answer is right (module docstring)."""

    version = JUDGE_VERSION
    uses_grades = False

    def __init__(self, spec: str) -> None:
        source, self.options = _parse(spec)
        self.spec = spec
        opts = self.options
        self.prompt: JudgePrompt = load_prompt(opts.prompt, opts.k)
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", source.rstrip("/").rsplit("/", 1)[-1] or source).strip("-")[:40]
        self.name = f"judge-{slug}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"
        self.engine: ServedJudge | LocalJudge
        if source.startswith(SERVED):
            identity, engine_kind = self._served(source[len(SERVED):]), "served"
        else:
            if opts.api != "completions" or opts.model is not None:
                raise BonbenchError(f"judge {spec!r}: model= and api= are for served judges (judge:openai:URL?model=ID)")
            device, dtype = resolve_device(opts.device, opts.dtype, f"judge {spec!r}: option")
            resolved = resolve_model(source)
            self.engine = LocalJudge(resolved, top=opts.top, batch_size=opts.batch_size, device=device, dtype=dtype)
            # the precision moves the log-probabilities; the device (same precision) only by rounding
            identity, engine_kind = f"{resolved.fingerprint}:{dtype}", "local"
        hashed = {"engine": engine_kind, "model": identity, "prompt": self.prompt.template,
                  "prompt_version": self.prompt.version, "top": opts.top, "floor": opts.floor, "api": opts.api,
                  "k": opts.k, **({"temperature": opts.temperature, "max_tokens": opts.max_tokens, "seed": opts.seed}
                                  if opts.k else {})}
        self.fingerprint = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
        self.floored = 0  # reads with no Yes variant among the top log-probabilities, since construction

    def _served(self, urls: str) -> str:
        """Build the served engine and check it; returns the served model's identity."""
        opts = self.options
        endpoints = tuple(u for u in urls.split(",") if u.strip())
        if not endpoints:
            raise BonbenchError(f"judge {self.spec!r} names no endpoint: judge:openai:http://127.0.0.1:8000?model=ID")
        for ep in endpoints:
            base_url(ep)  # a one-line error for a non-URL
        if opts.model is None:
            raise BonbenchError(f"judge {self.spec!r} needs the served model id: add ?model=ID (GET /v1/models lists it)")
        client = OpenAIOptions(endpoints=endpoints, concurrency=opts.concurrency, max_attempts=opts.max_attempts,
                               request_timeout=opts.request_timeout)
        try:
            identity = served_model(opts.model, client).fingerprint
        except EndpointDown as exc:
            raise BonbenchError(f"judge endpoint in {self.spec!r} cannot be reached ({exc.reason}): start the server, "
                                "or correct the URL after judge:openai:") from None
        self.engine = ServedJudge(opts.model, client, top=opts.top, chat=opts.api == "chat", seed=opts.seed)
        probe = self.prompt.verdict("What is 1 + 1?", "1 + 1 = 2. The answer is 2.",
                                    "1 + 1 = 2, so the answer is right." if self.prompt.cot else "")
        self.engine.reads([probe])  # no log-probabilities: NoLogprobs, one line
        return identity

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        opts, k = self.options, self.options.k
        texts = [(problems[s.problem_id].input, s.completion) for s in samples]
        rationales: list[list[Rationale | None]] = [[] for _ in samples]
        if k:
            jobs = [(i, j) for i in range(len(samples)) for j in range(k)]
            made = self.engine.rationales(
                [self.prompt.rationale_prompt(*texts[i]) for i, _ in jobs],
                [rationale_seed(opts.seed, samples[i].problem_id, samples[i].sample_idx, j) for i, j in jobs],
                temperature=opts.temperature, max_tokens=opts.max_tokens, stop=self.prompt.rationale_stop)
            for (i, _), one in zip(jobs, made, strict=True):
                rationales[i].append(one)
        asks: list[tuple[int, Rationale | None]] = [(i, r) for i in range(len(samples)) for r in (rationales[i] or [None])]
        reads = self.engine.reads([self.prompt.verdict(*texts[i], r.text.strip() if r else "") for i, r in asks])
        per: list[list[tuple[Rationale | None, Read]]] = [[] for _ in samples]
        for (i, r), read in zip(asks, reads, strict=True):
            per[i].append((r, read))
        out, floored = [], 0
        for s, pairs in zip(samples, per, strict=True):
            values = []
            for _, read in pairs:
                value, was_floored = p_yes(read.top, opts.floor)
                values.append(value)
                floored += was_floored
            costs = [c for r, read in pairs for c in ((r,) if r else ()) + (read,)]
            tokens = None if any(c.tokens is None for c in costs) else sum(int(c.tokens or 0) for c in costs)
            out.append(Score(s.problem_id, s.sample_idx, self.name, sum(values) / len(values),
                             steps=tuple(values) if k else None, aggregation="mean" if k else None,
                             tokens=tokens, calls=sum(c.calls for c in costs),
                             # each rationale as the verdict read it, beside its P(Yes) in steps (the run viewer shows them)
                             rationales=tuple(r.text.strip() for r, _ in pairs if r is not None) if k else None))
        if floored:
            self.floored += floored
            print(f"warning: judge {self.name}: {floored} of {len(reads)} reads had no Yes variant among the top "
                  f"{opts.top} log-probabilities; they scored the floor {opts.floor:g}", file=sys.stderr)
        return out


def judge_verifier(spec: str) -> JudgeVerifier:
    """judge:<model folder or hub id | openai:URL?model=ID>  an LLM judge's P(Yes) (GenRM); e.g. judge:gemma-3-270m

    ``?k=K`` samples K rationales first and averages P(Yes) after each (GenRM-CoT); see docs/verifiers.md.
    """
    return JudgeVerifier(spec)
