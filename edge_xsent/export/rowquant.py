"""Per-row int8 activations: a text's vector depends on the text alone, never on its batch.

`quantize_dynamic` gives each MatMul one activation scale for the whole batch (`DynamicQuantizeLinear`), so one
text with large activations coarsens every other text in its batch. multilingual-e5's blocks carry large
activations: a pruned student's int8 vector moved to cosine 0.985 between alone and in a batch of 64, below the
parity bar fastembed is read at (it batches 32). Here each `DynamicQuantizeLinear` becomes a scale per row (per
token): max |x| over the row / 127, zero point 128. The MatMulInteger's output is then scaled by the weights'
scale and, after that, by the row's: written as `Mul(a_scale, b_scale)` it would match onnxruntime's
MatMulIntegerToFloatFusion, whose kernel reads the activation scale as a single number (studies/pruned-student).

    rewrite_per_row("onnx/model_int8.onnx")  # in place, after quantize_dynamic
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PREFIX = "per_row"  # the names of the constants and nodes this module adds


def rewrite_per_row(path: Path) -> dict:
    """In place. Returns the settings the manifest records."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    producer = {out: n for n in graph.node for out in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    replace: dict[int, list] = {}
    for node in graph.node:
        if node.op_type == "DynamicQuantizeLinear":
            replace[id(node)] = _row_scales(node, opset)
            for matmul in consumers[node.output[0]]:
                replace.update(_scale_output(matmul, node.output[1], consumers, producer))
    if not replace:
        raise ValueError(f"{path}: no DynamicQuantizeLinear to rewrite; give the graph quantize_dynamic wrote")
    nodes = [new for n in graph.node for new in replace.get(id(n), [n])]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend([numpy_helper.from_array(np.array(v, dtype), f"{PREFIX}_{k}") for k, v, dtype in (
        ("tiny", 1e-12, np.float32), ("qmax", 127.0, np.float32), ("shift", 128.5, np.float32),
        ("zero_point", 128, np.uint8), ("last_axis", [-1], np.int64))])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return {"activations": "per-row", "scale": "max |x| / 127 per row", "zero_point": 128,
            "matmuls": sum(n.op_type == "MatMulInteger" for n in nodes)}


def _row_scales(node, opset: int) -> list:
    """DynamicQuantizeLinear(x) -> (q, scale, zero point), one scale per row. Adding 128.5 and casting
    (which truncates) rounds x / scale + 128 to the nearest: |x| / scale <= 127, so q stays in 1..255."""
    from onnx import TensorProto, helper

    x, (q, scale, zero_point) = node.input[0], node.output
    p = f"{PREFIX}/{x}"
    reduce = (helper.make_node("ReduceMax", [p + "/abs", f"{PREFIX}_last_axis"], [p + "/max"], keepdims=1)
              if opset >= 18 else helper.make_node("ReduceMax", [p + "/abs"], [p + "/max"], axes=[-1], keepdims=1))
    return [helper.make_node("Abs", [x], [p + "/abs"]), reduce,
            helper.make_node("Max", [p + "/max", f"{PREFIX}_tiny"], [p + "/max_nonzero"]),
            helper.make_node("Div", [p + "/max_nonzero", f"{PREFIX}_qmax"], [scale]),
            helper.make_node("Div", [x, scale], [p + "/scaled"]),
            helper.make_node("Add", [p + "/scaled", f"{PREFIX}_shift"], [p + "/shifted"]),
            helper.make_node("Cast", [p + "/shifted"], [q], to=TensorProto.UINT8),
            helper.make_node("Identity", [f"{PREFIX}_zero_point"], [zero_point])]


def _scale_output(matmul, scale: str, consumers: dict, producer: dict) -> dict[int, list]:
    """quantize_dynamic's MatMulInteger -> Cast -> Mul(y, Mul(a_scale, b_scale)) becomes
    Mul(Mul(y, b_scale), a_scale); the Mul of the two scales goes."""
    from onnx import helper

    cast = consumers[matmul.output[0]][0]
    final = consumers[cast.output[0]][0]
    if cast.op_type != "Cast" or final.op_type != "Mul":
        raise ValueError(f"{matmul.name}: not the MatMulInteger -> Cast -> Mul that quantize_dynamic writes")
    both = producer[next(i for i in final.input if i != cast.output[0])]
    weight_scale = next(i for i in both.input if i != scale)
    weighted = f"{final.output[0]}/weight_scaled"
    return {id(both): [],
            id(final): [helper.make_node("Mul", [cast.output[0], weight_scale], [weighted]),
                        helper.make_node("Mul", [weighted, scale], list(final.output))]}
