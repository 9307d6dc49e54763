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

import functools
import io
import json
import random
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import sentencepiece as spm

from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, as_path, read_bytes
from edge_xsent.text import normalize

from edge_xsent.config import MASK_ID, PAD_ID, SPECIAL_IDS, UNK_ID  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class TextRules:
    """How a tokenizer inherited from another model reads text (a student of multilingual-e5-small,
    student.py): that model's own per-character map instead of NFKC, runs of spaces collapsed, a
    prefix, and ids around the pieces. Saved beside tokenizer.model as `tokenizer_rules.json`, which
    the web, JVM and Hugging Face tokenizers read too.

    `compose = "NFC"` puts the text in NFC before the map and again after it. e5's SentencePiece
    normaliser also maps sequences (a letter and its combining marks, Hangul jamo, half-width kana and
    their sound marks) to one character; a per-character map alone never does, so decomposed text
    (much Vietnamese on the web) read as other pieces than the same text composed. NFC, map, NFC equals
    SentencePiece's own nmt_nfkc normaliser on the sample corpus in NFC, NFD and NFKD alike, and every
    stack has NFC. Rules written before it (no `compose`) read as they did."""
    char_map: dict[int, str] = field(repr=False)
    prefix: str = ""
    bos_id: int | None = None
    eos_id: int | None = None
    source: str = ""
    compose: str = ""  # "NFC" or "" (none: rules files written before it)

    def normalize(self, text: str) -> str:
        text = self.prefix + text
        if self.compose:
            text = unicodedata.normalize(self.compose, unicodedata.normalize(self.compose, text).translate(self.char_map))
        else:
            text = text.translate(self.char_map)  # {code point: replacement}
        return _SPACES.sub(" ", text)

    def describe(self) -> str:
        """What config.json says of this normalisation (the rules file holds it exactly)."""
        compose = "NFC, " if self.compose else ""
        return (f"{self.source or 'inherited'} rules ({RULES_FILE}): the prefix {self.prefix!r}, {compose}a per-character "
                f"map (C0 controls dropped), {compose}runs of spaces collapsed")

    def to_json(self) -> dict:
        out = {"char_map": {str(k): v for k, v in sorted(self.char_map.items())}, "collapse_spaces": True,
               "prefix": self.prefix, "bos_id": self.bos_id, "eos_id": self.eos_id, "source": self.source}
        return {**out, "compose": self.compose} if self.compose else out

    @classmethod
    def from_json(cls, d: object, where: str | Path) -> "TextRules":
        try:
            if not isinstance(d, dict) or d.get("collapse_spaces") is not True:
                raise ValueError("expected an object with collapse_spaces = true")
            char_map = {int(k): v for k, v in d["char_map"].items()}
            ids = [d.get("bos_id"), d.get("eos_id")]
            if not all(isinstance(v, str) for v in [*char_map.values(), d["prefix"], d.get("source", "")]) or \
                    not all(i is None or (isinstance(i, int) and not isinstance(i, bool) and i >= 0) for i in ids):
                raise ValueError("char_map values, prefix and source are strings; bos_id and eos_id ids or null")
            if d.get("compose", "") not in ("", "NFC"):
                raise ValueError(f"compose is \"NFC\" or absent, not {d.get('compose')!r}")
            return cls(char_map, d["prefix"], *ids, d.get("source", ""), d.get("compose", ""))
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise UserError(f"{where}: corrupt tokenizer rules ({e}); re-export or re-download the model") from None


_SPACES = re.compile(" {2,}")
RULES_FILE = "tokenizer_rules.json"
# The C0 controls and DEL, dropped by every model (docs/guarantees.md). A student's map is e5's completed with the
# ones it lacks: e5's own map has no U+0000 (SentencePiece reads C strings), so "Hello\0world" read as another text.
CONTROLS_DROPPED = {cp: "" for cp in [*range(0x20), 0x7F] if cp not in (0x09, 0x0A, 0x0D)}


@functools.lru_cache(maxsize=2)
def _processor(model_proto: bytes) -> spm.SentencePieceProcessor:
    """One processor for a model's bytes in a process: loading e5's 250,002 pieces takes 0.2-0.4 s, and a
    student's training, export and checks load the same tokenizer many times. Nothing changes a processor.
    Two are kept (a student's and its teacher's), about 90 MB each for e5's pieces."""
    return spm.SentencePieceProcessor(model_proto=model_proto)


