"""Loading never executes code and never leaves its folder; writes are atomic."""

import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest
import numpy as np

from edge_xsent import Encoder
from edge_xsent.atomic import atomic_dir, atomic_write
from edge_xsent.layout import MANIFEST
from edge_xsent.errors import UserError
from edge_xsent.train.runfolder import load_checkpoint


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


def test_atomic_write_called_as_a_function_is_refused_at_the_call(tmp_path):
    """`atomic_write(path, text)` without `with` would write nothing and say nothing (a benchmark lost its results
    that way): the mode is checked at the call."""
    with pytest.raises(ValueError, match="context manager"):
        atomic_write(tmp_path / "f.json", '{"figures": 1}')
    assert not list(tmp_path.iterdir())


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

    assert Encoder.load(precision="fp32").backend == "torch"  # the shipped folder: float weights derived from int8
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
        assert res.exit_code == 2 and "of this command" in res.output and res.exception.__class__ is SystemExit
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


def _copy(src, tmp_path, name="m"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _rewrite_manifest(folder, change):
    manifest = json.loads((folder / MANIFEST).read_text())
    change(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_every_loaded_file_is_listed_and_regular(tiny_bundle, tmp_path):
    import os

    b = _copy(tiny_bundle[0], tmp_path)
    _rewrite_manifest(b, lambda m: m["files"].pop("onnx/model_int8.onnx"))
    with pytest.raises(UserError, match="model_int8.onnx: not listed in manifest.json"):
        Encoder.load(b)
    b = _copy(tiny_bundle[0], tmp_path, "fifo")
    (b / "tokenizer.model").unlink()
    os.mkfifo(b / "tokenizer.model")
    _rewrite_manifest(b, lambda m: m["files"]["tokenizer.model"].update(bytes=0))
    with pytest.raises(UserError, match="not a regular file"):
        Encoder.load(b)  # returns at once: the FIFO is never opened


@pytest.mark.parametrize("change, message", [
    (lambda m: m["files"]["config.json"].pop("bytes"), "needs 'bytes' and 'sha256'"),
    (lambda m: m.update(files=["config.json"]), "field 'files'"),
    (lambda m: m.update(format_version="2"), "format_version '2' is not a whole number"),
])
def test_a_malformed_manifest_is_one_clear_error(tiny_model, tmp_path, change, message):
    m = _copy(tiny_model, tmp_path)
    _rewrite_manifest(m, change)
    with pytest.raises(UserError, match=message):
        Encoder.load(m)


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("model"), "field 'model'"),
    (lambda c: c["model"].update(n_heads=0), "n_heads must be a whole number between 1 and 256"),
    (lambda c: c["model"].update(d_model=64, n_heads=4), "sizes do not match the weights"),
])
def test_a_malformed_config_is_one_clear_error(tiny_model, tmp_path, change, message):
    from edge_xsent.encode.bundle import write_manifest

    m = _copy(tiny_model, tmp_path)
    config = json.loads((m / "config.json").read_text())
    change(config)
    (m / "config.json").write_text(json.dumps(config))
    write_manifest(m)  # a consistent manifest: the config itself is what is wrong
    with pytest.raises(UserError, match=message):
        Encoder.load(m, backend="torch")


def test_export_never_replaces_a_folder_that_is_not_a_bundle(tiny_model, tiny_bundle, tmp_path):
    from edge_xsent.export.exporter import export_bundle

    mine = tmp_path / "my-folder"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for out, message in [(mine, "not an edge-xsent bundle"), (tiny_model, "holds the model being exported"),
                         (tiny_model.parent, "holds the model being exported")]:
        with pytest.raises(UserError, match=message):
            export_bundle(tiny_model, out, torchscript=False, parity_pairs=20)
    assert (mine / "notes.txt").read_text() == "mine"
    b = _copy(tiny_bundle[0], tmp_path, "bundle")
    with pytest.raises(UserError, match="pass --force"):
        export_bundle(tiny_model, b, torchscript=False, parity_pairs=20)
    export_bundle(tiny_model, b, torchscript=False, parity_pairs=20, force=True)
    assert not (b / "torchscript").exists()  # replaced by the new export


def test_atomic_dir_swaps_without_a_gap_and_cleans_up_after_killed_writers(tmp_path):
    import subprocess
    import sys
    import threading

    target = tmp_path / "bundle"
    with atomic_dir(target) as tmp:
        (tmp / "v").write_text("0")
    seen_missing, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            if not target.exists():
                seen_missing.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for i in range(1, 30):
        with atomic_dir(target) as tmp:
            (tmp / "v").write_text(str(i))
    stop.set()
    watcher.join()
    assert not seen_missing and (target / "v").read_text() == "29"
    # a writer killed mid-build leaves its temporary folder; the next writer removes it
    code = ("import os, sys; from edge_xsent.atomic import atomic_dir\n"
            "with atomic_dir(sys.argv[1]) as t:\n    (t / 'half').write_text('x'); os._exit(9)")
    assert subprocess.run([sys.executable, "-c", code, str(target)]).returncode == 9
    assert len(list(tmp_path.glob(".bundle.*.tmp"))) == 1
    with atomic_dir(target) as tmp:
        (tmp / "v").write_text("30")
    assert not list(tmp_path.glob(".bundle.*.tmp")) and (target / "v").read_text() == "30"


