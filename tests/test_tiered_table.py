"""The tiered token table (edge_xsent/encode/tiered_table.py, export/tablequant.py): every row kept, the first at
4 bits and the rest at 1 bit; onnxruntime decodes the rewritten graph exactly as numpy does, with standard
operators only; a student folder in this form loads and keeps the export's parity gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_xsent.encode.tiered_table import BLOCK, pack, table_bytes, unpack

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def table(rows: int = 300, dim: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)


def test_exact_rows_are_4_bit_and_the_rest_signs_with_the_mean_magnitude():
    t = table()
    arrays = pack(t, 40)
    back = unpack(arrays)
    assert back.shape == t.shape and sum(a.nbytes for a in arrays.values()) == table_bytes(300, 64, 40)
    blocks = np.abs(t[:40]).reshape(40, -1, BLOCK).max(2, keepdims=True)  # a value is off by at most half a step
    assert (np.abs(back[:40] - t[:40]).reshape(40, -1, BLOCK) <= blocks / 14 * 1.01 + 1e-6).all()
    assert np.array_equal(np.sign(back[40:]), np.sign(t[40:]))
    np.testing.assert_allclose(np.abs(back[40:]).mean(1), np.abs(t[40:]).mean(1), rtol=1e-3)
    assert np.array_equal(unpack(pack(back, 40)), back)  # a folder holding the decoded table packs to itself


def test_every_row_exact_or_every_row_signs():
    t = table(rows=20)
    assert len(unpack(pack(t, 20))) == 21  # one zero row stands for the empty 1-bit tier
    assert np.array_equal(np.sign(unpack(pack(t, 0))), np.sign(t))
    with pytest.raises(ValueError, match="multiple of"):
        pack(table(dim=40), 5)


def gather_graph(t: np.ndarray, path):
    """The smallest graph `edge-xsent export` writes a table into: ids -> Gather(model.tok_emb.weight, ids)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph([helper.make_node("Gather", ["model.tok_emb.weight", "ids"], ["rows"], name="lookup")],
                              "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "T"])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["B", "T", t.shape[1]])],
                              [numpy_helper.from_array(t, "model.tok_emb.weight")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("exact", [5, 40, 300])
def test_onnxruntime_decodes_the_graph_as_numpy_does(tmp_path, exact):
    from edge_xsent.export.tablequant import rewrite_tiered

    t = table()
    gather_graph(t, tmp_path / "g.onnx")
    record = rewrite_tiered(tmp_path / "g.onnx", tmp_path / "tiered.onnx", exact)
    model = onnx.load(str(tmp_path / "tiered.onnx"))
    assert {o.domain for o in model.opset_import} == {""} and {n.domain for n in model.graph.node} == {""}
    assert "model.tok_emb.weight" not in {i.name for i in model.graph.initializer}
    ids = np.array([[0, 4, exact - 1, min(exact, 299)], [299, 150, 1, 0]], dtype=np.int64)
    got = ort.InferenceSession(str(tmp_path / "tiered.onnx")).run(None, {"ids": ids})[0]
    assert np.array_equal(got, unpack(pack(t, exact))[ids])
    assert record["table_bytes"] == table_bytes(300, 64, exact) + 10 * (exact == 300)  # the stand-in row


def test_the_rewrite_refuses_a_graph_without_a_whole_table(tmp_path):
    from edge_xsent.errors import UserError
    from edge_xsent.export.tablequant import rewrite_tiered

    gather_graph(table(), tmp_path / "g.onnx")
    with pytest.raises(UserError, match="exact rows 4"):
        rewrite_tiered(tmp_path / "g.onnx", tmp_path / "t.onnx", 4)
    m = onnx.load(str(tmp_path / "g.onnx"))
    m.graph.node[0].input[0] = "other"
    onnx.save(m, str(tmp_path / "other.onnx"))
    with pytest.raises(UserError, match="no single Gather"):
        rewrite_tiered(tmp_path / "other.onnx", tmp_path / "t.onnx", 10)


def test_a_tiered_student_keeps_every_piece_and_the_gate(tiny_student_tiered, tmp_path):
    """Every piece reads its own row (no id map); the int8 graph agrees with the folder's model (the decoded
    table) as the gate asks, the torch backend reads the same table back from the graph, and the manifest
    records the form so that a re-export keeps it."""
    from edge_xsent import Encoder
    from edge_xsent.layout import MANIFEST, ONNX_INT8

    folder = tiny_student_tiered
    parity = json.loads((folder / "parity.json").read_text())["formats"]["onnx-int8"]
    assert parity["cosine_mean"] >= 0.99
    graph = onnx.load(str(folder / ONNX_INT8))
    inits = {i.name: i for i in graph.graph.initializer}
    assert "tiered_sign_codes" in inits and not any(n.op_type == "GatherND" for n in graph.graph.node)
    table = json.loads((folder / MANIFEST).read_text())["quantization"]["int8"]["table"]
    assert table["format"] == "tiered" and table["exact_rows"] == 3000 and table["rows"] == 250002
    texts = ["Save the current document", "Xin chào thế giới", "한국어 문장", "ᚠᛇᚻ rare pieces: ꦧꦱꦗꦮ"]
    onnx_vecs = Encoder.load(folder, backend="onnx", precision="int8").encode(texts)
    torch_vecs = Encoder.load(folder, backend="torch").encode(texts)
    assert ((onnx_vecs * torch_vecs).sum(1) > 0.99).all()
    import shutil

    from edge_xsent.layout import FILES, ONNX_FP32

    from edge_xsent.encode.bundle import write_manifest

    shipped = tmp_path / "shipped"  # as train/ship.py ships a student: no float weights, no fp32 graph
    shutil.copytree(folder, shipped, ignore=shutil.ignore_patterns(FILES["weights"], Path(ONNX_FP32).name, MANIFEST))
    made = json.loads((folder / MANIFEST).read_text())
    write_manifest(shipped, {k: v for k, v in made.items() if k in ("quantization", "parity")})
    derived = Encoder.load(shipped, backend="torch").encode(texts)  # as it ships: the int8 graph alone
    assert ((derived * torch_vecs).sum(1) > 0.999).all()
