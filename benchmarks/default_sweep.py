"""Choose the default model's vocabulary and depth: retrieval P@1 against size at one CPU budget.

Each point is `train/cpu-hour.toml` with one change (vocabulary, depth or width), trained for
the same wall-clock budget on this machine, since the default is limited by CPU time, not by
steps: a cheaper model gets more steps. Per point:
  1. step time: mean of timed training steps on real batches drawn at random from the whole
     training split (a mean, since the budget is their sum; the first rows of the corpus are
     not a fair sample: its sources are in order and their lengths differ);
  2. max_steps = budget / step time, warm-up 10% of that;
  3. train (resumable: rerunning the script continues unfinished points);
  4. retrieval P@1 on the test split exactly as `edge-xsent eval xsr` (2,000 queries per
     direction among all candidates, en<->de/es/fr/it, cosine), and the int8 size
     (one byte per weight; the shipped int8 ONNX matches this to 0.1 MB).
Decision rule, fixed before the runs: the smallest point whose P@1 is within 1.0 point of the
best point's.

    python benchmarks/default_sweep.py --minutes 10      # 5 points, ~60 min on 2 cores
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

from edge_xsent.atomic import check_outputs
from edge_xsent.threads import thread_count
from edge_xsent.eval.decisions import SWEEP_RULE_POINTS, smallest_near_best
from edge_xsent.failures import script_errors

# name -> model overrides of train/cpu-hour.toml (2 layers, d=512, 16k vocabulary).
POINTS = {
    "2L-512-16k": {},
    "1L-512-16k": {"n_layers": 1},
    "2L-512-8k": {"vocab_size": 8000},
    "2L-512-32k": {"vocab_size": 32000},
    "2L-256-16k": {"d_model": 256, "n_heads": 4, "d_ff": 512},
}


def step_seconds(cfg, tok, rows, langs, n: int = 12, warmup: int = 2, sample: int = 20_000) -> float:
    """Mean seconds of the training loop's step (forward, backward, clipping, AMSGrad) over random real batches."""
    from edge_xsent.train.batches import BatchPlan, make_batch, tokenize_pairs
    from edge_xsent.train.bench import time_steps
    from edge_xsent.encode.model import DualEncoder
    from edge_xsent.train.objectives import punctuation_pieces
    from edge_xsent.train.loop import Trainer

    pick = np.random.default_rng(cfg.seed).choice(len(rows), size=min(sample, len(rows)), replace=False)
    data = tokenize_pairs([rows[i] for i in pick], tok, cfg.model.max_len, langs)
    plan = BatchPlan(np.array([max(len(a), len(b)) for a, b in zip(data.a, data.b)]), cfg.batch_size, cfg.seed)
    torch.manual_seed(cfg.seed)
    trainer = Trainer(cfg, DualEncoder(cfg.model), punctuation_pieces(tok), torch.device("cpu"))
    cpu = torch.device("cpu")
    return float(np.mean(time_steps(trainer, lambda step: make_batch(data, plan.indices(step), cpu), n, warmup)))


