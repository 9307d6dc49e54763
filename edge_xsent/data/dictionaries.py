"""Bilingual dictionaries: word- and phrase-level pairs (FreeDict's dictd files in Debian,
dict-freedict-eng-<l> and dict-freedict-<l>-eng).

Everyday vocabulary is what the out-of-genre benchmark misses most (short descriptions such as
"A yellow school bus."), and a dictionary says directly that "bus" is "autobús". One pair per
entry: the headword and the first translation of its first sense, stripped of grammar marks
(<masc>, [comp.], "I. <N> 1."). Where a headword has several entries (Ding's eng-deu has one
per sense), the entry without field labels and with the most usage examples wins: the everyday
sense. Ding's examples ("build a house" - "ein Haus bauen") are phrase pairs of their own.
Only everyday English is kept: every English word among wordfreq's 50,000 most frequent
(the `words` extra), and each language's pairs ranked by the English side's frequency, at most
PAIRS_PER_LANG of them.

The build writes them to the train split only (`CorpusWriter.add_word`): they are too short for
the sentence filters, and a dictionary entry is not a test sentence.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from edge_xsent.data.clean import WORD_CHARS
from edge_xsent.data.debian import AptCache, RawPair, _underscore
from edge_xsent.data.formats import ErrorSink, FormatError, report
from edge_xsent.data.mono import import_wordfreq

# FreeDict's three-letter codes; Brazilian Portuguese reads the (European and Brazilian) por dictionaries.
FREEDICT_CODES = {"de": "deu", "es": "spa", "fr": "fra", "it": "ita", "nl": "nld", "pl": "pol", "pt_BR": "por",
                  "ru": "rus", "ar": "ara", "bg": "bul", "cs": "ces", "da": "dan", "el": "ell", "fi": "fin", "hi": "hin",
                  "hr": "hrv", "hu": "hun", "id": "ind", "ja": "jpn", "lt": "lit", "nb": "nor", "sk": "slk", "sl": "slv",
                  "sr": "srp", "sv": "swe", "tr": "tur"}  # every language Debian's FreeDict packages pair with English
PAIRS_PER_LANG = 20_000
ENGLISH_VOCAB = 50_000  # wordfreq ranks: an English word past this is not everyday vocabulary
MAX_WORDS = 8  # an example phrase longer than this is a sentence, which the sentence sources cover
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_HEAD = re.compile(r"^(.+?)(?:\s+/[^/]*/)?(?:\s*<[^>]*>)*\s*$")  # "yellow /jˈɛləʊ/ <v>"
_NUMBERING = re.compile(r"^(?:[IVX]+\.\s*)?(?:<[^>]*>\s*)*(?:\d+\.\s*)?")  # "I.  <N> 1.  "
_MARKS = re.compile(r"<[^>]*>|\[[^\]]*\]|\([^)]*\)|\{[^}]*\}")  # <fem>, [comp.], (coll.), {see}
_EXAMPLE = re.compile(r'^\s+"([^"]+)"\s+-\s+(.+)$')  # Ding:      "build a house"  - ein Haus bauen
_META = re.compile(r"^\s*(?:see:|Synonyms?:|Note:|Antonyms?:)")
_ENGLISH_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_TEXT = re.compile(rf"^{WORD_CHARS}(?:['’-]{WORD_CHARS})*(?: {WORD_CHARS}(?:['’-]{WORD_CHARS})*)*$")  # words


@dataclass(frozen=True)
class Entry:
    head: str
    translation: str
    labelled: bool  # a field label such as [comp.] or [mil.]: a specialist sense
    examples: tuple[tuple[str, str], ...]  # (headword language, translation language)


def dictd_entries(index: Path, data: Path) -> Iterator[tuple[str, str]]:
    """(headword, entry text) of a dictd dictionary: the .index gives base64 offsets into the
    gzip-compatible .dict.dz. Dictionary metadata (00-database-*) is skipped."""
    try:
        text = gzip.decompress(data.read_bytes())
        lines = index.read_text(encoding="utf-8").splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise FormatError(f"{data}: cannot read the dictd dictionary ({e})") from None
    for n, line in enumerate(lines, 1):
        parts = line.split("\t")
        if len(parts) != 3 or not all(c in _B64 for c in parts[1] + parts[2]):
            raise FormatError(f"{index}:{n}: not a dictd index line (headword, offset, size): {line[:80]!r}")
        if parts[0].startswith(("00-database-", "00database")):
            continue
        start, size = _b64(parts[1]), _b64(parts[2])
        yield parts[0], text[start:start + size].decode("utf-8", errors="replace")


def _b64(s: str) -> int:
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def parse_entry(body: str) -> Entry | None:
    """The headword, its first translation, and Ding's examples; None for an entry without one."""
    lines = body.strip("\n").split("\n")
    head = _HEAD.match(lines[0].strip())
    senses = [l for l in lines[1:] if l.strip() and not _META.match(l) and not _EXAMPLE.match(l)]
    if head is None or not senses:
        return None
    first = _NUMBERING.sub("", senses[0].strip())
    translation = _first_item(first)
    examples = tuple((_clean(m.group(1)), _first_item(m.group(2))) for m in map(_EXAMPLE.match, lines[1:]) if m)
    return Entry(_clean(head.group(1)), translation, "[" in first, examples)


