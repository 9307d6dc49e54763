"""Re-align a warm start's embedding table to its new vocabulary before training.

m1-long starts from the shipped default with its pieces carried to a new 48k byte-fallback vocabulary
(train.transfer_vocabulary: a shared piece keeps its row, a new one starts as the mean of its text's
old rows). Measured on `oog`, that start retrieves 60.6 where the shipped default retrieves 86.5: the
carried rows do not reproduce the old model under the new segmentation. Here only the table is trained,
the transformer frozen, so the new model gives the old model's sentence vectors (1 - cosine) on the old
languages' and English training text; the languages the old model never knew keep their carried rows.

    python studies/vocab-realign/realign.py --steps 1000 --out /tmp/realigned
    python train/figures.py /tmp/realigned --name realigned --precision fp32 --parts oog --out /tmp/r.json
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from edge_xsent.train.batches import pad
from edge_xsent.encode.bundle import load_model, save_model
from edge_xsent.config import TrainConfig
from edge_xsent.data.corpus import read_pairs
from edge_xsent.encode.model import DualEncoder, mean_pool
from edge_xsent.encode.tokenizer import Tokenizer
from edge_xsent.train.warmstart import init_dir, load_init_weights

OLD_LANGS = {"en", "de", "es", "fr", "it", "nl", "pl", "pt_BR", "ru"}


def old_language_texts(data: str, n: int, seed: int = 0) -> list[str]:
    """n distinct texts from the train split: English and the old model's eight languages."""
    texts = {t for p in read_pairs(data, split="train") if p.lang_b in OLD_LANGS for t in (p.a, p.b)}
    return random.Random(seed).sample(sorted(texts), min(n, len(texts)))


def pooled(model: DualEncoder, tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """Raw sentence vectors (mean of the last layer, no language projection), as training sees them."""
    ids, mask = pad([np.array(x, dtype=np.int64) for x in tok.encode(texts, max_len=model.cfg.max_len)])
    return mean_pool(model.encode_tokens(ids, mask), mask)


def realign(recipe: str, steps: int, batch: int, lr: float, n_texts: int,
            log_every: int = 100) -> tuple[DualEncoder, Tokenizer]:
    cfg = TrainConfig.from_toml(recipe)
    teacher, teacher_tok, _ = load_model(init_dir(cfg.init))
    teacher.eval()
    tok = Tokenizer.load(cfg.tokenizer)
    torch.manual_seed(0)
    student = DualEncoder(cfg.model)
    load_init_weights(student, init_dir(cfg.init), tok)
    student.eval()  # dropout off: only the table moves
    for name, p in student.named_parameters():
        p.requires_grad = name == "tok_emb.weight"
    opt = torch.optim.Adam([student.tok_emb.weight], lr=lr)
    texts = old_language_texts(cfg.data, n_texts)
    t0 = time.time()
    for step in range(steps):
        chunk = texts[(step * batch) % len(texts):][:batch]
        with torch.no_grad():
            target = pooled(teacher, teacher_tok, chunk)
        loss = (1 - F.cosine_similarity(pooled(student, tok, chunk), target)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
    return student, tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="studies/shipping-history/m1-long.toml")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--texts", type=int, default=200_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    student, tok = realign(args.recipe, args.steps, args.batch, args.lr, args.texts)
    save_model(args.out, student, tok, sorted(OLD_LANGS), {"note": f"studies/vocab-realign: {args.steps} steps"})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
