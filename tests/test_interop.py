"""An exported bundle in the ONNX stacks (issue 19): the graph's token-level output pools to its
sentence vector, and optimum (ORTModelForFeatureExtraction) and transformers.js
(pipeline('feature-extraction'), Node) give edge-xsent's token ids and vectors.

`.ci/run` installs both: optimum in .venv-optimum (it pins transformers below 4.58, beside
the `hf` extra's transformers 5), transformers.js with `npm ci` in export/interop/. Elsewhere those two
tests skip when they are missing; in CI they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import ROOT
from edge_xsent import Encoder
from edge_xsent.encode.tokenizer import pad_batch
from edge_xsent.layout import ONNX_FP32, ONNX_INT8
from edge_xsent.errors import UserError
from edge_xsent.encode.tokenizer import UNK_ID, Tokenizer

sys.path.insert(0, str(ROOT / "tests"))
from test_hf import EDGE_CASES, min_cosine, sample_sentences  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*were truncated:UserWarning")
OPTIMUM_PYTHON = Path(os.environ.get("EDGE_XSENT_OPTIMUM_PYTHON", ROOT / ".venv-optimum/bin/python"))
TRANSFORMERS_JS = ROOT / "export/interop/node_modules/@huggingface/transformers"
FP32_MIN, INT8_MIN = 0.99999, 0.9995  # the parity bars
# A student's int8 graph in a stack that runs onnxruntime's SkipLayerNormFusion (edge-xsent leaves it off:
# encoder.ORT_DISABLED): e5's large activations move its vectors to cosine 0.9977 at worst on the shared texts.
STUDENT_INT8_MIN = 0.997
DEFAULT = ROOT / "edge_xsent/resources/default-model"  # what Encoder.load() runs: a student
# The package ships the default's int8 graph only (a student: e5's tokenizer, a tiered table, static activations:
# every piece kept, 30,000 rows at 4 bits, the rest at 1 bit; the suite's own tiered student, built as the default was,
# runs in the page and the JVM, whose runtimes differ, and in onnxruntime in test_tiered_table). "per-row": a tiny
# model in the form a student ships in (4-bit token table, int8 activations scaled per row); "student": e5-small's
# block 0 as a student (e5's tokenizer and rules, a table cut to 1,000 rows).
CASES = [("tiny", "fp32"), ("tiny", "int8"), ("per-row", "int8"), ("default", "int8"), ("student", "int8")]
FIXTURES = {"tiny": "tiny_debiased_bundle", "per-row": "tiny_bundle_per_row", "student": "tiny_student_bundle"}


def folder_of(which: str, request: pytest.FixtureRequest) -> Path:
    return DEFAULT if which == "default" else request.getfixturevalue(FIXTURES[which])


def texts() -> list[str]:
    return EDGE_CASES + sample_sentences(60)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_token_states_mean_pool_to_the_sentence_vector(tiny_debiased_bundle, precision):
    folder = tiny_debiased_bundle
    sess = ort.InferenceSession(str(folder / (ONNX_FP32 if precision == "fp32" else ONNX_INT8)))
    max_len = json.loads((folder / "config.json").read_text())["model"]["max_len"]
    ids, mask = pad_batch([x[:max_len] for x in Tokenizer.load(folder / "tokenizer.model").encode(sample_sentences(16))])
    vectors, states = sess.run(["sentence_embedding", "last_hidden_state"], {"input_ids": ids, "attention_mask": mask})
    m = mask[:, :, None].astype(np.float32)
    np.testing.assert_allclose((states * m).sum(1) / m.sum(1), vectors, atol=1e-5)


def test_int8_leaves_the_language_projection_in_fp32(tiny_debiased_bundle):
    graph = onnx.load(str(tiny_debiased_bundle / ONNX_INT8)).graph
    manifest = json.loads((tiny_debiased_bundle / "manifest.json").read_text())
    kept = manifest["quantization"]["int8"]["fp32_nodes"]
    assert len(kept) == 2  # h @ B^T, then @ B
    ops = {n.name: n.op_type for n in graph.node}
    assert all(ops[name] == "MatMul" for name in kept)
    assert any(op == "MatMulInteger" for op in ops.values())  # everything else is quantised


def compare(folder: Path, out: dict, precision: str, byte_fallback: bool = True) -> None:
    """Their ids equal SentencePiece's on every text; their vectors match Encoder.load(folder)'s,
    computed one text a time as theirs are (int8's dynamic scales depend on the batch).
    `byte_fallback=False`: a stack that ignores it (transformers.js: huggingface/tokenizers.js#26) gives
    one <unk> where SentencePiece gives a run of byte pieces, as docs/model-folder.md says; those
    texts' vectors are left out."""
    sample = texts()
    sp = Tokenizer.load(folder / "tokenizer.model")
    expected = sp.encode(sample) if byte_fallback else [bytes_as_unk(sp, ids) for ids in sp.encode(sample)]
    unlike = [i for i, ids in enumerate(sp.encode(sample)) if ids != expected[i]]
    unlike += student_differences(sp, sample, approximated=not byte_fallback)
    wrong = [(t, a, b) for i, (t, a, b) in enumerate(zip(sample, out["ids"], expected)) if a != b and i not in unlike]
    assert not wrong, wrong[:3]
    ours = Encoder.load(folder, backend="onnx", precision=precision).encode(sample, normalize=False, batch_size=1)
    empty = [i for i, ids in enumerate(out["ids"]) if not ids]
    assert empty or sp.rules  # the suite has empty and whitespace-only texts (a student's tokenizer.json reads them)
    assert not np.abs(ours[empty]).any()  # edge-xsent: a zero vector; theirs: documented in the README
    assert byte_fallback or not sp.byte_fallback or unlike  # the suite has characters outside the vocabulary
    real = [i for i in range(len(sample)) if i not in empty and i not in unlike]
    theirs = np.array([out["vectors"][i] for i in real], dtype=np.float32)
    assert min_cosine(theirs, ours[real]) >= (FP32_MIN if precision == "fp32" else STUDENT_INT8_MIN if sp.rules else INT8_MIN)


def student_differences(sp: Tokenizer, sample: list[str], approximated: bool) -> list[int]:
    """Where a student's tokenizer.json cannot give edge-xsent's ids, as docs/model-folder.md says: a blank text
    (no tokens in edge-xsent, `<s> passage: </s>` there) and, with `approximated` (transformers.js reads e5's
    precompiled map as NFKC), each text that NFKC normalises otherwise than e5's per-character map."""
    if sp.rules is None:
        return []
    import unicodedata

    def nfkc(text: str) -> str:  # transformers.js' Precompiled normaliser, as it is written
        text = re.sub("[\u0001-\u0008\u000b\u000e-\u001f\u007f\u008f\u009f]", "", text)
        text = re.sub("[\u0009\u000a\u000c\u000d\u00a0\u1680\u2000-\u200f\u2028\u2029\u202f\u205f\u2581\u3000\ufeff\ufffd]",
                      " ", text)
        return "\uff5e".join(unicodedata.normalize("NFKC", p) for p in text.split("\uff5e"))

    prefix = sp.rules.prefix
    return [i for i, t in enumerate(sample) if not sp.encode([t])[0] or approximated and
            sp.rules.normalize(t) != re.sub(" {2,}", " ", nfkc(prefix + t))]


def bytes_as_unk(sp: Tokenizer, ids: list[int]) -> list[int]:
    """SentencePiece's ids with each run of byte pieces fused into one <unk>."""
    out: list[int] = []
    for i in ids:
        if sp.sp.is_byte(i):
            i = UNK_ID
        if not (i == UNK_ID and out and out[-1] == UNK_ID):
            out.append(i)
    return out


def write_texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(texts(), ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def optimum_out(request, tmp_path_factory) -> dict[str, dict]:
    """optimum_vectors.py on every case's folder, from one process started once per run (torch, transformers and
    optimum take seconds to import): {"which-precision": its output}."""
    from conftest import built_once

    def build(tmp: Path) -> dict:
        texts_file = str(write_texts(tmp))
        jobs = [[str(folder_of(w, request)), texts_file, p] for w, p in CASES]
        (tmp / "jobs.json").write_text(json.dumps(jobs))
        res = subprocess.run([str(OPTIMUM_PYTHON), "export/interop/optimum_vectors.py", "--jobs", str(tmp / "jobs.json")],
                             cwd=ROOT, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]
        return {f"{w}-{p}": out for (w, p), out in zip(CASES, json.loads(res.stdout))}

    return built_once(tmp_path_factory, "optimum-vectors", build)[1]


@pytest.mark.slow
@pytest.mark.skipif(not OPTIMUM_PYTHON.exists() and not os.environ.get("CI"),
                    reason="needs the `optimum` extra in .venv-optimum (see .ci/run)")
@pytest.mark.parametrize("which,precision", CASES)
def test_optimum_gives_the_encoder_vectors(request, optimum_out, which, precision):
    folder = folder_of(which, request)
    out = optimum_out[f"{which}-{precision}"]
    assert out["transformers"].startswith("4.")  # optimum's own transformers, not the hf extra's
    compare(folder, out, precision)
    sp = Tokenizer.load(folder / "tokenizer.model")
    differ = student_differences(sp, texts(), approximated=False)
    real = [i for i, v in enumerate(out["st_vectors"]) if v is not None and i not in differ]  # the folder as it lies
    ours = Encoder.load(folder, backend="onnx", precision=precision).encode([texts()[i] for i in real], batch_size=1)
    assert min_cosine(np.array([out["st_vectors"][i] for i in real], dtype=np.float32), ours) >= \
        (STUDENT_INT8_MIN if sp.rules else 0.999)


def fastembed_ready() -> bool:
    return OPTIMUM_PYTHON.exists() and subprocess.run([str(OPTIMUM_PYTHON), "-c", "import fastembed"],
                                                      capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("CI") and not fastembed_ready(),
                    reason="needs the `fastembed` extra in .venv-optimum (see .ci/run)")
@pytest.mark.parametrize("which,precision", CASES)
def test_fastembed_gives_the_encoder_vectors(request, tmp_path, which, precision):
    """fastembed's TextEmbedding on a local folder, pooling DISABLED (the graph's output is pooled already)."""
    folder = folder_of(which, request)
    res = subprocess.run([str(OPTIMUM_PYTHON), "export/interop/fastembed_vectors.py", str(folder), str(write_texts(tmp_path)),
                          precision], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = np.array(json.loads(res.stdout)["vectors"], dtype=np.float32)
    sample = texts()
    ours = Encoder.load(folder, backend="onnx", precision=precision).encode(sample, batch_size=1)
    sp = Tokenizer.load(folder / "tokenizer.model")
    real = [i for i in range(len(sample)) if ours[i].any() and i not in student_differences(sp, sample, False)]
    blank = [i for i in range(len(sample)) if not ours[i].any()]
    assert len(real) < len(sample) and (sp.rules or not np.abs(theirs[blank]).any())  # a student's: docs/model-folder.md
    assert min_cosine(theirs[real], ours[real]) >= (FP32_MIN if precision == "fp32" else STUDENT_INT8_MIN if sp.rules else INT8_MIN)


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("node") and TRANSFORMERS_JS.exists()) and not os.environ.get("CI"),
                    reason="needs node and `npm ci` in export/interop/")
@pytest.mark.parametrize("which,precision", CASES)
def test_transformers_js_gives_the_encoder_vectors(request, tmp_path, which, precision):
    folder = folder_of(which, request)
    res = subprocess.run(["node", "export/interop/transformers_js.mjs", str(folder), str(write_texts(tmp_path)), precision],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert [i for i, v in enumerate(out["vectors"]) if v is None] == [i for i, ids in enumerate(out["ids"]) if not ids]
    compare(folder, out, precision, byte_fallback=False)


def test_missing_stack_names_its_extra(monkeypatch):
    from edge_xsent.encode import hf

    with pytest.raises(UserError, match="precision 'int4'"):
        hf.ort_encode(DEFAULT, ["Hello"], "int4")

    monkeypatch.setitem(sys.modules, "optimum.onnxruntime", None)  # import fails as if not installed
    with pytest.raises(UserError, match=r'pip install "edge-xsent\[optimum\]"'):
        hf.ort_encode(ROOT / "edge_xsent/resources/fast-model", ["Hello"])
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(UserError, match=r'pip install "edge-xsent\[hf\]"'):
        hf.sentence_transformer(ROOT / "edge_xsent/resources/fast-model")
