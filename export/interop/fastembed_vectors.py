"""What a fastembed user writes to load an edge-xsent model folder (tests/test_interop.py runs it in
.venv-optimum, where the `fastembed` extra is installed):

    python export/interop/fastembed_vectors.py MODEL_FOLDER TEXTS.json [fp32|int8]

Prints JSON: fastembed's vectors. The graph's first output, `sentence_embedding`, is already
mean-pooled (and projected), so fastembed must not pool it again: PoolingType.DISABLED.
"""

from __future__ import annotations

import json
import sys

FILES = {"fp32": "onnx/model.onnx", "int8": "onnx/model_int8.onnx"}


def main(folder: str, texts_file: str, precision: str = "int8") -> None:
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    texts = json.loads(open(texts_file, encoding="utf-8").read())
    dim = json.loads(open(f"{folder}/config.json", encoding="utf-8").read())["hidden_size"]
    name = f"edge-xsent/local-{precision}"
    TextEmbedding.add_custom_model(model=name, pooling=PoolingType.DISABLED, normalization=True,
                                   sources=ModelSource(hf=name), dim=dim, model_file=FILES[precision])
    model = TextEmbedding(model_name=name, specific_model_path=folder, threads=1)  # a local folder: no download
    vectors = [v.tolist() for v in model.embed(texts, batch_size=32)]
    print(json.dumps({"vectors": vectors}))


if __name__ == "__main__":
    main(*sys.argv[1:])
