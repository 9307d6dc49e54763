"""What `max_len` truncates: the share of sentences longer than N tokens, per domain, with a
tokenizer trained on both domains.

    python benchmarks/max_len.py runs/gen-paper/tokenizer.model --data corpus-g

Rule (fixed before measuring): the smallest max_len among 32/48/64/96/128 that truncates at
most 1% of general-domain train sentences (both sides); attention cost grows with the
square of the length, and the position table with it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from edge_xsent.failures import user_errors
from edge_xsent.paths import INPUT, Parser, Role, note_input, path_arg

ROOT = Path(__file__).resolve().parent.parent

LENGTHS = (32, 48, 64, 96, 128)
MAX_SHARE = 0.01


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer", type=path_arg(INPUT))
    ap.add_argument("--data", default="corpus-g")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks/results/max_len.md"))
    args = ap.parse_args()
    note_input(args.data)
    from edge_xsent.train.bench import write_report
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.tokenizer import Tokenizer

    tok = Tokenizer.load(args.tokenizer)
    rows, shares = [], {}
    by_domain = {d: [t for p in read_pairs(args.data, split="train", domain=d) for t in (p.a, p.b)]
                 for d in ("general", "software")}
    by_domain = {d: t for d, t in by_domain.items() if t} or {  # a corpus without domains: one row
        "all": [t for p in read_pairs(args.data, split="train") for t in (p.a, p.b)]}
    for domain, texts in by_domain.items():
        n = np.array([len(x) for x in tok.encode(texts)])
        shares[domain] = {L: float((n > L).mean()) for L in LENGTHS}
        rows.append(f"| {domain} | {len(texts):,d} | {int(np.percentile(n, 50))} / {int(np.percentile(n, 95))} / "
                    f"{int(np.percentile(n, 99))} | " + " | ".join(f"{100 * shares[domain][L]:.2f}" for L in LENGTHS) + " |")
    judged = "general" if "general" in shares else next(iter(shares))
    chosen = next((L for L in LENGTHS if shares[judged][L] <= MAX_SHARE), LENGTHS[-1])
    lines = ["# max_len: sentences truncated, per domain", "",
             f"`python benchmarks/max_len.py {args.tokenizer} --data {args.data}`, {time.strftime('%Y-%m-%d')}: "
             f"train split, both sides, {tok.vocab_size:,d}-piece tokenizer trained on both domains.", "",
             "| domain | sentences | tokens p50 / p95 / p99 | " + " | ".join(f"% over {L}" for L in LENGTHS) + " |",
             "|---|---|---|" + "---|" * len(LENGTHS), *rows, "",
             f"Rule (fixed before measuring): the smallest max_len that truncates at most {100 * MAX_SHARE:g}% of "
             f"{judged}-domain sentences: **{chosen}**."]
    write_report(args.out, "\n".join(lines), {"shares": shares, "chosen": chosen, "tokenizer": str(args.tokenizer)})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
