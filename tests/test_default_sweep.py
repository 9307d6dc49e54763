"""benchmarks/default_sweep.py: the decision rule, and one real (tiny) point end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from edge_xsent.eval.decisions import smallest_near_best

ROOT = Path(__file__).resolve().parent.parent


def test_rule_picks_the_smallest_model_near_the_best():
    rows = {"big": {"p1": 93.0, "int8_mb": 20.0}, "mid": {"p1": 92.2, "int8_mb": 12.0},
            "small": {"p1": 91.5, "int8_mb": 5.0}}
    assert smallest_near_best(rows) == "mid"  # small is 1.5 points behind: too far
    rows["small"]["p1"] = 92.1
    assert smallest_near_best(rows) == "small"
    rows["big"]["p1"] = 99.0  # nothing else near: the best wins whatever its size
    assert smallest_near_best(rows) == "big"


def test_one_point_trains_for_its_budget_and_is_scored(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text((ROOT / "train/tiny-cpu.toml").read_text().replace('out = "runs/tiny"', f'out = "{tmp_path}/x"'))
    out, runs = tmp_path / "sweep.md", tmp_path / "runs"
    cmd = [sys.executable, str(ROOT / "benchmarks/default_sweep.py"), "--config", str(cfg), "--minutes", "0.05",
           "--points", "1L-512-16k", "--runs", str(runs), "--threads", "1", "--queries", "100", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    state = json.loads((runs / "sweep.json").read_text())
    point = state["points"]["1L-512-16k"]
    assert point["model"]["n_layers"] == 1 and point["model"]["vocab_size"] == 4000  # the override, on this config
    assert point["steps"] == point["max_steps"] == max(20, int(3 / point["step_s"]))
    assert 0 <= point["p1"] <= 100 and len(point["xsr"]) == 8  # en<->de/es/fr/it, both directions
    assert "| 1L-512-16k | 1 | 128 | 4,000 |" in out.read_text()
    # Run again: the point is done, so nothing retrains and the figures stay.
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert json.loads((runs / "sweep.json").read_text())["points"]["1L-512-16k"]["p1"] == point["p1"]
    # A different budget in the same folder would mix budgets: refused.
    bad = subprocess.run(cmd[:5] + ["0.1"] + cmd[6:], capture_output=True, text=True)
    assert bad.returncode != 0 and "--minutes 0.05" in bad.stderr
