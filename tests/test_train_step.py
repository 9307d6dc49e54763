"""The cheaper training step (issue: half the cost per step): each exact change gives the old
step's losses and gradients on a fixed batch, and each approximate option reduces to the exact
step where it should (all negatives drawn, every row touched)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_xsent.train import objectives as obj
from edge_xsent.config import EncoderConfig, TrainConfig
from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.optim import LazyAdam, adam, clip_grad_norm
from edge_xsent.encode.tokenizer import MASK_ID, PAD_ID, UNK_ID

V = 40


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(len(r) for r in rows)
    ids = torch.tensor([r + [PAD_ID] * (T - len(r)) for r in rows])
    return ids, (ids != PAD_ID).long()


sentences = st.lists(st.lists(st.integers(0, V - 1), min_size=1, max_size=9), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(rows=sentences, masked=st.lists(st.integers(0, V - 1), min_size=6, max_size=6), seed=st.integers(0, 99))
def test_support_kl_is_the_dense_kl_with_its_gradient(rows, masked, seed):
    """Repeated pieces, specials (pad, unk, mask) and rows of nothing but specials included."""
    ids, mask = padded(rows)
    token = torch.tensor(masked[: len(rows)])
    logits = torch.randn(len(rows), V, generator=torch.Generator().manual_seed(seed)) * 3
    for dense, (sid, sw) in [(obj.bag_of_tokens(ids, mask, V), obj.bag_support(ids, mask)),
                             (obj.ugt_target(token, ids, mask, V), obj.ugt_support(token, ids, mask))]:
        a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
        old = obj.distribution_loss(a, dense)
        new = obj.mean_over_targets(obj.support_kl(b, sid, sw), sw)
        assert new.item() == pytest.approx(old.item(), rel=1e-5, abs=1e-6)
        if old.requires_grad and dense.sum() > 0:
            old.backward(), new.backward()
            assert torch.allclose(a.grad, b.grad, atol=1e-6)


def old_ugt_gen(m: DualEncoder, batch: dict, avoid: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """UGT as the step computed it before: dense (B, V) targets, a log-softmax over the vocabulary,
    one head call per side (edge_xsent/train/objectives.py before the cheaper step)."""
    a, am, b, bm = batch["a"], batch["am"], batch["b"], batch["bm"]
    a_mask, wa = obj.mask_one_token(a, am, MASK_ID, gen, avoid)
    b_mask, wb = obj.mask_one_token(b, bm, MASK_ID, gen, avoid)
    flip = torch.rand(a.shape[0], generator=gen) < 0.5
    u = m(torch.where(flip[:, None], a, a_mask), am)
    v = m(torch.where(flip[:, None], b_mask, b), bm)
    bag_a, bag_b = obj.bag_of_tokens(a, am, V), obj.bag_of_tokens(b, bm, V)
    tgt_u = torch.where(flip[:, None], bag_b, obj.ugt_target(wa, b, bm, V))
    tgt_v = torch.where(flip[:, None], obj.ugt_target(wb, a, am, V), bag_a)
    return 0.5 * (obj.distribution_loss(m.generative_logits(u), tgt_u)
                  + obj.distribution_loss(m.generative_logits(v), tgt_v))


def fixed_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    rows_a = [torch.randint(3, V, (n,), generator=g).tolist() for n in (5, 9, 3, 7, 6, 4)]
    rows_b = [torch.randint(3, V, (n,), generator=g).tolist() for n in (6, 4, 8, 2, 7, 5)]
    rows_a[1][2] = rows_a[1][4]  # a repeated piece
    rows_b[0][1] = UNK_ID
    a, am = padded(rows_a)
    b, bm = padded(rows_b)
    zeros = torch.zeros(len(rows_a), dtype=torch.long)
    return {"a": a, "am": am, "b": b, "bm": bm, "la": zeros, "lb": zeros}


def tiny(dropout: float = 0.0) -> DualEncoder:
    torch.manual_seed(0)
    return DualEncoder(EncoderConfig(vocab_size=V, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=16,
                                     dropout=dropout))


def test_the_step_gives_the_old_steps_loss_and_gradients():
    cfg = TrainConfig(model=tiny().cfg, align_weight=0.0, sim_weight=0.0)
    model, avoid = tiny(), torch.zeros(V, dtype=torch.bool)
    avoid[[5, 6]] = True
    reference = copy.deepcopy(model)
    new = obj.Objective(model, cfg, avoid)(fixed_batch(), torch.Generator().manual_seed(7))["gen"]
    old = old_ugt_gen(reference, fixed_batch(), avoid, torch.Generator().manual_seed(7))
    assert new.item() == pytest.approx(old.item(), rel=1e-5)
    new.backward(), old.backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.grad is not None, name
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-7), name


def test_fused_adam_takes_the_for_loop_adams_steps():
    cfg, avoid = TrainConfig(model=tiny().cfg), torch.zeros(V, dtype=torch.bool)
    new, old = obj.Objective(tiny(), cfg, avoid), obj.Objective(tiny(), cfg, avoid)
    fused = adam(new.parameters(), 1e-2, 1e-5)
    loop = torch.optim.Adam(old.parameters(), lr=1e-2, weight_decay=1e-5, amsgrad=True)
    for step in range(5):  # the same gradients into both (a key bias's is float noise, which Adam magnifies)
        fused.zero_grad(), loop.zero_grad()
        new(fixed_batch(), torch.Generator().manual_seed(step))["total"].backward()
        for p, q in zip(new.parameters(), old.parameters()):
            q.grad = p.grad.clone()
        fused.step(), loop.step()
        for p, q in zip(new.parameters(), old.parameters()):
            assert torch.allclose(p, q, atol=1e-7)


def test_sparse_input_lookups_give_the_dense_steps_weights():
    """The trainer's input embedding adds the rows it looked up into the head's dense table gradient."""
    from edge_xsent.train.loop import Trainer

    cfg = TrainConfig(model=tiny().cfg, warmup_steps=1)
    avoid = torch.zeros(V, dtype=torch.bool)
    sparse, dense = (Trainer(cfg, tiny(), avoid, torch.device("cpu")) for _ in range(2))
    dense.model.tok_emb.sparse = False
    assert sparse.model.tok_emb.sparse
    for step in range(3):
        for t in (sparse, dense):
            t.step(fixed_batch(), step, torch.Generator().manual_seed(step))
        assert not sparse.model.tok_emb.weight.grad.is_sparse
    for p, q in zip(sparse.model.parameters(), dense.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_a_sampled_head_drawing_every_piece_is_the_whole_softmax():
    model, avoid = tiny(), torch.zeros(V, dtype=torch.bool)
    exact_cfg = TrainConfig(model=model.cfg, align_weight=0.0, sim_weight=0.0)
    sampled_cfg = TrainConfig(model=model.cfg, align_weight=0.0, sim_weight=0.0, head_negatives=V)
    exact = obj.Objective(copy.deepcopy(model), exact_cfg, avoid)(fixed_batch(), torch.Generator().manual_seed(1))
    sampled = obj.Objective(model, sampled_cfg, avoid)(fixed_batch(), torch.Generator().manual_seed(1))
    assert sampled["gen"].item() == pytest.approx(exact["gen"].item(), rel=1e-5)


def test_sampled_candidates_hold_every_positive_and_a_logq_correction():
    pos = torch.tensor([7, 7, 9, 30])
    cand, corr = obj.sample_candidates(pos, V, 10, torch.Generator().manual_seed(0))
    assert cand[:3].tolist() == [7, 9, 30] and len(set(cand.tolist())) == 13
    assert torch.all(corr[:3] == 0)
    assert corr[3:] == pytest.approx([math.log((V - 3) / 10)] * 10)


def test_sampled_head_trains_only_in_training_mode():
    """Validation losses stay whole-vocabulary, so runs with and without sampling compare."""
    model, avoid = tiny(), torch.zeros(V, dtype=torch.bool)
    cfg = TrainConfig(model=model.cfg, align_weight=0.0, sim_weight=0.0, head_negatives=4)
    o = obj.Objective(model, cfg, avoid).eval()
    exact = obj.Objective(copy.deepcopy(model), TrainConfig(model=model.cfg, align_weight=0.0, sim_weight=0.0),
                          avoid).eval()
    g = lambda: torch.Generator().manual_seed(2)  # noqa: E731
    assert o(fixed_batch(), g())["gen"].item() == pytest.approx(exact(fixed_batch(), g())["gen"].item(), rel=1e-6)


def test_lazy_adam_is_adam_on_rows_it_touches_and_leaves_the_rest():
    torch.manual_seed(0)
    lazy_emb = nn.Embedding(10, 4, sparse=True)
    dense_emb = copy.deepcopy(lazy_emb)
    dense_emb.sparse = False
    lazy = LazyAdam(lazy_emb.parameters(), lr=1e-2, weight_decay=1e-3)
    dense = torch.optim.Adam(dense_emb.parameters(), lr=1e-2, weight_decay=1e-3, amsgrad=True)
    every_row = torch.arange(10).repeat(2)
    for step in range(4):
        for emb, opt in ((lazy_emb, lazy), (dense_emb, dense)):
            opt.zero_grad()
            (emb(every_row) * torch.linspace(-1, 1, 4) * (step + 1)).sum().backward()
            opt.step()
    assert torch.allclose(lazy_emb.weight, dense_emb.weight, atol=1e-6)
    before = lazy_emb.weight.detach().clone()
    lazy.zero_grad()
    lazy_emb(torch.tensor([1, 3])).sum().backward()
    lazy.step()
    moved = (lazy_emb.weight != before).any(1)
    assert moved.tolist() == [i in (1, 3) for i in range(10)]


def test_clip_grad_norm_takes_sparse_gradients_as_torch_takes_dense_ones():
    torch.manual_seed(0)
    sparse_emb, lin = nn.Embedding(10, 4, sparse=True), nn.Linear(4, 2)
    dense_emb, dense_lin = copy.deepcopy(sparse_emb), copy.deepcopy(lin)
    dense_emb.sparse = False
    ids = torch.tensor([1, 1, 4, 7])
    for e, l in ((sparse_emb, lin), (dense_emb, dense_lin)):
        (l(e(ids)) * 10).pow(2).sum().backward()
    got = clip_grad_norm([sparse_emb.weight, *lin.parameters()], 1.0)
    want = nn.utils.clip_grad_norm_([dense_emb.weight, *dense_lin.parameters()], 1.0)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    assert torch.allclose(sparse_emb.weight.grad.to_dense(), dense_emb.weight.grad, atol=1e-6)
    assert torch.allclose(lin.weight.grad, dense_lin.weight.grad, atol=1e-6)


def test_the_options_name_what_they_need():
    with pytest.raises(UserError, match="lazy_table needs head_negatives"):
        TrainConfig(lazy_table=True)
    with pytest.raises(UserError, match="head_negatives samples UGT"):
        TrainConfig(objective="xtr", head_negatives=100)


def test_a_run_with_the_options_resumes_bit_identical(tmp_path):
    """The lazy table's moments are checkpointed with the rest: stop and resume, same weights."""
    from conftest import run_until, tiny_config

    from edge_xsent.train.runfolder import checkpoint_path, load_checkpoint

    from edge_xsent.train.loop import train

    options = dict(max_steps=20, eval_every=100, head_negatives=50, lazy_table=True, model=dict(dropout=0.0))
    train(tiny_config(tmp_path / "straight", **options), progress=False)
    run_until(tiny_config(tmp_path / "resumed", **options), 10)
    assert "table_optimizer" in load_checkpoint(checkpoint_path(tmp_path / "resumed"))
    train(tiny_config(tmp_path / "resumed", **options), progress=False)
    a, b = (load_checkpoint(checkpoint_path(tmp_path / r))["model"] for r in ("straight", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_teacher_proj_none_meets_the_teacher_with_the_models_own_vectors_in_one_batch():
    """teacher_proj = "none" trains no map, so the loss is that of the vectors the model exports; with mse+nce
    the step's items (both sides of each pair, then the monolingual texts) are one in-batch problem."""
    cfg = TrainConfig(model=tiny().cfg, objective="none", align_weight=0.0, sim_weight=0.0, teacher_loss="mse+nce",
                      teacher_proj="none")
    model, g = tiny(), torch.Generator().manual_seed(5)
    batch = fixed_batch()
    batch["m"], batch["mm"] = padded([[7, 8, 9], [10, 11]])
    batch["t"] = nn.functional.normalize(torch.randn(6, 16, generator=g), dim=-1)
    batch["tm"] = nn.functional.normalize(torch.randn(2, 16, generator=g), dim=-1)
    objective = obj.Objective(model, cfg, torch.zeros(V, dtype=torch.bool), teacher_dim=16)
    assert list(objective.teacher_proj.parameters()) == []
    got = objective(batch, torch.Generator().manual_seed(7))["teacher"]
    u, v, m = model(batch["a"], batch["am"]), model(batch["b"], batch["bm"]), model(batch["m"], batch["mm"])
    one = obj.distill_loss(torch.cat([u, v, m]), torch.cat([batch["t"], batch["t"], batch["tm"]]), "mse+nce")
    three = sum(obj.distill_loss(p, t, "mse+nce") for p, t in ((u, batch["t"]), (v, batch["t"]), (m, batch["tm"]))) / 3
    assert torch.allclose(got, one) and not torch.allclose(got, three)
    with pytest.raises(UserError, match='teacher_proj = "learned"'):
        obj.Objective(tiny(), cfg, torch.zeros(V, dtype=torch.bool), teacher_dim=8)


def test_type_row_adds_one_trained_row_to_every_position_and_a_saved_model_holds_it():
    """type_row: the row (its own parameter, in the checkpoint and the clipping) moves every position alike; the
    model a folder keeps (Trainer.saved_model) gives the training model's vectors without the row's hook."""
    from edge_xsent.train.loop import Trainer

    cfg = TrainConfig(model=tiny().cfg, objective="none", align_weight=0.0, sim_weight=0.0, teacher_loss="mse+nce",
                      teacher_proj="none", teacher="e5-passage", batch_items=True, type_row=True, lr=1e-2,
                      optimizer="adamw", warmup_steps=1)
    model, g = tiny(), torch.Generator().manual_seed(5)
    m, mm = padded([[7, 8, 9], [10, 11], [12, 13, 14, 15]])
    batch = {"m": m, "mm": mm, "tm": nn.functional.normalize(torch.randn(3, 16, generator=g), dim=-1)}
    before = model(m, mm).detach()
    trainer = Trainer(cfg, model, torch.zeros(V, dtype=torch.bool), torch.device("cpu"), teacher_dim=16)
    assert torch.allclose(model(m, mm), before)  # the row starts at zero
    positions = model.pos_emb.weight.detach().clone()
    for step in range(3):
        trainer.step(batch, step, torch.Generator())
    row = trainer.objective.type_row.detach()
    assert row.abs().sum() > 0 and torch.equal(trainer.state()["type_row"], row)
    saved = trainer.saved_model()
    assert saved is not model and not saved.pos_emb._forward_hooks
    assert torch.allclose(saved(m, mm), model(m, mm), atol=1e-6)
    assert torch.allclose(saved.pos_emb.weight, model.pos_emb.weight.detach() + row)
    assert not torch.allclose(model.pos_emb.weight.detach(), positions)  # the positions train as well
    again = Trainer(cfg, tiny(), torch.zeros(V, dtype=torch.bool), torch.device("cpu"), teacher_dim=16)
    again.load_state(trainer.state())
    assert torch.equal(again.objective.type_row, trainer.objective.type_row)


def test_a_batch_of_items_is_one_in_batch_problem_over_its_texts_alone():
    """batch_items: a batch holds texts (m, mm) and their targets (tm) only; the loss is theirs, weighted."""
    cfg = TrainConfig(model=tiny().cfg, objective="none", align_weight=0.0, sim_weight=0.0, teacher_loss="mse+nce",
                      teacher_proj="none", teacher="e5-passage", batch_items=True, teacher_weight=2.0)
    model, g = tiny(), torch.Generator().manual_seed(5)
    m, mm = padded([[7, 8, 9], [10, 11], [12, 13, 14, 15], [7, 8, 9]])
    tm = nn.functional.normalize(torch.randn(4, 16, generator=g), dim=-1)
    tm[3] = tm[0]  # a pair's two sides: one target, no negative of each other
    objective = obj.Objective(model, cfg, torch.zeros(V, dtype=torch.bool), teacher_dim=16)
    got = objective({"m": m, "mm": mm, "tm": tm}, torch.Generator().manual_seed(7))
    want = obj.distill_loss(model(m, mm), tm, "mse+nce")
    assert torch.allclose(got["teacher"], want) and torch.allclose(got["total"], 2 * want)
    got["total"].backward()
    assert model.blocks[0].ff1.weight.grad.abs().sum() > 0


def test_items_with_token_weight_add_the_token_loss_of_the_same_forward():
    """batch_items + token_weight: each text's token states towards the token teacher's on the same ids, weighted,
    beside the unchanged vector loss; a teacher that is the student itself gives a token loss of 0."""
    from edge_xsent.train.distill import TokenTeacher

    cfg = TrainConfig(model=tiny().cfg, objective="none", align_weight=0.0, sim_weight=0.0, teacher_loss="mse+nce",
                      teacher_proj="none", teacher="e5-passage", batch_items=True, teacher_weight=2.0,
                      init="e5-small", token_weight=0.5, token_layers=[1])
    model, other, g = tiny(), DualEncoder(EncoderConfig(vocab_size=V, n_layers=2, d_model=16, n_heads=2, d_ff=32,
                                                        max_len=16)).eval(), torch.Generator().manual_seed(5)
    m, mm = padded([[7, 8, 9], [10, 11], [12, 13, 14, 15]])
    tm = nn.functional.normalize(torch.randn(3, 16, generator=g), dim=-1)
    objective = obj.Objective(model, cfg, torch.zeros(V, dtype=torch.bool), teacher_dim=16,
                              token_teacher=TokenTeacher(other, torch.arange(V), [(0, 1)]))
    got = objective({"m": m, "mm": mm, "tm": tm}, torch.Generator())
    vec = obj.distill_loss(model(m, mm), tm, "mse+nce")
    token = obj.token_loss([model.encode_layers(m, mm)[0]], [other.encode_layers(m, mm)[1]], mm)
    assert torch.allclose(got["teacher"], vec) and torch.allclose(got["token"], token) and token > 0
    assert torch.allclose(got["total"], 2 * vec + 0.5 * token)
    itself = TokenTeacher(copy.deepcopy(model).eval(), torch.arange(V), [(0, 0)])
    objective.token_teacher = itself
    assert float(objective({"m": m, "mm": mm, "tm": tm}, torch.Generator())["token"].detach()) < 1e-10
