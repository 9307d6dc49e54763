#!/usr/bin/env bash
# A finished run of the next default made a candidate (studies/shipping-history/multilingual-default.md): debias, export
# int8, calibrate, then every figure its rule and its card read (train/figures.py), then the rule
# (train/ship.py), which writes its table and ships the winner, if any.
# Resumable: a step whose output is newer than its input is not redone, and figures.py goes on at its
# next part. Run it with nothing else on the machine: the speed part is timed.
# Usage: train/finish.sh RECIPE|RUN [...]      e.g. train/finish.sh studies/shipping-history/m1-extend.toml ~/edge-xsent-runs/m1-extend-a50
#        DATA=... OOG=... OOG_WIDE=... CORPUS_G=... change the benchmarks (defaults: figures.py's);
#        TABLE_BITS=4 exports the token table at 4 bits (default: the recipe's [ship] table_bits, else 8);
#        INT8_ACTIVATIONS=per-row scales the int8 graph's activations per row (default: the recipe's [ship]
#        int8_activations, else per-tensor);
#        RULE=student judges by the pruned student's rule (default: the last recipe's [ship] rule, else multilingual);
#        PARTS=general,oog measures only those parts; RESULTS=DIR keeps the figures and the table there
#        (default benchmarks/results/candidates, which holds shipped.json, the model shipped now)
set -euo pipefail
x="python -m edge_xsent.cli"
cfg() { python train/recipe.py "$1" "$2"; }  # a recipe's setting, or a run folder's own (train/recipe.py)
fresh() { [ -e "$1" ] && [ "$1" -nt "$2" ]; }  # output $1 exists and is newer than input $2
results=${RESULTS:-benchmarks/results/candidates}
parts=${PARTS:-general,oog,oog_wide,oog_small,corpus_g,speed}
opts=(--threads 1 --parts "$parts")
for k in DATA OOG OOG_WIDE CORPUS_G; do
  [ -n "${!k:-}" ] && opts+=("--$(echo "$k" | tr 'A-Z_' 'a-z-')" "${!k}")
done
candidates=()
for recipe in "$@"; do  # a recipe, or a run folder
  run=$(cfg "$recipe" out); data=$(cfg "$recipe" data); name=$(basename "$run")
  bits=${TABLE_BITS:-$(cfg "$recipe" ship.table_bits)}; bits=${bits:-8}  # a run folder records no [ship]
  acts=${INT8_ACTIVATIONS:-$(cfg "$recipe" ship.int8_activations)}; acts=${acts:-per-tensor}
  rule=${RULE:-$(cfg "$recipe" ship.rule)}; rule=${rule:-multilingual}
  [ -f "$run/model/manifest.json" ] || { echo "$recipe: no trained model in $run/model; train it first" >&2; exit 1; }
  # Project out the language-identity directions the shared encoder learns (edge_xsent/train/debias.py), as
  # many as the language means' spectrum shows (studies/shipping-history/multilingual-default.md: --rank auto).
  fresh "$run/model-debiased/manifest.json" "$run/model/manifest.json" ||
    $x debias "$run/model" --data "$data" --out "$run/model-debiased" --rank auto
  fresh "$run/bundle/manifest.json" "$run/model-debiased/manifest.json" ||
    $x export "$run/model-debiased" --int8 --table-bits "$bits" --int8-activations "$acts" --out "$run/bundle"
  # int8 vector ranges on every language of the training corpus (export's own come from the sample);
  # calibrate refreshes the manifest, so its own record says whether it ran on this corpus
  python -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["source"] != sys.argv[2])' \
    "$run/bundle/calibration.json" "$data valid split" 2>/dev/null ||
    $x calibrate "$run/bundle" --data "$data" --sentences 5000
  figures=$results/$name.json
  fresh "$figures" "$run/bundle/manifest.json" || rm -f "$figures"  # figures of an older bundle: measure again
  named=(); [ -f "$recipe" ] && named=(--recipe "$recipe")  # a run folder's own record names its recipe
  python train/figures.py "$run/bundle" --name "$name" --out "$figures" "${opts[@]}" "${named[@]}"
  candidates+=(--candidate "$figures")
done
# The model shipped now: its speed on this machine too, for the table (the rule reads the candidates').
[[ ",$parts," == *,speed,* ]] && python train/figures.py edge_xsent/resources/default-model --name shipped \
  --out "$results/shipped.json" --threads 1 --parts speed
python train/ship.py --rule "$rule" --shipped "$results/shipped.json" "${candidates[@]}" --decision "$results/decision.md" \
  ${SHIP_OUT:+--out "$SHIP_OUT"}
