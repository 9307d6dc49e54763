"""Where a model's time goes (issue 105): onnxruntime's own profile of the int8 graph, opened as the encoder opens
it, on length-sorted batches of the sample's test sentences; each operator type's share of the time, its work
(multiply-adds of the matrix products) and the bytes its inputs and outputs hold, against what this CPU can do,
measured in the same run: an int8 matrix product's peak (one large MatMulInteger) and memory bandwidth (a copy).
Batch 1 too: the latency a keyboard or a search box asks.

    python benchmarks/op_profile.py default [--batch 32] [--threads 1] [--out benchmarks/results/runtime/profile-default.md]
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from edge_xsent.failures import user_errors
from edge_xsent.paths import Parser, Role, path_arg

ROOT = Path(__file__).resolve().parent.parent
ITEM = {"int8": 1, "uint8": 1, "float": 4, "float16": 2, "int64": 8, "int32": 4, "bool": 1}
PRODUCTS = ("MatMulIntegerToFloat", "MatMulInteger", "MatMul", "FusedMatMul", "DynamicQuantizeMatMul", "Gemm")


def batches(encoder, sentences: list[str], size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The encoder's own ids, sorted by length and padded per batch, as `encode` feeds the graph."""
    from edge_xsent.encode.tokenizer import pad_batch

    ids = sorted(encoder.tokenize(sentences), key=len)
    return [pad_batch(ids[i:i + size]) for i in range(0, len(ids), size)]


def passes(graph: Path, feeds: list, rounds: int, threads: int, profile_to: Path | None = None) -> tuple[float, list]:
    """The median seconds of one pass over `feeds` (after one pass to warm up) in a session opened as the encoder
    opens one, and with `profile_to`, onnxruntime's node events of all rounds + 1 passes."""
    import onnxruntime as ort

    from edge_xsent.encode.encoder import ORT_DISABLED
    from edge_xsent.encode.runtime import onnx_session
    from edge_xsent.train.bench import timed

    opts = ort.SessionOptions()
    if profile_to is not None:
        opts.enable_profiling, opts.profile_file_prefix = True, str(profile_to)
    sess = onnx_session(graph, threads, opts, ORT_DISABLED)
    one = lambda: [sess.run(["sentence_embedding"], {"input_ids": i, "attention_mask": m}) for i, m in feeds]  # noqa: E731
    seconds = timed(one, rounds, warmup=1)["p50_ms"] / 1e3
    if profile_to is None:
        return seconds, []
    events = json.loads(Path(sess.end_profiling()).read_text())
    return seconds, [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]


def shapes(entry: list[dict]) -> list[tuple[str, list[int]]]:
    return [(kind, dims) for item in entry for kind, dims in item.items()]


VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Shape")  # no bytes move
PICKS = ("Gather", "Slice")  # read only what they write


def work(event: dict) -> tuple[int, int]:
    """(multiply-adds, bytes read and written) of one node run, from the shapes onnxruntime recorded (a constant
    input, such as a product's int8 weight, is not among them: its K x N bytes are added)."""
    args = event.get("args", {})
    op = args.get("op_name")
    ins, outs = shapes(args.get("input_type_shape", [])), shapes(args.get("output_type_shape", []))
    size = lambda items: sum(ITEM.get(k, 4) * int(np.prod(d)) for k, d in items)  # noqa: E731
    moved = 0 if op in VIEWS else 2 * size(outs) if op in PICKS else size(ins) + size(outs)
    macs = 0
    if op in PRODUCTS and ins and outs and ins[0][1] and outs[0][1]:
        macs = int(np.prod(ins[0][1])) * outs[0][1][-1]
        moved += ins[0][1][-1] * outs[0][1][-1] if op == "MatMulIntegerToFloat" else 0
    return macs, moved


def table(events: list[dict], passes: int) -> list[dict]:
    """Per operator type: its share of the kernel time, ms per pass, and its work rate."""
    by = defaultdict(lambda: {"us": 0.0, "macs": 0, "bytes": 0, "runs": 0})
    for e in events:
        row = by[e["args"]["op_name"]]
        macs, moved = work(e)
        row["us"] += e["dur"]
        row["macs"] += macs
        row["bytes"] += moved
        row["runs"] += 1
    total = sum(r["us"] for r in by.values())
    return sorted(({"op": op, "share": r["us"] / total, "ms_per_pass": r["us"] / 1e3 / passes,
                    "gmacs_per_s": r["macs"] / r["us"] / 1e3 if r["us"] else 0.0,
                    "gb_per_s": r["bytes"] / r["us"] / 1e3 if r["us"] else 0.0} for op, r in by.items()),
                  key=lambda r: -r["share"])


