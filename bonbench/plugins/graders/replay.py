"""Function-call tests whose verdict is decided outside the process that runs untrusted code.

A function-call test (HumanEval's ``check(candidate)``, MBPP's asserts, TACO's calls) runs in two
sandboxed processes:

1. **Recording run** (untrusted): the candidate's code, then the test code with the tested
   function ``name`` replaced by a recorder. Every call the test makes (outermost calls only: a
   recursive candidate's inner calls are not recorded) stores its arguments and its result as
   plain data: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``complex`` and lists,
   tuples, dicts, sets, frozensets of those, exact types only (subclasses are refused), tagged so
   that a tuple stays a tuple. A result that is anything else (an object whose ``__eq__`` is always
   true, a generator, a user class) is recorded as unserialisable. The recording is written after
   the tests, whatever they did; what the assertions decided in this process is ignored.
2. **Trusted run**: the task's *trusted* code (HumanEval: prompt + canonical solution; MBPP: the
   reference solution; TACO: nothing) and the same test code, with ``name`` bound to a replay
   function. The replay returns the recorded results, rebuilt from the data by a decoder that
   creates only the types above, call by call in order; it checks that each call's arguments equal
   the recorded ones (when both sides are plain data), raises the candidate's recorded exception,
   and fails the test when a call was not recorded or its result was not plain data. The test's
   own assertions, run on plain data with unmodified builtins, no trace function and no untrusted
   code in the process, decide the verdict.

So the forges that fooled the single-process harness have nothing to act on: an always-true
``__eq__`` does not survive serialisation, a frame walk or ``sys.settrace`` or a patched builtin
acts only in the recording process, and a forged recording can only claim results, which is what
any candidate does anyway. The expected values are kept out of the recording process where the
task passes ``untrusted_tests``: HumanEval's asserts reduced to their calls (``blind``), TACO's
calls without the expected values; MBPP's tests are in its prompt, so they are not hidden. A candidate that mutates
its arguments is judged on what it returned, not on the mutation. Tests that draw random inputs see
``random.seed(0)`` in both runs, and the recorder restores the ``random`` state around each call
so a candidate that uses ``random`` does not shift the test's inputs.

Trusted runs are batched: one execution checks many recordings of the same test (per-recording
time limit by ``setitimer``). This module builds programs and parses outputs; it executes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Marks the start of the recording (or the trusted verdicts) in a run's stdout.
RECORD_MARK = "\n@@bonbench-record@@"
VERDICT_MARK = "\n@@bonbench-verdicts@@"
RECORDINGS_FILE = "recordings.json"


@dataclass(frozen=True)
class CallTest:
    """A function-call test: ``tests`` call the global functions ``names`` (recorded in one call list).

    ``trusted`` is code that defines whatever else the tests use (helpers, a reference ``name`` the
    replay replaces); it runs only in the trusted process. ``untrusted_tests`` (default: ``tests``)
    is the code run after the candidate in the recording process; TACO passes calls without the
    expected values there.
    """

    names: tuple[str, ...]
    tests: str
    trusted: str = ""
    untrusted_tests: str | None = None
    seed_random: bool = False

    def __post_init__(self) -> None:
        # with nothing replayed, the trusted run would test the trusted code, not the candidate
        if not self.names or not all(n.isidentifier() for n in self.names):
            raise ValueError(f"CallTest needs the names of the tested functions, got {self.names!r}")


# The plain-data codec, shared by both processes (the text below is pasted into their programs).
CODEC = r'''
import sys as _bb_sys


class _BBNotPlain(Exception):
    pass


def _bb_enc(x, depth=0):
    t = type(x)
    if depth > 200:
        raise _BBNotPlain("nested too deeply")
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return x if -(1 << 53) < x < (1 << 53) else {"$i": str(x)}
    if t is float:
        return {"$f": repr(x)}
    if t is list:
        return [_bb_enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"$t": [_bb_enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"$d": [[_bb_enc(k, depth + 1), _bb_enc(v, depth + 1)] for k, v in x.items()]}
    if t is set or t is frozenset:
        items = [_bb_enc(v, depth + 1) for v in x]
        return {("$s" if t is set else "$fs"): items}
    if t is bytes:
        return {"$b": x.hex()}
    if t is complex:
        return {"$c": [repr(x.real), repr(x.imag)]}
    col = _bb_sys.modules.get("collections")
    if col is not None:  # the standard containers, rebuilt as themselves (a Counter is not a dict)
        if t is col.Counter or t is col.OrderedDict:
            return {("$C" if t is col.Counter else "$O"): _bb_enc(dict(x), depth + 1)}
        if t is col.deque:
            return {"$q": [_bb_enc(v, depth + 1) for v in x]}
        if t is col.defaultdict:
            f = x.default_factory
            fname = f.__name__ if f in (int, list, set, str, float, dict, tuple) else None
            return {"$dd": [fname, _bb_enc(dict(x), depth + 1)]}
    rem = _bb_sys.modules.get("re")
    if rem is not None and t is rem.Match:
        # regex answers (MBPP "text_match" tasks) are judged by truth value or the matched text
        return {"$m": [_bb_enc(x.group(0), depth + 1), list(x.span())]}
    raise _BBNotPlain(t.__name__)


class _BBMatch:
    """Stands for a recorded ``re.Match``: true, with the matched text and span (nothing else)."""

    def __init__(self, text, span):
        self._text, self._span = text, span

    def group(self, *idx):
        if idx not in ((), (0,)):
            raise IndexError("only group 0 was recorded")
        return self._text

    def span(self, idx=0):
        return self._span

    def start(self, idx=0):
        return self._span[0]

    def end(self, idx=0):
        return self._span[1]

    def __repr__(self):
        return "<re.Match object; span=%r, match=%r>" % (self._span, self._text)


def _bb_dec(x):
    if isinstance(x, list):
        return [_bb_dec(v) for v in x]
    if not isinstance(x, dict):
        return x
    (tag, v), = x.items()
    if tag == "$i":
        return int(v)
    if tag == "$f":
        return float(v)
    if tag == "$t":
        return tuple(_bb_dec(e) for e in v)
    if tag == "$d":
        return {_bb_dec(k): _bb_dec(e) for k, e in v}
    if tag == "$s":
        return {_bb_dec(e) for e in v}
    if tag == "$fs":
        return frozenset(_bb_dec(e) for e in v)
    if tag == "$b":
        return bytes.fromhex(v)
    if tag == "$c":
        return complex(float(v[0]), float(v[1]))
    if tag == "$m":
        return _BBMatch(_bb_dec(v[0]), tuple(v[1]))
    if tag in ("$C", "$O", "$q", "$dd"):
        import collections
        if tag == "$C":
            return collections.Counter(_bb_dec(v))
        if tag == "$O":
            return collections.OrderedDict(_bb_dec(v))
        if tag == "$q":
            return collections.deque(_bb_dec(e) for e in v)
        factory = {"int": int, "list": list, "set": set, "str": str, "float": float, "dict": dict, "tuple": tuple}.get(v[0])
        return collections.defaultdict(factory, _bb_dec(v[1]))
    raise ValueError("unknown tag " + tag)


def _bb_args(args, kwargs):
    try:
        return _bb_enc([list(args), kwargs])
    except (_BBNotPlain, RecursionError):
        return None
'''

# Installed before the candidate's code in the recording process. Only outermost calls are recorded.
RECORDER = CODEC + r'''

_bb_calls = []
_bb_depth = [0]


def _bb_dumps(x):
    import _json
    t = type(x)
    if x is None:
        return "null"
    if t is bool:
        return "true" if x else "false"
    if t is int:
        return str(x)
    if t is str:
        return _json.encode_basestring_ascii(x)
    if t is list:
        return "[" + ",".join(_bb_dumps(v) for v in x) + "]"
    if t is dict:
        return "{" + ",".join(_json.encode_basestring_ascii(k) + ":" + _bb_dumps(v) for k, v in x.items()) + "}"
    raise TypeError(t.__name__)


def _bb_recorder(fn, name):
    import sys as _sys

    def call(*args, **kwargs):
        if _bb_depth[0]:
            return fn(*args, **kwargs)
        entry = {"f": name, "a": _bb_args(args, kwargs)}
        _bb_calls.append(entry)
        rnd = _sys.modules.get("random")
        state = rnd.getstate() if rnd is not None else None
        _bb_depth[0] += 1
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            entry["e"] = [type(exc).__name__, str(exc)[:200]]
            raise
        finally:
            _bb_depth[0] -= 1
            if state is not None:
                rnd.setstate(state)
        try:
            entry["r"] = _bb_enc(result)
        except (_BBNotPlain, RecursionError) as exc:
            entry["u"] = str(exc)[:100]
        return result

    return call
'''

_TRUSTED = r'''
import json as _bb_json
import os as _bb_os
import signal as _bb_signal
import builtins as _bb_builtins


class _BBTimeout(BaseException):
    pass


class _BBReplayError(Exception):
    pass


def _bb_alarm(signum, frame):
    raise _BBTimeout()


def _bb_replayer(calls, pos, name):

    def replay(*args, **kwargs):
        i = pos[0]
        pos[0] += 1
        if i >= len(calls):
            raise _BBReplayError("call %d was not recorded (the program stopped before it)" % (i + 1))
        entry = calls[i]
        mine = _bb_args(args, kwargs)
        if entry.get("f") != name:
            raise _BBReplayError("call %d: the recording called another function" % (i + 1))
        if (mine is None) != (entry.get("a") is None) or (mine is not None and mine != entry["a"]):
            raise _BBReplayError("call %d: recorded arguments differ from the test's" % (i + 1))
        if "e" in entry:
            exc_name, msg = entry["e"]
            cls = getattr(_bb_builtins, str(exc_name), None)
            if not (isinstance(cls, type) and issubclass(cls, Exception)):
                cls = RuntimeError
            raise cls("candidate raised %s: %s" % (exc_name, msg))
        if "u" in entry:
            raise TypeError("call %d returned %s, not plain data" % (i + 1, entry["u"]))
        if "r" not in entry:
            raise _BBReplayError("call %d did not return" % (i + 1))
        return _bb_dec(entry["r"])

    return replay


def _bb_main():
    with open({recordings!r}, encoding="utf-8") as fh:
        recordings = _bb_json.load(fh)
    code = compile({source!r}, "<test>", "exec")
    _bb_signal.signal(_bb_signal.SIGALRM, _bb_alarm)
    out = []
    for calls in recordings:
        scope = {{"__name__": "__test__", "__builtins__": _bb_builtins, "_bb_replayer": _bb_replayer,
                  "_bb_calls": calls, "_bb_pos": [0]}}
        _bb_signal.setitimer(_bb_signal.ITIMER_REAL, {per_run_s!r})
        try:
            exec(code, scope)
            verdict = ["ok", ""]
        except _BBTimeout:
            verdict = ["timeout", "the trusted check ran out of time"]
        except AssertionError as exc:
            verdict = ["wrong_answer", ("assertion failed: " + str(exc))[:200]]
        except _BBReplayError as exc:
            verdict = ["not_recorded", str(exc)[:200]]
        except BaseException as exc:
            verdict = ["runtime_error", (type(exc).__name__ + ": " + str(exc))[:200]]
        finally:
            _bb_signal.setitimer(_bb_signal.ITIMER_REAL, 0)
        out.append(verdict)
    _bb_os.write(1, ({mark!r} + _bb_json.dumps(out) + "\n").encode())


_bb_main()
'''


def _seed(test: CallTest) -> str:
    return "import random as _bb_random\n_bb_random.seed(0)\n" if test.seed_random else ""


def recording_source(test: CallTest, candidate: str) -> str:
    """Untrusted program body: candidate code, the recorder bound to ``name``, the tests. The harness
    that runs it (``bonbench.plugins.graders.code``) appends the recording after ``RECORD_MARK``."""
    tests = test.tests if test.untrusted_tests is None else test.untrusted_tests
    install = "".join(f"{n} = _bb_recorder({n}, {n!r})\n" for n in test.names)
    return candidate + "\n" + RECORDER + "\n" + install + _seed(test) + tests + "\n"


def trusted_program(test: CallTest, per_run_s: float) -> str:
    """The trusted checker: for each recording in ``RECORDINGS_FILE``, the trusted code and the
    tests with ``name`` replaying it; prints one ``[status, reason]`` per recording after VERDICT_MARK."""
    install = "".join(f"{n} = _bb_replayer(_bb_calls, _bb_pos, {n!r})\n" for n in test.names)
    source = test.trusted + "\n" + install + _seed(test) + test.tests + "\n"
    return CODEC + _TRUSTED.format(recordings=RECORDINGS_FILE, source=source, per_run_s=float(per_run_s), mark=VERDICT_MARK)


def parse_recording(tail: str) -> list[dict[str, Any]] | None:
    """The call list after the recording mark (``tail`` is what follows the sentinel), or None."""
    at = tail.rfind(RECORD_MARK)
    if at == -1:
        return None
    line = tail[at + len(RECORD_MARK):].split("\n", 1)[0]
    try:
        calls = json.loads(line)
    except ValueError:
        return None
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return None
    return calls


def parse_verdicts(stdout: str, n: int) -> list[tuple[str, str]] | None:
    """The trusted run's ``n`` verdicts, or None when its output is not exactly that."""
    at = stdout.rfind(VERDICT_MARK)
    if at == -1:
        return None
    try:
        rows = json.loads(stdout[at + len(VERDICT_MARK):].split("\n", 1)[0])
    except ValueError:
        return None
    if not isinstance(rows, list) or len(rows) != n:
        return None
    return [(str(r[0]), str(r[1])) for r in rows]


def recordings_file(recordings: Sequence[list[dict[str, Any]]]) -> str:
    return json.dumps(list(recordings), separators=(",", ":"))
