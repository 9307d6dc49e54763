"""Reading parallel corpora: edge-xsent's own corpus folders and users' TSV / Moses files.

Every reader is a generator, so a 40M-pair file streams through without sitting in memory.
Compressed files (.gz, .xz) are read transparently. Errors name the file and the line.

Corpus folder layout (what `edge-xsent data build` writes):
    train.tsv, valid.tsv, test.tsv   header `lang_a lang_b text_a text_b source domain`, tab-separated
                                     (domain: software | general; folders built before domains
                                     existed have no domain column and are all software)
    mono.tsv                         header `lang text source` (monolingual general-domain text)
    classify.tsv                     header `package label lang text` (zero-shot classification)
    stats.json, PROVENANCE.md
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator

from edge_xsent.errors import UserError
from edge_xsent.text import normalize

SPLITS = ("train", "valid", "test")
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "resources" / "sample-corpus"
CORPUS_HEADER = ["lang_a", "lang_b", "text_a", "text_b", "source", "domain"]
LEGACY_HEADER = CORPUS_HEADER[:5]  # before domains: every pair was software localisation
MONO_HEADER = ["lang", "text", "source"]
CLASSIFY_HEADER = ["package", "label", "lang", "text"]
_LANGS_IN_NAME = re.compile(r"(?:^|[._-])([a-z]{2,3})[-_]([a-z]{2,3})(?:[._]|$)")


@dataclass(frozen=True)
class Pair:
    lang_a: str
    lang_b: str
    a: str
    b: str
    source: str = ""
    domain: str = ""  # software | general


def open_binary(path: str | Path) -> IO[bytes]:
    """Open plain, .gz or .xz files as bytes, with a clear error for a missing path."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a folder, expected a file")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".xz":
        return lzma.open(path, "rb")
    return open(path, "rb")


# No sentence or pair is this long; a "line" that is (`/dev/zero`, a binary file) would take memory
# without end, so reading stops there with an error instead.
MAX_LINE_BYTES = 64 << 20


def bounded_lines(f: IO, limit: int = MAX_LINE_BYTES, name: str = "the input") -> Iterator[tuple[int, str | bytes]]:
    """(line number, line) of a binary or text stream, never holding more than `limit` of one line."""
    n = 0
    while line := f.readline(limit + 1):
        n += 1
        if len(line) > limit and not line.endswith(b"\n" if isinstance(line, bytes) else "\n"):
            raise UserError(f"{name}: line {n} is longer than {limit >> 20} MB; is it a text file with one sentence "
                            "per line? (a binary file or a device like /dev/zero is not)")
        yield n, line


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline), decoded line by line so that an error
    names the exact line."""
    n = 0
    try:
        with open_binary(path) as f:
            for n, raw in bounded_lines(f, name=str(path)):
                line = raw.decode("utf-8").rstrip("\r\n")
                yield n, (line.removeprefix("\ufeff") if n == 1 else line)  # a BOM (Windows editors) is not text
    except UnicodeDecodeError as e:
        raise UserError(f"{path}:{n}: not valid UTF-8 ({e.reason} at byte {e.start}); re-encode the file as UTF-8") from e
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise UserError(f"{path}:{n + 1}: cannot read ({e}); is the file truncated?") from e


def langs_from_name(path: Path) -> tuple[str, str] | None:
    """`europarl.en-fr.tsv.gz` -> ('en', 'fr')."""
    m = _LANGS_IN_NAME.search(path.name.lower())
    return (m.group(1), m.group(2)) if m else None


def read_tsv(path: str | Path, langs: tuple[str, str] | None = None) -> Iterator[Pair]:
    """Two-column TSV: source <tab> target. Languages from `langs` or the file name."""
    path = Path(path)
    langs = langs or langs_from_name(path)
    if langs is None:
        raise UserError(f"{path}: cannot tell the languages; pass --langs en,fr or name the file like corpus.en-fr.tsv")
    for n, line in read_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise UserError(f"{path}:{n}: expected 2 tab-separated columns (source, target), found {len(cols)}")
        yield Pair(langs[0], langs[1], cols[0], cols[1], path.name)


def read_moses(path_a: str | Path, path_b: str | Path, langs: tuple[str, str] | None = None) -> Iterator[Pair]:
    """Moses format: two files with one sentence per line, line i of each a translation pair."""
    pa, pb = Path(path_a), Path(path_b)
    if langs is None:
        la, lb = pa.name.removesuffix(".gz").removesuffix(".xz").rsplit(".", 1)[-1], \
                 pb.name.removesuffix(".gz").removesuffix(".xz").rsplit(".", 1)[-1]
        if not (re.fullmatch(r"[a-z]{2,3}", la) and re.fullmatch(r"[a-z]{2,3}", lb)):
            raise UserError(f"cannot tell the languages of {pa} and {pb}; pass --langs en,fr or name them corpus.en / corpus.fr")
        langs = (la, lb)
    it_b = read_lines(pb)
    for n, a in read_lines(pa):
        other = next(it_b, None)
        if other is None:
            raise UserError(f"{pb} has fewer lines than {pa}: it ends before line {n}; Moses files must have equal line counts")
        b = other[1]
        if a.strip() and b.strip():
            yield Pair(langs[0], langs[1], a, b, pa.stem)
    if next(it_b, None) is not None:
        raise UserError(f"{pb} has more lines than {pa}; Moses files must have equal line counts")


def read_corpus_split(path: str | Path, domain: str | None = None) -> Iterator[Pair]:
    """One split file of a corpus folder (header + 6 columns, or 5 in folders built before
    domains, read as software). `domain` keeps only that domain's pairs."""
    path = Path(path)
    lines = read_lines(path)
    first = next(lines, None)
    if first is None:
        raise UserError(f"{path}: empty file; a corpus split needs the header {' '.join(CORPUS_HEADER)}")
    header = first[1].split("\t")
    if header not in (CORPUS_HEADER, LEGACY_HEADER):
        raise UserError(f"{path}:1: not an edge-xsent corpus split (header should be {' '.join(CORPUS_HEADER)})")
    width = len(header)
    for n, line in lines:
        cols = line.split("\t")
        if len(cols) != width:
            raise UserError(f"{path}:{n}: expected {width} tab-separated columns, found {len(cols)}")
        pair = Pair(*cols) if width == 6 else Pair(*cols, domain="software")
        if domain is None or pair.domain == domain:
            yield pair


