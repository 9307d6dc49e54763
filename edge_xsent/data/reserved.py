"""Sources reserved for the out-of-genre benchmark: whole Debian sources of genres that no
training source has, read only by `edge-xsent data reserved` and never by `data build`.

  stellarium  star lore and ethnography: the sky-culture descriptions of stellarium-data
              (one HTML page per culture and language, paragraphs aligned by order)
  tuxpaint    short everyday descriptions ("A yellow school bus."): Tux Paint's stamps
              (tuxpaint-stamps-default), one English line and its translations per stamp
  ufoai       narrative research reports and encyclopedia entries of UFO: Alien Invasion
              (ufoai-misc, gettext; an entry's paragraphs aligned by order)
  debian-history  "A Brief History of Debian" as an article, in ten languages (ja and ko among
              them), one HTML page per chapter, paragraphs aligned by order

Paragraphs are split into sentences where both sides have the same number of them, so the
benchmark retrieves sentences, as users search; a paragraph whose sentence counts differ is
kept whole if it is short enough. `data build` drops every training pair and monolingual
text whose either side is a reserved sentence (`reserved_keys`), so a sentence shared by a
training package and a reserved one is evaluation text only.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from edge_xsent.atomic import atomic_dir
from edge_xsent.errors import UserError
from edge_xsent.text import normalize
from edge_xsent.data.align import align_paragraphs
from edge_xsent.data.clean import Cleaner
from edge_xsent.data.corpus import CORPUS_HEADER, Pair, read_corpus_split, read_mono, write_header, write_pair
from edge_xsent.data.debian import AptCache, RawPair
from edge_xsent.data.formats import ErrorSink, skip_bad_file
from edge_xsent.data.games import locale_matches, read_catalogue

DOMAIN = "reserved"  # the domain column of a reserved benchmark's pairs
MIN_ENTRY_WORDS = 20  # UFO:AI entries shorter than this are its interface, not its prose
MARKER = "RESERVED-FOR-EVALUATION"  # a file in the benchmark folder: training refuses such a folder


@dataclass(frozen=True)
class ReservedSource:
    name: str
    genre: str
    licence: str
    package: str
    read: Callable[..., Iterator[RawPair]]  # (cache, langs, on_error) -> pairs


def html_paragraphs(page: str) -> list[str]:
    """The text of each <p> of a sky-culture page (footnote marks and tags dropped). Nested
    paragraphs (an image inside a <p>) are cut at the inner tag."""
    page = re.sub(r"<sup>.*?</sup>", "", page, flags=re.S)
    out = []
    for chunk in re.split(r"<p\b[^>]*>|</p>|<h\d\b[^>]*>.*?</h\d>|<table\b.*?</table>|<ul\b.*?</ul>", page,
                          flags=re.S | re.I):
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", chunk)).split())
        if text:
            out.append(text)
    return out


def read_stellarium(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    root = cache.package("stellarium-data")
    if root is None:
        return
    for english in sorted((root / "usr/share/stellarium/skycultures").glob("*/description.en.utf8")):
        en_pars = html_paragraphs(english.read_text(encoding="utf-8", errors="replace"))
        for page in sorted(english.parent.glob("description.*.utf8")):
            code = page.name.split(".")[1]
            for lang in [l for l in langs if locale_matches(code, l)]:
                xx_pars = html_paragraphs(page.read_text(encoding="utf-8", errors="replace"))
                for a, b in align_paragraphs(en_pars, xx_pars):
                    yield RawPair(lang, a, b, "stellarium", f"{english.parent.name}/{page.name}")


def blank_line_paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def read_ufoai(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    root = cache.package("ufoai-misc")
    if root is None:
        return
    i18n = root / "usr/share/games/ufoai/base/i18n"
    for lang in langs:
        for mo in sorted(i18n.glob("*/LC_MESSAGES/ufoai.mo")):
            if not locale_matches(mo.parent.parent.name, lang):
                continue
            for en, xx in skip_bad_file(on_error, read_catalogue(mo)):
                if len(en.split()) < MIN_ENTRY_WORDS:  # interface strings, not the reports
                    continue
                for a, b in align_paragraphs(blank_line_paragraphs(en), blank_line_paragraphs(xx)):
                    yield RawPair(lang, a, b, "ufoai", f"ufoai-misc:{mo.parent.parent.name}")


def read_tuxpaint(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    """Tux Paint's stamp descriptions: the English line first, then `<locale>.utf8=<text>` lines."""
    root = cache.package("tuxpaint-stamps-default")
    if root is None:
        return
    for path in sorted((root / "usr/share/tuxpaint/stamps").rglob("*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if not lines or "=" in lines[0]:
            continue
        en = lines[0].strip()
        for line in lines[1:]:
            code, sep, text = line.partition(".utf8=")
            for lang in [l for l in langs if sep and locale_matches(code.strip(), l)]:
                yield RawPair(lang, en, text.strip().rstrip("|"), "tuxpaint", str(path.relative_to(root)))


def read_debian_history(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    """"A Brief History of Debian" (debian-history): one HTML page per chapter and language,
    paragraphs aligned by order (every translation has the English paragraph count)."""
    root = cache.package("debian-history")
    if root is None:
        return
    docs = root / "usr/share/doc/debian-history/docs"
    for english in sorted(docs.glob("*.en.html")):
        en_pars = html_paragraphs(english.read_text(encoding="utf-8", errors="replace"))
        chapter = english.name.split(".")[0]
        for page in sorted(docs.glob(f"{chapter}.*.html")):
            code = page.name.split(".")[1]
            for lang in [l for l in langs if code != "en" and locale_matches(code, l)]:
                xx_pars = html_paragraphs(page.read_text(encoding="utf-8", errors="replace"))
                for a, b in align_paragraphs(en_pars, xx_pars):
                    yield RawPair(lang, a, b, "debian-history", page.name)


RESERVED_SOURCES: dict[str, ReservedSource] = {s.name: s for s in [
    ReservedSource("stellarium", "star lore and ethnography (sky-culture descriptions)",
                   "Stellarium sky cultures (stellarium-data): GPL-2+ (texts: each culture's own licence, "
                   "see its info.ini).", "stellarium-data", read_stellarium),
    ReservedSource("tuxpaint", "short everyday descriptions of objects, animals and places",
                   "Tux Paint stamps (tuxpaint-stamps-default): GPL-2+.", "tuxpaint-stamps-default", read_tuxpaint),
    ReservedSource("ufoai", "narrative research reports and encyclopedia entries (science fiction)",
                   "UFO: Alien Invasion (ufoai-misc): GPL-2+.", "ufoai-misc", read_ufoai),
    ReservedSource("debian-history", "a community's history told as an article (people, dates, events)",
                   "A Brief History of Debian (debian-history): GPL-2+.",
                   "debian-history", read_debian_history),
]}


def _key(text: str) -> str:
    return normalize(text).casefold()


def reserved_pairs(cache: AptCache, langs: list[str], errors: list[str] | None = None) -> Iterator[RawPair]:
    """Every raw pair of every reserved source (before cleaning)."""
    for source in RESERVED_SOURCES.values():
        yield from source.read(cache, langs, (lambda e: errors.append(str(e))) if errors is not None else None)


def reserved_keys(cache: AptCache, langs: list[str]) -> set[str]:
    """Normalised, casefolded text of both sides of every reserved pair: what `data build`
    must never write into a corpus. Empty (and nothing fetched) when apt has neither package."""
    return {k for raw in reserved_pairs(cache, langs) for k in (_key(raw.en), _key(raw.xx))}


def training_keys(folders: Iterable[Path]) -> set[str]:
    """Both sides of every pair and every monolingual text of corpus folders: the reserved
    benchmark drops what a model may have seen."""
    keys: set[str] = set()
    for folder in folders:
        folder = Path(folder)
        if not (folder / "train.tsv").exists():
            raise UserError(f"--exclude {folder}: not a corpus folder (no train.tsv); build it with `edge-xsent data build`")
        for split in ("train", "valid"):
            for p in read_corpus_split(folder / f"{split}.tsv"):
                keys.update((_key(p.a), _key(p.b)))
        if (folder / "mono.tsv").exists():
            keys.update(_key(t) for _, t, _ in read_mono(folder / "mono.tsv"))
    return keys


def build_reserved_from_debian(out: Path, langs: list[str], cache: Path, offline: bool, exclude: Iterable[Path] = ()) -> dict:
    """`edge-xsent data reserved`: the language codes checked, the reserved packages from Debian
    (package lists only: no translation index is needed), then `build_reserved`."""
    from edge_xsent.data.debian import check_lang_codes

    lang_list = check_lang_codes(langs)
    apt = AptCache(cache, offline=offline)
    if not offline:
        apt.update([])
    return build_reserved(out, lang_list, apt, exclude)


def build_reserved(out: Path, langs: list[str], cache: AptCache, exclude: Iterable[Path] = ()) -> dict:
    """The out-of-genre benchmark folder: test.tsv (corpus format, domain `reserved`), stats.json,
    PROVENANCE.md and the marker that keeps it out of training."""
    seen_in_training = training_keys(exclude)
    cleaner = Cleaner(general=True)
    seen: set[tuple[str, str]] = set()
    counts: Counter = Counter()
    dropped = Counter()
    errors: list[str] = []
    with atomic_dir(out) as tmp:
        with open(tmp / "test.tsv", "w", encoding="utf-8") as f:
            write_header(f, CORPUS_HEADER)
            for raw in reserved_pairs(cache, langs, errors):
                cleaned = cleaner(raw.en, raw.xx)
                if cleaned is None:
                    continue
                en, xx = cleaned
                if (raw.lang, _key(en)) in seen:
                    dropped["duplicate"] += 1
                    continue
                seen.add((raw.lang, _key(en)))
                if _key(en) in seen_in_training or _key(xx) in seen_in_training:
                    dropped["in_training_corpus"] += 1
                    continue
                write_pair(f, Pair("en", raw.lang, en, xx, raw.source, DOMAIN))
                counts[(raw.source, raw.lang)] += 1
        if not counts:
            raise UserError("no reserved pairs for languages " + ", ".join(langs) + ": is apt able to fetch "
                            + ", ".join(s.package for s in RESERVED_SOURCES.values()) + "?")
        stats = {"reserved": True, "langs": langs,
                 "pairs": {s: {l: n for (s2, l), n in sorted(counts.items()) if s2 == s} for s in RESERVED_SOURCES},
                 "dropped": {**dropped, **{k: v for k, v in cleaner.dropped.items() if v}},
                 "excluded_corpora": [str(p) for p in exclude], "unreadable_files": errors}
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
        (tmp / MARKER).write_text("This folder is an evaluation set. `edge-xsent train` refuses it.\n")
        (tmp / "PROVENANCE.md").write_text(provenance(stats))
    return stats


def provenance(stats: dict) -> str:
    lines = ["# Out-of-genre benchmark (reserved sources)", "",
             "Built by `edge-xsent data reserved` from Debian 12 packages. These sources are read by no",
             "training build; `data build` drops any pair or text that is one of their sentences.", ""]
    for s in RESERVED_SOURCES.values():
        per = stats["pairs"].get(s.name, {})
        lines.append(f"- **{s.name}** ({s.genre}): {s.licence} Pairs: "
                     + (", ".join(f"en-{l} {n:,d}" for l, n in per.items()) or "none") + ".")
    lines += ["", f"Dropped: {json.dumps(stats['dropped'])}.", ""]
    return "\n".join(lines)


def is_reserved_folder(folder: Path) -> bool:
    return (Path(folder) / MARKER).exists()
