"""The out-of-genre benchmark: reserved sources read from fixtures in their real formats, the
guarantee that a reserved sentence never reaches training data, the new training genres,
neighbour agreement, `eval oog` end to end, and the rule that picks a default on it."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edge_xsent.cli import main
from edge_xsent.data import formats, genres, reserved
from edge_xsent.data.align import align_paragraph, sentences
from edge_xsent.data.build import BuildConfig, build
from edge_xsent.data.corpus import SPLITS, read_corpus_split, read_mono
from edge_xsent.data.debian import AptCache
from edge_xsent.data.sources import select
from decisions import oog_default, oog_failed_constraints
from edge_xsent.eval.evaluate import out_of_genre_score
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import agreement_texts, neighbour_agreement, out_of_genre
from test_build import add_package, fake_cache  # noqa: F401  (fake_cache is a pytest fixture)
from test_debian import make_mo

# A reserved sentence that a training game's catalogue also carries: it must stay evaluation text only.
SHARED = "The bright star rises before the rains and tells the farmers to sow."
SHARED_FR = "L'étoile brillante se lève avant les pluies et dit aux paysans de semer."
SKY_EN = ("<h1>Anuta</h1><h2>Introduction</h2><p>Anuta is a tiny volcanic island. Its people are Polynesian "
          "sailors.</p><p>" + SHARED + "</p><p>Stars provide the most important tool for long range "
          "navigation<sup><a href='#1'>[1]</a></sup>.</p>")
SKY_FR = ("<h1>Anuta</h1><h2>Introduction</h2><p>Anuta est une petite île volcanique. Son peuple est fait de "
          "marins polynésiens.</p><p>" + SHARED_FR + "</p><p>Les étoiles sont l'outil le plus important de la "
          "navigation au long cours<sup>[1]</sup>.</p>")
REPORT_EN = ("Our scientists have finished the autopsy of the alien creature and its strange organs.\n\n"
             "The creature breathes through its skin. It has no lungs at all, which surprised the whole team.")
REPORT_FR = ("Nos scientifiques ont terminé l'autopsie de la créature extraterrestre et de ses organes étranges.\n\n"
             "La créature respire par la peau. Elle n'a aucun poumon, ce qui a surpris toute l'équipe.")


@pytest.fixture
def reserved_cache(fake_cache):  # noqa: F811
    sky = "usr/share/stellarium/skycultures/anutan"
    add_package(fake_cache, "stellarium-data", {f"{sky}/description.en.utf8": SKY_EN, f"{sky}/description.fr.utf8": SKY_FR,
                                                # a page whose paragraphs differ in number: not aligned
                                                f"{sky}/description.de.utf8": "<p>Nur ein Absatz.</p>"})
    add_package(fake_cache, "tuxpaint-stamps-default", {
        "usr/share/tuxpaint/stamps/vehicles/schoolbus.txt":
            "A yellow school bus for the children.\nde.utf8=Ein gelber Schulbus für die Kinder.\n"
            "fr.utf8=Un bus scolaire jaune pour les enfants.\nfr_CA.utf8=Un autobus scolaire jaune pour les enfants.\n"})
    add_package(fake_cache, "ufoai-misc", {"usr/share/games/ufoai/base/i18n/fr/LC_MESSAGES/ufoai.mo": make_mo([
        (REPORT_EN.encode(), REPORT_FR.encode()),
        (b"Show the server information window", "Afficher la fenêtre d'informations du serveur".encode())])})
    # a training game that carries one reserved sentence
    loc = "usr/share/games/wesnoth/1.16/locale"
    add_package(fake_cache, "wesnoth-1.16-data", {f"{loc}/fr/LC_MESSAGES/wesnoth.mo": make_mo([
        (SHARED.encode(), SHARED_FR.encode()),
        (b"The old bridge across the river has fallen into ruin.", "Le vieux pont sur la rivière est en ruine.".encode())])})
    add_package(fake_cache, "fortunes", {"usr/share/games/fortunes/wisdom": f"{SHARED}\n%\nA fool and his money are soon parted.\n"})
    docs = "usr/share/doc/debian-history/docs"
    add_package(fake_cache, "debian-history", {
        f"{docs}/detailed.en.html": "<h2>Releases</h2><p>Debian 0.91 was released in January 1994. It had a primitive "
                                    "package system.</p><p>Bruce Perens took over in 1996.</p>",
        f"{docs}/detailed.ja.html": "<h2>リリース</h2><p>Debian 0.91 は 1994 年 1 月にリリースされました。原始的なパッケージ"
                                    "システムを備えていました。</p><p>1996 年に Bruce Perens が引き継ぎました。</p>",
        f"{docs}/detailed.ko.html": "<p>데비안 0.91은 1994년 1월에 출시되었습니다. 원시적인 패키지 시스템이 있었습니다.</p>"
                                    "<p>1996년 Bruce Perens가 이어받았습니다.</p>"})
    return fake_cache


def test_sentences_and_paragraph_alignment():
    assert sentences("He left. She stayed! Did they? «Yes.» Then at 3 p.m. we ate.") == [
        "He left.", "She stayed!", "Did they?", "«Yes.»", "Then at 3 p.m. we ate."]
    assert align_paragraph("One. Two.", "Un. Deux.") == [("One.", "Un."), ("Two.", "Deux.")]
    assert align_paragraph("One and two.", "Un. Deux.") == [("One and two.", "Un. Deux.")]  # short: kept whole
    assert align_paragraph("word " * 70 + ".", "Un. Deux.") == []  # long and unaligned: dropped
    # scripts without capitals and without spaces between sentences
    assert sentences("第一句。「はい。」と言った！第三句？") == ["第一句。", "「はい。」と言った！", "第三句？"]
    assert sentences("출시되었습니다. 끝났습니다.") == ["출시되었습니다.", "끝났습니다."]


def test_reserved_readers_on_real_formats(reserved_cache):
    cache = AptCache(reserved_cache, offline=True)
    sky = list(reserved.read_stellarium(cache, ["fr", "de"]))
    assert [(p.lang, p.en, p.xx) for p in sky][:2] == [
        ("fr", "Anuta is a tiny volcanic island.", "Anuta est une petite île volcanique."),
        ("fr", "Its people are Polynesian sailors.", "Son peuple est fait de marins polynésiens.")]
    assert not any(p.lang == "de" for p in sky)  # paragraph counts differ
    assert any(p.en == "Stars provide the most important tool for long range navigation." for p in sky)  # footnote gone
    tux = list(reserved.read_tuxpaint(cache, ["fr", "de"]))
    assert {(p.lang, p.xx) for p in tux} >= {("de", "Ein gelber Schulbus für die Kinder."),
                                             ("fr", "Un bus scolaire jaune pour les enfants.")}
    ufo = list(reserved.read_ufoai(cache, ["fr"]))
    assert [p.en for p in ufo] == ["Our scientists have finished the autopsy of the alien creature and its strange organs.",
                                   "The creature breathes through its skin.",
                                   "It has no lungs at all, which surprised the whole team."]  # the UI string is not read
    history = [(p.lang, p.en, p.xx) for p in reserved.read_debian_history(cache, ["ja", "ko"])]
    assert ("ja", "It had a primitive package system.", "原始的なパッケージシステムを備えていました。") in history
    assert ("ko", "Debian 0.91 was released in January 1994.", "데비안 0.91은 1994년 1월에 출시되었습니다.") in history
    assert len(history) == 6  # two sentences and one paragraph, in each language


def test_a_reserved_source_is_never_a_training_source():
    with pytest.raises(UserError, match="reserved for the out-of-genre benchmark"):
        select(["default", "ufoai"])
    assert "freeorion" in [s.name for s in select(["default", "freeorion"])]
    assert not {s.name for s in select(None)} & set(reserved.RESERVED_SOURCES)


def test_build_drops_reserved_sentences_from_pairs_and_mono(reserved_cache, tmp_path):
    out = tmp_path / "corpus"
    stats = build(out, BuildConfig(langs=["fr"], sources=["wesnoth", "fortunes", "default"], valid_frac=0.0, test_frac=0.0,
                                   general_test_frac=0.0), reserved_cache, offline=True, progress=False)
    texts = {t for s in SPLITS for p in read_corpus_split(out / f"{s}.tsv") for t in (p.a, p.b)}
    assert "The old bridge across the river has fallen into ruin." in texts
    assert SHARED not in texts and SHARED_FR not in texts
    assert stats["build"]["reserved_for_evaluation"] == 1
    assert "wesnoth" in stats["build"]["config"]["sources"] and "default" not in stats["build"]["config"]["sources"]
    mono = {t for _, t, _ in read_mono(out / "mono.tsv")}
    assert "A fool and his money are soon parted." in mono and SHARED not in mono


@pytest.mark.parametrize("spelled", ["as is", "~/"])  # ~/: as a recipe's [ship.datasets] passes it, no shell between
def test_reserved_benchmark_excludes_training_text_and_refuses_training(spelled, reserved_cache, tmp_path, monkeypatch):
    from conftest import tiny_config
    from edge_xsent.train.batches import load_texts

    corpus = tmp_path / "corpus"
    (corpus).mkdir()
    header = "lang_a\tlang_b\ttext_a\ttext_b\tsource\tdomain\n"
    (corpus / "train.tsv").write_text(header + "en\tfr\tA yellow school bus for the children.\tUn bus.\tx\tgeneral\n")
    (corpus / "valid.tsv").write_text(header)
    runner = CliRunner()
    monkeypatch.setenv("HOME", str(tmp_path))
    res = runner.invoke(main, ["data", "reserved", "--langs", "fr,de", "--out", str(tmp_path / "oog"), "--exclude",
                               "~/corpus" if spelled == "~/" else str(corpus), "--cache", str(reserved_cache), "--offline"])
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "oog" / "stats.json").read_text())
    assert stats["dropped"]["in_training_corpus"] == 2  # the bus, in fr and in de
    pairs = list(read_corpus_split(tmp_path / "oog" / "test.tsv"))
    assert {p.source for p in pairs} == {"stellarium", "ufoai"} and all(p.domain == "reserved" for p in pairs)
    assert any(p.a == SHARED for p in pairs)  # the shared sentence is evaluation text
    with pytest.raises(UserError, match="reserved evaluation set"):
        load_texts(tiny_config(tmp_path / "run", data=str(tmp_path / "oog")), "test")
    res = runner.invoke(main, ["data", "reserved", "--out", str(tmp_path / "x"), "--exclude", str(tmp_path / "oog"),
                               "--cache", str(reserved_cache), "--offline"])
    assert res.exit_code == 1 and "not a corpus folder" in res.output


def test_new_genres_freeorion_and_gnome_help(fake_cache, tmp_path):  # noqa: F811
    tables = "usr/share/games/freeorion/default/stringtables"
    add_package(fake_cache, "freeorion-data", {
        f"{tables}/en.txt": "\ufeffEnglish\n# comment\n\nSP_HUMAN_DESC\n'''Humans are adaptable. They live on many worlds.\n\n"
                            "Their cities glow at night.'''\n\nOK\nOK\n\nTECH_X\nResearch [[tech TECH_Y]] first.\n",
        f"{tables}/fr.txt": "Français\n\nSP_HUMAN_DESC\n'''Les humains s'adaptent. Ils vivent sur de nombreux mondes.\n\n"
                            "Leurs villes brillent la nuit.'''\n\nTECH_X\nRecherchez [[tech TECH_Y]] d'abord.\n",
        f"{tables}/de.txt": "Deutsch\n\nSP_HUMAN_DESC\n'''Menschen sind anpassungsfähig.\n"})  # never closed
    page = ('<page><info><desc>Printing.</desc><credit><name>Someone</name></credit></info><title>Print a page</title>'
            '<p>Open the <gui>Print</gui> dialog. Choose a printer.</p><code>lpr file</code></page>')
    page_fr = ('<page><info><desc>Impression.</desc><mal:credit><mal:name>Traducteur</mal:name></mal:credit></info>'
               '<title>Imprimer une page</title><p>Ouvrez la boîte <gui>Imprimer</gui>. Choisissez une imprimante.</p></page>')
    add_package(fake_cache, "gnome-user-docs", {"usr/share/help/C/gnome-help/print.page": page,
                                                 "usr/share/help/fr/gnome-help/print.page": page_fr})
    cache = AptCache(fake_cache, offline=True)
    assert formats.read_stringtable(fake_cache / "x/freeorion-data" / tables / "fr.txt")["TECH_X"] == \
        "Recherchez [[tech TECH_Y]] d'abord."
    errors = []
    fo = [(p.lang, p.en, p.xx) for p in genres.read_freeorion(cache, ["fr", "de"], errors.append)]
    assert fo == [("fr", "Humans are adaptable.", "Les humains s'adaptent."),
                  ("fr", "They live on many worlds.", "Ils vivent sur de nombreux mondes."),
                  ("fr", "Their cities glow at night.", "Leurs villes brillent la nuit.")]  # [[links]] skipped
    assert len(errors) == 1 and "never closes" in str(errors[0])
    gh = [(p.en, p.xx) for p in genres.read_gnome_help(cache, ["fr"])]
    assert gh == [("Print a page", "Imprimer une page"), ("Open the Print dialog.", "Ouvrez la boîte Imprimer ."),
                  ("Choose a printer.", "Choisissez une imprimante.")]


def test_neighbour_agreement_and_score():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    texts = [str(i) for i in range(60)]
    assert neighbour_agreement(texts, x, x, k=5) == 1.0
    y = rng.normal(size=(60, 8)).astype(np.float32)
    assert neighbour_agreement(texts, x, y, k=5) < 0.3  # unrelated spaces agree about as often as chance (5/59)
    with pytest.raises(UserError, match="more than k=10"):
        neighbour_agreement(texts[:10], x[:10], x[:10], k=10)
    assert out_of_genre_score(0.9, 0.5) == pytest.approx(0.78)


def test_out_of_genre_pools_by_source_and_skips_tiny_cells():
    from edge_xsent.data.corpus import Pair

    pairs = [Pair("en", "fr", f"sentence {i}", f"phrase {i}", "big", "reserved") for i in range(120)]
    pairs += [Pair("en", "de", f"tiny {i}", f"klein {i}", "big", "reserved") for i in range(20)]

    def embed(texts):  # a perfect "encoder": the number in the text
        v = np.zeros((len(texts), 200), np.float32)
        v[np.arange(len(texts)), [int(t.split()[-1]) for t in texts]] = 1
        return v

    res = out_of_genre(pairs, embed, max_pairs=100, max_queries=50)
    assert res == {"big": {"en->fr": 1.0, "fr->en": 1.0}}  # en-de has fewer than 100 pairs: left out
    small = out_of_genre(pairs, embed, max_pairs=100, max_queries=50, min_pairs=10, below=100)
    assert small == {"big": {"en->de": 1.0, "de->en": 1.0}}  # only the small pool, which the usual run left out
    with pytest.raises(UserError, match="no source has 30 to 99 pairs"):
        out_of_genre(pairs, embed, min_pairs=30, below=100)
    texts = agreement_texts(pairs, per_lang=30)
    assert set(texts) == {"en", "fr", "de"} and len(texts["en"]) == 30 and len(texts["de"]) == 20


def test_eval_oog_end_to_end(reserved_cache, tmp_path, tiny_model):
    runner = CliRunner()
    assert runner.invoke(main, ["data", "reserved", "--langs", "fr", "--out", str(tmp_path / "oog"), "--cache",
                                str(reserved_cache), "--offline"]).exit_code == 0
    args = ["eval", "oog", "--data", str(tmp_path / "oog"), "--model", str(tiny_model), "--no-agreement"]
    res = runner.invoke(main, args)  # every source here has fewer than 100 pairs: a clear message, not an empty table
    assert res.exit_code == 1 and "no source has 100 pairs" in res.output
    res = runner.invoke(main, [*args, "--min-pairs", "2", "--json", "--md", str(tmp_path / "oog.md")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert set(out["retrieval"]) == {"stellarium", "ufoai"} and set(out["retrieval"]["ufoai"]) == {"en->fr", "fr->en"}
    cells = [v for d in out["retrieval"].values() for v in d.values()]
    assert all(0 <= v <= 1 for v in cells) and out["retrieval_mean"] == pytest.approx(np.mean(cells))
    assert out["score"] is None and "--min-pairs 2" in (tmp_path / "oog.md").read_text()
    res = runner.invoke(main, [*args, "--min-pairs", "50", "--below", "50"])
    assert res.exit_code == 1 and "--below 50 keeps no pool" in res.output and "Traceback" not in res.output
    res = runner.invoke(main, ["eval", "oog", "--data", str(tmp_path)])
    assert res.exit_code == 1 and "not a reserved benchmark folder" in res.output


def test_oog_rule_on_small_tables():
    ok = dict(software=96.0, general=88.0, int8_mb=9.0, speed_ratio=2.0)
    rows = {"shipped": {**ok, "score": 70.0}, "big": {**ok, "int8_mb": 15.0, "score": 74.0},
            "small": {**ok, "int8_mb": 9.0, "score": 73.6}, "fast-but-bad": {**ok, "general": 80.0, "score": 90.0}}
    assert oog_failed_constraints(rows["fast-but-bad"]) == ["general P@1 80.0 < 87.4"]
    assert oog_default(rows, "shipped") == "small"  # within 0.5 of the best: the smaller file
    rows["small"]["score"] = 73.0
    assert oog_default(rows, "shipped") == "big"
    assert oog_default({"x": {**ok, "speed_ratio": 1.2, "score": 99.0}}, "shipped") == "shipped"


