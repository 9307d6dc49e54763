"""The lightweight dual encoder: one small transformer shared by both sides of a pair.

BERT-style post-LayerNorm blocks (as the authors' code), learned positions, masked mean
pooling. The generative head (Linear -> GELU -> LayerNorm -> vocabulary projection tied
to the input embeddings, plus its own bias) is applied to the pooled sentence vector;
inference and the contrastive losses use the vector *before* the head.

With `n_langs > 0` (EMS mode) a target-language embedding is concatenated to the sentence
vector inside the head only, so one model can reconstruct into many languages.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from edge_xsent.config import EncoderConfig


def mean_pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, C) states, (B, T) 0/1 mask -> (B, C) mean over real tokens (zeros for none)."""
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp(min=1.0)


class Block(nn.Module):
    """Post-LN transformer layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.ff1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.ff2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.drop = nn.Dropout(cfg.dropout)
        self.attn_dropout = cfg.dropout

    def forward(self, x: torch.Tensor, attn_bias: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        x = self.ln1(x + self.drop(self.proj(y)))
        return self.ln2(x + self.drop(self.ff2(F.gelu(self.ff1(x)))))


class DualEncoder(nn.Module):
    def __init__(self, cfg: EncoderConfig, draw: bool = True):
        """`draw=False` (`for_weights`): the token table is left unfilled and `_init` not run, for weights loaded next."""
        super().__init__()
        self.cfg = cfg
        rows = cfg.table_rows or cfg.vocab_size
        self.tok_emb = nn.Embedding(rows, cfg.d_model, padding_idx=cfg.pad_id,
                                    _weight=None if draw else torch.empty(rows, cfg.d_model))
        if cfg.table_rows:  # a cut table: each piece reads the row id_map names (student.cut_table)
            self.register_buffer("id_map", torch.zeros(cfg.vocab_size, dtype=torch.int32))
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.emb_ln = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        # Generative head (training only).
        head_in = cfg.d_model + (cfg.lang_dim if cfg.n_langs else 0)
        self.lang_emb = nn.Embedding(cfg.n_langs, cfg.lang_dim) if cfg.n_langs else None
        self.head_dense = nn.Linear(head_in, cfg.d_model)
        self.head_ln = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.head_bias = nn.Parameter(torch.zeros(rows))
        if cfg.lang_subspace:  # orthonormal rows, set by debias.py after training
            self.register_buffer("lang_basis", torch.zeros(cfg.lang_subspace, cfg.d_model))
        if draw:
            self.apply(self._init)

    @classmethod
    def for_weights(cls, cfg: EncoderConfig) -> "DualEncoder":
        """An encoder whose weights are loaded next: its token table is not drawn at random (twice) only to be
        overwritten, about 1 s for e5's 96M numbers. (The meta device would skip the rest too, but its first use
        in a process costs as much.) Pass what `load_state_dict` reports missing to `init_missing`."""
        return cls(cfg, draw=False)

    def init_missing(self, missing: list[str]) -> None:
        """Start the tensors a loaded state lacked (a folder without the generative head) as a new model starts them."""
        for name in missing:
            owner, _, attr = name.rpartition(".")
            self._start(self.get_submodule(owner), attr)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            DualEncoder._start(m, "weight")
        if isinstance(m, nn.Linear) and m.bias is not None:
            DualEncoder._start(m, "bias")

    @staticmethod
    def _start(module: nn.Module, attr: str) -> None:
        """How a new model starts one tensor: Linear and Embedding weights drawn N(0, 0.02), LayerNorm weights one,
        biases and buffers zero."""
        tensor = getattr(module, attr)
        if attr == "weight" and isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(tensor, std=0.02)
        elif attr == "weight" and isinstance(module, nn.LayerNorm):
            nn.init.ones_(tensor)
        else:
            nn.init.zeros_(tensor)

    def encode_tokens(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T) ids and 0/1 mask -> (B, T, C) last-layer states."""
        return self.encode_layers(ids, mask)[-1]

    def encode_layers(self, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """(B, T) ids and 0/1 mask -> every block's (B, T, C) states, first to last (token-level
        distillation reads the inner ones)."""
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device)
        x = self.drop(self.emb_ln(self.tok_emb(self.rows(ids)) + self.pos_emb(pos)))
        # Additive bias (B, 1, 1, T): padded keys get -inf-like scores. Float, not bool, so a
        # row of only padding (an empty sentence) stays finite instead of becoming NaN.
        attn_bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        states = []
        for block in self.blocks:
            x = block(x, attn_bias)
            states.append(x)
        return states

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids -> rows of the token table (the same unless the table was cut)."""
        return self.id_map[ids] if self.cfg.table_rows else ids

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sentence vectors (B, C): masked mean of the last layer over real tokens, minus their
        component in the language subspace when the model has one."""
        return self.remove_language(mean_pool(self.encode_tokens(ids, mask), mask))

    def remove_language(self, h: torch.Tensor) -> torch.Tensor:
        """(..., C) -> minus its component in the language subspace (identity when there is none).
        Linear, so removing it from each token and then pooling gives the same sentence vector."""
        if not self.cfg.lang_subspace:
            return h
        return h - (h @ self.lang_basis.T) @ self.lang_basis

    def generative_logits(self, h: torch.Tensor, lang: torch.Tensor | None = None,
                          rows: torch.Tensor | None = None, sparse: bool = False) -> torch.Tensor:
        """(..., C) sentence or token states -> (..., V) vocabulary logits (tied output embedding);
        with `rows`, only those vocabulary entries' logits (..., len(rows)), a sampled softmax's,
        whose gradient for the table is a sparse tensor with `sparse`."""
        if self.lang_emb is not None:
            if lang is None:
                raise ValueError("this model has a target-language head: pass lang ids")
            e = self.lang_emb(lang)  # (B, L)
            if h.dim() == 3:  # token states (B, T, C)
                e = e[:, None, :].expand(-1, h.shape[1], -1)
            h = torch.cat([h, e], dim=-1)
        h = self.head_ln(F.gelu(self.head_dense(h)))
        if rows is None:
            return h @ self.tok_emb.weight.T + self.head_bias
        return h @ F.embedding(rows, self.tok_emb.weight, sparse=sparse).T + self.head_bias[rows]

    def num_parameters(self, embeddings: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n if embeddings else n - self.tok_emb.weight.numel()

