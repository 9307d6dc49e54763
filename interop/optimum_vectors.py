"""optimum's side of tests/test_interop.py, run in the environment that has the `optimum` extra
(it pins transformers below 4.58, so CI keeps it in its own virtual environment,
.venv-optimum, beside the `hf` extra's transformers 5):

    .venv-optimum/bin/python interop/optimum_vectors.py MODEL_FOLDER TEXTS.json [fp32|int8]

Prints JSON: the token ids of transformers' AutoTokenizer and the vectors of
ORTModelForFeatureExtraction + mean pooling (edge_xsent.hf.ort_encode).
"""

from __future__ import annotations

import json
import sys

from edge_xsent.hf import ort_encode, require


def main(folder: str, texts_file: str, precision: str = "fp32") -> None:
    texts = json.loads(open(texts_file, encoding="utf-8").read())
    auto = require("transformers").AutoTokenizer.from_pretrained(folder)
    ids = [auto(t, add_special_tokens=False)["input_ids"] for t in texts]
    vectors = ort_encode(folder, texts, precision)
    print(json.dumps({"ids": ids, "vectors": vectors.tolist(), "transformers": require("transformers").__version__}))


if __name__ == "__main__":
    main(*sys.argv[1:])
