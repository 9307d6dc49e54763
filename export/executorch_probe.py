"""Does an ExecuTorch `.pte` of our encoder work here? A probe, not part of `edge-xsent export`.

ExecuTorch is not a dependency (it pulls ~30 packages: coremltools, pandas, scikit-learn,
...), so run this in a separate environment that sees the project:

    python -m venv --system-site-packages /tmp/et && /tmp/et/bin/pip install executorch
    /tmp/et/bin/python export/executorch_probe.py runs/cpu-hour/model

It lowers the sentence embedder to XNNPACK (fp32) twice: with dynamic batch and sequence
axes (what `Encoder` needs), and at one fixed shape (32 x 32 tokens). Each is run by the
ExecuTorch runtime on real token ids, compared with PyTorch, and timed against eager
PyTorch side by side (one thread, round-robin, medians).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def lower(embedder, example, dynamic: bool, path: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import Dim, export

    shapes = None
    if dynamic:
        b, s = Dim("batch", min=1, max=example[0].shape[0]), Dim("sequence", min=1, max=example[0].shape[1])
        shapes = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
    program = export(embedder, example, dynamic_shapes=shapes)
    path.write_bytes(to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    from executorch.runtime import Runtime

    from edge_xsent.encode.bundle import load_model
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.export.exporter import SentenceEmbedder

    torch.set_num_threads(1)
    model, tok, _ = load_model(args.model)
    embedder = SentenceEmbedder(model).eval()
    text = [p.a for p in read_pairs("sample", split="test")]
    flat = [t for ids in tok.encode(text) for t in ids]
    L = min(32, model.cfg.max_len)
    rows = torch.tensor(flat[: 64 * L]).reshape(64, L)
    full = (rows[:32], torch.ones(32, L, dtype=torch.long))
    smaller = (rows[32:35, : L // 2].contiguous(), torch.ones(3, L // 2, dtype=torch.long))  # under the bound
    runtime = Runtime.get()
    with tempfile.TemporaryDirectory() as tmp:
        for dynamic in (True, False):
            name = "dynamic batch and sequence" if dynamic else "fixed 32 x 32"
            path = Path(tmp) / "model.pte"
            lower(embedder, full, dynamic, path)
            method = runtime.load_program(str(path)).load_method("forward")
            with torch.inference_mode():
                diff = (method.execute(list(full))[0] - embedder(*full)).abs().max().item()
            print(f"{name}: .pte {path.stat().st_size / 2**20:.1f} MB, max |pte - torch| at 32 x {L}: {diff:.2e}")
            if dynamic:
                try:
                    method.execute(list(smaller))
                    print("  a smaller batch (3 x 16) runs")
                except RuntimeError as e:
                    print(f"  a smaller batch (3 x 16) fails: {e}")
                continue
            times: dict[str, list[float]] = {"pte (XNNPACK fp32)": [], "torch eager fp32": []}
            fns = {"pte (XNNPACK fp32)": lambda: method.execute(list(full)), "torch eager fp32": lambda: embedder(*full)}
            with torch.inference_mode():
                for _ in range(3):
                    [f() for f in fns.values()]
                for _ in range(args.rounds):
                    for k, f in fns.items():
                        t = time.perf_counter()
                        f()
                        times[k].append(time.perf_counter() - t)
            eager = np.median(times["torch eager fp32"])
            for k, ts in times.items():
                print(f"  {k}: batch 32 x {L} p50 {1000 * np.median(ts):.1f} ms ({eager / np.median(ts):.2f}x eager)")


if __name__ == "__main__":
    main()