def peaks(threads: int) -> dict:
    """This CPU's int8 product rate (one 1024x384 by 384x1536 MatMulInteger, the blocks' widest) and its memory
    bandwidth (numpy copying 256 MB), measured now."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    m, k, n = 1024, 384, 1536
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "peak", [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k]),
                                               helper.make_tensor_value_info("b", TensorProto.INT8, [k, n])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {"a": rng.integers(0, 255, (m, k), dtype=np.uint8), "b": rng.integers(-127, 127, (k, n), dtype=np.int8)}
    sess.run(None, feed)
    t = min(_timed(lambda: sess.run(None, feed)) for _ in range(20))
    src = np.ones(2**28 // 8)
    copy = min(_timed(lambda: src.copy()) for _ in range(5))
    return {"int8_gmacs_per_s": m * k * n / t / 1e9, "copy_gb_per_s": 2 * src.nbytes / copy / 1e9}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(folder: Path, batch: int, threads: int, rounds: int) -> dict:
    from edge_xsent import Encoder
    from edge_xsent.layout import ONNX_INT8
    from edge_xsent.train.bench import speed_sentences

    encoder = Encoder.load(folder, threads=threads)
    sentences = speed_sentences("sample")
    rows = {}
    for size in (batch, 1):
        feeds = batches(encoder, sentences if size > 1 else sentences[::4], size)
        graph = Path(encoder.path) / ONNX_INT8
        with tempfile.TemporaryDirectory() as tmp:
            profiled, events = passes(graph, feeds, rounds, threads, profile_to=Path(tmp) / "profile")
        plain = passes(graph, feeds, rounds, threads)[0]
        rows[size] = {"sentences": sum(len(f[0]) for f in feeds), "tokens": int(sum(f[1].sum() for f in feeds)),
                      "padded": int(sum(f[1].size for f in feeds)), "wall_s": plain, "profiled_wall_s": profiled,
                      "ms_per_sentence": 1e3 * plain / sum(len(f[0]) for f in feeds),
                      "ops": table(events, rounds + 1)}
    return {"model": str(folder), "threads": threads, "batch": batch, "peaks": peaks(threads), "runs": rows}


def to_markdown(r: dict) -> str:
    p = r["peaks"]
    lines = [f"# Where the time goes: `{r['model']}` ({r['threads']} thread{'s' * (r['threads'] > 1)})", "",
             f"This CPU, measured in the same run: int8 products {p['int8_gmacs_per_s']:.1f} GMAC/s (one MatMulInteger "
             f"1024x384 by 384x1536), memory copy {p['copy_gb_per_s']:.1f} GB/s.", ""]
    for size, run in r["runs"].items():
        lines += [f"## Batches of {size} ({run['sentences']} sentences, {run['tokens']:,d} tokens, "
                  f"{run['padded']:,d} padded): {run['ms_per_sentence']:.2f} ms a sentence unprofiled; profiling adds "
                  f"{run['profiled_wall_s'] / run['wall_s'] - 1:.0%}, the shares are of the profiled time", "",
                  "| operator | share | ms a pass | GMAC/s | of the int8 peak | GB/s moved | of the copy rate |",
                  "|---|---|---|---|---|---|---|"]
        for o in run["ops"]:
            peak = f"{o['gmacs_per_s'] / p['int8_gmacs_per_s']:.0%}" if o["gmacs_per_s"] else ""
            lines.append(f"| {o['op']} | {o['share']:.1%} | {o['ms_per_pass']:.2f} | "
                         f"{o['gmacs_per_s']:.1f} | {peak} | {o['gb_per_s']:.1f} | "
                         f"{o['gb_per_s'] / p['copy_gb_per_s']:.0%} |".replace("| 0.0 |  |", "| | |"))
        lines.append("")
    return "\n".join(lines)


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=path_arg(Role("input", literal="default")), nargs="?", default="default",
                    help="a model folder, or default")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))),
                    default=ROOT / "benchmarks/results/runtime/profile-default.md")
    args = ap.parse_args(argv)
    from edge_xsent.encode.encoder import named_model

    folder = named_model(Path(args.model)) or Path(args.model)
    result = measure(folder, args.batch, args.threads, args.rounds)
    from edge_xsent.train.bench import write_report

    text = to_markdown(result)
    write_report(args.out, text, result)
    print(text)


if __name__ == "__main__":
    main()
