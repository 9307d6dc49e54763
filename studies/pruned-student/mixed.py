"""A graph with the table at 4 bits and the blocks at int8: does a 60,000-piece student fit the size rule
without the 4-bit MatMul's slowness? (The 4-bit graph throughout is ~2.3x slower than int8 here.)

From a bundle's fp32 graph: the token table's Gather -> GatherBlockQuantized (4 bits, blocks of 32), then
onnxruntime's dynamic int8 quantisation of the MatMuls (per channel, as the export's int8 graph). Measured
beside the bundle's own int8 and int4 graphs: size, mean cosine to fp32 on the export's parity sentences, the
median time of batch 32 x 32 tokens at 1 thread (all graphs in one run, interleaved), and `oog` P@1.

    python studies/pruned-student/mixed.py ~/edge-xsent-runs/e5-starts-60k/bundle-2 \
        --out studies/pruned-student/figures/mixed-start-2-60k.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from edge_xsent.failures import script_errors


def mixed_graph(fp32: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, op_types_to_quantize=("Gather",),
                                       quant_axes=(("Gather", 1),))
    q = MatMulNBitsQuantizer(onnx.load(str(fp32)), algo_config=cfg)
    q.process()
    table4 = out.with_suffix(".table4.onnx")
    onnx.save(q.model.model, str(table4))
    quantize_dynamic(str(table4), str(out), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"], extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    table4.unlink()


def runner(path: Path):
    from edge_xsent.encode.runtime import onnx_session

    sess = onnx_session(path, 1)
    return lambda ids, mask: sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]


def embedder(run, tok):
    from pipeline import batched_embedder  # this folder's pipeline.py

    return batched_embedder(run, lambda sentences: tok.encode(sentences, 128))


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--oog", default="oog")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from edge_xsent.atomic import atomic_write
    from edge_xsent.data.corpus import read_corpus_split
    from edge_xsent.eval.evaluate import out_of_genre, out_of_genre_means
    from edge_xsent.export.exporter import parity_sentences, quiet
    from edge_xsent.layout import FILES
    from edge_xsent.encode.tokenizer import Tokenizer

    bundle = args.bundle.expanduser()
    mixed = Path("/tmp") / f"{bundle.name}-mixed.onnx"
    with quiet():
        mixed_graph(bundle / "onnx/model.onnx", mixed)
    graphs = {"fp32": bundle / "onnx/model.onnx", "int8": bundle / "onnx/model_int8.onnx",
              "int4": bundle / "onnx/model_int4.onnx", "table int4 + MatMul int8": mixed}
    runs = {k: runner(p) for k, p in graphs.items()}
    tok = Tokenizer.load(bundle / FILES["tokenizer"])
    texts = [t for p in parity_sentences(200) for t in (p.a, p.b)]
    ref = embedder(runs["fp32"], tok)(texts)
    rows = np.array([x[:32] for x in tok.encode(texts, 128) if len(x) >= 32][:32], dtype=np.int64)
    times: dict[str, list[float]] = {k: [] for k in graphs}
    for _ in range(args.repeats):  # interleaved: every graph sees the same machine
        for k, run in runs.items():
            t = time.perf_counter()
            run(rows, np.ones_like(rows))
            times[k].append((time.perf_counter() - t) * 1000)
    pairs = list(read_corpus_split(Path(args.oog) / "test.tsv"))
    result = {}
    for k, run in runs.items():
        vecs = embedder(run, tok)(texts)
        result[k] = {"mb": round(graphs[k].stat().st_size / 2**20, 2),
                     "cosine_mean_to_fp32": round(float(np.mean(np.sum(vecs * ref, axis=1))), 5),
                     "batch32_ms_median": round(statistics.median(times[k]), 2)}
        if k != "fp32":
            result[k]["oog"] = out_of_genre_means(out_of_genre(pairs, embedder(run, tok), max_pairs=1000,
                                                               max_queries=1000))["mean"]
        print(k, result[k], flush=True)
    with atomic_write(args.out) as f:
        json.dump({"bundle": str(args.bundle), "rows": list(rows.shape), "graphs": result}, f, indent=1)
    mixed.unlink()


if __name__ == "__main__":
    main()
