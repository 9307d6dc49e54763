"""A student's bundle in every stack the default is parity-tested in (tests/test_hf.py, test_interop.py,
test_demo.py run the same checks on the tiny and shipped folders): tokenizers' ids, sentence-transformers,
optimum, transformers.js, fastembed and the Android app's JVM code. Prints one line a stack; a stack that is
missing here (the `hf` extra, .venv-optimum, export/interop/node_modules, mvn) says so.

    python studies/pruned-student/interop.py BUNDLE
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "android_demo"), str(ROOT)]
from test_hf import EDGE_CASES, min_cosine, sample_sentences  # noqa: E402
from test_interop import INT8_MIN, OPTIMUM_PYTHON, compare, texts  # noqa: E402

from edge_xsent import Encoder  # noqa: E402
from edge_xsent.encode.tokenizer import Tokenizer  # noqa: E402


def hugging_face(folder: Path) -> list[str]:
    import sentence_transformers
    import tokenizers

    sp, hf = Tokenizer.load(folder / "tokenizer.model"), tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    sample = EDGE_CASES + sample_sentences()
    wrong = [t for t in sample if sp.encode([t])[0] != hf.encode(t).ids]
    sample = sample_sentences(64) + EDGE_CASES
    ours = Encoder.load(folder, backend="torch").encode(sample, normalize=False)
    theirs = sentence_transformers.SentenceTransformer(str(folder), device="cpu").encode(sample)
    real = np.linalg.norm(ours, axis=1) > 0
    return [f"tokenizers: {len(wrong)} of {len(EDGE_CASES) + len(sample_sentences())} texts with other ids than SentencePiece",
            f"sentence-transformers: min cosine {min_cosine(theirs[real], ours[real]):.6f} to Encoder (torch)"]


def onnx_stacks(folder: Path, work: Path) -> list[str]:
    """optimum and transformers.js compared as the suite compares them; fastembed's vectors (it batches 32 texts,
    which moves an int8 graph's dynamic scales: batch.py) against each text encoded alone."""
    sample = work / "texts.json"
    sample.write_text(json.dumps(texts(), ensure_ascii=False), encoding="utf-8")
    lines = []
    for name, cmd in [("optimum", [str(OPTIMUM_PYTHON), "export/interop/optimum_vectors.py"]),
                      ("transformers.js", ["node", "export/interop/transformers_js.mjs"]),
                      ("fastembed", [str(OPTIMUM_PYTHON), "export/interop/fastembed_vectors.py"])]:
        res = subprocess.run([*cmd, str(folder), str(sample), "int8"], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if res.returncode:
            lines.append(f"{name}: failed: {res.stderr.strip().splitlines()[-1:]}")
            continue
        out = json.loads(res.stdout)
        if name == "fastembed":
            ours = Encoder.load(folder, backend="onnx", precision="int8").encode(texts(), batch_size=1)
            real = [i for i in range(len(ours)) if ours[i].any()]
            theirs = np.array(out["vectors"], dtype=np.float32)[real]
            lines.append(f"fastembed: min cosine {min_cosine(theirs, ours[real]):.4f} (the suite's bar: {INT8_MIN})")
            continue
        try:
            compare(folder, out, "int8", byte_fallback=name != "transformers.js")
            lines.append(f"{name}: ids as SentencePiece's, vectors within cosine {INT8_MIN}")
        except AssertionError as e:
            lines.append(f"{name}: differs: {str(e)[:300]}")
    return lines


def jvm(folder: Path, work: Path) -> str:
    from prepare import prepare

    web = work / "web"
    (web / "model").mkdir(parents=True)
    prepare(folder, web=web, vendor=False)
    shutil.copytree(ROOT / "android_demo/jvm", work / "jvm", ignore=shutil.ignore_patterns("target"))
    res = subprocess.run(["mvn", "-o", "-q", "test", f"-Dvectors={web / 'model' / 'testvectors.json'}"], cwd=work / "jvm",
                         capture_output=True, text=True, timeout=900)
    report = work / "jvm/target/surefire-reports/dev.edgexsent.SharedVectorsTest.txt"
    summary = [line for line in report.read_text().splitlines() if line.startswith("Tests run")] if report.exists() else []
    return f"JVM (Android app's code): {summary[0] if summary else 'no report, exit ' + str(res.returncode)}"


def main() -> None:
    folder = Path(sys.argv[1]).expanduser()
    work = Path(tempfile.mkdtemp())
    checks = [lambda: hugging_face(folder), lambda: onnx_stacks(folder, work), lambda: [jvm(folder, work)]]
    for check in checks:
        try:
            lines = check()
        except (ImportError, FileNotFoundError) as e:
            lines = [f"skipped: {e}"]
        print("\n".join(lines), flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
