"""What a process pays before its first vector: importing the package, `Encoder.load(MODEL)` as a user calls it
(every file the load reads checked), and the first sentence; each in a fresh process, the models interleaved,
medians of several rounds, and the process's peak RSS.

    python benchmarks/startup.py default fast quality [--rounds 7] [--threads 1] [--out benchmarks/results/runtime/startup.md]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, Parser, path_arg

# One fresh process: the times of each stage and its peak RSS (ru_maxrss is in KiB on Linux), as JSON.
CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from edge_xsent import Encoder
t1 = time.perf_counter()
enc = Encoder.load(sys.argv[1], threads=int(sys.argv[2]))
t2 = time.perf_counter()
enc.encode(["Save the current document."])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_s": t3 - t2,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
STAGES = ("import_s", "load_s", "first_s", "peak_rss_mb")


def one(model: str, threads: int) -> dict:
    res = subprocess.run([sys.executable, "-c", CHILD, model, str(threads)], capture_output=True, text=True, timeout=300)
    if res.returncode:
        raise SystemExit(f"{model}: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure(models: list[str], rounds: int, threads: int) -> dict[str, dict]:
    """Each model's medians over `rounds`, the models interleaved in each round (a slow moment hits all alike)."""
    runs = {m: [] for m in models}
    for _ in range(rounds):
        for m in models:
            runs[m].append(one(m, threads))
    return {m: {k: statistics.median(r[k] for r in rs) for k in STAGES} for m, rs in runs.items()}


def to_markdown(figures: dict[str, dict], rounds: int, threads: int) -> str:
    lines = [f"# Startup: import, load, first sentence ({time.strftime('%Y-%m-%d')})", "",
             f"`python benchmarks/startup.py {' '.join(figures)} --rounds {rounds} --threads {threads}`: a fresh "
             f"process per measurement, the models interleaved, medians of {rounds}.", "",
             "| model | import s | load s | first sentence s | total s | peak RSS MB |", "|---|---|---|---|---|---|"]
    for m, f in figures.items():
        total = f["import_s"] + f["load_s"] + f["first_s"]
        lines.append(f"| {m} | {f['import_s']:.3f} | {f['load_s']:.3f} | {f['first_s']:.3f} | {total:.3f} | "
                     f"{f['peak_rss_mb']:.0f} |")
    return "\n".join(lines) + "\n"


@user_errors
def main() -> None:
    ap = Parser(description=__doc__)
    ap.add_argument("models", nargs="+", help="shipped names or model folders")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=path_arg(FILE), default=None, help="write the table here (and its .json beside it)")
    args = ap.parse_args()
    figures = measure(args.models, args.rounds, args.threads)
    text = to_markdown(figures, args.rounds, args.threads)
    print(text)
    if args.out:
        from edge_xsent.train.bench import write_report

        write_report(args.out, text, {"rounds": args.rounds, "threads": args.threads, "models": figures})


if __name__ == "__main__":
    main()
