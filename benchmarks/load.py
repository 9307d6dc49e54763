"""Load test: memory stays bounded as the input grows.

1. `edge-xsent encode` on 100k and on 1M sentences streamed from a file (real corpus
   sentences, cycled and numbered): peak RSS of each run, side by side.
2. Retrieval with 2,000 queries among 200k candidates (the paper's setting): peak RSS and time.

    python benchmarks/load.py MODEL_OR_BUNDLE [--data corpus] [--out benchmarks/results/runtime/load.md]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge_xsent.failures import user_errors
from edge_xsent.paths import INPUT, Parser, Role, note_input, path_arg

ROOT = Path(__file__).resolve().parent.parent


def child_peak_rss_mb(cmd: list[str]) -> tuple[float, float]:
    """Run a command in a fresh process; (peak RSS MB of that process, seconds)."""
    t = time.time()
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    res = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-2000:])
    return int(res.stdout.strip().splitlines()[-1]) / 1024, time.time() - t


@user_errors
def main() -> None:
    ap = Parser()
    ap.add_argument("model", type=path_arg(INPUT))
    ap.add_argument("--data", default="sample")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks/results/runtime/load.md"))
    ap.add_argument("--sizes", default="100000,1000000", help="numbers of sentences to encode, side by side")
    ap.add_argument("--no-xsr", action="store_true", help="skip the 200k-candidate retrieval run")
    args = ap.parse_args()
    note_input(args.data)
    from edge_xsent.train.bench import write_report
    from edge_xsent.data.corpus import read_pairs

    base = [p.a for p in read_pairs(args.data, split="train")] + [p.b for p in read_pairs(args.data, split="train")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
            src = Path(tmp) / f"s{n}.txt"
            with open(src, "w", encoding="utf-8") as f:
                for i in range(n):
                    f.write(f"{base[i % len(base)]} ({i})\n")
            rss, secs = child_peak_rss_mb([sys.executable, "-m", "edge_xsent.cli", "encode", "--model", args.model,
                                           "--input", str(src), "--out", str(Path(tmp) / "v.npy"), "--threads", "2"])
            rows.append({"what": f"encode {n:,d} sentences from a file", "peak_rss_mb": round(rss), "seconds": round(secs, 1),
                         "output_mb": round((Path(tmp) / "v.npy").stat().st_size / 2**20)})
            print(rows[-1], flush=True)
        if not args.no_xsr:  # 2,000 queries among 200k candidates: test pairs + train sentences as distractors
            # French train sentences first; the corpus has ~100k, so real de/es/it train sentences fill up to 200k
            # (other-language distractors are harder, not easier: the model maps them near their meaning).
            train = list(read_pairs(args.data, split="train"))
            pool = [p.b for p in train if p.lang_b == "fr"] + [p.b for p in train if p.lang_b not in ("en", "fr")]
            distractors = list(dict.fromkeys(pool))[:200_000]
            distract = Path(tmp) / "d.txt"
            with open(distract, "w", encoding="utf-8") as f:
                f.writelines(s + "\n" for s in distractors)
            rss, secs = child_peak_rss_mb([sys.executable, "-m", "edge_xsent.cli", "eval", "xsr", "--model", args.model,
                                           "--data", args.data, "--queries", "2000", "--distractors", f"fr:{distract}",
                                           "--json"])
            rows.append({"what": f"xsr: 2,000 queries per direction; en->fr among the test sentences + "
                                 f"{len(distractors):,d} distractors",
                         "peak_rss_mb": round(rss), "seconds": round(secs, 1)})
            print(rows[-1], flush=True)
    lines = ["# Load test", "", f"Model `{args.model}`, data `{args.data}`, `python benchmarks/load.py`, "
             f"{time.strftime('%Y-%m-%d')}.", "", "| run | peak RSS (MB) | seconds | output (MB) |", "|---|---|---|---|"]
    lines += [f"| {r['what']} | {r['peak_rss_mb']:,d} | {r['seconds']} | {r.get('output_mb', '')} |" for r in rows]
    write_report(args.out, "\n".join(lines), rows)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
