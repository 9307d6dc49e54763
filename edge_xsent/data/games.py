"""General-domain parallel text from Debian packages: games' translation catalogues and the
Ding German-English dictionary (narration, dialogue, in-game encyclopedias, item and creature
descriptions, everyday example sentences).

Each reader takes the apt cache and the requested languages and yields `RawPair`s. A file
that does not parse is reported through `on_error` (the build lists it) and skipped.
Locale folders are matched loosely: `es` takes es, es_ES and es_AR; `pt_BR` only pt_BR.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

from edge_xsent.data import formats
from edge_xsent.data.debian import AptCache, RawPair, _underscore, read_catalogues
from edge_xsent.data.formats import ErrorSink, FormatError, report, skip_bad_file

# Wesnoth's translations live in the data package and in one package per mainline campaign.
WESNOTH_CAMPAIGNS = ["did", "dm", "dw", "ei", "httt", "l", "low", "nr", "sof", "sota", "sotbe", "thot", "trow",
                     "tsg", "ttb", "utbs"]
GETTEXT_GAMES = {
    "cataclysm": ["cataclysm-dda-data"],
    "wesnoth": ["wesnoth-1.16-data", *(f"wesnoth-1.16-{c}" for c in WESNOTH_CAMPAIGNS)],
    "freedroid": ["freedroidrpg-data"],
    "widelands": ["widelands-data"],
    "freeciv": ["freeciv-data"],
    "warzone": ["warzone2100-data"],
    "freedink": ["freedink-data"],
    "kstars": ["kstars-data"],
    "naev": ["naev-data"],
}
# Catalogues of a game's editor and UI toolkit: software text, not the game's prose.
SKIP_CATALOGUES = {"wesnoth-lib", "wesnoth-editor", "widelands_editor", "widelands_console"}
# Wesnoth marks gender and other variants with a 'context^' prefix on the English side.
_CONTEXT_PREFIX = re.compile(r"^[\w ]{1,20}\^")
_LOCALE = re.compile(r"^([a-z]{2,3})(?:[_-]([A-Za-z]{2,4}))?$")


def locale_matches(code: str, lang: str) -> bool:
    """Does a locale folder or file code (`es_AR`, `it_IT`, `pt_BR`) hold language `lang`?"""
    m = _LOCALE.match(code)
    if m is None:  # ca@valencia, sr@latin, qqq-like codes
        return False
    want = _underscore(lang)
    if "_" in want:  # a regional language (pt_BR): that region only
        return _underscore(code) == want
    return m.group(1) == want


def catalogues(root: Path, lang: str) -> list[Path]:
    """The .mo files of one language in a package tree (…/XX/LC_MESSAGES/*.mo), or its .po
    files where the package ships no .mo for that language (freedink's l10n/XX.po)."""
    mos = sorted(p for p in root.rglob("*.mo") if p.parent.name == "LC_MESSAGES" and p.stem not in SKIP_CATALOGUES
                 and locale_matches(p.parent.parent.name, lang))
    if mos:
        return mos
    return sorted(p for p in root.rglob("*.po") if locale_matches(p.stem, lang))


def read_catalogue(path: Path) -> Iterator[tuple[str, str]]:
    return formats.read_mo(path) if path.suffix == ".mo" else formats.read_po(path)


def read_gettext_game(source: str) -> Callable[..., Iterator[RawPair]]:
    """A reader for one game's gettext catalogues (msgid is the English text)."""

    def read(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
        return read_catalogues(cache, langs, on_error, GETTEXT_GAMES[source], source, catalogues, read_catalogue,
                               lambda en: _CONTEXT_PREFIX.sub("", en))

    read.__doc__ = f"Pairs from the gettext catalogues of {', '.join(GETTEXT_GAMES[source])}."
    return read


def read_gcompris(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    """GCompris' Qt .qm files keep their English source text beside each translation."""
    root = cache.package("gcompris-qt-data")
    if root is None:
        return
    for path in sorted((root / "usr/share/gcompris-qt/translations").glob("gcompris_*.qm")):
        code = path.stem.removeprefix("gcompris_")
        for lang in langs:
            if locale_matches(code, lang):
                for en, xx in skip_bad_file(on_error, formats.read_qm(path)):
                    yield RawPair(lang, en, xx, "gcompris", path.name)


def read_freecol(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    """FreeCol's message bundles: FreeColMessages.properties (English) and one file per
    language, aligned by key."""
    root = cache.package("freecol")
    if root is None:
        return
    folder = root / "usr/share/games/freecol/strings"
    try:
        english = formats.read_properties(folder / "FreeColMessages.properties")
    except FormatError as e:
        report(on_error, e)
        return
    for path in sorted(folder.glob("FreeColMessages_*.properties")):
        code = path.stem.removeprefix("FreeColMessages_")
        for lang in [l for l in langs if locale_matches(code, l)]:
            try:
                other = formats.read_properties(path)
            except FormatError as e:
                report(on_error, e)
                continue
            for key, en in english.items():
                if other.get(key):
                    yield RawPair(lang, en, other[key], "freecol", f"{path.name}:{key}")


# Phrase templates rather than sentences: open slots (sb., jdn.), elisions, ';' alternatives.
DING_TEMPLATE = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw)\.|…|\.\.\.|;")


def read_ding(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    """Ding's German-English dictionary: its example sentences and idioms (the cleaning's
    four-word minimum leaves sentences, not headwords)."""
    if "de" not in [_underscore(l) for l in langs]:
        return
    root = cache.package("trans-de-en")
    if root is None:
        return
    lang = next(l for l in langs if _underscore(l) == "de")
    for de, en in skip_bad_file(on_error, formats.read_ding(root / "usr/share/trans/de-en")):
        if not DING_TEMPLATE.search(de + " " + en):
            yield RawPair(lang, en, de, "ding", "trans-de-en")
