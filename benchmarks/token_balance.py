"""How much the token-level loss (token_weight) says beside a batch_items recipe's vector loss at its first
step: both losses and the norms of their gradients over the parameters the run trains, on the student the
recipe starts from (e5's first blocks) and items of the corpus's valid split (each side of a pair towards
e5-passage's vector of its English side, as the run labels them). A token_weight of `ratio` gives the two
terms gradients of equal norm at the start. Then what the token arm costs: the real step (Trainer.step) with and
without it on that batch, in turns (e5's blocks read the items too).

    python benchmarks/token_balance.py --config train/gpu-students.toml --pairs 256 \
        --out benchmarks/results/students/token-balance.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from edge_xsent.atomic import atomic_write
from edge_xsent.config import TrainConfig, portable
from edge_xsent.failures import script_errors


def valid_items(cfg: TrainConfig, pairs: int) -> tuple[list[str], list[str]]:
    """(texts, the English side each reads its vector from): `pairs` spread over the valid split, both sides."""
    from edge_xsent.data.corpus import read_pairs

    rows = list(read_pairs(cfg.data, split="valid"))
    chosen = rows[:: max(1, len(rows) // pairs)][:pairs]
    english = [p.a if p.lang_a == "en" else p.b for p in chosen]
    other = [p.b if p.lang_a == "en" else p.a for p in chosen]
    return english + other, english + english


def grad_norm(loss: torch.Tensor, params: list[torch.Tensor]) -> tuple[float, list[torch.Tensor]]:
    grads = [g if g is not None else torch.zeros_like(p)
             for g, p in zip(torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True), params)]
    return float(torch.sqrt(sum((g.float() ** 2).sum() for g in grads))), grads


def figures(cfg: TrainConfig, pairs: int, rounds: int) -> dict:
    from edge_xsent.encode.tokenizer import pad_batch
    from edge_xsent.train.distill import TokenTeacher
    from edge_xsent.train.loop import Trainer
    from edge_xsent.train.student import e5_start
    from edge_xsent.train.teacher import load_teacher

    texts, english = valid_items(cfg, pairs)
    n = cfg.model.n_layers
    model, tok, _ = e5_start(range(n), cfg.model.max_len)
    token_teacher = TokenTeacher.for_student(tok, n, cfg.token_layers)
    t = time.perf_counter()
    targets = torch.from_numpy(load_teacher(cfg.teacher, max_len=cfg.teacher_max_len).encode(english))
    label_s = time.perf_counter() - t
    avoid = torch.zeros(tok.vocab_size, dtype=torch.bool)
    without = Trainer(dataclasses.replace(cfg, token_weight=0.0), copy.deepcopy(model).train(), avoid,
                      torch.device("cpu"), teacher_dim=targets.shape[1])  # the same start, for the step's cost
    trainer = Trainer(cfg, model.train(), avoid, torch.device("cpu"), teacher_dim=targets.shape[1],
                      token_teacher=token_teacher)
    params = [p for p in trainer.objective.parameters() if p.requires_grad]  # what the optimiser moves
    ids, mask = (torch.from_numpy(x) for x in pad_batch(tok.encode(texts, cfg.model.max_len)))
    batch = {"m": ids, "mm": mask, "tm": targets}
    losses = trainer.objective(batch, torch.Generator())
    vec_norm, vec_grads = grad_norm(losses["teacher"], params)
    token_norm, token_grads = grad_norm(losses["token"], params)
    cosine = sum((a * b).sum() for a, b in zip(vec_grads, token_grads)) / (vec_norm * token_norm)
    step_s = step_seconds({"token": trainer, "without": without}, batch, rounds)
    return {"data": portable(cfg.data), "blocks": n, "token_pairs": token_teacher.pairs, "items": len(texts),
            "tokens": int(mask.sum()), "teacher_loss": cfg.teacher_loss, "label_seconds": round(label_s, 1),
            "loss": {"vector": round(float(losses["teacher"].detach()), 4),
                     "token": round(float(losses["token"].detach()), 4)},
            "grad_norm": {"vector": round(vec_norm, 4), "token": round(token_norm, 4)},
            "ratio": round(vec_norm / token_norm, 2), "grad_cosine": round(float(cosine), 3),
            "step_seconds": step_s, "step_ratio": round(step_s["token"] / step_s["without"], 2),
            "threads": torch.get_num_threads()}


def step_seconds(trainers: dict, batch: dict, rounds: int) -> dict:
    """The median seconds of each trainer's real step (Trainer.step) on the same batch, taken in turns."""
    times: dict = {name: [] for name in trainers}
    for r in range(rounds + 1):
        for name, trainer in trainers.items():
            t = time.perf_counter()
            trainer.step(batch, r, torch.Generator())
            if r:  # the first round warms up
                times[name].append(time.perf_counter() - t)
    return {name: round(float(np.median(v)), 3) for name, v in times.items()}


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, required=True, help="a batch_items recipe (init and tokenizer e5-small)")
    ap.add_argument("--data", help="the corpus, if not the recipe's")
    ap.add_argument("--pairs", type=int, default=256, help="valid pairs, both sides an item each")
    ap.add_argument("--rounds", type=int, default=3, help="timed steps of each trainer, in turns, after one untimed")
    ap.add_argument("--blocks", type=int, help="the student's blocks, if not the recipe's")
    ap.add_argument("--out", type=Path, required=True, help="a JSON file")
    args = ap.parse_args()
    over = {"token_weight": 1.0, **({"data": args.data} if args.data else {})}
    if args.blocks:
        over["model"] = {"n_layers": args.blocks}
    torch.manual_seed(0)
    result = {"recipe": str(args.config), **figures(TrainConfig.from_toml(args.config, over), args.pairs, args.rounds)}
    with atomic_write(args.out) as f:
        f.write(json.dumps(result, indent=1) + "\n")
    print(f"{args.out}: vector loss {result['loss']['vector']}, token loss {result['loss']['token']}; gradient norms "
          f"{result['grad_norm']['vector']} / {result['grad_norm']['token']} = {result['ratio']} "
          f"(cosine {result['grad_cosine']}); a step {result['step_ratio']}x the step without it")


if __name__ == "__main__":
    main()
