"""anchor_weight: sentences in the languages a run's start knew keep their vectors from it, so a run
that adds languages to a trained model can be held to the old ones (learning without forgetting)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from conftest import run_until, tiny_config
from edge_xsent.train import objectives as obj
from edge_xsent.encode.bundle import load_model
from edge_xsent.config import EncoderConfig, TrainConfig
from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.runfolder import checkpoint_path, load_checkpoint
from edge_xsent.train.loop import train

V = 40


def test_anchor_loss_by_hand():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
    assert obj.anchor_loss(x, x.detach() * 3).item() == pytest.approx(0.0, abs=1e-7)  # scale is free
    assert obj.anchor_loss(x, torch.tensor([[0.0, 1.0], [0.0, 1.0]])).item() == pytest.approx(0.5)
    empty = obj.anchor_loss(x[:0], torch.zeros(0, 2))
    assert empty.item() == 0.0 and empty.requires_grad  # a batch of only new languages adds nothing


def batch(la: list[int], lb: list[int]) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    n = len(la)
    a, b = torch.randint(3, V, (n, 6), generator=g), torch.randint(3, V, (n, 5), generator=g)
    return {"a": a, "am": torch.ones_like(a), "b": b, "bm": torch.ones_like(b),
            "la": torch.tensor(la), "lb": torch.tensor(lb)}


def anchored_objective(anchored: list[bool]) -> obj.Objective:
    torch.manual_seed(0)
    model = DualEncoder(EncoderConfig(vocab_size=V, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=16,
                                      dropout=0.1))
    cfg = TrainConfig(model=model.cfg, align_weight=0.0, sim_weight=0.0, init="default", anchor_weight=1.0)
    return obj.Objective(model, cfg, torch.zeros(V, dtype=torch.bool), start=copy.deepcopy(model),
                         anchored=torch.tensor(anchored))


def test_the_anchor_is_zero_at_the_start_and_pulls_only_the_student():
    o = anchored_objective([True, False])  # language 0 anchored (say English), 1 not
    b = batch([0, 0, 0, 0], [0, 1, 1, 0])
    o.eval()  # no dropout: the student computes exactly what the start does
    assert o(b, torch.Generator().manual_seed(1))["anchor"].item() == pytest.approx(0.0, abs=1e-6)
    o.train()
    assert not o.start.training  # the anchor's targets never see dropout
    with torch.no_grad():
        o.model.blocks[0].ff2.weight.add_(0.5)  # the student drifts
    loss = o(b, torch.Generator().manual_seed(1))["anchor"]
    assert loss.item() > 1e-3
    loss.backward()
    assert o.model.tok_emb.weight.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in o.start.parameters())


def test_rows_of_languages_the_start_did_not_know_are_free():
    o = anchored_objective([False, False]).eval()
    with torch.no_grad():
        o.model.blocks[0].ff2.weight.add_(0.5)
    assert o(batch([0, 1], [1, 0]), torch.Generator().manual_seed(1))["anchor"].item() == 0.0


def test_an_anchored_run_keeps_its_start_in_the_checkpoint_and_resumes_exactly(tiny_model, tmp_path):
    common = dict(init=str(tiny_model), anchor_weight=2.0, max_steps=8, checkpoint_every=4, eval_every=8,
                  model=dict(d_model=48, n_heads=4, d_ff=96))
    straight = tmp_path / "straight"
    train(tiny_config(straight, **common), progress=False)
    state = load_checkpoint(checkpoint_path(straight))
    init = load_model(tiny_model)[0].state_dict()
    assert all(torch.equal(v, init[k]) for k, v in state["anchor"]["start"].items())  # the start, untrained
    assert set(state["anchor"]["langs"]) == set(json.loads((tiny_model / "config.json").read_text())["langs"])
    log = [json.loads(line) for line in (straight / "log.jsonl").read_text().splitlines()]
    assert any("anchor" in row for row in log) and any("val_anchor" in row for row in log)

    resumed = tmp_path / "resumed"
    run_until(tiny_config(resumed, **common), 4)
    train(tiny_config(resumed, **common), progress=False)
    a, b = load_checkpoint(checkpoint_path(straight))["model"], load_checkpoint(checkpoint_path(resumed))["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_anchor_weight_needs_a_start(tmp_path):
    with pytest.raises(UserError, match="anchor_weight .* set init"):
        train(tiny_config(tmp_path / "run", anchor_weight=1.0), progress=False)
    assert not (tmp_path / "run" / "log.jsonl").exists()  # refused before any work
