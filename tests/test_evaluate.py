import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from edge_xsent.data.corpus import Pair
from edge_xsent.evaluate import classify, knn_mean, package_split, retrieve, train_logreg, xsr


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_retrieve_perfect_and_shuffled():
    rng = np.random.default_rng(0)
    q = unit(rng.normal(size=(50, 16)).astype(np.float32))
    texts = [f"s{i}" for i in range(50)]
    r = retrieve(q, q.copy(), np.arange(50), texts, texts)
    assert r.p1_cosine == r.p1_margin == 1.0
    wrong = retrieve(q, q.copy(), np.roll(np.arange(50), 1), texts, texts)
    assert wrong.p1_cosine == 0.0


def test_duplicates_count_by_text_not_by_index():
    q = unit(np.array([[1, 0], [0, 1]], dtype=np.float32))
    c = unit(np.array([[1, 0.01], [1, 0], [0, 1]], dtype=np.float32))  # candidates 0 and 1 share a text
    r = retrieve(q, c, np.array([0, 2]), ["a", "b"], ["Same text", "same  text", "other"])
    assert r.p1_cosine == 0.5 and r.p1_cosine_text == 1.0


def test_margin_fixes_a_hub():
    # candidate 0 is a "hub", close to every query; margin scoring discounts it.
    q = unit(np.array([[1, 0.0, 0.2], [0, 1, 0.2], [0.7, 0.7, 0.2]], dtype=np.float32))
    hub = unit(np.array([[0.6, 0.6, 0.5]], dtype=np.float32))
    c = np.concatenate([hub, unit(np.array([[0.9, 0, 0.1], [0, 0.9, 0.1], [0.5, 0.5, 0.2]], dtype=np.float32))])
    r = retrieve(q, c, np.array([1, 2, 3]), ["a", "b", "c"], ["h", "a", "b", "c"], k=2)
    assert r.p1_margin >= r.p1_cosine


def test_knn_mean():
    x = np.eye(3, dtype=np.float32)
    assert np.allclose(knn_mean(x, x, 1), 1.0)
    assert np.allclose(knn_mean(x, x, 3), 1 / 3)


def test_xsr_both_directions_with_distractors(tiny_encoder):
    pairs = [Pair("en", "fr", f"Open file number {i} now", f"Ouvrir le fichier numéro {i} maintenant") for i in range(20)]
    res = xsr(pairs, tiny_encoder.encode, max_queries=10, distractors={"fr": ["Une phrase sans rapport"]})
    assert set(res) == {"en->fr", "fr->en"}
    assert res["en->fr"]["n_candidates"] == 21 and res["fr->en"]["n_candidates"] == 20
    assert res["en->fr"]["n_queries"] == 10


def test_logreg_learns_separable_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0)
    f = train_logreg(x, y, 4, 0.0, seed=0)
    assert (f(x) == y).mean() > 0.95


def test_package_split_is_stable():
    splits = [package_split(f"pkg{i}") for i in range(5000)]
    assert 0.55 < splits.count("train") / 5000 < 0.65 and package_split("bash") == package_split("bash")


def test_classify_on_sample(tiny_encoder):
    from edge_xsent.data.corpus import SAMPLE_CORPUS, read_classify

    res = classify(list(read_classify(SAMPLE_CORPUS / "classify.tsv")), tiny_encoder.encode, seeds=2)
    assert set(res["accuracy"]) == {"en->en", "en->fr", "en->de", "en->it"}
    chance = 1 / len(res["labels"])
    assert res["accuracy"]["en->en"]["mean"] > 2 * chance  # the vectors carry topic information


def test_cli_eval_json(tiny_model):
    res = subprocess.run([sys.executable, "-m", "edge_xsent.cli", "eval", "xsr", "--model", str(tiny_model),
                          "--queries", "50", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"en->de", "de->en", "en->es", "es->en", "en->fr", "fr->en", "en->it", "it->en"}
    assert all(r["p1_cosine"] > 0.1 for r in out.values())  # chance is 1/500


def test_package_split_is_balanced_on_the_real_labelled_packages():
    """The builder samples packages by a hash; the eval split must not correlate with it."""
    from collections import Counter

    from edge_xsent.data.corpus import SAMPLE_CORPUS, read_classify

    pkgs = {r[0] for r in read_classify(SAMPLE_CORPUS / "classify.tsv")}
    c = Counter(package_split(p) for p in pkgs)
    assert 0.5 < c["train"] / len(pkgs) < 0.7 and 0.12 < c["test"] / len(pkgs) < 0.28
