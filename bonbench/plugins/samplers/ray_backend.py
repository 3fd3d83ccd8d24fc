"""Sampling on Ray actors (``--ray``): N actors, each a normal bonbench sampler, fed keyed work units.

Each actor builds its own sampler from the run's ``SamplerSpec`` (backend, model, seed, engine
options; ``select.get_sampler``, the one place samplers are built), so an actor is exactly the
sampler a one-machine run would use. The driver cuts the missing keys into units of at most
``unit_samples`` samples (whole problems where they fit, so an engine still batches a problem's n
samples), keeps ``in_flight`` units queued per actor (an actor never idles waiting for the driver)
and yields each unit's samples as its result arrives (``ray.wait``): the driver stays the only writer
of the run directory. Samples do not depend on which actor drew them where the backend seeds per
key (hf, openai, scripted); vLLM seeds its engine, not each request (see vllm.py), so on Ray, as in
any run with a different batch composition, its samples are draws from the same distribution but
not the same draws.

Placement: one actor per GPU (``tensor_parallel_size`` GPUs each) on a cluster with GPUs; on a
CPU-only cluster one actor per node, pinned to it and owning its CPUs (``NodeAffinitySchedulingStrategy``);
``--ray-workers N`` asks for N actors spread over the cluster (``SPREAD``).

Faults: a lost actor (its process or node died: ``RayActorError``) is not restarted and its unit is
not retried by Ray on the same actor (``max_restarts=0``, ``max_task_retries=0``). The driver
already knows exactly which keys that actor had not returned, so it hands those units to the
surviving actors (Ray's own recommendation when its automatic retries do not fit: catch the error
and recover). Ray's restart would not fit: a restarted actor on a CPU cluster is pinned to its node,
which is gone, and would wait for it forever; and even a restartable actor would reload its model
before retrying, while live actors sit ready. Keys that arrive twice (an actor that returned a unit
just before it was declared lost) are dropped by ``pipeline.sample``, which takes each key once.
Only when every actor is lost is it an error (``rerun the same command to resume``; what was stored stays).

This module does not connect to the cluster (``bonbench.core.ray_cluster``) or grade anything.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core import models, ray_cluster
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Sample
from bonbench.plugins.samplers import select


@dataclass(frozen=True)
class SamplerSpec:
    """Everything an actor needs to build the run's sampler with ``select.get_sampler`` (picklable).
    ``script``: the scripted backend's completions (problem id -> texts), for tests and replay."""

    backend: str
    model: models.ResolvedModel
    seed: int
    options: Any = None
    script: Mapping[str, Sequence[str]] | None = field(default=None, hash=False)

    def build(self) -> Any:
        """The sampler this spec describes, built in the calling process (an actor)."""
        if self.backend == "scripted":
            return select.get_sampler("scripted", self.model, seed=self.seed, script=self.script)
        return select.get_sampler(self.backend, self.model, seed=self.seed, options=self.options)


class _SamplerActor:
    """The actor body (made remote in ``RaySampler._start``): one sampler, whole units in, samples out."""

    def __init__(self, spec: SamplerSpec) -> None:
        self.sampler = spec.build()

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def draw(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Sample]:
        return [s for batch in self.sampler.generate(requests, params) for s in batch]

    def close(self) -> None:
        self.sampler.close()


def units(requests: Sequence[SampleRequest], unit_samples: int) -> list[tuple[SampleRequest, ...]]:
    """``requests`` cut into work units of at most ``unit_samples`` samples, in order; a problem with
    more missing indices than that is split into several requests."""
    out: list[tuple[SampleRequest, ...]] = []
    current: list[SampleRequest] = []
    size = 0
    for req in requests:
        for start in range(0, len(req.sample_indices), unit_samples):
            part = SampleRequest(prompt=req.prompt, sample_indices=req.sample_indices[start:start + unit_samples])
            if current and size + len(part.sample_indices) > unit_samples:
                out.append(tuple(current))
                current, size = [], 0
            current.append(part)
            size += len(part.sample_indices)
    if current:
        out.append(tuple(current))
    return out


