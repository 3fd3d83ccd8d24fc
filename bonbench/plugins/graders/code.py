"""``CodeGrader``: grades code samples by running their test cases in the sandbox.

What it does: turns each sample into its ``ExecCase`` list (the task's ``build_jobs``), runs the
lists through ``bonbench_sandbox`` (a local thread pool, or a ``GroupExecutor`` such as Ray tasks)
with early stop and the persistent result cache, judges every execution
(``bonbench.plugins.graders.code_cases``), runs the trusted replay of function-call recordings in
batches (``bonbench.plugins.graders.replay``), and returns one ``Grade`` per sample. Ctrl-C raises
``GradingInterrupted`` carrying every grade finished before it.

What it does not do: know any benchmark's schema (``bonbench_tasks.*`` build the test cases),
compare outputs or assemble programs (``code_cases``, ``code_text``), or isolate anything
(``bonbench_sandbox`` does). The case and text helpers are imported from ``code_cases`` and
``code_text``, where they are defined.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample
from bonbench.plugins.graders.code_cases import (
    DEFAULT_CACHE_DIR,
    KEYFILE,
    RECORDED,
    BuildJobs,
    CaseVerdict,
    ExecCase,
    NoCode,
    ProgressCallback,
    always_passes,
    assemble_program,
    case_judge,
    judge,
    last_line,
    make_secret,
    output_text,
    recording,
)
from bonbench.plugins.graders.replay import RECORDINGS_FILE, CallTest, parse_verdicts, recordings_file, trusted_program
from bonbench_sandbox.execution import SandboxUnavailable
from bonbench_sandbox.pool import Interrupted, Job, run_many, run_many_tests
from bonbench_sandbox.result_cache import ResultCache

TRUSTED_BATCH = 64  # recordings per trusted run
TRUSTED_BATCH_BYTES = 16 << 20


class GroupExecutor(Protocol):
    """Runs test lists somewhere else than the local thread pool (``bonbench.plugins.graders.ray_sandbox``):
    each list in order, stopping at its first failing test when asked; results per list, in order.
    Ctrl-C raises ``bonbench_sandbox.pool.Interrupted`` with the lists that finished, as the local
    pool does, so their grades are kept."""

    def run_many_tests(self, groups: Sequence[Sequence[Any]], judges: Sequence[Callable[[int, Any], bool]], *,
                       stop_on_first_failure: bool = True, cache: Any = None,
                       progress: Callable[[int], None] | None = None) -> list[list[Any]]: ...


# --------------------------------------------------------------------------- grader


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C during `CodeGrader.grade`: ``grades`` holds every grade finished before it (the
    pipeline stores them before exiting); running sandboxes were killed."""

    def __init__(self, grades: list[Grade]) -> None:
        super().__init__(f"grading interrupted; {len(grades)} grades finished")
        self.grades = grades


class _Partial(Exception):
    def __init__(self, verdicts: dict[int, list[CaseVerdict]]) -> None:
        super().__init__("partial")
        self.verdicts = verdicts


