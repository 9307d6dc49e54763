"""General-domain sources: file-format parsers on small fixtures in their real formats
(malformed ones included), the general cleaning rules, and `data build` end to end with
game, dictionary and fortune packages beside the software ones."""

import json
import struct

import pytest
from click.testing import CliRunner

from edge_xsent.cli import main
from edge_xsent.data import formats
from edge_xsent.data.build import BuildConfig, build, corpus_stats, format_stats
from edge_xsent.data.clean import TemplateCap, is_name_title, mentions_reserved_text
from edge_xsent.data.corpus import LEGACY_HEADER, SPLITS, read_corpus_split, read_mono, read_pairs
from edge_xsent.data.formats import FormatError
from edge_xsent.data.games import locale_matches
from edge_xsent.errors import UserError
from edge_xsent.text import normalize
from test_build import add_package, fake_cache  # noqa: F401  (fake_cache is a pytest fixture)
from test_debian import make_mo


def make_qm(messages: list[tuple[str, str]]) -> bytes:
    """A Qt .qm file as lrelease writes it: magic, then a messages block whose records carry
    the translation (UTF-16BE), the source text and context (UTF-8), and an end tag."""
    body = b""
    for source, translation in messages:
        t, s, c = translation.encode("utf-16-be"), source.encode(), b"Ctx"
        body += b"\x03" + struct.pack(">I", len(t)) + t + b"\x06" + struct.pack(">I", len(s)) + s
        body += b"\x07" + struct.pack(">I", len(c)) + c + b"\x01"
    hashes = b"\x42" + struct.pack(">I", 8) + b"\0" * 8
    return formats.QM_MAGIC + hashes + b"\x69" + struct.pack(">I", len(body)) + body


# ----------------------------------------------------------------------------- parsers

def test_qm_pairs_and_bad_files(tmp_path):
    good = tmp_path / "gcompris_fr.qm"
    good.write_bytes(make_qm([("Count the apples on the table.", "Compte les pommes sur la table."),
                              ("Drag the cat to its house.", "Fais glisser le chat vers sa maison.")]))
    assert list(formats.read_qm(good)) == [("Count the apples on the table.", "Compte les pommes sur la table."),
                                           ("Drag the cat to its house.", "Fais glisser le chat vers sa maison.")]
    bad = tmp_path / "bad.qm"
    bad.write_bytes(b"\0" * 16 + good.read_bytes()[16:])
    with pytest.raises(FormatError, match=r"bad\.qm: not a Qt \.qm file \(bad magic"):
        list(formats.read_qm(bad))
    cut = tmp_path / "cut.qm"
    cut.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(FormatError, match=r"cut\.qm: truncated \.qm file"):
        list(formats.read_qm(cut))


def test_mo_truncated_and_bad_magic(tmp_path):
    data = make_mo([(b"Open the old wooden door", "Ouvre la vieille porte en bois".encode())])
    cut = tmp_path / "cut.mo"
    cut.write_bytes(data[:-10])
    with pytest.raises(FormatError, match=r"cut\.mo: truncated \.mo file"):
        list(formats.read_mo(cut))
    junk = tmp_path / "junk.mo"
    junk.write_bytes(b"GIF89a" + b"\0" * 30)
    with pytest.raises(FormatError, match=r"junk\.mo: not a \.mo file \(bad magic"):
        list(formats.read_mo(junk))


def test_po_entries(tmp_path):
    po = tmp_path / "fr.po"
    po.write_text('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                  '#: story.c:1\nmsgid "The dragon sleeps "\n"under the mountain."\n'
                  'msgstr "Le dragon dort "\n"sous la montagne."\n\n'
                  '#, fuzzy\nmsgid "A guessed line that nobody checked"\nmsgstr "Une ligne devinée"\n\n'
                  'msgctxt "menu"\nmsgid "one apple"\nmsgid_plural "%d apples"\nmsgstr[0] "une pomme"\n'
                  'msgstr[1] "%d pommes"\n', encoding="utf-8")
    assert list(formats.read_po(po)) == [("The dragon sleeps under the mountain.", "Le dragon dort sous la montagne."),
                                         ("one apple", "une pomme")]
    (tmp_path / "bad.po").write_text('msgid "x"\nthis is not po\n')
    with pytest.raises(FormatError, match=r"bad\.po:2: not a \.po line"):
        list(formats.read_po(tmp_path / "bad.po"))


