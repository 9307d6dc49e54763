"""A run's weights moved back part of the way to its start: theta = start + alpha x (end - start).

Interpolating a fine-tuned model with the model it started from (WiSE-FT, Wortsman et al. 2022) often
keeps most of what fine-tuning gained while winning back what it cost on the old task, at no training
cost. Here the old task is the shipped default's nine languages, which a run on every language of
corpus-m1 may lose some of. The start is rebuilt exactly as the run built it (the recipe's pinned init,
its tokenizer, its seed), so alpha = 0 is the run's step 0 and alpha = 1 its model folder (the weights its `keep_model` kept).

    python train/interpolate.py studies/shipping-history/m1-extend.toml --alpha 0.5 --out ~/edge-xsent-runs/m1-extend-a50
    python train/ship.py RECIPE       # [ship] alpha = 0.5: this step, then a candidate like any run
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path

import torch

from edge_xsent.paths import INPUT, Parser, Role, note_input, owning, path_arg
from edge_xsent.inputs import read_bytes
from edge_xsent.encode.bundle import load_model, read_training, save_model
from edge_xsent.config import TrainConfig
from edge_xsent.errors import UserError
from edge_xsent.failures import user_errors
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.warmstart import check_pinned_start, load_init_weights, start_dir


def start_model(cfg: TrainConfig, end: DualEncoder, tok) -> DualEncoder:
    """The run's step-0 weights, as `train.build_trainer` made them."""
    if not cfg.init:
        raise UserError(f"{cfg.out}: the recipe has no init; a run from random weights has no start worth returning to")
    check_pinned_start(cfg)
    torch.manual_seed(cfg.seed)
    model = DualEncoder(dataclasses.replace(cfg.model, n_langs=end.cfg.n_langs))
    load_init_weights(model, start_dir(cfg), tok)
    return model


def interpolate(start: DualEncoder, end: DualEncoder, alpha: float) -> DualEncoder:
    """`end` with every weight at start + alpha x (end - start); weights only one side has are end's."""
    ours, theirs = end.state_dict(), start.state_dict()
    mixed = {k: theirs[k] + alpha * (v - theirs[k]) if k in theirs and theirs[k].shape == v.shape else v
             for k, v in ours.items()}
    end.load_state_dict(mixed)
    return end


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", type=path_arg(INPUT), help="the run's recipe (its out folder holds the trained model)")
    ap.add_argument("--alpha", type=float, required=True, help="0: the run's start; 1: its trained weights")
    ap.add_argument("--out", type=path_arg(Role("folder", marker="model/manifest.json", kind="run-like folder of an interpolated model")), required=True, help="a new run-like folder; the model goes to OUT/model")
    args = ap.parse_args()
    if not 0.0 <= args.alpha <= 1.0:
        raise UserError(f"--alpha {args.alpha}: choose a value from 0 (the start) to 1 (the trained weights)")
    cfg = TrainConfig.from_toml(args.recipe)
    run = Path(cfg.out).expanduser() / "model"
    note_input(cfg.out, cfg.data)
    end, tok, config = load_model(run)
    start = start_model(cfg, end, tok)
    model = interpolate(start, end, args.alpha)
    training = read_training(run)
    sha = hashlib.sha256(read_bytes(run / "manifest.json", what="manifest")).hexdigest()
    training["interpolated"] = {"alpha": args.alpha, "start": cfg.init, "end": str(cfg.out) + "/model",
                                "end_manifest_sha256": sha, "recipe": str(args.recipe)}
    with owning(args.out):  # OUT is this command's run-like folder: its model/ is its own to write
        save_model(args.out / "model", model, tok, config["langs"], training)
    print(json.dumps(training["interpolated"]))


if __name__ == "__main__":
    main()
