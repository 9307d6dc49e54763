"""Carry a long training run to another machine through git: a lab workflow, not a user command.

A run's checkpoint folder lives outside the work tree and can be lost with the machine between
sittings; a run longer than a sitting then starts again from its `init`. `save` writes what it takes
to continue into a small folder that can be committed on a branch of its own, never on main (git keeps
every blob, and every clone of main would download it): the last checkpoint's weights (the encoder
and the teacher projection) without the optimizer's moments (three quarters of a checkpoint: amsgrad
keeps three per weight), the run's tokenizer and its log. `restore` puts them back as the run's checkpoint, and the same
`edge-xsent train --config R` resumes at the carried step:

    git worktree add ../carry-long -b carry/long                        # a branch for the carry, off main
    python train/carry.py save ~/edge-xsent-runs/long ../carry-long/long      # before the machine goes; commit there
    python train/carry.py restore ../carry-long/long ~/edge-xsent-runs/long   # on the next one
    edge-xsent train --config R                                         # resumes at the carried step

What a carried run loses: Adam's moments (they start afresh at the carried step's learning rate) and
the best model saved before the carry (the run's model folder then holds the best validation after
it). A frozen token table (`freeze_table`) is not carried: the resumed run reads it from its `init` again, which
the machine rebuilds (a student's start: `python train/table_aware.py inputs`). Batches, masks and dropout are functions of the step, so the data seen is the same.
A finished run is carried as what comes next needs, its model folder (the best validation) and
summary: restored, `edge-xsent train` reports it finished and `train/check.sh` scores it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edge_xsent.atomic import atomic_dir, copy_file, copy_tree
from edge_xsent.encode.bundle import load_safetensors, sha256
from edge_xsent.errors import UserError
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_bytes, read_json
from edge_xsent.layout import FILES
from edge_xsent.paths import INPUT, RUN, Parser, Role, path_arg
from edge_xsent.train.runfolder import checkpoint_path, load_checkpoint, lock_run, save_checkpoint  # torch loads only once a command is checked

WEIGHTS, META, LOG, SUMMARY, MODEL = "weights.safetensors", "carry.json", "log.jsonl", "summary.json", "model"
PARTS = ("model", "teacher_proj")  # the checkpoint's tensors that are carried
FROZEN_TABLE = "model.tok_emb.weight"
CARRY_FORMAT = "edge-xsent-carry"


def save(run: str | Path, dest: str | Path) -> dict:
    """Write `dest` (replacing an older carry there) from `run`: a finished run's model folder and
    summary, else its last checkpoint's weights; returns what carry.json records."""
    run, dest = Path(run).expanduser(), Path(dest).expanduser()
    ckpt_file = checkpoint_path(run)
    if not ckpt_file.exists():
        raise UserError(f"{run}: no checkpoint ({ckpt_file}) to carry; is this a training run's --out folder?")
    _check_dest(run, dest)
    ckpt = load_checkpoint(ckpt_file)
    finished = (run / SUMMARY).exists() and (run / MODEL).is_dir()
    with atomic_dir(dest) as tmp:  # the older carry stays until the new one is swapped in, in one step
        if finished:
            copy_tree(run / MODEL, tmp / MODEL)  # a link inside it would carry a user's file into a commit
        else:
            tensors = {f"{part}.{k}": v.detach().clone().contiguous()  # clone: tied weights share memory
                       for part in PARTS for k, v in ckpt.get(part, {}).items() if f"{part}.{k}" not in left_out(ckpt)}
            from safetensors.torch import save as safetensors_bytes

            (tmp / WEIGHTS).write_bytes(safetensors_bytes(tensors))
        for name in (FILES["tokenizer"], LOG, SUMMARY):
            if (run / name).exists() and (finished or name != SUMMARY):
                copy_file(run / name, tmp / name)
        meta = {"format": CARRY_FORMAT, "step": ckpt["step"], "finished": finished, "config": ckpt["config"],
                "parts": [] if finished else [p for p in PARTS if p in ckpt],
                "left_out": [] if finished else left_out(ckpt),
                "sha256": {n: sha256(tmp / n) for n in _files(tmp)}}
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def left_out(ckpt: dict) -> list[str]:
    """A frozen token table stays behind: it is the init's (e5's 250,002 rows are 384 MB), and the trainer reads it
    from the init again when a checkpoint lacks it (loop.build_trainer)."""
    return [FROZEN_TABLE] if ckpt["config"].get("freeze_table") and "tok_emb.weight" in ckpt.get("model", {}) else []


def _check_dest(run: Path, dest: Path) -> None:
    """`dest` is a new folder or an older carry: never the run, a folder around or inside it, a file,
    or a folder of anything else (it is replaced whole)."""
    r, d = run.resolve(), dest.resolve()
    if d == r or d.is_relative_to(r) or r.is_relative_to(d):
        raise UserError(f"{dest}: the carry would replace the run {run} or a folder holding it; carry to a "
                        "folder of its own (e.g. ../carry-NAME/NAME, a worktree of a carry branch)")
    if dest.exists() and not (dest.is_dir() and (dest / META).is_file()):
        raise UserError(f"{dest} exists and is not a carried run (no {META}); carry save replaces only an older "
                        "carry: name a new folder")


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != META)


