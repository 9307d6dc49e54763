"""How the vocabulary size drives training step time and model size (the default's why).

One real batch of the sample corpus (128 pairs, median length; token ids remapped into each
vocabulary so lengths stay real), 2-layer 512 model, full objective, 2 threads; median of
timed steps after warm-up, all sizes in one run.

    python benchmarks/vocab_cost.py [--out benchmarks/results/vocab_cost.md]
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from edge_xsent.failures import user_errors
from edge_xsent.paths import Parser, Role, path_arg

ROOT = Path(__file__).resolve().parent.parent


@user_errors
def main() -> None:
    ap = Parser()
    ap.add_argument("--sizes", default="8000,16000,32000,50000")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones, per size")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks/results/vocab_cost.md"))
    args = ap.parse_args()
    from edge_xsent.train.batches import make_batch, tokenize_pairs
    from edge_xsent.train.bench import machine_info, median_batch, summarize, time_steps, write_report
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.data.corpus import pair_langs
    from edge_xsent.train.objectives import punctuation_pieces
    from edge_xsent.train.batches import load_texts
    from edge_xsent.train.loop import Trainer
    from edge_xsent.config import TrainConfig

    torch.set_num_threads(args.threads)
    cfg = TrainConfig(data="sample")
    rows = load_texts(cfg, "train")
    tok = Tokenizer.train([t for p in rows for t in (p.a, p.b)], 8000)
    data = tokenize_pairs(rows, tok, 64, pair_langs(rows))
    chosen, tokens = median_batch(data, 128)
    base = make_batch(data, chosen, torch.device("cpu"))
    punct = punctuation_pieces(tok)
    out = []
    for V in [int(v) for v in args.sizes.split(",")]:
        def spread(ids: torch.Tensor) -> torch.Tensor:  # the real ids over the larger vocabulary, specials kept
            return torch.where(ids > 2, (ids * 7919) % (V - 3) + 3, ids)

        batch = {**base, "a": spread(base["a"]), "b": spread(base["b"])}
        avoid = torch.zeros(V, dtype=torch.bool)
        avoid[spread(torch.arange(tok.vocab_size))] = punct  # SMLM skips the same punctuation pieces
        torch.manual_seed(0)
        mcfg = EncoderConfig(vocab_size=V, max_len=64)
        model = DualEncoder(mcfg)
        cfg = TrainConfig(data="sample", model=mcfg)
        trainer = Trainer(cfg, model, avoid, torch.device("cpu"))
        times = time_steps(trainer, lambda step: batch, args.steps, warmup=args.warmup)  # the loop's own step
        out.append({"vocab": V, "params_m": round(model.num_parameters() / 1e6, 1),
                    "int8_mb_estimate": round((V * 512 + model.num_parameters(False)) / 2**20, 1),
                    "step": summarize(times)})
        print(out[-1], flush=True)
    m = machine_info()
    lines = ["# Vocabulary size against training cost and model size", "",
             f"`python benchmarks/vocab_cost.py`: 2 layers, d=512, batch 128 pairs (one real batch, "
             f"{int(np.median(tokens)):,d} tokens), full objective, {args.threads} threads, {m['cpu']}, "
             f"{time.strftime('%Y-%m-%d')}. int8 size estimated as one byte per weight.", "",
             "| vocabulary | parameters (M) | int8 size (MB, est.) | median step (ms) |", "|---|---|---|---|"]
    lines += [f"| {r['vocab']:,d} | {r['params_m']} | {r['int8_mb_estimate']} | {r['step']['p50_ms']:,.0f}"
              f"{' (noisy)' if r['step']['noisy'] else ''} |" for r in out]
    write_report(args.out, "\n".join(lines), out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
