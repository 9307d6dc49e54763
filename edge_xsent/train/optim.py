"""Optimisers of the training step: fused Adam for the dense parameters and, with
`lazy_table`, a lazy Adam for the embedding table that updates only the rows a step touched.

Why lazy: with a sampled softmax head (`head_negatives`) a step touches a few thousand of the
table's 48,000 rows; dense Adam would still read and write all of them (three table-sized
moments, 8% of a CPU step). Lazy Adam (as TensorFlow's LazyAdam and torch's SparseAdam) leaves
an untouched row, and its moments, as they are, which changes training: a recipe option,
judged at equal wall-clock time (benchmarks/training_cost.py).
"""

from __future__ import annotations

import math
from typing import Iterable

import torch


def adam(params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float) -> torch.optim.Adam:
    """The authors' Adam (amsgrad, L2 weight decay), fused: one kernel over all parameters instead
    of a Python loop of element-wise ops; the same update (tests/test_train_step.py)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, amsgrad=True, fused=True)


def adamw(params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (decoupled weight decay), fused: the GPU students' record trained with it."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)


class LazyAdam(torch.optim.Optimizer):
    """Adam with amsgrad and L2 weight decay on the rows of sparse gradients only; the bias
    correction follows the global step, as dense Adam's."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None) -> None:
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise ValueError("LazyAdam takes sparse gradients (nn.Embedding(sparse=True))")
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                        state[k] = torch.zeros_like(p)
                state["step"] += 1
                t = float(state["step"])
                grad = p.grad.coalesce()
                rows, g = grad.indices()[0], grad.values()
                g = g + group["weight_decay"] * p[rows]
                m = state["exp_avg"][rows].mul_(b1).add_(g, alpha=1 - b1)
                v = state["exp_avg_sq"][rows].mul_(b2).addcmul_(g, g, value=1 - b2)
                vmax = torch.maximum(state["max_exp_avg_sq"][rows], v)
                state["exp_avg"][rows], state["exp_avg_sq"][rows], state["max_exp_avg_sq"][rows] = m, v, vmax
                denom = (vmax.sqrt() / math.sqrt(1 - b2 ** t)).add_(group["eps"])
                p.index_add_(0, rows, m / denom, alpha=-group["lr"] / (1 - b1 ** t))


def clip_grad_norm(params: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """`nn.utils.clip_grad_norm_` that also takes sparse gradients (coalesced first, so a row the
    step touched twice counts once with its summed gradient)."""
    grads = []
    for p in params:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()
            grads.append(p.grad.values())
        else:
            grads.append(p.grad)
    if not grads:
        return torch.zeros(())
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale)
    return total
