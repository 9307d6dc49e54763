"""`Encoder`: one inference API over every format a model folder or bundle carries.

    enc = Encoder.load("runs/default/bundle")                 # auto: int8 ONNX if present
    enc = Encoder.load(path, backend="torch" | "onnx" | "torchscript", precision="fp32" | "int8")
    vecs = enc.encode(["Hello world", "Bonjour le monde"])   # (2, dim) float32, L2-normalised

Shape rules as in sentence-transformers: str -> (dim,), list -> (n, dim), [] -> (0, dim).
Batches are formed after sorting by length (less padding), and the original order is
restored. Checksums are verified at load. Never touches the network.
"""

from __future__ import annotations

import itertools
import numbers
import os
import re
import warnings
from pathlib import Path
from typing import IO, Callable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from edge_xsent.encode import bundle, compact

from edge_xsent import layout
from edge_xsent.inputs import as_path
from edge_xsent.encode.runtime import onnx_session
from edge_xsent.config import BACKENDS, PRECISIONS
from edge_xsent.errors import UserError
from edge_xsent.threads import set_torch_threads
from edge_xsent.encode.tokenizer import Tokenizer, pad_batch, readable_prefix  # sentencepiece only, no torch

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
# Models one name away (a path of that name, where one exists, wins). The default: the student of
# multilingual-e5-small that studies/quality-model's rule chose (4 blocks, every one of e5's pieces kept, 25 MB);
# "fast": 2 blocks of 256 trained from scratch, English + 7 languages, the default before it; "quality": the best
# student by the rule's `oog-m1`, too slow for its speed clause (its card says by how much).
DEFAULT_MODEL = RESOURCES / "default-model"
FAST_MODEL = RESOURCES / "fast-model"
QUALITY_MODEL = RESOURCES / "quality-model"
NAMED_MODELS = {"default": DEFAULT_MODEL, "fast": FAST_MODEL, "quality": QUALITY_MODEL}


def named_model(path: str | os.PathLike) -> Path | None:
    """The folder behind a model's name (`Encoder.load("fast")`), None for anything else."""
    key = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    return NAMED_MODELS.get(key) if isinstance(key, str) and not os.path.lexists(key) else None
# onnxruntime's SkipLayerNormalization fusion made the int8 model slower here: 15.3 ms of an
# 88 ms batch (32 x 32 tokens, 1 thread) against 4.8 ms for the plain Add + LayerNormalization
# it replaces (ORT profiler, onnxruntime 1.31, AVX-512 VNNI CPU). benchmarks/export_speed.py
# measures both side by side.
ORT_DISABLED = ["SkipLayerNormFusion"]
ONNX_FILES = {"int8": layout.ONNX_INT8, "int4": layout.ONNX_INT4, "fp32": layout.ONNX_FP32}  # precision -> file
Backend = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (B, T) ids, (B, T) mask -> (B, C)


def _torch_backend(files: bundle.ModelFiles, threads: int | None) -> Backend:
    path = files.folder
    if layout.float_weights(path) is None:
        raise UserError(f"{path} has no {layout.FILES['weights']} (fp32 weights) nor an int8 graph to derive "
                        "them from, for backend='torch': use backend='onnx', or load a model folder that has them")
    set_torch_threads(threads)
    model, _, _ = bundle.load_model(path, files=files)
    return _torch_run(model)


def _torch_run(model) -> Backend:
    """The model where its weights are (a GPU's model gets its batches there: a self-taught teacher's labels)."""
    import torch

    device = next(model.parameters()).device

    def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)).float().cpu().numpy()

    return run


def _onnx_backend(files: bundle.ModelFiles, threads: int | None, precision: str, session_options=None,
                  disabled_optimizers: Sequence[str] = ORT_DISABLED) -> Backend:
    path = files.folder
    file = path / ONNX_FILES[precision]
    if not file.exists():
        raise UserError(f"{file}: missing; export the bundle with `edge-xsent export {path} --int8`")
    sess = onnx_session(file, threads, session_options, disabled_optimizers, data=files.read(ONNX_FILES[precision]))

    def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]

    return run


