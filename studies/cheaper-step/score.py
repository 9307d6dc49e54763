"""Score the study's arms by its rule (README.md) and write results.md beside this file.

    python studies/cheaper-step/score.py          # after both runs finished; ~5 minutes a model

Each arm as shipped: `edge-xsent debias` on its train corpus, `export --int8`, `eval oog --data oog`;
the shipped default is scored on the same benchmark build, for scale. Each step's output is kept
in the run folder (rerunning skips what exists).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from edge_xsent.config import TrainConfig
from edge_xsent.eval.decisions import OOG_TIE_POINTS
from edge_xsent.train.runfolder import training_minutes

HERE = Path(__file__).resolve().parent
ARMS = ("exact", "fast", "sampled", "dropout0")  # the first round, then each option alone (README.md)
WALL_CLOCK_SLACK = 0.10  # the rule: fast's wall-clock no more than 10% over exact's
CLI = [sys.executable, "-m", "edge_xsent.cli"]


def run(*args: str, out: Path | None = None) -> None:
    """One CLI command, skipped when its output exists; a JSON result is written atomically."""
    if out is not None and out.exists():
        return
    res = subprocess.run([*CLI, *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{res.stderr[-2000:]}")
    if out is not None and out.suffix == ".json":
        out.with_suffix(".tmp").write_text(res.stdout)
        out.with_suffix(".tmp").rename(out)


def score_model(model: Path, result: Path, oog: str) -> dict:
    run("eval", "oog", "--model", str(model), "--data", oog, "--json", out=result)
    r = json.loads(result.read_text())
    return {"reserved_p1": 100 * r["retrieval_mean"], "agreement": 100 * r["agreement_mean"], "score": 100 * r["score"]}


def finished(arm: str) -> bool:
    """Scored once its run has finished (a second-round arm may still be running)."""
    return (Path(TrainConfig.from_toml(HERE / f"{arm}.toml").out) / "summary.json").exists()


def score_arm(arm: str, oog: str) -> dict:
    cfg = TrainConfig.from_toml(HERE / f"{arm}.toml")
    out = Path(cfg.out)
    summary = json.loads((out / "summary.json").read_text())
    if summary["steps"] < cfg.max_steps:
        raise SystemExit(f"{arm}: the run stopped at step {summary['steps']} of {cfg.max_steps}; resume it first")
    run("debias", str(out / "model"), "--data", cfg.data, "--out", str(out / "model-debiased"),
        out=out / "model-debiased")
    run("export", str(out / "model-debiased"), "--int8", "--out", str(out / "bundle"), out=out / "bundle")
    minutes, segments = training_minutes(out)
    return {"arm": arm, "steps": summary["steps"], "minutes": round(minutes, 1), "segments": segments,
            "best_val_total": round(summary["best_val_total"], 4),
            **score_model(out / "bundle", out / "oog.json", oog)}


def verdict(exact: dict, arm: dict) -> str:
    """The rule of README.md for one arm against the exact step."""
    name = arm["arm"]
    better = arm["score"] >= exact["score"] - OOG_TIE_POINTS  # points
    in_time = arm["minutes"] <= exact["minutes"] * (1 + WALL_CLOCK_SLACK)
    if better and in_time:
        return f"{name} passes: its score is at least exact's minus 0.5 and its wall-clock within 10% of exact's"
    why = [] if better else [f"its score {arm['score']:.1f} is below exact's {exact['score']:.1f} minus 0.5"]
    why += [] if in_time else [f"its {arm['minutes']} minutes are more than 10% over exact's {exact['minutes']}"]
    return f"{name} does not pass: " + "; ".join(why)


def main() -> None:
    oog = sys.argv[1] if len(sys.argv) > 1 else "oog"
    rows = {arm: score_arm(arm, oog) for arm in ARMS if finished(arm)}
    shipped = score_model(Path("edge_xsent/resources/default-model"), HERE / "oog-shipped-default.json", oog)
    lines = [f"# Results: the approximate step options at equal wall-clock ({time.strftime('%Y-%m-%d')})", "",
             f"`python studies/cheaper-step/score.py` (benchmark `{oog}`: `edge-xsent data reserved --out {oog} "
             "--exclude corpus-g5`). The arms ran two at a time, side by side, at 1 thread; minutes are each run's own training "
             "time (log.jsonl).", "",
             "| arm | steps | minutes | best valid loss | reserved P@1 | teacher agreement | score |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r['steps']:,d} | {r['minutes']} | {r['best_val_total']} | {r['reserved_p1']:.1f} | "
              f"{r['agreement']:.1f} | {r['score']:.1f} |" for r in rows.values()]
    lines += [f"| the shipped default (its start) | | | | {shipped['reserved_p1']:.1f} | {shipped['agreement']:.1f} | "
              f"{shipped['score']:.1f} |", ""]
    lines += [f"- **{verdict(rows['exact'], r)}.**" for name, r in rows.items() if name != "exact"]
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    (HERE / "results.json").write_text(json.dumps({"arms": rows, "shipped_default": shipped}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
