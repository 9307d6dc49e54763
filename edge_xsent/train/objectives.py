"""Training objectives as pure functions of tensors (paper, sections 3.2-3.4).

Generative tasks, each a target distribution over the vocabulary for a sentence vector:
  MLM   BERT masked LM, per token (ablation baseline; fails for shallow models)
  SMLM  one masked token w_t of S, predicted from S-with-mask and from its translation S'
  XTR   the bag of tokens of the translation: q(w) = count(w) / len(S')
  UGT   SMLM + XTR in one label: q = 1/2 on w_t + 1/2 * XTR bag (the paper's default)
Contrastive tasks on the pooled vectors u (side a) and v (side b):
  align (Eq. 5)  in-batch softmax over u_i . v_k, cross-entropy in both directions
  sim   (Eq. 6)  -log cos(pi/2 * (softmax(U U^T) - softmax(V V^T)))
Distillation (Reimers and Gurevych, 2020): a projection of the student's vector of a sentence
and of its translation towards the teacher's vector of the sentence (`distill_loss`).

`Objective` (at the end) mixes them as a recipe asks: one forward of the encoder, every loss.

Unlike the authors' code, repeated tokens are counted (not set to 1) so every target
sums to 1, and special ids (pad, unk, mask) never enter a bag.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from edge_xsent.config import DISTILL_LOSSES, SPECIAL_IDS, TrainConfig
from edge_xsent.encode.model import DualEncoder, mean_pool
from edge_xsent.encode.tokenizer import MASK_ID, Tokenizer
from edge_xsent.errors import UserError


def real_tokens(ids: torch.Tensor, mask: torch.Tensor, special_ids=SPECIAL_IDS) -> torch.Tensor:
    """(B, T) bool: positions holding a real, non-special token."""
    keep = mask.bool()
    for s in special_ids:
        keep &= ids != s
    return keep


def bag_of_tokens(ids: torch.Tensor, mask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """XTR target (B, V): token counts / number of real tokens. A row without real tokens is 0."""
    keep = real_tokens(ids, mask).float()
    bag = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bag.scatter_add_(1, ids, keep)
    return bag / keep.sum(1, keepdim=True).clamp(min=1.0)


def ugt_target(masked_token: torch.Tensor, other_ids: torch.Tensor, other_mask: torch.Tensor,
               vocab_size: int) -> torch.Tensor:
    """UGT target (B, V) for the masked side: 1/2 on w_t, 1/2 spread as the other side's bag."""
    one_hot = F.one_hot(masked_token, vocab_size).float()
    return 0.5 * one_hot + 0.5 * bag_of_tokens(other_ids, other_mask, vocab_size)


