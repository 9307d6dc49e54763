"""Compact vectors: int8 codes over calibrated ranges, packed sign bits, truncation, the
calibration file stored with the model, and the Matryoshka objective option."""

import json
import shutil

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from conftest import tiny_config
from edge_xsent import Encoder
from edge_xsent.encode import compact
from edge_xsent.encode.bundle import verify
from edge_xsent.cli import main
from edge_xsent.encode.encoder import FAST_MODEL
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import average, xsr
from edge_xsent.export.exporter import parity_sentences
from edge_xsent.train.objectives import align_loss, matryoshka, sim_loss

SENTENCES = ["Save the current document", "Enregistrer le document actuel", "Das aktuelle Dokument speichern",
             "The cat sleeps on the warm roof."]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A copy of the shipped default, calibrated by the CLI on the sample's valid split."""
    folder = tmp_path_factory.mktemp("compact") / "model"
    shutil.copytree(FAST_MODEL, folder)  # shipped calibrated on corpus-g; calibrated again here
    res = CliRunner().invoke(main, ["calibrate", str(folder), "--sentences", "1000"])
    assert res.exit_code == 0, res.output
    return folder


def test_int8_codes_round_trip_within_half_a_step():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(500, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ranges = compact.calibrate(vecs, "random")
    codes = compact.to_int8(vecs, ranges)
    assert codes.dtype == np.int8 and codes.min() == -128 and codes.max() == 127  # the range is used in full
    step = (np.array(ranges["max"]) - np.array(ranges["min"])) / 255
    assert np.all(np.abs(compact.from_int8(codes, ranges) - vecs) <= step / 2 + 1e-6)
    outside = compact.to_int8(np.full((1, 16), 5.0, dtype=np.float32), ranges)
    assert np.all(outside == 127)  # beyond the calibrated range: clipped, never wrapped
    with pytest.raises(UserError, match="at least 100"):
        compact.calibrate(vecs[:10], "too few")


def test_packed_bits_rank_as_their_signs():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(5, 20)), rng.normal(size=(7, 20))
    pa, pb = compact.to_ubinary(a), compact.to_ubinary(b)
    assert pa.shape == (5, 3) and pa.dtype == np.uint8  # 20 bits -> 3 bytes
    dots = compact.from_ubinary(pa, 20) @ compact.from_ubinary(pb, 20).T
    assert np.array_equal(dots, 20 - 2 * compact.hamming(pa, pb))
    assert np.array_equal(compact.from_ubinary(pa, 20), np.where(a > 0, 1.0, -1.0))


def test_encode_compact_outputs(calibrated):
    enc = Encoder.load(calibrated)
    assert enc.ranges["sentences"] == 1000 and enc.ranges["source"] == "sample valid split"
    full = enc.encode(SENTENCES)
    codes = enc.encode(SENTENCES, precision="int8")
    assert codes.dtype == np.int8 and codes.shape == full.shape
    back = compact.from_int8(codes, enc.ranges)
    back /= np.linalg.norm(back, axis=1, keepdims=True)
    assert (back * full).sum(1).min() > 0.999
    bits = enc.encode(SENTENCES, precision="ubinary")
    assert bits.shape == (4, enc.dim // 8) and np.array_equal(bits, np.packbits(full > 0, axis=1))
    short = enc.encode(SENTENCES, dimensions=64)
    assert short.shape == (4, 64) and np.allclose(np.linalg.norm(short, axis=1), 1, atol=1e-5)
    assert np.allclose(short, full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True), atol=1e-6)
    assert enc.encode("one text", precision="ubinary", dimensions=64).shape == (8,)
    assert np.array_equal(enc.encode(SENTENCES, precision="int8", dimensions=64), codes[:, :64])


