"""Preload the libraries vLLM's CPU backend asks for (tcmalloc), by re-executing the process once.

Why: vLLM's CPU worker warns "libtcmalloc is not found in LD_PRELOAD" and, on x86, the same for
``libiomp``. vLLM itself only fixes this for the engine-core *process it spawns* (its CPU platform
writes ``LD_PRELOAD`` into ``os.environ`` before spawning), but bonbench runs the engine core
in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, for reproducible samples), and a preload only takes
effect when a process starts. So the process that will load the engine has to be started with
``LD_PRELOAD`` already set: ``maybe_reexec_with_preload()`` does that by ``execve``-ing the same
command line again with the variable set, or the user sets it (``docs/samplers.md``).

What is preloaded: tcmalloc (``libtcmalloc_minimal.so.4`` from Debian's ``libtcmalloc-minimal4``,
else a full ``libtcmalloc.so.4``), found on disk (the interpreter prefix's ``lib``, the system
library folders, then ``ldconfig -p``). Measured with the embedded Gemma 3 270M on the 2-core
machine (``benchmarks/bench_sampler.py``, docs/samplers.md): 1.2-1.4x the tokens/s of vLLM's CPU
decode without it. Intel OpenMP (``libiomp5.so`` from the ``intel-openmp`` wheel, in
``<venv>/lib``) is *not* preloaded by default: it was not measurably faster there (the noise was
larger than any difference); ``BONBENCH_PRELOAD_IOMP=1`` adds it.

When nothing happens (``preload_plan`` says why): not Linux; CUDA (a GPU torch build, or
``torch.cuda.is_available()``); ``BONBENCH_NO_PRELOAD=1``; every wanted library is already named in
``LD_PRELOAD`` (the user's own setting is never replaced, only extended); no tcmalloc on disk; this
process is already the re-executed one (``BONBENCH_PRELOAD_REEXEC`` is set: the loop guard, which
also stops a second attempt when the loader refused the library); or the command line cannot be
replayed (interactive interpreter, a script read from stdin).

This module does not import vllm or torch (except to ask CUDA when the torch build is not a
``+cpu`` one), does not decide *whether* an engine will be loaded (callers do: ``bonbench.apps.cli.evaluation_handlers`` calls
``maybe_reexec_with_preload`` only when the vllm backend has samples to draw) and does not change
the environment of the current process except through the re-exec.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

OPT_OUT_ENV = "BONBENCH_NO_PRELOAD"  # "1": never preload, never re-exec
IOMP_ENV = "BONBENCH_PRELOAD_IOMP"  # "1": also preload Intel OpenMP (libiomp5.so)
GUARD_ENV = "BONBENCH_PRELOAD_REEXEC"  # set in the re-executed process: never re-exec twice

# preference order: the minimal build is what vLLM's CPU docs and its own bundled copy use
TCMALLOC_NAMES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so")
IOMP_NAMES = ("libiomp5.so",)
# what counts as "already preloaded": vLLM's own check is a substring test on these stems
_STEMS = {"tcmalloc": "libtcmalloc", "iomp": "libiomp"}
_SYSTEM_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
                "/lib/x86_64-linux-gnu", "/lib64")
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class PreloadPlan:
    """What to preload. ``libs`` empty means: do not re-exec, and ``reason`` says why."""

    libs: tuple[str, ...] = ()
    reason: str = ""
    ld_preload: str = ""  # the full LD_PRELOAD value to exec with (ours first, then the user's)
    already: tuple[str, ...] = field(default=())  # wanted libraries the user's LD_PRELOAD already names

    @property
    def reexec(self) -> bool:
        return bool(self.libs)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in _TRUE


def _ldconfig_paths() -> dict[str, str]:
    """Library name -> path from the dynamic loader's cache (``ldconfig -p``); {} if unavailable."""
    exe = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)
    if exe is None:
        return {}
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    # lines look like "libtcmalloc_minimal.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/..."; skip
    # other ABIs (a 32-bit copy cannot be preloaded into a 64-bit interpreter)
    tag = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(os.uname().machine)
    found: dict[str, str] = {}
    for line in out.splitlines():
        head, sep, path = line.strip().partition(" => ")
        if sep and (tag is None or tag in head):
            found.setdefault(head.split(" ", 1)[0], path.strip())
    return found


def find_library(names: Sequence[str], dirs: Sequence[str | Path] | None = None, use_ldconfig: bool = True) -> str | None:
    """The first of ``names`` found in ``dirs`` (default: ``<sys.prefix>/lib``, then the system folders),
    else in the loader cache; None if none exists. Name order wins over folder order."""
    search = [Path(d) for d in (dirs if dirs is not None else (Path(sys.prefix) / "lib", *_SYSTEM_DIRS))]
    cache: dict[str, str] | None = None
    for name in names:
        for d in search:
            cand = d / name
            if cand.is_file():
                return str(cand)
        if use_ldconfig:
            cache = _ldconfig_paths() if cache is None else cache
            if name in cache and os.path.isfile(cache[name]):
                return cache[name]
    return None


def cuda_in_use() -> bool:
    """True when torch can use CUDA. A ``+cpu`` torch build answers without importing torch (~1.5 s)."""
    if "torch" not in sys.modules:
        try:
            if version("torch").endswith("+cpu"):
                return False
        except PackageNotFoundError:
            return False  # no torch: no engine either, and certainly no CUDA
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _replayable_argv() -> list[str] | None:
    """The interpreter command line to exec again, or None when it cannot be replayed faithfully."""
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return None
    argv = list(getattr(sys, "orig_argv", []) or [])
    if len(argv) < 2 or not sys.argv or sys.argv[0] in ("", "-"):
        return None  # REPL, or a script read from stdin (already consumed)
    return [sys.executable, *argv[1:]]