def test_properties_by_key(tmp_path):
    p = tmp_path / "FreeColMessages_de.properties"
    p.write_text("# comment\n! also a comment\nmodel.a.name = Schnee f\\u00e4llt\nmodel.b=Ein langer \\\n"
                 "    Satz\n\nmodel.c:Punkt\n", encoding="utf-8")
    assert formats.read_properties(p) == {"model.a.name": "Schnee fällt", "model.b": "Ein langer Satz", "model.c": "Punkt"}
    (tmp_path / "bad.properties").write_text("ok=1\nthis line has no separator\n")
    with pytest.raises(FormatError, match=r"bad\.properties:2: a \.properties line needs key=value"):
        formats.read_properties(tmp_path / "bad.properties")


def test_ding_and_fortunes(tmp_path):
    ding = tmp_path / "de-en"
    ding.write_text("# Version :: test\n"
                    "Hund {m} | Hunde {pl} | Der Hund bellt laut. :: dog | dogs | The dog barks loudly.\n"
                    "Katze {f} | Katzen :: cat\n", encoding="utf-8")
    assert list(formats.read_ding(ding)) == [("Hund", "dog"), ("Hunde", "dogs"),
                                             ("Der Hund bellt laut.", "The dog barks loudly.")]
    (tmp_path / "bad").write_text("Hund | Hunde dog | dogs\n")
    with pytest.raises(FormatError, match=r"bad:1: a Ding line needs 'German :: English'"):
        list(formats.read_ding(tmp_path / "bad"))
    f = tmp_path / "wisdom"
    f.write_text("A stitch in time\nsaves nine.\n%\n\n%\nLook before you leap.\n")
    assert list(formats.read_fortunes(f)) == ["A stitch in time saves nine.", "Look before you leap."]
    zh = tmp_path / "chinese"  # fortunes-zh's real layout: a saying, then a coloured attribution
    zh.write_text("要有礼貌 在 Debian 这种规模的项目中，很难避免遇到与你意见不和的人。\n\x1b[33m    -- Debian\x1b[m\n%\n",
                  encoding="utf-8")
    assert list(formats.read_fortunes(zh)) == ["要有礼貌 在 Debian 这种规模的项目中，很难避免遇到与你意见不和的人。 -- Debian"]


def test_fortunes_in_bulgarian_czech_chinese_and_a_slovak_file(fake_cache):
    from edge_xsent.data.debian import AptCache
    from edge_xsent.data.mono import read_fortunes

    add_package(fake_cache, "fortunes-cs", {"usr/share/games/fortunes/citace": "Kdo jinému jámu kopá, sám do ní padá.\n",
                                            "usr/share/games/fortunes/klasik-sk": "Kto druhému jamu kope, sám do nej padne.\n"})
    add_package(fake_cache, "fortunes-bg", {"usr/share/games/fortunes/bgproverb": "Бързата работа срам за майстора.\n"})
    add_package(fake_cache, "fortunes-zh", {"usr/share/games/fortunes/tang300": "床前明月光，疑是地上霜。\n"})
    cache = AptCache(fake_cache, offline=True)
    got = {(t.lang, t.text) for t in read_fortunes(cache, ["cs", "sk", "bg", "zh_CN"])}
    assert got == {("cs", "Kdo jinému jámu kopá, sám do ní padá."), ("sk", "Kto druhému jamu kope, sám do nej padne."),
                   ("bg", "Бързата работа срам за майстора."), ("zh_CN", "床前明月光，疑是地上霜。")}
    assert {t.lang for t in read_fortunes(cache, ["cs"])} == {"cs"}  # the Slovak file only when sk is asked for


def test_locale_matching():
    assert locale_matches("es_AR", "es") and locale_matches("es", "es") and locale_matches("it_IT", "it")
    assert locale_matches("pt_BR", "pt_BR") and not locale_matches("pt", "pt_BR") and not locale_matches("pt_PT", "pt_BR")
    assert not locale_matches("ca@valencia", "ca") and not locale_matches("est", "es")


# ----------------------------------------------------------------------------- cleaning rules

