"""What `join_share` adds to a recipe's training pairs (data.corpus.joined_pairs): how many joined pairs, each
language's share of its own pairs, the English sides' lengths beside the pairs', and the sources they come from.

    python benchmarks/joined_pairs.py --config train/gpu-students.toml --join-share 0.25 \
        --out benchmarks/results/students/joined-pairs.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

from edge_xsent.atomic import atomic_write
from edge_xsent.config import TrainConfig, portable
from edge_xsent.failures import script_errors
from edge_xsent.train.batches import joined_rows, load_texts


def figures(cfg: TrainConfig) -> dict:
    in_file = load_texts(cfg, "train", cfg.max_train_pairs, file_order=True)
    t = time.perf_counter()
    joined = joined_rows(cfg, in_file)
    seconds = time.perf_counter() - t
    pairs, extra = Counter(p.lang_b for p in in_file), Counter(p.lang_b for p in joined)
    return {"data": portable(cfg.data), "join_share": cfg.join_share, "join_chars": cfg.join_chars,
            "pairs": len(in_file), "joined": len(joined), "join_seconds": round(seconds, 1),
            "joined_share_by_language": {lang: round(extra[lang] / n, 3) for lang, n in sorted(pairs.items())},
            "english_chars_median": {"pairs": float(np.median([len(p.a) for p in in_file])),
                                     "joined": float(np.median([len(p.a) for p in joined])) if joined else None},
            "joined_by_source": dict(Counter(p.source for p in joined).most_common())}


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, required=True, help="the recipe")
    ap.add_argument("--data", help="the corpus, if not the recipe's")
    ap.add_argument("--join-share", type=float, help="join_share, if not the recipe's")
    ap.add_argument("--out", type=Path, required=True, help="a JSON file")
    args = ap.parse_args()
    over = {k: v for k, v in (("data", args.data), ("join_share", args.join_share)) if v is not None}
    result = {"recipe": str(args.config), **figures(TrainConfig.from_toml(args.config, over or None))}
    with atomic_write(args.out) as f:
        f.write(json.dumps(result, indent=1) + "\n")
    print(f"{args.out}: {result['pairs']:,d} pairs, {result['joined']:,d} joined (median English characters "
          f"{result['english_chars_median']['pairs']:g} -> {result['english_chars_median']['joined']})")


if __name__ == "__main__":
    main()
