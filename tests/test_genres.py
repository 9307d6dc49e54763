"""Help genres read from fixtures in their real formats: KDE handbooks (DocBook with kdoctools'
entities, tags split across lines as KDE's translation tools write them) and GNOME application
help (Mallard), through their sources into a built corpus."""

from edge_xsent.data import docbook, genres
from edge_xsent.data.build import BuildConfig, build
from edge_xsent.data.corpus import read_corpus_split
from edge_xsent.data.debian import AptCache
from edge_xsent.data.sources import SOURCES, select
from test_build import add_package, fake_cache  # noqa: F401  (fake_cache is a pytest fixture)

TOOLS = "usr/share/kf5/kdoctools/customization"
GENERAL_ENTITIES = ('<!-- shared -->\n<!ENTITY kde "<acronym>KDE</acronym>">\n'
                    '<!ENTITY kpat "<application>KPatience</application>">\n')
DE_USER = '<!ENTITY Ctrl "<keycap>Strg</keycap>">\n<!ENTITY eg \'<abbrev>z.&nbsp;B.</abbrev>\'>\n'
HEAD = ('<?xml version="1.0" ?>\n<!DOCTYPE book PUBLIC "-//KDE//DTD DocBook XML V4.5-Based Variant V1.1//EN" '
        '"dtd/kdedbx45.dtd" [\n  <!ENTITY kappname "&kpat;">\n  <!ENTITY rules SYSTEM "rules.docbook">\n'
        '  <!ENTITY % addindex "IGNORE">\n  <!ENTITY % {lang} "INCLUDE">\n]>\n')
INDEX_EN = HEAD.format(lang="English") + """<book id="kpat" lang="&language;">
<bookinfo><title>The &kappname; Handbook</title><authorgroup><author>Someone</author></authorgroup>
<abstract><para>&kappname; is a card game.</para></abstract></bookinfo>
<chapter id="introduction"><title>Introduction</title>
<para
>&kappname; is a relaxing card game from &kde;. Press <keycombo action="simul">&Ctrl;<keycap
>N</keycap></keycombo> to deal a new game.</para>
<para>The rules are simple: <itemizedlist><listitem><para
>Move the cards to the foundations.</para></listitem></itemizedlist></para>
<screen>kpatience --start</screen>
<para>Ask &unknownperson; for help.</para>
</chapter>
<chapter id="credits"><title>Credits and License</title><para>Program copyright the authors.</para>&underFDL;
</chapter>
</book>
"""
INDEX_DE = HEAD.format(lang="German") + """<book id="kpat" lang="&language;">
<bookinfo><title>Das Handbuch zu &kappname;</title><othercredit role="translator"><firstname>Jemand</firstname>
</othercredit></bookinfo>
<chapter id="introduction"><title>Einleitung</title>
<para
>&kappname; ist ein entspannendes Kartenspiel von &kde;. Mit <keycombo action="simul">&Ctrl;<keycap
>N</keycap></keycombo> beginnt ein neues Spiel.</para>
<para>Die Regeln sind einfach: <itemizedlist><listitem><para
>Legen Sie die Karten auf die Ablagestapel.</para></listitem></itemizedlist></para>
<screen>kpatience --start</screen>
<para>Fragen Sie &unknownperson; um Hilfe.</para>
</chapter>
<chapter id="credits"><title>Danksagungen und Lizenz</title><para>Programm Copyright die Autoren.</para>
<para>Übersetzung: Jemand</para>&underFDL;
</chapter>
</book>
"""


def add_kde(cache) -> None:
    add_package(cache, "kdoctools5", {f"{TOOLS}/entities/general.entities": GENERAL_ENTITIES,
                                      f"{TOOLS}/de/user.entities": DE_USER,
                                      f"{TOOLS}/en/user.entities": '<!ENTITY Ctrl "<keycap>Ctrl</keycap>">\n'})
    add_package(cache, "kpat", {"usr/share/doc/HTML/en/kpat/index.docbook": INDEX_EN,
                                "usr/share/doc/HTML/de/kpat/index.docbook": INDEX_DE,
                                "usr/share/doc/HTML/en/kpat/rules.docbook": "<chapter><para>Only in English.</para></chapter>"})


