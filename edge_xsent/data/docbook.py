"""DocBook as KDE's handbooks write it: the text of each paragraph and title, in document order,
with the named entities (&kde;, &Ctrl;, &kappname;) spelled out.

Entities come from kdoctools' shared files (the package kdoctools5: `entities/*.entities` for
every language, `<lang>/user.entities` for words a translation spells its own way) and from
the DOCTYPE of the handbook's own `index.docbook`. A paragraph that still holds an unknown
entity after expansion is dropped rather than kept with a hole in it.
"""

from __future__ import annotations

import functools
import re
from html.parser import HTMLParser
from pathlib import Path

from edge_xsent.data.formats import FormatError

KDOCTOOLS = "usr/share/kf5/kdoctools/customization"
BLOCKS = ("para", "simpara", "title", "term")  # elements whose text is one aligned unit
# Never prose, or not translated alike: metadata, credits, code, images, index terms.
_DROP = ("bookinfo", "articleinfo", "info", "authorgroup", "author", "othercredit", "legalnotice", "releaseinfo",
         "date", "keywordset", "abstract", "screen", "programlisting", "synopsis", "cmdsynopsis", "literallayout",
         "screenshot", "mediaobject", "inlinemediaobject", "indexterm", "email", "remark", "footnote")
_ENTITY_DECL = re.compile(r"""<!ENTITY\s+([\w.-]+)\s+(?:"([^"]*)"|'([^']*)')\s*>""")  # text entities, not % or SYSTEM
_ENTITY_REF = re.compile(r"&([A-Za-z][\w.-]*);")
_XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}
_DOCTYPE = re.compile(r"<!DOCTYPE[^\[>]*(?:\[.*?\]\s*)?>", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# Translators' credits (names, e-mail, the licence notice) differ in length between languages.
_CREDITS = re.compile(r'<(chapter|appendix|sect1|section)\b[^>]*\bid\s*=\s*"credits[^"]*"[^>]*>.*?</\1\s*>', re.S)


def entity_declarations(text: str) -> dict[str, str]:
    """The text entities a DTD file or a DOCTYPE declares (comments ignored)."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _ENTITY_DECL.finditer(_COMMENT.sub("", text))}


@functools.lru_cache(maxsize=16)
def kdoctools_entities(root: Path, lang: str) -> dict[str, str]:
    """kdoctools' entities for one language folder name (`de`, `pt_BR`); the shared files win
    over the language's own on a clash, as kdoctools' notes say."""
    base = Path(root) / KDOCTOOLS
    table: dict[str, str] = {}
    own = base / lang.replace("_", "-") / "user.entities"
    for path in [own, *sorted((base / "entities").glob("*.entities"))]:
        if path.exists():
            table.update(entity_declarations(path.read_text(encoding="utf-8", errors="replace")))
    return table


@functools.lru_cache(maxsize=64)
def own_entities(index: Path) -> dict[str, str]:
    """The text entities a handbook's index.docbook declares in its DOCTYPE (&kappname;, ...);
    the handbook's other files use them too. Empty where there is no such file."""
    try:
        doctype = _DOCTYPE.search(index.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    return entity_declarations(doctype.group(0)) if doctype else {}


def expand_entities(text: str, table: dict[str, str], depth: int = 5) -> str:
    """Replace every `&name;` the table knows, entities inside values too (up to `depth` levels);
    XML's own five and unknown names stay as they are."""
    for _ in range(depth):
        new = _ENTITY_REF.sub(lambda m: table.get(m.group(1), m.group(0)) if m.group(1) not in _XML_ENTITIES
                              else m.group(0), text)
        if new == text:
            break
        text = new
    return text


class _BlockTexts(HTMLParser):
    """Collects the text of each BLOCKS element; a nested block (a list's paragraph inside a
    paragraph) is its own unit, emitted when it closes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[list[str]] = []
        self.out: list[str] = []
        self.keys = -1  # keys seen in the open <keycombo>, -1 outside one

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in BLOCKS:
            self.stack.append([])
        elif tag == "keycombo":
            self.keys = 0
        elif tag in ("keycap", "keysym") and self.keys >= 0:
            if self.keys:
                self.handle_data("+")  # <keycombo>&Ctrl;<keycap>N</keycap></keycombo> reads "Ctrl+N"
            self.keys += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "keycombo":
            self.keys = -1
        if tag in BLOCKS and self.stack:
            text = " ".join("".join(self.stack.pop()).split())
            if text:
                self.out.append(text)

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.stack[-1].append(data)


def block_texts(page: str, entities: dict[str, str]) -> list[str]:
    """Paragraph and title texts of a DocBook file, in order. A text that keeps an unknown
    entity comes out empty-handed: it is replaced by "" so that both languages keep the same
    number of units and the alignment by order stays right."""
    page = _DOCTYPE.sub(" ", _COMMENT.sub(" ", page))
    page = _CREDITS.sub(" ", expand_entities(page, entities))
    for tag in _DROP:
        page = re.sub(rf"<{tag}\b[^>]*/>|<{tag}\b.*?</{tag}\s*>", " ", page, flags=re.S)
    parser = _BlockTexts()
    parser.feed(page)
    parser.close()
    return ["" if _ENTITY_REF.search(t) else t for t in parser.out]


def read_docbook(path: Path, entities: dict[str, str]) -> list[str]:
    try:
        page = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: cannot read ({e})") from e
    return block_texts(page, entities)


def read_handbook(path: Path, kdoctools: Path, lang: str) -> list[str]:
    """One file of a KDE handbook in language folder `lang`, with kdoctools' entities (the
    extracted kdoctools5 package at `kdoctools`) and those of the handbook's index.docbook."""
    return read_docbook(path, {**kdoctools_entities(kdoctools, lang), **own_entities(path.parent / "index.docbook")})
