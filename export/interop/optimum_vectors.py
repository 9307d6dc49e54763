"""optimum's side of tests/test_interop.py, run in the environment that has the `optimum` extra
(it pins transformers below 4.58, so CI keeps it in its own virtual environment,
.venv-optimum, beside the `hf` extra's transformers 5):

    .venv-optimum/bin/python export/interop/optimum_vectors.py MODEL_FOLDER TEXTS.json [fp32|int8]

Prints JSON: the token ids of transformers' AutoTokenizer, the vectors of
ORTModelForFeatureExtraction + mean pooling (edge_xsent.encode.hf.ort_encode), and those of
sentence-transformers' ONNX backend on the folder as it lies (edge_xsent.encode.hf.st_onnx_model), each
text alone as the others (int8's dynamic scales see the whole batch).
"""

from __future__ import annotations

import json
import sys

from edge_xsent.encode.hf import ort_encode, require, st_onnx_model


def main(folder: str, texts_file: str, precision: str = "fp32") -> None:
    texts = json.loads(open(texts_file, encoding="utf-8").read())
    auto = require("transformers").AutoTokenizer.from_pretrained(folder)
    ids = [auto(t)["input_ids"] for t in texts]  # special tokens as users get them (a student's <s> ... </s>)
    vectors = ort_encode(folder, texts, precision)
    st = st_onnx_model(folder, precision)
    st_vectors = [st.encode([t])[0].tolist() if ids[i] else None for i, t in enumerate(texts)]
    print(json.dumps({"ids": ids, "vectors": vectors.tolist(), "st_vectors": st_vectors,
                      "transformers": require("transformers").__version__}))


if __name__ == "__main__":
    main(*sys.argv[1:])
