import json
import math

import pytest
import torch

from edge_xsent.train import objectives as obj
from edge_xsent.encode.tokenizer import MASK_ID, PAD_ID, UNK_ID

V = 12


def batch(rows):
    T = max(len(r) for r in rows)
    ids = torch.tensor([r + [PAD_ID] * (T - len(r)) for r in rows])
    return ids, (ids != PAD_ID).long()


def test_bag_counts_repeats_and_excludes_specials():
    ids, mask = batch([[5, 5, 7, MASK_ID, UNK_ID], [9]])
    bag = obj.bag_of_tokens(ids, mask, V)
    assert torch.allclose(bag.sum(1), torch.ones(2))
    assert bag[0, 5] == pytest.approx(2 / 3) and bag[0, 7] == pytest.approx(1 / 3)  # repeats counted
    assert bag[0, MASK_ID] == 0 and bag[0, UNK_ID] == 0 and bag[0, PAD_ID] == 0
    assert bag[1, 9] == 1


def test_bag_of_only_specials_is_zero_row():
    ids, mask = batch([[MASK_ID], [4, 4]])
    bag = obj.bag_of_tokens(ids, mask, V)
    assert bag[0].sum() == 0 and bag[1].sum() == pytest.approx(1)


def test_ugt_target_sums_to_one_half_on_masked_token():
    ids, mask = batch([[5, 6, 6, 8], [3]])
    t = obj.ugt_target(torch.tensor([4, 3]), ids, mask, V)
    assert torch.allclose(t.sum(1), torch.ones(2))
    assert t[0, 4] == pytest.approx(0.5) and t[0, 6] == pytest.approx(0.25)
    assert t[1, 3] == pytest.approx(1.0)  # masked token also in the translation's bag


def test_distribution_loss_is_kl():
    target = torch.tensor([[0.5, 0.25, 0.25, 0.0]])
    exact = torch.log(torch.tensor([[0.5, 0.25, 0.25, 1e-9]]))
    assert obj.distribution_loss(exact, target).item() == pytest.approx(0.0, abs=1e-6)
    uniform = torch.zeros(1, 4)
    kl = sum(q * math.log(q / 0.25) for q in (0.5, 0.25, 0.25))
    assert obj.distribution_loss(uniform, target).item() == pytest.approx(kl, rel=1e-5)
    # rows without mass are ignored, not counted as zero loss
    two = torch.cat([target, torch.zeros(1, 4)])
    assert obj.distribution_loss(torch.zeros(2, 4), two).item() == pytest.approx(kl, rel=1e-5)


def test_mask_one_token_masks_exactly_one_real_non_punct_token():
    ids, mask = batch([[5, 6, 7, 8], [9, 10], [11]])
    avoid = torch.zeros(V, dtype=torch.bool)
    avoid[[5, 6, 7, 9]] = True
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        masked, tok = obj.mask_one_token(ids, mask, MASK_ID, g, avoid)
        assert ((masked == MASK_ID).sum(1) == 1).all()
        assert tok[0] == 8 and tok[1] == 10 and tok[2] == 11  # punctuation avoided while something else exists
        assert (masked[ids != masked] == MASK_ID).all()
        assert ids[masked == MASK_ID].tolist() == tok.tolist()


def test_punctuation_pieces_are_those_without_a_letter_or_digit(tiny_model):
    """The pieces SMLM never masks, on a real tokenizer: symbols and punctuation, with or without the word
    mark; never a piece holding a letter or a digit, nor the bare word mark."""
    from edge_xsent.encode.tokenizer import Tokenizer

    tok = Tokenizer.load(tiny_model / "tokenizer.model")
    avoid = obj.punctuation_pieces(tok)
    assert avoid.shape == (tok.vocab_size,) and avoid.dtype == torch.bool
    piece = {tok.sp.id_to_piece(i): bool(avoid[i]) for i in range(tok.vocab_size)}
    assert piece["."] and piece[","] and piece["\u2581("]  # the sample's commonest marks
    assert not piece["\u2581"] and not piece["<mask>"] and not any(piece[p] for p in piece if any(c.isalnum() for c in p))
    assert all(piece[p] for p in piece if p.strip("\u2581") and not any(c.isalnum() for c in p))


