"""The demo's latency: one short sentence embedded in headless Chromium (onnxruntime-web, WASM)
against Python's onnxruntime on the same machine, one thread each, medians after warm-up.

    python benchmarks/demo_latency.py [BUNDLE]      # default: the `default` model's folder

Writes benchmarks/results/demo-latency.{md,json} and demo-screenshot.png. Needs `npm ci` in
android_demo/ and Debian's chromium (the same as the demo's browser test).
"""

from __future__ import annotations

import argparse
import json
import runpy
import subprocess
import tempfile
import time
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INPUT, Parser, Role, path_arg

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "Save the current document"
REPEATS = 50


def python_medians(bundle: Path) -> tuple[float, float, int]:
    """Median ms of the model alone (`Encoder.embed_ids`) and of `encode` (tokenizer + model + normalise)."""
    from edge_xsent import Encoder
    from edge_xsent.train.bench import timed
    from edge_xsent.encode.tokenizer import pad_batch

    enc = Encoder.load(bundle, backend="onnx", precision="int8", threads=1)
    ids, mask = pad_batch(enc.tokenize([SENTENCE]))

    def median_ms(fn) -> float:
        return timed(fn, REPEATS, warmup=10)["p50_ms"]

    return median_ms(lambda: enc.embed_ids(ids, mask)), median_ms(lambda: enc.encode(SENTENCE)), int(mask.sum())


def browser_run(bundle: Path, results: Path, expect_related: bool = True) -> dict:
    prepare_copy = runpy.run_path(str(ROOT / "android_demo" / "prepare.py"))["prepare_copy"]

    with tempfile.TemporaryDirectory() as tmp:
        web = Path(tmp) / "web"
        prepare_copy(bundle, web)
        out = Path(tmp) / "browser.json"
        done = subprocess.run(["node", "test/browser.test.mjs", "--root", str(web), "--results", str(out),
                               "--screenshot", str(results / "demo-screenshot.png"),
                               *(["--expect-related"] if expect_related else [])],
                              cwd=ROOT / "android_demo", capture_output=True, text=True)
        print(done.stdout, end="")
        if done.returncode != 0:
            raise SystemExit(f"the browser test failed:\n{done.stdout}{done.stderr}")
        return read_json(out, what="the page's results")


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=path_arg(INPUT), nargs="?", default=ROOT / "edge_xsent/resources/default-model")
    ap.add_argument("--results", type=path_arg(Role("into", derives=("demo-latency.json", "demo-latency.md"))), default=ROOT / "benchmarks/results")
    ap.add_argument("--no-quality-check", action="store_true",
                    help="an untrained model: do not require the translation to score above the unrelated sentence")
    args = ap.parse_args()
    browser = browser_run(args.bundle, args.results, expect_related=not args.no_quality_check)
    model_ms, encode_ms, tokens = python_medians(args.bundle)
    browser_version = subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout
    browser_version = " ".join(browser_version.split()[:2])  # "Chromium 156.0..."
    import onnxruntime

    res = {"model": str(args.bundle.relative_to(ROOT) if args.bundle.is_relative_to(ROOT) else args.bundle),
           "sentence": SENTENCE, "tokens": tokens, "repeats": REPEATS,
           "browser_wasm_median_ms": browser["median_ms"], "browser_page_load_ms": browser.get("load_ms"), "python_onnxruntime_model_median_ms": model_ms,
           "python_encode_median_ms": encode_ms, "browser_related": browser["related"],
           "browser_unrelated": browser["unrelated"], "browser": browser_version,
           "onnxruntime": onnxruntime.__version__}
    md = ["# Demo latency: in the browser vs Python", "",
          f"Model `{res['model']}` (int8 ONNX), sentence \"{SENTENCE}\" ({tokens} tokens), one thread, medians of "
          f"{REPEATS} after warm-up, same machine, one run (`python benchmarks/demo_latency.py`, {time.strftime('%Y-%m-%d')}):", "",
          "| where | median (ms) |", "|---|---|",
          f"| headless {browser_version}, Pixel 7 profile, onnxruntime-web WASM (tokenizer + model + normalise, "
          f"`android_demo/test/browser.test.mjs`) | {browser['median_ms']:.2f} |",
          f"| the page's load in that browser, from the local server to ready (the graph, the tokenizer, the runtime) | "
          f"{browser['load_ms']:.0f} |",
          f"| Python onnxruntime {onnxruntime.__version__}, model only (`Encoder.embed_ids`) | {model_ms:.2f} |",
          f"| Python `Encoder.encode` (tokenizer + model + normalise) | {encode_ms:.2f} |", "",
          f"In the page: \"Print the selected pages\" vs its French translation {browser['related']:.3f}, vs an "
          f"unrelated French sentence {browser['unrelated']:.3f}. Screenshot: `demo-screenshot.png`.", ""]
    with atomic_write(args.results / "demo-latency.json") as f:
        f.write(json.dumps(res, indent=2) + "\n")
    with atomic_write(args.results / "demo-latency.md") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
