"""Carry a long training run to another machine through git.

A run's checkpoint folder lives outside the work tree and can be lost with the machine between
sittings; a run longer than a sitting then starts again from its `init`. `save` writes what it takes
to continue into a small folder that can be committed: the last checkpoint's weights (the encoder
and the teacher projection) without the optimizer's moments (two thirds of a checkpoint), the run's
tokenizer and its log. `restore` puts them back as the run's checkpoint, and the same
`edge-xsent train --config R` resumes at the carried step:

    edge-xsent carry save ~/edge-xsent-runs/long train/carry/long        # before the machine goes
    edge-xsent carry restore train/carry/long ~/edge-xsent-runs/long     # on the next one
    edge-xsent train --config R                                         # resumes at the carried step

What a carried run loses: Adam's moments (they start afresh at the carried step's learning rate) and
the best model saved before the carry (the run's model folder then holds the best validation after
it). Batches, masks and dropout are functions of the step, so the data seen is the same.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save as safetensors_bytes

from .atomic import atomic_write
from .errors import UserError
from .layout import FILES
from .train import checkpoint_path, load_checkpoint, save_checkpoint

WEIGHTS, META, LOG = "weights.safetensors", "carry.json", "log.jsonl"
PARTS = ("model", "teacher_proj")  # the checkpoint's tensors that are carried
CARRY_FORMAT = "edge-xsent-carry"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save(run: str | Path, dest: str | Path) -> dict:
    """Write `dest` from `run`'s last checkpoint; returns what carry.json records."""
    run, dest = Path(run).expanduser(), Path(dest).expanduser()
    ckpt_file = checkpoint_path(run)
    if not ckpt_file.exists():
        raise UserError(f"{run}: no checkpoint ({ckpt_file}) to carry; is this a training run's --out folder?")
    ckpt = load_checkpoint(ckpt_file)
    tensors = {f"{part}.{k}": v.detach().clone().contiguous()  # clone: tied weights share memory
               for part in PARTS for k, v in ckpt.get(part, {}).items()}
    dest.mkdir(parents=True, exist_ok=True)
    with atomic_write(dest / WEIGHTS, "wb") as f:
        f.write(safetensors_bytes(tensors))
    for name in (FILES["tokenizer"], LOG):
        if (run / name).exists():
            with atomic_write(dest / name, "wb") as f:
                f.write((run / name).read_bytes())
    meta = {"format": CARRY_FORMAT, "step": ckpt["step"], "config": ckpt["config"],
            "parts": [p for p in PARTS if p in ckpt], "sha256": {n: _sha256(dest / n) for n in _files(dest)}}
    with atomic_write(dest / META) as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    return meta


def _files(folder: Path) -> list[str]:
    return [n for n in (WEIGHTS, FILES["tokenizer"], LOG) if (folder / n).exists()]


def restore(src: str | Path, run: str | Path) -> int:
    """Make `src` the checkpoint of `run`; returns the step training resumes at. Refuses to replace
    a checkpoint that is as far or further, and a carry whose files do not match their checksums."""
    src, run = Path(src).expanduser(), Path(run).expanduser()
    meta = _read_meta(src)
    ckpt_file = checkpoint_path(run)
    if ckpt_file.exists():
        have = load_checkpoint(ckpt_file)["step"]
        if have >= meta["step"]:
            raise UserError(f"{ckpt_file} is at step {have}, the carry at {meta['step']}: nothing to restore; "
                            "resume with `edge-xsent train` as usual")
    tensors = load_file(src / WEIGHTS)
    state = {part: {k[len(part) + 1:]: v for k, v in tensors.items() if k.startswith(part + ".")}
             for part in meta["parts"]}
    for name in (FILES["tokenizer"], LOG):
        if (src / name).exists():
            run.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, run / name)
    # best_val starts over: the model folder saved before the carry did not travel with it
    save_checkpoint(ckpt_file, {"step": meta["step"], "best_val": float("inf"), "config": meta["config"], **state})
    return meta["step"]


def _read_meta(src: Path) -> dict:
    try:
        meta = json.loads((src / META).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{src}: not a carried run ({e}); write one with `edge-xsent carry save RUN {src}`") from e
    if meta.get("format") != CARRY_FORMAT:
        raise UserError(f"{src / META}: format {meta.get('format')!r}, expected {CARRY_FORMAT!r}")
    for name, digest in meta["sha256"].items():
        if not (src / name).exists() or _sha256(src / name) != digest:
            raise UserError(f"{src / name} is missing or does not match carry.json's SHA-256 (a truncated copy or "
                            "a Git LFS pointer?); fetch the folder again")
    return meta
