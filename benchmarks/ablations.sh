#!/usr/bin/env bash
# The generative-task and contrastive ablations of the paper's Tables 6 and 7: one run
# per objective, same recipe, same budget, one tokenizer shared by all (trained by the
# first run), then benchmarks/ablations.py tabulates retrieval and classification.
# Usage: benchmarks/ablations.sh [RECIPE] [extra edge-xsent train flags...]
#   benchmarks/ablations.sh train/ablation-small.toml          # the recorded table, ~1 h on 2 CPU cores
#   benchmarks/ablations.sh train/paper-2layer.toml --max-steps 10000   # on a GPU
set -euo pipefail
recipe=${1:-train/ablation-small.toml}; shift || true
runs=()
run() {
  local name=$1; shift
  local tok=()
  [ ${#runs[@]} -gt 0 ] && tok=(--tokenizer "${runs[0]}/tokenizer.model")
  edge-xsent train --config "$recipe" --out "runs/ablation-$name" --quiet "${tok[@]}" "$@"
  runs+=("runs/ablation-$name")
}
# Table 6: each generative task alone (no contrastive losses).
for task in mlm smlm xtr mlm-xtr ugt; do run "$task" --objective "$task" --align-weight 0 --sim-weight 0 "$@"; done
# Table 7: UGT plus align, plus sim, plus both (the paper's full objective).
run ugt-align --objective ugt --align-weight 2 --sim-weight 0 "$@"
run ugt-sim --objective ugt --align-weight 0 --sim-weight 2 "$@"
run ugt-align-sim --objective ugt --align-weight 2 --sim-weight 2 "$@"
python benchmarks/ablations.py "${runs[@]}" --data corpus --recipe "$recipe $*"