def _first_item(text: str) -> str:
    return _clean(re.split(r"[,;]", _MARKS.sub(" ", text))[0])


def _clean(text: str) -> str:
    return " ".join(_MARKS.sub(" ", text).replace("‐", "-").split())


def best_entries(entries: Iterator[tuple[str, str]]) -> dict[str, Entry]:
    """One entry per headword: unlabelled before labelled, then the most examples, then the first."""
    best: dict[str, Entry] = {}
    for _, body in entries:
        e = parse_entry(body)
        if e is None:
            continue
        old = best.get(e.head.casefold())
        if old is None or (old.labelled, -len(old.examples)) > (e.labelled, -len(e.examples)):
            best[e.head.casefold()] = e
    return best


def dictionary_pairs(entries: dict[str, Entry], english_first: bool) -> Iterator[tuple[str, str]]:
    """(English, other) pairs of headwords and examples whose both sides are plain words."""
    for e in entries.values():
        pairs = [(e.head, e.translation), *e.examples]
        for a, b in pairs:
            en, xx = (a, b) if english_first else (b, a)
            if _plain(en) and _plain(xx) and en.casefold() != xx.casefold() \
                    and max(len(en), len(xx)) <= 3 * min(len(en), len(xx)):
                yield en, xx


def _plain(text: str) -> bool:
    return bool(_TEXT.match(text)) and len(text.split()) <= MAX_WORDS


def english_ranks() -> dict[str, int]:
    """wordfreq's rank of each of the ENGLISH_VOCAB most frequent English words."""
    return {w: i for i, w in enumerate(import_wordfreq("freedict").top_n_list("en", ENGLISH_VOCAB))}


def everyday(pairs: Iterable[tuple[str, str, str]], ranks: dict[str, int], limit: int) -> list[tuple[str, str, str]]:
    """The (English, other, dictionary) pairs whose English words are all everyday ones, the most
    frequent first (the rarest word decides), one per English text: the first given (eng-xx
    dictionaries come first)."""
    scored: dict[str, tuple[int, tuple[str, str, str]]] = {}
    for pair in pairs:
        words = _ENGLISH_WORD.findall(pair[0].casefold())
        rank = max((ranks.get(w, ENGLISH_VOCAB) for w in words), default=ENGLISH_VOCAB)
        if rank < ENGLISH_VOCAB:
            scored.setdefault(pair[0].casefold(), (rank, pair))
    return [pair for _, pair in sorted(scored.values(), key=lambda s: s[0])][:limit]  # stable: ties keep their order


def freedict_packages(langs: list[str]) -> list[str]:
    codes = [FREEDICT_CODES[l] for l in map(_underscore, langs) if l in FREEDICT_CODES]
    return [p for c in codes for p in (f"dict-freedict-eng-{c}", f"dict-freedict-{c}-eng")]


def read_freedict(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    ranks = english_ranks()
    for lang in map(_underscore, langs):
        code = FREEDICT_CODES.get(lang)
        if code is None:
            report(on_error, FormatError(f"no FreeDict dictionary is known for {lang}"))
            continue
        found = []
        for name, english_first in ((f"eng-{code}", True), (f"{code}-eng", False)):
            root = cache.package(f"dict-freedict-{name}")
            if root is None:
                continue
            folder = root / "usr/share/dictd"
            try:
                entries = best_entries(dictd_entries(folder / f"freedict-{name}.index", folder / f"freedict-{name}.dict.dz"))
            except FormatError as e:
                report(on_error, e)
                continue
            found += [(en, xx, name) for en, xx in dictionary_pairs(entries, english_first)]
        for en, xx, name in everyday(found, ranks, PAIRS_PER_LANG):
            yield RawPair(lang, en, xx, "freedict", f"dict-freedict-{name}")