def _load_key(cache_dir: Path | None) -> bytes:
    if cache_dir is None:
        return secrets.token_bytes(32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / "sentinel.key"
    if not path.exists():
        tmp = cache_dir / f".sentinel.key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)  # atomic: the first writer wins, concurrent graders read its key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


class CodeGrader:
    """Grader for code tasks: runs each sample's test cases in the sandbox.

    ``build_jobs(problem, completion)`` (supplied by the task) turns a completion into the list of
    ``ExecCase`` executions; it raises ``NoCode`` when there is nothing to run. Cases of one sample
    run in order and stop at the first failure when ``early_stop``; samples run in parallel on
    ``workers`` threads (each execution is a sandboxed subprocess). Every execution goes through the
    sandbox ``ResultCache`` at ``cache_dir/results.sqlite`` (``cache_dir`` None disables it), so
    re-scoring does not re-execute.

    ``Grade.correct`` = every case passed; ``Grade.answer`` = None (maj@k abstains: agreement between
    programs is not observable without running them on shared inputs); ``Grade.detail`` =
    ``{"status", "passed", "total"}`` with the first failing status ("ok" when all passed) and the
    number of cases passed before it; ``Grade.error`` = a short reason for the failure.

    ``executor`` (a ``GroupExecutor``, e.g. Ray tasks for ``--ray``) runs the test lists instead of
    the local pool; the verdicts are the same, only where the sandboxes run changes.
    """

    name = "code"
    extracts_answers = False  # every Grade.answer is None: maj@k has nothing to vote on (runner.votes_on_answers)
    # 2: function-call verdicts come from the trusted replay (grades of version 1 could be forged)
    version = 2

    def __init__(
        self,
        build_jobs: BuildJobs,
        *,
        cache_dir: str | os.PathLike[str] | None = DEFAULT_CACHE_DIR,
        workers: int | None = None,
        early_stop: bool = True,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        max_output_bytes: int = 1 << 22,
        progress: ProgressCallback | None = None,
        unsafe: bool = False,
        executor: GroupExecutor | None = None,
    ) -> None:
        self.build_jobs = build_jobs
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.workers = workers or max(1, os.cpu_count() or 1)
        self.early_stop = early_stop
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.max_output_bytes = max_output_bytes
        self.progress = progress
        self.unsafe = unsafe
        self.executor = executor
        self._key: bytes | None = None
        self._cache: Any = None
        self._lock = threading.Lock()

    def with_options(self, options: Any) -> CodeGrader:
        """A copy using ``options.exec_cache`` (when given), ``options.unsafe`` and ``options.executor``
        (when given) (``GraderOptions``)."""
        cache_dir = options.exec_cache if options.exec_cache is not None else self.cache_dir
        executor = getattr(options, "executor", None) or self.executor
        return CodeGrader(self.build_jobs, cache_dir=cache_dir, workers=self.workers, early_stop=self.early_stop,
                          timeout_s=self.timeout_s, memory_mb=self.memory_mb, max_output_bytes=self.max_output_bytes,
                          progress=self.progress, unsafe=bool(options.unsafe or self.unsafe), executor=executor)

    def _setup(self) -> None:
        with self._lock:
            if self._key is None:
                self._key = _load_key(self.cache_dir)
                if self.cache_dir is not None:
                    self._cache = ResultCache(self.cache_dir / "results.sqlite")

    def job_for(self, case: ExecCase) -> tuple[Any, str]:
        """The sandbox ``Job`` of one case and the secret its harness must print."""
        self._setup()
        assert self._key is not None
        program = assemble_program(case)
        secret = make_secret(self._key, program, case.stdin)
        job = Job(
            program=program,
            stdin=case.stdin,
            timeout_s=case.timeout_s if case.timeout_s is not None else self.timeout_s,
            cpu_s=case.cpu_s,
            memory_mb=case.memory_mb if case.memory_mb is not None else self.memory_mb,
            max_output_bytes=self.max_output_bytes,
            unsafe=self.unsafe,
            files={KEYFILE: secret + "\n"},
        )
        return job, secret

    def run_cases(self, cases: Sequence[ExecCase]) -> list[CaseVerdict]:
        """Execute and judge the cases of one program (in order, early stop as configured)."""
        return self._run_groups([list(cases)], report=lambda n: None)[0]

    def _run_groups(self, groups: list[list[ExecCase]], report: Callable[[int], None]) -> list[list[CaseVerdict]]:
        """Verdicts per group. Ctrl-C raises `_Partial` with the verdicts of the groups that finished."""
        self._setup()
        jobs = [[self.job_for(c) for c in cases] for cases in groups]
        try:
            results = self._execute(groups, jobs, report)
        except Interrupted as exc:
            done = sorted(exc.done)
            sub = [groups[gi] for gi in done]
            verdicts = [[judge(groups[gi][ti], jobs[gi][ti][1], r) for ti, r in enumerate(exc.done[gi])] for gi in done]
            try:  # a second or two for the trusted checks of what finished; a second Ctrl-C skips them
                self._check_recordings(sub, [[s for _, s in jobs[gi]] for gi in done], [exc.done[gi] for gi in done], verdicts)
            except KeyboardInterrupt:
                pass
            final = {gi: vs for gi, vs in zip(done, verdicts, strict=True) if all(v.status != RECORDED for v in vs)}
            raise _Partial(final) from None
        verdicts = [[judge(groups[gi][ti], jobs[gi][ti][1], r) for ti, r in enumerate(rs)] for gi, rs in enumerate(results)]
        try:
            self._check_recordings(groups, [[s for _, s in g] for g in jobs], results, verdicts)
        except KeyboardInterrupt:
            raise _Partial({gi: vs for gi, vs in enumerate(verdicts) if all(v.status != RECORDED for v in vs)}) from None
        return verdicts

    def _execute(self, groups: list[list[ExecCase]], jobs: list[list[tuple[Any, str]]],
                 report: Callable[[int], None]) -> list[list[Any]]:

        def passes(gi: int, ti: int, result: Any) -> bool:
            return judge(groups[gi][ti], jobs[gi][ti][1], result).passed

        try:
            if self.executor is not None:
                judges = [partial(case_judge, tuple(cases), tuple(s for _, s in g))
                          for cases, g in zip(groups, jobs, strict=True)]
                results = self.executor.run_many_tests([[j for j, _ in g] for g in jobs], judges,
                                                       stop_on_first_failure=self.early_stop, cache=self._cache,
                                                       progress=report)
            else:
                results = run_many_tests([[j for j, _ in g] for g in jobs], workers=self.workers,
                                         stop_on_first_failure=self.early_stop, progress=report,
                                         cache=self._cache, judge=passes)
        except SandboxUnavailable as exc:
            raise BonbenchError(f"code execution needs the sandbox: {exc}") from None
        return results

    def _check_recordings(self, groups: list[list[ExecCase]], secrets_: list[list[str]], results: list[list[Any]],
                          verdicts: list[list[CaseVerdict]]) -> None:
        """Replace every "recorded" verdict by the trusted run's verdict (``bonbench.plugins.graders.replay``)."""
        pending: dict[tuple[CallTest, float], list[tuple[int, int, list[dict[str, Any]]]]] = {}
        for gi, rs in enumerate(results):
            for ti, r in enumerate(rs):
                case = groups[gi][ti]
                if case.calls is None or verdicts[gi][ti].status != RECORDED:
                    continue
                rec = recording(secrets_[gi][ti], r)
                assert rec is not None, "a recorded verdict has a recording"
                timeout = case.timeout_s if case.timeout_s is not None else self.timeout_s
                pending.setdefault((case.calls, timeout), []).append((gi, ti, rec))
        batches: list[tuple[CallTest, float, list[tuple[int, int, list[dict[str, Any]]]]]] = []
        for (test, timeout), items in pending.items():
            part: list[tuple[int, int, list[dict[str, Any]]]] = []
            size = 0
            for item in items:
                n = len(recordings_file([item[2]]))
                if part and (len(part) >= TRUSTED_BATCH or size + n > TRUSTED_BATCH_BYTES):
                    batches.append((test, timeout, part))
                    part, size = [], 0
                part.append(item)
                size += n
            if part:
                batches.append((test, timeout, part))
        while batches:
            retry: list[tuple[CallTest, float, list[tuple[int, int, list[dict[str, Any]]]]]] = []
            jobs = [self._trusted_job(test, timeout, [rec for *_, rec in part]) for test, timeout, part in batches]
            for (test, timeout, part), res in zip(batches, self._run_plain(jobs), strict=True):
                found = parse_verdicts(output_text(res.stdout), len(part)) if res.status == "ok" else None
                if found is None and len(part) > 1:
                    retry += [(test, timeout, [item]) for item in part]  # one bad recording must not sink the rest
                    continue
                for k, (gi, ti, _) in enumerate(part):
                    first = verdicts[gi][ti]
                    if found is None:
                        status = "sandbox_error" if res.status == "sandbox_error" else str(res.status)
                        if status == "ok":
                            status = "runtime_error"
                        verdicts[gi][ti] = CaseVerdict(False, status,
                                                       "trusted check: " + (last_line(output_text(res.stderr)) or status),
                                                       first.cached)
                        continue
                    status, reason = found[k]
                    if status == "not_recorded":
                        u = results[gi][ti]
                        status = "incomplete" if u.status == "ok" else str(u.status)
                        reason = last_line(output_text(u.stderr)) or reason
                    verdicts[gi][ti] = CaseVerdict(status == "ok", status, reason, first.cached)
            batches = retry

    def _trusted_job(self, test: CallTest, timeout: float, recs: Sequence[list[dict[str, Any]]]) -> Any:
        self._setup()
        return Job(program=trusted_program(test, timeout), timeout_s=timeout * len(recs) + 5.0,
                   memory_mb=max(self.memory_mb, 1024), max_output_bytes=self.max_output_bytes,
                   max_file_mb=64, unsafe=self.unsafe, files={RECORDINGS_FILE: recordings_file(recs)})

    def _run_plain(self, jobs: list[Any]) -> list[Any]:
        self._setup()
        if self.executor is not None:
            out = self.executor.run_many_tests([[j] for j in jobs], [always_passes] * len(jobs),
                                               stop_on_first_failure=False, cache=self._cache)
            return [r[0] for r in out]
        return run_many(jobs, workers=self.workers, cache=self._cache)

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        """Grades in the order of ``samples``; build failures become error grades, never raise."""
        out: list[Grade | None] = [None] * len(samples)
        groups: list[list[ExecCase]] = []
        owners: list[int] = []
        for i, s in enumerate(samples):
            problem = problems.get(s.problem_id)
            if problem is None:
                out[i] = self._grade(s, None, None, f"unknown problem {s.problem_id!r}")
                continue
            try:
                cases = list(self.build_jobs(problem, s.completion))
            except NoCode as exc:
                out[i] = self._grade(s, False, {"status": "no_code", "passed": 0, "total": 0}, str(exc) or "no code found")
                continue
            except Exception as exc:  # noqa: BLE001  a task bug must not abort a grading run; it is recorded per sample
                out[i] = self._grade(s, None, None, f"build_jobs failed: {type(exc).__name__}: {exc}"[:300])
                continue
            if not cases:
                out[i] = self._grade(s, None, None, "task produced no test cases")
                continue
            groups.append(cases)
            owners.append(i)
        if groups:
            report, close = self._progress(len(groups))
            try:
                verdicts = self._run_groups(groups, report)
            except _Partial as exc:
                for gi, vs in exc.verdicts.items():
                    out[owners[gi]] = self._verdict_grade(samples[owners[gi]], groups[gi], vs)
                raise GradingInterrupted([g for g in out if g is not None]) from None
            finally:
                close()
            for i, cases, vs in zip(owners, groups, verdicts, strict=True):
                out[i] = self._verdict_grade(samples[i], cases, vs)
        return [g for g in out if g is not None]

    def _verdict_grade(self, sample: Sample, cases: Sequence[ExecCase], verdicts: Sequence[CaseVerdict]) -> Grade:
        passed = sum(v.passed for v in verdicts)
        failing = [(i, v) for i, v in enumerate(verdicts) if not v.passed]
        if not failing and len(verdicts) == len(cases):
            return self._grade(sample, True, {"status": "ok", "passed": passed, "total": len(cases)}, None)
        i, v = failing[0]
        label = f" ({cases[i].label})" if cases[i].label else ""
        reason = f"test {i + 1}/{len(cases)}{label}: {v.status}"
        if v.reason and v.reason != v.status:
            reason += f": {v.reason}"
        if v.status == "sandbox_error":  # the host failed, not the program: undecided
            return self._grade(sample, None, {"status": v.status, "passed": i, "total": len(cases)}, reason[:300])
        return self._grade(sample, False, {"status": v.status, "passed": i, "total": len(cases)}, reason[:300])

    def _grade(self, sample: Sample, correct: bool | None, detail: Mapping[str, Any] | None, error: str | None) -> Grade:
        return Grade(problem_id=sample.problem_id, sample_idx=sample.sample_idx, grader=self.name,
                     grader_version=self.version, correct=correct, answer=None, error=error, detail=detail)

    def _progress(self, total: int) -> tuple[Callable[[int], None], Callable[[], None]]:
        # a callback only: drawing is the caller's (the CLI's bars and lines, bonbench.pipeline.progress)
        cb = self.progress
        if cb is None:
            return (lambda d: None), (lambda: None)
        return (lambda d: cb(d, total)), (lambda: None)
