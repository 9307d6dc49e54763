"""A model folder is also a Hugging Face model folder (edge_xsent/encode/hf.py, issue 19): the same
token ids from `tokenizers`, the same vectors from BertModel and sentence-transformers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from edge_xsent import Encoder
from edge_xsent.encode.bundle import load_model
from edge_xsent.layout import FILES
from edge_xsent.encode.hf import from_bert, projection, to_bert, transformers_encode
from edge_xsent.encode.model import DualEncoder, EncoderConfig
from edge_xsent.text import normalize
from edge_xsent.encode.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parent.parent
EDGE_CASES = json.loads((ROOT / "tests/data/tokenizer_edge_cases.json").read_text())["cases"]
DEFAULT = ROOT / "edge_xsent/resources/default-model"  # what Encoder.load() runs: a student
SAMPLE = ROOT / "edge_xsent/resources/sample-corpus"


def sample_sentences(n: int = 300) -> list[str]:
    lines = (SAMPLE / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]  # lang_a lang_b text_a text_b source
    texts = [t for line in lines for t in line.split("\t")[2:4]]
    return random.Random(0).sample(texts, min(n, len(texts)))


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return float((a * b).sum(1).min())


def test_bert_names_round_trip_exactly():
    cfg = EncoderConfig(vocab_size=50, n_layers=2, d_model=16, n_heads=2, d_ff=24, max_len=12, lang_subspace=1)
    model = DualEncoder(cfg)
    state = model.state_dict()
    bert, rest = to_bert(state, cfg)
    assert "encoder.layer.1.attention.self.value.bias" in bert and "lang_basis" in rest
    assert not any(k.startswith("blocks.") for k in bert) and "head_bias" not in bert
    back = from_bert(bert, rest, cfg)
    assert set(back) == set(state)
    for k in state:
        assert torch.equal(back[k], state[k]), k


def test_projection_is_the_debiasing_step():
    basis = torch.linalg.qr(torch.randn(8, 2)).Q.T  # (2, 8) orthonormal rows
    v = torch.randn(5, 8)
    assert torch.allclose(v @ projection(basis).T, v - (v @ basis.T) @ basis, atol=1e-6)


def test_saved_folder_loads_back_with_the_same_vectors(tiny_model, tmp_path):
    from edge_xsent.encode.bundle import save_model

    model, tok, config = load_model(tiny_model)
    save_model(tmp_path / "again", model, tok, config["langs"], {})
    again, _, _ = load_model(tmp_path / "again")
    for k, v in model.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k


def test_format_1_folders_still_load(tiny_model, tmp_path):
    """Format 1 kept our own names in model.safetensors (the default shipped before issue 19)."""
    from safetensors.torch import save_file

    from edge_xsent.encode.bundle import write_manifest

    model, tok, config = load_model(tiny_model)
    old = tmp_path / "v1"
    old.mkdir()
    keep = {k: config[k] for k in ("format", "edge_xsent_version", "model", "langs", "pooling", "normalization")}
    (old / "config.json").write_text(json.dumps({**keep, "format_version": 1}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(old / "model.safetensors"))
    tok.save(old / "tokenizer.model")
    write_manifest(old)
    sents = sample_sentences(20)
    new_vecs = Encoder.load(tiny_model, backend="torch").encode(sents)
    assert np.allclose(Encoder.load(old, backend="torch").encode(sents), new_vecs, atol=1e-6)


def test_missing_extra_weights_is_named(tiny_model, tmp_path):
    import shutil

    from edge_xsent.encode.bundle import write_manifest
    from edge_xsent.errors import UserError

    broken = tmp_path / "m"
    shutil.copytree(tiny_model, broken)
    (broken / FILES["extra_weights"]).unlink()
    write_manifest(broken)
    with pytest.raises(UserError, match="edge_xsent.safetensors: missing"):
        load_model(broken)


# --- the Hugging Face stacks (the `hf` extra) ---

def hf_tokenizer(folder: Path):
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


@pytest.mark.parametrize("folder", ["default", "tiny", "student"])
def test_tokenizers_gives_sentencepiece_ids(folder, request):
    folder = DEFAULT if folder == "default" else request.getfixturevalue({"tiny": "tiny_model"}.get(folder, "tiny_student_bundle"))
    sp = Tokenizer.load(folder / "tokenizer.model")
    hf = hf_tokenizer(folder)
    # a student's blank text has no tokens in edge-xsent and reads `<s> passage: </s>` there (docs/model-folder.md)
    texts = [t for t in EDGE_CASES + sample_sentences() if sp.rules is None or sp.encode([t])[0]]
    mismatched = [(t, a, b) for t in texts if (a := sp.encode([t])[0]) != (b := hf.encode(t).ids)]
    assert not mismatched, mismatched[:5]


def test_automodel_gives_the_encoder_vectors(tiny_debiased):
    pytest.importorskip("transformers")
    texts = sample_sentences(64) + [t for t in EDGE_CASES if normalize(t)][:20]  # not empty once normalised (a lone BOM is)
    ours = Encoder.load(tiny_debiased, backend="torch").encode(texts, normalize=False)
    assert min_cosine(transformers_encode(tiny_debiased, texts), ours) >= 0.99999


@pytest.mark.parametrize("which", ["tiny", "tiny-debiased", "bundle"])
def test_sentence_transformers_gives_the_encoder_vectors(which, tiny_model, tiny_debiased, tiny_bundle):
    st = pytest.importorskip("sentence_transformers")
    folder = {"tiny": tiny_model, "tiny-debiased": tiny_debiased, "bundle": tiny_bundle[0]}[which]
    texts = sample_sentences(64) + EDGE_CASES
    ours = Encoder.load(folder, backend="torch").encode(texts, normalize=False)
    theirs = st.SentenceTransformer(str(folder), device="cpu").encode(texts)
    assert theirs.shape == ours.shape
    assert min_cosine(theirs[np.linalg.norm(ours, axis=1) > 0], ours[np.linalg.norm(ours, axis=1) > 0]) >= 0.99999
