"""optimum's side of tests/test_interop.py, run in the environment that has the `optimum` extra
(it pins transformers below 4.58, so CI keeps it in its own virtual environment,
.venv-optimum, beside the `hf` extra's transformers 5):

    .venv-optimum/bin/python export/interop/optimum_vectors.py MODEL_FOLDER TEXTS.json [fp32|int8]
    .venv-optimum/bin/python export/interop/optimum_vectors.py --jobs JOBS.json   # [[FOLDER, TEXTS, PRECISION], ...]

Prints JSON: the token ids of transformers' AutoTokenizer, the vectors of
ORTModelForFeatureExtraction + mean pooling (edge_xsent.encode.hf.ort_encode), and those of
sentence-transformers' ONNX backend on the folder as it lies (edge_xsent.encode.hf.st_onnx_model), each
text alone as the others (int8's dynamic scales see the whole batch). With --jobs, one JSON list for many
folders from one process (the suite's cases: one start of torch, transformers and optimum, not one each).
"""

from __future__ import annotations

import json
import sys

from edge_xsent.encode.hf import ort_encode, require, st_onnx_model


def vectors(folder: str, texts_file: str, precision: str = "fp32") -> dict:
    texts = json.loads(open(texts_file, encoding="utf-8").read())
    auto = require("transformers").AutoTokenizer.from_pretrained(folder)
    ids = [auto(t)["input_ids"] for t in texts]  # special tokens as users get them (a student's <s> ... </s>)
    pooled = ort_encode(folder, texts, precision, tokenizer=auto)
    st = st_onnx_model(folder, precision)
    st_vectors = [st.encode([t])[0].tolist() if ids[i] else None for i, t in enumerate(texts)]
    return {"ids": ids, "vectors": pooled.tolist(), "st_vectors": st_vectors,
            "transformers": require("transformers").__version__}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--jobs"]:
        print(json.dumps([vectors(*job) for job in json.loads(open(sys.argv[2], encoding="utf-8").read())]))
    else:
        print(json.dumps(vectors(*sys.argv[1:])))
