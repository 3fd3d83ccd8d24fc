"""Grading of MATH-style final answers: the batch grader.

The grader is split along its seams; each public function is imported from its own module:

* ``extract_answer`` (``math_extract``) pulls the final answer out of a completion;
* ``canonical_answer`` (``math_canonical``) rewrites it into a normal form with string rules;
* ``is_equiv`` (``math_equiv``) compares two answers on their canonical forms: its own rules for
  structure, numbers (``math_numeric``: exact values, the precision they are written with, a
  cheap evaluator) and text, sympy for exact constants, math-verify for the rest;
* ``MathGrader`` (here) grades samples in batch: one comparison per distinct (problem, canonical
  answer), cheap comparisons in-process, symbolic ones on a pool of worker processes with a
  per-comparison timeout (soft: an interval timer inside the worker; hard: the worker is killed
  and replaced). ``python -m bonbench.plugins.graders.math`` is that worker.

What it does not do: ``is_equiv`` itself has no timeout (use ``MathGrader`` for untrusted input);
nothing reads the problem, so conventions that depend on the question (e.g. "answer in degrees")
are fixed rules documented in docs/math-grading.md.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bonbench.core.records import Grade, Problem, Sample
from bonbench.plugins.graders.math_canonical import canonical_answer
from bonbench.plugins.graders.math_classes import answer_classes
from bonbench.plugins.graders.math_conventions import DEFAULT_CONVENTIONS, MathConventions
from bonbench.plugins.graders.math_equiv import NeedsSympy, equiv_canonical
from bonbench.plugins.graders.math_extract import extract_answer, gold_answers


class _SoftTimeout(BaseException):
    """Raised by the interval timer inside a worker; BaseException so math-verify cannot swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _SoftTimeout


def _compare_item(cp: str, cg: str, timeout: float) -> tuple[bool, str | None]:
    """One comparison inside a worker, bounded by an interval timer (the worker is single-threaded)."""
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            return equiv_canonical(cp, cg), None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _SoftTimeout:
        return False, "timeout"
    except Exception as exc:  # noqa: BLE001  a grader failure is data
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"