def _probe(run: Backend, max_len: int, d_model: int, vocab_size: int, path: Path) -> None:
    """Two sentences of config.json's max_len through the graph at load: a config that does not fit
    the graph (more positions than it has, another width) fails here, named, not on the first long
    input nor blamed on a file checked later (calibration.json); the second reads ids spread over the whole
    table, both tiers of a tiered one, so a table that decodes to NaN or inf (its scales resealed) is refused."""
    ids = np.stack([np.ones(max_len), np.linspace(1, vocab_size - 1, max_len).round()]).astype(np.int64)
    try:
        out = run(ids, np.ones_like(ids))
    except Exception as e:  # onnxruntime raises its own exception types  # noqa: BLE001
        raise UserError(f"{path}: the ONNX graph fails on a probe of config.json's max_len {max_len} and ids up to its "
                        f"vocab_size {vocab_size} ({str(e).splitlines()[0][:200]}): the config does not fit the graph, "
                        "or a table in it is torn; re-export the model") from None
    if np.shape(out)[-1] != d_model:
        raise UserError(f"{path / layout.FILES['config']}: d_model {d_model}, but the ONNX graph gives vectors of "
                        f"{np.shape(out)[-1]} dimensions: the config does not belong to this model; re-export it")
    finite(out, path)


def finite(vectors: np.ndarray, path: Path | None) -> np.ndarray:
    """Vectors as they are, or an error: a NaN or inf from a model is its weights' fault (a table whose scales were
    changed and resealed), never an answer to pass on."""
    if not np.isfinite(vectors).all():
        raise UserError(f"{path or 'the model'}: its weights give vectors that are not finite numbers (NaN or inf): the "
                        "model is corrupt (a file changed and its manifest resealed); re-export or re-download it")
    return vectors


def _torchscript_backend(files: bundle.ModelFiles, threads: int | None) -> Backend:
    import io

    import torch

    path = files.folder
    file = path / layout.TS_FROZEN
    if not file.exists():
        raise UserError(f"{file}: missing; export the bundle with `edge-xsent export {path}`")
    set_torch_threads(threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(io.BytesIO(files.read(layout.TS_FROZEN)), map_location="cpu")

    def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(ids), torch.from_numpy(mask)).float().numpy()

    return run


def _auto_backend(path: Path, precision: str | None) -> tuple[str, str | None]:
    """What backend='auto' runs: the int8 ONNX model, else the fp32 weights; an asked precision is
    honoured (fp32: the fp32 ONNX graph, else float PyTorch weights: the folder's own, or derived from
    its int8 graph where it ships none, computed in fp32) or refused, never swapped."""
    if precision is None:
        return ("onnx", "int8") if (path / layout.ONNX_INT8).exists() else ("torch", None)
    if (path / ONNX_FILES[precision]).exists():
        return "onnx", precision
    if precision == "fp32" and layout.float_weights(path):
        return "torch", None
    raise UserError(f"{path} has no {precision} model ({ONNX_FILES[precision]}): export one with "
                    f"`edge-xsent export {path} --out BUNDLE`" + (" --int4" if precision == "int4" else ""))


def backend_name(backend: str, precision: str | None = None) -> str:
    """The one name of a runnable format, used by `Encoder`, the bench and the export's parity
    report alike: torch, torchscript, onnx-fp32, onnx-int8, onnx-int4."""
    return f"onnx-{precision or 'int8'}" if backend == "onnx" else backend


def parse_backend_name(name: str) -> tuple[str, str | None]:
    """`onnx-int8` -> ("onnx", "int8"); `torch` -> ("torch", None)."""
    backend, _, precision = name.partition("-")
    return backend, precision or None


