"""Every file name and the format version of a model folder and of a bundle, declared once, and the one
answer to "float weights of its own, or derived from its int8 graph?" (float_weights).
The writers (bundle.save_model, hf.write_hf_files, export, encoder.calibrate_folder), the
loaders (bundle, encoder, hf), the benchmarks, shipping (train/ship.py) and the demo's
prepare.py all name files through this module. It imports nothing from the package.

    config.json             format name + version, EncoderConfig, languages, pooling, normalisation,
                            and the same encoder as transformers' BertConfig (edge_xsent/encode/hf.py)
    model.safetensors       the encoder's weights under BERT's names (never pickle: loading executes no code)
    edge_xsent.safetensors  what only edge-xsent reads: the generative head, the language basis
    tokenizer.model         SentencePiece model
    tokenizer.json          the same vocabulary and normaliser for `tokenizers`, transformers.js and the demo
    modules.json, sentence_bert_config.json, tokenizer_config.json, 1_Pooling/, 2_Dense/
                            sentence-transformers' description of the pipeline (hf.py)
    training.json           how it was trained (config, steps, losses, time, hardware)
    calibration.json        int8 ranges of the output vectors, for compact indexes (compact.py; optional)
    manifest.json           SHA-256 of every file above, checked at load
A bundle (`edge-xsent export`) adds the ONNX and TorchScript files, parity.json and README.md.
"""

FORMAT = "edge-xsent-model"
FORMAT_VERSION = 2
FILES = {
    "config": "config.json",
    "weights": "model.safetensors",
    "extra_weights": "edge_xsent.safetensors",
    "tokenizer": "tokenizer.model",
    "tokenizer_json": "tokenizer.json",
    "training": "training.json",
}
MANIFEST = "manifest.json"
CALIBRATION = "calibration.json"
# sentence-transformers' files (hf.py writes them)
ST_FILES = ("modules.json", "sentence_bert_config.json", "tokenizer_config.json", "1_Pooling/config.json")
TOKENIZER_CONFIG = "tokenizer_config.json"
DENSE_CONFIG, DENSE_WEIGHTS = "2_Dense/config.json", "2_Dense/model.safetensors"
# what `edge-xsent export` adds to make a bundle (export/exporter.py)
ONNX_FP32 = "onnx/model.onnx"
ONNX_INT8 = "onnx/model_int8.onnx"
ONNX_INT4 = "onnx/model_int4.onnx"
TS_FROZEN = "torchscript/model.pt"
TS_LITE = "torchscript/model.ptl"
PARITY = "parity.json"
CARD = "README.md"

# A training run's folder (edge_xsent/train/runfolder.py). The marker is the first file a run writes, and the one
# thing that makes a folder a run: a user's own log.jsonl or checkpoints/ never does.
RUN_MARKER = "edge-xsent-run.json"
RUN_FORMAT = "edge-xsent-run"
RUN_OWN = (RUN_MARKER, ".lock", "checkpoints", "log.jsonl", "summary.json", "tokenizer.model", "model")


def float_weights(folder) -> str | None:
    """Where a folder's float weights come from: "own" (model.safetensors), "derived" (none shipped: read
    back from the int8 graph, bundle.read_state, checked against it), or None (neither: no torch backend)."""
    from pathlib import Path

    folder = Path(folder)
    if (folder / FILES["weights"]).exists():
        return "own"
    return "derived" if (folder / ONNX_INT8).exists() else None