def _worker_stdio() -> None:
    """Worker process main: JSON lines [timeout, [[idx, pred, gold], ...]] in, [idx, verdict, error] out."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from sympy & co. must not corrupt the protocol stream
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # import and warm up sympy/math-verify before the first item so that its timer measures only
    # the comparison, not ~1 s of imports
    equiv_canonical("x+1", "1+x")
    for line in sys.stdin:
        timeout, items = json.loads(line)
        for idx, cp, cg in items:
            verdict, err = _compare_item(cp, cg, timeout)
            proto.write(json.dumps([idx, verdict, err]) + "\n")
            proto.flush()


def _n_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class _Worker:
    """A ``python -m bonbench.plugins.graders.math`` child. A plain subprocess rather than multiprocessing:
    it works from threads, from scripts without a ``__main__`` guard, and can be killed on a hang."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bonbench.plugins.graders.math"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.batch: list[tuple[int, str, str]] = []
        self.done = 0
        self.since = 0.0
        self.eof = False

    def send(self, timeout: float, batch: list[tuple[int, str, str]]) -> None:
        self.stdin.write((json.dumps([timeout, batch]) + "\n").encode())
        self.stdin.flush()

    def read_replies(self) -> list[tuple[int, bool, str | None]]:
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.eof = True
            return []
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [tuple(json.loads(x)) for x in lines if x.strip()]

    def close(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not self.stdin.closed:
            try:
                self.stdin.close()
            except OSError:
                pass


def _run_pool(
    items: list[tuple[int, str, str]],
    timeout: float,
    workers: int,
    grace: float = 3.0,
    chunk: int = 4,
    warm: list[_Worker] | None = None,
) -> dict[int, tuple[bool, str | None]]:
    """Compare items on ``workers`` processes; an item past ``timeout + grace`` kills its worker.

    ``warm``: workers started earlier (their interpreter start and sympy import overlap with the
    caller's work); the pool takes them from the list and ends every one it does not need."""
    results: dict[int, tuple[bool, str | None]] = {}
    spare = warm if warm is not None else []
    queue = list(reversed(items))
    pool: list[_Worker] = []
    startup = 60.0  # a worker's first batch includes interpreter start and the sympy import

    def feed(w: _Worker, first: bool = False) -> None:
        w.batch = [queue.pop() for _ in range(min(chunk, len(queue)))]
        w.done = 0
        w.since = time.monotonic() + (startup if first else 0.0)
        if w.batch:
            w.send(timeout, w.batch)

    try:
        for _ in range(max(1, min(workers, len(items))) if items else 0):
            pool.append(spare.pop() if spare else _Worker())
            feed(pool[-1], first=True)
        while spare:
            spare.pop().close(kill=True)
        while any(w.batch for w in pool):
            busy = [w for w in pool if w.batch]
            deadline = min(w.since + timeout + grace for w in busy)
            with selectors.DefaultSelector() as sel:
                for w in busy:
                    sel.register(w.fd, selectors.EVENT_READ, w)
                ready = {key.data for key, _ in sel.select(max(0.0, deadline - time.monotonic()))}
            for w in busy:
                if w in ready:
                    for idx, verdict, err in w.read_replies():
                        results[idx] = (verdict, err)
                        w.done += 1
                        w.since = time.monotonic()
                    if w.done >= len(w.batch):
                        feed(w)
                        continue
                if w.eof or time.monotonic() > w.since + timeout + grace:
                    # hung in C code (e.g. a huge integer power) or died: the current item is
                    # recorded, the rest of its batch goes back to the queue, a fresh worker starts
                    idx = w.batch[w.done][0]
                    results[idx] = (False, "worker died" if w.eof else "timeout")
                    queue.extend(reversed(w.batch[w.done + 1 :]))
                    w.close(kill=True)
                    fresh = _Worker()
                    pool[pool.index(w)] = fresh
                    feed(fresh, first=True)
    finally:
        # every reply is in (or the run failed): nothing to flush, and killing spares the ~1 s a
        # worker with sympy loaded takes to exit
        for w in pool + spare:
            w.close(kill=True)
        spare.clear()
    return results


class MathGrader:
    """Grader "math": extract the final answer, canonicalise, compare with the gold answer.

    ``workers`` defaults to the number of usable cores; ``timeout`` (seconds) bounds each symbolic
    comparison; ``conventions`` are the readings where graders differ (``MathConventions``: a
    percent, a decimal comma, a gold written as several boxes). Grade.answer is the canonical
    answer (None when nothing was extracted); ``answer_classes`` says which canonical answers of a
    problem are equal to each other (the classes vote-counting metrics count).
    """

    name = "math"
    version = 4

    def __init__(self, timeout: float = 5.0, workers: int | None = None,
                 conventions: MathConventions = DEFAULT_CONVENTIONS) -> None:
        self.timeout = float(timeout)
        self.workers = workers if workers is not None else _n_cores()
        self.conventions = conventions

    def _gold_forms(self, target: str) -> list[str]:
        """The canonical forms a problem's gold stands for: one, or under ``gold_boxes="any"`` one
        per box of a gold written as several boxes (an answer equal to any of them is right)."""
        forms = [canonical_answer(g, self.conventions) for g in gold_answers(target, self.conventions.gold_boxes)]
        return list(dict.fromkeys(forms))

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        """One Grade per sample, in order; never raises for bad samples or answers."""
        pending: dict[tuple[str, str], list[int]] = {}
        out: list[Grade | None] = [None] * len(samples)
        gold_canon: dict[str, list[str] | Exception] = {}
        # per call, so per conventions: a grader's conventions are fixed and canonical forms depend on them
        canon_cache: dict[str, str] = {}
        extract_cache: dict[str, str | None] = {}

        def make(i: int, correct: bool | None, answer: str | None, error: str | None = None) -> Grade:
            s = samples[i]
            return Grade(s.problem_id, s.sample_idx, self.name, self.version, correct, answer=answer, error=error)

        for i, s in enumerate(samples):
            problem = problems.get(s.problem_id)
            if problem is None:
                out[i] = make(i, None, None, f"unknown problem {s.problem_id!r}")
                continue
            try:
                # completions repeat across samples (and problems): extract each text once
                if s.completion in extract_cache:
                    extracted = extract_cache[s.completion]
                else:
                    extracted = extract_cache[s.completion] = extract_answer(s.completion)
                if extracted is None:
                    canon = None
                elif extracted in canon_cache:  # sampled answers repeat far more than completions do
                    canon = canon_cache[extracted]
                else:
                    canon = canon_cache[extracted] = canonical_answer(extracted, self.conventions)
            except Exception as exc:  # noqa: BLE001  a grader failure is data
                out[i] = make(i, False, None, f"extraction failed: {type(exc).__name__}: {exc}")
                continue
            if not canon:
                out[i] = make(i, False, None)
                continue
            pending.setdefault((s.problem_id, canon), []).append(i)

        verdicts = self._decide(problems, list(pending), gold_canon)
        for key, idxs in pending.items():
            verdict, err = verdicts.get(key, (False, "no verdict"))
            for i in idxs:
                out[i] = make(i, verdict, key[1], err)
        return [g for g in out if g is not None]

    def answer_classes(self, groups: Sequence[Sequence[str]]) -> list[list[int]]:
        """Which of each problem's canonical answers are equal to each other (``math_classes``): per
        group, the index of each answer's class. Symbolic comparisons run on the worker pool, bounded
        by ``timeout`` each, as in ``grade``."""

        def settle(items: list[tuple[int, str, str]]) -> dict[int, bool]:
            return {i: verdict for i, (verdict, _) in _run_pool(items, self.timeout, self.workers).items()}

        return answer_classes(groups, settle)

    def _decide(self, problems: Mapping[str, Problem], keys: list[tuple[str, str]],
                gold_canon: dict[str, list[str] | Exception]) -> dict[tuple[str, str], tuple[bool, str | None]]:
        """A verdict per (problem, canonical answer): cheap comparisons here, the rest on the pool.
        With several gold forms (``gold_boxes="any"``) the answer is right when it equals any one."""
        verdicts: dict[tuple[str, str], tuple[bool, str | None]] = {}
        slow: list[tuple[int, str, str]] = []
        owner: list[int] = []  # slow item -> index of its key
        warm: list[_Worker] = []
        try:
            for k, (pid, canon) in enumerate(keys):
                if pid not in gold_canon:
                    try:
                        gold_canon[pid] = self._gold_forms(problems[pid].target)
                    except Exception as exc:  # noqa: BLE001  reported on each sample of the problem, below
                        gold_canon[pid] = exc
                golds = gold_canon[pid]
                if isinstance(golds, Exception):
                    verdicts[(pid, canon)] = (False, f"gold answer failed to parse: {type(golds).__name__}: {golds}")
                    continue
                needs: list[str] = []
                try:
                    for gold in golds:
                        try:
                            if equiv_canonical(canon, gold, fast_only=True):
                                verdicts[(pid, canon)] = (True, None)
                                break
                        except NeedsSympy:
                            needs.append(gold)
                    else:
                        if not needs:
                            verdicts[(pid, canon)] = (False, None)
                except Exception as exc:  # noqa: BLE001  a grader failure is data
                    verdicts[(pid, canon)] = (False, f"{type(exc).__name__}: {str(exc)[:200]}")
                if (pid, canon) in verdicts:
                    continue
                if not warm:
                    # start the workers at the first comparison that needs one, so that their
                    # interpreter start and sympy import overlap with the rest of this pass
                    warm.extend(_Worker() for _ in range(max(1, self.workers)))
                for gold in needs:
                    slow.append((len(owner), canon, gold))
                    owner.append(k)
            by_key: dict[int, list[tuple[bool, str | None]]] = {}
            for j, res in sorted(_run_pool(slow, self.timeout, self.workers, warm=warm).items()):
                by_key.setdefault(owner[j], []).append(res)
            for k, results in by_key.items():
                # one gold form equal is enough; else a form that timed out leaves the verdict undecided
                right = any(verdict for verdict, _ in results)
                verdicts[keys[k]] = (True, None) if right else (False, next((e for _, e in results if e), None))
        finally:
            for w in warm:  # left only when the pool was not reached: it takes or ends every one
                w.close(kill=True)
        return verdicts


if __name__ == "__main__":
    _worker_stdio()
