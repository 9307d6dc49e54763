"""`data build` end to end, offline, on a small fake apt cache laid out like the real one."""

import json
import os
from pathlib import Path

import pytest

from edge_xsent.data.build import BuildConfig, build
from edge_xsent.data.corpus import SPLITS, read_classify, read_corpus_split
from edge_xsent.errors import UserError
from edge_xsent.text import normalize
from test_debian import make_mo

THINGS = ["image", "audio", "video", "archive", "calendar", "network", "font", "spreadsheet", "database", "email"]
WORDS = {"fr": ("Outil numéro {i} pour gérer les fichiers {t} facilement", "Ce paquet fournit la bibliothèque partagée {t} version {i}."),
         "de": ("Werkzeug Nummer {i} zur einfachen Verwaltung von {t} Dateien", "Dieses Paket enthält die gemeinsame Bibliothek {t} Version {i}."),
         "it": ("Strumento numero {i} per gestire facilmente i file {t}", "Questo pacchetto fornisce la libreria condivisa {t} versione {i}.")}
EN = ("Tool number {i} to manage {t} files with ease", "This package provides the shared {t} library version {i}.")


def translation(lang: str, n: int) -> str:
    out = []
    for i in range(n):
        t = THINGS[i % len(THINGS)]
        short, long = (EN if lang == "en" else WORDS[lang])
        out.append(f"Package: pkg{i}\nDescription-md5: md5{i}\nDescription-{lang}: {short.format(i=i, t=t)}\n"
                   f" {long.format(i=i, t=t)}\n")
    return "\n".join(out)


def add_package(cache: Path, name: str, files: dict[str, bytes | str]) -> None:
    """An extracted package in the cache, as `AptCache.package` leaves it."""
    base = cache / "x" / name
    for rel, content in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    (base / ".done").touch()


@pytest.fixture
def fake_cache(tmp_path) -> Path:
    root = tmp_path / "cache"
    lists = root / "lists"
    lists.mkdir(parents=True)
    for lang in ("en", "fr", "de", "it"):
        (lists / f"deb_dists_bookworm_main_i18n_Translation-{lang}").write_text(translation(lang, 60))
    (lists / "deb_dists_bookworm_main_binary-amd64_Packages").write_text(
        "\n".join(f"Package: pkg{i}\nSection: {'libs' if i % 2 else 'contrib/games'}\n" for i in range(60)))

    def package(name: str, files: dict[str, bytes | str]) -> None:
        add_package(root, name, files)

    def page(pars):
        return "".join(f'<p id="par_id{k}" class="paragraph">{v}</p>' for k, v in pars.items())

    package("libreoffice-help-en-us", {"usr/share/libreoffice/help/en-US/text/a.html": page(
        {1: "Choose <span class='emph'>Format - Cells</span> to open the dialog.", 2: "Enter the value of the new cell here."})})
    package("libreoffice-help-fr", {"usr/share/libreoffice/help/fr/text/a.html": page(
        {1: "Choisissez <span class='emph'>Format - Cellules</span> pour ouvrir la boîte de dialogue.",
         2: "Saisissez la valeur de la nouvelle cellule ici."})})
    shared = (b"Remove the selected files from the list", "Supprimer les fichiers sélectionnés de la liste".encode())
    package("coreutils", {"usr/share/locale/fr/LC_MESSAGES/coreutils.mo": make_mo([
        shared, (b"cannot open %s for reading", "impossible d'ouvrir %s en lecture".encode()),
        (b"Print the version number and exit", b"Print the version number and exit"),
        (b"Quit", b"Quitter")])})
    package("libreoffice-l10n-fr", {"usr/lib/libreoffice/program/resource/fr/LC_MESSAGES/sd.mo": make_mo([
        shared, (b"STR_X\x04~Insert a new slide after this one", "~Insérer une nouvelle diapo après celle-ci".encode())])})
    return root


