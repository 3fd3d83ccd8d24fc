"""Many executions at once: a thread pool over `execute()`, result caching, early stop per test list.

Threads are enough: each worker only waits on its child process, so the GIL is not the limit.
Identical jobs in one batch (same cache key: common when samples repeat) are executed once.

Ctrl-C: while a pool runs, SIGINT only sets a flag (`SigintGate`), which the waiting main thread
reads every `POLL_S` seconds; then running programs are killed, queued ones dropped, and
`Interrupted` carries what finished. A KeyboardInterrupt raised at an arbitrary bytecode of the
main thread could leave a lock of the thread-pool machinery held (see `SigintGate`), and joining
the pool would then hang.

Not here: scheduling by expected cost, retries (a "sandbox_error" is returned, not retried), or
any judging of stdout; that is the grader's job.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

from bonbench_sandbox.execution import accounting_mode, ensure_available, execute, resolve_interpreter, resolve_limits
from bonbench_sandbox.result_cache import ResultCache, job_key
from bonbench_sandbox.supervise import Cancelled, ExecResult


@dataclass(frozen=True)
class Job:
    """One execution request: the arguments of `execute()` as a value."""

    program: str
    stdin: str | None = None
    timeout_s: float = 10.0
    memory_mb: int = 1024
    cpu_s: float | None = None
    max_output_bytes: int = 1 << 20
    max_procs: int = 64
    max_file_mb: int = 16
    max_open_files: int = 256
    python: str | None = None
    unsafe: bool = False
    files: Mapping[str, str] | None = field(default=None, hash=False)
    accounting: str = "auto"

    def run(self, cancel: threading.Event | None = None) -> ExecResult:
        return execute(self.program, stdin=self.stdin, timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                       cpu_s=self.cpu_s, max_output_bytes=self.max_output_bytes, max_procs=self.max_procs,
                       max_file_mb=self.max_file_mb, max_open_files=self.max_open_files, python=self.python,
                       unsafe=self.unsafe, files=self.files, accounting=self.accounting, cancel=cancel)

    def key(self) -> str:
        """The `ResultCache` key: every input that can change the result, and nothing else."""
        limits = resolve_limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb, cpu_s=self.cpu_s,
                                max_output_bytes=self.max_output_bytes, max_procs=self.max_procs,
                                max_file_mb=self.max_file_mb, max_open_files=self.max_open_files)
        return job_key(self.program, self.stdin, dict(self.files or {}), limits, resolve_interpreter(self.python),
                       self.unsafe, accounting_mode(self.accounting))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while executing: running programs were killed and queued ones never started.

    ``done`` maps the index of each job (`run_many`) or test list (`run_many_tests`) that finished
    before the interrupt to its result(s), so the caller can keep them.
    """

    def __init__(self, done: dict[int, Any]) -> None:
        super().__init__(f"interrupted; {len(done)} finished")
        self.done = done


POLL_S = 0.1  # how often a waiting pool looks at the Ctrl-C flag (the reaction time it adds)


