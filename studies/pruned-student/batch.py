"""Does a bundle's int8 graph give a text the same vector alone as in a batch? quantize_dynamic scales each MatMul's
activations per tensor, over the whole batch, so a long text's large activations coarsen a short one's. Measured:
each text (tests' edge cases + 260 sample sentences) encoded alone and in batches of 64 (Encoder's length-sorted
batches), the cosine of the two, and against the fp32 graph; then the same for the bundle's fp32 graph requantised
with some MatMuls left in fp32 or as MatMulNBits (weights in 8-bit blocks, activations quantised per row)
(`--variants`); or for its int8 graph rewritten to per-row activation scales (`--per-row`, edge_xsent/export/rowquant.py),
timed against the graph as exported (run it with nothing else running).

    python studies/pruned-student/batch.py BUNDLE [--variants] [--per-row]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
from test_hf import EDGE_CASES, sample_sentences  # noqa: E402

from edge_xsent import Encoder  # noqa: E402
from edge_xsent.export.exporter import quantize_int8, quantize_table_int4  # noqa: E402
from edge_xsent.layout import ONNX_FP32, ONNX_INT8  # noqa: E402


def agreement(folder: Path, texts: list[str], fp32: np.ndarray | None) -> str:
    enc = Encoder.load(folder, backend="onnx", precision="int8", verify=False)
    alone, batched = enc.encode(texts, batch_size=1), enc.encode(texts, batch_size=64)
    real = [i for i in range(len(texts)) if alone[i].any()]
    c = (alone[real] * batched[real]).sum(1)
    mb = (folder / ONNX_INT8).stat().st_size / 2**20
    f = (alone[real] * fp32[real]).sum(1) if fp32 is not None else None
    return (f"{mb:5.1f} MiB | alone vs in a batch: min {c.min():.4f} mean {c.mean():.5f}"
            + (f" | vs fp32: min {f.min():.4f} mean {f.mean():.5f}" if f is not None else " | no fp32 graph"))


def speeds(folders: list[Path], texts: list[str], batch_size: int = 32, repeats: int = 5) -> list[float]:
    """Seconds for the texts at 1 thread: the median of `repeats` runs, the folders taking turns."""
    encs = [Encoder.load(f, backend="onnx", precision="int8", threads=1, verify=False) for f in folders]
    runs: list[list[float]] = [[] for _ in encs]
    for enc in encs:
        enc.encode(texts[:64], batch_size=batch_size)
    for _ in range(repeats):
        for enc, times in zip(encs, runs):
            t = time.perf_counter()
            enc.encode(texts, batch_size=batch_size)
            times.append(time.perf_counter() - t)
    return [float(np.median(times)) for times in runs]


def per_row(bundle: Path, texts: list[str], fp32: np.ndarray | None) -> None:
    """The int8 graph as exported against the same graph with per-row activation scales."""
    from edge_xsent.export.rowquant import rewrite_per_row

    tmp = Path(tempfile.mkdtemp())
    work = tmp / "b"
    shutil.copytree(bundle, work)
    rewrite_per_row(work / ONNX_INT8)
    print(f"{'per-row activations':22s} {agreement(work, texts, fp32)}", flush=True)
    for batch_size in (1, 32):
        tensor, row = speeds([bundle, work], texts, batch_size, repeats=7)
        print(f"1 thread, batch {batch_size}: per-tensor {len(texts) / tensor:.0f} sentences/s, per-row "
              f"{len(texts) / row:.0f} ({row / tensor:.3f}x the time; median of 7, taking turns)", flush=True)
    shutil.rmtree(tmp)


def nbits(src: Path, dst: Path, bits: int = 8, block: int = 128) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    table4 = dst.with_name("table4.onnx")
    quantize_table_int4(src, table4)
    cfg = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=4, bits=bits)
    q = MatMulNBitsQuantizer(onnx.load(str(table4)), bits=bits, block_size=block, is_symmetric=True, accuracy_level=4,
                             algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(dst), use_external_data_format=False)
    table4.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--variants", action="store_true", help="also requantise: groups of MatMuls in fp32, MatMulNBits")
    ap.add_argument("--per-row", action="store_true", help="also the int8 graph with per-row activation scales, timed")
    args = ap.parse_args()
    logging.disable(logging.INFO)  # the quantisers log every node
    texts = EDGE_CASES + sample_sentences(260)
    has_fp32 = (args.bundle / ONNX_FP32).exists()  # the shipped default carries its int8 graph only
    fp32 = Encoder.load(args.bundle, backend="onnx", precision="fp32").encode(texts, batch_size=1) if has_fp32 else None
    print(f"{'as exported':22s} {agreement(args.bundle, texts, fp32)}")
    if args.per_row:
        per_row(args.bundle, texts, fp32)
    if not args.variants or fp32 is None:
        return
    tmp = Path(tempfile.mkdtemp())
    work = tmp / "b"
    shutil.copytree(args.bundle, work)
    graph = onnx.load(str(args.bundle / ONNX_FP32)).graph
    weights = {i.name for i in graph.initializer}
    mm = [n.name for n in graph.node if n.op_type == "MatMul" and any(x in weights for x in n.input)]
    blocks = [mm[i:i + 4] for i in range(0, len(mm), 4)]  # per block: qkv, attention out, ffn in, ffn out
    groups = {**{name: [b[k] for b in blocks] for k, name in enumerate(["qkv", "attention out", "ffn in", "ffn out"])},
              **{f"block {i}": b for i, b in enumerate(blocks)}}
    for name, keep in groups.items():
        quantize_int8(args.bundle / ONNX_FP32, work / ONNX_INT8, keep_fp32=keep, table_bits=4)
        print(f"{'fp32 ' + name:22s} {agreement(work, texts, fp32)}", flush=True)
    nbits(args.bundle / ONNX_FP32, work / ONNX_INT8)
    print(f"{'MatMulNBits 8-bit':22s} {agreement(work, texts, fp32)}")
    dynamic, weight_only = speeds([args.bundle, work], texts)
    print(f"1 thread, batch 32: dynamic int8 {len(texts) / dynamic:.0f} sentences/s, MatMulNBits {len(texts) / weight_only:.0f} "
          f"({weight_only / dynamic:.2f}x the time)")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
