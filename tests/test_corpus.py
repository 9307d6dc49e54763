import gzip
import lzma
from collections import defaultdict

import pytest
from hypothesis import given, strategies as st

from edge_xsent.data.build import corpus_stats
from edge_xsent.data.corpus import (JOIN_MOST, SAMPLE_CORPUS, SPLITS, Pair, joined_pairs, langs_from_name,
                                    read_corpus_split, read_moses, read_pairs, read_tsv, split_of)
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


def _runs(n_sources: int, per_source: int) -> list[Pair]:
    return [Pair("en", lang, f"{src}-{i}-{lang}-en.", f"{src}-{i}-{lang}.", f"s{src}", "general")
            for src in range(n_sources) for lang in ("de", "ja") for i in range(per_source)]


@given(st.integers(1, 5), st.integers(1, 12), st.floats(0.01, 1.0), st.integers(10, 200))
def test_joined_pairs_join_consecutive_pairs_of_one_source_within_the_limit(n_sources, per_source, share, max_chars):
    rows = _runs(n_sources, per_source)
    joined = joined_pairs(rows, share, max_chars, seed=0)
    assert len(joined) <= round(share * len(rows))
    for p in joined:
        sep = "" if p.lang_b == "ja" else " "
        parts_a = p.a.split(" ")
        assert 2 <= len(parts_a) <= JOIN_MOST and len(p.a) <= max_chars and len(p.b) <= max_chars
        first = rows.index(next(r for r in rows if r.a == parts_a[0]))
        run = rows[first:first + len(parts_a)]
        assert [r.a for r in run] == parts_a and p.b == sep.join(r.b for r in run)  # consecutive, in order
        assert {(r.lang_b, r.source) for r in run} == {(p.lang_b, p.source)}  # one language pair, one source
    assert len({p.a for p in joined}) == len(joined)  # no start used twice
    assert joined == joined_pairs(rows, share, max_chars, seed=0)  # a function of the seed


def test_joined_pairs_reach_their_share_where_runs_allow_and_never_cross_a_source():
    rows = _runs(3, 40)
    assert len(joined_pairs(rows, 0.25, 400)) == 60 and joined_pairs(rows, 0.0, 400) == []
    singles = [Pair("en", "de", f"{i}-en.", f"{i}-de.", f"s{i}") for i in range(50)]  # every source one pair long
    assert joined_pairs(singles, 1.0, 400) == []
