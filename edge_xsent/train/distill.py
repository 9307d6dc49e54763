"""Distillation's data: the teacher's vectors of a run's texts (its cache in teacher.py), attached to
the tokenised pairs and monolingual texts that a training step reads; and the token-level teacher
(TokenTeacher), which runs beside the student instead, since token states are too many to cache.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from edge_xsent.train.batches import TokenizedTexts, encode_texts, prep_workers
from edge_xsent.config import TrainConfig
from edge_xsent.data.corpus import balanced_mono, read_mono, resolve
from edge_xsent.errors import UserError
from edge_xsent.encode.tokenizer import Tokenizer


def attach_teacher(cfg: TrainConfig, splits, tok: Tokenizer, is_main: bool, world: int,
                   progress: bool) -> TokenizedTexts | None:
    """Label the source side of every (rows, data) split and the corpus's monolingual texts with
    the teacher (cached on disk), attach the vectors to the data, and return the monolingual
    texts when the recipe uses them. Monolingual text in a language the teacher was not trained
    on is left out: its vectors there are noise (Reimers and Gurevych's student learns those
    languages from the pairs, whose English side the teacher knows)."""
    from edge_xsent.train.teacher import load_teacher
    from edge_xsent.train.teacher import label

    device = "cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu"  # labels at a GPU's speed
    teacher = load_teacher(cfg.teacher, threads=cfg.threads or torch.get_num_threads(), device=device,
                           max_len=cfg.teacher_max_len)
    known = teacher.languages
    unknown = sorted({p.lang_a for rows, _ in splits for p in rows} - known) if known else []
    if unknown:
        raise UserError(f"the teacher {cfg.teacher} does not know {', '.join(unknown)}, the source side of some pairs; "
                        f"it labels only the source side, so put a language it knows there ({', '.join(sorted(known))}) "
                        "or leave teacher unset")
    mono_path = resolve(cfg.data) / "mono.tsv"
    mono_texts = _mono_texts(cfg, mono_path, known) if cfg.mono_batch_size and mono_path.exists() else []
    if cfg.mono_batch_size and not mono_texts:
        raise UserError(f"mono_batch_size is set but {mono_path} has no text in a language the teacher knows: build "
                        "the corpus with monolingual sources (edge-xsent data build) or set mono_batch_size = 0")
    texts = [p.a for rows, _ in splits for p in rows] + mono_texts
    if is_main:  # rank 0 labels what the cache lacks; the others then read it, every text cached
        vecs, rows_of = label(texts, teacher, cfg.teacher_cache, batch_size=512 if device == "cuda" else 64,
                              progress=progress)
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
    ids = encode_texts(tok, mono_texts, cfg.model.max_len, prep_workers(cfg.threads))
    keep = [i for i, x in enumerate(ids) if len(x)]
    return TokenizedTexts([ids[i] for i in keep], vecs, rows_of[offset + np.array(keep)])


def _mono_texts(cfg: TrainConfig, path, known: set[str] | None) -> list[str]:
    """mono.tsv's texts in languages the teacher knows; with max_mono_texts, a prefix of train/label.py's
    order (`balanced_mono`), so that a run reads texts already labelled, every language alike."""
    rows = read_mono(path)
    if cfg.max_mono_texts:
        rows = balanced_mono(rows, cfg.seed)[:cfg.max_mono_texts]
    return [text for lang, text, _ in rows if not known or lang in known]


def _barrier(world: int) -> None:
    if world > 1 and dist.is_initialized():
        dist.barrier()


class TokenTeacher(torch.nn.Module):
    """e5-small, frozen, reading the student's own pieces (mapped to e5's ids: a student pruned from it
    keeps e5's piece strings; a byte piece becomes e5's <unk>), no prefix and no <s> ... </s>, so both
    see the same tokens. `pairs`: (student block, e5 block) whose token states are matched."""

    def __init__(self, model, id_map: torch.Tensor, pairs: list[tuple[int, int]]):
        super().__init__()
        self.model, self.pairs = model, pairs
        self.register_buffer("id_map", id_map, persistent=False)

    @classmethod
    def for_student(cls, tok: Tokenizer, n_layers: int, token_layers: list[int] | None) -> "TokenTeacher":
        from edge_xsent.train.e5 import load_e5, our_id, read_e5

        f = read_e5()
        by_piece = {p: our_id(i) for i, p in enumerate(f.pieces)}
        unk = our_id(f.specials["unk"])
        pieces = tok.sp.id_to_piece(list(range(tok.vocab_size)))
        specials = {0: our_id(f.specials["pad"]), 1: unk}
        id_map = torch.tensor([specials.get(i, by_piece.get(p, unk)) for i, p in enumerate(pieces)], dtype=torch.long)
        layers = token_layers if token_layers is not None else [-1] * (n_layers - 1) + [f.n_layers - 1]
        model, _ = load_e5(layers=range(max(layers) + 1))
        return cls(model, id_map, [(i, j) for i, j in enumerate(layers) if j >= 0])

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """The teacher's (B, T, C) token states at each pair's e5 block, in `pairs` order."""
        with torch.no_grad():
            states = self.model.encode_layers(self.id_map[ids], mask)
        return [states[j] for _, j in self.pairs]
