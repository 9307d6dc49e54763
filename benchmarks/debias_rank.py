"""How many language directions should `edge-xsent debias` remove? Chosen on the valid split.

With nine languages the centred language means have more than one large singular value
(cpu-2h-8: 0.71, 0.21, 0.15, ...), so rank 1 may leave language in the vectors. Each rank is
applied to the same trained model and scored on the *valid* split (the test split stays for
the card): the paper's XSR (pair pool) and the mixed pool, where the query's own language
competes (multilingual search and deduplication).

The rule, fixed before the runs: take the rank with the best mixed-pool P@1 cosine, unless it
costs the pair pool more than DEBIAS_PAIR_COST_MAX points against rank 1; a gain under DEBIAS_MIN_GAIN
points does not justify a larger rank.

    python benchmarks/debias_rank.py runs/cpu-2h-8/model --data corpus-8 --ranks 1,2,3,4

Writes benchmarks/results/debias-rank.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from edge_xsent.atomic import check_outputs
from edge_xsent.eval.decisions import DEBIAS_MIN_GAIN, DEBIAS_PAIR_COST_MAX, debias_rank
from edge_xsent.failures import script_errors
@script_errors
def main() -> None:
    from edge_xsent.atomic import atomic_write
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.train.debias import debias_model
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.eval.evaluate import average, xsr, xsr_mixed

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--data", required=True)
    ap.add_argument("--ranks", default="1,2,3,4")
    ap.add_argument("--split", default="valid")
    ap.add_argument("--per-lang", type=int, default=3000, help="Sentences per language for the subspace (as `debias`).")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/debias-rank"))
    args = ap.parse_args()
    check_outputs([args.out + '.md', args.out + '.json'], inputs=[args.model, args.data])
    pairs = list(read_pairs(args.data, split=args.split))
    rows: dict[int, dict] = {}
    for rank in [int(r) for r in args.ranks.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            info = debias_model(Path(args.model), args.data, Path(tmp) / "m", rank=rank, per_lang=args.per_lang)
            enc = Encoder.load(Path(tmp) / "m", backend="torch")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # truncation of long sentences: expected
                embed = lambda s: enc.encode(list(s), batch_size=64)  # noqa: E731
                pair, mixed = xsr(pairs, embed), xsr_mixed(pairs, embed)
        rows[rank] = {"pair": 100 * average(pair), "pair_margin": 100 * average(pair, "p1_margin"),
                      "mixed": 100 * average(mixed), "same_language": 100 * average(mixed, "same_language_top1")}
        print(f"rank {rank}: {rows[rank]}", flush=True)
    chosen = debias_rank(rows)
    lines = [f"# `debias` rank, chosen on the {args.split} split", "",
             f"`python benchmarks/debias_rank.py {args.model} --data {args.data} --ranks {args.ranks}`, {time.strftime('%Y-%m-%d')}; fp32, "
             f"P@1 in % averaged over all directions; singular values {info['singular_values']}.", "",
             "| rank | P@1 cosine, pair pool | P@1 margin, pair pool | P@1 cosine, mixed pool | nearest in own language |",
             "|---|---|---|---|---|",
             *[f"| {k}{' (chosen)' if k == chosen else ''} | {v['pair']:.1f} | {v['pair_margin']:.1f} | "
               f"{v['mixed']:.1f} | {v['same_language']:.1f} % |" for k, v in rows.items()], "",
             f"Rule (fixed before the runs): the best mixed-pool P@1, unless it costs the pair pool more than "
             f"{DEBIAS_PAIR_COST_MAX} points against rank 1; gains under {DEBIAS_MIN_GAIN} points keep the smaller rank.", ""]
    with atomic_write(args.out + ".md") as f:
        f.write("\n".join(lines))
    with atomic_write(args.out + ".json") as f:
        json.dump({"rows": rows, "chosen": chosen, "split": args.split, "data": args.data, "model": args.model}, f,
                  indent=2)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
