"""train/finish.sh: a finished run made a candidate (debias, export, calibrate, figures, the rule), resumably."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
    recipe.write_text(f'data = "{data}"\nout = "{run}"\n\n[ship]\ntable_bits = 4\n')
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
    assert fig["model"].endswith("tiny-candidate/bundle") and fig["recipe"] == str(recipe)  # the card's recipe
    assert (run / "model-debiased" / "manifest.json").exists()
    assert json.loads((run / "bundle" / "calibration.json").read_text())["source"] == f"{data} valid split"
    assert json.loads((run / "bundle" / "manifest.json").read_text())["quantization"]["int8"]["table_bits"] == 4
    assert not (tmp_path / "default").exists()

    stamps = {p: p.stat().st_mtime_ns for p in (run / "model-debiased" / "manifest.json", run / "bundle" / "manifest.json")}
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode != 0 and "no speed" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing redone: debias, export, calibration
    assert json.loads((results / "tiny-candidate.json").read_text())["provenance"] == fig["provenance"]  # nor a part


def test_interpolate_walks_from_the_runs_start_to_its_end(tiny_model, tmp_path):
    import torch

    from edge_xsent.encode.bundle import load_model
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.loop import train

    run = tmp_path / "run"
    recipe = tmp_path / "warm.toml"  # a warm run of a few steps from the tiny model: its start is that model
    recipe.write_text(f'data = "sample"\nout = "{run}"\ninit = "{tiny_model}"\nbatch_size = 32\nlr = 0.003\n'
                      "warmup_steps = 2\nmax_steps = 10\neval_every = 10\ncheckpoint_every = 10\nvalid_pairs = 200\n"
                      "threads = 1\n\n[model]\nvocab_size = 1000\nn_layers = 1\nd_model = 48\nn_heads = 4\nd_ff = 96\n"
                      "max_len = 32\n")
    train(TrainConfig.from_toml(recipe), progress=False)
    start, end = (load_model(m)[0].state_dict() for m in (tiny_model, run / "model"))
    for alpha in (0.0, 0.5, 1.0):
        done = subprocess.run([sys.executable, str(ROOT / "train/interpolate.py"), str(recipe), "--alpha", str(alpha),
                               "--out", str(tmp_path / f"a{alpha}")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        mixed = load_model(tmp_path / f"a{alpha}" / "model")[0].state_dict()
        for k in ("tok_emb.weight", "blocks.0.ffn.0.weight" if "blocks.0.ffn.0.weight" in end else "pos_emb.weight"):
            assert torch.allclose(mixed[k], start[k] + alpha * (end[k] - start[k]), atol=1e-6), (alpha, k)
        assert not torch.equal(start["tok_emb.weight"], end["tok_emb.weight"])  # the run moved: the test can fail
        info = json.loads((tmp_path / f"a{alpha}" / "model" / "training.json").read_text())
        assert info["interpolated"]["alpha"] == alpha and info["train_config"]["init"] == str(tiny_model)
    bad = subprocess.run([sys.executable, str(ROOT / "train/interpolate.py"), str(recipe), "--alpha", "1.5", "--out",
                          str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode != 0 and "from 0 (the start) to 1" in bad.stderr


def test_check_scores_a_runs_model_before_and_after_debias(tiny_run, tmp_path):
    """train/check.sh: an early check of a run in progress, on a copy of its model folder."""
    data = corpus_with_domains(tmp_path / "corpus")
    oog = reserved_folder(tmp_path / "oog")
    out = tmp_path / "checks"
    env = {**os.environ, "DATA": str(data), "OOG": str(oog), "OOG_WIDE": str(oog)}
    done = subprocess.run(["bash", str(ROOT / "train/check.sh"), str(tiny_run), "tiny-40", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "model of step" in done.stdout
    before, after = (json.loads((out / f"tiny-40{s}.json").read_text()) for s in ("", "-debiased"))
    for fig in (before, after):
        assert {"oog", "oog_wide"} <= set(fig) and 0 <= fig["oog"]["mean"] <= 100
    assert before["model"] != after["model"]
    assert not (tiny_run / "model-debiased").exists()  # the run's folder is left as it was
    missing = subprocess.run(["bash", str(ROOT / "train/check.sh"), str(tmp_path / "none"), "x", str(out)], cwd=ROOT,
                             env=env, capture_output=True, text=True)
    assert missing.returncode != 0 and "no model folder yet" in missing.stderr


def test_ship_sh_trains_then_interpolates_by_the_recipe_and_resumes(tiny_model, tmp_path):
    """train/ship.sh, the card's one command, up to its interpolation ([ship] alpha): the steps after it
    are train/finish.sh's, tested above."""
    run = tmp_path / "run"
    recipe = tmp_path / "shipped.toml"
    recipe.write_text(f'data = "sample"\nout = "{run}"\ninit = "{tiny_model}"\nbatch_size = 32\nlr = 0.003\n'
                      "warmup_steps = 2\nmax_steps = 6\neval_every = 6\ncheckpoint_every = 6\nvalid_pairs = 200\n"
                      "threads = 1\n\n[model]\nvocab_size = 1000\nn_layers = 1\nd_model = 48\nn_heads = 4\nd_ff = 96\n"
                      "max_len = 32\n\n[ship]\nalpha = 0.5\n")
    cmd = ["bash", str(ROOT / "train/ship.sh"), str(recipe)]
    env = {**os.environ, "STOP_AFTER": "interpolate"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    mixed = tmp_path / "run-a0.5" / "model"
    record = json.loads((mixed / "training.json").read_text())["interpolated"]
    assert record["alpha"] == 0.5 and record["recipe"] == str(recipe)
    stamp = (mixed / "manifest.json").stat().st_mtime_ns
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (mixed / "manifest.json").stat().st_mtime_ns == stamp  # a finished run and a newer mix: nothing redone
    bad = tmp_path / "bad.toml"
    bad.write_text(recipe.read_text().replace("alpha = 0.5", "alpha = 2"))
    refused = subprocess.run(["bash", str(ROOT / "train/ship.sh"), str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 1 and "[ship] alpha must be a number in (0, 1]" in refused.stderr


def test_recipe_py_answers_the_shell_scripts_from_a_recipe_or_a_run_folder(tiny_run, tmp_path):
    """train/recipe.py: the one reader of recipes for ship.sh and finish.sh (an unset alpha is an empty line)."""
    recipe = tmp_path / "r.toml"
    recipe.write_text('data = "~/corpus"\nout = "~/runs/r"\n')
    ask = [sys.executable, str(ROOT / "train/recipe.py")]
    done = subprocess.run([*ask, str(recipe), "out", "ship.alpha", "data", "ship.table_bits"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    home = os.path.expanduser("~")
    assert done.stdout.split("\n") == [f"{home}/runs/r", "", f"{home}/corpus", "8", ""]
    recipe.write_text('data = "~/corpus"\n\n[ship]\ntable_bits = 4\nint8_activations = "per-row"\nrule = "student"\n')
    assert subprocess.run([*ask, str(recipe), "ship.table_bits", "ship.int8_activations", "ship.rule"], capture_output=True,
                          text=True).stdout == "4\nper-row\nstudent\n"
    recipe.write_text('data = "~/corpus"\n\n[ship]\nint8_activations = "per-token"\n')
    bad_acts = subprocess.run([*ask, str(recipe), "ship.int8_activations"], capture_output=True, text=True)
    assert bad_acts.returncode == 1 and "[ship] int8_activations must be one of ['per-tensor', 'per-row']" in bad_acts.stderr
    recipe.write_text('data = "~/corpus"\n\n[ship]\ntable_bits = 2\n')
    bad_bits = subprocess.run([*ask, str(recipe), "ship.table_bits"], capture_output=True, text=True)
    assert bad_bits.returncode == 1 and "[ship] table_bits must be one of [8, 4], got 2" in bad_bits.stderr
    run = subprocess.run([*ask, str(tiny_run), "out"], capture_output=True, text=True)
    assert run.stdout.strip() == str(tiny_run)
    recipe.write_text('data = "~/corpus"\nbatch = 3\n')
    bad = subprocess.run([*ask, str(recipe), "out"], capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown keys ['batch']" in bad.stderr and "Traceback" not in bad.stderr
