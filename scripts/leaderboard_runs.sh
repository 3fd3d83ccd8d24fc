#!/usr/bin/env bash
# The leaderboard of issue 17: real LoRA fine-tunes of the embedded Gemma 3 270M, their evaluation
# against the base, and the leaderboard / reward-vs-KL plot / HTML report. Every command is written
# out; stages run one at a time (they share two CPU cores with everything else on this machine).
#
#   scripts/leaderboard_runs.sh STAGE...      STAGE: train-imdb eval-imdb report-imdb
#                                                    train-math eval-math report-math   (or: imdb, math, all)
#
# Environment:
#   OUT   where checkpoints, runs and reports go (default: results/leaderboard; not in the repo)
#   CODE  the bonbench checkout to run (default: this one); the real runs used a frozen copy
#   PY    the Python that has bonbench's dependencies (default: .venv/bin/python of CODE, else python3)
#   BONBENCH_DATA_DIR  the offline data mirror (the real runs: /work/shared/data)
#
# Budget (this machine: 2 shared cores, no GPU): each IMDB run is 20 steps of 4 prompts x G = 8
# samples x 24 new tokens (640 rollouts), LoRA rank 16 on all linear layers, lr 5e-4 with 3 warm-up
# steps, bf16 autocast, seed 1. Evaluation: 64 IMDB test prompts x 8 samples x 24 tokens at T = 1
# (the training temperature) with vLLM; KL to the base teacher-forced with transformers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CODE="${CODE:-$here}"
OUT="${OUT:-$here/results/leaderboard}"
if [ -z "${PY:-}" ]; then
  if [ -x "$CODE/.venv/bin/python" ]; then PY="$CODE/.venv/bin/python"; else PY=python3; fi
fi
# bonbench from CODE (the task and sandbox packages come from CODE/.pp when it has one)
export PYTHONPATH="$CODE${PYTHONPATH:+:$PYTHONPATH}"
[ -d "$CODE/.pp" ] && export PYTHONPATH="$PYTHONPATH:$CODE/.pp"
bb() { (set -x; nice -n "${NICE:-15}" "$PY" -m bonbench.cli "$@"); }

CK="$OUT/checkpoints"
# shared training settings (IMDB)
IMDB_TRAIN=(--task imdb --seed 1 --steps 20 --prompts-per-step 4 --group 8 --max-new-tokens 24
            --lr 5e-4 --warmup 3 --lora-rank 16 --lora-targets all-linear --out "$OUT")
# shared evaluation settings (IMDB): 64 test prompts x 8 samples, the training length and temperature
IMDB_EVAL=(--task imdb --limit 64 --n 8 --max-tokens 24 --temperature 1.0 --out "$OUT")
IMDB_METRICS=mean,max@4,max@8,winrate,winrate@4,winrate@8,kl

train_imdb() {
  # vBoN (Amini et al. §3.2) at N = 8, F-hat from M = 16 base samples per prompt: its objective
  # -KL(pi || pi_bon) carries its own KL, so no extra KL term
  bb train "${IMDB_TRAIN[@]}" --objective vbon --N 8 --ref-samples 16 --name imdb-vbon8
  # KL-regularised RL (the paper's baseline), E[r] - beta KL(pi || pi_ref), RLOO, beta = 0.1
  bb train "${IMDB_TRAIN[@]}" --objective kl_rl -O beta=0.1 --name imdb-klrl-b0.1
  # vBoN-L (Amini §3.3): the bound L = (N-1) E[log F] - KL, i.e. KL-RL with reward log F, beta = 1/(N-1)
  bb train "${IMDB_TRAIN[@]}" --objective vbon_l --N 8 --ref-samples 16 --name imdb-vbonl8
  # BoN-SFT (Amini's baseline): SFT on the reward-best of N = G = 8 samples, here drawn on-policy
  # each step (bonbon with alpha = 1: weight 1 on each group's best sample, no preference term).
  # The method has no KL term; IMDB has no gold continuations, so Chow's expert-based bon_sft
  # cannot run on it.
  bb train "${IMDB_TRAIN[@]}" --objective bonbon --N 8 -O alpha=1 --name imdb-bonsft8
}

case_stage() {
  case "$1" in
    train-imdb) train_imdb ;;
    imdb) train_imdb ;;
    *) echo "error: unknown stage $1 (train-imdb eval-imdb report-imdb train-math eval-math report-math imdb math all)" >&2; exit 1 ;;
  esac
}

[ $# -ge 1 ] || { sed -n 2,20p "$0"; exit 1; }
mkdir -p "$OUT"
for stage in "$@"; do case_stage "$stage"; done
