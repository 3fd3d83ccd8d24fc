"""Host side of one code execution: test cases, program assembly with a secret sentinel, verdicts.

Where each verdict is decided:

* **stdin/stdout tests** (CodeContests, TACO stdin problems): the program's stdout is compared with
  the expected output here, on the host; the expected output never enters the sandbox.
* **function-call tests** (HumanEval, MBPP, TACO ``fn_name`` problems; ``ExecCase.calls``): the
  sandbox only records the calls the tests make and their results as plain data; a separate
  trusted run of the tests replays that recording and its assertions decide
  (``bonbench.plugins.graders.replay``). Nothing the untrusted process does to its own interpreter (an
  always-true ``__eq__``, frame walks, ``sys.settrace``, patched builtins) reaches that run.

The sentinel frames the program's own output: the harness reads a secret line (from a file deleted
before any user code exists) and writes it after the program, so a program that exits early
(``exit(0)``, ``os._exit(0)``, ``raise SystemExit``), prints from ``atexit`` or closes stdout cannot
produce it. The sentinel is ``HMAC(key, program, stdin)``: unpredictable to the program, but the
same for the same execution, so the sandbox ``ResultCache`` (keyed by program, stdin and limits)
can serve re-scoring without re-executing. The key lives next to the cache (``sentinel.key``) and
never enters the sandbox; without a cache it is fresh per grader. A program that finds the secret
(it is in the harness's frame) gains nothing for function-call tests (it can only end its own
recording) and, for stdin tests, still needs the expected output.

What it does not do: run anything (``bonbench.plugins.graders.code.CodeGrader`` sends the programs
to the sandbox and runs the trusted checks), know any benchmark's schema (``bonbench_tasks.*`` build
the test cases) or isolate anything (``bonbench_sandbox`` does).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.core.records import Problem
from bonbench.plugins.graders.code_text import outputs_match
from bonbench.plugins.graders.replay import RECORD_MARK, CallTest, parse_recording, recording_source

SECRET_HEX = 32  # 128 bits: not guessable
KEYFILE = ".bb_sentinel"  # next to main.py in the sandbox; the harness deletes it before user code runs
DEFAULT_CACHE_DIR = Path("results/cache/exec")
ENV_EXEC_CACHE = "BONBENCH_EXEC_CACHE"  # the code graders' cache folder; run.resolve lets it win over --out's

ProgressCallback = Callable[[int, int], None]


def default_cache_dir() -> Path:
    """``$BONBENCH_EXEC_CACHE`` if set, else ``results/cache/exec`` (relative to the working directory)."""
    return Path(os.environ.get(ENV_EXEC_CACHE) or DEFAULT_CACHE_DIR)


# --------------------------------------------------------------------------- test cases


@dataclass(frozen=True)
class ExecCase:
    """One execution of a test: ``source`` is solution + test code (no harness).

    ``expected_stdout`` None means function-call style (pass = the code ran to its end); otherwise
    the program's stdout must match it under the tolerance rules of ``outputs_match``.
    ``as_main`` runs the code with ``__name__ == "__main__"`` (stdin programs); function-call tests
    use another name, like the official HumanEval/MBPP harnesses, so demo ``__main__`` blocks in a
    completion do not run. ``timeout_s`` (wall clock) / ``memory_mb`` None take the grader's defaults;
    ``cpu_s`` None lets the sandbox derive the CPU limit from the wall clock.

    ``calls`` makes it a function-call test decided outside the sandbox (``bonbench.plugins.graders.replay``):
    ``source`` is then only the candidate's code; the sandbox records the calls ``calls.tests`` make
    and a trusted run of the tests on that recording gives the verdict. Every task's function-call
    tests use it; a case without ``calls`` and without ``expected_stdout`` passes when its code runs
    to its end, which the untrusted code itself can influence (kept for programs, not for tasks).
    """

    source: str
    stdin: str = ""
    expected_stdout: str | None = None
    timeout_s: float | None = None
    cpu_s: float | None = None
    memory_mb: int | None = None
    float_tol: bool = False
    as_main: bool = False
    label: str = ""
    calls: CallTest | None = None


BuildJobs = Callable[[Problem, str], Sequence[ExecCase]]


class NoCode(ValueError):
    """Raised by a task's build_jobs when the completion holds no usable code (a wrong answer, not a bug)."""


# --------------------------------------------------------------------------- program assembly

_HARNESS = r'''import os as _bb_os, sys as _bb_sys


def _bb_run():
    write, stdout = _bb_os.write, _bb_sys.stdout
    # the secret arrives as a file that is deleted before any user code exists
    with open({keyfile!r}, "rb") as fh:
        secret = fh.read()
    _bb_os.unlink({keyfile!r})
    src = {src!r}
    import linecache
    linecache.cache["<solution>"] = (len(src), None, src.splitlines(True), "<solution>")
    code = compile(src, "<solution>", "exec")
    del src
    scope = {{"__name__": {name!r}, "__builtins__": __builtins__}}
    exec(code, scope)
    threading = _bb_sys.modules.get("threading")
    if threading is not None:
        # programs that do their work in a non-daemon thread (a common stack-size trick) finish first
        for t in threading.enumerate():
            if t is not threading.main_thread() and not t.daemon:
                t.join()
    try:
        _bb_sys.stdout.flush()
    except Exception:
        pass
    # the original stdout must still be usable: a program that closed it cannot vouch for its output
    stdout.flush()
    write(1, b"\n" + secret)  # secret carries its own trailing newline


_bb_run()
'''


