import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import ROOT, run_until, tiny_config
from edge_xsent.train import objectives
from edge_xsent.errors import UserError
from edge_xsent.train.batches import BatchPlan
from edge_xsent.config import TrainConfig
from edge_xsent.train.loop import TrainingStopped, train
from edge_xsent.train.runfolder import checkpoint_path, load_checkpoint
from edge_xsent.train.schedule import lr_at


def weights(ckpt: Path) -> dict:
    return load_checkpoint(ckpt)["model"]


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tiny_model_learns(tiny_run):
    log = [json.loads(l) for l in (tiny_run / "log.jsonl").read_text().splitlines()]
    vals = [r for r in log if "val_total" in r]
    assert len(vals) >= 2 and vals[-1]["val_total"] < vals[0]["val_total"]
    train_losses = [r["total"] for r in log if "total" in r]
    assert np.mean(train_losses[-3:]) < np.mean(train_losses[:3])
    assert {"lr", "pairs_per_s", "gen", "align", "sim"} <= set(log[0])
    folder = tiny_run / "model"
    assert {"config.json", "model.safetensors", "tokenizer.model", "tokenizer.json", "training.json",
            "manifest.json"} <= {p.name for p in folder.iterdir()}
    info = json.loads((folder / "training.json").read_text())
    assert info["train_config"]["objective"] == "ugt" and info["langs"] == ["de", "en", "es", "fr", "it"]


def test_batch_plan_is_deterministic_and_covers_each_epoch_once():
    lengths = np.random.default_rng(0).integers(1, 50, size=1000)
    plan = BatchPlan(lengths, batch_size=32, seed=3, world=2)
    again = BatchPlan(lengths, batch_size=32, seed=3, world=2)
    epoch = np.concatenate([plan.indices(s, r) for s in range(plan.per_epoch) for r in range(2)])
    assert len(set(epoch.tolist())) == len(epoch) == plan.per_epoch * 64  # no pair twice in an epoch
    assert all(np.array_equal(plan.indices(s, r), again.indices(s, r)) for s in (0, 5, plan.per_epoch + 2) for r in (0, 1))
    assert not np.array_equal(plan.indices(0), plan.indices(plan.per_epoch))  # a new order each epoch
    spread = [np.ptp(lengths[plan.indices(s)]) for s in range(plan.per_epoch)]
    assert np.median(spread) < 10  # batches hold similar lengths (less padding)


def test_batch_plan_by_pair_keeps_each_batch_in_one_group():
    rng = np.random.default_rng(0)
    groups = np.repeat([1002, 1003, 1004], [700, 300, 20])  # the third group is smaller than a batch
    lengths = rng.integers(1, 50, size=len(groups))
    plan = BatchPlan(lengths, batch_size=32, seed=3, groups=groups)
    assert plan.per_epoch == 700 // 32 + 300 // 32
    batches = [plan.indices(s) for s in range(plan.per_epoch)]
    assert all(len(set(groups[b].tolist())) == 1 for b in batches)  # one language pair per batch
    epoch = np.concatenate(batches)
    assert len(set(epoch.tolist())) == len(epoch) and not (groups[epoch] == 1004).any()
    where = np.flatnonzero([groups[b[0]] == 1003 for b in batches])
    assert np.ptp(where) + 1 > len(where)  # the groups' batches are interleaved, not one block after another
    assert np.median([np.ptp(lengths[b]) for b in batches]) < 10  # and still of similar lengths
    assert np.array_equal(plan.indices(5), BatchPlan(lengths, 32, 3, groups=groups).indices(5))


def test_forked_workers_cut_text_as_the_calling_process_does(monkeypatch):
    """The set-up's parallel cut (encode_texts): the same ids, in order, empty texts included."""
    from edge_xsent.encode.encoder import DEFAULT_MODEL
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.train import batches

    tok = Tokenizer.load(DEFAULT_MODEL / "tokenizer.model")
    rows = (ROOT / "edge_xsent/resources/sample-corpus/train.tsv").read_text(encoding="utf-8").splitlines()[1:2000]
    texts = [r.split("\t")[2] for r in rows] + ["", "   "] + [r.split("\t")[3] for r in rows]
    monkeypatch.setattr(batches, "CHUNK", 300)  # several chunks, the last a short one
    monkeypatch.setattr(batches, "PARALLEL_FROM", 0)
    forked = batches.encode_texts(tok, texts, 24, workers=2)
    here = tok.encode(texts, 24)
    assert len(forked) == len(texts) and [x.tolist() for x in forked] == here
    assert forked[0].dtype == np.int64 and len(forked[1999]) == 0
    assert batches.prep_workers(1) == 1  # a run held to one thread cuts in one process


