"""A local Ray cluster and test-only samplers for tests/test_ray.py and benchmarks/bench_ray.py.

``LocalCluster`` starts a head and a worker node on 127.0.0.1 (``ray start --block``, each in a
session of its own, with its own temp dir and port) and kills only those sessions' processes.
The samplers here are importable on its workers (their PYTHONPATH includes tests/), so a sampler
spec can travel to an actor by reference."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core import ray_cluster
from bonbench.core.records import Problem, Sample
from bonbench.plugins.samplers.ray_backend import SamplerSpec
from bonbench.plugins.samplers.scripted import ScriptedSampler


def math_script(problems: Sequence[Problem]) -> dict[str, list[str]]:
    """Completions per problem, replayed by sample_idx (idx % 3): right, wrong, right, ..."""
    return {p.id: [f"so the answer is $\\boxed{{{p.target}}}$.", "$\\boxed{-12345}$", f"it is $\\boxed{{{p.target}}}$"]
            for p in problems}


def humaneval_script(problems: Sequence[Problem]) -> dict[str, list[str]]:
    """The canonical body, a wrong body, and a body that never returns (a timeout) per problem."""
    return {p.id: [str(p.meta["canonical_solution"]), "    return None\n", "    while True:\n        pass\n"]
            for p in problems}


class SlowScripted(ScriptedSampler):
    """A scripted sampler that takes ``delay`` seconds per sample, so a test can kill a node mid-run."""

    def __init__(self, script: dict[str, list[str]], delay: float, model: str) -> None:
        super().__init__(script, model=model)
        self.delay = delay

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        for req in requests:
            for i in req.sample_indices:
                time.sleep(self.delay)
                yield [self._one(req.problem_id, i)]


@dataclass(frozen=True)
class SlowSpec(SamplerSpec):
    """``SamplerSpec`` of the scripted backend whose actors draw slowly."""

    delay: float = 0.2

    def build(self) -> Any:
        return SlowScripted(dict(self.script or {}), self.delay, self.model.name)


# Ray 2.59+ authenticates local clusters with a token, by default the one in ~/.ray/auth_token, which
# other clusters on this machine may rewrite. The clusters started here and their driver (this
# process, and the commands it starts) share a token of their own. Set at import, before anything
# imports ray: ray reads these variables once.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))

REPO = Path(__file__).resolve().parents[1]
RAY_BIN = Path(sys.executable).with_name("ray")
START_TIMEOUT_S = 180.0  # a bound on cluster start-up (2 shared cores), not a timing assertion


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO), str(REPO / ".pp"), str(REPO / "tests")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (read from /proc; only ours: we started the session)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == sid and int(entry.name) != sid:
            out.append(int(entry.name))
    return out


class LocalCluster:
    """A head and worker nodes on 127.0.0.1, each `ray start --block` in its own process group."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="bbray", dir="/tmp"))  # short: Ray's socket paths have a length limit
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen([str(RAY_BIN), "start", "--block", "--disable-usage-stats", *args],
                                            env=node_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> None:
        self._start("head", ["--head", f"--port={self.port}", "--node-ip-address=127.0.0.1", f"--temp-dir={self.tmp}",
                             "--num-cpus=1", "--include-dashboard=false"])
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.procs["head"].poll() is not None:
                    raise RuntimeError(f"the Ray head did not start: {(self.tmp / 'head.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        self._start("worker", [f"--address={self.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                               '--resources={"worker": 1}'])

    def wait_nodes(self, ray: Any, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(ray_cluster.alive_nodes(ray)) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(ray_cluster.alive_nodes(ray))} of {n} Ray nodes came up")
            time.sleep(0.5)

    def kill(self, name: str) -> None:
        """SIGKILL every process of node ``name``: its session (Ray's workers get process groups of
        their own, so a group kill would leave the actors running until they notice the raylet is gone)."""
        proc = self.procs[name]
        for pid in [proc.pid] + _session_members(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.kill(name)
        shutil.rmtree(self.tmp, ignore_errors=True)
