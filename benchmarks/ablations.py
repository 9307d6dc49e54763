"""The ablation table (the paper's Tables 6 and 7 in shape) from trained runs.

Each run is evaluated the same way: retrieval P@1 on the corpus's test split (2,000 queries
per direction among all candidates, en<->de/es/fr/it), zero-shot classification (trained
on English, mean of 5 seeds). The paper's figures are shown beside ours, and its claims
are checked against our numbers, not asserted.

    benchmarks/ablations.sh                      # trains the runs, then calls this script
    python benchmarks/ablations.py runs/ablation-* --data corpus
"""

from __future__ import annotations

import time
from pathlib import Path

from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INPUT, Parser, Role, note_input, path_arg

ROOT = Path(__file__).resolve().parent.parent

# Paper, Tables 6 and 7: mean over en<->fr and en<->es of MLDoc accuracy and XSR P@1.
PAPER = {
    "MLM": (76.7, 21.2), "SMLM": (75.8, 86.0), "XTR": (80.7, 90.0), "MLM+XTR": (78.9, 86.4),
    "UGT": (81.9, 89.9), "UGT+align": (80.7, 90.3), "UGT+align+sim": (79.1, 90.7)}


def row_name(cfg: dict) -> str:
    name = {"mlm": "MLM", "smlm": "SMLM", "xtr": "XTR", "mlm-xtr": "MLM+XTR", "ugt": "UGT"}.get(cfg["objective"],
                                                                                          cfg["objective"])
    return name + ("+align" if cfg.get("align_weight") else "") + ("+sim" if cfg.get("sim_weight") else "")


def claims(rows: dict[str, dict]) -> list[tuple[str, bool]]:
    """The paper's statements about Tables 6 and 7, evaluated on our rows (where present)."""
    x = {k: r["xsr"] for k, r in rows.items()}
    c = {k: r["classify"] for k, r in rows.items()}
    out = []

    def check(text: str, names: list[str], fn) -> None:
        if all(n in rows for n in names):
            out.append((text, bool(fn())))

    check("XTR beats MLM and SMLM on retrieval", ["XTR", "MLM", "SMLM"], lambda: x["XTR"] > max(x["MLM"], x["SMLM"]))
    check("XTR beats MLM and SMLM on classification", ["XTR", "MLM", "SMLM"], lambda: c["XTR"] > max(c["MLM"], c["SMLM"]))
    check("MLM alone fails at retrieval (far below SMLM)", ["MLM", "SMLM"], lambda: x["MLM"] < x["SMLM"] - 20)
    check("UGT (SMLM+XTR) beats XTR on classification", ["UGT", "XTR"], lambda: c["UGT"] > c["XTR"])
    check("UGT beats MLM+XTR on both tasks", ["UGT", "MLM+XTR"],
          lambda: x["UGT"] > x["MLM+XTR"] and c["UGT"] > c["MLM+XTR"])
    check("align improves retrieval over UGT", ["UGT", "UGT+align"], lambda: x["UGT+align"] > x["UGT"])
    check("align + sim improves retrieval over align alone", ["UGT+align", "UGT+align+sim"],
          lambda: x["UGT+align+sim"] > x["UGT+align"])
    check("contrastive losses cost classification (UGT best of the three)", ["UGT", "UGT+align", "UGT+align+sim"],
          lambda: c["UGT"] > max(c["UGT+align"], c["UGT+align+sim"]))
    return out


@user_errors
def main() -> None:
    ap = Parser()
    ap.add_argument("runs", type=path_arg(INPUT), nargs="+", help="Training output folders (each with model/ and summary.json).")
    ap.add_argument("--data", default="corpus")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--recipe", default="", help="How the runs were made, for the record.")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks/results/ablations.md"))
    args = ap.parse_args()
    note_input(args.data)
    from edge_xsent.train.bench import machine_info, write_report
    from edge_xsent.data.corpus import read_classify, read_pairs, resolve
    from edge_xsent.encode.bundle import read_training, resolve_model_dir
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.eval.evaluate import average, classify, xsr

    pairs = list(read_pairs(args.data, split="test"))
    docs = list(read_classify(resolve(args.data) / "classify.tsv"))
    rows: dict[str, dict] = {}
    for run in args.runs:
        cfg = read_training(resolve_model_dir(run))["train_config"]
        summary = read_json(Path(run) / "summary.json", what="training summary")
        enc = Encoder.load(Path(run) / "model", backend="torch", threads=2)
        embed = lambda s: enc.encode(list(s), batch_size=128)  # noqa: E731
        x = xsr(pairs, embed, max_queries=args.queries)
        cl = classify(docs, embed, seeds=args.seeds)
        zero_shot = [a["mean"] for d, a in cl["accuracy"].items() if d != "en->en"]
        name = row_name(cfg)
        rows[name] = {"run": str(run), "objective": cfg["objective"], "align_weight": cfg["align_weight"],
                      "sim_weight": cfg["sim_weight"], "steps": summary["steps"],
                      "xsr": 100 * average(x), "xsr_margin": 100 * average(x, "p1_margin"),
                      "classify": 100 * sum(zero_shot) / len(zero_shot),
                      "classify_en": 100 * cl["accuracy"]["en->en"]["mean"], "xsr_detail": x, "classify_detail": cl}
        print(f"{name:16s} XSR {rows[name]['xsr']:.1f}  classify {rows[name]['classify']:.1f}", flush=True)

    m = machine_info()
    lines = ["# Ablations: generative tasks (Table 6) and contrastive losses (Table 7)", "",
             f"Made by `benchmarks/ablations.sh {args.recipe.strip()}` on {m['cpu']} ({m['cores']} cores), "
             f"{time.strftime('%Y-%m-%d')}: one run per row, the same recipe, budget and tokenizer; only the objective "
             f"changes. Evaluated on `{args.data}` (test split): XSR = mean retrieval P@1 (cosine) over en<->de/es/fr/it, "
             f"{args.queries:,d} queries per direction among all candidates; classification = zero-shot accuracy "
             f"en->de/fr/it (trained on English, mean of {args.seeds} seeds). Paper: mean over en<->fr/es of its "
             "Tables 6 and 7 (MLDoc, XSR on Europarl), a 2-layer model trained for far longer.", "",
             "| objective | steps | XSR P@1 | XSR margin | classify zero-shot | classify en | paper MLDoc | paper XSR |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        paper = PAPER.get(name, ("-", "-"))
        lines.append(f"| {name} | {r['steps']} | {r['xsr']:.1f} | {r['xsr_margin']:.1f} | {r['classify']:.1f} | "
                     f"{r['classify_en']:.1f} | {paper[0]} | {paper[1]} |")
    lines += ["", "## Does the paper's ordering hold here?", ""]
    checked = claims(rows)
    lines += [f"- {text}: {'holds' if ok else 'does not hold'}" for text, ok in checked]
    write_report(args.out, "\n".join(lines) + "\n", {"recipe": args.recipe, "machine": m, "rows": rows, "claims": checked})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
