"""A run carried through git (train/carry.py): its checkpoint folder lost, it resumes at the
carried step, not at its start."""

import json
import shutil

import pytest
import torch
from conftest import run_script, run_until, tiny_config
from edge_xsent import Encoder
import carry
from edge_xsent.errors import UserError
from edge_xsent.train.runfolder import checkpoint_path, load_checkpoint
from edge_xsent.train.warmstart import refuse_own_result
from edge_xsent.train.loop import train


def carry_script(*args: str):
    """train/carry.py, run in process: (exit code, stdout + stderr)."""
    res = run_script("train/carry.py", *args)
    return res.returncode, res.stdout + res.stderr


@pytest.fixture(scope="module")
def carried(tmp_path_factory):
    """A run of 20 steps stopped at step 10 and carried: (the run folder, the carry folder)."""
    root = tmp_path_factory.mktemp("carry")
    run = root / "run"
    run_until(tiny_config(run, max_steps=20, eval_every=5), 10)
    code, out = carry_script("save", str(run), str(root / "carried"))
    assert code == 0, out
    assert "carried step 10" in out
    return run, root / "carried"


def test_a_lost_run_resumes_at_the_carried_step(carried, tmp_path):
    run, saved = carried
    ckpt = load_checkpoint(checkpoint_path(run))
    assert (saved / carry.WEIGHTS).stat().st_size < checkpoint_path(run).stat().st_size / 2  # no Adam moments
    fresh_machine = tmp_path / "run"
    code, out = carry_script("restore", str(saved), str(fresh_machine))
    assert code == 0, out
    back = load_checkpoint(checkpoint_path(fresh_machine))
    assert back["step"] == 10 and "optimizer" not in back
    assert back["model"].keys() == ckpt["model"].keys()
    assert all(torch.equal(back["model"][k], ckpt["model"][k]) for k in ckpt["model"])
    # the same recipe with a later end resumes at step 10 with the run's own tokenizer and log
    summary = train(tiny_config(fresh_machine, max_steps=20, eval_every=5), progress=False)
    assert summary["steps"] == 20
    steps = [json.loads(line).get("step") for line in (fresh_machine / "log.jsonl").read_text().splitlines()]
    assert steps[0] < 10 < steps[-1]  # the carried log continues
    assert (fresh_machine / "model" / "model.safetensors").exists()  # best model after the carry