class SigintGate:
    """Ctrl-C as a flag while the main thread coordinates worker threads (a context manager).

    Python raises KeyboardInterrupt in the main thread between any two bytecodes. Inside the futures
    machinery that can leave a lock acquired and never released: ``concurrent.futures.wait``
    acquires each future's lock in a Python loop, and ``threading.Condition.__enter__`` is Python
    code that can be interrupted right after its lock was taken. The worker that then finishes that
    future blocks forever in ``set_result``, and shutting the pool down (a join) never returns. An
    idle machine rarely shows it (the main thread is asleep in a wait, where the interrupt is
    clean), a loaded one does: the signal then often lands while the main thread is runnable
    inside that code. So inside the gate SIGINT only sets a flag, and ``check()``, called where no
    lock is held, raises KeyboardInterrupt. A Ctrl-C that no ``check()`` saw is raised on leaving
    the gate, so none is lost; one that comes while the caller is already stopping (an exception
    is leaving the gate) adds nothing.

    The gate acts only in the main thread when SIGINT has Python's default handler (else it
    changes nothing and ``check()`` never raises). Gates nest: an inner one shares the outer flag.
    """

    _depth = 0  # active gates, all in the main thread
    _hit = False
    _previous: Any = None

    def __init__(self) -> None:
        self.active = False

    def __enter__(self) -> SigintGate:
        cls = SigintGate
        if threading.current_thread() is not threading.main_thread():
            return self
        if cls._depth == 0:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return self
            cls._hit = False
            cls._previous = signal.signal(signal.SIGINT, _on_sigint)
        cls._depth += 1
        self.active = True
        return self

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C came since the last check."""
        if self.active and SigintGate._hit:
            SigintGate._hit = False
            raise KeyboardInterrupt

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.active:
            return
        cls = SigintGate
        self.active = False
        cls._depth -= 1
        if cls._depth == 0:
            signal.signal(signal.SIGINT, cls._previous)
            hit, cls._hit = cls._hit, False
            if hit and exc_type is None:
                raise KeyboardInterrupt


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    SigintGate._hit = True


def _run_cached(job: Job, key: str | None, cache: ResultCache | None,
                cancel: threading.Event | None = None) -> ExecResult:
    if cancel is not None and cancel.is_set():
        raise Cancelled("execution cancelled")
    result = job.run(cancel)
    if cache is not None and key is not None:
        cache.put(key, result)
    return result


def _check_sandboxes(jobs: Sequence[Job]) -> None:
    # Fail once, up front, with the fix in the message, rather than once per worker.
    for python in {j.python for j in jobs if not j.unsafe}:
        ensure_available(python)


def run_many(
    jobs: Sequence[Job],
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    cache: ResultCache | None = None,
) -> list[ExecResult]:
    """Execute ``jobs`` with ``workers`` threads (default: os.cpu_count()); results in job order.

    ``progress(n)`` is called from the calling thread with the number of jobs finished so far
    (cache hits included). With ``cache``, known results are returned without executing and new
    ones are stored.
    """
    results: list[ExecResult | None] = [None] * len(jobs)
    keys = [j.key() for j in jobs] if cache is not None else [None] * len(jobs)
    todo: dict[str, list[int]] = {}  # one execution per distinct job
    done = 0
    for i, key in enumerate(keys):
        hit = cache.get(key) if cache is not None and key is not None else None
        if hit is not None:
            results[i] = hit
            done += 1
            continue
        todo.setdefault(key if key is not None else f"#{i}", []).append(i)
    if progress is not None and done:
        progress(done)
    if todo:
        _check_sandboxes([jobs[idx[0]] for idx in todo.values()])
        n_workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
        cancel = threading.Event()
        with SigintGate() as sigint:
            pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="bonbench-sandbox")
            try:
                futures: dict[Future[ExecResult], list[int]] = {
                    pool.submit(_run_cached, jobs[idx[0]], keys[idx[0]], cache, cancel): idx for idx in todo.values()
                }
                pending = set(futures)
                while pending:
                    sigint.check()
                    finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        res = fut.result()
                        for i in futures[fut]:
                            results[i] = res
                        done += len(futures[fut])
                    if progress is not None and finished:
                        progress(done)
                pool.shutdown(wait=True)  # every job finished: the threads are idle
                sigint.check()
            except KeyboardInterrupt:
                _stop(pool, cancel)
                raise Interrupted({i: r for i, r in enumerate(results) if r is not None}) from None
            finally:
                pool.shutdown(wait=True)
    assert all(r is not None for r in results), "every job must have a result"
    return [r for r in results if r is not None]


def _stop(pool: ThreadPoolExecutor, cancel: threading.Event) -> None:
    # Queued jobs never start; running ones see `cancel` within half a second, kill their
    # sandbox and raise Cancelled (no result, nothing cached). Without this, leaving the pool's
    # `with` block would run every queued job first.
    cancel.set()
    pool.shutdown(wait=True, cancel_futures=True)


def run_tests(
    jobs: Sequence[Job],
    stop_on_first_failure: bool = True,
    cache: ResultCache | None = None,
    judge: Callable[[int, ExecResult], bool] | None = None,
) -> list[ExecResult]:
    """Execute the tests of one program in order; with ``stop_on_first_failure``, stop after the
    first failing test (the returned list is then shorter than ``jobs``).

    A test fails when its status is not "ok" or, given ``judge(test_idx, result)``, when the judge
    returns False (e.g. stdout differs from the expected output).
    """
    return _run_group(jobs, stop_on_first_failure, cache, judge)


def _run_group(jobs: Sequence[Job], stop: bool, cache: ResultCache | None,
               judge: Callable[[int, ExecResult], bool] | None,
               cancel: threading.Event | None = None) -> list[ExecResult]:
    out: list[ExecResult] = []
    for i, job in enumerate(jobs):
        key = job.key() if cache is not None else None
        res = cache.get(key) if cache is not None and key is not None else None
        if res is None:
            res = _run_cached(job, key, cache, cancel)
        out.append(res)
        passed = res.status == "ok" and (judge is None or judge(i, res))
        if stop and not passed:
            break
    return out


def run_many_tests(
    groups: Sequence[Sequence[Job]],
    workers: int | None = None,
    stop_on_first_failure: bool = True,
    progress: Callable[[int], None] | None = None,
    cache: ResultCache | None = None,
    judge: Callable[[int, int, ExecResult], bool] | None = None,
) -> list[list[ExecResult]]:
    """Run several test lists in parallel (one list per program), each in order with early stop.

    ``judge(group_idx, test_idx, result)`` decides whether a test passed (default: status "ok");
    with ``stop_on_first_failure`` the first failing test ends its group. ``progress(n)`` reports
    finished groups. Ctrl-C kills the running programs and raises `Interrupted` with the finished
    groups' results within about a second (in the main thread through `SigintGate`).
    """
    _check_sandboxes([j for g in groups for j in g[:1]])
    results: list[list[ExecResult]] = [[] for _ in groups]
    lock = threading.Lock()
    finished_groups: set[int] = set()
    cancel = threading.Event()

    def one(gi: int) -> None:
        g_judge = (lambda ti, r: judge(gi, ti, r)) if judge is not None else None
        results[gi] = _run_group(groups[gi], stop_on_first_failure, cache, g_judge, cancel)
        with lock:
            finished_groups.add(gi)

    n_workers = max(1, min(workers or os.cpu_count() or 1, len(groups) or 1))
    with SigintGate() as sigint:
        pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="bonbench-sandbox")
        try:
            pending = {pool.submit(one, gi) for gi in range(len(groups))}
            while pending:
                sigint.check()
                finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for fut in finished:
                    fut.result()
                if progress is not None and finished:
                    with lock:
                        n = len(finished_groups)
                    progress(n)
            pool.shutdown(wait=True)  # every list finished: the threads are idle
            sigint.check()
        except KeyboardInterrupt:
            _stop(pool, cancel)
            with lock:
                done = {gi: results[gi] for gi in sorted(finished_groups)}
            raise Interrupted(done) from None
        finally:
            pool.shutdown(wait=True)
    return results
