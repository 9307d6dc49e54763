import pytest
from hypothesis import given, strategies as st

from edge_xsent.data.clean import (Cleaner, has_markup, has_placeholder, is_identical, is_language_list,
                                   mostly_non_letters, strip_accelerators)
from edge_xsent.text import normalize


def test_normalize_nfkc_and_whitespace():
    assert normalize("  Ｆｕｌｌ\u00a0width\t\ttext\n") == "Full width text"
    assert normalize("ﬁle") == "file"  # NFKC ligature
    assert normalize("a\x00b\x1bc") == "abc"  # control characters dropped


@given(st.text())
def test_a_byte_order_mark_is_not_text(s):
    assert normalize("\ufeff" + s) == normalize(s) == normalize(s.replace("\ufeff", ""))


def test_bom_prefixed_and_plain_strings_give_identical_vectors(tmp_path):
    """Wherever text enters: the API, a file, standard input (the shipped default, int8 ONNX)."""
    import numpy as np
    from click.testing import CliRunner

    from edge_xsent import Encoder
    from edge_xsent.cli import main

    plain = ["Save the current document", "Das aktuelle Dokument speichern", "中文 字符"]
    enc = Encoder.load()
    ref = enc.encode(plain)
    assert np.array_equal(enc.encode(["\ufeff" + t for t in plain]), ref)
    assert np.array_equal(enc.encode([t.replace(" ", " \ufeff", 1) for t in plain]), ref)
    src = tmp_path / "bom.txt"
    src.write_text("\ufeff" + "\n".join(plain) + "\n", encoding="utf-8")
    for how in ({"args": [str(src)]}, {"args": ["-"], "input": src.read_bytes()}):
        out = tmp_path / "v.npy"
        res = CliRunner().invoke(main, ["encode", "--input", *how["args"], "--out", str(out)], input=how.get("input"))
        assert res.exit_code == 0, res.output[-2000:]
        assert np.allclose(np.load(out), ref, atol=1e-6)


@given(st.text())
def test_normalize_idempotent(s):
    assert normalize(normalize(s)) == normalize(s)


@pytest.mark.parametrize("text", ["Cannot open %s", "%1$d files", "value %(name)s", "Hello {0}", "Use ${HOME} here",
                                  "copied {count} items", "%-10s wide"])
def test_placeholders_detected(text):
    assert has_placeholder(text, "x")
    assert has_placeholder("x", text)


@pytest.mark.parametrize("text", ["100% sure about it", "Use curly braces here", "Price is 5 dollars"])
def test_plain_text_is_not_placeholder(text):
    assert not has_placeholder(text, "x")


def test_markup_detected():
    assert has_markup("Click <b>OK</b> now", "x")
    assert has_markup("Tom &amp; Jerry", "x")
    assert not has_markup("if a < b and b > c", "x")


def test_accelerators_stripped():
    assert strip_accelerators("_Open File") == "Open File"
    assert strip_accelerators("~Save As...") == "Save As..."
    assert strip_accelerators("&Quit now") == "Quit now"
    assert strip_accelerators("my_variable and AT&T") == "my_variable and AT&T"


def test_language_list():
    assert is_language_list("Arabic, Czech, Danish, German, Greek and Spanish", "x")
    assert not is_language_list("This package provides German spelling, grammar and more", "x")


def test_identical_and_non_letters():
    assert is_identical("Open the file now", "open the FILE now")
    assert mostly_non_letters("1234 5678 9012 ++--", "x")
    assert not mostly_non_letters("A normal sentence here", "Une phrase normale")


def test_cleaner_counts_each_filter():
    c = Cleaner()
    pairs = [
        ("Open the selected file in a new window", "Ouvrir le fichier sélectionné dans une nouvelle fenêtre"),
        ("Too short", "Trop court"),
        ("This text is the same on both sides", "This text is the same on both sides"),
        ("Cannot open file %s for reading now", "Impossible d'ouvrir le fichier %s"),
        ("Click <b>OK</b> to close the dialog", "Cliquez sur <b>OK</b> pour fermer"),
        ("_Save the current document to disk", "_Enregistrer le document actuel"),
    ]
    kept = [c(en, xx) for en, xx in pairs]
    assert kept[0] is not None and kept[5] == ("Save the current document to disk", "Enregistrer le document actuel")
    assert kept[1:5] == [None] * 4
    assert c.dropped["too_short"] == 1 and c.dropped["identical"] == 1
    assert c.dropped["placeholder"] == 1 and c.dropped["markup"] == 1
    assert c.accelerators_stripped == 1


def test_cleaner_length_ratio_and_too_long():
    c = Cleaner()
    assert c("A reasonably long English sentence that has many words in it", "Oui") is None
    assert c.dropped["length_ratio"] == 1
    assert c(" ".join(["word"] * 200), " ".join(["mot"] * 200)) is None
    assert c.dropped["too_long"] == 1


# Real translations as Debian's catalogues carry them (GNOME and coreutils style strings).
ZH = ("Could not open the file because it does not exist.", "无法打开文件，因为它不存在。")
JA = ("Could not open the file because it does not exist.", "ファイルが存在しないため開けませんでした。")
AR = ("Could not open the file because it does not exist.", "تعذر فتح الملف لأنه غير موجود.")
TH = ("Could not open the file because it does not exist.", "ไม่สามารถเปิดไฟล์ได้เนื่องจากไม่มีไฟล์อยู่")


def test_a_good_chinese_or_japanese_translation_passes_the_centred_length_rule():
    """English has ~3 characters per Chinese one: the old symmetric 3:1 rule dropped this pair."""
    from edge_xsent.data.clean import char_ratio

    for (en, xx), lang in ((ZH, "zh_CN"), (ZH, "zh_TW"), (JA, "ja"), (AR, "ar"), (TH, "th")):
        c = Cleaner()
        assert c(en, xx, lang) is not None, (lang, c.dropped)
    assert Cleaner()(*ZH) is None  # without the language: the old rule, which drops it
    assert char_ratio("zh_CN") == 0.33 and char_ratio("fr") == 1.0
    c = Cleaner()  # a misaligned Chinese pair (a fragment for a sentence) is still dropped
    assert c("Could not open the file because it does not exist on this disk.", "文件", "zh_CN") is None
    assert c.dropped["length_ratio"] == 1


def test_word_counts_of_scripts_without_spaces():
    from edge_xsent.data.clean import word_count

    assert word_count("Open the file now") == 4
    assert word_count(ZH[1]) == 6  # 12 Han characters at 2 a word; "，" and "。" are no words
    assert word_count(TH[1]) == 9  # 42 Thai characters (vowel and tone marks included) at 5 a word
    assert word_count(JA[1]) == 10 and word_count(AR[1]) == 6  # Arabic has spaces: counted as before
    assert word_count("GNOME 桌面环境") == 1 + 2  # a Latin word, then 4 Han characters


def test_monolingual_chinese_and_thai_text_is_kept_by_character_count():
    """The monolingual filter needed 4 space-separated words: most Chinese and Thai fortunes were lost."""
    from edge_xsent.data.build import mono_ok
    from edge_xsent.data.clean import CleanConfig

    cfg = CleanConfig()
    assert mono_ok("不要在一棵树上吊死。", cfg) and mono_ok(TH[1], cfg)
    assert not mono_ok("你好", cfg)  # two characters: one word, too short as before
