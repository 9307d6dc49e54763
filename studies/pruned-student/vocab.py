"""What the vocabulary rule costs an untrained pruned start (e5's first k blocks), on `oog`.

pipeline.py showed e5's first 2 blocks read as edge-xsent reads text (no prefix, no <s> ... </s>) score
61.1 on `oog` with e5's 250k pieces, where the pruned start (30k pieces) scores 35.5. This asks how much
of that gap the rule's choice of pieces makes, each start built in memory by prune.prune_e5 and measured in torch fp32 (no export), `oog` as
figures.py averages it:

    corpus-N  the rule as prune.start_folder applies it: 2,000 train texts a language, N pieces
    words-N   the same texts plus the corpus's monolingual texts (mono.tsv: wordfreq's frequent words,
              fortunes, glosses), so the pieces of everyday words compete too; N pieces
    RULE-N-rR the table of RULE-N replaced by its best rank-R approximation (SVD): what a factorised
              table (N x R, then R x 384) would keep, before any training
    RULE-N-tT the rule over T train texts a language instead of 2,000 (all of a language's where it has fewer)

    python studies/pruned-student/vocab.py --data ~/edge-xsent-data/corpus-m1 --layers 2 \
        --arms corpus-30000,words-30000,corpus-60000 --out studies/pruned-student/figures/vocab-2.json
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path


from edge_xsent.failures import script_errors

@functools.cache
def rule_texts(data: str, rule: str, per_lang: int = 2000) -> dict[str, list[str]]:
    """The texts the vocabulary rule reads: the train sample, plus mono.tsv's texts for `words`."""
    from edge_xsent.data.corpus import read_mono, resolve
    from edge_xsent.train.prune import language_sample

    texts = language_sample(data, per_lang=per_lang)
    if rule == "words":
        for lang, text, _ in read_mono(resolve(data) / "mono.tsv"):
            texts.setdefault(lang, []).append(text)
    return texts


def low_rank(table, rank: int) -> None:
    """Replace `table` (V x d) in place by its best rank-`rank` approximation."""
    import torch

    with torch.no_grad():
        u, s, vh = torch.linalg.svd(table, full_matrices=False)
        table.copy_((u[:, :rank] * s[:rank]) @ vh[:rank])


def embedder(model, tok, max_len: int):
    from pipeline import torch_embedder  # this folder's pipeline.py

    return torch_embedder(model, lambda sentences: tok.encode(sentences, max_len))


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="the corpus the rule reads")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--arms", default="corpus-30000,words-30000")
    ap.add_argument("--oog", default="oog")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    from edge_xsent.atomic import atomic_write
    from edge_xsent.data.corpus import read_corpus_split
    from edge_xsent.eval.evaluate import out_of_genre, out_of_genre_means
    from edge_xsent.train.prune import prune_e5

    torch.set_num_threads(args.threads)
    pairs = list(read_corpus_split(Path(args.oog) / "test.tsv"))
    results = {}
    for arm in args.arms.split(","):
        rule, n, *extra = arm.split("-")
        opts = {e[0]: e[1:] for e in extra}
        if rule not in ("corpus", "words") or not n.isdigit() or len(opts) != len(extra) \
                or not set(opts) <= {"r", "t"} or not all(v.isdigit() for v in opts.values()):
            raise SystemExit(f"--arms: {arm!r} is not corpus-N or words-N, optionally with -rR and -tT")
        texts = rule_texts(args.data, rule, int(opts.get("t", 2000)))
        model, tok, record = prune_e5(texts, range(args.layers), int(n), 128)
        if "r" in opts:
            low_rank(model.tok_emb.weight, int(opts["r"]))
        retrieval = out_of_genre(pairs, embedder(model, tok, 128), max_pairs=1000, max_queries=1000)
        results[arm] = {**out_of_genre_means(retrieval), "pieces": record["pieces"]["kept"]}
        print(f"{args.layers} block(s), {arm} ({record['pieces']['kept']} pieces): oog {results[arm]['mean']}", flush=True)
    with atomic_write(args.out) as f:
        json.dump({"layers": args.layers, "data": args.data, "oog_data": args.oog, "oog": results}, f, indent=1)


if __name__ == "__main__":
    main()
