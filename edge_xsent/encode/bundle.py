"""The self-describing model folder: the writer and the loader of the layout in layout.py.

Format 1 (before the Hugging Face layout) kept every weight, under edge-xsent's names, in
model.safetensors; it still loads.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

from edge_xsent import __version__
from edge_xsent.atomic import atomic_dir, save_safetensors
from edge_xsent.config import portable
from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, open_regular, parse_json, read_bytes, read_json
from edge_xsent.encode.compact import sealed
from edge_xsent.layout import (CALIBRATION, FILES, FORMAT, FORMAT_VERSION, MANIFEST, ONNX_FP32, ONNX_INT4, ONNX_INT8,
                               float_weights)

if TYPE_CHECKING:  # torch is imported only where weights are read or written: ONNX users need none of it
    from edge_xsent.config import EncoderConfig
    from edge_xsent.encode.model import DualEncoder
    from edge_xsent.encode.tokenizer import Tokenizer


def sha256(path: Path) -> str:
    """A regular file's SHA-256, streamed (a FIFO or device is refused, never read: inputs.open_regular)."""
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_records(folder: Path) -> dict:
    """SHA-256 and size of every file in the folder (recursively), the manifest itself left out."""
    return {str(p.relative_to(folder)): {"sha256": sha256(p), "bytes": p.stat().st_size}
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def write_manifest(folder: Path, extra: dict | None = None) -> None:
    """Checksums of every file in the folder (recursively), written last."""
    files = file_records(folder)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "edge_xsent_version": __version__,
                "files": files, **(extra or {})}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def refresh_manifest(folder: Path, changed: list[str]) -> None:
    """Checksums again after `changed` files were written into a saved folder, the manifest's other
    records kept; every other file is verified first, so a corrupt folder is never blessed."""
    from edge_xsent.atomic import atomic_write

    old = verify(folder, skip=changed)
    extra = {k: v for k, v in old.items() if k not in ("format", "format_version", "edge_xsent_version", "files")}
    files = file_records(folder)  # before the temporary manifest exists in the folder
    with atomic_write(folder / MANIFEST) as f:
        f.write(json.dumps({**{k: old[k] for k in ("format", "format_version", "edge_xsent_version")}, "files": files,
                            **extra}, indent=2) + "\n")


def verify(folder: Path, expected: list[str] | None = None, skip: list[str] = ()) -> dict:
    """Check the manifest and the checksum of each file; raise UserError naming the bad file."""
    manifest = check_manifest(Path(folder), expected, skip)
    for name in manifest["files"]:
        if name not in skip:
            check_file(Path(folder), manifest, name)
    return manifest


def check_manifest(folder: Path, expected: list[str] | None = None, skip: list[str] = ()) -> dict:
    """Everything `verify` checks but the files' checksums: the manifest itself, the files a loader
    needs listed, nothing unlisted, every listed file a regular file inside the folder."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such model folder")
    mpath = folder / MANIFEST
    if not mpath.exists() and not mpath.is_symlink():
        raise UserError(f"{folder} is not an edge-xsent model folder: {MANIFEST} is missing "
                        f"(expected {', '.join(FILES.values())}, found {', '.join(sorted(p.name for p in folder.iterdir())) or 'nothing'})")
    manifest = parse_json(read_bytes(mpath, CAPS["json"], "manifest"), mpath, "manifest")
    if not isinstance(manifest, dict):
        raise UserError(f"{mpath}: corrupt manifest (a JSON object expected, found {type(manifest).__name__})")
    check_version(manifest, mpath)
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise UserError(f"{mpath}: corrupt manifest (field 'files' must map file names to checksums)")
    require_listed(manifest, expected or [], folder)
    sealed_calibration = CALIBRATION not in skip and CALIBRATION not in files and _sealed_calibration(folder)
    refuse_unlisted(folder, set(files) | {MANIFEST, *skip} | ({CALIBRATION} if sealed_calibration else set()))
    for name, info in files.items():
        if name in skip:
            continue
        if not isinstance(name, str) or "\0" in name or name.startswith("/"):
            raise UserError(f"{mpath}: corrupt manifest (file name {name!r} is not a relative path)")
        path = folder / name
        if not isinstance(info, dict) or not isinstance(info.get("bytes"), int) or not isinstance(info.get("sha256"), str):
            raise UserError(f"{mpath}: corrupt manifest (file {name!r} needs 'bytes' and 'sha256')")
        if not path.resolve().is_relative_to(folder.resolve()):
            raise UserError(f"{mpath}: file {name!r} points outside the model folder")
        if not path.exists():
            raise UserError(f"{path}: missing (listed in the manifest); the model folder is incomplete")
        if not path.is_file():  # a FIFO or device would hang or feed the reader anything
            raise UserError(f"{path}: not a regular file; a model folder holds only files")
    return manifest


def _sealed_calibration(folder: Path) -> bool:
    """The folder's calibration.json carries its own checksum (compact.save_calibration), checked here."""
    path = folder / CALIBRATION
    return path.is_file() and not path.is_symlink() and sealed(read_bytes(path, CAPS["json"], "calibration"), path)


