#!/usr/bin/env bash
# Every CUDA path of bonbench that can run on the machine at hand, in one call, with its figures.
#
#   bash scripts/gpu_check.sh [--install] [--model NAME|DIR] [--shape tiny|DIR] [--data-dir DIR]
#                             [--out DIR] [--cpu] [--only SECTIONS]
#
# Steps (each one timed; a failed step is reported and the next one still runs):
#  1. environment: nvidia-smi, torch / CUDA / library versions, whether vLLM imports;
#  2. models: the policy is --model (e.g. gemma-3-270m, the embedded one) when given, else a
#     random-weight model built here: --shape tiny (2-layer Gemma 3, byte tokenizer; the default) or
#     --shape DIR (a real model's config.json + tokenizer: its architecture and tokenizer with random
#     weights, so times and memory are that model's); the reward model is a tiny random BERT
#     classifier (hub-free); nothing is downloaded;
#  3. `bonbench run --task math --backend hf` in bf16 on the GPU, bon@k through the reward model
#     (`rm:hf:`, on the GPU) and kl through the teacher-forced reference (`--ref-model`);
#  4. with vLLM importable: the same run with `--backend vllm` (the main job's engine); without it, a
#     line saying that vLLM's CUDA paths were not run and why;
#  5. one LoRA step of each objective family through `bonbench train` (hf rollouts on the GPU): Tang
#     (passk, bf16, and again in fp16), Chow (bon_rl_v, verifier = the reward model), Amini (vbon,
#     reference samples), BoNBoN (bonbon), with a KL term and an entropy bonus so the gradient is
#     not zero;
#  6. `bonbench train-verifier` (head and LoRA) on a scripted MATH train run (right and wrong answers;
#     the data folder needs math500/test.jsonl too, for the evaluation-overlap check);
#  7. the benchmarks that mean something on a GPU and need neither vLLM nor TRL: bench_sampler's hf
#     pair, bench_train_memory (CUDA peak), bench_rewards' hf pair on CUDA, bench_verifier;
#  8. the verifiers: `bonbench run --verifier prm:` (a tiny Math-Shepherd-format PRM, on the GPU in
#     bfloat16) on a scripted MATH train run; every PRM family, a local judge and a chat-templated
#     reward model on the GPU against their CPU definitions, in float32 and bfloat16, batch sizes 1
#     and n (scripts/gpu_verifiers.py);
#     a local judge's speed on the policy; bench_prm.py on CUDA.
#
# --only SECTIONS runs the environment and model steps and then only the named sections, a comma list
# of run (3-4), train (5), train-verifier (6), bench (7) and verifiers (8); the default is all.
#
# Every figure is printed and recorded in $OUT/gpu_figures.json (OUT defaults to results/gpu_check;
# docs/gpu.md has the figures of the run on an H100);
# each step's output is in $OUT/log when the caller tees into it. --install first runs
# `bash scripts/install.sh --gpu --no-run` (the README's GPU install) and uses its .venv; otherwise
# the python in $PYTHON, else .venv/bin/python, else python3, with bonbench importable. The commit
# recorded is GPU_CHECK_COMMIT when set (a copy of the tree without .git), else git's. --cpu runs
# the same steps without a GPU (a dry run of the script; the figures are then CPU figures). Exit
# status: the number of failed steps (0 = all passed).
set -uo pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
install=0 model="" shape=tiny data_dir="${BONBENCH_DATA_DIR:-}" out="${OUT:-results/gpu_check}" cpu=0
only="run,train,train-verifier,bench,verifiers"
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1; shift ;;
    --model) model="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --data-dir) data_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: bash scripts/gpu_check.sh [--install] [--model NAME|DIR] [--shape tiny|DIR] [--data-dir DIR] [--out DIR] [--cpu] [--only SECTIONS]" >&2
       exit 2 ;;
  esac
done
for section in ${only//,/ }; do
  case "$section" in
    run|train|train-verifier|bench|verifiers) ;;
    *) echo "error: --only $section: the sections are run, train, train-verifier, bench, verifiers (comma-separated)" >&2; exit 2 ;;
  esac
done
wanted() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
if [ "$install" = 1 ]; then
  bash scripts/install.sh --gpu --no-run || { echo "error: scripts/install.sh --gpu failed; see above" >&2; exit 1; }
  py=.venv/bin/python
else
  py="${PYTHON:-}"
  [ -n "$py" ] || { [ -x .venv/bin/python ] && py=.venv/bin/python; } || py=python3
fi
[ -n "$data_dir" ] || { echo "error: no data: pass --data-dir DIR (a mirror with math/ and imdb/) or set BONBENCH_DATA_DIR" >&2; exit 2; }
data_dir="$(cd "$data_dir" && pwd)"
export BONBENCH_DATA_DIR="$data_dir"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
fig="$out/gpu_figures.json"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
results="$work/results"
failed=()
record() { "$py" scripts/gpu_check.py record "$fig" "$1" "$2" >/dev/null; }

