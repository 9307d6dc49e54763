"""The four Hugging Face stacks against edge-xsent on one exported folder (the parity table).

    python benchmarks/interop_parity.py [FOLDER]   # default: the fast model (int8 ONNX only)
    python benchmarks/interop_parity.py runs/general-scratch-32k/bundle   # the default's full export: fp32 ONNX too

Texts: the shared tokenizer edge-case suite + 300 sentences of the sample corpus's test split.
Per stack: token ids equal to SentencePiece's (where the stack exposes them) and the min and
mean cosine of its vectors against `Encoder.load(FOLDER)`'s (torch for the PyTorch stacks;
the same ONNX file, one text a time, for the ONNX stacks). Texts without tokens are left out of
the cosines (edge-xsent: zero vectors; see the README's "What differs"). optimum runs in
.venv-optimum and transformers.js with Node, as in tests/test_interop.py (.ci/run sets both up).
Writes benchmarks/results/interop-parity.{json,md}.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from edge_xsent import Encoder
from edge_xsent.atomic import atomic_write
from edge_xsent.layout import ONNX_FP32, ONNX_INT8
from edge_xsent.encode.hf import require, sentence_transformer, transformers_encode
from edge_xsent.encode.tokenizer import Tokenizer
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INPUT, Parser, Role, path_arg

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT = ROOT / "edge_xsent" / "resources" / "fast-model"
EDGE_CASES = ROOT / "tests" / "data" / "tokenizer_edge_cases.json"


def texts(n: int = 300) -> list[str]:
    import random

    lines = (ROOT / "edge_xsent/resources/sample-corpus/test.tsv").read_text(encoding="utf-8").splitlines()
    sample = [t for line in lines for t in line.split("\t")[3:5]]
    return read_json(EDGE_CASES, what="edge cases")["cases"] + random.Random(0).sample(sample, n)


def row_cosines(vecs: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Cosine of each row with the same row of `ref`, rows where `ref` is the zero vector (a text
    without tokens) left out: how closely one runtime's vectors follow another's."""
    keep = np.linalg.norm(ref, axis=1) > 0
    a, b = vecs[keep], ref[keep]
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def cosines(theirs: np.ndarray, ours: np.ndarray) -> dict:
    cos = row_cosines(theirs, ours)
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()), "texts": len(cos)}


def external(cmd: list[str], folder: Path, sample: list[str], precisions: list[str], jobs: bool) -> dict[str, dict]:
    """Each precision's ids and vectors from another stack; `jobs`: all of them from one process (optimum_vectors.py
    --jobs: one start of torch, transformers and optimum, not one a precision)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "texts.json"
        path.write_text(json.dumps(sample, ensure_ascii=False), encoding="utf-8")
        if jobs:
            (Path(tmp) / "jobs.json").write_text(json.dumps([[str(folder), str(path), p] for p in precisions]))
            outs = run_json([*cmd, "--jobs", str(Path(tmp) / "jobs.json")])
        else:
            outs = [run_json([*cmd, str(folder), str(path), p]) for p in precisions]
    return {p: {**out, "vectors": zero_filled(out["vectors"])} for p, out in zip(precisions, outs)}


def run_json(cmd: list[str]):
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout)


def zero_filled(vectors: list) -> np.ndarray:
    """A stack's vectors, a text without tokens (None) as zeros."""
    dim = len(next(v for v in vectors if v is not None))
    return np.array([v if v is not None else [0.0] * dim for v in vectors], dtype=np.float32)


def measure(folder: Path) -> dict:
    sample = texts()
    sp_ids = Tokenizer.load(folder / "tokenizer.model").encode(sample)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*were truncated")
        torch_vecs = Encoder.load(folder, backend="torch").encode(sample, normalize=False)
        onnx_vecs = {p: Encoder.load(folder, backend="onnx", precision=p).encode(sample, normalize=False, batch_size=1)
                     for p, f in (("fp32", ONNX_FP32), ("int8", ONNX_INT8)) if (folder / f).exists()}  # the package ships int8 only
    auto = require("transformers").AutoTokenizer.from_pretrained(str(folder))
    hf_ids = sum(auto(t, add_special_tokens=False)["input_ids"] == ids for t, ids in zip(sample, sp_ids))
    rows = {
        "sentence-transformers (PyTorch)": {**cosines(sentence_transformer(folder).encode(sample), torch_vecs),
                                            "ids_equal": hf_ids},
        "transformers AutoModel + pooling + Dense": {**cosines(transformers_encode(folder, sample), torch_vecs),
                                                     "ids_equal": hf_ids},
    }
    stacks = {"optimum ORTModelForFeatureExtraction":  # (command, takes --jobs)
              ([str(ROOT / ".venv-optimum/bin/python"), "export/interop/optimum_vectors.py"], True),
              "transformers.js pipeline (Node)": (["node", "export/interop/transformers_js.mjs"], False)}
    for name, (cmd, jobs) in stacks.items():
        for precision, out in external(cmd, folder, sample, list(onnx_vecs), jobs).items():
            rows[f"{name}, {precision}"] = {**cosines(out["vectors"], onnx_vecs[precision]),
                                            "ids_equal": sum(a == b for a, b in zip(out["ids"], sp_ids))}
    return {"folder": str(folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder), "texts": len(sample),
            "date": time.strftime("%Y-%m-%d"), "rows": rows}


def table(result: dict) -> str:
    lines = ["| stack | token ids equal SentencePiece's | min cosine | mean cosine |", "|---|---|---|---|"]
    for name, r in result["rows"].items():
        lines.append(f"| {name} | {r['ids_equal']} / {result['texts']} | {r['min_cosine']:.7f} | {r['mean_cosine']:.7f} |")
    return "\n".join(lines)


@user_errors
def main() -> None:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=path_arg(INPUT), nargs="?", default=DEFAULT)
    ap.add_argument("--results", type=path_arg(Role("into", derives=("interop-parity.md", "interop-parity.json"))), default=RESULTS, help="where interop-parity.{md,json} go")
    args = ap.parse_args()
    result = measure(args.folder.resolve())
    args.results.mkdir(parents=True, exist_ok=True)
    text = (f"# The bundle in four stacks\n\n`python benchmarks/interop_parity.py {result['folder']}`, {result['date']}: "
            f"{result['texts']} texts (the tokenizer edge-case suite + 300 sample sentences); cosines against "
            "`Encoder.load()` (torch for the PyTorch stacks; the same ONNX file one text a time for the ONNX stacks), "
            "texts without tokens left out.\n\n" + table(result) + "\n")
    with atomic_write(args.results / "interop-parity.md") as f:
        f.write(text)
    with atomic_write(args.results / "interop-parity.json") as f:
        json.dump(result, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
