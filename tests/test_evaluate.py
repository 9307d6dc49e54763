import json

import numpy as np

from conftest import ROOT, run_cli
from edge_xsent.data.corpus import Pair
from edge_xsent.data.corpus import read_pairs
from edge_xsent.eval.evaluate import cap_pairs, classify, knn_mean, package_split, retrieve, train_logreg, xsr, xsr_mixed
from edge_xsent.text import normalize


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
    # Candidate 0 is a hub: cos 0.8 to every query, more than each query's own translation
    # (0.6), so cosine retrieval gets all three wrong. Its neighbourhood is dense (0.8 to every
    # query), the translations' is not, so the ratio margin (k = 2) puts each translation first.
    e = np.eye(4, dtype=np.float32)
    q = np.stack([0.8 * e[0] + 0.6 * e[i] for i in (1, 2, 3)])
    c = np.stack([e[0], e[1], e[2], e[3]])
    r = retrieve(q, c, np.array([1, 2, 3]), ["a", "b", "c"], ["h", "a", "b", "c"], k=2)
    assert r.p1_cosine == 0.0 and r.p1_margin == 1.0


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


def language_biased_embed(pairs, bias: float, dim: int = 64):
    """Vectors of real sentences: one random 'meaning' per English sentence, shared by its
    translations, plus `bias` times a per-language direction (what a raw shared encoder learns)."""
    rng = np.random.default_rng(0)
    meaning, lang_of, langs = {}, {}, sorted({p.lang_a for p in pairs} | {p.lang_b for p in pairs})
    offset = {l: np.eye(dim, dtype=np.float32)[i] for i, l in enumerate(langs)}  # orthogonal to ...
    for p in pairs:
        m = meaning.setdefault(normalize(p.a).casefold(), rng.normal(size=dim).astype(np.float32))
        meaning.setdefault(normalize(p.b).casefold(), m)
        lang_of[p.a], lang_of[p.b] = p.lang_a, p.lang_b
    for k, m in meaning.items():
        m[: len(langs)] = 0  # ... the meanings
        meaning[k] = m / np.linalg.norm(m)

    def embed(texts):
        return unit(np.stack([meaning[normalize(t).casefold()] + bias * offset[lang_of[t]] for t in texts]))
    return embed


def test_xsr_mixed_catches_a_language_direction_that_xsr_misses():
    test = list(read_pairs("sample", split="test"))
    pairs = [p for p in test if p.lang_b == "fr"][:300] + [p for p in test if p.lang_b == "de"][:300]
    biased, clean = language_biased_embed(pairs, bias=2.0), language_biased_embed(pairs, bias=0.0)
    assert np.mean([r["p1_cosine"] for r in xsr(pairs, biased, max_queries=100).values()]) > 0.95
    mixed = xsr_mixed(pairs, biased, max_queries=100)
    assert set(mixed) == {"en->de", "de->en", "en->fr", "fr->en"}
    assert all(r["p1_cosine"] < 0.2 and r["same_language_top1"] > 0.8 for r in mixed.values())
    fixed = xsr_mixed(pairs, clean, max_queries=100)
    assert all(r["p1_cosine"] > 0.95 and r["same_language_top1"] < 0.05 for r in fixed.values())
    # the candidates: both languages' distinct sentences, less the queries
    fr = [p for p in pairs if p.lang_b == "fr"]
    n_en = len({normalize(p.a).casefold() for p in pairs})
    n_fr = len({normalize(p.b).casefold() for p in fr})
    assert fixed["en->fr"]["n_candidates"] == n_fr + n_en - 100
    assert fixed["fr->en"]["n_candidates"] == n_en + n_fr - 100


def test_xsr_mixed_uses_the_same_queries_as_xsr():
    pairs = [p for p in read_pairs("sample", split="test") if p.lang_b == "it"][:300]
    seen = []

    def recording(texts):
        seen.append(list(texts))
        return language_biased_embed(pairs, 0.0)(texts)
    a, b = xsr(pairs, recording, max_queries=50), xsr_mixed(pairs, recording, max_queries=50)
    assert [r["n_queries"] for r in a.values()] == [r["n_queries"] for r in b.values()] == [50, 50]
    assert a["en->it"]["p1_cosine"] == b["en->it"]["p1_cosine"] == 1.0


def test_cli_eval_json(tiny_model):
    res = run_cli("eval", "xsr", "--model", tiny_model, "--queries", "50", "--json", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"en->de", "de->en", "en->es", "es->en", "en->fr", "fr->en", "en->it", "it->en"}
    assert all(r["p1_cosine"] > 0.1 for r in out.values())  # chance is 1/500
    res = run_cli("eval", "xsr", "--model", tiny_model, "--queries", "50", "--pool", "mixed", "--json", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    mixed = json.loads(res.stdout)
    assert set(mixed) == set(out)
    assert all(mixed[d]["n_candidates"] > out[d]["n_candidates"] and 0 <= mixed[d]["same_language_top1"] <= 1
               for d in out)


def test_package_split_is_balanced_on_the_real_labelled_packages():
    """The builder samples packages by a hash; the eval split must not correlate with it."""
    from collections import Counter

    from edge_xsent.data.corpus import SAMPLE_CORPUS, read_classify

    pkgs = {r[0] for r in read_classify(SAMPLE_CORPUS / "classify.tsv")}
    c = Counter(package_split(p) for p in pkgs)
    assert 0.5 < c["train"] / len(pkgs) < 0.7 and 0.12 < c["test"] / len(pkgs) < 0.28


def test_cap_pairs_samples_each_language_pair_the_same_way():
    pairs = [Pair("en", lang, f"s{i}", f"{lang}{i}") for lang in ("fr", "de") for i in range(100)] + [
        Pair("en", "it", "a", "b")]
    capped = cap_pairs(pairs, 10)
    assert sum(p.lang_b == "fr" for p in capped) == sum(p.lang_b == "de" for p in capped) == 10
    assert [p for p in capped if p.lang_b == "it"] == [Pair("en", "it", "a", "b")]  # fewer than the cap: all kept
    assert [pairs.index(p) for p in capped] == sorted(pairs.index(p) for p in capped)  # corpus order
    assert capped == cap_pairs(list(pairs), 10) and capped != cap_pairs(pairs, 10, seed=1)


def test_language_means_joins_both_directions_and_every_source_of_a_language():
    import pytest

    from edge_xsent.eval.evaluate import language_means, out_of_genre_means

    cells = [("en->fr", 0.9), ("fr->en", 0.8), ("en->de", 1 / 3), ("en->fr", 0.7)]
    assert language_means(cells) == {"de": 33.33, "fr": 80.0}
    assert language_means(cells, None)["de"] == pytest.approx(100 / 3)
    assert out_of_genre_means({"a": {"en->fr": 0.9, "fr->en": 0.8}, "b": {"en->fr": 0.7}}) == {
        "mean": 80.0, "by_language": {"fr": 80.0}}
