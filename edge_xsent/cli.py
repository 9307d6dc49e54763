"""The `edge-xsent` command: a thin layer that parses, calls the library and prints."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from .errors import UserError

DEFAULT_CACHE = Path.home() / ".cache" / "edge-xsent" / "apt"


def user_errors(fn):
    """UserError -> one readable line and exit 1; a traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="edge-xsent")
def main(debug: bool) -> None:
    """Train, export, benchmark and evaluate lightweight cross-lingual sentence encoders."""


@main.group()
def data() -> None:
    """Build and inspect parallel corpora."""


def _langs(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@data.command("build")
@click.option("--langs", default="fr,de,es,it", show_default=True, help="Languages paired with English, comma-separated.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("corpus"), show_default=True, help="Corpus folder to write.")
@click.option("--sources", default="ddtp,lo-help,gettext,lo-ui", show_default=True, help="Debian sources to read.")
@click.option("--cache", type=click.Path(path_type=Path), default=DEFAULT_CACHE, show_default=True,
              help="Where apt lists and .deb files are kept; a second build reuses them.")
@click.option("--offline", is_flag=True, help="Use only the cache; never call the network.")
@click.option("--test-frac", type=float, default=0.06, show_default=True)
@click.option("--valid-frac", type=float, default=0.01, show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bars.")
@user_errors
def data_build(langs, out, sources, cache, offline, test_frac, valid_frac, quiet):
    """Build a cleaned, deduplicated, split corpus from Debian's packages (no web needed).

    \b
    Examples:
      edge-xsent data build --langs fr,de,es,it --out corpus
      edge-xsent data build --langs pt_BR,nl --sources ddtp,lo-help --out corpus-pt-nl
      edge-xsent data build --offline          # rebuild from the download cache
    """
    from .data.build import BuildConfig, build, format_stats

    cfg = BuildConfig(langs=_langs(langs), sources=_langs(sources), test_frac=test_frac, valid_frac=valid_frac)
    stats = build(out, cfg, cache, offline=offline, progress=not quiet)
    click.echo(format_stats(stats))
    click.echo(f"wrote {out}/ in {stats['build']['seconds']} s")


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
    from .data.build import corpus_stats, format_stats

    stats = corpus_stats(folder)
    saved = Path(folder) / "stats.json"
    if saved.exists():  # keep the build report (filters, duplicates) that only the build knows
        build_info = json.loads(saved.read_text()).get("build")
        if build_info:
            stats["build"] = build_info
    click.echo(json.dumps(stats, indent=2, ensure_ascii=False) if as_json else format_stats(stats))


_TRAIN_FLAGS = {  # flag -> (TrainConfig key or model.<key>, type)
    "data": ("data", str), "out": ("out", str), "langs": ("langs", str), "objective": ("objective", str),
    "gen_weight": ("gen_weight", float), "align_weight": ("align_weight", float), "sim_weight": ("sim_weight", float),
    "batch_size": ("batch_size", int), "lr": ("lr", float), "warmup_steps": ("warmup_steps", int),
    "max_steps": ("max_steps", int), "eval_every": ("eval_every", int), "checkpoint_every": ("checkpoint_every", int),
    "valid_pairs": ("valid_pairs", int), "max_train_pairs": ("max_train_pairs", int), "seed": ("seed", int),
    "device": ("device", str), "threads": ("threads", int), "tokenizer": ("tokenizer", str),
    "layers": ("model.n_layers", int), "d_model": ("model.d_model", int), "heads": ("model.n_heads", int),
    "ffn": ("model.d_ff", int), "vocab_size": ("model.vocab_size", int), "max_len": ("model.max_len", int),
    "dropout": ("model.dropout", float),
}


def _train_options(fn):
    for name, (key, typ) in reversed(list(_TRAIN_FLAGS.items())):
        fn = click.option(f"--{name.replace('_', '-')}", name, type=typ, default=None,
                          help=f"Overrides `{key}` of the config.")(fn)
    return fn


@main.command("train")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="A TOML recipe (see train/).")
@_train_options
@click.option("--multilingual-head/--no-multilingual-head", default=None, help="EMS-style target-language embedding in the XTR head.")
@click.option("--amp/--no-amp", default=None, help="Mixed precision on CUDA (default on).")
@click.option("--fresh", is_flag=True, help="Ignore an existing checkpoint in --out and start over.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@user_errors
def train_cmd(config_path, multilingual_head, amp, fresh, quiet, **flags):
    """Train a dual encoder; resumes from OUT/checkpoints/last.pt if present.

    \b
    Examples:
      edge-xsent train --config train/tiny-cpu.toml
      edge-xsent train --config train/paper-2layer.toml --data corpus --out runs/p2
      edge-xsent train --config train/paper-2layer.toml --objective xtr --align-weight 0 --sim-weight 0
      torchrun --nproc-per-node 4 -m edge_xsent.cli train --config train/paper-2layer.toml
    """
    from .train import TrainConfig, train

    overrides: dict = {}
    for name, value in flags.items():
        if value is None:
            continue
        key = _TRAIN_FLAGS[name][0]
        if key.startswith("model."):
            overrides.setdefault("model", {})[key[6:]] = value
        else:
            overrides[key] = value
    if multilingual_head is not None:
        overrides["multilingual_head"] = multilingual_head
    if amp is not None:
        overrides["amp"] = amp
    cfg = TrainConfig.from_toml(config_path, overrides) if config_path else TrainConfig.from_dict(overrides)
    summary = train(cfg, fresh=fresh, progress=not quiet)
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


if __name__ == "__main__":
    main()
