"""benchmarks/debias_rank.py: the rule that picks how many language directions to remove, and a real run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from edge_xsent.eval.decisions import debias_rank

ROOT = Path(__file__).resolve().parent.parent


def test_rule_prefers_mixed_pool_gains_that_keep_the_pair_pool():
    rows = {1: {"pair": 96.0, "mixed": 90.0}, 2: {"pair": 95.8, "mixed": 92.0}, 3: {"pair": 95.7, "mixed": 92.2}}
    assert debias_rank(rows) == 2  # rank 3 gains only 0.2 over rank 2: not enough
    rows[3]["mixed"] = 93.0
    assert debias_rank(rows) == 3
    rows[3]["pair"] = 95.0  # a full point of the paper's XSR lost: not allowed whatever the mixed gain
    assert debias_rank(rows) == 2
    assert debias_rank({1: {"pair": 96.0, "mixed": 90.0}, 2: {"pair": 96.0, "mixed": 90.1}}) == 1


def test_a_real_run_scores_each_rank_on_the_valid_split(tiny_model, tmp_path):
    out = tmp_path / "rank"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/debias_rank.py"), str(tiny_model), "--data", "sample",
                           "--ranks", "1,2", "--per-lang", "200", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    res = json.loads(Path(str(out) + ".json").read_text())
    assert res["split"] == "valid" and set(res["rows"]) == {"1", "2"} and res["chosen"] in (1, 2)
    for row in res["rows"].values():
        assert 0 <= row["mixed"] <= 100 and 0 <= row["pair"] <= 100 and 0 <= row["same_language"] <= 100
    assert "| rank |" in Path(str(out) + ".md").read_text()
