"""`python train/ship.py RECIPE`: one spec, its datasets built or verified by fingerprint, then every stage to a
candidate and the rule, resumably by stage through the ship record (train/pipeline.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_build import fake_cache  # noqa: F401  (a fixture: a small apt cache laid out like the real one)
from conftest import run_script
from test_figures import corpus_with_domains, figures_file, reserved_folder

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it

TINY = ("batch_size = 32\nlr = 0.003\nwarmup_steps = 2\nmax_steps = 6\neval_every = 6\ncheckpoint_every = 6\n"
        "valid_pairs = 200\nthreads = 1\n\n[model]\nvocab_size = 1000\nn_layers = 1\nd_model = 48\nn_heads = 4\n"
        "d_ff = 96\nmax_len = 32\n")


def ship(*args):
    return run_script("train/ship.py", *args, cwd=ROOT)


def spec(tmp_path: Path, tiny_model: Path, ship_lines: str = "") -> Path:
    """A tiny recipe from the tiny model, with its [ship] spec on the test's own benchmarks and results."""
    data = corpus_with_domains(tmp_path / "corpus")
    shutil.copy(data / "test.tsv", data / "valid.tsv")  # calibration reads the valid split
    oog = reserved_folder(tmp_path / "oog")
    recipe = tmp_path / "candidate.toml"
    recipe.write_text(f'data = "{data}"\nout = "{tmp_path / "runs" / "cand"}"\ninit = "{tiny_model}"\n{TINY}\n[ship]\n'
                      f'alpha = 0.5\ntable_bits = 4\noog = "{oog}"\noog_wide = "{oog}"\ncorpus_g = "{data}"\n'
                      f'parts = ["general", "oog", "oog_wide", "oog_small", "corpus_g"]\nresults = "{tmp_path / "results"}"\n'
                      + ship_lines)
    return recipe


def test_one_command_makes_a_candidate_stage_by_stage_and_redoes_nothing(tiny_model, tmp_path):
    recipe = spec(tmp_path, tiny_model)
    done = ship(recipe, "--stop-after", "figures", "--out", tmp_path / "default", "--docs", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    target = tmp_path / "runs" / "cand-a0.5"
    record = json.loads((tmp_path / "results" / "cand-a0.5.ship.json").read_text())
    assert list(record["stages"]) == ["train", "interpolate", "debias", "export", "calibrate", "figures"]
    assert {d["role"] for d in record["datasets"].values()} == {"training", "oog"}  # corpus-g and judging: the corpus
    assert record["stages"]["calibrate"]["outputs"]["model"] != record["stages"]["export"]["outputs"]["model"]
    fig = json.loads((tmp_path / "results" / "cand-a0.5.json").read_text())
    assert {"general", "oog", "oog_wide", "oog_small", "corpus_g"} <= set(fig) and fig["model"].endswith("cand-a0.5/bundle")
    assert json.loads((target / "bundle" / "manifest.json").read_text())["quantization"]["int8"]["table_bits"] == 4
    assert json.loads((target / "model" / "training.json").read_text())["interpolated"]["alpha"] == 0.5

    stamps = {p: p.stat().st_mtime_ns for p in (target / "model" / "manifest.json", target / "bundle" / "manifest.json",
                                                tmp_path / "results" / "cand-a0.5.json")}
    figures_file(tmp_path / "results" / "shipped.json", "shipped", n_langs=9)
    again = ship(recipe, "--out", tmp_path / "default", "--docs", tmp_path)  # on to the rule, which needs speed
    assert again.returncode == 1 and "no speed" in again.stderr and "--parts speed" in again.stderr, again.stderr[-2000:]
    assert "+ " + sys.executable + " -m edge_xsent debias" not in again.stderr  # nothing redone but training's check
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps and not (tmp_path / "default").exists()

    (tmp_path / "oog" / "test.tsv").write_text((tmp_path / "oog" / "test.tsv").read_text() + "en\tfr\ta\tb\tx\treserved\n")
    changed = ship(recipe, "--out", tmp_path / "default", "--docs", tmp_path)
    assert changed.returncode == 1 and "changed since" in changed.stderr and "Traceback" not in changed.stderr
    recipe.write_text(recipe.read_text().replace("max_steps = 6", "max_steps = 7"))
    edited = ship(recipe, "--out", tmp_path / "default", "--docs", tmp_path)
    assert edited.returncode == 1 and "changed since" in edited.stderr and "remove" in edited.stderr


def test_a_missing_dataset_is_built_by_the_spec_or_named(fake_cache, tiny_model, tmp_path):  # noqa: F811
    built = tmp_path / "built-fr"
    recipe = spec(tmp_path, tiny_model, f'data = "{built}"\n\n[ship.datasets]\n'
                                        f'"{built}" = "build --langs fr --offline --cache {fake_cache}"\n')
    done = ship(recipe, "--stop-after", "datasets", "--docs", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "results" / "cand-a0.5.ship.json").read_text())
    assert record["datasets"][str(built)]["built_by"].startswith("edge-xsent data build --langs fr")
    assert (built / "stats.json").exists() and record["datasets"][str(built)]["role"] == "judging"
    recipe.write_text(recipe.read_text().replace(f'"{built}" = "build', f'"{tmp_path}/elsewhere" = "build'))
    shutil.rmtree(built)
    (tmp_path / "results" / "cand-a0.5.ship.json").unlink()
    missing = ship(recipe, "--stop-after", "datasets", "--docs", tmp_path)
    assert missing.returncode == 1 and f"{built} (judging): missing" in missing.stderr and "[ship.datasets]" in missing.stderr


