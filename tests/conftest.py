"""Shared fixtures: one tiny model trained once per session on the shipped sample corpus."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from pathlib import Path

import pytest

# Two pytest workers share the cores with the processes the tests start: every thread waits passively (torch's
# OpenMP reads this once, at import; onnxruntime's pool, opened later, follows it: threads.waits_passively), and
# what a test computes in this process uses one thread (torch, and each onnxruntime session given no count).
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
import torch  # noqa: E402

from edge_xsent.threads import chosen, use_threads  # noqa: E402

use_threads(1)  # torch's threads too: it is imported
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "train"))  # the lab's modules beside its scripts (decisions, shipspec), as a script there sees them


@pytest.fixture(autouse=True, scope="session")
def train_each_tokenizer_once(tmp_path_factory):
    """Some sixty tests train the same tiny tokenizer (10-15 s each). Tokenizer.train is deterministic
    (test_tokenizer checks the function this yields, unmemoised, twice), so the run trains each (texts,
    settings) once, shared by the pytest workers as `built_once` shares a fixture, and hands out copies;
    a training that fails is not remembered."""
    import hashlib

    from edge_xsent.encode.tokenizer import Tokenizer

    real, trained = Tokenizer.train.__func__, {}

    def train(cls, texts, vocab_size: int, max_sentences: int = 1_000_000, seed: int = 0, byte_fallback: bool = True):
        texts = list(texts)
        digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
        key = (digest, len(texts), vocab_size, max_sentences, seed, byte_fallback)
        if key not in trained:
            def build(folder: Path) -> None:
                (folder / "tokenizer.model").write_bytes(real(cls, texts, vocab_size, max_sentences, seed, byte_fallback).proto)

            name = "tokenizer-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            trained[key] = (built_once(tmp_path_factory, name, build)[0] / "tokenizer.model").read_bytes()
        return cls.from_bytes(trained[key])

    Tokenizer.train = classmethod(train)
    yield real
    Tokenizer.train = classmethod(real)


@pytest.fixture(autouse=True, scope="session")
def export_each_graph_once(tmp_path_factory):
    """torch's ONNX exporter (export_onnx: 2-3 s of dynamo tracing) is asked for the tiny model's graph a dozen
    times, once per export option and command the tests try. Its graph depends only on the weights, the config and
    the example batch (test_encoder_export checks the function this yields against a kept graph), so the run
    exports each such model once, shared by the workers as `built_once` shares a fixture, and copies the graph for
    the next; every step of an export after the fp32 graph still runs. An export that fails is not remembered."""
    import hashlib
    import shutil

    from edge_xsent.export import exporter

    real = exporter.export_onnx

    def export_onnx(model, example, path: Path) -> None:
        key = hashlib.sha256(repr((type(model).__qualname__, model.cfg)).encode())
        for name, t in [*model.state_dict().items(), *enumerate(example)]:
            key.update(f"{name} {t.dtype} {tuple(t.shape)}".encode())
            key.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        kept = built_once(tmp_path_factory, "graph-" + key.hexdigest()[:16], lambda f: real(model, example, f / "fp32.onnx"))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept[0] / "fp32.onnx", path)

    exporter.export_onnx = export_onnx
    yield real
    exporter.export_onnx = real


def built_once(tmp_path_factory, name: str, build) -> tuple[Path, object]:
    """`build(folder)` once for the whole run: pytest-xdist's workers share the folder (a file lock: the first
    builds, the others wait and read), so a heavy session fixture costs one build, not one per worker (2 on
    CI's 2 cores: ~70 s of fixtures each). Returns the folder and what `build` returned (kept as JSON). A
    fixture so built is read-only to every test, as a session fixture always was."""
    import json
    import shutil

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built-once"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():  # a build that failed left no record: the next worker builds again
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            done.write_text(json.dumps(build(folder)))
    return folder, json.loads(done.read_text())


def script_module(rel: str):
    """A script of the repository (train/, benchmarks/: not part of the package) imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(rel).stem, ROOT / rel)
    mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # a dataclass in it looks itself up there
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def time_limit(seconds: int, expired: BaseException):
    """`expired` raised in the test after `seconds` (SIGALRM): a case that hangs (a FIFO read, a write that never
    returns, a command doing work it should have refused) fails instead of stalling the suite."""
    def ring(*_):
        raise expired

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@dataclasses.dataclass
class Ran:
    """What `run_script` or `run_cli` saw, named as subprocess.CompletedProcess names it."""
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def process_state_kept(cwd: Path | None = None):
    """Run a command in this process, then put back what it may change of the process: argv, sys.path, the
    working folder, the environment and the thread policy (a command's --threads would slow every later test)."""
    saved = sys.argv, sys.path[:], os.getcwd(), dict(os.environ), torch.get_num_threads(), chosen()
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        os.chdir(saved[2])
        os.environ.clear()
        os.environ.update(saved[3])
        torch.set_num_threads(saved[4])
        use_threads(saved[5])