# step NAME CMD...: run CMD, print its output, record its status and wall time
step() {
  local name="$1"; shift
  echo; echo "=== $name: $*"
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$@" 2>&1 | tee "$work/$name.log"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  last_wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  record "step.$name.rc" "$rc"
  record "step.$name.wall_s" "$last_wall"
  if [ "$rc" != 0 ]; then failed+=("$name"); echo "=== $name FAILED (exit $rc)"; fi
  return "$rc"
}

bb() { "$py" -m bonbench "$@"; }

commit="${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"  # a copy without .git names it
echo "=== gpu_check at $commit, python $py, data $data_dir, out $out"
rm -f "$fig"
record "commit" "$commit"
if command -v nvidia-smi >/dev/null 2>&1; then
  step nvidia_smi nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
else
  echo "nvidia-smi: not found"
fi
step env "$py" scripts/gpu_check.py env "$fig"
cuda=$("$py" -c 'import torch; print(int(torch.cuda.is_available()))')
if [ "$cuda" != 1 ] && [ "$cpu" != 1 ]; then
  echo "error: torch sees no CUDA device here; this check is for a GPU machine (pass --cpu for a dry run on the CPU)" >&2
  exit 1
fi
vllm_ok=$("$py" -c 'import vllm' >/dev/null 2>&1 && echo 1 || echo 0)

# ---- 2. models
if [ -z "$model" ]; then
  if ! step build_lm "$py" scripts/gpu_check.py lm "$work/lm" --shape "$shape" && [ "$shape" != tiny ]; then
    shape=tiny  # the rest of the check still means something on the tiny model
    step build_lm_tiny "$py" scripts/gpu_check.py lm "$work/lm" --shape tiny
  fi
  model="$work/lm"
  record "model" "random weights, shape $( [ "$shape" = tiny ] && echo tiny || basename "$shape")"
else
  record "model" "$model"
fi
step build_rm "$py" scripts/gpu_check.py rm "$work/rm"
rm_spec="rm:hf:$work/rm?label=POSITIVE"

# ---- 3. bonbench run, hf backend
if wanted run; then
  run_args=(run --task math --model "$model" --dtype bfloat16 --n 8 --limit 8 --max-tokens 128
            --metric pass@1,8 --metric maj@8 --metric bon@8 --verifier "$rm_spec" --ref-model "$model"
            --data-dir "$data_dir" --out "$results")
  if step run_hf bb "${run_args[@]}" --backend hf; then
    "$py" scripts/gpu_check.py run-figures "$fig" run_hf "$(tail -n 1 "$work/run_hf.log")" "$last_wall"
  fi

  # ---- 4. vLLM
  if [ "$vllm_ok" = 1 ]; then
    if step run_vllm bb "${run_args[@]}" --backend vllm --seed 1; then
      "$py" scripts/gpu_check.py run-figures "$fig" run_vllm "$(tail -n 1 "$work/run_vllm.log")" "$last_wall"
    fi
  else
    why=$("$py" -c 'import vllm' 2>&1 | tail -n 1)
    echo
    echo "vLLM CUDA paths NOT RUN: vllm does not import here ($why). Not covered: --backend vllm, the vllm: reward"
    echo "models (pooling runner), --rollout-backend vllm, bench_sampler's vLLM pair, bench_openai (vllm serve)."
    record "vllm_paths" "not run: vllm does not import ($why)"
  fi
fi

# ---- 5. one LoRA training step per objective family
if wanted train; then
  train() {  # train NAME OBJECTIVE [flags...]
    local name="$1" obj="$2"; shift 2
    if step "train_$name" bb train --task math --objective "$obj" --model "$model" --steps 1 --prompts-per-step 2 \
        --group 4 --max-tokens 64 --lora-rank 16 --warmup 0 --kl-coef 0.05 --entropy-coef 0.01 --data-dir "$data_dir" \
        --out "$results" --name "gpu-$name" "$@"; then
      "$py" scripts/gpu_check.py train-figures "$fig" "train_$name" "$results/checkpoints/gpu-$name" "$last_wall"
    fi
  }
  train passk passk --k 4 --dtype bfloat16
  train passk_fp16 passk --k 4 --dtype float16
  train bon_rl_v bon_rl_v --N 4 --verifier "$rm_spec" --dtype bfloat16
  train vbon vbon --N 4 --ref-samples 4 --dtype bfloat16
  train bonbon bonbon -O N=4 --dtype bfloat16
fi

