"""Extend the shipped vocabulary instead of replacing it: every piece of the shipped default kept (so text in
its nine languages is cut exactly as before, and its rows carry over unchanged), plus each piece of the new
48k byte-fallback vocabulary that holds a character the shipped one lacks (CJK, Hangul, Greek, Arabic, ...,
and Latin letters such as ş, ő, ř), plus the 256 byte pieces. studies/vocab-realign measured what replacing
the vocabulary cost m1-long's start: 60.6 on `oog` against the default's 86.5.

    python studies/vocab-extend/extend.py --out /tmp/m1-extend.model \
        --measure ~/edge-xsent-data/corpus-m1      # tokens per English token per language, beside m1-48k
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from sentencepiece import sentencepiece_model_pb2 as pb

from edge_xsent.data.corpus import read_pairs
from edge_xsent.encode.tokenizer import Tokenizer
from edge_xsent.train.warmstart import init_dir

HERE = Path(__file__).resolve().parent

NORMAL, BYTE = 1, 6  # SentencePiece piece types


def load(path: Path) -> pb.ModelProto:
    proto = pb.ModelProto()
    proto.ParseFromString(Path(path).read_bytes())
    return proto


def extend(old: pb.ModelProto, new: pb.ModelProto) -> pb.ModelProto:
    """old's pieces in their order (ids unchanged), then new's pieces with a character old lacks, then bytes."""
    known = {c for p in old.pieces if p.type == NORMAL for c in p.piece}
    have = {p.piece for p in old.pieces}
    out = pb.ModelProto()
    out.CopyFrom(old)
    for p in new.pieces:
        if p.type == NORMAL and p.piece not in have and any(c not in known for c in p.piece):
            out.pieces.add(piece=p.piece, score=p.score, type=NORMAL)
    for p in new.pieces:
        if p.type == BYTE and p.piece not in have:
            out.pieces.add(piece=p.piece, score=0.0, type=BYTE)
    out.trainer_spec.byte_fallback = True
    out.trainer_spec.vocab_size = len(out.pieces)
    return out


def measure(data: str, tokenizers: dict[str, Path], per_lang: int = 2000) -> dict:
    """studies/vocab-size's measure on the same test pairs: tokens per English token per language, and
    English pieces per word, for each tokenizer."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("measure", HERE.parent / "vocab-size" / "measure.py")
    vs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vs)
    by_lang = defaultdict(list)
    for p in read_pairs(data, split="test"):
        if p.lang_a == "en" and len(by_lang[p.lang_b]) < per_lang:
            by_lang[p.lang_b].append(p)
    test = [p for ps in by_lang.values() for p in ps]
    out = {}
    for name, path in tokenizers.items():
        tok = Tokenizer.load(path)
        r = vs.ratios(tok, test)
        out[name] = {"pieces": tok.vocab_size, "ratio": r, "worst": max(r.items(), key=lambda kv: kv[1]),
                     "english_per_word": vs.english_per_word(tok, test)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="git:c6af0ca", help="the model whose vocabulary is kept (an init spec or a folder)")
    ap.add_argument("--new", type=Path, default=Path("train/tokenizers/m1-48k.model"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--measure", default=None, help="a corpus: measure both vocabularies on its test split")
    args = ap.parse_args()
    merged = extend(load(init_dir(args.old) / "tokenizer.model"), load(args.new))
    args.out.write_bytes(merged.SerializeToString())
    print(f"wrote {args.out}: {len(merged.pieces):,d} pieces")
    if args.measure:
        res = measure(str(Path(args.measure).expanduser()), {"m1-48k": args.new, "extended": args.out})
        (HERE / "results.json").write_text(json.dumps(res, indent=1) + "\n")
        for name, r in res.items():
            print(name, r["pieces"], "worst", r["worst"], "English pieces/word", r["english_per_word"])


if __name__ == "__main__":
    main()
