"""The two rules of studies/quality-model, applied to figures files (`train/figures.py`), written before the runs.

The table-format rule: each form's mean gap to the whole-table reference over `oog`, `oog-m1` and `oog_long`
(reference minus form, averaged); the smallest wins, within 0.2 points the smaller graph.
The default rule: among students with an int8 graph within the budget, those with `oog` >= the fast model's, `oog-m1`
>= the fast model's + 5, >= 2.5x e5-small's sentences/s at 1 thread and <= 10 ms at batch 1; the highest `oog-m1`.
studies/table-aware adds a clause when the default is chosen again: with `--incumbent` (the default shipped now, measured
again), no worse than it on `oog`, `oog-m1` and `oog_long`.

    python train/quality_rules.py format --reference whole.json tiered.json cut.json [--out format.md]
    python train/quality_rules.py default --fast fast.json student-3.json student-4.json [--max-bytes 20000000] [--out d.md]
        [--incumbent default-before.json]
    python train/quality_rules.py layers student-1.json ... student-6.json [--out layers.md]   # the efficiency table
    python train/quality_rules.py quality --now quality-before.json candidate.json [--out q.md]

The quality model's rule (studies/table-aware, written before its run's figures): a candidate replaces the quality model
shipped now (`--now`, measured again) if its `oog-m1` is higher and it is no worse on `oog` and `oog_long`; of those, the
highest `oog-m1`. Speed is reported, no clause reads it (the quality model ships by name).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.errors import UserError
from edge_xsent.failures import user_errors
from edge_xsent.paths import FILE, INPUT, Parser, path_arg
from edge_xsent.inputs import read_json

MEASURES = ("oog", "oog_wide", "oog_long")  # the table-format rule's three measures
FORMAT_TIE = 0.2  # points: within it, the smaller graph
OOG_M1_MARGIN = 5.0  # points above the fast model's `oog-m1`
MIN_E5_RATIO = 2.5  # x multilingual-e5-small's sentences/s at 1 thread
MAX_BATCH1_MS = 10.0


def figures(path: Path, parts: tuple[str, ...]) -> dict:
    """A figures file with the parts a rule reads, or one error naming the command that makes them."""
    fig = read_json(path, what="figures file")
    missing = [p for p in parts if not isinstance(fig, dict) or not isinstance(fig.get(p), dict)]
    if missing:
        raise UserError(f"{path}: no {', '.join(missing)} in it; measure them with train/figures.py --parts "
                        f"{','.join(parts)}")
    return fig


def format_gaps(reference: dict, forms: dict[str, dict]) -> dict[str, float]:
    """{form: mean gap to the reference over MEASURES, in points}."""
    return {name: round(sum(reference[m]["mean"] - f[m]["mean"] for m in MEASURES) / len(MEASURES), 2)
            for name, f in forms.items()}


def chosen_format(reference: dict, forms: dict[str, dict]) -> str:
    gaps = format_gaps(reference, forms)
    best = min(gaps.values())
    near = [n for n, g in gaps.items() if g <= best + FORMAT_TIE]
    return min(near, key=lambda n: (forms[n]["int8_bytes"], gaps[n]))


def default_failures(row: dict, fast: dict, max_bytes: int, incumbent: dict | None = None) -> list[str]:
    """The clauses of the default rule a student's figures miss, each with by how much; with `incumbent`, also
    each of MEASURES on which it is worse than the default shipped now (studies/table-aware)."""
    oog, wide, speed = row["oog"]["mean"], row["oog_wide"]["mean"], row["speed"]
    need_wide = fast["oog_wide"]["mean"] + OOG_M1_MARGIN
    checks = [
        (row["int8_bytes"] <= max_bytes, f"int8 graph {row['int8_bytes']:,d} bytes > {max_bytes:,d}"),
        (oog >= fast["oog"]["mean"], f"oog {oog:.2f} < the fast model's {fast['oog']['mean']:.2f} "
                                     f"(short by {fast['oog']['mean'] - oog:.2f})"),
        (wide >= need_wide, f"oog-m1 {wide:.2f} < {need_wide:.2f} (short by {need_wide - wide:.2f})"),
        (speed["e5_ratio"] >= MIN_E5_RATIO, f"{speed['e5_ratio']:.2f}x e5-small's sentences/s < {MIN_E5_RATIO:g}x "
                                            f"(short by {MIN_E5_RATIO - speed['e5_ratio']:.2f})"),
        (speed["batch1_ms"] <= MAX_BATCH1_MS, f"batch 1 {speed['batch1_ms']:.2f} ms > {MAX_BATCH1_MS:g} ms"),
    ]
    for m in MEASURES if incumbent else ():
        have, need = row[m]["mean"], incumbent[m]["mean"]
        checks.append((have >= need, f"{m} {have:.2f} < the default's {need:.2f} (short by {need - have:.2f})"))
    return [msg for ok, msg in checks if not ok]


def chosen_default(rows: dict[str, dict], fast: dict, max_bytes: int, incumbent: dict | None = None) -> str | None:
    """The student that ships, or None when none passes."""
    ok = {n: r for n, r in rows.items() if not default_failures(r, fast, max_bytes, incumbent)}
    return max(ok, key=lambda n: ok[n]["oog_wide"]["mean"]) if ok else None


def format_table(reference: dict, forms: dict[str, dict]) -> str:
    gaps, choice = format_gaps(reference, forms), chosen_format(reference, forms)
    lines = ["| form | int8 bytes | `oog` | `oog-m1` | `oog_long` | mean gap to the reference | verdict |",
             "|---|---|---|---|---|---|---|",
             f"| {reference['name']} (reference) | {reference['int8_bytes']:,d} | " +
             " | ".join(f"{reference[m]['mean']:.2f}" for m in MEASURES) + " | | |"]
    lines += [f"| {n} | {f['int8_bytes']:,d} | " + " | ".join(f"{f[m]['mean']:.2f}" for m in MEASURES) +
              f" | {gaps[n]:.2f} | {'**chosen**' if n == choice else ''} |" for n, f in forms.items()]
    return "\n".join(lines) + "\n"


def default_table(rows: dict[str, dict], fast: dict, max_bytes: int, incumbent: dict | None = None) -> str:
    choice = chosen_default(rows, fast, max_bytes, incumbent)
    long = lambda r: f" {r['oog_long']['mean']:.2f} |" if incumbent else ""  # noqa: E731  (the incumbent's column)
    lines = ["| student | int8 bytes | `oog` | `oog-m1` |" + (" `oog_long` |" if incumbent else "") +
             " x e5-small sentences/s | batch 1 ms | verdict |", "|---|---|---|---|" + "---|" * (4 if incumbent else 3),
             f"| {fast['name']} (the fast model) | {fast['int8_bytes']:,d} | {fast['oog']['mean']:.2f} | "
             f"{fast['oog_wide']['mean']:.2f} |" + (" |" if incumbent else "") + " | | |"]
    if incumbent:
        lines.append(f"| {incumbent['name']} (the default now) | {incumbent['int8_bytes']:,d} | "
                     f"{incumbent['oog']['mean']:.2f} | {incumbent['oog_wide']['mean']:.2f} |{long(incumbent)} | | |")
    for n, r in rows.items():
        fails = default_failures(r, fast, max_bytes, incumbent)
        verdict = "**ships**" if n == choice else "; ".join(fails) or "passes, lower `oog-m1`"
        lines.append(f"| {n} | {r['int8_bytes']:,d} | {r['oog']['mean']:.2f} | {r['oog_wide']['mean']:.2f} |"
                     f"{long(r)} {r['speed']['e5_ratio']:.2f} | {r['speed']['batch1_ms']:.2f} | {verdict} |")
    fallback = (" No student passed within 20,000,000 bytes (decision-20mb.md), so the rule applies at this budget, "
                "as it says.") if max_bytes > 20_000_000 else ""
    return "\n".join(lines) + f"\n\nBudget: {max_bytes:,d} bytes.{fallback} " + \
        (f"Chosen: {choice}.\n" if choice else "No student passes.\n")


def quality_failures(row: dict, now: dict) -> list[str]:
    """The clauses of the quality model's rule a candidate misses against the quality model shipped now."""
    wide, have_wide = now["oog_wide"]["mean"], row["oog_wide"]["mean"]
    fails = [] if have_wide > wide else [f"oog-m1 {have_wide:.2f} not above the quality model's {wide:.2f}"]
    for m in ("oog", "oog_long"):
        have, need = row[m]["mean"], now[m]["mean"]
        fails += [] if have >= need else [f"{m} {have:.2f} < the quality model's {need:.2f} (short by {need - have:.2f})"]
    return fails


