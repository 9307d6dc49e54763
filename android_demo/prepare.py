"""Fill android_demo/web/ with a model bundle, the onnxruntime-web runtime, tokenizers.js and the shared
test vectors (text -> token ids -> embedding from Python's onnxruntime), so that a static
file server is all the demo needs.

    python android_demo/prepare.py                 # the shipped default (Encoder.load()'s model)
    python android_demo/prepare.py BUNDLE          # a bundle from `edge-xsent export --int8`, or `fast`, `quality`
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from edge_xsent.layout import CALIBRATION, FILES, ONNX_INT8, TOKENIZER_CONFIG
from edge_xsent.encode.tokenizer import RULES_FILE
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import Parser

HERE = Path(__file__).resolve().parent
WEB = HERE / "web"
MODEL_FILES = [ONNX_INT8, FILES["tokenizer_json"], TOKENIZER_CONFIG, FILES["config"],  # -> web/model/
               CALIBRATION]  # int8 ranges: the page keeps its phrase index as int8 codes (web/compact.js)
VENDOR_FILES = [*(f"onnxruntime-web/dist/{n}" for n in ("ort.wasm.min.js", "ort-wasm-simd-threaded.wasm",
                                                            "ort-wasm-simd-threaded.mjs")),
                "@huggingface/tokenizers/dist/tokenizers.min.mjs"]
CASES = [
    "Save the current document", "Enregistrer le document actuel", "Das aktuelle Dokument speichern",
    "Guardar el documento actual", "Salva il documento corrente", "Ça marche très bien 🙂🙂 !",
    "  extra   spaces\tand\ttabs\n", "ﬁle ligature and Ｆｕｌｌｗｉｄｔｈ", "non\u00a0breaking space", "中文 字符",
    "control\x07char", "", "Öffnen Sie die Datei über Datei - Öffnen.", "word " * 100,
]
# The edge cases every tokenizer of a model must agree on (also run against `tokenizers` by tests/test_hf.py).
EDGE_CASES = HERE.parent / "tests" / "data" / "tokenizer_edge_cases.json"
if EDGE_CASES.exists():
    CASES += [t for t in read_json(EDGE_CASES, what="edge cases")["cases"] if t not in CASES]


def prepare(bundle: Path, web: Path = WEB, node_modules: Path = HERE / "node_modules", vendor: bool = True) -> dict:
    import numpy as np

    from edge_xsent import Encoder

    from edge_xsent.encode import compact

    for name in MODEL_FILES:
        if not (bundle / name).exists():
            raise SystemExit(f"{bundle / name} missing: export with `edge-xsent export MODEL --int8`")
    model_dir = web / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES + [RULES_FILE] * (bundle / RULES_FILE).exists():  # a student's tokenizer rules
        shutil.copy2(bundle / name, model_dir / Path(name).name)
    for src in VENDOR_FILES if vendor else []:
        if not (node_modules / src).exists():
            raise SystemExit(f"{node_modules / src} missing: run `npm ci` in android_demo/")
        (web / "vendor").mkdir(parents=True, exist_ok=True)
        shutil.copy2(node_modules / src, web / "vendor" / Path(src).name)
    enc = Encoder.load(bundle, backend="onnx", precision="int8", threads=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = []
        for t in CASES:
            vec = np.round(enc.encode(t), 6).astype(np.float32)  # as written to the JSON, so codes match it
            cases.append({"text": t, "ids": enc.tokenize([t])[0], "embedding": [float(x) for x in vec],
                          "int8": compact.to_int8(vec[None], enc.ranges)[0].tolist()})
    vectors = {"model": str(bundle), "backend": "python onnxruntime int8", "cases": cases}
    (model_dir / "testvectors.json").write_text(json.dumps(vectors, ensure_ascii=False))
    return vectors


def prepare_copy(bundle: Path, web: Path) -> dict:
    """A fresh copy of the app at `web` (the shell without web/'s model and vendor files), filled
    with `bundle`: for tests and benchmarks that must not touch android_demo/web/."""
    shutil.copytree(WEB, web, ignore=shutil.ignore_patterns("model", "vendor"))
    return prepare(bundle, web=web)


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", nargs="?", default="default",
                    help="a bundle folder, or a shipped model's name (default, fast, quality); default: the default")
    args = ap.parse_args()
    from edge_xsent.encode.encoder import named_model

    v = prepare(named_model(args.bundle) or Path(args.bundle))
    print(f"web/model/: int8 model, tokenizer, {len(v['cases'])} test vectors; web/vendor/: onnxruntime-web, tokenizers.js")


if __name__ == "__main__":
    main()
