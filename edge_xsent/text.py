"""Text normalisation shared by data cleaning, tokenizer training and inference.

Every platform (Python, the browser demo, the JVM code) applies exactly this before
tokenizing, so that the same sentence gives the same token ids everywhere:
NFKC, then control characters and U+FEFF go (a byte-order mark, at the start of a string or
where files were joined, is not text: with it a sentence gave another vector), then every run
of whitespace (tabs, newlines, NBSP after NFKC) becomes one space, then strip.
"""

import re
import unicodedata

_WS = re.compile(r"\s+")
# C0/C1 control characters other than whitespace, and the BOM: invisible, never useful as tokens.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff]")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = _CONTROL.sub("", text)
    return _WS.sub(" ", text).strip()