def quality_table(rows: dict[str, dict], now: dict) -> tuple[str | None, str]:
    """(the candidate that replaces the quality model or None, the rule's table)."""
    ok = [n for n, r in rows.items() if not quality_failures(r, now)]
    choice = max(ok, key=lambda n: rows[n]["oog_wide"]["mean"]) if ok else None
    lines = ["| model | int8 bytes | `oog` | `oog-m1` | `oog_long` | x e5-small sentences/s | batch 1 ms | verdict |",
             "|---|---|---|---|---|---|---|---|",
             f"| {now['name']} (the quality model now) | {now['int8_bytes']:,d} | {now['oog']['mean']:.2f} | "
             f"{now['oog_wide']['mean']:.2f} | {now['oog_long']['mean']:.2f} | | | {'replaced' if choice else 'stays'} |"]
    for n, r in rows.items():
        sp = r.get("speed") or {}
        speed = f"{sp['e5_ratio']:.2f} | {sp['batch1_ms']:.2f}" if "e5_ratio" in sp else "not measured | not measured"
        verdict = "**ships as `quality`**" if n == choice else "; ".join(quality_failures(r, now)) or "passes, lower `oog-m1`"
        lines.append(f"| {n} | {r['int8_bytes']:,d} | {r['oog']['mean']:.2f} | {r['oog_wide']['mean']:.2f} | "
                     f"{r['oog_long']['mean']:.2f} | {speed} | {verdict} |")
    return choice, "\n".join(lines) + "\n"


