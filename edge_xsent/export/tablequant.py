"""The token table's Gather -> a tiered table (encode/tiered_table.py) decoded with standard ONNX operators.

    rewrite_tiered(src, dst, exact_rows=4000)   # before quantize_dynamic, which must leave NODES alone

For ids x (any shape), with K exact rows:
    exact = Reshape(Gather(LUT4, Cast(Gather(exact_codes, Min(x, K-1)))), blocks) * Cast(Gather(exact_scales, ...))
    rest  = Reshape(Gather(LUT1, Cast(Gather(sign_codes, Max(x - K, 0))))) * Cast(Gather(sign_scales, ...))
    row   = Where(x < K, exact, rest)
Gather, Cast, Min, Max, Sub, Less, Where, Mul, Reshape, Unsqueeze: opset 13 has them all, onnxruntime-web too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_xsent.encode.tiered_table import BLOCK, NAMES, lut1, lut4, pack
from edge_xsent.errors import UserError

PREFIX = "tiered"  # the names of the constants and nodes this module adds
TABLE = "model.tok_emb.weight"


def rewrite_tiered(src: Path, dst: Path, exact_rows: int) -> dict:
    """Writes `dst`; returns the settings the manifest records, with the names of the nodes added (which
    quantize_dynamic must exclude: its Gather quantiser would re-quantise the look-up tables)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    gathers = [n for n in graph.node if n.op_type == "Gather" and n.input[0] == TABLE]
    if len(gathers) != 1 or TABLE not in inits:
        raise UserError(f"{src}: no single Gather of {TABLE} to rewrite; is it a graph `edge-xsent export` wrote, "
                        "of a model whose table is whole (not cut)?")
    table = numpy_helper.to_array(inits[TABLE])
    if not 5 <= exact_rows <= len(table):
        raise UserError(f"table exact rows {exact_rows}: choose between 5 (the specials) and the table's {len(table)}")
    arrays = {**pack(table, exact_rows), "lut1": lut1(), "lut4": lut4()}
    nodes = _decode_nodes(gathers[0].input[1], gathers[0].output[0], exact_rows, table.shape[1])
    consts = {**arrays, "k": np.array(exact_rows, np.int64),
              "last": np.array(exact_rows - 1, np.int64), "zero": np.array(0, np.int64), "minus1": np.array([-1], np.int64),
              "blocks": np.array([0, 0, table.shape[1] // BLOCK, BLOCK], np.int64), "row": np.array([0, 0, -1], np.int64)}
    kept = [n for n in graph.node if n is not gathers[0]]
    at = list(graph.node).index(gathers[0])
    del graph.node[:]
    graph.node.extend(kept[:at] + nodes + kept[at:])
    graph.initializer.remove(inits[TABLE])
    graph.initializer.extend(numpy_helper.from_array(v, f"{PREFIX}_{k}") for k, v in consts.items())
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return {"format": "tiered", "exact_rows": exact_rows, "exact": f"4-bit, blocks of {BLOCK}, fp16 scales",
            "rest": "1 bit a value (its sign), one fp16 scale a row (mean |x|)", "rows": len(table),
            "table_bytes": int(sum(arrays[k].nbytes for k in NAMES)),
            "nodes": [n.name for n in nodes]}


def _decode_nodes(ids: str, out: str, exact_rows: int, dim: int) -> list:
    from onnx import TensorProto, helper

    c = lambda name: f"{PREFIX}_{name}"  # noqa: E731  (a constant)
    t = lambda name: f"{PREFIX}/{name}"  # noqa: E731  (an intermediate)
    spec = [  # (op, inputs, output, attributes)
        ("Min", [ids, c("last")], t("exact_ids"), {}),
        ("Sub", [ids, c("k")], t("shifted"), {}),
        ("Max", [t("shifted"), c("zero")], t("sign_ids"), {}),
        ("Gather", [c("exact_codes"), t("exact_ids")], t("exact_bytes"), {}),
        ("Cast", [t("exact_bytes")], t("exact_bytes64"), {"to": TensorProto.INT64}),
        ("Gather", [c("lut4"), t("exact_bytes64")], t("nibbles"), {}),
        ("Reshape", [t("nibbles"), c("blocks")], t("exact_blocks"), {}),
        ("Gather", [c("exact_scales"), t("exact_ids")], t("exact_scales16"), {}),
        ("Cast", [t("exact_scales16")], t("exact_scales32"), {"to": TensorProto.FLOAT}),
        ("Unsqueeze", [t("exact_scales32"), c("minus1")], t("exact_scales_b"), {}),
        ("Mul", [t("exact_blocks"), t("exact_scales_b")], t("exact_scaled"), {}),
        ("Reshape", [t("exact_scaled"), c("row")], t("exact"), {}),
        ("Gather", [c("sign_codes"), t("sign_ids")], t("sign_bytes"), {}),
        ("Cast", [t("sign_bytes")], t("sign_bytes64"), {"to": TensorProto.INT64}),
        ("Gather", [c("lut1"), t("sign_bytes64")], t("signs"), {}),
        ("Reshape", [t("signs"), c("row")], t("sign_rows"), {}),
        ("Gather", [c("sign_scales"), t("sign_ids")], t("sign_scales16"), {}),
        ("Cast", [t("sign_scales16")], t("sign_scales32"), {"to": TensorProto.FLOAT}),
        ("Unsqueeze", [t("sign_scales32"), c("minus1")], t("sign_scales_b"), {}),
        ("Mul", [t("sign_rows"), t("sign_scales_b")], t("rest"), {}),
        ("Less", [ids, c("k")], t("is_exact"), {}),
        ("Unsqueeze", [t("is_exact"), c("minus1")], t("is_exact_b"), {}),
        ("Where", [t("is_exact_b"), t("exact"), t("rest")], out, {}),
    ]
    return [helper.make_node(op, inputs, [output], name=output if output == out else output + "/node", **attrs)
            for op, inputs, output, attrs in spec]