def check_file(folder: Path, manifest: dict, name: str, data: bytes | None = None) -> None:
    """One listed file against its size and SHA-256: `data` when the caller has read it, else streamed. A sealed
    calibration.json is checked by its own checksum, whatever the manifest says (a calibrate is one rename)."""
    if name == CALIBRATION:
        data = data if data is not None else read_bytes(folder / name, CAPS["json"], "calibration")
        if sealed(data, folder / name):
            return
        require_listed(manifest, [name], folder)
    path, info = folder / name, manifest["files"][name]
    size = len(data) if data is not None else path.stat().st_size
    digest = hashlib.sha256(data).hexdigest() if data is not None else sha256(path)
    if size != info["bytes"] or digest != info["sha256"]:
        raise UserError(f"{path}: checksum mismatch, the file is corrupt or was changed after saving; "
                        "re-export or re-download the model")


class ModelFiles:
    """A model folder read in one pass (issue 57): the manifest checked once, each file read at most
    once and checked as it is read, its bytes handed to whoever parses them (onnxruntime,
    SentencePiece, safetensors and onnx all take bytes), and `finish()` checking the listed files no
    reader needed, streamed. `verify=False` reads without checking."""

    def __init__(self, folder: Path, verify: bool = True, expected: list[str] = (), skip: list[str] = ()):
        self.folder, self.skip = Path(folder), list(skip)  # skip: files the caller neither reads nor trusts
        self.manifest = check_manifest(self.folder, list(expected), self.skip) if verify else None
        self._data: dict[str, bytes] = {}
        self._config: tuple[dict, "EncoderConfig"] | None = None

    def read(self, name: str) -> bytes:
        if name not in self._data:
            path = self.folder / name
            if self.manifest is not None and name != CALIBRATION:  # a sealed calibration need not be listed
                require_listed(self.manifest, [name], self.folder)
            try:
                data = read_bytes(path, what="file of the model folder")
            except FileNotFoundError:
                raise UserError(f"{path}: missing; the model folder is incomplete (re-export or re-download it)") from None
            if self.manifest is not None:
                check_file(self.folder, self.manifest, name, data)
            self._data[name] = data
        return self._data[name]

    def config(self) -> tuple[dict, "EncoderConfig"]:
        """config.json and its validated EncoderConfig, parsed once."""
        if self._config is None:
            self._config = parse_config(self.read(FILES["config"]), self.folder / FILES["config"])
        return self._config

    def finish(self) -> None:
        """Check a graph's external data (onnxruntime and onnx read it beside the graph themselves, never through
        `read`), then let the bytes go. What no reader read (the card, tokenizer.json, the other graphs) is not
        hashed: it cannot change this load's vectors (bundle.verify checks every file)."""
        if self.manifest is not None:
            for name in self.manifest["files"]:
                if name not in self._data and is_external_data(name):
                    check_file(self.folder, self.manifest, name)
        self._data.clear()


def is_external_data(name: str) -> bool:
    """A listed file beside the ONNX graphs that is none of them: a graph's external data."""
    return name.startswith(f"{Path(ONNX_INT8).parent.as_posix()}/") and name not in (ONNX_FP32, ONNX_INT8, ONNX_INT4)


def refuse_unlisted(folder: Path, listed: set[str]) -> None:
    """A folder is exactly its manifest: a file it does not list was never checked (an ONNX graph's
    external data, weights that would override the graph's), a link may lead out of the folder and a
    FIFO or device would hang or feed a reader anything; each is refused, named."""
    import os
    import stat

    root = folder.resolve()
    for parent, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            path = Path(parent) / name
            rel = path.relative_to(folder).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) and not _inside(path, root):
                raise UserError(f"{path}: a link that leads out of the model folder (or loops); a model folder holds "
                                "its own files")
            if stat.S_ISDIR(mode) or (rel not in listed and is_temporary(name)):
                continue
            if not stat.S_ISREG(path.stat().st_mode if path.exists() else mode):
                raise UserError(f"{path}: not a regular file; a model folder holds only files")
            if rel not in listed:
                raise UserError(f"{path}: not listed in {MANIFEST}, so it cannot be checked; remove it, or re-export "
                                "the model if it belongs there")