def to_markdown(res: dict) -> str:
    rows = res["points"]
    lines = ["# Default model: vocabulary, depth and width against retrieval at one CPU budget", "",
             f"`python benchmarks/default_sweep.py --minutes {res['minutes']:g}` on {res['machine']['cpu']} "
             f"({res['threads']} threads), {res['date']}. Every point is `train/cpu-hour.toml` with one change, "
             f"trained for the same {res['minutes']:g} minutes of this CPU (max_steps = budget / measured step time; "
             "'train min' is what the loop then took: batch lengths vary, so the estimate is off by up to a third). "
             "P@1: `edge-xsent eval xsr` on the corpus test split (mean over en<->de/es/fr/it, 2,000 queries per "
             "direction among all candidates, cosine, fp32). int8 size: one byte per weight.", "",
             "| point | layers | d | vocabulary | parameters (M) | int8 MB | step (s) | steps | train min | XSR P@1 | "
             "XSR margin |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        m = r["model"]
        lines.append(f"| {name} | {m['n_layers']} | {m['d_model']} | {m['vocab_size']:,d} | {r['params_m']:.1f} | "
                     f"{r['int8_mb']:.1f} | {r['step_s']:.2f} | {r['steps']:,d} | {r['train_min']:.1f} | "
                     f"{r['p1']:.1f} | {r['p1_margin']:.1f} |")
    if len(rows) > 1:
        pick = smallest_near_best(rows)
        lines += ["", f"Rule (fixed before the runs): the smallest model within {SWEEP_RULE_POINTS:g} P@1 point of the "
                  f"best. Best: {max(rows, key=lambda k: rows[k]['p1'])}; chosen: **{pick}**."]
    if res.get("note"):
        lines += ["", res["note"]]
    return "\n".join(lines) + "\n"


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0, help="Training budget per point (wall clock, this CPU).")
    ap.add_argument("--points", default=",".join(POINTS), help="Comma-separated subset of: " + ", ".join(POINTS))
    ap.add_argument("--config", default=str(ROOT / "train/cpu-hour.toml"))
    ap.add_argument("--runs", default=str(ROOT / "runs/sweep-default"))
    ap.add_argument("--threads", type=thread_count, default=2)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--note", default="", help="What the record should say about how the runs went.")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/default_sweep.md"))
    args = ap.parse_args()
    check_outputs([args.out], inputs=[args.config, args.runs])
    from edge_xsent.atomic import atomic_write
    from edge_xsent.train.bench import machine_info, write_report
    from edge_xsent.data.corpus import pair_langs, read_pairs
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.eval.evaluate import average, xsr
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.batches import load_texts
    from edge_xsent.train.loop import train
    from edge_xsent.train.runfolder import training_minutes

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*longer than .* tokens were truncated")  # eval's test split
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    base = TrainConfig.from_toml(args.config, {"threads": args.threads})
    rows = load_texts(base, "train", base.max_train_pairs)
    langs = pair_langs(rows)
    test = list(read_pairs(base.data, split="test"))
    state_file = runs / "sweep.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    if state.get("minutes", args.minutes) != args.minutes:
        sys.exit(f"{state_file} was made with --minutes {state['minutes']}; use that, or another --runs folder")
    state.update(minutes=args.minutes, threads=args.threads, machine=machine_info(), date=time.strftime("%Y-%m-%d"))
    if args.note:
        state["note"] = args.note
    state.setdefault("points", {})

    def save() -> None:  # after each stage of each point: a rerun continues where this one stopped
        with atomic_write(state_file) as f:
            f.write(json.dumps(state, indent=2))

    for name in args.points.split(","):
        if name not in POINTS:
            sys.exit(f"unknown point {name!r}; choose from {', '.join(POINTS)}")
        mcfg = dataclasses.replace(base.model, **POINTS[name])
        tok_file = runs / f"tokenizer-{mcfg.vocab_size}.model"
        if not tok_file.exists():  # one tokenizer per vocabulary size, shared by its points
            tok_file.write_bytes(Tokenizer.train((t for p in rows for t in (p.a, p.b)), mcfg.vocab_size).proto)
        tok = Tokenizer.load(tok_file)
        cfg = dataclasses.replace(base, model=mcfg, tokenizer=str(tok_file), out=str(runs / name))
        point = state["points"].get(name) or {}
        if "step_s" not in point:
            point = {"model": dataclasses.asdict(mcfg), "step_s": step_seconds(cfg, tok, rows, langs)}
            point["max_steps"] = max(20, int(args.minutes * 60 / point["step_s"]))
            state["points"][name] = point
            save()
        cfg = dataclasses.replace(cfg, max_steps=point["max_steps"], warmup_steps=max(1, point["max_steps"] // 10),
                                  eval_every=point["max_steps"], checkpoint_every=max(1, point["max_steps"] // 10))
        print(f"{name}: step {point['step_s']:.2f} s -> {cfg.max_steps} steps", flush=True)
        if "p1" not in point:
            summary = train(cfg, progress=False)
            enc = Encoder.load(Path(cfg.out) / "model", backend="torch", threads=args.threads)
            x = xsr(test, lambda s: enc.encode(list(s), batch_size=128), max_queries=args.queries)
            params = _count_params(Path(cfg.out) / "model")
            point.update(steps=summary["steps"], pairs_per_s=summary["pairs_per_s"], params_m=params / 1e6,
                         int8_mb=params / 2**20, p1=100 * average(x), p1_margin=100 * average(x, "p1_margin"),
                         xsr=x)
            save()
        print(f"{name}: P@1 {point['p1']:.1f}, int8 {point['int8_mb']:.1f} MB", flush=True)

    done = {k: v for k, v in state["points"].items() if "p1" in v}
    for name, point in done.items():  # the training loop's own clock, without data preparation and evaluation
        point["train_min"] = training_minutes(runs / name)[0]
    state["points"] = done
    write_report(args.out, to_markdown(state), state)
    print(to_markdown(state))


def _count_params(model_dir: Path) -> int:
    from edge_xsent.encode.bundle import load_model

    model, _, _ = load_model(model_dir)
    return model.num_parameters()


if __name__ == "__main__":
    main()
