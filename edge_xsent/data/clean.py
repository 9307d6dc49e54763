"""Cleaning filters for translation pairs, each a small named rule that can be tested alone.

`clean_pair` normalises both sides, strips accelerator marks, then applies the filters in
order and names the first one that drops the pair, so the build can report how many
pairs each filter removed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from edge_xsent.text import normalize

# printf (%s, %1$d, %-10s, %(name)s, %%), brace formats ({0}, {name}, ${x}) and shell-style $1.
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t|I64)?[diouxXeEfFgGaAcspn]"
    r"|%\([A-Za-z_]\w*\)[sdrf]|\$\{?\w+\}?|\{[\w.]*\}|%[A-Z_]{2,}%"
)
MARKUP = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|&[a-z]+;|&#\d+;|\\[nt]")
# Accelerator marks: _File (GTK), &File (Qt/Windows), ~File (LibreOffice).
ACCELERATOR = re.compile(r"(?<![\w&~_])[_&~](?=\w)")
LETTER = re.compile(r"[^\W\d_]")


def _combining_marks() -> str:
    r"""A character class body of Unicode's combining marks (Mn, Mc, Me): the vowel signs of Hindi
    and Bengali, Thai's vowels and tones, Arabic's harakat. Python's `\w` leaves them out, so a
    pattern of letters alone rejects most Hindi words ("हिंदी")."""
    import unicodedata

    marks = [c for c in range(0x300, 0x1F000) if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")]
    runs, start = [], marks[0]
    for a, b in zip(marks, marks[1:] + [None]):
        if b != a + 1:
            runs.append(f"\\U{start:08x}-\\U{a:08x}" if a > start else f"\\U{a:08x}")  # 8 hex digits: marks past the BMP too
            start = b
    return "".join(runs)


# A letter followed by letters or combining marks: one word in any script.
WORD_CHARS = rf"[^\W\d_](?:[^\W\d_]|[{_combining_marks()}])*"

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


# Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar): their length in
# words is estimated from characters, so a Chinese sentence is not "one word" to the length filters.
NO_SPACE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|([\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff])")
CHARS_PER_WORD = {"cjk": 2.0, "southeast_asian": 5.0}  # Chinese ~1.5-2 characters a word, Thai ~5
# The other side's characters per English character, median over real pairs (Debian's gettext catalogues,
# up to 300 per language, English of 4+ words, 2026-11-25): zh_CN 0.33, zh_TW 0.33, ja 0.56, ko 0.54;
# every other language measured sits at 0.85-1.26 (ar 0.85, th 0.96, el 1.25, fr 1.26) and keeps 1.0.
# The length-ratio rule is centred on it: a good Chinese translation is a third of its English length.
CHAR_RATIO = {"zh": 0.33, "ja": 0.56, "ko": 0.54}


def word_count(text: str) -> int:
    """Words of `text`: space-separated words, plus characters of spaceless scripts over their
    characters per word (rounded up)."""
    cjk = thai = 0
    for m in NO_SPACE_SCRIPT.finditer(text):
        if m.group(1):
            thai += 1
        else:
            cjk += 1
    if not cjk and not thai:
        return len(text.split())
    rest = [w for w in NO_SPACE_SCRIPT.sub(" ", text).split() if any(ch.isalnum() for ch in w)]  # not "，" or "。"
    return len(rest) + math.ceil(cjk / CHARS_PER_WORD["cjk"] + thai / CHARS_PER_WORD["southeast_asian"])


def char_ratio(lang: str | None) -> float:
    return CHAR_RATIO.get((lang or "").split("_")[0], 1.0)


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


def length_rule(cfg: CleanConfig, lang: str | None = None) -> list[tuple[str, Callable[[str, str], bool]]]:
    """Length filters; the character ratio is centred on `lang`'s own (`CHAR_RATIO`)."""
    expected = char_ratio(lang)

    def too_short(en: str, xx: str) -> bool:
        return len(en.split()) < cfg.min_words or not xx

    def too_long(en: str, xx: str) -> bool:
        return max(word_count(en), word_count(xx)) > cfg.max_words or max(len(en), len(xx)) > cfg.max_chars

    def bad_ratio(en: str, xx: str) -> bool:
        r = len(xx) / max(expected * len(en), 1e-9)
        return max(r, 1 / max(r, 1e-9)) > cfg.max_len_ratio

    return [("too_short", too_short), ("too_long", too_long), ("length_ratio", bad_ratio)]


def filters(cfg: CleanConfig, lang: str | None = None) -> list[tuple[str, Callable[[str, str], bool]]]:
    """The filters in the order they are tried; the first that matches names the drop."""
    return [
        *length_rule(cfg, lang)[:1],
        ("identical", is_identical),
        ("placeholder", has_placeholder),
        ("markup", has_markup),
        ("language_list", is_language_list),
        ("non_letters", mostly_non_letters),
        *length_rule(cfg, lang)[1:],
    ]


