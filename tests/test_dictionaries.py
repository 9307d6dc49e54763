"""Bilingual dictionaries (the freedict source): dictd files written as FreeDict ships them
(gzip data, base64 offsets in the index), entries copied from Debian's dict-freedict-* packages,
through the source into a built corpus."""

import gzip

import pytest

from edge_xsent.data import dictionaries as d
from edge_xsent.data.build import BuildConfig, build
from edge_xsent.data.corpus import read_corpus_split
from edge_xsent.data.formats import FormatError
from edge_xsent.data.sources import SOURCES
from test_build import add_package, fake_cache  # noqa: F401  (fake_cache is a pytest fixture)

pytest.importorskip("wordfreq")

# eng-deu (Ding): one entry per sense, examples, field labels, see-also lines.
ENG_DEU = [
    ("00-database-short", "English - German Ding/FreeDict dictionary\n"),
    ("house", "house /hˈaʊs/\nGeschlecht <neut>, Familie <fem>\n"),
    ("house", 'house /hˈaʊs/\nHaus <neut>\n      "build a house"  - ein Haus bauen\n'
              '      "have a house built"  - ein Haus bauen lassen\n'),
    ("bus", 'bus /bˈʌs/\nAutobus <masc>, Bus <masc>\n      "go by bus"  - mit dem Bus fahren\n'
            " see: {buses}, {busses}, {public bus}, {jitney}\n\n"),
    ("bus", 'bus /bˈʌs/\nDatensammelleitung <fem>, Sammelleitung <fem>, Datenbus <masc>, Bus <masc> [comp.]  [electr.]\n'
            '      "universal serial bus"  - universeller serieller Bus\n      "time-multiplexed bus"  - Zeitmultiplexbus\n'),
    ("yellow", "yellow /jˈɛləʊ/\nfeige, feig, memmenhaft [geh.] , hasenfüßig <adj> [veraltet]\n"
               "   Synonyms: {cowardly}, {faint-hearted}\n"),
    ("yellow", 'yellow /jˈɛləʊ/\ngelb <adj>\n      "yellowish-green"  - gelbgrün\n see: {amber}\n\n'),
    ("abruption", "abruption /ɐbɹˈʌpʃən/\nAbbrechung <fem>\n"),  # not everyday English: left out
    ("hotel", "hotel /həʊtˈɛl/\nHotel <neut>\n"),  # the same word: no pair
    ("bible", "bible /bˈaɪbəl/\nBibel <fem>\n"),  # reserved text never enters a corpus
]
# pol-eng style numbering, in an eng-pol dictionary.
ENG_POL = [("bus", "bus /bʌs/\nI.  <N> 1.  autobus\n 2.  [komp]  magistrala, szyna\nII.  <V> 1.  wozić autobusem\n")]
DEU_ENG = [("Stadt", "Stadt /ʃtat/\ntown, city\n"), ("Haus", "Haus /haʊs/\nhome\n")]


def dictd(entries: list[tuple[str, str]]) -> tuple[bytes, str]:
    """(.dict.dz bytes, .index text) in dictd's format."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def b64(n: int) -> str:
        s = ""
        while True:
            s, n = alphabet[n % 64] + s, n // 64
            if not n:
                return s

    data, index = b"", []
    for head, body in entries:
        raw = body.encode()
        index.append(f"{head}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    return gzip.compress(data), "\n".join(index) + "\n"


def add_dictionary(cache, name: str, entries) -> None:
    data, index = dictd(entries)
    add_package(cache, f"dict-freedict-{name}", {f"usr/share/dictd/freedict-{name}.dict.dz": data,
                                                 f"usr/share/dictd/freedict-{name}.index": index})


def test_entries_parse_to_their_first_translation(tmp_path):
    e = d.parse_entry(ENG_POL[0][1])
    assert (e.head, e.translation, e.labelled, e.examples) == ("bus", "autobus", False, ())
    e = d.parse_entry(ENG_DEU[3][1])
    assert (e.head, e.translation, e.examples) == ("bus", "Autobus", (("go by bus", "mit dem Bus fahren"),))
    assert d.parse_entry(ENG_DEU[4][1]).labelled and d.parse_entry("bus /bʌs/\n") is None
    data, index = dictd(ENG_DEU)
    (tmp_path / "x.dict.dz").write_bytes(data)
    (tmp_path / "x.index").write_text(index)
    best = d.best_entries(d.dictd_entries(tmp_path / "x.index", tmp_path / "x.dict.dz"))
    # the everyday sense wins: unlabelled, then the most examples
    assert {k: v.translation for k, v in best.items() if k in ("house", "bus", "yellow")} == \
        {"house": "Haus", "bus": "Autobus", "yellow": "gelb"}
    (tmp_path / "x.index").write_text("house\tA!\tB\n")
    with pytest.raises(FormatError, match=r"x.index:1: not a dictd index line"):
        list(d.dictd_entries(tmp_path / "x.index", tmp_path / "x.dict.dz"))


def test_freedict_source_builds_train_only_word_pairs(fake_cache, tmp_path):  # noqa: F811
    add_dictionary(fake_cache, "eng-deu", ENG_DEU)
    add_dictionary(fake_cache, "deu-eng", DEU_ENG)
    add_dictionary(fake_cache, "eng-pol", ENG_POL)
    assert SOURCES["freedict"].packages(["de", "pl"]) == ["dict-freedict-eng-deu", "dict-freedict-deu-eng",
                                                         "dict-freedict-eng-pol", "dict-freedict-pol-eng"]
    (fake_cache / "updated-langs.txt").write_text("en de fr it pl\n")  # apt lists as if fetched for pl too
    out = tmp_path / "corpus"
    stats = build(out, BuildConfig(langs=["de", "pl"], sources=["freedict"]), fake_cache, offline=True, progress=False)
    train = {(p.lang_b, p.a, p.b) for p in read_corpus_split(out / "train.tsv")}
    assert train == {("de", "house", "Haus"), ("de", "bus", "Autobus"), ("de", "yellow", "gelb"),
                     ("de", "build a house", "ein Haus bauen"), ("de", "have a house built", "ein Haus bauen lassen"),
                     ("de", "go by bus", "mit dem Bus fahren"), ("de", "yellowish-green", "gelbgrün"),
                     ("de", "town", "Stadt"), ("de", "home", "Haus"), ("pl", "bus", "autobus")}
    assert not list(read_corpus_split(out / "valid.tsv")) and not list(read_corpus_split(out / "test.tsv"))
    assert stats["build"]["missing_packages"] == {"freedict": ["dict-freedict-pol-eng"]}


def test_word_pairs_never_take_a_held_out_sentence(tmp_path):
    """A dictionary pair whose English is a valid or test text of another source is not trained on."""
    from edge_xsent.data.build import CorpusWriter
    from edge_xsent.data.debian import RawPair

    writer = CorpusWriter(tmp_path, BuildConfig(langs=["de"]), held_out=set())
    writer.split["good morning"] = "test"  # as the sentence sources would have claimed it
    writer.add_word(RawPair("de", "Good morning", "Guten Morgen", "freedict", "x"))
    writer.add_word(RawPair("de", "good night", "gute Nacht", "freedict", "x"))
    writer.add_word(RawPair("de", "good night", "Gute Nacht!", "freedict", "x"))  # one translation per text
    writer.close()
    assert [(p.a, p.b) for p in read_corpus_split(tmp_path / "train.tsv")] == [("good night", "gute Nacht")]
    assert not list(read_corpus_split(tmp_path / "test.tsv"))
