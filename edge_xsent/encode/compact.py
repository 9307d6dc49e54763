"""Compact vectors for on-device indexes: on a phone the index, not the model, is the memory
problem (100k float32 vectors of 256 dimensions are 98 MB).

    enc.encode(texts, precision="int8")     # (n, dim) int8 codes: 4x smaller
    enc.encode(texts, precision="ubinary")  # (n, dim / 8) uint8, one sign bit a dimension: 32x smaller
    enc.encode(texts, dimensions=128)       # the first 128 dimensions (Matryoshka-trained models lose little)

int8 maps each dimension's calibrated range [min, max] (of unit vectors, measured once on real
sentences and stored with the model as calibration.json) onto -128..127, as sentence-transformers'
`quantize_embeddings` does; `from_int8` maps codes back. ubinary keeps the sign of each
dimension, packed 8 to a byte (numpy.packbits order); similarity is the number of equal bits.
Truncation keeps the first k dimensions of the unit vector, renormalised for float32 output
(quantisers take the prefix as it is, so the full vectors' ranges apply).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from edge_xsent.atomic import atomic_write
from edge_xsent.layout import CALIBRATION
from edge_xsent.config import portable
from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, parse_json, read_bytes

OUTPUT_DTYPES = {"float32": np.dtype("<f4"), "int8": np.dtype("i1"), "ubinary": np.dtype("u1")}
OUTPUT_PRECISIONS = tuple(OUTPUT_DTYPES)
CALIBRATION_FORMAT = "edge-xsent-int8-ranges"


def calibrate(vectors: np.ndarray, source: str) -> dict:
    """Per-dimension range of unit vectors of real sentences: what int8 codes span."""
    if len(vectors) < 100:
        raise UserError(f"calibration needs at least 100 sentences, got {len(vectors)}")
    return {"format": CALIBRATION_FORMAT, "dim": int(vectors.shape[1]), "sentences": int(len(vectors)),
            "source": source, "min": vectors.min(0).astype(float).round(6).tolist(),
            "max": vectors.max(0).astype(float).round(6).tolist()}


def save_calibration(folder: Path, ranges: dict) -> None:
    """calibration.json with its own SHA-256 (sealed): replacing it is one rename, so a reader sees the old file or
    the new one, each checkable without the manifest, and a calibrate killed at any point leaves a loadable folder."""
    doc = {k: v for k, v in portable(ranges).items() if k != "sha256"}  # its source names no home folder
    with atomic_write(Path(folder) / CALIBRATION) as f:
        f.write(json.dumps({**doc, "sha256": _digest(doc)}) + "\n")


def _digest(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sealed(data: bytes, path: Path) -> bool:
    """Whether calibration.json carries its own checksum, checked (a mismatch is an error); False for a file
    written before files were sealed (2026-12-07), which the manifest checks."""
    try:
        doc = parse_json(data, path)
    except UserError:
        return False
    if not isinstance(doc, dict) or "sha256" not in doc:
        return False
    if doc["sha256"] != _digest({k: v for k, v in doc.items() if k != "sha256"}):
        raise UserError(f"{path}: checksum mismatch, the file is corrupt or was changed after saving; make it again "
                        f"with `edge-xsent calibrate {path.parent}`")
    return True


def load_calibration(folder: Path, dim: int, data: bytes | None = None) -> dict | None:
    """The folder's int8 ranges (`data`: the file's bytes, when the caller has read them), None when it
    has none; a malformed file is an error, never ignored."""
    path = Path(folder) / CALIBRATION
    if data is None and not path.exists():
        return None
    try:
        ranges = parse_json(data if data is not None else read_bytes(path, CAPS["json"], "calibration"), path)
        lo, hi = np.asarray(ranges["min"], dtype=np.float64), np.asarray(ranges["max"], dtype=np.float64)
        ok = (ranges.get("format") == CALIBRATION_FORMAT and ranges.get("dim") == dim
              and lo.shape == hi.shape == (dim,) and bool(np.isfinite(lo).all() and np.isfinite(hi).all())
              and bool((lo < hi).all()))  # NaN or empty ranges would turn every code into 0 without a word
    except (UserError, KeyError, TypeError, AttributeError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"{path} is not a valid int8 calibration for {dim} dimensions: remake it with "
                        f"`edge-xsent calibrate {folder}`")
    return ranges


def calibration_sentences(data: str = "sample", split: str = "valid", n: int = 4000, seed: int = 0) -> list[str]:
    """Both sides of a corpus split's pairs, n drawn with a fixed seed: real text in every language."""
    from edge_xsent.data.corpus import read_pairs

    texts = sorted({t for p in read_pairs(data, split=split) for t in (p.a, p.b)})
    rng = np.random.default_rng(seed)
    return [texts[i] for i in sorted(rng.choice(len(texts), min(n, len(texts)), replace=False))]


def _steps(ranges: dict, k: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.asarray(ranges["min"][:k], dtype=np.float32), np.asarray(ranges["max"][:k], dtype=np.float32)
    return lo, np.maximum(hi - lo, 1e-9) / 255


def to_int8(vectors: np.ndarray, ranges: dict) -> np.ndarray:
    """Codes in -128..127 for the first vectors.shape[1] dimensions (values outside the range clip)."""
    lo, step = _steps(ranges, vectors.shape[-1])
    return np.clip(np.rint((vectors - lo) / step) - 128, -128, 127).astype(np.int8)


def from_int8(codes: np.ndarray, ranges: dict) -> np.ndarray:
    """float32 vectors back from int8 codes (the centre of each code's bucket)."""
    lo, step = _steps(ranges, codes.shape[-1])
    return ((codes.astype(np.float32) + 128) * step + lo).astype(np.float32)


def to_ubinary(vectors: np.ndarray) -> np.ndarray:
    """One bit a dimension (1 where positive), packed: (n, ceil(dim / 8)) uint8."""
    return np.packbits(vectors > 0, axis=-1)


def from_ubinary(bits: np.ndarray, dim: int) -> np.ndarray:
    """±1 float32 vectors: their dot product is dim - 2 x Hamming distance, so cosine ranks as bits do."""
    return np.unpackbits(bits, axis=-1, count=dim).astype(np.float32) * 2 - 1


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) numbers of differing bits between packed rows of a and of b."""
    return np.unpackbits(a[:, None, :] ^ b[None, :, :], axis=-1).sum(-1, dtype=np.int64)


def truncate(vectors: np.ndarray, dimensions: int | None, renormalise: bool) -> np.ndarray:
    if dimensions is None:
        return vectors
    out = vectors[..., :dimensions]
    if renormalise:
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out


def check_request(precision: str, dimensions: int | None, dim: int, normalize: bool) -> None:
    if precision not in OUTPUT_PRECISIONS:
        raise UserError(f"unknown precision {precision!r} for encode(); choose from {', '.join(OUTPUT_PRECISIONS)} "
                        "(the model's own precision is chosen at Encoder.load)")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, (int, np.integer))
                                   or not 1 <= dimensions <= dim):
        raise UserError(f"dimensions must be an int in 1..{dim}, got {dimensions!r}")
    if precision != "float32" and not normalize:
        raise UserError(f"precision={precision!r} quantises unit vectors: leave normalize=True")


def columns(precision: str, dimensions: int) -> int:
    """Width of one stored vector: a column a dimension, or a byte per 8 of them for packed bits."""
    return -(-dimensions // 8) if precision == "ubinary" else dimensions


def bytes_per_vector(precision: str, dimensions: int) -> int:
    return columns(precision, dimensions) * OUTPUT_DTYPES[precision].itemsize