def preload_plan(
    environ: Mapping[str, str] | None = None,
    *,
    cuda: Callable[[], bool] | None = None,
    find: Callable[[Sequence[str]], str | None] | None = None,
    platform: str | None = None,
) -> PreloadPlan:
    """Decide what to preload for a vLLM engine about to be built in this process.

    Pure apart from ``cuda`` (default ``cuda_in_use``) and ``find`` (default ``find_library``), which
    tests replace; the defaults are looked up at call time so a test script can patch the module.
    """
    env = os.environ if environ is None else environ
    cuda = cuda or cuda_in_use
    find = find or find_library
    platform = platform or sys.platform
    if not platform.startswith("linux"):
        return PreloadPlan(reason=f"LD_PRELOAD is a Linux loader feature (platform {platform})")
    if _flag(env, OPT_OUT_ENV):
        return PreloadPlan(reason=f"{OPT_OUT_ENV}=1")
    if env.get(GUARD_ENV):
        return PreloadPlan(reason=f"already re-executed once ({GUARD_ENV} is set)")
    current = env.get("LD_PRELOAD", "")
    wanted: dict[str, tuple[str, ...]] = {"tcmalloc": TCMALLOC_NAMES}
    if _flag(env, IOMP_ENV):
        wanted["iomp"] = IOMP_NAMES
    already = tuple(k for k in wanted if _STEMS[k] in current)
    missing = [k for k in wanted if k not in already]
    if not missing:
        return PreloadPlan(reason="LD_PRELOAD already names " + ", ".join(_STEMS[k] for k in already), already=already)
    # ask CUDA only now: it may import torch, and every cheaper reason not to preload comes first
    if cuda():
        return PreloadPlan(reason="CUDA is available: the preload is for vLLM's CPU backend only")
    libs = []
    for kind in missing:
        path = find(wanted[kind])
        if path is not None:
            libs.append(path)
    if not libs:
        return PreloadPlan(reason="no " + " / ".join(_STEMS[k] for k in missing) + " on disk "
                           "(Debian: apt-get install libtcmalloc-minimal4)", already=already)
    value = ":".join(libs + ([current] if current else []))
    return PreloadPlan(libs=tuple(libs), reason="", ld_preload=value, already=already)


def mapped_libraries(pid: int | str = "self") -> list[str]:
    """Paths of the shared objects mapped into a process (``/proc/<pid>/maps``); [] where unreadable."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in parts[5]:
            seen.setdefault(parts[5].strip(), None)
    return list(seen)


def tcmalloc_mapped(pid: int | str = "self") -> bool:
    """Is a tcmalloc mapped into the process? (The check that the preload is actually in effect.)"""
    return any("libtcmalloc" in Path(p).name for p in mapped_libraries(pid))


def maybe_reexec_with_preload(*, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
                              quiet: bool = False) -> PreloadPlan:
    """Re-exec this process with the planned ``LD_PRELOAD`` if there is anything to preload.

    Call it when a vLLM engine is certainly about to be loaded and before anything slow (the whole
    command runs again from the start; work done before the call is redone). Does not return when it
    re-executes; otherwise returns the plan, whose ``reason`` says why not. ``argv`` defaults to the
    current interpreter command line (``sys.orig_argv``); with ``argv`` given it is exec'd as is
    (``argv[0]`` is the program). A failed exec is reported on stderr and the caller continues
    without the preload.
    """
    plan = preload_plan(environ)
    if not plan.reexec:
        return plan
    args = list(argv) if argv is not None else _replayable_argv()
    if not args:
        return PreloadPlan(reason="this command line cannot be replayed (interactive or stdin script); "
                                  f"start it with LD_PRELOAD={plan.ld_preload}", already=plan.already)
    env = dict(os.environ if environ is None else environ)
    env["LD_PRELOAD"] = plan.ld_preload
    env[GUARD_ENV] = "1"
    if not quiet:
        print(f"bonbench: restarting with LD_PRELOAD={plan.ld_preload} for vLLM's CPU backend "
              f"({OPT_OUT_ENV}=1 to skip)", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(args[0], args, env)
    except OSError as exc:
        print(f"warning: could not restart with LD_PRELOAD ({exc}); continuing without it", file=sys.stderr)
        return PreloadPlan(reason=f"exec failed: {exc}", already=plan.already)
    raise AssertionError("unreachable: execve returned")  # pragma: no cover


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bonbench.plugins.samplers.cpu_preload [--print | COMMAND ARGS...]``.

    ``--print`` prints the LD_PRELOAD value bonbench would use (empty if none, with the reason on
    stderr), for ``export LD_PRELOAD=$(...)``; with a command, runs it with that LD_PRELOAD (the
    wrapper form, e.g. ``python -m bonbench.plugins.samplers.cpu_preload bonbench run --task math ...``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(main.__doc__, file=sys.stderr)
        return 2
    # the wrapper is not the engine process: the loop guard must not be inherited as "done"
    plan = preload_plan({k: v for k, v in os.environ.items() if k != GUARD_ENV})
    if args[0] == "--print":
        if not plan.reexec:
            print(f"bonbench: nothing to preload: {plan.reason}", file=sys.stderr)
        print(plan.ld_preload or os.environ.get("LD_PRELOAD", ""))
        return 0
    env = dict(os.environ)
    if plan.reexec:
        env["LD_PRELOAD"] = plan.ld_preload
    else:
        print(f"bonbench: nothing to preload: {plan.reason}", file=sys.stderr)
    exe = shutil.which(args[0]) or args[0]
    sys.stdout.flush()
    os.execve(exe, args, env)
    return 127  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
