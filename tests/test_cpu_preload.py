"""The tcmalloc preload for vLLM's CPU backend (bonbench/plugins/samplers/cpu_preload.py).

Fast tests: the decision (which libraries, opt-out, already set, CUDA, loop guard), the library
search, a real re-exec of a small Python process (tcmalloc must then be mapped into it), the loop
guard when the loader refuses the library, and where the CLI calls it (vllm with samples to draw
only). The slow test runs ``bonbench run --backend vllm`` on the embedded model and reads the
engine process's ``/proc/<pid>/maps`` while it samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bonbench.plugins.samplers import cpu_preload
from bonbench.plugins.samplers.cpu_preload import (
    GUARD_ENV,
    IOMP_ENV,
    OPT_OUT_ENV,
    find_library,
    mapped_libraries,
    preload_plan,
)

REPO = Path(__file__).resolve().parents[1]
TC = "/opt/x/libtcmalloc_minimal.so.4"
IOMP = "/venv/lib/libiomp5.so"


def _find(names: Any) -> str | None:
    return {"libtcmalloc_minimal.so.4": TC, "libiomp5.so": IOMP}.get(names[0])


def _plan(env: dict[str, str], cuda: bool = False, **kw: Any) -> cpu_preload.PreloadPlan:
    return preload_plan(env, cuda=lambda: cuda, find=kw.pop("find", _find), platform=kw.pop("platform", "linux"))


def test_plan_preloads_tcmalloc_only_by_default() -> None:
    plan = _plan({})
    assert plan.reexec and plan.libs == (TC,) and plan.ld_preload == TC


def test_plan_keeps_the_users_preload_after_ours() -> None:
    plan = _plan({"LD_PRELOAD": "/usr/lib/libfoo.so"})
    assert plan.ld_preload == f"{TC}:/usr/lib/libfoo.so"


def test_iomp_only_on_request() -> None:
    plan = _plan({IOMP_ENV: "1"})
    assert plan.libs == (TC, IOMP) and plan.ld_preload == f"{TC}:{IOMP}"
    # iomp asked for but tcmalloc already preloaded by the user: only iomp is added
    plan = _plan({IOMP_ENV: "1", "LD_PRELOAD": "/lib/libtcmalloc.so.4"})
    assert plan.libs == (IOMP,) and plan.already == ("tcmalloc",)
    assert plan.ld_preload == f"{IOMP}:/lib/libtcmalloc.so.4"


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_opt_out(value: str) -> None:
    calls: list[int] = []
    plan = preload_plan({OPT_OUT_ENV: value}, cuda=lambda: calls.append(1) or False, find=_find, platform="linux")
    assert not plan.reexec and OPT_OUT_ENV in plan.reason
    assert calls == [], "opting out must not even ask CUDA (that may import torch)"


def test_opt_out_zero_is_not_an_opt_out() -> None:
    assert _plan({OPT_OUT_ENV: "0"}).reexec


def test_user_preload_already_names_tcmalloc() -> None:
    for existing in ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/x/libtcmalloc.so:/y/libbar.so"):
        plan = _plan({"LD_PRELOAD": existing})
        assert not plan.reexec and plan.already == ("tcmalloc",) and "already names libtcmalloc" in plan.reason


def test_cuda_means_no_preload() -> None:
    plan = _plan({}, cuda=True)
    assert not plan.reexec and "CUDA" in plan.reason


def test_loop_guard() -> None:
    plan = _plan({GUARD_ENV: "1"})
    assert not plan.reexec and GUARD_ENV in plan.reason


def test_not_linux() -> None:
    assert not _plan({}, platform="darwin").reexec


def test_nothing_on_disk_names_the_package() -> None:
    plan = _plan({}, find=lambda names: None)
    assert not plan.reexec and "libtcmalloc-minimal4" in plan.reason


def test_find_library_name_order_beats_folder_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "libtcmalloc.so.4").write_bytes(b"")
    (b / "libtcmalloc_minimal.so.4").write_bytes(b"")
    names = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
    assert find_library(names, [a, b], use_ldconfig=False) == str(b / "libtcmalloc_minimal.so.4")
    assert find_library(("libnothing.so.9",), [a, b], use_ldconfig=False) is None


def test_find_library_uses_the_loader_cache() -> None:
    # libc is in every loader cache but not where we look first when no folder is given
    path = find_library(("libc.so.6",), [], use_ldconfig=True)
    assert path is not None and Path(path).name == "libc.so.6" and Path(path).is_file()


def test_mapped_libraries_reads_proc_maps() -> None:
    libs = mapped_libraries()
    assert any(Path(p).name.startswith("libc.so") or Path(p).name.startswith("libc-") for p in libs)
    assert mapped_libraries(pid=2**22 + 12345) == []  # no such process


# ---------------------------------------------------------------- real re-exec of a small process

_SCRIPT = r"""
import os, sys
from bonbench.plugins.samplers import cpu_preload
if os.environ.get("FAKE_LIB"):
    cpu_preload.find_library = lambda names, *a, **k: os.environ["FAKE_LIB"]
