# fastembed on the shipped model folder, offline (README, "Using the model folder elsewhere"); run from the repository root:
#   HF_HUB_OFFLINE=1 python export/interop/fastembed_example.py      (pip install "edge-xsent[fastembed]")
# The graph already pools, so fastembed must not: PoolingType.DISABLED (MEAN would pool the pooled vector).
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType

TextEmbedding.add_custom_model(model="edge-xsent/default", pooling=PoolingType.DISABLED, normalization=True,
                               sources=ModelSource(hf="edge-xsent/default"), dim=256, model_file="onnx/model_int8.onnx")
model = TextEmbedding("edge-xsent/default", specific_model_path="edge_xsent/resources/fast-model")
a, b = model.embed(["Save the current document", "Enregistrer le document actuel"])
print(len(a), round(float(a @ b), 3))
