"""Every corpus source, declared once: its domain, kind, licence, the Debian packages it needs
and its reader. `edge-xsent data build --sources` picks from `SOURCES`; the build fetches
the packages (with a progress bar), reports any that apt cannot supply, and reads the rest.

Bible and Quran text and the Universal Declaration of Human Rights are reserved for
independent evaluation: no source reads them (no sword-text-*, no UDHR package), and the
general-domain cleaning drops any line that quotes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from edge_xsent.data import debian, dictionaries, games, genres, mono
from edge_xsent.data.debian import _hyphen, _underscore
from edge_xsent.inputs import read_json

SOFTWARE, GENERAL = "software", "general"
DOMAINS = (SOFTWARE, GENERAL)


@dataclass(frozen=True)
class Source:
    name: str
    domain: str  # software | general
    kind: str  # parallel | mono | words (mono single words) | word-pairs (parallel words): no sentence filters
    licence: str
    packages: Callable[[list[str]], list[str]]  # langs -> Debian packages to fetch
    read: Callable  # (cache, langs, on_error) -> Iterator[RawPair | MonoText]
    default: bool = True  # read unless --sources names others; False where the download does not pay


def _fixed(*names: str) -> Callable[[list[str]], list[str]]:
    return lambda langs: list(names)


def _software(reader: Callable) -> Callable:
    return lambda cache, langs, on_error=None: reader(cache, langs)


def _game(name: str, licence: str, default: bool = True) -> Source:
    return Source(name, GENERAL, "parallel", licence, _fixed(*games.GETTEXT_GAMES[name]), games.read_gettext_game(name),
                  default)


_SOURCES = [
    Source("ddtp", SOFTWARE, "parallel", "Debian package descriptions and their DDTP translations: distributed with "
           "Debian's archive metadata under the terms of each package's licence (DFSG-free).", _fixed(),
           _software(debian.read_ddtp)),
    Source("lo-help", SOFTWARE, "parallel", "LibreOffice help (libreoffice-help-*): MPL-2.0.",
           lambda langs: ["libreoffice-help-en-us", *(f"libreoffice-help-{_hyphen(l).lower()}" for l in langs)],
           _software(debian.read_lo_help)),
    Source("gettext", SOFTWARE, "parallel", "gettext catalogues of Debian packages: each package's own licence "
           "(mostly GPL/LGPL, DFSG-free).", _fixed(*debian.GETTEXT_PACKAGES), debian.read_gettext),
    Source("lo-ui", SOFTWARE, "parallel", "LibreOffice UI strings (libreoffice-l10n-*): MPL-2.0.",
           lambda langs: [f"libreoffice-l10n-{_hyphen(l).lower()}" for l in langs], debian.read_lo_ui),
    _game("cataclysm", "Cataclysm: Dark Days Ahead (cataclysm-dda-data): CC-BY-SA-3.0."),
    _game("wesnoth", "Battle for Wesnoth 1.16 (wesnoth-1.16-data and the campaign packages): GPL-2+."),
    _game("freedroid", "FreedroidRPG (freedroidrpg-data): GPL-2+."),
    _game("widelands", "Widelands (widelands-data): GPL-2+."),
    _game("freeciv", "Freeciv (freeciv-data): GPL-2+."),
    _game("warzone", "Warzone 2100 (warzone2100-data): GPL-2+."),
    _game("freedink", "FreeDink data (freedink-data): GPL-3+ (translations: the package's copyright file)."),
    _game("kstars", "KStars (kstars-data): GPL-2+."),
    # 333 MB of download for ~3.6k German pairs: only when asked for (--sources ...,naev).
    _game("naev", "Naev (naev-data): GPL-3+ and CC-BY-SA (per the package's copyright file).", default=False),
    Source("gcompris", GENERAL, "parallel", "GCompris (gcompris-qt-data, Qt .qm files): GPL-3+.",
           _fixed("gcompris-qt-data"), games.read_gcompris),
    Source("freecol", GENERAL, "parallel", "FreeCol (freecol, Java .properties aligned by key): GPL-2+.",
           _fixed("freecol"), games.read_freecol),
    Source("ding", GENERAL, "parallel", "Ding German-English dictionary (trans-de-en), example sentences: GPL-2+.",
           lambda langs: ["trans-de-en"] if "de" in [_underscore(l) for l in langs] else [], games.read_ding),
    # More genres (help for end users, handbooks, an encyclopedia): read when named, e.g. --sources default,freeorion,gnome-help,
    # so the corpus every recorded figure used (corpus-g, the default sources) stays the same.
    Source("freeorion", GENERAL, "parallel", "FreeOrion string tables (freeorion-data): GPL-2 (text).",
           _fixed("freeorion-data"), genres.read_freeorion, default=False),
    Source("gnome-help", GENERAL, "parallel", "GNOME user help (gnome-user-docs): CC-BY-SA-3.0.",
           _fixed("gnome-user-docs"), genres.read_gnome_help, default=False),
    Source("gnome-app-help", GENERAL, "parallel", "Help of GNOME applications and games (GNOME_APP_HELP_PACKAGES): "
           "each package's licence (mostly CC-BY-SA-3.0 / GFDL, DFSG-free).",
           _fixed(*genres.GNOME_APP_HELP_PACKAGES), genres.read_gnome_app_help, default=False),
    Source("kde-help", GENERAL, "parallel", "KDE application and game handbooks (KDE_HELP_PACKAGES; entities from "
           "kdoctools5): GFDL-1.2+ (KDE documentation), per package.",
           _fixed("kdoctools5", *genres.KDE_HELP_PACKAGES), genres.read_kde_help, default=False),
    Source("fortunes", GENERAL, "mono", "fortune cookie files (fortunes, fortunes-de/-es/-it/-pl/-ru/-br): each "
           "package's licence (public domain / BSD / GPL, DFSG-free).",
           lambda langs: [p for p, l in mono.FORTUNE_PACKAGES.items() if l in {"en", *map(_underscore, langs)}],
           mono.read_fortunes),
    Source("wordnet", GENERAL, "mono", "WordNet 3.0 example phrases (dict-wn): the WordNet licence (BSD-style).",
           _fixed("dict-wn"), mono.read_wordnet),
    # Word-level distillation: each language's most frequent words, labelled by the teacher (the `words` extra).
    Source("wordfreq", GENERAL, "words", "wordfreq word lists (PyPI wordfreq): code Apache-2.0, data CC-BY-SA-4.0.",
           _fixed(), mono.read_wordfreq, default=False),
    # Bilingual dictionaries: everyday words and phrases as translation pairs, train split only (read last).
    Source("freedict", GENERAL, "word-pairs", "FreeDict dictionaries (dict-freedict-eng-<l>, dict-freedict-<l>-eng): "
           "each dictionary's licence (GPL-2+ / GPL-3+ / AGPL-3+, DFSG-free); the English ranks from wordfreq.",
           dictionaries.freedict_packages, dictionaries.read_freedict, default=False),
]
SOURCES: dict[str, Source] = {s.name: s for s in _SOURCES}


DEFAULT_SOURCES = [s.name for s in _SOURCES if s.default]


def select(names: Iterable[str] | None) -> list[Source]:
    """Sources by name, software first (their pairs claim a split before general text does),
    in declaration order. None means the default ones."""
    from edge_xsent.errors import UserError
    from edge_xsent.data.reserved import RESERVED_SOURCES

    names = DEFAULT_SOURCES if names is None else [n.strip() for n in names if n.strip()]
    names = [m for n in names for m in (DEFAULT_SOURCES if n == "default" else [n])]  # "default,freeorion"
    reserved = [n for n in names if n in RESERVED_SOURCES]
    if reserved:
        raise UserError(f"source(s) {reserved} are reserved for the out-of-genre benchmark and never train a model: "
                        "build it with `edge-xsent data reserved`")
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise UserError(f"unknown source(s) {unknown}; choose from {', '.join(SOURCES)}")
    return [s for s in _SOURCES if s.name in names]


def corpus_licences(folder: str | Path) -> dict[str, str] | None:
    """The licence text of every source a built corpus holds (its stats.json), or None when the
    training data was not a corpus folder (a TSV, Moses files): then nothing can be said."""
    stats = Path(folder).expanduser() / "stats.json"
    try:
        recorded = read_json(stats, what="stats.json")
        names = list(recorded.get("sources", {}))  # parallel sources; then the monolingual ones, per language
        names += [n for per_lang in recorded.get("mono", {}).values() for n in per_lang if n not in names]
    except (OSError, ValueError, AttributeError):
        return None
    return {n: SOURCES[n].licence for n in names if n in SOURCES} or None
