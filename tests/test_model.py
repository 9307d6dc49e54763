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


def test_a_model_built_for_its_weights_computes_what_the_loaded_one_does_and_starts_what_they_lack():
    """`for_weights` does not draw the table a load replaces; what the state lacks (an inference folder's
    head) starts as in a new model: LayerNorm at one and zero, Linear weights drawn at std 0.02, biases zero."""
    cfg = EncoderConfig(vocab_size=3000, n_layers=1, d_model=64, n_heads=2, d_ff=128, max_len=8, n_langs=8, lang_dim=32)
    torch.manual_seed(0)
    trained = DualEncoder(cfg).eval()
    state = {k: v for k, v in trained.state_dict().items() if not k.startswith(("head", "lang_emb"))}
    model = DualEncoder.for_weights(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and sorted(missing) == ["head_bias", "head_dense.bias", "head_dense.weight", "head_ln.bias",
                                                  "head_ln.weight", "lang_emb.weight"]
    model.init_missing(missing)
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11]])
    assert torch.equal(model.eval()(ids, (ids != 0).long()), trained(ids, (ids != 0).long()))
    assert (model.head_ln.weight == 1).all() and (model.head_ln.bias == 0).all() and (model.head_bias == 0).all()
    assert (model.head_dense.bias == 0).all() and 0.015 < float(model.head_dense.weight.std()) < 0.025
    assert 0.015 < float(model.lang_emb.weight.std()) < 0.025
    assert torch.isfinite(model.generative_logits(torch.randn(3, 64), torch.tensor([0, 1, 0]))).all()


def test_config_validation():
    with pytest.raises(UserError, match="divisible"):
        EncoderConfig(d_model=100, n_heads=8)
    with pytest.raises(UserError, match="unknown model config keys"):
        EncoderConfig.from_dict({"layers": 2})