@dataclass
class Cleaner:
    """Applies the filters and keeps the per-filter counts for the build report."""

    cfg: CleanConfig = field(default_factory=CleanConfig)
    general: bool = False  # add the general-domain rules (game and dictionary text)
    dropped: dict[str, int] = field(default_factory=dict)
    accelerators_stripped: int = 0

    def __post_init__(self) -> None:
        self._by_lang: dict[str | None, list] = {}
        self.dropped = {name: 0 for name, _ in self._filters_for(None)}

    def _filters_for(self, lang: str | None) -> list:
        if lang not in self._by_lang:
            self._by_lang[lang] = filters(self.cfg, lang) + (general_filters() if self.general else [])
        return self._by_lang[lang]

    def __call__(self, en: str, xx: str, lang: str | None = None) -> tuple[str, str] | None:
        """The cleaned pair, or None; `lang` (the other side's language) centres the length ratio."""
        en, xx = normalize(en), normalize(xx)
        en2, xx2 = strip_accelerators(en), strip_accelerators(xx)
        if (en2, xx2) != (en, xx):
            self.accelerators_stripped += 1
            en, xx = en2, xx2
        for name, rule in self._filters_for(lang):
            if rule(en, xx):
                self.dropped[name] += 1
                return None
        return en, xx


# ----------------------------------------------------------------------------- general-domain text

# Placeholders of game catalogues that the software rule does not know: Qt's %1, FreeCol's
# %name% and {{plural:...}}, Cataclysm's <npcname> is markup already.
GAME_PLACEHOLDER = re.compile(r"%\d|%[A-Za-z_][\w.]*%|\{\{|\}\}|\b[a-z]+_[a-z_]+\b")
# Reserved for independent evaluation (DATA.md): scripture and the UDHR never enter a corpus,
# not even quoted inside a game line or a fortune. Russian: the Bible's forms (Библия, Библии, ...),
# not the "библио-" words that share its stem (библиотека "library", библиография).
RESERVED = re.compile(
    r"\b(?:bible|biblia|bibel|bijbel|библи(?!о)\w*|quran|qur'an|koran|coran|corano|koranu?|коран\w*|psalms?|psalm\w*"
    r"|gospel|evangelium|universal declaration of human rights)\b"
    r"|\b(?:genesis|exodus|matthew|mark|luke|john|romans|proverbs|isaiah|sura|surah)\s+\d+:\d+",
    re.I,
)
_TITLE_SMALL_WORDS = {"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "for", "by", "with", "from", "vs"}


def has_game_placeholder(en: str, xx: str) -> bool:
    return bool(GAME_PLACEHOLDER.search(en) or GAME_PLACEHOLDER.search(xx))


def mentions_reserved_text(*texts: str) -> bool:
    return any(RESERVED.search(t) for t in texts)


def is_name_title(en: str, xx: str) -> bool:
    """A title of invented names ('Delfador's Memoirs of Wesmere'): Title Case, no sentence
    punctuation, and most of its capitalised words copied untranslated into the other side."""
    if re.search(r"[.!?…:;,]$", en):
        return False
    words = [w.strip("'\"()-") for w in en.split()]
    words = [w for w in words if w and w.casefold() not in _TITLE_SMALL_WORDS]
    if not words or not all(w[0].isupper() or not w[0].isalpha() for w in words):
        return False
    names = [re.sub(r"['’]s$", "", w) for w in words if w[0].isalpha()]
    copied = sum(1 for w in names if w in xx)
    return copied >= max(1, (len(names) + 1) // 2)


def general_filters() -> list[tuple[str, Callable[[str, str], bool]]]:
    """Rules added on top of `filters` for general-domain (game, dictionary) text."""
    return [("game_placeholder", has_game_placeholder), ("reserved_text", mentions_reserved_text),
            ("name_title", is_name_title)]


class TemplateCap:
    """Keeps at most `cap` English sentences per template. Item and creature descriptions
    repeat one frame with a word or a phrase changed ('build a log shack with a roof' /
    'build a metal sheet shack with a roof'). Two rules, after digits are folded to 0:
      frame: the same words with one left open ('A small * of wood.'), for short sentences;
      shingles: half or more of the sentence's word 4-grams already belong to one template.
    Decided once per English sentence, so all its translations share the fate."""

    N = 4

    def __init__(self, cap: int):
        self.cap = cap
        self.frames: dict[int, int] = {}  # frame -> sentences kept
        self.template_of: dict[int, int] = {}  # 4-gram -> template id
        self.size: list[int] = []  # template id -> sentences kept
        self.decided: dict[str, bool] = {}
        self.dropped = 0

    @staticmethod
    def words(en: str) -> list[str]:
        return re.sub(r"\d+", "0", en.casefold()).split()

    def keep(self, en: str) -> bool:
        key = en.casefold()
        if key not in self.decided:
            words = self.words(en)
            frames = [hash((*words[:i], "\0", *words[i + 1:])) for i in range(len(words))]
            grams = {hash(tuple(words[i:i + self.N])) for i in range(len(words) - self.N + 1)}
            template = self._template(grams)
            ok = all(self.frames.get(f, 0) < self.cap for f in frames) and self.size[template] < self.cap
            if ok:
                for f in frames:
                    self.frames[f] = self.frames.get(f, 0) + 1
                self.size[template] += 1
            else:
                self.dropped += 1
            self.decided[key] = ok
        return self.decided[key]

    def _template(self, grams: set[int]) -> int:
        """The template that holds half or more of these 4-grams, or a new one; it learns them."""
        votes = Counter(self.template_of[g] for g in grams if g in self.template_of)
        best = votes.most_common(1)
        if best and best[0][1] * 2 >= len(grams):
            template = best[0][0]
        else:
            template = len(self.size)
            self.size.append(0)
        for g in grams:
            self.template_of.setdefault(g, template)
        return template
