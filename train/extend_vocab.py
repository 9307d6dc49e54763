"""Extend the shipped vocabulary instead of replacing it: every piece of the shipped default kept (so text in
its nine languages is cut exactly as before, and its rows carry over unchanged), plus each piece of the new
48k byte-fallback vocabulary that holds a character the shipped one lacks (CJK, Hangul, Greek, Arabic, ...,
and Latin letters such as ş, ő, ř), plus the 256 byte pieces. studies/vocab-realign measured what replacing
the vocabulary cost m1-long's start: 60.6 on `oog` against the default's 86.5.

    python train/extend_vocab.py --out train/tokenizers/m1-extend.model   # the shipped recipe's tokenizer

What the extension costs in tokens per language was measured once (studies/vocab-extend/results.json; the
measuring code is in git: `git show 1d41fe3:studies/vocab-extend/extend.py`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sentencepiece import sentencepiece_model_pb2 as pb

from edge_xsent.atomic import atomic_write
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, Role, path_arg
from edge_xsent.train.warmstart import init_dir

NORMAL, BYTE = 1, 6  # SentencePiece piece types


def load(path: Path) -> pb.ModelProto:
    """A SentencePiece model, read as every tokenizer is (a regular file, within the tokenizer cap: a FIFO or
    /dev/zero is one error, never a hang or all memory)."""
    from google.protobuf.message import DecodeError

    from edge_xsent.errors import UserError
    from edge_xsent.inputs import CAPS, read_bytes

    proto = pb.ModelProto()
    try:
        proto.ParseFromString(read_bytes(path, CAPS["tokenizer"], "tokenizer"))
    except DecodeError as e:
        raise UserError(f"{path}: not a SentencePiece model ({e}); give a tokenizer.model") from None
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


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=path_arg(Role("input", literal="git:")), default="git:c6af0ca",
                    help="the model whose vocabulary is kept (an init spec or a folder)")
    ap.add_argument("--new", type=path_arg(INPUT), default=Path("train/tokenizers/m1-48k.model"))
    ap.add_argument("--out", type=path_arg(FILE), required=True)
    args = ap.parse_args()
    merged = extend(load(init_dir(args.old) / "tokenizer.model"), load(args.new))
    with atomic_write(args.out, mode="wb") as f:
        f.write(merged.SerializeToString())
    print(f"wrote {args.out}: {len(merged.pieces):,d} pieces")

if __name__ == "__main__":
    main()