def test_lr_schedule():
    cfg = TrainConfig(warmup_steps=10, max_steps=110, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.55) and lr_at(110, cfg) == pytest.approx(0.1)


def test_deterministic_and_resume_takes_the_same_steps(tmp_path):
    straight = tmp_path / "straight"
    train(tiny_config(straight, max_steps=20, eval_every=100), progress=False)
    twice = tmp_path / "twice"
    train(tiny_config(twice, max_steps=20, eval_every=100), progress=False)
    assert same_weights(weights(checkpoint_path(straight)), weights(checkpoint_path(twice)))

    # Stop after 10 steps (a checkpoint), then resume to 20 with the same config.
    resumed = tmp_path / "resumed"
    cfg10 = tiny_config(resumed, max_steps=20, eval_every=100)
    run_until(cfg10, 10)
    assert load_checkpoint(checkpoint_path(resumed))["step"] == 10
    summary = train(cfg10, progress=False)
    assert summary["steps"] == 20
    assert same_weights(weights(checkpoint_path(straight)), weights(checkpoint_path(resumed)))
    # Run once more: nothing left to do, and the finished run's summary is kept, not overwritten.
    recorded = (resumed / "summary.json").read_text()
    assert train(cfg10, progress=False) == json.loads(recorded)
    assert (resumed / "summary.json").read_text() == recorded


def test_resume_with_different_config_is_refused(tmp_path):
    cfg = tiny_config(tmp_path / "r", max_steps=10, eval_every=100)
    train(cfg, progress=False)
    with pytest.raises(UserError, match="different config"):
        train(tiny_config(tmp_path / "r", max_steps=10, eval_every=100, lr=1e-2), progress=False)
    assert train(tiny_config(tmp_path / "r", max_steps=10, eval_every=100, lr=1e-2), fresh=True, progress=False)["steps"] == 10


def test_checkpoint_from_before_a_new_config_field_still_resumes(tmp_path):
    """A field added to the config since the checkpoint was written takes its default, not a refusal."""
    cfg = tiny_config(tmp_path / "r", max_steps=10, eval_every=100)
    train(cfg, progress=False)
    ckpt = load_checkpoint(checkpoint_path(tmp_path / "r"))
    del ckpt["config"]["model"]["lang_subspace"]  # as written before that field existed
    torch.save(ckpt, checkpoint_path(tmp_path / "r"))
    assert train(tiny_config(tmp_path / "r", max_steps=12, eval_every=100), progress=False)["steps"] == 12


def test_nan_loss_stops_with_last_checkpoint_intact(tmp_path, monkeypatch):
    out = tmp_path / "nan"
    real = objectives.align_loss
    calls = {"n": 0}

    def poisoned(u, v):
        calls["n"] += 1
        return real(u, v) * (float("nan") if calls["n"] > 14 else 1.0)

    monkeypatch.setattr(objectives, "align_loss", poisoned)
    with pytest.raises(TrainingStopped, match="loss became nan at step 14"):
        train(tiny_config(out, max_steps=30, eval_every=100), progress=False)
    assert load_checkpoint(checkpoint_path(out))["step"] == 10


