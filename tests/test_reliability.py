"""Loading never executes code and never leaves its folder; writes are atomic."""

import json
import pickle
import shutil

import pytest
import numpy as np
import torch

from edge_xsent import Encoder
from edge_xsent.atomic import atomic_dir, atomic_write
from edge_xsent.bundle import MANIFEST
from edge_xsent.errors import UserError
from edge_xsent.train import load_checkpoint


def test_manifest_paths_must_stay_inside_the_folder(tiny_model, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(tiny_model, m)
    (tmp_path / "outside.txt").write_text("x")
    manifest = json.loads((m / MANIFEST).read_text())
    manifest["files"]["../outside.txt"] = {"sha256": "0" * 64, "bytes": 1}
    (m / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="points outside the model folder"):
        Encoder.load(m)


class Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('code ran')",))


def test_checkpoint_loading_never_unpickles_code(tmp_path):
    p = tmp_path / "evil.pt"
    with open(p, "wb") as f:
        pickle.dump({"step": 1, "x": Boom()}, f)
    with pytest.raises(UserError, match="unreadable checkpoint"):
        load_checkpoint(p)


def test_weights_are_safetensors_not_pickle(tiny_model):
    assert (tiny_model / "model.safetensors").read_bytes()[8:9] == b"{"  # safetensors: JSON header after its length
    assert not list(tiny_model.glob("*.pt")) and not list(tiny_model.glob("*.bin"))


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(p) as f:
            f.write("half")
            raise RuntimeError("crash mid-write")
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["f.txt"]


def test_atomic_dir_keeps_old_folder_on_failure(tmp_path):
    d = tmp_path / "model"
    with atomic_dir(d) as t:
        (t / "a").write_text("1")
    with pytest.raises(RuntimeError):
        with atomic_dir(d) as t:
            (t / "a").write_text("2")
            raise RuntimeError
    assert (d / "a").read_text() == "1" and sorted(x.name for x in tmp_path.iterdir()) == ["model"]


def test_truncated_weights_detected(tiny_model, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(tiny_model, m)
    data = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="model.safetensors: checksum mismatch"):
        Encoder.load(m)


def test_garbage_folder_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UserError, match="not an edge-xsent model folder.*found notes.txt"):
        Encoder.load(tmp_path)


def test_a_precision_is_honoured_or_refused_never_swapped(tiny_model, tiny_bundle):
    """Issue 31, row 3 and part of row 13: --precision fp32 used to run int8 and say onnx-int8."""
    from click.testing import CliRunner

    from edge_xsent.cli import main

    assert Encoder.load(precision="fp32").backend == "torch"  # the shipped folder: fp32 weights, no fp32 ONNX
    assert Encoder.load(tiny_bundle[0], precision="fp32").backend == "onnx-fp32"
    assert Encoder.load(precision="int8").backend == "onnx-int8"
    with pytest.raises(UserError, match="precision='int8' needs backend='onnx'"):
        Encoder.load(backend="torch", precision="int8")
    with pytest.raises(UserError, match="has no int8 model"):
        Encoder.load(tiny_model, precision="int8")
    res = CliRunner().invoke(main, ["eval", "xsr", "--precision", "fp32", "--queries", "20", "--max-pairs", "20"])
    assert res.exit_code == 0 and "edge-xsent torch" in res.output and "onnx-int8" not in res.output


# ----------------------------------------------------------------------------- what a careless user tried

def _cli(*args, input=None):
    from click.testing import CliRunner

    from edge_xsent.cli import main

    return CliRunner().invoke(main, list(args), input=input)


def test_an_output_never_overwrites_an_input(tmp_path):
    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("Open the file\nSave the file\n")
    tgt.write_text("Ouvrir le fichier\nEnregistrer le fichier\n")
    for args in (["encode", "--input", str(src), "--out", str(src)],
                 ["mine", str(src), str(tgt), "--out", str(tgt)]):
        res = _cli(*args)
        assert res.exit_code == 1 and "is also an input" in res.output and res.exception.__class__ is SystemExit
    assert tgt.read_text() == "Ouvrir le fichier\nEnregistrer le fichier\n" and src.read_text().startswith("Open")