plan = cpu_preload.maybe_reexec_with_preload()
print("RESULT", cpu_preload.tcmalloc_mapped(), os.environ.get(cpu_preload.GUARD_ENV), repr(plan.reason), sys.argv[1:])
"""


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", GUARD_ENV, OPT_OUT_ENV, IOMP_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def _run_script(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "reexec_me.py"
    script.write_text(_SCRIPT)
    return subprocess.run([sys.executable, str(script), "--flag", "x y"], capture_output=True, text=True, timeout=120,
                          env=_child_env(**env))


needs_tcmalloc = pytest.mark.skipif(
    find_library(cpu_preload.TCMALLOC_NAMES) is None or cpu_preload.cuda_in_use(),
    reason="no tcmalloc on this machine (scripts/install.sh installs libtcmalloc-minimal4) or a CUDA machine",
)


@needs_tcmalloc
def test_reexec_maps_tcmalloc_and_keeps_the_arguments(tmp_path: Path) -> None:
    proc = _run_script(tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert len(results) == 1, proc.stdout  # the pre-exec process printed nothing
    assert results[0].startswith("RESULT True 1 ") and results[0].endswith("['--flag', 'x y']"), results[0]
    assert proc.stderr.count("restarting with LD_PRELOAD=") == 1


@needs_tcmalloc
def test_opt_out_runs_without_tcmalloc(tmp_path: Path) -> None:
    proc = _run_script(tmp_path, BONBENCH_NO_PRELOAD="1")
    assert proc.returncode == 0, proc.stderr
    assert "RESULT False None 'BONBENCH_NO_PRELOAD=1'" in proc.stdout
    assert "restarting" not in proc.stderr


def test_loop_guard_when_the_loader_refuses_the_library(tmp_path: Path) -> None:
    fake = tmp_path / "libtcmalloc_minimal.so.4"
    fake.write_bytes(b"not an ELF file")
    proc = _run_script(tmp_path, FAKE_LIB=str(fake), BONBENCH_PRELOAD_IOMP="0")
    assert proc.returncode == 0, proc.stderr
    # restarted exactly once; the loader ignored the bad file; the second process did not restart again
    assert proc.stderr.count("restarting with LD_PRELOAD=") == 1, proc.stderr
    assert "cannot be preloaded" in proc.stderr
    assert f"RESULT False 1 'already re-executed once ({GUARD_ENV} is set)'" in proc.stdout


def test_print_wrapper_prints_the_value_or_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bonbench.plugins.samplers.cpu_preload", "--print"], capture_output=True,
                          text=True, timeout=60, env=_child_env(BONBENCH_NO_PRELOAD="1"))
    assert proc.returncode == 0 and proc.stdout == "\n" and "BONBENCH_NO_PRELOAD=1" in proc.stderr


@needs_tcmalloc
def test_command_wrapper_runs_the_command_with_tcmalloc(tmp_path: Path) -> None:
    code = "from bonbench.plugins.samplers.cpu_preload import tcmalloc_mapped; print(tcmalloc_mapped())"
    proc = subprocess.run([sys.executable, "-m", "bonbench.plugins.samplers.cpu_preload", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60, env=_child_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


# ---------------------------------------------------------------- where the CLI calls it

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def cli_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run cli.main on the toy task with a scripted stand-in sampler and record preload calls."""
    import toy_plugin

    import bonbench.core.models
    import bonbench.plugins.samplers.select

    calls: list[str] = []
    monkeypatch.setattr(bonbench.core.models, "resolve_model", lambda name: bonbench.core.models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(bonbench.plugins.samplers.select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))
    monkeypatch.setattr(cpu_preload, "maybe_reexec_with_preload", lambda **k: calls.append("reexec"))
    return calls


def _toy(tmp_path: Path, *extra: str) -> int:
    from bonbench.apps import cli

    return cli.main(["run", "--task", "toy", "--metric", "pass@2", "--out", str(tmp_path / "results"), *extra])


def test_cli_preloads_only_when_vllm_has_samples_to_draw(cli_calls: list[str], tmp_path: Path) -> None:
    assert _toy(tmp_path, "--backend", "vllm", "--dry-run") == 0
    assert cli_calls == [], "a dry run loads no engine"
    assert _toy(tmp_path, "--backend", "hf") == 0
    assert cli_calls == [], "the hf backend is not vLLM"
    assert _toy(tmp_path, "--backend", "vllm") == 0
    assert cli_calls == ["reexec"]
    assert _toy(tmp_path, "--backend", "vllm") == 0
    assert cli_calls == ["reexec"], "a rerun with nothing to sample loads no engine"


# ---------------------------------------------------------------- real engine (CI only)


@pytest.mark.slow
@needs_tcmalloc
def test_bonbench_vllm_run_has_tcmalloc_in_the_engine_process(tmp_path: Path, data_dir: Path) -> None:
    """`bonbench run --backend vllm`: the process that holds the engine has tcmalloc mapped."""
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math", "--limit", "1", "--n", "2", "--metric", "pass@1,2",
           "--max-tokens", "8", "--backend", "vllm", "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
    seen_engine_with_tcmalloc = seen_engine = False
    while proc.poll() is None:
        libs = [Path(p).name for p in mapped_libraries(proc.pid)]
        # vLLM's compiled ops are mapped once the engine is being built: check tcmalloc at that moment
        if any(name.startswith("_C") and "abi3" in name for name in libs):
            seen_engine = True
            seen_engine_with_tcmalloc = seen_engine_with_tcmalloc or any("libtcmalloc" in n for n in libs)
            if seen_engine_with_tcmalloc:
                break
        time.sleep(0.5)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert seen_engine, "never saw vLLM's _C library mapped into the run process"
    assert seen_engine_with_tcmalloc, "vLLM engine process without tcmalloc"
    assert err.count("restarting with LD_PRELOAD=") == 1
    assert "libtcmalloc is not found in LD_PRELOAD" not in err  # vLLM's own check agrees
    assert out.strip().splitlines()[-1].endswith(tuple("0123456789abcdef"))  # the run dir
