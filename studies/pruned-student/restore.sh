#!/usr/bin/env bash
# What the study's runs and measurements read, rebuilt on a bare machine (it has come back empty twice: the
# sixth and the twentieth sitting): corpus-m1, corpus-g (only so `oog` leaves its sentences out, as it always has),
# the two out-of-genre benchmarks, and the teacher's labels of the pairs a recipe reads. Each step skips what is
# there (folders are written whole or not at all; labels resume at their last chunk), so a rerun goes on after a kill.
# Then the recipe's own command starts or resumes its run:
#   studies/pruned-student/restore.sh studies/pruned-student/restart-3l.toml    # THREADS=1 beside other work
#   OMP_NUM_THREADS=1 edge-xsent train --config studies/pruned-student/restart-3l.toml
set -euo pipefail
recipe=${1:?usage: studies/pruned-student/restore.sh RECIPE}
cd "$(dirname "$0")/../.."
x="python3 -m edge_xsent.cli"
langs=de,es,fr,it,nl,pl,pt_BR,ru,ja,ko,zh_CN,zh_TW,tr,ca,sv,uk,hu,cs,id,fi,da,gl,el,et,bg,sk,ar,sl,lt,hr,vi,eu,ro,nb,he,th,hi,fa,bn
m1=$HOME/edge-xsent-data/corpus-m1
[ -d "$m1" ] || $x data build --langs "$langs" --out "$m1" \
  --sources default,freeorion,gnome-help,gnome-app-help,kde-help,wordfreq,freedict   # ~37 min
[ -d corpus-g ] || $x data build --langs de,es,fr,it,nl,pl,pt_BR,ru --out corpus-g --offline
[ -d oog ] || $x data reserved --out oog --exclude corpus-g
[ -d "$HOME/edge-xsent-data/oog-m1" ] || $x data reserved --langs "$langs" --out "$HOME/edge-xsent-data/oog-m1" \
  --exclude "$m1" --offline
settings=$(python3 train/recipe.py "$recipe" data teacher max_train_pairs mono_batch_size seed)
{ read -r data; read -r teacher; read -r pairs; read -r mono; read -r seed; } <<< "$settings"
[ -n "$teacher" ] || exit 0  # nothing to label
if [ -n "$pairs" ] && [ "${mono:-0}" = 0 ]; then
  python3 train/label.py "$data" --teacher "$teacher" --threads "${THREADS:-2}" --seed "$seed" --pairs "$pairs"
else
  python3 train/label.py "$data" --teacher "$teacher" --threads "${THREADS:-2}" --seed "$seed"
fi