def test_int8_and_bits_keep_most_of_the_retrieval(calibrated):
    """Real pairs (the sample's test split): int8 codes, scored after decoding, retrieve as well as
    float32 within a point; sign bits keep most of it."""
    enc = Encoder.load(calibrated)
    pairs = parity_sentences(400)

    def p1(decode):
        return average(xsr(pairs, lambda s: decode(enc.encode(list(s))), max_queries=len(pairs)))

    def as_int8(v):
        return compact.from_int8(compact.to_int8(v, enc.ranges), enc.ranges)

    f32, i8 = p1(lambda v: v), p1(as_int8)
    bits = p1(lambda v: compact.from_ubinary(compact.to_ubinary(v), enc.dim))
    assert abs(f32 - i8) < 0.01 and 0.6 * f32 < bits < f32 + 0.01


def test_calibration_is_checked_and_required(calibrated, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(calibrated, folder)
    assert "calibration.json" in verify(folder)["files"]
    ranges = json.loads((folder / "calibration.json").read_text())
    (folder / "calibration.json").write_text(json.dumps({**ranges, "min": ranges["min"][:3]}))
    with pytest.raises(UserError, match="checksum mismatch"):  # changed after saving
        Encoder.load(folder)
    from edge_xsent.encode.bundle import refresh_manifest
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(UserError, match="tokenizer.json: checksum mismatch"):  # never blesses a corrupt folder
        refresh_manifest(folder, ["calibration.json"])
    with pytest.raises(UserError, match="not a valid int8 calibration"):
        compact.load_calibration(folder, 256)
    plain = Encoder.load(FAST_MODEL)
    plain.ranges = None  # a model without calibration (an older folder, a model built in memory)
    with pytest.raises(UserError, match="edge-xsent calibrate"):
        plain.encode(SENTENCES, precision="int8")
    enc = Encoder.load(calibrated)
    for kwargs, msg in (({"precision": "int4"}, "unknown precision"), ({"dimensions": 0}, "dimensions must be"),
                        ({"dimensions": 257}, "dimensions must be"), ({"dimensions": 2.5}, "dimensions must be"),
                        ({"precision": "int8", "normalize": False}, "leave normalize=True")):
        with pytest.raises(UserError, match=msg):
            enc.encode(SENTENCES, **kwargs)


def test_cli_encode_writes_compact_npy(calibrated, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    for vectors, dims, shape, dtype in (("ubinary", "128", (4, 16), np.uint8), ("int8", None, (4, 256), np.int8),
                                        ("float32", "32", (4, 32), np.float32)):
        out = tmp_path / f"{vectors}.npy"
        args = ["encode", "--model", str(calibrated), "--input", str(src), "--out", str(out), "--vectors", vectors]
        res = CliRunner().invoke(main, args + (["--dimensions", dims] if dims else []))
        assert res.exit_code == 0, res.output
        arr = np.load(out)
        assert arr.shape == shape and arr.dtype == dtype
    enc = Encoder.load(calibrated)
    assert np.array_equal(np.load(tmp_path / "ubinary.npy"), enc.encode(SENTENCES, precision="ubinary", dimensions=128))


def test_matryoshka_averages_the_loss_over_prefixes():
    torch.manual_seed(0)
    u, v = torch.randn(6, 8), torch.randn(6, 8)
    assert torch.isclose(matryoshka(align_loss, u, v, []), align_loss(u, v))
    want = (sim_loss(u, v) + sim_loss(u[:, :4], v[:, :4]) + sim_loss(u[:, :2], v[:, :2])) / 3
    assert torch.isclose(matryoshka(sim_loss, u, v, [4, 2]), want)
    # a prefix that is perfectly aligned on its own lowers the total, whatever the full width does
    w = v.clone()
    w[:, :2] = u[:, :2] * 10
    assert matryoshka(align_loss, u, w, [2]) < matryoshka(align_loss, u, v, [2])


def test_training_with_matryoshka_dims(tmp_path):
    from edge_xsent.train.loop import train

    with pytest.raises(UserError, match="matryoshka_dims"):
        tiny_config(tmp_path / "bad", matryoshka_dims=[32])
    cfg = tiny_config(tmp_path / "run", matryoshka_dims=[8, 16, 16], max_steps=10, eval_every=10)
    assert cfg.matryoshka_dims == [16, 8]
    summary = train(cfg, progress=False)
    assert summary["steps"] == 10
    saved = json.loads((tmp_path / "run" / "model" / "training.json").read_text())
    assert saved["train_config"]["matryoshka_dims"] == [16, 8]


def test_compact_vectors_benchmark_runs(tmp_path, monkeypatch):
    """benchmarks/compact_vectors.py end to end on the sample (its table's shape and sizes)."""
    import runpy
    import sys

    out = tmp_path / "cv"
    monkeypatch.setattr(sys, "argv", ["compact_vectors.py", "--model", "fast", "--data", "sample", "--queries", "50", "--out", str(out)])
    runpy.run_path(str(FAST_MODEL.parents[2] / "benchmarks" / "compact_vectors.py"), run_name="__main__")
    res = json.loads(out.with_suffix(".json").read_text())
    rows = res["rows"]
    assert len(rows) == 9 and rows["int8 x 256"]["mb_per_100k"] == pytest.approx(24.41, abs=0.01)
    assert rows["ubinary x 64"]["mb_per_100k"] == pytest.approx(0.76, abs=0.01)
    assert rows["float32 x 256"]["test"] >= rows["ubinary x 64"]["test"]  # 128x smaller costs something
    assert "| int8 | 256 | 24.4 |" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("change", [lambda r: r["min"].__setitem__(0, float("nan")),
                                    lambda r: r["max"].__setitem__(1, r["min"][1])])
def test_nan_or_empty_calibration_ranges_are_refused(calibrated, tmp_path, change):
    """A NaN range (checksums redone) made every int8 code 0 with exit 0; an empty one divides by zero."""
    folder = tmp_path / "m"
    shutil.copytree(calibrated, folder)
    ranges = json.loads((folder / "calibration.json").read_text())
    change(ranges)
    (folder / "calibration.json").write_text(json.dumps(ranges))
    with pytest.raises(UserError, match="not a valid int8 calibration"):
        compact.load_calibration(folder, len(ranges["min"]))


def test_a_calibrate_killed_anywhere_leaves_a_loadable_folder_and_an_older_torn_one_is_repaired(calibrated, tmp_path,
                                                                                                 monkeypatch):
    """Round eight (issue 104): calibrate renamed calibration.json, then the manifest it had re-hashed; killed between
    the two (or read by another process then) the folder was "corrupt" to every command, calibrate included. The
    calibration now carries its own checksum, so storing it is one rename; a torn folder of the older kind (a new
    calibration the manifest does not match) is repaired by running calibrate again."""
    from edge_xsent.encode import bundle
    from edge_xsent.encode.encoder import calibrate_folder

    folder = tmp_path / "m"
    shutil.copytree(calibrated, folder)
    manifest = (folder / "manifest.json").read_bytes()

    def killed(*_a, **_k):
        raise KeyboardInterrupt  # the kill, after the calibration's rename and before the manifest's

    monkeypatch.setattr(bundle, "refresh_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        calibrate_folder(folder, "sample", "test", 500)
    monkeypatch.undo()
    assert (folder / "manifest.json").read_bytes() == manifest  # the old manifest, the new calibration
    enc = Encoder.load(folder)
    assert enc.ranges["source"] == "sample test split" and enc.ranges["sentences"] == 500
    verify(folder)  # every file checked: the calibration by its own checksum

    torn = {k: v for k, v in json.loads((folder / "calibration.json").read_text()).items() if k != "sha256"}
    (folder / "calibration.json").write_text(json.dumps(torn))  # the older calibrate's torn state: unsealed, unlisted
    with pytest.raises(UserError, match="checksum mismatch"):
        Encoder.load(folder)
    res = CliRunner().invoke(main, ["calibrate", str(folder), "--sentences", "1000"])
    assert res.exit_code == 0, res.output
    assert Encoder.load(folder).ranges["sentences"] == 1000 and "sha256" in verify(folder)["files"]["calibration.json"]
    sealed = json.loads((folder / "calibration.json").read_text())
    (folder / "calibration.json").write_text(json.dumps({**sealed, "max": [v + 0.01 for v in sealed["max"]]}))
    with pytest.raises(UserError, match="calibration.json: checksum mismatch.*edge-xsent calibrate"):
        Encoder.load(folder)  # a sealed file changed after saving is caught by its own checksum
