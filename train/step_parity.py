"""Does the project's trainer take the GPU students' step? The same items through the record's code
(../shared/students/recipe: e5lite.py, run.py's loss and AdamW) and through train/gpu-students.toml's
settings in edge_xsent (e5_start, the e5-passage teacher, distill_items' batch, Trainer.step), on CPU,
compared at each stage: the ids, the teacher's vectors, the untrained cut's vectors, the loss of K steps
on one batch, and the vectors after them (beside how far the steps moved them, so a match is not a
still model's). Also how much text the record's cuts (128 teacher ids, 400 characters) would have changed.

    python train/step_parity.py --recipe ../shared/students/recipe --data ~/edge-xsent-data/corpus-m1 \
        --out benchmarks/results/students/step-parity.json
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from edge_xsent.atomic import atomic_write
from edge_xsent.config import TrainConfig
from edge_xsent.data.corpus import balanced_mono, balanced_order, read_mono, read_pairs, resolve


def record_module(recipe: Path):
    spec = importlib.util.spec_from_file_location("e5lite", recipe / "e5lite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def items_of(data: str, n_pairs: int, n_mono: int) -> tuple[list[str], list[str]]:
    """(inputs, targets) as run.py makes them: English side -> English, translation -> English, text -> text;
    the valid split's pairs round-robin over languages (any text serves a parity check)."""
    pairs = list(balanced_order(read_pairs(data, split="valid"), 0))[:n_pairs]
    mono = [text for _, text, _ in balanced_mono(read_mono(resolve(data) / "mono.tsv"), 0)[:n_mono]]
    inputs = [p.a for p in pairs] + [p.b for p in pairs] + mono
    return inputs, [p.a for p in pairs] * 2 + mono


