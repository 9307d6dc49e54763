#!/usr/bin/env bash
# The generative-task and contrastive ablations of the paper's Tables 6 and 7, one flag
# each, with the same budget. Usage: train/ablations.sh [RECIPE] [extra flags...]
#   train/ablations.sh train/cpu-hour.toml --max-steps 600
set -euo pipefail
recipe=${1:-train/paper-2layer.toml}; shift || true
run() { local name=$1; shift; edge-xsent train --config "$recipe" --out "runs/ablation-$name" "$@"; }
# Table 6: each generative task alone (no contrastive losses).
for task in mlm smlm xtr ugt; do run "$task" --objective "$task" --align-weight 0 --sim-weight 0 "$@"; done
# Table 7: UGT plus align, plus sim, plus both (the paper's full objective).
run ugt-align --objective ugt --align-weight 2 --sim-weight 0 "$@"
run ugt-sim --objective ugt --align-weight 0 --sim-weight 2 "$@"
run ugt-align-sim --objective ugt --align-weight 2 --sim-weight 2 "$@"
