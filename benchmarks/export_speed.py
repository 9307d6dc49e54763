"""Export options side by side, in one run: fp32 PyTorch eager against ONNX fp32, int8, fused
int8 and int4, at batch 32 x 32 tokens and batch 1, one thread (the export's speed goal: the
2-layer int8 ONNX model >= 3x faster than fp32 eager, file <= 1/3 of fp32's).

Backends are timed round-robin (one batch of each in turn, many rounds), so drift of the
machine hits all of them alike; medians and p95 are reported.

    python benchmarks/export_speed.py MODEL_FOLDER [--rounds 40] [--out benchmarks/results/export_speed.md]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from edge_xsent.threads import thread_count
from edge_xsent.failures import user_errors
from edge_xsent.paths import INPUT, Parser, Role, path_arg

ROOT = Path(__file__).resolve().parent.parent


@user_errors
def main() -> None:
    ap = Parser()
    ap.add_argument("model", type=path_arg(INPUT))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--threads", type=thread_count, default=1)
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks/results/export_speed.md"))
    args = ap.parse_args()
    import torch

    from edge_xsent.train.bench import machine_info, summarize, write_report
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.export.exporter import export_bundle

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        plain, fused = Path(tmp) / "plain", Path(tmp) / "fused"
        p_plain = export_bundle(args.model, plain, torchscript=False, int4=True)
        p_fused = export_bundle(args.model, fused, torchscript=False, fuse=True)
        variants = {
            "torch fp32 (eager)": (Encoder.load(plain, backend="torch", threads=args.threads), plain / "model.safetensors"),
            "onnx fp32": (Encoder.load(plain, backend="onnx", precision="fp32", threads=args.threads), plain / "onnx/model.onnx"),
            "onnx int8": (Encoder.load(plain, backend="onnx", precision="int8", threads=args.threads), plain / "onnx/model_int8.onnx"),
            "onnx fp32 fused": (Encoder.load(fused, backend="onnx", precision="fp32", threads=args.threads), fused / "onnx/model.onnx"),
            "onnx int8 fused": (Encoder.load(fused, backend="onnx", precision="int8", threads=args.threads), fused / "onnx/model_int8.onnx"),
            "onnx int4": (Encoder.load(plain, backend="onnx", precision="int4", threads=args.threads), plain / "onnx/model_int4.onnx"),
            # What Encoder avoids (encoder.ORT_DISABLED): onnxruntime's SkipLayerNormalization fusion, left on.
            "onnx int8, ORT default fusions": (Encoder.load(plain, backend="onnx", precision="int8", threads=args.threads,
                                                            disabled_optimizers=()), plain / "onnx/model_int8.onnx"),
        }
        tok = variants["onnx int8"][0].tokenizer
        text = [p.a for p in read_pairs("sample", split="test")] + [p.b for p in read_pairs("sample", split="test")]
        flat = [t for ids in tok.encode(text) for t in ids]
        rows = np.array(flat[: 64 * 32], dtype=np.int64).reshape(64, 32)  # real token ids, 32 per row
        times = {name: {1: [], 32: []} for name in variants}
        for bs in (32, 1):
            ids = rows[:bs]
            mask = np.ones_like(ids)
            for enc, _ in variants.values():
                for _ in range(3):
                    enc.embed_ids(ids, mask)
            for _ in range(args.rounds):
                for name, (enc, _) in variants.items():
                    t = time.perf_counter()
                    enc.embed_ids(ids, mask)
                    times[name][bs].append(time.perf_counter() - t)
        parity = {**p_plain["formats"], "onnx-int8-fused": p_fused["formats"]["onnx-int8"]}
        res = {"machine": machine_info(), "threads": args.threads, "model": str(args.model), "rounds": args.rounds,
               "rows": {name: {"size_mb": round(f.stat().st_size / 2**20, 2), "batch32": summarize(times[name][32]),
                               "batch1": summarize(times[name][1])} for name, (_, f) in variants.items()},
               "parity": parity}
    base = res["rows"]["torch fp32 (eager)"]
    onnx_fp32 = res["rows"]["onnx fp32"]
    for r in res["rows"].values():
        r["speedup_vs_eager_b32"] = round(base["batch32"]["p50_ms"] / r["batch32"]["p50_ms"], 2)
        r["speedup_vs_eager_b1"] = round(base["batch1"]["p50_ms"] / r["batch1"]["p50_ms"], 2)
        r["size_vs_onnx_fp32"] = round(r["size_mb"] / onnx_fp32["size_mb"], 3)
    m = res["machine"]
    lines = ["# Export options, side by side", "",
             f"`python benchmarks/export_speed.py {args.model}` on {m['cpu']} ({m['cores']} cores), {args.threads} thread(s), "
             f"torch {m['torch']}, onnxruntime {m['onnxruntime']}, {time.strftime('%Y-%m-%d')}. Inputs: real token ids, "
             f"32 tokens a row; {args.rounds} round-robin rounds after warm-up.", "",
             "| variant | size (MB) | size / onnx fp32 | batch 32 p50 / p95 (ms) | speed-up vs eager | batch 1 p50 / p95 (ms) | speed-up vs eager |",
             "|---|---|---|---|---|---|---|"]
    for name, r in res["rows"].items():
        nz = lambda s: " (noisy)" if s["noisy"] else ""  # noqa: E731
        lines.append(f"| {name} | {r['size_mb']} | {r['size_vs_onnx_fp32']} | {r['batch32']['p50_ms']:.2f} / "
                     f"{r['batch32']['p95_ms']:.2f}{nz(r['batch32'])} | {r['speedup_vs_eager_b32']}x | "
                     f"{r['batch1']['p50_ms']:.3f} / {r['batch1']['p95_ms']:.3f}{nz(r['batch1'])} | {r['speedup_vs_eager_b1']}x |")
    lines += ["", "Parity against fp32 PyTorch (sample test split):", "", "| format | mean cosine | min cosine | XSR P@1 |",
              "|---|---|---|---|"]
    lines += [f"| {k} | {v['cosine_mean']:.5f} | {v['cosine_min']:.5f} | {100 * v['xsr_p1']:.1f} |" for k, v in parity.items()]
    write_report(args.out, "\n".join(lines), res)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
