"""Parallel text from Debian's own packages, fetched with the ordinary apt tools.

Four sources, each a reader that yields raw (English, other) pairs:
  ddtp       package descriptions and their translations (Description-md5 match)
  lo-help    LibreOffice help pages, paragraphs matched by file and paragraph id
  gettext    .mo catalogues of common Debian packages (msgid -> msgstr)
  lo-ui      LibreOffice UI strings (.mo files of libreoffice-l10n-XX)

Everything apt fetches lands in a cache folder (own lists, own .deb files), so a second
build is fast and needs no network. Adding a language is a code on the command line:
every reader derives its package and path names from it.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Iterable, Iterator

from edge_xsent.errors import UserError
from edge_xsent.data.formats import ErrorSink, read_mo, skip_bad_file

LANG_CODE = re.compile(r"^[a-z]{2,3}(?:[_-][A-Za-z]{2,4})?$")


@dataclass(frozen=True)
class RawPair:
    lang: str  # the non-English side's language code
    en: str
    xx: str
    source: str
    origin: str  # package or file the pair came from (provenance, classification split)


def check_lang_codes(langs: Iterable[str]) -> list[str]:
    out = []
    for lang in langs:
        lang = lang.strip()
        if not LANG_CODE.match(lang):
            raise UserError(f"unknown language code {lang!r}: use ISO 639 codes such as fr, de, pt_BR")
        if lang.lower().startswith("en"):
            raise UserError("English is always the pivot side: list only the other languages (e.g. --langs fr,de)")
        out.append(lang)
    if not out:
        raise UserError("no languages given: pass e.g. --langs fr,de,es,it")
    return out


def _underscore(lang: str) -> str:  # pt-br -> pt_BR (DDTP, gettext)
    parts = re.split(r"[-_]", lang)
    return parts[0].lower() + ("_" + parts[1].upper() if len(parts) > 1 else "")


def _hyphen(lang: str) -> str:  # pt_BR -> pt-BR (LibreOffice help folders)
    return _underscore(lang).replace("_", "-")


# What apt-get says of a package it cannot supply: a name it does not know, a virtual package
# (libreoffice-help-ar: "Can't select candidate version ... as it has no candidate"), one without a
# version. Each is a package skipped and reported, never a stopped build.
PACKAGE_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")  # Debian policy 5.6.1: never an option of apt-get's
NO_SUCH_PACKAGE = ("Unable to locate package", "has no installation candidate", "Can't select candidate version")


class AptCache:
    """apt-get with its own lists and download folder, so nothing system-wide changes."""

    def __init__(self, root: Path, offline: bool = False):
        self.root = Path(root)
        self.lists = self.root / "lists"
        self.debs = self.root / "debs"
        self.extracted = self.root / "x"
        self.offline = offline
        self.missing: set[str] = set()  # packages apt could not supply (or, offline, the cache lacks)
        for d in (self.lists / "partial", self.debs, self.extracted, self.root / "pkgcache"):
            d.mkdir(parents=True, exist_ok=True)

    def _apt_opts(self, langs: Iterable[str] = ()) -> list[str]:
        opts = [
            f"-oDir::State::Lists={self.lists}",
            f"-oDir::Cache={self.root / 'pkgcache'}",
            "-oDebug::NoLocking=1",
            "-oAPT::Sandbox::User=root" if os.geteuid() == 0 else "-oAPT::Sandbox::User=",
        ]
        if langs:
            opts.append("-oAcquire::Languages=" + ",".join(["en", *(_underscore(l) for l in langs)]))
        return opts

    def update(self, langs: list[str]) -> None:
        """Fetch package lists and DDTP translation indexes unless the cache has them. Languages
        without a DDTP index (pt_BR) are remembered as fetched, so an offline rebuild accepts them."""
        done = self.root / "updated-langs.txt"
        known = {n.split("Translation-")[1].split(".")[0] for n in (p.name for p in self.lists.glob("*_i18n_Translation-*"))}
        known |= set(done.read_text().split()) if done.exists() else set()
        wanted = ["en", *(_underscore(l) for l in langs)]
        missing = [l for l in wanted if l not in known]
        if not missing and any(self.lists.glob("*binary-*_Packages*")):
            return
        if self.offline:
            raise UserError(f"offline build, but the apt cache {self.lists} lacks lists for {missing}: run once without --offline")
        _run(["apt-get", "update", "-q", *self._apt_opts(langs)], "apt-get update")
        done.write_text(" ".join(sorted(known | set(wanted))) + "\n")

    def list_files(self, pattern: str) -> list[Path]:
        return sorted(p for p in self.lists.glob(pattern) if not p.name.endswith(".diff_Index"))

    def read_list(self, path: Path) -> str:
        """Decompress one apt list file (lz4, xz, gz or plain) with apt's own helper."""
        out = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], capture_output=True, check=False)
        if out.returncode != 0:
            raise UserError(f"cannot read apt list {path}: {out.stderr.decode(errors='replace').strip()}")
        return out.stdout.decode("utf-8", errors="replace")

    def package(self, name: str) -> Path | None:
        """The extracted tree of a package, downloading it once; None (and noted in `missing`)
        if apt has no such package."""
        tree = self._package(name)
        if tree is None:
            self.missing.add(name)
        return tree

    def _package(self, name: str) -> Path | None:
        if not PACKAGE_NAME.fullmatch(name):
            raise UserError(f"{name!r} is not a Debian package name; check the language codes and sources")
        target = self.extracted / name
        if (target / ".done").exists():
            return target
        debs = sorted(self.debs.glob(f"{name}_*.deb"))
        if not debs:
            if self.offline:
                return None
            res = subprocess.run(["apt-get", "download", "-q", *self._apt_opts(), name],
                                 cwd=self.debs, capture_output=True, text=True)
            if res.returncode != 0:
                if any(m in res.stderr for m in NO_SUCH_PACKAGE):
                    return None
                raise UserError(f"apt-get download {name} failed: {res.stderr.strip()[-300:]}")
            debs = sorted(self.debs.glob(f"{name}_*.deb"))
            if not debs:
                return None
        shutil.rmtree(target, ignore_errors=True)
        _run(["dpkg-deb", "-x", str(debs[-1]), str(target)], f"dpkg-deb -x {debs[-1].name}")
        (target / ".done").touch()
        return target


