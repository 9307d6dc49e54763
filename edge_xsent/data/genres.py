"""Training genres beyond software and games: user help and encyclopedic text.

  freeorion   FreeOrion's string tables (freeorion-data): species, technologies, buildings,
              an in-game encyclopedia; entries aligned by key, paragraphs and sentences by order
  gnome-help  GNOME's desktop help for end users (gnome-user-docs): each translated Mallard
              page beside its English original, <p> and <title> elements aligned by order

Reserved genres (star lore, research reports) are in `reserved.py` and never read here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from . import formats
from .align import align_paragraphs, element_texts
from .debian import AptCache, RawPair
from .formats import ErrorSink, FormatError, report
from .games import locale_matches

# References to other entries and rich-text tags: [[tech ...]], <rgba ...>, <i>.
_FREEORION_MARKUP = re.compile(r"\[\[|\]\]|<[^>]+>|%\w+%")


def _freeorion_paragraphs(value: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", value) if p.strip()]


def read_freeorion(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    root = cache.package("freeorion-data")
    if root is None:
        return
    folder = root / "usr/share/games/freeorion/default/stringtables"
    try:
        english = formats.read_stringtable(folder / "en.txt")
    except FormatError as e:
        report(on_error, e)
        return
    for path in sorted(folder.glob("*.txt")):
        for lang in [l for l in langs if path.stem != "en" and locale_matches(path.stem, l)]:
            try:
                other = formats.read_stringtable(path)
            except FormatError as e:
                report(on_error, e)
                continue
            for key, en in english.items():
                xx = other.get(key)
                if not xx or _FREEORION_MARKUP.search(en) or _FREEORION_MARKUP.search(xx):
                    continue
                for a, b in align_paragraphs(_freeorion_paragraphs(en), _freeorion_paragraphs(xx)):
                    yield RawPair(lang, a, b, "freeorion", f"{path.name}:{key}")


_MALLARD_DROP = ("info", "code", "screen", "media", "comment")


def mallard_texts(path: Path) -> list[str]:
    """Titles and paragraphs of a Mallard page, in document order (metadata and code dropped)."""
    try:
        page = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: cannot read ({e})") from e
    return element_texts(page, ("p", "title"), drop=_MALLARD_DROP)


def read_gnome_help(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    root = cache.package("gnome-user-docs")
    if root is None:
        return
    help_root = root / "usr/share/help"
    for english in sorted(help_root.glob("C/*/*.page")):
        try:
            en_texts = mallard_texts(english)
        except FormatError as e:
            report(on_error, e)
            continue
        rel = english.relative_to(help_root / "C")
        for folder in sorted(p for p in help_root.iterdir() if p.is_dir() and p.name != "C"):
            page = folder / rel
            for lang in [l for l in langs if locale_matches(folder.name, l)]:
                if not page.exists():
                    continue
                try:
                    xx_texts = mallard_texts(page)
                except FormatError as e:
                    report(on_error, e)
                    continue
                for a, b in align_paragraphs(en_texts, xx_texts):
                    yield RawPair(lang, a, b, "gnome-help", f"{folder.name}/{rel}")