# ---- 6. learned verifier training on a scripted run of MATH's train split
if wanted train-verifier; then
  if step scripted_run bash -c "'$py' scripts/gpu_check.py scripted-samples '$work/scripted.jsonl' '$data_dir' && \
      '$py' -m bonbench run --task math -T split=train --backend scripted --samples '$work/scripted.jsonl' \
      --model scripted-policy --metric pass@1 --data-dir '$data_dir' --out '$results'"; then
    scripted_run="$(tail -n 1 "$work/scripted_run.log")"
    for method in head lora; do
      if step "train_verifier_$method" bb train-verifier --samples-from "$scripted_run" --model "$model" --method "$method" \
          --dtype bfloat16 --epochs 1 --name "gpu-$method" --out "$results" --data-dir "$data_dir"; then
        "$py" scripts/gpu_check.py json-figures "$fig" "train_verifier_$method" \
          "$(tail -n 1 "$work/train_verifier_$method.log")/bonbench_verifier.json" metrics training
      fi
    done
  fi
fi

# ---- 7. benchmarks
if wanted bench; then
  if step bench_sampler_hf "$py" benchmarks/bench_sampler.py --only hf --model "$model" --n 16 --hf-problems 2 \
      --hf-max-tokens 64 --rounds 3; then
    "$py" scripts/gpu_check.py lines "$fig" bench_sampler_hf "$work/bench_sampler_hf.log" 'hf pair|tok/CPU-s$|ratio|per CPU-s'
  fi
  if step bench_train_memory "$py" benchmarks/bench_train_memory.py --model "$model" --micro-batch 2 \
      --data-dir "$data_dir"; then
    "$py" scripts/gpu_check.py lines "$fig" bench_train_memory "$work/bench_train_memory.log" '^ +[0-9]|LoRA training step'
  fi
  dev=$([ "$cuda" = 1 ] && echo cuda || echo cpu)
  if step bench_rewards_hf "$py" benchmarks/bench_rewards.py --only hf --device "$dev" --size distilbert --texts 48 \
      --batch-size 16 --rounds 2 --data-dir "$data_dir"; then
    "$py" scripts/gpu_check.py lines "$fig" bench_rewards_hf "$work/bench_rewards_hf.log" 'classifier|texts/s|ratio'
  fi
  if [ -n "${scripted_run:-}" ] && step bench_verifier "$py" benchmarks/bench_verifier.py --model "$model" --run "$scripted_run" \
      --n 64 --batch-size 16 --rounds 2 --lora-steps 4 --data-dir "$data_dir" --json "$work/bench_verifier.json"; then
    "$py" scripts/gpu_check.py lines "$fig" bench_verifier "$work/bench_verifier.log" 'texts|samples/s|ratio|difference'
  fi
fi

# ---- 8. verifiers: process reward models and LLM judges on the GPU
if wanted verifiers; then
  dev=$([ "$cuda" = 1 ] && echo cuda || echo cpu)
  if step build_prm "$py" -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; \
      from prm_models import build_math_shepherd; build_math_shepherd(Path('$work/math-shepherd-prm'))" \
      && step scripted_run_prm bash -c "'$py' scripts/gpu_check.py scripted-samples '$work/scripted.jsonl' '$data_dir' && \
      '$py' -m bonbench run --task math -T split=train --limit 64 --backend scripted --samples '$work/scripted.jsonl' \
      --model scripted-policy --metric pass@1,4 --metric bon@4 --metric wmaj@4 \
      --verifier 'prm:$work/math-shepherd-prm?device=$dev&agg=min' --data-dir '$data_dir' --out '$results'"; then
    "$py" scripts/gpu_check.py run-figures "$fig" run_prm "$(tail -n 1 "$work/scripted_run_prm.log")" "$last_wall"
  fi
  step prm_families "$py" scripts/gpu_verifiers.py prm "$fig" --device "$dev"
  step judge_local "$py" scripts/gpu_verifiers.py judge "$fig" --device "$dev"
  step orm_chat "$py" scripts/gpu_verifiers.py orm "$fig" --device "$dev"
  step judge_speed "$py" scripts/gpu_verifiers.py judge-speed "$fig" "$model" --device "$dev"
  for dtype in float32 bfloat16; do
    if step "bench_prm_$dtype" "$py" benchmarks/bench_prm.py --device "$dev" --dtype "$dtype" --samples 64 --steps 8 \
        --hidden 1024 --layers 8 --batch-size 16 --rounds 3; then
      "$py" scripts/gpu_check.py lines "$fig" "bench_prm_$dtype" "$work/bench_prm_$dtype.log" 'samples/s|ratio'
    fi
  done
fi

echo
echo "not run here: bench_trl.py (TRL is not installed with bonbench), bench_train_ddp.py (NCCL data parallel"
echo "needs one GPU per rank: $("$py" -c 'import torch; print(torch.cuda.device_count())') GPU(s) here), bench_ray.py (Ray not installed)."

echo
echo "=== figures: $fig"
cat "$fig"
if [ ${#failed[@]} -gt 0 ]; then
  echo "=== FAILED steps: ${failed[*]} (their logs and the models: $work)"
else
  rm -rf "$work"
  echo "=== every step passed"
fi
exit ${#failed[@]}
