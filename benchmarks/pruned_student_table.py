"""The efficiency table with its quality column (issue item 4): one row per student of the layer table,
read from its figures file (train/figures.py --parts oog,oog_wide,speed on the int8 bundle as it would
ship), beside multilingual-e5-small's out-of-genre figures on the same pools, and the next default's rule
(README.md, written before the runs) applied to each row.

    python benchmarks/pruned_student_table.py studies/pruned-student/figures/table-3l.json [...] \
        --e5-oog benchmarks/results/oog-e5-small.json --e5-oog-m1 benchmarks/results/oog-m1-e5-small.json \
        --out benchmarks/results/pruned-student-table.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import peer_oog
from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import FILE, INPUT, Parser, path_arg

sys.path.append(str(Path(__file__).resolve().parent.parent / "train"))
import decisions as rule  # noqa: E402  train/decisions.py, the rules the lab applies

E5 = "multilingual-e5-small"


def e5_figures(path: Path) -> dict:
    """e5-small's cells in an `eval oog --peers e5-small --json` file, averaged as figures.py does:
    the mean over every cell (source x direction), and per language."""
    return peer_oog(path, E5)


def claims(fig: dict, e5_wide: dict) -> list[str]:
    """Languages the rule lets a student claim (train/decisions.py's student_claims)."""
    return rule.student_claims(fig.get("oog_wide", {}).get("by_language", {}), e5_wide["by_language"])


def verdict(fig: dict, e5_oog: dict, e5_wide: dict) -> str:
    """Which clauses of the rule a row fails (train/decisions.py's student_failed_constraints), or `passes`."""
    fails = rule.student_failed_constraints({"claimed": claims(fig, e5_wide), "int8_mb": fig["int8_mb"],
                                             "speed_ratio": fig.get("speed", {}).get("ratio"),
                                             "oog_mean": fig["oog"]["mean"]}, e5_oog["mean"])
    return "passes" if not fails else "fails: " + "; ".join(fails)


def row(fig: dict, e5_oog: dict, e5_wide: dict) -> str:
    """A student without an int8 graph (one that missed the export's parity gate) shows its fp32 P@1, said so."""
    s = fig.get("speed", {})
    cell = lambda k, f="{:.1f}": f.format(s[k]) if s.get(k) is not None else "-"  # noqa: E731
    name = fig["name"] + (" (fp32 P@1)" if fig.get("p1_precision") == "fp32" else "")
    size = "-" if fig["int8_mb"] is None else f"{fig['int8_mb']:.1f}"
    # The CPU that timed it: `machine` names the figures file's last run, which may have measured another part.
    cpu = (fig.get("provenance", {}).get("speed", {}).get("cpu") or fig.get("machine", {}).get("cpu", "-")) if s else "-"
    return (f"| {name} | {size} | {fig['oog']['mean']:.1f} | {fig['oog_wide']['mean']:.1f} | "
            f"{len(claims(fig, e5_wide))} | {cell('ratio', '{:.2f}')} | {cell('batch1_ms')} | {cell('batch32_ms')} | "
            f"{cell('peak_rss_mb', '{:.0f}')} | {cpu} | {verdict(fig, e5_oog, e5_wide)} |")


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figures", nargs="+", type=path_arg(INPUT), help="one figures file per student (train/figures.py)")
    ap.add_argument("--e5-oog", type=path_arg(INPUT), required=True, help="eval oog --data oog --peers e5-small --json")
    ap.add_argument("--e5-oog-m1", type=path_arg(INPUT), required=True, help="eval oog --data oog-m1 --peers e5-small --json")
    ap.add_argument("--out", type=path_arg(FILE), required=True)
    args = ap.parse_args()
    e5_oog, e5_wide = e5_figures(args.e5_oog), e5_figures(args.e5_oog_m1)
    figs = [read_json(p, what="figures") for p in args.figures]
    missing = [f["name"] for f in figs if not {"oog", "oog_wide"} <= set(f)]
    if missing:
        raise UserError(f"{', '.join(missing)}: no oog or oog_wide part; measure with train/figures.py --parts oog,oog_wide,speed")
    lines = ["# The pruned students: size, speed and out-of-genre P@1 by depth", "",
             "`python benchmarks/pruned_student_table.py " + " ".join(map(str, args.figures)) + "`, "
             + time.strftime("%Y-%m-%d") + " (studies/pruned-student/"
             "README.md: the budget, and the rule written before the runs). P@1 in %, int8 ONNX as it would ship; speed "
             "at 1 thread beside USE-m in one run, latency on rows of 32 tokens. The CPU behind the machine changes between "
             "sittings: speeds compare between rows of the same CPU only.", "",
             "| student | int8 MB | `oog` | `oog-m1` | claimable languages | x USE-m sent/s | batch 1 ms | batch 32 ms | "
             "peak MB | CPU | the rule |", "|---|---|---|---|---|---|---|---|---|---|---|",
             *(row(f, e5_oog, e5_wide) for f in figs),
             f"| {E5} (the teacher, 12 layers; its int8 graph) | 113 | {e5_oog['mean']:.1f} | {e5_wide['mean']:.1f} | | | | | | | |", ""]
    with atomic_write(args.out) as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
