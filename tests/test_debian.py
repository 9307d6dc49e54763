import struct

import pytest

from edge_xsent.data.build import section_label
from edge_xsent.data.debian import (check_lang_codes, description_paragraphs, html_paragraphs, parse_deb822,
                                    read_mo)
from edge_xsent.errors import UserError

TRANSLATION = """Package: 0ad
Description-md5: d943033bedada21853d2ae54a2578a7b
Description-fr: jeu de stratégie en temps réel
 0 A.D est un jeu de stratégie en temps réel
 libre.
 .
 Ce paquet fournit :
  * le moteur ;
  * les données.

Package: zile
Description-md5: 0123
Description-fr: éditeur très petit
"""


def test_deb822_and_paragraphs():
    recs = list(parse_deb822(TRANSLATION))
    assert [r["Package"] for r in recs] == ["0ad", "zile"]
    paras = description_paragraphs(recs[0]["Description-fr"])
    assert paras == ["jeu de stratégie en temps réel", "0 A.D est un jeu de stratégie en temps réel libre.",
                     "Ce paquet fournit : le moteur ; les données."]


def test_html_paragraphs_skip_hidden_and_unescape():
    page = ('<h1 id="hd_id1" dir="auto">Advanced</h1>'
            '<p id="par_id2" class="paragraph">Choose <span hidden="true"><span class="emph">Mac - Prefs</span></span>'
            '<span class="emph">Tools - Options</span> &amp; more.</p>'
            '<p id="par_id2">duplicate id ignored</p><p class="x">no id</p>')
    assert html_paragraphs(page) == {"hd_id1": "Advanced", "par_id2": "Choose Tools - Options & more."}


def make_mo(entries):
    """A little-endian GNU .mo file with the given (msgid, msgstr) byte strings."""
    entries = sorted(entries)
    n = len(entries)
    ids = b"".join(k + b"\0" for k, _ in entries)
    strs = b"".join(v + b"\0" for _, v in entries)
    o_off, t_off = 28, 28 + 8 * n
    data_off = t_off + 8 * n
    otab, ttab, pos = b"", b"", data_off
    for k, _ in entries:
        otab += struct.pack("<2I", len(k), pos)
        pos += len(k) + 1
    for _, v in entries:
        ttab += struct.pack("<2I", len(v), pos)
        pos += len(v) + 1
    return struct.pack("<7I", 0x950412DE, 0, n, o_off, t_off, 0, 0) + otab + ttab + ids + strs


def test_read_mo(tmp_path):
    p = tmp_path / "x.mo"
    p.write_bytes(make_mo([(b"", b"Content-Type: text/plain; charset=UTF-8\n"),
                           (b"ctx\x04Open the file", "Ouvrir le fichier".encode()),
                           (b"one file\x00%d files", b"un fichier\x00%d fichiers")]))
    assert sorted(read_mo(p)) == [("Open the file", "Ouvrir le fichier"), ("one file", "un fichier")]


def test_lang_codes():
    assert check_lang_codes(["fr", "pt_BR", "zh-CN"]) == ["fr", "pt_BR", "zh-CN"]
    with pytest.raises(UserError, match="unknown language code"):
        check_lang_codes(["french"])
    with pytest.raises(UserError, match="English is always the pivot"):
        check_lang_codes(["en"])
    with pytest.raises(UserError, match="no languages"):
        check_lang_codes([])


def test_section_labels_merge_near_duplicates():
    assert section_label("libdevel") == section_label("libs") == "libs"
    assert section_label("contrib/x11") == "desktop"
    assert section_label("games") == "games"