def test_the_record_writes_the_decisions_and_readme_blocks(tmp_path):
    """What a ship record says lands in DECISIONS.md (always) and the README (when it shipped), once: a rerun
    replaces its own block."""
    from conftest import script_module

    pipeline = script_module("train/pipeline.py")
    BLOCK, block_lines, readme_lines, write_block = (pipeline.BLOCK, pipeline.block_lines, pipeline.readme_lines,
                                                     pipeline.write_block)

    record = {"recipe": "train/x.toml", "recipe_sha256": "ab" * 32, "started": "2026-11-28 16:00",
              "datasets": {"~/edge-xsent-data/oog": {"sha256": "cd" * 32, "role": "oog", "built_by": "edge-xsent data reserved"}},
              "stages": {"judge": {"done": "2026-11-28 17:00", "inputs": {}, "outputs": {"decision": "ef" * 32},
                                   "pick": "shipped", "shipped": False, "table": ["| model | verdict |", "| x | stays |"]}}}
    doc = tmp_path / "DECISIONS.md"
    doc.write_text("# What ships\n\nHand-written text.\n")
    for _ in range(2):
        write_block(doc, "results/x.ship.json", block_lines(record))
    text = doc.read_text()
    assert text.startswith("# What ships\n\nHand-written text.\n") and text.count("<!-- end of ship record -->") == 1
    assert "the rule keeps shipped" in text and "| `~/edge-xsent-data/oog` | oog | cdcdcdcdcdcd |" in text
    assert "| x | stays |" in text
    readme = tmp_path / "README.md"
    readme.write_text("# edge-xsent\n\n" + BLOCK[0].format(record="r") + "\nold words\n" + BLOCK[1] + "\n\n## Next\n")
    record["stages"]["judge"].update(pick="cand", shipped=True, figures=str(figures_file(tmp_path / "cand.json", "cand")))
    write_block(readme, "results/x.ship.json", readme_lines(record))
    text = readme.read_text()
    assert "old words" not in text and text.endswith("\n\n## Next\n") and "| `cand` | 14.0 | 3.00 | 80.0 | - |" in text


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
        done = run_script("train/interpolate.py", recipe, "--alpha", alpha, "--out", tmp_path / f"a{alpha}")
        assert done.returncode == 0, done.stderr
        mixed = load_model(tmp_path / f"a{alpha}" / "model")[0].state_dict()
        for k in ("tok_emb.weight", "blocks.0.ffn.0.weight" if "blocks.0.ffn.0.weight" in end else "pos_emb.weight"):
            assert torch.allclose(mixed[k], start[k] + alpha * (end[k] - start[k]), atol=1e-6), (alpha, k)
        assert not torch.equal(start["tok_emb.weight"], end["tok_emb.weight"])  # the run moved: the test can fail
        info = json.loads((tmp_path / f"a{alpha}" / "model" / "training.json").read_text())
        assert info["interpolated"]["alpha"] == alpha and info["train_config"]["init"] == str(tiny_model)
    bad = run_script("train/interpolate.py", recipe, "--alpha", "1.5", "--out", tmp_path / "bad")
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


def test_the_spec_is_checked_as_it_is_read(tmp_path):
    """Every [ship] key is checked where the recipe is read: one line naming the key and what it takes."""
    from shipspec import ShipConfig
    from edge_xsent.config import TrainConfig
    from edge_xsent.errors import UserError

    bad = {"alpha": (2, "alpha must be a number in (0, 1]"), "table_bits": (2, "table_bits must be one of [8, 4], got 2"),
           "int8_activations": ("per-token", "int8_activations must be one of ['per-tensor', 'per-row', 'static']"),
           "rule": ("best", "rule must be one of"), "parts": (["oog", "speeed"], "parts must be a list of"),
           "oog": (3, "oog must be a path"), "datasets": ({"x": "rm -rf x"}, "begin with build or reserved"),
           "batch": (3, "unknown keys ['batch']")}
    for key, (value, message) in bad.items():
        with pytest.raises(UserError, match=re.escape(message)):
            ShipConfig.from_dict({key: value}, "r.toml")
    for plain in (ShipConfig.from_dict, lambda raw, where: TrainConfig.from_recipe({"ship": raw}, where)):
        with pytest.raises(UserError, match=re.escape("r.toml: ship must be a table ([ship], then alpha = 0.75 on")):
            plain(0.75, "r.toml")  # `ship = 0.75`: training and the ship script say the same
    good = ShipConfig.from_dict({"alpha": 1, "parts": ["oog"], "datasets": {"~/d": "reserved --langs fr"}})
    assert good.alpha == 1.0 and good.parts == ("oog",) and good.oog_wide == "~/edge-xsent-data/oog-m1"
    recipe = tmp_path / "r.toml"
    recipe.write_text('data = "sample"\n\n[ship]\nalpha = 2\n')
    done = ship(recipe)
    assert done.returncode == 1 and "[ship] alpha must be a number in (0, 1]" in done.stderr and "Traceback" not in done.stderr
