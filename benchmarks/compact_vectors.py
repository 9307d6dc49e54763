"""What compact vectors cost: P@1 and index size for float32, int8, sign bits and truncated
vectors of one model, on the retrieval test splits and the out-of-genre benchmark.

    python benchmarks/compact_vectors.py --model edge_xsent/resources/fast-model --data corpus-g --oog oog
    python benchmarks/compact_vectors.py --data sample --queries 200          # small, no general split

Every sentence is embedded once (the model's default backend); each variant then turns those
vectors into what an index would store (Encoder.encode(precision=..., dimensions=...)) and
back into vectors to score, both sides stored alike: int8 codes decoded with the model's
calibrated ranges, sign bits as ±1 (their dot product ranks as the Hamming distance does),
prefixes renormalised. P@1 as `edge-xsent eval xsr` / `eval oog` compute it (cosine, the same
queries and candidates); MB per 100,000 sentences is the stored vectors alone.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from edge_xsent import Encoder
from edge_xsent.encode import compact
from edge_xsent.atomic import atomic_write
from edge_xsent.data.corpus import read_corpus_split, read_pairs
from edge_xsent.eval.evaluate import average, out_of_genre, xsr
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INPUT, Parser, Role, note_input, path_arg

ROOT = Path(__file__).resolve().parent.parent


class Memo:
    """Each distinct sentence embedded once, whatever the variant asks for."""

    def __init__(self, enc: Encoder):
        self.enc, self.vecs = enc, {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vecs]
        if missing:
            self.vecs.update(zip(missing, self.enc.encode(missing, batch_size=64)))
        return np.stack([self.vecs[t] for t in texts]) if texts else np.zeros((0, self.enc.dim), np.float32)


def variants(dim: int, ranges: dict | None) -> dict[str, tuple[str, int, Callable[[np.ndarray], np.ndarray]]]:
    """name -> (precision, dimensions, unit vectors -> the vectors an index of that kind scores with)."""
    out = {}
    for k in dict.fromkeys([dim, dim // 2, dim // 4]):
        out[f"float32 x {k}"] = ("float32", k, lambda v, k=k: compact.truncate(v, k, renormalise=True))
        if ranges:
            out[f"int8 x {k}"] = ("int8", k, lambda v, k=k: compact.from_int8(compact.to_int8(v[:, :k], ranges), ranges))
        out[f"ubinary x {k}"] = ("ubinary", k, lambda v, k=k: compact.from_ubinary(compact.to_ubinary(v[:, :k]), k))
    return out


def measure(enc: Encoder, tasks: dict[str, Callable], queries: int) -> dict:
    memo = Memo(enc)
    rows = {}
    for name, (precision, k, store) in variants(enc.dim, enc.ranges).items():
        embed = lambda texts: store(memo(list(texts)))  # noqa: E731
        row = {"precision": precision, "dimensions": k,
               "mb_per_100k": compact.bytes_per_vector(precision, k) * 100_000 / 2**20}
        for task, run in tasks.items():
            row[task] = 100 * run(embed)
        rows[name] = row
    return rows


def tasks_for(data: str, oog: Path | None, queries: int) -> dict[str, Callable]:
    tasks: dict[str, Callable] = {}
    stats = Path(data) / "stats.json"
    domains = read_json(stats, what="stats.json").get("domains", {}) if stats.exists() else {}
    for domain in [d for d in ("software", "general") if d in domains] or [None]:
        pairs = list(read_pairs(data, split="test", domain=domain))
        tasks[domain or "test"] = lambda e, p=pairs: average(xsr(p, e, max_queries=queries))
    if oog is not None:
        pairs = list(read_corpus_split(oog / "test.tsv"))

        def reserved(e, p=pairs):
            r = out_of_genre(p, e)
            return sum(v for d in r.values() for v in d.values()) / sum(len(d) for d in r.values())
        tasks["out of genre"] = reserved
    return tasks


def markdown(res: dict) -> str:
    tasks = [k for k in next(iter(res["rows"].values())) if k not in ("precision", "dimensions", "mb_per_100k")]
    lines = [f"# Compact vectors: {res['model']}", "",
             f"`{res['command']}`, {res['date']} ({res['seconds']:.0f} s). P@1 in % (cosine; int8 codes decoded with "
             f"the model's calibrated ranges, {res['calibration']}; sign bits scored as ±1, i.e. by Hamming "
             "distance; truncated vectors renormalised), both sides stored alike. MB: the stored vectors of "
             "100,000 sentences.", "",
             "| vectors | dimensions | MB / 100k | " + " | ".join(tasks) + " |",
             "|---|---|---|" + "---|" * len(tasks)]
    for name, r in res["rows"].items():
        lines.append(f"| {r['precision']} | {r['dimensions']} | {r['mb_per_100k']:.1f} | "
                     + " | ".join(f"{r[t]:.1f}" for t in tasks) + " |")
    return "\n".join(lines) + "\n"


@user_errors
def main() -> None:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model folder or bundle (default: the shipped model)")
    ap.add_argument("--data", default="corpus-g", help="corpus whose test split(s) to retrieve from")
    ap.add_argument("--oog", type=path_arg(INPUT), default=None, help="the reserved benchmark folder (edge-xsent data reserved)")
    ap.add_argument("--queries", type=int, default=2000, help="queries per direction (eval xsr's default)")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json", ".md"))), default=ROOT / "benchmarks" / "results" / "compact-vectors")
    args = ap.parse_args()
    note_input(args.model, args.data)
    enc = Encoder.load(args.model)
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*were truncated")
        rows = measure(enc, tasks_for(args.data, args.oog, args.queries), args.queries)
    cal = enc.ranges
    res = {"model": str(args.model or "the shipped default"), "backend": enc.backend, "rows": rows,
           "calibration": f"{cal['sentences']} sentences of {cal['source']}" if cal else "none (no int8 rows)",
           "command": "python benchmarks/compact_vectors.py " + " ".join(
               f"--{k} {v}" for k, v in (("model", args.model), ("data", args.data), ("oog", args.oog),
                                          ("queries", args.queries)) if v is not None),
           "date": time.strftime("%Y-%m-%d"), "seconds": time.time() - t0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.out.with_suffix(".json")) as f:
        f.write(json.dumps(res, indent=2) + "\n")
    with atomic_write(args.out.with_suffix(".md")) as f:
        f.write(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