def test_general_rules():
    assert is_name_title("Delfador's Memoirs of Wesmere", "Les Mémoires de Delfador de Wesmere")
    assert not is_name_title("The Great Northern Library", "La grande bibliothèque du nord")  # translated
    assert not is_name_title("Delfador walks to Wesmere.", "Delfador marche vers Wesmere.")  # a sentence
    assert mentions_reserved_text("As the Bible says, be kind.") and mentions_reserved_text("see John 3:16 here")
    assert mentions_reserved_text("Всеобщая", "universal declaration of human rights")
    assert not mentions_reserved_text("The dwarves mine gold in the hills.")
    assert mentions_reserved_text("Он читал Библию.") and mentions_reserved_text("текст библии")
    assert not mentions_reserved_text("Откройте библиотеку.") and not mentions_reserved_text("Библиография")


def test_template_cap_frames_and_shingles():
    cap = TemplateCap(3)
    frame = [cap.keep(f"A small {w} of wood.") for w in ["box", "bowl", "cup", "plank", "stick"]]
    assert frame == [True, True, True, False, False]
    shingle = [cap.keep(f"We could use a coop for our chickens, so build a {m} shack with a roof on the north side.")
               for m in ["log", "metal sheet", "mi-go resin", "rammed earth"]]
    assert shingle == [True, True, True, False]
    assert cap.keep("A small box of wood.")  # decided once per sentence: a repeat keeps its verdict
    assert cap.keep("The river freezes every winter in the north.") and cap.dropped == 3


# ----------------------------------------------------------------------------- build

GAME_EN = ["The old miller sells bread to the travellers.", "Dark clouds gather over the quiet village tonight.",
           "You hear wolves howling somewhere in the forest.", "Bring me three apples and I will tell you a story.",
           "The bridge collapsed during the storm last night.", "Our scouts have found a path through the mountains.",
           "She sings a sad song about the lost ship.", "Keep your sword sharp and your friends close.",
           "The market is crowded on the first day of spring.", "We must reach the castle before the sun sets."]
GAME_FR = ["Le vieux meunier vend du pain aux voyageurs.", "De sombres nuages s'amassent sur le village calme ce soir.",
           "Tu entends des loups hurler quelque part dans la forêt.", "Apporte-moi trois pommes et je te raconterai une histoire.",
           "Le pont s'est effondré pendant la tempête hier soir.", "Nos éclaireurs ont trouvé un chemin à travers les montagnes.",
           "Elle chante une chanson triste sur le navire perdu.", "Garde ton épée affûtée et tes amis proches.",
           "Le marché est bondé le premier jour du printemps.", "Nous devons atteindre le château avant le coucher du soleil."]


@pytest.fixture
def general_cache(fake_cache):  # noqa: F811
    mo = make_mo([(e.encode(), f.encode()) for e, f in zip(GAME_EN, GAME_FR)]
                 + [(b"female^Welcome back to the village, friend.", "Bon retour au village, amie.".encode()),
                    (b"As the Bible says, love thy neighbour.", "Comme le dit la Bible, aime ton prochain.".encode()),
                    (b"Delfador's Memoirs of Wesmere", "Les Mémoires de Delfador de Wesmere".encode())])
    loc = "usr/share/games/wesnoth/1.16/locale"
    add_package(fake_cache, "wesnoth-1.16-data", {f"{loc}/fr/LC_MESSAGES/wesnoth.mo": mo,
                                                  f"{loc}/fr_CA/LC_MESSAGES/wesnoth-lib.mo": mo})  # a UI catalogue: skipped
    add_package(fake_cache, "cataclysm-dda-data", {"usr/share/locale/fr/LC_MESSAGES/cataclysm-dda.mo": mo[:-40]})
    add_package(fake_cache, "libreoffice-l10n-fr", {  # beside the fixture's good catalogue, a broken one
        "usr/lib/libreoffice/program/resource/fr/LC_MESSAGES/zz.mo": b"GIF89a" + b"\0" * 30,
        **{str(p.relative_to(fake_cache / "x" / "libreoffice-l10n-fr")): p.read_bytes()
           for p in (fake_cache / "x" / "libreoffice-l10n-fr").rglob("*.mo")}})
    add_package(fake_cache, "gcompris-qt-data", {"usr/share/gcompris-qt/translations/gcompris_fr.qm": make_qm(
        [("Count the apples on the table, then click OK.", "Compte les pommes sur la table, puis clique sur OK.")])})
    add_package(fake_cache, "freecol", {
        "usr/share/games/freecol/strings/FreeColMessages.properties": "a=The colonists build a new church in the town.\n",
        "usr/share/games/freecol/strings/FreeColMessages_fr.properties": "a=Les colons construisent une nouvelle église.\n"})
    add_package(fake_cache, "fortunes", {"usr/share/games/fortunes/wisdom":
                                         f"{GAME_EN[0]}\n%\nA fool and his money are soon parted.\n%\nOK\n",
                                         "usr/share/games/fortunes/ethnic": "A joke about some people that we skip.\n"})
    return fake_cache