def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "full"
    cfg = tiny_config(out, max_steps=20, eval_every=100)
    real = torch.save

    def disk_full(obj, f, *a, **k):
        if obj.get("step") == 20:
            f.write(b"partial")
            raise OSError(28, "No space left on device")
        return real(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(TrainingStopped, match="No space left"):
        train(cfg, progress=False)
    monkeypatch.setattr(torch, "save", real)
    assert load_checkpoint(checkpoint_path(out))["step"] == 10
    assert not list((out / "checkpoints").glob("*.tmp"))  # the partial file was removed


@pytest.mark.parametrize("objective,align,sim", [("mlm", 0, 0), ("mlm-xtr", 0, 0), ("smlm", 0, 0), ("xtr", 0, 0), ("ugt", 0, 0),
                                                  ("ugt", 2, 2), ("none", 2, 0), ("xtr", 0, 2)])
def test_each_objective_trains(tmp_path, objective, align, sim):
    cfg = tiny_config(tmp_path / "o", objective=objective, align_weight=align, sim_weight=sim, max_steps=4,
                      eval_every=4, checkpoint_every=4, max_train_pairs=600, valid_pairs=64)
    s = train(cfg, progress=False)
    assert s["steps"] == 4 and np.isfinite(s["best_val_total"])
    assert ("gen" in s["last"]) == (objective != "none")


def test_mlm_logits_only_at_masked_positions_give_the_full_loss():
    from edge_xsent.train import objectives as obj
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.encode.tokenizer import MASK_ID
    from edge_xsent.train.objectives import Objective
    from edge_xsent.config import TrainConfig

    torch.manual_seed(0)
    mcfg = EncoderConfig(vocab_size=50, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=12, dropout=0.0)
    model = DualEncoder(mcfg)
    o = Objective(model, TrainConfig(data="sample", objective="mlm", align_weight=0, sim_weight=0, model=mcfg),
                  torch.zeros(50, dtype=torch.bool))
    a, b = torch.randint(3, 50, (4, 12)), torch.randint(3, 50, (4, 12))
    am, bm = torch.ones_like(a), torch.ones_like(b)
    am[0, 8:] = 0
    batch = {"a": a, "am": am, "b": b, "bm": bm, "la": torch.zeros(4, dtype=torch.long), "lb": torch.ones(4, dtype=torch.long)}
    got = o(batch, torch.Generator().manual_seed(3))["gen"]
    g = torch.Generator().manual_seed(3)
    (a_in, la_lab), (b_in, lb_lab) = obj.mask_tokens_bert(a, am, MASK_ID, 50, g), obj.mask_tokens_bert(b, bm, MASK_ID, 50, g)
    full = 0.5 * (obj.mlm_loss(model.generative_logits(model.encode_tokens(a_in, am)), la_lab)
                  + obj.mlm_loss(model.generative_logits(model.encode_tokens(b_in, bm)), lb_lab))
    assert torch.allclose(got, full, atol=1e-5)


def test_a_given_tokenizer_trains_into_a_fresh_folder(tiny_run, tmp_path):
    out = tmp_path / "new" / "run"  # neither folder exists yet
    cfg = tiny_config(out, tokenizer=str(tiny_run / "tokenizer.model"), max_steps=2, eval_every=2,
                      max_train_pairs=600, valid_pairs=64)
    train(cfg, progress=False)
    assert (out / "tokenizer.model").read_bytes() == (tiny_run / "tokenizer.model").read_bytes()
    assert (out / "model" / "model.safetensors").exists()


def test_multilingual_head_trains(tmp_path):
    cfg = tiny_config(tmp_path / "ems", multilingual_head=True, max_steps=4, eval_every=4, max_train_pairs=600,
                      valid_pairs=64)
    train(cfg, progress=False)
    config = json.loads((tmp_path / "ems" / "model" / "config.json").read_text())
    assert config["model"]["n_langs"] == len(config["langs"]) == 2  # the first 600 pairs are en-de


def test_bad_inputs(tmp_path):
    one_lang = tmp_path / "mono.en-en.tsv"
    one_lang.write_text("".join(f"sentence {i}\tphrase {i}\n" for i in range(100)))
    with pytest.raises(UserError, match="one language"):
        train(tiny_config(tmp_path / "a", data=str(one_lang)), progress=False)
    with pytest.raises(UserError, match="lower --batch-size"):
        train(tiny_config(tmp_path / "b", max_train_pairs=20), progress=False)
    with pytest.raises(UserError, match="too small for a vocabulary"):
        train(tiny_config(tmp_path / "c", max_train_pairs=200, model=dict(vocab_size=60000)), progress=False)
    empty = tmp_path / "empty.en-fr.tsv"
    empty.write_text("")
    with pytest.raises(UserError, match="no training pairs"):
        train(tiny_config(tmp_path / "d", data=str(empty)), progress=False)
    with pytest.raises(UserError, match="unknown objective"):
        tiny_config(tmp_path / "e", objective="bert")


def test_config_file_and_unknown_keys(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text('data = "sample"\nmax_steps = 7\n[model]\nn_layers = 3\n')
    cfg = TrainConfig.from_toml(p, {"lr": 0.5, "model": {"d_model": 64, "n_heads": 4}})
    assert (cfg.max_steps, cfg.lr, cfg.model.n_layers, cfg.model.d_model) == (7, 0.5, 3, 64)
    p.write_text("max_step = 7\n")
    with pytest.raises(UserError, match=r"unknown keys \['max_step'\]"):
        TrainConfig.from_toml(p)
    p.write_text("max_steps = \n")
    with pytest.raises(UserError, match="invalid TOML"):
        TrainConfig.from_toml(p)
    p.write_bytes(b'data = "\xff\xfe"\n')
    with pytest.raises(UserError, match=rf"{p.name}: not UTF-8 text .* save the recipe as UTF-8"):
        TrainConfig.from_toml(p)
    with pytest.raises(UserError, match="is a folder; --config takes a recipe file"):
        TrainConfig.from_toml(p.parent)


@pytest.mark.slow
def test_kill_9_and_resume_matches_uninterrupted_run(tmp_path, tiny_run):
    """A real training subprocess is killed with SIGKILL mid-run, then resumed to the end (the reference run and
    the resumed one in this process: the killed one is the process under test)."""
    from conftest import run_cli

    # The tiny run's tokenizer (the same sample, size and seed): three processes need not each train one.
    args = ["--data", "sample", "--tokenizer", str(tiny_run / "tokenizer.model"), "--vocab-size", "1000",
            "--n-layers", "1", "--d-model", "32",
            "--n-heads", "2", "--d-ff", "64", "--max-len", "32", "--batch-size", "32", "--max-steps", "60",
            "--warmup-steps", "5", "--eval-every", "1000", "--checkpoint-every", "5", "--threads", "1", "--quiet"]
    cmd = [sys.executable, "-m", "edge_xsent.cli", "train"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert run_cli("train", *args, "--out", tmp_path / "ref").returncode == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen(cmd + args + ["--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        ck = checkpoint_path(out)
        if ck.exists() and load_checkpoint(ck)["step"] >= 15:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = load_checkpoint(checkpoint_path(out))["step"]
    assert 15 <= killed_at < 60, "the run should have been killed mid-way"
    res = run_cli("train", *args, "--out", out)
    assert res.returncode == 0, res.stderr
    assert f"resuming at step {killed_at}" in res.stderr
    assert same_weights(weights(checkpoint_path(tmp_path / "ref")), weights(checkpoint_path(out)))


def test_a_resumed_run_may_name_another_init_but_not_another_objective(tmp_path):
    """init only chose the first step's weights; a recipe that later spells it differently still resumes."""
    import dataclasses

    from conftest import tiny_config
    from edge_xsent.train.runfolder import _comparable

    cfg = tiny_config(tmp_path / "run", init="default")
    assert _comparable(cfg) == _comparable(dataclasses.replace(cfg, init="~/elsewhere/model", max_steps=99))
    assert _comparable(cfg) != _comparable(dataclasses.replace(cfg, teacher_loss="mse"))


def test_a_warm_started_run_resumes_after_its_init_folder_is_gone(tiny_model, tmp_path):
    """A long run outlives the folder it started from: resuming reads only the run's own checkpoint
    and tokenizer."""
    from edge_xsent.train.loop import train

    start = tmp_path / "start"
    shutil.copytree(tiny_model, start)
    cfg = dict(init=str(start), max_steps=4, checkpoint_every=2, eval_every=4, model=dict(d_model=48, n_heads=4, d_ff=96))
    train(tiny_config(tmp_path / "run", **cfg), progress=False)
    shutil.rmtree(start)
    assert train(tiny_config(tmp_path / "run", **{**cfg, "max_steps": 6}), progress=False)["steps"] == 6


def test_a_warm_start_carries_what_fits_and_starts_the_rest_as_a_new_model_does(tiny_model, tmp_path):
    """The model a warm start fills is not drawn first (e5's table: about 1 s of 96M numbers); what the start does
    not carry (a multilingual head's wider input, its language rows) is started as a new model starts it."""
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.loop import build_trainer, prepare, start_processes

    cfg = tiny_config(tmp_path / "run", init=str(tiny_model), multilingual_head=True, max_train_pairs=600,
                      valid_pairs=64, model=dict(d_model=48, n_heads=4, d_ff=96))
    procs = start_processes(cfg)
    model = build_trainer(cfg, prepare(cfg, tmp_path / "run", False, procs, False), None, procs).model
    trained = load_model(tiny_model)[0]
    for name in ("tok_emb.weight", "pos_emb.weight", "blocks.0.ff1.weight", "emb_ln.weight", "head_dense.bias"):
        assert torch.equal(model.get_parameter(name), trained.get_parameter(name)), name
    for t in (model.lang_emb.weight, model.head_dense.weight):  # not carried: the head reads the language too
        assert 0.015 < float(t.std()) < 0.025, float(t.std())  # N(0, 0.02), not torch's default nor uninitialised


def test_a_frozen_table_stays_the_starts_while_the_blocks_train(tiny_model, tmp_path):
    """freeze_table (the students' recipe: e5's table as it is): the run's table is its start's, to the bit."""
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.loop import train

    cfg = tiny_config(tmp_path / "run", init=str(tiny_model), freeze_table=True, max_steps=3, eval_every=3,
                      checkpoint_every=3, max_train_pairs=600, valid_pairs=64, model=dict(d_model=48, n_heads=4, d_ff=96))
    train(cfg, progress=False)
    start, trained = load_model(tiny_model)[0], load_model(tmp_path / "run" / "model")[0]
    assert torch.equal(trained.tok_emb.weight, start.tok_emb.weight)
    assert not torch.equal(trained.blocks[0].ff1.weight, start.blocks[0].ff1.weight)


@pytest.mark.parametrize("setting, value, named", [
    ("lr", -5, "lr must be a finite number"), ("lr", float("nan"), "lr must be a finite number"),
    ("checkpoint_every", 0, "checkpoint_every must be a whole number >= 1"),
    ("eval_every", 0, "eval_every must be a whole number >= 1"),
    ("batch_size", "32", "batch_size must be a whole number"), ("max_steps", 3.5, "max_steps must be a whole number"),
    ("valid_pairs", -5, "valid_pairs must be a whole number >= 0"), ("device", "tpu", "device must be one of"),
    ("model", 5, "model must be a table"), ("threads", True, "threads must be a whole number"),
])
def test_a_bad_recipe_value_names_the_setting_before_any_work(tmp_path, setting, value, named):
    with pytest.raises(UserError, match=named):
        TrainConfig.from_dict({"data": "sample", "out": str(tmp_path / "r"), setting: value})
    if setting == "model":  # read from a recipe, built in code: the same line, showing the table form
        for made in (lambda: TrainConfig.from_recipe({setting: value}, "r.toml"), lambda: TrainConfig(model=value)):
            with pytest.raises(UserError, match=re.escape("model must be a table of the encoder's settings ([model], then")):
                made()


@pytest.mark.parametrize("setting, value", [("dropout", 1.5), ("max_len", 10**9), ("d_ff", 10**9), ("n_layers", 2.0)])
def test_a_bad_model_value_is_refused_before_allocating(tmp_path, setting, value):
    with pytest.raises(UserError, match=f"{setting} must be"):
        tiny_config(tmp_path / "r", model={setting: value})


def test_a_bad_recipe_value_is_one_error_line_from_the_command(tmp_path):
    from click.testing import CliRunner

    from edge_xsent.cli import main

    recipe = tmp_path / "r.toml"
    recipe.write_text('data = "sample"\nlr = -5\n')
    result = CliRunner().invoke(main, ["train", "--config", str(recipe), "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "lr must be a finite number between 1e-12 and 10.0, got -5" in result.output


def test_fresh_with_a_typo_in_data_keeps_the_run_and_a_killed_fresh_run_is_not_the_old_one(tmp_path, monkeypatch):
    import edge_xsent.train.loop as T

    cfg = tiny_config(tmp_path / "r", max_steps=10, eval_every=100)
    train(cfg, progress=False)
    with pytest.raises(UserError):
        train(tiny_config(tmp_path / "r", max_steps=10, eval_every=100, data=str(tmp_path / "sampel")), fresh=True,
              progress=False)
    assert load_checkpoint(checkpoint_path(tmp_path / "r"))["step"] == 10  # the typo lost nothing

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(T.Trainer, "step", killed)
    with pytest.raises(KeyboardInterrupt):  # a fresh run killed before its first checkpoint
        train(cfg, fresh=True, progress=False)
    assert not checkpoint_path(tmp_path / "r").exists() and not (tmp_path / "r" / "summary.json").exists()


@pytest.mark.parametrize("torn", ['{"steps": "10"}', '{"steps": 10', "[]"])
def test_a_torn_summary_is_one_error_naming_the_way_out(tmp_path, torn):
    cfg = tiny_config(tmp_path / "r", max_steps=10, eval_every=100)
    train(cfg, progress=False)
    checkpoint_path(tmp_path / "r").unlink()  # a finished run whose checkpoint is gone: its summary is read
    (tmp_path / "r" / "summary.json").write_text(torn)
    with pytest.raises(UserError, match="summary.json is unreadable or has no whole-number 'steps'"):
        train(cfg, progress=False)


def test_a_model_folder_records_paths_under_home_as_tilde(tmp_path):
    from pathlib import Path

    from edge_xsent.config import portable
    from edge_xsent.config import TrainConfig

    home = str(Path.home())
    recorded = portable({"out": f"{home}/edge-xsent-runs/x", "data": "corpus", "init": None, "lr": 1e-3,
                               "teacher_cache": f"{home}x/elsewhere"})
    assert recorded == {"out": "~/edge-xsent-runs/x", "data": "corpus", "init": None, "lr": 1e-3,
                        "teacher_cache": f"{home}x/elsewhere"}  # only the home folder itself, not a look-alike
    assert TrainConfig(out=recorded["out"]).out == f"{home}/edge-xsent-runs/x"  # read back, it is the same run


def test_a_pinned_start_is_that_model_or_an_error_before_any_work(tiny_run, tmp_path):
    import hashlib

    from conftest import tiny_config
    from edge_xsent.train.warmstart import check_pinned_start

    model = tiny_run / "model"
    right = hashlib.sha256((model / "manifest.json").read_bytes()).hexdigest()
    check_pinned_start(tiny_config(tmp_path / "a", init=str(model), init_sha256=right))  # the pinned model: fine
    wrong = tiny_config(tmp_path / "b", init=str(model), init_sha256="0" * 64)
    with pytest.raises(UserError, match=r"is not this recipe's pinned start: its manifest.json has SHA-256 "
                                        rf"{right[:16]}\.\.\., the recipe pins 0000000000000000"):
        train(wrong, progress=False)
    assert not (tmp_path / "b" / "tokenizer.model").exists()  # refused before the data was read


def test_batch_by_pair_reaches_the_training_plan(tmp_path, monkeypatch):
    import edge_xsent.train.batches as B
    import edge_xsent.train.loop as T
    from conftest import tiny_config

    seen = []

    class Recording(B.BatchPlan):
        def __init__(self, *args, groups=None, **kwargs):
            seen.append(groups)
            super().__init__(*args, groups=groups, **kwargs)

    monkeypatch.setattr(B, "BatchPlan", Recording)
    T.train(tiny_config(tmp_path / "run", batch_by_pair=True, max_steps=3, eval_every=3, checkpoint_every=3), progress=False)
    pairs = seen[0]
    assert pairs is not None and len(np.unique(pairs)) == 4  # en with de, es, fr, it: one label per language pair
    info = json.loads((tmp_path / "run" / "model" / "training.json").read_text())
    assert info["train_config"]["batch_by_pair"] is True


def test_pause_at_stops_with_a_checkpoint_and_a_rerun_goes_on_as_if_never_paused(tmp_path):
    """A probe's first N steps of a long recipe, or the end of a sitting: the schedule stays max_steps'."""
    straight = tmp_path / "straight"
    train(tiny_config(straight, max_steps=20, eval_every=100), progress=False)
    paused = tmp_path / "paused"
    summary = train(tiny_config(paused, max_steps=20, eval_every=100, pause_at=7, checkpoint_every=5), progress=False)
    assert summary["paused"] and summary["steps"] == 7
    assert load_checkpoint(checkpoint_path(paused))["step"] == 7  # saved at the pause, not only every 5
    assert not (paused / "summary.json").exists()  # not finished: a rerun resumes
    again = train(tiny_config(paused, max_steps=20, eval_every=100, pause_at=7, checkpoint_every=5), progress=False)
    assert again["paused"] and again["steps"] == 7  # nothing more to do at the same pause
    assert train(tiny_config(paused, max_steps=20, eval_every=100, checkpoint_every=5), progress=False)["steps"] == 20
    assert same_weights(weights(checkpoint_path(straight)), weights(checkpoint_path(paused)))


def test_keep_model_last_holds_the_last_steps_weights_and_best_the_lowest_validation(tmp_path, monkeypatch):
    """A validation split of the training sources can stall or rise while the model still improves at what it is
    for; keep_model = "last" then keeps the last step's weights, "best" the lowest validation loss's."""
    import edge_xsent.train.loop as T
    from edge_xsent.encode.bundle import load_model, read_training

    real = T.validate
    for keep in ("best", "last"):
        losses = iter([3.0, 1.0, 2.0, 2.5, 4.0, 5.0])  # validation at steps 2, 4, ..., 12: lowest at step 4

        def validate(*args, **kwargs):
            return {**real(*args, **kwargs), "val_total": next(losses)}

        monkeypatch.setattr(T, "validate", validate)
        out = tmp_path / keep
        train(tiny_config(out, max_steps=12, eval_every=2, keep_model=keep), progress=False)
        assert read_training(out / "model")["step"] == (4 if keep == "best" else 12)
        saved = load_model(out / "model")[0].state_dict()
        last = weights(checkpoint_path(out))  # the checkpoint of step 12
        shared = [k for k in last if k in saved]
        assert shared and all(torch.allclose(saved[k], last[k]) for k in shared) == (keep == "last")


def test_keep_model_may_change_on_resume_and_a_bad_value_is_refused(tmp_path):
    cfg = tiny_config(tmp_path / "r", max_steps=12, eval_every=4, keep_model="best")
    run_until(cfg, 10)
    assert train(tiny_config(tmp_path / "r", max_steps=12, eval_every=4, keep_model="last"), progress=False)["steps"] == 12
    with pytest.raises(UserError, match="keep_model must be one of best, last"):
        tiny_config(tmp_path / "x", keep_model="newest")


def test_keep_steps_keep_those_steps_weights_across_a_resume_and_fresh_forgets_them(tmp_path):
    """A study measures a run on the way (studies/pruned-student: steps 2,500, 5,000, ...) from model-stepN/,
    which must hold that step's weights even when the run was killed and resumed between them."""
    from edge_xsent.encode.bundle import load_model, read_training
    from edge_xsent.config import TrainConfig

    out = tmp_path / "run"
    run_until(tiny_config(out, max_steps=12, eval_every=4, checkpoint_every=2, keep_steps=[6, 4]), 8)
    assert sorted(p.name for p in out.glob("model-step*")) == ["model-step4", "model-step6"]
    train(tiny_config(out, max_steps=12, eval_every=4, checkpoint_every=2, keep_steps=[4, 6, 10]), progress=False)
    at6 = tmp_path / "paused"  # the same run stopped at step 6: its checkpoint holds step 6's weights
    train(tiny_config(at6, max_steps=12, eval_every=4, checkpoint_every=2, pause_at=6), progress=False)
    kept = load_model(out / "model-step6")[0].state_dict()
    ckpt = weights(checkpoint_path(at6))
    shared = [k for k in ckpt if k in kept]
    assert shared and all(torch.allclose(kept[k], ckpt[k]) for k in shared)
    assert not same_weights(weights(checkpoint_path(out)), ckpt)  # step 12 moved on from step 6
    assert [read_training(out / f"model-step{s}")["step"] for s in (4, 6, 10)] == [4, 6, 10]
    assert "val_total" in read_training(out / "model-step4")  # an eval step: its validation recorded beside
    assert "val_total" not in read_training(out / "model-step6")
    train(tiny_config(out, max_steps=3, eval_every=4, keep_steps=[2]), fresh=True, progress=False)
    assert [p.name for p in out.glob("model-step*")] == ["model-step2"]
    with pytest.raises(UserError, match="keep_steps must be a list of steps"):
        TrainConfig.from_dict({**tiny_config(out).to_dict(), "keep_steps": [0, 5]}, "recipe.toml")