def record_side(e5lite, inputs: list[str], targets: list[str], steps: int, lr: float, type_row: bool = True) -> dict:
    """run.py's pipeline: the teacher cut to the pieces the items need (prep.py), its tokenizer, the 12-block
    teacher's labels, then `steps` steps of a 4-block student on the batch, as run.py's loop takes them.
    `type_row` False freezes e5's token-type row, which the record trains apart from the positions (ours
    folds it into them)."""
    from edge_xsent.train.e5 import default_path

    cfg, tokd, raw = e5lite.read_bin(str(default_path()))
    whole = e5lite.Tok(tokd, cfg)
    used = {cfg[k] for k in ("bos", "eos", "pad", "unk")} | {i for x in whole.encode(inputs + targets) for i in x}
    buf = io.BytesIO()
    np.savez(buf, **e5lite.pack(cfg, tokd, raw, used))
    buf.seek(0)
    ccfg, ctok, W = e5lite.unpack(np.load(buf))
    tok, U = e5lite.Tok(ctok, ccfg), np.array(sorted(used))
    ids = tok.encode(inputs)
    teacher = e5lite.E5(ccfg, W).eval()
    with torch.no_grad():
        Y = teacher(*e5lite.pad_batch(tok.encode(targets), ccfg["pad"]))
    student = e5lite.E5(ccfg, W, nlayers=4).train()
    student.ttype.requires_grad_(type_row)
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    x, m = e5lite.pad_batch(ids, ccfg["pad"])
    tg = torch.tensor([targets.index(t) for t in targets])
    same = (tg[:, None] == tg[None, :]) & ~torch.eye(len(tg), dtype=torch.bool)
    with torch.no_grad():
        start = student(x, m)
    losses = []
    for _ in range(steps):
        s = student(x, m)
        loss = ((s - Y) ** 2).sum(-1).mean()
        loss = loss + F.cross_entropy((s @ Y.T / 0.05).masked_fill(same, -1e4), torch.arange(len(tg)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        end = student(x, m)
    return {"e5_ids": [[int(U[i]) for i in x] for x in ids], "teacher": Y, "start": start, "end": end, "losses": losses}


def our_side(inputs: list[str], targets: list[str], steps: int, lr: float) -> dict:
    """train/gpu-students.toml's settings through edge_xsent: the same cut, tokenizer, teacher and step."""
    from edge_xsent.train.batches import TokenizedTexts, text_batch
    from edge_xsent.train.e5 import read_e5
    from edge_xsent.train.loop import Trainer
    from edge_xsent.train.student import e5_order, e5_start
    from edge_xsent.train.teacher import label, load_teacher

    cfg = TrainConfig.from_toml(Path(__file__).parent / "gpu-students.toml", {"warmup_steps": 1, "lr": lr, "device": "cpu"})
    model, tok, _ = e5_start(range(4), max_len=cfg.model.max_len)
    order = e5_order(read_e5())
    ids = [np.asarray(x, dtype=np.int64) for x in tok.encode(inputs, cfg.model.max_len)]
    with tempfile.TemporaryDirectory() as cache:  # label() as a run labels: normalised, cached, a memory map
        teacher = load_teacher(cfg.teacher, threads=torch.get_num_threads(), max_len=cfg.teacher_max_len)
        vecs, rows = label(targets, teacher, cache, progress=False)
        items = TokenizedTexts(ids, np.array(vecs), rows)
    trainer = Trainer(cfg, model, torch.zeros(model.cfg.vocab_size, dtype=torch.bool), torch.device("cpu"), teacher_dim=384)
    batch = text_batch(items, np.arange(len(ids)))
    model.eval()
    with torch.no_grad():
        start = F.normalize(model(batch["m"], batch["mm"]), dim=-1)
    model.train()
    losses = [trainer.step(batch, step, torch.Generator().manual_seed(step))["total"].item() for step in range(steps)]
    with torch.no_grad():
        end = F.normalize(model(batch["m"], batch["mm"]), dim=-1)
    return {"e5_ids": [[order[i] for i in x] for x in ids], "teacher": batch["tm"], "start": start, "end": end,
            "losses": losses}


def beyond_the_records_cuts(data: str, n_pairs: int) -> dict:
    """What the record cut and the recipe keeps, on `n_pairs` random pairs of the train split: the share of English
    sides over 128 e5 ids (the record's teacher read 128, ours 512) and of texts over 400 characters (the record
    dropped them)."""
    import random

    from edge_xsent.train.e5 import E5Tokenizer, read_e5
    from edge_xsent.train.student import PREFIX

    with open(resolve(data) / "train.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    rows = random.Random(0).sample(rows, n_pairs)
    english = [r[2] if r[0] == "en" else r[3] for r in rows]
    ids = E5Tokenizer(read_e5()).encode(english, 512, PREFIX)
    texts = [t for r in rows for t in r[2:4]]
    return {"pairs": n_pairs, "english_over_128_ids": round(sum(len(x) > 128 for x in ids) / n_pairs, 4),
            "texts_over_400_chars": round(sum(len(t) > 400 for t in texts) / len(texts), 4)}


def cosines(a: torch.Tensor, b: torch.Tensor) -> dict:
    c = F.cosine_similarity(a.float(), b.float(), dim=-1)
    return {"min": round(float(c.min()), 6), "mean": round(float(c.mean()), 6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", type=Path, required=True, help="the record's recipe folder (e5lite.py)")
    ap.add_argument("--data", required=True, help="a corpus folder (its valid split and mono.tsv)")
    ap.add_argument("--pairs", type=int, default=96)
    ap.add_argument("--mono", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1.5e-4, help="both sides' rate from the first step (no warm-up)")
    ap.add_argument("--length-pairs", type=int, default=20_000, help="random train pairs for the length shares")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.manual_seed(0)
    inputs, targets = items_of(args.data, args.pairs, args.mono)
    e5lite = record_module(args.recipe)
    ours = our_side(inputs, targets, args.steps, args.lr)
    result = {"items": len(inputs), "steps": args.steps, "lr": args.lr,
              "ours": {"losses": [round(x, 5) for x in ours["losses"]], "moved_cos": cosines(ours["start"], ours["end"])}}
    for name, type_row in (("record", True), ("record, type row frozen", False)):
        rec = record_side(e5lite, inputs, targets, args.steps, args.lr, type_row)
        assert all(math.isfinite(x) for x in rec["losses"] + ours["losses"])
        result[name] = {
            "ids_equal": sum(a == b for a, b in zip(rec["e5_ids"], ours["e5_ids"])),
            "teacher_cos": cosines(rec["teacher"], ours["teacher"]), "start_cos": cosines(rec["start"], ours["start"]),
            "losses": [round(x, 5) for x in rec["losses"]],
            "max_loss_gap": round(max(abs(a - b) for a, b in zip(rec["losses"], ours["losses"])), 6),
            "end_cos": cosines(rec["end"], ours["end"]), "moved_cos": cosines(rec["start"], rec["end"])}
    result["beyond_the_records_cuts"] = beyond_the_records_cuts(args.data, args.length_pairs)
    print(json.dumps(result, indent=1))
    if args.out:
        with atomic_write(args.out) as f:
            f.write(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