def test_build_with_general_sources(general_cache, tmp_path, capsys):
    out = tmp_path / "corpus"
    cfg = BuildConfig(langs=["fr", "de", "it"], min_label_packages=5, max_label_packages=10, test_frac=0.2,
                      valid_frac=0.1, general_test_frac=0.4)
    stats = build(out, cfg, general_cache, offline=True, progress=False)
    b = stats["build"]
    assert set(stats["domains"]) == {"software", "general"}
    assert {s: v["domain"] for s, v in stats["sources"].items() if v["domain"] == "general"} == {
        "wesnoth": "general", "gcompris": "general", "freecol": "general"}
    # a package apt cannot supply is reported by name and the build goes on; so is a broken file
    assert "widelands-data" in b["missing_packages"]["widelands"] and "trans-de-en" in b["missing_packages"]["ding"]
    assert any("cataclysm-dda.mo" in e and "truncated" in e for e in b["unreadable_files"])
    assert any("zz.mo" in e and "bad magic" in e for e in b["unreadable_files"])  # lo-ui skips it too
    assert "warning: skipped" in capsys.readouterr().out
    rows = {s: list(read_corpus_split(out / f"{s}.tsv")) for s in SPLITS}
    general = [p for ps in rows.values() for p in ps if p.domain == "general"]
    texts = {p.a for p in general}
    assert set(GAME_EN) <= texts and "Welcome back to the village, friend." in texts  # context prefix gone
    assert not any("Bible" in t or "Delfador" in t for t in texts)
    assert b["dropped_by_filter"]["reserved_text"] == 1 and b["dropped_by_filter"]["name_title"] == 1
    assert len([p for p in general if p.source == "wesnoth"]) == 11  # wesnoth-lib (fr_CA) not read
    where = {}
    for split, ps in rows.items():
        for p in ps:
            assert where.setdefault(normalize(p.a).casefold(), split) == split  # one split per sentence
    assert read_pairs(out, split="test", domain="general") and all(
        p.domain == "general" for p in read_pairs(out, split="test", domain="general"))
    mono = list(read_mono(out / "mono.tsv"))
    assert ("en", "A fool and his money are soon parted.", "fortunes") in mono
    assert not any("joke about some people" in t for _, t, _ in mono)  # a skipped file
    held = {k for k, s in where.items() if s != "train"}
    assert not any(normalize(t).casefold() in held for _, t, _ in mono)  # no valid/test sentence in mono
    assert corpus_stats(out)["domains"] == stats["domains"] and "[general]" in format_stats(stats)
    assert json.loads((out / "stats.json").read_text())["mono"]["en"]["fortunes"] >= 1
    assert "CC-BY-SA" in (out / "PROVENANCE.md").read_text()


def test_software_part_does_not_change_with_general_sources(general_cache, tmp_path):
    soft = ["ddtp", "lo-help", "gettext", "lo-ui"]
    a = build(tmp_path / "a", BuildConfig(langs=["fr"], sources=soft, min_label_packages=5), general_cache,
              offline=True, progress=False)
    b = build(tmp_path / "b", BuildConfig(langs=["fr"], min_label_packages=5), general_cache, offline=True, progress=False)
    assert a["domains"]["software"] == b["domains"]["software"]
    for split in SPLITS:
        sa = list(read_corpus_split(tmp_path / "a" / f"{split}.tsv"))
        sb = [p for p in read_corpus_split(tmp_path / "b" / f"{split}.tsv") if p.domain == "software"]
        assert sa == sb


