"""Loading never executes code and never leaves its folder; writes are atomic."""

import json
import pickle
import shutil

import pytest
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
