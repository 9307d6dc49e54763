"""Is the first GPU run's gap a map it lost? That run (C) trained its student through a learned linear map to
e5's space and exported the vectors from before it. Fit such a map afterwards (least squares, 384x384 and a
bias, from a folder's vectors of both sides of corpus-m1 valid pairs to e5-passage's vector of the English side)
and measure `oog` and `oog-m1` with it and without: if the map were what C lacked, the mapped vectors would
score as the record's student does.

    python train/linear_map.py ~/edge-xsent-data/students/student-4-ours --oog \
        --out benchmarks/results/students/linear-map.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from edge_xsent import Encoder
from edge_xsent.atomic import atomic_write
from edge_xsent.config import shown_path
from edge_xsent.data.corpus import read_corpus_split, read_pairs
from edge_xsent.eval.evaluate import out_of_genre, out_of_genre_means
from edge_xsent.train.teacher import load_teacher

DATA = Path("~/edge-xsent-data").expanduser()
ROOT = Path(__file__).resolve().parent.parent


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fit(enc: Encoder, pairs: list, threads: int) -> tuple[np.ndarray, dict]:
    """The map (385 x 384: the last row is the bias) and how near it brings the folder's vectors to e5's."""
    teacher = unit(load_teacher("e5-passage", threads=threads, max_len=128).encode([p.a for p in pairs], batch_size=64))
    s = np.concatenate([enc.encode([p.a for p in pairs], batch_size=64), enc.encode([p.b for p in pairs], batch_size=64)])
    t = np.concatenate([teacher, teacher])
    x = np.hstack([s, np.ones((len(s), 1), np.float32)])
    w, *_ = np.linalg.lstsq(x, t, rcond=None)
    return w, {"pairs": len(pairs), "cosine_to_e5": round(float(np.mean(np.sum(unit(s) * t, 1))), 4),
               "cosine_to_e5_mapped": round(float(np.mean(np.sum(unit(x @ w) * t, 1))), 4)}


def retrieval(embed) -> dict:
    """The means train/figures.py's `oog` and `oog_wide` parts give."""
    return {part: out_of_genre_means(out_of_genre(list(read_corpus_split(DATA / folder / "test.tsv")), embed,
                                                  max_pairs=pairs, max_queries=1000))["mean"]
            for part, folder, pairs in (("oog", "oog", 1000), ("oog_wide", "oog-m1", 5000))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--pairs", type=int, default=3000, help="corpus-m1 valid pairs the map is fitted on (seeded pick)")
    ap.add_argument("--oog", action="store_true", help="also measure oog and oog-m1, with the map and without")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*longer than .* tokens were truncated")
    enc = Encoder.load(args.model, threads=args.threads)
    valid = list(read_pairs(DATA / "corpus-m1", split="valid"))
    pick = np.random.default_rng(0).choice(len(valid), size=min(args.pairs, len(valid)), replace=False)
    t0 = time.time()
    w, out = fit(enc, [valid[i] for i in pick], args.threads)
    out = {"model": shown_path(args.model, ROOT), **out}
    if args.oog:
        plain = lambda s: enc.encode(list(s), batch_size=64)  # noqa: E731
        mapped = lambda s: unit(np.hstack([plain(s), np.ones((len(s), 1), np.float32)]) @ w)  # noqa: E731
        out.update(plain=retrieval(plain), mapped=retrieval(mapped))
    out["seconds"] = round(time.time() - t0)
    print(json.dumps(out, indent=1))
    if args.out:
        with atomic_write(args.out) as f:
            f.write(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
