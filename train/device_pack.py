"""A recipe's GPU run on a lent device (train/devicepack.py, beside it; docs/training.md, "On a lent GPU").

    python train/device_pack.py pack --config train/gpu-students.toml --out .devpack    # here: call-1/, call-2/, ...
    python train/device_pack.py fits --config train/gpu-students.toml .devpack   # here: does a pack still fit the recipe?
    python train/device_pack.py pack --config train/gpu-students.toml --join-share 0.25 --out .devpack  # also serves
                                                   # runs with long pairs joined (the recipe's own join_share otherwise)
    python train/device_pack.py inputs --config train/gpu-students.toml --join-share 0.25 --out .devpack  # a bare
                       # machine: the recipe's datasets built where missing ([ship.datasets]), then the pack unless it fits
    python train/device_pack.py pack --config train/table-aware.toml --student ../shared/students/student-4block.safetensors \
        --out .devpack                    # a self-taught recipe: the student its start is made of is carried too
    python train/device_pack.py join /tmp/pack /tmp/in       # there: the staged chunks -> /tmp/in/corpus, e5 file
                                                             # (and /tmp/in/start, the start of a self-taught run)
    python train/device_pack.py student RUN/model OUT/student   # there: the trained blocks, in parts of <= 16 MiB
    python train/device_pack.py trained-student RUN OUT/student -- FLAGS   # there: `edge-xsent train --out RUN FLAGS`,
                                               # then `student` of RUN/model, in one process (torch imported once)

The sizes are this lab's device tool's, and flags here (the package knows none): a call carries the checkout (about
35 MB) and at most 64 MiB in all, so a call folder holds 24 MiB (--chunk-mb); a file coming back holds at most
16 MiB (--part-mb).

`inputs` is the one command that rebuilds every input of such a run and of its judging on a bare machine (the
corpus, `oog`, `oog-m1`: most of an hour of `edge-xsent data` the first time, then 8 minutes of packing) and does nothing twice.
`pack` writes what the run reads, the text and e5-small's file cut to the pieces that text needs, split
into call folders that each fit one call beside the checkout. Each call carries one (`carry`) and
copies it to the device's /tmp/pack; the call that trains joins them first. `student` writes a trained
run's student as a student file (e5's table left out), which `train/student_folder.py` makes a bundle.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from edge_xsent.errors import UserError
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, INTO, RUN, Parser, Role, path_arg
import devicepack  # the lab module beside this script

PACK_FOLDER = path_arg(Role("folder", marker=devicepack.MARKER, kind="pack"))  # a new folder, or a pack (its marker file at the root)

HERE = Path(__file__).resolve().parent
STUDENT_HELP = ("the student file a self-taught recipe's start is made of (train/table-aware.toml: "
                "../shared/students/student-4block.safetensors); join makes the start there")


def pipeline():
    """train/pipeline.py, the ship's stages (a script beside this one, as train/ship.py loads it)."""
    spec = importlib.util.spec_from_file_location("pipeline", HERE / "pipeline.py")
    module = sys.modules["pipeline"] = importlib.util.module_from_spec(spec)  # registered: its dataclasses need it
    spec.loader.exec_module(module)
    return module


def inputs(config: Path, cfg, out: Path, chunk_bytes: int, student: Path | None = None) -> None:
    """The recipe's datasets built where missing, then its pack at `out` unless one there fits (never replaced)."""
    ship = pipeline()
    for name, (path, role, _) in ship.build_missing(ship.Plan.read(config)).items():
        print(f"{name} ({role}): ready")
    if out.exists() and any(out.iterdir()):
        differ = devicepack.misfits(cfg, devicepack.read_manifest(out))
        if differ:
            raise UserError(f"{out}: a pack that does not fit {config} (" + "; ".join(differ) + "); remove it, or name "
                            "another --out")
        print(f"{out} fits {config}: it carries the text the recipe reads")
        return
    packed(cfg, out, chunk_bytes, student)


def packed(cfg, out: Path, chunk_bytes: int, student: Path | None = None) -> None:
    m = devicepack.pack(cfg, out, chunk_bytes, student=student)
    print(f"{out}: {m['calls']} call folders; {m['texts']:,d} texts; {m['rows_kept']:,d} of {m['rows']:,d} "
          f"table rows kept; " + ", ".join(f"{n} {f['bytes'] / 2**20:.1f} MiB" for n, f in m["files"].items()))


def student_parts(model: Path, out: Path, part_bytes: int) -> None:
    from edge_xsent.train.student import write_student

    for path in write_student(model, out, part_bytes):
        print(f"{path} ({path.stat().st_size / 2**20:.1f} MiB)")


def trained_student(run: Path, out: Path, flags: list[str], part_bytes: int) -> None:
    """`edge-xsent train --out RUN FLAGS`, then the student of RUN/model: one process, so torch's import and the
    run's tokenizer are paid once (2-3 s of a lent GPU's call per run). A failed training exits with its own status."""
    from edge_xsent.cli import main as cli

    try:
        cli(["train", "--out", str(run), *(flags[1:] if flags[:1] == ["--"] else flags)], prog_name="edge-xsent")
    except SystemExit as e:  # click ends every command so, 0 included
        if e.code:
            raise
    student_parts(run / "model", out, part_bytes)


