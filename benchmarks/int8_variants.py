"""Which int8 quantisation to ship: one fp32 ONNX model quantised three ways (`export.quantize_int8`),
each measured where a bundle runs here, and chosen by `decisions.int8_variant` (rule fixed before
the first run).

    python benchmarks/int8_variants.py [BUNDLE] [--data corpus-g]
    # BUNDLE: a full export (onnx/model.onnx and the fp32 weights); default: the default's run

Variants (`export.INT8_WEIGHTS`): s8 (signed 8-bit weights, full range: bundles until then),
s8-7bit (`reduce_range`) and u8 (unsigned weights). Runtimes: Python onnxruntime on this CPU at batch 32 (`encode`'s default)
and at batch 1, and onnxruntime-web (WASM) in headless Chromium through the demo page
(`android_demo/test/embed.mjs`), one text a time. Per variant and runtime: the mean and min cosine
to fp32 PyTorch on the tokenizer edge-case suite + 300 general + 300 software test sentences;
per variant: XSR P@1 on both domains' test splits (as `edge-xsent eval xsr --domain`),
sentences/s at 1 thread (median of 5 rounds, variants interleaved in one run) and file size.
Writes benchmarks/results/int8-variants.{json,md}. Needs `npm ci` in android_demo/ and chromium.
"""

from __future__ import annotations

import argparse
import json
import runpy
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from edge_xsent.atomic import check_outputs
from edge_xsent import Encoder
from edge_xsent.atomic import atomic_write
from edge_xsent.encode.bundle import load_model, write_manifest
from edge_xsent.layout import MANIFEST, ONNX_FP32, ONNX_INT8
from edge_xsent.config import INT8_WEIGHTS
from edge_xsent.data.corpus import Pair, read_corpus_split
from edge_xsent.eval.decisions import INT8_BASELINE, INT8_COSINE_TIE, INT8_P1_MAX_LOSS, INT8_SPEED_MIN_SHARE, int8_variant
from edge_xsent.eval.evaluate import average, row_cosines, xsr
from edge_xsent.export.exporter import projection_nodes, quantize_int8
from edge_xsent.failures import script_errors

RESULTS = ROOT / "benchmarks" / "results"
EDGE_CASES = ROOT / "tests" / "data" / "tokenizer_edge_cases.json"
DOMAINS = ("general", "software")
ROUNDS, SPEED_TEXTS = 5, 2000


def variant_folder(bundle: Path, out: Path, weights: str, keep_fp32: list[str]) -> dict:
    """A bundle: the files of `bundle` with its int8 model replaced by this variant's (TorchScript left out)."""
    shutil.copytree(bundle, out, ignore=shutil.ignore_patterns("torchscript", "model_int8.onnx", MANIFEST))
    settings = quantize_int8(bundle / ONNX_FP32, out / ONNX_INT8, keep_fp32, weights)
    write_manifest(out, {"quantization": {"int8": settings}})
    return settings


def test_pairs(data: Path) -> tuple[list[Pair], dict[str, list[Pair]]]:
    """The test split, read once: every pair in corpus order, and the pairs of each domain."""
    pairs = list(read_corpus_split(data / "test.tsv"))
    by_domain = {d: [p for p in pairs if p.domain == d] for d in DOMAINS}
    for domain, items in by_domain.items():
        if not items:
            raise SystemExit(f"{data}/test.tsv has no {domain} pairs: pass a corpus built with both domains (--data)")
    return pairs, by_domain