def _inside(link: Path, root: Path) -> bool:
    try:
        return link.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):  # a loop, or a link to nothing
        return False


def is_temporary(name: str) -> bool:
    """A writer's temporary (atomic.atomic_write: `.NAME.PID.RANDOM.tmp`), such as a killed
    `calibrate` leaves: never read, so it does not make the folder unloadable."""
    import re

    return re.fullmatch(r"\..+\.\d+\.[A-Za-z0-9_]+\.tmp", name) is not None


def require_listed(manifest: dict, names: list[str], folder: Path) -> None:
    """Every file a loader is about to read must be in the manifest (so its checksum was checked)."""
    for name in names:
        if name not in manifest.get("files", {}):
            raise UserError(f"{folder}: the manifest lists no {name}, so it cannot be checked; re-export the model")


def check_version(meta: dict, where: Path) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise UserError(f"{where}: not an edge-xsent model (format {meta.get('format') if isinstance(meta, dict) else None!r})")
    v = meta.get("format_version")
    if isinstance(v, bool) or not isinstance(v, int):
        raise UserError(f"{where}: format_version {v!r} is not a whole number; the file is corrupt")
    if v > FORMAT_VERSION:
        raise UserError(f"{where}: model format version {v} is newer than this edge-xsent supports "
                        f"({FORMAT_VERSION}); upgrade with `pip install -U edge-xsent`")


def save_model(folder: Path, model: "DualEncoder", tokenizer: "Tokenizer", langs: list[str], training: dict) -> None:
    """Write the model folder atomically: a crash leaves the previous folder untouched."""
    import torch

    from edge_xsent.encode import hf
    model = getattr(model, "module", model)
    cfg = model.cfg
    with atomic_dir(folder) as tmp:
        config = {**hf.bert_config(cfg), "format": FORMAT, "format_version": FORMAT_VERSION,
                  "edge_xsent_version": __version__, "model": cfg.to_dict(), "langs": langs, "pooling": "mean",
                  "normalization": tokenizer.normalization}
        (tmp / FILES["config"]).write_text(json.dumps(config, indent=2) + "\n")
        state = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
        bert, extra = hf.to_bert(state, cfg)
        save_safetensors(bert, tmp / FILES["weights"], metadata={"format": "pt"})  # "pt": transformers requires it
        save_safetensors(extra, tmp / FILES["extra_weights"], metadata={"format": FORMAT})
        tokenizer.save(tmp / FILES["tokenizer"])
        hf.write_hf_files(tmp, cfg, tokenizer, extra.get("lang_basis"))
        info = portable({**training, "python": platform.python_version(), "torch": torch.__version__})
        (tmp / FILES["training"]).write_text(json.dumps(info, indent=2, default=str) + "\n")
        write_manifest(tmp)


def resolve_model_dir(path: str | Path) -> Path:
    """A model folder or bundle as given, or the `model/` folder inside a training run's output. A path the
    system cannot look at (too long, a link loop) is a UserError naming it, as every input's is."""
    from edge_xsent.inputs import os_error

    path = Path(path)
    try:
        inside = path.is_dir() and not (path / FILES["config"]).exists() and (path / "model" / FILES["config"]).exists()
    except OSError as e:
        raise os_error(e, path) from None
    return path / "model" if inside else path


def read_training(folder: Path) -> dict:
    """training.json of a model folder (how it was made), {} if the folder has none."""
    path = Path(folder) / FILES["training"]
    from edge_xsent.inputs import read_json

    if not path.exists():
        return {}
    return read_json(path, what="training.json")  # bounded: size, depth, a FIFO refused


def read_config(folder: Path) -> dict:
    path = Path(folder) / FILES["config"]
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise UserError(f"{path}: missing; is {folder} a model folder?") from e
    return parse_config(data, path)[0]