def _run(cmd: list[str], what: str) -> None:
    if shutil.which(cmd[0]) is None:
        raise UserError(f"{cmd[0]} not found: building the Debian corpus needs a Debian/Ubuntu machine with apt")
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"{what} failed (exit {res.returncode}): {res.stderr.strip()[-500:]}")


# ----------------------------------------------------------------------------- DDTP

def parse_deb822(text: str) -> Iterator[dict[str, str]]:
    """Paragraphs of a Debian control-style file; continuation lines keep their newline."""
    record: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if record:
                yield record
            record, key = {}, None
        elif line[0] in " \t" and key:
            record[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            record[key] = value.strip()
    if record:
        yield record


def description_paragraphs(desc: str) -> list[str]:
    """Short description, then each long-description paragraph (' .' separates them)."""
    lines = desc.split("\n")
    paras, cur = [lines[0].strip()], []
    for line in lines[1:]:
        line = line[1:] if line.startswith(" ") else line
        if line.strip() == ".":
            paras.append(" ".join(cur))
            cur = []
        else:
            cur.append(re.sub(r"^\s*[*+-]\s+", "", line).strip())
    if cur:
        paras.append(" ".join(cur))
    return [p for p in paras if p]


def ddtp_records(cache: AptCache, lang: str) -> list[tuple[str, str, str]]:
    """(package, Description-md5, description) of one language's Translation files."""
    out = []
    for path in cache.list_files(f"*_i18n_Translation-{_underscore(lang)}*"):
        for rec in parse_deb822(cache.read_list(path)):
            md5 = rec.get("Description-md5")
            desc = rec.get(f"Description-{_underscore(lang)}")
            if md5 and desc:
                out.append((rec.get("Package", ""), md5, desc))
    return out


def ddtp_descriptions(cache: AptCache, lang: str) -> dict[str, tuple[str, str]]:
    """Description-md5 -> (first package, description): one entry per distinct text."""
    out: dict[str, tuple[str, str]] = {}
    for pkg, md5, desc in ddtp_records(cache, lang):
        out.setdefault(md5, (pkg, desc))
    return out


def ddtp_by_package(cache: AptCache, lang: str) -> dict[str, str]:
    """Package -> description in one language."""
    return {pkg: desc for pkg, _, desc in ddtp_records(cache, lang)}


def package_sections(cache: AptCache) -> dict[str, str]:
    """Package -> archive Section, from the Packages indexes."""
    out: dict[str, str] = {}
    for path in cache.list_files("*binary-*_Packages*"):
        for rec in parse_deb822(cache.read_list(path)):
            if "Package" in rec and "Section" in rec:
                out.setdefault(rec["Package"], rec["Section"])
    return out


def read_ddtp(cache: AptCache, langs: list[str]) -> Iterator[RawPair]:
    english = ddtp_descriptions(cache, "en")
    for lang in langs:
        for md5, (pkg, desc) in ddtp_descriptions(cache, lang).items():
            if md5 not in english:
                continue
            en_paras = description_paragraphs(english[md5][1])
            xx_paras = description_paragraphs(desc)
            # The short descriptions always align; paragraphs only when both sides have as many.
            pairs = zip(en_paras, xx_paras) if len(en_paras) == len(xx_paras) else zip(en_paras[:1], xx_paras[:1])
            for en, xx in pairs:
                yield RawPair(lang, en, xx, "ddtp", pkg)


# ----------------------------------------------------------------------------- LibreOffice help

_PARA = re.compile(r'<(p|h[1-6])\s+id="((?:par|hd)_id[^"]*)"[^>]*>(.*?)</\1>', re.S)


class _VisibleText(HTMLParser):
    """Text of an HTML fragment, without subtrees marked hidden (macOS-only menu names)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden_depth = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "input", "meta"):
            return
        if self.hidden_depth or any(k == "hidden" for k, _ in attrs):
            self.hidden_depth += 1

    def handle_endtag(self, tag):
        if self.hidden_depth and tag not in ("br", "img", "input", "meta"):
            self.hidden_depth -= 1

    def handle_data(self, data):
        if not self.hidden_depth:
            self.parts.append(data)


def html_paragraphs(page: str) -> dict[str, str]:
    """Paragraph id -> visible text, first occurrence of each id."""
    out: dict[str, str] = {}
    for _, pid, inner in _PARA.findall(page):
        if pid in out:
            continue
        parser = _VisibleText()
        parser.feed(inner)
        parser.close()
        out[pid] = html.unescape("".join(parser.parts))
    return out


def read_lo_help(cache: AptCache, langs: list[str]) -> Iterator[RawPair]:
    en_root = cache.package("libreoffice-help-en-us")
    if en_root is None:
        return
    en_dir = en_root / "usr/share/libreoffice/help/en-US"
    en_pages = {p.relative_to(en_dir): p for p in en_dir.rglob("*.html")}
    for lang in langs:
        root = cache.package(f"libreoffice-help-{_hyphen(lang).lower()}")
        if root is None:
            continue
        xx_dir = root / "usr/share/libreoffice/help" / _hyphen(lang)
        if not xx_dir.is_dir():  # some packages use the bare language code
            xx_dir = root / "usr/share/libreoffice/help" / lang.split("_")[0].split("-")[0]
        for rel, en_path in sorted(en_pages.items()):
            xx_path = xx_dir / rel
            if not xx_path.exists():
                continue
            en_par = html_paragraphs(en_path.read_text(encoding="utf-8", errors="replace"))
            xx_par = html_paragraphs(xx_path.read_text(encoding="utf-8", errors="replace"))
            for pid, en in en_par.items():
                if pid in xx_par:
                    yield RawPair(lang, en, xx_par[pid], "lo-help", str(rel))


# ----------------------------------------------------------------------------- gettext catalogues

# Packages whose .mo files carry many translated messages (measured: DATA.md).
GETTEXT_PACKAGES = [
    "coreutils", "git", "binutils-common", "gcc-12-locales", "postgresql-15", "iso-codes", "tar", "grep",
    "sed", "findutils", "diffutils", "bash", "apt", "dpkg", "dpkg-dev", "gettext", "wget", "gnupg-l10n",
    "util-linux-locales", "e2fsprogs-l10n", "libc-l10n", "make", "nano", "vim-runtime", "bison", "gawk",
    "libgpg-error-l10n", "procps", "psmisc", "passwd", "sudo", "cups-common", "gimp-data", "libgtk-3-common",
    "libglib2.0-data", "xfce4-panel", "gnome-control-center-data", "systemd", "network-manager",
]


def _mo_files(root: Path, lang: str) -> list[Path]:
    code = _underscore(lang)
    return sorted(p for p in root.rglob("*.mo") if p.parent.name == "LC_MESSAGES" and p.parent.parent.name == code)


def read_catalogues(cache: AptCache, langs: list[str], on_error: ErrorSink | None, packages: list[str], source: str,
                    find: Callable[[Path, str], Iterable[Path]] = _mo_files, read: Callable[[Path], Iterator] = read_mo,
                    clean: Callable[[str], str] = lambda en: en) -> Iterator[RawPair]:
    """Pairs from translation catalogues: each package's files for each language (`find`, default
    the installed .mo files), each file's (English, translation) pairs (`read`, default read_mo),
    the English side passed through `clean`. A broken file is reported and skipped."""
    for pkg in packages:
        root = cache.package(pkg)
        if root is None:
            continue
        for lang in langs:
            for path in find(root, lang):
                for en, xx in skip_bad_file(on_error, read(path)):
                    yield RawPair(lang, clean(en), xx, source, f"{pkg}:{path.name}")


def read_gettext(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None,
                 packages: list[str] = GETTEXT_PACKAGES, source: str = "gettext") -> Iterator[RawPair]:
    return read_catalogues(cache, langs, on_error, packages, source)


def read_lo_ui(cache: AptCache, langs: list[str], on_error: ErrorSink | None = None) -> Iterator[RawPair]:
    for lang in langs:
        yield from read_gettext(cache, [lang], on_error, [f"libreoffice-l10n-{_hyphen(lang).lower()}"], "lo-ui")
