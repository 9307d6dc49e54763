"""Monolingual general-domain text: quotes, proverbs and jokes (Debian's fortune packages)
and WordNet's example phrases. No translation, so it serves objectives that need none
(a teacher labels it for distillation). The build writes it to `mono.tsv`.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from edge_xsent.data import formats
from edge_xsent.data.debian import AptCache, _underscore
from edge_xsent.data.clean import WORD_CHARS
from edge_xsent.data.formats import ErrorSink, FormatError, report, skip_bad_file


@dataclass(frozen=True)
class MonoText:
    lang: str
    text: str
    source: str


# fortune package -> language; fortunes-br is Brazilian Portuguese.
FORTUNE_PACKAGES = {"fortunes": "en", "fortunes-de": "de", "fortunes-es": "es", "fortunes-it": "it",
                    "fortunes-pl": "pl", "fortunes-ru": "ru", "fortunes-br": "pt_BR", "fortunes-bg": "bg",
                    "fortunes-cs": "cs", "fortunes-zh": "zh_CN"}
# A file in another language than its package's: fortunes-cs ships Slovak sayings too.
FORTUNE_FILE_LANGS = {"klasik-sk": "sk"}
# Files left out: slurs against groups (ethnic, gender, sexuality), religious jokes, ASCII art.
FORTUNE_SKIP = {"ethnic", "ascii-art", "asciiart", "racistas", "misogino", "hembrismo", "homosexuales", "machosno",
                "dowcipy-szowinistyczne", "dowcipy-feministyczne", "koscielne", "radio_maryja", "religion",
                "translate-me"}


def fortune_files(root: Path) -> list[Path]:
    """Fortune text files (not the .dat indexes, nor duplicate .u8 copies of a file also shipped plain)."""
    files = [p for p in (root / "usr/share/games/fortunes").rglob("*") if p.is_file() and p.suffix != ".dat"
             and not p.is_symlink()]
    plain = {p.with_suffix("") for p in files if p.suffix == ".u8"}
    out = []
    for p in sorted(files):
        stem = p.name.removesuffix(".u8").removesuffix(".fortunes")
        if stem in FORTUNE_SKIP or (p.suffix != ".u8" and p in plain):
            continue  # prefer the UTF-8 (.u8) copy of a file shipped twice
        out.append(p)
    return out


def read_fortunes(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[MonoText]:
    wanted = {"en", *(_underscore(l) for l in langs)}
    for pkg, lang in FORTUNE_PACKAGES.items():
        if lang not in wanted:
            continue
        root = cache.package(pkg)
        if root is None:
            continue
        for path in fortune_files(root):
            file_lang = FORTUNE_FILE_LANGS.get(path.name.removesuffix(".u8"), lang)
            if file_lang not in wanted:
                continue
            for text in skip_bad_file(on_error, formats.read_fortunes(path)):
                yield MonoText(file_lang, text, "fortunes")


_WN_EXAMPLE = re.compile(r'"([^"]{10,300})"')


def read_wordnet(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[MonoText]:
    """The quoted example phrases of WordNet's glosses ('her feelings of affection are dormant')."""
    root = cache.package("dict-wn")
    if root is None:
        return
    path = root / "usr/share/dictd/wn.dict.dz"  # dictzip is gzip with an index
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
    except (OSError, EOFError) as e:
        report(on_error, FormatError(f"{path}: cannot decompress the WordNet dictionary ({e})"))
        return
    for m in _WN_EXAMPLE.finditer(re.sub(r"\s+", " ", text)):
        yield MonoText("en", m.group(1), "wordnet")


WORDS_PER_LANG = 10_000  # the most frequent words of each language (wordfreq's top_n_list)
_WORD = re.compile(rf"^{WORD_CHARS}(?:['’-]{WORD_CHARS})*$")  # letters and marks, inner apostrophes or hyphens
# wordfreq's list for a language code where it is not the code's own: Croatian (Latin script) is in its
# Serbo-Croatian list; its Chinese list is Simplified only, so Traditional Chinese (zh_TW) has none.
WORDFREQ_CODES = {"hr": "sh", "zh_TW": None}


def import_wordfreq(source: str):
    """The `wordfreq` package, or a UserError naming the extra that installs it."""
    try:
        import wordfreq
    except ImportError as e:
        from edge_xsent.errors import UserError
        raise UserError(f"the {source} source needs the `words` extra: pip install 'edge-xsent[words]'") from e
    return wordfreq


def read_wordfreq(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[MonoText]:
    """Everyday words of every language, from the `wordfreq` package's frequency lists (subtitles,
    news, Wikipedia, web text): the vocabulary of the text users write, which the software and game
    sources lack. The teacher labels each word alone: word-level distillation (Reimers and Gurevych
    2020 distil sentences; a word is the shortest text the student must place where the teacher does)."""
    wordfreq = import_wordfreq("wordfreq")
    for lang in ["en", *(_underscore(l) for l in langs if _underscore(l) != "en")]:
        code = lang.split("_")[0]  # pt_BR -> pt: wordfreq has one Portuguese list
        code = WORDFREQ_CODES.get(lang, WORDFREQ_CODES.get(code, code))
        if code not in wordfreq.available_languages():
            report(on_error, FormatError(f"wordfreq has no word list for {lang}"))
            continue
        words = [w for w in wordfreq.top_n_list(code, WORDS_PER_LANG * 2) if len(w) >= 2 and _WORD.match(w)]
        for word in words[:WORDS_PER_LANG]:
            yield MonoText(lang, word, "wordfreq")
