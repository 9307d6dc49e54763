"""Training genres beyond software and games: user help and encyclopedic text.

  freeorion   FreeOrion's string tables (freeorion-data): species, technologies, buildings,
              an in-game encyclopedia; entries aligned by key, paragraphs and sentences by order
  gnome-help  GNOME's desktop help for end users (gnome-user-docs): each translated Mallard
              page beside its English original, <p> and <title> elements aligned by order
  gnome-app-help  the same for the help of GNOME's applications and games (GNOME_APP_HELP_PACKAGES)
  kde-help    KDE's application and game handbooks (DocBook, KDE_HELP_PACKAGES): each translated
              file beside its English original, paragraphs and titles aligned by order once the
              credits chapter is cut (docbook.py)

Reserved genres (star lore, research reports) are in `reserved.py` and never read here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from edge_xsent.data import docbook, formats
from edge_xsent.data.align import align_paragraphs, element_texts
from edge_xsent.data.debian import AptCache, RawPair
from edge_xsent.data.formats import ErrorSink, FormatError, report
from edge_xsent.data.games import locale_matches

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


def _mallard_pairs(root: Path, langs: list[str], source: str, on_error: ErrorSink | None) -> Iterator[RawPair]:
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
                    yield RawPair(lang, a, b, source, f"{folder.name}/{rel}")


def read_gnome_help(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    root = cache.package("gnome-user-docs")
    if root is not None:
        yield from _mallard_pairs(root, langs, "gnome-help", on_error)


# Bookworm's packages with Mallard help pages in these languages (>= 24 pages over them), from
# Debian's Contents-{all,amd64} indexes; gnome-user-docs is `gnome-help`, gnome-devel-docs is for programmers.
GNOME_APP_HELP_PACKAGES = (
    "evolution-common", "evince-common", "atril-common", "anjuta-common", "gedit-common", "seahorse",
    "gnome-calculator", "eog", "mate-calc-common", "orca", "gnome-terminal-data", "epiphany-browser-data",
    "gnome-boxes", "gnome-system-monitor", "totem-common", "shotwell-common", "gnote", "gnome-dictionary",
    "gthumb-data", "glabels-data", "font-manager-common", "zenity-common", "gbrainy", "gtranslator", "pulseeffects",
    "iagno", "simple-scan", "file-roller", "cheese-common", "brasero-common", "geary", "gnome-sudoku", "frogr-data",
    "gnome-music", "baobab", "endeavour-common", "burner-common", "parlatype", "gnome-clocks", "gnome-chess",
    "pitivi", "bijiben", "ghex", "kupfer", "five-or-more", "polari", "gnome-mahjongg", "accerciser",
    "modem-manager-gui-help", "deja-dup", "gnome-mines", "easytag", "ocrfeeder", "vinagre", "swell-foop",
    "gnome-photos", "hamster-time-tracker", "gnome-text-editor", "gnome-system-log", "xiphos-data", "quadrapassel",
    "meld", "lightsoff", "gnome-tetravex", "gnome-robots", "gnome-nibbles", "four-in-a-row", "malcontent-gui",
    "latexila-data", "gnome-taquin", "hitori", "devhelp-common", "gnome-nettool", "giggle", "metadata-cleaner",
    "gnome-logs")


def read_gnome_app_help(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    for package in GNOME_APP_HELP_PACKAGES:
        root = cache.package(package)
        if root is not None:
            yield from _mallard_pairs(root, langs, "gnome-app-help", on_error)


# Bookworm's packages with a KDE handbook in at least one of these languages
# (usr/share/doc/HTML/<lang>/<app>/index.docbook in Debian's Contents-{all,amd64} indexes); kdoctools5
# holds the shared entities. Left out: kstars-data, whose handbook is mostly astronomy lessons, the
# topic of the reserved star lore (stellarium), so the benchmark stays out of genre.
KDE_HELP_PACKAGES = (
    "akonadi-import-wizard", "akregator", "ark", "artikulate", "blinken", "bluedevil", "bomber", "bovo",
    "calligraplan", "cantor", "cervisia", "choqok", "dolphin", "dragonplayer", "elisa", "filelight", "granatier",
    "gwenview", "juk", "k3b-i18n", "kaddressbook", "kajongg", "kalarm", "kalgebra-common", "kalzium-data", "kamera",
    "kamoso", "kanagram", "kapman", "kapptemplate", "kate5-data", "katomic", "kbackup", "kbibtex-data", "kblackbox",
    "kblocks", "kbounce", "kbreakout", "kbruch", "kcachegrind", "kcalc", "kcharselect", "kde-cli-tools-data",
    "kde-config-cddb", "kde-config-cron", "kde-config-tablet", "kde-spectacle", "kdeconnect", "kdenlive-data",
    "kdepim-runtime", "kdepim-themeeditors", "kdesvn", "kdevelop-data", "kdf", "kdiamond", "kdiff3-doc",
    "keditbookmarks", "kexi-data", "kfind", "kfloppy", "kfourinline", "kgamma5", "kgeography-data", "kgeotag",
    "kget", "kgoldrunner", "kgpg", "khangman", "khelpcenter", "khotkeys-data", "kid3", "kig", "kigo", "kile-doc",
    "killbots", "kimagemapeditor", "kinfocenter", "kio", "kio-audiocd", "kio-extras-data", "kio-gdrive",
    "kio-gopher", "kiriki", "kiten", "kjumpingcube", "kleopatra", "klettres-data", "klickety", "klines", "kmag",
    "kmahjongg", "kmail", "kmenuedit", "kmines", "kmix", "kmousetool", "kmouth", "kmplot", "kmymoney-common",
    "knavalbattle", "knetwalk", "knights", "knotes", "kolf", "kollision", "kolourpaint", "kompare", "konqueror",
    "konquest", "konsole", "konsolekalendar", "kontact", "kontrast", "konversation-data", "korganizer", "kpat",
    "kphotoalbum", "krdc", "kreversi", "krfb", "kronometer", "kruler", "krusader", "kshisen", "ksirk", "ksnakeduel",
    "kspaceduel", "ksquares", "ksudoku", "ksystemlog", "kteatime", "ktechlab", "ktimer",
    "ktimetracker", "ktorrent-data", "ktouch-data", "ktuberling-data", "kturtle", "kubrick", "kwalletmanager",
    "kwave", "kwin-data", "kwordquiz", "kwrite", "kxstitch-common", "libkf5kdelibs4support-data", "lokalize",
    "lskat-data", "marble-data", "minuet-data", "okteta", "okular", "palapeli-data", "parley-data",
    "partitionmanager", "picmi", "pim-data-exporter", "pim-sieve-editor", "plasma-desktop-data", "plasma-pa",
    "plasma-workspace-data", "powerdevil-data", "rkward-data", "rocs", "rsibreak", "skanlite", "skrooge-common",
    "step", "sweeper", "systemsettings", "tellico-doc", "umbrello-data")


def read_kde_help(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    tools = cache.package("kdoctools5")
    if tools is None:
        return
    for package in KDE_HELP_PACKAGES:
        root = cache.package(package)
        html = root / "usr/share/doc/HTML" if root is not None else None
        if html is not None and (html / "en").is_dir():
            yield from _handbook_pairs(html, tools, langs, on_error)


def _handbook_pairs(html: Path, tools: Path, langs: list[str], on_error: ErrorSink | None) -> Iterator[RawPair]:
    """Each English handbook file, read once, beside the same file in every language folder."""
    folders = [(p.name, l) for p in sorted(html.iterdir()) if p.is_dir() and p.name != "en"
               for l in langs if locale_matches(p.name, l)]
    for english in sorted((html / "en").rglob("*.docbook")):
        rel = english.relative_to(html / "en")
        try:
            en = docbook.read_handbook(english, tools, "en")
        except FormatError as e:
            report(on_error, e)
            continue
        for folder, lang in folders:
            page = html / folder / rel
            if not page.exists():
                continue
            try:
                xx = docbook.read_handbook(page, tools, folder)
            except FormatError as e:
                report(on_error, e)
                continue
            for a, b in align_paragraphs(en, xx):
                if a and b:
                    yield RawPair(lang, a, b, "kde-help", f"{folder}/{rel}")
