"""A run's data and batches, for training and for timing the training step: the pairs it reads
(load_texts, train_rows), tokenised, the plan of which pairs form each step's batch, and padding into tensors.

    data = tokenize_pairs(rows, tok, max_len=128, langs=["de", "en"])
    plan = BatchPlan(np.array([max(len(a), len(b)) for a, b in zip(data.a, data.b)]), batch_size=128, seed=0)
    batch = make_batch(data, plan.indices(step), torch.device("cpu"))   # what Trainer.step takes

The training loop (loop.py) and every benchmark that times its step (bench.time_steps) use these.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from edge_xsent.config import TrainConfig
from edge_xsent.encode.tokenizer import pad_batch
from edge_xsent.data.corpus import Pair
from edge_xsent.encode.tokenizer import PAD_ID, Tokenizer


def load_texts(cfg: TrainConfig, split: str, limit: int | None = None, file_order: bool = False) -> list[Pair]:
    """The split's pairs a run reads, in the order it reads them; `file_order`: the same pairs in the corpus
    file's order (where pairs that follow each other belong together: joined_pairs)."""
    rows, in_file = _read_split(cfg, split, limit)
    return in_file if file_order else rows


def train_rows(cfg: TrainConfig) -> list[Pair]:
    """The train pairs a run reads, then (join_share) the long pairs joined from them."""
    rows, in_file = _read_split(cfg, "train", cfg.max_train_pairs)
    return rows + joined_rows(cfg, in_file)


def joined_rows(cfg: TrainConfig, in_file: list[Pair]) -> list[Pair]:
    """The run's joined pairs (join_share, join_chars) of its train pairs in the file's order: one call for the
    run and for the device pack, which must hold the teacher rows the same joins read."""
    from edge_xsent.data.corpus import joined_pairs

    return joined_pairs(in_file, cfg.join_share, cfg.join_chars, cfg.seed)


def _read_split(cfg: TrainConfig, split: str, limit: int | None) -> tuple[list[Pair], list[Pair]]:
    """(the pairs in the run's order, the same in the file's), read once."""
    from edge_xsent.data.corpus import balanced_order, read_pairs, resolve
    from edge_xsent.data.reserved import is_reserved_folder
    from edge_xsent.errors import UserError

    if is_reserved_folder(resolve(cfg.data)):  # the out-of-genre benchmark judges models; it never trains them
        raise UserError(f"{cfg.data} is a reserved evaluation set (edge-xsent data reserved): train on a corpus "
                        "built by `edge-xsent data build`")
    langs = tuple(cfg.langs.split(",")) if cfg.langs else None
    pairs = read_pairs(cfg.data, langs=langs, split=split)
    if cfg.train_order != "balanced" or split != "train":
        rows = list(itertools.islice(pairs, limit))  # a prefix of the file: its order
        return rows, rows
    in_file = list(pairs)
    rows = balanced_order(in_file, cfg.seed)[:limit]
    chosen = {id(p) for p in rows}
    return rows, [p for p in in_file if id(p) in chosen]


@dataclass
class TokenizedPairs:
    a: list[np.ndarray]
    b: list[np.ndarray]
    lang_a: np.ndarray  # language ids (index into `langs`)
    lang_b: np.ndarray
    row: np.ndarray  # index of each pair in the rows it was tokenised from
    t_vecs: np.ndarray | None = None  # teacher vectors (memory map), when distilling
    t_idx: np.ndarray | None = None  # each pair's row in t_vecs (the teacher's vector of side a)

    def __len__(self) -> int:
        return len(self.a)


@dataclass
class TokenizedTexts:
    """Monolingual texts with their teacher vectors (distillation on text without a translation)."""
    ids: list[np.ndarray]
    t_vecs: np.ndarray
    t_idx: np.ndarray


PARALLEL_FROM = 100_000  # texts: fewer are cut in the calling process
CHUNK = 25_000  # texts a worker cuts at a time
_WORKER: tuple[Tokenizer, list[str], int] | None = None  # a forked worker's tokenizer, texts, max_len (inherited, never pickled)


