"""What the token-level arm costs a training step: the real step (train.Trainer.step) of a 3-block
student of e5-small's width on one batch of corpus pairs, with and without `token_weight` (e5-small's
blocks run beside the student), timed in one run at 1 thread. Medians of the timed steps.

    python studies/pruned-student/token_cost.py --data ~/edge-xsent-data/corpus-m1 --steps 12
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from edge_xsent.failures import script_errors


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="sample")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    from edge_xsent.encode.tokenizer import pad_batch
    from edge_xsent.config import EncoderConfig, TrainConfig
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.train.distill import TokenTeacher
    from edge_xsent.encode.model import DualEncoder
    from edge_xsent.train.prune import language_sample, prune_e5
    from edge_xsent.train.loop import Trainer

    torch.set_num_threads(1)
    _, tok, _ = prune_e5(language_sample(args.data, 200), [0, 1, 2], 8000, 128)
    pairs = list(read_pairs(args.data, split="test"))[:: 7][: args.batch_size]
    (a, am), (b, bm) = (pad_batch(tok.encode([getattr(p, s) for p in pairs], 128)) for s in "ab")
    batch = {"a": torch.from_numpy(a), "am": torch.from_numpy(am), "b": torch.from_numpy(b), "bm": torch.from_numpy(bm),
             "la": torch.zeros(len(pairs), dtype=torch.long), "lb": torch.ones(len(pairs), dtype=torch.long)}
    model = EncoderConfig(vocab_size=tok.vocab_size, n_layers=3, d_model=384, n_heads=12, d_ff=1536, max_len=128,
                          dropout=0.0)
    teacher = TokenTeacher.for_student(tok, 3, None)
    times = {}
    for name, weight in (("sentence-level only", 0.0), ("with token_weight", 1.0)):
        cfg = TrainConfig(model=model, objective="none", align_weight=1.0, sim_weight=0.0, init="e5-small",
                          token_weight=weight, batch_size=args.batch_size, threads=1)
        trainer = Trainer(cfg, DualEncoder(model), torch.zeros(tok.vocab_size, dtype=torch.bool), torch.device("cpu"),
                          token_teacher=teacher if weight else None)
        gen, runs = torch.Generator().manual_seed(0), []
        for step in range(args.steps + 2):
            t = time.perf_counter()
            trainer.step(batch, step + 100, gen)
            runs.append(time.perf_counter() - t)
        times[name] = statistics.median(runs[2:])
        print(f"{name:22s} {1000 * times[name]:7.0f} ms a step (median of {args.steps}, batch {len(pairs)} pairs, "
              f"{int(am.sum() + bm.sum())} tokens)")
    print(f"ratio {times['with token_weight'] / times['sentence-level only']:.2f}")


if __name__ == "__main__":
    main()
