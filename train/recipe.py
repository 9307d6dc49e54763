"""A recipe's settings, or a run folder's, one per line, for train/ship.sh and train/finish.sh.

The shell scripts ask here rather than parse TOML themselves, so a recipe is read and checked by the
same code as `edge-xsent train` reads it. A run folder (one train/interpolate.py wrote) answers from its
model's training.json. Paths come out with `~` expanded; an unset setting prints an empty line.

    python train/recipe.py train/shipped.toml out ship.alpha ship.table_bits
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from edge_xsent.config import ShipConfig, TrainConfig
from edge_xsent.failures import script_errors
from edge_xsent.inputs import read_json


def setting(source: Path, key: str) -> str:
    """One setting: a TrainConfig field, or a [ship] one (`ship.alpha`, `ship.table_bits`, `ship.int8_activations`,
    `ship.rule`)."""
    if source.is_dir():
        if key == "out":
            return str(source)
        record = read_json(source / "model/training.json", what="training.json")["train_config"]
        value = record.get(key)
    elif key.startswith("ship."):
        value = getattr(ShipConfig.from_toml(source), key.removeprefix("ship."))
    else:
        value = getattr(TrainConfig.from_toml(source), key)
    return "" if value is None else os.path.expanduser(str(value))


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="a recipe (.toml) or a run folder")
    ap.add_argument("keys", nargs="+", help="TrainConfig fields (out, data, ...) or ship.alpha, ship.table_bits, "
                                           "ship.int8_activations, ship.rule")
    args = ap.parse_args()
    for key in args.keys:
        print(setting(args.source, key))


if __name__ == "__main__":
    main()
