"""Static int8 activations, the first position apart: a text's vector depends on the text alone, and the int8
MatMuls run in onnxruntime's fused kernel (MatMulIntegerToFloat), which per-row scales (rowquant.py) cannot use.

multilingual-e5's blocks put their outliers in one token, not in channels: the first position's (the `<s>`
token's) largest activation is up to 10x every other position's. One calibrated scale a tensor then coarsens every
other token (parity 0.987, below the gate), and smoothing channels into the weights does not help. So each MatMul
with a constant weight runs twice, on the first position and on the rest, each input with a scale of its own
calibrated on real text, and the two outputs are joined (Slice, MatMul, Concat: standard operators).
Measured in studies/quality-model ("The speed levers").

    batches = calibration_batches(folder)                     # after the fp32 graph and the tokenizer are written
    quantize_static_int8(fp32, int8, batches, exclude=[...])  # what quantize_int8(activations="static") calls
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

PREFIX = "static"  # the names of the constants and nodes this module adds
CALIBRATION_PAIRS = 256  # both sides: 512 sentences of the sample corpus's train split, spread over its languages
CALIBRATION_BATCH = 32

Batch = tuple[np.ndarray, np.ndarray]  # padded token ids (B, T) and their 0/1 mask


def calibration_batches(folder: Path, data: str = "sample", pairs: int = CALIBRATION_PAIRS) -> list[Batch]:
    """Token batches of real training text (never the parity gate's test split), tokenized as the folder does."""
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.bundle import ModelFiles, read_tokenizer
    from edge_xsent.encode.encoder import tokenize
    from edge_xsent.encode.tokenizer import pad_batch

    train = list(read_pairs(data, split="train"))
    chosen = train[:: max(1, len(train) // pairs)][:pairs]
    files = ModelFiles(folder, verify=False)  # the folder being exported: ids only, no session of its fp32 graph
    max_len = files.config()[1].max_len
    with warnings.catch_warnings():  # long sentences are cut to max_len, as `encode` cuts them
        warnings.filterwarnings("ignore", message=".*were truncated")
        ids = tokenize(read_tokenizer(files), [p.a for p in chosen] + [p.b for p in chosen], max_len)
    return [pad_batch(ids[i:i + CALIBRATION_BATCH]) for i in range(0, len(ids), CALIBRATION_BATCH)]


def quantize_static_int8(src: Path, dst: Path, batches: Sequence[Batch], exclude: Sequence[str] = (),
                         weight_type: str = "QInt8", reduce_range: bool = True) -> dict:
    """Writes `dst` from the fp32 graph `src`; returns the settings the manifest records. `exclude`: nodes left
    as they are (a tiered table's look-ups, a projection kept in fp32). The caller silences onnxruntime's
    quantiser (exporter.quiet)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    if not batches:
        raise ValueError("static int8 activations need calibration batches")
    model = onnx.load(str(src))
    split = split_first_position(model, set(exclude))
    staged = dst.with_name(dst.stem + ".split.onnx")
    onnx.save(model, str(staged))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = list(batches)

        def get_next(self):
            return None if not self.left else dict(zip(("input_ids", "attention_mask"), self.left.pop()))

    quantize_static(str(staged), str(staged), Reader(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
                    nodes_to_quantize=split, per_channel=True, reduce_range=reduce_range,
                    activation_type=QuantType.QUInt8, weight_type=QuantType[weight_type],
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT,
                                   "OpTypesToExcludeOutputQuantization": ["MatMul"]})
    # The look-up tables (positions, a whole token table) as quantize_dynamic stores them: uint8 rows.
    quantize_dynamic(str(staged), str(dst), weight_type=QuantType.QUInt8, op_types_to_quantize=["Gather"],
                     nodes_to_exclude=list(exclude), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    staged.unlink(missing_ok=True)
    return {"activations": "static", "scale": "calibrated min/max, one for the first position, one for the rest",
            "zero_point": "calibrated", "calibration": f"{sum(len(b[0]) for b in batches)} sentences of the sample "
            "corpus's train split", "matmuls": len(split) // 2}


def split_first_position(model, exclude: set[str]) -> list[str]:
    """In place: each MatMul of a (B, T, D) input by a constant weight becomes two, on x[:, :1] and x[:, 1:], joined
    on T. Returns the new MatMuls' names (what quantize_static quantises)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {i.name for i in graph.initializer}
    ranks = _ranks(model)
    consts = {"start": [0], "one": [1], "end": [np.iinfo(np.int64).max]}
    graph.initializer.extend(numpy_helper.from_array(np.array(v, np.int64), f"{PREFIX}_{k}") for k, v in consts.items())
    start, one, end = (f"{PREFIX}_{k}" for k in consts)
    names: list[str] = []
    for node in [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights and n.name not in exclude
                 and ranks.get(n.input[0]) == 3]:
        x, w, y, p = node.input[0], node.input[1], node.output[0], f"{PREFIX}_{node.name}"
        new = [helper.make_node("Slice", [x, start, one, one], [f"{p}_x0"], name=f"{p}_slice0"),
               helper.make_node("Slice", [x, one, end, one], [f"{p}_xr"], name=f"{p}_slicer"),
               helper.make_node("MatMul", [f"{p}_x0", w], [f"{p}_y0"], name=f"{p}_first"),
               helper.make_node("MatMul", [f"{p}_xr", w], [f"{p}_yr"], name=f"{p}_rest"),
               helper.make_node("Concat", [f"{p}_y0", f"{p}_yr"], [y], name=f"{p}_join", axis=1)]
        at = list(graph.node).index(node)
        graph.node.remove(node)
        for k, n in enumerate(new):
            graph.node.insert(at + k, n)
        names += [f"{p}_first", f"{p}_rest"]
    onnx.checker.check_model(model)
    return names


def _ranks(model) -> dict[str, int]:
    """Each value's rank where shape inference knows it."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    infos = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    return {v.name: len(v.type.tensor_type.shape.dim) for v in infos if v.type.tensor_type.HasField("shape")}
