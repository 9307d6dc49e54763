"""`edge-xsent data build`: Debian sources -> cleaned, deduplicated, split corpus folder."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
import numpy as np
from tqdm import tqdm

from ..atomic import atomic_dir
from ..errors import UserError
from ..text import normalize
from . import debian
from .clean import Cleaner, CleanConfig
from .corpus import (CLASSIFY_HEADER, CORPUS_HEADER, SPLITS, Pair, read_classify, read_corpus_split, split_of,
                     write_header, write_pair)

# Near-duplicate archive sections merged into one label (DDTP labels are noisy).
SECTION_MERGE = {
    "libs": ["libs", "libdevel", "oldlibs"],
    "desktop": ["x11", "gnome", "kde", "xfce"],
    "net": ["net", "web", "httpd", "mail", "news", "comm"],
    "text": ["text", "tex", "doc", "editors"],
    "science": ["science", "math", "electronics", "hamradio"],
    "media": ["sound", "video", "graphics"],
    "system": ["admin", "utils", "misc", "shells", "kernel", "embedded", "otherosfs"],
    "devel": ["devel", "vcs", "interpreters", "debug"],
}
_SECTION_TO_LABEL = {s: label for label, sections in SECTION_MERGE.items() for s in sections}

LICENCES = {
    "ddtp": "Debian package descriptions and their DDTP translations: distributed with Debian's archive "
            "metadata under the terms of each package's licence (DFSG-free).",
    "lo-help": "LibreOffice help (libreoffice-help-*): MPL-2.0.",
    "gettext": "gettext catalogues of Debian packages: each package's own licence (mostly GPL/LGPL, DFSG-free).",
    "lo-ui": "LibreOffice UI strings (libreoffice-l10n-*): MPL-2.0.",
}


@dataclass
class BuildConfig:
    langs: list[str]
    sources: list[str] = field(default_factory=lambda: list(debian.SOURCES))
    valid_frac: float = 0.01
    test_frac: float = 0.06  # es is the smallest pair: 6% keeps its test split above 2,000
    classify_langs: list[str] = field(default_factory=lambda: ["fr", "de", "it"])
    min_label_packages: int = 150
    max_label_packages: int = 300  # per label; every package held out costs training pairs
    clean: CleanConfig = field(default_factory=CleanConfig)


def section_label(section: str) -> str:
    section = section.split("/")[-1]
    return _SECTION_TO_LABEL.get(section, section)


def classification_set(cache: debian.AptCache, cfg: BuildConfig) -> tuple[list[tuple[str, str, str, str]], set[str]]:
    """Rows (package, label, lang, text) for packages described in English and every classify
    language, and the English paragraphs of those packages, which must stay out of train."""
    langs = [l for l in cfg.classify_langs if l in cfg.langs]
    if not langs:
        return [], set()
    sections = debian.package_sections(cache)
    per_lang = {l: debian.ddtp_by_package(cache, l) for l in ["en", *langs]}
    common = set.intersection(*(set(d) for d in per_lang.values())) & set(sections)
    by_label: dict[str, list[str]] = defaultdict(list)
    for pkg in sorted(common):
        by_label[section_label(sections[pkg])].append(pkg)
    rows, held_out = [], set()
    for label, pkgs in sorted(by_label.items()):
        if len(pkgs) < cfg.min_label_packages:
            continue
        # A stable, name-independent sample per label.
        pkgs = sorted(pkgs, key=lambda p: hashlib.sha256(p.encode()).digest())[: cfg.max_label_packages]
        for pkg in sorted(pkgs):
            for lang, d in per_lang.items():
                paragraphs = debian.description_paragraphs(d[pkg])
                rows.append((pkg, label, lang, normalize(" ".join(paragraphs))))
                if lang == "en":
                    held_out |= {_key(p) for p in paragraphs}
    return rows, held_out


def build(out: Path, cfg: BuildConfig, cache_dir: Path, offline: bool = False, progress: bool = True) -> dict:
    langs = debian.check_lang_codes(cfg.langs)
    unknown = [s for s in cfg.sources if s not in debian.SOURCES]
    if unknown:
        raise UserError(f"unknown source(s) {unknown}; choose from {', '.join(debian.SOURCES)}")
    t0 = time.time()
    cache = debian.AptCache(cache_dir, offline=offline)
    cache.update(langs)

    classify_rows, held_out = classification_set(cache, cfg) if "ddtp" in cfg.sources else ([], set())

    cleaner = Cleaner(cfg.clean)
    seen: set[bytes] = set()
    raw_counts: Counter = Counter()
    kept: Counter = Counter()
    duplicates = classify_dropped = 0
    with atomic_dir(out) as tmp:
        files = {s: open(tmp / f"{s}.tsv", "w", encoding="utf-8") for s in SPLITS}
        for f in files.values():
            write_header(f, CORPUS_HEADER)
        for source in cfg.sources:
            reader = debian.SOURCES[source]
            bar = tqdm(reader(cache, langs), desc=f"{source:8s}", unit=" pairs", disable=not progress, mininterval=1)
            for raw in bar:
                raw_counts[(source, raw.lang)] += 1
                cleaned = cleaner(raw.en, raw.xx)
                if cleaned is None:
                    continue
                en, xx = cleaned
                digest = hashlib.blake2b(f"{raw.lang}\t{en.casefold()}\t{xx.casefold()}".encode(), digest_size=16).digest()
                if digest in seen:
                    duplicates += 1
                    continue
                seen.add(digest)
                split = split_of(en, cfg.valid_frac, cfg.test_frac)
                if split == "train" and _key(en) in held_out:
                    classify_dropped += 1
                    continue
                write_pair(files[split], Pair("en", raw.lang, en, xx, source))
                kept[(source, raw.lang, split)] += 1
        for f in files.values():
            f.close()
        missing = [l for l in langs if not any(k[1] == l for k in kept)]
        if missing:
            raise UserError(f"no source carries language(s) {missing}: check the codes (DDTP and LibreOffice use e.g. pt_BR, zh_CN)")
        if classify_rows:
            with open(tmp / "classify.tsv", "w", encoding="utf-8") as f:
                write_header(f, CLASSIFY_HEADER)
                for row in classify_rows:
                    f.write("\t".join(row) + "\n")
        stats = corpus_stats(tmp)
        stats["build"] = {
            "config": asdict(cfg),
            "raw_pairs": {f"{s}/{l}": n for (s, l), n in sorted(raw_counts.items())},
            "dropped_by_filter": cleaner.dropped,
            "accelerator_marks_stripped": cleaner.accelerators_stripped,
            "duplicates_removed": duplicates,
            "held_out_for_classification": classify_dropped,
            "kept": {f"{s}/{l}/{sp}": n for (s, l, sp), n in sorted(kept.items())},
            "classify_packages": len({r[0] for r in classify_rows}),
            "seconds": round(time.time() - t0, 1),
        }
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
        (tmp / "PROVENANCE.md").write_text(provenance(cfg, stats))
    return stats


def _key(text: str) -> str:
    return normalize(text).casefold()


def corpus_stats(folder: Path) -> dict:
    """Pairs per language pair and split, length percentiles (words) and sources."""
    folder = Path(folder)
    if not any((folder / f"{s}.tsv").exists() for s in SPLITS):
        raise UserError(f"{folder} is not a corpus folder: expected train.tsv, valid.tsv, test.tsv")
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SPLITS, 0))
    lengths: dict[str, list[tuple[int, int]]] = defaultdict(list)
    sources: Counter = Counter()
    for split in SPLITS:
        path = folder / f"{split}.tsv"
        if not path.exists():
            continue
        for p in read_corpus_split(path):
            pair = f"{p.lang_a}-{p.lang_b}"
            counts[pair][split] += 1
            lengths[pair].append((len(p.a.split()), len(p.b.split())))
            sources[p.source] += 1
    stats: dict = {"pairs": {k: {**v, "total": sum(v.values())} for k, v in sorted(counts.items())},
                   "total": {s: sum(v[s] for v in counts.values()) for s in SPLITS},
                   "sources": dict(sources.most_common()), "length_words": {}}
    for pair, ls in sorted(lengths.items()):
        arr = np.array(ls)
        stats["length_words"][pair] = {
            side: {f"p{q}": int(np.percentile(arr[:, i], q)) for q in (5, 50, 95, 99)}
            for i, side in enumerate(pair.split("-"))
        }
    if (folder / "classify.tsv").exists():
        rows = list(read_classify(folder / "classify.tsv"))
        stats["classify"] = {"packages": len({r[0] for r in rows}), "labels": dict(Counter(r[1] for r in rows if r[2] == "en")),
                             "langs": sorted({r[2] for r in rows})}
    return stats


def format_stats(stats: dict) -> str:
    lines = [f"{'pair':8s} {'train':>9s} {'valid':>7s} {'test':>7s}   words p50/p95 (en | other)"]
    for pair, c in stats["pairs"].items():
        lw = stats["length_words"][pair]
        a, b = pair.split("-")
        lines.append(f"{pair:8s} {c['train']:9,d} {c['valid']:7,d} {c['test']:7,d}   "
                     f"{lw[a]['p50']}/{lw[a]['p95']} | {lw[b]['p50']}/{lw[b]['p95']}")
    t = stats["total"]
    lines.append(f"{'total':8s} {t['train']:9,d} {t['valid']:7,d} {t['test']:7,d}")
    lines.append("sources: " + ", ".join(f"{k} {v:,d}" for k, v in stats["sources"].items()))
    if "classify" in stats:
        c = stats["classify"]
        lines.append(f"classify: {c['packages']} packages, labels {c['labels']}, langs {c['langs']}")
    if "build" in stats:
        b = stats["build"]
        lines.append("dropped by filter: " + ", ".join(f"{k} {v:,d}" for k, v in b["dropped_by_filter"].items()))
        lines.append(f"accelerator marks stripped {b['accelerator_marks_stripped']:,d}; duplicates removed "
                     f"{b['duplicates_removed']:,d}; held out for classification {b['held_out_for_classification']:,d}")
    return "\n".join(lines)


def provenance(cfg: BuildConfig, stats: dict) -> str:
    used = [s for s in cfg.sources]
    lines = ["# Provenance", "", "Built by `edge-xsent data build` from Debian 12 packages fetched with apt.", "",
             f"Languages: en with {', '.join(cfg.langs)}.", "", "## Sources and licences", ""]
    lines += [f"- **{s}**: {LICENCES[s]}" for s in used]
    lines += ["", "## Counts", "", "```", format_stats(stats), "```", ""]
    return "\n".join(lines)


def sample_corpus(src: Path, out: Path, per_pair: dict[str, int], classify_per_label: int = 40,
                  seed: int = 0) -> dict:
    """A small, seeded sample of a built corpus folder (each split and language pair, and
    `classify_per_label` packages of each classification label)."""
    rng = np.random.default_rng(seed)
    src = Path(src)
    with atomic_dir(out) as tmp:
        for split in SPLITS:
            by_pair: dict[str, list[Pair]] = defaultdict(list)
            for p in read_corpus_split(src / f"{split}.tsv"):
                by_pair[f"{p.lang_a}-{p.lang_b}"].append(p)
            with open(tmp / f"{split}.tsv", "w", encoding="utf-8") as f:
                write_header(f, CORPUS_HEADER)
                for pair, items in sorted(by_pair.items()):
                    k = min(len(items), per_pair[split])
                    for i in sorted(rng.choice(len(items), size=k, replace=False)):
                        write_pair(f, items[i])
        if (src / "classify.tsv").exists():
            rows = list(read_classify(src / "classify.tsv"))
            by_label: dict[str, list[str]] = defaultdict(list)
            for pkg, label, lang, _ in rows:
                if lang == "en":
                    by_label[label].append(pkg)
            keep = {p for pkgs in by_label.values() for p in rng.permutation(pkgs)[:classify_per_label]}
            with open(tmp / "classify.tsv", "w", encoding="utf-8") as f:
                write_header(f, CLASSIFY_HEADER)
                for row in rows:
                    if row[0] in keep:
                        f.write("\t".join(row) + "\n")
        if (src / "PROVENANCE.md").exists():
            note = (f"This folder is a seeded sample (seed {seed}) of the corpus described below: "
                    f"{per_pair} pairs per language pair and split, {classify_per_label} packages per "
                    "classification label. Its own counts are in stats.json.\n\n")
            (tmp / "PROVENANCE.md").write_text(note + (src / "PROVENANCE.md").read_text())
        stats = corpus_stats(tmp)
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return stats
