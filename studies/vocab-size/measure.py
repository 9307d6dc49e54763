"""Tokens per English token, per language, for byte-fallback vocabularies of several sizes.

    python studies/vocab-size/measure.py --data ~/edge-xsent-data/corpus-m1 --sizes 48000,64000,72000

Each vocabulary is trained on `balanced_sample` of the train split (the recipe's own way);
the ratio is measured on the test split's pairs (sum of the language's tokens / sum of the
English tokens of the same pairs). Writes results.json and results.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.data.corpus import read_pairs
from edge_xsent.encode.tokenizer import Tokenizer, balanced_sample

HERE = Path(__file__).parent


def english_per_word(tok: Tokenizer, pairs) -> float:
    """Pieces per space-separated English word: the absolute length the ratio above hides (a
    vocabulary that splits English finer lowers every language's ratio to English)."""
    texts = list(dict.fromkeys(p.a for p in pairs))
    return round(sum(map(len, tok.encode(texts))) / sum(len(t.split()) for t in texts), 3)


def ratios(tok: Tokenizer, pairs) -> dict[str, float]:
    en, other = defaultdict(int), defaultdict(int)
    by_lang = defaultdict(list)
    for p in pairs:
        by_lang[p.lang_b].append(p)
    for lang, ps in by_lang.items():
        a = tok.encode([p.a for p in ps])
        b = tok.encode([p.b for p in ps])
        en[lang] = sum(map(len, a))
        other[lang] = sum(map(len, b))
    return {lang: round(other[lang] / en[lang], 3) for lang in sorted(en)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--sizes", default="48000,64000,72000")
    ap.add_argument("--per-lang", type=int, default=20000)
    ap.add_argument("--test-per-lang", type=int, default=2000)
    ap.add_argument("--save", help="folder: keep each tokenizer as <size>.model there")
    ap.add_argument("--compare", help="a tokenizer.model to report English pieces per word for (the shipped one)")
    args = ap.parse_args()
    train = list(read_pairs(args.data, split="train"))
    texts = balanced_sample(train, args.per_lang)
    by_lang = defaultdict(list)
    for p in read_pairs(args.data, split="test"):
        if p.lang_a == "en" and len(by_lang[p.lang_b]) < args.test_per_lang:
            by_lang[p.lang_b].append(p)
    test = [p for ps in by_lang.values() for p in ps]
    out = {"per_lang": args.per_lang, "sample_texts": len(texts),
           "test_pairs": {k: len(v) for k, v in sorted(by_lang.items())}, "sizes": {}}
    if args.compare:
        out["compare"] = {"model": args.compare, "english_per_word": english_per_word(Tokenizer.load(args.compare), test)}
    for size in map(int, args.sizes.split(",")):
        t0 = time.perf_counter()
        tok = Tokenizer.train(texts, size, max_sentences=len(texts))
        secs = time.perf_counter() - t0
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            tok.save(Path(args.save) / f"{size}.model")
        r = ratios(tok, test)
        out["sizes"][size] = {"train_s": round(secs), "ratio": r, "worst": max(r.items(), key=lambda kv: kv[1]),
                              "english_per_word": english_per_word(tok, test)}
        print(size, f"{secs:.0f}s", "worst", out["sizes"][size]["worst"], flush=True)
        with atomic_write(HERE / "results.json", "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
