"""A token table that keeps every piece in little room: the first rows at 4 bits, every other row at 1 bit.

A student of multilingual-e5-small reads e5's 250,002 pieces; at int8 their table alone is 96 MB. Cutting it to
the rows that fit (the rest reading their nearest kept row) cost the 4-block student 3.3 `oog` points. Here every
piece keeps a row of its own: ids below `exact_rows` (a student orders its ids by e5's unigram score, so these
are the frequent pieces) at 4 bits in blocks of 32 with an fp16 scale each, and every other id as the signs of
its row with one fp16 scale (the mean |x| of the row, which minimises the squared error of sign(x) * s).

The int8 graph decodes it with standard ONNX operators only (export/tablequant.py): a byte of codes indexes a
constant table of what its bits or nibbles stand for (`LUT1`, `LUT4`), so every onnxruntime build, the web's
included, runs it. This module packs and unpacks the same arrays in numpy, for the export and for the torch
backend (int8_weights.py), which reads the table back from the graph.

    arrays = pack(table, exact_rows=4000)     # names below -> numpy arrays, what the graph holds
    table_again = unpack(arrays)              # float32, every row decoded as the graph decodes it
"""

from __future__ import annotations

import numpy as np

from edge_xsent.config import TIER_BLOCK

BLOCK = TIER_BLOCK  # columns per fp16 scale in the 4-bit tier
NAMES = ("exact_codes", "exact_scales", "sign_codes", "sign_scales")  # the graph's initializers (a prefix before)


def lut1() -> np.ndarray:
    """(256, 8): byte b -> its bits as +-1, lowest bit first (column 8i + j is bit j of byte i)."""
    bits = (np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1
    return (bits * 2 - 1).astype(np.float32)


def lut4() -> np.ndarray:
    """(256, 2): byte b -> its two nibbles as signed 4-bit values (-8..7), low nibble first."""
    b = np.arange(256)
    return (np.stack([b & 15, b >> 4], axis=1) - 8).astype(np.float32)


def pack(table: np.ndarray, exact_rows: int) -> dict[str, np.ndarray]:
    """The table (rows x dim, dim a multiple of BLOCK) in the tiered form; `exact_rows` may be 0 (all at 1 bit)
    or every row (then one zero row stands for the 1-bit tier: unpack gives one row more)."""
    table = np.asarray(table, dtype=np.float32)
    rows, dim = table.shape
    if dim % BLOCK or not 0 <= exact_rows <= rows:
        raise ValueError(f"a {rows} x {dim} table: dim must be a multiple of {BLOCK} and exact rows within 0..{rows}")
    exact, rest = table[:exact_rows].reshape(exact_rows, dim // BLOCK, BLOCK), table[exact_rows:]
    rest = rest if len(rest) else np.zeros((1, dim), np.float32)  # a row for Gather to read; Where never takes it
    scales = (np.abs(exact).max(2) / 7).astype(np.float16)  # symmetric: -7..7 used, -8 never
    q = np.clip(np.rint(exact / np.maximum(scales.astype(np.float32), 1e-12)[..., None]), -8, 7).astype(np.int16) + 8
    q = q.reshape(exact_rows, dim // 2, 2)
    signs = (rest > 0).reshape(len(rest), dim // 8, 8).astype(np.uint8)
    return {"exact_codes": (q[..., 0] | (q[..., 1] << 4)).astype(np.uint8), "exact_scales": scales,
            "sign_codes": (signs << np.arange(8, dtype=np.uint8)).sum(2).astype(np.uint8),
            "sign_scales": np.abs(rest).mean(1).astype(np.float16)}


def unpack(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Every row as float32, as the graph decodes it; written into one array (e5's 250,002 rows are 384 MB)."""
    codes, scales = arrays["exact_codes"], arrays["exact_scales"].astype(np.float32)
    signs = np.unpackbits(arrays["sign_codes"], axis=1, bitorder="little")  # lowest bit first, as lut1
    out = np.empty((len(codes) + len(signs), signs.shape[1]), np.float32)
    exact = out[:len(codes)].reshape(*scales.shape, BLOCK)
    np.multiply(lut4()[codes].reshape(exact.shape), scales[..., None], out=exact)
    rest, s = out[len(codes):], arrays["sign_scales"].astype(np.float32)[:, None]
    np.multiply(signs, 2 * s, out=rest)
    rest -= s  # bit 1 -> s, bit 0 -> -s: exact in float32, as lut1's +-1 times s
    return out


def check(arrays: dict[str, np.ndarray], rows: int, dim: int) -> None:
    """The arrays of `pack` for a table of `rows` x `dim`, or a ValueError naming what differs: a graph's torn or
    tampered initializers are refused before `unpack` reads them, and so are scales that are not finite numbers."""
    exact = len(arrays["exact_codes"])
    rest = max(rows - exact, 1)  # every row exact: one zero row stands for the 1-bit tier (pack)
    want = {"exact_codes": ((exact, dim // 2), np.uint8), "exact_scales": ((exact, dim // BLOCK), np.float16),
            "sign_codes": ((rest, dim // 8), np.uint8), "sign_scales": ((rest,), np.float16)}
    for name, (shape, dtype) in want.items():
        a = arrays[name]
        if a.shape != shape or a.dtype != dtype:
            raise ValueError(f"tiered table {name}: {a.dtype} {a.shape}, where {rows} rows of {dim} need {np.dtype(dtype)} {shape}")
        if a.dtype == np.float16 and not np.isfinite(a).all():
            raise ValueError(f"tiered table {name}: {int((~np.isfinite(a)).sum())} scales are NaN or inf")


def table_bytes(rows: int, dim: int, exact_rows: int) -> int:
    """What the arrays of `pack` take: the rule for how many exact rows fit a budget reads this."""
    return exact_rows * (dim // 2 + 2 * dim // BLOCK) + (rows - exact_rows) * (dim // 8 + 2)
