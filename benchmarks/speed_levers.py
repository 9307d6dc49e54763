"""The speed levers that need no training, each judged by the rule in studies/quality-model ("The speed levers'
rule"): kept at >= 5% more sentences/s than the folder as it is, at 1 thread in one run, with the export's parity
gate held and a text's vector independent of its batch.

    python benchmarks/speed_levers.py STUDENT_FOLDER [--out benchmarks/results/quality-model/speed-levers]
    python benchmarks/speed_levers.py STUDENT_FOLDER --against E5_FOLDER --out OUT   # the default rule's speed clause
    # STUDENT_FOLDER: train/student_folder.py's output (it keeps onnx/model.onnx, the fp32 graph the levers requantise)

Levers: static (calibrated static activations, the first position apart: export/staticquant.py), fuse (onnxscript's
attention, SkipLayerNormalization and BiasGelu fusions before quantising, as `export --fuse`), sln (onnxruntime's
own SkipLayerNormalization fusion, which edge-xsent disables at load), gelu (onnxruntime's GELU approximation at load,
`optimization.enable_gelu_approximation`: tanh for erf, the BiasGelu that took 13% of the default's time in
benchmarks/results/runtime/profile-default.md), and shorter inputs (the padding left after `encode`'s length sorting,
measured: a lever only if padding is more than 5% of the tokens).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from edge_xsent import Encoder
from edge_xsent.atomic import atomic_write
from edge_xsent.encode.encoder import MAX_BATCH_TOKENS, ORT_DISABLED, batches
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import average, xsr
from edge_xsent.export.exporter import fuse_for_ort, parity_sentences, quantize_int8, recorded_int8
from edge_xsent.failures import user_errors
from edge_xsent.paths import INPUT, Parser, Role, path_arg
from edge_xsent.train.bench import interleaved, pair_speed, speed_sentences
from edge_xsent.layout import ONNX_FP32, ONNX_INT8

ROOT = Path(__file__).resolve().parent.parent
MIN_GAIN, MIN_COSINE, MIN_ALONE = 1.05, 0.99, 0.9999  # the rule's thresholds
ROUNDS, BATCH = 7, 32
PAIR_ROUNDS = 9


def requantised(folder: Path, out: Path, activations: str, fuse: bool = False) -> dict:
    """A copy of `folder` whose int8 graph is made again from its fp32 graph, the table as the folder has it."""
    shutil.copytree(folder, out, ignore=shutil.ignore_patterns("model.safetensors", ONNX_INT8.split("/")[-1]))
    fp32 = out / ONNX_FP32
    if fuse:
        fused = out / "fused.onnx"
        shutil.copy(fp32, fused)
        fuse_for_ort(fused)
        fp32 = fused
    bits, _, rows = recorded_int8(folder, None, None)
    calibration = []
    if activations == "static":
        from edge_xsent.export.staticquant import calibration_batches

        calibration = calibration_batches(out)
    settings = quantize_int8(fp32, out / ONNX_INT8, table_bits=bits, activations=activations, table_exact_rows=rows,
                             calibration=calibration)
    if fuse:
        fused.unlink()
    return settings


def gate(enc: Encoder, ref: Encoder, pairs) -> dict:
    """The export's parity gate against the fp32 graph, and the batch independence per-row activations give."""
    sentences = [p.a for p in pairs] + [p.b for p in pairs]
    vecs, base = enc.encode(sentences), ref.encode(sentences)
    cos = (vecs * base).sum(1)
    some = sentences[:: max(1, len(sentences) // 64)][:64]
    alone = np.stack([enc.encode(s) for s in some])
    p1 = average(xsr(pairs, lambda s: enc.encode(list(s)), max_queries=len(pairs)))
    p1_ref = average(xsr(pairs, lambda s: ref.encode(list(s)), max_queries=len(pairs)))
    return {"cosine_mean": round(float(cos.mean()), 5), "cosine_min": round(float(cos.min()), 5),
            "xsr_p1": round(p1, 4), "xsr_p1_fp32": round(p1_ref, 4),
            "alone_vs_batch_min": round(float((alone * enc.encode(some, batch_size=BATCH)).sum(1).min()), 6)}


def against(student: Path, peer: Path) -> dict:
    """The default rule's speed clause, interleaved (studies/quality-model): the student and its peer in one process,
    batch 32 and batch 1, rounds alternating."""
    sentences = speed_sentences()
    encoders = {"student": Encoder.load(student, threads=1, verify=False),
                "peer": Encoder.load(peer, threads=1, verify=False)}
    batch32, batch1 = pair_speed(encoders, sentences, rounds=PAIR_ROUNDS)
    return {"student": str(student), "peer": str(peer), "threads": 1, "rounds": PAIR_ROUNDS,
            "sentences_per_s": batch32, "ratio": round(batch32["student"] / batch32["peer"], 3),
            "batch1_ms": {k: round(1000 / v, 3) for k, v in batch1.items()}, "batch1_sentences": min(200, len(sentences))}


def gelu_approximation():
    """onnxruntime's session options with its GELU approximation on (off by default: it changes the numbers)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.add_session_config_entry("optimization.enable_gelu_approximation", "1")
    return opts


def padding_share(enc: Encoder, sentences: list[str]) -> float:
    """Padded positions over all positions fed to the graph, as `encode` batches them."""
    ids = enc.tokenize(sentences)
    lengths = [len(x) for x in ids]
    order = np.argsort([-n for n in lengths], kind="stable")
    fed = real = 0
    for idx in batches(order, lengths, BATCH):
        fed += len(idx) * max(lengths[i] for i in idx)
        real += sum(lengths[i] for i in idx)
    return round(1 - real / fed, 4)


def measure(folder: Path, work: Path) -> dict:
    sentences, pairs = speed_sentences(), parity_sentences()
    built = {"static": requantised(folder, work / "static", "static")}
    try:
        built["fuse"] = requantised(folder, work / "fuse", recorded_int8(folder, None, None)[1], fuse=True)
    except (UserError, ValueError, RuntimeError) as e:  # the fusions may leave no table Gather to tier
        built["fuse"] = {"not applicable": str(e)[:300]}
    load = {"as it is": lambda: Encoder.load(folder, threads=1, verify=False),
            "static": lambda: Encoder.load(work / "static", threads=1, verify=False),
            "sln": lambda: Encoder.load(folder, threads=1, verify=False,
                                        disabled_optimizers=[o for o in ORT_DISABLED if o != "SkipLayerNormFusion"]),
            "gelu": lambda: Encoder.load(folder, threads=1, verify=False, session_options=gelu_approximation())}
    if "not applicable" not in built["fuse"]:
        load["fuse"] = lambda: Encoder.load(work / "fuse", threads=1, verify=False)
    encoders = {k: f() for k, f in load.items()}
    ref = Encoder.load(folder, precision="fp32", threads=1, verify=False)
    speed = interleaved(encoders, sentences, rounds=ROUNDS, batch=BATCH)
    rows = {}
    for name, enc in encoders.items():
        g = gate(enc, ref, pairs)
        gain = speed[name] / speed["as it is"]
        kept = (name != "as it is" and gain >= MIN_GAIN and g["cosine_mean"] >= MIN_COSINE
                and g["alone_vs_batch_min"] >= MIN_ALONE)
        rows[name] = {"sentences_per_s": speed[name], "gain": round(gain, 3), **g, "kept": kept}
    return {"folder": str(folder), "sentences": len(sentences), "rounds": ROUNDS, "batch": BATCH, "threads": 1,
            "parity_sentences": 2 * len(pairs), "variants": rows, "built": built,
            "padding_share": padding_share(encoders["as it is"], sentences),
            "rule": {"min_gain": MIN_GAIN, "min_cosine_mean": MIN_COSINE, "min_alone_vs_batch": MIN_ALONE},
            "max_batch_tokens": MAX_BATCH_TOKENS}


def table(result: dict) -> str:
    lines = [f"# Speed levers on {Path(result['folder']).name} (benchmarks/speed_levers.py)", "",
             f"{result['sentences']} speed sentences, batch {result['batch']}, 1 thread, {result['rounds']} rounds "
             f"alternating, medians; parity on {result['parity_sentences']} sentences of the sample test split against "
             "the folder's fp32 graph. Kept: >= 5% faster, mean cosine >= 0.99, alone-vs-batch >= 0.9999.", "",
             "| variant | sentences/s | gain | mean cosine | min cosine | P@1 (fp32) | alone vs batch (min) | kept |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in result["variants"].items():
        lines.append(f"| {name} | {r['sentences_per_s']} | {r['gain']:.3f} | {r['cosine_mean']:.5f} | "
                     f"{r['cosine_min']:.5f} | {r['xsr_p1']:.4f} ({r['xsr_p1_fp32']:.4f}) | {r['alone_vs_batch_min']:.6f} | "
                     f"{'yes' if r['kept'] else 'no'} |")
    lines += ["", f"Shorter inputs: padding is {100 * result['padding_share']:.1f}% of the positions `encode` feeds "
              "(length-sorted batches of 32); the most a shorter input could save."]
    if "not applicable" in result["built"].get("fuse", {}):
        lines += ["", f"fuse: not applicable ({result['built']['fuse']['not applicable']})"]
    return "\n".join(lines) + "\n"


@user_errors
def main() -> None:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=path_arg(INPUT), help="a student folder with its fp32 graph (train/student_folder.py)")
    ap.add_argument("--against", type=path_arg(INPUT), default=None, help="instead of the levers: the folder's speed against "
                    "this one's (multilingual-e5-small as the same kind of folder), interleaved")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json", ".md"))), default=ROOT / "benchmarks/results/quality-model/speed-levers",
                    help="writes OUT.json and OUT.md (with --against: OUT.json)")
    args = ap.parse_args()
    outs = [args.out.with_suffix(".json"), args.out.with_suffix(".md")]
    if args.against is not None:
        result = against(args.folder, args.against)
        with atomic_write(args.out.with_suffix(".json")) as f:
            f.write(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
        return
    if not (args.folder / ONNX_FP32).is_file():
        raise UserError(f"{args.folder}: no {ONNX_FP32}; make the folder with train/student_folder.py")
    with tempfile.TemporaryDirectory() as work, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*were truncated")
        result = measure(args.folder, Path(work))
    for out, text in zip(outs, (json.dumps(result, indent=1) + "\n", table(result))):
        with atomic_write(out) as f:
            f.write(text)
    print(table(result))


if __name__ == "__main__":
    main()