def texts(pairs: dict[str, list[Pair]], per_domain: int = 300) -> list[str]:
    rng = random.Random(0)
    out = json.loads(EDGE_CASES.read_text())["cases"]
    for domain in DOMAINS:
        out += [t for p in rng.sample(pairs[domain], min(per_domain // 2, len(pairs[domain]))) for t in (p.a, p.b)]
    return out


def cosines(vecs: np.ndarray, ref: np.ndarray) -> dict:
    cos = row_cosines(vecs, ref)
    return {"mean": float(cos.mean()), "min": float(cos.min()), "texts": len(cos)}


def browser_vectors(folder: Path, sample: list[str], tmp: Path) -> np.ndarray:
    prepare_copy = runpy.run_path(str(ROOT / "android_demo" / "prepare.py"))["prepare_copy"]

    web = tmp / "web"
    shutil.rmtree(web, ignore_errors=True)
    prepare_copy(folder, web)
    (tmp / "texts.json").write_text(json.dumps(sample, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(["node", "test/embed.mjs", "--root", str(web), "--texts", str(tmp / "texts.json"),
                           "--out", str(tmp / "vectors.json")], cwd=ROOT / "android_demo", capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"android_demo/test/embed.mjs failed:\n{done.stdout}{done.stderr}")
    return np.array(json.loads((tmp / "vectors.json").read_text())["vectors"], dtype=np.float32)


def parity(folders: dict[str, Path], sample: list[str], ref: np.ndarray, tmp: Path) -> dict[str, dict]:
    out = {}
    for name, folder in folders.items():
        enc = Encoder.load(folder, backend="onnx", precision="int8")
        out[name] = {"python batch 32": cosines(enc.encode(sample), ref),
                     "python batch 1": cosines(enc.encode(sample, batch_size=1), ref),
                     "browser (WASM)": cosines(browser_vectors(folder, sample, tmp), ref)}
    return out


def retrieval(folders: dict[str, Path], pairs: dict[str, list[Pair]]) -> dict[str, dict]:
    out = {}
    for name, folder in folders.items():
        enc = Encoder.load(folder, backend="onnx", precision="int8")
        out[name] = {d: 100 * average(xsr(pairs[d], lambda s: enc.encode(list(s)))) for d in DOMAINS}
        print(f"{name}: P@1 general {out[name]['general']:.2f}, software {out[name]['software']:.2f}", flush=True)
    return out


def speed(folders: dict[str, Path], sample: list[str]) -> dict[str, float]:
    """Median sentences/s at 1 thread, the variants taking turns in each round."""
    encoders = {k: Encoder.load(f, backend="onnx", precision="int8", threads=1) for k, f in folders.items()}
    for enc in encoders.values():
        enc.encode(sample[:256])
    rates: dict[str, list[float]] = {k: [] for k in encoders}
    for _ in range(ROUNDS):
        for name, enc in encoders.items():
            t = time.perf_counter()
            enc.encode(sample)
            rates[name].append(len(sample) / (time.perf_counter() - t))
    return {k: statistics.median(v) for k, v in rates.items()}


def measure(bundle: Path, data: Path, tmp: Path) -> dict:
    folders = {name: tmp / name for name in INT8_WEIGHTS}
    keep_fp32 = projection_nodes(bundle / ONNX_FP32, load_model(bundle)[0])
    settings = {name: variant_folder(bundle, folders[name], name, keep_fp32) for name in INT8_WEIGHTS}
    all_pairs, pairs = test_pairs(data)
    sample = texts(pairs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*were truncated")
        ref = Encoder.load(bundle, backend="torch").encode(sample)
        cos = parity(folders, sample, ref, tmp)
        p1 = retrieval(folders, pairs)
        speed_sample = [t for p in all_pairs for t in (p.a, p.b)]
        rates = speed(folders, random.Random(1).sample(speed_sample, min(SPEED_TEXTS, len(speed_sample))))
    rows = {name: {"settings": settings[name], "cosine": cos[name], **p1[name],
                   "worst_cosine": min(c["mean"] for c in cos[name].values()),
                   "sentences_per_s": rates[name], "int8_mb": (folders[name] / ONNX_INT8).stat().st_size / 2**20}
            for name in INT8_WEIGHTS}
    import onnxruntime

    return {"bundle": shown(bundle), "data": shown(data), "texts": len(sample), "date": time.strftime("%Y-%m-%d"),
            "onnxruntime": onnxruntime.__version__, "cpu": cpu_name(), "rows": rows, "choice": int8_variant(rows)}


def shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def cpu_name() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    vnni = any("vnni" in f for f in flags)
    return f"{name}, {'with' if vnni else 'without'} VNNI"


def report(res: dict) -> str:
    runtimes = list(next(iter(res["rows"].values()))["cosine"])
    lines = [f"# int8 variants of `{res['bundle']}`", "",
             f"`python benchmarks/int8_variants.py`, {res['date']}, onnxruntime {res['onnxruntime']}, {res['cpu']}. "
             f"Cosine to fp32 PyTorch, mean / min over {res['texts']} texts (edge cases + general + software test "
             f"sentences of `{res['data']}`); P@1 on the test splits; sentences/s at 1 thread, median of {ROUNDS} "
             "interleaved rounds.", "",
             "| variant | " + " | ".join(runtimes) + " | general P@1 | software P@1 | sentences/s | MB |",
             "|---|" + "---|" * (len(runtimes) + 4)]
    for name, r in res["rows"].items():
        cells = [f"{r['cosine'][k]['mean']:.5f} / {r['cosine'][k]['min']:.4f}" for k in runtimes]
        lines.append(f"| {name} | " + " | ".join(cells) +
                     f" | {r['general']:.2f} | {r['software']:.2f} | {r['sentences_per_s']:.0f} | {r['int8_mb']:.2f} |")
    lines += ["", f"Rule (`edge_xsent.eval.decisions.int8_variant`, fixed before the first run): the best worst-runtime mean "
              f"cosine among the variants whose general and software P@1 are each within {INT8_P1_MAX_LOSS} points of "
              f"{INT8_BASELINE}'s and whose speed is at least {INT8_SPEED_MIN_SHARE:.0%} of it; within "
              f"{INT8_COSINE_TIE} of the best cosine, the faster. **Choice: {res['choice']}.**", ""]
    return "\n".join(lines)


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help="a bundle exported with its fp32 graph (edge-xsent export MODEL --int8)")
    ap.add_argument("--data", type=Path, default=ROOT / "corpus-g", help="corpus folder with both domains' test split")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args()
    check_outputs([args.results / 'int8-variants.md', args.results / 'int8-variants.json'], inputs=[args.bundle, args.data])
    if not (args.bundle / ONNX_FP32).exists():
        raise SystemExit(f"{args.bundle / ONNX_FP32} missing: pass a full export (`edge-xsent export MODEL --int8`)")
    with tempfile.TemporaryDirectory() as tmp:
        res = measure(args.bundle.resolve(), args.data, Path(tmp))
    text = report(res)
    with atomic_write(args.results / "int8-variants.md") as f:
        f.write(text)
    with atomic_write(args.results / "int8-variants.json") as f:
        json.dump(res, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
