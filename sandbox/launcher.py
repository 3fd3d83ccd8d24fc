"""The first Python code that runs inside the sandbox: apply rlimits, then run ``main.py`` in place.

This file is never imported by the host. Its text is passed to the sandboxed interpreter with
``python -S -B -X utf8 -c <this source> AS_MB CPU_S FSIZE_MB NPROC NOFILE STARTED_FD``, so it must stay
self-contained (stdlib only, no bonbench imports) and must leave almost nothing behind in the
``__main__`` namespace that the user program then shares.

Why the program runs in this same process instead of an ``exec`` of a second interpreter: one
interpreter start-up is ~10 ms, which is most of the per-execution cost; the limits are process
attributes, so setting them here and then running the program in place is equivalent. The only
modules imported besides what ``python -S`` already loads are ``resource`` and ``builtins``
(``posix`` is built in and loaded at start-up).

What it does not do: it does not change uid (bubblewrap or the host already did), does not
filter syscalls, and cannot stop a program from raising its own *soft* limits up to the hard ones
(the hard limits are set equal to the soft ones, except CPU, whose hard limit is one second higher
so that SIGXCPU comes first and SIGKILL one second later).
"""

# Every name is bound with a leading underscore and deleted after set-up: the program runs in this
# same ``__main__`` namespace and should find nothing of ours in it. builtins and posix are built into
# the interpreter and already loaded at start-up (importing them costs nothing).
import builtins as _b
import posix as _p
import resource as _r
import sys as _s


def _bonbench_setup() -> None:
    args = _s.argv
    mib = 1 << 20
    as_mb, cpu_s, fsize_mb, nproc, nofile, started_fd = (int(a) for a in args[1:7])
    limits = [
        (_r.RLIMIT_CPU, cpu_s, cpu_s + 1),
        (_r.RLIMIT_FSIZE, fsize_mb * mib, fsize_mb * mib),
        (_r.RLIMIT_NPROC, nproc, nproc),
        (_r.RLIMIT_NOFILE, nofile, nofile),
        (_r.RLIMIT_CORE, 0, 0),
    ]
    if as_mb > 0:
        limits.append((_r.RLIMIT_AS, as_mb * mib, as_mb * mib))
    for res, soft, hard in limits:
        try:
            _r.setrlimit(res, (soft, hard))
        except (ValueError, OSError) as exc:
            # A limit that cannot be applied means the run would not be contained: refuse to run.
            _s.stderr.write(f"bonbench-sandbox: cannot set rlimit {res}: {exc}\n")
            _s.stderr.flush()
            raise SystemExit(125) from exc
    # Tell the host the limits are in place and the program is about to run: from here on, a
    # failure is the program's (even if it prints "bwrap: ..."), not the sandbox's.
    _p.write(started_fd, b"1")
    _p.close(started_fd)
    _s.argv = ["main.py"]
    # sys.path[0] stays "" (the working directory, which holds main.py), as with `python main.py`.
    # Not importing os here on purpose: without site.py nothing has imported it yet, and it costs
    # ~1.5 ms that a program which does not need it should not pay.

    # -S skips site.py, which is what defines exit() and quit(); contest solutions call them.
    def _quit(code: object = None) -> None:
        raise SystemExit(code)

    _b.exit = _b.quit = _quit  # type: ignore[assignment]  # site.py's Quitter class is what -S leaves out


_bonbench_setup()
del _bonbench_setup, _b, _p, _r, _s
__file__ = "main.py"
# exec of a str, not compile(): the first compile() call builds all ~100 AST types (1-8 ms measured
# here, the largest single cost of this launcher). The price: tracebacks name the program
# "<string>" instead of "main.py" (line numbers are main.py's).
exec(open("main.py", "rb").read().decode("utf-8"))  # noqa: S102  (running main.py in place is this file's job)
