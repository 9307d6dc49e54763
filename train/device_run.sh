#!/bin/bash
# The device side of a recipe's GPU run (train/device_pack.py packs it here; docs/training.md, "On a lent GPU"):
# joins the staged pack, runs a smoke run (10 steps on the first 2,000 pairs: a CUDA fault ends the call in a minute, before
# the long runs), then run `a` (the recipe; A_FLAGS, e.g. --max-steps 5434) with the minutes the call has left,
# then run `b` (B_FLAGS) if more than B_MIN minutes are still left. Each run's student comes back under $OUT/NAME/.
#   BUDGET=575 bash train/device_run.sh        # on the device: the seconds this call may use (under its timeout)
# CONFIG: the recipe (train/gpu-students.toml); SMOKE_FLAGS: added to the smoke run's (a CPU rehearsal).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} EDGE_XSENT_E5=/tmp/in/e5-small-q4.bin
T0=$(date +%s); BUDGET=${BUDGET:-520}; CFG=${CONFIG:-train/gpu-students.toml}; D=/tmp/in/corpus; O=${OUT:-/tmp/out}
left() { python3 -c "import time; print(round(($T0 + $BUDGET - time.time()) / 60 - ${1:-0}, 2))"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__)"
mkdir -p /tmp/pack "$O" && cp .devpack/call-*/* /tmp/pack/ && python3 train/device_pack.py join /tmp/pack /tmp/in || exit 1
echo "joined at +$(( $(date +%s) - T0 )) s"
mkdir -p /tmp/in/smoke && for f in train valid mono; do head -n 2001 $D/$f.tsv > /tmp/in/smoke/$f.tsv; done  # not 200 MB read for 2,000 pairs
python3 -m edge_xsent train --config "$CFG" --data /tmp/in/smoke --out /tmp/smoke --max-train-pairs 2000 --max-mono-texts 500 \
    --valid-pairs 100 --warmup-steps 5 --max-steps 10 --eval-every 5 --checkpoint-every 10 --quiet ${SMOKE_FLAGS:-} \
    > "$O/smoke.log" 2>&1 || { tail -40 "$O/smoke.log"; exit 1; }
echo "smoke done at +$(( $(date +%s) - T0 )) s"
run() {  # NAME MINUTES FLAGS...
    local name=$1 minutes=$2; shift 2
    python3 -m edge_xsent train --config "$CFG" --data $D --out "/tmp/run-$name" --max-minutes "$minutes" --quiet "$@" \
        > "$O/train-$name.log" 2>&1 && python3 train/device_pack.py student "/tmp/run-$name/model" "$O/$name"
    local rc=$?; echo "run $name rc=$rc at +$(( $(date +%s) - T0 )) s"; tail -6 "$O/train-$name.log"
    cp "/tmp/run-$name/summary.json" "$O/$name-summary.json" 2>/dev/null; return $rc
}
run a "$(left 0.7)" ${A_FLAGS:-}
B=$(left 0.8)
if [ -n "${B_FLAGS+x}" ] && python3 -c "import sys; sys.exit(0 if $B > ${B_MIN:-3.5} else 1)"; then run b "$B" $B_FLAGS
else echo "no run b (B_FLAGS unset, or $B minutes left)"; fi
