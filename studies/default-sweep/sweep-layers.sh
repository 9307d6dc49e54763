#!/usr/bin/env bash
# The layer sweep of the paper's Table 5 (1, 2, 3, 4, 6 layers), same recipe otherwise.
# Usage: studies/default-sweep/sweep-layers.sh [RECIPE] [extra edge-xsent train flags...]
#   studies/default-sweep/sweep-layers.sh train/paper-2layer.toml --max-steps 10000
set -euo pipefail
recipe=${1:-train/paper-2layer.toml}; shift || true
for n in 1 2 3 4 6; do
  edge-xsent train --config "$recipe" --n-layers "$n" --out "runs/layers-$n" "$@"
done
