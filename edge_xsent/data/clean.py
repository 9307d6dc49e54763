"""Cleaning filters for translation pairs, each a small named rule that can be tested alone.

`clean_pair` normalises both sides, strips accelerator marks, then applies the filters in
order and names the first one that drops the pair, so the build can report how many
pairs each filter removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ..text import normalize

# printf (%s, %1$d, %-10s, %(name)s, %%), brace formats ({0}, {name}, ${x}) and shell-style $1.
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t|I64)?[diouxXeEfFgGaAcspn]"
    r"|%\([A-Za-z_]\w*\)[sdrf]|\$\{?\w+\}?|\{[\w.]*\}|%[A-Z_]{2,}%"
)
MARKUP = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|&[a-z]+;|&#\d+;|\\[nt]")
# Accelerator marks: _File (GTK), &File (Qt/Windows), ~File (LibreOffice).
ACCELERATOR = re.compile(r"(?<![\w&~_])[_&~](?=\w)")
LETTER = re.compile(r"[^\W\d_]")

LANGUAGE_NAMES = {
    "afrikaans", "albanian", "amharic", "arabic", "armenian", "asturian", "azerbaijani", "basque", "belarusian",
    "bengali", "bosnian", "breton", "bulgarian", "burmese", "catalan", "chinese", "croatian", "czech", "danish",
    "dutch", "english", "esperanto", "estonian", "faroese", "finnish", "french", "galician", "georgian", "german",
    "greek", "gujarati", "hebrew", "hindi", "hungarian", "icelandic", "indonesian", "irish", "italian", "japanese",
    "kannada", "kazakh", "khmer", "korean", "kurdish", "lao", "latin", "latvian", "lithuanian", "macedonian",
    "malay", "malayalam", "maltese", "marathi", "mongolian", "nepali", "norwegian", "occitan", "persian",
    "polish", "portuguese", "punjabi", "romanian", "russian", "serbian", "sinhala", "slovak", "slovenian",
    "spanish", "swahili", "swedish", "tagalog", "tamil", "telugu", "thai", "tibetan", "turkish", "ukrainian",
    "urdu", "uzbek", "vietnamese", "welsh", "xhosa", "yiddish", "zulu",
}


@dataclass
class CleanConfig:
    min_words: int = 4  # English side; shorter UI labels carry little sentence meaning
    max_words: int = 120
    max_chars: int = 1000
    max_len_ratio: float = 3.0  # characters, longer / shorter side: misaligned pairs


def is_identical(en: str, xx: str) -> bool:
    return en.casefold() == xx.casefold()


def has_placeholder(en: str, xx: str) -> bool:
    return bool(PLACEHOLDER.search(en) or PLACEHOLDER.search(xx))


def has_markup(en: str, xx: str) -> bool:
    return bool(MARKUP.search(en) or MARKUP.search(xx))


def is_language_list(en: str, xx: str) -> bool:
    """Lists like 'Arabic, Czech, Danish, German, ...' that DDTP and iso-codes carry."""
    items = [w.strip(" .;:()").casefold() for w in re.split(r"[,;/]| and ", en)]
    items = [w for w in items if w]
    hits = sum(1 for w in items if w in LANGUAGE_NAMES or w.split(" ")[0] in LANGUAGE_NAMES)
    return len(items) >= 3 and hits >= max(3, len(items) // 2)


def mostly_non_letters(en: str, xx: str) -> bool:
    return any(len(LETTER.findall(s)) < 0.5 * len(s.replace(" ", "")) for s in (en, xx))


def strip_accelerators(text: str) -> str:
    return ACCELERATOR.sub("", text)


def length_rule(cfg: CleanConfig) -> list[tuple[str, Callable[[str, str], bool]]]:
    def too_short(en: str, xx: str) -> bool:
        return len(en.split()) < cfg.min_words or not xx

    def too_long(en: str, xx: str) -> bool:
        return max(len(en.split()), len(xx.split())) > cfg.max_words or max(len(en), len(xx)) > cfg.max_chars

    def bad_ratio(en: str, xx: str) -> bool:
        a, b = sorted((len(en), len(xx)))
        return b > cfg.max_len_ratio * max(a, 1)

    return [("too_short", too_short), ("too_long", too_long), ("length_ratio", bad_ratio)]


def filters(cfg: CleanConfig) -> list[tuple[str, Callable[[str, str], bool]]]:
    """The filters in the order they are tried; the first that matches names the drop."""
    return [
        *length_rule(cfg)[:1],
        ("identical", is_identical),
        ("placeholder", has_placeholder),
        ("markup", has_markup),
        ("language_list", is_language_list),
        ("non_letters", mostly_non_letters),
        *length_rule(cfg)[1:],
    ]


@dataclass
class Cleaner:
    """Applies the filters and keeps the per-filter counts for the build report."""

    cfg: CleanConfig = field(default_factory=CleanConfig)
    dropped: dict[str, int] = field(default_factory=dict)
    accelerators_stripped: int = 0

    def __post_init__(self) -> None:
        self._filters = filters(self.cfg)
        self.dropped = {name: 0 for name, _ in self._filters}

    def __call__(self, en: str, xx: str) -> tuple[str, str] | None:
        en, xx = normalize(en), normalize(xx)
        en2, xx2 = strip_accelerators(en), strip_accelerators(xx)
        if (en2, xx2) != (en, xx):
            self.accelerators_stripped += 1
            en, xx = en2, xx2
        for name, rule in self._filters:
            if rule(en, xx):
                self.dropped[name] += 1
                return None
        return en, xx
