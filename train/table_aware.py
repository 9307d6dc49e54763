"""Every input of a table-aware run (train/table-aware.toml, studies/table-aware), built where missing.

    python train/table_aware.py inputs --config train/table-aware.toml --student ../shared/students/student-4block.safetensors

On a machine that came back bare this is the one command before `edge-xsent train --config RECIPE`: the recipe's
datasets (`[ship.datasets]`: the corpus it trains on, `oog` and `oog-m1` that judge it; most of an hour of
`edge-xsent data` the first time) and the start's folder (`init`, which is also the run's teacher: the GPU-distilled
student with e5's whole table at full precision, train/student_folder.py --whole). Nothing is built twice.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edge_xsent.config import TrainConfig
from edge_xsent.failures import user_errors
from edge_xsent.paths import INPUT, Parser, path_arg
from edge_xsent.train.student import write_whole
from device_pack import pipeline  # the lab script beside this one: train/pipeline.py, loaded once


def inputs(config: Path, student: Path) -> None:
    ship = pipeline()
    for name, (path, role, _) in ship.build_missing(ship.Plan.read(config)).items():
        print(f"{name} ({role}): ready")
    cfg = TrainConfig.from_toml(config)
    start = Path(cfg.init or "").expanduser()
    if not (start / "manifest.json").exists():
        write_whole(student, start)
    taught = Path(cfg.teacher or "").expanduser() == start
    print(f"{start} (the start{' and the teacher' if taught else ''}): ready")


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    ip = sub.add_parser("inputs", help="build the recipe's datasets and its start's folder where missing")
    ip.add_argument("--config", type=path_arg(INPUT), required=True, help="the recipe (train/table-aware.toml)")
    ip.add_argument("--student", type=path_arg(INPUT), required=True, help="the GPU-distilled student file the start is made "
                    "of (../shared/students/student-4block.safetensors)")
    args = ap.parse_args(argv)
    inputs(args.config, args.student)


if __name__ == "__main__":
    main()
