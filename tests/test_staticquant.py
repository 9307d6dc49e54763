"""Static int8 activations, the first position apart (edge_xsent/export/staticquant.py): a text's vector is the same
alone and in any batch, the graph holds the export's parity, and onnxruntime's fusions do not change what it computes."""

import json
import shutil

import numpy as np
import onnx
import pytest

from edge_xsent import Encoder
from edge_xsent.encode.tokenizer import pad_batch
from edge_xsent.errors import UserError
from edge_xsent.export.exporter import export_bundle, quantize_int8, recorded_int8
from edge_xsent.export.staticquant import calibration_batches
from edge_xsent.layout import MANIFEST, ONNX_FP32, ONNX_INT8
from tests.test_rowquant import LONG, SHORT, alone_and_batched, session_outputs


@pytest.fixture(scope="module")
def static_graph(tiny_bundle, tmp_path_factory):
    """The tiny bundle with its int8 graph made again with static activations."""
    out = tmp_path_factory.mktemp("static") / "bundle"
    shutil.copytree(tiny_bundle[0], out)
    settings = quantize_int8(out / ONNX_FP32, out / ONNX_INT8, activations="static",
                             calibration=calibration_batches(out))
    return out, settings


def test_static_vectors_do_not_depend_on_the_batch_and_hold_parity(static_graph, tiny_bundle):
    folder, settings = static_graph
    enc = Encoder.load(folder, backend="onnx", precision="int8", verify=False)  # the manifest names the old graph
    alone, batched = alone_and_batched(enc)
    np.testing.assert_allclose(alone, batched, atol=2e-6)
    fp32 = Encoder.load(tiny_bundle[0], backend="onnx", precision="fp32").encode(SHORT + LONG, batch_size=1)
    assert (enc.encode(SHORT + LONG, batch_size=1) * fp32).sum(1).min() >= 0.99
    assert settings["activations"]["activations"] == "static" and settings["activations"]["matmuls"] == 4


def test_each_weight_matmul_runs_on_the_first_position_and_the_rest(static_graph):
    """Standard operators only (no contrib op a browser runtime lacks); each of the layer's 4 MatMuls by a weight
    is two MatMuls whose inputs each have a calibrated scale of their own."""
    graph = onnx.load(str(static_graph[0] / ONNX_INT8)).graph
    assert {n.domain for n in graph.node} <= {"", "ai.onnx"}
    firsts = [n for n in graph.node if n.op_type == "MatMul" and n.name.endswith("_first")]
    rests = [n for n in graph.node if n.op_type == "MatMul" and n.name.endswith("_rest")]
    assert len(firsts) == len(rests) == 4
    quantised = {n.output[0]: n for n in graph.node if n.op_type == "DequantizeLinear"}
    scales = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    for first, rest in zip(firsts, rests):
        a, b = quantised[first.input[0]], quantised[rest.input[0]]  # each activation is dequantised from uint8
        assert scales[a.input[1]].shape == () and scales[a.input[1]] != scales[b.input[1]]
    assert "DynamicQuantizeLinear" not in {n.op_type for n in graph.node}


def test_onnxruntime_fusions_compute_the_same(static_graph):
    folder = static_graph[0]
    ids, mask = pad_batch(Encoder.load(folder, backend="onnx", precision="fp32", verify=False).tokenize(SHORT + LONG))
    feeds = {"input_ids": ids, "attention_mask": mask}
    for a, b in zip(session_outputs(folder / ONNX_INT8, True, feeds), session_outputs(folder / ONNX_INT8, False, feeds)):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_one_token_inputs_run(static_graph):
    """The rest is empty when a batch is one position long: the graph must still run."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(static_graph[0] / ONNX_INT8), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"input_ids": np.array([[1]], np.int64), "attention_mask": np.array([[1]], np.int64)})[0]
    assert np.isfinite(out).all()


def test_the_choice_reaches_the_manifest_and_is_kept_on_export_again(tiny_model, tmp_path):
    parity = export_bundle(tiny_model, tmp_path / "b", torchscript=False, parity_pairs=20, int8_activations="static")
    int8 = json.loads((tmp_path / "b" / MANIFEST).read_text())["quantization"]["int8"]
    assert int8["method"] == "onnxruntime.quantization.quantize_static"
    assert int8["activations"]["activations"] == "static"
    assert parity["formats"]["onnx-int8"]["cosine_mean"] >= 0.99
    assert recorded_int8(tmp_path / "b", None, None)[1] == "static"  # `export` again keeps the folder's form


def test_static_without_calibration_is_refused(tiny_bundle, tmp_path):
    with pytest.raises(UserError, match="static int8 activations need calibration batches"):
        quantize_int8(tiny_bundle[0] / ONNX_FP32, tmp_path / "x.onnx", activations="static")


@pytest.mark.parametrize("name", ["default", "quality"])
def test_the_shipped_static_models_give_a_text_one_vector_alone_and_in_a_batch(name):
    """docs/guarantees.md: the `default` and `quality` models' static activations (the first position apart) make a
    text's vector independent of its batch mates, where the `fast` model's dynamic ones do not quite."""
    from edge_xsent import Encoder

    alone, batched = alone_and_batched(Encoder.load(name, threads=1))
    np.testing.assert_allclose(alone, batched, atol=1e-6)
