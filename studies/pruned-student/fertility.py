"""How finely a student's pieces cut each language, against e5-small's own 250k pieces.

The students lose most to e5-small in languages written in scripts other than Latin (the study README, the wide
run's step 5,000). One cause would be the pruned vocabulary: a word e5 reads as one piece may now take several,
or fall back to bytes. This counts, per language, the pieces per sentence of the other side of a folder's test
pairs (`--data`: corpus-m1's held-back split of the training sources, or an `oog-m1` pool of sources the vocabulary
rule never read; only pieces are counted, nothing is chosen on them), with e5's tokenizer (its normalisation, no
prefix and no <s> ... </s>, as edge-xsent reads text) and with the student's, and the share of the student's pieces
that are byte fallbacks.

    python studies/pruned-student/fertility.py ~/edge-xsent-runs/e5-wide-3l-60k-step5000 \
        --data ~/edge-xsent-data/corpus-m1 --out studies/pruned-student/figures/fertility-60k.json
    (the same with --data ~/edge-xsent-data/oog-m1 --out .../fertility-60k-oog-m1.json)
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from edge_xsent.failures import script_errors


def held_back_sentences(data: str, per_lang: int) -> dict[str, list[str]]:
    """The first `per_lang` non-English sides of each language's test pairs, in file order."""
    from edge_xsent.data.corpus import read_pairs, resolve

    out: dict[str, list[str]] = defaultdict(list)
    for p in read_pairs(resolve(data), split="test"):
        lang, text = (p.lang_b, p.b) if p.lang_a == "en" else (p.lang_a, p.a)
        if len(out[lang]) < per_lang:
            out[lang].append(text)
    return dict(out)


def counts(texts: list[str], e5_tok, student) -> dict:
    """Pieces per sentence under each tokenizer, their ratio, and the student's share of byte pieces."""
    e5_pieces = sum(len(ids) for ids in e5_tok.sp.encode([e5_tok.normalize(t, prefix="") for t in texts]))
    ids = student.encode(texts)
    ours = sum(len(x) for x in ids)
    byte = sum(student.sp.is_byte(i) for x in ids for i in x)
    n = len(texts)
    return {"sentences": n, "e5_pieces": round(e5_pieces / n, 2), "student_pieces": round(ours / n, 2),
            "ratio": round(ours / max(e5_pieces, 1), 3), "byte_share": round(byte / max(ours, 1), 4)}


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a student's model folder (its tokenizer.model is read)")
    ap.add_argument("--data", default="~/edge-xsent-data/corpus-m1")
    ap.add_argument("--per-lang", type=int, default=1000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from edge_xsent.train.e5 import E5Tokenizer, read_e5
    from edge_xsent.encode.tokenizer import Tokenizer

    e5_tok = E5Tokenizer(read_e5())
    student = Tokenizer.load(Path(args.model).expanduser() / "tokenizer.model")
    rows = {lang: counts(texts, e5_tok, student) for lang, texts in sorted(held_back_sentences(args.data, args.per_lang).items())}
    for lang, r in sorted(rows.items(), key=lambda kv: -kv[1]["ratio"]):
        print(f"{lang:6} e5 {r['e5_pieces']:6.1f}  student {r['student_pieces']:6.1f}  x{r['ratio']:.2f}  bytes {r['byte_share']:.1%}")
    Path(args.out).write_text(json.dumps({"model": args.model, "data": args.data, "per_lang": args.per_lang,
                                          "languages": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
