"""Float weights read back from an int8 ONNX graph, so a model can ship one artifact.

The graph holds every encoder weight: the named float tensors as they are, the embedding tables
as uint8 with one scale each (or 4-bit blocks, `export --table-bits 4`, or tiered, `--table-bits 1`), the matmuls as int8 per
output channel. Dequantized, they give
sentence vectors at cosine 0.9999 to the trained fp32 weights and fine-tune alike
(studies/float-weights/). The generative head, which inference does not use, is not in the graph;
it ships beside it in edge_xsent.safetensors.

    state = state_from_int8(folder / "onnx/model_int8.onnx", EncoderConfig(...))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_xsent.config import EncoderConfig
from edge_xsent.encode.tiered_table import NAMES, check, unpack
from edge_xsent.errors import UserError

LINEARS = ("qkv", "proj", "ff1", "ff2")  # each block's matmuls, in the order the exporter emits them


def dequantize(q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """(q - zero) * scale; scale and zero are scalars or one per output channel (the last axis)."""
    return (q.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)


def dequantize_blocks(q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """A symmetric blockwise table (GatherBlockQuantized: one scale per `block` columns of each row;
    the last block may be short) as float."""
    return q.astype(np.float32) * np.repeat(scales.astype(np.float32), block, axis=1)[:, : q.shape[1]]


def _block_size(proto, table: str) -> int:
    """The block_size attribute of the GatherBlockQuantized node that reads `table`."""
    from onnx import helper

    for node in proto.graph.node:
        if node.op_type == "GatherBlockQuantized" and node.input[0] == table:
            return next(helper.get_attribute_value(a) for a in node.attribute if a.name == "block_size")
    raise UserError(f"no GatherBlockQuantized node reads {table}; re-export the model")


def _shapes(cfg: EncoderConfig) -> dict[str, tuple[int, int]]:
    d, f = cfg.d_model, cfg.d_ff
    return {"qkv": (d, 3 * d), "proj": (d, d), "ff1": (d, f), "ff2": (f, d)}  # as the graph multiplies: x @ W^T


def state_from_int8(graph: Path, cfg: EncoderConfig, data: bytes | None = None) -> dict:
    """DualEncoder's encoder weights (no generative head) from an int8 graph. The matmul weights
    carry generated names; they are matched to the blocks' linears by order, and each shape is
    checked, so a graph of another model is an error, not wrong weights. `data`: the graph's bytes,
    when the caller has read them."""
    import onnx
    import torch
    from onnx import numpy_helper

    try:
        proto = onnx.load_from_string(data) if data is not None else onnx.load(str(graph))
        # external data is read beside the graph, inside its folder, never from the working directory (onnx's
        # default for a graph given as bytes); the folder's manifest lists and checks it
        inits = {i.name: numpy_helper.to_array(i, base_dir=str(Path(graph).parent)) for i in proto.graph.initializer}
    except Exception as e:  # onnx raises its own types for a torn file  # noqa: BLE001
        raise UserError(f"{graph}: not a readable ONNX graph ({e})") from None
    state = {k[len("model."):]: torch.from_numpy(v.copy()) for k, v in inits.items()
             if k.startswith("model.") and v.dtype == np.float32 and not k.endswith(("_scale", "_scales"))}
    for table in ("tok_emb", "pos_emb"):
        name = f"model.{table}.weight"
        if name + "_quantized" in inits:
            w = dequantize(inits[name + "_quantized"], inits[name + "_scale"], inits[name + "_zero_point"])
        elif name + "_Q4" in inits:  # export --table-bits 4
            w = dequantize_blocks(inits[name + "_Q4"], inits[name + "_scales"], _block_size(proto, name + "_Q4"))
        elif table == "tok_emb" and "tiered_sign_codes" in inits:  # export --table-bits 1
            arrays = {k: inits.get("tiered_" + k, np.zeros(0)) for k in NAMES}
            try:
                check(arrays, cfg.vocab_size, cfg.d_model)
            except ValueError as e:
                raise UserError(f"{graph}: {e}; the model is corrupt: re-export or re-download it") from None
            w = unpack(arrays)[: cfg.vocab_size]
        else:
            raise UserError(f"{graph}: no quantized {table} table; is it an int8 graph made by `edge-xsent export --int8`?")
        state[f"{table}.weight"] = torch.from_numpy(w)
    if cfg.table_rows:  # a cut table: a GatherND reads each id's row from the map (torch exports `id_map[ids]` so)
        gathered = {n.input[0] for n in proto.graph.node if n.op_type in ("Gather", "GatherND")}
        maps = [k for k in gathered if k in inits and inits[k].dtype == np.int32 and inits[k].shape == (cfg.vocab_size,)]
        if len(maps) != 1:
            raise UserError(f"{graph}: config.json says the token table is cut but the graph has no id map; re-export")
        state["id_map"] = torch.from_numpy(inits[maps[0]].copy())
    mats = [k[: -len("_quantized")] for k in inits if k.endswith("_quantized") and not k.startswith("model.")]
    wanted = [(b, lin) for b in range(cfg.n_layers) for lin in LINEARS]
    shapes = _shapes(cfg)
    if len(mats) != len(wanted) or any(inits[m + "_quantized"].shape != shapes[lin] for m, (_, lin) in zip(mats, wanted)):
        raise UserError(f"{graph}: its quantized matmuls do not match config.json ({cfg.n_layers} layers, d_model "
                        f"{cfg.d_model}, d_ff {cfg.d_ff}); re-export the model")
    for m, (b, lin) in zip(mats, wanted):
        w = dequantize(inits[m + "_quantized"], inits[m + "_scale"], inits[m + "_zero_point"])
        state[f"blocks.{b}.{lin}.weight"] = torch.from_numpy(np.ascontiguousarray(w.T))
    return state