def test_two_writers_at_once_both_succeed(tmp_path):
    import threading

    target, errors = tmp_path / "bundle", []

    def write(tag):
        try:
            for i in range(15):
                with atomic_dir(target) as tmp:
                    (tmp / "who").write_text(f"{tag}{i}")
        except Exception as e:  # noqa: BLE001 - the test reports any failure
            errors.append(e)

    threads = [threading.Thread(target=write, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and (target / "who").read_text() in ("a14", "b14")
    assert not list(tmp_path.glob(".bundle.*"))


def test_a_max_len_beyond_the_graph_fails_at_load(tiny_bundle, tmp_path):
    from edge_xsent.encode.bundle import write_manifest

    b = _copy(tiny_bundle[0], tmp_path)
    config = json.loads((b / "config.json").read_text())
    config["model"]["max_len"] = 4 * config["model"]["max_len"]
    (b / "config.json").write_text(json.dumps(config))
    write_manifest(b)
    with pytest.raises(UserError, match=r"fails on a probe of config.json's max_len \d+.*does not fit the graph"):
        Encoder.load(b)


def test_a_config_of_another_width_is_blamed_on_the_config_not_the_calibration(tiny_bundle, tmp_path):
    from edge_xsent.encode.bundle import write_manifest

    b = _copy(tiny_bundle[0], tmp_path)
    config = json.loads((b / "config.json").read_text())
    width = config["model"]["d_model"]
    config["model"]["d_model"] = 2 * width
    (b / "config.json").write_text(json.dumps(config))
    write_manifest(b)
    assert (b / "calibration.json").exists()  # checked after the graph: it must not take the blame
    with pytest.raises(UserError, match=rf"config.json: d_model {2 * width}, but the ONNX graph gives vectors of {width}"):
        Encoder.load(b)


def test_undecodable_bytes_on_a_real_stdin_and_lone_surrogates_are_one_error(tmp_path):
    """A process's stdin under a POSIX locale decodes bad bytes to lone surrogates (surrogateescape):
    CliRunner's strict stdin never showed it. Now: one error line naming the line, on its own line."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "utf-8:surrogateescape"}
    res = subprocess.run([sys.executable, "-m", "edge_xsent.cli", "encode", "--out", str(tmp_path / "v.npy")],
                         input=b"Open the file\n\xff\xfe bad\n", capture_output=True, env=env)
    err = res.stderr.decode()
    assert res.returncode == 1 and "Traceback" not in err and not (tmp_path / "v.npy").exists()
    assert "\nerror: line 2 of the input is not valid UTF-8" in "\n" + err
    with pytest.raises(UserError, match="item 1 holds a lone surrogate"):
        Encoder.load().encode(["ok", "ok\udcff"])


TIER_DAMAGE = {  # the tiered table's initializers as a tampered or torn graph holds them (manifest resealed)
    "NaN 1-bit scales": ("sign_scales", lambda a: np.full_like(a, np.nan)),
    "inf 4-bit scales": ("exact_scales", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 7, np.inf, a).astype(a.dtype)),
    "a truncated 1-bit tier": ("sign_codes", lambda a: a[: len(a) // 2]),
    "4-bit scales in float32": ("exact_scales", lambda a: a.astype(np.float32)),
}


@pytest.mark.parametrize("backend", ["onnx", "torch"])
@pytest.mark.parametrize("damage", list(TIER_DAMAGE))
def test_a_damaged_tiered_table_is_refused_at_load_in_every_backend(tiny_student_tiered, tmp_path, damage, backend):
    """Round eight (issue 104): NaN scales loaded on ONNX and made every vector NaN (the probe read one 4-bit row
    and checked only the width); a truncated 1-bit tier was a traceback at the first real sentence; wrong shapes
    or dtypes were tracebacks on the torch backend (its weights are read back from the graph). Each is one error
    at load, and no vector that is not a finite number ever comes out of encode."""
    import onnx
    from onnx import numpy_helper

    from edge_xsent.paths import owning
    from edge_xsent.encode.bundle import write_manifest

    b = _copy(tiny_student_tiered, tmp_path)
    graph = b / "onnx" / "model_int8.onnx"
    proto = onnx.load(str(graph))
    name, change = TIER_DAMAGE[damage]
    init = next(i for i in proto.graph.initializer if i.name == "tiered_" + name)
    init.CopyFrom(numpy_helper.from_array(change(numpy_helper.to_array(init)), init.name))
    onnx.save(proto, str(graph))
    for own in ("model.safetensors", "edge_xsent.safetensors"):  # as the default ships: torch reads the graph's
        (b / own).unlink(missing_ok=True)
    with owning(b):
        write_manifest(b)
    with pytest.raises(UserError, match="corrupt|torn|re-export"):
        Encoder.load(b, backend=backend).encode(["Hello world", "Bonjour tout le monde"])


@pytest.mark.parametrize("name", ["default", "fast", "quality"])
def test_nul_and_the_other_c0_controls_are_dropped_by_every_shipped_model_in_python_and_tokenizers(name):
    """Round eight (issue 104): the e5 students kept NUL ("Hello\\0world" vs "Helloworld" cosine 0.937, "\\0" alone not
    the zero vector), as docs/guarantees.md says no model does. Their map (e5's, which has no U+0000) is completed
    with every C0 control; tokenizer.json drops NUL before its charsmap. The demo's JS and JVM code read the same map
    (their test vectors hold "\\0nul\\0": tests/test_demo.py)."""
    from tokenizers import Tokenizer as HFTokenizer

    from edge_xsent.encode.encoder import named_model

    enc = Encoder.load(name)
    texts = ["Hello\0world", "Helloworld", "\0Hello world", "Hello world", "a\x01b\x1fc\x7f", "abc"]
    v = enc.encode(texts)
    assert np.array_equal(v[0], v[1]) and np.array_equal(v[2], v[3]) and np.array_equal(v[4], v[5])
    assert not enc.encode("\0\x01\x1f").any()  # nothing left: the zero vector
    hf = HFTokenizer.from_file(str(named_model(name) / "tokenizer.json"))
    assert [hf.encode(t).ids for t in texts[::2]] == [hf.encode(t).ids for t in texts[1::2]]