def layers_table(rows: list[dict]) -> str:
    """The layer table with quality: each student's blocks, graph, out-of-genre figures and its speed run's columns
    (its sentences/s beside multilingual-e5-small's and USE-m's, measured in one run at 1 thread)."""
    lines = ["| model | blocks | int8 MB | `oog` | `oog-m1` | `oog_long` | sentences/s | x e5-small | x USE-m | "
             "batch 1 ms | batch 32 ms | peak MB |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sp = r["speed"]
        lines.append(f"| {r['name']} | {r.get('blocks', '')} | {r['int8_bytes'] / 1e6:.1f} | {r['oog']['mean']:.2f} | "
                     f"{r['oog_wide']['mean']:.2f} | {r['oog_long']['mean']:.2f} | {sp['sentences_per_s']:,.0f} | "
                     f"{sp['e5_ratio']:.2f} | {sp['ratio']:.2f} | {sp['batch1_ms']:.2f} | {sp['batch32_ms']:.1f} | "
                     f"{sp['peak_rss_mb']:.0f} |")
    e5 = rows[0]["speed"]
    return "\n".join(lines) + (f"\n\nmultilingual-e5-small as the same kind of folder: {e5['e5_sentences_per_s']:,.0f} "
                               f"sentences/s, batch 1 {e5['e5_batch1_ms']:.2f} ms; USE-m: {e5['usem3_sentences_per_s']:,.0f} "
                               "sentences/s (the first row's run; each row's ratios are of its own run).\n")


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="rule", required=True)
    fmt = sub.add_parser("format", help="the table-format rule")
    fmt.add_argument("--reference", type=path_arg(INPUT), required=True, help="the student with its whole table")
    dflt = sub.add_parser("default", help="the default rule")
    dflt.add_argument("--fast", type=path_arg(INPUT), required=True, help="the fast model's figures")
    dflt.add_argument("--max-bytes", type=int, default=20_000_000, help="the int8 graph's budget")
    dflt.add_argument("--incumbent", type=path_arg(INPUT), default=None, help="the default shipped now, measured again: a "
                      "student must be no worse on oog, oog-m1 and oog_long (studies/table-aware)")
    lay = sub.add_parser("layers", help="the layer table with quality")
    qual = sub.add_parser("quality", help="the quality model's rule")
    qual.add_argument("--now", type=path_arg(INPUT), required=True, help="the quality model shipped now, measured again")
    for p in (fmt, dflt, lay, qual):
        p.add_argument("figures", type=path_arg(INPUT), nargs="+", help="figures files (train/figures.py)")
        p.add_argument("--out", type=path_arg(FILE), default=None, help="write the table here too (markdown)")
    args = ap.parse_args(argv)
    if args.rule == "quality":
        rows = {f["name"]: f for f in (figures(p, MEASURES) for p in args.figures)}
        text = quality_table(rows, figures(args.now, MEASURES))[1]
    elif args.rule == "layers":
        text = layers_table([figures(p, (*MEASURES, "speed")) for p in args.figures])
    elif args.rule == "format":
        forms = {f["name"]: f for f in (figures(p, MEASURES) for p in args.figures)}
        text = format_table(figures(args.reference, MEASURES), forms)
    else:
        needs = ("speed", *MEASURES) if args.incumbent else ("oog", "oog_wide", "speed")
        rows = {f["name"]: f for f in (figures(p, needs) for p in args.figures)}
        incumbent = figures(args.incumbent, MEASURES) if args.incumbent else None
        text = default_table(rows, figures(args.fast, ("oog", "oog_wide")), args.max_bytes, incumbent)
    print(text, end="")
    if args.out:
        with atomic_write(args.out) as f:
            f.write(text)


if __name__ == "__main__":
    main()