def test_a_bom_is_not_text(tmp_path):
    plain, bom = tmp_path / "plain.txt", tmp_path / "bom.txt"
    plain.write_text("Save the current document\n", encoding="utf-8")
    bom.write_text("\ufeffSave the current document\n", encoding="utf-8")
    for path in (plain, bom):
        assert _cli("encode", "--input", str(path), "--out", str(path.with_suffix(".npy"))).exit_code == 0
    assert np.array_equal(np.load(plain.with_suffix(".npy")), np.load(bom.with_suffix(".npy")))
    res = _cli("encode", "--out", str(tmp_path / "stdin.npy"), input="\ufeffSave the current document\n")
    assert res.exit_code == 0 and np.array_equal(np.load(tmp_path / "stdin.npy"), np.load(plain.with_suffix(".npy")))


def test_mine_writes_three_columns_whatever_the_text(tmp_path):
    src, tgt, out = tmp_path / "en.txt", tmp_path / "fr.txt", tmp_path / "pairs.tsv"
    src.write_text("\ufeffOpen\tthe file now\nClose the window\nPrint the page\n")
    tgt.write_text("Ouvrir le fichier maintenant\nFermer la fenêtre\nImprimer la page\n")
    res = _cli("mine", str(src), str(tgt), "--out", str(out), "--threshold", "0")
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows and all(len(r) == 3 for r in rows)
    assert any(r[1] == "Open the file now" for r in rows)  # no BOM, the tab a space


def test_invalid_utf8_on_stdin_is_a_clear_error(tmp_path):
    from click.testing import CliRunner

    from edge_xsent.cli import main

    res = CliRunner().invoke(main, ["encode", "--out", str(tmp_path / "v.npy")], input=b"ok line\n\xff\xfe bad\n")
    assert res.exit_code == 1 and "not valid UTF-8" in res.output and not isinstance(res.exception, TypeError)


@pytest.mark.parametrize("args, message", [
    (["encode", "--out", "-"], "stdout"),
    (["encode", "--out", "."], "a folder"),
    (["mine", "a", "b", "--out", "p.tsv", "--k", "0"], "--k"),
    (["mine", "a", "b", "--out", "p.tsv", "--k", "-1"], "--k"),
    (["mine", "a", "b", "--out", "p.tsv", "--threshold", "nan"], "not a number"),
    (["eval", "xsr", "--queries", "0"], "--queries"),
    (["eval", "xsr", "--queries", "-3"], "--queries"),
    (["encode", "--out", "v.npy", "--batch-size", "0"], "--batch-size"),
])
def test_bad_flag_values_are_usage_errors(args, message):
    res = _cli(*args)
    assert res.exit_code == 2 and message in res.output and isinstance(res.exception, SystemExit)


def test_encode_checks_its_arguments():
    enc = Encoder.load()
    with pytest.raises(UserError, match="normalize must be True or False"):
        enc.encode(["a"], normalize="no")
    with pytest.raises(UserError, match="got a dict"):
        enc.encode({"a": 1})
    with pytest.raises(UserError, match="got a set"):
        enc.encode({"a", "b"})
    with pytest.raises(UserError, match="unknown argument.*convert_to_numpy.*valid: sentences"):
        enc.encode(["a"], convert_to_numpy=True)
    with pytest.raises(UserError, match="batch_size must be an int"):
        enc.encode(["a"], batch_size=2.5)
    v = enc.encode(["", "   ", "Save the document"])
    assert not v[0].any() and not v[1].any() and abs(np.linalg.norm(v[2]) - 1) < 1e-5  # empty text: the zero vector