def test_build_end_to_end(fake_cache, tmp_path):
    out = tmp_path / "corpus"
    cfg = BuildConfig(langs=["fr", "de", "it"], min_label_packages=5, max_label_packages=10, test_frac=0.2, valid_frac=0.1)
    stats = build(out, cfg, fake_cache, offline=True, progress=False)
    b = stats["build"]
    assert set(stats["sources"]) == {"ddtp", "lo-help", "gettext", "lo-ui"}
    assert b["dropped_by_filter"]["placeholder"] == 1 and b["dropped_by_filter"]["identical"] == 1
    assert b["dropped_by_filter"]["too_short"] >= 1
    assert b["duplicates_removed"] == 1  # the same message in coreutils and LibreOffice
    assert b["accelerator_marks_stripped"] == 1
    # gettext's pairs come from coreutils' .mo only (LibreOffice's UI is lo-ui); lo-help's from one page
    assert b["origins_per_source"]["gettext"] == 1 and b["origins_per_source"]["lo-help"] == 1

    rows = {s: list(read_corpus_split(out / f"{s}.tsv")) for s in SPLITS}
    assert sum(map(len, rows.values())) == sum(stats["total"].values())
    where = {}
    for split, pairs in rows.items():
        for p in pairs:
            assert where.setdefault(normalize(p.a).casefold(), split) == split  # never two splits
    assert any(p.b == "Insérer une nouvelle diapo après celle-ci" for ps in rows.values() for p in ps)
    assert any(p.b.startswith("Choisissez Format - Cellules") for ps in rows.values() for p in ps)

    labelled = list(read_classify(out / "classify.tsv"))
    assert {r[2] for r in labelled} == {"en", "fr", "de", "it"} and {r[1] for r in labelled} == {"libs", "games"}
    assert len({r[0] for r in labelled}) == 20  # 10 per label
    held = {normalize(t).casefold() for _, _, lang, t in labelled if lang == "en"}
    pkgs = {r[0] for r in labelled}
    for i in range(60):
        short = EN[0].format(i=i, t=THINGS[i % 10]).casefold()
        if f"pkg{i}" in pkgs:
            assert short not in {normalize(p.a).casefold() for p in rows["train"]}
    assert held and b["held_out_for_classification"] > 0
    assert "MPL-2.0" in (out / "PROVENANCE.md").read_text()
    assert json.loads((out / "stats.json").read_text())["build"]["classify_packages"] == 20


def test_build_unknown_language_and_offline_cache(fake_cache, tmp_path):
    with pytest.raises(UserError, match="lacks lists"):
        build(tmp_path / "c", BuildConfig(langs=["es"]), fake_cache, offline=True, progress=False)
    with pytest.raises(UserError, match="unknown source"):
        build(tmp_path / "c", BuildConfig(langs=["fr"], sources=["wikipedia"]), fake_cache, offline=True, progress=False)
    assert not (tmp_path / "c").exists()


def test_failed_build_keeps_previous_corpus(fake_cache, tmp_path):
    out = tmp_path / "corpus"
    build(out, BuildConfig(langs=["fr"], min_label_packages=5), fake_cache, offline=True, progress=False)
    before = (out / "train.tsv").read_text()
    (fake_cache / "lists" / "deb_dists_bookworm_main_i18n_Translation-fr").write_text("")  # nothing for fr now
    with pytest.raises(UserError, match="no source carries"):
        build(out, BuildConfig(langs=["fr"], sources=["ddtp"]), fake_cache, offline=True, progress=False)
    assert (out / "train.tsv").read_text() == before


@pytest.mark.parametrize("says", ["E: Can't select candidate version from package libreoffice-help-ar as it has no "
                                  "candidate", "E: Unable to locate package libreoffice-help-xx"])
def test_a_package_apt_cannot_supply_is_skipped_and_reported(tmp_path, monkeypatch, says):
    """apt-get's own words (bookworm's, for Arabic LibreOffice help and an unknown name): skipped."""
    from edge_xsent.data.debian import AptCache

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho \"{says}\" >&2\nexit 100\n")
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    cache = AptCache(tmp_path / "cache")
    assert cache.package("libreoffice-help-ar") is None and cache.missing == {"libreoffice-help-ar"}
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho 'E: Failed to fetch: network down' >&2\nexit 100\n")
    with pytest.raises(UserError, match="network down"):
        cache.package("libreoffice-help-de")


def test_the_command_builds_and_says_what_it_wrote(fake_cache, tmp_path):
    from conftest import run_cli

    res = run_cli("data", "build", "--langs", "fr", "--offline", "--cache", str(fake_cache), "--out",
                  str(tmp_path / "corpus"), "--quiet")
    assert res.returncode == 0, res.stderr
    assert f"wrote {tmp_path / 'corpus'}/ in" in res.stdout and (tmp_path / "corpus" / "stats.json").is_file()
