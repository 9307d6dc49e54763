"""Training through the table a student ships with: every token row read as the tiered int8 graph decodes it.

    hook = read_tiered(model, exact_rows=30_000)   # each lookup of model.tok_emb now returns decoded rows
    ...train...                                    # gradients pass straight through the rounding to the rows
    hook.remove()

Why: the default keeps e5's 250,002 pieces as a tiered table (encode/tiered_table.py: ids below `exact_rows` at
4 bits, every other at 1 bit), and the 1-bit tier cost the 4-block student 0.06 P@1 on held-back verses: its blocks
were distilled on e5's whole table and never saw the one they ship with. Here the blocks learn on the rows the graph
will read. The table itself keeps its full-precision rows (the master copy): with `freeze_table` they are e5's, so
a run's folder is still a student of e5 (student.write_student), and the export packs them into the same codes the
forward pass used. When the rows train too, a row moves through the rounding as if it were not there (the
straight-through estimator of BinaryConnect and of QAT), and its scales follow its values (max |x| / 7 a block,
mean |x| a 1-bit row), as `pack` computes them.

`decode_rows` is `tiered_table.unpack(tiered_table.pack(rows))` in torch, on the rows a batch looks up only.
"""

from __future__ import annotations

import torch

from edge_xsent.encode.tiered_table import BLOCK


def decode_rows(rows: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """`rows` (..., dim) as the graph decodes them: where `exact` (...,) is true, 4-bit blocks of BLOCK values
    with an fp16 scale each; elsewhere the row's signs times its fp16 mean |x| (a zero counts as negative)."""
    x = rows.float()
    blocks = x.unflatten(-1, (-1, BLOCK))
    scale = (blocks.abs().amax(-1, keepdim=True) / 7).half().float()
    q = torch.clamp(torch.round(blocks / scale.clamp(min=1e-12)), -8, 7)
    four_bit = (q * scale).flatten(-2)
    s = x.abs().mean(-1, keepdim=True).half().float()
    one_bit = torch.where(x > 0, s, -s)
    return torch.where(exact.unsqueeze(-1), four_bit, one_bit).to(rows.dtype)


def straight_through(rows: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """The decoded rows forward; backward, the gradient reaches `rows` unchanged."""
    return rows + (decode_rows(rows.detach(), exact) - rows).detach()


def read_tiered(model: torch.nn.Module, exact_rows: int) -> torch.utils.hooks.RemovableHandle:
    """Every lookup of `model.tok_emb` returns its rows as the tiered graph decodes them (a forward hook: the
    trainer's step, validation and the benchmark all read the same rows). Returns the hook's handle."""
    def hook(module: torch.nn.Module, inputs: tuple[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
        return straight_through(rows, inputs[0] < exact_rows)

    return model.tok_emb.register_forward_hook(hook)
