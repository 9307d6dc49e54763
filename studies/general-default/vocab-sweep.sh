#!/usr/bin/env bash
# The vocabulary size for both domains, by the rule in studies/general-default/vocab-both-domains.md
# (fixed before the runs). Four runs at one budget that differ only in the tokenizer, each scored
# on corpus-g's valid (chooses) and test (reported) splits, both domains; then
# benchmarks/vocab_both.py tabulates and applies the rule.
# Resumable: a finished run or evaluation is skipped, a stopped run continues from its checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=benchmarks/results/vocab-sweep
mkdir -p "$R" runs
FLAGS="--config studies/general-default/general-ablation.toml --max-len 128 --teacher usem3 --teacher-weight 2 --teacher-loss nce --mono-batch-size 32"

source studies/shipping-history/lib.sh@f5796e71a  # run NAME [flags], score NAME SPLIT DOMAIN

run vocab-sw16k --tokenizer edge_xsent/resources/default-model/tokenizer.model
for v in 8 16 32; do
  run vocab-both${v}k --vocab-size ${v}000   # no --tokenizer: trains one on corpus-g's training split
done
for name in vocab-sw16k vocab-both8k vocab-both16k vocab-both32k; do
  for split in valid test; do
    score $name $split general
    score $name $split software
  done
done
python3 benchmarks/vocab_both.py
