"""The verdicts of the recipe's GPU runs by the rules studies/gpu-students/README.md wrote before them
(train/decisions.py): A against the record's student (the reproduction rule), then each lever's run
against the project's candidate so far (A, or the run that replaced it): B the longer run, J long items joined,
T the token-level arm, F five blocks. Each run is its figures (`train/figures.py --parts oog,oog_wide`) and the
summary its training wrote (steps).

    python train/levers.py --record benchmarks/results/students/student-4.json --record-steps 5434 \\
        --a A.json:a-summary.json [--b B.json:b-summary.json] [--j J.json:j-summary.json] [--t T.json:t-summary.json] \\
        [--f F.json:f-summary.json] [--out benchmarks/results/students/levers.md]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.errors import UserError
import decisions  # train/decisions.py, beside this script
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, Role, path_arg
from edge_xsent.inputs import read_json

LEVERS = {"b": "the longer run", "j": "long items joined", "t": "the token-level arm", "f": "5 blocks"}


def row(figures: Path, steps: int) -> dict:
    """A run as the rules read it: its steps and its `oog` and `oog-m1` means."""
    try:
        fig = read_json(figures, what="figures")  # a regular file within the JSON cap: a FIFO is an error, not a hang
        means = {"oog_mean": fig["oog"]["mean"], "oog_wide_mean": fig["oog_wide"]["mean"]}
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in means.values()):
            raise TypeError(f"the means are {means}, not finite numbers")
        return {"steps": steps, **means, "name": fig.get("name", Path(figures).stem)}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{figures}: not a figures file with oog and oog_wide ({e}); make it with "
                        "train/figures.py --parts oog,oog_wide") from None


def run_row(spec: str) -> dict:
    """FIGURES:SUMMARY -> row, the steps read from the training's summary.json."""
    figures, sep, summary = spec.partition(":")
    if not sep:
        raise UserError(f"{spec}: give FIGURES.json:SUMMARY.json (the run's figures, then its training summary)")
    try:
        steps = int(read_json(summary, what="training summary")["steps"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{summary}: not a training summary with steps ({e})") from None
    return row(Path(figures), steps)


def verdicts(record: dict, a: dict, levers: dict[str, dict]) -> list[dict]:
    """One line per run, in the rules' order; a lever that passes becomes the candidate the next is compared with."""
    fails = decisions.reproduction_failures(a, record)
    lines = [{"run": "A", **a, "against": f"the record ({record['name']})", "failures": fails,
              "verdict": "reproduces the record" if not fails else "does not reproduce the record"}]
    candidate, candidate_name = a, "A"
    for key, run in levers.items():
        fails = decisions.lever_failures(run, candidate, longer=key == "b")
        lines.append({"run": key.upper(), **run, "against": candidate_name, "failures": fails,
                      "verdict": f"{LEVERS[key]}: replaces {candidate_name}" if not fails else
                      f"{LEVERS[key]}: {candidate_name} stays"})
        if not fails:
            candidate, candidate_name = run, key.upper()
    return lines


def to_markdown(lines: list[dict], record: dict) -> str:
    out = ["| run | figures | steps | `oog` | `oog-m1` | judged against | verdict |", "|---|---|---|---|---|---|---|",
           f"| record | {record['name']} | {record['steps']:,d} | {record['oog_mean']:.2f} | "
           f"{record['oog_wide_mean']:.2f} | | |"]
    for x in lines:
        why = f" ({'; '.join(x['failures'])})" if x["failures"] else ""
        out.append(f"| {x['run']} | {x['name']} | {x['steps']:,d} | {x['oog_mean']:.2f} | {x['oog_wide_mean']:.2f} | "
                   f"{x['against']} | {x['verdict']}{why} |")
    return "\n".join(out) + "\n"


@user_errors
def main() -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", type=path_arg(INPUT), required=True, help="the record's student's figures (student-4.json)")
    ap.add_argument("--record-steps", type=int, required=True, help="the steps the record ran (5434)")
    ap.add_argument("--a", type=path_arg(Role("input", sep=":")), required=True, help="run A, the recipe: FIGURES.json:SUMMARY.json")
    for key, what in LEVERS.items():
        ap.add_argument(f"--{key}", type=path_arg(Role("input", sep=":")), help=f"run {key.upper()}, {what}: FIGURES.json:SUMMARY.json")
    ap.add_argument("--out", type=path_arg(FILE), help="also write the table here (markdown)")
    args = ap.parse_args()
    record = row(args.record, args.record_steps)
    levers = {key: run_row(getattr(args, key)) for key in LEVERS if getattr(args, key)}
    table = to_markdown(verdicts(record, run_row(args.a), levers), record)
    if args.out:
        with atomic_write(args.out) as f:
            f.write(table)
    print(table, end="")


if __name__ == "__main__":
    main()