def test_wordfreq_words_are_mono_text_and_leave_the_pairs_alone(general_cache, tmp_path):
    """Word-level distillation: the wordfreq source adds each language's frequent words (real
    wordfreq lists) to mono.tsv, single words kept despite the sentence filters, and no pair changes."""
    from edge_xsent.data import mono as mono_
    pytest.importorskip("wordfreq")
    base = BuildConfig(langs=["fr", "de"], min_label_packages=5)
    a = build(tmp_path / "a", base, general_cache, offline=True, progress=False)
    b = build(tmp_path / "b", BuildConfig(langs=["fr", "de"], min_label_packages=5, sources=["default", "wordfreq"]),
              general_cache, offline=True, progress=False)
    for split in SPLITS:
        assert list(read_corpus_split(tmp_path / "a" / f"{split}.tsv")) == list(read_corpus_split(tmp_path / "b" / f"{split}.tsv"))
    words = [(lang, t) for lang, t, src in read_mono(tmp_path / "b" / "mono.tsv") if src == "wordfreq"]
    per_lang = {lang: sum(1 for l, _ in words if l == lang) for lang in ("en", "fr", "de")}
    assert per_lang == {lang: mono_.WORDS_PER_LANG for lang in per_lang}
    assert ("fr", "maison") in words and ("de", "haus") in words and ("en", "house") in words
    assert all(" " not in t and not any(c.isdigit() for c in t) for _, t in words)
    assert b["mono"]["fr"]["wordfreq"] == mono_.WORDS_PER_LANG and "wordfreq" not in a["mono"].get("fr", {})
    assert "CC-BY-SA-4.0" in (tmp_path / "b" / "PROVENANCE.md").read_text()


def test_legacy_corpus_is_software_and_domain_needs_a_corpus(tmp_path):
    f = tmp_path / "test.tsv"
    f.write_text("\t".join(LEGACY_HEADER) + "\nen\tfr\tOpen the file now\tOuvrir le fichier\tgettext\n")
    assert [p.domain for p in read_corpus_split(f)] == ["software"]
    assert list(read_corpus_split(f, domain="general")) == []
    tsv = tmp_path / "x.en-fr.tsv"
    tsv.write_text("a b c d\te f g h\n")
    with pytest.raises(UserError, match="--domain needs a corpus folder"):
        read_pairs(tsv, domain="general")


def test_eval_domain_general_on_a_software_corpus_is_a_user_error():
    res = CliRunner().invoke(main, ["eval", "xsr", "--data", "sample", "--domain", "general"])
    assert res.exit_code == 1 and "no general pairs" in res.output and "Traceback" not in res.output


def test_offline_cache_remembers_languages_without_a_ddtp_index(fake_cache):
    from edge_xsent.data.debian import AptCache

    with pytest.raises(UserError, match=r"lacks lists for \['pt_BR'\]"):
        AptCache(fake_cache, offline=True).update(["fr", "pt_BR"])
    (fake_cache / "updated-langs.txt").write_text("en fr pt_BR\n")  # what a real update writes
    AptCache(fake_cache, offline=True).update(["fr", "pt_BR"])  # DDTP has no pt_BR index: accepted


def test_wordfreq_reaches_hindi_croatian_and_not_traditional_chinese():
    """Real wordfreq lists: Hindi's vowel signs are part of a word (2,261 of 10,000 words were kept
    before), Croatian comes from the Serbo-Croatian list, and Traditional Chinese gets no
    Simplified words."""
    pytest.importorskip("wordfreq")
    from edge_xsent.data.mono import WORDS_PER_LANG, read_wordfreq

    errors = []
    got = {}
    for m in read_wordfreq(None, ["hi", "hr", "zh_TW"], on_error=errors.append):
        got.setdefault(m.lang, []).append(m.text)
    assert len(got["hi"]) == WORDS_PER_LANG and "में" in got["hi"]
    assert len(got["hr"]) == WORDS_PER_LANG and "je" in got["hr"]
    assert "zh_TW" not in got and any("zh_TW" in str(e) for e in errors)


def test_dictionary_text_in_scripts_with_combining_marks():
    from edge_xsent.data.dictionaries import FREEDICT_CODES, _TEXT

    assert _TEXT.match("हिंदी भाषा") and _TEXT.match("книга") and _TEXT.match("本")
    assert not _TEXT.match("3 books")
    assert {"ar", "ja", "tr", "sv", "cs", "hi"} <= set(FREEDICT_CODES)