def resolve(path: str | Path) -> Path:
    """`sample` names the small real corpus shipped inside the package."""
    return SAMPLE_CORPUS if str(path) == "sample" else Path(path).expanduser()


def read_pairs(path: str | Path, langs: tuple[str, str] | None = None, split: str = "train",
               domain: str | None = None) -> Iterator[Pair]:
    """Any supported input: a corpus folder (one split), a corpus split file, a TSV, or `a.en,b.fr` Moses.
    `sample` is the corpus shipped with the package. `domain` (software | general) keeps one
    domain of a corpus folder; other inputs carry no domain and cannot be filtered by it."""
    path = resolve(path)
    text = str(path)
    p = Path(path)
    corpus_file = p.is_file() and next(read_lines(p), (0, ""))[1].split("\t") in (CORPUS_HEADER, LEGACY_HEADER)
    if domain is not None and not (p.is_dir() or corpus_file):
        raise UserError(f"{path}: --domain needs a corpus folder built by `edge-xsent data build`; "
                        "a TSV or Moses file has no domain column")
    if "," in text and not p.exists():
        a, b = text.split(",", 1)
        return read_moses(a, b, langs)
    if p.is_dir():
        f = p / f"{split}.tsv"
        if not f.exists():
            raise UserError(f"{p} has no {split}.tsv; is it a corpus folder built by `edge-xsent data build`?")
        return read_corpus_split(f, domain)
    if not p.exists():
        raise UserError(f"{p}: no such file or folder")
    if corpus_file:
        return read_corpus_split(p, domain)
    return read_tsv(p, langs)


def pair_langs(pairs: Iterable[Pair]) -> list[str]:
    """Every language of some pairs, sorted: the language list a model is trained with."""
    return sorted({l for p in pairs for l in (p.lang_a, p.lang_b)})


def split_of(english: str, valid_frac: float, test_frac: float, extra_test_frac: float = 0.0) -> str:
    """Stable split by a hash of the normalised English side: one sentence, one split, everywhere.
    `extra_test_frac` moves the band just above valid into test (general text holds out more)."""
    key = normalize(english).casefold().encode("utf-8")
    x = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
    if x < test_frac:
        return "test"
    if x < test_frac + valid_frac:
        return "valid"
    if x < test_frac + valid_frac + extra_test_frac:
        return "test"
    return "train"


def write_header(f: IO[str], header: list[str]) -> None:
    f.write("\t".join(header) + "\n")


