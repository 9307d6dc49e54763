"""What edge-xsent's way of reading text costs e5-small's first blocks, before any training.

The untrained starts (starts.py) score far below what the issue measured for e5's first blocks
through e5's own pipeline. A student reads text as every edge-xsent model does: no `query: ` prefix,
no <s> ... </s>, NFKC, a pruned vocabulary. This measures the first three of those on e5's first k
blocks with its full vocabulary, on the same benchmark and averaging as the table (`oog`), so the
pruned start's figure (figures/start-K.json) completes the row:

    e5       `query: ` + <s> ... </s>, e5's normalisation (the teacher's own pipeline)
    bare-bos no prefix, <s> ... </s> kept
    bare     no prefix, no <s> ... </s> (edge-xsent's convention), e5's pieces and normalisation

    python studies/pruned-student/pipeline.py --layers 2 --out studies/pruned-student/figures/pipeline-2.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from edge_xsent.failures import script_errors

VARIANTS = ("e5", "bare-bos", "bare")


def batched_embedder(run, encode):
    """sentences -> unit vectors: `encode` makes each sentence's ids, `run(ids, mask)` embeds a padded batch;
    batches of 64 by length."""
    from edge_xsent.encode.tokenizer import pad_batch

    def embed(sentences: list[str]) -> np.ndarray:
        ids = encode(list(sentences))
        out = np.zeros((len(ids), 384), dtype=np.float32)
        order = np.argsort([-len(x) for x in ids], kind="stable")
        for start in range(0, len(order), 64):
            idx = order[start: start + 64]
            out[idx] = run(*pad_batch([ids[i] for i in idx]))
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    return embed


def torch_embedder(model, encode):
    """batched_embedder through `model` in torch fp32."""
    import torch

    def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()

    return batched_embedder(run, encode)


def embedder(layers: int, variant: str, threads: int):
    """sentences -> unit vectors through e5's first `layers` blocks, reading text as `variant` says."""
    import torch

    from edge_xsent.train.e5 import PREFIX, load_e5

    torch.set_num_threads(threads)
    model, tok = load_e5(layers=range(layers))

    def ids_of(text: str) -> list[int]:
        prefix = PREFIX if variant == "e5" else ""
        pieces = tok.sp.encode(tok.normalize(text, prefix))[:126]
        return pieces if variant == "bare" else [tok.bos, *pieces, tok.eos]

    return torch_embedder(model, lambda sentences: [ids_of(s) for s in sentences])


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=2, help="e5's first k blocks")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--data", default="oog", help="the out-of-genre benchmark (figures.py's `oog`)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from edge_xsent.atomic import atomic_write
    from edge_xsent.data.corpus import read_corpus_split
    from edge_xsent.eval.evaluate import out_of_genre, out_of_genre_means

    pairs = list(read_corpus_split(Path(args.data) / "test.tsv"))
    results = {}
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            raise SystemExit(f"--variants: {variant!r} is not one of {', '.join(VARIANTS)}")
        retrieval = out_of_genre(pairs, embedder(args.layers, variant, args.threads), max_pairs=1000, max_queries=1000)
        results[variant] = out_of_genre_means(retrieval)
        print(f"e5's first {args.layers} block(s), {variant}: oog {results[variant]['mean']}", flush=True)
    with atomic_write(args.out) as f:
        json.dump({"layers": args.layers, "data": args.data, "oog": results}, f, indent=1)


if __name__ == "__main__":
    main()
