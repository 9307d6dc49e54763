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
    """Each file the load reads is read and checked once; the files this stack never reads (tokenizer.json, 9.3 MB,
    the card) are not hashed at all (issue 105: a lean load)."""
    counts = opens_while(DEFAULT_MODEL, lambda: Encoder.load(backend=backend).encode(["Save the document"]))
    assert counts and max(counts.values()) == 1, counts
    assert {"config.json", "tokenizer.model", "tokenizer_rules.json", "onnx/model_int8.onnx", "manifest.json",
            "calibration.json"} == set(counts), counts


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_a_full_bundle_is_read_once(tiny_bundle, backend):
    bundle, _ = tiny_bundle
    counts = opens_while(bundle, lambda: Encoder.load(bundle, backend=backend, precision="fp32"))
    assert counts and max(counts.values()) == 1, counts
    weights = {"torch": {"model.safetensors", "edge_xsent.safetensors"}, "onnx": {"onnx/model.onnx"}}
    assert weights[backend] <= set(counts) and not (set().union(*weights.values()) - weights[backend]) & set(counts)
    assert "tokenizer.json" not in counts and "onnx/model_int8.onnx" not in counts  # read by other stacks, or none


def test_a_file_changed_after_the_manifest_is_caught_by_the_stack_that_reads_it(tiny_bundle, tmp_path):
    import shutil

    from edge_xsent.encode.bundle import verify

    bundle, _ = tiny_bundle
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    (copy / "tokenizer.json").write_text((copy / "tokenizer.json").read_text().replace("NFKC", "NFKD", 1))
    Encoder.load(copy)  # the Python stack never reads tokenizer.json: its vectors cannot change
    with pytest.raises(UserError, match="tokenizer.json: checksum mismatch"):
        verify(copy)  # every file, as export and shipping check a folder
    (copy / "tokenizer.model").write_bytes((copy / "tokenizer.model").read_bytes() + b"\0")
    with pytest.raises(UserError, match="tokenizer.model: checksum mismatch"):
        Encoder.load(copy)


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


@pytest.mark.parametrize("name", ["default", "fast", "quality"])
def test_each_shipped_config_names_the_normalisation_its_tokenizer_applies(name):
    """Issue 105: the default's config.json named NFKC, the fast model's normalisation, where the student reads
    text by e5's rules. The writer now says what the folder's tokenizer does."""
    import json

    from edge_xsent.encode.encoder import named_model

    enc = Encoder.load(name)
    said = json.loads((named_model(name) / "config.json").read_text())["normalization"]
    assert said == enc.tokenizer.normalization
    assert ("e5" in said and "NFKC" not in said) if enc.tokenizer.rules else said.startswith("NFKC")
