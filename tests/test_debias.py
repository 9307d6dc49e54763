"""edge_xsent/debias.py: the language subspace is found, removed inside the model, and carried by exports."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from edge_xsent import Encoder
from edge_xsent.debias import debias_model, language_subspace
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


def test_debiased_model_removes_the_subspace_and_keeps_retrieval(tiny_model, tmp_path):
    out = tmp_path / "debiased"
    info = debias_model(tiny_model, "sample", out, rank=2, per_lang=300)
    assert info["rank"] == 2 and set(info["sentences_per_language"]) == {"en", "de", "es", "fr", "it"}
    from edge_xsent.bundle import load_model

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
    cli = [sys.executable, "-m", "edge_xsent.cli"]
    bad = subprocess.run(cli + ["debias", str(tiny_model), "--data", "sample", "--rank", "9"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "--rank must be between 1 and 4" in bad.stderr and "Traceback" not in bad.stderr
    out = tmp_path / "m"
    done = subprocess.run(cli + ["debias", str(tiny_model), "--data", "sample", "--out", str(out), "--per-lang", "200"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    from edge_xsent.export import export_bundle

    export_bundle(out, tmp_path / "b", torchscript=False, parity_pairs=40)
    sentences = ["Save the current document", "Enregistrer le document actuel"]
    fp32 = Encoder.load(out).encode(sentences)
    onnx = Encoder.load(tmp_path / "b", backend="onnx", precision="fp32").encode(sentences)
    assert np.allclose(fp32, onnx, atol=1e-4)
    shutil.rmtree(tmp_path / "b")
