"""benchmarks/ablations.py: row naming, the paper's claims checked on numbers, and one real run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import run_script

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ablations", ROOT / "benchmarks" / "ablations.py")
ablations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablations)

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it


def test_row_names():
    assert ablations.row_name({"objective": "ugt", "align_weight": 2, "sim_weight": 2}) == "UGT+align+sim"
    assert ablations.row_name({"objective": "mlm-xtr", "align_weight": 0, "sim_weight": 0}) == "MLM+XTR"
    assert ablations.row_name({"objective": "ugt", "align_weight": 0, "sim_weight": 2}) == "UGT+sim"


def test_claims_follow_the_numbers():
    rows = {k: {"xsr": x, "classify": c} for k, (c, x) in ablations.PAPER.items()}
    got = dict(ablations.claims(rows))
    assert got["XTR beats MLM and SMLM on retrieval"] and got["align improves retrieval over UGT"]
    assert got["contrastive losses cost classification (UGT best of the three)"]
    rows["UGT+align"]["xsr"] = 10.0  # now align hurts retrieval
    got = dict(ablations.claims(rows))
    assert not got["align improves retrieval over UGT"] and got["align + sim improves retrieval over align alone"]
    assert ablations.claims({"XTR": {"xsr": 1, "classify": 1}}) == []  # rows missing: nothing claimed


def test_table_from_a_real_run(tiny_run, tmp_path):
    out = tmp_path / "abl.md"
    done = run_script("benchmarks/ablations.py", tiny_run, "--data", "sample", "--queries", "100", "--seeds", "1",
                      "--recipe", "tiny", "--out", out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "| UGT+align+sim | 60 |" in text and "benchmarks/ablations.sh tiny" in text
    data = json.loads(out.with_suffix(".json").read_text())
    row = data["rows"]["UGT+align+sim"]
    assert 0 <= row["classify"] <= 100 and 0 < row["xsr"] <= 100
