"""train/finish.sh: a finished run made a candidate (debias, export, calibrate, figures, the rule), resumably."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from test_figures import corpus_with_domains, figures_file, reserved_folder

ROOT = Path(__file__).resolve().parent.parent


def test_finish_makes_a_candidate_and_redoes_nothing_on_a_rerun(tiny_run, tmp_path):
    run = tmp_path / "runs" / "tiny-candidate"
    shutil.copytree(tiny_run, run)
    data = corpus_with_domains(tmp_path / "corpus")
    shutil.copy(data / "test.tsv", data / "valid.tsv")  # calibration reads the valid split
    oog = reserved_folder(tmp_path / "oog")
    recipe = tmp_path / "candidate.toml"
    recipe.write_text(f'data = "{data}"\nout = "{run}"\n')
    results = tmp_path / "results"
    results.mkdir()
    figures_file(results / "shipped.json", "shipped", n_langs=9)
    env = {**os.environ, "RESULTS": str(results), "PARTS": "general,oog,oog_wide,oog_small,corpus_g", "DATA": str(data),
           "OOG": str(oog), "OOG_WIDE": str(oog), "CORPUS_G": str(data), "SHIP_OUT": str(tmp_path / "default")}
    cmd = ["bash", str(ROOT / "train/finish.sh"), str(recipe)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    # Without the speed part the rule cannot judge: ship.py says which part and how to measure it.
    assert done.returncode != 0 and "no speed" in done.stderr and "--parts speed" in done.stderr, done.stderr
    fig = json.loads((results / "tiny-candidate.json").read_text())
    assert {"general", "oog", "oog_wide", "oog_small", "corpus_g"} <= set(fig) and "speed" not in fig
    assert fig["model"].endswith("tiny-candidate/bundle")
    assert (run / "model-debiased" / "manifest.json").exists()
    assert json.loads((run / "bundle" / "calibration.json").read_text())["source"] == f"{data} valid split"
    assert not (tmp_path / "default").exists()

    stamps = {p: p.stat().st_mtime_ns for p in (run / "model-debiased" / "manifest.json", run / "bundle" / "manifest.json")}
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode != 0 and "no speed" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing redone: debias, export, calibration
    assert json.loads((results / "tiny-candidate.json").read_text())["provenance"] == fig["provenance"]  # nor a part
