#!/usr/bin/env bash
# What ships, rebuilt from its recipe in one command: train -> interpolate (the recipe's [ship] alpha)
# -> debias -> export -> calibrate -> figures -> the rule -> ship (the last five: train/finish.sh).
# Resumable: training continues from its checkpoint (a finished run returns at once), and every later step
# skips what is newer than its input. Run it with nothing else on the machine: the speed figures are timed.
# Usage: train/ship.sh train/shipped.toml
#        STOP_AFTER=train|interpolate stops after that step; finish.sh's variables (RESULTS, PARTS, ...) pass through
#        STOP_AFTER=train train/ship.sh RECIPE --data sample --max-steps 1 --out /tmp/r   # a rehearsal: flags go to train
set -euo pipefail
recipe=${1:?usage: train/ship.sh RECIPE (e.g. train/shipped.toml)}
shift
x="python -m edge_xsent.cli"
if [ $# -gt 0 ] && [ "${STOP_AFTER:-}" != train ]; then
  echo "error: flags after the recipe ($*) change the run, so only a rehearsal takes them: STOP_AFTER=train" >&2; exit 1
fi
$x train --config "$recipe" --quiet "$@"
[ "${STOP_AFTER:-}" = train ] && exit 0
settings=$(python train/recipe.py "$recipe" out ship.alpha ship.table_bits ship.int8_activations ship.rule)  # fails, with the recipe's error, on a bad recipe
{ read -r run; read -r alpha; read -r table_bits; read -r activations; read -r rule; } <<< "$settings"
export TABLE_BITS=$table_bits INT8_ACTIVATIONS=$activations RULE=$rule  # for finish.sh: an interpolated run folder no longer names the recipe
target=$recipe
if [ -n "$alpha" ]; then  # the run's weights moved back toward its start (WiSE-FT)
  target="$run-a$alpha"
  [ "$target/model/manifest.json" -nt "$run/model/manifest.json" ] ||
    python train/interpolate.py "$recipe" --alpha "$alpha" --out "$target"
fi
[ "${STOP_AFTER:-}" = interpolate ] && exit 0
exec train/finish.sh "$target"
