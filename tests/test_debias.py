"""edge_xsent/train/debias.py: the language subspace is found, removed inside the model, and carried by exports."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import ROOT, run_cli
from edge_xsent import Encoder
from edge_xsent.train.debias import auto_rank, debias_model, language_subspace
from edge_xsent.errors import UserError


def test_language_subspace_finds_the_offset_between_languages():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(200, 16))  # the same meanings in both languages
    offset = np.zeros(16)
    offset[3] = 2.0  # language identity lives on one axis
    basis, sv = language_subspace({"en": shared, "fr": shared + offset, "de": shared + offset}, rank=1)
    assert basis.shape == (1, 16) and abs(abs(basis[0, 3]) - 1) < 1e-6
    assert sv[0] > 1 and sv[1] < 1e-9  # one direction separates them; nothing else does
    with pytest.raises(UserError, match="between 1 and 2"):
        language_subspace({"en": shared, "fr": shared, "de": shared}, rank=3)
    with pytest.raises(UserError, match="at least two languages"):
        language_subspace({"en": shared}, rank=1)


def test_auto_rank_keeps_the_directions_that_separate_languages():
    """One direction for nine related languages (the shipped default's spectrum), several where the
    language means spread (m1-extend's at step 10,000, 39 languages), and the basis follows."""
    assert auto_rank(np.array([0.5808, 0.1367, 0.1078, 0.0934, 0.0])) == 1
    assert auto_rank(np.array([0.671, 0.6253, 0.5003, 0.3822, 0.3134, 0.2719])) == 4
    assert auto_rank(np.array([1.0, 0.5, 0.4999])) == 2  # "at least half" includes half
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(200, 16))
    langs = {"en": shared}
    for i, lang in enumerate(["fr", "de", "ja", "ko"]):
        offset = np.zeros(16)
        offset[i] = 2.0 + 0.1 * i  # four languages, each off on its own axis
        langs[lang] = shared + offset
    basis, sv = language_subspace(langs, rank=None)  # centred: 2.26, 2.15, 2.04, then 0.96 (their common axis)
    assert len(basis) == auto_rank(sv) == 3


def test_debiased_model_removes_the_subspace_and_keeps_retrieval(tiny_model, tmp_path):
    out = tmp_path / "debiased"
    info = debias_model(tiny_model, "sample", out, rank=2, per_lang=300)
    assert info["rank"] == 2 and set(info["sentences_per_language"]) == {"en", "de", "es", "fr", "it"}
    from edge_xsent.encode.bundle import load_model

    model, _, config = load_model(out)
    assert config["model"]["lang_subspace"] == 2
    basis = model.lang_basis.numpy()
    sentences = ["Open the file", "Ouvrir le fichier", "Datei öffnen", "Abrir el archivo"]
    raw = Encoder.load(tiny_model).encode(sentences, normalize=False)
    new = Encoder.load(out).encode(sentences, normalize=False)
    assert np.abs(new @ basis.T).max() < 1e-4  # nothing left along the language directions
    assert np.allclose(new, raw - (raw @ basis.T) @ basis, atol=1e-4)  # and nothing else changed
    with pytest.raises(UserError, match="already removes"):
        debias_model(out, "sample", tmp_path / "again")


def test_debias_cli_errors_and_export_carries_the_projection(tiny_model, tmp_path):
    bad = run_cli("debias", tiny_model, "--data", "sample", "--rank", "9", cwd=ROOT)
    assert bad.returncode == 1 and "--rank must be between 1 and 4" in bad.stderr and "Traceback" not in bad.stderr
    word = run_cli("debias", tiny_model, "--data", "sample", "--rank", "many", cwd=ROOT)
    assert word.returncode == 2 and "give a whole number >= 1, or auto" in word.stderr and "Traceback" not in word.stderr
    auto = run_cli("debias", tiny_model, "--data", "sample", "--rank", "auto", "--per-lang", "100",
                   "--out", tmp_path / "auto", cwd=ROOT)
    assert auto.returncode == 0, auto.stderr
    info = json.loads((tmp_path / "auto" / "training.json").read_text())["language_subspace"]
    assert info["rank"] == auto_rank(np.array(info["singular_values"])) and "auto" in info["rank_rule"]
    out = tmp_path / "m"
    done = run_cli("debias", tiny_model, "--data", "sample", "--out", out, "--per-lang", "200", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    from edge_xsent.export.exporter import export_bundle

    export_bundle(out, tmp_path / "b", torchscript=False, parity_pairs=40)
    sentences = ["Save the current document", "Enregistrer le document actuel"]
    fp32 = Encoder.load(out).encode(sentences)
    onnx = Encoder.load(tmp_path / "b", backend="onnx", precision="fp32").encode(sentences)
    assert np.allclose(fp32, onnx, atol=1e-4)
    shutil.rmtree(tmp_path / "b")