def restore(src: str | Path, run: str | Path) -> dict:
    """Make `src` the state of `run`; returns what carry.json records (`step`, `finished`). Refuses to
    replace a checkpoint that is as far or further, and a carry whose files do not match their checksums."""
    src, run = Path(src).expanduser(), Path(run).expanduser()
    meta = _read_meta(src)
    lock = lock_run(run)  # the run's own lock: a live run is not overwritten under it, nor it under a live run
    try:
        return _restore(src, run, meta)
    finally:
        lock.close()


def _restore(src: Path, run: Path, meta: dict) -> dict:
    """Under the run's lock (the lock's holder owns the folder: copy_file writes its entries, never through a link)."""
    if (run / SUMMARY).exists():
        raise UserError(f"{run} holds a finished run ({SUMMARY}): a carry is restored into its own unfinished run or "
                        "a new folder; choose another")
    ckpt_file = checkpoint_path(run)
    if ckpt_file.exists():
        have = load_checkpoint(ckpt_file)
        if have["config"] != meta["config"]:  # both runfolder._comparable's: no path, thread count or device
            raise UserError(f"{run} is another recipe's run (its checkpoint's config differs from the carry's): "
                            "restore into that recipe's --out folder or a new one")
        if have["step"] >= meta["step"]:
            raise UserError(f"{ckpt_file} is at step {have['step']}, the carry at {meta['step']}: nothing to restore; "
                            "resume with `edge-xsent train` as usual")
    if meta["finished"] and (run / MODEL).exists():
        raise UserError(f"{run / MODEL} exists: move it away to restore the carried model folder")
    run.mkdir(parents=True, exist_ok=True)
    for name in meta["sha256"]:
        if name != WEIGHTS:
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            copy_file(src / name, run / name)  # each a regular file: _read_meta hashed it through inputs
    if not meta["finished"]:
        tensors = load_safetensors(read_bytes(src / WEIGHTS, what="carried weights"), src / WEIGHTS)
        state = {part: {k[len(part) + 1:]: v for k, v in tensors.items() if k.startswith(part + ".")}
                 for part in meta["parts"]}
        # best_val starts over: the model folder saved before the carry did not travel with it
        save_checkpoint(ckpt_file, {"step": meta["step"], "best_val": float("inf"), "config": meta["config"], **state})
    return meta


def _read_meta(src: Path) -> dict:
    try:
        meta = read_json(src / META, what="carry.json")
    except (OSError, ValueError) as e:
        raise UserError(f"{src}: not a carried run ({e}); write one with `python train/carry.py save RUN {src}`") from e
    if not isinstance(meta, dict) or meta.get("format") != CARRY_FORMAT:
        raise UserError(f"{src / META}: format {meta.get('format') if isinstance(meta, dict) else meta!r}, "
                        f"expected {CARRY_FORMAT!r}")
    wanted = {"step": int, "finished": bool, "config": dict, "parts": list, "sha256": dict}
    torn = [k for k, t in wanted.items() if not isinstance(meta.get(k), t) or (t is int and isinstance(meta[k], bool))]
    if torn or meta["step"] < 0:
        raise UserError(f"{src / META}: field(s) {', '.join(torn) or 'step'} missing or of the wrong type (a torn or "
                        f"hand-edited file); write the carry again with `python train/carry.py save RUN {src}`")
    if meta["finished"] and not any(n.startswith(MODEL + "/") for n in meta["sha256"]):
        raise UserError(f"{src / META} says the run finished but the carry holds no {MODEL}/ folder (a torn or "
                        f"hand-edited carry): write it again with `python train/carry.py save RUN {src}`")
    for name, digest in meta["sha256"].items():
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise UserError(f"{src / META} names {name!r}, a file outside the carry: refused")
        if not (src / name).exists() or sha256(src / name) != digest:
            raise UserError(f"{src / name} is missing or does not match carry.json's SHA-256 (a truncated copy or "
                            "a Git LFS pointer?); fetch the folder again")
    return meta


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    saving = sub.add_parser("save", help="RUN's last checkpoint into DEST")
    saving.add_argument("run", type=path_arg(INPUT))
    saving.add_argument("dest", type=path_arg(Role("folder", marker="carry.json", kind="carried run")))
    restoring = sub.add_parser("restore", help="SRC (from save) becomes RUN's checkpoint")
    restoring.add_argument("src", type=path_arg(INPUT))
    restoring.add_argument("run", type=path_arg(RUN))
    args = ap.parse_args(argv)
    if args.action == "save":
        meta = save(args.run, args.dest)
        size = sum((args.dest / n).stat().st_size for n in meta["sha256"]) / 2**20
        print(f"carried step {meta['step']} of {args.run} into {args.dest}/ ({size:.1f} MB)")
    elif (meta := restore(args.src, args.run))["finished"]:
        print(f"{args.run} holds the finished run (step {meta['step']}) and its model folder")
    else:
        print(f"{args.run} resumes at step {meta['step']} (Adam's moments start afresh); run the same `edge-xsent train`")


if __name__ == "__main__":
    main()