def parse_config(data: bytes, path: Path) -> tuple[dict, "EncoderConfig"]:
    """config.json's bytes -> (the whole file, its validated EncoderConfig); corrupt is a UserError."""
    from edge_xsent.config import EncoderConfig

    from edge_xsent.inputs import parse_json

    config = parse_json(data, path)  # bounded depth: a config nested 100,000 deep is one error, not a RecursionError
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a JSON object; the file is corrupt")
    check_version(config, path)
    if not isinstance(config.get("model"), dict):
        raise UserError(f"{path}: field 'model' (the encoder's settings) is missing or not an object; the file is corrupt")
    try:
        return config, EncoderConfig.from_dict(config["model"])
    except (UserError, TypeError) as e:
        raise UserError(f"{path}: {e}") from None


def load_model(folder: str | Path, verify_checksums: bool = True,
               files: ModelFiles | None = None) -> tuple["DualEncoder", "Tokenizer", dict]:
    """The folder's DualEncoder (eval mode), tokenizer and config; through `files` when the caller
    has the folder open already (Encoder.load), so nothing is read twice."""
    from edge_xsent.encode.model import DualEncoder

    folder = Path(folder)
    derived = float_weights(folder) == "derived"
    own = files is None
    if own:
        files = ModelFiles(folder, verify_checksums,
                           expected=[FILES["config"], ONNX_INT8 if derived else FILES["weights"], FILES["tokenizer"]])
    config, cfg = files.config()
    model = DualEncoder.for_weights(cfg)
    state = read_state(files, config, cfg)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shapes differ: config.json's d_model, max_len or vocab_size is not the weights'
        first = str(e).split("\n")[1].strip() if "\n" in str(e) else str(e)
        raise UserError(f"{folder / FILES['config']}: its sizes do not match the weights ({first})") from None
    model.init_missing(missing)
    if derived:  # no generative head beside the graph: inference does not need it, training starts it afresh
        missing = [k for k in missing if not k.startswith("head")]
    if missing or unexpected:
        raise UserError(f"{folder / FILES['weights']}: weights do not match config.json "
                        f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.eval()
    if derived:
        check_derived(model, folder / ONNX_INT8, files.read(ONNX_INT8), derived_bar(files.manifest))
    tokenizer = read_tokenizer(files)
    if tokenizer.vocab_size != model.cfg.vocab_size:
        raise UserError(f"{folder}: tokenizer has {tokenizer.vocab_size} pieces but the model expects {model.cfg.vocab_size}")
    if own:
        files.finish()
    return model, tokenizer, config


def read_tokenizer(files: ModelFiles) -> "Tokenizer":
    """tokenizer.model, with the folder's tokenizer_rules.json where it has one (a student's)."""
    from edge_xsent.encode.tokenizer import RULES_FILE, Tokenizer

    rules = files.read(RULES_FILE) if (files.folder / RULES_FILE).exists() else None
    return Tokenizer.from_bytes(files.read(FILES["tokenizer"]), files.folder / FILES["tokenizer"], rules)


DERIVED_MIN_COSINE = 0.999  # the shipped default gives 0.99986 at worst
DERIVED_MARGIN = 0.005


def derived_bar(manifest: dict | None) -> float:
    """How close float weights read from the int8 graph must compute to it: DERIVED_MIN_COSINE, or the export's own
    recorded int8-to-fp32 minimum less DERIVED_MARGIN where that is lower (a student's per-row int8 graph: 0.987
    on real sentences, so its dequantised weights cannot reach 0.999); an altered graph falls far below either."""
    recorded = ((manifest or {}).get("parity") or {}).get("formats", {}).get("onnx-int8", {}).get("cosine_min")
    return min(DERIVED_MIN_COSINE, recorded - DERIVED_MARGIN) if isinstance(recorded, float) else DERIVED_MIN_COSINE


def check_derived(model: "DualEncoder", graph: Path, data: bytes | None = None,
                  min_cosine: float = DERIVED_MIN_COSINE) -> None:
    """Float weights read out of an int8 graph must compute what the graph computes: a graph whose
    nodes do something else than its initializers say (swapped blocks, an extra node on the output)
    would otherwise give torch and ONNX vectors that silently disagree. Measured on the shipped
    default: cosine 0.99986 at worst on this probe batch."""
    import numpy as np
    import torch

    from edge_xsent.encode.runtime import onnx_session

    cfg = model.cfg
    rng = np.random.default_rng(0)
    T = min(cfg.max_len, 32)
    ids = rng.integers(5, cfg.vocab_size, size=(16, T)).astype(np.int64)
    mask = (np.arange(T)[None, :] < rng.integers(1, T + 1, size=16)[:, None]).astype(np.int64)
    ids *= mask
    want = onnx_session(graph, threads=None, data=data).run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    with torch.inference_mode():
        got = model(torch.from_numpy(ids), torch.from_numpy(mask)).float().numpy()
    cos = (want * got).sum(1) / np.maximum(np.linalg.norm(want, axis=1) * np.linalg.norm(got, axis=1), 1e-12)
    if not cos.min() >= min_cosine:
        raise UserError(f"{graph}: the weights read from this graph do not compute what the graph computes (cosine "
                        f"{cos.min():.3f} on a probe batch, {min_cosine} needed): the graph was altered; re-export "
                        "or re-download the model")


def read_state(files: ModelFiles, config: dict, cfg: "EncoderConfig") -> dict:
    """DualEncoder's state dict from either format (1: our names; 2: BERT's + edge_xsent.safetensors),
    or from the int8 graph where the folder ships no float weights."""
    from edge_xsent.encode import hf

    folder = files.folder

    def load_tensors(name: str) -> dict:
        return load_safetensors(files.read(name), folder / name)

    extra = FILES["extra_weights"]
    if float_weights(folder) == "derived":  # one artifact: the int8 graph
        from edge_xsent.encode.int8_weights import state_from_int8

        derived = state_from_int8(folder / ONNX_INT8, cfg, files.read(ONNX_INT8))
        head = load_tensors(extra) if (folder / extra).exists() else {}
        return {**{k: v for k, v in head.items() if k not in derived}, **derived}  # the graph's weights win
    weights = load_tensors(FILES["weights"])
    if config["format_version"] == 1:
        return weights
    if not (folder / extra).exists():
        raise UserError(f"{folder / extra}: missing; the model folder is incomplete (re-export or re-download it)")
    try:
        return hf.from_bert(weights, load_tensors(extra), cfg)
    except KeyError as e:
        raise UserError(f"{folder / FILES['weights']}: no tensor {e} (not this model's weights)") from e


def is_bundle(folder: Path) -> bool:
    """An edge-xsent bundle: a manifest of this format that lists an exported graph."""
    try:
        manifest = read_json(folder / MANIFEST, what="manifest")
    except (OSError, ValueError):
        return False
    files = manifest.get("files") if isinstance(manifest, dict) else None
    return (isinstance(files, dict) and manifest.get("format") == FORMAT
            and any(f.startswith(("onnx/", "torchscript/")) for f in files))


def check_target(model_dir: Path, out: Path, force: bool) -> None:
    """What an export may replace: nothing but a previous bundle, and that only with `force`. A
    folder of the user's, a training run or the model being exported is never overwritten, nor a
    link or special file: the FOLDER rule (edge_xsent.paths), run last (the messages before it say more)."""
    from edge_xsent.paths import FOLDER

    if not out.is_symlink() and (out.is_file() or out.is_dir()):  # a link or special file: FOLDER's words
        _refuse_existing_target(model_dir, out, force)
    FOLDER.check(out, [model_dir])


def _refuse_existing_target(model_dir: Path, out: Path, force: bool) -> None:
    if not out.is_dir():
        raise UserError(f"--out {out} is a file; give the name of a new folder")
    if model_dir.resolve() == out.resolve() or model_dir.resolve().is_relative_to(out.resolve()):
        raise UserError(f"--out {out} holds the model being exported; choose a new folder")
    if not any(out.iterdir()):
        return
    if not is_bundle(out):
        raise UserError(f"--out {out} exists and is not an edge-xsent bundle: exporting would delete its files; "
                        "choose a new folder")
    if not force:
        raise UserError(f"--out {out} is a bundle already: pass --force to replace it")


# ----------------------------------------------------------------------------- the weights' format
def load_safetensors(data: bytes, where: str | os.PathLike) -> dict:
    """safetensors' bytes -> tensors (torch), the header checked first: its length must fit the file (a length of
    2**62 would ask for exabytes), and a corrupt file is a UserError naming `where`."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    header = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if not 0 < header <= len(data) - 8:
        raise UserError(f"{where}: not a safetensors file (header of {header} bytes in a file of {len(data)}); "
                        "the file is corrupt: re-export or re-download it")
    try:
        return load(data)
    except (SafetensorError, ValueError) as e:
        raise UserError(f"{where}: corrupt safetensors file ({str(e)[:200]}); re-export or re-download it") from None