def run_script(rel: str, *args, cwd: Path | None = None) -> Ran:
    """`python REL ARGS` in this process: its exit status, stdout and stderr, without the 2-3 s a new
    interpreter spends importing torch. For what a script does, not for the process itself (a signal, a
    closed stream, an rlimit, what happens at interpreter exit: those tests start one). An uncaught
    exception fails the calling test with its traceback, where a process would exit 1 and print it."""
    import io
    import runpy

    script = ROOT / rel
    out, err, code = io.StringIO(), io.StringIO(), 0
    with process_state_kept(cwd):
        sys.argv, sys.path[0:0] = [str(script), *map(str, args)], [str(script.parent)]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if isinstance(e.code, str):
                err.write(e.code + "\n")
    return Ran(code, out.getvalue(), err.getvalue())


def run_cli(*args, input: str | None = None, cwd: Path | None = None) -> Ran:
    """`edge-xsent ARGS` in this process (click's runner), as `run_script` runs a script: for what a command
    does; a test of the process itself (its streams, signals, exit at shutdown) starts one."""
    from click.testing import CliRunner

    from edge_xsent.cli import main

    with process_state_kept(cwd):
        res = CliRunner().invoke(main, [str(a) for a in args], input=input)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Ran(res.exit_code, res.stdout, res.stderr)


def externalise_largest(graph: Path, location: str, data_file: Path) -> int:
    """Move an ONNX graph's largest initializer to external data named `location` (relative to the
    graph), its bytes written to `data_file`; returns their length."""
    import onnx

    proto = onnx.load(str(graph))
    t = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    data_file.write_bytes(t.raw_data)
    n = len(t.raw_data)
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(n))):
        t.external_data.add(key=k, value=v)
    graph.write_bytes(proto.SerializeToString())
    return n


def mark_run(folder: Path) -> Path:
    """`folder` made a training run's by hand, as a run makes it first (its marker, layout.RUN_MARKER)."""
    from edge_xsent.layout import RUN_FORMAT, RUN_MARKER

    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_MARKER).write_text(f'{{"format": "{RUN_FORMAT}"}}\n')
    return folder


def tiny_config(out: Path, **overrides):
    from edge_xsent.encode.model import EncoderConfig
    from edge_xsent.config import TrainConfig

    model = dict(vocab_size=1000, n_layers=1, d_model=32, n_heads=2, d_ff=64, max_len=32, dropout=0.1)
    model.update(overrides.pop("model", {}))
    base = dict(data="sample", out=str(out), batch_size=32, lr=3e-3, warmup_steps=5, max_steps=40,
                eval_every=20, checkpoint_every=10, log_every=5, valid_pairs=200, max_train_pairs=None,
                threads=1, seed=0)
    base.update(overrides)
    return TrainConfig(model=EncoderConfig(**model), **base)


