"""A cut table's kept rows refitted to the whole table's vectors: a short distillation, blocks frozen.

    full, tok, record = load_student("student-4block.safetensors")   # all 250,002 rows
    cut = cut_table(full, table_rows_rule(tok, 48_000))              # dropped pieces read their nearest kept row
    cut, log = refit_table(full, cut, tok, RefitConfig(data="corpus"))

Why: cutting e5's table to fit 20 MB sends every dropped piece to the kept row nearest its own, which
costs the 4-block student 3.3 points of `oog` (91.7 with every row, 88.4 at 48,000). The blocks are trained
already, so only the kept rows move, towards what the whole table gave on the same text: the teacher is the
student itself with every row (no labels to compute), and each kept row learns to stand for the pieces that
now read it. CPU is enough.

The text is a corpus's train split (both sides of its pairs, round-robin over languages) and its
monolingual text, never reserved text: the refit is judged on `oog` and `oog-m1`, which no build reads.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass
from typing import Iterator

import numpy as np

from edge_xsent.errors import UserError


@dataclass
class RefitConfig:
    """The refit's settings (chosen before its runs; studies/gpu-students/README.md): the names are
    TrainConfig's, so schedule.lr_at reads either."""
    data: str  # a corpus folder (`edge-xsent data build`): train.tsv, and mono.tsv when it has one
    max_steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3  # Adam; the rows' elements have a spread of ~0.08
    warmup_steps: int = 100
    min_lr_ratio: float = 0.0
    max_len: int = 64  # ids a refit text is cut to
    seed: int = 0


def refit_texts(data: str, seed: int = 0) -> Iterator[str]:
    """Text to refit on, endlessly: both sides of the corpus's train pairs (each language alike: balanced
    order) interleaved with its monolingual texts, then again from the start."""
    from edge_xsent.data.corpus import balanced_mono, balanced_order, read_mono, read_pairs, resolve

    pairs = balanced_order(read_pairs(data, split="train"), seed)
    mono_file = resolve(data) / "mono.tsv"
    mono = [row[1] for row in balanced_mono(read_mono(mono_file), seed)] if mono_file.exists() else []
    sides = [t for p in pairs for t in (p.b, p.a)]
    texts = [t for group in itertools.zip_longest(sides, mono) for t in group if t]
    if not texts:
        raise UserError(f"{data}: no train pairs or monolingual text to refit the table on")
    return itertools.cycle(texts)


def refit_batches(tok, cfg: RefitConfig, pool: int = 16) -> Iterator[list[list[int]]]:
    """Batches of token ids, endlessly: `pool` batches' worth of texts sorted by length and cut into batches
    (little padding: a step costs what its tokens cost), served in a shuffled order."""
    import random

    rng, texts = random.Random(cfg.seed), refit_texts(cfg.data, cfg.seed)
    while True:
        ids = sorted((x for x in tok.encode(list(itertools.islice(texts, cfg.batch_size * pool)), max_len=cfg.max_len)
                      if x), key=len)
        chunks = [ids[s:s + cfg.batch_size] for s in range(0, len(ids), cfg.batch_size)]
        rng.shuffle(chunks)
        yield from chunks


def refit_table(full, cut, tok, cfg: RefitConfig, log_every: int = 100,
                progress: bool = True) -> tuple[object, list[dict]]:
    """`cut` (a copy) with its kept rows trained so that its sentence vectors meet `full`'s (1 - cosine,
    mean pooled, as the folder's vectors): only the table moves. Returns (model, log of mean losses)."""
    import copy

    import torch
    from tqdm import tqdm

    from edge_xsent.encode.tokenizer import pad_batch
    from edge_xsent.train.schedule import lr_at

    torch.manual_seed(cfg.seed)
    model = copy.deepcopy(cut).train()
    for name, p in model.named_parameters():
        p.requires_grad_(name == "tok_emb.weight")
    full = full.eval()
    opt = torch.optim.Adam([model.tok_emb.weight], lr=cfg.lr)
    batches, log, losses, started = refit_batches(tok, cfg), [], [], time.perf_counter()
    for step in tqdm(range(cfg.max_steps), desc="refit", unit="step", disable=not progress):
        ids, mask = (torch.from_numpy(a) for a in pad_batch(next(batches)))
        with torch.no_grad():
            target = torch.nn.functional.normalize(full(ids, mask), dim=-1)
        loss = 1 - (torch.nn.functional.normalize(model(ids, mask), dim=-1) * target).sum(-1).mean()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % log_every == 0 or step + 1 == cfg.max_steps:
            log.append({"step": step + 1, "loss": float(np.mean(losses)), "seconds": time.perf_counter() - started})
            losses = []
    return model.eval(), log


def refit_record(cfg: RefitConfig, log: list[dict]) -> dict:
    """What training.json keeps of a refit: its settings, and its loss at the start and the end."""
    from edge_xsent.config import portable

    return {**portable(asdict(cfg)), "target": "the same student with every row (1 - cosine of sentence vectors)",
            "first_loss": log[0]["loss"] if log else None, "last_loss": log[-1]["loss"] if log else None,
            "seconds": round(log[-1]["seconds"], 1) if log else 0.0}