def test_docbook_entities_nesting_and_dropped_parts(tmp_path):
    tables = docbook.entity_declarations(GENERAL_ENTITIES)
    assert tables["kde"] == "<acronym>KDE</acronym>"
    assert docbook.entity_declarations(DE_USER)["eg"] == "<abbrev>z.&nbsp;B.</abbrev>"
    assert docbook.expand_entities("&kappname; &amp; &x;", {"kappname": "&kpat;", "kpat": "KPatience"}) == \
        "KPatience &amp; &x;"  # values expanded in turn; XML's own and unknown names kept
    (tmp_path / "index.docbook").write_text(INDEX_EN)
    own = docbook.own_entities(tmp_path / "index.docbook")
    assert own == {"kappname": "&kpat;"}  # SYSTEM includes and parameter entities are not text
    texts = docbook.block_texts(INDEX_EN, {**tables, **own, "Ctrl": "<keycap>Ctrl</keycap>"})
    assert texts == ["Introduction", "KPatience is a relaxing card game from KDE. Press Ctrl+N to deal a new game.",
                     "Move the cards to the foundations.", "The rules are simple:", ""]
    # bookinfo (title, authors, abstract), the <screen> and the credits chapter are gone; the
    # paragraph with an unknown entity stays as an empty place so both languages keep their order.


def test_kde_help_pairs_paragraphs_in_order(fake_cache):  # noqa: F811
    add_kde(fake_cache)
    cache = AptCache(fake_cache, offline=True)
    pairs = [(p.lang, p.en, p.xx, p.source) for p in genres.read_kde_help(cache, ["de", "fr"])]
    assert pairs == [
        ("de", "Introduction", "Einleitung", "kde-help"),
        ("de", "KPatience is a relaxing card game from KDE.", "KPatience ist ein entspannendes Kartenspiel von KDE.",
         "kde-help"),
        ("de", "Press Ctrl+N to deal a new game.", "Mit Strg+N beginnt ein neues Spiel.", "kde-help"),
        ("de", "Move the cards to the foundations.", "Legen Sie die Karten auf die Ablagestapel.", "kde-help"),
        ("de", "The rules are simple:", "Die Regeln sind einfach:", "kde-help")]  # German &Ctrl; is Strg


def test_kde_help_without_kdoctools_reads_nothing(fake_cache):  # noqa: F811
    add_package(fake_cache, "kpat", {"usr/share/doc/HTML/en/kpat/index.docbook": INDEX_EN,
                                     "usr/share/doc/HTML/de/kpat/index.docbook": INDEX_DE})
    cache = AptCache(fake_cache, offline=True)
    assert list(genres.read_kde_help(cache, ["de"])) == []
    assert "kdoctools5" in cache.missing  # the build names what apt could not supply


def test_gnome_app_help_reads_every_package(fake_cache):  # noqa: F811
    page = ('<page xmlns="http://projectmallard.org/1.0/" id="rules"><info><credit type="author"><name>A</name>'
            '</credit></info><title>Rules of Klondike</title><p>Build four piles of cards. Start with the aces.</p></page>')
    page_fr = ('<page xmlns="http://projectmallard.org/1.0/" id="rules"><info><mal:credit><mal:name>T</mal:name>'
               '</mal:credit></info><title>Règles du Klondike</title><p>Formez quatre piles de cartes. '
               'Commencez par les as.</p></page>')
    add_package(fake_cache, "gnome-mines", {"usr/share/help/C/gnome-mines/rules.page": page,
                                            "usr/share/help/fr/gnome-mines/rules.page": page_fr})
    cache = AptCache(fake_cache, offline=True)
    pairs = [(p.en, p.xx, p.source) for p in genres.read_gnome_app_help(cache, ["fr"])]
    assert pairs == [("Rules of Klondike", "Règles du Klondike", "gnome-app-help"),
                     ("Build four piles of cards.", "Formez quatre piles de cartes.", "gnome-app-help"),
                     ("Start with the aces.", "Commencez par les as.", "gnome-app-help")]
    assert "gnome-mines" in genres.GNOME_APP_HELP_PACKAGES and "evince-common" in cache.missing


def test_kde_help_source_builds_into_a_corpus(fake_cache, tmp_path):  # noqa: F811
    add_kde(fake_cache)
    assert SOURCES["kde-help"].packages(["de"])[0] == "kdoctools5" and not SOURCES["kde-help"].default
    assert [s.name for s in select(["kde-help", "gnome-app-help"])] == ["gnome-app-help", "kde-help"]
    out = tmp_path / "corpus"
    build(out, BuildConfig(langs=["de"], sources=["kde-help"], valid_frac=0.0, test_frac=0.0, general_test_frac=0.0),
          fake_cache, offline=True, progress=False)
    train = list(read_corpus_split(out / "train.tsv"))
    assert {p.source for p in train} == {"kde-help"} and {p.domain for p in train} == {"general"}
    assert ("Move the cards to the foundations.", "Legen Sie die Karten auf die Ablagestapel.") in \
        {(p.a, p.b) for p in train}