def test_restore_never_goes_back_and_a_damaged_carry_is_refused(carried, tmp_path):
    run, saved = carried
    with pytest.raises(UserError, match="at step 10, the carry at 10: nothing to restore"):
        carry.restore(saved, run)
    broken = tmp_path / "broken"
    shutil.copytree(saved, broken)
    data = bytearray((broken / carry.WEIGHTS).read_bytes())
    data[-1] ^= 1
    (broken / carry.WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(UserError, match="does not match carry.json's SHA-256"):
        carry.restore(broken, tmp_path / "r")
    assert not checkpoint_path(tmp_path / "r").exists()


def test_carry_user_errors_exit_1_without_a_traceback(tmp_path):
    (tmp_path / "run").mkdir()
    code, out = carry_script("save", str(tmp_path / "run"), str(tmp_path / "c"))
    assert code == 1 and "no checkpoint" in out and "Traceback" not in out
    code, out = carry_script("save", str(tmp_path / "run"), str(tmp_path / "run" / "c"))
    assert code == 2 and "input of this command" in out  # the carry inside the run it reads: refused as parsed
    code, out = carry_script("restore", str(tmp_path / "nothing"), str(tmp_path / "r"))
    assert code == 2 and "no such file or folder" in out and "Traceback" not in out  # refused as it is parsed
    (tmp_path / "empty").mkdir()
    code, out = carry_script("restore", str(tmp_path / "empty"), str(tmp_path / "r"))
    assert code == 1 and "not a carried run" in out and "Traceback" not in out


def test_a_finished_run_is_carried_as_its_model_and_is_not_trained_again(tmp_path):
    run, saved, elsewhere = tmp_path / "run", tmp_path / "carried", tmp_path / "elsewhere"
    cfg = dict(max_steps=10, eval_every=5)
    summary = train(tiny_config(run, **cfg), progress=False)
    meta = carry.save(run, saved)
    assert meta["finished"] and not (saved / carry.WEIGHTS).exists() and (saved / "model" / "model.safetensors").exists()
    assert carry.restore(saved, elsewhere)["step"] == 10
    assert not checkpoint_path(elsewhere).exists()
    assert train(tiny_config(elsewhere, **cfg), progress=False) == summary  # reported, not retrained
    vecs = Encoder.load(elsewhere / "model").encode(["a carried model"])
    assert torch.allclose(torch.from_numpy(vecs), torch.from_numpy(Encoder.load(run / "model").encode(["a carried model"])))
    with pytest.raises(UserError, match="no checkpoint to go on from"):
        train(tiny_config(elsewhere, max_steps=12, eval_every=5), progress=False)
    with pytest.raises(UserError, match="holds a finished run"):
        carry.restore(saved, elsewhere)


def test_a_run_is_never_started_again_from_its_own_result(carried, tmp_path):
    """A recipe with init = "default" whose run became the default: on a machine without the run
    folder it would start from its own result and train it twice."""
    run, _ = carried
    lost = tmp_path / "elsewhere" / run.name  # the same run on a machine that lost its folder
    own = tmp_path / "became-the-default"
    shutil.copytree(run / "model", own)
    info = json.loads((own / "training.json").read_text())
    info["train_config"]["init"] = str(own)  # the recipe's init (`default`) now names its own result
    (own / "training.json").write_text(json.dumps(info))
    with pytest.raises(UserError, match="this run's own result"):
        train(tiny_config(lost, max_steps=20, eval_every=5, init=str(own)), progress=False)
    assert not lost.exists()  # refused before anything was written
    # the same weights as the start of another run, or of a changed recipe, are a warm start as before
    refuse_own_result(tiny_config(tmp_path / "next", max_steps=20, eval_every=5, init=str(own)))
    refuse_own_result(tiny_config(lost, max_steps=20, eval_every=5, lr=1e-3, init=str(own)))
    refuse_own_result(tiny_config(lost, max_steps=20, eval_every=5, init=str(run / "model")))  # a continuation


def test_carry_save_never_replaces_the_run_or_a_folder_of_other_files(carried, tmp_path):
    run, saved = carried
    mine = tmp_path / "d"
    mine.mkdir()
    (mine / "f").write_text("hi")
    for dest in (run, run / "checkpoints", run.parent, mine, mine / "f"):
        with pytest.raises(UserError, match="carry"):
            carry.save(run, dest)
    assert (mine / "f").read_text() == "hi" and checkpoint_path(run).exists()
    again = tmp_path / "again"
    shutil.copytree(saved, again)
    assert carry.save(run, again)["step"] == 10  # an older carry is replaced
    assert not list(tmp_path.glob(".again.*"))  # and no temporary is left beside it


def test_a_carry_naming_a_file_outside_itself_is_refused(carried, tmp_path):
    _, saved = carried
    evil = tmp_path / "evil"
    shutil.copytree(saved, evil)
    meta = json.loads((evil / carry.META).read_text())
    meta["sha256"]["../victim.txt"] = meta["sha256"].popitem()[1]
    (evil / carry.META).write_text(json.dumps(meta))
    (tmp_path / "victim.txt").write_text("keep me")
    with pytest.raises(UserError, match="outside the carry"):
        carry.restore(evil, tmp_path / "run")
    assert (tmp_path / "victim.txt").read_text() == "keep me"


@pytest.mark.parametrize("tear", [lambda m: m.pop("step"), lambda m: m.update(step="10"), lambda m: m.pop("sha256"),
                                  lambda m: m.update(finished="no")])
def test_a_torn_carry_json_is_one_error_naming_the_field(carried, tmp_path, tear):
    _, saved = carried
    torn = tmp_path / "torn"
    shutil.copytree(saved, torn)
    meta = json.loads((torn / carry.META).read_text())
    tear(meta)
    (torn / carry.META).write_text(json.dumps(meta))
    with pytest.raises(UserError, match="missing or of the wrong type"):
        carry.restore(torn, tmp_path / "run")


def test_a_link_inside_a_finished_runs_model_is_never_carried(tmp_path):
    """carry save copies a finished run's model/ file by file (copy_file): a link to a user's file there would carry
    that file into a commit, so it is refused; a FIFO is refused without waiting."""
    import os

    run = tmp_path / "run"
    train(tiny_config(run, max_steps=4, eval_every=2), progress=False)
    secret = tmp_path / "secret.txt"
    secret.write_text("a user's file")
    (run / "model" / "notes.txt").symlink_to(secret)
    with pytest.raises(UserError, match="is a link"):
        carry.save(run, tmp_path / "carried")
    (run / "model" / "notes.txt").unlink()
    os.mkfifo(run / "model" / "pipe")
    with pytest.raises(UserError, match="FIFO"):
        carry.save(run, tmp_path / "carried")
    assert not (tmp_path / "carried").exists()
