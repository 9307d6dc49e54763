"""Carry a training run to another machine through git (edge_xsent/train/carry.py): a lab workflow, not a
user command. `save` writes RUN's last checkpoint (weights without Adam's moments, tokenizer, log)
into DEST, small enough to commit on a branch of its own; `restore` makes such a folder RUN's
checkpoint, and the same `edge-xsent train` then resumes at its step.

    python train/carry.py save ~/edge-xsent-runs/long ../carry-long/long
    python train/carry.py restore ../carry-long/long ~/edge-xsent-runs/long
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edge_xsent.failures import script_errors
from edge_xsent.pathargs import Parser, in_path, out_folder, out_run


@script_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    save = sub.add_parser("save", help="RUN's last checkpoint into DEST")
    save.add_argument("run", type=in_path)
    save.add_argument("dest", type=out_folder("carry.json", "carried run"))
    restore = sub.add_parser("restore", help="SRC (from save) becomes RUN's checkpoint")
    restore.add_argument("src", type=in_path)
    restore.add_argument("run", type=out_run)
    args = ap.parse_args(argv)
    from edge_xsent.train import carry

    if args.action == "save":
        meta = carry.save(args.run, args.dest)
        size = sum((args.dest / n).stat().st_size for n in meta["sha256"]) / 2**20
        print(f"carried step {meta['step']} of {args.run} into {args.dest}/ ({size:.1f} MB)")
    elif (meta := carry.restore(args.src, args.run))["finished"]:
        print(f"{args.run} holds the finished run (step {meta['step']}) and its model folder")
    else:
        print(f"{args.run} resumes at step {meta['step']} (Adam's moments start afresh); run the same `edge-xsent train`")


if __name__ == "__main__":
    main()
