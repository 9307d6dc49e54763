"""The out-of-genre levers table: each lever a recipe in train/, scored by the result files that
`studies/shipping-history/make_default.sh@f5796e71a RECIPE` writes (`EVAL_DATA=corpus-g` for a run trained on another corpus).

    python benchmarks/oog_levers.py            # -> benchmarks/results/oog-levers.md

Columns: `edge-xsent eval oog --data oog` per reserved source, reserved P@1, teacher agreement and
the score of studies/shipping-history/out-of-genre-default.md, then corpus-g's general and software test P@1 (int8,
16 directions), the rule's constraints. A lever whose results are missing is listed as not run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.eval.evaluate import average

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "general-scratch-32k"  # the default the levers are measured against (shipped until oog-genres-cos)
LEVERS = {  # run name -> (recipe, what it changes against the shipped default)
    BASELINE: ("studies/general-default/general-scratch-32k.toml",
              "the baseline (the default shipped before): corpus-g, paper + 2 x nce to USE-m, 32 monolingual "
              "texts a step, 7,000 steps"),
    "oog-genres-cos": ("studies/oog-levers/oog-genres-cos.toml",
                       "+ FreeOrion and GNOME help (corpus-g2), cos to USE-m x 4, 64 monolingual texts a step; "
                       "3,500 more steps warm from the shipped default"),
    "oog-genres-nce": ("studies/oog-levers/oog-genres-nce.toml",
                       "+ FreeOrion and GNOME help (corpus-g2), the baseline's objective (nce x 2, 32 monolingual "
                       "texts); 3,500 more steps warm from the baseline"),
    "oog-words-cos": ("studies/oog-levers/oog-words-cos.toml",
                      "oog-genres-cos + word-level distillation: the 10,000 most frequent words of each of the 9 "
                      "languages (wordfreq) among the monolingual texts (corpus-g3)"),
    "oog-words-distance": ("studies/oog-levers/oog-words-distance.toml",
                           "oog-words-cos + T-LASER's distance constraint (pair distance + 0.5 margin over 20 "
                           "sampled unrelated pairs, over the batch's mean norm), weight 0.5"),
    "oog-handbooks-cos": ("studies/oog-levers/oog-handbooks-cos.toml",
                          "oog-words-cos + KDE handbooks and GNOME application help (corpus-g4): how-to prose and "
                          "game rules for ordinary users"),
    "oog-words-mse": ("studies/oog-levers/oog-words-mse.toml",
                      "oog-words-cos with mean squared error to USE-m's vectors instead of 1 - cosine (weight 4)"),
    "oog-handbooks-deep4": ("studies/oog-levers/oog-handbooks-deep4.toml",
                            "oog-handbooks-cos with 4 layers instead of 2: the start's 2 layers stacked twice "
                            "([0, 1, 0, 1]), int8 file +1 MB"),
    "oog-dict-cos": ("studies/oog-levers/oog-dict-cos.toml",
                     "oog-handbooks-cos + bilingual dictionaries (corpus-g5): 78,725 FreeDict word and phrase "
                     "pairs of everyday English, train split only"),
    "oog-dict-wide": ("studies/oog-levers/oog-dict-wide.toml",
                      "oog-dict-cos with feed-forward layers twice as wide (d_ff 1024): the start's widened, new "
                      "units starting at zero output, int8 file +0.5 MB"),
    "oog-dict-vocab48k": ("studies/oog-levers/oog-dict-vocab48k.toml",
                          "oog-dict-cos with a 48,000-piece vocabulary trained on corpus-g5 (the start's rows "
                          "carried over by the text of each piece), int8 file +4 MB"),
    "oog-vocab48k-long": ("studies/shipping-history/default.toml",
                          "oog-dict-vocab48k continued for 14,000 more steps (4 x an arm's budget), over several "
                          "sittings"),
}


def result_files(name: str, judged_by: str) -> dict[str, str]:
    """The files make_default.sh writes for a run, or for the shipped model beside run `judged_by`."""
    if name == judged_by:
        return {"oog": f"oog-{name}.json", "general": f"xsr-{name}-int8-general.json", "software": f"xsr-{name}-int8.json"}
    return {"oog": f"oog-{name}-on-{judged_by}.json", "general": f"xsr-{name}-int8-on-{judged_by}-general.json",
            "software": f"xsr-{name}-int8-on-{judged_by}.json"}


def row(name: str, results: Path) -> dict | None:
    """The lever's figures, from its own run's files or (the baseline) any run's that scored it."""
    judges = [name] if name != BASELINE else [n for n in LEVERS if n != BASELINE]
    for judge in judges:
        files = {k: results / "runs" / f for k, f in result_files(name, judge).items()}
        if all(p.exists() for p in files.values()):
            data = {k: json.loads(p.read_text()) for k, p in files.items()}
            return {"oog": data["oog"], "general": 100 * average(data["general"]),
                    "software": 100 * average(data["software"])}
    return None


def table(results: Path) -> str:
    rows = {name: row(name, results) for name in LEVERS}
    sources = next((list(r["oog"]["retrieval"]) for r in rows.values() if r), [])
    peers = json.loads((results / "oog-peers.json").read_text()) if (results / "oog-peers.json").exists() else {}
    usem = next((v for k, v in peers.items() if k.startswith("USE")), None)
    mean = lambda r, s: 100 * sum(r["retrieval"][s].values()) / len(r["retrieval"][s])  # noqa: E731
    lines = ["| run (recipe) | lever | " + " | ".join(sources) + " | reserved P@1 | agreement | score | general | software |",
             "|---|---|" + "---|" * (len(sources) + 5)]
    for name, r in rows.items():
        recipe, lever = LEVERS[name]
        if r is None:
            lines.append(f"| {name} (`{recipe}`) | {lever} | not run |" + " |" * (len(sources) + 4))
            continue
        o = r["oog"]
        lines.append(f"| {name} (`{recipe}`) | {lever} | " + " | ".join(f"{mean(o, s):.1f}" for s in sources)
                     + f" | {100 * o['retrieval_mean']:.1f} | {100 * o['agreement_mean']:.1f} | {100 * o['score']:.1f}"
                     f" | {r['general']:.1f} | {r['software']:.1f} |")
    if usem:
        lines.append("| USE-m v3 (the teacher) | | " + " | ".join(f"{mean(usem, s):.1f}" for s in sources)
                     + f" | {100 * usem['retrieval_mean']:.1f} | {100 * usem['agreement_mean']:.1f} | "
                     f"{100 * usem['score']:.1f} | | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--out", type=Path, default=None, help="markdown file (default: RESULTS/oog-levers.md)")
    args = ap.parse_args()
    text = table(args.results)
    out = args.out or args.results / "oog-levers.md"
    with atomic_write(out) as f:
        f.write(f"# Out-of-genre levers\n\n`python benchmarks/oog_levers.py`, {time.strftime('%Y-%m-%d')}: each row "
                "is its recipe run by `studies/shipping-history/make_default.sh@f5796e71a`, scored int8 as shipped (`edge-xsent eval oog --data oog`; "
                "general and software: corpus-g's test splits, 16 directions). The rule that ships one: "
                "`studies/shipping-history/out-of-genre-default.md`.\n\n" + text + "\n")
    print(text)


if __name__ == "__main__":
    main()