class Tokenizer:
    def __init__(self, model_proto: bytes, rules: TextRules | None = None):
        self.proto = model_proto
        self.rules = rules
        self.sp = _processor(bytes(model_proto))
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.piece_to_id("<mask>")) != (PAD_ID, UNK_ID, MASK_ID):
            raise UserError("tokenizer.model does not use edge-xsent's fixed ids (pad 0, unk 1, <mask> 2); "
                            "train it with edge_xsent.encode.tokenizer.Tokenizer.train")
        n = self.sp.get_piece_size()
        if rules and any(i is not None and not 0 <= i < n for i in (rules.bos_id, rules.eos_id)):
            raise UserError(f"tokenizer rules: bos_id {rules.bos_id} / eos_id {rules.eos_id} outside the {n} pieces")

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        path = as_path(path, "tokenizer")
        if not path.exists() and not path.is_symlink():
            raise UserError(f"{path}: tokenizer file missing")
        rules = path.with_name(RULES_FILE)  # a student's rules, written beside it by `save`
        return cls.from_bytes(read_bytes(path, CAPS["tokenizer"], "tokenizer"), path,
                              read_bytes(rules, CAPS["json"], "tokenizer rules") if rules.is_file() else None)

    @classmethod
    def from_bytes(cls, data: bytes, path: str | Path = "tokenizer.model", rules: bytes | None = None) -> "Tokenizer":
        """A tokenizer from a model file's bytes (a loader that read them already); `path` names it in
        errors; `rules`: the bytes of the folder's tokenizer_rules.json, where it has one."""
        from edge_xsent.inputs import parse_json

        where = Path(path).with_name(RULES_FILE)
        text_rules = TextRules.from_json(parse_json(rules, where), where) if rules is not None else None
        try:
            return cls(data, text_rules)
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
    def normalization(self) -> str:
        """How text is read before its pieces, in words (config.json's `normalization`)."""
        return self.rules.describe() if self.rules else "NFKC, control characters dropped, whitespace collapsed " \
            "(edge_xsent.text.normalize)"

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def normalize(self, text: str) -> str:
        return self.rules.normalize(text) if self.rules else normalize(text)

    def encode(self, texts: Sequence[str], max_len: int | None = None) -> list[list[int]]:
        """Token ids of each text (normalised first), cut to `max_len` (the rules' bos and eos
        included). Empty or blank text -> []."""
        if max_len:
            texts = [readable_prefix(t, max_len) for t in texts]
        norm = [self.normalize(t) for t in texts]
        ids = self.sp.encode(norm)
        if self.rules:  # a text with nothing left but the prefix has no tokens, as everywhere in edge-xsent
            blank = [not n[len(self.rules.prefix):].strip(" ") for n in norm]  # U+0020 only: the same on every stack
            ids = [[] if b else [*self._head, *x, *self._tail] for x, b in zip(ids, blank)]
        return [self.truncate(x, max_len) for x in ids] if max_len else ids

    def truncate(self, ids: list[int], max_len: int) -> list[int]:
        """The first `max_len` ids, the rules' closing id kept last."""
        if len(ids) <= max_len or not self.rules or not self._tail:
            return ids[:max_len]
        return ids[: max_len - 1] + self._tail

    @property
    def _head(self) -> list[int]:
        return [] if self.rules is None or self.rules.bos_id is None else [self.rules.bos_id]

    @property
    def _tail(self) -> list[int]:
        return [] if self.rules is None or self.rules.eos_id is None else [self.rules.eos_id]

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(self.normalize(text), out_type=str)

    def save(self, path: str | Path) -> None:
        """tokenizer.model, and tokenizer_rules.json beside it (written first) when the tokenizer has rules."""
        from edge_xsent.atomic import atomic_write

        if self.rules:
            with atomic_write(Path(path).with_name(RULES_FILE)) as f:
                f.write(json.dumps(self.rules.to_json(), ensure_ascii=False) + "\n")
        with atomic_write(path, "wb") as f:
            f.write(self.proto)


# A piece spans at most 16 characters of normalised text (SentencePiece's max_piece_length), so
# the first max_len tokens come from the first 16 x max_len of them; 64 per token leaves room for
# the spaces and control characters normalisation removes. Reading no further bounds the memory
# one text can take (a 50 MB line took 1.3 GB); only a text that is mostly blanks could differ.
READ_CHARS_PER_TOKEN = 64


def pad_batch(batch: list[list[int]], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists -> (B, T) int64 ids padded with `pad_id`, and the 0/1 attention mask: the one padding of
    inference, training, export and the teachers."""
    T = max(1, max(len(x) for x in batch))
    ids = np.full((len(batch), T), pad_id, dtype=np.int64)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = x
    return ids, (ids != pad_id).astype(np.int64)


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