def run_until(cfg, stop_at: int) -> None:
    """Run training but interrupt it right after the checkpoint of step `stop_at`, as a killed process would."""
    import edge_xsent.train.loop as T
    from edge_xsent.train.loop import train

    real = T.save_checkpoint

    def save_then_stop(path, state):
        real(path, state)
        if state["step"] == stop_at:
            raise KeyboardInterrupt

    T.save_checkpoint = save_then_stop
    try:
        with pytest.raises(KeyboardInterrupt):
            train(cfg, progress=False)
    finally:
        T.save_checkpoint = real


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A trained tiny model (train output folder); its model/ is a loadable model folder."""
    from edge_xsent.train.loop import train

    def build(folder: Path) -> None:
        cfg = tiny_config(folder / "run", max_steps=60, model=dict(d_model=48, n_heads=4, d_ff=96))
        assert train(cfg, progress=False)["steps"] == 60

    return built_once(tmp_path_factory, "tiny-run", build)[0] / "run"


@pytest.fixture(scope="session")
def tiny_model(tiny_run) -> Path:
    return tiny_run / "model"


@pytest.fixture(scope="session")
def tiny_encoder(tiny_model):
    from edge_xsent import Encoder

    return Encoder.load(tiny_model)


@pytest.fixture(scope="session")
def tiny_bundle(tiny_model, tmp_path_factory):
    """The tiny model exported with --int8: (bundle folder, parity report)."""
    from edge_xsent.export.exporter import export_bundle

    folder, parity = built_once(tmp_path_factory, "bundle", lambda f: export_bundle(tiny_model, f / "bundle", parity_pairs=80))
    return folder / "bundle", parity


@pytest.fixture(scope="session")
def tiny_bundle_table4(tiny_model, tmp_path_factory):
    """The tiny model exported with --table-bits 4 (the token table in 4-bit blocks): (bundle, parity)."""
    from edge_xsent.export.exporter import export_bundle

    folder, parity = built_once(tmp_path_factory, "bundle-t4", lambda f: export_bundle(
        tiny_model, f / "bundle", parity_pairs=80, torchscript=False, table_bits=4))
    return folder / "bundle", parity


@pytest.fixture(scope="session")
def tiny_bundle_per_row(tiny_model, tmp_path_factory) -> Path:
    """The tiny model exported as a pruned student must ship (studies/pruned-student): the token table in
    4-bit blocks and int8 activations scaled per row (`--table-bits 4 --int8-activations per-row`)."""
    from edge_xsent.export.exporter import export_bundle

    def build(folder: Path) -> None:
        export_bundle(tiny_model, folder / "bundle", parity_pairs=80, torchscript=False, table_bits=4,
                      int8_activations="per-row")

    return built_once(tmp_path_factory, "bundle-per-row", build)[0] / "bundle"


@pytest.fixture(scope="session")
def tiny_debiased(tiny_model, tmp_path_factory) -> Path:
    """The tiny model with its language subspace removed (rank 1): the projection is not identity."""
    from edge_xsent.train.debias import debias_model

    def build(folder: Path) -> None:
        debias_model(tiny_model, "sample", folder / "m", rank=1, per_lang=200)

    return built_once(tmp_path_factory, "debiased", build)[0] / "m"


@pytest.fixture(scope="session")
def tiny_debiased_bundle(tiny_debiased, tmp_path_factory) -> Path:
    """The debiased tiny model exported with --int8 (no TorchScript)."""
    from edge_xsent.export.exporter import export_bundle

    def build(folder: Path) -> None:
        export_bundle(tiny_debiased, folder / "bundle", torchscript=False, parity_pairs=80)

    return built_once(tmp_path_factory, "debiased-bundle", build)[0] / "bundle"


@pytest.fixture(scope="session")
def student_file(tmp_path_factory):
    """e5-small's embeddings and block 0 under the students' names, in fp16 as the GPU run saved them."""
    from safetensors.numpy import save_file

    from edge_xsent.train.student import e5_as_student

    def build(folder: Path) -> None:
        save_file(e5_as_student(1), str(folder / "student-1block.safetensors"))

    return built_once(tmp_path_factory, "student-file", build)[0] / "student-1block.safetensors"


@pytest.fixture(scope="session")
def tiny_student_cut(student_file, tmp_path_factory) -> Path:
    """That student's folder with its table cut to 1,000 rows and an id map (every other piece reads its nearest:
    249,002 rows matched against the kept, the fixture's cost, a third of what 3,000 took)."""
    from edge_xsent.encode.bundle import save_model
    from edge_xsent.train.student import cut_table, load_student, table_rows_rule

    def build(root: Path) -> None:
        model, tok, record = load_student(student_file)
        save_model(root / "folder", cut_table(model, table_rows_rule(tok, 1000)), tok, [], {"student": record})

    return built_once(tmp_path_factory, "student-cut", build)[0] / "folder"


@pytest.fixture(scope="session")
def tiny_student_bundle(tiny_student_cut, tmp_path_factory) -> Path:
    """That cut student as it ships: the table of 1,000 rows at 4 bits and the id map, per-row int8 activations."""
    from edge_xsent.export.exporter import export_bundle

    def build(root: Path) -> None:
        export_bundle(tiny_student_cut, root / "bundle", torchscript=False, table_bits=4, int8_activations="per-row",
                      parity_pairs=80)

    return built_once(tmp_path_factory, "student-bundle", build)[0] / "bundle"


@pytest.fixture(scope="session")
def shipped_default() -> Path:
    """The default as it ships (`Encoder.load()`'s folder): the stacks' parity tests run it as users get it."""
    from edge_xsent.encode.encoder import DEFAULT_MODEL

    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def tiny_student_tiered(student_file, tmp_path_factory) -> Path:
    """That student with every piece kept (the tiered table): its first 3,000 ids at 4 bits, the rest at 1 bit."""
    from edge_xsent.train.student import build_folder

    def build(root: Path) -> None:
        build_folder(student_file, root / "bundle", max_bytes=10**9, rows=3000, table="tiered",
                     export={"parity_pairs": 80})

    return built_once(tmp_path_factory, "student-tiered", build)[0] / "bundle"
