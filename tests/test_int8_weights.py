"""One model artifact: float weights derived from the int8 graph where a folder ships no fp32
weights (studies/float-weights/ measured it on the shipped default: cosine 0.99991, the same
fine-tuning)."""

import json
import shutil

import pytest
import torch

from edge_xsent import Encoder
from edge_xsent.encode.bundle import load_model, write_manifest
from edge_xsent.errors import UserError


@pytest.fixture
def graph_only(tiny_bundle, tmp_path):
    """The tiny bundle without its fp32 weights: the int8 graph, the head file, tokenizer, config."""
    folder = tmp_path / "graph-only"
    shutil.copytree(tiny_bundle[0], folder)
    (folder / "model.safetensors").unlink()
    write_manifest(folder)
    return folder


def test_the_torch_backend_runs_weights_derived_from_the_int8_graph(tiny_bundle, graph_only):
    texts = ["Open the file", "Ouvrir le fichier", "Save the current document before closing the window"]
    fp32 = Encoder.load(tiny_bundle[0], backend="torch").encode(texts)
    derived = Encoder.load(graph_only, backend="torch").encode(texts)
    assert (fp32 * derived).sum(1).min() > 0.999


def test_a_derived_model_keeps_the_head_for_fine_tuning(tiny_bundle, graph_only):
    original, _, _ = load_model(tiny_bundle[0])
    derived, _, _ = load_model(graph_only)
    for name in ("head_bias", "head_dense.weight", "head_ln.weight"):  # from edge_xsent.safetensors, exactly
        assert torch.equal(derived.state_dict()[name], original.state_dict()[name])
    worst = max(float((derived.state_dict()[k] - v).abs().max()) for k, v in original.state_dict().items())
    assert 0 < worst < 0.05  # dequantized, not copied


def test_a_graph_of_another_model_is_an_error_not_wrong_weights(graph_only):
    config = json.loads((graph_only / "config.json").read_text())
    config["model"]["d_ff"] *= 2
    (graph_only / "config.json").write_text(json.dumps(config))
    write_manifest(graph_only)
    with pytest.raises(UserError, match="its quantized matmuls do not match config.json"):
        load_model(graph_only)


def test_export_of_a_graph_only_folder_writes_the_float_weights_back(graph_only, tmp_path):
    """What a sentence-transformers user runs on a one-artifact default: a full bundle again."""
    from edge_xsent.export.exporter import export_bundle

    parity = export_bundle(graph_only, tmp_path / "full", parity_pairs=80, torchscript=False)
    assert (tmp_path / "full" / "model.safetensors").exists() and not (tmp_path / "full" / ".float").exists()
    assert parity["formats"]["onnx-int8"]["cosine_mean"] > 0.99  # the export's own gate, against the derived fp32
    a = Encoder.load(tmp_path / "full", backend="torch").encode(["Open the file"])
    b = Encoder.load(graph_only, backend="torch").encode(["Open the file"])
    assert float((a * b).sum()) > 0.9999


def test_the_shipped_models_are_one_artifact_and_export_for_sentence_transformers(tmp_path, monkeypatch):
    """The package ships int8 graphs (and the fast model's head), not fp32 weights; `export fast` gives the full
    folder that sentence-transformers' torch backend reads, outside the package."""
    from click.testing import CliRunner

    from edge_xsent.cli import main
    from edge_xsent.encode.encoder import DEFAULT_MODEL, FAST_MODEL, QUALITY_MODEL

    for folder in (DEFAULT_MODEL, FAST_MODEL, QUALITY_MODEL):
        assert not (folder / "model.safetensors").exists() and (folder / "onnx/model_int8.onnx").exists()
    assert (FAST_MODEL / "edge_xsent.safetensors").exists()
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["export", "fast", "--no-torchscript"])
    assert res.exit_code == 0, res.output
    full = tmp_path / "fast-model-bundle"  # here, never inside the installed package
    assert (full / "model.safetensors").exists() and not (FAST_MODEL.parent / "fast-model-bundle").exists()
    texts = ["Where is the station?", "Où est la gare ?", "Wo ist der Bahnhof?"]
    shipped = Encoder.load("fast").encode(texts)
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(full), device="cpu").encode(texts, normalize_embeddings=True)
    assert float((theirs * shipped).sum(axis=1).min()) > 0.999


