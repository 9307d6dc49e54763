"""`edge-xsent data build`: Debian sources -> cleaned, deduplicated, split corpus folder."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
import numpy as np
from tqdm import tqdm

from edge_xsent.atomic import atomic_dir
from edge_xsent.errors import UserError
from edge_xsent.inputs import read_json
from edge_xsent.text import normalize
from edge_xsent.data import debian, reserved
from edge_xsent.data import sources as sources_
from edge_xsent.data.clean import (Cleaner, CleanConfig, TemplateCap, has_markup, mentions_reserved_text,
                    mostly_non_letters, word_count)
from edge_xsent.data.corpus import (CLASSIFY_HEADER, CORPUS_HEADER, MONO_HEADER, SPLITS, Pair, read_classify, read_corpus_split, read_mono, split_of,
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

@dataclass
class BuildConfig:
    langs: list[str]
    sources: list[str] = field(default_factory=lambda: list(sources_.DEFAULT_SOURCES))
    valid_frac: float = 0.01
    test_frac: float = 0.06  # es is the smallest software pair: 6% keeps its test split above 2,000
    # General text is thinner (Dutch ~16k pairs), so it holds out a larger share: the hash band
    # [test+valid, test+valid+extra) is test for general sentences and train for software ones.
    general_test_frac: float = 0.08
    template_cap: int = 20  # English sentences kept per one-word-open template (general text)
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


class CorpusWriter:
    """Cleans, deduplicates and splits pairs as they stream in, and writes them.

    A sentence's split is fixed the first time its English side is seen (software sources
    are read first), so no English sentence sits in two splits, whatever its source,
    language or domain. Software pairs are deduplicated on (language, English, other) as
    before domains existed, which keeps the software part identical to earlier builds;
    general pairs also on (language, English): one translation per sentence and language.
    """

    def __init__(self, folder: Path, cfg: BuildConfig, held_out: set[str], reserved_keys: set[str] = frozenset()):
        self.cfg, self.held_out, self.reserved_keys = cfg, held_out, reserved_keys
        self.reserved_dropped = 0
        self.cleaners = {sources_.SOFTWARE: Cleaner(cfg.clean), sources_.GENERAL: Cleaner(cfg.clean, general=True)}
        self.templates = TemplateCap(cfg.template_cap)
        self.split: dict[str, str] = {}  # English key -> split
        self.seen: set[bytes] = set()
        self.raw: Counter = Counter()
        self.kept: Counter = Counter()
        self.origins: dict[str, set[str]] = {}  # source -> the packages/files its kept pairs came from
        self.duplicates = self.classify_dropped = 0
        self.files = {s: open(folder / f"{s}.tsv", "w", encoding="utf-8") for s in SPLITS}
        for f in self.files.values():
            write_header(f, CORPUS_HEADER)

    def add(self, raw: debian.RawPair, domain: str) -> None:
        self.raw[(raw.source, raw.lang)] += 1
        cleaned = self.cleaners[domain](raw.en, raw.xx, raw.lang)
        if cleaned is None:
            return
        en, xx = cleaned
        key = _key(en)
        if key in self.reserved_keys or _key(xx) in self.reserved_keys:  # a sentence of the out-of-genre benchmark
            self.reserved_dropped += 1
            return
        if self._duplicate(raw.lang, key, xx, domain):
            self.duplicates += 1
            return
        if domain == sources_.GENERAL and not self.templates.keep(en):
            return
        split = self.split.setdefault(key, self._split_of(en, domain))
        if split == "train" and key in self.held_out:
            self.classify_dropped += 1
            return
        self._write(raw, en, xx, split, domain)

    def add_word(self, raw: debian.RawPair) -> None:
        """A dictionary pair (a word or short phrase): too short for the sentence filters, so only
        normalised, kept from reserved and held-out text, deduplicated, and written to train."""
        self.raw[(raw.source, raw.lang)] += 1
        en, xx = normalize(raw.en), normalize(raw.xx)
        key = _key(en)
        if key in self.reserved_keys or _key(xx) in self.reserved_keys or mentions_reserved_text(en, xx):
            self.reserved_dropped += 1
            return
        if self.split.setdefault(key, "train") != "train" or key in self.held_out:
            return  # a valid or test sentence of another source: never a training pair
        if self._duplicate(raw.lang, key, xx, sources_.GENERAL):
            self.duplicates += 1
            return
        self._write(raw, en, xx, "train", sources_.GENERAL)

    def _write(self, raw: debian.RawPair, en: str, xx: str, split: str, domain: str) -> None:
        write_pair(self.files[split], Pair("en", raw.lang, en, xx, raw.source, domain))
        self.kept[(raw.source, raw.lang, split)] += 1
        self.origins.setdefault(raw.source, set()).add(raw.origin)

    def _duplicate(self, lang: str, key: str, xx: str, domain: str) -> bool:
        pair = hashlib.blake2b(f"{lang}\t{key}\t{xx.casefold()}".encode(), digest_size=16).digest()
        sentence = hashlib.blake2b(f"{lang}\t{key}".encode(), digest_size=16).digest()
        dup = pair in self.seen or (domain == sources_.GENERAL and sentence in self.seen)
        self.seen.update((pair, sentence))
        return dup

    def _split_of(self, en: str, domain: str) -> str:
        extra = self.cfg.general_test_frac - self.cfg.test_frac if domain == sources_.GENERAL else 0.0
        return split_of(en, self.cfg.valid_frac, self.cfg.test_frac, max(extra, 0.0))

    def held_out_texts(self) -> set[str]:
        """English keys of valid and test sentences: monolingual text must not repeat them."""
        return {k for k, s in self.split.items() if s != "train"}

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    def report(self) -> dict:
        drops = {d: c.dropped for d, c in self.cleaners.items()}
        return {
            "raw_pairs": {f"{s}/{l}": n for (s, l), n in sorted(self.raw.items())},
            "dropped_by_filter": {k: sum(d.get(k, 0) for d in drops.values()) for k in drops[sources_.GENERAL]},
            "dropped_by_filter_per_domain": drops,
            "template_capped_sentences": self.templates.dropped,
            "accelerator_marks_stripped": sum(c.accelerators_stripped for c in self.cleaners.values()),
            "duplicates_removed": self.duplicates,
            "held_out_for_classification": self.classify_dropped,
            "reserved_for_evaluation": self.reserved_dropped,
            "kept": {f"{s}/{l}/{sp}": n for (s, l, sp), n in sorted(self.kept.items())},
            # how broad each source is: a source whose pairs come from a handful of files is narrow
            "origins_per_source": {s: len(o) for s, o in sorted(self.origins.items())},
        }


def fetch(cache: debian.AptCache, chosen: list[sources_.Source], langs: list[str], progress: bool) -> dict[str, list[str]]:
    """Download and unpack every package the chosen sources need (a bar per package);
    returns source -> packages apt could not supply, so the build can say so and go on."""
    wanted = [(s.name, pkg) for s in chosen for pkg in s.packages(langs)]
    missing: dict[str, list[str]] = {}
    bar = tqdm(wanted, desc="fetch", unit=" pkg", disable=not progress)
    for source, pkg in bar:
        bar.set_postfix_str(pkg, refresh=False)
        if cache.package(pkg) is None:
            missing.setdefault(source, []).append(pkg)
    return missing


def write_mono(path: Path, cache: debian.AptCache, chosen: list[sources_.Source], langs: list[str],
               avoid: set[str], cfg: CleanConfig, errors: list[str], progress: bool) -> Counter:
    """mono.tsv: cleaned, deduplicated monolingual text, none of it a valid or test sentence."""
    kept: Counter = Counter()
    seen: set[bytes] = set()
    with open(path, "w", encoding="utf-8") as f:
        write_header(f, MONO_HEADER)
        for source in [s for s in chosen if s.kind in ("mono", "words")]:
            for m in tqdm(source.read(cache, langs, lambda e: errors.append(str(e))), desc=f"{source.name:9s}",
                          unit=" texts", disable=not progress, mininterval=1):
                text = normalize(m.text)
                digest = hashlib.blake2b(f"{m.lang}\t{text.casefold()}".encode(), digest_size=16).digest()
                ok = text == m.text if source.kind == "words" else mono_ok(text, cfg)  # a word list is clean already
                if not ok or digest in seen or _key(text) in avoid:
                    continue
                seen.add(digest)
                f.write(f"{m.lang}\t{text}\t{m.source}\n")
                kept[(m.source, m.lang)] += 1
    return kept


def mono_ok(text: str, cfg: CleanConfig) -> bool:
    """The pair filters that make sense for one side alone."""
    n = word_count(text)  # characters for Chinese, Japanese or Thai, which have no spaces to count
    return (cfg.min_words <= n <= cfg.max_words and len(text) <= cfg.max_chars
            and not has_markup(text, text) and not mostly_non_letters(text, text)
            and not mentions_reserved_text(text))


def build(out: Path, cfg: BuildConfig, cache_dir: Path, offline: bool = False, progress: bool = True) -> dict:
    langs = debian.check_lang_codes(cfg.langs)
    chosen = sources_.select(cfg.sources)
    cfg = replace(cfg, sources=[s.name for s in chosen])  # "default,freeorion" recorded as the names it stands for
    t0 = time.time()
    cache = debian.AptCache(cache_dir, offline=offline)
    cache.update(langs)
    missing = fetch(cache, chosen, langs, progress)
    for source, pkgs in missing.items():
        print(f"warning: source {source}: package(s) {', '.join(pkgs)} not available"
              f"{' in the offline cache' if offline else ' from apt'}; building without them")
    has_ddtp = any(s.name == "ddtp" for s in chosen)
    classify_rows, held_out = classification_set(cache, cfg) if has_ddtp else ([], set())
    errors: list[str] = []
    # Sentences of the reserved (out-of-genre) sources never enter a corpus, whichever package carries them.
    reserved_keys = reserved.reserved_keys(cache, langs)
    if not reserved_keys:
        print("warning: the reserved evaluation sources (" + ", ".join(s.package for s in reserved.RESERVED_SOURCES.values())
              + ") are not in the cache, so their sentences cannot be kept out of this corpus")
    with atomic_dir(out) as tmp:
        writer = CorpusWriter(tmp, cfg, held_out, reserved_keys)
        try:
            for source in [s for s in chosen if s.kind in ("parallel", "word-pairs")]:  # word pairs last
                pairs = source.read(cache, langs, lambda e: errors.append(str(e)))
                add = writer.add_word if source.kind == "word-pairs" else partial(writer.add, domain=source.domain)
                for raw in tqdm(pairs, desc=f"{source.name:9s}", unit=" pairs", disable=not progress, mininterval=1):
                    add(raw)
        finally:
            writer.close()
        found = {lang for (_, lang, _) in writer.kept}
        if [l for l in langs if l not in found]:
            raise UserError(f"no source carries language(s) {[l for l in langs if l not in found]}: check the codes "
                            "(DDTP and LibreOffice use e.g. pt_BR, zh_CN)")
        mono_kept = write_mono(tmp / "mono.tsv", cache, chosen, langs, writer.held_out_texts() | reserved_keys,
                               cfg.clean, errors, progress)
        if classify_rows:
            with open(tmp / "classify.tsv", "w", encoding="utf-8") as f:
                write_header(f, CLASSIFY_HEADER)
                for row in classify_rows:
                    f.write("\t".join(row) + "\n")
        for e in errors:
            print(f"warning: skipped {e}")
        stats = corpus_stats(tmp)
        stats["build"] = {"config": asdict(cfg), **writer.report(),
                          "mono_kept": {f"{s}/{l}": n for (s, l), n in sorted(mono_kept.items())},
                          "missing_packages": missing, "unreadable_files": errors,
                          "classify_packages": len({r[0] for r in classify_rows}),
                          "seconds": round(time.time() - t0, 1)}
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
        (tmp / "PROVENANCE.md").write_text(provenance(cfg, stats))
    return stats


def _key(text: str) -> str:
    return normalize(text).casefold()


def corpus_stats(folder: Path, with_build_report: bool = False) -> dict:
    """Pairs per language pair, split, domain and source, length percentiles (words), and
    monolingual texts per language and source; `with_build_report`: also the build's own report
    (filters, duplicates) from stats.json, which only the build knows."""
    folder = Path(folder)
    stats = _count_stats(folder)
    if with_build_report and (folder / "stats.json").exists():
        build_info = _saved_build_report(folder / "stats.json")
        if build_info is not None:
            stats["build"] = build_info
    return stats


def _saved_build_report(saved: Path) -> dict | None:
    try:
        build_info = read_json(saved, what="stats.json").get("build")
    except (ValueError, AttributeError):  # torn, hand-edited, not an object
        build_info = None
        warnings.warn(f"{saved} is torn or not a JSON object: its build report is left out; rebuild the corpus "
                      "(edge-xsent data build) to restore it")
    return build_info if isinstance(build_info, dict) else None


def _count_stats(folder: Path) -> dict:
    if not any((folder / f"{s}.tsv").exists() for s in SPLITS):
        raise UserError(f"{folder} is not a corpus folder: expected train.tsv, valid.tsv, test.tsv")
    counts: Counter = Counter()  # (domain, source, pair, split) -> pairs
    lengths: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for split in SPLITS:
        if (folder / f"{split}.tsv").exists():
            for p in read_corpus_split(folder / f"{split}.tsv"):
                pair = f"{p.lang_a}-{p.lang_b}"
                counts[(p.domain, p.source, pair, split)] += 1
                lengths[(p.domain, pair)].append((len(p.a.split()), len(p.b.split())))
    stats: dict = {"pairs": _by_pair(counts), "total": _totals(counts), "sources": {},
                   "domains": {d: {"pairs": _by_pair(counts, domain=d), "total": _totals(counts, domain=d)}
                               for d in sorted({k[0] for k in counts})},
                   "length_words": {}}
    for (domain, source, pair, split), n in sorted(counts.items()):
        entry = stats["sources"].setdefault(source, {"domain": domain, "total": 0, "langs": {}})
        entry["total"] += n
        entry["langs"].setdefault(pair.split("-")[1], dict.fromkeys(SPLITS, 0))[split] += n
    for (domain, pair), ls in sorted(lengths.items()):
        arr = np.array(ls)
        stats["length_words"].setdefault(domain, {})[pair] = {
            side: {f"p{q}": int(np.percentile(arr[:, i], q)) for q in (5, 50, 95, 99)}
            for i, side in enumerate(pair.split("-"))}
    if (folder / "mono.tsv").exists():
        mono: Counter = Counter((lang, source) for lang, _, source in read_mono(folder / "mono.tsv"))
        stats["mono"] = {lang: {s: n for (l, s), n in sorted(mono.items()) if l == lang} for lang in sorted({k[0] for k in mono})}
    if (folder / "classify.tsv").exists():
        rows = list(read_classify(folder / "classify.tsv"))
        stats["classify"] = {"packages": len({r[0] for r in rows}), "labels": dict(Counter(r[1] for r in rows if r[2] == "en")),
                             "langs": sorted({r[2] for r in rows})}
    return stats


def _by_pair(counts: Counter, domain: str | None = None) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SPLITS, 0))
    for (d, _, pair, split), n in counts.items():
        if domain is None or d == domain:
            out[pair][split] += n
    return {k: {**v, "total": sum(v.values())} for k, v in sorted(out.items())}


def _totals(counts: Counter, domain: str | None = None) -> dict[str, int]:
    return {s: sum(n for (d, _, _, sp), n in counts.items() if sp == s and domain in (None, d)) for s in SPLITS}


def _pair_table(pairs: dict, total: dict, lengths: dict | None) -> list[str]:
    head = f"{'pair':8s} {'train':>9s} {'valid':>7s} {'test':>7s}" + ("   words p50/p95 (en | other)" if lengths else "")
    lines = [head]
    for pair, c in pairs.items():
        row = f"{pair:8s} {c['train']:9,d} {c['valid']:7,d} {c['test']:7,d}"
        if lengths:
            lw, (a, b) = lengths[pair], pair.split("-")
            row += f"   {lw[a]['p50']}/{lw[a]['p95']} | {lw[b]['p50']}/{lw[b]['p95']}"
        lines.append(row)
    lines.append(f"{'total':8s} {total['train']:9,d} {total['valid']:7,d} {total['test']:7,d}")
    return lines


def format_stats(stats: dict) -> str:
    lines = []
    for domain, d in stats["domains"].items():
        lines += [f"[{domain}]", *_pair_table(d["pairs"], d["total"], stats["length_words"].get(domain)), ""]
    if len(stats["domains"]) > 1:
        lines += ["[all]", *_pair_table(stats["pairs"], stats["total"], None), ""]
    langs = sorted({l for s in stats["sources"].values() for l in s["langs"]})
    lines.append(f"{'source':10s} {'domain':8s} " + " ".join(f"{l:>7s}" for l in langs) + f" {'total':>8s}")
    for name, s in stats["sources"].items():
        cells = " ".join(f"{sum(s['langs'][l].values()):7,d}" if l in s["langs"] else f"{'-':>7s}" for l in langs)
        lines.append(f"{name:10s} {s['domain']:8s} {cells} {s['total']:8,d}")
    if "mono" in stats:
        lines.append("monolingual: " + ", ".join(f"{l} {sum(v.values()):,d} ({', '.join(f'{s} {n:,d}' for s, n in v.items())})"
                                                 for l, v in stats["mono"].items()))
    if "classify" in stats:
        c = stats["classify"]
        lines.append(f"classify: {c['packages']} packages, labels {c['labels']}, langs {c['langs']}")
    if "build" in stats:
        try:
            lines += _build_report(stats["build"])
        except (KeyError, TypeError, ValueError, AttributeError):  # a torn or hand-edited stats.json
            lines.append("build report: unreadable (stats.json has missing or mistyped fields); rebuild to restore it")
    return "\n".join(lines)


def _build_report(b: dict) -> list[str]:
    lines = ["dropped by filter: " + ", ".join(f"{k} {v:,d}" for k, v in b["dropped_by_filter"].items() if v),
             f"accelerator marks stripped {b['accelerator_marks_stripped']:,d}; duplicates removed "
             f"{b['duplicates_removed']:,d}; held out for classification {b['held_out_for_classification']:,d}; "
             f"English sentences over the template cap {b.get('template_capped_sentences', 0):,d}"]
    return lines + [f"missing: {source}: {', '.join(pkgs)}" for source, pkgs in b.get("missing_packages", {}).items()]


def provenance(cfg: BuildConfig, stats: dict) -> str:
    lines = ["# Provenance", "", "Built by `edge-xsent data build` from Debian 12 packages fetched with apt.", "",
             f"Languages: en with {', '.join(cfg.langs)}.", "", "## Sources and licences", ""]
    lines += [f"- **{s}** ({sources_.SOURCES[s].domain}): {sources_.SOURCES[s].licence}" for s in cfg.sources]
    lines += ["", "Reserved for independent evaluation and never read: Bible and Quran text, the Universal "
              "Declaration of Human Rights.", "", "## Counts", "", "```", format_stats(stats), "```", ""]
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
