"""Recipes and model folders are data (issue 56): a recipe's `init = "git:REF"` never becomes an option
of git's nor a path outside the cache; loading a model folder never runs code and reads only files its
manifest lists and checks. Each case is a real git repository, a real folder or a real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, run_script, time_limit
from edge_xsent.errors import UserError
from edge_xsent.train.warmstart import model_from_git

CLI = [sys.executable, "-m", "edge_xsent.cli"]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def commit_model(repo: Path, source: Path, message: str) -> str:
    """`m/` in `repo` becomes a copy of the model folder `source`, committed; its commit id."""
    shutil.rmtree(repo / "m", ignore_errors=True)
    shutil.copytree(source, repo / "m")
    git("add", "-A", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture()
def repo(tmp_path, tiny_model) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    commit_model(repo, tiny_model, "first")
    return repo


def test_hostile_git_refs_are_refused_and_run_nothing(tmp_path, repo):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    pwned = tmp_path / "PWNED"
    outside = tmp_path / "x"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    cache = tmp_path / "cache"
    for spec in (f"git:--remote={repo}:--exec=touch {pwned};true", f"git:--output={victim}",
                 f"git:--output={victim}:m", "git:HEAD:--output=/tmp/x", "git:HEAD:.", "git:HEAD:../m",
                 "git:HEAD:/etc", "git:HEAD:m/../..", "git:no-such-branch", "git:HEAD:missing"):
        with pytest.raises(UserError) as e:
            model_from_git(spec, repo=repo, cache=cache)
        assert spec in str(e.value)
    assert not pwned.exists() and victim.read_text() == "keep me"
    # a reflog date that looks like a path: git may read it as a date, but the cache is keyed by content
    try:
        got = model_from_git("git:HEAD@{../../../x}", repo=repo, cache=cache)
        assert got.parent == cache
    except UserError:
        pass
    assert (outside / "keep").read_text() == "mine"
    assert not any(p.name != ".git" for p in cache.glob("*") if not (p / "manifest.json").is_file()) \
        if cache.exists() else True


def test_a_moved_ref_takes_the_new_model_and_the_cache_is_keyed_by_content(tmp_path, repo, tiny_debiased):
    cache = tmp_path / "cache"
    first = model_from_git("git:HEAD:m", repo=repo, cache=cache)
    assert first.parent == cache and first.name == git("rev-parse", "HEAD:m", cwd=repo)
    commit_model(repo, tiny_debiased, "second")  # HEAD moves to another model
    second = model_from_git("git:HEAD:m", repo=repo, cache=cache)
    assert second != first
    assert (second / "manifest.json").read_bytes() == (tiny_debiased / "manifest.json").read_bytes()
    assert (first / "manifest.json").read_bytes() != (second / "manifest.json").read_bytes()
    with pytest.raises(UserError, match="not a folder inside the repository"):
        model_from_git("git:HEAD:.", repo=repo, cache=cache)
    assert (first / "manifest.json").is_file() and (second / "manifest.json").is_file()  # nothing deleted
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary left


def test_git_is_the_only_process_a_recipe_starts_and_user_text_follows_end_of_options(tmp_path, repo, monkeypatch):
    calls = []
    real = subprocess.run

    def spy(cmd, *a, **kw):
        calls.append(list(cmd))
        return real(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "run", spy)
    for spec in ("git:HEAD:m", "git:--exec=true", "git:HEAD:-x"):
        try:
            model_from_git(spec, repo=repo, cache=tmp_path / "cache")
        except UserError:
            pass
    assert calls
    fixed = {"-C", str(repo), "rev-parse", "--verify", "--quiet", "archive", "--format=tar", "cat-file", "-t"}
    for cmd in calls:
        assert cmd[0] == "git", cmd
        given = cmd[cmd.index("--end-of-options") + 1:] if "--end-of-options" in cmd else []
        options = cmd[1: len(cmd) - len(given) - (1 if given else 0)]
        assert all(o in fixed or len(o) == 40 for o in options), cmd  # nothing of the user's among the options
        assert all(not g.startswith("-") for g in given), cmd


def test_a_recipe_with_a_hostile_init_is_one_error_line(tmp_path):
    pwned = tmp_path / "PWNED"
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'data = "sample"\nout = "{tmp_path / "run"}"\nmax_steps = 1\n'
                      f'init = "git:--remote=.:--exec=touch {pwned};true"\n')
    res = subprocess.run([*CLI, "train", "--config", str(recipe)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert [l for l in res.stderr.splitlines() if l.startswith("error:")] and not pwned.exists()


# ----------------------------------------------------------------------------- loading a model folder

from edge_xsent import Encoder  # noqa: E402
from edge_xsent.encode.bundle import write_manifest  # noqa: E402

TEXTS = ["Open the file", "Ouvrir le fichier", "Save the current document before closing the window"]


def copy_of(src: Path, tmp_path: Path, name: str = "m", drop: tuple[str, ...] = ()) -> Path:
    folder = tmp_path / name
    shutil.copytree(src, folder)
    for f in drop:
        (folder / f).unlink()
    write_manifest(folder)
    return folder


def test_torchscript_is_never_loaded_unless_the_caller_trusts_the_folder(tiny_bundle, tmp_path, monkeypatch):
    import torch

    b = tiny_bundle[0]
    loaded = []
    monkeypatch.setattr(torch.jit, "load", lambda *a, **kw: loaded.append(a) or pytest.fail("torch.jit.load ran"))
    with pytest.raises(UserError, match="trust_code=True"):
        Encoder.load(b, backend="torchscript")
    assert not loaded
    res = run_cli("encode", "--model", b, "--backend", "torchscript", "--out", tmp_path / "v.npy", input="Open the file\n")
    assert res.returncode == 2 and "Traceback" not in res.stderr and not (tmp_path / "v.npy").exists()
    monkeypatch.undo()
    assert Encoder.load(b, backend="torchscript", trust_code=True).encode(TEXTS).shape == (3, 48)


LOAD_PATHS = [dict(backend="auto"), dict(backend="auto", precision="fp32"), dict(backend="torch"),
              dict(backend="onnx", precision="int8"), dict(backend="torchscript", trust_code=True)]


def _unlisted_weights(b: Path) -> str:
    (b / "model.safetensors").write_bytes(b"\0" * 64)
    return "model.safetensors: not listed"


def _unlisted_external_data(b: Path) -> str:
    (b / "onnx" / "weights.bin").write_bytes(b"\0" * 1024)
    return "weights.bin: not listed"


def _link_out(b: Path) -> str:
    (b / "edge_xsent.safetensors").unlink()
    (b / "edge_xsent.safetensors").symlink_to("/etc/passwd")
    return "leads out of the model folder"


def _fifo(b: Path) -> str:
    (b / "edge_xsent.safetensors").unlink()
    os.mkfifo(b / "edge_xsent.safetensors")  # a reader would hang on it for ever
    return "not a regular file"


def _tampered(b: Path) -> str:
    """Every graph changed after its manifest: whichever one a load path reads is caught (issue 105: a file the path
    never reads is not hashed, tests/test_loader.py)."""
    for graph in (b / "onnx" / "model_int8.onnx", b / "onnx" / "model.onnx", b / "torchscript" / "model.pt"):
        if graph.exists():
            data = bytearray(graph.read_bytes())
            data[-100] ^= 0xFF
            graph.write_bytes(bytes(data))
    return "checksum mismatch"


@pytest.mark.parametrize("tamper", [_unlisted_weights, _unlisted_external_data, _link_out, _fifo, _tampered])
@pytest.mark.parametrize("how", LOAD_PATHS, ids=lambda h: "-".join(str(v) for v in h.values()))
def test_every_load_path_reads_only_listed_checked_regular_files(tiny_bundle, tmp_path, how, tamper):
    b = copy_of(tiny_bundle[0], tmp_path, drop=("model.safetensors",))  # torch derives its weights from the graph
    message = tamper(b)
    with pytest.raises(UserError, match=message):
        Encoder.load(b, **how)


def test_derived_weights_come_only_from_a_listed_graph(tiny_bundle, tmp_path):
    b = copy_of(tiny_bundle[0], tmp_path, drop=("model.safetensors",))
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["files"].pop("onnx/model_int8.onnx")
    (b / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="model_int8.onnx: not listed"):
        Encoder.load(b, backend="torch")


@pytest.fixture(scope="module")
def two_layer_bundle(tiny_model, tmp_path_factory) -> Path:
    """A 2-layer model of random weights (nothing trained: only the files matter), exported: two blocks whose weights can trade places."""
    import torch

    from edge_xsent.encode.bundle import save_model
    from edge_xsent.export.exporter import export_bundle
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.encode.tokenizer import Tokenizer

    tok = Tokenizer.load(tiny_model / "tokenizer.model")
    torch.manual_seed(0)
    model = DualEncoder(EncoderConfig(vocab_size=tok.vocab_size, n_layers=2, d_model=48, n_heads=4, d_ff=96, max_len=32))
    with torch.no_grad():  # no two tensors alike (an exporter shares equal initializers)
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    root = tmp_path_factory.mktemp("two")
    save_model(root / "m", model, tok, ["en"], {"note": "random weights"})
    export_bundle(root / "m", root / "b", torchscript=False, check_parity=False)
    return root / "b"


def _resave_graph(folder: Path, change) -> None:
    import onnx

    path = folder / "onnx" / "model_int8.onnx"
    model = onnx.load(str(path))
    change(model.graph)
    onnx.save(model, str(path))
    write_manifest(folder)  # resealed: the checksums cannot tell, the probe must


def _swap_two_blocks(graph) -> None:
    """Block 0's and block 1's quantized qkv weights trade places in the list: ONNX reads them by
    name (still right), weights derived by order would land in the wrong blocks."""
    inits = list(graph.initializer)
    mats = [i for i, t in enumerate(inits) if t.name.endswith("_quantized") and not t.name.startswith("model.")]
    a, b = mats[0], mats[4]  # qkv of block 0 and of block 1 (four linears a block)
    inits[a], inits[b] = inits[b], inits[a]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def _extra_output_node(graph) -> None:
    import onnx

    out = graph.output[0]
    old = out.name
    for node in graph.node:
        for i, o in enumerate(node.output):
            if o == old:
                node.output[i] = old + "_raw"
    graph.node.append(onnx.helper.make_node("Neg", [old + "_raw"], [old]))


@pytest.mark.parametrize("tamper", [_swap_two_blocks, _extra_output_node])
def test_a_graph_that_computes_something_else_than_its_weights_is_caught(two_layer_bundle, tmp_path, tamper):
    b = copy_of(two_layer_bundle, tmp_path, drop=("model.safetensors",))
    assert Encoder.load(b, backend="torch").encode(TEXTS).shape == (3, 48)  # untampered, it loads
    _resave_graph(b, tamper)
    with pytest.raises(UserError, match="do not compute what the graph computes"):
        Encoder.load(b, backend="torch")


def test_a_graph_onnxruntime_cannot_read_is_one_error(tiny_bundle, tmp_path):
    b = copy_of(tiny_bundle[0], tmp_path)
    graph = b / "onnx" / "model_int8.onnx"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    write_manifest(b)
    with pytest.raises(UserError, match="onnxruntime cannot load this graph"):
        Encoder.load(b)


@pytest.mark.parametrize("kwargs, message", [
    (dict(path=5), "a folder path"), (dict(path=b"path"), "a folder path"), (dict(path=["m"]), "a folder path"),
    (dict(threads="2"), "threads='2'"), (dict(threads=2.5), "threads=2.5"), (dict(threads=10**6), "from 1 to"),
    (dict(threads=0), "from 1 to"), (dict(threads=True), "threads=True"),
    (dict(session_options="x"), "SessionOptions"), (dict(disabled_optimizers=None), "disabled_optimizers"),
    (dict(disabled_optimizers="SkipLayerNormFusion"), "disabled_optimizers"), (dict(verify="no"), "verify"),
    (dict(trust_code=1), "trust_code"),
])
def test_load_checks_its_arguments(kwargs, message):
    with pytest.raises(UserError, match=message):
        Encoder.load(**kwargs)


def test_encode_refuses_a_lone_surrogate_in_a_single_string():
    with pytest.raises(UserError, match="lone surrogate"):
        Encoder.load().encode("ok\udcff")


def test_an_absurd_thread_count_is_a_usage_error_not_a_crash(tmp_path):
    res = run_cli("encode", "--threads", "1000000", "--out", tmp_path / "v.npy", input="Open the file\n")
    assert res.returncode in (1, 2) and "Traceback" not in res.stderr and "from 1 to" in res.stderr, res.stderr


# ----------------------------------------------------------------------------- the lab's writers

ROOT = Path(__file__).resolve().parent.parent


def one_error(res) -> str:
    """One error line, no traceback: exit 1 (refused by the work's checks) or 2 (an argument refused as it was parsed,
    by its edge_xsent.paths type: argparse's `SCRIPT: error: argument --out: ...`)."""
    assert res.returncode in (1, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [l for l in res.stderr.splitlines() if l.startswith("error:") or (res.returncode == 2 and ": error: " in l)]
    assert len(lines) == 1, res.stderr[-2000:]
    return lines[0]


def test_figures_writes_only_its_own_file(tiny_bundle, tmp_path):
    model = copy_of(tiny_bundle[0], tmp_path)
    config = (model / "config.json").read_bytes()
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    up = "../" * (len((ROOT / "benchmarks/results/candidates").resolve().parts) - 1)
    for args, message in ((["--name", f"{up}{str(victim.with_suffix(''))[1:]}"], "not a path"),
                          (["--name", "x", "--out", str(model / "config.json")], "of this command"),
                          (["--name", "x", "--out", str(model)], "of this command")):
        assert message in one_error(run_script("train/figures.py", str(model), *args, "--parts", "oog"))
    assert (model / "config.json").read_bytes() == config and victim.read_text() == "{}"


def test_figures_turns_bad_inputs_into_one_line(tiny_bundle, tmp_path):
    (tmp_path / "corpus").mkdir()
    shutil.copy(ROOT / "edge_xsent/resources/sample-corpus/test.tsv", tmp_path / "corpus")  # no stats.json
    out = ["--out", str(tmp_path / "f.json")]
    for args, message in (([str(tmp_path / "nothing"), "--name", "x"], "no such file or folder"),
                          ([str(tiny_bundle[0]), "--name", "x", "--data", str(tmp_path / "corpus"), "--parts", "general"],
                           "stats.json: missing"),
                          ([str(tiny_bundle[0]), "--name", "x", "--corpus-g", "sample", "--data", "sample", "--parts",
                            "corpus_g"], "no general test pairs"),
                          ([str(tiny_bundle[0]), "--name", "x", "--parts", "nonsense"], "--parts nonsense")):
        assert message in one_error(run_script("train/figures.py", *args, *out))


def _figures(path: Path, name: str, model: Path, **change) -> Path:
    langs = ["de", "fr", *(f"l{i:02d}" for i in range(19))]
    fig = {"name": name, "model": str(model), "int8_mb": 14.0,
           "general": {l: {"p1": 90.0, "train_pairs": 20_000} for l in langs},
           "oog": {"mean": 80.0, "by_language": {"de": 80.0, "fr": 80.0}}, "oog_wide": {"by_language": {"de": 70.0}},
           "corpus_g": {"software": 95.0, "general": 88.0}, "speed": {"ratio": 3.0}, **change}
    path.write_text(json.dumps(fig))
    return path


def test_ship_writes_only_its_own_outputs(tiny_bundle, tmp_path):
    run = tmp_path / "run"
    bundle = run / "bundle"
    shutil.copytree(tiny_bundle[0], bundle)
    shipped = _figures(tmp_path / "shipped.json", "shipped", bundle, oog={"mean": 70.0, "by_language": {"de": 70.0}})
    cand = _figures(tmp_path / "c.json", "c", bundle)
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    before = {p: p.read_bytes() for p in [shipped, cand, user / "notes.txt", *bundle.rglob("*.json")]}
    base = ["--shipped", str(shipped), "--candidate", str(cand)]
    for args, message in (([*base, "--decision", str(shipped), "--out", str(tmp_path / "o")], "of this command"),
                          ([*base, "--decision", str(tmp_path / "d.md"), "--out", str(user)], "not a model folder"),
                          ([*base, "--decision", str(tmp_path / "d.md"), "--out", str(bundle)], "of this command"),
                          ([*base, "--decision", str(tmp_path / "d.md"), "--out", str(run)], "not a model folder")):
        assert message in one_error(run_script("train/ship.py", *args))
    assert all(p.read_bytes() == b for p, b in before.items())
    assert not (tmp_path / "d.md").exists()


def test_ship_turns_bad_figures_into_one_line(tiny_bundle, tmp_path):
    shipped = _figures(tmp_path / "shipped.json", "shipped", tiny_bundle[0])
    cases = {"empty oog": dict(oog={}), "empty by_language": dict(oog={"mean": 80.0, "by_language": {}})}
    for name, change in cases.items():
        cand = _figures(tmp_path / "c.json", "c", tiny_bundle[0], **change)
        assert "no oog" in one_error(run_script("train/ship.py", "--shipped", str(shipped), "--candidate", str(cand),
                                                "--decision", str(tmp_path / "d.md"))), name
    assert "no such file" in one_error(run_script("train/ship.py", "--shipped", str(shipped), "--candidate",
                                                  str(tmp_path / "absent.json")))


def test_interpolate_replaces_only_its_own_kind_of_folder(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'data = "sample"\nout = "{tmp_path / "run"}"\ninit = "default"\n')
    assert "is not a run-like folder" in one_error(run_script("train/interpolate.py", str(recipe), "--alpha", "0.5",
                                                              "--out", str(user)))
    assert (user / "notes.txt").read_text() == "mine"


# ----------------------------------------------------------------------------- bounds and silent results

@pytest.fixture
def tiny_cpu(tiny_run) -> list[str]:
    """train/tiny-cpu.toml with the tiny run's tokenizer: a process of its own would train one first (10 s)."""
    return ["--config", str(ROOT / "train" / "tiny-cpu.toml"), "--quiet", "--threads", "1",
            "--tokenizer", str(tiny_run / "tokenizer.model"), "--vocab-size", "1000"]


def test_a_second_training_on_the_same_out_stops_with_one_line(tmp_path, tiny_cpu):
    """The first run, another process, holds the folder's lock; stopped (SIGSTOP) once it writes its log, it keeps
    holding it without spending a core while the second command (in this process) is refused."""
    import signal

    out = tmp_path / "run"
    first = subprocess.Popen([*CLI, "train", *tiny_cpu, "--out", str(out), "--max-steps", "100000", "--log-every", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = 120
        while not (out / "log.jsonl").exists() and deadline and first.poll() is None:  # it holds the folder now
            subprocess.run(["sleep", "1"])
            deadline -= 1
        first.send_signal(signal.SIGSTOP)
        with time_limit(120, AssertionError("the second run was not refused: it went on to train")):
            second = run_cli("train", *tiny_cpu, "--out", out, "--max-steps", "100000")
        assert "another training run is writing this folder" in one_error(second)
    finally:
        first.kill()
        first.wait()


def test_a_torn_log_line_is_dropped_on_resume_and_skipped_on_reading(tmp_path, tiny_cpu):
    out = tmp_path / "run"
    args = ["train", *tiny_cpu, "--out", out, "--max-steps", "4", "--checkpoint-every", "2", "--log-every", "1",
            "--valid-pairs", "64"]  # the behaviour of a resume, not learning: a few steps, a line each
    assert run_cli(*args, "--pause-at", "2").returncode == 0  # in process: the kill is written by hand below
    with open(out / "log.jsonl", "a") as f:
        f.write('{"step": 3, "total": 3.')  # killed mid-write
    res = run_cli(*args)
    assert res.returncode == 0 and "last line was torn" in res.stderr, res.stderr
    lines = (out / "log.jsonl").read_text().splitlines()
    assert all(json.loads(l) for l in lines)  # every line whole again
    from edge_xsent.train.runfolder import read_log

    (out / "log.jsonl").write_text((out / "log.jsonl").read_text() + "{torn\n" + lines[-1] + "\n")
    assert len(read_log(out / "log.jsonl")) == len(lines) + 1


def test_a_recipe_whose_model_is_not_a_table_is_one_line(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'data = "sample"\nout = "{tmp_path / "run"}"\nmodel = 5\n')
    res = run_cli("train", "--config", recipe)
    assert "model must be a table" in one_error(res)


def test_distractors_in_a_language_no_pair_has_are_refused(tmp_path):
    extra = tmp_path / "zz.txt"
    extra.write_text("one sentence\nanother one\n")
    res = run_cli("eval", "xsr", "--data", "sample", "--langs", "fr", "--queries", "20", "--distractors", f"zz:{extra}")
    assert "'zz' is none of the pairs' languages" in one_error(res)


def test_a_carry_that_claims_a_finished_run_without_its_model_is_refused(tmp_path):
    from carry import restore

    src = tmp_path / "carry"
    src.mkdir()
    (src / "summary.json").write_text("{}")
    from edge_xsent.encode.bundle import sha256

    (src / "carry.json").write_text(json.dumps({"format": "edge-xsent-carry", "step": 5, "finished": True, "config": {},
                                                "parts": [], "sha256": {"summary.json": sha256(src / "summary.json")}}))
    with pytest.raises(UserError, match="holds no model/ folder"):
        restore(src, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_external_data_outside_the_folder_is_one_error(tiny_bundle, tmp_path):
    from conftest import externalise_largest

    b = copy_of(tiny_bundle[0], tmp_path)
    externalise_largest(b / "onnx" / "model_int8.onnx", "../../outside.bin", tmp_path / "outside.bin")
    write_manifest(b)
    with pytest.raises(UserError, match="onnxruntime cannot load this graph"):
        Encoder.load(b)