def write_pair(f: IO[str], p: Pair) -> None:
    f.write(f"{p.lang_a}\t{p.lang_b}\t{p.a}\t{p.b}\t{p.source}\t{p.domain}\n")


def _read_table(path: str | Path, header: list[str], what: str) -> Iterator[tuple[str, ...]]:
    """Rows of a headed TSV whose every line has the header's column count."""
    path = Path(path)
    lines = read_lines(path)
    first = next(lines, None)
    if first is None or first[1].split("\t") != header:
        raise UserError(f"{path}: not {what} (header should be {' '.join(header)})")
    for n, line in lines:
        cols = line.split("\t")
        if len(cols) != len(header):
            raise UserError(f"{path}:{n}: expected {len(header)} tab-separated columns, found {len(cols)}")
        yield tuple(cols)


def read_mono(path: str | Path) -> Iterator[tuple[str, ...]]:
    """(lang, text, source) rows of a corpus folder's mono.tsv."""
    return _read_table(path, MONO_HEADER, "a monolingual text file")


def read_classify(path: str | Path) -> Iterator[tuple[str, ...]]:
    """(package, label, lang, text) rows of a classify.tsv."""
    return _read_table(path, CLASSIFY_HEADER, "a classification set")


def balanced_order(pairs: Iterable[Pair], seed: int = 0) -> list[Pair]:
    """The pairs round-robin over their languages (each language's pairs shuffled with `seed`): any
    prefix holds every language alike (the longest ones' tails come last). What a run with
    `train_order = "balanced"` reads, and the order train/label.py labels in."""
    return _round_robin(pairs, lambda p: p.lang_b, seed)


def balanced_mono(rows: Iterable[tuple[str, ...]], seed: int = 0) -> list[tuple[str, ...]]:
    """mono.tsv's (lang, text, source) rows in the same round-robin: what `max_mono_texts` takes a prefix
    of, and the order train/label.py labels monolingual text in."""
    return _round_robin(rows, lambda row: row[0], seed)


def _round_robin(items: Iterable, lang_of, seed: int) -> list:
    import itertools
    import random

    by_lang: dict[str, list] = {}
    for item in items:
        by_lang.setdefault(lang_of(item), []).append(item)
    rng = random.Random(seed)
    for lang in sorted(by_lang):
        rng.shuffle(by_lang[lang])
    groups = [by_lang[lang] for lang in sorted(by_lang)]
    return [x for batch in itertools.zip_longest(*groups) for x in batch if x is not None]


JOIN_MOST = 4  # pairs in one joined pair, at most
SPACELESS = ("ja", "zh", "th", "lo", "km", "my")  # languages written without spaces between sentences


def joined_pairs(rows: list[Pair], share: float, max_chars: int, seed: int = 0) -> list[Pair]:
    """Long pairs for a run whose short ones leave it weak on long text (verses, paragraphs): each made of
    2..JOIN_MOST pairs that follow each other in `rows` (give them in the corpus file's order) with the same
    languages and source, both sides joined (with a space, or none in a language written without spaces) and
    each within `max_chars`. About `share` x len(rows) of them, none reusing a start; the rows' own text only."""
    import random

    if share <= 0:
        return []
    same = [i for i in range(len(rows) - 1) if _join_key(rows[i]) == _join_key(rows[i + 1])]
    rng = random.Random(seed)
    rng.shuffle(same)
    out: list[Pair] = []
    want = round(share * len(rows))
    for start in same:
        if len(out) >= want:
            break
        first, key = rows[start], _join_key(rows[start])
        sep_a, sep_b = _separator(first.lang_a), _separator(first.lang_b)
        end, chars_a, chars_b = start + 1, len(first.a), len(first.b)
        for row in rows[start + 1: start + rng.randint(2, JOIN_MOST)]:
            chars_a, chars_b = chars_a + len(sep_a) + len(row.a), chars_b + len(sep_b) + len(row.b)
            if _join_key(row) != key or chars_a > max_chars or chars_b > max_chars:
                break
            end += 1
        if end - start >= 2:
            parts = rows[start:end]
            out.append(Pair(first.lang_a, first.lang_b, sep_a.join(p.a for p in parts), sep_b.join(p.b for p in parts),
                            first.source, first.domain))
    return out


def _join_key(p: Pair) -> tuple[str, str, str]:
    return p.lang_a, p.lang_b, p.source


def _separator(lang: str) -> str:
    return "" if lang.split("_")[0] in SPACELESS else " "
