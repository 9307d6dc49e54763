"""A plain (non-editable) install carries the default model: `Encoder.load()` works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The package's wheel, built once per run (pip wheel: 3-5 s) for every test that installs it."""
    from conftest import built_once

    def build(folder: Path) -> str:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", str(ROOT), "--no-deps", "--no-build-isolation",
                        "-w", str(folder)], check=True, capture_output=True, cwd=folder)
        return next(folder.glob("edge_xsent-*.whl")).name

    folder, name = built_once(tmp_path_factory, "wheel", build)
    return folder / name


@pytest.mark.slow
def test_wheel_ships_the_default_model(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import edge_xsent, sys; from edge_xsent import Encoder; "
            "assert edge_xsent.__file__.startswith(sys.argv[1]), edge_xsent.__file__; "
            "v = Encoder.load().encode(['Save the document', 'Enregistrer le document', 'The cat sleeps']); "
            "q = Encoder.load('quality').encode(['Save the document', 'Enregistrer le document', 'The cat sleeps']); "
            "print(round(float(v[0] @ v[1]), 4), round(float(v[0] @ v[2]), 4), "
            "round(float(q[0] @ q[1]), 4), round(float(q[0] @ q[2]), 4))")
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}  # any network use would fail
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr
    translation, unrelated, q_translation, q_unrelated = map(float, done.stdout.split())
    assert translation > unrelated + 0.2  # the shipped, trained model: a translation sits far closer
    assert q_translation > q_unrelated + 0.2  # and the quality model, by its name


def package_imports() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, at the top or inside a function, relative or absolute
    (a name imported from a package that is a module counts as that module)."""
    import ast

    pkg_root = ROOT / "edge_xsent"

    def name(p):
        return ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")

    modules = {name(p) for p in pkg_root.rglob("*.py")}
    graph = {}
    for p in pkg_root.rglob("*.py"):
        here = name(p) if p.name == "__init__.py" else name(p).rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("edge_xsent")):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                deps |= {t for t in (f"{target}.{a.name}" for a in node.names) if t in modules} or {target}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("edge_xsent")}
        graph[name(p)] = {d for d in deps if d in modules} - {name(p), "edge_xsent"}  # the root: __version__, a lazy Encoder
    return graph


def test_no_import_circle_in_the_package():
    """No module imports one that imports it back: the layout is declared in layout.py, which imports
    nothing from the package."""
    graph = package_imports()
    assert not graph["edge_xsent.layout"], "layout.py imports nothing from the package"

    def reaches(start, goal, seen):
        return any(d == goal or (d not in seen and not seen.add(d) and reaches(d, goal, seen)) for d in graph.get(start, ()))
    circles = [m for m in graph if reaches(m, m, set())]
    assert not circles, f"modules in an import circle: {circles}"
    assert "edge_xsent.train.loop" in graph["edge_xsent.train.bench"]  # the graph sees absolute imports too


@pytest.mark.slow
def test_a_bare_venv_installs_the_wheel_without_torch_and_encodes(wheel, tmp_path):
    """`pip install edge-xsent` is the encoder: its dependencies from PyPI, no torch, onnx or
    onnxscript; the shipped model encodes, `eval xsr` runs, and training says which extra it needs."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # ensurepip: 4 s of CPU
    py, cli = venv / "bin" / "python", venv / "bin" / "edge-xsent"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = [sys.executable, "-m", "pip", "--python", str(py), "--disable-pip-version-check"]  # this pip, that venv
    install = subprocess.run([*pip, "install", "-q", "--no-compile", str(wheel)], capture_output=True, text=True,
                             env=env)  # no-compile: the few modules the test imports compile as they load
    assert install.returncode == 0, install.stderr[-2000:]
    listed = subprocess.run([*pip, "list", "--format=freeze"], capture_output=True, text=True, env=env).stdout.lower()
    assert not {"torch", "onnx", "onnxscript"} & {line.split("==")[0] for line in listed.split()}, listed
    code = ("from edge_xsent import Encoder; "
            "v = Encoder.load().encode(['Save the document', 'Enregistrer le document', 'The cat sleeps']); "
            "print(round(float(v[0] @ v[1]), 4), round(float(v[0] @ v[2]), 4))")
    done = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    translation, unrelated = map(float, done.stdout.split())
    assert translation > unrelated + 0.2
    xsr = subprocess.run([str(cli), "eval", "xsr", "--max-pairs", "20", "--queries", "20"], capture_output=True,
                         text=True, cwd=tmp_path, env=env)
    assert xsr.returncode == 0 and "average" in xsr.stdout, xsr.stderr
    train = subprocess.run([str(cli), "train", "--config", str(ROOT / "train" / "tiny-cpu.toml"), "--out",
                            str(tmp_path / "run")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert train.returncode == 1 and "Traceback" not in train.stderr
    assert 'pip install "edge-xsent[train]"' in train.stderr


def test_shipped_files_name_no_machine_path():
    """Nothing the shipped folder says about itself records where it was made (no home folder, no
    site-packages path). The int8 graph of the default shipped on 2026-11-24 still carries torch's
    per-node stack traces (re-saving it would add 11 MB to git history): export strips them from
    every graph since (the test below), so the next default ships without."""
    from edge_xsent.encode.encoder import NAMED_MODELS

    leaks = [str(p) for folder in NAMED_MODELS.values() for p in folder.rglob("*") if p.is_file() and p.suffix != ".onnx"
             and any(mark in p.read_bytes() for mark in (b"/root/", b"/home/", b"site-packages"))]
    assert not leaks, leaks


def test_export_strips_the_exporters_stack_traces(tiny_bundle):
    import onnx

    for graph in sorted((tiny_bundle[0] / "onnx").glob("*.onnx")):
        keys = {p.key for node in onnx.load(str(graph)).graph.node for p in node.metadata_props}
        assert "pkg.torch.onnx.stack_trace" not in keys, graph.name