def bag_support(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """XTR target as its support: ids (B, T + 1) and weights summing to 1 per row (0 where a row has
    no real token): `bag_of_tokens` without the (B, V) tensor. A repeated token appears once per
    occurrence; the extra last column (weight 0) makes it as wide as `ugt_support`."""
    keep = real_tokens(ids, mask).float()
    w = keep / keep.sum(1, keepdim=True).clamp(min=1.0)
    pad = ids.new_zeros(ids.shape[0], 1)
    return torch.cat([ids, pad], 1), torch.cat([w, w.new_zeros(ids.shape[0], 1)], 1)


def ugt_support(masked_token: torch.Tensor, other_ids: torch.Tensor, other_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """`ugt_target` as its support: 1/2 on w_t in the last column, 1/2 spread as the other side's bag."""
    ids, w = bag_support(other_ids, other_mask)
    ids, w = ids.clone(), 0.5 * w
    ids[:, -1], w[:, -1] = masked_token, 0.5
    return ids, w


def support_kl(logits: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per-row KL(q || softmax(logits)) for a target given by its support (ids (B, K), weights (B, K);
    an id may repeat, its weights add up): sum q log q - sum q * logit + sum(q) * logsumexp(logits).
    The same number as `distribution_loss` on the dense target, without building a (B, V) target or
    a (B, V) log-softmax: the step's largest element-wise costs. Rows whose weights are 0 give 0."""
    with torch.no_grad():  # q log q: a constant of the target, kept so the loss reads as before
        same = ids[:, :, None] == ids[:, None, :]
        q = (w[:, None, :] * same).sum(-1)  # each entry's total weight in its row
        neg_entropy = (w * torch.log(q.clamp(min=1e-12))).sum(-1)
    return neg_entropy + _CrossEntropyOnSupport.apply(logits.float(), ids, w)


class _CrossEntropyOnSupport(torch.autograd.Function):
    """Per row sum(w) * logsumexp(logits) - sum_k w_k * logits[ids_k]. Its gradient, softmax * sum(w)
    minus w at ids, is written into one (B, V) buffer: autograd's own chain (a zero tensor for the
    gather, the softmax's sub, exp and mul, their sum) would allocate and fill five."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        lse = torch.logsumexp(logits, dim=-1)
        ctx.save_for_backward(logits, ids, w, lse)
        return w.sum(-1) * lse - (w * logits.gather(1, ids)).sum(-1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, ids, w, lse = ctx.saved_tensors
        g = torch.sub(logits, lse[:, None]).exp_().mul_((w.sum(-1) * grad)[:, None])
        return g.scatter_add_(1, ids, -w * grad[:, None]), None, None


def mean_over_targets(per_row: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Mean of the rows whose target has mass, as `distribution_loss` averages."""
    valid = w.sum(-1) > 0
    return per_row[valid].mean() if valid.any() else per_row.sum() * 0.0


def sample_candidates(positives: torch.Tensor, vocab_size: int, n_negatives: int, gen: torch.Generator
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of a sampled softmax: every id in `positives` (the batch's targets) and `n_negatives`
    others drawn uniformly without replacement. Returns (candidates (C,), logQ correction (C,)): 0
    for a positive, log(others / drawn) for a negative, so that the drawn negatives' exp-sum
    estimates the whole rest of the vocabulary's (Bengio and Senecal 2008); with n_negatives >=
    vocab_size it is the whole softmax."""
    pos = torch.unique(positives)
    is_pos = torch.zeros(vocab_size, dtype=torch.bool, device=positives.device)
    is_pos[pos] = True
    order = torch.randperm(vocab_size, generator=gen).to(positives.device)
    others = order[~is_pos[order]]
    neg = others[:n_negatives]
    correction = torch.cat([torch.zeros(len(pos), device=positives.device),
                            torch.full((len(neg),), math.log(max(len(others), 1) / max(len(neg), 1)),
                                       device=positives.device)])
    return torch.cat([pos, neg]), correction


def distribution_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KL(q || p) averaged over rows whose target has mass (q sums to 1 there)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    per_row = (target * (torch.log(target.clamp(min=1e-12)) - logp)).sum(-1)
    valid = target.sum(-1) > 0
    return per_row[valid].mean() if valid.any() else logits.sum() * 0.0


def mask_one_token(ids: torch.Tensor, mask: torch.Tensor, mask_id: int, generator: torch.Generator,
                   avoid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """SMLM masking: replace one real token per row by `mask_id`.

    `avoid` (V,) bool marks pieces not worth predicting (punctuation); they are masked only
    when a row has nothing else. Returns (masked ids, the original tokens (B,)); rows
    without any real token keep their ids and get token `mask_id`, which no target uses.
    """
    cand = real_tokens(ids, mask)
    if avoid is not None:
        preferred = cand & ~avoid.to(ids.device)[ids]
        cand = torch.where(preferred.any(1, keepdim=True), preferred, cand)
    has = cand.any(1)
    weights = torch.where(has[:, None], cand.float(), torch.ones_like(cand, dtype=torch.float))
    pos = torch.multinomial(weights.cpu(), 1, generator=generator).squeeze(1).to(ids.device)
    rows = torch.arange(ids.shape[0], device=ids.device)
    token = torch.where(has, ids[rows, pos], torch.full_like(pos, mask_id))
    masked = ids.clone()
    masked[rows[has], pos[has]] = mask_id
    return masked, token


def mask_tokens_bert(ids: torch.Tensor, mask: torch.Tensor, mask_id: int, vocab_size: int,
                     generator: torch.Generator, prob: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: of the selected 15%, 80% -> <mask>, 10% -> random, 10% kept. Labels -100 elsewhere."""
    cand = real_tokens(ids, mask)
    r = torch.rand(ids.shape, generator=generator).to(ids.device)
    chosen = cand & (r < prob)
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    r2 = torch.rand(ids.shape, generator=generator).to(ids.device)
    random_ids = torch.randint(len(SPECIAL_IDS), vocab_size, ids.shape, generator=generator).to(ids.device)
    out = torch.where(chosen & (r2 < 0.8), torch.full_like(ids, mask_id), ids)
    out = torch.where(chosen & (r2 >= 0.8) & (r2 < 0.9), random_ids, out)
    return out, labels


def mlm_loss(token_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over masked positions (labels -100 elsewhere)."""
    if not (labels != -100).any():
        return token_logits.sum() * 0.0
    return F.cross_entropy(token_logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)


def align_loss(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Eq. 5: each u_i must pick v_i among the batch (and v_i pick u_i), raw dot products."""
    scores = u.float() @ v.float().T  # (B, B)
    target = torch.arange(u.shape[0], device=u.device)
    return 0.5 * (F.cross_entropy(scores, target) + F.cross_entropy(scores.T, target))


def sim_loss(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Eq. 6: make the in-batch similarity distributions of both languages agree.

    The paper sums over all B x B entries; we sum over j and average over i so the scale
    does not grow with the batch size. Differences are in [-1, 1], so cos is in [0, 1];
    it is clamped away from 0 to keep the log finite.
    """
    su = F.softmax(u.float() @ u.float().T, dim=-1)
    sv = F.softmax(v.float() @ v.float().T, dim=-1)
    c = torch.cos(0.5 * math.pi * (su - sv)).clamp(min=1e-6)
    return -torch.log(c).sum(-1).mean()


def matryoshka(loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], u: torch.Tensor, v: torch.Tensor,
               dims: Sequence[int]) -> torch.Tensor:
    """`loss` at full width and on the first k dimensions for each k in dims, averaged (Matryoshka
    representation learning, Kusupati et al. 2022): prefixes trained to work alone, so truncated
    vectors (encode(dimensions=k)) lose little."""
    widths = [u.shape[-1], *dims]
    return sum(loss(u[..., :k], v[..., :k]) for k in widths) / len(widths)


def distance_loss(u: torch.Tensor, v: torch.Tensor, negatives: torch.Tensor, margin: float = 0.5,
                  neg_weight: float = 0.5, eps: float = 1e-6) -> torch.Tensor:
    """T-LASER's distance constraint (eq. 7-10): pull each pair together and keep every sampled
    unrelated pair at least `margin` further apart than it, in both directions. Distances are
    divided by the batch's mean vector norm, so the loss cannot be lowered by shrinking vectors.
    `negatives` (B, Ns) holds, per row i, the indices j != i of its unrelated partners; the
    paper's lambda = beta / 2 is `neg_weight` = 0.5 here, beta being the objective's weight."""
    u, v = u.float(), v.float()
    vnorm = torch.cat([u, v]).norm(dim=-1).mean() + eps
    dp = (u - v).norm(dim=-1) / vnorm  # (B,)
    d_ab = (u[:, None, :] - v[negatives]).norm(dim=-1) / vnorm  # (B, Ns): u_i to unrelated v_j
    d_ba = (v[:, None, :] - u[negatives]).norm(dim=-1) / vnorm
    delta = F.relu(margin - (d_ab - dp[:, None])) + F.relu(margin - (d_ba - dp[:, None]))
    return dp.mean() + neg_weight * delta.mean(dim=1).mean()


def sample_negatives(batch: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """(batch, n) indices, row i drawn uniformly from the other rows (never i itself)."""
    r = torch.randint(0, batch - 1, (batch, n), generator=gen)
    return r + (r >= torch.arange(batch)[:, None]).long()


def distill_loss(pred: torch.Tensor, target: torch.Tensor, kind: str = "cos", temperature: float = 0.05) -> torch.Tensor:
    """Student (projected, (B, D)) towards teacher (B, D) vectors of unit length.

    cos  1 - cosine: direction only, blind to scale.
    mse  squared error to the target scaled by sqrt(D), so each coordinate is ~1: against
         unit-length targets (coordinates ~0.04) the error is tiny and a student learns
         little more than the mean vector.
    nce  in-batch contrastive: pred_i must pick target_i among the batch's targets, which
         also pushes different sentences apart.
    mse+nce  the GPU students' loss: squared distance of the unit vectors plus nce, a target
         that another row shares (the same sentence twice in a batch) masked as a negative.
    """
    pred, target = pred.float(), target.float()
    if kind == "cos":
        return (1 - F.cosine_similarity(pred, target, dim=-1)).mean()
    if kind == "mse":
        return F.mse_loss(pred, target * math.sqrt(target.shape[-1]))
    if kind == "nce":
        logits = F.normalize(pred, dim=-1) @ F.normalize(target, dim=-1).T / temperature
        return F.cross_entropy(logits, torch.arange(pred.shape[0], device=pred.device))
    if kind == "mse+nce":
        unit, rows = F.normalize(pred, dim=-1), torch.arange(pred.shape[0], device=pred.device)
        shared = (target @ target.T > 1 - 1e-6) & (rows[:, None] != rows[None, :])
        logits = (unit @ target.T / temperature).masked_fill(shared, -1e4)
        return ((unit - target) ** 2).sum(-1).mean() + F.cross_entropy(logits, rows)
    raise ValueError(f"unknown distillation loss {kind!r}; choose from {', '.join(DISTILL_LOSSES)}")


def token_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """TinyBERT's hidden-state loss: the mean squared distance of each student block's (B, T, C) token
    states to its teacher block's, over real tokens only (mask (B, T)); the mean of the block pairs."""
    w = mask.float()[..., None]
    n = (w.sum() * student[0].shape[-1]).clamp(min=1.0)
    terms = [((s.float() - t.float()) ** 2 * w).sum() / n for s, t in zip(student, teacher, strict=True)]
    return sum(terms) / len(terms)


# ----------------------------------------------------------------------------- the mix a training step minimises

def punctuation_pieces(tok: Tokenizer) -> torch.Tensor:
    """(V,) bool: pieces made only of punctuation/symbols, which SMLM avoids masking."""
    pieces = (p.replace("\u2581", "") for p in tok.sp.id_to_piece(list(range(tok.vocab_size))))  # one call: 250k in e5
    return torch.tensor([bool(p) and not any(ch.isalnum() for ch in p) for p in pieces], dtype=torch.bool)


class Objective(nn.Module):
    """Wraps the encoder so that one forward computes every loss (what DDP needs)."""

    def __init__(self, model: DualEncoder, cfg: TrainConfig, avoid: torch.Tensor, teacher_dim: int = 0,
                 start: DualEncoder | None = None, anchored: torch.Tensor | None = None,
                 token_teacher: nn.Module | None = None, teacher_space: bool = False):
        """`start`, `anchored` (anchor_weight): the run's first weights, frozen, and a (n_langs,) bool
        of the languages whose sentences keep their vectors from it. `token_teacher` (token_weight):
        distill.TokenTeacher, frozen, with the student blocks it is mapped to (`pairs`). `teacher_space`:
        the start's vectors are the teacher's already (warmstart.starts_in_teacher_space)."""
        super().__init__()
        self.model, self.cfg = model, cfg
        self.register_buffer("avoid", avoid, persistent=False)
        # Training only: maps the student's vector into the teacher's space (not saved with the model), or,
        # with teacher_proj = "none", the identity: what the model exports is then what met the teacher.
        self.teacher_proj = self.projection(model.cfg.d_model, teacher_dim, cfg.teacher_proj)
        if isinstance(self.teacher_proj, nn.Linear) and teacher_space and teacher_dim == model.cfg.d_model:
            with torch.no_grad():  # a student pruned from the teacher starts in its space: no map to learn first
                self.teacher_proj.weight.copy_(torch.eye(teacher_dim))
                self.teacher_proj.bias.zero_()
        self.start = start.requires_grad_(False).eval() if start is not None else None
        self.register_buffer("anchored", anchored, persistent=False)
        self.token_teacher = token_teacher.requires_grad_(False).eval() if token_teacher is not None else None
        # type_row: one row added to every position's, with its own Adam moments (the record trained e5's token-type
        # row apart from the positions); the model's state never holds it: Trainer.saved_model folds it in.
        self.type_row = nn.Parameter(torch.zeros(model.cfg.d_model)) if cfg.type_row else None
        if self.type_row is not None:
            model.pos_emb.register_forward_hook(lambda _module, _ids, rows: rows + self.type_row)

    @staticmethod
    def projection(d_model: int, teacher_dim: int, kind: str) -> nn.Module | None:
        """None without a teacher; a learned Linear; or the identity, which needs the teacher's width."""
        if not teacher_dim:
            return None
        if kind == "learned":
            return nn.Linear(d_model, teacher_dim)
        if teacher_dim != d_model:
            raise UserError(f'teacher_proj = "none" needs the teacher\'s width: the model is {d_model}-d, the teacher '
                            f'{teacher_dim}-d; set d_model = {teacher_dim} or teacher_proj = "learned"')
        return nn.Identity()

    def train(self, mode: bool = True) -> "Objective":
        super().train(mode)
        for frozen in (self.start, self.token_teacher):  # the anchor's and the teacher's targets never see dropout
            if frozen is not None:
                frozen.eval()
        return self

    def forward(self, batch: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
        if "a" not in batch:  # batch_items: texts alone, each towards its teacher vector
            return self.items(batch["m"], batch["mm"], batch["tm"])
        m, cfg, V = self.model, self.cfg, self.model.cfg.vocab_size
        a, am, b, bm, la, lb = (batch[k] for k in ("a", "am", "b", "bm", "la", "lb"))
        states = None  # every block's token states of the unmasked pair, where a branch computes them
        lang = (lambda x: x) if m.lang_emb is not None else (lambda x: None)
        losses: dict[str, torch.Tensor] = {}

        if cfg.objective in ("mlm", "mlm-xtr"):
            u, v, seen, losses["gen"] = self.mlm(batch, gen, lang)
        elif cfg.objective in ("smlm", "ugt"):
            a_mask, wa = mask_one_token(a, am, MASK_ID, gen, self.avoid)
            b_mask, wb = mask_one_token(b, bm, MASK_ID, gen, self.avoid)
            if cfg.objective == "smlm":
                u, v = m(a_mask, am), m(b_mask, bm)
                seen = (a_mask, b_mask)
                oh_a, oh_b = nn.functional.one_hot(wa, V).float(), nn.functional.one_hot(wb, V).float()
                losses["gen"] = 0.25 * (  # each masked token from its own sentence and from the translation
                    distribution_loss(m.generative_logits(u, lang(la)), oh_a)
                    + distribution_loss(m.generative_logits(v, lang(la)), oh_a)
                    + distribution_loss(m.generative_logits(v, lang(lb)), oh_b)
                    + distribution_loss(m.generative_logits(u, lang(lb)), oh_b))
            else:
                # Coin flip per pair: which side carries the masked token (authors' code).
                flip = (torch.rand(a.shape[0], generator=gen) < 0.5).to(a.device)
                a_in = torch.where(flip[:, None], a, a_mask)
                b_in = torch.where(flip[:, None], b_mask, b)
                u, v = m(a_in, am), m(b_in, bm)
                seen = (a_in, b_in)
                # Targets as their support (ids, weights): the dense (B, V) ones cost more than the head.
                bag_a, bag_b = bag_support(a, am), bag_support(b, bm)
                ugt_a, ugt_b = ugt_support(wa, b, bm), ugt_support(wb, a, am)
                f = flip[:, None]
                tgt_u = (torch.where(f, bag_b[0], ugt_a[0]), torch.where(f, bag_b[1], ugt_a[1]))
                tgt_v = (torch.where(f, ugt_b[0], bag_a[0]), torch.where(f, ugt_b[1], bag_a[1]))
                ids, w = _stack_supports(tgt_u, tgt_v)
                losses["gen"] = self.generative_kl(torch.cat([u, v]), lang(torch.cat([lb, la])), ids, w, gen)
        else:
            if self.token_teacher is not None:  # the token loss reads the inner blocks of this very forward
                states = (m.encode_layers(a, am), m.encode_layers(b, bm))
                u, v = (m.remove_language(mean_pool(x[-1], k)) for x, k in zip(states, (am, bm)))
            else:
                u, v = m(a, am), m(b, bm)
            seen = (a, b)
            if cfg.objective == "xtr":
                losses["gen"] = 0.5 * (
                    distribution_loss(m.generative_logits(u, lang(lb)), bag_of_tokens(b, bm, V))
                    + distribution_loss(m.generative_logits(v, lang(la)), bag_of_tokens(a, am, V)))

        total = cfg.gen_weight * losses["gen"] if "gen" in losses else u.sum() * 0.0
        dims = cfg.matryoshka_dims  # the in-batch losses also on each prefix, so truncated vectors work alone
        if cfg.align_weight:
            losses["align"] = matryoshka(align_loss, u, v, dims)
            total = total + cfg.align_weight * losses["align"]
        if cfg.sim_weight:
            losses["sim"] = matryoshka(sim_loss, u, v, dims)
            total = total + cfg.sim_weight * losses["sim"]
        if cfg.distance_weight:
            negatives = sample_negatives(u.shape[0], cfg.distance_negatives, gen).to(u.device)
            losses["distance"] = distance_loss(u, v, negatives, cfg.distance_margin)
            total = total + cfg.distance_weight * losses["distance"]
        if self.teacher_proj is not None:
            losses["teacher"] = self.distill(u, v, batch)
            total = total + cfg.teacher_weight * losses["teacher"]
        if self.start is not None:
            losses["anchor"] = self.anchor((u, seen[0], am, la), (v, seen[1], bm, lb))
            total = total + cfg.anchor_weight * losses["anchor"]
        if self.token_teacher is not None:
            losses["token"] = self.token_distill(((a, am), (b, bm)), states)
            total = total + cfg.token_weight * losses["token"]
        losses["total"] = total
        return losses

    def mlm(self, batch: dict[str, torch.Tensor], gen: torch.Generator, lang):
        """(u, v, what the encoder read, the generative loss) of BERT-style masking, both sides; with
        mlm-xtr (Table 6's MLM (+) XTR) the masked sentence also predicts its translation."""
        m, V = self.model, self.model.cfg.vocab_size
        a, am, b, bm, la, lb = (batch[k] for k in ("a", "am", "b", "bm", "la", "lb"))
        a_in, la_lab = mask_tokens_bert(a, am, MASK_ID, V, gen)
        b_in, lb_lab = mask_tokens_bert(b, bm, MASK_ID, V, gen)
        xa, xb = m.encode_tokens(a_in, am), m.encode_tokens(b_in, bm)
        u, v = mean_pool(xa, am), mean_pool(xb, bm)
        # Vocabulary logits only at the masked positions (~15%): the same loss at a sixth of the cost.
        sa, sb = la_lab != -100, lb_lab != -100
        logits_a = m.generative_logits(xa[sa], lang(la[sa.nonzero()[:, 0]]))
        logits_b = m.generative_logits(xb[sb], lang(lb[sb.nonzero()[:, 0]]))
        loss = 0.5 * (mlm_loss(logits_a[None], la_lab[sa][None]) + mlm_loss(logits_b[None], lb_lab[sb][None]))
        if self.cfg.objective == "mlm-xtr":
            loss = 0.5 * loss + 0.25 * (distribution_loss(m.generative_logits(u, lang(lb)), bag_of_tokens(b, bm, V))
                                        + distribution_loss(m.generative_logits(v, lang(la)), bag_of_tokens(a, am, V)))
        return u, v, (a_in, b_in), loss

    def generative_kl(self, h: torch.Tensor, lang: torch.Tensor | None, ids: torch.Tensor, w: torch.Tensor,
                      gen: torch.Generator) -> torch.Tensor:
        """The mean of the two halves' KL losses (u's rows, then v's), through one head matmul for
        both. In training with `head_negatives`, over a sampled softmax: the batch's target pieces
        and that many others (`sample_candidates`), so the head and the table's gradient touch a
        few thousand rows instead of the whole vocabulary; validation always uses the whole head."""
        rows = correction = None
        if self.training and self.cfg.head_negatives:
            V = self.model.cfg.vocab_size
            rows, correction = sample_candidates(ids[w > 0], V, self.cfg.head_negatives, gen)
            position = torch.zeros(V, dtype=torch.long, device=ids.device)
            position[rows] = torch.arange(len(rows), device=ids.device)
            ids = position[ids]  # weight-0 entries may point anywhere: they add nothing
        logits = self.model.generative_logits(h, lang, rows, sparse=self.cfg.lazy_table)
        if correction is not None:
            logits = logits + correction
        per_row, half = support_kl(logits, ids, w), h.shape[0] // 2
        return 0.5 * (mean_over_targets(per_row[:half], w[:half]) + mean_over_targets(per_row[half:], w[half:]))

    def distill(self, u: torch.Tensor, v: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """A sentence and its translation both towards the teacher's vector of the sentence,
        and monolingual texts towards their own; the mean of the three terms, or with mse+nce one
        in-batch problem over all of them."""
        kind, proj, t = self.cfg.teacher_loss, self.teacher_proj, batch["t"]
        preds, targets = [proj(u), proj(v)], [t, t]
        if "m" in batch:
            preds.append(proj(self.model(batch["m"], batch["mm"])))
            targets.append(batch["tm"])
        if kind == "mse+nce":  # as the GPU students' record: each row's negatives are all the others
            return distill_loss(torch.cat(preds), torch.cat(targets), kind)
        return sum(distill_loss(p, target, kind) for p, target in zip(preds, targets)) / len(preds)


    def items(self, ids: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """batch_items' losses: each text towards its teacher vector and, with token_weight, its token states
        towards e5-small's on the same text (one forward of the student gives both)."""
        m, cfg = self.model, self.cfg
        states = m.encode_layers(ids, mask) if self.token_teacher is not None else None
        vec = m(ids, mask) if states is None else m.remove_language(mean_pool(states[-1], mask))
        losses = {"teacher": distill_loss(self.teacher_proj(vec), targets, cfg.teacher_loss)}
        losses["total"] = cfg.teacher_weight * losses["teacher"]
        if states is not None:
            losses["token"] = self.token_distill(((ids, mask),), (states,))
            losses["total"] = losses["total"] + cfg.token_weight * losses["token"]
        return losses

    def token_distill(self, sides, states=None) -> torch.Tensor:
        """Both sides' mapped student blocks towards e5-small's on the same pieces; a branch that ran the
        unmasked pair gives its `states`, else the student reads it once more."""
        pairs, terms = self.token_teacher.pairs, []
        for k, (ids, mask) in enumerate(sides):
            ours = states[k] if states is not None else self.model.encode_layers(ids, mask)
            terms.append(token_loss([ours[i] for i, _ in pairs], self.token_teacher(ids, mask), mask))
        return sum(terms) / len(terms)

    def anchor(self, *sides: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Each side's (vectors, the ids the encoder read, mask, language ids): the rows in an
        anchored language towards the start's vector of the same input (learning without
        forgetting, Li and Hoiem 2017), so the languages the start knew keep their geometry."""
        preds, targets = [], []
        for vec, ids, mask, lang in sides:
            keep = self.anchored[lang]
            preds.append(vec[keep])
            with torch.no_grad():
                targets.append(self.start(ids[keep], mask[keep]) if keep.any() else vec.new_zeros(0, vec.shape[1]))
        return anchor_loss(torch.cat(preds), torch.cat(targets))


def anchor_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cosine distance of the anchored rows (B, D) to their start vectors; 0, still in the
    graph, in a batch without an anchored row."""
    return distill_loss(pred, target, "cos") if len(pred) else pred.sum() * 0.0


def _stack_supports(*supports: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of several (ids, weights) supports in one pair of tensors, padded with weight-0 entries."""
    width = max(ids.shape[1] for ids, _ in supports)
    ids = torch.cat([F.pad(i, (0, width - i.shape[1])) for i, _ in supports])
    w = torch.cat([F.pad(x, (0, width - x.shape[1])) for _, x in supports])
    return ids, w