class Encoder:
    def __init__(self, run: Backend, tokenizer: Tokenizer, config: dict, path: Path | None, backend: str,
                 weights_file: Path | None = None):
        self._run, self.tokenizer, self.config, self.path, self.backend = run, tokenizer, config, path, backend
        self.weights_file = weights_file  # the file `load` runs, for size figures
        self.max_len = config["model"]["max_len"]
        self.dim = config["model"]["d_model"]
        self.langs = config.get("langs", [])
        self.ranges: dict | None = None  # calibrated int8 ranges of the output vectors (compact.py)

    @classmethod
    def from_model(cls, model, tokenizer: Tokenizer, config: dict | None = None) -> "Encoder":
        """An encoder over a DualEncoder in memory (just trained, debiased, or built by hand),
        as model2vec's StaticModel(vectors, tokenizer, config); nothing is read from disk."""
        model.eval()
        config = config or {"model": model.cfg.to_dict(), "langs": []}
        return cls(_torch_run(model), tokenizer, config, None, "torch")

    @classmethod
    def load(cls, path: str | Path | None = None, backend: str = "auto", precision: str | None = None,
             threads: int | None = None, verify: bool = True, session_options=None,
             disabled_optimizers: Sequence[str] = ORT_DISABLED, trust_code: bool = False) -> "Encoder":
        """Open a model folder or bundle; no path = the default model shipped in the package.
        `precision` (onnx only): "int8" (default), "int4" or "fp32". onnx only too: an
        `onnxruntime.SessionOptions`, and the graph optimisers to leave off (by default the
        SkipLayerNormalization fusion, slower here: `disabled_optimizers=()` turns all on).
        Loading runs no code from the folder: backend="torchscript" (a pickle-based format that can
        carry code) is refused unless the caller trusts the folder's author (`trust_code=True`)."""
        return cls._load(path, backend, precision, threads, verify, session_options, disabled_optimizers, trust_code)

    @classmethod
    def _load(cls, path, backend="auto", precision=None, threads=None, verify=True, session_options=None,
              disabled_optimizers=ORT_DISABLED, trust_code=False, calibration: bool = True) -> "Encoder":
        """load(); without `calibration` the folder's calibration.json is neither read nor checked (calibrate
        replaces it: a torn one from an older, interrupted calibrate is repaired, not refused)."""
        path = _check_load_args(path, backend, precision, threads, verify, session_options, disabled_optimizers,
                                trust_code)
        skip = [] if calibration else [compact.CALIBRATION]
        files = bundle.ModelFiles(path, verify, expected=[layout.FILES["config"], layout.FILES["tokenizer"]], skip=skip)
        config, cfg = files.config()
        tok = bundle.read_tokenizer(files)
        if backend == "auto":
            backend, precision = _auto_backend(path, precision)
        elif backend != "onnx" and precision not in (None, "fp32"):
            raise UserError(f"backend={backend!r} runs fp32 weights; precision={precision!r} needs backend='onnx' "
                            "(or 'auto')")
        weights = {"torch": layout.FILES["weights"], "torchscript": layout.TS_FROZEN,
                   "onnx": ONNX_FILES[precision or "int8"]}[backend]
        if files.manifest is not None:  # every file the backend reads was checked
            bundle.require_listed(files.manifest, [f for f in _backend_files(path, backend, weights)
                                                   if (path / f).exists()], path)
        if backend == "torch":
            run = _torch_backend(files, threads)
        elif backend == "onnx":
            run = _onnx_backend(files, threads, precision or "int8", session_options, disabled_optimizers)
            _probe(run, cfg.max_len, cfg.d_model, cfg.vocab_size, path)
        else:
            run = _torchscript_backend(files, threads)
        precision = precision or "int8"  # what an onnx backend ran; unused by the others
        enc = cls(run, tok, config, path, backend_name(backend, precision), path / weights)
        if calibration and (path / compact.CALIBRATION).exists():
            enc.ranges = compact.load_calibration(path, enc.dim, files.read(compact.CALIBRATION))
        files.finish()
        return enc

    def calibrate(self, sentences: Sequence[str], source: str = "given sentences") -> dict:
        """Measure the int8 ranges of this model's unit vectors on real sentences (a few thousand,
        every language the index will hold) and keep them: `encode(precision="int8")` uses them;
        `compact.save_calibration(folder, enc.ranges)` stores them with the model."""
        self.ranges = compact.calibrate(self.encode(list(sentences)), source)
        return self.ranges

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        return tokenize(self.tokenizer, sentences, self.max_len)

    def encode(self, sentences: str | Sequence[str], batch_size: int = 32, normalize: bool = True,
               show_progress: bool = False, precision: str = "float32", dimensions: int | None = None,
               **unknown) -> np.ndarray:
        """str -> (dim,); list of str -> (n, dim) float32, in input order. An empty text (nothing
        left after normalisation) embeds to the zero vector: cosine 0 with everything.
        Compact output for indexes (compact.py): `dimensions=k` keeps the first k; `precision`
        "int8" gives int8 codes (needs the model's calibration), "ubinary" packed sign bits."""
        if unknown:
            raise UserError(f"encode() got unknown argument(s) {', '.join(sorted(unknown))}; valid: sentences, "
                            "batch_size, normalize, show_progress, precision, dimensions")
        compact.check_request(precision, dimensions, self.dim, normalize)
        if precision == "int8" and self.ranges is None:
            raise UserError(f"precision='int8' needs calibrated ranges and {self.path or 'this in-memory model'} has "
                            "none: run `edge-xsent calibrate MODEL` (or enc.calibrate(sentences))")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise UserError(f"batch_size must be an int >= 1, got {batch_size!r}")
        for name, flag in (("normalize", normalize), ("show_progress", show_progress)):
            if not isinstance(flag, (bool, np.bool_)):
                raise UserError(f"{name} must be True or False, got {flag!r}")
        single = isinstance(sentences, str)
        items = _check_items([sentences] if single else sentences)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if items:
            ids = self.tokenize(items)
            lengths = [len(x) for x in ids]
            order = np.argsort([-n for n in lengths], kind="stable")
            with tqdm(total=len(order), disable=not show_progress, desc="encode", unit="sentence") as bar:
                for idx in batches(order, lengths, batch_size):
                    out[idx] = self._embed([ids[i] for i in idx])
                    bar.update(len(idx))
            if normalize:  # in place: a copy would double the peak of a large call
                out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        out = compact.truncate(out, dimensions, renormalise=normalize and precision == "float32")
        if precision == "int8":
            out = compact.to_int8(out, self.ranges)
        elif precision == "ubinary":
            out = compact.to_ubinary(out)
        return out[0] if single else out

    def embed_ids(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The model alone on padded token ids (B, T) and their 0/1 mask: raw (B, dim) vectors,
        not normalised. What benchmarks time when they leave the tokenizer out."""
        return self._run(ids, mask)

    def _embed(self, batch: list[list[int]]) -> np.ndarray:
        ids, mask = pad_batch(batch)
        return finite(self._run(ids, mask), self.path)


MAX_BATCH_TOKENS = 32_768  # padded tokens per onnxruntime call: 256 sentences of 128 (about 1 GB at e5-small's size)


def tokenize(tokenizer: Tokenizer, sentences: Sequence[str], max_len: int) -> list[list[int]]:
    """The ids a model reading `max_len` of them sees: a longer sentence is cut, with a warning. A function of
    the tokenizer alone, so a caller that needs only ids (an export's calibration) opens no session."""
    ids = tokenizer.encode([readable_prefix(s, max_len) for s in sentences])
    long = sum(len(x) > max_len for x in ids)
    if long:
        warnings.warn(f"{long} sentence(s) longer than {max_len} tokens were truncated", stacklevel=4)
    return [tokenizer.truncate(x, max_len) for x in ids]


def batches(order: np.ndarray, lengths: list[int], batch_size: int) -> Iterator[np.ndarray]:
    """`order` (longest first) in runs of `batch_size`, each cut further to MAX_BATCH_TOKENS padded
    tokens: the memory guard, so batch_size=100000 encodes in bounded memory instead of failing inside
    onnxruntime (with per-tensor int8 activations a vector depends a little on its batch, as for any batch_size)."""
    start = 0
    while start < len(order):
        longest = max(1, lengths[order[start]])
        rows = max(1, min(batch_size, MAX_BATCH_TOKENS // longest))
        yield order[start: start + rows]
        start += rows


def _check_load_args(path, backend, precision, threads, verify, session_options, disabled_optimizers,
                     trust_code) -> Path:
    """The arguments of `Encoder.load`, checked before anything is read; the model folder's path."""
    from edge_xsent.threads import check_threads

    path = DEFAULT_MODEL if path is None else named_model(path) or path
    if path in NAMED_MODELS.values() and not (path / layout.MANIFEST).exists():
        raise UserError(f"no shipped model at {path}; reinstall edge-xsent, or pass the path of a model folder or bundle")
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise UserError(f"Encoder.load(path): a folder path (str or pathlib.Path) is needed, got {type(path).__name__}")
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if precision is not None and precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    check_threads(threads)
    for name, flag in (("verify", verify), ("trust_code", trust_code)):
        if not isinstance(flag, bool):
            raise UserError(f"Encoder.load({name}=...): True or False, got {flag!r}")
    if backend == "torchscript" and not trust_code:
        raise UserError("backend='torchscript' loads a pickle-based file that can run code on load; a model folder "
                        "is data, so pass trust_code=True only for a folder you exported yourself (or use the "
                        "default backend: ONNX, which runs no code)")
    if session_options is not None:
        import onnxruntime as ort

        if not isinstance(session_options, ort.SessionOptions):
            raise UserError(f"session_options: an onnxruntime.SessionOptions is needed, got {type(session_options).__name__}")
    if isinstance(disabled_optimizers, (str, bytes)) or not isinstance(disabled_optimizers, (list, tuple)) \
            or not all(isinstance(o, str) for o in disabled_optimizers):
        raise UserError(f"disabled_optimizers: a list of optimiser names (str) is needed, got {disabled_optimizers!r}; "
                        "pass () to turn every optimiser on")
    return bundle.resolve_model_dir(as_path(path, "Encoder.load(path)"))  # a PathLike of bytes, decoded; no NUL


def _backend_files(path: Path, backend: str, weights: str) -> list[str]:
    """The files a backend reads besides config.json and tokenizer.model."""
    if backend != "torch":
        return [weights]
    own = layout.float_weights(path) == "own"
    return [layout.FILES["weights"] if own else layout.ONNX_INT8, layout.FILES["extra_weights"]]


def _check_items(sentences) -> list[str]:
    if isinstance(sentences, (bytes, bytearray)):
        raise UserError("encode() takes str or a list of str, got bytes: decode it first, e.g. text.decode('utf-8')")
    if isinstance(sentences, dict):
        raise UserError("encode() got a dict: pass list(d.values()) or list(d.keys()), whichever holds the text")
    if isinstance(sentences, (set, frozenset)):
        raise UserError("encode() got a set, which has no order to match vectors to: pass sorted(s) or a list")
    try:
        items = list(sentences)
    except TypeError as e:
        raise UserError(f"encode() takes str or a list of str, got {type(sentences).__name__}") from e
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise UserError(f"encode(): item {i} is {type(s).__name__}, not str; convert it with str() or drop it")
        if _SURROGATE.search(s):
            raise UserError(f"encode(): item {i} holds a lone surrogate ({_SURROGATE.search(s).group()!r}), not "
                            "valid Unicode: bytes decoded with errors='surrogateescape'? decode them as UTF-8, "
                            "e.g. with errors='replace'")
    return items


# Lone surrogates: what undecodable bytes become under errors="surrogateescape" (a POSIX-locale stdin).
_SURROGATE = re.compile("[\ud800-\udfff]")


def calibrate_folder(folder: str | Path, data: str = "sample", split: str = "valid", n: int = 4000) -> dict:
    """Measure and store a saved model's int8 ranges. calibration.json is sealed (its own checksum), so storing
    it is one rename: a reader sees the old file or the new, and a calibrate killed anywhere leaves a loadable
    folder; its manifest entry is refreshed after, and a stale one is not read (bundle.check_file)."""
    from edge_xsent.paths import owning

    if shipped := named_model(folder):  # never a folder of that name here, nor the installed package's files
        raise UserError(f"{folder} names a model shipped inside the package ({shipped}), already calibrated; calibrate "
                        f"writes into a model's folder. To calibrate it on your sentences, copy it first: cp -r "
                        f"{shipped} my-model && edge-xsent calibrate my-model --data YOUR_CORPUS")
    folder = bundle.resolve_model_dir(folder)
    enc = Encoder._load(folder, calibration=False)  # every other file checked; the old calibration is replaced
    ranges = enc.calibrate(compact.calibration_sentences(data, split, n), f"{data} {split} split")
    with owning(folder):  # the folder's own maintenance: its calibration and manifest, nothing else
        compact.save_calibration(folder, ranges)
        bundle.refresh_manifest(folder, [compact.CALIBRATION])
    return ranges


def encode_file(enc: Encoder, source: str | Path | IO[str], out: str | Path, batch_size: int = 32,
                normalize: bool = True, chunk: int = 10_000, show_progress: bool = True, precision: str = "float32",
                dimensions: int | None = None) -> tuple[int, int]:
    """Embed text (a file or an open text stream, one sentence per line) into a .npy file in
    one pass with bounded memory: each chunk's vectors go to an anonymous temporary file (gone
    when closed, even on a crash), then the .npy header and the vectors are written under a
    temporary name renamed into place. Plain writes, not a memory map: a map would count the
    whole output as resident."""
    import shutil
    import tempfile

    from edge_xsent.atomic import SPACE_ERRORS, atomic_write

    compact.check_request(precision, dimensions, enc.dim, normalize)
    dtype = compact.OUTPUT_DTYPES[precision]
    width = compact.columns(precision, dimensions or enc.dim)
    lines = _lines(source)
    n = 0
    bar = tqdm(disable=not show_progress, unit=" sent", desc="encode", mininterval=1)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    try:
        # The body waits on the output's own disk, unnamed (a killed run leaves nothing behind).
        with tempfile.TemporaryFile(dir=Path(out).parent, buffering=0) as body:
            try:
                while batch := list(itertools.islice(lines, chunk)):
                    vecs = enc.encode(batch, batch_size=batch_size, normalize=normalize, precision=precision,
                                      dimensions=dimensions)
                    body.write(vecs.astype(dtype).tobytes())
                    n += len(batch)
                    bar.update(len(batch))
            finally:
                bar.close()  # ends the bar's line, so an error starts on a line of its own
            body.seek(0)
            with atomic_write(out, "wb") as f:
                np.lib.format.write_array_header_1_0(f, {"descr": dtype.str, "fortran_order": False,
                                                         "shape": (n, width)})
                shutil.copyfileobj(body, f, 1 << 20)
    except OSError as e:  # a full disk fails on the body or the output: either way, the output's error
        if e.errno in SPACE_ERRORS:
            raise OSError(e.errno, e.strerror, str(out)) from None
        raise
    return n, width


def _lines(source: str | Path | IO[str]) -> Iterator[str]:
    if isinstance(source, (str, Path)):
        from edge_xsent.data.corpus import read_lines

        return (line for _, line in read_lines(Path(source)))
    return _stream_lines(source)


def _stream_lines(source: IO[str]) -> Iterator[str]:
    """Lines of an open text stream (stdin): a leading BOM dropped, undecodable bytes a clear error."""
    from edge_xsent.data.corpus import bounded_lines

    n = 0
    try:
        for n, line in bounded_lines(source, name="stdin"):
            line = line.rstrip("\r\n")
            if _SURROGATE.search(line):  # a stdin decoded with surrogateescape lets bad bytes through
                raise UserError(f"line {n} of the input is not valid UTF-8; re-encode it as UTF-8")
            yield line.removeprefix("\ufeff") if n == 1 else line
    except UnicodeDecodeError as e:
        raise UserError(f"input line {n + 1}: not valid UTF-8 ({e.reason}); re-encode the text as UTF-8") from e
