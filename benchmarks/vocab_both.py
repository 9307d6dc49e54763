"""The vocabulary for both domains, from the results studies/general-default/vocab-sweep.sh@1d41fe3 wrote (a record now).

    python benchmarks/vocab_both.py   # benchmarks/results/vocab-sweep.md, and the rule's pick

The rule (studies/general-default/vocab-both-domains.md, fixed before the runs) is `decisions.vocabulary`: each
run's score is the mean of its general and software valid P@1; the int8 size is estimated as
one byte per weight of the saved encoder (model.safetensors: what the int8 ONNX holds).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from safetensors import safe_open

from edge_xsent.atomic import check_outputs
from edge_xsent.atomic import atomic_write
from edge_xsent.eval.decisions import VOCAB_TIE_POINTS, vocabulary
from edge_xsent.eval.evaluate import average
from edge_xsent.failures import script_errors

RESULTS = ROOT / "benchmarks" / "results" / "vocab-sweep"
RUNS_DIR = ROOT / "runs"
RUNS = {  # run -> (tokenizer, pieces, trained on both domains?)
    "vocab-sw16k": ("shipped default's (software pairs)", 16000, False),
    "vocab-both8k": ("corpus-g train (both domains)", 8000, True),
    "vocab-both16k": ("corpus-g train (both domains)", 16000, True),
    "vocab-both32k": ("corpus-g train (both domains)", 32000, True),
}


def p1(results: Path, run: str, split: str, domain: str) -> float:
    return 100 * average(json.loads((results / f"{run}-{split}-{domain}.json").read_text()))


def int8_mb(run_dir: Path) -> float:
    with safe_open(str(run_dir / "model" / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys()) / 1e6


def seconds_per_step(run_dir: Path) -> float:
    logs = [json.loads(l) for l in (run_dir / "log.jsonl").read_text().splitlines()]
    last = [r for r in logs if "elapsed_s" in r][-1]
    return last["elapsed_s"] / last["step"]


def row(run: str, results: Path, runs: Path) -> dict:
    _, size, both = RUNS[run]
    g, s = p1(results, run, "valid", "general"), p1(results, run, "valid", "software")
    return {"size": size, "both": both, "general_valid": g, "software_valid": s, "score": (g + s) / 2,
            "general_test": p1(results, run, "test", "general"), "software_test": p1(results, run, "test", "software"),
            "int8_mb": int8_mb(runs / run), "s_per_step": seconds_per_step(runs / run)}


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS, help="the runs' result files (vocab-sweep.md goes beside)")
    ap.add_argument("--runs", type=Path, default=RUNS_DIR, help="the run folders (weights and logs)")
    args = ap.parse_args()
    check_outputs([args.results.parent / 'vocab-sweep.md', args.results.parent / 'vocab-sweep.json'], inputs=[args.results, args.runs])
    rows = {run: row(run, args.results, args.runs) for run in RUNS}
    pick = vocabulary(rows)
    lines = ["| run | tokenizer trained on | pieces | general valid | software valid | score | general test | "
             "software test | int8 MB (est.) | s/step |", "|---|---|---|---|---|---|---|---|---|---|"]
    for run, r in rows.items():
        lines.append(f"| {run}{' (picked)' if run == pick else ''} | {RUNS[run][0]} | {r['size']:,} | "
                     f"{r['general_valid']:.1f} | {r['software_valid']:.1f} | {r['score']:.1f} | {r['general_test']:.1f} | "
                     f"{r['software_test']:.1f} | {r['int8_mb']:.1f} | {r['s_per_step']:.2f} |")
    text = (f"# Vocabulary for both domains\n\n`studies/general-default/vocab-sweep.sh@1d41fe3`, {time.strftime('%Y-%m-%d')}: 600 steps each "
            "(batch 128, 2 layers x 256, max_len 128, paper objective + USE-m teacher), from scratch; P@1 cosine, "
            "fp32, mean of the 16 directions, 2,000 queries per direction. Score = mean of the two valid columns.\n\n"
            f"Rule (`studies/general-default/vocab-both-domains.md`): the smallest vocabulary within {VOCAB_TIE_POINTS} points of the best "
            f"score under the int8 limit. Picked: **{pick}**.\n\n" + "\n".join(lines) + "\n")
    with atomic_write(args.results.parent / "vocab-sweep.md") as f:
        f.write(text)
    with atomic_write(args.results.parent / "vocab-sweep.json") as f:
        json.dump({"picked": pick, "rows": rows}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
