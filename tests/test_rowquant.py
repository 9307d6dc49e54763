"""Per-row int8 activations (edge_xsent/export/rowquant.py): a text's int8 vector is the same alone and in any batch, and
onnxruntime's optimisations do not change what the graph computes."""

import json
import shutil

import numpy as np
import onnx
import pytest

from edge_xsent import Encoder
from edge_xsent.encode.tokenizer import pad_batch
from edge_xsent.errors import UserError
from edge_xsent.export.exporter import export_bundle, quantize_int8
from edge_xsent.layout import MANIFEST, ONNX_FP32, ONNX_INT8
from edge_xsent.export.rowquant import rewrite_per_row

SHORT = ["Open the file", "Ouvrir le fichier", "x", "Guardar el documento actual"]
# Long, mixed-script lines whose activations set a per-tensor scale that coarsens the short ones.
LONG = ["ÇA MARCHE 🙂 — très bien!!! 1234567890 " * 2, "Die Katze schläft auf dem Sofa, weil es draußen regnet."]


def int8_encoder(bundle, tmp_path, activations: str) -> Encoder:
    """The bundle with its int8 graph requantised from its fp32 graph."""
    out = tmp_path / activations
    shutil.copytree(bundle, out)
    quantize_int8(bundle / ONNX_FP32, out / ONNX_INT8, activations=activations)
    return Encoder.load(out, backend="onnx", precision="int8", verify=False)  # the manifest names the old graph


def alone_and_batched(enc: Encoder) -> tuple[np.ndarray, np.ndarray]:
    alone = enc.encode(SHORT, batch_size=1)
    batched = enc.encode(SHORT + LONG, batch_size=len(SHORT + LONG))[:len(SHORT)]
    return alone, batched


def test_per_row_vectors_do_not_depend_on_the_batch(tiny_bundle, tmp_path):
    bundle, _ = tiny_bundle
    per_tensor = alone_and_batched(int8_encoder(bundle, tmp_path, "per-tensor"))
    per_row = alone_and_batched(int8_encoder(bundle, tmp_path, "per-row"))
    assert np.abs(per_tensor[0] - per_tensor[1]).max() > 1e-4  # the control: one scale for the batch moves them
    np.testing.assert_allclose(per_row[0], per_row[1], atol=2e-6)
    fp32 = Encoder.load(bundle, backend="onnx", precision="fp32").encode(SHORT, batch_size=1)
    assert (per_row[0] * fp32).sum(1).min() >= 0.99


def session_outputs(path, optimised: bool, feeds: dict) -> list:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if not optimised:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_onnxruntime_fusions_compute_the_same(tiny_bundle, tmp_path):
    """Written as Mul(a_scale, b_scale), onnxruntime fused the graph into MatMulIntegerToFloat, which reads the
    per-row scale as one number (a student's fp32 parity fell from 0.9989 to 0.970)."""
    bundle, _ = tiny_bundle
    graph = tmp_path / "per-row.onnx"
    quantize_int8(bundle / ONNX_FP32, graph, activations="per-row")
    ids, mask = pad_batch(Encoder.load(bundle, backend="onnx", precision="fp32").tokenize(SHORT + LONG))
    feeds = {"input_ids": ids, "attention_mask": mask}
    fused, plain = session_outputs(graph, True, feeds), session_outputs(graph, False, feeds)
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, atol=1e-5)
    kinds = {n.op_type for n in onnx.load(str(graph)).graph.node}
    assert "MatMulInteger" in kinds and "DynamicQuantizeLinear" not in kinds


def test_the_choice_reaches_the_manifest_and_bad_ones_are_refused(tiny_model, tiny_bundle, tmp_path):
    parity = export_bundle(tiny_model, tmp_path / "b", torchscript=False, parity_pairs=20, int8_activations="per-row")
    manifest = json.loads((tmp_path / "b" / MANIFEST).read_text())
    assert manifest["quantization"]["int8"]["activations"]["activations"] == "per-row"
    assert manifest["quantization"]["int8"]["activations"]["matmuls"] == 4  # 1 layer: QKV, out, FFN in, FFN out
    assert parity["formats"]["onnx-int8"]["cosine_mean"] >= 0.99
    with pytest.raises(UserError, match="unknown int8 activations 'per-token'; choose from per-tensor, per-row"):
        quantize_int8(tiny_bundle[0] / ONNX_FP32, tmp_path / "x.onnx", activations="per-token")
    with pytest.raises(UserError, match="--int8-activations per-row shapes the int8 graph; leave out --no-int8"):
        export_bundle(tiny_model, tmp_path / "c", int8=False, int8_activations="per-row")
    with pytest.raises(ValueError, match="no DynamicQuantizeLinear to rewrite"):
        fp32 = tmp_path / "fp32.onnx"
        shutil.copy(tiny_bundle[0] / ONNX_FP32, fp32)
        rewrite_per_row(fp32)
