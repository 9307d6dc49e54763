"""Distillation's data: the teacher's vectors of a run's texts (its cache in teacher.py), attached to
the tokenised pairs and monolingual texts that a training step reads.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from .batches import TokenizedTexts
from .config import TrainConfig
from .data.corpus import resolve
from .errors import UserError
from .tokenizer import Tokenizer


def attach_teacher(cfg: TrainConfig, splits, tok: Tokenizer, is_main: bool, world: int,
                   progress: bool) -> TokenizedTexts | None:
    """Label the source side of every (rows, data) split and the corpus's monolingual texts with
    the teacher (cached on disk), attach the vectors to the data, and return the monolingual
    texts when the recipe uses them. Monolingual text in a language the teacher was not trained
    on is left out: its vectors there are noise (Reimers and Gurevych's student learns those
    languages from the pairs, whose English side the teacher knows)."""
    from .data.corpus import read_mono
    from .teacher import load_teacher
    from .teacher import label

    teacher = load_teacher(cfg.teacher, threads=cfg.threads or torch.get_num_threads())
    known = teacher.languages
    unknown = sorted({p.lang_a for rows, _ in splits for p in rows} - known) if known else []
    if unknown:
        raise UserError(f"the teacher {cfg.teacher} does not know {', '.join(unknown)}, the source side of some pairs; "
                        f"it labels only the source side, so put a language it knows there ({', '.join(sorted(known))}) "
                        "or leave teacher unset")
    mono_path = resolve(cfg.data) / "mono.tsv"
    mono_texts = [t for lang, t, _ in read_mono(mono_path) if not known or lang in known] \
        if cfg.mono_batch_size and mono_path.exists() else []
    if cfg.mono_batch_size and not mono_texts:
        raise UserError(f"mono_batch_size is set but {mono_path} has no text in a language the teacher knows: build "
                        "the corpus with monolingual sources (edge-xsent data build) or set mono_batch_size = 0")
    texts = [p.a for rows, _ in splits for p in rows] + mono_texts
    if is_main:  # rank 0 labels what the cache lacks; the others then read it, every text cached
        vecs, rows_of = label(texts, teacher, cfg.teacher_cache, progress=progress)
    _barrier(world)
    if not is_main:
        vecs, rows_of = label(texts, teacher, cfg.teacher_cache, progress=False)
    offset = 0
    for rows, data in splits:
        if data is not None:
            data.t_vecs, data.t_idx = vecs, rows_of[offset + data.row]
        offset += len(rows)
    if not mono_texts:
        return None
    ids = tok.encode(mono_texts, cfg.model.max_len)
    keep = [i for i, x in enumerate(ids) if x]
    return TokenizedTexts([np.asarray(ids[i], dtype=np.int64) for i in keep], vecs, rows_of[offset + np.array(keep)])


def _barrier(world: int) -> None:
    if world > 1 and dist.is_initialized():
        dist.barrier()
