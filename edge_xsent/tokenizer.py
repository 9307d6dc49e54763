"""One SentencePiece (unigram) vocabulary shared by every language of a corpus.

Fixed ids, the same in every model:  0 = <pad>, 1 = <unk>, 2 = <mask>; no BOS/EOS
(mean pooling needs neither). SentencePiece's own normaliser is switched off
(`identity`): `edge_xsent.text.normalize` (NFKC + collapsed whitespace) runs first on
every platform instead, so the browser and JVM tokenizers, which re-implement only the
unigram Viterbi search, see exactly the text Python sees.

New vocabularies have byte fallback: a character with no piece becomes the pieces of its
UTF-8 bytes (`<0xE0>`...), never `<unk>`, so a script the corpus lacks still reaches the
model as something it can learn. Older tokenizers (no byte pieces) keep working unchanged.
"""

from __future__ import annotations

import io
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import sentencepiece as spm

from .errors import UserError
from .inputs import CAPS, as_path, read_bytes
from .text import normalize

from .config import MASK_ID, PAD_ID, SPECIAL_IDS, UNK_ID  # noqa: F401  (re-exported)


class Tokenizer:
    def __init__(self, model_proto: bytes):
        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.piece_to_id("<mask>")) != (PAD_ID, UNK_ID, MASK_ID):
            raise UserError("tokenizer.model does not use edge-xsent's fixed ids (pad 0, unk 1, <mask> 2); "
                            "train it with edge_xsent.tokenizer.Tokenizer.train")

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        path = as_path(path, "tokenizer")
        if not path.exists() and not path.is_symlink():
            raise UserError(f"{path}: tokenizer file missing")
        return cls.from_bytes(read_bytes(path, CAPS["tokenizer"], "tokenizer"), path)

    @classmethod
    def from_bytes(cls, data: bytes, path: str | Path = "tokenizer.model") -> "Tokenizer":
        """A tokenizer from a model file's bytes (a loader that read them already); `path` names it in errors."""
        try:
            return cls(data)
        except RuntimeError as e:
            raise UserError(f"{path}: not a valid SentencePiece model ({e})") from e

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, max_sentences: int = 1_000_000, seed: int = 0,
              byte_fallback: bool = True) -> "Tokenizer":
        model = io.BytesIO()
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_normalized(texts),
                model_writer=model,
                vocab_size=vocab_size,
                model_type="unigram",
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=-1, eos_id=-1,
                user_defined_symbols=["<mask>"],
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                character_coverage=0.9995,
                byte_fallback=byte_fallback,
                input_sentence_size=max_sentences,
                shuffle_input_sentence=True,
                num_threads=2,
                minloglevel=2,
            )
        except RuntimeError as e:
            msg = str(e)
            limit = re.search(r"value <= (\d+)", msg)
            if limit:
                raise UserError(f"the corpus is too small for a vocabulary of {vocab_size}: it supports at most "
                                f"{limit.group(1)} pieces; lower --vocab-size or add data") from e
            raise UserError(f"tokenizer training failed: {msg.strip()}") from e
        return cls(model.getvalue())

    @property
    def byte_fallback(self) -> bool:
        return self.sp.piece_to_id("<0x00>") != UNK_ID and self.sp.is_byte(self.sp.piece_to_id("<0x00>"))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, texts: Sequence[str], max_len: int | None = None) -> list[list[int]]:
        """Token ids of each text (normalised first), cut to `max_len`. Empty text -> []."""
        if max_len:
            texts = [readable_prefix(t, max_len) for t in texts]
        ids = self.sp.encode([normalize(t) for t in texts])
        return [x[:max_len] for x in ids] if max_len else ids

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(normalize(text), out_type=str)

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.proto)


# A piece spans at most 16 characters of normalised text (SentencePiece's max_piece_length), so
# the first max_len tokens come from the first 16 x max_len of them; 64 per token leaves room for
# the spaces and control characters normalisation removes. Reading no further bounds the memory
# one text can take (a 50 MB line took 1.3 GB); only a text that is mostly blanks could differ.
READ_CHARS_PER_TOKEN = 64


def readable_prefix(text: str, max_len: int) -> str:
    """The part of `text` whose tokens a model reading `max_len` of them can see."""
    return text[: max_len * READ_CHARS_PER_TOKEN]


def _normalized(texts: Iterable[str]) -> Iterator[str]:
    for t in texts:
        t = normalize(t)
        if t:
            yield t


def balanced_sample(pairs: Iterable, per_lang: int, seed: int = 0) -> list[str]:
    """Up to `per_lang` texts of each language (both sides of every pair), drawn at random.

    A vocabulary trained on the raw corpus spends its pieces on the big languages (German has
    30 times Persian's pairs); an equal share each keeps every language's tokens per English
    token low, which is what the vocabulary-size rule bounds (docs/training.md)."""
    by_lang: dict[str, list[str]] = defaultdict(list)
    for p in pairs:
        by_lang[p.lang_a].append(p.a)
        by_lang[p.lang_b].append(p.b)
    rng = random.Random(seed)
    out: list[str] = []
    for lang in sorted(by_lang):
        texts = list(dict.fromkeys(by_lang[lang]))  # one vote per distinct text
        out += rng.sample(texts, min(per_lang, len(texts)))
    return out


def prune(tokenizer: Tokenizer, keep: set[int]) -> tuple[Tokenizer, list[int]]:
    """A tokenizer holding only the pieces in `keep` (plus specials, every single-character
    piece and the byte pieces, so unseen text still segments), and the old id of each new id.

    Unigram segmentation picks the best path through the pieces; every piece on the best path
    of a text that produced `keep` is still there, so that text segments exactly as before.
    """
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(tokenizer.proto)
    keep = set(keep) | set(SPECIAL_IDS) | {i for i, p in enumerate(proto.pieces)
                                           if len(p.piece) == 1 or p.type == pb.ModelProto.SentencePiece.BYTE}
    old_ids = [i for i in range(len(proto.pieces)) if i in keep]
    kept = [proto.pieces[i] for i in old_ids]
    del proto.pieces[:]
    proto.pieces.extend(kept)
    proto.trainer_spec.vocab_size = len(kept)
    return Tokenizer(proto.SerializeToString()), old_ids
