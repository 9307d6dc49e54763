import gzip
import lzma
from collections import defaultdict

import pytest
from hypothesis import given, strategies as st

from edge_xsent.data.build import corpus_stats
from edge_xsent.data.corpus import (SAMPLE_CORPUS, SPLITS, langs_from_name, read_corpus_split, read_moses,
                                    read_pairs, read_tsv, split_of)
from edge_xsent.errors import UserError
from edge_xsent.text import normalize


def write(path, text, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("opener,suffix", [(open, ""), (gzip.open, ".gz"), (lzma.open, ".xz")])
def test_tsv_plain_and_compressed(tmp_path, opener, suffix):
    p = write(tmp_path / f"corpus.en-fr.tsv{suffix}", "Hello world\tBonjour le monde\n\nGood night\tBonne nuit\n", opener)
    pairs = list(read_tsv(p))
    assert [(x.lang_a, x.lang_b, x.a, x.b) for x in pairs] == [
        ("en", "fr", "Hello world", "Bonjour le monde"), ("en", "fr", "Good night", "Bonne nuit")]


def test_tsv_is_streamed(tmp_path):
    p = write(tmp_path / "big.en-de.tsv", "".join(f"line {i}\tZeile {i}\n" for i in range(10000)))
    it = read_tsv(p)
    assert next(it).a == "line 0"  # a generator: nothing beyond the first line was needed


def test_tsv_errors_name_file_and_line(tmp_path):
    p = write(tmp_path / "bad.en-fr.tsv", "ok\tok\nthree\tcolumns\there\n")
    with pytest.raises(UserError, match=r"bad.en-fr.tsv:2: expected 2 tab-separated columns"):
        list(read_tsv(p))
    with pytest.raises(UserError, match="no such file"):
        list(read_tsv(tmp_path / "missing.en-fr.tsv"))
    q = tmp_path / "noname.tsv"
    q.write_text("a\tb\n")
    with pytest.raises(UserError, match="cannot tell the languages"):
        list(read_tsv(q))
    assert [p.lang_b for p in read_tsv(q, ("en", "it"))] == ["it"]


def test_undecodable_bytes(tmp_path):
    p = tmp_path / "latin.en-fr.tsv"
    p.write_bytes("ok\tok\ncaf\xe9\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin.en-fr.tsv:2: not valid UTF-8"):
        list(read_tsv(p))


def test_truncated_gzip(tmp_path):
    p = write(tmp_path / "t.en-fr.tsv.gz", "".join(f"a {i}\tb {i}\n" for i in range(5000)), gzip.open)
    p.write_bytes(p.read_bytes()[:200])
    with pytest.raises(UserError, match="truncated"):
        list(read_tsv(p))


def test_moses(tmp_path):
    a = write(tmp_path / "corpus.en", "one\ntwo\n\nfour\n")
    b = write(tmp_path / "corpus.fr", "un\ndeux\ntrois\nquatre\n")
    pairs = list(read_moses(a, b))
    assert [(p.lang_a, p.lang_b, p.a, p.b) for p in pairs] == [("en", "fr", "one", "un"), ("en", "fr", "two", "deux"),
                                                                ("en", "fr", "four", "quatre")]
    assert len(list(read_pairs(f"{a},{b}"))) == 3


def test_moses_line_count_mismatch(tmp_path):
    a = write(tmp_path / "c.en", "one\ntwo\nthree\n")
    b = write(tmp_path / "c.de", "eins\nzwei\n")
    with pytest.raises(UserError, match="fewer lines"):
        list(read_moses(a, b))
    with pytest.raises(UserError, match="more lines"):
        list(read_moses(b, a, ("de", "en")))


def test_langs_from_name():
    from pathlib import Path
    assert langs_from_name(Path("europarl.en-fr.tsv.gz")) == ("en", "fr")
    assert langs_from_name(Path("paracrawl_en_de.tsv")) == ("en", "de")
    assert langs_from_name(Path("corpus.tsv")) is None


def test_read_pairs_errors(tmp_path):
    with pytest.raises(UserError, match="no train.tsv"):
        read_pairs(tmp_path)
    with pytest.raises(UserError, match="no such file"):
        read_pairs(tmp_path / "nope.tsv")


@given(st.text(min_size=1), st.sampled_from([0.0, 0.05, 0.3]))
def test_split_is_a_function_of_the_normalised_english(text, frac):
    s = split_of(text, frac, frac)
    assert s in SPLITS
    assert split_of("  " + text.upper().lower() + "\t", frac, frac) == split_of(text.lower(), frac, frac)


def test_split_fractions_roughly_hold():
    splits = [split_of(f"sentence number {i}", 0.01, 0.06) for i in range(20000)]
    assert 0.05 < splits.count("test") / 20000 < 0.07
    assert 0.005 < splits.count("valid") / 20000 < 0.015


def test_sample_corpus_no_leak_across_splits_and_languages():
    seen = defaultdict(set)
    for split in SPLITS:
        for p in read_corpus_split(SAMPLE_CORPUS / f"{split}.tsv"):
            seen[normalize(p.a).casefold()].add(split)
            assert p.lang_a == "en" and p.lang_b in {"fr", "de", "es", "it"}
    assert all(len(s) == 1 for s in seen.values())


def test_sample_corpus_stats_and_provenance():
    stats = corpus_stats(SAMPLE_CORPUS)
    assert set(stats["pairs"]) == {"en-de", "en-es", "en-fr", "en-it"}
    assert all(c["train"] >= 2000 and c["test"] >= 400 for c in stats["pairs"].values())
    assert set(stats["sources"]) == {"ddtp", "lo-help", "gettext", "lo-ui"}
    assert "MPL-2.0" in (SAMPLE_CORPUS / "PROVENANCE.md").read_text()


def test_classification_packages_not_in_train():
    from edge_xsent.data.corpus import read_classify
    held = {normalize(t).casefold() for _, _, lang, t in read_classify(SAMPLE_CORPUS / "classify.tsv") if lang == "en"}
    train_en = {normalize(p.a).casefold() for p in read_corpus_split(SAMPLE_CORPUS / "train.tsv")}
    assert held and not (held & train_en)