# Function-call tests: the recording is written after the tests whatever they did (an assertion
# that failed here decides nothing; the trusted run does). ``_bb_dumps`` is the recorder's own
# JSON writer, looked up before user code runs.
_CALL_HARNESS = r'''import os as _bb_os, sys as _bb_sys


def _bb_run():
    write = _bb_os.write
    with open({keyfile!r}, "rb") as fh:
        secret = fh.read().strip()
    _bb_os.unlink({keyfile!r})
    src = {src!r}
    import linecache
    linecache.cache["<solution>"] = (len(src), None, src.splitlines(True), "<solution>")
    code = compile(src, "<solution>", "exec")
    del src
    scope = {{"__name__": "__solution__", "__builtins__": __builtins__}}
    try:
        exec(code, scope)
    finally:
        try:
            _bb_sys.stdout.flush()
        except BaseException:
            pass
        try:
            record = scope["_bb_dumps"](scope["_bb_calls"])
        except BaseException:
            record = "null"
        write(1, b"\n" + secret + {mark!r}.encode() + record.encode() + b"\n")


_bb_run()
'''


def assemble_program(case: ExecCase) -> str:
    """The harness program that runs ``case.source`` (the secret comes in ``KEYFILE``, see module doc)."""
    if case.calls is not None:
        return _CALL_HARNESS.format(keyfile=KEYFILE, src=recording_source(case.calls, case.source), mark=RECORD_MARK)
    return _HARNESS.format(keyfile=KEYFILE, src=case.source, name="__main__" if case.as_main else "__solution__")


def make_secret(key: bytes, program: str, stdin: str) -> str:
    """The per-execution sentinel: HMAC over the exact program and stdin (32 hex chars)."""
    msg = hashlib.sha256(program.encode("utf-8", "surrogatepass")).digest() + stdin.encode("utf-8", "surrogatepass")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:SECRET_HEX]


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict on one execution. ``status``: "ok", the sandbox's failure status ("timeout",
    "memory", "runtime_error", ...), "incomplete" (exit 0 without the sentinel: the tests did not run
    to their end) or "wrong_answer"."""

    passed: bool
    status: str
    reason: str = ""
    cached: bool = False


def output_text(value: Any) -> str:
    """A sandbox stream (str, bytes or None) as text; undecodable bytes replaced."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def last_line(text: str, limit: int = 160) -> str:
    """The last non-blank line of ``text``, stripped and cut to ``limit`` characters (a failure's reason)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def judge(case: ExecCase, secret: str, result: Any) -> CaseVerdict:
    """Verdict from a sandbox ``ExecResult`` (needs ``status``, ``exit_code``, ``stdout``, ``stderr``)."""
    status = str(getattr(result, "status", "error"))
    stdout, stderr = output_text(getattr(result, "stdout", "")), output_text(getattr(result, "stderr", ""))
    cached = bool(getattr(result, "cached", False))
    if case.calls is not None:
        # only a first stage: the trusted run decides (CodeGrader._check_recordings)
        if recording(secret, result) is not None:
            return CaseVerdict(True, RECORDED, "", cached)
        if status == "ok":
            return CaseVerdict(False, "incomplete", "exited before the tests finished", cached)
        return CaseVerdict(False, status, last_line(stderr) or status, cached)
    if status != "ok" or getattr(result, "exit_code", None) != 0:
        status = "runtime_error" if status == "ok" else status
        return CaseVerdict(False, status, last_line(stderr) or status, cached)
    marker = "\n" + secret + "\n"
    at = stdout.rfind(marker)
    if at == -1:
        return CaseVerdict(False, "incomplete", "exited 0 before the tests finished", cached)
    if case.expected_stdout is None:
        return CaseVerdict(True, "ok", "", cached)
    program_out = stdout[:at] + stdout[at + len(marker):]
    if outputs_match(program_out, case.expected_stdout, case.float_tol):
        return CaseVerdict(True, "ok", "", cached)
    return CaseVerdict(False, "wrong_answer", "output differs from the expected output", cached)


RECORDED = "recorded"  # a function-call case whose recording awaits the trusted run


def recording(secret: str, result: Any) -> list[dict[str, Any]] | None:
    """The calls a function-call case recorded (after the last sentinel), or None."""
    stdout = output_text(getattr(result, "stdout", ""))
    at = stdout.rfind("\n" + secret + RECORD_MARK)
    if at == -1 or getattr(result, "status", "") in ("timeout", "output_limit", "sandbox_error"):
        return None
    return parse_recording(stdout[at + 1 + len(secret):])


def case_judge(cases: Sequence[ExecCase], secrets_: Sequence[str], test_idx: int, result: Any) -> bool:
    """Whether test ``test_idx`` of one program passed; module-level, so that ``partial(case_judge,
    cases, secrets)`` can travel to another process (a Ray task) and stop early there."""
    return judge(cases[test_idx], secrets_[test_idx], result).passed


def always_passes(test_idx: int, result: Any) -> bool:
    """The judge of a lone trusted-check job (picklable for Ray): its verdicts are read afterwards."""
    return True
