import pytest
import torch

from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder, EncoderConfig


def test_paper_default_parameter_count():
    m = DualEncoder(EncoderConfig(vocab_size=50000, n_layers=2, d_model=512, n_heads=8, d_ff=1024, max_len=200))
    assert 25.6e6 <= m.tok_emb.weight.numel() <= 25.7e6
    per_layer = sum(p.numel() for p in m.blocks[0].parameters())
    assert 2.0e6 < per_layer < 2.2e6  # METHOD.md: ~2.1M per layer
    assert 29e6 < m.num_parameters() < 31.5e6  # ~30M


def test_padding_does_not_change_the_vector():
    torch.manual_seed(0)
    m = DualEncoder(EncoderConfig(vocab_size=50, n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=20)).eval()
    a = torch.tensor([[5, 6, 7]])
    padded = torch.tensor([[5, 6, 7, 0, 0, 0], [8, 9, 10, 11, 12, 13]])
    one = m(a, (a != 0).long())
    both = m(padded, (padded != 0).long())
    assert torch.allclose(one[0], both[0], atol=1e-5)


def test_empty_row_is_finite():
    m = DualEncoder(EncoderConfig(vocab_size=50, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=8)).eval()
    ids = torch.tensor([[0, 0], [5, 6]])
    assert torch.isfinite(m(ids, (ids != 0).long())).all()


def test_generative_head_with_language_embedding():
    cfg = EncoderConfig(vocab_size=40, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=8, n_langs=3, lang_dim=4)
    m = DualEncoder(cfg)
    h = torch.randn(5, 16)
    assert m.generative_logits(h, torch.tensor([0, 1, 2, 0, 1])).shape == (5, 40)
    assert m.generative_logits(torch.randn(5, 7, 16), torch.zeros(5, dtype=torch.long)).shape == (5, 7, 40)
    with pytest.raises(ValueError):
        m.generative_logits(h)


def test_config_validation():
    with pytest.raises(UserError, match="divisible"):
        EncoderConfig(d_model=100, n_heads=8)
    with pytest.raises(UserError, match="unknown model config keys"):
        EncoderConfig.from_dict({"layers": 2})
