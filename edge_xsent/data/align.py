"""Aligning translated prose below the file or entry level: paragraphs by order, then
sentences by order where both sides have the same number of them."""

from __future__ import annotations

import html
import re

MAX_PARAGRAPH_WORDS = 60  # a paragraph that cannot be split into aligned sentences is kept up to this length

# Scripts without capitals (Arabic, Hebrew, Indic, Thai, Hangul, kana, CJK): after . ! ? and a space,
# any letter of theirs starts a sentence.
_CASELESS = "\u0590-\u06FF\u0900-\u0DFF\u0E00-\u0E7F\u1100-\u11FF\u3040-\u30FF\u3400-\u9FFF\uAC00-\uD7AF"
_SENTENCE_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"”»)]))\s+(?=[\"“«(¿¡]?[A-ZÀ-ÖØ-ÞĀ-ŽА-ЯЁ" + _CASELESS + "])"
                           r"|(?<=[。！？])\s*(?=[^\s」』）)”。！？])")  # Chinese and Japanese need no space
_TAG = re.compile(r"<[^>]+>")


def sentences(text: str) -> list[str]:
    """A paragraph cut after ., !, ? or … where the next word starts with a capital (or a letter of
    a script without capitals), and after 。！？ where a sentence follows (no space needed)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def align_paragraph(en: str, xx: str) -> list[tuple[str, str]]:
    """Sentence pairs of two aligned paragraphs: by order where the counts match, else the
    paragraph itself if it is short enough to be one query, else nothing."""
    se, sx = sentences(en), sentences(xx)
    if len(se) == len(sx):
        return list(zip(se, sx))
    return [(en, xx)] if len(en.split()) <= MAX_PARAGRAPH_WORDS else []


def align_paragraphs(en: list[str], xx: list[str]) -> list[tuple[str, str]]:
    """Sentence pairs of two documents whose paragraphs correspond one to one; nothing when the
    paragraph counts differ (no safe alignment)."""
    if len(en) != len(xx):
        return []
    return [pair for a, b in zip(en, xx) for pair in align_paragraph(a, b)]


def element_texts(page: str, tags: tuple[str, ...], drop: tuple[str, ...] = ()) -> list[str]:
    """The plain text of each `tags` element of an HTML or XML page, in order; `drop` elements
    (footnotes, metadata blocks) removed with their content first."""
    for tag in drop:
        page = re.sub(rf"<{tag}\b.*?</{tag}\s*>", " ", page, flags=re.S | re.I)
    names = "|".join(tags)
    out = []
    for m in re.finditer(rf"<({names})\b[^>]*>(.*?)</\1\s*>", page, flags=re.S | re.I):
        text = " ".join(html.unescape(_TAG.sub(" ", m.group(2))).split())
        if text:
            out.append(text)
    return out
