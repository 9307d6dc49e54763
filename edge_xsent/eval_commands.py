"""`edge-xsent eval`: retrieval, the out-of-genre benchmark and zero-shot classification, beside peers;
a thin layer over evaluate.py and report.py, as cli.py is over the rest."""

from __future__ import annotations

import json
from pathlib import Path

import click

from edge_xsent.errors import UserError
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, ClickPath, Role, note_input
from edge_xsent.flags import BACKEND_OPTIONS, MODEL_OPTION, PEERS_OPTION, THREADS_OPTION, typed_command


@click.group("eval")
def eval_group() -> None:
    """Evaluate a model: cross-lingual retrieval (xsr), the out-of-genre benchmark (oog), zero-shot classification."""


@eval_group.command("xsr")
@MODEL_OPTION
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
@click.option("--distractors", multiple=True, type=ClickPath(Role("input", sep=":", named=True, stream=True)),
              help="LANG:FILE with extra candidate sentences (one per line), e.g. fr:news.fr.txt.")
@click.option("--pool", type=click.Choice(["pair", "mixed"]), default="pair", show_default=True,
              help="Candidates: the target side of the pair (the paper's XSR), or also every sentence in the "
                   "query's own language (multilingual search: the translation must beat same-language sentences).")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@BACKEND_OPTIONS
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=ClickPath(FILE), default=None,
              help="Also write the table as markdown (e.g. benchmarks/results/xsr.md).")
@PEERS_OPTION
@THREADS_OPTION
@user_errors
def eval_xsr(model_path, data, split, domain, langs, queries, max_pairs, distractors, pool, batch_size, backend, precision, as_json,
             md_path, peers):
    """Cross-lingual retrieval P@1, both directions, cosine and ratio margin (k=4).

    \b
    Examples:
      edge-xsent eval xsr --model M --data test.en-fr.tsv --distractors fr:extra.fr.txt
      edge-xsent eval xsr --data corpus --peers usem3,e5-small --md benchmarks/results/xsr-peers.md
      edge-xsent eval xsr --data corpus-g --domain general --max-pairs 500 --peers usem3,e5-small
    """
    from edge_xsent.eval import report
    from edge_xsent.data.corpus import resolve
    from edge_xsent.eval.evaluate import format_xsr, xsr, xsr_mixed

    note_input(model_path, resolve(data))
    encoders = report.load_encoders(model_path, backend, precision, peers, batch_size)
    pairs = report.xsr_pairs(data, split, domain, langs, max_pairs)
    extra = report.distractor_texts(distractors, pairs)
    run = xsr_mixed if pool == "mixed" else xsr
    results = {name: run(pairs, embed, max_queries=queries, distractors=extra) for name, (_, embed) in encoders.items()}
    _emit(encoders, results, report.tables(encoders, results, format_xsr, lambda r: {d: v["p1_cosine"] for d, v in r.items()},
                                           "P@1 cosine"), as_json, md_path,
          f"Cross-lingual retrieval, data `{data}` ({split}{', ' + domain + ' domain' if domain else ''})"
          + (", mixed pool (query language too)" if pool == "mixed" else ""))


def _emit(encoders: dict, results: dict, text: str, as_json: bool, md_path, md_title: str) -> None:
    """Print the tables (or the JSON record: the model's, or all by encoder) and save the markdown copy."""
    from edge_xsent.eval.report import write_md

    click.echo(json.dumps(next(iter(results.values())) if len(results) == 1 else results, indent=2) if as_json else text)
    if md_path:
        write_md(md_path, md_title, text, typed_command())


@eval_group.command("oog")
@MODEL_OPTION
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
@BACKEND_OPTIONS
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=ClickPath(FILE), default=None, help="Also write the table as markdown.")
@PEERS_OPTION
@THREADS_OPTION
@user_errors
def eval_oog(model_path, data_path, max_pairs, queries, min_pairs, below, agreement, batch_size, backend, precision, as_json,
             md_path, peers):
    """Out-of-genre benchmark: retrieval on reserved genres and agreement with the teacher.

    \b
    Examples:
      edge-xsent eval oog --data oog
      edge-xsent eval oog --data oog --max-pairs 300 --peers usem3,e5-small --md benchmarks/results/oog-peers.md
      edge-xsent eval oog --data oog-m1 --min-pairs 50 --below 100 --no-agreement --json
    """
    from edge_xsent.eval import report
    from edge_xsent.data.corpus import read_corpus_split
    from edge_xsent.data.reserved import is_reserved_folder
    from edge_xsent.eval.evaluate import format_out_of_genre

    note_input(model_path, data_path)  # every refusal before any reading
    if not is_reserved_folder(data_path):
        raise UserError(f"{data_path}: not a reserved benchmark folder; build one with "
                        f"`edge-xsent data reserved --out {data_path} --exclude CORPUS`")
    if below is not None and below <= min_pairs:
        raise UserError(f"--below {below} keeps no pool of at least --min-pairs {min_pairs}; use a larger --below")
    pairs = list(read_corpus_split(Path(data_path) / "test.tsv"))
    encoders = report.load_encoders(model_path, backend, precision, peers, batch_size)
    results = report.out_of_genre_records(pairs, encoders, max_pairs, queries, min_pairs, below, agreement, batch_size)
    text = report.tables(encoders, results, format_out_of_genre, report.out_of_genre_scores,
                         "out of genre (P@1 per source, reserved P@1, teacher agreement, score)", mean_column=False)
    _emit(encoders, results, text, as_json, md_path, f"Out-of-genre benchmark, data `{data_path}`")


@eval_group.command("classify")
@MODEL_OPTION
@click.option("--data", default="sample", show_default=True, help="Corpus folder with classify.tsv; `sample` = shipped.")
@BACKEND_OPTIONS
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "md_path", type=ClickPath(FILE), default=None, help="Also write the table as markdown.")
@PEERS_OPTION
@THREADS_OPTION
@user_errors
def eval_classify(model_path, data, backend, precision, seeds, as_json, md_path, peers):
    """Zero-shot classification (MLDoc style): train on English vectors, test on other languages.

    \b
    Examples:
      edge-xsent eval classify --model runs/tiny/model
      edge-xsent eval classify --model runs/cpu-hour/model --data corpus --json
      edge-xsent eval classify --data corpus --peers usem3,e5-small
    """
    from edge_xsent.eval import report
    from edge_xsent.data.corpus import read_classify, resolve
    from edge_xsent.eval.evaluate import classify, format_classify

    path = resolve(data) / "classify.tsv"
    if not path.exists():
        raise UserError(f"{path}: missing; build the corpus with `edge-xsent data build` (DDTP source, fr/de/it)")
    note_input(model_path, resolve(data))
    encoders = report.load_encoders(model_path, backend, precision, peers, 64)
    rows = list(read_classify(path))
    results = {name: {"encoder": name, **classify(rows, embed, seeds=seeds)} for name, (_, embed) in encoders.items()}
    text = report.tables(encoders, results, format_classify, lambda r: {d: v["mean"] for d, v in r["accuracy"].items()},
                         "accuracy")
    _emit(encoders, results, text, as_json, md_path, f"Zero-shot classification, data `{data}`")