def test_mask_one_token_all_punctuation_falls_back():
    ids, mask = batch([[5, 6]])
    avoid = torch.ones(V, dtype=torch.bool)
    masked, tok = obj.mask_one_token(ids, mask, MASK_ID, torch.Generator().manual_seed(1), avoid)
    assert tok.item() in (5, 6) and (masked == MASK_ID).sum() == 1


def test_bert_masking_labels():
    ids = torch.randint(3, 100, (64, 50))
    mask = torch.ones_like(ids)
    out, labels = obj.mask_tokens_bert(ids, mask, MASK_ID, 100, torch.Generator().manual_seed(0))
    chosen = labels != -100
    assert 0.10 < chosen.float().mean() < 0.20
    assert (labels[chosen] == ids[chosen]).all()
    assert (out[~chosen] == ids[~chosen]).all()
    assert 0.7 < (out[chosen] == MASK_ID).float().mean() < 0.9


def test_align_loss_prefers_aligned_pairs():
    torch.manual_seed(0)
    u = torch.randn(8, 16) * 3
    aligned = obj.align_loss(u, u.clone())
    shuffled = obj.align_loss(u, u[torch.randperm(8)])
    assert aligned < 0.1 < shuffled
    assert obj.align_loss(torch.zeros(4, 3), torch.zeros(4, 3)).item() == pytest.approx(math.log(4))


def test_sim_loss_zero_when_similarity_structure_matches():
    torch.manual_seed(0)
    u = torch.randn(6, 8)
    q, _ = torch.linalg.qr(torch.randn(8, 8))
    assert obj.sim_loss(u, u @ q).item() == pytest.approx(0.0, abs=1e-5)  # rotation keeps all dot products
    assert obj.sim_loss(u, torch.randn(6, 8) * 3).item() > 0.01


def test_losses_have_gradients():
    u = torch.randn(4, 8, requires_grad=True)
    v = torch.randn(4, 8, requires_grad=True)
    (obj.align_loss(u, v) + obj.sim_loss(u, v)).backward()
    assert u.grad.abs().sum() > 0 and v.grad.abs().sum() > 0


def test_distance_loss_by_hand_and_its_properties():
    """T-LASER eq. 7-10 on two pairs whose distances are easy to compute."""
    u = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    neg = torch.tensor([[1], [0]])
    # identical pairs: dp = 0; unrelated distance sqrt(2) / mean norm 1 = 1.414 > margin 0.5: nothing to push
    assert obj.distance_loss(u, v, neg, margin=0.5).item() == pytest.approx(0.0, abs=1e-6)
    # a margin beyond the unrelated distance: each direction pays margin - sqrt(2)
    expected = 0.5 * 2 * (2.0 - math.sqrt(2))
    assert obj.distance_loss(u, v, neg, margin=2.0).item() == pytest.approx(expected, rel=1e-5)
    # scale-free: shrinking every vector changes nothing
    w = torch.randn(6, 4)
    x = torch.randn(6, 4)
    n = obj.sample_negatives(6, 3, torch.Generator().manual_seed(0))
    assert obj.distance_loss(w, x, n).item() == pytest.approx(obj.distance_loss(0.01 * w, 0.01 * x, n).item(), rel=1e-4)
    assert not (n == torch.arange(6)[:, None]).any() and n.min() >= 0 and n.max() <= 5  # never itself
    # the gradient pulls a pair together
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    b = torch.tensor([[0.8, 0.3], [0.0, 1.0]])
    obj.distance_loss(a, b, neg).backward()
    assert a.grad[0, 1] < 0  # moving a_0 towards b_0's second coordinate lowers the loss


def test_training_with_the_distance_loss(tmp_path):
    from conftest import tiny_config
    from edge_xsent.train.loop import train

    summary = train(tiny_config(tmp_path / "run", max_steps=6, eval_every=6, checkpoint_every=6, distance_weight=0.25),
                    progress=False)
    assert summary["steps"] == 6
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert any("distance" in row for row in log)