def test_a_table_at_4_bits_is_smaller_keeps_parity_and_still_gives_float_weights(tiny_model, tiny_bundle, tmp_path):
    """`export --table-bits 4`: the token table's Gather becomes GatherBlockQuantized, the MatMuls stay
    int8, the export's gate checks it, and a one-artifact folder reads its float weights back."""
    import onnx
    from click.testing import CliRunner

    from edge_xsent.cli import main

    out = tmp_path / "t4"
    result = CliRunner().invoke(main, ["export", str(tiny_model), "--out", str(out), "--table-bits", "4",
                                       "--no-torchscript", "--parity-data", "sample"])
    assert result.exit_code == 0, result.output
    graph = onnx.load(str(out / "onnx/model_int8.onnx")).graph
    ops = {n.input[0]: n.op_type for n in graph.node if "Gather" in n.op_type and n.input[0].startswith("model.")}
    assert ops == {"model.tok_emb.weight_Q4": "GatherBlockQuantized", "model.pos_emb.weight_quantized": "Gather"}
    assert {n.op_type for n in graph.node} >= {"MatMulInteger"}  # the blocks stay int8
    assert (out / "onnx/model_int8.onnx").stat().st_size < (tiny_bundle[0] / "onnx/model_int8.onnx").stat().st_size
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["quantization"]["int8"]["table_bits"] == 4
    assert manifest["parity"]["formats"]["onnx-int8"]["cosine_mean"] > 0.99
    texts = ["Open the file", "Ouvrir le fichier", "Save the current document before closing the window"]
    fp32 = Encoder.load(out, backend="torch").encode(texts)
    assert (Encoder.load(out).encode(texts) * fp32).sum(1).min() > 0.98  # the int8 graph, through onnxruntime
    (out / "model.safetensors").unlink()
    write_manifest(out)
    derived = Encoder.load(out, backend="torch").encode(texts)  # float weights read back from the 4-bit table
    assert (derived * fp32).sum(1).min() > 0.99


def test_every_quantised_graph_must_pass_the_parity_gate():
    from edge_xsent.export.exporter import check_gate

    ok = {"cosine_mean": 0.995}
    check_gate({"formats": {"onnx-int8": ok, "onnx-int4": ok}}, 0.99)
    with pytest.raises(UserError, match=r"int4 parity check failed: mean cosine 0.9120 < 0.99.*without --int4"):
        check_gate({"formats": {"onnx-int8": ok, "onnx-int4": {"cosine_mean": 0.912}}}, 0.99)
    with pytest.raises(UserError, match=r"int8 parity check failed: mean cosine 0.9800"):
        check_gate({"formats": {"onnx-int8": {"cosine_mean": 0.98}}}, 0.99)
    from edge_xsent.export.exporter import export_bundle

    with pytest.raises(UserError, match="--table-bits 4 shapes the int8 graph; leave out --no-int8"):
        export_bundle("nowhere", "nowhere-bundle", int8=False, table_bits=4)


def test_an_export_keeps_the_int8_form_the_folder_was_made_in(tiny_student_bundle, tmp_path):
    """A student's graph is a 4-bit table with per-row activations; exporting its folder again (`export default`)
    keeps that form unless told otherwise, where the defaults would miss the parity gate."""
    import json

    from edge_xsent.export.exporter import export_bundle

    export_bundle(tiny_student_bundle, tmp_path / "again", torchscript=False, parity_pairs=40)
    int8 = json.loads((tmp_path / "again" / "manifest.json").read_text())["quantization"]["int8"]
    assert int8["table_bits"] == 4 and int8["activations"]["activations"] == "per-row"
    export_bundle(tiny_student_bundle, tmp_path / "told", torchscript=False, parity_pairs=40, table_bits=8,
                  min_cosine=0.9)
    assert json.loads((tmp_path / "told" / "manifest.json").read_text())["quantization"]["int8"]["table_bits"] == 8
