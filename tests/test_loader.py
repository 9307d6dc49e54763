"""The loader reads a model folder once (issue 57): every file at most one time, whatever the
backend, with every listed file still checked. Python's audit hook sees each `open`; onnxruntime and
SentencePiece, which would open files in C++ where no hook sees them, must be handed bytes."""

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from edge_xsent import Encoder
from edge_xsent.encode.encoder import DEFAULT_MODEL
from edge_xsent.errors import UserError

_OPENS: list[str] | None = None


def _hook(event, args):
    if event == "open" and _OPENS is not None and isinstance(args[0], (str, bytes, Path)):
        _OPENS.append(str(args[0]))


sys.addaudithook(_hook)  # audit hooks cannot be removed: it records only while a test sets _OPENS


def opens_while(folder: Path, load) -> Counter:
    """How often each file of `folder` is opened while `load()` runs; onnxruntime must be given bytes."""
    global _OPENS
    import onnxruntime as ort

    real, given = ort.InferenceSession, []

    def session(source, *args, **kwargs):
        given.append(type(source))
        return real(source, *args, **kwargs)

    ort.InferenceSession, _OPENS = session, []
    try:
        load()
        opened = list(_OPENS)
    finally:
        ort.InferenceSession, _OPENS = real, None
    assert all(t is bytes for t in given), f"onnxruntime opened a graph itself: {given}"
    root = str(folder.resolve())
    return Counter(Path(p).resolve().relative_to(root).as_posix() for p in opened if str(Path(p).resolve()).startswith(root))


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_the_shipped_default_is_read_once(backend):
    counts = opens_while(DEFAULT_MODEL, lambda: Encoder.load(backend=backend).encode(["Save the document"]))
    assert counts and max(counts.values()) == 1, counts
    listed = {"config.json", "tokenizer.model", "onnx/model_int8.onnx", "manifest.json", "tokenizer.json"}
    assert listed <= set(counts), counts  # every file still checked, the card and tokenizer.json too


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_a_full_bundle_is_read_once(tiny_bundle, backend):
    bundle, _ = tiny_bundle
    counts = opens_while(bundle, lambda: Encoder.load(bundle, backend=backend, precision="fp32"))
    assert counts and max(counts.values()) == 1, counts
    assert "model.safetensors" in counts and "onnx/model.onnx" in counts


def test_a_file_changed_after_the_manifest_is_still_caught(tiny_bundle, tmp_path):
    import shutil

    bundle, _ = tiny_bundle
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    (copy / "tokenizer.json").write_text((copy / "tokenizer.json").read_text().replace("NFKC", "NFKD", 1))
    with pytest.raises(UserError, match="tokenizer.json: checksum mismatch"):
        Encoder.load(copy)  # a file no backend reads, checked after the others


def test_shipped_models_load_by_name_and_a_folder_of_that_name_wins(tmp_path, monkeypatch, tiny_bundle):
    import shutil

    from edge_xsent.encode.encoder import NAMED_MODELS, named_model

    assert set(NAMED_MODELS) == {"default", "fast", "quality"} and named_model("fast") == NAMED_MODELS["fast"]
    texts = ["Open the file.", "Ouvrir le fichier."]
    assert np.array_equal(Encoder.load("fast").encode(texts), Encoder.load(NAMED_MODELS["fast"]).encode(texts))
    assert named_model(DEFAULT_MODEL) is None and named_model("quick") is None
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_bundle[0], tmp_path / "fast")
    assert named_model("fast") is None
    assert Encoder.load("fast").path == Path("fast")