class RaySampler:
    """Sampler protocol implementation over Ray actors that each run ``spec``'s sampler."""

    def __init__(self, spec: SamplerSpec, options: ray_cluster.RayOptions, *, unit_samples: int = 64,
                 in_flight: int = 2) -> None:
        if unit_samples < 1 or in_flight < 1:
            raise BonbenchError("unit_samples and in_flight must be at least 1")
        self.spec = spec
        self.options = options
        self.name = spec.backend
        self.model = spec.model.name
        self.is_chat = spec.model.is_chat
        self.fingerprint = spec.model.fingerprint
        self.unit_samples = unit_samples
        self.in_flight = in_flight
        self.actors: list[Any] = []
        self.actor_nodes: list[str] = []  # node id of each actor, in actor order
        self.lost: list[int] = []  # indices of actors lost during the run, in the order they were lost
        self.units_per_actor: list[int] = []

    # ------------------------------------------------------------------ actors

    def _placements(self, ray: Any) -> list[dict[str, Any]]:
        """``.options(...)`` of each actor to start."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        gpus = ray_cluster.cluster_gpus(ray)
        tp = int(getattr(self.spec.options, "tensor_parallel_size", 1) or 1)
        common = dict(max_restarts=0, max_task_retries=0)
        if gpus:
            n = self.options.workers or max(1, gpus // tp)
            return [dict(num_gpus=tp, num_cpus=1, **common) for _ in range(n)]
        nodes = [n for n in ray_cluster.alive_nodes(ray) if n.get("Resources", {}).get("CPU", 0) >= 1]
        if not nodes:
            raise BonbenchError("the Ray cluster has no node with a CPU to sample on; add a node (`ray start --address ...`)")
        if self.options.workers is None:
            # one per node, owning its CPUs: an engine uses every core of its node (Ray sets the
            # thread count of torch and OpenMP from num_cpus)
            return [dict(num_cpus=int(n["Resources"]["CPU"]), **common,
                         scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False))
                    for n in nodes]
        # share the CPUs evenly, but never ask for more than one node has (the actor would never start)
        total = int(sum(n["Resources"]["CPU"] for n in nodes))
        per = max(1, min(total // self.options.workers, int(max(n["Resources"]["CPU"] for n in nodes))))
        return [dict(num_cpus=per, scheduling_strategy="SPREAD", **common) for _ in range(self.options.workers)]

    def _start(self) -> Any:
        ray = ray_cluster.connect(self.options)
        if self.actors:
            return ray
        remote = ray.remote(_SamplerActor)
        self.actors = [remote.options(**opts).remote(self.spec) for opts in self._placements(ray)]
        # wait for every engine to load, so a sampler that cannot be built fails here, with its own message
        self.actor_nodes = self._gather(ray, [a.node.remote() for a in self.actors])
        self.units_per_actor = [0] * len(self.actors)
        return ray

    def _gather(self, ray: Any, refs: list[Any]) -> list[Any]:
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as exc:
            raise _cause(exc) from None
        except ray.exceptions.RayActorError as exc:  # the constructor raised (its traceback is in the message)
            raise BonbenchError(f"a Ray sampling actor could not start its {self.spec.backend} sampler: "
                                f"{_last_line(exc)}") from None

    # ------------------------------------------------------------------ sampling

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Draw every requested sample on the actors; yield each unit's samples as it finishes."""
        assert params.seed == self.spec.seed, (
            f"SamplingParams.seed={params.seed} but the sampler was built with seed={self.spec.seed}; "
            "build both from the run's seed"
        )
        todo = units(requests, self.unit_samples)
        if not todo:
            return
        ray = self._start()
        queue = list(reversed(todo))  # popped from the end: units go out in order
        alive = [i for i in range(len(self.actors)) if i not in self.lost]
        running: dict[Any, tuple[int, tuple[SampleRequest, ...]]] = {}  # ref -> (actor, unit)

        def feed(actor: int) -> None:
            while queue and sum(1 for a, _ in running.values() if a == actor) < self.in_flight:
                unit = queue.pop()
                running[self.actors[actor].draw.remote(unit, params)] = (actor, unit)
                self.units_per_actor[actor] += 1

        for actor in alive:
            feed(actor)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            ref = ready[0]
            actor, unit = running.pop(ref)
            try:
                got = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                queue.append(unit)  # this unit, then the actor's others: all go back to the queue
                self._lose(ray, actor, alive, running, queue, exc)
                for other in alive:
                    feed(other)
                continue
            except ray.exceptions.RayTaskError as exc:
                raise _cause(exc) from None
            yield got
            if actor in alive:
                feed(actor)

    def _lose(self, ray: Any, actor: int, alive: list[int], running: dict[Any, tuple[int, tuple[SampleRequest, ...]]],
              queue: list[tuple[SampleRequest, ...]], exc: BaseException) -> None:
        """Actor ``actor`` is gone: put its other unfinished units back at the front of the queue
        (the end of the list: it is popped from there). A second error from an actor already lost
        only requeues its unit."""
        if actor not in alive:
            return
        alive.remove(actor)
        self.lost.append(actor)
        mine = [ref for ref, (a, _) in running.items() if a == actor]
        for ref in mine:
            queue.append(running.pop(ref)[1])
        try:
            ray.kill(self.actors[actor], no_restart=True)  # "temporarily unavailable" must not come back mid-run
        except Exception:  # noqa: BLE001  (already dead: nothing to stop)
            pass
        if not alive:
            raise BonbenchError(f"every Ray sampling actor was lost (last: {_first_line(exc)}); finished samples are "
                                "saved: rerun the same command to resume")
        print(f"warning: Ray sampling actor {actor} on node {self.actor_nodes[actor][:12]} was lost "
              f"({_first_line(exc)}); its requests move to the {len(alive)} other actor(s)", file=sys.stderr)

    def close(self) -> None:
        """Stop the actors (their engines free the GPUs / CPUs for grading)."""
        if not self.actors:
            return
        import ray

        for i, actor in enumerate(self.actors):
            if i not in self.lost:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # noqa: BLE001  (a node that went away took its actor with it)
                    pass
        self.actors = []


def _cause(exc: Any) -> BaseException:
    """The exception raised inside an actor (a BonbenchError stays one, with its own message)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BonbenchError):
        return BonbenchError(str(cause))
    if isinstance(cause, BaseException):
        return cause
    return exc


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:200]
