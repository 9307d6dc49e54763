#!/usr/bin/env bash
# An early check of a long run (studies/shipping-history/multilingual-default.md: checks decide nothing): the run's model folder
# as it stands (what its keep_model keeps: the best validation so far, or the newest), fp32, scored on `oog` and `oog-m1` before and after
# `debias --rank auto`, into OUT/NAME.json and OUT/NAME-debiased.json (train/figures.py files).
# Usage: train/check.sh RUN NAME [OUT]     e.g. train/check.sh ~/edge-xsent-runs/m1-extend-bypair bypair-10000
#        DATA=... OOG=... OOG_WIDE=... change the corpus and benchmarks (defaults below)
set -euo pipefail
run=$1; name=$2; out=${3:-studies/vocab-extend/checks}
data=${DATA:-~/edge-xsent-data/corpus-m1}; oog=${OOG:-oog}; wide=${OOG_WIDE:-~/edge-xsent-data/oog-m1}
[ -f "$run/model/manifest.json" ] || { echo "$run: no model folder yet (the first one comes at eval_every)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$run/model" "$tmp/$name"  # a copy: the run may replace its model folder while this scores it
python -c 'import json, sys; print("model of step", json.load(open(sys.argv[1]))["step"])' "$tmp/$name/training.json"
mkdir -p "$out"
for m in "$name" "$name-debiased"; do
  [ "$m" = "$name" ] || python -m edge_xsent.cli debias "$tmp/$name" --data "$data" --rank auto --out "$tmp/$m"
  python train/figures.py "$tmp/$m" --name "$m" --out "$out/$m.json" --precision fp32 --threads 1 \
    --parts oog,oog_wide --oog "$oog" --oog-wide "$wide"
done