def chunk_mb(text: str) -> float:
    """--chunk-mb, --part-mb: a finite size above zero (0 would make no call folder hold anything, nan every comparison fail)."""
    try:
        mb = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a size in MiB, such as 24") from None
    if not 0.01 <= mb <= 65536:  # nan and inf fail this too
        raise argparse.ArgumentTypeError(f"{text}: a size in MiB between 0.01 and 65536, such as 24")
    return mb


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    pk = sub.add_parser("pack", help="the recipe's text and teacher, in call folders")
    pk.add_argument("--config", type=path_arg(INPUT), required=True, help="the recipe (train/gpu-students.toml)")
    pk.add_argument("--data", help="the corpus, if not the recipe's")
    pk.add_argument("--join-share", type=float, help="join_share, if not the recipe's: the pack then also carries the "
                                                     "teacher rows the joined pairs read")
    pk.add_argument("--out", type=PACK_FOLDER, required=True, help="a new folder (inside the checkout, git-ignored, to carry)")
    pk.add_argument("--chunk-mb", type=chunk_mb, default=24.0, help="the most one call folder holds (MiB)")
    pk.add_argument("--student", type=path_arg(INPUT), help=STUDENT_HELP)
    ip = sub.add_parser("inputs", help="every input of the recipe's run and its judging, built where missing, and "
                                       "the pack unless one at --out fits")
    ip.add_argument("--config", type=path_arg(INPUT), required=True, help="the recipe, with its [ship.datasets]")
    ip.add_argument("--join-share", type=float, help="join_share, if not the recipe's (as pack)")
    ip.add_argument("--out", type=PACK_FOLDER, required=True, help="the pack's folder (as pack); a pack there that fits is kept")
    ip.add_argument("--chunk-mb", type=chunk_mb, default=24.0, help="the most one call folder holds (MiB)")
    ip.add_argument("--student", type=path_arg(INPUT), help=STUDENT_HELP)
    ft = sub.add_parser("fits", help="whether a pack carries the text a recipe reads (packing takes minutes)")
    ft.add_argument("--config", type=path_arg(INPUT), required=True, help="the recipe")
    ft.add_argument("--data", help="the corpus, if not the recipe's")
    ft.add_argument("--join-share", type=float, help="join_share, if not the recipe's")
    ft.add_argument("pack", type=path_arg(INPUT))
    jn = sub.add_parser("join", help="staged chunks -> corpus/ and e5-small-q4.bin")
    jn.add_argument("staged", type=path_arg(INPUT))
    jn.add_argument("into", type=path_arg(INTO))
    st = sub.add_parser("student", help="a trained run's model folder -> student file parts")
    st.add_argument("model", type=path_arg(INPUT))
    st.add_argument("out", type=path_arg(FILE))
    st.add_argument("--part-mb", type=chunk_mb, default=16.0, help="the most one part file holds (MiB): what one "
                    "transfer back may carry")
    ts = sub.add_parser("trained-student", help="edge-xsent train --out RUN FLAGS, then student RUN/model OUT, in one "
                                                "process")
    ts.add_argument("run", type=path_arg(RUN), help="the run's folder (train's --out)")
    ts.add_argument("out", type=path_arg(FILE), help="the student file, as student's")
    ts.add_argument("--part-mb", type=chunk_mb, default=16.0, help="as student's")
    ts.add_argument("flags", nargs=argparse.REMAINDER, help="after --: edge-xsent train's flags")
    args = ap.parse_args(argv)
    if args.action in ("pack", "fits", "inputs"):
        from edge_xsent.config import TrainConfig

        over = {k: v for k, v in (("data", getattr(args, "data", None)), ("join_share", args.join_share)) if v is not None}
        cfg = TrainConfig.from_toml(args.config, over or None)
    if args.action == "fits":
        differ = devicepack.misfits(cfg, devicepack.read_manifest(args.pack))
        if differ:
            raise UserError(f"{args.pack} does not fit {args.config}: " + "; ".join(differ) + "; pack it again")
        print(f"{args.pack} fits {args.config}: it carries the text the recipe reads")
    elif args.action == "inputs":
        inputs(args.config, cfg, args.out, int(args.chunk_mb * 2**20), args.student)
    elif args.action == "pack":
        packed(cfg, args.out, int(args.chunk_mb * 2**20), args.student)
    elif args.action == "join":
        m = devicepack.join(args.staged, args.into)
        start = f" and {devicepack.START}/ (the student's start)" if devicepack.STUDENT in m["files"] else ""
        print(f"{args.into}: corpus/ and {devicepack.E5_NAME} ({m['e5_version']}){start} joined and checked")
    elif args.action == "trained-student":
        trained_student(args.run, args.out, args.flags, int(args.part_mb * 2**20))
    else:
        student_parts(args.model, args.out, int(args.part_mb * 2**20))


if __name__ == "__main__":
    main()