def prep_workers(threads: int | None) -> int:
    """Processes that cut text at a run's set-up: `threads` where set (a run beside other work keeps to it),
    else this process's share of the cores (torchrun's LOCAL_WORLD_SIZE processes share them)."""
    return threads or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def encode_texts(tok: Tokenizer, texts: list[str], max_len: int, workers: int = 1) -> list[np.ndarray]:
    """`tok.encode(texts, max_len)` as int64 arrays; with `workers` > 1, in forked processes (Linux) from
    PARALLEL_FROM texts: the cut is mostly Python, one core's work (a GPU run's set-up: 2.5M texts, a minute,
    15 cores idle). The result is the same either way."""
    if workers <= 1 or len(texts) < PARALLEL_FROM or sys.platform != "linux":
        return [np.asarray(x, dtype=np.int64) for x in tok.encode(texts, max_len)]
    global _WORKER
    _WORKER = (tok, texts, max_len)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_encode_chunk, range(0, len(texts), CHUNK))
    finally:
        _WORKER = None
    return [ids for flat, lengths in parts for ids in np.split(flat, np.cumsum(lengths)[:-1])] if parts else []


def _encode_chunk(start: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids of the chunk from `start`, flat, and each text's length: two arrays pickle at a fraction of a
    list of lists."""
    tok, texts, max_len = _WORKER
    ids = tok.encode(texts[start:start + CHUNK], max_len)
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    return np.fromiter((i for x in ids for i in x), dtype=np.int64, count=int(lengths.sum())), lengths


def tokenize_pairs(rows: list[Pair], tok: Tokenizer, max_len: int, langs: list[str],
                   workers: int = 1) -> TokenizedPairs:
    lang_id = {l: i for i, l in enumerate(langs)}
    ids_a = encode_texts(tok, [p.a for p in rows], max_len, workers)
    ids_b = encode_texts(tok, [p.b for p in rows], max_len, workers)
    keep = [i for i in range(len(rows)) if len(ids_a[i]) and len(ids_b[i])]  # drop pairs with an empty side
    return TokenizedPairs(
        a=[ids_a[i] for i in keep],
        b=[ids_b[i] for i in keep],
        lang_a=np.array([lang_id[rows[i].lang_a] for i in keep], dtype=np.int64),
        lang_b=np.array([lang_id[rows[i].lang_b] for i in keep], dtype=np.int64),
        row=np.array(keep, dtype=np.int64),
    )


def pad(seqs: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and 0/1 mask as tensors: `tokenizer.pad_batch`, the padding inference uses."""
    ids, mask = pad_batch(seqs, PAD_ID)
    return torch.from_numpy(ids), torch.from_numpy(mask)


class BatchPlan:
    """Which pairs form global batch `step`: a pure function of (seed, step), cached per epoch.

    Each epoch shuffles the pairs, sorts chunks of `bucket` batches by length (so a batch
    pads to little more than its own length: ~3x faster on CPU than random batches), then
    shuffles the order of the batches. Process `rank` of `world` takes its own slice.
    With `groups` (a label per pair, e.g. its language pair) every batch holds one group only,
    so in-batch negatives share the positive's language and cannot be told apart by it; a
    group's last partial batch is left out of that epoch (another share of it next epoch).
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, world: int = 1, bucket: int = 50,
                 groups: np.ndarray | None = None):
        self.lengths, self.batch_size, self.seed, self.world, self.bucket = lengths, batch_size, seed, world, bucket
        self.groups = groups
        g = batch_size * world
        self.per_epoch = (len(lengths) // g if groups is None
                          else int(sum(n // g for n in np.unique(groups, return_counts=True)[1])))
        self._epoch, self._batches = -1, None

    def _by_length(self, order: np.ndarray) -> np.ndarray:
        """`order` (a multiple of the global batch) as batches of similar lengths, chunk by chunk."""
        g = self.batch_size * self.world
        chunk = g * self.bucket
        for start in range(0, len(order), chunk):
            part = order[start: start + chunk]
            order[start: start + chunk] = part[np.argsort(self.lengths[part], kind="stable")]
        return order.reshape(-1, g)

    def _plan(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, epoch])
        g = self.batch_size * self.world
        if self.groups is None:
            batches = self._by_length(rng.permutation(len(self.lengths))[: self.per_epoch * g])
        else:
            parts = [rng.permutation(np.flatnonzero(self.groups == label)) for label in np.unique(self.groups)]
            batches = np.concatenate([self._by_length(idx[: len(idx) // g * g]) for idx in parts if len(idx) >= g])
        return batches[rng.permutation(len(batches))]

    def indices(self, step: int, rank: int = 0) -> np.ndarray:
        epoch, k = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self._plan(epoch)
        return self._batches[k].reshape(self.world, self.batch_size)[rank]


def make_batch(data: TokenizedPairs, idx: np.ndarray, device: torch.device,
               mono: TokenizedTexts | None = None, mono_idx: np.ndarray | None = None) -> dict[str, torch.Tensor]:
    a, am = pad([data.a[i] for i in idx])
    b, bm = pad([data.b[i] for i in idx])
    batch = {"a": a, "am": am, "b": b, "bm": bm,
             "la": torch.from_numpy(data.lang_a[idx]), "lb": torch.from_numpy(data.lang_b[idx])}
    if data.t_vecs is not None:
        batch["t"] = torch.from_numpy(np.asarray(data.t_vecs[data.t_idx[idx]]))
    if mono is not None and mono_idx is not None:
        batch.update(text_batch(mono, mono_idx))
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def text_batch(texts: TokenizedTexts, idx: np.ndarray, device: torch.device | None = None) -> dict[str, torch.Tensor]:
    """Texts `idx` padded (m, mm) with their teacher vectors (tm): the monolingual part of a batch, or with
    batch_items the whole of it."""
    m, mm = pad([texts.ids[i] for i in idx])
    batch = {"m": m, "mm": mm, "tm": torch.from_numpy(np.asarray(texts.t_vecs[texts.t_idx[idx]]))}
    return batch if device is None else {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def distill_items(data: TokenizedPairs, mono: TokenizedTexts | None) -> TokenizedTexts:
    """Each side of every pair and each monolingual text as an item with its teacher row, a translation
    reading its English side's vector (Reimers and Gurevych's items). Drawn alike, a batch's items
    mostly have targets of their own: 512 items, ~510 in-batch negatives, where a batch of 224 pairs
    and 64 texts has 288 (the GPU students' record drew items)."""
    if data.t_vecs is None or (mono is not None and mono.t_vecs is not data.t_vecs):
        raise ValueError("distill_items needs the pairs and texts labelled by one teacher (distill.attach_teacher)")
    extra = [mono] if mono is not None else []
    return TokenizedTexts(data.a + data.b + [x for m in extra for x in m.ids], data.t_vecs,
                          np.concatenate([data.t_idx, data.t_idx] + [m.t_idx for m in extra]))


def items_per_step(cfg: TrainConfig) -> int:
    """With batch_items, the texts a process's step draws: both sides of batch_size pairs' worth and the
    monolingual batch."""
    return 2 * cfg.batch_size + cfg.mono_batch_size


def step_batches(cfg: TrainConfig, data: TokenizedPairs, mono: TokenizedTexts | None, world: int, rank: int,
                 device: torch.device) -> Callable[[int], dict[str, torch.Tensor]]:
    """Process `rank`'s batch of each step, on `device`: pairs (both sides) and monolingual texts, each from its
    own plan; with `cfg.batch_items`, texts alone (distill_items) from one plan."""
    if cfg.batch_items:
        items = distill_items(data, mono)
        plan = BatchPlan(np.array([len(x) for x in items.ids]), items_per_step(cfg), cfg.seed, world)
        return lambda step: text_batch(items, plan.indices(step, rank), device)
    plan = BatchPlan(np.array([max(len(x), len(y)) for x, y in zip(data.a, data.b)]), cfg.batch_size, cfg.seed, world,
                     groups=data.lang_a * 1000 + data.lang_b if cfg.batch_by_pair else None)
    mono_plan = BatchPlan(np.array([len(x) for x in mono.ids]), cfg.mono_batch_size, cfg.seed + 1, world) \
        if mono else None
    return lambda step: make_batch(data, plan.indices(step, rank), device, mono,
                                   mono_plan.indices(step, rank) if mono_plan else None)
