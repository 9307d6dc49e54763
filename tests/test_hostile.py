"""Hostile and careless use, as real processes (issue 43): full disks, read-only places, closed
streams, endless lines, killed writers' leftovers; and a fuzzer that runs the writing commands (in process, but
for the full disk's rlimit) against every kind of hostile output target and checks that nothing read was changed, no
traceback appeared and the exit code says what happened."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, run_cli, run_script, time_limit

CLI = [sys.executable, "-m", "edge_xsent.cli"]
SENTENCES = "Open the file\nSave the current document\nClose the window\n"


def run(*args: str, stdin=None, input: bytes | None = None, limit_bytes: int | None = None, **kw):
    """The CLI as a process (or a script of the repository, named "@train/x.py"); `limit_bytes` caps the size of any file it writes (a full disk, as
    far as a writer can tell: each write past it fails with EFBIG)."""
    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    command = [sys.executable, str(ROOT / args[0][1:]), *args[1:]] if args and args[0].startswith("@") else [*CLI, *args]
    return subprocess.run(command, stdin=stdin, input=input, capture_output=True, cwd=kw.pop("cwd", None),
                          preexec_fn=cap if limit_bytes else None, timeout=300, **kw)


def one_error_line(res, code: int = 1, prefix: str = "error:") -> str:
    """The one error line of a refusal: `error: ...` from the command (exit 1), or click's usage error for an
    argument refused as it was parsed (exit 2, its `Error: Invalid value for ...` line)."""
    err = res.stderr.decode()
    assert res.returncode == code and "Traceback" not in err, err[-2000:]
    lines = [l for l in err.splitlines() if l.startswith(prefix)]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def test_a_full_disk_is_one_error_naming_the_file_and_leaves_nothing(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text(SENTENCES * 400)  # 1,200 x 256 float32: 1.2 MB of output
    out = tmp_path / "v.npy"
    line = one_error_line(run("encode", "--input", str(text), "--out", str(out), limit_bytes=200_000))
    assert f"{out}: File too large (EFBIG)" in line and "write somewhere else" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.txt"]  # no output, no temporary


def test_printing_to_a_full_device_is_one_error():
    with open("/dev/full", "wb") as full:
        res = subprocess.run([*CLI, "compare", "Open the file", "Ouvrir le fichier"], stdout=full,
                             stderr=subprocess.PIPE, timeout=300)
    assert "error: standard output: No space left on device (ENOSPC)" in one_error_line(res)


def test_a_read_only_or_impossible_place_fails_before_the_work(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text(SENTENCES)
    for out, cause in ((text / "v.npy", "(ENOTDIR)"), (Path("/proc/edge-xsent/v.npy"), "/proc/edge-xsent: ")):
        res = run("encode", "--input", str(text), "--out", str(out))
        line = one_error_line(res, code=2, prefix="Error: Invalid value for '--out': ")  # refused as parsed
        assert cause in line or "inside an input" in line
        assert "sent/s" not in res.stderr.decode()  # refused before any sentence was encoded


@pytest.mark.parametrize("closed", ["stdin", "stdout", "stderr"])
def test_closed_streams_are_no_traceback(tmp_path, closed):
    """`2>&-` and friends: Python then has None for that stream; the command still ends cleanly."""
    fd = {"stdin": 0, "stdout": 1, "stderr": 2}[closed]
    args = ["encode", "--out", str(tmp_path / "v.npy")] if closed == "stdin" else ["compare", "Open the file", "Ouvrir"]
    res = subprocess.run([*CLI, *args], capture_output=closed != "stdin", timeout=300,
                         preexec_fn=lambda: os.close(fd))
    assert res.returncode == 0
    if closed == "stdin":  # nothing to read: an empty matrix of the model's width
        from edge_xsent import Encoder

        assert np.load(tmp_path / "v.npy").shape == (0, Encoder.load().dim)
    else:
        assert b"Traceback" not in (res.stderr or b"") + (res.stdout or b"")


@pytest.mark.filterwarnings("ignore:.*were truncated:UserWarning")
def test_an_endless_line_stops_with_an_error_and_a_long_one_in_bounded_memory(tmp_path):
    res = run("encode", "--input", "/dev/zero", "--out", str(tmp_path / "z.npy"))
    assert "line 1 is longer than 64 MB" in one_error_line(res)
    long = tmp_path / "long.txt"
    with open(long, "w") as f:
        f.write("Open the file " * 3_600_000 + "\nClose the window\n")  # one 50 MB line
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    res = run("encode", "--input", str(long), "--out", str(tmp_path / "v.npy"))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert peak_mb < 600 or before / 1024 >= 600, peak_mb  # measured 238 MB; 1,345 MB before the cut
    vecs = np.load(tmp_path / "v.npy")
    from edge_xsent import Encoder
    assert vecs.shape == (2, Encoder.load().dim) and float(vecs[0] @ Encoder.load().encode("Open the file " * 100)) > 0.999


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text(SENTENCES)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    left = tmp_path / f".v.npy.{dead.pid}.abcd1234.tmp"
    left.write_bytes(b"\0" * 1000)
    other = tmp_path / f".v.npy.{os.getpid()}.abcd1234.tmp"  # a live writer's: kept
    other.write_bytes(b"x")
    assert run("encode", "--input", str(text), "--out", str(tmp_path / "v.npy")).returncode == 0
    assert not left.exists() and other.exists() and (tmp_path / "v.npy").exists()


# ----------------------------------------------------------------------------- the fuzzer

def digest(path: Path) -> str:
    """A hash of a file or a whole folder (names and contents)."""
    h = hashlib.sha256()
    paths = sorted(path.rglob("*")) if path.is_dir() else [path]
    for p in paths:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_bundle):
    """What a user has: texts, a model folder, a training run with a checkpoint, a folder of files."""
    root = tmp_path_factory.mktemp("world")
    (root / "a.txt").write_text(SENTENCES)
    (root / "b.txt").write_text("Ouvrir le fichier\nEnregistrer le document\nFermer la fenêtre\n")
    (root / "pairs.en-fr.tsv").write_text("Open the file\tOuvrir le fichier\nClose the window\tFermer la fenêtre\n")
    shutil.copytree(tiny_bundle[0], root / "model")
    (root / "run" / "checkpoints").mkdir(parents=True)
    (root / "run" / "checkpoints" / "last.pt").write_bytes(b"checkpoint")
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("my notes")
    (root / "link-to-model").symlink_to(root / "model")
    (root / "tiny.toml").write_text((ROOT / "train" / "tiny-cpu.toml").read_text())
    shutil.copytree(tiny_bundle[0], root / "run" / "model")  # a finished run's own model folder
    (root / "app").mkdir()  # a web app: its manifest.json is not an edge-xsent marker
    (root / "app" / "manifest.json").write_text('{"name": "My notes", "start_url": "index.html"}')
    (root / "app" / "index.html").write_text("<h1>mine</h1>")
    os.mkfifo(root / "fifo")
    if os.geteuid() == 0:
        os.mknod(root / "device", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero's numbers under another name
    return root


# Each command with its inputs, the input a target may name ({input}); OUT is replaced by the hostile target.
COMMANDS = {
    "encode": ("a", ["encode", "--model", "{model}", "--input", "{a}", "--out", "OUT"]),
    "mine": ("b", ["mine", "{a}", "{b}", "--model", "{model}", "--out", "OUT"]),
    "eval-md": ("pairs", ["eval", "xsr", "--model", "{model}", "--data", "{pairs}", "--md", "OUT"]),
    "debias": ("pairs", ["debias", "{model}", "--data", "{pairs}", "--out", "OUT"]),
    "export": ("model", ["export", "{model}", "--out", "OUT"]),
    "carry-save": ("run", ["@train/carry.py", "save", "{run}", "OUT"]),  # @: a lab script, not the CLI
    "train": ("recipe", ["train", "--config", "{recipe}", "--out", "OUT", "--max-steps", "2", "--quiet"]),
}
TARGETS = {
    "an input": "{input}", "a link to an input": "{root}/link-to-{input_name}", "the model folder": "{model}",
    "a file of the model": "{model}/config.json", "a link to the model": "{root}/link-to-model",
    "a training run": "{run}", "a checkpoint": "{run}/checkpoints/last.pt", "a folder of user files": "{root}/mine",
    "inside a file": "{a}/x", "a read-only place": "/proc/edge-xsent-x/out",
    "a full disk": "{root}/full/{command}-out",  # run with a 100-byte file size limit
    "a web app's folder": "{root}/app", "a run's own model": "{run}/model", "a FIFO": "{root}/fifo",
    "a device": "{root}/device",  # made only as root: elsewhere a missing path, written or refused like any
}


def in_process(*args: str):
    """A fuzz case run in this process (`run`'s arguments): only the full disk needs a process of its own, for its
    rlimit. An alarm fails a case that blocks (a FIFO opened for writing would never return)."""
    with time_limit(60, pytest.fail.Exception(f"{' '.join(args)} blocked for 60 s")):
        return run_script(args[0][1:], *args[1:]) if args[0].startswith("@") else run_cli(*args)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_fuzz_hostile_output_targets(world, command):
    paths = {"root": world, "a": world / "a.txt", "b": world / "b.txt", "pairs": world / "pairs.en-fr.tsv",
             "model": world / "model", "run": world / "run", "recipe": world / "tiny.toml"}
    key, command_args = COMMANDS[command]
    paths["input"] = paths[key]
    paths["input_name"] = paths[key].name
    link = world / f"link-to-{paths[key].name}"
    if not link.is_symlink():
        link.symlink_to(paths[key])
    watched = [world / n for n in ("a.txt", "b.txt", "pairs.en-fr.tsv", "tiny.toml", "model", "run", "mine", "app")]
    before = {p: digest(p) for p in watched}
    failures = []
    for name, target in TARGETS.items():
        if name == "a device" and not (world / "device").exists():
            continue
        args = [a.format(**paths) if a != "OUT" else target.format(**paths, command=command) for a in command_args]
        res = run(*args, limit_bytes=100) if name == "a full disk" else in_process(*args)
        err = res.stderr.decode() if isinstance(res.stderr, bytes) else res.stderr
        if res.returncode not in (1, 2) or "Traceback" in err or "error" not in err.lower():
            failures.append((name, res.returncode, err[-400:]))
        elif name == "a full disk" and command != "carry-save" and \
                f"error: {target.format(**paths, command=command)}" not in err:  # the output or a file in it
            failures.append((name, "the error does not name the output", err[-400:]))
    assert not failures, failures
    full = world / "full"
    left = [p for p in full.rglob("*") if p.name.startswith(command) or p.suffix == ".tmp"] if full.exists() else []
    if command == "train":  # a run's folder stays, to resume; nothing half-written in it
        left = [p for p in left if p.is_file()]
    assert not left, left  # no half output, no temporary
    assert {p: digest(p) for p in watched} == before  # nothing a command read or a user keeps was changed
    assert stat.S_ISFIFO((world / "fifo").lstat().st_mode)  # a special file is never replaced


def test_a_torn_corpus_stats_json_is_a_warning_not_a_traceback(tmp_path):
    import shutil

    from edge_xsent.data.corpus import SAMPLE_CORPUS

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    for torn in ('{"build": {"dropped_by_filter": {"too_short": "many"}, "duplicates_removed": 1}', '{"build": {"dropped', "[1, 2]"):
        (corpus / "stats.json").write_text(torn)
        res = run("data", "stats", str(corpus))
        out, err = res.stdout.decode(), res.stderr.decode()
        assert res.returncode == 0 and "Traceback" not in err and "en-fr" in out, err[-1000:]
        assert "build report: unreadable" in out or "torn or not a JSON object" in err


@pytest.mark.parametrize("command", ["data build", "data reserved"])
def test_data_builders_never_replace_a_folder_of_another_kind(world, tmp_path, command):
    """A corpus or benchmark build replaces only an earlier corpus or benchmark: never the user's
    folder, a model folder or a training run (refused before any download or work)."""
    watched = [world / n for n in ("model", "run", "mine")]
    before = {p: digest(p) for p in watched}
    for target in watched:
        res = run(*command.split(), "--out", str(target), "--offline", "--cache", str(tmp_path / "cache"))
        assert "exists and is not a" in one_error_line(res)
    assert {p: digest(p) for p in watched} == before


# Hostile inputs: what a careless user passes where text is expected.
HOSTILE_INPUTS = {
    "binary": bytes(range(256)) * 40,  # invalid UTF-8
    "invalid UTF-8 mid-file": "Open the file\n".encode() + b"\xff\xfe\xfd\n",
    "empty": b"",
    "NUL bytes": b"\0" * 5000 + b"\n",
    "a folder": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["encode", "mine", "eval"])
def test_fuzz_hostile_inputs(world, tmp_path, command):
    failures = []
    for name, content in HOSTILE_INPUTS.items():
        path = tmp_path / f"{name.replace(' ', '-')}.en-fr.tsv"  # the languages in the name, as eval reads them
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        args = {"encode": ["encode", "--model", str(world / "model"), "--input", str(path), "--out", str(tmp_path / "v.npy")],
                "mine": ["mine", str(path), str(world / "b.txt"), "--model", str(world / "model"), "--out", str(tmp_path / "m.tsv")],
                "eval": ["eval", "xsr", "--model", str(world / "model"), "--data", str(path)]}[command]
        res = run(*args)
        err = res.stderr.decode()
        if res.returncode not in (0, 1) or "Traceback" in err or (res.returncode and "error:" not in err):
            failures.append((name, res.returncode, err[-300:]))
    assert not failures, failures


@pytest.mark.slow
def test_training_on_a_full_disk_stops_cleanly_and_the_rerun_finishes(tmp_path, tiny_run):
    args = ("train", "--config", str(ROOT / "train" / "tiny-cpu.toml"), "--out", str(tmp_path / "run"),
            "--max-steps", "3", "--eval-every", "2", "--checkpoint-every", "2", "--valid-pairs", "100", "--quiet",
            "--tokenizer", str(tiny_run / "tokenizer.model"), "--vocab-size", "1000")  # no tokenizer trained in each process
    line = one_error_line(run(*args, limit_bytes=1_500_000))  # the tokenizer fits, the model folder does not
    assert "failed at step 2" in line and "run the same command to resume" in line
    assert run(*args).returncode == 0 and (tmp_path / "run" / "model" / "model.safetensors").exists()


@pytest.mark.skipif(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") > 160 * 2**30,
                    reason="this machine could hold the largest model the config ranges allow")
def test_a_model_too_large_for_the_machine_fails_before_reading_data(tmp_path):
    recipe = tmp_path / "huge.toml"
    recipe.write_text((ROOT / "train" / "tiny-cpu.toml").read_text()
                      .replace("vocab_size = 4000", "vocab_size = 1000000").replace("d_model = 128", "d_model = 8192")
                      .replace("n_heads = 4", "n_heads = 8"))
    res = run("train", "--config", str(recipe), "--out", str(tmp_path / "run"), "--quiet")
    line = one_error_line(res)
    assert "need at least 164.0 GiB to train" in line and "make the model smaller" in line
    assert not (tmp_path / "run" / "tokenizer.model").exists()  # refused before the tokenizer was trained
