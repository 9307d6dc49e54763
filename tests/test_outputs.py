"""Outputs never destroy inputs or a user's folders (issue: one safe way to write): each command
checks its output before any work, by its role (edge_xsent.paths), and says what to do instead."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from conftest import ROOT
from edge_xsent.paths import FILE, FOLDER
from edge_xsent.cli import main
from edge_xsent.errors import UserError


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, says: str) -> None:
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert says in result.output, result.output


def test_the_output_roles_name_each_way_to_lose_data(tmp_path):
    model, data = tmp_path / "model", tmp_path / "p.en-fr.tsv"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data.write_text("a\tb\n")
    with pytest.raises(UserError, match="is an input"):
        FILE.check(data, [model, data])
    with pytest.raises(UserError, match="is inside an input"):
        FILE.check(model / "config.json", [model, data])
    with pytest.raises(UserError, match="holds an input"):
        FOLDER.check(tmp_path, [model])
    with pytest.raises(UserError, match="is a folder"):
        FILE.check(model, [])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match="not a model folder"):
        FOLDER.check(mine, [model])
    FILE.check(tmp_path / "new.npy", [model, data])  # a new file, a new folder: fine
    FOLDER.check(tmp_path / "new", [model])


def test_encode_never_writes_into_its_model_or_over_its_input(tiny_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    text = tmp_path / "s.txt"
    text.write_text("Save the file\n")
    refused(invoke("encode", "--model", model, "--input", text, "--out", model / "tokenizer.model"), "part of a model folder")
    refused(invoke("encode", "--model", model, "--input", text, "--out", text), "of this command")
    assert text.read_text() == "Save the file\n"
    assert invoke("encode", "--model", model, "--input", text, "--out", tmp_path / "v.npy").exit_code == 0


def test_eval_md_never_overwrites_its_data_or_model(tiny_model, tmp_path):
    data = tmp_path / "p.en-fr.tsv"
    data.write_text("".join(f"Sentence number {i}\tPhrase numéro {i}\n" for i in range(20)))
    refused(invoke("eval", "xsr", "--model", tiny_model, "--data", data, "--md", data), "of this command")
    refused(invoke("eval", "xsr", "--model", tiny_model, "--data", data, "--md", tiny_model / "config.json"),
            "part of a model folder")
    assert data.read_text().startswith("Sentence number 0")


def test_debias_never_replaces_its_model_a_run_or_a_users_folder(tiny_run, tmp_path):
    refused(invoke("debias", tiny_run / "model", "--data", "sample", "--out", tiny_run / "model"), "part of a training run")
    refused(invoke("debias", tiny_run / "model", "--data", "sample", "--out", tiny_run), "not a model folder")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "f").write_text("hi")
    refused(invoke("debias", tiny_run / "model", "--data", "sample", "--out", mine), "not a model folder")
    assert (mine / "f").read_text() == "hi"


def test_train_out_a_file_is_one_error_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    refused(invoke("train", "--config", ROOT / "train" / "tiny-cpu.toml", "--out", afile), "is a file")
