#!/bin/bash
# The device side of a recipe's GPU run (train/device_pack.py packs it here; docs/training.md, "On a lent GPU"):
# joins the staged pack, runs a smoke run (10 steps on the first 2,000 pairs: a CUDA fault ends the call in a minute, before
# the long runs), then run `a` (the recipe; A_FLAGS, e.g. --max-steps 5434) with the minutes the call has left, then
# runs `b` (B_FLAGS) and `c` (C_FLAGS), each if set and more than B_MIN minutes are still left. TOGETHER=1 starts the
# runs set at once instead, each with the minutes left (one GPU, a process each: the H200 ran one 4-block student at
# 38 ms a step, far from its arithmetic; if their pace falls, each run's deadline cuts its steps and its summary says
# so). Each run's student comes back under $OUT/NAME/.
#   BUDGET=575 bash train/device_run.sh        # on the device: the seconds this call may use (under its timeout)
# CONFIG: the recipe (train/gpu-students.toml); SMOKE_FLAGS: added to the smoke run's; WORK: where the pack is staged
# and joined and the runs write (/tmp, which stays while the machine is warm: a later call finds the pack joined there
# and needs neither the call folders nor a smoke run again); DEVPACK: the call folders (.devpack).
set -u -o pipefail
W=${WORK:-/tmp}
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} EDGE_XSENT_E5=$W/in/e5-small-q4.bin
T0=$(date +%s); BUDGET=${BUDGET:-520}; CFG=${CONFIG:-train/gpu-students.toml}; D=$W/in/corpus; O=${OUT:-/tmp/out}
left() { python3 -c "import time; print(round(($T0 + $BUDGET - time.time()) / 60 - ${1:-0}, 2))"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1
python3 -c "import sys; from importlib.metadata import version; print(sys.version.split()[0], version('torch'))"  # not torch's 2 s import
mkdir -p "$O"
WARM=; [ ! -d "$W/in/corpus" ] || [ ! -f "$W/in/e5-small-q4.bin" ] || WARM=1
if [ -n "$WARM" ]; then  # a warm machine's earlier call joined and smoke-ran it
    echo "joined and smoke-run by an earlier call: $W/in"
else
    mkdir -p "$W/pack" && cp "${DEVPACK:-.devpack}"/call-*/* "$W/pack/" && python3 train/device_pack.py join "$W/pack" "$W/in" || exit 1
    echo "joined at +$(( $(date +%s) - T0 )) s"
fi
START=(); [ ! -d "$W/in/start" ] || START=(--init "$W/in/start" --teacher "$W/in/start")  # a self-taught run's (join made it)
if [ -z "$WARM" ]; then
    # the smoke run reads the first 2,000 pairs (and texts): not 200 MB read for them
    mkdir -p "$W/in/smoke" && for f in train valid mono; do [ ! -f "$D/$f.tsv" ] || head -n 2001 "$D/$f.tsv" > "$W/in/smoke/$f.tsv"; done
    MONO=(); [ ! -f "$D/mono.tsv" ] || MONO=(--max-mono-texts 500)
    python3 -m edge_xsent train --config "$CFG" --data "$W/in/smoke" --out "$W/smoke" --max-train-pairs 2000 "${MONO[@]}" "${START[@]}" \
        --valid-pairs 100 --warmup-steps 5 --max-steps 10 --eval-every 5 --checkpoint-every 10 --quiet ${SMOKE_FLAGS:-} \
        > "$O/smoke.log" 2>&1 || { tail -40 "$O/smoke.log"; exit 1; }
    echo "smoke done at +$(( $(date +%s) - T0 )) s"
fi
run() {  # NAME MINUTES FLAGS...
    local name=$1 minutes=$2; shift 2
    python3 train/device_pack.py trained-student "$W/run-$name-$T0" "$O/$name" -- --config "$CFG" --data "$D" \
        --max-minutes "$minutes" --quiet "${START[@]}" "$@" > "$O/train-$name.log" 2>&1  # the run, then its student: one process
    local rc=$?; echo "run $name rc=$rc at +$(( $(date +%s) - T0 )) s"; tail -6 "$O/train-$name.log"
    cp "$W/run-$name-$T0/summary.json" "$O/$name-summary.json" 2>/dev/null; return $rc
}
if [ -n "${TOGETHER:-}" ]; then
    M=$(left 0.7)
    run a "$M" ${A_FLAGS:-} &
    if [ -n "${B_FLAGS+x}" ]; then run b "$M" $B_FLAGS & fi
    if [ -n "${C_FLAGS+x}" ]; then run c "$M" $C_FLAGS & fi
    wait
    exit 0
fi
run a "$(left 0.7)" ${A_FLAGS:-}
for name in b c; do
    flags=${name^^}_FLAGS; M=$(left 0.8)
    if [ -n "${!flags+x}" ] && python3 -c "import sys; sys.exit(0 if $M > ${B_MIN:-3.5} else 1)"; then run $name "$M" ${!flags}
    else echo "no run $name ($flags unset, or $M minutes left)"; fi
done
